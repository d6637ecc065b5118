"""The OpenAI Responses dialect: a ``Response`` recorded whole, and a context compiled to ``input`` items the
SDK's own types accept, reasoning items sent back verbatim in their place (issue 31, item 1).

Requests are checked with pydantic over the SDK's TypedDicts: ``extra="forbid"`` at the top, and the
validated value compared with the input (pydantic drops unknown nested keys), so no key is unknown anywhere.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import openai
import pytest
from openai.types.responses import FunctionToolParam, Response, ResponseInputParam
from pydantic import ConfigDict, TypeAdapter

from tractkv import Tract
from tractkv.errors import ContentError, InvalidInput, InvalidResponse

from .conftest import Recorder

INPUT = TypeAdapter(ResponseInputParam, config=ConfigDict(extra="forbid"))
TOOL = TypeAdapter(list[FunctionToolParam], config=ConfigDict(extra="forbid"))

REASONING = {
    "type": "reasoning",
    "id": "rs_68af",
    "summary": [{"type": "summary_text", "text": "The user wants Oslo's weather: call the tool."}],
    "encrypted_content": "gAAAAABo+r3Xq/+enc==\n",
}
CALL = {
    "type": "function_call",
    "id": "fc_68af",
    "call_id": "call_Oslo",
    "name": "get_weather",
    "arguments": '{"city": "Oslo"}',
    "status": "completed",
}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": True,
}


def response_body(output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A Response body as the API sends it (``error`` null, as every real one)."""
    body = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1_700_000_000,
        "model": "o4-mini-2025-04-16",
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "metadata": {},
        "output": output,
        "usage": {
            "input_tokens": 120,
            "output_tokens": 48,
            "total_tokens": 168,
            "input_tokens_details": {"cached_tokens": 64, "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 32},
        },
    }
    body.update(extra)
    return body


def message_item(text: str, annotations: list[Any] | None = None) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": annotations or []}],
    }


def check_params(params: dict[str, Any]) -> None:
    """``params`` is what ResponseCreateParams takes, with no unknown key at any depth."""
    assert set(params) <= {"input", "instructions", "tools"}
    assert INPUT.dump_python(INPUT.validate_python(params["input"]), mode="json") == params["input"]
    for tool in params.get("tools", []):
        assert TOOL.dump_python(TOOL.validate_python([tool]), mode="json") == [tool]


def weather_tract() -> Tract:
    t = Tract.open()
    t.system("Answer briefly.")
    t.commit({"type": "dialogue", "role": "user", "text": "Weather in Oslo?"}, tools=[WEATHER])
    return t


@pytest.mark.parametrize("form", ["sdk", "dump", "dict"])
def test_record_response_keeps_reasoning_and_call_in_order(form: str) -> None:
    body = response_body([REASONING, CALL])
    response: Any = {
        "sdk": lambda: Response.model_validate(body),
        "dump": lambda: Response.model_validate(body).model_dump(),
        "dict": lambda: copy.deepcopy(body),
    }[form]()
    t = weather_tract()
    info = t.record_response(response)
    assert info.content["parts"] == [
        {"type": "responses_item", "item": REASONING},
        {"type": "responses_item", "item": CALL},
    ]
    assert info.content["tool_calls"] == [
        {"id": "call_Oslo", "name": "get_weather", "arguments": {"city": "Oslo"}}
    ]
    assert info.usage is not None
    assert (info.usage["input_tokens"], info.usage["output_tokens"]) == (120, 48)
    assert (info.usage["cache_read_input_tokens"], info.usage["reasoning_tokens"]) == (64, 32)
    assert info.generation_config == {"model": "o4-mini-2025-04-16", "finish_reason": "completed"}


