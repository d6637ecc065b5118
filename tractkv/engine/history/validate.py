"""The semantic validator: what a well-formed object must also be before a store takes it.

Decoding (:func:`tractkv.model.decode`) proves that bytes are an object of a known kind with fields of the
right wire types. This module checks what decoding cannot: what a link points at, whether a content blob is a
payload its commit can compile, and value ranges. One set of rules serves every way an object enters a store:

* :mod:`tractkv.sync.receive` (hub push, path push and fetch, S3 and bundle fetch) checks each object as it
  arrives, before it is stored and before any ref moves (a failure is a ``RejectedObject``, HTTP 422);
* the session's write path checks each commit it makes before the transaction (``Session.commit_with``);
* :func:`fsck_objects` checks a whole store (the CLI's ``fsck`` adds its findings to the store-level ones).

The rules, by kind (an object's "tag" is its kind, or for a blob the content type its payload validly holds):

* **commit**: ``op`` is one of :data:`OPERATIONS`; ``ts`` is an int in ``[TS_MIN, TS_MAX]``; parents are
  distinct commits, two or more exactly for ``merge``, exactly one for ``edit`` / ``annotate`` /
  ``compress`` / ``trim``, at most one for ``append``; ``content`` is a message blob (``append``, ``edit``,
  ``compress``), an annotation blob (``annotate`` and ``trim``, required; a trim skips its targets whatever
  priority its blob says: tractkv writes ``skip``) or a merge blob (``merge``, optional);
  ``target`` is a commit, present exactly for ``edit`` and ``annotate``; ``reply_to`` is a commit; ``tools``
  is a tool set; ``links["sources"]`` are commits (required, non-empty, for ``compress`` only),
  ``links["targets"]`` are distinct commits (required, non-empty, for ``trim`` only: the messages it skips),
  ``links["original"]`` is one ``tool_original`` blob, ``links["usages"]`` are usage records;
  ``links["parent"]`` (only on ``spawn``) and ``links["child"]`` (only on ``append``: a collapse) name exactly
  one commit each; a ``spawn`` commit has no content and a ``metadata["spawn"]`` record
  (:mod:`tractkv.engine.spawning`);
  ``links["media"]`` is exactly the media ids its message content's parts use (sorted, unique; absent
  when they use none, and on commits without message content), each a **media** blob (a blob whose data
  is non-empty bytes) whose bytes are what every part naming it declares (its ``media_type``: the format
  rules of :func:`tractkv.engine.content.media.check_format`, e.g. a PNG is refused as ``image/jpeg`` or
  ``application/pdf``, invalid UTF-8 as ``text/plain``). Size limits are not re-checked: they are policy for
  new writes (:mod:`tractkv.engine.content.media`), a received object is judged by the format rules. Other link
  names (a later release may add some) must only point at objects that exist, as every link must.
* **blob**: a payload whose ``type`` is a content type must be exactly what
  :func:`tractkv.engine.content.payload.content_blob` (message types) or the bookkeeping rules (``annotation``,
  ``merge``, ``tool_original``) would store; a blob whose data is non-empty bytes is tagged ``media``; any
  other blob that is not typed content is tagged plain ``blob``. A message blob's tag also carries the
  media ids its parts use and the media type each part declares (:class:`MessageTag`), a media blob's the
  media types its bytes satisfy (:class:`MediaTag`), so a commit's ``links["media"]`` and its parts'
  declared types are checked against them. Computing a tag never raises: a hostile blob that makes the
  checks fail in an unexpected way is tagged ``invalid`` too.
  A malformed typed blob is not refused by itself (it hurts nobody until a commit uses it); a commit that
  uses it is refused, naming why the blob is malformed.
* **tool**: its schema is what any tractkv writer could store: a dict whose name
  (:func:`tractkv.engine.content.toolsets.legacy_name`: ``function.name`` of an OpenAI chat tool, else ``name``, a
  non-empty string) is the ``name`` field. Today's shape rules (name pattern, object schemas,
  known fields) are input policy, not applied here: a store written before them must stay valid, and
  rendering reads any stored definition without failing (:func:`~tractkv.engine.content.toolsets.read_stored`).
* **toolset**: every entry is a tool schema; a key order (``order``) holds one entry per tool, and each
  tool's fits its schema: it names maps the schema has, each listed map's keys exactly, never in canonical
  order (written None), so one key order has one spelling (:func:`~tractkv.engine.content.key_order_problem`;
  a tool's tag carries its maps' keys, :class:`ToolTag`).
* **tag** (an annotated tag): its ``name`` follows a branch name's rules, ``ts`` is in ``[TS_MIN, TS_MAX]`` (and
  not from the future, as a commit), ``target`` is a commit.
* **usage**: ``start`` / ``end`` in ``[TS_MIN, TS_MAX]`` (ints, not booleans), ``rlen`` a non-negative int,
  ``commit`` and ``heads`` commits, ``children`` usage records forming a tree: a nested execution ran inside
  one other, so a record lists a child once, a child is listed by one record (a ``tool_result`` commit's
  ``links["usages"]`` is not a parent: a child agent's result commit may link a record its parent lists),
  the tree is at most :data:`~tractkv.model.MAX_USAGE_DEPTH` levels deep and holds at most
  :data:`~tractkv.model.MAX_USAGE_TREE` records counted along every path (a usage record's tag carries its
  tree's depth and size, :class:`UsageTag`). Records listing children twice or sharing them expand
  exponentially in a reader that walks them as trees (issue 29: 2.6 KB made the viewer work 91 s). "Listed
  by one record" is checked among the records whose tags one check computes: a transfer (the records it
  brings and every stored record they nest), a local commit's usage trees, and fsck (the whole store);
  records pushed apart and never nested together are not compared, which the size limit bounds and every
  reader tolerates (each record is shown once: :mod:`tractkv.engine.usage.tree`).

**Timestamps** are µs since the epoch, UTC, in ``[0, 2**53 - 1]``: 2**53 - 1 is the largest integer a JSON
number holds exactly (the viewer, ``--json`` output and JavaScript read these values), and as µs it is the
year 2255, within what ``datetime`` can represent; negative values (before 1970) are never written by
tractkv and make ``datetime`` conversions platform-dependent.

**Commits from the future.** Given the checking side's clock (``now_us``), a commit stamped more than
:data:`MAX_FUTURE_US` (one day) after it is refused: a receiver (:mod:`tractkv.sync.receive`) and the write
path refuse it, so one wrong clock cannot push every later commit's time ahead with it (a child is stamped
after its parent: :meth:`tractkv.engine.session.Session.now`). Commits already stored are reported by
:func:`fsck_objects` as ``future`` (a warning: they are valid objects, and compile reads them as any other).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Protocol

from tractkv.engine.content import (
    ANNOTATION,
    CACHE_TTLS,
    MEDIA_LINK,
    MERGE,
    MERGE_STRATEGIES,
    MESSAGE_TYPES,
    PRIORITIES,
    TOOL_ORIGINAL,
    canonical_payload,
    key_maps,
    key_order_problem,
    legacy_name,
    media_ids,
    sniff,
)
from tractkv.engine.history.refs import check_branch_name
from tractkv.errors import ContentError, DecodeError, InvalidInput, InvalidRefName
from tractkv.ids import ObjectId, hash_bytes
from tractkv.model import (
    MAX_USAGE_DEPTH,
    MAX_USAGE_TREE,
    Blob,
    Commit,
    StoredObject,
    Tag,
    ToolSchema,
    ToolSet,
    UsageRecord,
    decode,
)
from tractkv.store import Reader, Store

if TYPE_CHECKING:
    from tractkv.store.fsck import Problem

TS_MIN = 0
TS_MAX = 2**53 - 1  # the largest integer a JSON number holds exactly (see the module docstring)
MAX_FUTURE_US = 24 * 3600 * 1_000_000  # µs (one day): how far past the checking clock a commit's ts may be

OPERATIONS = frozenset({"append", "edit", "annotate", "merge", "compress", "trim", "spawn"})
MESSAGE_OPS = frozenset({"append", "edit", "compress"})  # ops whose content is a message
TARGET_OPS = frozenset({"edit", "annotate"})  # ops that need an edit_target

SOURCES_LINK = "sources"  # a compress commit's replaced messages
TARGETS_LINK = "targets"  # a trim commit's skipped messages (engine/budget.py)
ORIGINAL_LINK = "original"  # the raw tool result behind an edited or summarized one
USAGES_LINK = "usages"  # a tool result's usage records
PARENT_LINK = "parent"  # a spawn commit's parent commit (tractkv.engine.spawning)
CHILD_LINK = "child"  # a collapse commit's child head (tractkv.engine.spawning)
SPAWN_INHERIT = frozenset({"snapshot", "full", "none"})
MEDIA = "media"  # the tag of a blob whose data is non-empty bytes (an image's or a document's file)

INVALID = "invalid:"  # the tag prefix of a malformed typed blob (the reason follows)
_BLOB_TAGS = {kind: kind for kind in (*MESSAGE_TYPES, ANNOTATION, MERGE, TOOL_ORIGINAL)}


class MessageTag(str):
    """The tag of a valid message blob (its content type, e.g. ``dialogue``) with the media ids its parts use
    (``media``: sorted, unique), which the commit adding it must link as ``links["media"]``, and each media
    part's (id, declared media type) (``declared``: sorted, unique)."""

    media: tuple[ObjectId, ...]
    declared: tuple[tuple[ObjectId, str], ...]

    def __new__(
        cls, kind: str, media: tuple[ObjectId, ...] = (), declared: tuple[tuple[ObjectId, str], ...] = ()
    ) -> MessageTag:
        self = super().__new__(cls, kind)
        self.media = media
        self.declared = declared
        return self


