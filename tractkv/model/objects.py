"""Immutable stored objects and their wire format.

Every object is written as one canonical CBOR map::

    {"t": <kind>, "v": <format version>, <wire field>: <value>, ...}

Fields are written one by one under explicit wire names (never derived from Python attribute names, so a
rename in Python changes no id). Ids (parents, content, ...) are written as 32 raw bytes. Optional fields
are left out when they hold their default (``None``, empty), which is what lets a later release add an
optional field without changing the id of any object written before it. A decoder rejects fields it does
not know (they come from a newer writer) instead of silently dropping them.

The object id is ``blake3-256(bytes)`` as 64 lowercase hex digits (:func:`tractkv.ids.hash_bytes`).

Encoding is not memoized (a memo slot measurably slowed decoding, the hot path of a fresh compile): the write
path encodes and hashes each object once by taking ids from ``batch.put``, which returns the id it computed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from datetime import datetime
from typing import Any, ClassVar, TypeAlias

import attrs

from tractkv import codec
from tractkv.errors import CorruptObject, DecodeError, EncodeError, UnsupportedFormat
from tractkv.ids import OID_RAW_LEN, ObjectId, hash_bytes, is_object_id, oid_to_raw, raw_to_oid

OBJECT_FORMAT = 1  # the "v" written into every object; changing an encoding rule means a new version

#: The size limit, defined once: the largest object (its canonical encoded bytes) this library writes into a
#: store, and the largest every default reader takes (a hub's ``--max-object-bytes``, fetch, ``bundle
#: unbundle``); ``bundle create`` and push refuse to send anything larger, so whatever a default store can
#: write every default path carries and reads (docs/format.md, "Size limits").
MAX_OBJECT_BYTES = 16 * 1024 * 1024

#: Usage records form trees: a record lists the records of the executions it ran (``children``), each
#: execution ran inside one other, so a record has at most one parent record. A stored or received record
#: is valid only when its tree is at most this many levels deep (the record itself is level 1) ...
MAX_USAGE_DEPTH = 64
#: ... and holds at most this many records, counted along every path (a record listed twice counts twice;
#: see :mod:`tractkv.engine.history.validate`). Readers show a tree down to ``MAX_USAGE_DEPTH`` levels, each
#: record once.
MAX_USAGE_TREE = 1 << 20


def _oid_tuple(values: Any) -> tuple[ObjectId, ...]:
    return tuple(values)


# Set while :func:`decode` builds an object from a wire that ``codec.loads_canonical`` checked whole (every
# value allowed, from the root down) and whose ids ``_opt_oid`` / ``_oids`` made from 32 raw bytes: the
# field validators then keep their type checks and skip what that already proved, so a received object's
# values are checked once, not once per layer.
_WIRE_CHECKED: ContextVar[bool] = ContextVar("tractkv_wire_checked", default=False)


def _check_oid(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not _WIRE_CHECKED.get() and not is_object_id(value):
        raise EncodeError(attribute.name, f"{value!r} is not an object id")


def _check_oids(_inst: object, attribute: attrs.Attribute[Any], value: tuple[object, ...]) -> None:
    if value and _WIRE_CHECKED.get():
        return
    for index, item in enumerate(value):
        if not is_object_id(item):
            raise EncodeError(f"{attribute.name}[{index}]", f"{item!r} is not an object id")


def _check_payload(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not _WIRE_CHECKED.get():
        codec.check_value(value, attribute.name)


def _check_str(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        if not isinstance(value, str):
            raise EncodeError(attribute.name, f"expected text, got {type(value).__name__}")
        if not _WIRE_CHECKED.get():
            codec.check_value(value, attribute.name)


def _check_map(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        if not isinstance(value, dict):
            raise EncodeError(attribute.name, f"expected a dict, got {type(value).__name__}")
        if not _WIRE_CHECKED.get():
            codec.check_value(value, attribute.name)


@attrs.frozen(kw_only=True)
class Blob:
    """Any payload (a message's content, a summary's text, a raw tool result), addressed by its value."""

    KIND: ClassVar[str] = "blob"
    data: Any = attrs.field(validator=_check_payload, hash=False)

    def to_wire(self) -> dict[str, Any]:
        return {"data": self.data}

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> Blob:
        return cls(data=_take(wire, "data"))

    def iter_links(self) -> Iterator[ObjectId]:
        return iter(())


@attrs.frozen(kw_only=True)
class Commit:
    """One step of history: what was added or changed, on top of which parents, with which tools.

    Attributes:
        parents: 0 (root), 1, or 2+ (merge) parent ids, in order (first = the branch merged into).
        content: the object this commit adds (a :class:`Blob` for messages), or None (merges, bookkeeping).
        tools: the :class:`ToolSet` available when this commit was made, or None.
        operation: what the commit does: ``append``, ``edit``, ``annotate``, ``merge``, ``compress``, ...
        edit_target: the commit an ``edit`` replaces or an ``annotate`` annotates.
        reply_to: the commit this one answers (e.g. a tool result's assistant turn), or None.
        message: a human note, never sent to a model.
        metadata: caller-defined JSON-like data.
        generation_config: the model parameters that produced this content, if a model did.
        created_at: microseconds since the Unix epoch, UTC.
        links: further named references added by later features (compression sources, the original of a
            summarized tool result, tool-usage records); each name maps to a tuple of ids.
    """

    KIND: ClassVar[str] = "commit"
    parents: tuple[ObjectId, ...] = attrs.field(default=(), converter=_oid_tuple, validator=_check_oids)
    content: ObjectId | None = attrs.field(default=None, validator=_check_oid)
    tools: ObjectId | None = attrs.field(default=None, validator=_check_oid)
    operation: str = attrs.field(default="append", validator=_check_str)
    edit_target: ObjectId | None = attrs.field(default=None, validator=_check_oid)
    reply_to: ObjectId | None = attrs.field(default=None, validator=_check_oid)
    message: str | None = attrs.field(default=None, validator=_check_str)
    metadata: dict[str, Any] | None = attrs.field(default=None, validator=_check_map, hash=False)
    generation_config: dict[str, Any] | None = attrs.field(default=None, validator=_check_map, hash=False)
    created_at: int = attrs.field(default=0, validator=attrs.validators.instance_of(int))
    links: Mapping[str, tuple[ObjectId, ...]] = attrs.field(factory=dict, hash=False)

    @links.validator
    def _check_links(self, _attribute: attrs.Attribute[Any], value: Mapping[str, Any]) -> None:
        for name, oids in value.items():
            if not isinstance(name, str) or not isinstance(oids, tuple):
                raise EncodeError("links", "links map names (str) to tuples of object ids")
            for item in oids:
                if not is_object_id(item):
                    raise EncodeError(f"links.{name}", f"{item!r} is not an object id")

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"op": self.operation, "ts": self.created_at}
        if self.parents:
            wire["parents"] = [oid_to_raw(p) for p in self.parents]
        if self.content is not None:
            wire["content"] = oid_to_raw(self.content)
        if self.tools is not None:
            wire["tools"] = oid_to_raw(self.tools)
        if self.edit_target is not None:
            wire["target"] = oid_to_raw(self.edit_target)
        if self.reply_to is not None:
            wire["reply_to"] = oid_to_raw(self.reply_to)
        if self.message is not None:
            wire["message"] = self.message
        if self.metadata:
            wire["meta"] = self.metadata
        if self.generation_config:
            wire["gen"] = self.generation_config
        if self.links:
            wire["links"] = {name: [oid_to_raw(o) for o in oids] for name, oids in self.links.items() if oids}
        return wire

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> Commit:
        links_wire = _take(wire, "links", {})
        if not isinstance(links_wire, dict):
            raise DecodeError("commit links must be a map")
        return cls(
            operation=_take(wire, "op"),
            created_at=_take(wire, "ts"),
            parents=_oids(_take(wire, "parents", [])),
            content=_opt_oid(_take(wire, "content", None)),
            tools=_opt_oid(_take(wire, "tools", None)),
            edit_target=_opt_oid(_take(wire, "target", None)),
            reply_to=_opt_oid(_take(wire, "reply_to", None)),
            message=_take(wire, "message", None),
            metadata=_take(wire, "meta", None),
            generation_config=_take(wire, "gen", None),
            links={name: _oids(raw) for name, raw in links_wire.items()},
        )

    def iter_links(self) -> Iterator[ObjectId]:
        yield from self.parents
        for oid in (self.content, self.tools, self.edit_target, self.reply_to):
            if oid is not None:
                yield oid
        for oids in self.links.values():
            yield from oids


@attrs.frozen(kw_only=True)
class ToolSchema:
    """One tool definition exactly as given (a shape ``engine.toolsets`` accepts); ``name`` is metadata for lookups.

    The same name with a different schema is a different object: a new version of that tool.
    """

    KIND: ClassVar[str] = "tool"
    name: str = attrs.field(validator=_check_str)
    schema: dict[str, Any] = attrs.field(validator=_check_map, hash=False)

    @name.validator
    def _check_name(self, _attribute: attrs.Attribute[Any], value: str) -> None:
        if not value or "\0" in value:
            raise EncodeError("name", "a tool name must be non-empty and hold no NUL character")

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "schema": self.schema}

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> ToolSchema:
        return cls(name=_take(wire, "name"), schema=_take(wire, "schema"))

    def iter_links(self) -> Iterator[ObjectId]:
        return iter(())


KeyOrder: TypeAlias = tuple[tuple[str, ...] | None, ...]
"""The key order given for one tool's schema (:class:`ToolSet` ``order``): an entry per map of the schema in
depth-first pre-order (a map, then the values of its keys in canonical key order; a list's items in order),
None where the map's keys were given in canonical order, else its keys as given; trailing Nones left out
(:func:`tractkv.engine.content.toolsets.key_order` makes it, ``apply_key_order`` applies it)."""


def _key_orders(value: Any) -> tuple[KeyOrder | None, ...]:
    """``order`` as tuples (the wire's lists), its shape checked: a list of None or lists of None or lists
    of str."""
    if not isinstance(value, list | tuple):
        raise EncodeError("order", "a tool set's order must be a list")
    out: list[KeyOrder | None] = []
    for index, entry in enumerate(value):
        if entry is None:
            out.append(None)
            continue
        if not isinstance(entry, list | tuple):
            raise EncodeError(f"order[{index}]", "a tool's key order must be a list or None")
        maps: list[tuple[str, ...] | None] = []
        for number, keys in enumerate(entry):
            if keys is not None and (
                not isinstance(keys, list | tuple) or not all(type(k) is str for k in keys)
            ):
                raise EncodeError(f"order[{index}][{number}]", "a map's key order must be a list of str")
            maps.append(None if keys is None else tuple(keys))
        out.append(tuple(maps))
    return tuple(out)


@attrs.frozen(kw_only=True)
class ToolSet:
    """An ordered list of tool-schema ids, stored once however many commits share it, with the key order each
    schema was given in.

    A tool schema's id is its canonical form (sorted keys), so one schema given in two key orders is one
    ``tool`` object; the order is the tool set's: ``order`` holds one :data:`KeyOrder` (or None: canonical
    order) per tool, and is empty when every tool was given in canonical order (so a tool set written before
    orders were kept has the same id). Compile returns each schema in its tool set's order.
    """

    KIND: ClassVar[str] = "toolset"
    tools: tuple[ObjectId, ...] = attrs.field(converter=_oid_tuple, validator=_check_oids)
    order: tuple[KeyOrder | None, ...] = attrs.field(default=(), converter=_key_orders)
    #: a prompt-cache breakpoint after the tools (``"5m"`` / ``"1h"``; Anthropic's ``cache_control`` on the
    #: last tool), or None
    cache: str | None = attrs.field(default=None, validator=_check_str)

    @order.validator
    def _check_order(self, _attribute: attrs.Attribute[Any], value: tuple[KeyOrder | None, ...]) -> None:
        if not value:
            return
        if len(value) != len(self.tools):
            raise EncodeError("order", f"{len(value)} key orders for {len(self.tools)} tools")
        if all(entry is None for entry in value):
            raise EncodeError("order", "every tool in canonical key order: the order is left out")
        for index, entry in enumerate(value):
            if entry is not None and (not entry or entry[-1] is None):
                raise EncodeError(f"order[{index}]", "a key order is non-empty and ends with a map's keys")
            for number, keys in enumerate(entry or ()):
                if keys is not None and len(set(keys)) != len(keys):
                    raise EncodeError(f"order[{index}][{number}]", "a map's keys are listed once each")

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"tools": [oid_to_raw(o) for o in self.tools]}
        if self.order:
            wire["order"] = [
                None if entry is None else [None if keys is None else list(keys) for keys in entry]
                for entry in self.order
            ]
        if self.cache is not None:
            wire["cache"] = self.cache
        return wire

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> ToolSet:
        return cls(
            tools=_oids(_take(wire, "tools")),
            order=_take(wire, "order", ()),
            cache=_take(wire, "cache", None),
        )

    def iter_links(self) -> Iterator[ObjectId]:
        return iter(self.tools)


USAGE_STATUSES = ("success", "error", "interrupted")  # the outcomes a stored usage record may hold


@attrs.frozen(kw_only=True)
class UsageRecord:
    """One finished (or interrupted) tool execution, with the ids of the executions nested inside it.

    Completed records are immutable objects: the ``tool_result`` commit answering a call links its record
    (``links["usages"]``), and a record links the records of the executions it ran (``children``), so the
    whole usage tree travels with the branch. Executions still running are rows in the local ``usage``
    table instead (see :mod:`tractkv.engine.usage.rows`).

    Wire fields (optional ones are omitted when empty)::

        id        text      the usage id given when the execution started (events and rows use it too)
        tool      text      the tool's name
        status    text      success | error | interrupted
        start     int       µs since the epoch, UTC
        end       int       µs since the epoch, UTC (omitted for an interrupted execution)
        args      map       the arguments the tool was called with (omitted when empty)
        result    text      the output, cut to the executor's limit with a marker (omitted when none)
        rlen      int       the output's full length in characters, only when ``result`` was cut
        error     text      what went wrong (omitted on success)
        commit    32 bytes  link: the assistant commit whose tool call started it (omitted when none)
        call      text      the tool call id (omitted when none)
        parent    text      the usage id of the execution it ran inside (omitted at the top level)
        children  [32 bytes] links: the records of the executions it ran, in start order
        heads     [32 bytes] links: the last commits of conversations it ran (a child agent's branch tip),
                  so a delegated conversation travels with the record (omitted when none)
        rerun     text      the usage id of the failed execution this one re-ran (omitted when none)
    """

    KIND: ClassVar[str] = "usage"
    usage_id: str = attrs.field(validator=_check_str)
    tool_name: str = attrs.field(validator=_check_str)
    status: str = attrs.field(validator=_check_str)
    started_at: int = attrs.field(validator=attrs.validators.instance_of(int))
    completed_at: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(int))
    )
    arguments: dict[str, Any] | None = attrs.field(default=None, validator=_check_map, hash=False)
    result: str | None = attrs.field(default=None, validator=_check_str)
    result_chars: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(int))
    )
    error: str | None = attrs.field(default=None, validator=_check_str)
    commit: ObjectId | None = attrs.field(default=None, validator=_check_oid)
    tool_call_id: str | None = attrs.field(default=None, validator=_check_str)
    parent_id: str | None = attrs.field(default=None, validator=_check_str)
    children: tuple[ObjectId, ...] = attrs.field(default=(), converter=_oid_tuple, validator=_check_oids)
    heads: tuple[ObjectId, ...] = attrs.field(default=(), converter=_oid_tuple, validator=_check_oids)
    rerun_of: str | None = attrs.field(default=None, validator=_check_str)

    @status.validator
    def _check_status(self, _attribute: attrs.Attribute[Any], value: str) -> None:
        if value not in USAGE_STATUSES:
            raise EncodeError("status", f"must be one of {USAGE_STATUSES}, not {value!r}")

    @usage_id.validator
    def _check_usage_id(self, _attribute: attrs.Attribute[Any], value: str) -> None:
        if not value:
            raise EncodeError("id", "a usage id must be non-empty")

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "id": self.usage_id,
            "tool": self.tool_name,
            "status": self.status,
            "start": self.started_at,
        }
        if self.completed_at is not None:
            wire["end"] = self.completed_at
        if self.arguments:
            wire["args"] = self.arguments
        if self.result is not None:
            wire["result"] = self.result
        if self.result_chars is not None:
            wire["rlen"] = self.result_chars
        if self.error is not None:
            wire["error"] = self.error
        if self.commit is not None:
            wire["commit"] = oid_to_raw(self.commit)
        if self.tool_call_id is not None:
            wire["call"] = self.tool_call_id
        if self.parent_id is not None:
            wire["parent"] = self.parent_id
        if self.children:
            wire["children"] = [oid_to_raw(o) for o in self.children]
        if self.heads:
            wire["heads"] = [oid_to_raw(o) for o in self.heads]
        if self.rerun_of is not None:
            wire["rerun"] = self.rerun_of
        return wire

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> UsageRecord:
        return cls(
            usage_id=_take(wire, "id"),
            tool_name=_take(wire, "tool"),
            status=_take(wire, "status"),
            started_at=_take(wire, "start"),
            completed_at=_take(wire, "end", None),
            arguments=_take(wire, "args", None),
            result=_take(wire, "result", None),
            result_chars=_take(wire, "rlen", None),
            error=_take(wire, "error", None),
            commit=_opt_oid(_take(wire, "commit", None)),
            tool_call_id=_take(wire, "call", None),
            parent_id=_take(wire, "parent", None),
            children=_oids(_take(wire, "children", [])),
            heads=_oids(_take(wire, "heads", [])),
            rerun_of=_take(wire, "rerun", None),
        )

    def iter_links(self) -> Iterator[ObjectId]:
        if self.commit is not None:
            yield self.commit
        yield from self.children
        yield from self.heads


class Tag:
    """An annotated tag: a name, a message and the tagger's time, pointing at one commit (``refs/tags/<name>``
    holds its id; a lightweight tag's ref holds the commit's id instead). Immutable and content-addressed as
    every object: moving a tag makes a new one.

    Wire fields::

        target  32 bytes  link: the commit tagged
        name    text      the tag's name (as created: ``refs/tags/<name>``)
        ts      int       µs since the epoch, UTC (the tagger's time)
        message text      what the tag says (omitted when None)

    A plain class with slots, not attrs: building an attrs class costs about a millisecond at ``import
    tractkv``, and only the rare tag operations make one.
    """

    KIND: ClassVar[str] = "tag"
    __slots__ = ("created_at", "message", "name", "target")
    target: ObjectId
    name: str
    created_at: int
    message: str | None

    def __init__(self, *, target: ObjectId, name: str, created_at: int, message: str | None = None) -> None:
        if not is_object_id(target):
            raise EncodeError("target", f"{target!r} is not an object id")
        for field, value in (("name", name), ("message", message)):
            if value is not None:
                if not isinstance(value, str):
                    raise EncodeError(field, f"expected text, got {type(value).__name__}")
                codec.check_value(value, field)
        if name is None:
            raise EncodeError("name", "a tag has a name")
        if type(created_at) is not int:
            raise EncodeError("ts", f"expected an int, got {type(created_at).__name__}")
        _set(self, "target", target)
        _set(self, "name", name)
        _set(self, "created_at", created_at)
        _set(self, "message", message)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Tag is immutable (setting {name!r})")

    def __eq__(self, other: object) -> bool:
        if type(other) is not Tag:
            return NotImplemented
        return self.to_wire() == other.to_wire()

    def __hash__(self) -> int:
        return hash((self.target, self.name, self.created_at, self.message))

    def __repr__(self) -> str:
        return (
            f"Tag(target={self.target!r}, name={self.name!r}, created_at={self.created_at!r}, "
            f"message={self.message!r})"
        )

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"target": oid_to_raw(self.target), "name": self.name, "ts": self.created_at}
        if self.message is not None:
            wire["message"] = self.message
        return wire

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> Tag:
        target = _opt_oid(_take(wire, "target"))
        if target is None:
            raise DecodeError("a tag names its target")
        return cls(
            target=target,
            name=_take(wire, "name"),
            created_at=_take(wire, "ts"),
            message=_take(wire, "message", None),
        )

    def iter_links(self) -> Iterator[ObjectId]:
        yield self.target


_set = object.__setattr__  # how attrs' frozen classes set their own fields


def trusted_blob(data: Any) -> Blob:
    """A :class:`Blob` of a payload the write path built and checked itself (``content_objects``' plain-text
    fast path: str values it has already encoded), without walking the payload again. Never for values from
    outside, which :class:`Blob` checks."""
    blob = object.__new__(Blob)
    _set(blob, "data", data)
    return blob


def trusted_commit(
    *,
    parents: tuple[ObjectId, ...],
    content: ObjectId,
    tools: ObjectId | None,
    operation: str,
    created_at: int,
    made: ObjectId | None = None,
    made_tools: ObjectId | None = None,
) -> Commit:
    """A plain :class:`Commit` (no target, reply, message, metadata, generation config nor links) made by the
    write path from values it made itself: ``content`` the id it just computed, ``operation`` one of its
    constants, ``created_at`` its clock's int. ``parents`` and ``tools`` come from rows (a ref, the tool
    setting), so they are checked as the validators would; the rest is not checked again. ``made`` is an id
    the caller computed itself (the commit it wrote last, by hashing its bytes): a parent that *is* that very
    string (identity, not equality) needs no check; any other value is checked. ``made_tools`` likewise: the
    tool set id of a commit the caller made (checked then): ``tools`` that *is* that string needs no check
    (``made`` never covers ``tools``)."""
    for parent in parents:
        if parent is not made and not is_object_id(parent):
            index = parents.index(parent)
            raise EncodeError(f"parents[{index}]", f"{parent!r} is not an object id")
    if tools is not None and tools is not made_tools and not is_object_id(tools):
        raise EncodeError("tools", f"{tools!r} is not an object id")
    if type(created_at) is not int or type(operation) is not str:
        raise EncodeError("commit", "a trusted commit needs an int time and a str operation")
    commit = _new(Commit)
    _c_parents(commit, parents)
    _c_content(commit, content)
    _c_tools(commit, tools)
    _c_operation(commit, operation)
    _c_edit_target(commit, None)
    _c_reply_to(commit, None)
    _c_message(commit, None)
    _c_metadata(commit, None)
    _c_generation_config(commit, None)
    _c_created_at(commit, created_at)
    _c_links(commit, {})
    return commit


_new = object.__new__
# The slot setters of a Commit's fields (what ``_set`` reaches through ``object.__setattr__``, called directly:
# the write path makes one commit per append), in field order: a field added to Commit fails this unpacking
# at import; tests/store/test_golden_and_codec.py compares trusted commits with the validating constructor's.
(
    _c_parents,
    _c_content,
    _c_tools,
    _c_operation,
    _c_edit_target,
    _c_reply_to,
    _c_message,
    _c_metadata,
    _c_generation_config,
    _c_created_at,
    _c_links,
) = _COMMIT_SETTERS = tuple(Commit.__dict__[field.name].__set__ for field in attrs.fields(Commit))


StoredObject: TypeAlias = Blob | Commit | ToolSchema | ToolSet | UsageRecord | Tag
"""Any object the store can hold. Later features add kinds here (each with a KIND and a wire format)."""

KINDS: dict[
    str, type[Blob] | type[Commit] | type[ToolSchema] | type[ToolSet] | type[UsageRecord] | type[Tag]
] = {cls.KIND: cls for cls in (Blob, Commit, ToolSchema, ToolSet, UsageRecord, Tag)}


# --- encoding -------------------------------------------------------------------------------------------


def encode_with_id(obj: StoredObject) -> tuple[ObjectId, bytes]:
    """The object's id and canonical bytes, from one encoding."""
    data = object_bytes(obj)
    return hash_bytes(data), data


def object_bytes(obj: StoredObject) -> bytes:
    """The canonical bytes of an object: ``codec.dumps`` of its wire map plus ``t`` and ``v``. Blobs and
    commits (every append writes one of each) are written without building that map: a blob's prefix is
    constant, a commit's fields are written in canonical key order (tests/store/test_golden_and_codec.py
    compares both with the generic encoding over generated objects)."""
    if type(obj) is Commit:
        return _commit_bytes(obj)
    if type(obj) is Blob:
        return _BLOB_PREFIX + codec.dumps(obj.data)
    return generic_object_bytes(obj)


def generic_object_bytes(obj: StoredObject) -> bytes:
    """The canonical bytes of an object, from its wire map (the definition :func:`object_bytes` follows)."""
    wire = obj.to_wire()
    wire["t"] = obj.KIND
    wire["v"] = OBJECT_FORMAT
    return codec.dumps(wire)


def _key(name: str) -> bytes:
    return codec.dumps(name)


# A blob is {"t": "blob", "v": 1, "data": ...}: in canonical order t, v, data (keys by length, then bytes).
_BLOB_PREFIX = b"\xa3" + _key("t") + _key("blob") + _key("v") + codec.dumps(OBJECT_FORMAT) + _key("data")
_COMMIT_HEAD = _key("t") + _key("commit") + _key("v") + codec.dumps(OBJECT_FORMAT)
_K_OP, _K_TS, _K_GEN, _K_META, _K_LINKS, _K_TOOLS = map(_key, ("op", "ts", "gen", "meta", "links", "tools"))
_K_TARGET, _K_CONTENT, _K_MESSAGE, _K_PARENTS, _K_REPLY = map(
    _key, ("target", "content", "message", "parents", "reply_to")
)
_RAW_ID_HEAD = codec.head(0x40, OID_RAW_LEN)
# A plain-text message blob's data is {"type": "dialogue", "role": ..., "text": ...}: keys role, text, type
# (all four bytes long: bytewise order).
_TEXT_BLOB_HEADS = {
    role: _BLOB_PREFIX + b"\xa3" + _key("role") + _key(role) + _key("text") for role in ("user", "assistant")
}
_TEXT_BLOB_TAIL = _key("type") + _key("dialogue")


def text_blob_bytes(role: str, text: str) -> bytes:
    """:func:`object_bytes` of ``Blob(data={"type": "dialogue", "role": role, "text": text})`` for ``role``
    user or assistant and a ``text`` without lone surrogates (the plain-text append's blob; a property test
    checks it against the generic encoding)."""
    raw = text.encode("utf-8")
    return _TEXT_BLOB_HEADS[role] + codec.head(0x60, len(raw)) + raw + _TEXT_BLOB_TAIL


def _raw_id(oid: ObjectId) -> bytes:
    return _RAW_ID_HEAD + bytes.fromhex(oid)  # a Commit's ids are checked ids: 64 lowercase hex digits


_OPERATION_BYTES: dict[str, bytes] = {}  # the few operation names, encoded once each
# A plain append's map head and first fields, by how many of tools and parents it has (5 to 7 keys).
_APPEND_HEADS = [
    codec.head(0xA0, 5 + extra) + _COMMIT_HEAD + _K_OP + codec.dumps("append") + _K_TS for extra in range(3)
]


_LAST_TOOLS: list[tuple[str, bytes]] = [("", b"")]  # the last tool set id _tools_field encoded, its field


def _tools_field(tools: ObjectId) -> bytes:
    """A plain append's ``tools`` key and value: the commits of a session usually link one tool set, so the
    last one's encoding is kept (one (id, bytes) pair, replaced whole: safe across threads)."""
    last = _LAST_TOOLS[0]
    if last[0] == tools:
        return last[1]
    field = _K_TOOLS + _RAW_ID_HEAD + bytes.fromhex(tools)
    _LAST_TOOLS[0] = (tools, field)
    return field


def _commit_bytes(commit: Commit) -> bytes:
    """The canonical bytes of ``commit.to_wire()`` plus its kind and version, written field by field in
    canonical key order (t, v, op, ts, gen, meta, links, tools, target, content, message, parents, reply_to:
    by length, then bytewise) without building the wire map (the write path's hottest encoding; a property
    test checks it against the generic encoding)."""
    ts = commit.created_at
    parents = commit.parents
    if (
        commit.operation == "append"
        and len(parents) <= 1
        and commit.content is not None
        and not commit.links
        and commit.edit_target is None
        and commit.reply_to is None
        and commit.message is None
        and not commit.metadata
        and not commit.generation_config
        and 0 <= ts <= codec.INT_MAX
    ):  # a plain append (every t.user / t.assistant): t, v, op, ts, [tools], content, [parents]
        tools = commit.tools
        data = _APPEND_HEADS[(tools is not None) + len(parents)] + codec.head(0, ts)
        if tools is not None:
            data += _tools_field(tools)
        data += _K_CONTENT + _RAW_ID_HEAD + bytes.fromhex(commit.content)
        if parents:
            data += _K_PARENTS + b"\x81" + _RAW_ID_HEAD + bytes.fromhex(parents[0])
        return data
    op = commit.operation
    op_bytes = _OPERATION_BYTES.get(op)
    if op_bytes is None:
        op_bytes = codec.dumps(op)
        if len(_OPERATION_BYTES) < 64:
            _OPERATION_BYTES[op] = op_bytes
    out = [
        b"",
        _COMMIT_HEAD,
        _K_OP,
        op_bytes,
        _K_TS,
        codec.head(0, ts) if 0 <= ts <= codec.INT_MAX else codec.dumps(ts),
    ]
    start = len(out)
    if commit.generation_config:
        out += (_K_GEN, codec.dumps(commit.generation_config))
    if commit.metadata:
        out += (_K_META, codec.dumps(commit.metadata))
    if commit.links:
        links = {name: [oid_to_raw(o) for o in oids] for name, oids in commit.links.items() if oids}
        out += (_K_LINKS, codec.dumps(links))
    if commit.tools is not None:
        out += (_K_TOOLS, _raw_id(commit.tools))
    if commit.edit_target is not None:
        out += (_K_TARGET, _raw_id(commit.edit_target))
    if commit.content is not None:
        out += (_K_CONTENT, _raw_id(commit.content))
    if commit.message is not None:
        out += (_K_MESSAGE, codec.dumps(commit.message))
    if commit.parents:
        out += (_K_PARENTS, codec.head(0x80, len(commit.parents)) + b"".join(map(_raw_id, commit.parents)))
    if commit.reply_to is not None:
        out += (_K_REPLY, _raw_id(commit.reply_to))
    out[0] = codec.head(0xA0, 4 + (len(out) - start) // 2)  # t, v, op, ts, then a key and value per field
    return b"".join(out)


def encode(obj: StoredObject) -> bytes:
    """The canonical bytes of an object (what its id is the hash of)."""
    return encode_with_id(obj)[1]


def object_id(obj: StoredObject) -> ObjectId:
    """The id an object has (or would have) in any store. It encodes the object: when the object is to be
    stored too, take the id ``batch.put`` returns instead."""
    return encode_with_id(obj)[0]


def decode(data: bytes, oid: ObjectId | None = None, *, strict: bool = False) -> StoredObject:
    """Decode canonical bytes into an object.

    Args:
        data: the stored bytes.
        oid: when given, the bytes must hash to it (a flipped byte is caught here).
        strict: also insist that the bytes are canonical and hold only allowed values (for bytes that
            come from outside: sync, bundles, fsck).

    Raises:
        CorruptObject: the bytes do not hash to ``oid``.
        DecodeError: not a tractkv object (bad CBOR, unknown kind or field, wrong shape).
        UnsupportedFormat: written by a newer tractkv.
    """
    if oid is not None:
        actual = hash_bytes(data)
        if actual != oid:
            raise CorruptObject(oid, actual)
    wire = codec.loads_canonical(data) if strict else codec.loads(data)
    checked = _WIRE_CHECKED.set(True) if strict else None
    try:
        return _from_wire(wire)
    except DecodeError as exc:
        if exc.oid is None and oid is not None:
            exc.oid = oid
        raise
    except (EncodeError, TypeError, ValueError) as exc:
        raise DecodeError(f"malformed object: {exc}", oid) from exc
    finally:
        if checked is not None:
            _WIRE_CHECKED.reset(checked)


# How every blob's canonical bytes start: a map of 3 entries whose first key (the shortest; "t" sorts before
# "v") is "t", holding "blob".
_BLOB_HEAD = b"\xa3\x61t\x64blob"


def links_of(data: bytes) -> list[ObjectId]:
    """The links of stored bytes, in :meth:`StoredObject.iter_links` order, without building the object.

    For walks over bytes a store holds (negotiation, reachability; every object was verified on its way in):
    one CBOR decode, then only the link fields are read (about 4x cheaper than :func:`decode`). The other
    fields are not checked and the bytes are not rehashed; bytes whose link fields do not have the shape this
    library writes are decoded in full, so they raise what :func:`decode` raises.
    """
    if data[:8] == _BLOB_HEAD:
        return []  # a blob (its first entry is "t": "blob"), which links nothing: not worth decoding
    fields = _plain_append_fields(data)
    if fields is not None:  # a plain append, read from the bytes: [parent], content, [tools]
        _, tools, content, parent = fields
        links = [] if parent is None else [raw_to_oid(parent)]
        links.append(raw_to_oid(content))
        if tools is not None:
            links.append(raw_to_oid(tools))
        return links
    wire = codec.loads(data)
    try:
        kind, version = wire["t"], wire["v"]
        if type(version) is not int or version != OBJECT_FORMAT:
            raise ValueError("another format version")
        out: list[ObjectId]
        if kind in {"blob", "tool"}:
            return []
        if kind == "commit":
            out = [raw_to_oid(raw) for raw in wire.get("parents", ())]
            for key in ("content", "tools", "target", "reply_to"):
                raw = wire.get(key)
                if raw is not None:
                    out.append(raw_to_oid(raw))
            for raws in wire.get("links", {}).values():
                out.extend(raw_to_oid(raw) for raw in raws)
        elif kind == "toolset":
            out = [raw_to_oid(raw) for raw in wire["tools"]]
        elif kind == "usage":
            commit = wire.get("commit")
            out = [] if commit is None else [raw_to_oid(commit)]
            out.extend(raw_to_oid(raw) for raw in wire.get("children", ()))
            out.extend(raw_to_oid(raw) for raw in wire.get("heads", ()))
        elif kind == "tag":
            out = [raw_to_oid(wire["target"])]
        else:
            out = [ObjectId("")]  # an unknown kind: the full decoder names it
        for oid in out:
            if len(oid) != 2 * OID_RAW_LEN:
                raise ValueError("not an id")
        return out
    except Exception:  # not the shape this library writes: let the full decoder name what is wrong
        pass
    return list(_from_wire(wire).iter_links())


def kind_of(data: bytes) -> str:
    """The kind tag of encoded bytes (decodes the bytes; for stats and checks, not hot paths)."""
    wire = codec.loads(data)
    if not isinstance(wire, dict) or not isinstance(wire.get("t"), str):
        raise DecodeError("no kind tag")
    return str(wire["t"])


def _from_wire(wire: object) -> StoredObject:
    if not isinstance(wire, dict):
        raise DecodeError("an object must be a CBOR map")
    wire = dict(wire)
    kind = wire.pop("t", None)
    version = wire.pop("v", None)
    if not isinstance(kind, str):
        raise DecodeError("missing kind tag 't'")
    cls = KINDS.get(kind)
    if cls is None:
        raise DecodeError(f"unknown object kind {kind!r}")
    if type(version) is not int or version < 1:
        raise DecodeError(f"bad format version {version!r}")
    if version > OBJECT_FORMAT:
        raise UnsupportedFormat(kind, version, OBJECT_FORMAT)
    obj = cls.from_wire(wire)
    if wire:
        raise DecodeError(f"unknown {kind} fields {sorted(wire)} (written by a newer tractkv?)")
    return obj


_MISSING = object()


def _take(wire: dict[str, Any], key: str, default: Any = _MISSING) -> Any:
    value = wire.pop(key, default)
    if value is _MISSING:
        raise DecodeError(f"missing field {key!r}")
    return value


def _opt_oid(raw: object) -> ObjectId | None:
    if raw is None:
        return None
    if type(raw) is not bytes or len(raw) != OID_RAW_LEN:
        raise DecodeError("an id field must be 32 bytes")
    return raw_to_oid(raw)


def _oids(raw: object) -> tuple[ObjectId, ...]:
    if not isinstance(raw, list):
        raise DecodeError("an id list must be an array")
    out = []
    for item in raw:
        if type(item) is not bytes or len(item) != OID_RAW_LEN:
            raise DecodeError("an id field must be 32 bytes")
        out.append(raw_to_oid(item))
    return tuple(out)


def to_jsonable(value: Any, keys: Iterable[str] | None = None) -> Any:
    """A JSON-safe copy of a value: tractkv's one conversion to JSON (every ``to_json()`` and ``--json``).

    Bytes become ``{"$bytes": "<base64>"}``, datetimes ISO 8601 text, tuples and lists lists, dicts dicts
    (keys kept) of converted values. An attrs value with a ``to_dict`` method (a compiled message or part)
    becomes its converted ``to_dict()``; any other attrs value a dict of its fields in declaration order, or,
    given ``keys``, of those attributes (fields or properties) in that order. Anything else (str, ids, numbers,
    bool, None) is returned as it is: no error is raised here; ``json.dumps`` rejects what JSON cannot hold.
    """
    if isinstance(value, bytes):
        import base64

        return {"$bytes": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if attrs.has(type(value)):
        if keys is None:
            to_dict = getattr(value, "to_dict", None)
            if to_dict is not None:
                return to_jsonable(to_dict())
            keys = (f.name for f in attrs.fields(type(value)))
        return {k: to_jsonable(getattr(value, k)) for k in keys}
    return value


def describe(obj: StoredObject) -> dict[str, Any]:
    """An object as a JSON-safe dict of its Python fields plus ``kind`` (for display and ``--json``)."""
    if isinstance(obj, Tag):
        names: Iterable[str] = ("target", "name", "created_at", "message")
    else:
        names = (a.name for a in attrs.fields(type(obj)))
    fields = {name: getattr(obj, name) for name in names}
    if isinstance(obj, Commit):
        fields["links"] = {k: list(v) for k, v in obj.links.items()}
    return {"kind": obj.KIND, **to_jsonable(fields)}


# --- the shapes every append writes, read without the generic decoder (sync's receive and walks) ---------

_APPEND_REST = _APPEND_HEADS[0][1:]  # a plain append's first fields after the map head (same for 5 to 7 keys)
_APPEND_TS = len(_APPEND_HEADS[0])  # where its timestamp's head is
_TOOLS_FIELD = _K_TOOLS + _RAW_ID_HEAD
_CONTENT_FIELD = _K_CONTENT + _RAW_ID_HEAD
_PARENT_FIELD = _K_PARENTS + b"\x81" + _RAW_ID_HEAD  # "parents": an array of one id
_USER_HEAD, _ASSISTANT_HEAD = _TEXT_BLOB_HEADS["user"], _TEXT_BLOB_HEADS["assistant"]
_WIDTHS = {24: 1, 25: 2, 26: 4, 27: 8}  # a CBOR head's additional info -> how many bytes its argument takes
_LEAST = {24: 24, 25: 1 << 8, 26: 1 << 16, 27: 1 << 32}  # the least argument each width encodes canonically


def _plain_append_fields(data: bytes) -> tuple[int, bytes | None, bytes, bytes | None] | None:
    """``(ts, tools, content, parent)`` (raw ids; tools and parent may be None) when ``data`` has exactly the
    layout :func:`_commit_bytes` writes for a plain append (the map's size, the timestamp in its shortest
    width), read from the bytes alone; else None."""
    if not data.startswith(_APPEND_REST, 1) or not 0xA5 <= data[0] <= 0xA7:
        return None
    pos = _APPEND_TS
    if pos >= len(data):
        return None
    info = data[pos]  # major type 0 (an unsigned int): the byte is the additional info
    if info < 24:
        ts = info
        pos += 1
    else:
        width = _WIDTHS.get(info)
        if width is None:
            return None
        ts = int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
        if ts < _LEAST[info]:
            return None
        pos += 1 + width
    tools = parent = None
    if data.startswith(_TOOLS_FIELD, pos):
        pos += len(_TOOLS_FIELD) + OID_RAW_LEN
        tools = data[pos - OID_RAW_LEN : pos]
    if not data.startswith(_CONTENT_FIELD, pos):
        return None
    pos += len(_CONTENT_FIELD) + OID_RAW_LEN
    content = data[pos - OID_RAW_LEN : pos]
    if data.startswith(_PARENT_FIELD, pos):
        pos += len(_PARENT_FIELD) + OID_RAW_LEN
        parent = data[pos - OID_RAW_LEN : pos]
    if pos != len(data) or data[0] != 0xA5 + (tools is not None) + (parent is not None):
        return None
    return ts, tools, content, parent


def _text_blob_fields(data: bytes) -> tuple[str, str] | None:
    """``(role, text)`` when ``data`` has the layout :func:`text_blob_bytes` writes (up to the text length's
    width: the caller re-encodes), read from the bytes alone, the text valid UTF-8; else None."""
    if data.startswith(_USER_HEAD):
        role, pos = "user", len(_USER_HEAD)
    elif data.startswith(_ASSISTANT_HEAD):
        role, pos = "assistant", len(_ASSISTANT_HEAD)
    else:
        return None
    if pos >= len(data):
        return None
    info = data[pos] - 0x60  # major type 3 (text)
    if 0 <= info < 24:
        length = info
        pos += 1
    else:
        width = _WIDTHS.get(info)
        if width is None:
            return None
        length = int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
        pos += 1 + width
    end = pos + length
    if len(data) != end + len(_TEXT_BLOB_TAIL) or not data.endswith(_TEXT_BLOB_TAIL):
        return None
    try:
        return role, data[pos:end].decode("utf-8")
    except UnicodeDecodeError:
        return None


def decode_received(
    data: bytes, max_decoded: int | None = None, spent: list[int] | None = None
) -> StoredObject:
    """``decode(data, strict=True)``: the same object, or the same error, for any bytes; faster for the two
    shapes every append writes (a plain-text message blob, a plain append commit).

    ``max_decoded``: bytes that would take more memory than this to decode (:func:`codec.decoded_size`'s
    estimate, checked before anything is built) raise :class:`DecodeError` instead. The two fast shapes
    hold a fixed number of items and decode to about their own size: they are not estimated. ``spent[0]``
    grows by the estimate (twice the size for the fast shapes), so a receiver can bound what a batch holds.

    Those are read from the bytes and accepted only when the write path's own encoder
    (:func:`text_blob_bytes`, :func:`_commit_bytes`, both checked against the generic encoding by property
    tests) gives back exactly ``data`` for the object read: then ``data`` is the canonical encoding of an
    object of allowed values, which is all a strict decode proves, and decoding it gives an equal object.
    Anything else, valid or not, goes to :func:`decode` (tests/sync/test_receive_fast_path.py compares the
    two over generated and hostile bytes).
    """
    if spent is not None:
        spent[0] += 2 * len(data)
    first = data[:1]
    if first == b"\xa3":  # a map of 3: a blob's t, v and data
        text = _text_blob_fields(data)
        if text is not None and text_blob_bytes(*text) == data:
            role, body = text
            return trusted_blob({"role": role, "text": body, "type": "dialogue"})  # cbor2's key order
    elif b"\xa5" <= first <= b"\xa7":  # a map of 5 to 7: a plain append's t, v, op, ts, content, ...
        fields = _plain_append_fields(data)
        if fields is not None:
            ts, tools, content, parent = fields
            commit = _new(Commit)
            _c_parents(commit, () if parent is None else (raw_to_oid(parent),))
            _c_content(commit, raw_to_oid(content))
            _c_tools(commit, None if tools is None else raw_to_oid(tools))
            _c_operation(commit, "append")
            _c_edit_target(commit, None)
            _c_reply_to(commit, None)
            _c_message(commit, None)
            _c_metadata(commit, None)
            _c_generation_config(commit, None)
            _c_created_at(commit, ts)
            _c_links(commit, {})
            if _commit_bytes(commit) == data:
                return commit
    if max_decoded is not None:
        cost = codec.decoded_size(data, max_decoded)
        if spent is not None:
            spent[0] += cost
    return decode(data, strict=True)
