"""Anthropic rendering rules that the API enforces: tool results first in a user turn, no empty turns."""

from __future__ import annotations

from tractkv import Tract
from tractkv.engine.compile.pairing import PLACEHOLDER_TEXT


def test_tool_results_come_before_text_in_a_user_turn() -> None:
    """A user message between a call and its result closes the call (engine/pairing.py): the call gets a
    placeholder result, first in the user turn, and the late result is left out."""
    with Tract.open() as t:
        t.user("look it up")
        t.assistant("", tool_calls=[{"id": "c1", "name": "search", "arguments": {"q": "x"}}])
        t.user("(while you wait: be brief)")
        # a raw tool message: t.tool_result refuses a result for a call no longer waiting for one
        t.commit({"type": "dialogue", "role": "tool", "tool_call_id": "c1", "text": "found x"})
        ctx = t.compile()
        rendered = ctx.to_anthropic()
    assert [r.kind for r in ctx.repairs] == ["placeholder_result", "dropped_result"]
    assert rendered["messages"] == [
        {"role": "user", "content": "look it up"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "search", "input": {"q": "x"}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": PLACEHOLDER_TEXT, "is_error": True},
                {"type": "text", "text": "(while you wait: be brief)"},
            ],
        },
    ]


def test_empty_messages_send_no_empty_turn() -> None:
    with Tract.open() as t:
        t.user("hi")
        t.commit({"type": "artifact", "text": "", "artifact_type": "text", "role": "assistant"})
        t.user("still there?")
        rendered = t.compile().to_anthropic()
        openai = t.compile().to_openai()
    assert rendered["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "still there?"}],
        }
    ]
    assert [m["content"] for m in openai] == ["hi", "", "still there?"]