class MediaTag(str):
    """The tag of a media blob (``media``) with the media types its bytes satisfy (``types``: the format
    rules, :func:`tractkv.engine.content.media.sniff`; empty when none)."""

    types: frozenset[str]

    def __new__(cls, types: frozenset[str]) -> MediaTag:
        self = super().__new__(cls, MEDIA)
        self.types = types
        return self


class UsageTag(str):
    """The tag of a valid usage record (``usage``) with its tree's ``depth`` (levels; a record with no children
    is 1) and ``size`` (records counted along every path, capped at ``MAX_USAGE_TREE + 1``)."""

    depth: int
    size: int

    def __new__(cls, depth: int, size: int) -> UsageTag:
        self = super().__new__(cls, UsageRecord.KIND)
        self.depth = depth
        self.size = size
        return self


class ToolTag(str):
    """The tag of a valid tool schema (``tool``) with the canonical keys of each of its maps (``maps``, in the
    numbering of :class:`~tractkv.model.KeyOrder`), which a tool set's key order for it must fit."""

    maps: tuple[tuple[str, ...], ...]

    def __new__(cls, maps: tuple[tuple[str, ...], ...]) -> ToolTag:
        self = super().__new__(cls, ToolSchema.KIND)
        self.maps = maps
        return self


TagOf = Callable[[ObjectId], str | None]
"""The tag of the object with an id (see :func:`tag`), or None when the object is not available."""


