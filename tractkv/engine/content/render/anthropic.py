"""Anthropic Messages: compiled messages and tool definitions as a request, and a reply read back
(its content blocks as payload parts and tool calls, its usage normalized)."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tractkv.engine.content.media import TEXT, b64
from tractkv.engine.content.payload import SERVER_BLOCKS, Message, Part, ToolCall, anthropic_block, check_json
from tractkv.engine.content.render.common import (
    _string_field,
    check_arguments,
    function_fields,
    json_values,
    normalized_usage,
)
from tractkv.engine.content.toolsets import ANTHROPIC, ANTHROPIC_SERVER, EMPTY_PARAMETERS, read_stored
from tractkv.errors import ContentError, InvalidInput, MalformedResponse


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
    after the ``tool_use`` turn), followed by the turn's other blocks in their original order. An assistant
    message recorded with its block order (an ``anthropic_call`` part placing each ``tool_use``, or an
    ``anthropic_block`` part: a server tool block, sent back verbatim) is sent in its parts' order, each
    ``tool_use`` where it stood (with its ``caller`` and ``toolset_name``); a turn holding one keeps every
    message's blocks in place (another message's thinking first within that message). Otherwise (every
    message written before block order was recorded) ``thinking`` / ``redacted_thinking`` blocks come first
    in the turn, exactly as recorded (signature, data), then text, then ``tool_use``. A text part's
    ``citations`` go back on its text block. Parts: images and documents are native ``image`` / ``document``
    blocks (a ``base64`` source of the exact bytes, a ``text`` source for ``text/plain``, or a ``url``
    source; ``title`` kept, ``detail`` has no Anthropic field), also inside a ``tool_result``'s content when
    the result has parts; a refusal part is sent as text. Text that is empty or only whitespace is not sent
    (the API rejects such blocks), so a message with no other block is left out of this rendering only, and
    an empty tool result is sent without ``content``. A message's cache breakpoint (``Message.cache``, set
    by an annotation) is ``cache_control`` on its last block that is not thinking (a text block then stays a
    block); when a leading system message carries one, ``system`` is a list of text blocks, one per message.

    The API's other request rules, kept here: the first turn is a user turn (a user turn with
    :data:`ANTHROPIC_START` is put first when the context starts with an assistant turn or has no turn at
    all); a final assistant turn does not end in whitespace (its last text block is stripped at the end);
    tool call ids match ``^[a-zA-Z0-9_-]+$`` and are unique in the request (others are rewritten, see
    :class:`_AnthropicIds`, with their results).
    """
    system: list[Message] = []
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    segments: list[list[tuple[list[dict[str, Any]], bool]]] = []  # per turn: each message's blocks, ordered
    leading = True
    ids = _AnthropicIds()
    for message in messages:
        if message.role == "system" and leading:
            system.append(message)
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
            if message.tool_calls:
                ids.open_turn()
            if _ordered(message):
                blocks = _ordered_blocks(message, ids)
            else:
                if message.role == "system":
                    blocks.append({"type": "text", "text": f"System: {message.content}"})
                elif message.parts:
                    blocks.extend(_anthropic_parts(message.parts))
                elif message.content.strip():
                    blocks.append({"type": "text", "text": message.content})
                if message.name is not None and message.role != "system":
                    _prefix_name(blocks, message.name)
                blocks.extend(_tool_use(c, ids) for c in message.tool_calls)
        if not blocks:
            continue
        if message.cache is not None:
            _mark(blocks, message.cache)
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
            segments[-1].append((blocks, _ordered(message)))
        else:
            turns.append((role, list(blocks)))  # the turn's list grows; the message's stays its own
            segments.append([(blocks, _ordered(message))])
    for (role, blocks), parts in zip(turns, segments, strict=True):
        if role == "user":
            blocks.sort(key=lambda b: b["type"] != "tool_result")  # stable: results first, the rest after
        else:
            blocks[:] = _assistant_turn(parts)
    if turns and turns[-1][0] == "assistant":
        _strip_final_text(turns)
    if not turns or turns[0][0] != "user":
        turns.insert(0, ("user", [{"type": "text", "text": ANTHROPIC_START}]))
    rendered: list[dict[str, Any]] = []
    for role, blocks in turns:
        simple = len(blocks) == 1 and blocks[0]["type"] == "text" and "cache_control" not in blocks[0]
        rendered.append({"role": role, "content": blocks[0]["text"] if simple else blocks})
    return {"messages": rendered, "system": _system(system)}