def test_message_text_refusal_annotations_and_builtin_items() -> None:
    search = {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    }
    annotation = {
        "type": "url_citation",
        "url": "https://e.x",
        "title": "E",
        "start_index": 0,
        "end_index": 2,
    }
    refusal = {
        "type": "message",
        "id": "msg_2",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "I can't."}],
    }
    t = weather_tract()
    info = t.record_response(response_body([search, message_item("It is 18°C.", [annotation]), refusal]))
    assert info.content["text"] == "It is 18°C."
    assert [p["type"] for p in info.content["parts"]] == ["responses_item", "text", "refusal"]
    assert info.metadata["omitted_blocks"] == [
        {"type": "openai_field", "field": "annotations", "value": [annotation]}
    ]
    params = t.compile().to_responses_params()
    check_params(params)
    assert params["input"][1:] == [search, {"role": "assistant", "content": "It is 18°C.I can't."}]
    # the other dialects leave the built-in item out, with a repair naming it
    ctx = t.compile()
    assert "web_search_call" not in json.dumps(ctx.to_openai_params())
    assert "web_search_call" not in json.dumps(ctx.to_anthropic_params())
    for dialect in ("openai", "anthropic"):
        [repair] = ctx.left_out(dialect)
        assert (repair.kind, repair.call_id, repair.commit_id) == ("dropped_item", "ws_1", info.commit_id)
    assert ctx.left_out("responses") == ()
    assert ctx.repairs == ()


def test_arguments_not_json_kept_exactly_for_responses() -> None:
    call = dict(CALL, arguments='{"city": "Oslo"')  # cut short: not valid JSON
    t = weather_tract()
    info = t.record_response(response_body([REASONING, call]))
    assert info.content["tool_calls"][0]["arguments"] == {}
    t.tool_result("call_Oslo", "get_weather", "18°C")
    items = t.compile().to_responses_params()["input"]
    assert items[2]["arguments"] == '{"city": "Oslo"'


def test_compiles_to_every_dialect_without_leaking_reasoning() -> None:
    t = weather_tract()
    t.record_response(response_body([REASONING, CALL]))
    t.tool_result("call_Oslo", "get_weather", "18°C, clear")
    t.record_response(response_body([message_item("18°C and clear.")]))
    ctx = t.compile()
    params = ctx.to_responses_params()
    check_params(params)
    assert params["instructions"] == "Answer briefly."
    assert params["tools"] == [WEATHER]
    assert params["input"] == [
        {"role": "user", "content": "Weather in Oslo?"},
        REASONING,
        CALL,
        {"type": "function_call_output", "call_id": "call_Oslo", "output": "18°C, clear"},
        {"role": "assistant", "content": "18°C and clear."},
    ]
    assert ctx.to_responses_input()[0] == {"role": "system", "content": "Answer briefly."}
    for other in (ctx.to_openai_params(), ctx.to_anthropic_params()):
        text = json.dumps(other)
        assert "rs_68af" not in text
        assert "encrypted" not in text
        assert "call_Oslo" in text


def test_media_and_function_call_inputs() -> None:
    t = Tract.open()
    t.user(
        [
            "Look:",
            {"type": "image", "url": "https://e.x/a.png"},
            {"type": "document", "url": "https://e.x/a.pdf"},
        ]
    )
    t.assistant(tool_calls=[CALL])
    t.tool_result("call_Oslo", "get_weather", "sunny")
    items = t.compile().to_responses_params()["input"]
    check_params({"input": items})
    assert items[0]["content"] == [
        {"type": "input_text", "text": "Look:"},
        {"type": "input_image", "image_url": "https://e.x/a.png", "detail": "auto"},
        {"type": "input_file", "file_url": "https://e.x/a.pdf"},
    ]
    assert items[1] == {
        "type": "function_call",
        "call_id": "call_Oslo",
        "name": "get_weather",
        "arguments": '{"city": "Oslo"}',
    }


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        (
            {k: v for k, v in CALL.items() if k != "call_id"},
            r"output\[0\] \(function_call\) has no string call_id",
        ),
        ({k: v for k, v in REASONING.items() if k != "id"}, r"output\[0\] \(reasoning\) has no id"),
        ({"id": "x"}, r"output\[0\] is not an output item"),
    ],
)
def test_malformed_items_refused_nothing_written(item: dict[str, Any], reason: str) -> None:
    t = weather_tract()
    head = t.head
    with pytest.raises(InvalidResponse, match=reason):
        t.record_response(response_body([item]))
    assert t.head == head