class ObjectRuleError(Exception):
    """The rule an object breaks. Never escapes tractkv: every caller turns it into its own error (a
    ``RejectedObject`` in receive, ``InvalidInput`` on the local write path, a fsck problem)."""


class MissingLink(ObjectRuleError):
    """A link to an object that is not available (receive: neither stored nor earlier in the stream)."""

    def __init__(self, what: str, oid: ObjectId) -> None:
        self.oid = oid
        super().__init__(f"{what} -> {oid} is not here")


def tag(obj: StoredObject) -> str:
    """What a link to ``obj`` may rely on: its kind, or for a blob the content type it validly holds
    (``dialogue``, ``annotation``, ...), ``blob`` when it holds no typed content, ``invalid:<why>`` when it
    holds typed content that is malformed."""
    if isinstance(obj, Blob):
        return _blob_tag(obj.data)
    if isinstance(obj, ToolSchema):
        return _tool_tag(obj)
    return obj.KIND


def _tool_tag(obj: ToolSchema) -> str:
    name = legacy_name(obj.schema)
    if name is None:
        return f"{INVALID}tool schema has no name (function.name for an OpenAI chat tool, else name)"
    if name != obj.name:
        return f"{INVALID}tool named {obj.name!r} holds a schema named {name!r}"
    return ToolTag(key_maps(obj.schema))


def _blob_tag(data: object) -> str:
    try:
        return _checked_blob_tag(data)
    except Exception as exc:  # a hostile blob must never crash receive or fsck
        return f"{INVALID}unreadable payload ({type(exc).__name__}: {exc})"


def _checked_blob_tag(data: object) -> str:
    if type(data) is dict and len(data) == 3 and data.get("type") == "dialogue":
        role, text = data.get("role"), data.get("text")
        if role in ("user", "assistant") and type(text) is str and text:  # a tuple: role may be unhashable
            # What the general path below finds for a plain-text message (every t.user / t.assistant): the
            # payload is its own canonical payload, with no parts (tests/sync/test_receive_shapes.py compares)
            return _PLAIN_MESSAGE
    return _general_blob_tag(data)


def _general_blob_tag(data: object) -> str:
    if not isinstance(data, dict):
        return MediaTag(sniff(data)) if isinstance(data, bytes) and data else "blob"
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in _BLOB_TAGS:
        return "blob"
    try:
        if kind in MESSAGE_TYPES:
            if canonical_payload(data) != data:
                raise ContentError("not in the canonical form content_objects stores")
            return _message_tag(kind, data)
        else:
            _check_bookkeeping(kind, data)
    except ContentError as exc:
        return f"{INVALID}{kind} payload: {exc}"
    return _BLOB_TAGS[kind]


_PLAIN_MESSAGE = MessageTag("dialogue")  # the tag of a message with text and no parts (nothing mutates a tag)


