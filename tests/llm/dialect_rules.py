"""The providers' request rules, written from their documentation and independently of tractkv's renderers.

Each ``check_*`` function takes a compiled request (what ``ctx.to_<dialect>_params()`` returns) and raises
:class:`RuleBroken`, naming the dialect, the place and the rule, at the first rule it breaks. Nothing here
imports tractkv's rendering code: the rules are what the providers say they accept, so a renderer bug is caught
rather than repeated. ``sdk_*`` functions validate a request against the official SDK's own request types.

``open_tail=True`` allows one thing a request to a provider never holds: calls of the LAST assistant turn still
unanswered (a tool run in progress, which tractkv compiles but ``generate`` refuses to send); only results of
that turn follow it (and, for Chat, the user message that carries their images, last).

Sources (as of the SDK versions in the dev environment):

- Chat Completions: the ``messages`` array reference (roles ``system`` / ``developer`` / ``user`` /
  ``assistant`` / ``tool``; an assistant message needs ``content`` unless it has ``tool_calls``; "messages with
  role 'tool' must be a response to a preceding message with 'tool_calls'"; "an assistant message with
  'tool_calls' must be followed by tool messages responding to each 'tool_call_id'"); a ``tool`` message's content
  is text (a string or text parts); function names ``^[a-zA-Z0-9_-]{1,64}$``.
- Anthropic Messages: "the first message must use the user role"; consecutive turns of one role are combined
  into one turn; no ``system`` role in ``messages``; "all messages must have non-empty content except for the
  optional final assistant message"; "text content blocks must contain non-whitespace text"; "final assistant
  content cannot end with trailing whitespace"; each ``tool_use`` needs a ``tool_result`` "immediately after" in
  the next user message, the ``tool_result`` blocks first in it; ids ``^[a-zA-Z0-9_-]+$``, unique; thinking
  blocks go back unmodified, in assistant turns, and an assistant turn holding thinking starts with it.
- Responses: each ``function_call_output`` answers a ``function_call`` sent before it with that ``call_id``,
  every call is answered ("No tool output found for function call ..."); a ``reasoning`` item must be followed
  by the output item it produced ("Item ... of type 'reasoning' was provided without its required following
  item") and a ``function_call`` recorded after reasoning needs that reasoning item before it ("... provided
  without its required 'reasoning' item"); item ids are unique in ``input`` ("Duplicate item found with id").
- Gemini ``generateContent``: ``contents`` roles ``user`` / ``model``; a ``functionCall`` part is answered by
  a ``functionResponse`` part of the same name in the next turn (a user turn), all responses to one turn's
  parallel calls in that one turn ("the number of function response parts is equal to the number of function
  call parts of the function call turn"); "function call turn comes immediately after a user turn or after a
  function response turn"; ``system_instruction`` outside ``contents``; a part holds one kind of data.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
CHAT_NAME = re.compile(r"[^\s<|\\/>]+")  # a message's name: "Expected a string that matches '^[^\s<|\\/>]+$'"
ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
DATA_URL = re.compile(r"data:([a-z]+/[a-z0-9.+-]+);base64,([A-Za-z0-9+/]*={0,2})")


class RuleBroken(AssertionError):
    """A request breaks one of its dialect's rules (the message names the dialect, the place and the rule)."""


def rule(ok: object, dialect: str, where: str, what: str) -> None:
    if not ok:
        raise RuleBroken(f"{dialect}: {where}: {what}")


def _keys(value: Mapping[str, Any], allowed: Iterable[str], dialect: str, where: str) -> None:
    unknown = sorted(set(value) - set(allowed))
    rule(not unknown, dialect, where, f"unknown keys {unknown}")


def _data_url(url: object, media_types: Sequence[str]) -> bool:
    match = DATA_URL.fullmatch(url) if isinstance(url, str) else None
    if match is None or match.group(1) not in media_types:
        return False
    try:
        base64.b64decode(match.group(2), validate=True)
    except ValueError:
        return False
    return True


def _image_url(url: object) -> bool:
    return (isinstance(url, str) and url.startswith(("https://", "http://"))) or _data_url(url, IMAGE_TYPES)


def _nonblank(text: object) -> bool:
    return isinstance(text, str) and bool(text.strip())


# --- Chat Completions ----------------------------------------------------------------------------------------

CHAT = "chat"


def check_chat(params: Mapping[str, Any], *, open_tail: bool = False) -> None:
    """OpenAI Chat Completions ``messages`` / ``tools``."""
    _keys(params, ("messages", "tools"), CHAT, "params")
    messages = params.get("messages")
    rule(isinstance(messages, list) and messages, CHAT, "messages", "a non-empty list")
    pending: dict[str, None] | None = None  # the calls of the current tool turn not answered yet
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        role = message.get("role")
        rule(role in ("system", "developer", "user", "assistant", "tool"), CHAT, where, f"role {role!r}")
        if role == "tool":
            _keys(message, ("role", "content", "tool_call_id"), CHAT, where)
            call_id = message.get("tool_call_id")
            rule(
                pending is not None, CHAT, where, "a tool message not in the run of results after tool_calls"
            )
            assert pending is not None
            rule(
                call_id in pending, CHAT, where, f"tool_call_id {call_id!r} answers no open call of the turn"
            )
            del pending[call_id]
            _chat_text_content(message.get("content"), where)
            continue
        # in a tool run in progress, a last user message may follow its results (Chat's attachments of them)
        in_progress = open_tail and role == "user" and i == len(messages) - 1
        rule(
            not pending or in_progress,
            CHAT,
            where,
            f"calls {list(pending or ())} not answered before this {role} message",
        )
        if in_progress and pending:
            _chat_user_content(message, where)
            break
        pending = None
        if "name" in message:
            rule(
                CHAT_NAME.fullmatch(str(message["name"])) is not None,
                CHAT,
                where,
                "name matches ^[^\\s<|\\\\/>]+$",
            )
        if role == "assistant":
            pending = _chat_assistant(message, where)
        else:
            _chat_user_content(message, where)
    else:
        rule(not pending or open_tail, CHAT, "end", f"calls {list(pending or ())} never answered")
    _function_tools(params.get("tools"), CHAT, nested=True)


