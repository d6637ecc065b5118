"""What a provider reply may not smuggle in (hostile nesting, NaN, huge integers), and the model is never
called on a context that ends with tool calls still waiting for results."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tractkv import InvalidResponse, Tract, UnansweredToolCalls
from tractkv.engine.content.render.common import MAX_ARGUMENT_DEPTH
from tractkv.llm import ScriptedLLM


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def anthropic_reply(arguments: object) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": arguments}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


def openai_reply(arguments: str) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"object": "chat.completion", "model": "gpt", "choices": [{"index": 0, "message": message}]}


@pytest.mark.parametrize(
    "reply",
    [
        anthropic_reply(nested(900)),
        anthropic_reply({"x": float("inf")}),
        anthropic_reply({"x": 2**64}),
    ],
    ids=["anthropic-deep", "anthropic-inf", "anthropic-big-int"],
)
def test_replies_a_store_cannot_hold_are_refused_before_anything_is_written(reply: dict[str, Any]) -> None:
    with Tract.open() as t:
        t.user("hi")
        head = t.head
        with pytest.raises(InvalidResponse):
            t.record_response(reply)
        assert t.head == head


@pytest.mark.parametrize(
    "written",
    [
        json.dumps(nested(900)),
        '{"x": NaN}',
        '{"x": -Infinity}',
        '{"x": 123456789012345678901234567890}',
    ],
    ids=["openai-deep", "nan", "infinity", "big-int"],
)
def test_openai_arguments_no_store_could_hold_as_values_are_kept_as_the_string(written: str) -> None:
    """An OpenAI call's arguments arrive as a string: one that holds no object a store can keep (too deep,
    NaN, beyond 64 bits) is kept as that string (``invalid_arguments``), never decoded into the store."""
    with Tract.open() as t:
        t.user("hi")
        info = t.record_response(openai_reply(written))
        assert info.content["tool_calls"][0] == {
            "id": "c1",
            "name": "f",
            "arguments": {},
            "invalid_arguments": written,
        }


def test_openai_arguments_at_the_depth_limit_are_an_object_and_one_deeper_the_string() -> None:
    with Tract.open() as t:
        t.user("hi")
        at_limit = t.record_response(openai_reply(json.dumps(nested(MAX_ARGUMENT_DEPTH))))
        assert at_limit.content["tool_calls"][0]["arguments"] == nested(MAX_ARGUMENT_DEPTH)
        deeper = json.dumps(nested(MAX_ARGUMENT_DEPTH + 1))
        over = t.record_response(openai_reply(deeper))
        assert over.content["tool_calls"][0] == {
            "id": "c1",
            "name": "f",
            "arguments": {},
            "invalid_arguments": deeper,
        }


def test_arguments_at_the_depth_limit_are_recorded() -> None:
    with Tract.open() as t:
        t.user("hi")
        info = t.record_response(anthropic_reply(nested(MAX_ARGUMENT_DEPTH)))
        assert info.content["tool_calls"][0]["arguments"] == nested(MAX_ARGUMENT_DEPTH)


def test_generate_refuses_a_context_ending_with_an_unanswered_call() -> None:
    llm = ScriptedLLM(["never sent"])
    with Tract.open(llm=llm) as t:
        t.user("Weather in Oslo and Rome?")
        t.assistant(
            tool_calls=[
                {"id": "w1", "name": "weather", "arguments": {"city": "Oslo"}},
                {"id": "w2", "name": "weather", "arguments": {"city": "Rome"}},
            ]
        )
        t.commit({"type": "dialogue", "role": "tool", "tool_call_id": "w1", "text": "rain"})
        assert t.compile().open_calls == ("w2",)
        head = t.head
        with pytest.raises(UnansweredToolCalls, match="w2") as caught:
            t.generate()
        assert caught.value.call_ids == ("w2",)
        assert llm.calls == []
        assert t.head == head
        t.commit({"type": "dialogue", "role": "tool", "tool_call_id": "w2", "text": "sun"})
        assert t.compile().open_calls == ()
        assert t.generate().content["text"] == "never sent"


def test_chat_after_an_unanswered_call_sends_a_placeholder_result() -> None:
    llm = ScriptedLLM(["Sorry, let me answer directly."])
    with Tract.open(llm=llm) as t:
        t.user("Weather in Oslo?")
        t.assistant(tool_calls=[{"id": "w1", "name": "weather", "arguments": {"city": "Oslo"}}])
        t.chat("Never mind.")
        sent = llm.calls[0].messages
    assert [(m.role, m.tool_call_id) for m in sent] == [
        ("user", None),
        ("assistant", None),
        ("tool", "w1"),
        ("user", None),
    ]