def _message_tag(kind: str, data: dict[str, Any]) -> MessageTag:
    parts = data.get("parts")
    if parts is None:
        return MessageTag(kind, (), ())  # no parts, no media (the common message: text only)
    declared = {
        (ObjectId(p["media"]), str(p.get("media_type")))
        for p in (parts if isinstance(parts, list) else ())
        if isinstance(p, dict) and isinstance(p.get("media"), str)
    }
    return MessageTag(kind, tuple(ObjectId(oid) for oid in media_ids(data)), tuple(sorted(declared)))


def _check_bookkeeping(kind: str, data: dict[str, Any]) -> None:
    if kind == ANNOTATION:
        _fields(data, {"type", "priority"}, {"reason", "cache"})
        if data["priority"] not in PRIORITIES:
            raise ContentError(f"priority must be one of {PRIORITIES}")
        if "cache" in data and data["cache"] not in CACHE_TTLS:
            raise ContentError(f"cache must be one of {CACHE_TTLS}")
        if "reason" in data and not isinstance(data["reason"], str):
            raise ContentError("reason must be a string")
    elif kind == MERGE:
        _fields(data, {"type", "strategy", "source", "conflicts"}, set())
        if data["strategy"] not in MERGE_STRATEGIES:
            raise ContentError(f"strategy must be one of {MERGE_STRATEGIES}")
        if not isinstance(data["source"], str):
            raise ContentError("source must be a string")
        if type(data["conflicts"]) is not int or data["conflicts"] < 0:
            raise ContentError("conflicts must be a non-negative integer")
    else:  # tool_original
        _fields(data, {"type", "text"}, set())
        if not isinstance(data["text"], str):
            raise ContentError("text must be a string")


def _fields(data: dict[str, Any], required: set[str], optional: set[str]) -> None:
    missing = required - data.keys()
    if missing:
        raise ContentError(f"missing fields {sorted(missing)}")
    unknown = data.keys() - required - optional
    if unknown:
        raise ContentError(f"unknown fields {sorted(unknown)}")


def check(
    obj: StoredObject,
    tag_of: TagOf,
    claims: Mapping[ObjectId, ObjectId] | None = None,
    *,
    now_us: int | None = None,
) -> None:
    """Raise :class:`ObjectRuleError` naming the rule ``obj`` breaks (see the module docstring).

    ``tag_of`` gives the tag of each linked object; a link it returns None for is reported as missing.
    ``claims`` maps nested usage records to the record that lists them (:attr:`Tags.claims`): a usage record
    listing one of them is refused (a nested execution has one parent record).
    ``now_us`` is the checking side's clock: a commit stamped more than :data:`MAX_FUTURE_US` after it is
    refused (None: not checked).
    """
    if isinstance(obj, Commit):
        _check_commit(obj, tag_of)
        if now_us is not None:
            check_not_future(obj.created_at, now_us)
    elif isinstance(obj, ToolSet):
        if obj.cache is not None and obj.cache not in CACHE_TTLS:
            raise ObjectRuleError(f"cache must be one of {CACHE_TTLS}, not {obj.cache!r}")
        for index, oid in enumerate(obj.tools):
            found = _want(tag_of, f"tools[{index}]", oid, ("tool",))
            order = obj.order[index] if obj.order else None
            if order is not None:
                problem = key_order_problem(found.maps if isinstance(found, ToolTag) else (), order)
                if problem is not None:
                    raise ObjectRuleError(f"order[{index}] is not a key order of tools[{index}]: {problem}")
    elif isinstance(obj, UsageRecord):
        _check_usage(obj, tag_of, claims)
    elif isinstance(obj, Tag):
        _check_tag(obj, tag_of)
        if now_us is not None:
            check_not_future(obj.created_at, now_us)
    elif isinstance(obj, ToolSchema):
        found = tag(obj)
        if found.startswith(INVALID):
            raise ObjectRuleError(found[len(INVALID) :])


def check_not_future(ts: int, now_us: int) -> None:
    """Raise :class:`ObjectRuleError` when a commit's ``ts`` is more than :data:`MAX_FUTURE_US` after
    ``now_us`` (the checking side's clock), naming both times."""
    if ts - now_us > MAX_FUTURE_US:
        raise ObjectRuleError(
            f"ts {ts} ({_when(ts)}) is {_span(ts - now_us)} after this clock ({_when(now_us)}), more than the "
            f"{_span(MAX_FUTURE_US)} a clock may be ahead: a commit from a wrong clock"
        )


def _when(us: int) -> str:
    """``us`` (µs since the epoch) as UTC time, or the number when ``datetime`` cannot show it."""
    from datetime import UTC, datetime, timedelta  # lazy: only to name a refused time

    try:
        return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)).strftime(
            "%Y-%m-%d %H:%M:%S UTC"
        )
    except OverflowError:
        return f"{us} µs since the epoch"