def _chat_user_content(message: Mapping[str, Any], where: str) -> None:
    """A user, system or developer message: text, and for a user message image and file parts too."""
    _keys(message, ("role", "content", "name"), CHAT, where)
    content = message.get("content")
    if message.get("role") == "user" and isinstance(content, list):
        rule(content, CHAT, where, "an empty content list")
        for j, part in enumerate(content):
            _chat_user_part(part, f"{where}.content[{j}]")
    else:
        _chat_text_content(content, where)


def _chat_text_content(content: object, where: str) -> None:
    if isinstance(content, str):
        return  # no minimum length is documented, and OpenAI takes "" (some compatible servers do not)
    rule(isinstance(content, list) and content, CHAT, where, "content is a string or a list of text parts")
    assert isinstance(content, list)
    for j, part in enumerate(content):
        ok = isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)
        rule(ok and set(part) == {"type", "text"}, CHAT, f"{where}.content[{j}]", "only text parts here")


def _chat_user_part(part: Mapping[str, Any], where: str) -> None:
    kind = part.get("type")
    if kind == "text":
        _keys(part, ("type", "text"), CHAT, where)
        rule(isinstance(part.get("text"), str), CHAT, where, "text")
    elif kind == "image_url":
        _keys(part, ("type", "image_url"), CHAT, where)
        image = part["image_url"]
        _keys(image, ("url", "detail"), CHAT, where)
        rule(_image_url(image.get("url")), CHAT, where, "an image URL or a data: URL of an image type")
        rule(image.get("detail", "auto") in ("auto", "low", "high"), CHAT, where, "detail")
    elif kind == "file":
        _keys(part, ("type", "file"), CHAT, where)
        file = part["file"]
        _keys(file, ("file_data", "file_id", "filename"), CHAT, where)
        rule(_data_url(file.get("file_data"), ("application/pdf",)), CHAT, where, "file_data a PDF data: URL")
        rule(isinstance(file.get("filename"), str) and file["filename"], CHAT, where, "a filename")
    else:
        rule(False, CHAT, where, f"a user content part of type {kind!r}")


def _chat_assistant(message: Mapping[str, Any], where: str) -> dict[str, None] | None:
    _keys(message, ("role", "content", "name", "refusal", "tool_calls", "audio"), CHAT, where)
    content, calls = message.get("content"), message.get("tool_calls")
    if "audio" in message:  # a previous audio reply, by id: {"id": ...} and nothing else
        audio = message["audio"]
        rule(isinstance(audio, Mapping) and set(audio) == {"id"}, CHAT, where, "audio is {id}")
        rule(isinstance(audio["id"], str) and audio["id"], CHAT, where, "audio id a non-empty string")
    if isinstance(content, list):
        for j, part in enumerate(content):
            ok = part.get("type") == "text" and isinstance(part.get("text"), str)
            ok = ok or (part.get("type") == "refusal" and isinstance(part.get("refusal"), str))
            rule(ok, CHAT, f"{where}.content[{j}]", "assistant content parts are text or refusal")
    else:
        rule(content is None or isinstance(content, str), CHAT, where, "content")
    if not calls:
        rule("tool_calls" not in message, CHAT, where, "an empty tool_calls list")
        # "content: required unless tool_calls is specified"; OpenAI takes "" (some compatible servers do not);
        # an audio reply sent back by id needs none (OpenAI's multi-turn audio example)
        rule(
            content is not None or message.get("refusal") or "audio" in message,
            CHAT,
            where,
            "an assistant message needs content or tool_calls",
        )
        return None
    ids: dict[str, None] = {}
    for j, call in enumerate(calls):
        at = f"{where}.tool_calls[{j}]"
        _keys(call, ("id", "type", "function"), CHAT, at)
        rule(call.get("type") == "function", CHAT, at, "type function")
        rule(isinstance(call.get("id"), str) and call["id"] not in ids, CHAT, at, "a unique string id")
        function = call.get("function", {})
        _keys(function, ("name", "arguments"), CHAT, at)
        rule(NAME.fullmatch(str(function.get("name"))), CHAT, at, "function name")
        rule(isinstance(function.get("arguments"), str), CHAT, at, "arguments is a JSON string")
        ids[call["id"]] = None
    return ids