def _assistant_turn(messages: list[tuple[list[dict[str, Any]], bool]]) -> list[dict[str, Any]]:
    """An assistant turn's blocks from its messages' (blocks, ordered): with no ordered message, thinking
    first, as recorded (every message stored before block order was kept); else each message's blocks in
    place (an unordered one's thinking first within it), and when the turn holds thinking but does not start
    with it (an earlier message's text before a reply's thinking), the thinking that leads its message comes
    first in the turn, as Anthropic requires."""
    blocks = [b for own, _ in messages for b in own]
    if not any(is_ordered for _, is_ordered in messages):
        return sorted(blocks, key=lambda b: b["type"] not in _THINKING)  # stable
    placed = [
        own if is_ordered else sorted(own, key=lambda b: b["type"] not in _THINKING)
        for own, is_ordered in messages
    ]
    flat = [b for own in placed for b in own]
    if not flat or flat[0]["type"] in _THINKING or not any(b["type"] in _THINKING for b in flat):
        return flat
    first: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for own in placed:
        lead = 0
        while lead < len(own) and own[lead]["type"] in _THINKING:
            lead += 1
        first.extend(own[:lead])
        rest.extend(own[lead:])
    return first + rest


def _ordered(message: Message) -> bool:
    """True when an assistant message was recorded with its block order: it has an ``anthropic_call`` or
    ``anthropic_block`` part (written since block order is recorded; older messages have neither)."""
    return message.role == "assistant" and any(p.type in _ORDER_PARTS for p in message.parts)


_ORDER_PARTS = ("anthropic_call", "anthropic_block")


def _tool_use(call: ToolCall, ids: _AnthropicIds, part: Part | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_use",
        "id": ids.call(call.id),
        "name": call.name,
        "input": call.arguments,
    }
    if part is not None and part.caller is not None:
        block["caller"] = copy.deepcopy(part.caller)
    if part is not None and part.toolset_name is not None:
        block["toolset_name"] = part.toolset_name
    return block


def _ordered_blocks(message: Message, ids: _AnthropicIds) -> list[dict[str, Any]]:
    """An ordered message's blocks: each part in order, each ``tool_use`` where its ``anthropic_call`` part
    stands (a call with none, after the rest), the name prefix as for any message (a ``<name>:`` text it adds
    goes after the leading thinking, which stays first)."""
    calls = {c.id: c for c in message.tool_calls}
    placed: set[str] = set()
    rebuilt: list[dict[str, Any]] = []
    for part in message.parts:
        if part.type == "anthropic_call" and part.call_id in calls and part.call_id not in placed:
            placed.add(part.call_id)
            rebuilt.append(_tool_use(calls[part.call_id], ids, part))
        else:
            rebuilt.extend(_anthropic_parts((part,)))
    if message.name is not None:  # on its first text, or a text of its own after the leading thinking
        lead = 0
        while lead < len(rebuilt) and rebuilt[lead]["type"] in _THINKING:
            lead += 1
        rest = rebuilt[lead:]
        _prefix_name(rest, message.name)
        rebuilt[lead:] = rest
    rebuilt.extend(_tool_use(c, ids) for c in message.tool_calls if c.id not in placed)
    return rebuilt


def cache_control(ttl: str) -> dict[str, str]:
    """Anthropic's ``cache_control`` for a breakpoint's lifetime (``5m`` is the API's default ttl)."""
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


def _mark(blocks: list[dict[str, Any]], ttl: str) -> None:
    """Put a cache breakpoint on a message's last block that may carry one (thinking blocks cannot)."""
    for block in reversed(blocks):
        if block["type"] not in _THINKING:
            block["cache_control"] = cache_control(ttl)
            return


