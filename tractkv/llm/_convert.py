"""Request messages: OpenAI-shaped or neutral dicts in, what each provider's API takes out."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tractkv.engine.content import Message, ToolCall
from tractkv.errors import InvalidInput, MalformedResponse

from .protocol import _tool_call

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


def _call(raw: object, where: str, index: int) -> ToolCall:
    try:
        return _tool_call(raw, index)
    except MalformedResponse as exc:  # the caller's input, not a model's reply
        raise InvalidInput(f"{where}: {exc.reason}") from None


def _text(content: object, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    raise InvalidInput(f"{where}: content must be text (or a list of text parts)")


def openai_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages for ``/chat/completions``: OpenAI-shaped ones pass through; neutral tool calls are wrapped.

    Raises:
        InvalidInput: a message that is not a dict with a role, or a malformed tool call.
    """
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise InvalidInput(f"messages[{index}] must be a dict with a role in {sorted(ROLES)}")
        entry = dict(message)
        entry.pop("is_error", None)  # neutral-only field: chat completions has no error flag on tool results
        if entry.get("tool_calls"):
            calls = [_call(c, f"messages[{index}]", i) for i, c in enumerate(entry["tool_calls"])]
            entry["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": json.dumps(c.arguments, ensure_ascii=False, separators=(",", ":")),
                    },
                }
                for c in calls
            ]
        out.append(entry)
    return out


def neutral_messages(messages: Sequence[dict[str, Any]]) -> list[Message]:
    """OpenAI-shaped or neutral message dicts as :class:`Message` values (for the Anthropic renderer).

    ``developer`` counts as ``system``; content given as a list of text parts is joined.

    Raises:
        InvalidInput: a message that is not a dict with a known role, non-text content, a malformed tool
            call, or a tool result without ``tool_call_id``.
    """
    out: list[Message] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise InvalidInput(f"{where} must be a dict with a role in {sorted(ROLES)}")
        role = "system" if message["role"] == "developer" else str(message["role"])
        calls = tuple(_call(c, where, i) for i, c in enumerate(message.get("tool_calls") or ()))
        call_id = message.get("tool_call_id")
        if role == "tool" and (not isinstance(call_id, str) or not call_id):
            raise InvalidInput(f"{where}: a tool message needs a tool_call_id")
        name = message.get("name")
        out.append(
            Message(
                role=role,
                content=_text(message.get("content"), where),
                name=name if isinstance(name, str) else None,
                tool_calls=calls,
                tool_call_id=call_id if role == "tool" else None,
                is_error=bool(message.get("is_error", False)),
            )
        )
    return out
