"""OpenAIClient against the loopback recorder: request shape, auth, retries, errors, tool-call parsing."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from tractkv import ToolCall, Tract
from tractkv.engine.content import Message
from tractkv.errors import InvalidInput, LLMError, LLMHTTPError, MalformedResponse
from tractkv.llm import LLMClient, LLMResponse, OpenAIClient
from tractkv.llm._http import RetryPolicy

from .conftest import Recorder, openai_completion
from .test_sdk_acceptance import WEATHER_ANTHROPIC, WEATHER_OPENAI, build_tract, expected_openai_messages

HELLO = [Message(role="user", content="hi")]
WEATHER_CALL = {
    "id": "call_7",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Oslo", "units": ["C"]}'},
}


@pytest.fixture
def client(recorder: Recorder) -> Iterator[OpenAIClient]:
    with OpenAIClient("gpt-test", base_url=f"{recorder.url}/v1", api_key="sk-test", backoff=0.01) as c:
        yield c


def test_request_shape_and_auth(recorder: Recorder, client: OpenAIClient) -> None:
    recorder.reply(openai_completion("Hi there", model="gpt-test-0613"))
    with build_tract("anthropic") as t:
        ctx = t.compile()

    response = client.chat(ctx.messages, tools=ctx.tools, temperature=0.2, seed=None)

    [request] = recorder.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["content-type"] == "application/json"
    assert request.body == {
        "model": "gpt-test",
        "messages": expected_openai_messages(),
        "tools": [WEATHER_OPENAI, request.body["tools"][1]],  # converted from Anthropic's shape
        "temperature": 0.2,  # None-valued params (seed) are not sent
    }
    assert request.body["tools"][1]["function"]["name"] == "get_time"
    assert response == LLMResponse(text="Hi there", model="gpt-test-0613", finish_reason="stop")
    assert response.usage == {  # normalized: the provider's own counts kept
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "total_tokens": 12,
        "input_tokens": 10,
        "output_tokens": 2,
    }
    assert response.raw["id"] == "chatcmpl-1"
    assert isinstance(client, LLMClient)


def test_call_params_override_model_and_tools_are_converted(recorder: Recorder, client: OpenAIClient) -> None:
    recorder.reply(openai_completion())
    with build_tract("openai") as t:
        messages = t.compile().messages

    client.chat(messages, model="other-model", tools=[WEATHER_ANTHROPIC])

    body = recorder.requests[0].body
    assert body["model"] == "other-model"
    assert body["messages"][2]["tool_calls"] == expected_openai_messages()[2]["tool_calls"]
    assert body["tools"] == [WEATHER_OPENAI]


def test_parses_tool_calls(recorder: Recorder, client: OpenAIClient) -> None:
    recorder.reply(
        openai_completion(
            None,
            [
                WEATHER_CALL,
                {**WEATHER_CALL, "id": "call_8", "function": {"name": "get_time", "arguments": ""}},
            ],
        )
    )

    response = client.chat([Message(role="user", content="Oslo?")])

    assert response.text == ""
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == (
        ToolCall(id="call_7", name="get_weather", arguments={"city": "Oslo", "units": ["C"]}),
        ToolCall(id="call_8", name="get_time", arguments={}),
    )
    assert response.tool_calls[0].arguments == {"city": "Oslo", "units": ["C"]}  # hash=False: compare it too


def test_env_configuration(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"{recorder.url}/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    recorder.reply(openai_completion())
    with OpenAIClient("m") as client:
        client.chat(HELLO)
    assert recorder.requests[0].path == "/v1/chat/completions"
    assert recorder.requests[0].headers["authorization"] == "Bearer sk-env"


def test_no_key_sends_no_authorization(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    recorder.reply(openai_completion())
    with OpenAIClient("m", base_url=f"{recorder.url}/v1") as client:
        client.chat(HELLO)
    assert "authorization" not in recorder.requests[0].headers


@pytest.mark.parametrize("jitter", [False, True], ids=["no-jitter", "full-jitter"])
def test_retries_429_and_5xx_with_exponential_backoff(
    recorder: Recorder, sleeps: list[float], jitter: bool
) -> None:
    recorder.reply({"error": {"message": "slow down"}}, status=429)
    recorder.reply({"error": {"message": "oops"}}, status=500)
    recorder.reply(raw=b"<html>bad gateway</html>", status=502)
    recorder.reply(openai_completion("finally"))

    with OpenAIClient("m", base_url=f"{recorder.url}/v1", backoff=0.01, jitter=jitter) as client:
        assert client.chat(HELLO).text == "finally"
    assert len(recorder.requests) == 4
    assert recorder.bodies[0] == recorder.bodies[3]  # the same request each time
    ceilings = [0.01, 0.02, 0.04]
    if jitter:  # each wait drawn from [0, ceiling]; all three hitting their ceiling has probability ~0
        assert all(0 <= s <= c for s, c in zip(sleeps, ceilings, strict=True))  # strict: three waits
        assert sleeps != ceilings
    else:
        assert sleeps == ceilings


def test_retry_after_is_respected_and_bounded(recorder: Recorder, sleeps: list[float]) -> None:
    recorder.reply(status=429, headers={"Retry-After": "3"})
    recorder.reply(status=503, headers={"Retry-After": "3600"})
    recorder.reply(status=429, headers={"retry-after-ms": "250"})
    recorder.reply(openai_completion())
    with OpenAIClient("m", base_url=f"{recorder.url}/v1", api_key="k", max_delay=10.0) as client:
        client.chat(HELLO)
    assert sleeps == [3.0, 10.0, 0.25]


def test_retries_are_bounded(recorder: Recorder, client: OpenAIClient, sleeps: list[float]) -> None:
    for _ in range(5):
        recorder.reply({"error": {"message": "overloaded"}}, status=503)

    with pytest.raises(LLMHTTPError) as info:
        client.chat(HELLO)

    assert info.value.status == 503
    assert info.value.attempts == 4  # 1 + max_retries (3)
    assert "overloaded" in str(info.value)
    assert len(recorder.requests) == 4
    assert len(sleeps) == 3


def test_zero_retries(recorder: Recorder, sleeps: list[float]) -> None:
    recorder.reply(status=429)
    with (
        OpenAIClient("m", base_url=f"{recorder.url}/v1", max_retries=0) as client,
        pytest.raises(LLMHTTPError),
    ):
        client.chat(HELLO)
    assert len(recorder.requests) == 1
    assert sleeps == []


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_fail_at_once(recorder: Recorder, client: OpenAIClient, status: int) -> None:
    recorder.reply(
        {"error": {"message": "Invalid 'messages[1].content'", "type": "invalid_request_error"}},
        status=status,
    )

    with pytest.raises(LLMHTTPError) as info:
        client.chat(HELLO)

    assert info.value.status == status
    assert info.value.attempts == 1
    assert "Invalid 'messages[1].content'" in str(info.value)
    assert info.value.url.endswith("/v1/chat/completions")
    assert len(recorder.requests) == 1


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"",
        b"[1, 2]",
        b'{"choices": []}',
        b'{"choices": [{"index": 0}]}',
        b'{"choices": [{"message": {"role": "assistant", "content": 42}}]}',
        json.dumps(
            openai_completion(None, [{**WEATHER_CALL, "function": {"name": "f", "arguments": "{oops"}}])
        ).encode(),
        json.dumps(
            openai_completion(None, [{**WEATHER_CALL, "function": {"name": "f", "arguments": "[1]"}}])
        ).encode(),
        json.dumps(openai_completion(None, [{"type": "function", "function": {"name": "f"}}])).encode(),
    ],
)
def test_malformed_bodies(recorder: Recorder, client: OpenAIClient, raw: bytes) -> None:
    recorder.reply(raw=raw)
    with pytest.raises(MalformedResponse) as info:
        client.chat(HELLO)
    assert info.value.url is not None
    assert len(recorder.requests) == 1  # a malformed success is not retried


def test_unreachable_server_is_an_llm_error(sleeps: list[float]) -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = OpenAIClient("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=2, backoff=0)
    with client, pytest.raises(LLMError, match="cannot reach") as info:
        client.chat(HELLO)
    assert not isinstance(info.value, LLMHTTPError)
    assert len(sleeps) == 2


@pytest.mark.parametrize(
    "kwargs", [{"max_retries": -1}, {"backoff": -1.0}, {"timeout": 0}, {"base_url": "no scheme"}]
)
def test_bad_settings(kwargs: dict[str, object]) -> None:
    settings = {"base_url": "http://127.0.0.1:9/v1", **kwargs}
    with pytest.raises(InvalidInput):
        OpenAIClient("m", **settings).chat(HELLO)


def test_bad_messages_and_streaming(recorder: Recorder, client: OpenAIClient) -> None:
    with pytest.raises(InvalidInput, match=r"messages\[1\] must be a tractkv Message"):
        client.chat([*HELLO, "not a message"])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match="sequence of Message"):
        client.chat("hi")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="role 'developer'"):
        client.chat([*HELLO, Message(role="developer", content="x")])
    with pytest.raises(InvalidInput, match="without the tool_call_id"):
        client.chat([*HELLO, Message(role="tool", content="42")])
    assert recorder.requests == []
    with pytest.raises(InvalidInput, match="streaming"):
        client.chat(HELLO, stream=True)


def test_generate_commits_the_reply(recorder: Recorder, client: OpenAIClient) -> None:
    """End to end: Tract.generate sends the compiled context and commits the parsed tool calls."""
    recorder.reply(openai_completion(None, [WEATHER_CALL], model="gpt-test-0613"))
    with Tract.open() as t:
        t.system("Be brief.")
        t.user("Weather in Oslo?", tools=[WEATHER_OPENAI])
        info = t.generate(client, temperature=0)
        ctx = t.compile()

    body = recorder.requests[0].body
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
    ]
    assert body["tools"] == [WEATHER_OPENAI]
    assert body["temperature"] == 0
    assert ctx.messages[-1].tool_calls == (
        ToolCall(id="call_7", name="get_weather", arguments={"city": "Oslo", "units": ["C"]}),
    )
    assert ctx.messages[-1].tool_calls[0].arguments == {"city": "Oslo", "units": ["C"]}
    assert info.generation_config is not None
    assert info.generation_config["temperature"] == 0


def test_retry_policy_delays() -> None:
    policy = RetryPolicy(max_retries=5, backoff=0.5, max_delay=3.0, jitter=False)
    assert [policy.delay(n) for n in range(4)] == [0.5, 1.0, 2.0, 3.0]  # doubling, capped
    assert policy.delay(0, {"retry-after": "2"}) == 2.0
    assert policy.delay(0, {"retry-after": "-5"}) == 0.0
    assert policy.delay(0, {"retry-after": "soon"}) == 0.5  # unreadable: the backoff
    future = format_datetime(datetime.now(UTC) + timedelta(seconds=100), usegmt=True)
    assert policy.delay(0, {"retry-after": future}) == 3.0  # an HTTP date, bounded
    past = format_datetime(datetime.now(UTC) - timedelta(seconds=100), usegmt=True)
    assert policy.delay(0, {"retry-after": past}) == 0.0


def test_retry_policy_full_jitter_is_bounded_and_seedable() -> None:
    """Full jitter: wait n is uniform in [0, min(backoff * 2**n, max_delay)]; a seeded rng repeats it."""
    import random

    def waits(seed: int) -> list[float]:
        policy = RetryPolicy(max_retries=20, backoff=0.5, max_delay=3.0, rng=random.Random(seed))
        return [policy.delay(n) for n in range(20)]

    first = waits(7)
    assert first == waits(7)  # reproducible from the seed
    assert first != waits(8)
    ceilings = [min(0.5 * 2**n, 3.0) for n in range(20)]
    assert all(0.0 <= w <= c for w, c in zip(first, ceilings, strict=True))
    assert sum(w < c for w, c in zip(first, ceilings, strict=True)) == 20  # jittered, not the ceiling
    assert max(first[3:]) > 1.5  # spread over the range, not squeezed near 0
    policy = RetryPolicy(backoff=0.5, max_delay=3.0, rng=random.Random(7))
    assert policy.delay(0, {"retry-after": "2"}) == 2.0  # the server's answer is not jittered
    assert policy.delay(10_000) <= 3.0  # huge retry numbers neither overflow nor exceed the bound
