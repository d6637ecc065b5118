"""OpenAI Responses: compiled messages and tool definitions as ``input`` items, and a ``Response`` read back
(its output items as payload parts and tool calls, its usage normalized).

A reply's ``message`` items become text and refusal parts; every other output item (``reasoning``,
``function_call``, the built-in tool calls: ``web_search_call``, ``file_search_call``,
``code_interpreter_call``, ``image_generation_call``, ``mcp_call``, ``custom_tool_call``, ...) is kept
verbatim, in its place, as a ``responses_item`` part, and a ``function_call`` is also one of the message's
tool calls (``call_id`` its id), so compile pairs its result and the other dialects send it. Rendered back,
the parts go out in order: a reasoning item ahead of the function_call it preceded, byte for byte.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from tractkv.engine.content.media import PDF, data_url
from tractkv.engine.content.payload import Message, Part, ToolCall, parse_arguments
from tractkv.engine.content.render.common import (
    _string_field,
    function_fields,
    json_values,
    normalized_usage,
)
from tractkv.engine.content.toolsets import ANTHROPIC_SERVER, read_stored
from tractkv.errors import InvalidInput, MalformedResponse

BUILTIN_ITEMS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "custom_tool_call",
        "compaction",
    }
)
"""The output items other than message, reasoning and function_call that a reply may hold, kept as
provider items (``responses_reply(strict=True)`` refuses any other type)."""


def responses_reply(
    output: object, *, strict: bool = False
) -> tuple[tuple[dict[str, Any], ...], tuple[ToolCall, ...], tuple[dict[str, Any], ...]]:
    """The parts, tool calls and omitted fields of a ``Response``'s ``output`` list.

    Parts, in order: a ``message`` item's ``output_text`` as ``{"type": "text", "text"}`` (its non-empty
    ``annotations`` kept in the omitted fields as ``{"type": "openai_field", "field": "annotations",
    "value"}``) and ``refusal`` as ``{"type": "refusal", "refusal"}``; any other item as ``{"type":
    "responses_item", "item": <the item, keys set to None left out>}``. A ``function_call`` is also a tool call
    (``id`` its ``call_id``, ``arguments`` decoded; ``{}`` when they are not a JSON object, the exact string
    then its ``invalid_arguments``, and in the item, which the Responses dialect sends back).

    Raises:
        MalformedResponse: ``output`` not a list; an item not an object or without a string ``type``; a
            function_call without a string ``call_id``, ``name`` or ``arguments``; a reasoning item without
            its ``id``; with ``strict``, an item of a type not in :data:`BUILTIN_ITEMS`.
    """
    if not isinstance(output, list):
        raise MalformedResponse("a Response needs an 'output' list")
    parts: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    omitted: list[dict[str, Any]] = []
    for index, raw in enumerate(output):
        where = f"output[{index}]"
        if not isinstance(raw, Mapping) or not isinstance(raw.get("type"), str):
            raise MalformedResponse(f"{where} is not an output item (an object with a string type)")
        kind = raw["type"]
        where = f"{where} ({kind})"
        if kind == "message":
            _message_parts(raw, where, parts, omitted)
            continue
        item = {str(k): v for k, v in raw.items() if v is not None}
        if kind == "function_call":
            calls.append(_function_call(item, where))
        elif kind == "reasoning":
            if not isinstance(item.get("id"), str) or not item["id"]:
                raise MalformedResponse(
                    f"{where} has no id (a reasoning item goes back verbatim, id and all)"
                )
            if not isinstance(item.get("summary", []), list):
                raise MalformedResponse(f"{where}.summary must be a list")
            item.setdefault("summary", [])
        elif strict and kind not in BUILTIN_ITEMS:
            raise MalformedResponse(f"{where}: unknown output item type {kind!r}")
        parts.append({"type": "responses_item", "item": item})
    return tuple(parts), tuple(calls), tuple(omitted)


def _message_parts(
    item: Mapping[str, Any], where: str, parts: list[dict[str, Any]], omitted: list[dict[str, Any]]
) -> None:
    content = item.get("content")
    if not isinstance(content, list):
        raise MalformedResponse(f"{where} needs a content list")
    for index, block in enumerate(content):
        at = f"{where}.content[{index}]"
        if not isinstance(block, Mapping):
            raise MalformedResponse(f"{at} is not an object")
        if block.get("type") == "output_text":
            text = _string_field(block, "text", at)
            if text:
                parts.append({"type": "text", "text": text})
            if block.get("annotations"):
                kept = json_values({"value": block["annotations"]})
                if "value" in kept:
                    omitted.append({"type": "openai_field", "field": "annotations", "value": kept["value"]})
        elif block.get("type") == "refusal":
            parts.append({"type": "refusal", "refusal": _string_field(block, "refusal", at)})


def _function_call(item: dict[str, Any], where: str) -> ToolCall:
    for field in ("call_id", "name", "arguments"):
        if not isinstance(item.get(field), str) or (field != "arguments" and not item[field]):
            raise MalformedResponse(f"{where} has no string {field}")
    arguments = parse_arguments(item["arguments"])
    if arguments is None:  # not a JSON object: the exact string is the call's (and stays in the item)
        return ToolCall(
            id=item["call_id"], name=item["name"], arguments={}, invalid_arguments=item["arguments"]
        )
    return ToolCall(id=item["call_id"], name=item["name"], arguments=arguments)


def responses_usage(usage: object) -> dict[str, Any] | None:
    """A Response's ``usage``, normalized (None when there is none): its own fields kept (JSON values), with
    ``input_tokens`` and ``output_tokens`` as sent and, when reported, ``cache_read_input_tokens``
    (``input_tokens_details.cached_tokens``) and ``reasoning_tokens`` (``output_tokens_details``).

    Raises:
        MalformedResponse: usage that is not an object, or without non-negative integer token counts.
    """
    return normalized_usage(
        usage,
        ("input_tokens",),
        ("output_tokens",),
        (
            ("input_tokens_details", "cached_tokens", "cache_read_input_tokens"),
            ("output_tokens_details", "reasoning_tokens", "reasoning_tokens"),
        ),
    )


def responses_result(item: object) -> tuple[str, str | list[dict[str, Any]]]:
    """A ``function_call_output`` item (a dict or an SDK object) as ``(call_id, content)`` for
    ``t.tool_result``: ``output`` a string as it is, or its list of ``input_text`` / ``input_image`` /
    ``input_file`` parts as the content parts ``t.tool_result`` takes (text, OpenAI ``image_url`` and ``file``
    parts, a document by URL).

    Raises:
        InvalidInput: not a function_call_output item, no string ``call_id``, an ``output`` that is neither a
            string nor a list of those parts (naming the part and field).
    """
    if not isinstance(item, Mapping) and callable(getattr(item, "model_dump", None)):
        item = item.model_dump(mode="json")  # type: ignore[attr-defined]
    if not isinstance(item, Mapping) or item.get("type") != "function_call_output":
        raise InvalidInput(
            "a tool result item must be a Responses function_call_output item (or pass a call id)"
        )
    call_id, output = item.get("call_id"), item.get("output")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidInput("function_call_output item: call_id must be a non-empty string")
    if isinstance(output, str):
        return call_id, output
    if not isinstance(output, list):
        raise InvalidInput("function_call_output item: output must be a string or a list of input parts")
    return call_id, [
        _result_part(part, f"function_call_output item: output[{i}]") for i, part in enumerate(output)
    ]


def _result_part(part: object, where: str) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind == "input_text" and isinstance(part, Mapping) and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "input_image" and isinstance(part, Mapping) and isinstance(part.get("image_url"), str):
        detail = part.get("detail")
        image = {
            "url": part["image_url"],
            **({"detail": detail} if detail in ("low", "high", "auto") else {}),
        }
        return {"type": "image_url", "image_url": image}
    if kind == "input_file" and isinstance(part, Mapping):
        if isinstance(part.get("file_data"), str):
            name = part.get("filename")
            return {
                "type": "file",
                "file": {"file_data": part["file_data"], **({"filename": name} if name else {})},
            }
        if isinstance(part.get("file_url"), str):
            return {"type": "document", "url": part["file_url"]}
    raise InvalidInput(
        f"{where} must be input_text (text), input_image (image_url) or input_file (file_data or file_url)"
    )


# --- requests ---------------------------------------------------------------------------------------------


def messages_to_responses(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """``(instructions, input)``: the system messages before the first other message joined as
    ``instructions`` (None when there are none), every other message as input items.

    A message's ``name`` (the API has no field for it) prefixes its first text as ``<name>: `` (a text
    ``<name>:`` is added first to a user message with no text; an assistant message with no text sends none).
    User (and later system) messages: ``{"role", "content"}``, the content a string, or a list of
    ``input_text`` / ``input_image`` (a data: URL or the https URL; ``detail`` kept) / ``input_file`` (a PDF
    as a data: URL; a text document as ``input_text``) parts. An assistant message: its parts in order, text
    and refusals as one ``{"role": "assistant", "content": <text>}`` each run, each ``responses_item`` part
    verbatim (reasoning ahead of its function_call, as received), thinking left out; then each tool call no
    function_call item carried, as ``{"type": "function_call", "call_id", "name", "arguments": <JSON>}`` (the
    exact string of a call recorded with ``invalid_arguments``); a
    reasoning item with no output after it in its message is left out (:func:`unsent_reasoning`). A
    tool result: ``{"type": "function_call_output", "call_id", "output": <text>}``, its images and documents
    as the output's list of input parts.
    """
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system" and not items:
            instructions.append(message.content)
        elif message.role == "assistant":
            items.extend(_assistant_items(message))
        elif message.role == "tool":
            items.append(_tool_output(message))
        else:
            items.append({"role": message.role, "content": _input_content(message)})
    return ("\n\n".join(instructions) if instructions else None), items


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    sent: set[str] = set()
    text: list[str] = []

    def flush() -> None:
        if "".join(text).strip():
            named = message.name and not any(item.get("role") == "assistant" for item in items)
            prefix = f"{message.name}: " if named else ""  # no name field: it prefixes the first text
            items.append({"role": "assistant", "content": prefix + "".join(text)})
        text.clear()

    for part in message.parts or (Part(type="text", text=message.content),):
        if part.type == "text" and part.text:
            text.append(part.text)
        elif part.type == "refusal" and part.refusal:
            text.append(part.refusal)
        elif part.type == "responses_item" and part.item is not None:
            flush()
            items.append(copy.deepcopy(part.item))
            if part.item.get("type") == "function_call":
                sent.add(str(part.item.get("call_id")))
    flush()
    for call in message.tool_calls:
        if call.id not in sent:
            arguments = (
                call.invalid_arguments
                if call.invalid_arguments is not None  # the model's own string, as it came
                else json.dumps(call.arguments, ensure_ascii=False)
            )
            items.append(
                {"type": "function_call", "call_id": call.id, "name": call.name, "arguments": arguments}
            )
    while items and items[-1].get("type") == "reasoning":
        items.pop()  # reasoning with no output after it (a reply cut off while reasoning): refused alone
    return items


def unsent_reasoning(message: Message) -> list[dict[str, Any]]:
    """The reasoning items of an assistant message that :func:`messages_to_responses` leaves out: those with no
    output after them in the message (no tool call, other item, or non-blank text or refusal: a reply cut off
    while reasoning, or its output edited away), which the API refuses ("a reasoning item provided without its
    required following item")."""
    if message.role != "assistant" or message.tool_calls:
        return []
    out: list[dict[str, Any]] = []
    for part in reversed(message.parts):
        if part.type == "responses_item" and part.item is not None:
            if part.item.get("type") != "reasoning":
                break
            out.append(part.item)
        elif part.type in ("text", "refusal") and (part.text or part.refusal or "").strip():
            break
    return out[::-1]


def _tool_output(message: Message) -> dict[str, Any]:
    output: str | list[dict[str, Any]] = message.content
    if any(p.type in ("image", "document") for p in message.parts):
        output = _input_parts(message.parts)
    return {"type": "function_call_output", "call_id": str(message.tool_call_id), "output": output}


def _input_content(message: Message) -> str | list[dict[str, Any]]:
    if not message.parts:
        text = message.content
        return f"{message.name}: {text}" if message.name else text
    parts = _input_parts(message.parts)
    if message.name:  # no name field: it prefixes the first text, as for Anthropic
        first = next((p for p in parts if p["type"] == "input_text"), None)
        if first is None:
            parts.insert(0, {"type": "input_text", "text": f"{message.name}:"})
        else:
            first["text"] = f"{message.name}: {first['text']}"
    return parts


def _input_parts(parts: Sequence[Part]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if part.type == "text" and part.text:
            out.append({"type": "input_text", "text": part.text})
        elif part.type == "image":
            url = part.url if part.data is None else data_url(str(part.media_type), part.data)
            out.append({"type": "input_image", "image_url": url, "detail": part.detail or "auto"})
        elif part.type == "document":
            title = f"{part.title}\n" if part.title else ""
            if part.data is None:
                out.append({"type": "input_file", "file_url": str(part.url)})
            elif part.media_type == PDF:
                name = part.title or "document.pdf"
                out.append({"type": "input_file", "filename": name, "file_data": data_url(PDF, part.data)})
            else:
                out.append({"type": "input_text", "text": title + part.data.decode("utf-8", "replace")})
    return out


def tool_to_responses(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """A stored tool definition as a Responses function tool ``{"type": "function", "name", "description",
    "parameters", "strict"}`` (``strict`` as stored, else None); an Anthropic server tool is left out
    (None)."""
    spec = read_stored(schema)
    if spec.shape == ANTHROPIC_SERVER:
        return None
    return {"type": "function", **function_fields(spec, "parameters", strict="always")}


def responses_params(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"input": [...], "instructions": ..., "tools": [...]}`` for ``client.responses.create(**params,
    model=...)``: ``instructions`` only when the context starts with system messages, ``tools`` only when
    some are offered."""
    instructions, items = messages_to_responses(messages)
    params: dict[str, Any] = {"input": items}
    if instructions is not None:
        params["instructions"] = instructions
    rendered = [tool for tool in map(tool_to_responses, tools) if tool is not None]
    if rendered:
        params["tools"] = rendered
    return params