def _function_tools(tools: object, dialect: str, *, nested: bool) -> None:
    if tools is None:
        return
    rule(isinstance(tools, list) and tools, dialect, "tools", "a non-empty list when given")
    assert isinstance(tools, list)
    names = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        rule(tool.get("type") == "function", dialect, where, "a function tool")
        spec = tool.get("function", {}) if nested else tool
        allowed = ("name", "description", "parameters", "strict")
        if nested:
            _keys(tool, ("type", "function"), dialect, where)
            _keys(spec, allowed, dialect, where)
        else:
            _keys(tool, ("type", *allowed), dialect, where)
        rule(NAME.fullmatch(str(spec.get("name"))), dialect, where, "name")
        parameters = spec.get("parameters")
        rule(
            isinstance(parameters, Mapping) and parameters.get("type") == "object",
            dialect,
            where,
            "parameters",
        )
        rule(spec.get("strict") in (None, True, False), dialect, where, "strict")
        names.append(spec["name"])
    rule(len(set(names)) == len(names), dialect, "tools", f"names repeat: {names}")


# --- Anthropic Messages --------------------------------------------------------------------------------------

ANTHROPIC = "anthropic"
_USER_BLOCKS = ("text", "image", "document", "tool_result")
_ASSISTANT_BLOCKS = ("text", "thinking", "redacted_thinking", "tool_use")
_SERVER_BLOCKS = ("server_tool_use", "mcp_tool_use", "mcp_tool_result", "container_upload")
# Server tools (web search, web fetch, code execution, tool search, MCP connector): the model's
# ``server_tool_use`` / ``mcp_tool_use`` and the results Anthropic ran (``<tool>_tool_result``,
# ``mcp_tool_result``) appear in the assistant turn; a ``pause_turn`` reply is sent back as it came, as the
# final assistant turn, for Anthropic to continue it. A result answers a server tool use earlier in its turn.


def _server_block(kind: object) -> bool:
    return (
        isinstance(kind, str)
        and (kind in _SERVER_BLOCKS or kind.endswith("_tool_result"))
        and kind != "tool_result"
    )


