"""Acceptance: replies from the official SDKs are recorded whole and sent back as the provider needs them.

Each test calls a provider through its SDK (or tractkv's client) against the loopback recorder, records the
reply, and sends the compiled context back through the SDK: the recorder shows the exact JSON a provider
would receive. Anthropic must get its thinking blocks back unchanged (signatures intact, before the
tool_use) or it rejects a thinking + tools loop; OpenAI gets no thinking, and keeps a refusal as a refusal.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai

from tractkv import Tract
from tractkv.llm import AnthropicClient

from .conftest import Recorder, anthropic_message, openai_completion
from .test_sdk_acceptance import WEATHER_ANTHROPIC, WEATHER_OPENAI

THINKING = {
    "type": "thinking",
    "thinking": "Paris weather: call the tool.",
    "signature": "EqQBCkYIBxgCKkA+sig/==",
}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT+data=="}
TEXT = {"type": "text", "text": "Let me check."}
TOOL_USE = {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}
USAGE = {
    "input_tokens": 310,
    "output_tokens": 95,
    "cache_read_input_tokens": 2048,
    "cache_creation_input_tokens": 0,
}


def thinking_reply() -> dict[str, Any]:
    body = anthropic_message([THINKING, REDACTED, TEXT, TOOL_USE], model="claude-test")
    body["usage"] = dict(USAGE)
    return body


def weather_tract(tools: dict[str, Any]) -> Tract:
    t = Tract.open()
    t.system("Answer briefly.")
    t.commit({"type": "dialogue", "role": "user", "text": "Weather in Paris?"}, tools=[tools])
    return t


def test_openai_sdk_tool_call_recorded_and_sent_back(recorder: Recorder, openai_sdk: openai.OpenAI) -> None:
    """A ChatCompletion object with tool calls is recorded; the next request carries the calls as sent."""
    calls = [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
    ]
    recorder.reply(openai_completion(None, calls, model="gpt-test"))
    recorder.reply(openai_completion("18°C, sunny."))
    t = weather_tract(WEATHER_OPENAI)

    completion = openai_sdk.chat.completions.create(model="m", **t.compile().to_openai_params())
    info = t.record_response(completion)
    t.commit({"type": "dialogue", "role": "tool", "tool_call_id": "call_1", "text": "18°C, sunny"})
    openai_sdk.chat.completions.create(model="m", **t.compile().to_openai_params())

    assert info.usage == {
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "total_tokens": 12,
        "input_tokens": 10,
        "output_tokens": 2,
    }
    assert info.generation_config == {"model": "gpt-test", "finish_reason": "tool_calls"}
    messages = recorder.requests[1].body["messages"]
    assert messages[2] == {"role": "assistant", "content": None, "tool_calls": calls}
    assert messages[3] == {"role": "tool", "content": "18°C, sunny", "tool_call_id": "call_1"}


def test_anthropic_sdk_thinking_tool_loop_sends_thinking_back_exactly(
    recorder: Recorder, anthropic_sdk: anthropic.Anthropic
) -> None:
    recorder.reply(thinking_reply())
    recorder.reply(anthropic_message([{"type": "text", "text": "18°C and sunny."}]))
    t = weather_tract(WEATHER_ANTHROPIC)

    message = anthropic_sdk.messages.create(model="m", max_tokens=2048, **t.compile().to_anthropic_params())
    info = t.record_response(message)
    t.commit({"type": "dialogue", "role": "tool", "tool_call_id": "toolu_01", "text": "18°C, sunny"})
    anthropic_sdk.messages.create(model="m", max_tokens=2048, **t.compile().to_anthropic_params())

    assert info.usage == USAGE
    assert info.generation_config == {"model": "claude-test", "finish_reason": "tool_use"}
    assert info.content["parts"] == [THINKING, REDACTED, TEXT]
    body = recorder.requests[1].body
    assert body["messages"][1] == {"role": "assistant", "content": [THINKING, REDACTED, TEXT, TOOL_USE]}
    assert body["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18°C, sunny"}],
    }


def test_openai_rendering_leaves_thinking_out(recorder: Recorder, openai_sdk: openai.OpenAI) -> None:
    """A conversation recorded from Anthropic, continued on OpenAI: the thinking is not sent."""
    recorder.reply(openai_completion("18°C and sunny."))
    t = weather_tract(WEATHER_ANTHROPIC)
    t.record_response(anthropic.types.Message.model_validate(thinking_reply()))
    t.commit({"type": "dialogue", "role": "tool", "tool_call_id": "toolu_01", "text": "18°C, sunny"})

    openai_sdk.chat.completions.create(model="m", **t.compile().to_openai_params())

    [request] = recorder.requests
    assistant = request.body["messages"][2]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == "Let me check."
    assert [c["id"] for c in assistant["tool_calls"]] == ["toolu_01"]
    sent = json.dumps(request.body)
    assert THINKING["signature"] not in sent
    assert THINKING["thinking"] not in sent
    assert REDACTED["data"] not in sent


def test_openai_sdk_refusal_recorded_and_sent_back(recorder: Recorder, openai_sdk: openai.OpenAI) -> None:
    refused = openai_completion(None, model="gpt-test")
    refused["choices"][0]["message"]["refusal"] = "I can't help with that."
    recorder.reply(refused)
    recorder.reply(openai_completion("ok"))
    t = Tract.open()
    t.user("Something you refuse.")

    completion = openai_sdk.chat.completions.create(model="m", **t.compile().to_openai_params())
    info = t.record_response(completion)
    t.user("Then something else.")
    openai_sdk.chat.completions.create(model="m", **t.compile().to_openai_params())

    assert info.content["parts"] == [{"type": "refusal", "refusal": "I can't help with that."}]
    assistant = recorder.requests[1].body["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["refusal"] == "I can't help with that."
    assert not assistant.get("content")


def test_generate_with_anthropic_client_keeps_thinking(recorder: Recorder) -> None:
    """generate() records what record_response records, and the next call sends the thinking back."""
    recorder.reply(thinking_reply())
    recorder.reply(anthropic_message([{"type": "text", "text": "18°C and sunny."}]))
    t = weather_tract(WEATHER_ANTHROPIC)
    with AnthropicClient("claude-test", base_url=recorder.url, api_key="k", max_retries=0) as client:
        info = t.generate(client)
        t.commit({"type": "dialogue", "role": "tool", "tool_call_id": "toolu_01", "text": "18°C, sunny"})
        t.generate(client)

    assert info.usage == USAGE
    expected = Tract.open()
    assert info.content == expected.record_response(thinking_reply()).content
    assert recorder.requests[1].body["messages"][1] == {
        "role": "assistant",
        "content": [THINKING, REDACTED, TEXT, TOOL_USE],
    }
