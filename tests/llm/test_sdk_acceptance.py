"""Acceptance: a compiled context goes through the official openai and anthropic SDKs unchanged.

The SDKs talk to the loopback recorder; each test asserts the exact JSON body the SDK sent, so tool shapes,
tool_use / tool_result pairing and Anthropic's turn merging are checked as a provider would receive them.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from tractkv import Tract

from .conftest import Recorder, anthropic_message, openai_completion

SYSTEM = "You are a travel assistant. Answer briefly."
QUESTION = "What's the weather in Paris, and the time in Rome?"

WEATHER_OPENAI = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TIME_OPENAI = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Local time in a time zone",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
    },
}
WEATHER_ANTHROPIC = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TIME_ANTHROPIC = {
    "name": "get_time",
    "description": "Local time in a time zone",
    "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
}
TOOLS = {"openai": [WEATHER_OPENAI, TIME_OPENAI], "anthropic": [WEATHER_ANTHROPIC, TIME_ANTHROPIC]}

CALLS = [
    {"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}},
    {"id": "call_2", "name": "get_time", "arguments": {"tz": "Europe/Rome"}},
]
RESULTS = {"call_1": "18°C, sunny", "call_2": "14:05"}


def build_tract(tool_shape: str, *, follow_up: str | None = None) -> Tract:
    """System, user (offering two tools), assistant calling both, both results (and a user follow-up)."""
    t = Tract.open()
    t.system(SYSTEM)
    t.commit({"type": "dialogue", "role": "user", "text": QUESTION}, tools=TOOLS[tool_shape])
    t.assistant("", tool_calls=CALLS)
    for call_id, text in RESULTS.items():
        t.commit({"type": "dialogue", "role": "tool", "tool_call_id": call_id, "text": text})
    if follow_up is not None:
        t.user(follow_up)
    return t


def expected_openai_messages() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": '{"tz":"Europe/Rome"}'},
                },
            ],
        },
        {"role": "tool", "content": "18°C, sunny", "tool_call_id": "call_1"},
        {"role": "tool", "content": "14:05", "tool_call_id": "call_2"},
    ]


def expected_anthropic_messages() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_2", "name": "get_time", "input": {"tz": "Europe/Rome"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "18°C, sunny"},
                {"type": "tool_result", "tool_use_id": "call_2", "content": "14:05"},
            ],
        },
    ]


@pytest.mark.parametrize("tool_shape", ["openai", "anthropic"])
def test_openai_sdk_sends_compiled_context_exactly(
    recorder: Recorder, openai_sdk: openai.OpenAI, tool_shape: str
) -> None:
    recorder.reply(openai_completion("Paris: 18°C and sunny; Rome: 14:05."))
    with build_tract(tool_shape) as t:
        params = t.compile().to_openai_params()

    completion = openai_sdk.chat.completions.create(model="m", **params)

    assert completion.choices[0].message.content == "Paris: 18°C and sunny; Rome: 14:05."
    [request] = recorder.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer test"
    assert request.body == {
        "model": "m",
        "messages": expected_openai_messages(),
        "tools": [WEATHER_OPENAI, TIME_OPENAI],  # Anthropic-shaped schemas arrive converted
    }
    # Every tool message answers a call of the assistant turn before it.
    call_ids = [c["id"] for c in request.body["messages"][2]["tool_calls"]]
    assert [m["tool_call_id"] for m in request.body["messages"][3:]] == call_ids
    # Arguments are JSON strings that decode to what was committed.
    assert [json.loads(c["function"]["arguments"]) for c in request.body["messages"][2]["tool_calls"]] == [
        c["arguments"] for c in CALLS
    ]


@pytest.mark.parametrize("tool_shape", ["openai", "anthropic"])
def test_anthropic_sdk_sends_compiled_context_exactly(
    recorder: Recorder, anthropic_sdk: anthropic.Anthropic, tool_shape: str
) -> None:
    recorder.reply(anthropic_message([{"type": "text", "text": "Paris: 18°C; Rome: 14:05."}]))
    with build_tract(tool_shape) as t:
        params = t.compile().to_anthropic_params()

    message = anthropic_sdk.messages.create(model="m", max_tokens=100, **params)

    assert message.content[0].type == "text"
    assert message.content[0].text == "Paris: 18°C; Rome: 14:05."
    [request] = recorder.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    # SDK releases differ in how they send the key (x-api-key, or a bearer token): either is the key.
    assert request.headers.get("x-api-key") == "test" or request.headers.get("authorization") == "Bearer test"
    assert "anthropic-version" in request.headers
    assert request.body == {
        "model": "m",
        "max_tokens": 100,
        "system": SYSTEM,
        "messages": expected_anthropic_messages(),
        "tools": [WEATHER_ANTHROPIC, TIME_ANTHROPIC],  # OpenAI-shaped schemas arrive converted
    }
    uses = [b["id"] for b in request.body["messages"][1]["content"]]
    results = [b["tool_use_id"] for b in request.body["messages"][2]["content"]]
    assert uses == results == ["call_1", "call_2"]


def test_anthropic_sdk_tool_results_then_user_text_share_one_turn(
    recorder: Recorder, anthropic_sdk: anthropic.Anthropic
) -> None:
    """Anthropic requires alternating roles: the follow-up joins the tool results' user turn, after them."""
    recorder.reply(anthropic_message())
    with build_tract("openai", follow_up="In Fahrenheit, please.") as t:
        anthropic_sdk.messages.create(model="m", max_tokens=100, **t.compile().to_anthropic_params())

    messages = recorder.requests[0].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "18°C, sunny"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": "14:05"},
        {"type": "text", "text": "In Fahrenheit, please."},
    ]


def test_sdks_see_error_results(
    recorder: Recorder, openai_sdk: openai.OpenAI, anthropic_sdk: anthropic.Anthropic
) -> None:
    """A failed tool run is flagged for Anthropic (is_error) and plain content for OpenAI (it has no flag)."""
    recorder.reply(openai_completion())
    recorder.reply(anthropic_message())
    with Tract.open() as t:
        t.user("Weather in Atlantis?", tools=[WEATHER_OPENAI])
        t.assistant("Let me check.", tool_calls=[{"id": "call_9", "name": "get_weather", "arguments": "{}"}])
        t.commit(
            {
                "type": "dialogue",
                "role": "tool",
                "tool_call_id": "call_9",
                "text": "unknown city",
                "is_error": True,
            }
        )
        ctx = t.compile()
    openai_sdk.chat.completions.create(model="m", **ctx.to_openai_params())
    anthropic_sdk.messages.create(model="m", max_tokens=100, **ctx.to_anthropic_params())

    sent_openai, sent_anthropic = recorder.bodies
    assert sent_openai["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "content": "unknown city", "tool_call_id": "call_9"},
    ]
    assert "system" not in sent_anthropic  # no instruction: the key is omitted, not sent empty
    assert sent_anthropic["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "call_9", "name": "get_weather", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_9", "content": "unknown city", "is_error": True}
            ],
        },
    ]
