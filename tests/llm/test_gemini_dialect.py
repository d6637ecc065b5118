"""The Gemini dialect: a ``GenerateContentResponse`` recorded whole (thought signatures kept as bytes on their
parts, ids made for calls Gemini sent without one), and a context compiled to ``contents`` /
``system_instruction`` / ``tools`` that google-genai's own types accept and its client sends, each signature
going back on its part byte for byte (issue 31, item 2); and Gemini's OpenAI-compatible endpoint's
``extra_content`` kept on a ChatCompletion's tool call and sent back on it (item 3).

Requests are checked with google-genai's pydantic models (``extra="forbid"``: an unknown key anywhere is
refused) and sent through a real ``genai.Client`` to the loopback recorder, whose recorded body is read.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from google import genai
from google.genai import types

from tractkv import Tract
from tractkv.errors import ContentError, InvalidInput, InvalidResponse

from .conftest import Recorder

SIG_1 = b"\x12\x0a\xff\x00CiQB signature one \xfe\x80"  # not UTF-8: bytes must stay bytes
SIG_2 = bytes(range(256)) * 3
SIG_3 = b"final text signature"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "strict": True,
    },
}
MODEL = "gemini-3-pro-preview"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_") + "=" * (-len(text) % 4))


def gemini_body(
    parts: list[dict[str, Any]], *, response_id: str | None = "resp_g1", **usage: int
) -> dict[str, Any]:
    """A GenerateContentResponse as the REST API sends it (camelCase, bytes as base64)."""
    body: dict[str, Any] = {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0},
        ],
        "usageMetadata": {
            "promptTokenCount": 120,
            "candidatesTokenCount": 30,
            "totalTokenCount": 190,
            "thoughtsTokenCount": 40,
            "cachedContentTokenCount": 64,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 120}],
            **usage,
        },
        "modelVersion": MODEL,
    }
    if response_id is not None:
        body["responseId"] = response_id
    return body


def call(
    name: str, signature: bytes | None = None, call_id: str | None = None, **args: Any
) -> dict[str, Any]:
    part: dict[str, Any] = {"functionCall": {"name": name, "args": args}}
    if call_id is not None:
        part["functionCall"]["id"] = call_id
    if signature is not None:
        part["thoughtSignature"] = b64(signature)
    return part


def weather_tract() -> Tract:
    t = Tract.open()
    t.system("Answer briefly.")
    t.commit({"type": "dialogue", "role": "user", "text": "Weather in Oslo and Bergen?"}, tools=[WEATHER])
    return t


def check_params(params: dict[str, Any]) -> None:
    """``params`` is what google-genai's types accept, with no unknown key at any depth (``extra=forbid``)."""
    assert set(params) <= {"contents", "system_instruction", "tools"}
    for content in params["contents"]:
        types.Content.model_validate(content)
        assert content["role"] in ("user", "model")
    config = {k: v for k, v in params.items() if k != "contents"}
    types.GenerateContentConfig.model_validate(config)
    for tool in params.get("tools", []):
        types.Tool.model_validate(tool)


@pytest.fixture
def gemini_sdk(recorder: Recorder) -> Iterator[genai.Client]:
    client = genai.Client(api_key="test", http_options=types.HttpOptions(base_url=recorder.url))
    yield client
    client.close()


def send(client: genai.Client, params: dict[str, Any]) -> types.GenerateContentResponse:
    params = dict(params)
    return client.models.generate_content(model=MODEL, contents=params.pop("contents"), config=params)


# --- record_response ----------------------------------------------------------------------------------------


def _forms(body: dict[str, Any]) -> dict[str, Any]:
    sdk = types.GenerateContentResponse.model_validate(body)
    return {
        "rest": copy.deepcopy(body),
        "sdk": sdk,
        "dump": sdk.model_dump(),
        "json_dump": sdk.model_dump(mode="json"),
    }