def _span(us: int) -> str:
    days, rest = divmod(us, 86_400_000_000)
    return f"{days} day(s) {rest / 3_600_000_000:.1f} h" if days else f"{rest / 3_600_000_000:.1f} h"


def _check_timestamp(what: str, value: object) -> None:
    if type(value) is not int:
        raise ObjectRuleError(f"{what} must be an integer (µs since the epoch), not {type(value).__name__}")
    if not TS_MIN <= value <= TS_MAX:
        raise ObjectRuleError(f"{what} {value} is outside [{TS_MIN}, 2**53 - 1] µs since the epoch")


def _want(tag_of: TagOf, what: str, oid: ObjectId, kinds: Iterable[str], rule: str = "") -> str:
    found = tag_of(oid)
    if found is None:
        raise MissingLink(what, oid)
    allowed = tuple(kinds)
    if found not in allowed:
        if found.startswith(INVALID):
            raise ObjectRuleError(f"{what} -> {oid} is malformed: {found[len(INVALID) :]}")
        want = " or ".join(allowed)
        raise ObjectRuleError(f"{what} -> {oid} is a {found}, not a {want}{rule}")
    return found


_MESSAGE_KINDS = tuple(sorted(MESSAGE_TYPES))
_ADDS_MESSAGE = {op: f" (an {op} commit adds a message)" for op in MESSAGE_OPS}


def _plain_append_passes(commit: Commit, tag_of: TagOf) -> bool:
    """True when ``commit`` is a plain append (at most one parent, message content, no target, reply nor
    links) that :func:`_commit_rules` passes: the rules such a commit can break, asked as yes/no questions.
    False sends it through :func:`_commit_rules`, which names the rule (tests/sync/test_receive_shapes.py
    compares the two)."""
    if (
        commit.operation != "append"
        or commit.links
        or commit.edit_target is not None
        or commit.reply_to is not None
        or commit.content is None
        or len(commit.parents) > 1
    ):
        return False
    ts = commit.created_at
    if type(ts) is not int or not TS_MIN <= ts <= TS_MAX:
        return False
    if commit.parents and tag_of(commit.parents[0]) != "commit":
        return False
    found = tag_of(commit.content)
    if found not in MESSAGE_TYPES or (isinstance(found, MessageTag) and found.media):  # it must link media
        return False
    return commit.tools is None or tag_of(commit.tools) == "toolset"


def _check_commit(commit: Commit, tag_of: TagOf) -> None:
    if not _plain_append_passes(commit, tag_of):
        _commit_rules(commit, tag_of)


def _commit_rules(commit: Commit, tag_of: TagOf) -> None:
    op = commit.operation
    if op not in OPERATIONS:
        raise ObjectRuleError(f"unknown operation {op!r} (expected one of {sorted(OPERATIONS)})")
    _check_timestamp("ts", commit.created_at)
    parents = commit.parents
    if len(set(parents)) != len(parents):
        raise ObjectRuleError("a parent is listed twice")
    if op == "merge" and len(parents) < 2:
        raise ObjectRuleError("a merge commit has two or more parents")
    if op != "merge" and len(parents) > 1:
        raise ObjectRuleError(f"an {op} commit has at most one parent (only merges have more)")
    if op in ("edit", "annotate", "compress", "trim") and not parents:
        raise ObjectRuleError(f"an {op} commit needs a parent")
    for index, parent in enumerate(parents):
        _want(tag_of, f"parents[{index}]", parent, ("commit",))
    content = commit.content
    used: tuple[ObjectId, ...] = ()
    declared: tuple[tuple[ObjectId, str], ...] = ()
    if op in MESSAGE_OPS:
        if content is None:
            raise ObjectRuleError(f"an {op} commit needs message content")
        found = _want(tag_of, "content", content, _MESSAGE_KINDS, _ADDS_MESSAGE[op])
        used = getattr(found, "media", ())
        declared = getattr(found, "declared", ())
    elif op == "annotate":
        if content is None:
            raise ObjectRuleError("an annotate commit needs annotation content")
        _want(tag_of, "content", content, (ANNOTATION,))
    elif op == "trim":
        if content is None:
            raise ObjectRuleError("a trim commit needs annotation content")
        _want(tag_of, "content", content, (ANNOTATION,))
    elif op == "spawn":
        _check_spawn(commit)
    elif content is not None:  # merge
        _want(tag_of, "content", content, (MERGE,))
    linked = commit.links.get(MEDIA_LINK)
    if linked is not None and linked != used:
        if not used:
            raise ObjectRuleError("links.media names media, but the commit's content uses none")
        raise ObjectRuleError(
            f"links.media must name exactly the media the content uses, sorted ({len(used)} ids), "
            f"not {len(linked)} ids"
        )
    if used and linked is None:
        raise ObjectRuleError(
            f"the content uses media (e.g. {used[0]}) the commit does not link (links.media)"
        )
    if used:
        _check_declared(declared, tag_of)
    if op in TARGET_OPS:
        if commit.edit_target is None:
            raise ObjectRuleError(f"an {op} commit needs a target")
        _want(tag_of, "target", commit.edit_target, ("commit",))
    elif commit.edit_target is not None:
        raise ObjectRuleError(f"an {op} commit has no target (only edit and annotate do)")
    if commit.reply_to is not None:
        _want(tag_of, "reply_to", commit.reply_to, ("commit",))
    if commit.tools is not None:
        _want(tag_of, "tools", commit.tools, ("toolset",))
    _check_links(op, commit.links, tag_of)


