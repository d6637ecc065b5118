"""The rule checkers of dialect_rules.py can fail: each accepts a known-good request and refuses each known-bad
one (a broken rule, made by one change to the good request) with a message naming the rule."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from .dialect_rules import (
    RuleBroken,
    check_anthropic,
    check_chat,
    check_gemini,
    check_responses,
    sdk_anthropic,
    sdk_chat,
    sdk_gemini,
    sdk_responses,
)

PDF_URL = "data:application/pdf;base64,JVBERi0xLjQK"
PNG_URL = "data:image/png;base64,iVBORw0KGgo="
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}

CHAT_GOOD: dict[str, Any] = {
    "messages": [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look"},
                {"type": "image_url", "image_url": {"url": PNG_URL, "detail": "low"}},
                {"type": "file", "file": {"filename": "a.pdf", "file_data": PDF_URL}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
        {"role": "tool", "tool_call_id": "c1", "content": ""},
        {"role": "assistant", "content": None, "refusal": "I can't."},
    ],
    "tools": [TOOL],
}


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(params: dict[str, Any]) -> None:
        target = params
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return change


def _insert(path: list[Any], index: int, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(params: dict[str, Any]) -> None:
        target = params
        for key in path:
            target = target[key]
        target.insert(index, value)

    return change


_DELETE = object()
USER = {"role": "user", "content": "hi"}

CHAT_BAD = [
    (_set(["messages"], []), "a non-empty list"),
    (_set(["messages", 0, "role"], "model"), "role 'model'"),
    (_set(["messages", 0, "name"], "Ann Smith"), "name matches"),
    (_set(["messages", 0, "name"], "a/b"), "name matches"),
    (_set(["messages", 3, "tool_call_id"], "c9"), "answers no open call"),
    (_insert(["messages"], 4, USER), r"calls \['c1'\] not answered before this user"),
    (_set(["messages", 4], {"role": "tool", "tool_call_id": "c2", "content": "x"}), "answers no open call"),
    (_insert(["messages"], 1, {"role": "tool", "tool_call_id": "c1", "content": "x"}), "not in the run"),
    (_set(["messages", 4, "content"], [{"type": "image_url", "image_url": {"url": PNG_URL}}]), "only text"),
    (_set(["messages", 5, "refusal"], _DELETE), "needs content or tool_calls"),
    (_set(["messages", 2, "tool_calls"], []), "an empty tool_calls list"),
    (_set(["messages", 1, "content"], None), "content is a string or a list"),
    (_set(["messages", 1, "content"], []), "an empty content list"),
    (_set(["messages", 1, "content", 1, "image_url", "url"], "data:image/png;base64,%%"), "image URL"),
    (_set(["messages", 1, "content", 2, "file", "file_data"], PNG_URL), "PDF data: URL"),
    (_set(["messages", 1, "content", 0, "type"], "input_text"), "type 'input_text'"),
    (_set(["messages", 2, "tool_calls", 1, "id"], "c1"), "a unique string id"),
    (_set(["messages", 2, "tool_calls", 0, "function", "name"], "a.b"), "function name"),
    (_set(["messages", 2, "tool_calls", 0, "function", "arguments"], {}), "JSON string"),
    (_set(["messages", 2, "thinking"], "x"), r"unknown keys \['thinking'\]"),
    (_set(["tools", 0, "function", "name"], "bad name"), r"tools\[0\]: name"),
    (_set(["tools"], [TOOL, TOOL]), "names repeat"),
    (_set(["messages"], CHAT_GOOD["messages"][:3]), r"calls \['c1', 'c2'\] never answered"),
]


def test_chat_rules_accept_a_good_request() -> None:
    check_chat(CHAT_GOOD)
    sdk_chat(CHAT_GOOD)
    check_chat({"messages": CHAT_GOOD["messages"][:4]}, open_tail=True)  # a tool run in progress


@pytest.mark.parametrize(("change", "match"), CHAT_BAD)
def test_chat_rules_refuse(change: Callable[[dict[str, Any]], None], match: str) -> None:
    params = copy.deepcopy(CHAT_GOOD)
    change(params)
    with pytest.raises(RuleBroken, match=match):
        check_chat(params)


THINKING = {"type": "thinking", "thinking": "Call f.", "signature": "EqQB"}
ANTHROPIC_GOOD: dict[str, Any] = {
    "system": "Be brief.",
    "messages": [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [
                THINKING,
                {"type": "redacted_thinking", "data": "EmwK"},
                {"type": "text", "text": "Calling."},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "f", "input": {"a": 1}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t2", "content": "two", "is_error": True},
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                        }
                    ],
                },
                {"type": "text", "text": "and?"},
                {"type": "document", "source": {"type": "url", "url": "https://e.x/a.pdf"}, "title": "A"},
            ],
        },
        {"role": "assistant", "content": "Done."},
    ],
    "tools": [
        {"name": "f", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search"},
    ],
}
SHORT = {"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}
RECORDED_THINKING = [THINKING, {"type": "redacted_thinking", "data": "EmwK"}]

ANTHROPIC_BAD = [
    (_set(["messages", 0, "role"], "assistant"), "the first turn is a user turn"),
    (_set(["messages", 0, "role"], "system"), "role user or assistant"),
    (_set(["messages", 0, "content"], ""), "empty content"),
    (_set(["messages", 0, "content"], "  "), "non-whitespace text"),
    (_set(["messages", 3, "content"], "Done. "), "ends in whitespace"),
    (_set(["messages", 0, "content"], [{"type": "tool_result", "tool_use_id": "t1"}]), "answers no tool_use"),
    (_set(["messages", 2, "content"], [{"type": "text", "text": "x"}]), r"answered by \[\] in the next turn"),
    (_insert(["messages", 2, "content"], 0, {"type": "text", "text": "x"}), "come first"),
    (_set(["messages", 2, "content", 1], {"type": "text", "text": "x"}), r"answered by \['t2'\]"),
    (
        _set(
            ["messages", 3, "content"],
            [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
        ),
        "ids repeat",
    ),
    (_set(["messages", 1, "content", 3, "id"], "functions.f:0"), r"\^\[a-zA-Z0-9_-\]\+\$"),
    (_set(["messages", 1, "content", 0, "thinking"], "Call g."), "not sent back unmodified"),
    (_set(["messages", 1, "content", 0], {"type": "text", "text": "x"}), "starts with its thinking"),
    (_set(["messages", 2, "content", 2], THINKING), "a thinking block"),
    (
        _set(
            ["messages", 1, "content", 2], {"type": "image", "source": {"type": "url", "url": "https://e.x"}}
        ),
        "image",
    ),
    (_set(["messages", 2, "content", 1, "content", 0, "source", "media_type"], "image/bmp"), "media_type"),
    (_set(["messages", 2, "content", 0, "content"], " "), "non-blank"),
    (_set(["messages", 2, "content", 0, "tool_call_id"], "t2"), "unknown keys"),
    (_set(["tools", 0, "input_schema"], _DELETE), "input_schema"),
    (_set(["messages", 1, "content", 0, "cache_control"], {"type": "ephemeral"}), "no cache_control"),
    (
        _set(["messages", 0, "content"], [{"type": "text", "text": "hi", "cache_control": {"type": "x"}}]),
        "ephemeral",
    ),
    (
        _set(
            ["system"],
            [SHORT, {"type": "text", "text": "t", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        ),
        "a 1h cache entry after a 5m one",
    ),
    (_set(["system"], [SHORT] * 5), "at most 4 blocks"),
    (_set(["system"], [{"type": "text", "text": " "}]), "non-whitespace"),
    (
        _set(
            ["messages"],
            [
                USER,
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
            ],
        ),
        "never answered",
    ),
]


def test_anthropic_rules_accept_a_good_request() -> None:
    check_anthropic(ANTHROPIC_GOOD, thinking=RECORDED_THINKING)
    sdk_anthropic(ANTHROPIC_GOOD)
    cached = copy.deepcopy(ANTHROPIC_GOOD)  # 1h entries before 5m ones, four in all
    cached["system"] = [
        {"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
        SHORT,
    ]
    cached["tools"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    cached["messages"][2]["content"][0]["cache_control"] = {"type": "ephemeral"}
    check_anthropic(cached, thinking=RECORDED_THINKING)
    sdk_anthropic(cached)
    merged = copy.deepcopy(ANTHROPIC_GOOD)  # consecutive turns of one role are one turn to the API
    merged["messages"][2:3] = [
        {"role": "user", "content": merged["messages"][2]["content"][:2]},
        {"role": "user", "content": "and?"},
    ]
    check_anthropic(merged, thinking=RECORDED_THINKING)
    check_anthropic({"messages": ANTHROPIC_GOOD["messages"][:2]}, open_tail=True)


@pytest.mark.parametrize(("change", "match"), ANTHROPIC_BAD)
def test_anthropic_rules_refuse(change: Callable[[dict[str, Any]], None], match: str) -> None:
    params = copy.deepcopy(ANTHROPIC_GOOD)
    change(params)
    with pytest.raises(RuleBroken, match=match):
        check_anthropic(params, thinking=RECORDED_THINKING)


REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": '{"a"'}
SEARCH = {
    "type": "web_search_call",
    "id": "ws_1",
    "status": "completed",
    "action": {"type": "search", "query": "q"},
}
RESPONSES_GOOD: dict[str, Any] = {
    "instructions": "Be brief.",
    "input": [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Look"},
                {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
                {"type": "input_file", "filename": "a.pdf", "file_data": PDF_URL},
            ],
        },
        REASONING,
        CALL,
        {"type": "function_call", "call_id": "call_2", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_2", "output": "two"},
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": [{"type": "input_text", "text": "one"}],
        },
        SEARCH,
        {"role": "assistant", "content": "Done."},
    ],
    "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": None}],
}
RECORDED_ITEMS = {"rs_1": REASONING, "fc_1": CALL, "ws_1": SEARCH}

RESPONSES_BAD = [
    (_set(["input", 4, "call_id"], "call_9"), "follows no open call"),
    (_set(["input", 5], {"role": "user", "content": "x"}), "no function_call_output for calls"),
    (
        _insert(["input"], 1, {"type": "function_call_output", "call_id": "call_1", "output": "x"}),
        "no open call",
    ),
    (
        _set(["input", 2], {"role": "user", "content": "x"}),
        "reasoning item without its required following item",
    ),
    (_set(["input", 1], {"role": "user", "content": "x"}), "without its required reasoning item 'rs_1'"),
    (_insert(["input"], 2, {"role": "user", "content": "x"}), "reasoning item without its required"),
    (_set(["input", 1, "encrypted_content"], "gAAB"), "not sent verbatim"),
    (_insert(["input"], 7, SEARCH), "duplicate item id 'ws_1'"),
    (_set(["input", 3, "call_id"], "call_1"), "already open"),
    (_set(["input", 0, "content"], []), "content a string or a non-empty list"),
    (_set(["input", 0, "role"], "tool"), "role 'tool'"),
    (_set(["input", 0, "content", 1, "detail"], _DELETE), "detail is required"),
    (_set(["input", 0, "content", 2, "filename"], _DELETE), "needs a filename"),
    (_set(["input", 0, "content", 0, "type"], "text"), "an input part of type 'text'"),
    (_set(["input", 7, "content"], [{"type": "input_text", "text": "x"}]), "assistant parts"),
    (_insert(["input"], 0, {"type": "thinking", "thinking": "x"}), "an input item of type 'thinking'"),
    (_set(["tools", 0, "function"], {"name": "f"}), "unknown keys"),
]


def test_responses_rules_accept_a_good_request() -> None:
    check_responses(RESPONSES_GOOD, recorded=RECORDED_ITEMS, reasoning_of={"fc_1": "rs_1"})
    sdk_responses(RESPONSES_GOOD)
    check_responses({"input": RESPONSES_GOOD["input"][:4]}, open_tail=True)
    with pytest.raises(RuleBroken, match="no function_call_output"):  # open calls before the last user input
        check_responses({"input": [*RESPONSES_GOOD["input"][:4], USER]}, open_tail=True)


@pytest.mark.parametrize(("change", "match"), RESPONSES_BAD)
def test_responses_rules_refuse(change: Callable[[dict[str, Any]], None], match: str) -> None:
    params = copy.deepcopy(RESPONSES_GOOD)
    change(params)
    with pytest.raises(RuleBroken, match=match):
        check_responses(params, recorded=RECORDED_ITEMS, reasoning_of={"fc_1": "rs_1"})


GEMINI_GOOD: dict[str, Any] = {
    "system_instruction": "Be brief.",
    "contents": [
        {
            "role": "user",
            "parts": [{"text": "Look"}, {"inline_data": {"mime_type": "image/png", "data": b"x"}}],
        },
        {
            "role": "model",
            "parts": [
                {"text": "plan", "thought": True},
                {"function_call": {"name": "f", "args": {}}, "thought_signature": b"sig"},
                {"function_call": {"name": "g", "args": {}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"function_response": {"name": "f", "response": {"output": "one"}}},
                {"function_response": {"name": "g", "response": {"output": "two"}}},
            ],
        },
        {"role": "model", "parts": [{"text": "Done."}]},
    ],
    "tools": [{"function_declarations": [{"name": "f", "parameters_json_schema": {"type": "object"}}]}],
}

GEMINI_BAD = [
    (_set(["contents", 0, "role"], "assistant"), "role 'assistant'"),
    (_set(["contents", 0, "parts"], []), "a non-empty parts list"),
    (
        _set(["contents", 2, "parts"], [{"function_response": {"name": "f", "response": {}}}]),
        "not all answered",
    ),
    (_insert(["contents"], 2, {"role": "user", "parts": [{"text": "x"}]}), "not all answered"),
    (_set(["contents", 2, "role"], "model"), "function responses are a user turn"),
    (
        _set(["contents", 3, "parts", 0], {"function_response": {"name": "f", "response": {}}}),
        "are the user's",
    ),
    (
        _set(["contents", 0, "parts", 0, "function_response"], {"name": "h", "response": {}}),
        "exactly one kind",
    ),
    (
        _set(["contents", 0, "parts", 1], {"function_response": {"name": "f", "response": {}}}),
        "no call before",
    ),
    (_set(["contents", 0, "parts", 0, "thought_signature"], b"sig"), "thought_signature"),
    (_set(["contents", 0, "parts", 0, "thought"], True), "thought parts are the model's"),
    (_set(["tools", 0, "function_declarations", 0, "parameters"], {}), "one of parameters"),
    (_set(["messages"], []), "unknown keys"),
    (_set(["contents", 0, "role"], "model"), "comes immediately after a user turn"),
    (_set(["contents", 1, "parts", 1, "thought_signature"], b"sif"), "not sent back byte for byte"),
    (
        _insert(["contents", 2, "parts"], 0, {"function_response": {"name": "f", "response": {}}}),
        "the number of function response parts",
    ),
]


def test_gemini_rules_accept_a_good_request() -> None:
    check_gemini(GEMINI_GOOD, signatures=[b"sig"])
    sdk_gemini(GEMINI_GOOD | {"system_instruction": {"parts": [{"text": "Be brief."}]}})
    check_gemini({"contents": GEMINI_GOOD["contents"][:2]}, open_tail=True)


@pytest.mark.parametrize(("change", "match"), GEMINI_BAD)
def test_gemini_rules_refuse(change: Callable[[dict[str, Any]], None], match: str) -> None:
    params = copy.deepcopy(GEMINI_GOOD)
    change(params)
    with pytest.raises(RuleBroken, match=match):
        check_gemini(params, signatures=[b"sig"])


@pytest.mark.parametrize(
    ("check", "params", "match"),
    [
        (sdk_chat, {"messages": [{"role": "model", "content": "x"}]}, "refuses"),
        (
            sdk_chat,
            {"messages": [{"role": "user", "content": "x", "thinking": "y"}]},
            r"messages\[0\]\.thinking",
        ),
        (sdk_anthropic, {"messages": [{"role": "user", "content": [{"type": "tool_use"}]}]}, "refuses"),
        (sdk_anthropic, {"messages": [USER], "instructions": "x"}, r"\.instructions"),
        (sdk_responses, {"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "refuses"),
        (sdk_responses, {"input": [REASONING | {"signature": "x"}]}, r"input\[0\]\.signature"),
        (
            sdk_gemini,
            {"contents": [{"role": "user", "parts": [{"text": "x", "bogus": 1}]}]},
            r"contents\[0\]",
        ),
        (sdk_gemini, {"contents": [], "tools": [{"functions": []}]}, r"tools\[0\]"),
    ],
)
def test_sdk_types_refuse(
    check: Callable[[dict[str, Any]], None], params: dict[str, Any], match: str
) -> None:
    with pytest.raises(RuleBroken, match=match):
        check(params)
