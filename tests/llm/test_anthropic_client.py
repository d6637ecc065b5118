"""AnthropicClient over the official ``anthropic`` SDK, against the loopback recorder: conversion, headers
(the SDK's), retries (the SDK's, bounded by its ``max_retries``), errors as tractkv errors, tool_use parsing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import attrs
import pytest

from tractkv import ToolCall
from tractkv.engine.content import Message
from tractkv.errors import InvalidInput, LLMError, LLMHTTPError, MalformedResponse
from tractkv.llm import AnthropicClient, LLMClient, LLMResponse

from .conftest import RETRY_NOW, Recorder, anthropic_message
from .test_sdk_acceptance import (
    SYSTEM,
    TIME_ANTHROPIC,
    WEATHER_ANTHROPIC,
    build_tract,
    expected_anthropic_messages,
)

HELLO = [Message(role="user", content="hi")]


def sent_key(headers: dict[str, str]) -> str | None:
    """The API key a request carried, as the SDK sends it (``x-api-key``; ``authorization: Bearer`` in the
    SDK's later releases)."""
    return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ") or None


@pytest.fixture
def client(recorder: Recorder) -> Iterator[AnthropicClient]:
    with AnthropicClient("claude-test", base_url=recorder.url, api_key="ak-test", max_retries=3) as c:
        yield c


@pytest.mark.parametrize("tool_shape", ["openai", "anthropic"])
def test_request_shape_matches_the_renderer(
    recorder: Recorder, client: AnthropicClient, tool_shape: str
) -> None:
    """What generate hands a client (the compiled messages and stored tools, either shape) goes out as
    to_anthropic_params renders it."""
    recorder.reply(anthropic_message())
    with build_tract(tool_shape) as t:
        ctx = t.compile()

    client.chat(ctx.messages, tools=ctx.tools, temperature=0.5, top_k=None)

    [request] = recorder.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert sent_key(request.headers) == "ak-test"
    assert request.headers["anthropic-version"]  # the SDK's
    assert request.body == {
        "model": "claude-test",
        "max_tokens": 1024,
        "system": SYSTEM,
        "messages": expected_anthropic_messages(),
        "tools": [WEATHER_ANTHROPIC, TIME_ANTHROPIC],
        "temperature": 0.5,
    }
    assert request.body == {
        "model": "claude-test",
        "max_tokens": 1024,
        "temperature": 0.5,
        **ctx.to_anthropic_params(),
    }


def test_error_results_and_params_override(recorder: Recorder, client: AnthropicClient) -> None:
    recorder.reply(anthropic_message())
    with build_tract("openai") as t:
        messages = list(t.compile().messages)
    messages[-1] = attrs.evolve(messages[-1], is_error=True)

    client.chat(messages, max_tokens=7, model="claude-other")

    body = recorder.requests[0].body
    assert (body["model"], body["max_tokens"]) == ("claude-other", 7)
    assert "tools" not in body
    assert body["messages"][2]["content"][1] == {
        "type": "tool_result",
        "tool_use_id": "call_2",
        "content": "14:05",
        "is_error": True,
    }


def test_parses_thinking_text_and_tool_use(recorder: Recorder, client: AnthropicClient) -> None:
    recorder.reply(
        anthropic_message(
            [
                {"type": "thinking", "thinking": "...", "signature": "s"},
                {"type": "text", "text": "Checking "},
                {"type": "text", "text": "both."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}},
            ],
            model="claude-test-2025",
        )
    )

    response = client.chat(HELLO)

    assert response == LLMResponse(
        text="Checking both.",
        tool_calls=(
            ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Oslo"}),
            ToolCall(id="toolu_2", name="get_time", arguments={}),
        ),
        parts=(
            {"type": "thinking", "thinking": "...", "signature": "s"},
            {"type": "text", "text": "Checking "},
            {"type": "text", "text": "both."},
        ),
        model="claude-test-2025",
        finish_reason="tool_use",
    )
    assert response.tool_calls[0].arguments == {"city": "Oslo"}
    assert response.usage == {"input_tokens": 10, "output_tokens": 2}
    assert response.raw["content"][0]["type"] == "thinking"
    assert isinstance(client, LLMClient)


def test_env_configuration(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", recorder.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-env")
    recorder.reply(anthropic_message())
    with AnthropicClient("m", max_tokens=5) as client:
        client.chat(HELLO)
    assert sent_key(recorder.requests[0].headers) == "ak-env"
    assert recorder.requests[0].body["max_tokens"] == 5


def test_retries_429_and_529_are_the_sdks(recorder: Recorder, client: AnthropicClient) -> None:
    error = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}
    recorder.reply(error, status=429, headers=RETRY_NOW)
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    recorder.reply(error, status=529, headers=RETRY_NOW)
    recorder.reply(anthropic_message())

    assert client.chat(HELLO).text == "ok"
    assert len(recorder.requests) == 3
    assert [r.headers["x-stainless-retry-count"] for r in recorder.requests] == ["0", "1", "2"]