def test_bad_items_in_parts_and_calls_refused() -> None:
    t = weather_tract()
    with pytest.raises(ContentError, match="reasoning item needs its string id"):
        t.assistant([{"type": "responses_item", "item": {"type": "reasoning", "summary": []}}])
    with pytest.raises(ContentError, match="not one of the message's tool_calls"):
        t.assistant([{"type": "responses_item", "item": CALL}])
    with pytest.raises(ContentError, match="function_call item needs a non-empty string call_id"):
        t.assistant(tool_calls=[{k: v for k, v in CALL.items() if k != "call_id"}])


def test_unknown_item_type_strict() -> None:
    from tractkv.errors import MalformedResponse
    from tractkv.llm import LLMResponse

    body = response_body([{"type": "future_call", "id": "x"}])
    assert LLMResponse.from_responses(body).parts[0]["item"] == {"type": "future_call", "id": "x"}
    with pytest.raises(MalformedResponse, match=r"output\[0\] \(future_call\): unknown output item type"):
        LLMResponse.from_responses(body, strict=True)
    t = weather_tract()
    head = t.head
    with pytest.raises(InvalidResponse, match="unknown output item type 'future_call'"):
        t.record_response(body, strict=True)
    assert t.head == head
    assert t.record_response(body).content["parts"] == [
        {"type": "responses_item", "item": {"type": "future_call", "id": "x"}}
    ]