def anthropic_turns(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The turns the API sees: consecutive messages of one role combined, string content as one text block."""
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for message in messages:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        if turns and turns[-1][0] == message["role"]:
            turns[-1][1].extend(blocks)
        else:
            turns.append((message["role"], blocks))
    return turns


def check_anthropic(
    params: Mapping[str, Any],
    *,
    open_tail: bool = False,
    thinking: Iterable[Mapping[str, Any]] | None = None,
) -> None:
    """Anthropic Messages ``system`` / ``messages`` / ``tools``. ``thinking``: the thinking and redacted thinking
    blocks recorded from replies; each one sent must be one of them, unmodified."""
    _keys(params, ("system", "messages", "tools", "container"), ANTHROPIC, "params")
    if "container" in params:  # code execution's container, reused: its id
        rule(isinstance(params["container"], str) and params["container"], ANTHROPIC, "container", "an id")
    system = params.get("system", "")
    rule(isinstance(system, str | list), ANTHROPIC, "system", "a string or a list of text blocks")
    for b, block in enumerate(system if isinstance(system, list) else ()):
        rule(block.get("type") == "text", ANTHROPIC, f"system[{b}]", "a text block")
        _anthropic_block(block, f"system[{b}]", None)
    messages = params.get("messages")
    rule(isinstance(messages, list) and messages, ANTHROPIC, "messages", "a non-empty list")
    for i, message in enumerate(messages):
        _keys(message, ("role", "content"), ANTHROPIC, f"messages[{i}]")
        rule(
            message.get("role") in ("user", "assistant"),
            ANTHROPIC,
            f"messages[{i}]",
            "role user or assistant",
        )
        content = message.get("content")
        last_assistant = i == len(messages) - 1 and message["role"] == "assistant"
        rule(content or last_assistant, ANTHROPIC, f"messages[{i}]", "empty content")
        rule(isinstance(content, str | list), ANTHROPIC, f"messages[{i}]", "content a string or blocks")
    turns = anthropic_turns(messages)
    rule(turns[0][0] == "user", ANTHROPIC, "messages[0]", "the first turn is a user turn")
    recorded = [json.dumps(b, sort_keys=True) for b in thinking] if thinking is not None else None
    use_ids: list[str] = []
    for t, (role, blocks) in enumerate(turns):
        where = f"turn {t} ({role})"
        allowed = _USER_BLOCKS if role == "user" else _ASSISTANT_BLOCKS
        server_uses: set[str] = set()
        for b, block in enumerate(blocks):
            server = role == "assistant" and _server_block(block.get("type"))
            rule(
                block.get("type") in allowed or server,
                ANTHROPIC,
                f"{where} block {b}",
                f"a {block.get('type')} block",
            )
            if server:
                _anthropic_server_block(block, f"{where} block {b}", server_uses)
            else:
                _anthropic_block(block, f"{where} block {b}", recorded, assistant=role == "assistant")
        if role == "assistant":
            uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
            use_ids.extend(uses)
            rule(len(set(use_ids)) == len(use_ids), ANTHROPIC, where, f"tool_use ids repeat: {use_ids}")
            kinds = [b["type"] for b in blocks]
            if "thinking" in kinds or "redacted_thinking" in kinds:
                rule(
                    kinds[0] in ("thinking", "redacted_thinking"),
                    ANTHROPIC,
                    where,
                    "starts with its thinking",
                )
            if uses:
                _anthropic_answers(turns, t, uses, open_tail)
        else:
            answered = {b["id"] for b in turns[t - 1][1] if b["type"] == "tool_use"} if t else set()
            seen = False
            for b, block in enumerate(blocks):
                if block["type"] == "tool_result":
                    rule(
                        not seen, ANTHROPIC, f"{where} block {b}", "tool_result blocks come first in the turn"
                    )
                    rule(
                        block["tool_use_id"] in answered,
                        ANTHROPIC,
                        f"{where} block {b}",
                        f"tool_result {block['tool_use_id']!r} answers no tool_use of the turn before",
                    )
                else:
                    seen = True
    role, blocks = turns[-1]
    if role == "assistant" and blocks and blocks[-1]["type"] == "text":
        text = blocks[-1]["text"]
        rule(text == text.rstrip(), ANTHROPIC, "last turn", "final assistant content ends in whitespace")
    _anthropic_tools(params.get("tools"))
    _anthropic_cache(params)


def _anthropic_cache(params: Mapping[str, Any]) -> None:
    """Prompt caching: at most 4 blocks with ``cache_control`` (tools, system and messages together), each
    ``{"type": "ephemeral"}`` with an optional ``ttl`` of ``5m`` or ``1h``; the cache is built in the order
    tools, system, messages, and a ``1h`` entry may not come after a ``5m`` one ("cache entries with a longer
    TTL must appear before shorter TTLs")."""
    system = params.get("system")
    blocks = [(f"tools[{i}]", t) for i, t in enumerate(params.get("tools") or ())]
    blocks += [(f"system[{i}]", b) for i, b in enumerate(system if isinstance(system, list) else ())]
    for t, message in enumerate(params["messages"]):
        content = message["content"]
        for b, block in enumerate(content if isinstance(content, list) else ()):
            blocks.append((f"messages[{t}].content[{b}]", block))
            inner = block.get("content") if block.get("type") == "tool_result" else None
            if isinstance(inner, list):
                blocks += [(f"messages[{t}].content[{b}].content[{c}]", x) for c, x in enumerate(inner)]
    marked = [(where, block["cache_control"]) for where, block in blocks if "cache_control" in block]
    rule(
        len(marked) <= 4,
        ANTHROPIC,
        "cache_control",
        f"at most 4 blocks with cache_control, not {len(marked)}",
    )
    seen_short = False
    for where, control in marked:
        _keys(control, ("type", "ttl"), ANTHROPIC, where)
        rule(control.get("type") == "ephemeral", ANTHROPIC, where, "cache_control type ephemeral")
        ttl = control.get("ttl", "5m")
        rule(ttl in ("5m", "1h"), ANTHROPIC, where, f"cache_control ttl {ttl!r}")
        rule(not (ttl == "1h" and seen_short), ANTHROPIC, where, "a 1h cache entry after a 5m one")
        seen_short = seen_short or ttl == "5m"


def _anthropic_answers(
    turns: Sequence[tuple[str, list[dict[str, Any]]]], t: int, uses: list[str], open_tail: bool
) -> None:
    if t == len(turns) - 1:
        rule(open_tail, ANTHROPIC, f"turn {t}", f"tool_use {uses} never answered")
        return
    following = turns[t + 1][1]
    lead = [b["tool_use_id"] for b in following if b["type"] == "tool_result"]
    rule(len(set(lead)) == len(lead), ANTHROPIC, f"turn {t + 1}", f"a tool_use answered twice: {lead}")
    complete = sorted(lead) == sorted(uses)
    in_progress = open_tail and t + 1 == len(turns) - 1 and set(lead) <= set(uses)
    rule(
        complete or in_progress,
        ANTHROPIC,
        f"turn {t}",
        f"tool_use {uses} answered by {lead} in the next turn",
    )


def _anthropic_server_block(block: Mapping[str, Any], where: str, uses: set[str]) -> None:
    """A server tool block in an assistant turn: a use has an id, a name and an input object; a result names
    a use earlier in its turn; ``container_upload`` a file id."""
    kind = str(block.get("type"))
    if kind in ("server_tool_use", "mcp_tool_use"):
        rule(isinstance(block.get("id"), str) and block["id"], ANTHROPIC, where, "a string id")
        rule(isinstance(block.get("name"), str) and block["name"], ANTHROPIC, where, "a string name")
        rule(isinstance(block.get("input"), Mapping), ANTHROPIC, where, "input is an object")
        rule(block["id"] not in uses, ANTHROPIC, where, "a server tool use id repeats")
        uses.add(block["id"])
    elif kind == "container_upload":
        rule(isinstance(block.get("file_id"), str), ANTHROPIC, where, "a string file_id")
    else:
        rule(
            block.get("tool_use_id") in uses,
            ANTHROPIC,
            where,
            f"{kind} {block.get('tool_use_id')!r} answers no server tool use before it in its turn",
        )


def _anthropic_block(
    block: Mapping[str, Any], where: str, recorded: list[str] | None, *, assistant: bool = False
) -> None:
    kind = block.get("type")
    if kind == "text":
        _keys(
            block, ("type", "text", "cache_control", *(("citations",) if assistant else ())), ANTHROPIC, where
        )
        rule(_nonblank(block.get("text")), ANTHROPIC, where, "text blocks must contain non-whitespace text")
        citations = block.get("citations", [])
        rule(
            isinstance(citations, list)
            and all(isinstance(c, Mapping) and isinstance(c.get("type"), str) for c in citations),
            ANTHROPIC,
            where,
            "citations are objects with a type",
        )
    elif kind in ("image", "document"):
        fields = ("type", "source", "title") if kind == "document" else ("type", "source")
        _keys(block, (*fields, "cache_control"), ANTHROPIC, where)
        _anthropic_source(kind, block.get("source", {}), where)
    elif kind == "tool_use":
        _keys(
            block,
            ("type", "id", "name", "input", "cache_control", "caller", "toolset_name"),
            ANTHROPIC,
            where,
        )
        caller = block.get("caller", {"type": "direct"})
        rule(isinstance(caller, Mapping) and isinstance(caller.get("type"), str), ANTHROPIC, where, "caller")
        rule(ANTHROPIC_ID.fullmatch(str(block.get("id"))), ANTHROPIC, where, "id matches ^[a-zA-Z0-9_-]+$")
        rule(NAME.fullmatch(str(block.get("name"))), ANTHROPIC, where, "name")
        rule(isinstance(block.get("input"), Mapping), ANTHROPIC, where, "input is an object")
    elif kind == "tool_result":
        _keys(block, ("type", "tool_use_id", "content", "is_error", "cache_control"), ANTHROPIC, where)
        rule(block.get("is_error", False) in (True, False), ANTHROPIC, where, "is_error a boolean")
        content = block.get("content")
        if isinstance(content, list):
            rule(content, ANTHROPIC, where, "an empty content list")
            for c, inner in enumerate(content):
                rule(
                    inner.get("type") in ("text", "image", "document"),
                    ANTHROPIC,
                    f"{where}.content[{c}]",
                    "type",
                )
                _anthropic_block(inner, f"{where}.content[{c}]", recorded)
        else:
            rule(content is None or _nonblank(content), ANTHROPIC, where, "content non-blank text when given")
    elif kind in ("thinking", "redacted_thinking"):
        fields = ("type", "thinking", "signature") if kind == "thinking" else ("type", "data")
        rule(set(block) == set(fields), ANTHROPIC, where, f"a {kind} block is {fields} (no cache_control)")
        rule(all(isinstance(block[f], str) for f in fields), ANTHROPIC, where, "string fields")
        if recorded is not None:
            sent = json.dumps(block, sort_keys=True)
            rule(sent in recorded, ANTHROPIC, where, f"a {kind} block not sent back unmodified")


def _anthropic_source(kind: str, source: Mapping[str, Any], where: str) -> None:
    form = source.get("type")
    if form == "base64":
        _keys(source, ("type", "media_type", "data"), ANTHROPIC, where)
        types = IMAGE_TYPES if kind == "image" else ("application/pdf",)
        rule(source.get("media_type") in types, ANTHROPIC, where, f"media_type {source.get('media_type')!r}")
        try:
            base64.b64decode(str(source.get("data")), validate=True)
        except ValueError:
            rule(False, ANTHROPIC, where, "data is base64")
    elif form == "url":
        _keys(source, ("type", "url"), ANTHROPIC, where)
        rule(str(source.get("url")).startswith(("https://", "http://")), ANTHROPIC, where, "an http(s) URL")
    elif form == "text" and kind == "document":
        _keys(source, ("type", "media_type", "data"), ANTHROPIC, where)
        rule(source.get("media_type") == "text/plain", ANTHROPIC, where, "a text source is text/plain")
        rule(isinstance(source.get("data"), str), ANTHROPIC, where, "text data")
    else:
        rule(False, ANTHROPIC, where, f"a {kind} source of type {form!r}")


def _anthropic_tools(tools: object) -> None:
    if tools is None:
        return
    rule(isinstance(tools, list) and tools, ANTHROPIC, "tools", "a non-empty list when given")
    assert isinstance(tools, list)
    names = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        rule(NAME.fullmatch(str(tool.get("name"))), ANTHROPIC, where, "name")
        if tool.get("type") not in (
            None,
            "custom",
        ):  # a server tool (web_search_20250305, ...): type and name
            rule(
                re.fullmatch(r"[a-z_]+_\d{8}", str(tool["type"])), ANTHROPIC, where, "a versioned server tool"
            )
        else:
            schema = tool.get("input_schema")
            rule(
                isinstance(schema, Mapping) and schema.get("type") == "object",
                ANTHROPIC,
                where,
                "input_schema",
            )
            rule("parameters" not in tool and "function" not in tool, ANTHROPIC, where, "no OpenAI fields")
        names.append(tool["name"])
    rule(len(set(names)) == len(names), ANTHROPIC, "tools", f"names repeat: {names}")


# --- OpenAI Responses ----------------------------------------------------------------------------------------

RESPONSES = "responses"
BUILTIN = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "computer_call",
        "local_shell_call",
        "mcp_call",
        "mcp_list_tools",
        "custom_tool_call",
    }
)
_OUTPUT_SIDE = frozenset({"function_call", *BUILTIN})  # items a model produces (what reasoning precedes)