def test_retries_are_bounded(recorder: Recorder) -> None:
    for _ in range(3):
        recorder.reply({"type": "error", "error": {"message": "busy"}}, status=500, headers=RETRY_NOW)
    client = AnthropicClient("m", base_url=recorder.url, api_key="k", max_retries=1)
    with client, pytest.raises(LLMHTTPError) as info:
        client.chat(HELLO)
    assert (info.value.status, info.value.attempts) == (500, 2)
    assert "busy" in str(info.value)
    assert len(recorder.requests) == 2


def test_400_fails_at_once_with_the_api_message(recorder: Recorder, client: AnthropicClient) -> None:
    detail = "messages.1: tool_use ids were found without tool_result blocks immediately after"
    recorder.reply(
        {"type": "error", "error": {"type": "invalid_request_error", "message": detail}}, status=400
    )
    with pytest.raises(LLMHTTPError, match="tool_use ids were found") as info:
        client.chat(HELLO)
    assert info.value.status == 400
    assert len(recorder.requests) == 1


@pytest.mark.parametrize(
    "body",
    [
        None,  # raw garbage, below
        {"type": "message"},
        {"content": "just text"},
        {"content": [{"type": "text"}]},
        {"content": [{"type": "tool_use", "name": "f", "input": {}}]},
        {"content": [{"type": "tool_use", "id": "t", "name": "f", "input": "[]"}]},
        {"content": ["block"]},
    ],
)
def test_malformed_bodies(recorder: Recorder, client: AnthropicClient, body: dict[str, Any] | None) -> None:
    if body is None:
        recorder.reply(raw=b"\x00\xff not json")
    else:
        recorder.reply(body)
    with pytest.raises(MalformedResponse) as info:
        client.chat(HELLO)
    assert info.value.url is not None
    assert info.value.url.endswith("/v1/messages")


@pytest.mark.parametrize("item", [{"role": "user", "content": "hi"}, ToolCall(id="c", name="f")])
def test_items_that_are_not_messages_are_refused(
    recorder: Recorder, client: AnthropicClient, item: object
) -> None:
    with pytest.raises(
        InvalidInput, match=rf"messages\[1\] must be a tractkv Message .*{type(item).__name__}"
    ):
        client.chat([*HELLO, item])  # type: ignore[list-item]
    assert recorder.requests == []


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        (Message(role="developer", content="x"), "role 'developer'"),
        (Message(role="tool", content="42"), "without the tool_call_id"),
    ],
)
def test_messages_no_provider_accepts_are_refused_before_sending(
    recorder: Recorder, client: AnthropicClient, message: Message, problem: str
) -> None:
    with pytest.raises(InvalidInput, match=problem):
        client.chat([*HELLO, message])
    assert recorder.requests == []


def test_bad_settings() -> None:
    with pytest.raises(InvalidInput, match="max_tokens"):
        AnthropicClient("m", base_url="http://127.0.0.1:9", api_key="k", max_tokens=0)
    with pytest.raises(InvalidInput, match="model must be"):
        AnthropicClient("", base_url="http://127.0.0.1:9", api_key="k")
    with pytest.raises(InvalidInput, match="not an Anthropic SDK client"):
        AnthropicClient("m", object())
    with pytest.raises(InvalidInput, match="could not make its anthropic client"):
        AnthropicClient("m", api_key="k", jitter=False)  # not the SDK's


def test_a_client_you_pass_is_used_and_left_open(recorder: Recorder) -> None:
    sdk = anthropic.Anthropic(base_url=recorder.url, api_key="ak-own", max_retries=0)
    recorder.reply(anthropic_message())
    with AnthropicClient("m", sdk, max_tokens=7) as client:
        assert client.client is sdk
        client.chat(HELLO)
    assert sent_key(recorder.requests[0].headers) == "ak-own"
    assert recorder.requests[0].body["max_tokens"] == 7
    assert not sdk.is_closed()
    sdk.close()


def test_unreachable_server_and_sdk_refusals_are_llm_errors(recorder: Recorder) -> None:
    client = AnthropicClient("m", base_url="http://127.0.0.1:9", api_key="k", max_retries=0)
    with pytest.raises(LLMError, match="cannot reach") as info:
        client.chat(HELLO)
    assert not isinstance(info.value, LLMHTTPError)


def test_an_sdk_refusal_before_sending_is_invalid_input_not_a_malformed_reply(recorder: Recorder) -> None:
    client = AnthropicClient(
        "claude-opus-4-1",
        client=anthropic.Anthropic(api_key="x", base_url=recorder.url),
        max_tokens=64000,
    )
    with pytest.raises(InvalidInput, match=r"Streaming is (required|strongly recommended)"):  # newer / 0.47
        client.chat([Message(role="user", content="hi")])
    assert recorder.requests == []
