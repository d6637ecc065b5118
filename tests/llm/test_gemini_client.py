"""GeminiClient over Google's ``google-genai`` SDK, against the loopback recorder: what is sent, a Gemini 3 tool
loop sending each ``thought_signature`` back identical on its part, errors as tractkv errors, the SDK's
retries, and streaming (``generate_content_stream`` chunks joined into the non-streamed response: the same
commit; an interrupted stream commits nothing), sync and async."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from google import genai
from google.genai import types

from tractkv import Tract
from tractkv.aio import AsyncTract
from tractkv.engine.content import Message
from tractkv.errors import InvalidInput, LLMError, LLMHTTPError, MalformedResponse
from tractkv.llm import GeminiClient, StreamDelta

from .conftest import RETRY_NOW, Recorder, sse

MODEL = "gemini-3-pro-preview"
SIG_1 = b"\x12\x9a sig-one \x00\xff"
SIG_2 = b"\x07 sig-two"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    """What the SDK sent (url-safe base64, its padding perhaps left out) as bytes."""
    return base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_") + "=" * (-len(text) % 4))


def gemini_body(
    parts: list[dict[str, Any]], *, response_id: str = "resp_g1", finish: str = "STOP"
) -> dict[str, Any]:
    """A GenerateContentResponse as the REST API sends it (camelCase, bytes as base64)."""
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}],
        "usageMetadata": {
            "promptTokenCount": 120,
            "candidatesTokenCount": 30,
            "totalTokenCount": 190,
            "thoughtsTokenCount": 40,
        },
        "modelVersion": MODEL,
        "responseId": response_id,
    }


def call(name: str, signature: bytes | None = None, **args: Any) -> dict[str, Any]:
    part: dict[str, Any] = {"functionCall": {"name": name, "args": args}}
    if signature is not None:
        part["thoughtSignature"] = b64(signature)
    return part


def tool_reply() -> dict[str, Any]:
    """A thought, then two calls: the first signed (Gemini 3 signs the first call of a turn)."""
    thought = {"text": "Two cities: two calls, in parallel.", "thought": True}
    return gemini_body([thought, call("get_weather", SIG_1, city="Oslo"), call("get_weather", city="Bergen")])


def text_reply() -> dict[str, Any]:
    return gemini_body(
        [{"text": "Oslo: rain, Bergen: more rain.", "thoughtSignature": b64(SIG_2)}], response_id="resp_g2"
    )


def gemini_events(body: dict[str, Any], *, pieces: int = 3) -> list[bytes]:
    """The chunks ``streamGenerateContent?alt=sse`` sends for ``body``: each text part in ``pieces`` chunks (its
    signature on the last), each other part whole in a chunk of its own; the finish reason on the last."""
    candidate = body["candidates"][0]
    head = {k: body[k] for k in ("usageMetadata", "modelVersion", "responseId")}
    parts: list[dict[str, Any]] = []
    for part in candidate["content"]["parts"]:
        if "text" not in part:
            parts.append(part)
            continue
        text = part["text"]
        size = max(1, -(-len(text) // pieces))
        cut = [text[i : i + size] for i in range(0, len(text), size)]
        for n, piece in enumerate(cut):
            sent = {k: v for k, v in part.items() if k != "thoughtSignature" or n == len(cut) - 1}
            parts.append(sent | {"text": piece})
    out = []
    for n, part in enumerate(parts):
        chunk = {"content": {"role": "model", "parts": [part]}, "index": 0}
        if n == len(parts) - 1:
            chunk["finishReason"] = candidate["finishReason"]
        out.append(sse(None, head | {"candidates": [chunk]}))
    return out


def client_for(recorder: Recorder, *, attempts: int | None = None, **kwargs: Any) -> GeminiClient:
    options: dict[str, Any] = {"base_url": recorder.url}
    if attempts is not None:
        options["retry_options"] = {"attempts": attempts, "initial_delay": 0.01, "max_delay": 0.05}
    return GeminiClient(MODEL, api_key="g-key", http_options=options, **kwargs)


def weather_tract() -> Tract:
    t = Tract.open(clock=iter(range(1_700_000_000_000_000, 1_800_000_000_000_000, 1000)).__next__)
    t.system("Answer briefly.")
    t.user("Weather in Oslo and Bergen?", tools=[WEATHER])
    return t


def test_request_shape_auth_and_config(recorder: Recorder) -> None:
    recorder.reply(text_reply())
    t = weather_tract()
    info = t.generate(client_for(recorder), temperature=0.2, max_output_tokens=64)
    [request] = recorder.requests
    assert request.path.endswith(f"/models/{MODEL}:generateContent")  # /v1beta/ or /v1/, as the SDK has it
    assert request.headers["x-goog-api-key"] == "g-key"
    body = request.body
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Weather in Oslo and Bergen?"}]}]
    assert body["systemInstruction"]["parts"] == [{"text": "Answer briefly."}]
    [declaration] = body["tools"][0]["functionDeclarations"]
    assert declaration["name"] == "get_weather"
    schema = declaration.get(
        "parametersJsonSchema", declaration.get("parameters_json_schema")
    )  # as the SDK spells it
    assert schema == WEATHER["function"]["parameters"]
    assert body["generationConfig"] == {"temperature": 0.2, "maxOutputTokens": 64}
    assert info.content["text"] == "Oslo: rain, Bergen: more rain."
    assert info.generation_config == {
        "temperature": 0.2,
        "max_output_tokens": 64,
        "model": MODEL,
        "finish_reason": "STOP",
    }
    assert info.usage is not None
    assert (info.usage["input_tokens"], info.usage["output_tokens"]) == (
        120,
        70,
    )  # thoughts counted as output


def test_a_gemini3_tool_loop_sends_each_signature_back_identical_on_its_part(recorder: Recorder) -> None:
    from tractkv.toolkit import ToolExecutor, run

    recorder.reply(tool_reply())
    recorder.reply(text_reply())
    t = weather_tract()
    executor = ToolExecutor(t)

    @executor.register
    def get_weather(city: str, *, context: Any) -> str:
        """Weather for a city.

        Args:
            city: the city.
        """
        return f"{city}: rain"

    result = run(t, client_for(recorder), executor, max_steps=3)
    assert result.text == "Oslo: rain, Bergen: more rain."
    second = recorder.requests[1].body["contents"]
    model_turn = second[1]
    assert model_turn["role"] == "model"
    calls = [p for p in model_turn["parts"] if "functionCall" in p]
    assert [unb64(p["thoughtSignature"]) for p in calls[:1]] == [SIG_1]  # byte for byte
    assert "thoughtSignature" not in calls[1]
    assert all("id" not in p["functionCall"] for p in calls)  # made ids never go back to Gemini
    results = second[2]["parts"]
    assert [r["functionResponse"]["name"] for r in results] == ["get_weather", "get_weather"]  # one user turn


def test_errors_are_tractkv_errors_and_retries_the_sdks(recorder: Recorder) -> None:
    error = {
        "error": {
            "code": 400,
            "message": "Function call is missing a thought_signature",
            "status": "INVALID_ARGUMENT",
        }
    }
    recorder.reply(error, status=400)
    t = weather_tract()
    with pytest.raises(LLMHTTPError, match="missing a thought_signature") as info:
        t.generate(client_for(recorder))
    assert info.value.status == 400
    busy = {"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}}
    for _ in range(3):
        recorder.reply(busy, status=429, headers=RETRY_NOW)
    with pytest.raises(LLMHTTPError, match="Resource exhausted") as info:
        t.generate(client_for(recorder, attempts=3))
    assert info.value.status == 429
    assert len(recorder.requests) == 4  # the SDK's three attempts
    recorder.reply(busy, status=429, headers=RETRY_NOW)
    recorder.reply(text_reply())
    assert t.generate(client_for(recorder, attempts=3)).content["text"].startswith("Oslo")
    assert len(t.log()) == 3  # the system and user messages, the reply


@pytest.mark.parametrize(
    ("raw", "error", "match"),
    [
        (b"{not json", MalformedResponse, None),
        (json.dumps({"promptFeedback": {"blockReason": "SAFETY"}}).encode(), MalformedResponse, "blocked"),
        (json.dumps(gemini_body([{"functionCall": {"args": {}}}])).encode(), MalformedResponse, "name"),
    ],
)
def test_malformed_replies_write_nothing(
    recorder: Recorder, raw: bytes, error: type[Exception], match: str | None
) -> None:
    recorder.reply(raw=raw)
    t = weather_tract()
    with pytest.raises(error, match=match):
        t.generate(client_for(recorder))
    assert len(t.log()) == 2


def test_unreachable_bad_params_and_bad_settings() -> None:
    t = weather_tract()
    client = GeminiClient(MODEL, api_key="k", http_options={"base_url": "http://127.0.0.1:9"})
    with pytest.raises(LLMError, match="cannot reach"):
        t.generate(client)
    with pytest.raises(InvalidInput, match="GenerateContentConfig"):
        t.generate(client, not_a_config_field=1)
    with pytest.raises(InvalidInput, match="model must be"):
        GeminiClient("", api_key="k")
    with pytest.raises(InvalidInput, match="got a client and the keyword arguments"):
        GeminiClient(MODEL, genai.Client(api_key="k"), api_key="k")
    with pytest.raises(InvalidInput, match=r"not a google\.genai Client"):
        GeminiClient(MODEL, object())
    assert len(t.log()) == 2


def test_a_client_you_pass_is_used(recorder: Recorder) -> None:
    sdk = genai.Client(api_key="own-key", http_options=types.HttpOptions(base_url=recorder.url))
    recorder.reply(text_reply())
    client = GeminiClient(MODEL, sdk)
    assert client.client is sdk
    weather_tract().generate(client)
    assert recorder.requests[0].headers["x-goog-api-key"] == "own-key"


STREAMS: dict[str, Callable[[], dict[str, Any]]] = {"tool": tool_reply, "text": text_reply}


@pytest.mark.parametrize("reply", sorted(STREAMS))
def test_a_stream_commits_what_the_non_streamed_reply_commits(recorder: Recorder, reply: str) -> None:
    body = STREAMS[reply]()
    client = client_for(recorder)
    recorder.reply(body)
    want = weather_tract().generate(client)
    recorder.stream(gemini_events(body))
    t = weather_tract()
    stream = t.generate(client, stream=True)
    deltas = list(stream)
    assert stream.commit is not None
    assert stream.commit.commit_id == want.commit_id
    assert stream.commit.usage == want.usage
    assert stream.commit.generation_config == want.generation_config
    assert recorder.requests[1].path.endswith(f"/models/{MODEL}:streamGenerateContent?alt=sse")
    assert recorder.bodies[1] == recorder.bodies[0]
    assert stream.response is not None
    assert "".join(d.text for d in deltas if d.type in ("text", "thinking")) == "".join(
        p["text"] for p in body["candidates"][0]["content"]["parts"] if "text" in p
    )
    calls = [d for d in deltas if d.type == "tool_call"]
    assert [(d.index, d.name, json.loads(d.text)) for d in calls] == [
        (i, c.name, c.arguments) for i, c in enumerate(stream.response.tool_calls)
    ]
    assert len(deltas) >= 3  # it did arrive in pieces
    parts = t.compile(include_reasoning=True).messages[-1].parts
    signed = [p for p in parts if getattr(p, "thought_signature", None)]
    assert [p.thought_signature for p in signed] == [SIG_1 if reply == "tool" else SIG_2]


def test_interrupted_streams_commit_nothing(recorder: Recorder) -> None:
    client = client_for(recorder)
    events = gemini_events(text_reply(), pieces=4)
    t = weather_tract()
    head = t.head
    recorder.stream(events, pause=0.01)
    with t.generate(client, stream=True) as stream:  # the consumer stops
        for _ in stream:
            break
    assert stream.commit is None
    recorder.stream(events, drop_after=2)  # the connection drops
    with pytest.raises(LLMError, match="broke off"):
        list(t.generate(client, stream=True))
    unfinished = [
        *events[:-1],
        sse(
            None,
            json.loads(events[-1][6:])
            | {"candidates": [{"content": {"role": "model", "parts": [{"text": "."}]}}]},
        ),
    ]
    recorder.stream(unfinished)  # no finish reason: the reply never said it was complete
    with pytest.raises(LLMError, match="before the reply was complete"):
        list(t.generate(client, stream=True))
    assert t.head == head


def test_async_generate_and_stream_over_the_aio_client(recorder: Recorder) -> None:
    client = client_for(recorder)
    recorder.reply(tool_reply())
    want = weather_tract().generate(client)
    recorder.reply(tool_reply())
    recorder.stream(gemini_events(tool_reply()), pause=0.01)

    async def main() -> tuple[Any, Any, list[StreamDelta]]:
        at = AsyncTract(weather_tract())
        plain = await at.generate(client)
        streamed = AsyncTract(weather_tract())
        stream = await streamed.generate(client, stream=True)
        deltas = [d async for d in stream]
        await at.close()
        await streamed.close()
        return plain, stream.commit, deltas

    plain, streamed, deltas = asyncio.run(main())
    assert plain.commit_id == want.commit_id
    assert streamed.commit_id == want.commit_id
    assert [d.type for d in deltas].count("tool_call") == 2
    assert recorder.requests[1].headers.get("x-goog-api-client")  # the SDK's own request


def test_a_config_object_keeps_the_rendered_system_instruction_and_tools(recorder: Recorder) -> None:
    recorder.reply(text_reply())
    messages = [Message(role="system", content="Answer briefly."), Message(role="user", content="Hi")]
    client_for(recorder).chat(messages, [WEATHER], config=types.GenerateContentConfig(temperature=0.1))
    [request] = recorder.requests
    body = request.body
    assert body["systemInstruction"]["parts"] == [{"text": "Answer briefly."}]
    assert body["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"
    assert body["generationConfig"] == {"temperature": 0.1}


@pytest.mark.parametrize("finish", ["MAX_TOKENS", "SAFETY"])
def test_a_candidate_without_parts_is_refused_alike_streamed_or_not(recorder: Recorder, finish: str) -> None:
    candidate: dict[str, Any] = {"finishReason": finish, "index": 0}
    if finish == "MAX_TOKENS":
        candidate["content"] = {"role": "model"}  # thinking spent the budget
    body = {"candidates": [candidate], "usageMetadata": {"promptTokenCount": 5, "totalTokenCount": 5}}
    client = client_for(recorder)
    recorder.reply(body)
    t = weather_tract()
    head = t.head
    with pytest.raises(MalformedResponse, match=f"finish_reason {finish}"):
        t.generate(client)
    recorder.stream([sse(None, body)])
    with pytest.raises(MalformedResponse, match=f"finish_reason {finish}"):
        list(t.generate(client, stream=True))
    assert t.head == head


def test_streamed_function_call_arguments_are_refused_up_front(recorder: Recorder) -> None:
    calling = {"function_calling_config": {"mode": "AUTO", "stream_function_call_arguments": True}}
    client = client_for(recorder)
    messages = [Message(role="user", content="Hi")]
    with pytest.raises(InvalidInput, match="stream_function_call_arguments"):
        list(client.chat_stream(messages, [WEATHER], tool_config=calling))
    with pytest.raises(InvalidInput, match="stream_function_call_arguments"):
        client.chat(messages, [WEATHER], tool_config=calling)
    assert recorder.requests == []
