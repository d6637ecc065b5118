"""Render compiled messages for provider APIs (OpenAI chat completions, Anthropic messages)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .content import Message


def messages_to_openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """OpenAI chat messages: ``tool_calls`` on assistant messages, ``role: "tool"`` results."""
    out: list[dict[str, Any]] = []
    for message in messages:
        entry: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.role == "tool":
            entry["tool_call_id"] = message.tool_call_id
        elif message.name is not None and message.role in ("user", "assistant", "system"):
            entry["name"] = message.name
        if message.tool_calls:
            entry["content"] = message.content or None
            entry["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":")),
                    },
                }
                for call in message.tool_calls
            ]
        out.append(entry)
    return out


def messages_to_anthropic(messages: Sequence[Message]) -> dict[str, Any]:
    """``{"system": str, "messages": [...]}`` for Anthropic.

    System messages (wherever they are) are joined into ``system``; tool calls become ``tool_use`` blocks and
    tool results ``tool_result`` blocks in a user turn; consecutive turns of one role are merged into one turn
    of content blocks, as the API expects tool results for one assistant turn to arrive together. Within a
    user turn the ``tool_result`` blocks come first (the API requires them right after the ``tool_use`` turn),
    followed by the turn's text in its original order. A message with no text and no tool calls has no block
    to send (the API rejects empty text blocks) and is left out of this rendering only.
    """
    system: list[str] = []
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for message in messages:
        if message.role == "system":
            system.append(message.content)
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks: list[dict[str, Any]] = []
        if message.role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content,
            }
            if message.is_error:
                block["is_error"] = True
            blocks.append(block)
        else:
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            blocks.extend(
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in message.tool_calls
            )
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    rendered: list[dict[str, Any]] = []
    for role, blocks in turns:
        if role == "user":
            blocks.sort(key=lambda b: b["type"] != "tool_result")  # stable: results first, text after
        simple = len(blocks) == 1 and blocks[0]["type"] == "text"
        rendered.append({"role": role, "content": blocks[0]["text"] if simple else blocks})
    return {"messages": rendered, "system": "\n\n".join(system)}


def tool_to_openai(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool schema in OpenAI's shape (``{"type": "function", "function": {...}}``), converted if needed."""
    if schema.get("type") == "function" and isinstance(schema.get("function"), dict):
        return schema
    function: dict[str, Any] = {"name": schema["name"]}
    if schema.get("description") is not None:
        function["description"] = schema["description"]
    function["parameters"] = schema.get("input_schema") or {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


def tool_to_anthropic(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool schema in Anthropic's shape (``{"name", "description", "input_schema"}``), converted if needed."""
    if not (schema.get("type") == "function" and isinstance(schema.get("function"), dict)):
        return schema
    function = schema["function"]
    out: dict[str, Any] = {"name": function["name"]}
    if function.get("description") is not None:
        out["description"] = function["description"]
    out["input_schema"] = function.get("parameters") or {"type": "object", "properties": {}}
    return out


def openai_params(messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Keyword arguments for ``client.chat.completions.create``: messages, and tools when there are any."""
    params: dict[str, Any] = {"messages": messages_to_openai(messages)}
    if tools:
        params["tools"] = [tool_to_openai(t) for t in tools]
    return params


def anthropic_params(messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Keyword arguments for ``client.messages.create``: system (when set), messages, tools (when any)."""
    rendered = messages_to_anthropic(messages)
    params: dict[str, Any] = {"messages": rendered["messages"]}
    if rendered["system"]:
        params["system"] = rendered["system"]
    if tools:
        params["tools"] = [tool_to_anthropic(t) for t in tools]
    return params
