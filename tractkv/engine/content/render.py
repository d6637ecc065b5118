"""Provider shapes: the one module that knows how OpenAI chat completions and Anthropic messages spell
messages, tools and tool calls.

Requests: compiled :class:`Message` values and stored tool definitions (any shape :mod:`.toolsets`
accepts) rendered for an API (:func:`openai_params`, :func:`anthropic_params`). Replies: an API's assistant
message read back as payload parts (text, thinking, refusal) and :class:`ToolCall` values
(:func:`openai_reply`, :func:`anthropic_reply`), its usage normalized (:func:`openai_usage`,
:func:`anthropic_usage`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tractkv import codec
from tractkv.engine.content.media import PDF, TEXT, b64, data_url
from tractkv.engine.content.payload import Message, Part, ToolCall
from tractkv.engine.content.toolsets import ANTHROPIC, ANTHROPIC_SERVER, EMPTY_PARAMETERS, read_stored
from tractkv.errors import MalformedResponse


def messages_to_openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """OpenAI chat messages: ``tool_calls`` on assistant messages, ``role: "tool"`` results.

    Parts: a user (or system) message with parts has a list ``content``: ``text`` parts, ``image_url``
    parts (a base64 data: URL of the exact bytes, or the https URL; ``detail`` kept) and ``file`` parts for
    PDFs (``{"filename": <title or "document.pdf">, "file_data": <data: URL>}``); a ``text/plain`` document
    becomes a text part (its title, if any, on the first line) and a document by URL a text part naming the
    URL (chat completions take neither). An assistant message sends its text as ``content``, a refusal part
    as the ``refusal`` field (its content a list of text parts when it has several), and leaves thinking
    out (OpenAI has no field for it). A ``tool`` message takes
    text only, so a result's images and documents follow, after the last result of that run of results,
    in ONE user message that starts with a text naming the call ids they belong to; the pairing of calls
    and results is unchanged (every result still directly follows its call's run).
    """
    out: list[dict[str, Any]] = []
    attachments: list[tuple[str, list[dict[str, Any]]]] = []  # (call id, media parts) of the current run
    for message in messages:
        if attachments and message.role != "tool":
            out.append(_openai_attachments(attachments))
            attachments = []
        texts = [p for p in message.parts if p.type == "text"]
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
            entry["name"] = message.name
        if message.role == "assistant":
            refusal = "".join(p.refusal or "" for p in message.parts if p.type == "refusal")
            if refusal:
                entry["refusal"] = refusal
                entry["content"] = content or None
        if message.tool_calls:
            entry["content"] = content or None
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
    if attachments:
        out.append(_openai_attachments(attachments))
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


def messages_to_anthropic(messages: Sequence[Message]) -> dict[str, Any]:
    """``{"system": str, "messages": [...]}`` for Anthropic.

    System messages before the first other message are joined into ``system``; a later system message is
    rendered in place, as a user text block ``System: <text>`` (Anthropic has no system role in
    ``messages``; moving it to the top would change its meaning). A message's ``name`` (which Anthropic has
    no field for) prefixes its first text block as ``<name>: `` (a text block ``<name>:`` is added before a
    message with no text); a tool result's name is its tool's and is not repeated. Tool calls become
    ``tool_use`` blocks and tool results ``tool_result`` blocks in a user turn; consecutive turns of one role
    are merged into one turn of content blocks, as the API expects tool results for one assistant turn to
    arrive together. Within a user turn the ``tool_result`` blocks come first (the API requires them right
    after the ``tool_use`` turn), followed by the turn's other blocks in their original order; within an
    assistant turn ``thinking`` / ``redacted_thinking`` blocks come first, exactly as recorded (signature,
    data), then text, then ``tool_use``. Parts: images and documents are native ``image`` / ``document``
    blocks (a ``base64`` source of the exact bytes, a ``text`` source for ``text/plain``, or a ``url``
    source; ``title`` kept, ``detail`` has no Anthropic field), also inside a ``tool_result``'s content when
    the result has parts; a refusal part is sent as text. Text that is empty or only whitespace is not sent
    (the API rejects such blocks), so a message with no other block is left out of this rendering only, and
    an empty tool result is sent without ``content``.

    The API's other request rules, kept here: the first turn is a user turn (a user turn with
    :data:`ANTHROPIC_START` is put first when the context starts with an assistant turn or has no turn at
    all); a final assistant turn does not end in whitespace (its last text block is stripped at the end);
    tool call ids match ``^[a-zA-Z0-9_-]+$`` and are unique in the request (others are rewritten, see
    :class:`_AnthropicIds`, with their results).
    """
    system: list[str] = []
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    leading = True
    ids = _AnthropicIds()
    for message in messages:
        if message.role == "system" and leading:
            system.append(message.content)
            continue
        leading = False
        role = "assistant" if message.role == "assistant" else "user"
        blocks: list[dict[str, Any]] = []
        if message.role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": ids.result(str(message.tool_call_id)),
            }
            content: Any = _anthropic_parts(message.parts) if message.parts else message.content
            if content and (not isinstance(content, str) or content.strip()):
                block["content"] = content  # optional: an empty result is sent without one
            if message.is_error:
                block["is_error"] = True
            blocks.append(block)
        else:
            if message.role == "system":
                blocks.append({"type": "text", "text": f"System: {message.content}"})
            elif message.parts:
                blocks.extend(_anthropic_parts(message.parts))
            elif message.content.strip():
                blocks.append({"type": "text", "text": message.content})
            if message.name is not None and message.role != "system":
                _prefix_name(blocks, message.name)
            if message.tool_calls:
                ids.open_turn()
            blocks.extend(
                {"type": "tool_use", "id": ids.call(c.id), "name": c.name, "input": c.arguments}
                for c in message.tool_calls
            )
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    for role, blocks in turns:
        if role == "user":
            blocks.sort(key=lambda b: b["type"] != "tool_result")  # stable: results first, the rest after
        else:
            blocks.sort(key=lambda b: b["type"] not in _THINKING)  # stable: thinking first, as recorded
    if turns and turns[-1][0] == "assistant":
        _strip_final_text(turns)
    if not turns or turns[0][0] != "user":
        turns.insert(0, ("user", [{"type": "text", "text": ANTHROPIC_START}]))
    rendered: list[dict[str, Any]] = []
    for role, blocks in turns:
        simple = len(blocks) == 1 and blocks[0]["type"] == "text"
        rendered.append({"role": role, "content": blocks[0]["text"] if simple else blocks})
    return {"messages": rendered, "system": "\n\n".join(system)}


ANTHROPIC_START = "(conversation start)"
"""The text of the user turn put first when a context has no user turn before its first assistant turn (or
no turn at all): Anthropic requires ``messages`` to be non-empty and to start with a user turn."""

_ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")


class _AnthropicIds:
    """Tool call ids as Anthropic accepts them: ``^[a-zA-Z0-9_-]+$`` and unique in a request.

    An id that already fits and was not used by an earlier call is sent as it is. Otherwise (another
    provider's id such as ``functions.get_weather:0``, or an id reused by a later assistant message, which
    some OpenAI-compatible servers do) other characters become ``_`` and a ``_<n>`` suffix makes it unique;
    the results of that message's calls are renamed the same way (the pairing pass puts them right after).
    """

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.turn: dict[str, str] = {}  # the latest calling message's ids -> the ids sent

    def open_turn(self) -> None:
        self.turn = {}

    def call(self, call_id: str) -> str:
        sent = (
            call_id if _ANTHROPIC_ID.fullmatch(call_id) else re.sub(r"[^a-zA-Z0-9_-]", "_", call_id) or "call"
        )
        base, n = sent, 1
        while sent in self.used:
            n += 1
            sent = f"{base}_{n}"
        self.used.add(sent)
        self.turn[call_id] = sent
        return sent

    def result(self, call_id: str) -> str:
        return self.turn.get(call_id, call_id)


def _strip_final_text(turns: list[tuple[str, list[dict[str, Any]]]]) -> None:
    """Anthropic refuses a final assistant turn ending in whitespace (a prefill): strip the end of its last
    text block, leaving the turn out if nothing is left."""
    blocks = turns[-1][1]
    if blocks[-1]["type"] != "text":
        return
    text = blocks[-1]["text"].rstrip()
    if text:
        blocks[-1] = {"type": "text", "text": text}
    else:
        del blocks[-1]
        if not blocks:
            del turns[-1]


_THINKING = ("thinking", "redacted_thinking")


def _prefix_name(blocks: list[dict[str, Any]], name: str) -> None:
    for block in blocks:
        if block["type"] == "text":
            block["text"] = f"{name}: {block['text']}"
            return
    blocks.insert(0, {"type": "text", "text": f"{name}:"})


def _anthropic_parts(parts: Sequence[Part]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if part.type == "text" and part.text and part.text.strip():
            out.append({"type": "text", "text": part.text})
        elif part.type in ("image", "document"):
            if part.data is None:
                source: dict[str, Any] = {"type": "url", "url": part.url}
            elif part.media_type == TEXT:
                source = {"type": "text", "media_type": TEXT, "data": part.data.decode("utf-8", "replace")}
            else:
                source = {"type": "base64", "media_type": part.media_type, "data": b64(part.data)}
            block: dict[str, Any] = {"type": part.type, "source": source}
            if part.type == "document" and part.title is not None:
                block["title"] = part.title
            out.append(block)
        elif part.type == "thinking":
            out.append({"type": "thinking", "thinking": part.thinking, "signature": part.signature})
        elif part.type == "redacted_thinking":
            out.append({"type": "redacted_thinking", "data": part.redacted})
        elif part.type == "refusal" and part.refusal and part.refusal.strip():
            out.append({"type": "text", "text": part.refusal})
    return out


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
    function: dict[str, Any] = {"name": spec.name}
    if spec.description is not None:
        function["description"] = spec.description
    function["parameters"] = dict(spec.parameters) if spec.parameters is not None else dict(EMPTY_PARAMETERS)
    if spec.strict is not None:
        function["strict"] = spec.strict
    return {"type": "function", "function": function}


def tool_to_anthropic(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A tool definition (any shape :func:`~tractkv.engine.content.toolsets.read_tool` accepts) as an Anthropic tool.

    An Anthropic tool (custom or server) is sent as given (a custom tool without ``input_schema`` gets an
    empty object schema). Other shapes become ``{"name", "description", "input_schema", "strict"}``:
    ``description`` when given, ``strict`` when a boolean (the Messages API's tool ``strict``); MCP's
    ``title``, ``outputSchema`` and ``annotations`` are not sent (Anthropic refuses unknown fields), nor is a
    field whose value is None.

    A stored definition today's input rules refuse (a store written before them) renders as
    :func:`~tractkv.engine.content.toolsets.read_stored` reads it (its name as stored, even one Anthropic refuses).

    Raises:
        InvalidInput: ``schema`` is not a dict.
    """
    spec = read_stored(schema)
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
    """
    params: dict[str, Any] = {"messages": messages_to_openai(messages)}
    rendered = [r for r in (tool_to_openai(t) for t in tools) if r is not None]
    if rendered:
        params["tools"] = rendered
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
            arguments = json.loads(arguments, parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            raise MalformedResponse(f"tool_calls[{index}] ({name}) arguments are not JSON: {exc}") from None
        except ValueError as exc:  # NaN / Infinity: not JSON, and no store could hold them
            raise MalformedResponse(f"tool_calls[{index}] ({name}) arguments hold {exc}") from None
        except RecursionError:  # hostile nesting ("[[[[..."): refused like any other bad JSON
            raise MalformedResponse(f"tool_calls[{index}] ({name}) arguments are nested too deeply") from None
    if not isinstance(arguments, Mapping):
        raise MalformedResponse(f"tool_calls[{index}] ({name}) arguments must be a JSON object")
    check_arguments(arguments, f"tool_calls[{index}] ({name}) arguments")
    call_id = raw.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise MalformedResponse(f"tool_calls[{index}] ({name}) has no id")
    return ToolCall(id=call_id, name=name, arguments=dict(arguments))


MAX_ARGUMENT_DEPTH = codec.MAX_DEPTH - 2
"""How deeply a reply's tool-call arguments may nest: what a stored payload can hold around them (the
payload and its ``tool_calls`` list take two of :data:`tractkv.codec.MAX_DEPTH`'s levels)."""
_INT_RANGE = (-(2**63), codec.INT_MAX)  # the integers a stored payload can hold


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name}, which is not a JSON value")