def _system(system: list[Message]) -> str | list[dict[str, Any]]:
    """The leading system messages: their texts joined, or, when one carries a cache breakpoint, one text
    block per (non-blank) message, each marked one with ``cache_control``."""
    if all(m.cache is None for m in system):
        return "\n\n".join(m.content for m in system)
    blocks: list[dict[str, Any]] = []
    for message in system:
        if message.content.strip():
            blocks.append({"type": "text", "text": message.content})
            if message.cache is not None:
                blocks[-1]["cache_control"] = cache_control(message.cache)
    return blocks


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
        blocks[-1] = {**blocks[-1], "text": text}  # a cache_control on it stays
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
            if part.citations is not None:
                out[-1]["citations"] = copy.deepcopy(list(part.citations))
        elif part.type == "anthropic_block" and part.item is not None:
            out.append(copy.deepcopy(part.item))
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
    return function_fields(spec, "input_schema", strict="given")


MAX_CACHE_BREAKPOINTS = 4
"""The most ``cache_control`` breakpoints an Anthropic request may hold (system, tools and messages together)."""


def anthropic_params(
    messages: Sequence[Message], tools: Sequence[Mapping[str, Any]], tools_cache: str | None = None
) -> dict[str, Any]:
    """Keyword arguments for ``client.messages.create``: system (when set), messages, tools (when any),
    ``container`` (when the latest assistant message was answered in one: :func:`latest_container`);
    ``tools_cache`` puts a cache breakpoint on the last tool.

    Raises:
        InvalidInput: cache breakpoints Anthropic refuses (see :func:`check_cache_breakpoints`).
    """
    params = render_anthropic_params(messages, tools, tools_cache)
    check_cache_breakpoints(params)
    return params


def render_anthropic_params(
    messages: Sequence[Message], tools: Sequence[Mapping[str, Any]], tools_cache: str | None = None
) -> dict[str, Any]:
    """:func:`anthropic_params` without :func:`check_cache_breakpoints` (for a caller that checks first and
    names the breakpoints better)."""
    rendered = messages_to_anthropic(messages)
    params: dict[str, Any] = {"messages": rendered["messages"]}
    if rendered["system"]:
        params["system"] = rendered["system"]
    container = latest_container(messages)
    if container is not None:
        params["container"] = container
    if tools:
        params["tools"] = [tool_to_anthropic(t) for t in tools]
        if tools_cache is not None:
            params["tools"][-1]["cache_control"] = cache_control(tools_cache)
    return params


def latest_container(messages: Sequence[Message]) -> str | None:
    """The id of the container the latest assistant message was answered in (its ``anthropic_container``
    part: code execution's), which the next request names as ``container``; None when that message has none."""
    for message in reversed(messages):
        if message.role == "assistant":
            for part in message.parts:
                if part.type == "anthropic_container" and part.item is not None:
                    return str(part.item["id"])
            return None
    return None