@pytest.mark.parametrize("form", ["rest", "sdk", "dump", "json_dump"])
def test_record_response_keeps_thoughts_calls_and_signatures(form: str) -> None:
    body = gemini_body(
        [
            {"text": "Two cities: call twice.", "thought": True},
            call("get_weather", SIG_1, city="Oslo"),
            call("get_weather", city="Bergen"),
        ]
    )
    response = _forms(body)[form]
    t = weather_tract()
    info = t.record_response(response)
    ids = [c["id"] for c in info.content["tool_calls"]]
    assert ids[0].startswith("gm_")
    assert ids[0].endswith("_1")
    assert ids[1].endswith("_2")
    assert info.content["parts"] == [
        {"type": "gemini_thought", "text": "Two cities: call twice."},
        {"type": "gemini_call", "call_id": ids[0], "made_id": True, "thought_signature": SIG_1},
        {"type": "gemini_call", "call_id": ids[1], "made_id": True},
    ]
    assert info.content["tool_calls"] == [
        {"id": ids[0], "name": "get_weather", "arguments": {"city": "Oslo"}},
        {"id": ids[1], "name": "get_weather", "arguments": {"city": "Bergen"}},
    ]
    assert info.content["text"] == ""
    assert info.usage is not None
    assert (info.usage["input_tokens"], info.usage["output_tokens"]) == (120, 70)
    assert info.usage["cache_read_input_tokens"] == 64
    assert info.usage["reasoning_tokens"] == 40
    assert info.usage["prompt_tokens_details"] == [{"modality": "TEXT", "token_count": 120}]
    assert info.generation_config["model"] == MODEL
    assert info.generation_config["finish_reason"] == "STOP"


def test_every_form_stores_the_same_commit_content() -> None:
    body = gemini_body(
        [{"text": "Sunny.", "thoughtSignature": b64(SIG_3)}, {"text": "", "thoughtSignature": b64(SIG_2)}]
    )
    stored = []
    for response in _forms(body).values():
        t = weather_tract()
        stored.append(t.record_response(response).content)
    assert all(content == stored[0] for content in stored)
    assert stored[0]["parts"] == [
        {"type": "text", "text": "Sunny.", "thought_signature": SIG_3},
        {"type": "text", "text": "", "thought_signature": SIG_2},
    ]
    assert stored[0]["text"] == "Sunny."


def test_made_ids_are_deterministic_and_given_ids_are_kept() -> None:
    body = gemini_body([call("get_weather", city="Oslo")])
    first, again = weather_tract(), weather_tract()
    one = first.record_response(body).content["tool_calls"][0]["id"]
    assert again.record_response(copy.deepcopy(body)).content["tool_calls"][0]["id"] == one
    other = weather_tract().record_response({**body, "responseId": "resp_g2"}).content["tool_calls"][0]["id"]
    assert other != one
    no_id = gemini_body([call("get_weather", city="Oslo")], response_id=None)
    made = weather_tract().record_response(no_id).content["tool_calls"][0]["id"]
    assert made.startswith("gm_")
    assert made != one
    mixed = gemini_body(
        [{"executableCode": {"language": "PYTHON", "code": "1"}}, call("get_weather", SIG_1, city="Oslo")],
        response_id=None,
    )
    made_ids = {
        form: weather_tract().record_response(response).content["tool_calls"][0]["id"]
        for form, response in _forms(mixed).items()
    }
    assert len(set(made_ids.values())) == 1, made_ids  # every form of one response: the same id
    given = weather_tract().record_response(gemini_body([call("get_weather", call_id="fc-7", city="Oslo")]))
    assert given.content["parts"] == [{"type": "gemini_call", "call_id": "fc-7"}]
    assert given.content["tool_calls"][0]["id"] == "fc-7"


