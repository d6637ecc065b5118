"""Replies that came through another framework, read into the fields of an
:class:`~tractkv.llm.protocol.LLMResponse` (which :meth:`~tractkv.llm.protocol.LLMResponse.from_provider` builds).

LangChain's ``AIMessage`` / ``AIMessageChunk`` (the object, its ``model_dump()``, a dict of that shape such as
``{"type": "ai", "content": ...}``, or ``messages_to_dict``'s ``{"type": "ai", "data": {...}}``), recognized by
its shape: nothing of LangChain is imported, here or at
``import tractkv``. (A LiteLLM ``ModelResponse`` is a chat completion: the OpenAI reader reads its
``thinking_blocks`` and ``reasoning_content``.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tractkv.engine.content import (
    ToolCall,
    anthropic_block_parts,
    anthropic_call_order,
    check_json,
    json_values,
    normalized_usage,
    parse_arguments,
    reply_text,
)
from tractkv.errors import ContentError, MalformedResponse

LANGCHAIN_AI_TYPES = ("ai", "AIMessageChunk")
"""The ``type`` of a LangChain AI message's dump (``AIMessage``, ``AIMessageChunk``)."""
_SKIPPED_KWARGS = {"tool_calls", "function_call", "refusal", "reasoning_content"}  # read, or the calls again


