"""Google Gemini (``generateContent``): compiled messages and tool definitions as ``contents``,
``system_instruction`` and ``tools``, and a ``GenerateContentResponse`` read back (its candidate's parts as
payload parts and tool calls, its ``usage_metadata`` normalized).

A reply's parts, in order: text as ``text`` parts, thought summaries (``thought: true``) as ``gemini_thought``
parts, each ``function_call`` as a ``gemini_call`` part (its place, the id's origin) beside the message's tool
call, any other part (``executable_code``, ``inline_data``, ...) verbatim as a ``gemini_part``. A part's
``thought_signature`` is kept as bytes on the part it came with and goes back on it, byte for byte (Gemini 3
refuses a tool loop whose function-call signatures do not come back). Gemini sends no call id on the Developer
API: one is made from the response and the part's position (:func:`made_call_id`), and is not sent back.

Bodies come as the SDK dumps them (snake_case, ``thought_signature`` bytes, or base64 in JSON mode) or as the
REST API sends them (camelCase, base64); both spellings are read. Requests use the snake_case field names,
which both the SDK's types and the REST API accept; signatures and media are bytes (the SDK's types), which
:func:`gemini_json` turns into base64 text for a JSON body.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from tractkv.engine.content.media import PDF, TEXT
from tractkv.engine.content.payload import Message, Part, ToolCall
from tractkv.engine.content.render.common import _is_count, check_arguments, function_fields, json_values
from tractkv.engine.content.toolsets import ANTHROPIC_SERVER, read_stored
from tractkv.errors import MalformedResponse

GEMINI_START = "(conversation start)"
"""The text of the user turn put first when a context starts with a model turn or has none (Gemini wants a
non-empty ``contents`` that starts with a user turn)."""

OTHER_PARTS = frozenset(
    {
        "executable_code",
        "code_execution_result",
        "inline_data",
        "file_data",
        "tool_call",
        "tool_response",
    }
)
"""The kinds of reply part other than text and function_call kept verbatim as ``gemini_part`` parts
(``gemini_reply(strict=True)`` refuses a part of none of these kinds)."""

_PART_META = frozenset(
    {"thought", "thought_signature", "part_metadata", "video_metadata", "media_resolution"}
)
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def _snake_keys(value: Mapping[str, Any]) -> dict[str, Any]:
    """``value``'s top-level keys in snake_case (the REST API's camelCase read as the SDK spells it), None
    values left out."""
    return {_snake(str(k)): v for k, v in value.items() if v is not None}


def plain(value: Any) -> Any:
    """An enum member (the SDK's python-mode ``model_dump()`` holds ``FinishReason.STOP``, ...) as its plain
    value; anything else as it is."""
    return value.value if isinstance(value, Enum) else value


def _snake_tree(value: Any, depth: int = 0) -> Any:
    """Every key of a tree in snake_case, enum members as their values (for usage metadata, which holds no
    user data); nesting cut at 8 levels (usage is shallow)."""
    if depth > 8:
        return None
    if isinstance(value, Mapping):
        return {_snake(str(k)): _snake_tree(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_snake_tree(v, depth + 1) for v in value]
    return plain(value)


def thought_signature(value: object, where: str) -> bytes:
    """A part's ``thought_signature`` as the exact bytes: bytes as they are (the SDK's value), a string as
    base64 (standard or URL-safe alphabet, padding optional: the REST body and the SDK's JSON dump).

    Raises:
        MalformedResponse: neither bytes nor base64 text, or empty.
    """
    if isinstance(value, bytes | bytearray):
        data = bytes(value)
    elif isinstance(value, str):
        text = value.strip().replace("-", "+").replace("_", "/")
        try:
            data = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise MalformedResponse(f"{where}.thought_signature is not base64 text") from None
    else:
        raise MalformedResponse(
            f"{where}.thought_signature must be bytes or base64 text, not {type(value).__name__}"
        )
    if not data:
        raise MalformedResponse(f"{where}.thought_signature is empty")
    return data


def made_call_id(basis: str, index: int) -> str:
    """The id tractkv gives a function call Gemini sent without one: ``gm_`` + the first 16 hex digits of
    SHA-256 of ``basis`` (``<response_id>/<candidate index>``, else what was read of the candidate as
    canonical JSON: see :func:`gemini_reply`) + ``_`` + the part's position in the candidate's parts. The
    same response always gives the same ids; the id is never sent to Gemini (only to the dialects that need
    one)."""
    return f"gm_{hashlib.sha256(basis.encode()).hexdigest()[:16]}_{index}"


def gemini_reply(
    content: object, *, response_id: object = None, candidate: int = 0, strict: bool = False
) -> tuple[tuple[dict[str, Any], ...], tuple[ToolCall, ...]]:
    """The parts and tool calls of a candidate's ``content`` (``{"role": "model", "parts": [...]}``).

    Parts, in order: ``{"type": "text", "text"}`` (empty text left out unless it carries a signature);
    ``{"type": "gemini_thought", "text"}`` for a ``thought: true`` part; ``{"type": "gemini_call",
    "call_id"}`` for a ``function_call`` (``made_id: true`` when Gemini sent no id and :func:`made_call_id`
    made it), which is also a tool call (``args`` its arguments); any other part ``{"type": "gemini_part",
    "part": <the part, snake_case keys, None values left out>}``. Each of the first three carries the part's
    ``thought_signature`` as bytes when it had one.

    Raises:
        MalformedResponse: ``content`` not an object or ``parts`` neither a list nor missing (missing or None
            reads as no parts), a part that is not an object, a signature that is neither bytes
            nor base64, a function_call without a string ``name`` or with ``args`` that are not an object,
            text that is not a string; with ``strict``, a part of no known kind. Each names the part and field.
    """
    if not isinstance(content, Mapping) or not isinstance(content.get("parts", []), (list, type(None))):
        raise MalformedResponse("the candidate's content needs a 'parts' list")
    listed = content.get("parts") or []  # no parts (MAX_TOKENS while thinking, SAFETY): an empty reply
    parts: list[dict[str, Any]] = []
    calls: list[tuple[str | None, str, dict[str, Any], int]] = []  # (id or None, name, args, part index)
    for index, raw in enumerate(listed):
        where = f"candidates[{candidate}].content.parts[{index}]"
        if not isinstance(raw, Mapping):
            raise MalformedResponse(f"{where} is not an object")
        part = _snake_keys(raw)
        signed: dict[str, Any] = {}
        if "thought_signature" in part:
            signed["thought_signature"] = thought_signature(part["thought_signature"], where)
        if "function_call" in part:
            calls.append((*_function_call(part["function_call"], where), index))
            parts.append({"type": "gemini_call", "call_id": calls[-1][0], **signed})
        elif "text" in part:
            if not isinstance(part["text"], str):
                raise MalformedResponse(f"{where}.text must be a string")
            if part.get("thought") is True:
                parts.append({"type": "gemini_thought", "text": part["text"], **signed})
            elif part["text"] or signed:
                parts.append({"type": "text", "text": part["text"], **signed})
        elif (set(part) - _PART_META) & OTHER_PARTS or not strict:
            parts.append({"type": "gemini_part", "part": _verbatim(part, where)})
        else:
            raise MalformedResponse(f"{where}: unknown part (fields {sorted(part)})")
    return tuple(parts), _calls(parts, calls, response_id, candidate)


def _calls(
    parts: list[dict[str, Any]],
    calls: list[tuple[str | None, str, dict[str, Any], int]],
    response_id: object,
    candidate: int,
) -> tuple[ToolCall, ...]:
    """The tool calls, each without an id given one by :func:`made_call_id` (its ``gemini_call`` part marked
    ``made_id``). Without a response id the basis is what was read (texts, calls' names and arguments,
    signatures, other parts' kinds), so every form of one response (REST, SDK object, either dump) gives the
    same ids."""
    basis = f"{response_id}/{candidate}" if isinstance(response_id, str) and response_id else None
    if basis is None and any(call_id is None for call_id, *_ in calls):
        read = [{**p, "part": sorted(p["part"])} if p["type"] == "gemini_part" else p for p in parts] + [
            [name, args] for _, name, args, _ in calls
        ]
        basis = json.dumps(gemini_json(read), sort_keys=True, ensure_ascii=False)
    out = []
    placed = iter(p for p in parts if p["type"] == "gemini_call")
    for given, name, arguments, index in calls:
        part = next(placed)
        call_id = given if given is not None else made_call_id(str(basis), index)
        if given is None:
            part.update(call_id=call_id, made_id=True)
        out.append(ToolCall(id=call_id, name=name, arguments=arguments))
    return tuple(out)


def _function_call(raw: object, where: str) -> tuple[str | None, str, dict[str, Any]]:
    if not isinstance(raw, Mapping):
        raise MalformedResponse(f"{where}.function_call is not an object")
    call = _snake_keys(raw)
    name, arguments, call_id = call.get("name"), call.get("args", {}), call.get("id")
    if not isinstance(name, str) or not name:
        raise MalformedResponse(f"{where}.function_call has no string name")
    if not isinstance(arguments, Mapping):
        raise MalformedResponse(f"{where}.function_call.args must be an object")
    check_arguments(arguments, f"{where}.function_call.args")
    if call_id is not None and not isinstance(call_id, str):
        raise MalformedResponse(f"{where}.function_call.id must be a string")
    return call_id or None, name, dict(arguments)


def _verbatim(part: dict[str, Any], where: str) -> dict[str, Any]:
    """A part kept as it is: None values left out at every level, bytes kept (a signature or inline data)."""

    def walk(value: Any, depth: int) -> Any:
        if depth > 32:
            raise MalformedResponse(f"{where} is nested too deeply")
        if isinstance(value, Mapping):
            return {str(k): walk(v, depth + 1) for k, v in value.items() if v is not None}
        if isinstance(value, list | tuple):
            return [walk(v, depth + 1) for v in value]
        if isinstance(value, bytearray):
            return bytes(value)
        return plain(value)

    out = walk(part, 0)
    if "thought_signature" in out:
        out["thought_signature"] = thought_signature(out["thought_signature"], where)
    return dict(out)


def gemini_usage(usage: object) -> dict[str, Any] | None:
    """A response's ``usage_metadata``, normalized (None when there is none): its own fields kept in snake_case
    (JSON values), with ``input_tokens`` (``prompt_token_count``, cached tokens included, plus
    ``tool_use_prompt_token_count``), ``output_tokens`` (``candidates_token_count`` plus
    ``thoughts_token_count``: thinking is billed as output), and when reported ``cache_read_input_tokens``
    (``cached_content_token_count``) and ``reasoning_tokens`` (``thoughts_token_count``).

    Raises:
        MalformedResponse: usage that is not an object, without ``prompt_token_count``, or with a count that
            is not a non-negative integer.
    """
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        raise MalformedResponse(f"usage_metadata must be an object, not {type(usage).__name__}")
    out = json_values(_snake_tree(usage))
    counts: dict[str, int] = {}
    for name in (
        "prompt_token_count",
        "candidates_token_count",
        "thoughts_token_count",
        "cached_content_token_count",
        "tool_use_prompt_token_count",
    ):
        value = out.get(name)
        if value is not None:
            if not _is_count(value):
                raise MalformedResponse(
                    f"usage_metadata.{name} must be a non-negative integer, not {value!r}"
                )
            counts[name] = value
    if "prompt_token_count" not in counts:
        raise MalformedResponse("usage_metadata has no prompt_token_count")
    out["input_tokens"] = counts["prompt_token_count"] + counts.get("tool_use_prompt_token_count", 0)
    out["output_tokens"] = counts.get("candidates_token_count", 0) + counts.get("thoughts_token_count", 0)
    if "cached_content_token_count" in counts:
        out["cache_read_input_tokens"] = counts["cached_content_token_count"]
    if "thoughts_token_count" in counts:
        out["reasoning_tokens"] = counts["thoughts_token_count"]
    return out


GEMINI_EXTRA_FIELDS = ("grounding_metadata", "citation_metadata", "url_context_metadata")
"""A candidate's fields a message has no place for, kept beside it."""


def gemini_extras(candidate: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """What a candidate says beyond its parts, kept rather than lost: ``{"type": "gemini_field", "field":
    <snake_case name>, "value": <its JSON value>}`` for each of :data:`GEMINI_EXTRA_FIELDS` present (not
    None, not empty), either spelling."""
    extras = []
    for field in GEMINI_EXTRA_FIELDS:
        value = gemini_field(candidate, field)
        if value not in (None, "", [], {}):
            kept = json_values({"value": value})
            if "value" in kept:
                extras.append({"type": "gemini_field", "field": field, "value": kept["value"]})
    return tuple(extras)


def gemini_field(body: Mapping[str, Any], name: str) -> Any:
    """``body[name]`` in snake_case or the REST API's camelCase (None when neither is set), an enum member
    (a python-mode SDK dump's) as its value."""
    value = body.get(name)
    if value is None:
        head, *rest = name.split("_")
        value = body.get(head + "".join(w.title() for w in rest))
    return plain(value)


# --- requests ---------------------------------------------------------------------------------------------


def messages_to_gemini(messages: Sequence[Message]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """``(system_instruction, contents)``: the system messages before the first other message joined as the
    ``system_instruction`` content (None when there are none), every other message as ``contents``.

    Roles are ``user`` and ``model``; consecutive messages of one role share one turn (a run of tool results,
    parallel calls' answers, is one user turn of ``function_response`` parts, which come first in it). An
    assistant message sends its parts in order: text (with its ``thought_signature``), thought summaries
    (``thought: true``), each ``gemini_call`` as its ``function_call`` part with its signature, ``gemini_part``
    parts verbatim; a refusal as text; Anthropic thinking and OpenAI Responses items are left out; then each
    tool call no ``gemini_call`` placed, as a ``function_call`` part. A call's ``id`` is sent unless tractkv
    made it (``made_id``). A tool result is ``{"function_response": {"name", "response": {"output": text}}}``
    (``{"error": text}`` when it failed; ``id`` as its call's), its images and documents after it in the turn.
    User parts: text, images and PDFs as ``inline_data`` (the exact bytes), by URL as ``file_data``, a
    ``text/plain`` document as text. A later system message is user text ``System: <text>``; a ``name``
    prefixes the text as ``<name>: ``. Empty text is not sent (Gemini refuses it) unless it carries a
    signature; a context that starts with a model turn (or has none) gets a user turn :data:`GEMINI_START`.
    """
    system: list[str] = []
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    calls: dict[str, tuple[str, bool]] = {}  # call id -> (tool name, whether tractkv made the id)
    for message in messages:
        if message.role == "system" and not turns:
            system.append(message.content)
            continue
        if message.role == "assistant":
            role, parts = "model", _model_parts(message, calls)
        elif message.role == "tool":
            role, parts = "user", _response_parts(message, calls)
        elif message.role == "system":
            role, parts = "user", [{"text": f"System: {message.content}"}]
        else:
            role, parts = "user", _user_parts(message)
        if not parts:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(parts)
        else:
            turns.append((role, parts))
    for role, parts in turns:
        if role == "user":
            parts.sort(key=lambda p: "function_response" not in p)  # stable: results first, the rest after
    if not turns or turns[0][0] != "user":
        turns.insert(0, ("user", [{"text": GEMINI_START}]))
    instruction = {"parts": [{"text": "\n\n".join(system)}]} if system else None
    return instruction, [{"role": role, "parts": parts} for role, parts in turns]


def _signed(out: dict[str, Any], part: Part) -> dict[str, Any]:
    """``out`` with ``part``'s signature: its ``thought_signature``, else (a call recorded through Gemini's
    OpenAI-compatible endpoint) the one in its ``extra_content.google.thought_signature``, decoded."""
    signature = part.thought_signature
    google = (part.extra_content or {}).get("google")
    if signature is None and isinstance(google, dict) and google.get("thought_signature") is not None:
        try:
            signature = thought_signature(google["thought_signature"], "extra_content.google")
        except MalformedResponse:
            signature = None  # not base64: the call goes without one, as from another provider
    if signature is not None:
        out["thought_signature"] = signature
    return out


def _model_parts(message: Message, calls: dict[str, tuple[str, bool]]) -> list[dict[str, Any]]:
    by_id = {call.id: call for call in message.tool_calls}
    out: list[dict[str, Any]] = []
    placed: set[str] = set()
    for part in message.parts or (Part(type="text", text=message.content),):
        if part.type == "text" and ((part.text and part.text.strip()) or part.thought_signature is not None):
            out.append(_signed({"text": part.text}, part))
        elif part.type == "refusal" and part.refusal and part.refusal.strip():
            out.append({"text": part.refusal})
        elif part.type == "gemini_thought":
            out.append(_signed({"text": part.text, "thought": True}, part))
        elif part.type == "gemini_call" and part.call_id in by_id and part.call_id not in placed:
            placed.add(str(part.call_id))
            out.append(_signed(_call_part(by_id[str(part.call_id)], part.made_id, calls), part))
        elif part.type == "gemini_part" and part.item is not None:
            out.append(copy.deepcopy(part.item))
    if message.name is not None:
        _prefix_name(out, message.name)
    out.extend(_call_part(call, False, calls) for call in message.tool_calls if call.id not in placed)
    return out


def _call_part(call: ToolCall, made: bool, calls: dict[str, tuple[str, bool]]) -> dict[str, Any]:
    calls[call.id] = (call.name, made)
    function: dict[str, Any] = {"name": call.name, "args": copy.deepcopy(call.arguments)}
    if not made:
        function["id"] = call.id
    return {"function_call": function}


def _response_parts(message: Message, calls: dict[str, tuple[str, bool]]) -> list[dict[str, Any]]:
    call_id = str(message.tool_call_id)
    name, made = calls.get(call_id, (message.name or "tool", False))
    response: dict[str, Any] = {
        "name": name,
        "response": {"error" if message.is_error else "output": message.content},
    }
    if not made:
        response["id"] = call_id
    media = [p for p in message.parts if p.type in ("image", "document")]
    out: list[dict[str, Any]] = [{"function_response": response}]
    if media:
        out.append({"text": f"Attachments of the {name} result:"})
        out.extend(_media_parts(media))
    return out


def _user_parts(message: Message) -> list[dict[str, Any]]:
    if message.parts:
        out = _media_parts(message.parts)
    else:
        out = [{"text": message.content}] if message.content.strip() else []
    if message.name is not None:
        _prefix_name(out, message.name)
    return out


def _prefix_name(parts: list[dict[str, Any]], name: str) -> None:
    for part in parts:
        if "text" in part and not part.get("thought"):
            part["text"] = f"{name}: {part['text']}"
            return
    parts.insert(0, {"text": f"{name}:"})


def _media_parts(parts: Sequence[Part]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if part.type == "text" and part.text and part.text.strip():
            out.append({"text": part.text})
        elif part.type in ("image", "document"):
            title = f"{part.title}\n" if part.title else ""
            if part.data is None:
                file: dict[str, Any] = {"file_uri": str(part.url)}
                if part.type == "document":
                    file["mime_type"] = PDF
                out.append({"file_data": file})
            elif part.media_type == TEXT:
                out.append({"text": title + part.data.decode("utf-8", "replace")})
            else:
                out.append({"inline_data": {"mime_type": str(part.media_type), "data": part.data}})
    return out


def tool_to_gemini(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """A stored tool definition as a Gemini function declaration ``{"name", "description",
    "parameters_json_schema"}`` (the JSON Schema as stored; ``strict`` has no Gemini field); an Anthropic
    server tool is left out (None)."""
    spec = read_stored(schema)
    if spec.shape == ANTHROPIC_SERVER:
        return None
    return function_fields(spec, "parameters_json_schema", strict="never")


def gemini_params(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"contents": [...], "system_instruction": ..., "tools": [{"function_declarations": [...]}]}``: the
    ``generateContent`` request body (snake_case), ``system_instruction`` only when the context starts with
    system messages, ``tools`` only when some are offered. With the SDK:
    ``client.models.generate_content(model=..., contents=params.pop("contents"), config=params)``."""
    instruction, contents = messages_to_gemini(messages)
    params: dict[str, Any] = {"contents": contents}
    if instruction is not None:
        params["system_instruction"] = instruction
    declarations = [d for d in map(tool_to_gemini, tools) if d is not None]
    if declarations:
        params["tools"] = [{"function_declarations": declarations}]
    return params


def gemini_json(value: Any) -> Any:
    """A copy of ``value`` with every bytes value (a signature, inline data) as standard base64 text: the
    request as a JSON body (``tractkv compile --format gemini``, a REST call)."""
    if isinstance(value, Mapping):
        return {k: gemini_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [gemini_json(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    return value