def test_other_parts_kept_verbatim_and_candidate_metadata_kept() -> None:
    code = {"executableCode": {"language": "PYTHON", "code": "print(1)"}}
    body = gemini_body(
        [code, {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}}, {"text": "1"}]
    )
    body["candidates"][0]["groundingMetadata"] = {"webSearchQueries": ["one"]}
    t = weather_tract()
    info = t.record_response(body)
    assert info.content["parts"][:2] == [
        {"type": "gemini_part", "part": {"executable_code": {"language": "PYTHON", "code": "print(1)"}}},
        {
            "type": "gemini_part",
            "part": {"code_execution_result": {"outcome": "OUTCOME_OK", "output": "1\n"}},
        },
    ]
    assert info.metadata is not None
    assert {
        "type": "gemini_field",
        "field": "grounding_metadata",
        "value": {"webSearchQueries": ["one"]},
    } in (info.metadata["omitted_blocks"])
    ctx = t.compile()
    assert ctx.to_gemini_params()["contents"][-1]["parts"][:2] == [
        {"executable_code": {"language": "PYTHON", "code": "print(1)"}},
        {"code_execution_result": {"outcome": "OUTCOME_OK", "output": "1\n"}},
    ]
    left = ctx.left_out("openai")
    assert [r.call_id for r in left] == ["gemini:executable_code", "gemini:code_execution_result"]
    assert all(r.kind == "dropped_item" and "has no openai form" in r.detail for r in left)
    assert ctx.left_out("gemini") == ()
    assert "print(1)" not in json.dumps(ctx.to_openai_params()) + json.dumps(ctx.to_anthropic_params())


@pytest.mark.parametrize(
    ("part", "reason"),
    [
        ({"text": "x", "thoughtSignature": "not base64 !!"}, r"parts\[0\]\.thought_signature is not base64"),
        ({"text": "x", "thoughtSignature": 12}, r"parts\[0\]\.thought_signature must be bytes or base64"),
        ({"functionCall": {"args": {}}}, r"parts\[0\]\.function_call has no string name"),
        ({"functionCall": {"name": "f", "args": [1]}}, r"parts\[0\]\.function_call\.args must be an object"),
        ({"text": 3}, r"parts\[0\]\.text must be a string"),
        ("text", r"parts\[0\] is not an object"),
    ],
)
def test_malformed_parts_refused_nothing_written(part: Any, reason: str) -> None:
    t = weather_tract()
    head = t.head
    with pytest.raises(InvalidResponse, match=reason):
        t.record_response(gemini_body([part]))
    assert t.head == head


def test_unknown_part_strict_and_not_strict() -> None:
    t = weather_tract()
    head = t.head
    body = gemini_body([{"futurePart": {"x": 1}}])
    with pytest.raises(InvalidResponse, match=r"candidates\[0\]\.content\.parts\[0\]: unknown part"):
        t.record_response(body, strict=True)
    assert t.head == head
    assert t.record_response(body).content["parts"] == [
        {"type": "gemini_part", "part": {"future_part": {"x": 1}}}
    ]


def test_blocked_and_empty_candidates_refused() -> None:
    t = weather_tract()
    with pytest.raises(InvalidResponse, match="blocked: SAFETY"):
        t.record_response(
            {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}}
        )
    with pytest.raises(InvalidResponse, match="no content \\(finish_reason SAFETY\\)"):
        t.record_response({"candidates": [{"finishReason": "SAFETY"}], "modelVersion": MODEL})
    with pytest.raises(InvalidResponse, match="candidates must be a list"):
        t.record_response({"candidates": 5, "usageMetadata": {"promptTokenCount": 3}})
    with pytest.raises(InvalidResponse, match="needs a 'parts' list"):
        t.record_response({"candidates": [{"content": "x"}]})
    with pytest.raises(InvalidResponse, match="prompt_token_count"):
        t.record_response(gemini_body([{"text": "x"}]) | {"usageMetadata": {"candidatesTokenCount": 1}})


# --- requests -----------------------------------------------------------------------------------------------