def check_responses(
    params: Mapping[str, Any],
    *,
    open_tail: bool = False,
    recorded: Mapping[str, Mapping[str, Any]] | None = None,
    reasoning_of: Mapping[str, str] | None = None,
) -> None:
    """OpenAI Responses ``input`` / ``instructions`` / ``tools``. ``recorded``: the provider items recorded from
    replies by their ``id`` (each sent must be identical); ``reasoning_of``: a recorded function_call item's
    ``id`` -> the id of the reasoning item that preceded it in its reply."""
    _keys(params, ("input", "instructions", "tools"), RESPONSES, "params")
    rule(isinstance(params.get("instructions", ""), str), RESPONSES, "instructions", "a string")
    items = params.get("input")
    rule(isinstance(items, list) and items, RESPONSES, "input", "a non-empty list")
    ids: set[str] = set()
    calls: dict[str, int] = {}  # call_id -> index of the function_call not answered yet
    answered: set[str] = set()
    for i, item in enumerate(items):
        where = f"input[{i}]"
        kind = item.get("type", "message" if "role" in item else None)
        if "id" in item:
            rule(item["id"] not in ids, RESPONSES, where, f"duplicate item id {item['id']!r}")
            ids.add(item["id"])
            if recorded is not None and kind != "message":
                rule(
                    item == recorded.get(item["id"]),
                    RESPONSES,
                    where,
                    f"item {item['id']!r} not sent verbatim",
                )
        if kind == "message":
            _responses_message(item, where)
        elif kind == "function_call":
            for field in ("call_id", "name", "arguments"):
                rule(isinstance(item.get(field), str), RESPONSES, where, f"{field} a string")
            rule(NAME.fullmatch(item["name"]), RESPONSES, where, "name")
            rule(item["call_id"] not in calls, RESPONSES, where, f"call_id {item['call_id']!r} already open")
            calls[item["call_id"]] = i
            answered.discard(item["call_id"])
            if reasoning_of is not None and item.get("id") in reasoning_of:
                _reasoning_before(items, i, reasoning_of[item["id"]])
        elif kind == "function_call_output":
            _keys(item, ("type", "call_id", "output", "id", "status"), RESPONSES, where)
            call_id = item.get("call_id")
            rule(call_id in calls, RESPONSES, where, f"function_call_output {call_id!r} follows no open call")
            del calls[call_id]
            answered.add(call_id)
            _responses_output(item.get("output"), where)
        elif kind == "reasoning":
            rule(isinstance(item.get("id"), str), RESPONSES, where, "a reasoning item has its id")
            rule(
                isinstance(item.get("summary"), list),
                RESPONSES,
                where,
                "a reasoning item has its summary list",
            )
            following = next((it for it in items[i + 1 :] if it.get("type") != "reasoning"), None)
            follows = following is not None and (
                following.get("type") in _OUTPUT_SIDE
                or (following.get("role") == "assistant" and following.get("type", "message") == "message")
            )
            rule(follows, RESPONSES, where, "a reasoning item without its required following item")
        else:
            rule(kind in BUILTIN, RESPONSES, where, f"an input item of type {kind!r}")
    if calls:
        # a tool run in progress: the open calls are the model's last turn (after the last input message)
        last_input = max(
            (
                i
                for i, it in enumerate(items)
                if it.get("type", "message") == "message" and it.get("role") != "assistant"
            ),
            default=-1,
        )
        tail = open_tail and all(index > last_input for index in calls.values())
        rule(tail, RESPONSES, "input", f"no function_call_output for calls {sorted(calls)}")
    _function_tools(params.get("tools"), RESPONSES, nested=False)


