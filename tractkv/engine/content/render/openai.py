"""OpenAI Chat Completions: compiled messages and tool definitions as a request, and a reply read back
(its message as payload parts and tool calls, its usage normalized)."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tractkv.engine.content.media import PDF, data_url
from tractkv.engine.content.payload import Message, Part, ToolCall, parse_arguments
from tractkv.engine.content.render.common import (
    _string_field,
    check_arguments,
    function_fields,
    json_values,
    normalized_usage,
)
from tractkv.engine.content.toolsets import ANTHROPIC_SERVER, read_stored
from tractkv.errors import MalformedResponse


def messages_to_openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """OpenAI chat messages: ``tool_calls`` on assistant messages, ``role: "tool"`` results.

    Parts: a user (or system) message with parts has a list ``content``: ``text`` parts, ``image_url``
    parts (a base64 data: URL of the exact bytes, or the https URL; ``detail`` kept) and ``file`` parts for
    PDFs (``{"filename": <title or "document.pdf">, "file_data": <data: URL>}``); a ``text/plain`` document
    becomes a text part (its title, if any, on the first line) and a document by URL a text part naming the
    URL (chat completions take neither). An assistant message sends its text as ``content``, a refusal part
    as the ``refusal`` field (its content a list of text parts when it has several), and leaves thinking
    out (OpenAI has no field for it). A message's ``name`` is sent with each character Chat refuses in a
    name (whitespace, ``<``, ``|``, ``\\``, ``/``, ``>``) as ``_``. A tool call recorded with an
    ``extra_content`` object (Gemini's OpenAI-compatible endpoint: its thought signature) sends it back on that
    call, and no other does. An audio reply (an ``openai_audio`` part) goes back as ``audio: {"id"}`` (without
    ``content`` when the message has no text, tool calls or refusal). A ``tool`` message takes text only, so a
    result's images and documents follow, after the last result of that run of results, in ONE user message
    that starts with a text naming the call ids they belong to; the pairing of calls and results is unchanged
    (every result still directly follows its call's run).
    """
    out: list[dict[str, Any]] = []
    attachments: list[tuple[str, list[dict[str, Any]]]] = []  # (call id, media parts) of the current run
    for message in messages:
        if attachments and message.role != "tool":
            out.append(_openai_attachments(attachments))
            attachments = []
        texts = [
            p for p in message.parts if p.type == "text" and p.text
        ]  # a signature's empty text: not sent
        if message.parts and message.role in ("user", "system"):
            content: Any = _openai_parts(message.parts)
        elif message.role == "assistant" and len(texts) > 1:
            content = _openai_parts(texts)  # several text blocks stay several (no words run together)
        else:
            content = message.content
        entry: dict[str, Any] = {"role": message.role, "content": content}
        if message.role == "tool":
            entry["tool_call_id"] = message.tool_call_id
            media = [p for p in message.parts if p.type != "text"]
            if media:
                attachments.append((str(message.tool_call_id), _openai_parts(media)))
                if not message.content:
                    entry["content"] = "(its images or documents follow in the next user message)"
        elif message.name is not None and message.role in ("user", "assistant", "system"):
            entry["name"] = _CHAT_NAME_REFUSED.sub("_", message.name) or "_"
        if message.role == "assistant":
            refusal = "".join(p.refusal or "" for p in message.parts if p.type == "refusal")
            if refusal:
                entry["refusal"] = refusal
                entry["content"] = content or None
        if message.tool_calls:
            entry["content"] = content or None
            entry["tool_calls"] = [_openai_call(call, message.parts) for call in message.tool_calls]
        if message.role == "assistant":
            _audio(entry, message.parts)
        out.append(entry)
    if attachments:
        out.append(_openai_attachments(attachments))
    return out


def _audio(entry: dict[str, Any], parts: Sequence[Part]) -> None:
    """An audio reply goes back by id, ``audio: {"id"}`` (OpenAI holds the audio); an assistant message with
    nothing else to say then has no ``content`` (as OpenAI's multi-turn audio example sends it)."""
    for part in parts:
        if part.type == "openai_audio" and part.item is not None:
            entry["audio"] = {"id": part.item["id"]}
            if not entry.get("content") and "tool_calls" not in entry and "refusal" not in entry:
                del entry["content"]


_CHAT_NAME_REFUSED = re.compile(r"[\s<|\\/>]")
"""The characters Chat refuses in a message's ``name`` (it must match ``^[^\\s<|\\\\/>]+$``)."""


def _openai_call(call: ToolCall, parts: Sequence[Part]) -> dict[str, Any]:
    """A tool call as Chat Completions spells it, with the ``extra_content`` it was received with (a
    ``gemini_call`` part's), if any: only a call that came with one sends one."""
    out: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments_text},
    }
    for part in parts:
        if part.type == "gemini_call" and part.call_id == call.id and part.extra_content is not None:
            out["extra_content"] = copy.deepcopy(part.extra_content)
    return out


def _openai_parts(parts: Sequence[Part]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if part.type == "text":
            out.append({"type": "text", "text": part.text})
        elif part.type == "image":
            url = part.url if part.data is None else data_url(str(part.media_type), part.data)
            image: dict[str, Any] = {"url": url}
            if part.detail is not None:
                image["detail"] = part.detail
            out.append({"type": "image_url", "image_url": image})
        elif part.type == "document":
            title = f"{part.title}\n" if part.title else ""
            if part.data is None:
                out.append({"type": "text", "text": f"{title}Document: {part.url}"})
            elif part.media_type == PDF:
                file = {"filename": part.title or "document.pdf", "file_data": data_url(PDF, part.data)}
                out.append({"type": "file", "file": file})
            else:
                out.append({"type": "text", "text": title + part.data.decode("utf-8", "replace")})
    return out


def _openai_attachments(attachments: list[tuple[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """The user message carrying a run of tool results' images and documents."""
    ids = ", ".join(call_id for call_id, _ in attachments)
    content: list[dict[str, Any]] = [{"type": "text", "text": f"Attachments of tool results ({ids}):"}]
    for call_id, parts in attachments:
        if len(attachments) > 1:
            content.append({"type": "text", "text": f"[{call_id}]"})
        content.extend(parts)
    return {"role": "user", "content": content}


def tool_to_openai(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """A tool definition (any shape :func:`~tractkv.engine.content.toolsets.read_tool` accepts) as an OpenAI chat
    tool ``{"type": "function", "function": {"name", "description", "parameters", "strict"}}``, or None for
    an Anthropic server tool, which OpenAI has no equivalent for.

    ``description`` and ``strict`` are sent when given (``strict`` only as a boolean); ``parameters`` is always
    sent (an empty object schema when the definition has none). Anthropic-only fields (``cache_control``...)
    and MCP's ``title``, ``outputSchema``, ``annotations`` are not sent, nor is a field whose value is None.

    A stored definition today's input rules refuse (a store written before them) renders as
    :func:`~tractkv.engine.content.toolsets.read_stored` reads it (its name as stored, even one OpenAI refuses).

    Raises:
        InvalidInput: ``schema`` is not a dict.
    """
    spec = read_stored(schema)
    if spec.shape == ANTHROPIC_SERVER:
        return None
    return {"type": "function", "function": function_fields(spec, "parameters", strict="given")}


def openai_params(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Keyword arguments for ``client.chat.completions.create``: messages, and tools when there are any.

    Anthropic server tools are left out (OpenAI has no equivalent); ``tools`` is omitted when none is left.
    """
    params: dict[str, Any] = {"messages": messages_to_openai(messages)}
    rendered = [r for r in (tool_to_openai(t) for t in tools) if r is not None]
    if rendered:
        params["tools"] = rendered
    return params


def openai_tool_call(raw: object, index: int) -> ToolCall:
    """One OpenAI tool call (``{"id", "type": "function", "function": {"name", "arguments"}}``, arguments a
    JSON string or an object) as a :class:`ToolCall`; the flat ``{"id", "name", "arguments"}`` form and
    :class:`ToolCall` values pass too. Empty arguments (``""`` or missing) mean ``{}``. An arguments string
    that holds no JSON object a payload can store (invalid or truncated JSON, an array, NaN, ...:
    :func:`~tractkv.engine.content.payload.parse_arguments`) is kept exactly as ``invalid_arguments``, with
    ``arguments`` ``{}``: the call is recorded and sent back to OpenAI as it came.

    Raises:
        MalformedResponse: not an object, no name or id, or arguments that are neither a string nor a JSON
            object.
    """
    if isinstance(raw, ToolCall):
        return raw
    if not isinstance(raw, Mapping):
        raise MalformedResponse(f"tool_calls[{index}] is not an object")
    function = raw["function"] if isinstance(raw.get("function"), Mapping) else raw
    name, arguments = function.get("name"), function.get("arguments")
    if not isinstance(name, str) or not name:
        raise MalformedResponse(f"tool_calls[{index}] has no function name")
    call_id = raw.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise MalformedResponse(f"tool_calls[{index}] ({name}) has no id")
    if isinstance(arguments, str):  # OpenAI sends arguments as a JSON string
        parsed = parse_arguments(arguments)
        if parsed is None:  # what the model wrote is not a JSON object: kept as it is
            return ToolCall(id=call_id, name=name, arguments={}, invalid_arguments=arguments)
        arguments = parsed
    elif arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise MalformedResponse(f"tool_calls[{index}] ({name}) arguments must be a JSON object")
    check_arguments(arguments, f"tool_calls[{index}] ({name}) arguments")
    return ToolCall(id=call_id, name=name, arguments=dict(arguments))


def openai_reply(message: Mapping[str, Any]) -> tuple[tuple[dict[str, Any], ...], tuple[ToolCall, ...]]:
    """The parts and tool calls of an assistant message in OpenAI's shape.

    Parts, in order: LiteLLM's ``thinking_blocks`` (a Claude reply through LiteLLM: ``thinking`` with its
    ``signature``, ``redacted_thinking`` with its ``data``, as the Anthropic reader keeps them, so the
    Anthropic dialect sends them back; a thinking block without a signature is ``reasoning``); else a
    ``reasoning_content`` string (DeepSeek, vLLM, LiteLLM for other providers) as ``{"type": "reasoning",
    "reasoning"}``, unsigned text no dialect sends back; then the ``content`` (a string, or a list of ``text`` /
    ``output_text`` / ``refusal`` parts,
    as some OpenAI-compatible servers send) as ``{"type": "text", "text"}`` parts (empty text left out), then
    the message's ``refusal`` as ``{"type": "refusal", "refusal"}``, then for each tool call with an
    ``extra_content`` object (Gemini's OpenAI-compatible endpoint sends ``{"google": {"thought_signature"}}``
    there) ``{"type": "gemini_call", "call_id", "extra_content"}``, which :func:`messages_to_openai` sends back
    on that call, then the ``audio`` reply's ``{"type": "openai_audio", "id", "transcript", "expires_at"}``
    (sent back as ``audio: {"id"}``; the whole ``audio`` also stays among the extras). The fields a message has
    no place for (``annotations``, ``audio``, the deprecated ``function_call``, some servers' ``reasoning_content``) are
    :func:`openai_extras` (``reasoning_content`` only when it is neither a part nor the thinking blocks'
    text).

    Raises:
        MalformedResponse: content that is neither text, None nor a list of parts; a refusal that is not a
            string; ``tool_calls`` not a list, or a malformed call; ``thinking_blocks`` not a list of
            thinking / redacted_thinking blocks with string fields.
    """
    parts = _reasoning_parts(message)
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
    read = tuple(openai_tool_call(call, index) for index, call in enumerate(calls))
    for index, (raw, call) in enumerate(zip(calls, read, strict=True)):
        extra = raw.get("extra_content") if isinstance(raw, Mapping) else None
        if extra is None:
            continue
        if not isinstance(extra, Mapping):
            raise MalformedResponse(f"tool_calls[{index}] ({call.name}) extra_content must be an object")
        check_arguments(extra, f"tool_calls[{index}] ({call.name}) extra_content")
        parts.append({"type": "gemini_call", "call_id": call.id, "extra_content": dict(extra)})
    audio = _audio_part(message.get("audio"))
    if audio is not None:
        parts.append(audio)
    return tuple(parts), read


def _audio_part(audio: object) -> dict[str, Any] | None:
    """The ``openai_audio`` part of an assistant message's ``audio`` (its ``id``, ``transcript`` and
    ``expires_at``; the audio data stays in the omitted fields), None when there is none."""
    if audio is None:
        return None
    if not isinstance(audio, Mapping) or not isinstance(audio.get("id"), str) or not audio["id"]:
        raise MalformedResponse("message audio must be an object with a string 'id'")
    part: dict[str, Any] = {"type": "openai_audio", "id": audio["id"]}
    if isinstance(audio.get("transcript"), str):
        part["transcript"] = audio["transcript"]
    expires = audio.get("expires_at")
    if isinstance(expires, int) and not isinstance(expires, bool) and -(2**63) <= expires < 2**63:
        part["expires_at"] = expires
    return part


def _reasoning_parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The parts of a message's ``thinking_blocks`` (LiteLLM) or, without any, its ``reasoning_content``."""
    blocks = message.get("thinking_blocks")
    if blocks is None or blocks == []:
        reasoning = message.get("reasoning_content")
        return (
            [{"type": "reasoning", "reasoning": reasoning}]
            if isinstance(reasoning, str) and reasoning
            else []
        )
    if not isinstance(blocks, list):
        raise MalformedResponse(f"thinking_blocks must be a list, not {type(blocks).__name__}")
    parts: list[dict[str, Any]] = []
    for index, block in enumerate(blocks):
        where = f"thinking_blocks[{index}]"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "redacted_thinking":
            parts.append({"type": kind, "data": _string_field(block, "data", where)})
        elif kind == "thinking":
            thinking = _string_field(block, "thinking", where)
            signature = block.get("signature")
            if isinstance(signature, str) and signature:
                parts.append({"type": kind, "thinking": thinking, "signature": signature})
            elif signature is not None and not isinstance(signature, str):
                raise MalformedResponse(f"{where} thinking block has a signature that is not a string")
            elif thinking:  # unsigned: nothing Anthropic would take back as thinking
                parts.append({"type": "reasoning", "reasoning": thinking})
        else:
            raise MalformedResponse(f"{where} is not a thinking or redacted_thinking block")
    return parts


OPENAI_EXTRA_FIELDS = ("annotations", "audio", "function_call", "reasoning_content")


"""Assistant-message fields of a chat completion that a stored message has no place for."""


def openai_extras(message: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """What an OpenAI assistant message says beyond its parts and tool calls, kept rather than lost:
    ``{"type": "openai_field", "field": <name>, "value": <its JSON value>}`` for each of
    :data:`OPENAI_EXTRA_FIELDS` present (not None, not empty)."""
    extras = []
    for field in OPENAI_EXTRA_FIELDS:
        value = message.get(field)
        if field == "reasoning_content" and _reasoning_read(message, value):
            continue
        if value not in (None, "", [], {}):
            kept = json_values({"value": value})
            if "value" in kept:
                extras.append({"type": "openai_field", "field": field, "value": kept["value"]})
    return tuple(extras)


def _reasoning_read(message: Mapping[str, Any], reasoning: object) -> bool:
    """Whether :func:`openai_reply` read ``reasoning_content`` into the parts: as a ``reasoning`` part (no
    thinking blocks), or as the thinking blocks' text joined (LiteLLM's copy of them)."""
    blocks = message.get("thinking_blocks")
    if not isinstance(blocks, list) or not blocks:
        return isinstance(reasoning, str)
    joined = "".join(str(b.get("thinking") or "") for b in blocks if isinstance(b, Mapping))
    return reasoning == joined


def openai_usage(usage: object) -> dict[str, Any] | None:
    """A chat completion's ``usage``, normalized (None when there is none).

    The provider's own fields are kept (JSON values; None values left out), and added: ``input_tokens``
    (``prompt_tokens``, cached tokens included), ``output_tokens`` (``completion_tokens``, reasoning
    included) and, when reported, ``cache_read_input_tokens`` (``prompt_tokens_details.cached_tokens``) and
    ``reasoning_tokens`` (``completion_tokens_details.reasoning_tokens``).

    Raises:
        MalformedResponse: usage that is not an object, or without non-negative integer token counts.
    """
    return normalized_usage(
        usage,
        ("prompt_tokens", "input_tokens"),
        ("completion_tokens", "output_tokens"),
        (
            ("prompt_tokens_details", "cached_tokens", "cache_read_input_tokens"),
            ("completion_tokens_details", "reasoning_tokens", "reasoning_tokens"),
        ),
    )
