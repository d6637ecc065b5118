"""Anthropic's request rules beyond tool pairing, kept by the renderer: a first user turn, no blank text, no
trailing whitespace in a final assistant turn, tool call ids of [a-zA-Z0-9_-] unique in the request."""

from __future__ import annotations

import re
from typing import Any

from tractkv import Tract
from tractkv.engine.content.render.anthropic import ANTHROPIC_START

ID = re.compile(r"[a-zA-Z0-9_-]+")


def anthropic(t: Tract) -> dict[str, Any]:
    return t.compile().to_anthropic_params()


def test_a_context_starting_with_the_assistant_gets_a_first_user_turn() -> None:
    with Tract.open() as t:
        t.system("Be brief.")
        t.assistant("Hello! How can I help?")
        t.user("Hi")
        params = anthropic(t)
    assert params["messages"][0] == {"role": "user", "content": ANTHROPIC_START}
    assert [m["role"] for m in params["messages"]] == ["user", "assistant", "user"]
    assert params["system"] == "Be brief."


def test_a_context_of_system_messages_only_is_still_a_request() -> None:
    with Tract.open() as t:
        t.system("You greet people.")
        params = anthropic(t)
        openai = t.compile().to_openai()
    assert params["messages"] == [{"role": "user", "content": ANTHROPIC_START}]
    assert openai == [{"role": "system", "content": "You greet people."}]


def test_blank_text_is_not_sent_and_the_final_assistant_text_is_stripped() -> None:
    with Tract.open() as t:
        t.user("Write a haiku")
        t.user("   \n")
        t.assistant("Autumn moonlight -  \n")
        params = anthropic(t)
        openai = t.compile().to_openai()
    assert params["messages"] == [
        {"role": "user", "content": "Write a haiku"},
        {"role": "assistant", "content": "Autumn moonlight -"},
    ]
    assert openai[-1]["content"] == "Autumn moonlight -  \n"  # OpenAI is sent the text exactly


def test_empty_tool_results_are_sent_without_content() -> None:
    with Tract.open() as t:
        t.user("Touch the file")
        t.assistant(tool_calls=[{"id": "c1", "name": "touch", "arguments": {}}])
        t.commit({"type": "dialogue", "role": "tool", "tool_call_id": "c1", "text": " "})
        block = anthropic(t)["messages"][-1]["content"][0]
    assert block == {"type": "tool_result", "tool_use_id": "c1"}


def test_foreign_and_reused_call_ids_are_rewritten_with_their_results() -> None:
    with Tract.open() as t:
        t.user("Weather in Oslo, then Rome")
        for city in ("Oslo", "Rome"):
            # a server that numbers calls per turn reuses "call_1"; another spells ids with '.' and ':'
            t.assistant(
                tool_calls=[
                    {"id": "call_1", "name": "weather", "arguments": {"city": city}},
                    {"id": "functions.weather:0", "name": "weather", "arguments": {"city": city}},
                ]
            )
            for call_id in ("call_1", "functions.weather:0"):
                t.commit({"type": "dialogue", "role": "tool", "tool_call_id": call_id, "text": f"{city}: ok"})
        params = anthropic(t)
        openai_ids = [
            c["id"] for m in t.compile().to_openai() if m["role"] == "assistant" for c in m["tool_calls"]
        ]
    uses = [
        b for m in params["messages"] for b in m["content"] if isinstance(b, dict) and b["type"] == "tool_use"
    ]
    results = [
        b
        for m in params["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b["type"] == "tool_result"
    ]
    assert [u["id"] for u in uses] == ["call_1", "functions_weather_0", "call_1_2", "functions_weather_0_2"]
    assert [r["tool_use_id"] for r in results] == [u["id"] for u in uses]
    assert all(ID.fullmatch(u["id"]) for u in uses)
    assert openai_ids == ["call_1", "functions.weather:0"] * 2  # OpenAI takes the ids as recorded


def test_several_assistant_text_blocks_stay_several_for_openai() -> None:
    """An assistant reply of two text blocks (e.g. around a server tool call) is two OpenAI text parts, not
    one string with the words run together; a single text stays a string."""
    with Tract.open() as t:
        t.user("Search for it")
        t.assistant(["Searching.", "Found it."], tool_calls=[{"id": "c1", "name": "f", "arguments": {}}])
        t.commit({"type": "dialogue", "role": "tool", "tool_call_id": "c1", "text": "ok"})
        t.assistant("Done.")
        sent = t.compile().to_openai()
    assert sent[1]["content"] == [
        {"type": "text", "text": "Searching."},
        {"type": "text", "text": "Found it."},
    ]
    assert sent[1]["tool_calls"][0]["id"] == "c1"
    assert sent[3]["content"] == "Done."