def _reasoning_before(items: Sequence[Mapping[str, Any]], i: int, reasoning_id: str) -> None:
    j = i - 1
    while (
        j >= 0 and items[j].get("type") in _OUTPUT_SIDE | {"reasoning"} and items[j].get("id") != reasoning_id
    ):
        j -= 1
    ok = j >= 0 and items[j].get("type") == "reasoning" and items[j].get("id") == reasoning_id
    rule(
        ok, RESPONSES, f"input[{i}]", f"a function_call without its required reasoning item {reasoning_id!r}"
    )


def _responses_message(item: Mapping[str, Any], where: str) -> None:
    _keys(item, ("type", "role", "content", "id", "status"), RESPONSES, where)
    role, content = item.get("role"), item.get("content")
    rule(role in ("user", "assistant", "system", "developer"), RESPONSES, where, f"role {role!r}")
    if isinstance(content, str):
        return  # no minimum length is documented
    rule(isinstance(content, list) and content, RESPONSES, where, "content a string or a non-empty list")
    for j, part in enumerate(content):
        at = f"{where}.content[{j}]"
        if role == "assistant":
            rule(part.get("type") in ("output_text", "refusal"), RESPONSES, at, "assistant parts")
        else:
            _responses_input_part(part, at)


def _responses_input_part(part: Mapping[str, Any], where: str) -> None:
    kind = part.get("type")
    if kind == "input_text":
        _keys(part, ("type", "text"), RESPONSES, where)
        rule(isinstance(part.get("text"), str), RESPONSES, where, "text")
    elif kind == "input_image":
        _keys(part, ("type", "image_url", "file_id", "detail"), RESPONSES, where)
        rule(_image_url(part.get("image_url")), RESPONSES, where, "image_url an image URL or data: URL")
        rule(part.get("detail") in ("auto", "low", "high"), RESPONSES, where, "detail is required")
    elif kind == "input_file":
        _keys(part, ("type", "file_data", "file_url", "file_id", "filename"), RESPONSES, where)
        if "file_data" in part:
            rule(
                _data_url(part["file_data"], ("application/pdf",)),
                RESPONSES,
                where,
                "file_data a PDF data: URL",
            )
            rule(isinstance(part.get("filename"), str), RESPONSES, where, "file_data needs a filename")
        else:
            rule(str(part.get("file_url")).startswith(("https://", "http://")), RESPONSES, where, "file_url")
    else:
        rule(False, RESPONSES, where, f"an input part of type {kind!r}")