def test_params_shape_roles_parallel_results_and_tools() -> None:
    t = weather_tract()
    info = t.record_response(
        gemini_body([call("get_weather", SIG_1, city="Oslo"), call("get_weather", city="Bergen")])
    )
    first, second = (c["id"] for c in info.content["tool_calls"])
    t.tool_result(first, "get_weather", "rain")
    t.tool_result(second, "get_weather", "sun", is_error=True)
    params = t.compile().to_gemini_params()
    check_params(params)
    assert params["system_instruction"] == {"parts": [{"text": "Answer briefly."}]}
    assert params["tools"] == [
        {
            "function_declarations": [
                {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parameters_json_schema": WEATHER["function"]["parameters"],  # type: ignore[index]
                }
            ]
        }
    ]
    assert [c["role"] for c in params["contents"]] == ["user", "model", "user"]
    assert params["contents"][1]["parts"] == [
        {"function_call": {"name": "get_weather", "args": {"city": "Oslo"}}, "thought_signature": SIG_1},
        {"function_call": {"name": "get_weather", "args": {"city": "Bergen"}}},
    ]
    assert params["contents"][2]["parts"] == [  # parallel results: ONE user turn, no made id sent
        {"function_response": {"name": "get_weather", "response": {"output": "rain"}}},
        {"function_response": {"name": "get_weather", "response": {"error": "sun"}}},
    ]
    assert t.compile().to_gemini_contents() == params["contents"]


def test_media_and_foreign_calls() -> None:
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )
    pdf = b"%PDF-1.4\n1 0 obj<</Type/Page>>endobj\ntrailer<<>>\n%%EOF\n"
    t = Tract.open()
    t.user(
        [
            "Look:",
            {"type": "image", "data": png, "media_type": "image/png"},
            {"type": "image", "url": "https://e.x/a.png"},
        ]
    )
    t.commit(
        {
            "type": "dialogue",
            "role": "assistant",
            "name": "bot",
            "tool_calls": [{"id": "call_1", "name": "read", "arguments": {"path": "a.pdf"}}],
        }
    )
    t.tool_result(
        "call_1", "read", ["the file:", {"type": "document", "data": pdf, "media_type": "application/pdf"}]
    )
    t.user("Thanks")
    params = t.compile().to_gemini_params()
    check_params(params)
    user, model, results = params["contents"]
    assert user["parts"] == [
        {"text": "Look:"},
        {"inline_data": {"mime_type": "image/png", "data": png}},
        {"file_data": {"file_uri": "https://e.x/a.png"}},
    ]
    assert model == {
        "role": "model",
        "parts": [
            {"text": "bot:"},
            {"function_call": {"name": "read", "args": {"path": "a.pdf"}, "id": "call_1"}},
        ],
    }
    assert results["parts"] == [
        {"function_response": {"name": "read", "response": {"output": "the file:"}, "id": "call_1"}},
        {"text": "Attachments of the read result:"},
        {"inline_data": {"mime_type": "application/pdf", "data": pdf}},
        {"text": "Thanks"},
    ]
    assert "system_instruction" not in params
    assert "tools" not in params


def test_context_starting_with_a_model_turn_or_empty() -> None:
    t = Tract.open()
    assert t.compile().to_gemini_params()["contents"] == [
        {"role": "user", "parts": [{"text": "(conversation start)"}]}
    ]
    t.assistant("Hello.")
    t.system("Later rule.")
    contents = t.compile().to_gemini_params()["contents"]
    assert contents == [
        {"role": "user", "parts": [{"text": "(conversation start)"}]},
        {"role": "model", "parts": [{"text": "Hello."}]},
        {"role": "user", "parts": [{"text": "System: Later rule."}]},
    ]


