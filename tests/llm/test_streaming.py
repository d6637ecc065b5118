"""generate(stream=True): deltas as they arrive, one commit at the end identical to the non-streamed one.

Every stream is a real chunked ``text/event-stream`` reply from the loopback recorder, built from the same
recorded body the non-streamed call gets (``openai_events`` / ``responses_events`` / ``anthropic_events``),
read by the official SDK each client wraps: Chat Completions chunks, Responses events and Anthropic message
events.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import openai
import pytest

from tractkv import Tract
from tractkv.errors import (
    ContentError,
    InvalidInput,
    LLMError,
    LLMHTTPError,
    MalformedResponse,
    ModelCallFailed,
)
from tractkv.llm import AnthropicClient, OpenAIClient, ScriptedLLM
from tractkv.llm.folders import ChatChunkFolder
from tractkv.llm.streaming import AsyncChatStream, ChatStream, StreamDelta

from .conftest import (
    RETRY_NOW,
    Recorder,
    anthropic_events,
    anthropic_message,
    openai_completion,
    openai_events,
    output_message,
    response_body,
    responses_events,
    sse,
)

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def openai_reply() -> dict[str, Any]:
    """Text and two tool calls, usage with OpenAI's detail counts."""
    body = openai_completion(
        "Checking both cities.",
        [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Rome, Italy"}'},
            },
        ],
        model="gpt-test",
    )
    message = body["choices"][0]["message"]  # reasoning (a part) and annotations (kept in the metadata)
    message["reasoning_content"] = "Two cities, two calls."
    message["annotations"] = [{"type": "url_citation", "url_citation": {"url": "https://example.com"}}]
    body["usage"] = {
        "prompt_tokens": 31,
        "completion_tokens": 12,
        "total_tokens": 43,
        "prompt_tokens_details": {"cached_tokens": 8},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    return body


def anthropic_reply() -> dict[str, Any]:
    """Thinking (signed), a server tool call and its result, text with a citation, a tool call."""
    body = anthropic_message(
        [
            {"type": "thinking", "thinking": "The user wants Paris weather.", "signature": "sig-123"},
            {
                "type": "server_tool_use",
                "id": "srv_1",
                "name": "web_search",
                "input": {"query": "paris weather"},
            },
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srv_1",
                "content": [{"type": "web_search_result", "url": "https://example.com", "title": "Wx"}],
            },
            {
                "type": "text",
                "text": "It is sunny, says the web.",
                "citations": [{"type": "web_search_result_location", "url": "https://example.com"}],
            },
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
        ],
        model="claude-test",
    )
    body["usage"] = {
        "input_tokens": 40,
        "output_tokens": 25,
        "cache_read_input_tokens": 5,
        "cache_creation_input_tokens": 0,
    }
    return body


def responses_reply() -> dict[str, Any]:
    """Reasoning (summary and encrypted content), text with an annotation, two function calls, a built-in
    web search item; usage with cached and reasoning tokens."""
    text = output_message("Checking both cities.")
    text["content"][0]["annotations"] = [
        {
            "type": "url_citation",
            "url": "https://example.com",
            "title": "Wx",
            "start_index": 0,
            "end_index": 8,
        }
    ]
    output = [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Two cities, two calls."}],
            "encrypted_content": "gAAAA==",
        },
        {
            "type": "web_search_call",
            "id": "ws_1",
            "status": "completed",
            "action": {"type": "search", "query": "paris"},
        },
        text,
        {
            "type": "function_call",
            "id": "fc_a",
            "call_id": "call_a",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
            "status": "completed",
        },
        {
            "type": "function_call",
            "id": "fc_b",
            "call_id": "call_b",
            "name": "get_weather",
            "arguments": '{"city": "Rome, Italy"}',
            "status": "completed",
        },
    ]
    body = response_body(output, model="gpt-test")
    body["usage"] = {
        "input_tokens": 31,
        "output_tokens": 12,
        "total_tokens": 43,
        "input_tokens_details": {"cached_tokens": 8},
        "output_tokens_details": {"reasoning_tokens": 5},
    }
    return body