def _responses_output(output: object, where: str) -> None:
    if isinstance(output, str):
        return
    rule(
        isinstance(output, list) and output, RESPONSES, where, "output a string or a non-empty list of parts"
    )
    assert isinstance(output, list)
    for j, part in enumerate(output):
        _responses_input_part(part, f"{where}.output[{j}]")


# --- Gemini --------------------------------------------------------------------------------------------------

GEMINI = "gemini"


def check_gemini(
    params: Mapping[str, Any], *, open_tail: bool = False, signatures: Iterable[bytes] | None = None
) -> None:
    """Gemini ``generate_content`` ``contents`` / ``system_instruction`` / ``tools`` (snake_case, as the
    google-genai SDK takes them). ``signatures``: the thought signatures recorded from replies; each one sent
    must be one of them, byte for byte."""
    _keys(params, ("contents", "system_instruction", "tools", "config"), GEMINI, "params")
    contents = params.get("contents")
    rule(isinstance(contents, list) and contents, GEMINI, "contents", "a non-empty list")
    assert isinstance(contents, list)
    for i, content in enumerate(contents):
        where = f"contents[{i}]"
        _keys(content, ("role", "parts"), GEMINI, where)
        role = content.get("role")
        rule(role in ("user", "model"), GEMINI, where, f"role {role!r}")
        parts = content.get("parts")
        rule(isinstance(parts, list) and parts, GEMINI, where, "a non-empty parts list")
        for j, part in enumerate(parts):
            _gemini_part(part, role, f"{where}.parts[{j}]")
            sent = part.get("thought_signature")
            if signatures is not None and sent is not None:
                rule(
                    _signature_bytes(sent) in set(signatures),
                    GEMINI,
                    f"{where}.parts[{j}]",
                    "a thought_signature not sent back byte for byte",
                )
        calls = [p["function_call"] for p in parts if "function_call" in p]
        if calls:
            _gemini_answers(contents, i, calls, open_tail)
        responses = [p["function_response"] for p in parts if "function_response" in p]
        if responses:
            previous = contents[i - 1] if i else {"parts": []}
            asked = [p["function_call"] for p in previous["parts"] if "function_call" in p]
            for response in responses:
                match = any(_same_call(call, response) for call in asked)
                rule(
                    match, GEMINI, where, f"function_response {response.get('name')!r} answers no call before"
                )
    system = params.get("system_instruction")
    if system is not None:
        rule(isinstance(system, str) or "parts" in system, GEMINI, "system_instruction", "text or a Content")
    tools = params.get("tools")
    if tools is not None:
        for i, tool in enumerate(tools):
            for j, decl in enumerate(tool.get("function_declarations", [])):
                where = f"tools[{i}].function_declarations[{j}]"
                rule(NAME.fullmatch(str(decl.get("name"))), GEMINI, where, "name")
                rule(
                    not ("parameters" in decl and "parameters_json_schema" in decl),
                    GEMINI,
                    where,
                    "one of parameters / parameters_json_schema",
                )


def _signature_bytes(value: object) -> bytes | None:
    if isinstance(value, bytes):
        return value
    try:
        return base64.b64decode(str(value), validate=True)
    except ValueError:
        return None


def _same_call(call: Mapping[str, Any], response: Mapping[str, Any]) -> bool:
    if call.get("name") != response.get("name"):
        return False
    return call.get("id") is None or response.get("id") is None or call.get("id") == response.get("id")


def _gemini_answers(
    contents: Sequence[Mapping[str, Any]], i: int, calls: list[Mapping[str, Any]], open_tail: bool
) -> None:
    where = f"contents[{i}]"
    rule(contents[i].get("role") == "model", GEMINI, where, "function calls come from the model")
    rule(
        i > 0 and contents[i - 1].get("role") == "user",
        GEMINI,
        where,
        "a function call turn comes immediately after a user turn or a function response turn",
    )
    if i == len(contents) - 1:
        rule(open_tail, GEMINI, where, "function calls never answered")
        return
    following = contents[i + 1]
    responses = [p["function_response"] for p in following["parts"] if "function_response" in p]
    rule(following.get("role") == "user", GEMINI, f"contents[{i + 1}]", "function responses are a user turn")
    unanswered = [c for c in calls if not any(_same_call(c, r) for r in responses)]
    in_progress = open_tail and i + 1 == len(contents) - 1
    rule(
        not unanswered or in_progress,
        GEMINI,
        where,
        f"calls {[c.get('name') for c in unanswered]} not all answered in the next turn",
    )
    rule(
        len(responses) == len(calls) or in_progress,
        GEMINI,
        f"contents[{i + 1}]",
        "the number of function response parts equals the number of function call parts of the call turn",
    )


_GEMINI_DATA = ("text", "inline_data", "file_data", "function_call", "function_response", "executable_code")


