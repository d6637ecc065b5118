"""Acceptance: every accepted tool shape goes through the official openai and anthropic SDKs as each provider
expects it (exact JSON bodies on the loopback recorder)."""

from __future__ import annotations

from typing import Any

import anthropic
import openai

from tractkv import Tract

from .conftest import Recorder, anthropic_message, openai_completion


def params(field: str) -> dict[str, Any]:
    return {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}


OPENAI_CHAT = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather",
        "parameters": params("city"),
        "strict": True,
    },
}
RESPONSES = {
    "type": "function",
    "name": "get_time",
    "description": "Local time",
    "parameters": params("tz"),
    "strict": None,
}
ANTHROPIC = {
    "name": "search_docs",
    "description": "Search the docs",
    "input_schema": params("query"),
    "cache_control": {"type": "ephemeral"},
}
SERVER = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
MCP = {
    "name": "read_file",
    "title": "Read a file",
    "description": "Read a file by path",
    "inputSchema": params("path"),
    "outputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    "annotations": {"readOnlyHint": True},
}
BARE = {"type": "function", "function": {"name": "ping"}}  # no description, no parameters
LEGACY = {"name": "lookup", "parameters": params("key")}  # a bare function definition (legacy `functions`)
ALL = [OPENAI_CHAT, RESPONSES, ANTHROPIC, SERVER, MCP, BARE, LEGACY]
EMPTY = {"type": "object", "properties": {}}

EXPECTED_OPENAI = [
    OPENAI_CHAT,
    {
        "type": "function",
        "function": {"name": "get_time", "description": "Local time", "parameters": params("tz")},
    },
    {
        "type": "function",
        "function": {"name": "search_docs", "description": "Search the docs", "parameters": params("query")},
    },
    {
        "type": "function",
        "function": {"name": "read_file", "description": "Read a file by path", "parameters": params("path")},
    },
    {"type": "function", "function": {"name": "ping", "parameters": EMPTY}},
    {"type": "function", "function": LEGACY},
]
EXPECTED_ANTHROPIC = [
    {"name": "get_weather", "description": "Weather", "input_schema": params("city"), "strict": True},
    {"name": "get_time", "description": "Local time", "input_schema": params("tz")},
    ANTHROPIC,
    SERVER,
    {"name": "read_file", "description": "Read a file by path", "input_schema": params("path")},
    {"name": "ping", "input_schema": EMPTY},
    {"name": "lookup", "input_schema": params("key")},
]


def tract_with(tools: list[dict[str, Any]]) -> Tract:
    t = Tract.open()
    t.system("You are helpful.")
    t.user("Help me.", tools=tools)
    return t


def test_every_tool_shape_reaches_openai_as_a_chat_function(
    recorder: Recorder, openai_sdk: openai.OpenAI
) -> None:
    recorder.reply(openai_completion("ok"))
    with tract_with(ALL) as t:
        openai_sdk.chat.completions.create(model="m", **t.compile().to_openai_params())
    [request] = recorder.requests
    assert request.body["tools"] == EXPECTED_OPENAI  # the Anthropic server tool is left out


def test_every_tool_shape_reaches_anthropic_as_a_tool(
    recorder: Recorder, anthropic_sdk: anthropic.Anthropic
) -> None:
    recorder.reply(anthropic_message())
    with tract_with(ALL) as t:
        anthropic_sdk.messages.create(model="m", max_tokens=10, **t.compile().to_anthropic_params())
    [request] = recorder.requests
    assert request.body["tools"] == EXPECTED_ANTHROPIC


def test_only_server_tools_send_openai_no_tools_and_anthropic_all(
    recorder: Recorder, openai_sdk: openai.OpenAI, anthropic_sdk: anthropic.Anthropic
) -> None:
    code = {"type": "code_execution_20250825", "name": "code_execution"}
    recorder.reply(openai_completion("ok"))
    recorder.reply(anthropic_message())
    with tract_with([SERVER, code]) as t:
        ctx = t.compile()
        openai_sdk.chat.completions.create(model="m", **ctx.to_openai_params())
        anthropic_sdk.messages.create(model="m", max_tokens=10, **ctx.to_anthropic_params())
    sent_openai, sent_anthropic = recorder.bodies
    assert "tools" not in sent_openai
    assert sent_anthropic["tools"] == [SERVER, code]
