"""Acceptance: repaired contexts (engine/pairing.py) go through the official openai and anthropic SDKs as valid
requests: a placeholder result where a call went unanswered, an orphan result left out."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest

from tractkv import Tract
from tractkv.engine.compile.pairing import PLACEHOLDER_TEXT

from .conftest import Recorder, anthropic_message, openai_completion


@pytest.fixture
def repaired(recorder: Recorder) -> Iterator[Tract]:
    """A user message between a call and its result (the call gets a placeholder, the late result is dropped),
    then a call whose result is skipped, answered again properly."""
    with Tract.open() as t:
        t.user("Weather in Oslo?")
        t.assistant(tool_calls=[{"id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}}])
        t.user("Actually, Bergen.")
        # too late: a later message closed the call (a raw tool message; t.tool_result refuses it)
        t.commit({"type": "dialogue", "role": "tool", "tool_call_id": "c1", "text": "-3C"})
        t.assistant(tool_calls=[{"id": "c2", "name": "get_weather", "arguments": {"city": "Bergen"}}])
        skipped = t.tool_result("c2", "get_weather", "a very long page")
        assert skipped is not None
        t.annotate(skipped.commit_id, "skip")
        t.user("And?")
        yield t


def test_openai_sdk_sends_the_repaired_request(
    recorder: Recorder, repaired: Tract, openai_sdk: openai.OpenAI
) -> None:
    recorder.reply(openai_completion())
    ctx = repaired.compile()
    assert [r.kind for r in ctx.repairs] == ["placeholder_result", "dropped_result", "placeholder_result"]
    openai_sdk.chat.completions.create(model="m", **ctx.to_openai_params())
    sent = recorder.bodies[0]["messages"]
    assert [(m["role"], m.get("tool_call_id")) for m in sent] == [
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("user", None),
        ("assistant", None),
        ("tool", "c2"),
        ("user", None),
    ]
    assert sent[2]["content"] == sent[5]["content"] == PLACEHOLDER_TEXT


def test_anthropic_sdk_sends_the_repaired_request(
    recorder: Recorder, repaired: Tract, anthropic_sdk: anthropic.Anthropic
) -> None:
    recorder.reply(anthropic_message())
    anthropic_sdk.messages.create(model="m", max_tokens=10, **repaired.compile().to_anthropic_params())
    sent = recorder.bodies[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    placeholder = {"type": "tool_result", "content": PLACEHOLDER_TEXT, "is_error": True}
    assert sent[2]["content"] == [
        {**placeholder, "tool_use_id": "c1"},
        {"type": "text", "text": "Actually, Bergen."},
    ]
    assert sent[4]["content"] == [{**placeholder, "tool_use_id": "c2"}, {"type": "text", "text": "And?"}]