def check_arguments(arguments: Mapping[str, Any], where: str) -> None:
    """Refuse tool-call arguments a store could not hold, before anything is copied or committed: nesting
    deeper than :data:`MAX_ARGUMENT_DEPTH`, NaN or infinite floats, integers outside 64 bits, non-string
    keys, values that are not JSON.

    Raises:
        MalformedResponse: naming the first such value.
    """
    stack: list[tuple[object, str, int]] = [(arguments, where, 1)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, Mapping | list | tuple):
            if depth > MAX_ARGUMENT_DEPTH:
                raise MalformedResponse(f"{where}: nested more than {MAX_ARGUMENT_DEPTH} levels deep")
            if isinstance(value, Mapping):
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise MalformedResponse(f"{path} has a key that is not a string: {key!r}")
                    stack.append((item, f"{path}.{key}", depth + 1))
            else:
                stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))
        elif isinstance(value, bool) or value is None or isinstance(value, str):
            continue
        elif isinstance(value, int):
            if not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
                raise MalformedResponse(f"{path} is an integer beyond 64 bits")
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise MalformedResponse(f"{path} is {value}, which is not a JSON value")
        else:
            raise MalformedResponse(f"{path} is a {type(value).__name__}, not a JSON value")


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
    the message's ``refusal`` as ``{"type": "refusal", "refusal"}``. The fields a message has no place for
    (``annotations``, ``audio``, the deprecated ``function_call``, some servers' ``reasoning_content``) are
    :func:`openai_extras`.

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


OPENAI_EXTRA_FIELDS = ("annotations", "audio", "function_call", "reasoning_content")
"""Assistant-message fields of a chat completion that a stored message has no place for."""


def openai_extras(message: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """What an OpenAI assistant message says beyond its parts and tool calls, kept rather than lost:
    ``{"type": "openai_field", "field": <name>, "value": <its JSON value>}`` for each of
    :data:`OPENAI_EXTRA_FIELDS` present (not None, not empty)."""
    extras = []
    for field in OPENAI_EXTRA_FIELDS:
        value = message.get(field)
        if value not in (None, "", [], {}):
            kept = json_values({"value": value})
            if "value" in kept:
                extras.append({"type": "openai_field", "field": field, "value": kept["value"]})
    return tuple(extras)


def anthropic_reply(
    blocks: object,
) -> tuple[tuple[dict[str, Any], ...], tuple[ToolCall, ...], tuple[dict[str, Any], ...]]:
    """The parts, tool calls and omitted blocks of an Anthropic message's ``content``.

    Parts keep the blocks' order: ``text`` (empty text left out; a text block with ``citations`` is also
    returned whole among the omitted blocks, as ``{"type": "citations", "content_index", "text",
    "citations"}``, since a part holds text only), ``thinking`` as
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
            if block.get("citations"):  # kept beside the message, which has no place for them
                omitted.append(json_values({**block, "type": "citations", "content_index": index}))
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
            check_arguments(arguments, f"{where} tool_use 'input'")
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
