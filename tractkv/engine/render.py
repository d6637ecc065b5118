"""Provider shapes: the one module that knows how OpenAI chat completions and Anthropic messages spell
messages, tools and tool calls.

Requests: compiled :class:`Message` values and stored tool schemas (either provider's shape) rendered for an
API (:func:`openai_params`, :func:`anthropic_params`). Replies: an API's assistant message read back as payload
parts (text, thinking, refusal) and :class:`ToolCall` values (:func:`openai_reply`, :func:`anthropic_reply`),
its usage normalized (:func:`openai_usage`, :func:`anthropic_usage`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from tractkv.errors import MalformedResponse

from .content import Message, ToolCall


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


def tool_to_openai(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A tool schema in OpenAI's shape (``{"type": "function", "function": {...}}``), converted if needed."""
    if schema.get("type") == "function" and isinstance(schema.get("function"), Mapping):
        return dict(schema)
    function: dict[str, Any] = {"name": schema["name"]}
    if schema.get("description") is not None:
        function["description"] = schema["description"]
    function["parameters"] = schema.get("input_schema") or {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


def tool_to_anthropic(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A tool schema in Anthropic's shape (``{"name", "description", "input_schema"}``), converted if needed."""
    if not (schema.get("type") == "function" and isinstance(schema.get("function"), Mapping)):
        return dict(schema)
    function = schema["function"]
    out: dict[str, Any] = {"name": function["name"]}
    if function.get("description") is not None:
        out["description"] = function["description"]
    out["input_schema"] = function.get("parameters") or {"type": "object", "properties": {}}
    return out


def openai_params(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Keyword arguments for ``client.chat.completions.create``: messages, and tools when there are any."""
    params: dict[str, Any] = {"messages": messages_to_openai(messages)}
    if tools:
        params["tools"] = [tool_to_openai(t) for t in tools]
    return params


def anthropic_params(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Keyword arguments for ``client.messages.create``: system (when set), messages, tools (when any)."""
    rendered = messages_to_anthropic(messages)
    params: dict[str, Any] = {"messages": rendered["messages"]}
    if rendered["system"]:
        params["system"] = rendered["system"]
    if tools:
        params["tools"] = [tool_to_anthropic(t) for t in tools]
    return params


# --- provider replies: an assistant message as parts and engine tool calls; usage normalized -----------


def openai_tool_call(raw: object, index: int) -> ToolCall:
    """One OpenAI tool call (``{"id", "type": "function", "function": {"name", "arguments"}}``, arguments a
    JSON string or an object) as a :class:`ToolCall`; the flat ``{"id", "name", "arguments"}`` form and
    :class:`ToolCall` values pass too. Empty arguments (``""`` or missing) mean ``{}``.

    Raises:
        MalformedResponse: not an object, no name or id, or arguments that are not a JSON object.
    """
    if isinstance(raw, ToolCall):
        return raw
    if not isinstance(raw, Mapping):
        raise MalformedResponse(f"tool_calls[{index}] is not an object")
    function = raw["function"] if isinstance(raw.get("function"), Mapping) else raw
    name, arguments = function.get("name"), function.get("arguments")
    if not isinstance(name, str) or not name:
        raise MalformedResponse(f"tool_calls[{index}] has no function name")
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        arguments = {}
    elif isinstance(arguments, str):  # OpenAI sends arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise MalformedResponse(f"tool_calls[{index}] ({name}) arguments are not JSON: {exc}") from None
        except RecursionError:  # hostile nesting ("[[[[..."): refused like any other bad JSON
            raise MalformedResponse(f"tool_calls[{index}] ({name}) arguments are nested too deeply") from None
    if not isinstance(arguments, Mapping):
        raise MalformedResponse(f"tool_calls[{index}] ({name}) arguments must be a JSON object")
    call_id = raw.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise MalformedResponse(f"tool_calls[{index}] ({name}) has no id")
    return ToolCall(id=call_id, name=name, arguments=dict(arguments))


def reply_provider(body: Mapping[str, Any]) -> str | None:
    """Which provider's reply ``body`` is: ``"openai"`` for a chat completion (``object: "chat.completion"``
    or a ``choices`` list), ``"anthropic"`` for a message (``type: "message"`` with a ``content`` list), None
    for anything else (a streaming chunk, a Responses API object, an error body)."""
    if body.get("object") == "chat.completion" or (
        "object" not in body and isinstance(body.get("choices"), list)
    ):
        return "openai"
    if body.get("type") == "message" and isinstance(body.get("content"), list):
        return "anthropic"
    return None


def reply_text(parts: Sequence[Mapping[str, Any]]) -> str:
    """The text of a reply's parts: its ``text`` parts joined (what a payload's ``text`` holds)."""
    return "".join(str(p["text"]) for p in parts if p.get("type") == "text")


def _string_field(block: Mapping[str, Any], field: str, where: str) -> str:
    value = block.get(field)
    if not isinstance(value, str):
        raise MalformedResponse(f"{where} {block.get('type')} block has no {field!r} string")
    return value


def openai_reply(message: Mapping[str, Any]) -> tuple[tuple[dict[str, Any], ...], tuple[ToolCall, ...]]:
    """The parts and tool calls of an assistant message in OpenAI's shape.

    Parts, in order: the ``content`` (a string, or a list of ``text`` / ``output_text`` / ``refusal`` parts,
    as some OpenAI-compatible servers send) as ``{"type": "text", "text"}`` parts (empty text left out), then
    the message's ``refusal`` as ``{"type": "refusal", "refusal"}``. Other fields (``audio``,
    ``annotations``, the deprecated ``function_call``) are not read.

    Raises:
        MalformedResponse: content that is neither text, None nor a list of parts; a refusal that is not a
            string; ``tool_calls`` not a list, or a malformed call.
    """
    parts: list[dict[str, Any]] = []
    content = message.get("content")
    if isinstance(content, str):
        if content:
            parts.append({"type": "text", "text": content})
    elif isinstance(content, list):
        for index, part in enumerate(content):
            if not isinstance(part, Mapping):
                raise MalformedResponse(f"content[{index}] is not an object")
            if part.get("type") in ("text", "output_text"):
                text = _string_field(part, "text", f"content[{index}]")
                if text:
                    parts.append({"type": "text", "text": text})
            elif part.get("type") == "refusal":
                parts.append(
                    {"type": "refusal", "refusal": _string_field(part, "refusal", f"content[{index}]")}
                )
    elif content is not None:
        raise MalformedResponse(f"message content must be text, not {type(content).__name__}")
    refusal = message.get("refusal")
    if refusal is not None:
        if not isinstance(refusal, str):
            raise MalformedResponse(f"message refusal must be a string, not {type(refusal).__name__}")
        if refusal:
            parts.append({"type": "refusal", "refusal": refusal})
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise MalformedResponse("tool_calls must be a list")
    return tuple(parts), tuple(openai_tool_call(call, index) for index, call in enumerate(calls))


def anthropic_reply(
    blocks: object,
) -> tuple[tuple[dict[str, Any], ...], tuple[ToolCall, ...], tuple[dict[str, Any], ...]]:
    """The parts, tool calls and omitted blocks of an Anthropic message's ``content``.

    Parts keep the blocks' order: ``text`` (empty text left out; citations are not kept), ``thinking`` as
    ``{"type": "thinking", "thinking", "signature"}`` and ``redacted_thinking`` as ``{"type":
    "redacted_thinking", "data"}``, exactly as sent (the API checks them when they come back). ``tool_use``
    blocks are the tool calls. Any other block (server tool use and results, ...) has no place in a message:
    it is returned as the third item (JSON values only) for the caller to keep elsewhere.

    Raises:
        MalformedResponse: ``blocks`` is not a list, or a block of a known type has the wrong shape.
    """
    if not isinstance(blocks, list):
        raise MalformedResponse("a message needs a 'content' list of blocks")
    parts: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    omitted: list[dict[str, Any]] = []
    for index, block in enumerate(blocks):
        if not isinstance(block, Mapping):
            raise MalformedResponse(f"content[{index}] is not an object")
        kind, where = block.get("type"), f"content[{index}]"
        if kind == "text":
            text = _string_field(block, "text", where)
            if text:
                parts.append({"type": "text", "text": text})
        elif kind == "thinking":
            parts.append(
                {
                    "type": "thinking",
                    "thinking": _string_field(block, "thinking", where),
                    "signature": _string_field(block, "signature", where),
                }
            )
        elif kind == "redacted_thinking":
            parts.append({"type": "redacted_thinking", "data": _string_field(block, "data", where)})
        elif kind == "tool_use":
            call_id, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise MalformedResponse(f"{where} tool_use block needs string 'id' and 'name'")
            if not isinstance(arguments, Mapping):
                raise MalformedResponse(f"{where} tool_use 'input' must be an object")
            calls.append(ToolCall(id=call_id, name=name, arguments=dict(arguments)))
        else:
            omitted.append(json_values(block))
    return tuple(parts), tuple(calls), tuple(omitted)


def openai_usage(usage: object) -> dict[str, Any] | None:
    """A chat completion's ``usage``, normalized (None when there is none).

    The provider's own fields are kept (JSON values; None values left out), and added: ``input_tokens``
    (``prompt_tokens``, cached tokens included), ``output_tokens`` (``completion_tokens``, reasoning
    included) and, when reported, ``cache_read_input_tokens`` (``prompt_tokens_details.cached_tokens``) and
    ``reasoning_tokens`` (``completion_tokens_details.reasoning_tokens``).

    Raises:
        MalformedResponse: usage that is not an object, or without non-negative integer token counts.
    """
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        raise MalformedResponse(f"usage must be an object, not {type(usage).__name__}")
    out = json_values(usage)
    out["input_tokens"] = _count(usage, ("prompt_tokens", "input_tokens"))
    out["output_tokens"] = _count(usage, ("completion_tokens", "output_tokens"))
    for details, field, name in (
        ("prompt_tokens_details", "cached_tokens", "cache_read_input_tokens"),
        ("completion_tokens_details", "reasoning_tokens", "reasoning_tokens"),
    ):
        value = out.get(details, {}).get(field) if isinstance(out.get(details), dict) else None
        if _is_count(value) and name not in out:
            out[name] = value
    return out


def anthropic_usage(usage: object) -> dict[str, Any] | None:
    """A message's ``usage``, normalized (None when there is none): the provider's own fields (JSON values;
    None values left out), ``input_tokens`` and ``output_tokens`` checked. Anthropic's ``input_tokens`` counts
    the uncached input only; ``cache_read_input_tokens`` / ``cache_creation_input_tokens`` are kept as sent.

    Raises:
        MalformedResponse: usage that is not an object, or without non-negative integer token counts.
    """
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        raise MalformedResponse(f"usage must be an object, not {type(usage).__name__}")
    out = json_values(usage)
    out["input_tokens"] = _count(usage, ("input_tokens",))
    out["output_tokens"] = _count(usage, ("output_tokens",))
    return out


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _count(usage: Mapping[str, Any], names: tuple[str, ...]) -> int:
    for name in names:
        value = usage.get(name)
        if value is not None:
            if not _is_count(value):
                raise MalformedResponse(f"usage.{name} must be a non-negative integer, not {value!r}")
            return int(value)
    raise MalformedResponse(f"usage has no {' or '.join(names)} count")


def json_values(value: Mapping[str, Any], depth: int = 8) -> dict[str, Any]:
    """A copy of ``value`` holding only JSON values (str keys; str, int, finite float, bool, lists, objects),
    None values and anything else left out, nesting cut at ``depth`` (a provider's usage and blocks are
    shallow; this keeps hostile input from reaching the store's encoder)."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        kept = _json_value(item, depth)
        if isinstance(key, str) and kept is not _DROP:
            out[key] = kept
    return out


_DROP = object()


def _json_value(value: object, depth: int) -> Any:
    if isinstance(value, str | bool | int) or (isinstance(value, float) and math.isfinite(value)):
        return value
    if depth <= 0:
        return _DROP
    if isinstance(value, Mapping):
        return json_values(value, depth - 1)
    if isinstance(value, list | tuple):
        items = (_json_value(v, depth - 1) for v in value)
        return [v for v in items if v is not _DROP]
    return _DROP