def langchain_body(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The AI message ``body`` holds when it is a LangChain message's dump (``messages_to_dict``'s wrapper
    unwrapped), else None."""
    data = body.get("data")
    if body.get("type") in LANGCHAIN_AI_TYPES and isinstance(data, Mapping) and "content" in data:
        body = data  # messages_to_dict: {"type": "ai", "data": {...}}
    if body.get("type") in LANGCHAIN_AI_TYPES and "content" in body:
        return body
    return None


def langchain_reply(message: Mapping[str, Any]) -> dict[str, Any]:
    """A LangChain AI message's dump (:func:`langchain_body`) as the keyword arguments of an ``LLMResponse``
    (``text``, ``tool_calls``, ``parts``, ``model``, ``finish_reason``, ``usage``, ``omitted_blocks``).

    ``content``: a string, or a list of blocks in order: ``text`` (its Anthropic ``citations`` kept on the part;
    a block with OpenAI ``annotations`` is also kept whole in :attr:`~LLMResponse.omitted_blocks`), Anthropic's
    server tool blocks and ``tool_use`` places as the Anthropic reader keeps them (``anthropic_block`` /
    ``anthropic_call`` parts, :func:`~tractkv.engine.content.anthropic_block_parts`), ``thinking`` (Anthropic's, with
    its ``signature``) and the standard ``reasoning`` block (its signature at ``signature`` or
    ``extras.signature``) as signed thinking, unsigned ones as ``reasoning`` text, ``redacted_thinking``; a
    Responses ``reasoning`` item (``id`` and ``summary``) as a ``responses_item`` part; ``tool_use`` /
    ``tool_call`` blocks are the message's ``tool_calls`` (read from there); any other block (an image a model
    made, ...) is kept in ``omitted_blocks`` as ``{"type": "langchain_block", "block"}`` (an assistant message
    holds no image). ``additional_kwargs``: ``refusal`` as a refusal part, ``reasoning_content`` as reasoning
    when the content has none, the rest kept in ``omitted_blocks``.

    Tool calls: ``tool_calls`` (``name``, ``args`` dict, ``id``); each of ``invalid_tool_calls`` as a call
    whose ``args`` string is kept exactly (``invalid_arguments``; one without a name or id cannot be paired
    with a result and is kept in ``omitted_blocks`` instead); for an ``AIMessageChunk``, its
    ``tool_call_chunks`` when each has a name and id (their ``args`` strings, exactly as streamed, rather than
    LangChain's partial-JSON repair of them). ``usage_metadata``: ``input_tokens``, ``output_tokens``,
    ``total_tokens``, ``input_token_details.cache_read`` / ``cache_creation`` (also as
    ``cache_read_input_tokens`` / ``cache_creation_input_tokens``), ``output_token_details.reasoning`` (as
    ``reasoning_tokens``). ``response_metadata``: ``model_name`` (or ``model``) and ``finish_reason`` (or
    Anthropic's ``stop_reason``).

    Raises:
        MalformedResponse: content neither a string nor a list; a block of a known type with the wrong shape;
            a tool call without a name or an id, or whose args are not an object; usage without token counts.
    """
    calls, dropped = _calls(message)
    parts, omitted = _content_parts(message.get("content"), {call.id for call in calls})
    extra = message.get("additional_kwargs")
    extra = extra if isinstance(extra, Mapping) else {}
    reasoning = extra.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning and not any(p["type"] in _THOUGHT for p in parts):
        parts.insert(0, {"type": "reasoning", "reasoning": reasoning})
    refusal = extra.get("refusal")
    if isinstance(refusal, str) and refusal:
        parts.append({"type": "refusal", "refusal": refusal})
    for key, value in extra.items():
        if key not in _SKIPPED_KWARGS and value not in (None, "", [], {}):
            kept = json_values({"value": value})
            if "value" in kept:
                omitted.append({"type": "langchain_field", "field": str(key), "value": kept["value"]})
    omitted.extend(dropped)
    metadata = message.get("response_metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    model = metadata.get("model_name", metadata.get("model"))
    finish = metadata.get("finish_reason", metadata.get("stop_reason"))
    return {
        "text": reply_text(parts),
        "tool_calls": calls,
        "parts": tuple(parts),
        "model": model if isinstance(model, str) else None,
        "finish_reason": finish if isinstance(finish, str) else ("tool_calls" if calls else None),
        "usage": _usage(message.get("usage_metadata")),
        "omitted_blocks": tuple(omitted),
    }


_THOUGHT = ("thinking", "redacted_thinking", "reasoning", "responses_item")


def _content_parts(content: object, call_ids: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The parts and kept-beside blocks of a LangChain message's ``content`` (``call_ids``: its tool calls')."""
    if isinstance(content, str):
        return ([{"type": "text", "text": content}] if content else []), []
    if not isinstance(content, list):
        raise MalformedResponse(f"content must be a string or a list of blocks, not {type(content).__name__}")
    parts: list[dict[str, Any]] = []
    omitted: list[dict[str, Any]] = []
    for index, block in enumerate(content):
        where = f"content[{index}]"
        if isinstance(block, str):
            if block:
                parts.append({"type": "text", "text": block})
            continue
        if not isinstance(block, Mapping):
            raise MalformedResponse(f"{where} is neither a string nor a block")
        kind = block.get("type")
        anthropic = _anthropic_parts(block, where, call_ids)
        if anthropic is not None:
            parts.extend(anthropic)
        elif kind in ("text", "output_text"):
            text = _string(block, "text", where)
            if text:
                parts.append({"type": "text", "text": text})
            if block.get("citations") or block.get("annotations"):
                omitted.append(_kept(block))
        elif kind in ("thinking", "reasoning") and not (kind == "reasoning" and "summary" in block):
            parts.extend(_thought(block, "thinking" if kind == "thinking" else "reasoning", where))
        elif kind == "reasoning":  # an OpenAI Responses reasoning item, as langchain-openai gives it
            item = {k: v for k, v in block.items() if k != "index" and v is not None}
            if not isinstance(item.get("id"), str) or not isinstance(item.get("summary"), list):
                raise MalformedResponse(f"{where} reasoning item needs its string id and a summary list")
            parts.append({"type": "responses_item", "item": json_values(item, depth=16)})
        elif kind == "redacted_thinking":
            parts.append({"type": "redacted_thinking", "data": _string(block, "data", where)})
        elif kind not in ("tool_use", "tool_call", "tool_call_chunk", "function_call"):  # calls: tool_calls
            omitted.append(_kept(block))
    return anthropic_call_order(parts), omitted


def _anthropic_parts(block: Mapping[str, Any], where: str, call_ids: set[str]) -> list[dict[str, Any]] | None:
    """An Anthropic block (as langchain-anthropic passes them on) read as the Anthropic reader reads it: a
    ``text`` block without OpenAI ``annotations`` (its ``citations`` kept on the part), a server tool block
    (``anthropic_block``), a ``tool_use`` block's place among the parts (``anthropic_call``, when its id is one
    of the message's tool calls); None for any other block. LangChain's streaming ``index`` key is left out."""
    kind = block.get("type")
    if kind == "text" and block.get("annotations"):
        return None
    if kind == "tool_use" and not (isinstance(block.get("id"), str) and block["id"] in call_ids):
        return []  # the call is read from tool_calls; one that is not there has no place to mark
    return anthropic_block_parts({k: v for k, v in block.items() if k != "index"}, where)


def _thought(block: Mapping[str, Any], field: str, where: str) -> list[dict[str, Any]]:
    """A thinking / standard reasoning block: signed thinking, else unsigned reasoning (none when empty)."""
    text = _string(block, field, where)
    extras = block.get("extras")
    signature = block.get("signature", extras.get("signature") if isinstance(extras, Mapping) else None)
    if signature is not None and not isinstance(signature, str):
        raise MalformedResponse(f"{where} has a signature that is not a string")
    if signature:
        return [{"type": "thinking", "thinking": text, "signature": signature}]
    return [{"type": "reasoning", "reasoning": text}] if text else []


def _kept(block: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "langchain_block", "block": json_values(block, depth=16)}


def _string(block: Mapping[str, Any], field: str, where: str) -> str:
    value = block.get(field)
    if not isinstance(value, str):
        raise MalformedResponse(f"{where} {block.get('type')} block has no {field!r} string")
    return value


def _calls(message: Mapping[str, Any]) -> tuple[tuple[ToolCall, ...], list[dict[str, Any]]]:
    """The message's tool calls (see :func:`langchain_reply`) and the invalid calls that cannot be paired."""
    chunks = message.get("tool_call_chunks")
    if (
        isinstance(chunks, list)
        and chunks
        and all(isinstance(c, Mapping) and c.get("name") and c.get("id") for c in chunks)
    ):
        return tuple(_call(c, c.get("args"), f"tool_call_chunks[{i}]") for i, c in enumerate(chunks)), []
    calls: list[ToolCall] = []
    listed = message.get("tool_calls") or []
    if not isinstance(listed, list):
        raise MalformedResponse("tool_calls must be a list")
    for index, call in enumerate(listed):
        if not isinstance(call, Mapping):
            raise MalformedResponse(f"tool_calls[{index}] is not an object")
        calls.append(_call(call, call.get("args", {}), f"tool_calls[{index}]"))
    dropped: list[dict[str, Any]] = []
    invalid = message.get("invalid_tool_calls") or []
    if not isinstance(invalid, list):
        raise MalformedResponse("invalid_tool_calls must be a list")
    for index, call in enumerate(invalid):
        if isinstance(call, Mapping) and call.get("name") and call.get("id"):
            calls.append(_call(call, call.get("args"), f"invalid_tool_calls[{index}]"))
        elif isinstance(call, Mapping):
            dropped.append({"type": "langchain_invalid_tool_call", "call": json_values(call)})
    return tuple(calls), dropped


def _call(call: Mapping[str, Any], args: object, where: str) -> ToolCall:
    name, call_id = call.get("name"), call.get("id")
    if not isinstance(name, str) or not name:
        raise MalformedResponse(f"{where} has no name")
    if not isinstance(call_id, str) or not call_id:
        raise MalformedResponse(f"{where} ({name}) has no id: tractkv pairs a result with its call by id")
    if args is None:
        args = ""
    if isinstance(args, str):  # a chunk's or an invalid call's string, exactly as the model wrote it
        parsed = parse_arguments(args)
        if parsed is None:
            return ToolCall(id=call_id, name=name, arguments={}, invalid_arguments=args)
        args = parsed
    if not isinstance(args, Mapping):
        raise MalformedResponse(f"{where} ({name}) args must be an object")
    arguments = dict(args)
    try:
        check_json(arguments, f"{where} ({name}) args")
    except ContentError as exc:  # a value no store could hold
        raise MalformedResponse(str(exc)) from None
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _usage(usage: object) -> dict[str, Any] | None:
    """LangChain's ``usage_metadata``, normalized as every reader's usage is."""
    return normalized_usage(
        usage,
        ("input_tokens",),
        ("output_tokens",),
        (
            ("input_token_details", "cache_read", "cache_read_input_tokens"),
            ("input_token_details", "cache_creation", "cache_creation_input_tokens"),
            ("output_token_details", "reasoning", "reasoning_tokens"),
        ),
    )
