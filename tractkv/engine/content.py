"""Content types: what a commit can add to a context, how it is validated, and how it becomes a message.

A message commit's content is a :class:`~tractkv.model.Blob` whose ``data`` is a dict with a ``type``:

============  ==================================================  =====================================
type          fields                                              compiles to
============  ==================================================  =====================================
instruction   ``text``                                            a ``system`` message
dialogue      ``role`` (user / assistant / tool), ``text``,       a message of that role
              optional ``name``, ``tool_calls``, ``tool_call_id``,
              ``is_error``
reasoning     ``text``                                            an ``assistant`` message, only when
                                                                  compiled with ``include_reasoning``
artifact      ``text``, ``artifact_type``, ``role`` (user)         a message of ``role`` (a document,
                                                                  code, a file the model should see)
freeform      ``payload`` (any JSON-like value), ``role`` (user)   a message of ``role`` holding the
                                                                  payload as compact JSON
============  ==================================================  =====================================

Bookkeeping content has its own types and never becomes a message: ``annotation`` (``priority``, optional
``reason``), ``merge`` (``strategy``, ``source``, ``conflicts``) and ``tool_original`` (``text``: the raw tool
result behind an edited or summarized one). :mod:`tractkv.engine.validate` checks them, and checks that a
received message blob is exactly what :func:`content_blob` would store.

**No bytes in a message.** A message payload holds only JSON values: a bytes value anywhere in a freeform
``payload`` or in a tool call's ``arguments`` is refused with :class:`ContentError` when the commit is made
(and a received blob holding one is refused by the validator). Providers accept only JSON, so bytes could
not be counted, compiled or sent; encode binary data as text (base64) first. (Bytes stay allowed in blobs
that are not messages and in a commit's metadata, which are never sent to a model.)
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from tractkv.errors import ContentError, EncodeError
from tractkv.model import Blob

MESSAGE_TYPES = frozenset({"instruction", "dialogue", "reasoning", "artifact", "freeform"})
MESSAGE_ROLES = ("system", "user", "assistant", "tool")  # the roles a compiled Message has
DIALOGUE_ROLES = frozenset({"user", "assistant", "tool"})
ARTIFACT_ROLES = frozenset({"user", "assistant"})
PRIORITIES = ("normal", "pinned", "skip")

ANNOTATION = "annotation"
MERGE = "merge"
TOOL_ORIGINAL = "tool_original"
MERGE_STRATEGIES = ("auto", "ours", "theirs")  # what a merge blob's ``strategy`` may say


@attrs.frozen(kw_only=True)
class ToolCall:
    """A model's request to run a tool: ``arguments`` is the decoded JSON object."""

    id: str
    name: str
    arguments: dict[str, Any] = attrs.field(factory=dict, hash=False)

    def to_payload(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@attrs.frozen(kw_only=True)
class Message:
    """One compiled message, provider-neutral. Immutable and shared: treat as read-only."""

    role: str
    content: str
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The neutral dict form: ``role`` and ``content`` plus whichever extras are set."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name is not None:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [c.to_payload() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.is_error:
            out["is_error"] = True
        return out


def _text(data: dict[str, Any], field: str = "text") -> str:
    value = data.get(field)
    if not isinstance(value, str):
        raise ContentError(f"{data.get('type')} content needs a text field {field!r}")
    return value


def _parse_tool_calls(raw: object) -> list[dict[str, Any]]:
    """Tool calls in the stored form ``{"id", "name", "arguments"}`` (arguments a decoded JSON object).

    Each item may be a :class:`ToolCall`, that form, OpenAI's ``{"id", "type": "function", "function":
    {"name", "arguments"}}`` (arguments a JSON string or an object), an Anthropic ``{"type": "tool_use",
    "id", "name", "input"}`` block, or an SDK object of either (anything with ``model_dump()``).

    Raises:
        ContentError: not a list, an item of none of these shapes (unknown keys included), a missing id or
            name, a duplicate id, arguments that are not a JSON object, bytes in the arguments.
    """
    if not isinstance(raw, list | tuple):
        raise ContentError("tool_calls must be a list of {id, name, arguments}")
    calls: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        call_id, name, arguments = _tool_call_fields(item, f"tool_calls[{index}]")
        if not isinstance(call_id, str) or not call_id:
            raise ContentError(f"tool_calls[{index}] needs a non-empty string id")
        if call_id in seen:
            raise ContentError(f"tool_calls[{index}]: duplicate id {call_id!r}")
        seen.add(call_id)
        if not isinstance(name, str) or not name:
            raise ContentError(f"tool_calls[{index}] needs a non-empty string name")
        if isinstance(arguments, str):  # OpenAI sends arguments as a JSON string
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                raise ContentError(f"tool_calls[{index}].arguments is not valid JSON: {exc}") from exc
            except RecursionError:  # hostile nesting ("[[[[..."): refused like any other bad JSON
                raise ContentError(f"tool_calls[{index}].arguments is nested too deeply") from None
        if not isinstance(arguments, dict):
            raise ContentError(f"tool_calls[{index}].arguments must be a JSON object")
        _refuse_bytes(arguments, f"tool_calls[{index}].arguments")
        calls.append({"id": call_id, "name": name, "arguments": arguments})
    return calls


def _tool_call_fields(item: object, where: str) -> tuple[object, object, object]:
    """The id, name and (undecoded) arguments of one tool call in any accepted form (see above)."""
    if isinstance(item, ToolCall):
        return item.id, item.name, item.arguments
    if not isinstance(item, dict) and callable(getattr(item, "model_dump", None)):
        try:
            item = item.model_dump()  # type: ignore[attr-defined]
        except Exception as exc:  # a user's object: its failure is reported, not leaked
            raise ContentError(f"{where}: {type(item).__name__}.model_dump() failed: {exc!r}") from exc
    if not isinstance(item, dict):
        raise ContentError(f"{where} must be a dict with id, name, arguments")
    if item.get("type") == "tool_use":  # an Anthropic block; its other fields (caller, ...) are not the call
        return item.get("id"), item.get("name"), item.get("input", {})
    if "function" in item:  # OpenAI's nested form
        if item.get("type", "function") != "function":
            raise ContentError(f"{where} is a {item.get('type')!r} call; only function calls are supported")
        _only_keys(item, {"id", "type", "function"}, where)
        function = item["function"]
        if not isinstance(function, dict):
            raise ContentError(f"{where}.function must be a dict with name and arguments")
        _only_keys(function, {"name", "arguments"}, f"{where}.function")
        return item.get("id"), function.get("name"), function.get("arguments", {})
    if "type" in item:
        raise ContentError(
            f"{where} has type {item.get('type')!r}: expected {{id, name, arguments}}, OpenAI's "
            "{id, type: function, function} or an Anthropic tool_use block"
        )
    _only_keys(item, {"id", "name", "arguments"}, where)
    return item.get("id"), item.get("name"), item.get("arguments", {})


def _only_keys(item: dict[str, Any], allowed: set[str], where: str) -> None:
    """Refuse keys outside ``allowed`` (a key set to None, as an SDK's ``model_dump()`` gives, is absent)."""
    unknown = {key for key, value in item.items() if value is not None} - allowed
    if unknown:
        raise ContentError(f"{where} has unknown keys {sorted(map(str, unknown))}")


def content_blob(content: object) -> Blob:
    """Validate message content and return the blob that stores it (its payload is the canonical dict).

    Accepts a payload dict (``{"type": "dialogue", "role": "user", "text": "hi"}``) or one of the
    content classes below. The payload is checked once: its shape here, its values (what a hashed payload
    may hold) by the :class:`~tractkv.model.Blob` it is stored in.

    Raises:
        ContentError: unknown type, missing or mistyped fields, unknown fields, values a payload may not
            hold (NaN, sets, ...).
    """
    payload = canonical_payload(content)
    try:
        return Blob(data=payload)
    except EncodeError as exc:
        # Name the place inside the payload, as a payload check would ("payload.x", not "data.payload.x").
        where = exc.path.removeprefix("data").removeprefix(".")
        raise ContentError(str(EncodeError(where, exc.reason))) from exc


def normalize(content: object) -> dict[str, Any]:
    """Validate message content and return the canonical payload dict (``content_blob(content).data``).

    Prefer :func:`content_blob` when the payload is to be stored: it returns the blob already checked.

    Raises:
        ContentError: as :func:`content_blob`.
    """
    data: dict[str, Any] = content_blob(content).data
    return data


def canonical_payload(content: object) -> dict[str, Any]:
    """The canonical payload dict of message content, its shape checked (its values are not: see
    :func:`content_blob`). A stored message payload equals its own canonical payload.

    Raises:
        ContentError: as :func:`content_blob`, except for values a hashed payload may not hold.
    """
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
        allowed = {"type", "role", "text", "name", "tool_calls", "tool_call_id", "is_error"}
        role = content.get("role")
        if role not in DIALOGUE_ROLES:
            raise ContentError(f"dialogue role must be one of {sorted(DIALOGUE_ROLES)}, not {role!r}")
        out["role"] = role
        out["text"] = content.get("text") if content.get("text") is not None else ""
        if not isinstance(out["text"], str):
            raise ContentError("dialogue text must be a string")
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
        if not out["text"] and not out.get("tool_calls"):
            raise ContentError(f"an empty {role} message (no text, no tool calls)")
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
        _refuse_bytes(content["payload"], "payload")
        out["payload"] = content["payload"]
        out["role"] = _artifact_role(content)
    unknown = set(content) - allowed
    if unknown:
        raise ContentError(f"{kind} content has unknown fields {sorted(unknown)}")
    return out


def _refuse_bytes(value: object, where: str) -> None:
    """Raise when a JSON-bound value holds bytes anywhere (see "No bytes in a message" above)."""
    stack: list[tuple[object, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, bytes | bytearray | memoryview):
            raise ContentError(
                f"{path}: bytes cannot be sent to a model (a message holds JSON values only; "
                "encode binary data as text, e.g. base64)"
            )
        if isinstance(item, dict):
            stack.extend((v, f"{path}.{k}") for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))


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


def to_message(data: dict[str, Any]) -> Message:
    """The message a (normalized) payload compiles to."""
    kind = data["type"]
    if kind == "instruction":
        return Message(role="system", content=data["text"])
    if kind == "dialogue":
        calls = tuple(
            ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"]) for c in data.get("tool_calls", ())
        )
        return Message(
            role=data["role"],
            content=data["text"],
            name=data.get("name"),
            tool_calls=calls,
            tool_call_id=data.get("tool_call_id"),
            is_error=bool(data.get("is_error", False)),
        )
    if kind == "reasoning":
        return Message(role="assistant", content=data["text"])
    if kind == "artifact":
        return Message(role=data["role"], content=data["text"])
    return Message(
        role=data["role"],
        content=freeform_text(data["payload"]),
    )


def freeform_text(payload: object) -> str:
    """A freeform payload as the model receives it: compact JSON, keys sorted."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def message_text(data: dict[str, Any]) -> str:
    """The text a token counter sees for a payload."""
    if data["type"] == "freeform":
        return json.dumps(data["payload"], ensure_ascii=False, sort_keys=True)
    text = str(data.get("text", ""))
    for call in data.get("tool_calls", ()):
        text += call["name"] + json.dumps(call["arguments"], sort_keys=True)
    return text


# --- content classes (conveniences; they normalize to the dicts above) -------------------------------------


class _ContentBase:
    def to_payload(self) -> dict[str, Any]:
        raise NotImplementedError


@attrs.frozen
class InstructionContent(_ContentBase):
    """A system instruction."""

    text: str

    def to_payload(self) -> dict[str, Any]:
        return {"type": "instruction", "text": self.text}


@attrs.frozen
class DialogueContent(_ContentBase):
    """A user, assistant or tool message."""

    role: str
    text: str
    name: str | None = None

    def to_payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "dialogue", "role": self.role, "text": self.text}
        if self.name is not None:
            out["name"] = self.name
        return out


@attrs.frozen
class ReasoningContent(_ContentBase):
    """A model's reasoning trace (compiled only with ``include_reasoning=True``)."""

    text: str

    def to_payload(self) -> dict[str, Any]:
        return {"type": "reasoning", "text": self.text}


@attrs.frozen
class ArtifactContent(_ContentBase):
    """A document, code or file shown to the model."""

    text: str
    artifact_type: str = "text"
    role: str = "user"

    def to_payload(self) -> dict[str, Any]:
        return {"type": "artifact", "text": self.text, "artifact_type": self.artifact_type, "role": self.role}


@attrs.frozen
class FreeformContent(_ContentBase):
    """Any JSON-like payload, shown to the model as compact JSON."""

    payload: Any
    role: str = "user"

    def to_payload(self) -> dict[str, Any]:
        return {"type": "freeform", "payload": self.payload, "role": self.role}