def _cache_marks(params: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """Every block of a request that may carry ``cache_control``, named by place, in Anthropic's cache order
    (tools, then system, then messages)."""
    system = params.get("system")
    marks = [(f"tool {t.get('name')!r}", t) for t in params.get("tools", ())]
    marks += [(f"system block {i}", b) for i, b in enumerate(system if isinstance(system, list) else ())]
    for i, turn in enumerate(params["messages"]):
        blocks = turn["content"] if isinstance(turn["content"], list) else ()
        marks += [(f"messages[{i}] ({turn['role']})", b) for b in blocks]
    return marks


def check_cache_breakpoints(params: Mapping[str, Any]) -> None:
    """Refuse a request Anthropic would refuse for its cache breakpoints: more than
    :data:`MAX_CACHE_BREAKPOINTS`, or a 1h one after a 5m one (Anthropic builds the cache in the order tools,
    system, messages, and takes entries with a longer TTL only before shorter ones).

    Raises:
        InvalidInput: naming the breakpoints by place.
    """
    marks = _cache_marks(params)
    marked = [where for where, block in marks if "cache_control" in block]
    if len(marked) > MAX_CACHE_BREAKPOINTS:
        raise InvalidInput(
            f"Anthropic takes at most {MAX_CACHE_BREAKPOINTS} cache breakpoints; this request has "
            f"{len(marked)}: {'; '.join(marked)} (remove some with annotate(rev, cache='off') / --cache off)"
        )
    short = None
    for where, block in marks:
        control = block.get("cache_control")
        ttl = control.get("ttl", "5m") if isinstance(control, dict) else None
        if ttl == "5m" and short is None:
            short = where
        elif ttl == "1h" and short is not None:
            raise InvalidInput(
                f"Anthropic takes 1h cache breakpoints only before 5m ones (tools, then system, then messages): "
                f"the 1h breakpoint on {where} comes after the 5m one on {short} (change one's cache=)"
            )


def anthropic_reply(
    blocks: object,
) -> tuple[tuple[dict[str, Any], ...], tuple[ToolCall, ...], tuple[dict[str, Any], ...]]:
    """The parts, tool calls and omitted blocks of an Anthropic message's ``content``.

    Parts keep the blocks' order: ``text`` (empty text left out; its ``citations`` kept on the part),
    ``thinking`` as ``{"type": "thinking", "thinking", "signature"}`` and ``redacted_thinking`` as ``{"type":
    "redacted_thinking", "data"}``, exactly as sent (the API checks them when they come back), a server tool
    block (``server_tool_use``, any ``*_tool_result``, ``mcp_tool_use``, ``mcp_tool_result``,
    ``container_upload``) as ``{"type": "anthropic_block", "block"}``, verbatim but for top-level keys set to
    None. ``tool_use`` blocks are the tool calls; where one stood is an ``{"type": "anthropic_call",
    "call_id"}`` part (with its ``caller`` / ``toolset_name`` when sent), one per call, only when needed: when
    a call has a caller or toolset name, or the blocks' order is not the one the message renders in without
    them (:func:`messages_to_anthropic`: thinking first, then the rest, then ``tool_use``), so a reply in that
    order is stored as before. Any other block type (a new kind tractkv does not know) has no place in a
    message: it is returned as the third item (JSON values only) for the caller to keep elsewhere.

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
        if kind == "thinking":
            parts.append(
                {
                    "type": "thinking",
                    "thinking": _string_field(block, "thinking", where),
                    "signature": _string_field(block, "signature", where),
                }
            )
        elif kind == "redacted_thinking":
            parts.append({"type": "redacted_thinking", "data": _string_field(block, "data", where)})
        else:
            if kind == "tool_use":
                calls.append(_read_tool_use(block, where))
            read = anthropic_block_parts(block, where)
            if read is None:
                omitted.append(json_values(block))
            else:
                parts.extend(read)
    return tuple(anthropic_call_order(parts)), tuple(calls), tuple(omitted)


def anthropic_block_parts(block: Mapping[str, Any], where: str) -> list[dict[str, Any]] | None:
    """The part of one Anthropic reply block (see :func:`anthropic_reply`, which reads every block through this
    but thinking): ``text`` with its ``citations`` (none when the text is empty), a server tool block as an
    ``anthropic_block`` part, a ``tool_use`` block as its ``anthropic_call`` place (the call itself is read by
    the caller); None for any other type. Shared with the readers of other frameworks' copies of these blocks
    (LangChain's ``AIMessage``), so each keeps them as this reader does.

    Raises:
        MalformedResponse: a block of one of these types with the wrong shape.
    """
    kind = block.get("type")
    if kind == "text":
        text = _string_field(block, "text", where)
        return [{"type": "text", "text": text, **_citations(block, where)}] if text else []
    if kind == "tool_use":
        call_id = block.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise MalformedResponse(f"{where} tool_use block needs string 'id' and 'name'")
        return [_place(block, call_id, where)]
    if isinstance(kind, str) and (kind in SERVER_BLOCKS or kind.endswith("_tool_result")):
        try:
            kept = anthropic_block(copy.deepcopy(dict(block)), where)
        except (ContentError, RecursionError) as exc:
            raise MalformedResponse(f"{where}: {exc}") from None
        return [{"type": "anthropic_block", "block": kept}]
    return None


def anthropic_call_order(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A reply's parts read by :func:`anthropic_block_parts`, without their ``anthropic_call`` parts when those
    say nothing (no caller or toolset name, and the order the message renders in without them)."""
    places = [p for p in parts if p["type"] == "anthropic_call"]
    if places and not _needs_places(parts, places):
        return [p for p in parts if p["type"] != "anthropic_call"]
    return parts


def anthropic_container(container: object) -> dict[str, Any] | None:
    """The ``{"type": "anthropic_container", "container"}`` part of a message's ``container`` (its JSON values:
    ``id``, ``expires_at``, ...), None when it has none.

    Raises:
        MalformedResponse: a container that is not an object with a string ``id``.
    """
    if container is None:
        return None
    if not isinstance(container, Mapping) or not isinstance(container.get("id"), str) or not container["id"]:
        raise MalformedResponse("a message's 'container' must be an object with a string 'id'")
    return {"type": "anthropic_container", "container": json_values(container)}


def _read_tool_use(block: Mapping[str, Any], where: str) -> ToolCall:
    call_id, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise MalformedResponse(f"{where} tool_use block needs string 'id' and 'name'")
    if not isinstance(arguments, Mapping):
        raise MalformedResponse(f"{where} tool_use 'input' must be an object")
    check_arguments(arguments, f"{where} tool_use 'input'")
    return ToolCall(id=call_id, name=name, arguments=dict(arguments))


def _place(block: Mapping[str, Any], call_id: str, where: str) -> dict[str, Any]:
    """The ``anthropic_call`` part of a ``tool_use`` block: its call id, its ``caller`` and ``toolset_name``."""
    place: dict[str, Any] = {"type": "anthropic_call", "call_id": call_id}
    caller = block.get("caller")
    if caller is not None:
        if not isinstance(caller, Mapping) or not isinstance(caller.get("type"), str):
            raise MalformedResponse(f"{where} tool_use 'caller' must be an object with a string type")
        place["caller"] = json_values(caller)
    if block.get("toolset_name") is not None:
        place["toolset_name"] = _string_field(block, "toolset_name", where)
    return place


def _needs_places(parts: list[dict[str, Any]], places: list[dict[str, Any]]) -> bool:
    """Whether a reply's ``anthropic_call`` parts say something: a caller or toolset name, or an order the
    rendering without them (see :func:`messages_to_anthropic`) would not give back."""
    if any(len(p) > 2 for p in places):
        return True
    kinds = [p["type"] for p in parts]
    if "anthropic_block" in kinds:  # the message keeps its order anyway: are the calls all at the end?
        return kinds[len(kinds) - len(places) :] != ["anthropic_call"] * len(places)
    rank = [0 if k in _THINKING else 2 if k == "anthropic_call" else 1 for k in kinds]
    return rank != sorted(rank)


def _citations(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``{"citations": [...]}`` of a text block that has some (verbatim), else ``{}``."""
    citations = block.get("citations")
    if not citations:
        return {}
    if not isinstance(citations, list) or not all(isinstance(c, Mapping) for c in citations):
        raise MalformedResponse(f"{where} text 'citations' must be a list of objects")
    kept = copy.deepcopy(citations)
    try:
        check_json(kept, f"{where} citations")
    except ContentError as exc:
        raise MalformedResponse(str(exc)) from None
    return {"citations": kept}


def anthropic_usage(usage: object) -> dict[str, Any] | None:
    """A message's ``usage``, normalized (None when there is none): the provider's own fields (JSON values;
    None values left out), ``input_tokens`` and ``output_tokens`` checked. Anthropic's ``input_tokens`` counts
    the uncached input only; ``cache_read_input_tokens`` / ``cache_creation_input_tokens`` are kept as sent.

    Raises:
        MalformedResponse: usage that is not an object, or without non-negative integer token counts.
    """
    return normalized_usage(usage, ("input_tokens",), ("output_tokens",))