def _gemini_part(part: Mapping[str, Any], role: str, where: str) -> None:
    data = [k for k in _GEMINI_DATA if part.get(k) is not None]
    rule(len(data) == 1, GEMINI, where, f"a part holds exactly one kind of data, not {data}")
    kind = data[0]
    if kind == "function_call":
        rule(role == "model", GEMINI, where, "function_call parts are the model's")
        rule(NAME.fullmatch(str(part[kind].get("name"))), GEMINI, where, "name")
    if kind == "function_response":
        rule(role == "user", GEMINI, where, "function_response parts are the user's")
        rule(isinstance(part[kind].get("response"), Mapping), GEMINI, where, "response is an object")
    if part.get("thought") is not None:
        rule(role == "model", GEMINI, where, "thought parts are the model's")
    if kind == "inline_data":
        blob = part[kind]
        rule(isinstance(blob.get("mime_type"), str), GEMINI, where, "mime_type")
        rule(isinstance(blob.get("data"), bytes | str), GEMINI, where, "data")
    signature = part.get("thought_signature")
    if signature is not None:
        rule(role == "model" and isinstance(signature, bytes | str), GEMINI, where, "thought_signature")


# --- the SDKs' own request types -----------------------------------------------------------------------------

_ADAPTERS: dict[str, Any] = {}


def _adapter(name: str) -> Any:
    if name not in _ADAPTERS:
        from anthropic.types import message_create_params
        from openai.types.chat import completion_create_params
        from openai.types.responses import response_create_params
        from pydantic import TypeAdapter

        _ADAPTERS[CHAT] = TypeAdapter(completion_create_params.CompletionCreateParamsNonStreaming)
        _ADAPTERS[ANTHROPIC] = TypeAdapter(message_create_params.MessageCreateParamsNonStreaming)
        _ADAPTERS[RESPONSES] = TypeAdapter(response_create_params.ResponseCreateParamsNonStreaming)
    return _ADAPTERS[name]


def _sdk_valid(dialect: str, params: Mapping[str, Any], required: Mapping[str, Any]) -> None:
    """``params`` (with the ``required`` keys a caller adds) is what the SDK's request TypedDict takes: it
    validates (each lazily validated iterable read to its end), and what validated equals the input, so no key
    at any depth is one the type does not know (pydantic drops unknown TypedDict keys silently)."""
    from pydantic import ValidationError

    body = json.loads(json.dumps({**params, **required}))
    adapter = _adapter(dialect)
    try:
        dumped = _materialize(adapter.validate_python(body))
    except ValidationError as exc:
        raise RuleBroken(f"{dialect}: the SDK's request type refuses it: {str(exc)[:800]}") from None
    if dumped != body:
        raise RuleBroken(
            f"{dialect}: keys the SDK's request type does not know: {_first_difference(body, dumped)}"
        )


def _materialize(value: object) -> object:
    """The validated value as plain data: each lazily validated iterable (a ``ValidatorIterator``, which
    validates its items as they are read) read into a list; a model (the SDK's request unions also take its
    response types, e.g. a ``web_search_tool_result`` block) as the fields it was given."""
    if callable(getattr(value, "model_dump", None)):
        return _materialize(value.model_dump(exclude_unset=True))  # type: ignore[attr-defined]
    if isinstance(value, dict):
        return {key: _materialize(item) for key, item in value.items()}
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    return [_materialize(item) for item in value]  # type: ignore[attr-defined]


def _first_difference(sent: object, kept: object, path: str = "") -> str:
    if isinstance(sent, dict) and isinstance(kept, dict):
        for key in sent:
            if key not in kept:
                return f"{path}.{key}"
            if sent[key] != kept[key]:
                return _first_difference(sent[key], kept[key], f"{path}.{key}")
    if isinstance(sent, list) and isinstance(kept, list):
        for index, (a, b) in enumerate(zip(sent, kept, strict=False)):
            if a != b:
                return _first_difference(a, b, f"{path}[{index}]")
    return f"{path or 'params'}: {sent!r:.120} became {kept!r:.120}"


def sdk_chat(params: Mapping[str, Any]) -> None:
    """``CompletionCreateParamsNonStreaming`` (openai) accepts ``params`` with a model, no unknown key."""
    _sdk_valid(CHAT, params, {"model": "m"})


def sdk_anthropic(params: Mapping[str, Any]) -> None:
    """``MessageCreateParamsNonStreaming`` (anthropic) accepts ``params`` with a model and max_tokens."""
    _sdk_valid(ANTHROPIC, params, {"model": "m", "max_tokens": 16})


def sdk_responses(params: Mapping[str, Any]) -> None:
    """``ResponseCreateParamsNonStreaming`` (openai) accepts ``params`` with a model, no unknown key."""
    _sdk_valid(RESPONSES, params, {"model": "m"})


def sdk_gemini(params: Mapping[str, Any]) -> None:
    """google-genai's types (pydantic models that forbid unknown fields) accept ``params``: each of ``contents``
    a ``types.Content``, ``system_instruction`` a ``Content`` (or text), each of ``tools`` a ``types.Tool``."""
    from google.genai import types
    from pydantic import ValidationError

    checks: list[tuple[str, Any, Any]] = [
        (f"contents[{i}]", types.Content, c) for i, c in enumerate(params["contents"])
    ]
    if isinstance(params.get("system_instruction"), Mapping):
        checks.append(("system_instruction", types.Content, params["system_instruction"]))
    checks.extend((f"tools[{i}]", types.Tool, tool) for i, tool in enumerate(params.get("tools") or ()))
    for where, model, value in checks:
        try:
            model.model_validate(value)
        except ValidationError as exc:
            raise RuleBroken(
                f"{GEMINI}: {where}: google-genai's {model.__name__} refuses it: {str(exc)[:600]}"
            ) from None