def test_sdk_round_trip_of_a_gemini3_tool_loop_sends_each_signature_back_identical(
    recorder: Recorder, gemini_sdk: genai.Client
) -> None:
    """Done-when (issue 31): turn 1 a thought + a signed function_call, its result, turn 2 another signed call,
    its result, turn 3 signed text; every request carries each signature on its part, byte for byte."""
    recorder.reply(
        gemini_body([{"text": "Oslo first.", "thought": True}, call("get_weather", SIG_1, city="Oslo")])
    )
    recorder.reply(gemini_body([call("get_weather", SIG_2, city="Bergen")], response_id="resp_g2"))
    recorder.reply(
        gemini_body([{"text": "Rain, then sun.", "thoughtSignature": b64(SIG_3)}], response_id="resp_g3")
    )
    recorder.reply(gemini_body([{"text": "Bye."}], response_id="resp_g4"))
    t = weather_tract()
    for city, result in (("Oslo", "rain"), ("Bergen", "sun"), (None, None), (None, None)):
        params = t.compile().to_gemini_params()
        check_params(params)
        info = t.record_response(send(gemini_sdk, params))
        if city is not None:
            assert info.content["tool_calls"][0]["arguments"] == {"city": city}
            t.tool_result(info.content["tool_calls"][0]["id"], "get_weather", result)
        elif info.content["text"] == "Rain, then sun.":
            t.user("Thanks!")

    assert len(recorder.requests) == 4
    assert all(r.path.endswith(f"/models/{MODEL}:generateContent") for r in recorder.requests)
    last = recorder.requests[3].body
    roles = [c["role"] for c in last["contents"]]
    assert roles == ["user", "model", "user", "model", "user", "model", "user"]
    model_turns = [c["parts"] for c in last["contents"] if c["role"] == "model"]
    assert model_turns[0][0] == {"text": "Oslo first.", "thought": True}
    assert unb64(model_turns[0][1]["thoughtSignature"]) == SIG_1
    assert model_turns[0][1]["functionCall"] == {"name": "get_weather", "args": {"city": "Oslo"}}
    assert unb64(model_turns[1][0]["thoughtSignature"]) == SIG_2
    assert "id" not in model_turns[1][0]["functionCall"]  # a made id never goes to Gemini
    assert model_turns[2] == [
        {"text": "Rain, then sun.", "thoughtSignature": model_turns[2][0]["thoughtSignature"]}
    ]
    assert unb64(model_turns[2][0]["thoughtSignature"]) == SIG_3
    assert last["contents"][2]["parts"] == [
        {"functionResponse": {"name": "get_weather", "response": {"output": "rain"}}}
    ]
    assert last["systemInstruction"] == {"parts": [{"text": "Answer briefly."}]}
    second = recorder.requests[1].body[
        "contents"
    ]  # the turn right after the first call: signature already there
    assert unb64(second[1]["parts"][1]["thoughtSignature"]) == SIG_1


# --- stored payloads and the trust boundary -------------------------------------------------------------------


def test_validator_accepts_what_is_written_and_refuses_bad_parts() -> None:
    from tractkv.engine.history.validate import tag
    from tractkv.model import Blob

    t = weather_tract()
    info = t.record_response(
        gemini_body([{"text": "a", "thoughtSignature": b64(SIG_3)}, call("get_weather", SIG_1, city="x")])
    )
    assert tag(Blob(data=info.content)) == "dialogue"
    as_text = copy.deepcopy(info.content)
    as_text["parts"][1]["thought_signature"] = b64(SIG_1)  # base64 text where bytes belong
    assert "must be non-empty bytes" in tag(Blob(data=as_text))
    orphan = copy.deepcopy(info.content)
    orphan["parts"][1]["call_id"] = "other"
    assert "not one of the message's tool_calls" in tag(Blob(data=orphan))
    twice = copy.deepcopy(info.content)
    twice["parts"].append(copy.deepcopy(twice["parts"][1]))
    assert "placed twice" in tag(Blob(data=twice))
    user_sig = {
        "type": "dialogue",
        "role": "user",
        "text": "a",
        "parts": [{"type": "text", "text": "a", "thought_signature": SIG_1}],
    }
    assert "assistant message only" in tag(Blob(data=user_sig))
    with pytest.raises(ContentError, match=r"parts\[0\]\.part: text, function_call"):
        t.assistant([{"type": "gemini_part", "part": {"text": "x"}}])
    with pytest.raises(ContentError, match="made_id must be true"):
        t.assistant(
            [{"type": "gemini_call", "call_id": "c", "made_id": "yes"}],
            tool_calls=[{"id": "c", "name": "f", "arguments": {}}],
        )