def _check_tag(obj: Tag, tag_of: TagOf) -> None:
    """An annotated tag: a valid tag name (a branch name's rules), a timestamp in range, a commit target."""
    try:
        check_branch_name(obj.name)
    except InvalidRefName as exc:
        raise ObjectRuleError(f"a tag's name: {exc}") from exc
    _check_timestamp("ts", obj.created_at)
    _want(tag_of, "target", obj.target, ("commit",))


def _check_spawn(commit: Commit) -> None:
    """A spawn commit: no content, ``metadata["spawn"]`` a record naming a purpose, the branch it started and
    how it inherited; a ``full`` child's parent is the commit ``links.parent`` names, other children are roots."""
    if commit.content is not None:
        raise ObjectRuleError("a spawn commit has no content")
    record = (commit.metadata or {}).get("spawn")
    if not isinstance(record, dict):
        raise ObjectRuleError("a spawn commit records metadata.spawn")
    purpose, branch, inherit = record.get("purpose"), record.get("branch"), record.get("inherit")
    if not isinstance(purpose, str) or not purpose.strip() or not isinstance(branch, str) or not branch:
        raise ObjectRuleError("metadata.spawn names a purpose and a branch (non-empty strings)")
    if inherit not in SPAWN_INHERIT:
        raise ObjectRuleError(f"metadata.spawn.inherit must be snapshot, full or none, not {inherit!r}")
    if not isinstance(record.get("parent_branch", ""), str):
        raise ObjectRuleError("metadata.spawn.parent_branch must be a string")
    parent = commit.links.get(PARENT_LINK, ())
    expected = tuple(parent) if inherit == "full" else ()
    if commit.parents != expected:
        raise ObjectRuleError(
            "a full spawn's parent is its links.parent commit; another spawn commit has no parent"
        )


def _check_declared(declared: Iterable[tuple[ObjectId, str]], tag_of: TagOf) -> None:
    """Each media part's declared media type is one its blob's bytes satisfy (format rules only)."""
    for oid, media_type in declared:
        found = tag_of(oid)
        if isinstance(found, MediaTag) and media_type not in found.types:
            what = ", ".join(sorted(found.types)) or "none of the accepted media types"
            raise ObjectRuleError(f"a part declares media {oid} as {media_type}, but its bytes are {what}")


def _check_links(op: str, links: Mapping[str, tuple[ObjectId, ...]], tag_of: TagOf) -> None:
    sources = links.get(SOURCES_LINK, ())
    if op == "compress" and not sources:
        raise ObjectRuleError("a compress commit names the messages it replaces (links.sources)")
    if op != "compress" and SOURCES_LINK in links:
        raise ObjectRuleError("only a compress commit has links.sources")
    targets = links.get(TARGETS_LINK, ())
    if op == "trim" and not targets:
        raise ObjectRuleError("a trim commit names the messages it skips (links.targets)")
    if op != "trim" and TARGETS_LINK in links:
        raise ObjectRuleError("only a trim commit has links.targets")
    if len(set(targets)) != len(targets):
        raise ObjectRuleError("links.targets names a commit twice")
    if op != "spawn" and PARENT_LINK in links:
        raise ObjectRuleError("only a spawn commit has links.parent")
    if CHILD_LINK in links and op != "append":
        raise ObjectRuleError("only an append (a collapse) has links.child")
    for name, oids in links.items():
        if name == ORIGINAL_LINK and len(oids) != 1:
            raise ObjectRuleError("links.original names exactly one blob")
        if name in (PARENT_LINK, CHILD_LINK) and len(oids) != 1:
            raise ObjectRuleError(f"links.{name} names exactly one commit")
        want = {
            SOURCES_LINK: "commit",
            TARGETS_LINK: "commit",
            ORIGINAL_LINK: TOOL_ORIGINAL,
            USAGES_LINK: "usage",
            MEDIA_LINK: MEDIA,
            PARENT_LINK: "commit",
            CHILD_LINK: "commit",
        }.get(name)
        for index, oid in enumerate(oids):
            what = f"links.{name}[{index}]"
            if want is None:
                if tag_of(oid) is None:
                    raise MissingLink(what, oid)
            else:
                _want(tag_of, what, oid, (want,))


