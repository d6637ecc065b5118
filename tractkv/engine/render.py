"""Provider shapes: the one module that knows how OpenAI chat completions and Anthropic messages spell
messages, tools and tool calls.

Requests: compiled :class:`Message` values and stored tool definitions (any shape :mod:`.toolsets`
accepts) rendered for an API (:func:`openai_params`, :func:`anthropic_params`). Replies: an API's assistant
message read back as text and :class:`ToolCall` values (:func:`openai_reply`, :func:`anthropic_reply`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tractkv.errors import MalformedResponse

from .content import Message, ToolCall
from .toolsets import ANTHROPIC, ANTHROPIC_SERVER, EMPTY_PARAMETERS, read_tool


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


def tool_to_openai(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """A tool definition (any shape :func:`~tractkv.engine.toolsets.read_tool` accepts) as an OpenAI chat
    tool ``{"type": "function", "function": {"name", "description", "parameters", "strict"}}``, or None for
    an Anthropic server tool, which OpenAI has no equivalent for.

    ``description`` and ``strict`` are sent when given (``strict`` only as a boolean); ``parameters`` is always
    sent (an empty object schema when the definition has none). Anthropic-only fields (``cache_control``...)
    and MCP's ``title``, ``outputSchema``, ``annotations`` are not sent.

    Raises:
        InvalidInput: ``schema`` is not an accepted tool definition.
    """
    spec = read_tool(schema)
    if spec.shape == ANTHROPIC_SERVER:
        return None
    function: dict[str, Any] = {"name": spec.name}
    if spec.description is not None:
        function["description"] = spec.description
    function["parameters"] = dict(spec.parameters) if spec.parameters is not None else dict(EMPTY_PARAMETERS)
    if spec.strict is not None:
        function["strict"] = spec.strict
    return {"type": "function", "function": function}


def tool_to_anthropic(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A tool definition (any shape :func:`~tractkv.engine.toolsets.read_tool` accepts) as an Anthropic tool.

    An Anthropic tool (custom or server) is sent as given (a custom tool without ``input_schema`` gets an
    empty object schema). Other shapes become ``{"name", "description", "input_schema", "strict"}``:
    ``description`` when given, ``strict`` when a boolean (the Messages API's tool ``strict``); MCP's
    ``title``, ``outputSchema`` and ``annotations`` are not sent (Anthropic refuses unknown fields).

    Raises:
        InvalidInput: ``schema`` is not an accepted tool definition.
    """
    spec = read_tool(schema)
    if spec.shape == ANTHROPIC_SERVER:
        return dict(spec.fields)
    if spec.shape == ANTHROPIC:
        out = dict(spec.fields)
        out.setdefault("input_schema", dict(EMPTY_PARAMETERS))
        return out
    out = {"name": spec.name}
    if spec.description is not None:
        out["description"] = spec.description
    out["input_schema"] = dict(spec.parameters) if spec.parameters is not None else dict(EMPTY_PARAMETERS)
    if spec.strict is not None:
        out["strict"] = spec.strict
    return out


def openai_params(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Keyword arguments for ``client.chat.completions.create``: messages, and tools when there are any.

    Anthropic server tools are left out (OpenAI has no equivalent); ``tools`` is omitted when none is left.

    Raises:
        InvalidInput: a tool is not an accepted tool definition.
    """
    params: dict[str, Any] = {"messages": messages_to_openai(messages)}
    rendered = [r for r in (tool_to_openai(t) for t in tools) if r is not None]
    if rendered:
        params["tools"] = rendered
    return params


def anthropic_params(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Keyword arguments for ``client.messages.create``: system (when set), messages, tools (when any).

    Raises:
        InvalidInput: a tool is not an accepted tool definition.
    """
    rendered = messages_to_anthropic(messages)
    params: dict[str, Any] = {"messages": rendered["messages"]}
    if rendered["system"]:
        params["system"] = rendered["system"]
    if tools:
        params["tools"] = [tool_to_anthropic(t) for t in tools]
    return params


# --- provider replies: each API's assistant message as text and engine tool calls -------------------------


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
    if not isinstance(arguments, Mapping):
        raise MalformedResponse(f"tool_calls[{index}] ({name}) arguments must be a JSON object")
    call_id = raw.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise MalformedResponse(f"tool_calls[{index}] ({name}) has no id")
    return ToolCall(id=call_id, name=name, arguments=dict(arguments))


def openai_text(content: object) -> str:
    """An OpenAI message's ``content`` as text: a string, None (""), or a list of parts (text parts joined;
    some OpenAI-compatible servers answer with parts).

    Raises:
        MalformedResponse: any other value.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(part, Mapping) for part in content):
        return "".join(str(p.get("text", "")) for p in content if p.get("type") in ("text", "output_text"))
    raise MalformedResponse(f"message content must be text, not {type(content).__name__}")


def openai_reply(message: Mapping[str, Any]) -> tuple[str, tuple[ToolCall, ...]]:
    """The text and tool calls of an assistant message in OpenAI's shape (``content``, ``tool_calls``).

    Raises:
        MalformedResponse: content that is not text, ``tool_calls`` not a list, or a malformed call.
    """
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise MalformedResponse("tool_calls must be a list")
    text = openai_text(message.get("content"))
    return text, tuple(openai_tool_call(call, index) for index, call in enumerate(calls))


def anthropic_reply(blocks: object) -> tuple[str, tuple[ToolCall, ...]]:
    """The text (``text`` blocks joined) and tool calls (``tool_use`` blocks) of an Anthropic message's
    ``content``. Other block types (thinking, server tools) carry neither and are skipped.

    Raises:
        MalformedResponse: ``blocks`` is not a list, or a text / tool_use block is of the wrong shape.
    """
    if not isinstance(blocks, list):
        raise MalformedResponse("a message needs a 'content' list of blocks")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for index, block in enumerate(blocks):
        if not isinstance(block, Mapping):
            raise MalformedResponse(f"content[{index}] is not an object")
        if block.get("type") == "text":
            if not isinstance(block.get("text"), str):
                raise MalformedResponse(f"content[{index}] text block has no 'text' string")
            texts.append(block["text"])
        elif block.get("type") == "tool_use":
            call_id, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise MalformedResponse(f"content[{index}] tool_use block needs string 'id' and 'name'")
            if not isinstance(arguments, Mapping):
                raise MalformedResponse(f"content[{index}] tool_use 'input' must be an object")
            calls.append(ToolCall(id=call_id, name=name, arguments=dict(arguments)))
    return "".join(texts), tuple(calls)