def test_signatures_survive_a_push_and_compile_identically(tmp_path: Any) -> None:
    with Tract.open(str(tmp_path / "a"), durable=False) as a:
        a.user("Weather?")
        a.record_response(
            gemini_body(
                [
                    {"text": "Hm.", "thought": True, "thoughtSignature": b64(SIG_2)},
                    call("get_weather", SIG_1, city="Oslo"),
                ]
            )
        )
        a.remote_add("origin", str(tmp_path / "b"))
        Tract.open(str(tmp_path / "b"), durable=False).close()
        assert a.push().ok
        expected = a.compile().to_gemini_params()
    with Tract.open(str(tmp_path / "b"), durable=False, branch="main", readonly=True) as b:
        got = b.compile().to_gemini_params()
    assert got == expected
    assert got["contents"][1]["parts"][1]["thought_signature"] == SIG_1
    assert got["contents"][1]["parts"][0]["thought_signature"] == SIG_2


def test_editing_a_call_into_text_drops_its_gemini_call_part() -> None:
    t = weather_tract()
    info = t.record_response(
        gemini_body([{"text": "Think.", "thought": True}, call("get_weather", SIG_1, city="Oslo")])
    )
    edit = t.commit(
        {"type": "dialogue", "role": "assistant", "text": "No tool needed."}, "edit", info.commit_id
    )
    assert edit.content["parts"] == [
        {"type": "text", "text": "No tool needed."},
        {"type": "gemini_thought", "text": "Think."},
    ]
    check_params(t.compile().to_gemini_params())