def _check_usage(
    record: UsageRecord, tag_of: TagOf, claims: Mapping[ObjectId, ObjectId] | None = None
) -> None:
    _check_timestamp("start", record.started_at)
    if record.completed_at is not None:
        _check_timestamp("end", record.completed_at)
    if record.result_chars is not None and (type(record.result_chars) is not int or record.result_chars < 0):
        raise ObjectRuleError("rlen must be a non-negative integer")
    if record.commit is not None:
        _want(tag_of, "commit", record.commit, ("commit",))
    _usage_tag(record, tag_of, claims, None, stored=False)
    for index, oid in enumerate(record.heads):
        _want(tag_of, f"heads[{index}]", oid, ("commit",))


def _usage_tag(
    record: UsageRecord,
    tag_of: TagOf,
    claims: Mapping[ObjectId, ObjectId] | None,
    me: ObjectId | None,
    *,
    stored: bool,
) -> UsageTag:
    """The tag of ``record`` from its children's tags, or :class:`ObjectRuleError` naming the tree rule it
    breaks: a child listed twice, a child ``claims`` says another record lists (``me``: this record's id,
    whose own claims do not count), a child that is not a valid usage record, a tree too deep or too large.

    ``stored``: the record is already in a store (its tag is being computed, not the record checked): a
    missing child is left to the store-level link check, and a malformed child is named without its
    reason, so reasons never nest along a deep chain."""
    depth = size = 0
    seen: set[ObjectId] = set()
    for index, oid in enumerate(record.children):
        if oid in seen:
            raise ObjectRuleError(f"lists nested record {oid} twice (a nested execution has one parent)")
        seen.add(oid)
        found = tag_of(oid)
        if found is None:
            if stored:
                continue
            raise MissingLink(f"children[{index}]", oid)
        if found != UsageRecord.KIND:
            if not found.startswith(INVALID):
                raise ObjectRuleError(f"children[{index}] -> {oid} is a {found}, not a usage")
            why = "" if stored else f": {found[len(INVALID) :]}"
            raise ObjectRuleError(f"children[{index}] -> {oid} is malformed{why}")
        owner = claims.get(oid) if claims is not None else None
        if owner is not None and owner != me:
            raise ObjectRuleError(
                f"children[{index}] -> {oid} is also listed by record {owner} "
                "(a nested execution has one parent record)"
            )
        depth = max(depth, getattr(found, "depth", 1))
        size = min(size + getattr(found, "size", 1), MAX_USAGE_TREE + 1)
    depth, size = depth + 1, size + 1
    if depth > MAX_USAGE_DEPTH:
        raise ObjectRuleError(f"its tree of nested records is deeper than {MAX_USAGE_DEPTH} levels")
    if size > MAX_USAGE_TREE:
        raise ObjectRuleError(
            f"its tree holds more than {MAX_USAGE_TREE} nested records (counted along every path)"
        )
    return UsageTag(depth, size)


class Objects(Protocol):
    """Where :class:`Tags` reads objects it has no tag for (any :class:`~tractkv.store.Reader`)."""

    def get(self, oid: ObjectId) -> StoredObject | None: ...


class Tags:
    """Tags of objects by id: those recorded with :meth:`add` (objects just decoded: nothing is decoded
    twice), else read from ``reader`` once and remembered.

    A usage record's tag needs its children's: they are computed bottom-up without recursion, each record
    read once, and :attr:`claims` records which record lists each nested one (a second record listing it
    makes that record's tag invalid: a nested execution has one parent record)."""

    def __init__(self, reader: Objects, known: Mapping[ObjectId, str] | None = None) -> None:
        self.reader = reader
        self.known: dict[ObjectId, str] = dict(known or {})
        self.claims: dict[ObjectId, ObjectId] = {}  # nested usage record -> the record listing it

    def add(self, oid: ObjectId, obj: StoredObject) -> str:
        if isinstance(obj, UsageRecord):
            return self._usage(oid, obj)
        found = self.known[oid] = tag(obj)
        return found

    def __call__(self, oid: ObjectId) -> str | None:
        found = self.known.get(oid)
        if found is None:
            obj = self.reader.get(oid)
            if obj is None:
                return None
            found = self.add(oid, obj)
        return found

    def clear(self) -> None:
        """Forget every tag and claim (a receiver bounding its memory)."""
        self.known.clear()
        self.claims.clear()

    def _usage(self, oid: ObjectId, record: UsageRecord) -> str:
        known = self.known
        stack: list[tuple[ObjectId, UsageRecord, Iterator[ObjectId]]] = [(oid, record, iter(record.children))]
        while stack:
            top, rec, children = stack[-1]
            for child in children:
                if child in known:
                    continue
                obj = self.reader.get(child)
                if obj is None:
                    continue
                if isinstance(obj, UsageRecord):
                    stack.append((child, obj, iter(obj.children)))
                    break
                known[child] = tag(obj)
            else:
                stack.pop()
                known[top] = _claimed(rec, known.get, self.claims, top)
        return known[oid]