PROVIDERS: dict[str, tuple[Callable[[Recorder], Any], Callable[[], dict[str, Any]], Any]] = {
    "chat": (
        lambda r: OpenAIClient("gpt-test", api="chat", base_url=f"{r.url}/v1", api_key="k", max_retries=0),
        openai_reply,
        openai_events,
    ),
    "responses": (
        lambda r: OpenAIClient("gpt-test", base_url=f"{r.url}/v1", api_key="k", max_retries=0),
        responses_reply,
        responses_events,
    ),
    "anthropic": (
        lambda r: AnthropicClient("claude-test", base_url=r.url, api_key="k", max_retries=0),
        anthropic_reply,
        anthropic_events,
    ),
}


def ticking_clock() -> Callable[[], int]:
    now = iter(range(1_700_000_000_000_000, 1_800_000_000_000_000, 1000))
    return lambda: next(now)


def fresh(clock: Callable[[], int] | None = None) -> Tract:
    t = Tract.open(clock=clock or ticking_clock())
    t.system("Be brief.")
    t.user("Weather in Paris?", tools=[WEATHER])
    return t


@pytest.fixture(params=sorted(PROVIDERS))
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_stream_commits_what_the_non_streamed_reply_commits(recorder: Recorder, provider: str) -> None:
    make, reply, events = PROVIDERS[provider]
    client = make(recorder)
    recorder.reply(reply())
    plain = fresh()
    want = plain.generate(client, temperature=0.5)

    recorder.stream(events(reply()))
    streamed = fresh()
    stream = streamed.generate(client, stream=True, temperature=0.5)
    assert len(streamed.log()) == 2
    assert recorder.requests[1:] == []
    deltas = list(stream)
    got = stream.commit

    assert got is not None
    assert got.commit_id == want.commit_id
    assert streamed.head == plain.head
    assert streamed.compile().messages == plain.compile().messages
    assert got.usage == want.usage
    assert got.usage is not None
    assert got.generation_config == want.generation_config
    assert got.metadata == want.metadata  # omitted blocks (server tools, citations, extra fields) too
    if provider == "anthropic":  # server tool blocks and citations are parts, streamed or not
        kinds = [p["type"] for p in want.content["parts"]]
        assert kinds.count("anthropic_block") == 2
        assert any("citations" in p for p in want.content["parts"])
    else:
        assert len(want.metadata["omitted_blocks"]) >= 1  # chat: reasoning_content is a part now
    if provider == "chat":  # reasoning_content is a reasoning part, streamed or not
        assert want.content["parts"][0] == {"type": "reasoning", "reasoning": "Two cities, two calls."}
    assert stream.response is not None
    assert stream.response.tool_calls
    # the deltas add up to the reply
    text = "".join(d.text for d in deltas if d.type == "text")
    assert text == stream.response.text
    calls: dict[int, list[StreamDelta]] = {}
    for d in deltas:
        if d.type == "tool_call":
            calls.setdefault(d.index, []).append(d)
    assert [(c[0].id, c[0].name, json.loads("".join(d.text for d in c))) for c in calls.values()] == [
        (call.id, call.name, call.arguments) for call in stream.response.tool_calls
    ]
    assert all(c[0].id and all(d.id is None for d in c[1:]) for c in calls.values())
    assert len(deltas) > 6  # it did arrive in pieces
    sent = recorder.bodies[1]
    assert sent["stream"] is True
    assert sent["temperature"] == 0.5
    if provider == "chat":
        assert sent["stream_options"] == {"include_usage": True}
    assert {k: v for k, v in sent.items() if not k.startswith("stream")} == recorder.bodies[0]
    if provider == "responses":  # the reasoning item, kept whole in its place, as the non-streamed reply's
        parts = streamed.compile(include_reasoning=True).messages[-1].parts
        assert [p.type for p in parts][:2] == ["responses_item", "responses_item"]