def test_left_out_for_gemini_lists_builtin_items_and_redacted_thinking() -> None:
    t = weather_tract()
    t.record_response(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "redacted_thinking", "data": "EnCrYpTeD"}, {"type": "text", "text": "Hi"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    t.record_response(
        {
            "id": "resp_1",
            "object": "response",
            "status": "completed",
            "error": None,
            "model": "o4",
            "output": [{"type": "web_search_call", "id": "ws_1", "status": "completed"}],
        }
    )
    ctx = t.compile()
    assert [(r.kind, r.call_id) for r in ctx.left_out("gemini")] == [
        ("dropped_item", "redacted_thinking"),
        ("dropped_item", "ws_1"),
    ]
    params = ctx.to_gemini_params()
    check_params(params)
    assert "EnCrYpTeD" not in json.dumps(params, default=str)
    assert "ws_1" not in json.dumps(params, default=str)
    with pytest.raises(InvalidInput, match="'gemini'"):
        ctx.left_out("vertex")


def test_cli_compile_format_gemini_prints_signatures_as_base64(tmp_path: Any) -> None:
    from click.testing import CliRunner

    from tractkv.cli import cli

    path = str(tmp_path / "s")
    with Tract.open(path, durable=False) as t:
        t.user("Weather?")
        t.record_response(
            gemini_body([call("get_weather", SIG_1, city="Oslo"), {"executableCode": {"code": "1"}}])
        )
    result = CliRunner().invoke(cli, ["--store", path, "compile", "--format", "gemini"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert base64.b64decode(out["contents"][1]["parts"][0]["thought_signature"]) == SIG_1
    check_params(out)  # base64 text is what the SDK's types take for bytes too
    openai_run = CliRunner().invoke(cli, ["--store", path, "compile", "--format", "openai"])
    assert "left out: the Gemini part executable_code has no openai form" in openai_run.stderr


# --- Gemini's OpenAI-compatible endpoint: extra_content ---------------------------------------------------------


def compat_completion(calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-g",
        "object": "chat.completion",
        "created": 1,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": calls},
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def test_extra_content_kept_and_sent_back_on_its_call_only(
    recorder: Recorder, openai_sdk: openai.OpenAI
) -> None:
    extra = {"google": {"thought_signature": b64(SIG_1)}}
    recorder.reply(
        compat_completion(
            [
                {
                    "id": "function-call-1",
                    "type": "function",
                    "extra_content": extra,
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                },
                {
                    "id": "function-call-2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Bergen"}'},
                },
            ]
        )
    )
    recorder.reply(
        compat_completion([])
        | {
            "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
            ]
        }
    )
    t = weather_tract()
    completion = openai_sdk.chat.completions.create(model=MODEL, **t.compile().to_openai_params())
    info = t.record_response(completion)
    assert info.content["parts"] == [
        {"type": "gemini_call", "call_id": "function-call-1", "extra_content": extra}
    ]
    t.tool_result("function-call-1", "get_weather", "rain")
    t.tool_result("function-call-2", "get_weather", "sun")
    openai_sdk.chat.completions.create(model=MODEL, **t.compile().to_openai_params())
    sent = recorder.requests[1].body["messages"][2]["tool_calls"]
    assert sent[0]["extra_content"] == extra
    assert "extra_content" not in sent[1]
    assert all("extra_content" not in m for m in recorder.requests[0].body["messages"])
    native = t.compile().to_gemini_params()["contents"][1]["parts"]  # the same signature, natively
    assert native[0]["thought_signature"] == SIG_1
    assert "thought_signature" not in native[1]


def test_plain_openai_calls_send_no_extra_content() -> None:
    t = weather_tract()
    t.record_response(
        compat_completion(
            [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]
        )
    )
    t.tool_result("call_1", "get_weather", "x")
    messages = t.compile().to_openai_params()["messages"]
    assert "extra_content" not in json.dumps(messages)
    with pytest.raises(
        InvalidResponse, match=r"tool_calls\[0\] \(get_weather\) extra_content must be an object"
    ):
        t.record_response(
            compat_completion(
                [
                    {
                        "id": "c",
                        "type": "function",
                        "extra_content": "x",
                        "function": {"name": "get_weather", "arguments": "{}"},
                    }
                ]
            )
        )


def test_llm_response_from_gemini_and_from_provider() -> None:
    """The entry points a Gemini client builds on: ``LLMResponse.from_gemini`` and the shape dispatch."""
    from tractkv.engine.content import reply_provider
    from tractkv.errors import MalformedResponse
    from tractkv.llm.protocol import LLMResponse

    body = gemini_body([{"text": "Hi", "thoughtSignature": b64(SIG_3)}, {"futurePart": {}}])
    reply = LLMResponse.from_gemini(body)
    assert reply.parts[0] == {"type": "text", "text": "Hi", "thought_signature": SIG_3}
    assert (reply.text, reply.model, reply.finish_reason) == ("Hi", MODEL, "STOP")
    assert reply.assistant_payload()["parts"][0]["thought_signature"] == SIG_3
    with pytest.raises(MalformedResponse, match="unknown part"):
        LLMResponse.from_gemini(body, True)
    known = gemini_body([{"text": "Hi", "thoughtSignature": b64(SIG_3)}])
    assert (
        LLMResponse.from_provider(types.GenerateContentResponse.model_validate(known)).parts
        == reply.parts[:1]
    )
    assert reply_provider(body) == "gemini"
    assert reply_provider({"candidates": [], "object": "chat.completion"}) == "openai"
    two = copy.deepcopy(body)
    two["candidates"].append({"content": {"role": "model", "parts": [{"text": "Other"}]}, "index": 1})
    assert LLMResponse.from_provider(two, choice=1).text == "Other"
    with pytest.raises(InvalidResponse, match="no 2"):
        LLMResponse.from_provider(two, choice=2)
    with pytest.raises(InvalidInput, match="thought_signature is not bytes"):
        LLMResponse(text="x", parts=({"type": "text", "text": "x", "thought_signature": "c2ln"},))