def _claimed(
    record: UsageRecord, tag_of: TagOf, claims: MutableMapping[ObjectId, ObjectId], me: ObjectId
) -> str:
    """The tag of a stored usage record (invalid when it breaks a tree rule); a valid one claims its children."""
    try:
        found = _usage_tag(record, tag_of, claims, me, stored=True)
    except ObjectRuleError as exc:
        return f"{INVALID}{exc}"
    for child in record.children:
        claims.setdefault(child, me)
    return found


def trusted_tag(payload: dict[str, Any]) -> str:
    """The tag of a blob whose payload the write path built and already checked (``content_blob``, or a
    bookkeeping payload it made itself): the same tag :func:`tag` returns, without checking the payload again."""
    kind = _BLOB_TAGS.get(str(payload.get("type")), "blob")
    return _message_tag(kind, payload) if kind in MESSAGE_TYPES else kind


def check_commit(
    reader: Reader, commit: Commit, known: Mapping[ObjectId, str] | None = None, now_us: int | None = None
) -> None:
    """Check a commit about to be written locally (its links resolve through ``reader``, usually the batch
    that stages it; ``known`` gives tags the caller already knows, e.g. its parent's; ``now_us`` the clock
    that stamped it, which it may not be more than :data:`MAX_FUTURE_US` ahead of).

    Raises:
        InvalidInput: the rule it breaks (nothing has been written).
    """
    try:
        check(commit, Tags(reader, known), now_us=now_us)
    except ObjectRuleError as exc:
        raise InvalidInput(f"refusing to write an invalid commit: {exc}") from exc


def check_tag(
    reader: Reader, obj: Tag, known: Mapping[ObjectId, str] | None = None, now_us: int | None = None
) -> None:
    """Check an annotated tag about to be written locally, as :func:`check_commit` checks a commit.

    Raises:
        InvalidInput: the rule it breaks (nothing has been written).
    """
    try:
        check(obj, Tags(reader, known), now_us=now_us)
    except ObjectRuleError as exc:
        raise InvalidInput(f"refusing to write an invalid tag: {exc}") from exc


def fsck_objects(store: Store, now_us: int | None = None) -> tuple[Problem, ...]:
    """The semantic problems of every object in a store (kind ``invalid``), in one read view; with
    ``now_us`` (the clock), also every commit stamped more than :data:`MAX_FUTURE_US` after it (kind
    ``future``: a warning, not damage; a receiver would refuse it, compile reads it as any other).

    Objects that do not hash to their id or do not decode, and links to absent objects, are left to
    :func:`tractkv.store.fsck` (which reports them); this adds what it cannot see.
    """
    from tractkv.store.fsck import Problem  # lazy: the write path never needs fsck

    problems: list[Problem] = []
    with store.snapshot() as snap:
        decoded: dict[ObjectId, StoredObject] = {}
        for oid, data in snap.iter_raw_objects():
            if hash_bytes(data) != oid:
                continue
            try:
                decoded[oid] = decode(data, strict=True)
            except DecodeError:
                continue
        # One Tags for the whole store: usage trees are computed once each, and a nested record listed by
        # two records is found wherever they are (the second one computed is invalid).
        tags = Tags(
            _Decoded(decoded), {o: tag(x) for o, x in decoded.items() if not isinstance(x, UsageRecord)}
        )
        for oid, obj in decoded.items():
            try:
                check(obj, tags)
                found = tags(oid) if isinstance(obj, UsageRecord) else None
                if found is not None and found.startswith(INVALID):
                    raise ObjectRuleError(found[len(INVALID) :])
            except MissingLink:
                continue  # store-level fsck reports it
            except ObjectRuleError as exc:
                problems.append(Problem("invalid", oid, str(exc)))
                continue
            if now_us is not None and isinstance(obj, Commit):
                try:
                    check_not_future(obj.created_at, now_us)
                except ObjectRuleError as exc:
                    problems.append(Problem("future", oid, str(exc)))
    return tuple(problems)


class _Decoded:
    """The objects fsck decoded, as :class:`Tags` reads them (one that does not decode is absent)."""

    def __init__(self, decoded: Mapping[ObjectId, StoredObject]) -> None:
        self.decoded = decoded

    def get(self, oid: ObjectId) -> StoredObject | None:
        return self.decoded.get(oid)