def test_responses_deltas_in_order_and_the_final_response_is_recorded(recorder: Recorder) -> None:
    recorder.stream(responses_events(responses_reply(), pieces=2))
    t = fresh()
    stream = t.generate(PROVIDERS["responses"][0](recorder), stream=True)
    deltas = list(stream)
    assert [d.type for d in deltas] == ["thinking"] * 2 + ["text"] * 2 + ["tool_call"] * 6
    assert "".join(d.text for d in deltas if d.type == "thinking") == "Two cities, two calls."
    assert [(d.id, d.name) for d in deltas if d.type == "tool_call" and d.id] == [
        ("call_a", "get_weather"),
        ("call_b", "get_weather"),
    ]
    assert stream.response is not None
    assert stream.response.raw == responses_reply()  # the Response of response.completed, whole
    assert stream.commit is not None
    assert stream.commit.generation_config == {"model": "gpt-test", "finish_reason": "completed"}


def test_an_incomplete_response_commits_with_its_status_a_failed_one_commits_nothing(
    recorder: Recorder,
) -> None:
    client = PROVIDERS["responses"][0](recorder)
    cut = response_body(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    recorder.stream(responses_events(cut))
    t = fresh()
    stream = t.generate(client, stream=True)
    list(stream)
    assert stream.commit is not None
    assert stream.commit.generation_config["finish_reason"] == "incomplete"
    failed = response_body(status="failed", error={"code": "server_error", "message": "The model broke."})
    events = responses_events(response_body())
    recorder.stream(
        [
            *events[:-1],
            sse("response.failed", {"type": "response.failed", "sequence_number": 99, "response": failed}),
        ]
    )
    head = t.head
    with pytest.raises(LLMError, match="The model broke"):
        list(t.generate(client, stream=True))
    assert t.head == head


def test_anthropic_thinking_deltas_arrive(recorder: Recorder) -> None:
    recorder.stream(anthropic_events(anthropic_reply(), pieces=4))
    t = fresh()
    deltas = list(
        t.generate(AnthropicClient("c", base_url=recorder.url, api_key="k", max_retries=0), stream=True)
    )
    thinking = [d for d in deltas if d.type == "thinking"]
    assert len(thinking) == 4
    assert "".join(d.text for d in thinking) == "The user wants Paris weather."
    assert [d.type for d in deltas].index("thinking") < [d.type for d in deltas].index("text")
    parts = t.compile(include_reasoning=True).messages[-1].parts
    thought = [(p.thinking, p.signature) for p in parts if p.type == "thinking"]
    assert thought == [("The user wants Paris weather.", "sig-123")]  # the signature, from signature_delta


def test_openai_refusal_streams_as_refusal(recorder: Recorder) -> None:
    body = openai_completion(None)
    body["choices"][0]["message"]["refusal"] = "I can't help with that."
    recorder.reply(body)
    recorder.stream(openai_events(body))
    client = OpenAIClient("m", api="chat", base_url=f"{recorder.url}/v1", api_key="k", max_retries=0)
    want = fresh().generate(client)
    t = fresh()
    stream = t.generate(client, stream=True)
    assert "".join(d.text for d in stream if d.type == "refusal") == "I can't help with that."
    assert stream.commit is not None
    assert stream.commit.commit_id == want.commit_id


def stream_of(provider: str, recorder: Recorder) -> tuple[Any, list[bytes]]:
    make, reply, events = PROVIDERS[provider]
    return make(recorder), events(reply())


def test_consumer_stopping_early_commits_nothing(recorder: Recorder, provider: str) -> None:
    client, events = stream_of(provider, recorder)
    recorder.stream(events, pause=0.01)
    t = fresh()
    head = t.head
    with t.generate(client, stream=True) as stream:
        for _delta in stream:
            break
    assert stream.commit is None
    assert t.head == head
    assert t.log(limit=1)[0].commit_id == head
    recorder.stream(events)  # the client still works: the dropped connection is not reused
    again = t.generate(client, stream=True)
    list(again)
    assert again.commit is not None
    assert t.head == again.commit.commit_id


def test_exception_in_the_consumer_commits_nothing(recorder: Recorder, provider: str) -> None:
    client, events = stream_of(provider, recorder)
    recorder.stream(events)
    t = fresh()
    head = t.head
    stream = t.generate(client, stream=True)

    def consume() -> None:
        with stream:
            for delta in stream:
                if delta.type == "tool_call":
                    raise KeyError("the consumer failed")

    with pytest.raises(KeyError):
        consume()
    assert stream.commit is None
    assert t.head == head


@pytest.mark.parametrize("cut", [1, 5])
def test_connection_drop_mid_stream_commits_nothing(recorder: Recorder, provider: str, cut: int) -> None:
    client, events = stream_of(provider, recorder)
    recorder.stream(events, drop_after=cut)
    t = fresh()
    head = t.head
    seen: list[StreamDelta] = []
    stream = t.generate(client, stream=True)
    with pytest.raises(LLMError, match="broke off"):
        seen.extend(stream)
    assert t.head == head
    assert len(t.log()) == 2
    assert cut == 1 or seen  # what arrived before the drop was handed out


def test_stream_ending_without_its_last_event_commits_nothing(recorder: Recorder, provider: str) -> None:
    client, events = stream_of(provider, recorder)
    recorder.stream(events[:-3])  # a clean end of the body, but the reply never said it was complete
    t = fresh()
    head = t.head
    with pytest.raises(LLMError, match=r"before the (reply|response) was complete"):
        list(t.generate(client, stream=True))
    assert t.head == head


def test_error_event_mid_stream_commits_nothing(recorder: Recorder, provider: str) -> None:
    client, events = stream_of(provider, recorder)
    error: dict[str, Any] = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    if provider == "responses":  # the Responses API's error event
        error = {"type": "error", "code": "overloaded_error", "message": "Overloaded", "sequence_number": 9}
    recorder.stream([*events[:3], sse("error" if provider != "chat" else None, error)])
    t = fresh()
    head = t.head
    with pytest.raises(LLMError, match=r"overloaded_error.*Overloaded"):
        list(t.generate(client, stream=True))
    assert t.head == head


def test_malformed_event_is_malformed_response(recorder: Recorder, provider: str) -> None:
    client, events = stream_of(provider, recorder)
    named = (
        b"event: content_block_delta\n" if provider == "anthropic" else b""
    )  # Anthropic's SDK skips unnamed
    recorder.stream([*events[:3], named + b"data: {not json\n\n"])
    t = fresh()
    with pytest.raises(MalformedResponse):
        list(t.generate(client, stream=True))
    assert len(t.log()) == 2


def test_opening_a_stream_is_retried_and_errors_are_reported(recorder: Recorder, provider: str) -> None:
    make, reply, events = PROVIDERS[provider]
    client = make(recorder)
    client = type(client)(
        client.model,
        client.client.with_options(max_retries=1),
        **({"api": client.api} if isinstance(client, OpenAIClient) else {}),
    )
    recorder.reply({"error": {"message": "busy"}}, status=503, headers=RETRY_NOW)
    recorder.stream(events(reply()))
    t = fresh()
    stream = t.generate(client, stream=True)
    list(stream)
    assert stream.commit is not None
    assert len(recorder.requests) == 2  # the SDK retried opening it once
    assert recorder.requests[1].headers["x-stainless-retry-count"] == "1"
    recorder.reply({"error": {"message": "bad key"}}, status=401)
    with pytest.raises(LLMHTTPError, match="bad key") as info:
        list(fresh().generate(client, stream=True))
    assert info.value.status == 401
    del make


def test_clients_that_cannot_stream_and_chat_are_refused(recorder: Recorder) -> None:
    t = fresh()
    with pytest.raises(InvalidInput, match="ScriptedLLM cannot stream"):
        t.generate(ScriptedLLM(["hi"]), stream=True)
    with pytest.raises(InvalidInput, match="chat does not stream"):
        t.chat("hello", ScriptedLLM(["hi"]), stream=True)
    with pytest.raises(InvalidInput, match="streaming is chat_stream"):
        OpenAIClient("m", base_url=recorder.url, api_key="k").chat(t.compile().messages, stream=True)
    assert len(t.log()) == 2
    assert recorder.requests == []


def test_a_streaming_client_of_your_own_fails_as_one_model_error() -> None:
    class Raising:
        def chat(self, messages: Any, tools: Any = None, **params: Any) -> str:
            return "unused"

        def chat_stream(self, messages: Any, tools: Any = None, **params: Any) -> Any:
            raise RuntimeError("no connection")

    class Wrong(Raising):
        def chat_stream(self, messages: Any, tools: Any = None, **params: Any) -> Any:
            return iter(["not a ChatStream"])

    class Broken(Raising):
        def chat_stream(self, messages: Any, tools: Any = None, **params: Any) -> Any:
            def chunks() -> Any:
                yield {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}
                raise RuntimeError("socket gone")

            return ChatStream(chunks, ChatChunkFolder())

    t = fresh()
    with pytest.raises(ModelCallFailed, match="no connection"):
        t.generate(Raising(), stream=True)
    with pytest.raises(ModelCallFailed, match="returned list_iterator"):
        t.generate(Wrong(), stream=True)
    with pytest.raises(ModelCallFailed, match="socket gone"):
        list(t.generate(Broken(), stream=True))
    assert len(t.log()) == 2


def test_a_call_may_set_or_drop_stream_options(recorder: Recorder) -> None:
    client = OpenAIClient("m", api="chat", base_url=f"{recorder.url}/v1", api_key="k", max_retries=0)
    for given, sent in (({"stream_options": None}, None), ({"stream_options": {"x": 1}}, {"x": 1})):
        recorder.stream(openai_events(openai_completion("hi")))
        list(fresh().generate(client, stream=True, **given))
        assert recorder.bodies[-1].get("stream_options") == sent


def test_anthropic_pings_and_unknown_events_anywhere_are_ignored_and_kept(recorder: Recorder) -> None:
    client, events = stream_of("anthropic", recorder)
    future = {"type": "future_event", "detail": "kept"}
    noisy = [sse("ping", {"type": "ping"}), sse("future_event", future), *events]
    noisy.insert(4, sse("future_event", future))  # and between blocks
    recorder.stream(events)
    recorder.stream(noisy)
    plain = fresh()
    expected = plain.generate(client, stream=True)
    list(expected)
    t = fresh()
    stream = t.generate(client, stream=True)
    assert [d.type for d in stream]
    assert stream.commit is not None
    assert expected.commit is not None
    assert stream.commit.commit_id == expected.commit.commit_id  # the same reply, the same commit
    # kept as the SDK passes them on (anthropic's later releases; 0.47 drops events of unknown kinds itself)
    assert stream.ignored_events in ([("future_event", json.dumps(future))] * 2, [])
    assert expected.ignored_events == []


def framed(events: list[bytes]) -> list[bytes]:
    """The same events in the other shapes the ``text/event-stream`` format allows: CRLF line ends, comments,
    a JSON value spread over two data lines."""
    out = [b": keep-alive\r\n\r\n"]
    for i, raw in enumerate(events):
        text = raw.decode()
        if i == 1 and text.startswith("data: {"):
            text = text.replace("data: {", "data: {\ndata: ", 1)
        out.append(text.replace("\n", "\r\n").encode())
    return out


def test_the_event_stream_format_in_its_other_shapes(recorder: Recorder, provider: str) -> None:
    client, events = stream_of(provider, recorder)
    recorder.stream(events)
    recorder.stream(framed(events))
    plain = fresh()
    expected = plain.generate(client, stream=True)
    list(expected)
    t = fresh()
    stream = t.generate(client, stream=True)
    list(stream)
    assert stream.commit is not None
    assert expected.commit is not None
    assert stream.commit.commit_id == expected.commit.commit_id


def test_identical_tool_calls_get_their_own_positions(recorder: Recorder) -> None:
    call = {"id": "call_same", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    body = openai_completion(None, [call, dict(call)], model="gpt-test")
    client = PROVIDERS["chat"][0](recorder)
    recorder.stream(openai_events(body))
    t = fresh()
    stream = t.generate(client, stream=True)
    seen: list[StreamDelta] = []
    with pytest.raises(ContentError, match="duplicate id"):  # a reply reusing an id is refused at commit...
        seen.extend(stream)
    assert [d.index for d in seen if d.type == "tool_call"] == [0, 0, 0, 1, 1, 1]  # ...each call in its place
    assert stream.response is not None
    assert len(stream.response.tool_calls) == 2
    assert len(t.log()) == 2


def sdk_httpx(sdk: Any) -> Any:
    """The HTTP library the SDK is built on (httpx; httpx2 from openai 3 and anthropic 1 on)."""
    base = next(
        c
        for c in sdk.DefaultHttpxClient.__mro__
        if c.__name__ == "Client" and c.__module__ != sdk.__name__ + "._base_client"
    )
    return sys.modules[base.__module__.split(".")[0]]


def test_leaving_the_with_block_closes_the_response_a_bare_break_does_not() -> None:
    """What the README says about ``break``: the ``with`` form closes the response (the model stops), a
    ``break`` out of a stream held in a variable leaves it open until close() or garbage collection."""
    import asyncio
    import gc

    from tractkv.aio import AsyncTract

    httpx = sdk_httpx(openai)
    events = openai_events(openai_reply())
    closed: list[bool] = []

    class Body(httpx.SyncByteStream, httpx.AsyncByteStream):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            self.index = len(closed)
            closed.append(False)

        def __iter__(self) -> Any:
            yield from events

        async def __aiter__(self) -> Any:
            for event in events:
                yield event

        def close(self) -> None:
            closed[self.index] = True

        async def aclose(self) -> None:
            closed[self.index] = True

    def answer(request: Any) -> Any:
        return httpx.Response(200, stream=Body(), headers={"content-type": "text/event-stream"})

    server = httpx.MockTransport(answer)
    sdk = openai.OpenAI(
        base_url="http://127.0.0.1/v1", api_key="k", http_client=openai.DefaultHttpxClient(transport=server)
    )
    llm = OpenAIClient("gpt-test", sdk, api="chat")
    t = fresh()
    with t.generate(llm, stream=True) as stream:
        for _ in stream:
            break
    assert closed == [True]
    held = t.generate(llm, stream=True)
    for _ in held:
        break
    assert closed == [True, False]  # still open: the model would keep generating
    held.close()
    assert closed == [True, True]
    held = t.generate(llm, stream=True)
    next(held)
    del held
    gc.collect()
    assert closed == [True, True, True]  # collected: closed
    assert len(t.log()) == 2

    async def main() -> None:
        async_sdk = openai.AsyncOpenAI(
            base_url="http://127.0.0.1/v1",
            api_key="k",
            http_client=openai.DefaultAsyncHttpxClient(transport=server),
        )
        at = AsyncTract(t)
        async with await at.generate(OpenAIClient("gpt-test", async_sdk, api="chat"), stream=True) as astream:
            async for _ in astream:
                break
        assert closed[-1] is True
        assert astream.commit is None
        await at.close()
        await async_sdk.close()

    asyncio.run(main())
    assert len(closed) == 4
    sdk.close()


def test_a_repeated_tool_call_signature_is_kept_once_and_arguments_and_content_are_joined() -> None:
    folder = ChatChunkFolder()
    signature = {"google": {"thought_signature": "c2ln"}}
    pieces = [
        {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a"'}},
        {"index": 0, "function": {"arguments": ": 1}"}, "extra_content": signature},
        {"index": 0, "function": {"arguments": ""}, "extra_content": signature},
    ]
    for n, piece in enumerate(pieces):
        delta = {"content": "ab"[n] if n < 2 else None, "tool_calls": [piece]}
        folder.add({"id": "x", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    folder.add({"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    message = folder.body()["choices"][0]["message"]
    [call] = message["tool_calls"]
    assert call["extra_content"] == signature
    assert call["function"]["arguments"] == '{"a": 1}'
    assert message["content"] == "ab"


def test_a_stream_whose_opening_failed_raises_again_and_never_resends() -> None:
    import asyncio

    sent = []

    def opener() -> Any:
        sent.append(1)
        raise LLMError("429")

    stream = ChatStream(opener, ChatChunkFolder())
    for _ in range(3):
        with pytest.raises(LLMError, match="429"):
            next(stream)
    assert len(sent) == 1

    async def aopener() -> tuple[Any, bool]:
        sent.append(2)
        raise LLMError("503")

    async def main() -> None:
        astream = AsyncChatStream(aopener, ChatChunkFolder())
        for _ in range(3):
            with pytest.raises(LLMError, match="503"):
                await anext(astream)

    asyncio.run(main())
    assert sent == [1, 2]