def test_loopback_round_trip_sends_reasoning_back_identical(
    recorder: Recorder, openai_sdk: openai.OpenAI
) -> None:
    """A Responses turn with reasoning + function_call, then its output: the second request carries the
    reasoning item exactly as the server sent it, ahead of its function_call."""
    first = response_body([REASONING, CALL])
    recorder.reply(first)
    recorder.reply(response_body([message_item("18°C, clear.")]))
    t = weather_tract()
    response = openai_sdk.responses.create(model="o4-mini", store=False, **t.compile().to_responses_params())
    t.record_response(response)
    t.tool_result("call_Oslo", "get_weather", "18°C, clear")
    openai_sdk.responses.create(model="o4-mini", store=False, **t.compile().to_responses_params())

    sent = recorder.requests[1].body["input"]
    assert [item.get("type", item.get("role")) for item in sent] == [
        "user",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert json.dumps(sent[1], sort_keys=True) == json.dumps(first["output"][0], sort_keys=True)
    assert sent[1]["encrypted_content"] == REASONING["encrypted_content"]
    assert sent[2] == CALL
    assert recorder.requests[1].body["tools"] == [WEATHER]


def test_validator_accepts_what_is_written_and_refuses_bad_items() -> None:
    from tractkv.engine.history.validate import tag
    from tractkv.model import Blob

    t = weather_tract()
    info = t.record_response(response_body([REASONING, CALL]))
    assert tag(Blob(data=info.content)) == "dialogue"
    bad = copy.deepcopy(info.content)
    del bad["parts"][0]["item"]["id"]
    assert tag(Blob(data=bad)).startswith("invalid:")
    orphan = copy.deepcopy(info.content)
    orphan["tool_calls"][0]["id"] = "call_other"
    assert "not one of the message's tool_calls" in tag(Blob(data=orphan))


def test_tool_result_takes_a_function_call_output_item() -> None:
    from openai.types.responses.response_input_item_param import FunctionCallOutput

    t = weather_tract()
    t.assistant(tool_calls=[CALL])
    item: FunctionCallOutput = {"type": "function_call_output", "call_id": "call_Oslo", "output": "18°C"}
    info = t.tool_result(item)
    assert info is not None
    assert info.content["tool_call_id"] == "call_Oslo"
    assert info.content["text"] == "18°C"
    assert info.content["name"] == "get_weather"
    items = t.compile().to_responses_params()["input"]
    assert items[2] == {"type": "function_call_output", "call_id": "call_Oslo", "output": "18°C"}


def test_tool_result_item_with_parts_and_bad_items() -> None:
    t = weather_tract()
    t.assistant(tool_calls=[CALL])
    output = [
        {"type": "input_text", "text": "chart:"},
        {"type": "input_image", "image_url": "https://e.x/c.png", "detail": "low"},
    ]
    info = t.tool_result({"type": "function_call_output", "call_id": "call_Oslo", "output": output})
    assert info is not None
    assert [p["type"] for p in info.content["parts"]] == ["text", "image"]
    items = t.compile().to_responses_params()["input"]
    check_params({"input": items})
    assert items[2]["output"] == [
        {"type": "input_text", "text": "chart:"},
        {"type": "input_image", "image_url": "https://e.x/c.png", "detail": "low"},
    ]
    with pytest.raises(InvalidInput, match="call_id must be a non-empty string"):
        t.tool_result({"type": "function_call_output", "output": "x"})
    with pytest.raises(InvalidInput, match=r"output\[0\] must be input_text"):
        t.tool_result({"type": "function_call_output", "call_id": "call_Oslo", "output": [{"type": "x"}]})
    with pytest.raises(InvalidInput, match="pass no content"):
        t.tool_result({"type": "function_call_output", "call_id": "c", "output": "x"}, None, "y")
    with pytest.raises(InvalidInput, match="needs the result's content"):
        t.tool_result("call_Oslo", "get_weather")


def test_editing_a_call_into_text_keeps_reasoning_first_and_drops_the_call_item() -> None:
    t = weather_tract()
    info = t.record_response(response_body([REASONING, CALL]))
    edit = t.commit(
        {"type": "dialogue", "role": "assistant", "text": "No tool needed."}, "edit", info.commit_id
    )
    assert edit.content["parts"] == [
        {"type": "responses_item", "item": REASONING},
        {"type": "text", "text": "No tool needed."},
    ]
    params = t.compile().to_responses_params()
    check_params(params)
    assert params["input"][1:] == [REASONING, {"role": "assistant", "content": "No tool needed."}]


def _openai_rules(messages: list[dict[str, Any]]) -> None:
    """Chat Completions: the SDK's message types, and each assistant's tool calls answered by the tool
    messages right after it, one per id."""
    from openai.types.chat import ChatCompletionMessageParam

    TypeAdapter(list[ChatCompletionMessageParam]).validate_python(messages)
    for index, message in enumerate(messages):
        ids = [c["id"] for c in message.get("tool_calls") or []]
        answers = [m.get("tool_call_id") for m in messages[index + 1 : index + 1 + len(ids)]]
        assert sorted(answers) == sorted(ids), (index, ids, answers)


def _anthropic_rules(params: dict[str, Any]) -> None:
    """Messages: the SDK's types, roles alternating from user, each tool_use answered first in the next turn."""
    from anthropic.types import MessageParam

    TypeAdapter(list[MessageParam]).validate_python(params["messages"])
    turns = params["messages"]
    assert [m["role"] for m in turns] == ["user", "assistant"] * (len(turns) // 2) + ["user"] * (
        len(turns) % 2
    )
    for turn, after in zip(turns, [*turns[1:], None], strict=True):
        uses = [b["id"] for b in turn["content"] if isinstance(b, dict) and b["type"] == "tool_use"]
        if uses:
            assert after is not None
            results = [b["tool_use_id"] for b in after["content"][: len(uses)]]
            assert sorted(results) == sorted(uses)


def _gemini_rules(params: dict[str, Any]) -> None:
    """Gemini: google-genai's types (extra=forbid), user first, roles alternating, each model turn's function
    calls answered by as many function responses of the same names, in order, in the next (user) turn."""
    from google.genai import types

    types.GenerateContentConfig.model_validate({k: v for k, v in params.items() if k != "contents"})
    turns = params["contents"]
    for turn in turns:
        types.Content.model_validate(turn)
    assert [c["role"] for c in turns] == ["user", "model"] * (len(turns) // 2) + ["user"] * (len(turns) % 2)
    for turn, after in zip(turns, [*turns[1:], None], strict=True):
        calls = [p["function_call"]["name"] for p in turn["parts"] if "function_call" in p]
        if calls:
            assert after is not None
            answers = [p["function_response"]["name"] for p in after["parts"] if "function_response" in p]
            assert answers == calls


def test_mixed_branch_anthropic_then_responses_then_gemini_compiles_for_every_dialect() -> None:
    """Anthropic turns (thinking + tool_use), then Responses turns (reasoning + function_call), then Gemini
    turns (a thought + two calls, one signed, then signed text): every dialect gets a valid request holding
    only what it takes (issue 31's done-when)."""
    t = weather_tract()
    t.record_response(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [
                {"type": "thinking", "thinking": "Call the tool.", "signature": "EqQBsig=="},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Bergen"}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )
    t.tool_result("toolu_1", "get_weather", "rain")
    t.user("And Oslo?")
    t.record_response(response_body([REASONING, CALL]))
    t.tool_result({"type": "function_call_output", "call_id": "call_Oslo", "output": "18°C"})
    t.user("And Tromsø and Bodø?")
    gemini = {
        "candidates": [
            {
                "finishReason": "STOP",
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "Two more cities.", "thought": True},
                        {
                            "functionCall": {"name": "get_weather", "args": {"city": "Tromsø"}},
                            "thoughtSignature": "R2VtaW5pU2lnMQ==",
                        },
                        {"functionCall": {"name": "get_weather", "args": {"city": "Bodø"}}},
                    ],
                },
            }
        ],
        "usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": 9},
        "modelVersion": "gemini-3-pro-preview",
        "responseId": "g1",
    }
    calls = t.record_response(gemini).content["tool_calls"]
    t.tool_result(calls[0]["id"], "get_weather", "snow")
    t.tool_result(calls[1]["id"], "get_weather", "wind")
    t.record_response(
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [{"text": "Cold up north.", "thoughtSignature": "R2VtaW5pU2lnMg=="}],
                    }
                }
            ],
            "responseId": "g2",
        }
    )
    ctx = t.compile()
    params = ctx.to_responses_params()
    check_params(params)
    kinds = [item.get("type", item.get("role")) for item in params["input"]]
    assert kinds == [
        "user",
        "function_call",
        "function_call_output",
        "user",
        "reasoning",
        "function_call",
        "function_call_output",
        "user",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "assistant",
    ]
    assert "EqQBsig" not in json.dumps(params)
    anthropic = ctx.to_anthropic_params()
    _anthropic_rules(anthropic)
    assert "EqQBsig" in json.dumps(anthropic)
    assert "rs_68af" not in json.dumps(anthropic)
    openai_params = ctx.to_openai_params()
    _openai_rules(openai_params["messages"])
    assert "rs_68af" not in json.dumps(openai_params)
    gemini_params = ctx.to_gemini_params()
    _gemini_rules(gemini_params)
    model_turns = [c["parts"] for c in gemini_params["contents"] if c["role"] == "model"]
    assert model_turns[0] == [
        {"function_call": {"name": "get_weather", "args": {"city": "Bergen"}, "id": "toolu_1"}}
    ]
    assert model_turns[1] == [
        {"function_call": {"name": "get_weather", "args": {"city": "Oslo"}, "id": "call_Oslo"}}
    ]
    assert model_turns[2][1]["thought_signature"] == b"GeminiSig1"
    assert model_turns[3] == [{"text": "Cold up north.", "thought_signature": b"GeminiSig2"}]
    rendered = json.dumps([openai_params, anthropic, params], default=str)
    assert "GeminiSig" not in rendered
    assert "Two more cities" not in rendered  # a thought is Gemini's reasoning: left out elsewhere
    assert "EqQBsig" not in json.dumps(gemini_params, default=str)
    assert all(ctx.left_out(d) == () for d in ("openai", "responses", "anthropic", "gemini"))
