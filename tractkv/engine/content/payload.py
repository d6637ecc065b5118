"""Content types: what a commit can add to a context, how it is validated, and how it becomes a message.

A message commit's content is a :class:`~tractkv.model.Blob` whose ``data`` is a dict with a ``type``:

============  ==================================================  =====================================
type          fields                                              compiles to
============  ==================================================  =====================================
instruction   ``text``                                            a ``system`` message
dialogue      ``role`` (user / assistant / tool), ``text``,       a message of that role
              optional ``parts``, ``name``, ``tool_calls``,
              ``tool_call_id``, ``is_error``
reasoning     ``text``                                            an ``assistant`` message, only when
                                                                  compiled with ``include_reasoning``
artifact      ``text``, ``artifact_type``, ``role`` (user)         a message of ``role`` (a document,
                                                                  code, a file the model should see)
freeform      ``payload`` (any JSON-like value), ``role`` (user)   a message of ``role`` holding the
                                                                  payload as compact JSON
============  ==================================================  =====================================

Bookkeeping content has its own types and never becomes a message: ``annotation`` (``priority``, optional
``reason``), ``merge`` (``strategy``, ``source``, ``conflicts``) and ``tool_original`` (``text``: the raw tool
result behind an edited or summarized one). :mod:`tractkv.engine.history.validate` checks them, and checks that a
received message blob is exactly what :func:`content_blob` would store.

**Content parts.** A dialogue message may carry ``parts``, its content blocks in order, when it is more than
one text. Stored parts:

==================  ================================================================  ================
part type           fields                                                            roles
==================  ================================================================  ================
text                ``text``                                                          all
image               ``media_type``, ``media`` (hex id of a bytes blob), or ``url``    user, tool
                    (https); optional ``detail`` (auto / low / high)
document            ``media_type``, ``media``, or ``url`` (https, a PDF); optional     user, tool
                    ``title``
thinking            ``thinking``, ``signature`` (Anthropic extended thinking)          assistant
redacted_thinking   ``data`` (Anthropic's opaque string)                               assistant
reasoning           ``reasoning``: reasoning text a provider sent without a           assistant
                    signature (an OpenAI-compatible ``reasoning_content``, a
                    LangChain ``reasoning`` block); never sent back as thinking
refusal             ``refusal``                                                       assistant
responses_item      ``item``: an OpenAI Responses output item other than a message,   assistant
                    verbatim (``reasoning``, ``function_call``, built-in tool calls)
gemini_thought      ``text`` (a Gemini thought summary); optional                     assistant
                    ``thought_signature`` (bytes)
gemini_call         ``call_id`` (one of the message's tool calls); optional           assistant
                    ``thought_signature`` (bytes), ``made_id`` (true: tractkv made the
                    id), ``extra_content`` (a JSON object: Gemini's OpenAI-compatible
                    endpoint's extension on a tool call)
gemini_part         ``part``: any other Gemini part, verbatim (JSON and bytes)         assistant
anthropic_call      ``call_id`` (one of the message's tool calls: where its           assistant
                    ``tool_use`` block stood); optional ``caller`` (a JSON object),
                    ``toolset_name``
anthropic_block     ``block``: an Anthropic server tool block (``server_tool_use``,   assistant
                    ``*_tool_result``, ``mcp_tool_use``, ``container_upload``, ...),
                    verbatim
anthropic_container ``container``: the reply's ``container`` (``id``, ...)             assistant
openai_audio        ``id`` (OpenAI's audio reply); optional ``transcript``,           assistant
                    ``expires_at``
==================  ================================================================  ================

An assistant ``text`` part may carry a ``thought_signature`` (bytes; its text may then be empty): Gemini's
signature goes back on the part it came with; and ``citations`` (a non-empty list of JSON objects: Anthropic's,
sent back on that text block). A tool call has at most one ``anthropic_call`` part; a message with one (or with
an ``anthropic_block``) is sent to Anthropic in its parts' order, a call with none after the rest (see
:mod:`tractkv.engine.content.render.anthropic`).

``text`` is always the text parts joined with ``""`` (what describe, diff, search and summarization read).
A single text part is stored as plain ``text`` without ``parts``. Media types and the checks on the bytes
are :mod:`tractkv.engine.content.media`'s. Input (:func:`content_objects`) accepts, in ``parts``, ``str``; the
neutral dicts ``{"type": "text", "text"}``, ``{"type": "image" | "document", "data": bytes, "media_type"}``
and ``{"type": "image" | "document", "url"}``; OpenAI's ``image_url`` (a data: URL or https URL) and
``file`` (``file_data`` as a data: URL, ``filename`` kept as the title) parts; Anthropic's ``image`` /
``document`` blocks with a ``base64``, ``url`` or (documents) ``text`` source, ``thinking``,
``redacted_thinking``; and the stored form itself (``media`` naming a blob already stored). Keys whose value
is None count as absent (SDK ``model_dump()`` output); any other unknown key is refused. data: URLs and
base64 are decoded, so the same bytes are stored once whatever shape brought them: each file is its own
``Blob(data=<bytes>)``, linked from the commit as ``links["media"]`` (sorted, unique).

**No other bytes in a message.** Apart from media (above), a message payload holds only JSON values: a bytes
value anywhere in a freeform ``payload`` or in a tool call's ``arguments`` is refused with
:class:`ContentError` when the commit is made (and a received blob holding one is refused by the validator).
Providers accept only JSON, so bytes could not be counted, compiled or sent; encode binary data as text
(base64) first, or send it as an image or document part. (Bytes stay allowed in blobs that are not messages
and in a commit's metadata, which are never sent to a model.)

**One bounded walk of JSON-bound values.** Every JSON-bound value that enters tractkv (a freeform payload,
tool call arguments, a commit's metadata and generation_config, a usage record's arguments, an Agents SDK
item, the built-in commit tool's metadata) is walked once by :func:`check_json`, which refuses at once, with
:class:`ContentError` naming the path, a value that contains itself, nests deeper than the codec allows,
expands past what one object can hold through shared parts, or holds a non-JSON type; each distinct
container is walked once, so the walk is linear in the value's distinct parts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs

from tractkv import codec
from tractkv.engine.content import media as _media
from tractkv.errors import ContentError, EncodeError
from tractkv.ids import is_object_id
from tractkv.model import MAX_OBJECT_BYTES, Blob, object_id
from tractkv.model.objects import trusted_blob

MESSAGE_TYPES: frozenset[str] = frozenset({"instruction", "dialogue", "reasoning", "artifact", "freeform"})
MESSAGE_ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")  # the roles a compiled Message has
DIALOGUE_ROLES = frozenset({"user", "assistant", "tool"})
_PLAIN_ROLES = frozenset({"user", "assistant"})  # a tool message needs its call id: never plain text
ARTIFACT_ROLES = frozenset({"user", "assistant"})
PRIORITIES = ("normal", "pinned", "skip")
CACHE_TTLS = ("5m", "1h")  # an Anthropic prompt-cache breakpoint's lifetimes (an annotation's ``cache``)

ANNOTATION = "annotation"
MERGE = "merge"
TOOL_ORIGINAL = "tool_original"
MERGE_STRATEGIES: tuple[str, ...] = ("auto", "ours", "theirs")  # what a merge blob's ``strategy`` may say
MEDIA_LINK = "media"  # a message commit's link to the media blobs its parts use

StoredMedia = Callable[[str], bytes | None]
"""The bytes of a stored media blob by id, None when no blob of bytes has that id (see content_objects)."""


@attrs.frozen(kw_only=True)
class ToolCall:
    """A model's request to run a tool: ``arguments`` is the decoded JSON object.

    ``invalid_arguments`` is set when the model wrote arguments that are not a JSON object a payload can hold
    (invalid JSON, truncated, a JSON array, NaN, ...): the exact string, which OpenAI dialects send back as
    received; ``arguments`` is then ``{}`` (see :func:`parse_arguments`)."""

    id: str
    name: str
    arguments: dict[str, Any] = attrs.field(factory=dict, hash=False)
    invalid_arguments: str | None = None

    def to_payload(self) -> dict[str, Any]:
        """The stored form: ``{"id", "name", "arguments"}``, plus ``invalid_arguments`` when set."""
        out = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.invalid_arguments is not None:
            out["invalid_arguments"] = self.invalid_arguments
        return out

    def to_dict(self) -> dict[str, Any]:
        """The stored form (:meth:`to_payload`): what ``to_jsonable`` and ``--json`` show."""
        return self.to_payload()

    @property
    def arguments_text(self) -> str:
        """The arguments as the provider gets them in OpenAI's dialects: the exact string when they were not a
        JSON object, else compact JSON."""
        if self.invalid_arguments is not None:
            return self.invalid_arguments
        import json  # lazy: keeps `import tractkv` light

        return json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))


def parse_arguments(text: str) -> dict[str, Any] | None:
    """The JSON object a tool call's arguments string holds (``{}`` for a blank string), or None when it holds
    none a payload can store: not JSON (truncated, a stray quote), a JSON value that is not an object, NaN or
    Infinity, an integer beyond 64 bits, nesting deeper than a payload allows. A call whose arguments string
    gives None is stored with that string as ``invalid_arguments`` (and ``arguments`` ``{}``); one that gives an
    object, with the object. The write path and the receive-side validator both decide by this function, so
    one call has one stored form."""
    import json  # lazy: keeps `import tractkv` light

    if not text.strip():
        return {}
    try:
        value = json.loads(text, parse_constant=_not_json_constant)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError; "[[[[...": too deep to parse
        return None
    if not isinstance(value, dict):
        return None
    try:  # the walk of check_json, the arguments counted at the depth they are stored at
        _json_walk(value, _ARGUMENTS_DEPTH, False, True, {}, set())
    except (_NotJson, _TooMany):
        return None
    return value


_ARGUMENTS_DEPTH = 3  # a payload's arguments object nests as deep as the codec allows less 2 levels (payload,
# tool_calls list): render.common.MAX_ARGUMENT_DEPTH, what the reply readers check


def _not_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


@attrs.frozen(kw_only=True)
class Part:
    """One content block of a compiled message, with its media bytes loaded (see "Content parts" above).

    ``type`` says which fields are set: ``text`` (``text``); ``image`` / ``document`` (``media_type`` and
    ``data`` with ``media`` its blob id, or ``url``; ``detail`` / ``title``); ``thinking`` (``thinking``,
    ``signature``); ``redacted_thinking`` (``redacted``: Anthropic's opaque data); ``reasoning``
    (``thinking``: unsigned reasoning text); ``refusal``
    (``refusal``); ``responses_item`` (``item``: an OpenAI Responses output item, verbatim); Gemini's
    ``gemini_thought`` (``text``), ``gemini_call`` (``call_id``, ``made_id``, ``extra_content``) and
    ``gemini_part`` (``item``: the part, verbatim). ``thought_signature`` is a Gemini signature (bytes) on a
    text, thought or call part. Anthropic's ``anthropic_call`` (``call_id``: where that ``tool_use`` block
    stood; ``caller``, ``toolset_name`` as received), ``anthropic_block`` (``item``: a server tool block,
    verbatim) and ``anthropic_container`` (``item``: the reply's ``container``); an assistant text part's
    ``citations`` (Anthropic's, verbatim); OpenAI's ``openai_audio`` (``item``: ``id``, optional
    ``transcript`` and ``expires_at``).
    """

    type: str
    text: str | None = None
    media_type: str | None = None
    data: bytes | None = attrs.field(default=None, repr=lambda d: f"<{len(d)} bytes>" if d else repr(d))
    media: str | None = None
    url: str | None = None
    detail: str | None = None
    title: str | None = None
    thinking: str | None = None
    signature: str | None = None
    redacted: str | None = None
    refusal: str | None = None
    item: dict[str, Any] | None = attrs.field(default=None, hash=False)
    thought_signature: bytes | None = None
    call_id: str | None = None
    made_id: bool = False
    extra_content: dict[str, Any] | None = attrs.field(default=None, hash=False)
    caller: dict[str, Any] | None = attrs.field(default=None, hash=False)
    toolset_name: str | None = None
    citations: tuple[dict[str, Any], ...] | None = attrs.field(default=None, hash=False)

    def to_dict(self) -> dict[str, Any]:
        """The neutral input shape of this part (bytes as bytes): ``t.user([part.to_dict()])`` stores it
        again unchanged."""
        kind = self.type
        if kind in ("text", "gemini_thought", "gemini_call"):
            signed = self._gemini_dict()
            if self.citations is not None:
                signed["citations"] = [dict(c) for c in self.citations]
            return signed
        if kind == "anthropic_call":
            call: dict[str, Any] = {"type": kind, "call_id": self.call_id}
            if self.caller is not None:
                call["caller"] = self.caller
            if self.toolset_name is not None:
                call["toolset_name"] = self.toolset_name
            return call
        if kind in ("anthropic_block", "anthropic_container"):
            return {"type": kind, kind.removeprefix("anthropic_"): self.item}
        if kind == "openai_audio":
            return {"type": kind, **(self.item or {})}
        if kind in ("image", "document"):
            out: dict[str, Any] = {"type": kind}
            if self.data is not None:
                out["media_type"] = self.media_type
                out["data"] = self.data
            else:
                out["url"] = self.url
            if self.detail is not None:
                out["detail"] = self.detail
            if self.title is not None:
                out["title"] = self.title
            return out
        if kind == "thinking":
            return {"type": "thinking", "thinking": self.thinking, "signature": self.signature}
        if kind == "redacted_thinking":
            return {"type": "redacted_thinking", "data": self.redacted}
        if kind == "reasoning":
            return {"type": "reasoning", "reasoning": self.thinking}
        if kind == "responses_item":
            return {"type": "responses_item", "item": self.item}
        if kind == "gemini_part":
            return {"type": "gemini_part", "part": self.item}
        return {"type": "refusal", "refusal": self.refusal}

    def _gemini_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.type == "gemini_call":
            out["call_id"] = self.call_id
            if self.made_id:
                out["made_id"] = True
            if self.extra_content is not None:
                out["extra_content"] = self.extra_content
        else:
            out["text"] = self.text
        if self.thought_signature is not None:
            out["thought_signature"] = self.thought_signature
        return out


@attrs.frozen(kw_only=True)
class Message:
    """One compiled message, provider-neutral. Immutable and shared: treat as read-only.

    ``content`` is the message's text (its text parts joined); ``parts`` its content blocks in order when it
    has more than one text (empty for a plain text message)."""

    role: str
    content: str
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False
    parts: tuple[Part, ...] = ()
    cache: str | None = None  # a prompt-cache breakpoint set by an annotation ("5m" / "1h"): Anthropic's

    def to_dict(self) -> dict[str, Any]:
        """The neutral dict form: ``role`` and ``content`` plus whichever extras are set (``parts`` as
        :meth:`Part.to_dict`, media as bytes)."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name is not None:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [c.to_payload() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.is_error:
            out["is_error"] = True
        if self.parts:
            out["parts"] = [p.to_dict() for p in self.parts]
        if self.cache is not None:
            out["cache"] = self.cache
        return out


def text_message(role: str, text: str) -> Message:
    """``Message(role=role, content=text)`` (Message has no validator nor converter), its slots set directly:
    the compile state makes one per plain-text append."""
    message = _new(Message)
    _m_role(message, role)
    _m_content(message, text)
    _m_name(message, None)
    _m_tool_calls(message, ())
    _m_tool_call_id(message, None)
    _m_is_error(message, False)
    _m_parts(message, ())
    _m_cache(message, None)
    return message


_new = object.__new__
# Message's slot setters in field order (a field added to Message fails this unpacking at import;
# tests/engine/test_commit_info.py compares text_message with the constructor's message).
_m_role, _m_content, _m_name, _m_tool_calls, _m_tool_call_id, _m_is_error, _m_parts, _m_cache = (
    Message.__dict__[field.name].__set__ for field in attrs.fields(Message)
)


def _text(data: dict[str, Any], field: str = "text") -> str:
    value = data.get(field)
    if not isinstance(value, str):
        raise ContentError(f"{data.get('type')} content needs a text field {field!r}")
    return value


def _parse_tool_calls(raw: object) -> list[dict[str, Any]]:
    """Tool calls in the stored form ``{"id", "name", "arguments"}`` (arguments a decoded JSON object), or
    ``{"id", "name", "arguments": {}, "invalid_arguments": <str>}`` for a call whose arguments the model wrote
    as something else (kept exactly; see :func:`parse_arguments`).

    Each item may be a :class:`ToolCall`, that form, OpenAI's ``{"id", "type": "function", "function":
    {"name", "arguments"}}`` (arguments a JSON string or an object), an Anthropic ``{"type": "tool_use",
    "id", "name", "input"}`` block, or an SDK object of either (anything with ``model_dump()``). Only the
    stored form keeps arguments that are not a JSON object (``invalid_arguments``); in the other forms they
    are refused, so a typo in a hand-written call is not stored silently.

    Raises:
        ContentError: not a list, an item of none of these shapes (unknown keys included), a missing id or
            name, a duplicate id, arguments that are not a JSON object, bytes in the arguments, an
            ``invalid_arguments`` that is not a string, holds a JSON object, or comes with arguments.
    """
    if not isinstance(raw, list | tuple):
        raise ContentError("tool_calls must be a list of {id, name, arguments}")
    calls: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        call_id, name, arguments, invalid = _tool_call_fields(item, f"tool_calls[{index}]")
        if not isinstance(call_id, str) or not call_id:
            raise ContentError(f"tool_calls[{index}] needs a non-empty string id")
        if call_id in seen:
            raise ContentError(f"tool_calls[{index}]: duplicate id {call_id!r}")
        seen.add(call_id)
        if not isinstance(name, str) or not name:
            raise ContentError(f"tool_calls[{index}] needs a non-empty string name")
        if invalid is not None:
            calls.append(_invalid_call(call_id, name, arguments, invalid, f"tool_calls[{index}]"))
            continue
        if isinstance(arguments, str):  # OpenAI sends arguments as a JSON string
            import json  # lazy: keeps `import tractkv` light

            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                raise ContentError(
                    f"tool_calls[{index}].arguments is not valid JSON: {exc} (to keep a model's malformed "
                    "arguments as written, give them as invalid_arguments)"
                ) from exc
            except RecursionError:  # hostile nesting ("[[[[..."): refused like any other bad JSON
                raise ContentError(f"tool_calls[{index}].arguments is nested too deeply") from None
        if not isinstance(arguments, dict):
            raise ContentError(f"tool_calls[{index}].arguments must be a JSON object")
        check_json(arguments, f"tool_calls[{index}].arguments")
        calls.append({"id": call_id, "name": name, "arguments": arguments})
    return calls


def _invalid_call(call_id: str, name: str, arguments: object, invalid: object, where: str) -> dict[str, Any]:
    """The stored form of a call whose arguments are not a JSON object: ``{"id", "name", "arguments": {},
    "invalid_arguments": <the exact string>}``, its one spelling (see :func:`parse_arguments`).

    Raises:
        ContentError: ``invalid_arguments`` is not a string, or is one :func:`parse_arguments` reads as an
            object (then it is ``arguments``), or ``arguments`` is given and not ``{}``.
    """
    if not isinstance(invalid, str):
        raise ContentError(f"{where}.invalid_arguments must be the string the model wrote")
    if parse_arguments(invalid) is not None:
        raise ContentError(
            f"{where}.invalid_arguments holds a JSON object: give it as arguments (invalid_arguments is for "
            "arguments that are not one)"
        )
    if arguments not in (None, {}):
        raise ContentError(f"{where}: a call with invalid_arguments has arguments {{}}")
    return {"id": call_id, "name": name, "arguments": {}, "invalid_arguments": invalid}


def _tool_call_fields(item: object, where: str) -> tuple[object, object, object, object]:
    """The id, name, (undecoded) arguments and ``invalid_arguments`` (None when not given) of one tool call
    in any accepted form (see above)."""
    if isinstance(item, ToolCall):
        return item.id, item.name, item.arguments, item.invalid_arguments
    if not isinstance(item, dict) and callable(getattr(item, "model_dump", None)):
        try:
            item = item.model_dump()  # type: ignore[attr-defined]
        except Exception as exc:  # a user's object: its failure is reported, not leaked
            raise ContentError(f"{where}: {type(item).__name__}.model_dump() failed: {exc!r}") from exc
    if not isinstance(item, dict):
        raise ContentError(f"{where} must be a dict with id, name, arguments")
    if item.get("type") == "tool_use":  # an Anthropic block; its other fields (caller, ...) are not the call
        return item.get("id"), item.get("name"), item.get("input", {}), None
    if item.get("type") == "function_call":  # an OpenAI Responses item: call_id is the call's id
        _only_keys(item, {"type", "id", "call_id", "name", "arguments", "status"}, where)
        if not isinstance(item.get("call_id"), str) or not item["call_id"]:
            raise ContentError(f"{where}: a function_call item needs a non-empty string call_id")
        return item["call_id"], item.get("name"), item.get("arguments", {}), None
    if "function" in item:  # OpenAI's nested form
        if item.get("type", "function") != "function":
            raise ContentError(f"{where} is a {item.get('type')!r} call; only function calls are supported")
        _only_keys(item, {"id", "type", "function"}, where)
        function = item["function"]
        if not isinstance(function, dict):
            raise ContentError(f"{where}.function must be a dict with name and arguments")
        _only_keys(function, {"name", "arguments"}, f"{where}.function")
        return item.get("id"), function.get("name"), function.get("arguments", {}), None
    if "type" in item:
        raise ContentError(
            f"{where} has type {item.get('type')!r}: expected {{id, name, arguments}}, OpenAI's "
            "{id, type: function, function}, a Responses function_call item or an Anthropic tool_use block"
        )
    _only_keys(item, {"id", "name", "arguments", "invalid_arguments"}, where)
    return item.get("id"), item.get("name"), item.get("arguments", {}), item.get("invalid_arguments")


def _only_keys(item: dict[str, Any], allowed: set[str], where: str) -> None:
    """Refuse keys outside ``allowed`` (a key set to None, as an SDK's ``model_dump()`` gives, is absent)."""
    unknown = {key for key, value in item.items() if value is not None} - allowed
    if unknown:
        raise ContentError(f"{where} has unknown keys {sorted(map(str, unknown))}")


def content_objects(content: object, stored: StoredMedia | None = None) -> tuple[Blob, tuple[Blob, ...]]:
    """Validate message content and return the blob that stores it plus the media blobs its parts use (each
    image or document's bytes, one blob per distinct file, in order of first use).

    Accepts a payload dict (``{"type": "dialogue", "role": "user", "text": "hi"}``, or with ``parts``: see
    "Content parts" above) or one of the content classes below. A part in the stored form (``media`` naming a
    blob already stored) is checked through ``stored``, which gives that blob's bytes (None when it is not a
    stored media blob): they must be what the part's media type says, within the size limits, as new bytes
    must. Without ``stored`` such a part's blob is not looked at (callers passing parts this module built).
    The payload is checked once: its shape here,
    its values (what a hashed payload may hold) by the :class:`~tractkv.model.Blob` it is stored in. The
    commit that stores the blob must store the media blobs too and link them as ``links["media"]``
    (:func:`media_ids`); :meth:`tractkv.engine.session.Session.commit_content` does.

    Raises:
        ContentError: unknown type, missing or mistyped fields, unknown fields, values a payload may not
            hold (NaN, sets, ...), a part that is malformed (naming its index), a media type that is not
            accepted or bytes that are not what it says or over the size limits (:mod:`tractkv.engine.content.media`),
            a stored-form part naming no stored media blob, invalid base64, a URL that is neither https nor a
            data: URL.
    """
    if type(content) is dict and len(content) == 3:  # plain text (t.user / t.assistant): checked here
        kind, role, text = content.get("type"), content.get("role"), content.get("text")
        if kind == "dialogue" and role in _PLAIN_ROLES and type(text) is str and text:
            try:
                text.encode("utf-8")  # no lone surrogate: every value of the payload may be hashed
            except UnicodeEncodeError:
                pass  # the general path names the problem
            else:
                return trusted_blob({"type": kind, "role": role, "text": text}), ()
    media: dict[str, Blob] = {}
    payload = _canonical(content, media, stored)
    try:
        blob = Blob(data=payload)
    except EncodeError as exc:
        # Name the place inside the payload, as a payload check would ("payload.x", not "data.payload.x").
        where = exc.path.removeprefix("data").removeprefix(".")
        raise ContentError(str(EncodeError(where, exc.reason))) from exc
    return blob, tuple(media.values())


def content_blob(content: object) -> Blob:
    """Validate message content without media bytes and return the blob that stores it (as
    :func:`content_objects`).

    Raises:
        ContentError: as :func:`content_objects`, and when the content carries image or document bytes
            (they must be stored with it: use :func:`content_objects`).
    """
    blob, media = content_objects(content)
    if media:
        raise ContentError("content with image or document data needs its media stored too (content_objects)")
    return blob


def media_ids(payload: dict[str, Any]) -> tuple[str, ...]:
    """The media blob ids a stored payload's parts use, sorted and unique (what the commit that adds it links
    as ``links["media"]``)."""
    parts = payload.get("parts")
    if not isinstance(parts, list):
        return ()
    found = {p["media"] for p in parts if isinstance(p, dict) and isinstance(p.get("media"), str)}
    return tuple(sorted(found))


def normalize(content: object) -> dict[str, Any]:
    """Validate message content and return the canonical payload dict (``content_objects(content)[0].data``).

    Prefer :func:`content_objects` when the payload is to be stored: it returns the blobs already checked.

    Raises:
        ContentError: as :func:`content_objects`.
    """
    data: dict[str, Any] = content_objects(content)[0].data
    return data


def canonical_payload(content: object) -> dict[str, Any]:
    """The canonical payload dict of message content, its shape checked (its values are not: see
    :func:`content_objects`). A stored message payload equals its own canonical payload.

    Raises:
        ContentError: as :func:`content_objects`, except for values a hashed payload may not hold.
    """
    return _canonical(content, {})


def _canonical(content: object, media: dict[str, Blob], stored: StoredMedia | None = None) -> dict[str, Any]:
    if isinstance(content, _ContentBase):
        content = content.to_payload()
    if not isinstance(content, dict):
        raise ContentError(
            f"content must be a dict with a 'type' or a content object, not {type(content).__name__} "
            "(for plain text use t.user() / t.assistant() / t.system())"
        )
    kind = content.get("type")
    if kind not in MESSAGE_TYPES:
        raise ContentError(f"unknown content type {kind!r}; expected one of {sorted(MESSAGE_TYPES)}")
    allowed: set[str]
    out: dict[str, Any] = {"type": kind}
    if kind in {"instruction", "reasoning"}:
        allowed = {"type", "text"}
        out["text"] = _text(content)
    elif kind == "dialogue":
        allowed = {"type", "role", "text", "parts", "name", "tool_calls", "tool_call_id", "is_error"}
        role = content.get("role")
        if role not in DIALOGUE_ROLES:
            raise ContentError(f"dialogue role must be one of {sorted(DIALOGUE_ROLES)}, not {role!r}")
        out["role"] = role
        out["text"] = content.get("text") if content.get("text") is not None else ""
        if not isinstance(out["text"], str):
            raise ContentError("dialogue text must be a string (or pass a list of content parts as parts)")
        if content.get("parts") is not None:
            _set_parts(out, content["parts"], media, text_given=content.get("text"), stored=stored)
        if content.get("name") is not None:
            if not isinstance(content["name"], str):
                raise ContentError("name must be a string")
            out["name"] = content["name"]
        if content.get("tool_calls"):
            if role != "assistant":
                raise ContentError("only assistant messages carry tool_calls")
            out["tool_calls"] = _parse_tool_calls(content["tool_calls"])
        if role == "tool":
            call_id = content.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise ContentError("a tool message needs a tool_call_id")
            out["tool_call_id"] = call_id
            if content.get("is_error"):
                out["is_error"] = True
        elif content.get("tool_call_id") is not None or content.get("is_error"):
            raise ContentError("tool_call_id and is_error belong to tool messages only")
        if not out["text"] and not out.get("tool_calls") and not out.get("parts"):
            raise ContentError(f"an empty {role} message (no text, no parts, no tool calls)")
        _check_call_items(out)
    elif kind == "artifact":
        allowed = {"type", "text", "artifact_type", "role"}
        out["text"] = _text(content)
        artifact_type = content.get("artifact_type", "text")
        if not isinstance(artifact_type, str):
            raise ContentError("artifact_type must be a string")
        out["artifact_type"] = artifact_type
        out["role"] = _artifact_role(content)
    else:  # freeform
        allowed = {"type", "payload", "role"}
        if "payload" not in content:
            raise ContentError("freeform content needs a payload")
        out["payload"] = content["payload"]
        out["role"] = _artifact_role(content)
    unknown = set(content) - allowed
    if unknown:
        raise ContentError(f"{kind} content has unknown fields {sorted(unknown)}")
    if kind == "freeform":
        check_json(out["payload"], "payload")  # after the shape: its values come next
    return out


# --- content parts ----------------------------------------------------------------------------------------

GEMINI_PARTS = frozenset({"gemini_thought", "gemini_call", "gemini_part"})
PROVIDER_PARTS = frozenset({"anthropic_call", "anthropic_block", "anthropic_container", "openai_audio"})
ASSISTANT_PARTS = frozenset(
    {
        "thinking",
        "redacted_thinking",
        "reasoning",
        "refusal",
        "responses_item",
        *GEMINI_PARTS,
        *PROVIDER_PARTS,
    }
)
SERVER_BLOCKS = frozenset(
    {"server_tool_use", "mcp_tool_use", "mcp_tool_result", "container_upload"}
)  # with any ``*_tool_result``: the Anthropic blocks an ``anthropic_block`` part holds
MEDIA_PARTS = frozenset({"image", "document"})
DETAILS = ("auto", "high", "low")


def kept_by_edit(given: object, new: dict[str, Any], shown: dict[str, Any]) -> dict[str, Any] | None:
    """The one rule of an edit's parts: an edit keeps the parts of the message it replaces unless it gives its
    own. ``given`` is the content the edit was given, ``new`` its stored payload (parts of one text are stored
    as plain text: whether parts were given is read from ``given``), ``shown`` what the target shows now (its
    latest edit's).

    When the edit gives no parts and ``new`` has the type and role of ``shown``, which has parts, the payload to store
    instead: ``shown``'s parts (images, documents, thinking, refusals, in place, as stored: media by id) with
    its text parts replaced by one holding ``new``'s text, where the first stood (first when there was none;
    none when the text is empty), and a Responses ``function_call`` item left out unless ``new`` keeps its
    call. Otherwise None: ``new`` is stored as it is. ``Session.commit`` applies it (and so ``Tract.commit``,
    the CLI's ``commit --edit`` and the built-in commit tool), and so does ``tool_result(edit=)`` given text or
    JSON (``ToolResults.commit_result``: the CLI's ``commit --edit`` of a tool result)."""
    parts = shown.get("parts")
    if (
        "parts" in new
        or (isinstance(given, dict) and given.get("parts") is not None)
        or not isinstance(parts, list)
        or not parts
        or new.get("type") != shown.get("type")
        or new.get("role") != shown.get("role")
    ):
        return None
    out = dict(new)
    text = out.pop("text", "")
    calls = {c.get("id") for c in new.get("tool_calls", ()) if isinstance(c, dict)}
    kept = [p for p in parts if _call_of(p) in (None, *calls)]  # a call edited away goes with its item
    out["parts"] = _with_text(kept, text if isinstance(text, str) else "")
    return out


def _call_of(part: object) -> object:
    """The call id of a stored part that lives only beside its tool call (a Responses ``function_call`` item,
    a ``gemini_call``), None for any other part."""
    if not isinstance(part, dict):
        return None
    if part.get("type") in ("gemini_call", "anthropic_call"):
        return part.get("call_id")
    item = part.get("item")
    if (
        part.get("type") == "responses_item"
        and isinstance(item, dict)
        and item.get("type") == "function_call"
    ):
        return item.get("call_id")
    return None


def _with_text(parts: list[Any], text: str) -> list[Any]:
    """``parts`` (as stored) with their text parts replaced by one holding ``text``, where the first stood
    (first, when there was none, but after any leading Responses items: a reasoning item precedes what it
    produced); every other part (image, document, thinking, refusal, Responses item) kept in place."""
    out: list[Any] = []
    placed = not text
    for part in parts:
        if isinstance(part, dict) and part.get("type") == "text":
            if not placed:
                out.append({"type": "text", "text": text})
                placed = True
            continue
        out.append(part)
    if placed:
        return out
    lead = 0
    while lead < len(out) and isinstance(out[lead], dict) and out[lead].get("type") == "responses_item":
        lead += 1
    return [*out[:lead], {"type": "text", "text": text}, *out[lead:]]


def _set_parts(
    out: dict[str, Any],
    raw: object,
    media: dict[str, Blob],
    text_given: object,
    stored: StoredMedia | None = None,
) -> None:
    """Normalize ``raw`` parts into ``out`` (``text`` = the text parts joined; ``parts`` unless it is one
    text), storing media blobs in ``media`` by id."""
    if not isinstance(raw, list | tuple):
        raise ContentError(f"parts must be a list of content parts, not {type(raw).__name__}")
    role = out["role"]
    parts = [_part(item, index, role, media, stored) for index, item in enumerate(raw)]
    joined = "".join(p["text"] for p in parts if p["type"] == "text")
    if text_given is not None and text_given != joined:
        raise ContentError("text must be the text parts joined (or leave text out when giving parts)")
    out["text"] = joined
    if len(parts) > 1 or (parts and set(parts[0]) != {"type", "text"}):  # not one plain text
        out["parts"] = parts


def _part(
    item: object, index: int, role: str, media: dict[str, Blob], stored: StoredMedia | None = None
) -> dict[str, Any]:
    where = f"parts[{index}]"
    if isinstance(item, str):
        item = {"type": "text", "text": item}
    if not isinstance(item, dict):
        raise ContentError(f"{where} must be a str or a dict with a 'type', not {type(item).__name__}")
    item = {k: v for k, v in item.items() if v is not None}  # SDK model_dump() writes None for unset keys
    kind = item.get("type")
    if not isinstance(kind, str):
        raise ContentError(f"{where}: the part type must be a string, not {type(kind).__name__}")
    if kind == "image_url":  # OpenAI
        _keys(item, where, {"type", "image_url"})
        inner = item.get("image_url")
        if not isinstance(inner, dict):
            raise ContentError(f"{where}.image_url must be a dict with a url")
        inner = {k: v for k, v in inner.items() if v is not None}
        _keys(inner, f"{where}.image_url", {"url", "detail"})
        item = {
            "type": "image",
            "url": inner.get("url"),
            **({"detail": inner["detail"]} if "detail" in inner else {}),
        }
        kind = "image"
    elif kind == "file":  # OpenAI
        _keys(item, where, {"type", "file"})
        inner = item.get("file")
        if not isinstance(inner, dict):
            raise ContentError(f"{where}.file must be a dict with file_data")
        inner = {k: v for k, v in inner.items() if v is not None}
        if "file_id" in inner:
            raise ContentError(f"{where}: a file_id names a file stored at OpenAI; pass its bytes instead")
        _keys(inner, f"{where}.file", {"file_data", "filename"})
        data_url = inner.get("file_data")
        if not isinstance(data_url, str) or not data_url.startswith("data:"):
            raise ContentError(
                f"{where}.file.file_data must be a data: URL (data:application/pdf;base64,...)"
            )
        item = {
            "type": "document",
            "url": data_url,
            **({"title": inner["filename"]} if "filename" in inner else {}),
        }
        kind = "document"
    if kind == "text":
        return _text_part(item, role, where)
    if kind in MEDIA_PARTS:
        if role == "assistant":
            raise ContentError(f"{where}: an {kind} belongs to a user or tool message, not an assistant one")
        return _media_part(item, kind, where, media, stored)
    if kind in ASSISTANT_PARTS:
        if role != "assistant":
            raise ContentError(f"{where}: a {kind} part belongs to an assistant message only")
        return _assistant_part(item, kind, where)
    known = sorted({"text", "image", "document", "image_url", "file", *ASSISTANT_PARTS})
    raise ContentError(f"{where}: unknown part type {kind!r}; expected one of {known}")


def _assistant_part(item: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    """One part only an assistant message holds (thinking, reasoning, a refusal, a provider's item)."""
    if kind == "responses_item":
        _keys(item, where, {"type", "item"})
        return {"type": kind, "item": responses_item(item.get("item"), f"{where}.item")}
    if kind in GEMINI_PARTS:
        return _gemini_part(item, kind, where)
    if kind in PROVIDER_PARTS:
        return _provider_part(item, kind, where)
    if kind == "thinking":
        _keys(item, where, {"type", "thinking", "signature"})
        fields = {"thinking": item.get("thinking"), "signature": item.get("signature")}
    elif kind == "redacted_thinking":
        _keys(item, where, {"type", "data"})
        fields = {"data": item.get("data")}
    elif kind == "reasoning":
        _keys(item, where, {"type", "reasoning"})
        fields = {"reasoning": item.get("reasoning")}
        if fields["reasoning"] == "":
            raise ContentError(f"{where}: an empty reasoning part (leave it out instead)")
    else:
        _keys(item, where, {"type", "refusal"})
        fields = {"refusal": item.get("refusal")}
    for name, value in fields.items():
        if not isinstance(value, str):
            raise ContentError(f"{where}: a {kind} part needs a string {name}")
    return {"type": kind, **fields}


def _media_part(
    item: dict[str, Any], kind: str, where: str, media: dict[str, Blob], stored: StoredMedia | None = None
) -> dict[str, Any]:
    """An image or document part in its stored form (bytes moved into a media blob; a part naming a stored
    blob has that blob's bytes checked through ``stored``)."""
    extra = "detail" if kind == "image" else "title"
    accepted = _media.IMAGE_TYPES if kind == "image" else _media.DOCUMENT_TYPES
    out: dict[str, Any] = {"type": kind}
    data: bytes | None = None
    existing: bytes | None = None  # the bytes of the stored blob a stored-form part names
    media_type: object = item.get("media_type")
    if "source" in item:  # Anthropic
        _keys(item, where, {"type", "source", extra})
        source = item["source"]
        if not isinstance(source, dict):
            raise ContentError(f"{where}.source must be a dict")
        source = {k: v for k, v in source.items() if v is not None}
        stype = source.get("type")
        if stype == "base64":
            _keys(source, f"{where}.source", {"type", "media_type", "data"})
            media_type = source.get("media_type")
            try:
                data = _media.decode_base64(source.get("data"))
            except ValueError as exc:
                raise ContentError(f"{where}.source: {exc}") from None
        elif stype == "url":
            _keys(source, f"{where}.source", {"type", "url"})
            out["url"] = _https(source.get("url"), f"{where}.source.url")
        elif stype == "text" and kind == "document":
            _keys(source, f"{where}.source", {"type", "media_type", "data"})
            media_type = source.get("media_type", _media.TEXT)
            if not isinstance(source.get("data"), str):
                raise ContentError(f"{where}.source: a text source needs string data")
            data = source["data"].encode("utf-8", "surrogatepass")
        else:
            raise ContentError(
                f"{where}.source.type {stype!r} is not supported (base64, url, text for documents)"
            )
    elif "data" in item:
        _keys(item, where, {"type", "data", "media_type", extra})
        raw = item["data"]
        if not isinstance(raw, bytes | bytearray | memoryview):
            raise ContentError(f"{where}.data must be bytes (base64 text goes in a data: URL or a source)")
        data = bytes(raw)
    elif "media" in item:  # the stored form: a media blob already stored
        _keys(item, where, {"type", "media", "media_type", extra})
        if not is_object_id(item["media"]):
            raise ContentError(f"{where}.media must be an object id (64 hex digits)")
        out["media"] = item["media"]
        if stored is not None:
            existing = stored(item["media"])
            if existing is None:
                raise ContentError(f"{where}.media {item['media']} is not a stored image or document (bytes)")
    elif "url" in item:
        _keys(item, where, {"type", "url", extra})
        url = item["url"]
        if isinstance(url, str) and url.startswith("data:"):
            try:
                media_type, data = _media.parse_data_url(url)
            except ValueError as exc:
                raise ContentError(f"{where}: {exc}") from None
        else:
            out["url"] = _https(url, f"{where}.url")
    else:
        raise ContentError(f"{where}: an {kind} part needs data (bytes) and media_type, a url, or a source")
    if "url" not in out:
        if not isinstance(media_type, str) or media_type not in accepted:
            raise ContentError(f"{where}: media_type must be one of {list(accepted)}, not {media_type!r}")
        out["media_type"] = media_type
        if data is not None:
            problem = _media.check_bytes(media_type, data)
            if problem is not None:
                raise ContentError(f"{where}: {problem}")
            blob = Blob(data=data)
            oid = object_id(blob)
            media.setdefault(oid, blob)
            out["media"] = oid
        elif existing is not None:
            problem = _media.check_bytes(media_type, existing)
            if problem is not None:
                raise ContentError(f"{where}: media {out['media']}: {problem}")
    if extra in item:
        value = item[extra]
        if extra == "detail" and value not in DETAILS:
            raise ContentError(f"{where}: detail must be one of {list(DETAILS)}, not {value!r}")
        if not isinstance(value, str):
            raise ContentError(f"{where}: {extra} must be a string")
        if not value:
            raise ContentError(f"{where}: an empty {extra} (leave it out instead)")
        out[extra] = value
    return out


def _https(url: object, where: str) -> str:
    if not isinstance(url, str) or not url.startswith("https://") or len(url) <= len("https://"):
        raise ContentError(f"{where} must be an https:// URL or a data: URL, not {url!r}")
    return url


def _keys(item: dict[str, Any], where: str, allowed: set[str]) -> None:
    unknown = set(item) - allowed
    if unknown:
        raise ContentError(f"{where} has unknown keys {sorted(unknown)}")


MAX_JSON_DEPTH = codec.MAX_DEPTH  # containers nested deeper than this are refused (as the codec refuses them)
MAX_JSON_VALUES = MAX_OBJECT_BYTES  # values a JSON-bound value may expand to (each encodes to >= 1 byte)


def check_json(value: object, where: str, *, binary: bool = False, tuples: bool = True) -> None:
    """The one bounded walk of a JSON-bound value (a freeform payload, tool call arguments, a commit's metadata
    and generation_config, a usage record's arguments, an integration's items): raise :class:`ContentError`
    at once, naming the path, when it is not a JSON value tractkv can store.

    Refused: a container that contains itself (a cycle, e.g. ``d["self"] = d``), nesting deeper than
    :data:`MAX_JSON_DEPTH`, more than :data:`MAX_JSON_VALUES` values once shared containers are counted
    wherever they appear (``x = [x, x]`` forty times over: its encoding could not fit one object), a map key
    that is not a str, a float that is not finite, an int outside -2**63 .. 2**64-1, bytes (unless
    ``binary``: metadata may hold bytes, a message may not), tuples (unless ``tuples``) and any other type.
    Each distinct container is walked once (a shared one is counted, not walked again), so the cost is linear
    in the value's distinct parts whatever it expands to; what is left to the codec (lone surrogates, exact
    types) it then checks within that bound."""
    try:
        _json_walk(value, 0, binary, tuples, {}, set())
    except _NotJson as bad:
        path = where
        for how, step in reversed(bad.steps):
            if how == "key":
                path = f"{path}.{step}" if path else str(step)
            elif how == "index":
                path = f"{path}[{step}]"
            else:  # the key itself is what is wrong
                path = f"{path}[{step!r}]"
        if bad.bare:
            raise ContentError(f"{path}: {bad.reason}") from None
        raise ContentError(f"cannot encode {path or 'value'}: {bad.reason}") from None  # as the codec says it
    except _TooMany:
        raise ContentError(
            f"{where}: expands to more than {MAX_JSON_VALUES} values (a shared part counts wherever it "
            "appears): more than one object can hold"
        ) from None


class _TooMany(Exception):
    """Internal: a value expands to more than :data:`MAX_JSON_VALUES` values."""


class _NotJson(Exception):
    """Internal: a value :func:`check_json` refuses; ``steps`` lead from it back up to the root."""

    def __init__(self, reason: str, *, bare: bool = False) -> None:
        self.reason = reason
        self.bare = bare  # "<path>: <reason>" rather than the codec's "cannot encode <path>: <reason>"
        self.steps: list[tuple[str, object]] = []


def _json_walk(
    value: object, depth: int, binary: bool, tuples: bool, sizes: dict[int, int], active: set[int]
) -> int:
    """The number of values ``value`` expands to (see :func:`check_json`); ``sizes`` memoizes containers
    already walked by id, ``active`` holds the ids of the containers on the path to ``value``."""
    if value is None or isinstance(value, bool | str):
        return 1
    if isinstance(value, int):
        if not codec.INT_MIN <= value <= codec.INT_MAX:
            raise _NotJson("integer outside the 64-bit range -2**63 .. 2**64-1")
        return 1
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotJson(f"{value!r} is not a finite number (JSON has no spelling for it)")
        return 1
    if isinstance(value, bytes | bytearray | memoryview):
        if binary and isinstance(value, bytes):
            return 1
        raise _NotJson(
            "bytes cannot be sent to a model (a message holds JSON values only; "
            "encode binary data as text, e.g. base64)",
            bare=True,
        )
    if isinstance(value, dict):
        for name in value:
            if not isinstance(name, str):
                bad = _NotJson(f"map keys must be str, not {type(name).__name__}")
                bad.steps.append(("badkey", name))
                raise bad
        items: Any = value.items()
        how = "key"
    elif isinstance(value, list) or (tuples and isinstance(value, tuple)):
        items = enumerate(value)
        how = "index"
    else:
        raise _NotJson(f"type {type(value).__name__} is not allowed in a hashed payload")
    key = id(value)
    known = sizes.get(key)
    if known is not None:
        return known  # a container seen before, elsewhere: counted again, not walked again
    if key in active:
        raise _NotJson("contains itself (a cycle: a JSON value is a tree)", bare=True)
    if depth > MAX_JSON_DEPTH:
        raise _NotJson(f"nested deeper than {MAX_JSON_DEPTH} levels")
    active.add(key)
    total = 1
    for step, item in items:
        try:
            total += _json_walk(item, depth + 1, binary, tuples, sizes, active)
        except _NotJson as inner:
            inner.steps.append((how, step))
            raise
        if total > MAX_JSON_VALUES:
            raise _TooMany
    active.discard(key)
    sizes[key] = total
    return total


def _artifact_role(content: dict[str, Any]) -> str:
    role = content.get("role", "user")
    if role not in ARTIFACT_ROLES:
        raise ContentError(f"role must be one of {sorted(ARTIFACT_ROLES)}, not {role!r}")
    return str(role)


def content_type(data: object) -> str | None:
    """The ``type`` of a blob payload, or None when it is not typed content."""
    if isinstance(data, dict):
        kind = data.get("type")
        return kind if isinstance(kind, str) else None
    return None


def is_message(data: object) -> bool:
    """True when a payload becomes a message when compiled."""
    return content_type(data) in MESSAGE_TYPES


MediaLoader = Callable[[str], bytes]
"""The bytes of a media blob by id (raises when it is not stored as bytes)."""


def responses_item(item: object, where: str) -> dict[str, Any]:
    """An OpenAI Responses output item kept verbatim (a ``responses_item`` part's ``item``), checked: a JSON
    object with a string ``type`` other than ``message`` (a message's content is text and refusal parts); a
    ``reasoning`` item needs its ``id`` and a ``summary`` list; a ``function_call`` its ``call_id``, ``name``
    and ``arguments`` (the exact string the model wrote, JSON or not). Top-level keys whose value is None are
    left out (SDK ``model_dump()`` output), as in every part.

    Raises:
        ContentError: naming ``where`` and the field.
    """
    if not isinstance(item, dict):
        raise ContentError(f"{where} must be a Responses output item (a dict), not {type(item).__name__}")
    kind = item.get("type")
    if not isinstance(kind, str) or not kind:
        raise ContentError(f"{where} needs a string type")
    if kind == "message":
        raise ContentError(f"{where}: a message item is stored as text and refusal parts, not as an item")
    item = {k: v for k, v in item.items() if v is not None}  # SDK model_dump() writes None for unset keys
    if kind == "reasoning":
        if not isinstance(item.get("id"), str) or not item["id"]:
            raise ContentError(f"{where}: a reasoning item needs its string id (it goes back verbatim)")
        if not isinstance(item.get("summary"), list):
            raise ContentError(f"{where}: a reasoning item needs a summary list")
    if kind == "function_call":
        for field in ("call_id", "name", "arguments"):
            if not isinstance(item.get(field), str) or (field != "arguments" and not item[field]):
                raise ContentError(f"{where}: a function_call item needs a string {field}")
    check_json(item, where)
    return item


def _text_part(item: dict[str, Any], role: str, where: str) -> dict[str, Any]:
    """A text part: non-empty text, or (an assistant's, from Gemini) any text with its ``thought_signature``."""
    _keys(item, where, {"type", "text", "thought_signature", "citations"})
    text = item.get("text")
    if not isinstance(text, str):
        raise ContentError(f"{where}: a text part needs a string text")
    if "citations" in item:
        if role != "assistant":
            raise ContentError(f"{where}: citations belong to an assistant message only")
        if not text:
            raise ContentError(f"{where}: an empty text part (providers refuse empty text blocks)")
        citations = item["citations"]
        if (
            not isinstance(citations, list | tuple)
            or not citations
            or not all(isinstance(c, dict) for c in citations)
        ):
            raise ContentError(f"{where}.citations must be a non-empty list of JSON objects (Anthropic's)")
        citations = list(citations)
        check_json(citations, f"{where}.citations")
        return {"type": "text", "text": text, "citations": citations, **_signature(item, where)}
    if "thought_signature" in item:
        if role != "assistant":
            raise ContentError(f"{where}: a thought_signature belongs to an assistant message only")
        return {"type": "text", "text": text, **_signature(item, where)}
    if not text:
        raise ContentError(f"{where}: an empty text part (providers refuse empty text blocks)")
    return {"type": "text", "text": text}


def _signature(item: dict[str, Any], where: str) -> dict[str, Any]:
    """``{"thought_signature": <bytes>}`` of a part that gives one (bytes, non-empty), else ``{}``."""
    if "thought_signature" not in item:
        return {}
    value = item["thought_signature"]
    if not isinstance(value, bytes) or not value:
        raise ContentError(f"{where}.thought_signature must be non-empty bytes (Gemini's signature, exactly)")
    return {"thought_signature": value}


def _gemini_part(item: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    """A ``gemini_thought``, ``gemini_call`` or ``gemini_part`` part, checked (see the table above)."""
    if kind == "gemini_thought":
        _keys(item, where, {"type", "text", "thought_signature"})
        if not isinstance(item.get("text"), str):
            raise ContentError(f"{where}: a gemini_thought part needs a string text")
        return {"type": kind, "text": item["text"], **_signature(item, where)}
    if kind == "gemini_call":
        _keys(item, where, {"type", "call_id", "made_id", "thought_signature", "extra_content"})
        if not isinstance(item.get("call_id"), str) or not item["call_id"]:
            raise ContentError(f"{where}: a gemini_call part needs its tool call's call_id")
        out: dict[str, Any] = {"type": kind, "call_id": item["call_id"]}
        if item.get("made_id", False) is not False:
            if item["made_id"] is not True:
                raise ContentError(f"{where}.made_id must be true or absent")
            out["made_id"] = True
        if "extra_content" in item:
            if not isinstance(item["extra_content"], dict):
                raise ContentError(f"{where}.extra_content must be a JSON object")
            check_json(item["extra_content"], f"{where}.extra_content")
            out["extra_content"] = item["extra_content"]
        return {**out, **_signature(item, where)}
    _keys(item, where, {"type", "part"})
    part = item.get("part")
    if not isinstance(part, dict) or not part:
        raise ContentError(f"{where}.part must be a Gemini part (a non-empty dict)")
    if {"text", "function_call", "function_response"} & set(part):
        raise ContentError(
            f"{where}.part: text, function_call and function_response are text, gemini_call and tool parts"
        )
    check_json(part, f"{where}.part", binary=True)
    return {"type": kind, "part": part}


def anthropic_block(block: object, where: str) -> dict[str, Any]:
    """An Anthropic server tool block kept verbatim (an ``anthropic_block`` part's ``block``), checked: a JSON
    object whose ``type`` is one of :data:`SERVER_BLOCKS` or ends in ``_tool_result``; a ``server_tool_use`` /
    ``mcp_tool_use`` needs its string ``id`` and ``name`` and an ``input`` object (``mcp_tool_use`` its
    ``server_name``), a result its ``tool_use_id``, a ``container_upload`` its ``file_id``. Top-level keys
    whose value is None are left out (SDK ``model_dump()`` output).

    Raises:
        ContentError: naming ``where`` and the field.
    """
    if not isinstance(block, dict):
        raise ContentError(
            f"{where} must be an Anthropic server tool block (a dict), not {type(block).__name__}"
        )
    block = {k: v for k, v in block.items() if v is not None}
    kind = block.get("type")
    if not isinstance(kind, str) or not (kind in SERVER_BLOCKS or kind.endswith("_tool_result")):
        raise ContentError(
            f"{where}: type {kind!r} is not a server tool block ({', '.join(sorted(SERVER_BLOCKS))} or "
            "*_tool_result)"
        )
    if kind.endswith("_tool_result"):
        required: tuple[str, ...] = ("tool_use_id",)
    elif kind == "container_upload":
        required = ("file_id",)
    else:
        required = ("id", "name", "server_name") if kind == "mcp_tool_use" else ("id", "name")
        if not isinstance(block.get("input"), dict):
            raise ContentError(f"{where}: a {kind} block needs an input object")
    for field in required:
        if not isinstance(block.get(field), str) or not block[field]:
            raise ContentError(f"{where}: a {kind} block needs a string {field}")
    check_json(block, where)
    return block


def _provider_part(item: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    """An ``anthropic_call``, ``anthropic_block``, ``anthropic_container`` or ``openai_audio`` part, checked
    (see the table above)."""
    if kind == "anthropic_block":
        _keys(item, where, {"type", "block"})
        return {"type": kind, "block": anthropic_block(item.get("block"), f"{where}.block")}
    if kind == "anthropic_container":
        _keys(item, where, {"type", "container"})
        container = item.get("container")
        if not isinstance(container, dict) or not isinstance(container.get("id"), str) or not container["id"]:
            raise ContentError(f"{where}.container must be Anthropic's container object, with its string id")
        container = {k: v for k, v in container.items() if v is not None}
        check_json(container, f"{where}.container")
        return {"type": kind, "container": container}
    if kind == "openai_audio":
        _keys(item, where, {"type", "id", "transcript", "expires_at"})
        if not isinstance(item.get("id"), str) or not item["id"]:
            raise ContentError(f"{where}: an openai_audio part needs the audio's string id")
        if not isinstance(item.get("transcript", ""), str):
            raise ContentError(f"{where}.transcript must be a string")
        expires = item.get("expires_at", 0)
        if isinstance(expires, bool) or not isinstance(expires, int):
            raise ContentError(f"{where}.expires_at must be an int (seconds since the epoch)")
        return {"type": kind, **{k: item[k] for k in ("id", "transcript", "expires_at") if k in item}}
    _keys(item, where, {"type", "call_id", "caller", "toolset_name"})
    if not isinstance(item.get("call_id"), str) or not item["call_id"]:
        raise ContentError(f"{where}: an anthropic_call part needs its tool call's call_id")
    out: dict[str, Any] = {"type": kind, "call_id": item["call_id"]}
    if "caller" in item:
        caller = item["caller"]
        if not isinstance(caller, dict) or not isinstance(caller.get("type"), str):
            raise ContentError(
                f"{where}.caller must be a JSON object with a string type (Anthropic's caller)"
            )
        check_json(caller, f"{where}.caller")
        out["caller"] = caller
    if "toolset_name" in item:
        if not isinstance(item["toolset_name"], str):
            raise ContentError(f"{where}.toolset_name must be a string")
        out["toolset_name"] = item["toolset_name"]
    return out


def _check_call_items(out: dict[str, Any]) -> None:
    """Each ``function_call`` item among the parts is one of the message's tool calls (its ``call_id`` and
    ``name``): compile pairs results with the tool calls, and the Responses dialect replays the item."""
    calls = {c["id"]: c["name"] for c in out.get("tool_calls", ())}
    placed: set[str] = set()
    anthropic: set[str] = set()
    for index, part in enumerate(out.get("parts", ())):
        if part["type"] == "anthropic_call":
            if part["call_id"] not in calls or part["call_id"] in anthropic:
                raise ContentError(
                    f"parts[{index}]: anthropic_call {part['call_id']!r} is not one of the message's tool_calls "
                    "(or is placed twice)"
                )
            anthropic.add(part["call_id"])
        if part["type"] == "gemini_call":
            if part["call_id"] not in calls or part["call_id"] in placed:
                raise ContentError(
                    f"parts[{index}]: gemini_call {part['call_id']!r} is not one of the message's tool_calls "
                    "(or is placed twice)"
                )
            placed.add(part["call_id"])
        item = part.get("item") if part["type"] == "responses_item" else None
        if (
            item is not None
            and item["type"] == "function_call"
            and calls.get(item["call_id"]) != item["name"]
        ):
            raise ContentError(
                f"parts[{index}].item: function_call {item['call_id']!r} is not one of the message's tool_calls "
                "(the same call_id and name)"
            )


def _no_media(oid: str) -> bytes:
    raise ContentError(f"media {oid} cannot be loaded here")


def _to_part(p: dict[str, Any], load_media: MediaLoader) -> Part:
    kind = p["type"]
    if kind == "text":
        citations = p.get("citations")
        return Part(
            type="text",
            text=p["text"],
            thought_signature=p.get("thought_signature"),
            citations=tuple(citations) if citations is not None else None,
        )
    if kind == "anthropic_call":
        return Part(
            type=kind, call_id=p["call_id"], caller=p.get("caller"), toolset_name=p.get("toolset_name")
        )
    if kind in ("anthropic_block", "anthropic_container"):
        return Part(type=kind, item=p[kind.removeprefix("anthropic_")])
    if kind == "openai_audio":
        return Part(type=kind, item={k: v for k, v in p.items() if k != "type"})
    if kind in ("gemini_thought", "gemini_call"):
        return Part(
            type=kind,
            text=p.get("text"),
            call_id=p.get("call_id"),
            made_id=bool(p.get("made_id")),
            extra_content=p.get("extra_content"),
            thought_signature=p.get("thought_signature"),
        )
    if kind == "gemini_part":
        return Part(type=kind, item=p["part"])
    if kind in MEDIA_PARTS:
        oid = p.get("media")
        return Part(
            type=kind,
            media_type=p.get("media_type"),
            data=load_media(oid) if oid is not None else None,
            media=oid,
            url=p.get("url"),
            detail=p.get("detail"),
            title=p.get("title"),
        )
    if kind == "thinking":
        return Part(type=kind, thinking=p["thinking"], signature=p["signature"])
    if kind == "redacted_thinking":
        return Part(type=kind, redacted=p["data"])
    if kind == "reasoning":
        return Part(type=kind, thinking=p["reasoning"])
    if kind == "responses_item":
        return Part(type=kind, item=p["item"])
    return Part(type="refusal", refusal=p["refusal"])


def to_message(data: dict[str, Any], load_media: MediaLoader = _no_media) -> Message:
    """The message a (normalized) payload compiles to; ``load_media`` gives the bytes of its media blobs
    (needed only when its parts have media)."""
    kind = data["type"]
    if kind == "instruction":
        return Message(role="system", content=data["text"])
    if kind == "dialogue":
        if len(data) == 3 and "text" in data:  # type, role, text: plain text (the usual message)
            return Message(role=data["role"], content=data["text"])
        calls = tuple(
            ToolCall(
                id=c["id"],
                name=c["name"],
                arguments=c["arguments"],
                invalid_arguments=c.get("invalid_arguments"),
            )
            for c in data.get("tool_calls", ())
        )
        return Message(
            role=data["role"],
            content=data["text"],
            name=data.get("name"),
            tool_calls=calls,
            tool_call_id=data.get("tool_call_id"),
            is_error=bool(data.get("is_error", False)),
            parts=tuple(_to_part(p, load_media) for p in data.get("parts", ())),
        )
    if kind == "reasoning":
        return Message(role="assistant", content=data["text"])
    if kind == "artifact":
        return Message(role=data["role"], content=data["text"])
    return Message(
        role=data["role"],
        content=freeform_text(data["payload"]),
    )


def part_markers(parts: object, sizes: dict[str, int] | None = None) -> str:
    """The non-text parts of a stored payload as short markers for people (describe, diff, CLI, export),
    e.g. ``[image image/png 200 KB]`` (the size when a part holds its ``data`` bytes or ``sizes`` gives it by
    media id), ``[image https://...]``,
    ``[document application/pdf "title"]``, ``[thinking 120 chars]``, ``[redacted thinking]``,
    ``[refusal: text]``; "" when there are none."""
    if not isinstance(parts, list):
        return ""
    markers: list[str] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in MEDIA_PARTS:
            words = [str(kind), str(part.get("media_type") or part.get("url"))]
            data = part.get("data")
            size = len(data) if isinstance(data, bytes) else (sizes or {}).get(str(part.get("media")))
            if size is not None:
                words.append(byte_size(size))
            if part.get("title"):
                import json  # lazy: keeps `import tractkv` light

                words.append(json.dumps(part["title"], ensure_ascii=False))
            markers.append("[" + " ".join(words) + "]")
        elif kind == "thinking":
            markers.append(f"[thinking {len(str(part.get('thinking', '')))} chars]")
        elif kind == "redacted_thinking":
            markers.append("[redacted thinking]")
        elif kind == "reasoning":
            markers.append(f"[reasoning {len(str(part.get('reasoning', '')))} chars]")
        elif kind == "refusal":
            markers.append(f"[refusal: {part.get('refusal')}]")
        elif kind == "responses_item":
            item = part.get("item")
            markers.append(f"[{item.get('type') if isinstance(item, dict) else 'responses_item'}]")
        elif kind == "gemini_thought":
            markers.append(f"[thought {len(str(part.get('text', '')))} chars]")
        elif kind == "anthropic_block":
            block = part.get("block")
            markers.append(f"[{block.get('type') if isinstance(block, dict) else 'anthropic_block'}]")
        elif kind == "openai_audio":
            markers.append(f"[audio {part.get('id')}]")
        elif kind == "gemini_part":
            inner = part.get("part")
            fields = sorted(k for k in inner if k != "thought_signature") if isinstance(inner, dict) else []
            markers.append(f"[gemini {' '.join(fields) or 'part'}]")
    return " ".join(markers)


def byte_size(n: int) -> str:
    """A byte count for people: ``63 B``, ``200 KB``, ``2.9 MB``."""
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{round(n / 1024)} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def message_parts_markers(message: Message) -> str:
    """:func:`part_markers` of a compiled message (sizes known: its media bytes are loaded)."""
    return part_markers([p.to_dict() for p in message.parts])


def freeform_text(payload: object) -> str:
    """A freeform payload as the model receives it: compact JSON, keys sorted."""
    import json  # lazy: keeps `import tractkv` light

    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def message_text(data: dict[str, Any]) -> str:
    """The text a token counter sees for a payload."""
    if data["type"] == "freeform":
        import json  # lazy: keeps `import tractkv` light

        return json.dumps(data["payload"], ensure_ascii=False, sort_keys=True)
    text = str(data.get("text", ""))
    for call in data.get("tool_calls", ()):
        import json  # lazy: keeps `import tractkv` light

        invalid = call.get("invalid_arguments")  # the model's own string, counted as written
        text += call["name"] + (
            invalid if isinstance(invalid, str) else json.dumps(call["arguments"], sort_keys=True)
        )
    return text


# --- content classes (conveniences; they normalize to the dicts above) -------------------------------------


class _ContentBase:
    """What the content classes share: :func:`content_blob` takes any of them for the dict it stands for. They are
    defined in :mod:`tractkv.engine.content.classes` (loaded on first use: building five attrs classes is not
    what ``import tractkv`` should pay for)."""

    def to_payload(self) -> dict[str, Any]:
        raise NotImplementedError
