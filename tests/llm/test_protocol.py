"""The model boundary: LLMResponse (validation, assistant_payload) and call_model (wrapping, str replies)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from tractkv.engine.content import Message, ToolCall, to_message
from tractkv.engine.content.payload import normalize
from tractkv.errors import InvalidInput, LLMHTTPError, MalformedResponse, ModelCallFailed, TractError
from tractkv.llm import LLMClient, LLMResponse, ScriptedLLM, call_model

HELLO = [Message(role="user", content="hi")]
WEATHER = {"name": "get_weather", "input_schema": {"type": "object"}}


class Replies:
    """A hand-written client: returns (or raises) ``reply`` and remembers what it was called with."""

    def __init__(self, reply: object) -> None:
        self.reply = reply
        self.seen: list[tuple[Sequence[Message], Any, dict[str, Any]]] = []

    def chat(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None, **params: Any
    ) -> Any:
        self.seen.append((messages, tools, params))
        if isinstance(self.reply, BaseException):
            raise self.reply
        return self.reply


def test_call_model_passes_messages_tools_and_params_through() -> None:
    llm = ScriptedLLM([LLMResponse(text="fine", model="m-1")])
    response = call_model(llm, HELLO, [WEATHER], {"temperature": 0})
    assert response == LLMResponse(text="fine", model="m-1")
    (call,) = llm.calls
    assert (call.messages, call.tools, call.params) == (tuple(HELLO), [WEATHER], {"temperature": 0})


def test_call_model_without_tools_passes_none() -> None:
    client = Replies("hello")
    call_model(client, HELLO, None, {})
    assert client.seen == [(HELLO, None, {})]


def test_a_str_reply_becomes_a_response() -> None:
    client = Replies("plain text")
    assert isinstance(client, LLMClient)  # structurally a client
    response = call_model(client, HELLO, None, {})
    assert response == LLMResponse(text="plain text")
    assert response.raw == "plain text"
    assert response.tool_calls == ()


@pytest.mark.parametrize("reply", [None, 42, {"role": "assistant", "content": "hi"}, ["hi"]])
def test_other_replies_are_a_clear_model_call_failure(reply: object) -> None:
    with pytest.raises(
        ModelCallFailed, match=rf"Replies.chat returned {type(reply).__name__}; .*LLMResponse"
    ):
        call_model(Replies(reply), HELLO, None, {})


def test_foreign_exceptions_are_wrapped_and_tractkv_errors_propagate() -> None:
    boom = RuntimeError("socket closed")
    with pytest.raises(ModelCallFailed, match="socket closed") as info:
        call_model(Replies(boom), HELLO, None, {})
    assert info.value.__cause__ is boom
    assert isinstance(info.value, TractError)

    http = LLMHTTPError(429, "http://x/v1/chat/completions", "slow down", 4)
    with pytest.raises(LLMHTTPError) as raised:
        call_model(Replies(http), HELLO, None, {})
    assert raised.value is http


def test_assistant_payload_commits_what_was_answered() -> None:
    calls = (
        ToolCall(id="c1", name="get_weather", arguments={"city": "Oslo", "units": ["C"]}),
        ToolCall(id="c2", name="get_time", arguments={}),
    )
    response = LLMResponse(text="Checking.", tool_calls=calls, model="m")
    payload = response.assistant_payload()
    assert payload == {
        "type": "dialogue",
        "role": "assistant",
        "text": "Checking.",
        "tool_calls": [
            {"id": "c1", "name": "get_weather", "arguments": {"city": "Oslo", "units": ["C"]}},
            {"id": "c2", "name": "get_time", "arguments": {}},
        ],
    }
    assert normalize(payload) == payload
    assert to_message(normalize(payload)) == Message(role="assistant", content="Checking.", tool_calls=calls)
    payload["tool_calls"][0]["arguments"]["units"].append("F")  # a copy: the response is unchanged
    assert response.tool_calls[0].arguments == {"city": "Oslo", "units": ["C"]}


def test_assistant_payload_without_tool_calls_leaves_them_out() -> None:
    assert LLMResponse(text="Done.").assistant_payload() == {
        "type": "dialogue",
        "role": "assistant",
        "text": "Done.",
    }


@pytest.mark.parametrize(
    "fields",
    [
        {"text": None},
        {"text": b"bytes"},
        {"tool_calls": [ToolCall(id="c", name="f")]},
        {"tool_calls": ({"id": "c", "name": "f", "arguments": {}},)},
        {"model": 3},
    ],
)
def test_responses_are_checked_when_built(fields: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput, match="LLMResponse"):
        LLMResponse(**fields)


def test_openai_messages_with_text_parts_and_empty_arguments() -> None:
    """Some OpenAI-compatible servers answer with content parts and send "" for no arguments."""
    response = LLMResponse.from_openai_message(
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "refusal", "refusal": "no"},
                {"type": "output_text", "text": "b"},
                {"type": "image_url", "image_url": {"url": "https://x"}},  # not a reply part: not read
            ],
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "now", "arguments": ""}}],
        },
        model="m",
    )
    assert (response.text, response.finish_reason, response.model) == ("ab", "tool_calls", "m")
    assert response.parts == (
        {"type": "text", "text": "a"},
        {"type": "refusal", "refusal": "no"},
        {"type": "text", "text": "b"},
    )
    assert response.refusal == "no"
    assert response.tool_calls == (ToolCall(id="c", name="now", arguments={}),)


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("text", "must be a JSON object"),
        ({"content": None, "tool_calls": {"id": "c"}}, "tool_calls must be a list"),
        ({"content": None, "tool_calls": ["call"]}, r"tool_calls\[0\] is not an object"),
        ({"content": None, "tool_calls": [{"id": "c", "name": "f", "arguments": [1]}]}, "JSON object"),
    ],
)
def test_malformed_openai_messages(message: Any, error: str) -> None:
    with pytest.raises(MalformedResponse, match=error):
        LLMResponse.from_openai_message(message)
