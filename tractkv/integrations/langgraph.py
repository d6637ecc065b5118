"""A LangGraph checkpointer over a tractkv store: :class:`TractkvSaver` (extra ``langgraph``).

**Layout.** A thread is a branch, ``langgraph/<thread>``; a subgraph's checkpoint namespace ``ns`` of it is
``langgraph-ns/<thread>/<ns>`` (both names encoded by :func:`tractkv.integrations.branch_component`: ASCII
letters, digits, ``_`` and ``-`` kept, any other character ``%XX`` per UTF-8 byte). The branch is an
append-only log: each ``put`` appends one **checkpoint commit** and each ``put_writes`` one **writes
commit**, on top of the tip, whatever LangGraph parent the checkpoint names (time travel forks are recorded
in the commit, not by moving the branch back), so every checkpoint of the thread stays reachable from the
branch, and push / pull / clone carry all of it. Both kinds are ``append`` commits of one shared
``reasoning`` blob (hidden from ``compile`` by default; stored once for the whole store); what they hold is
in the commit's metadata under ``"langgraph"`` plus blobs the commit links as ``links["langgraph"]``:

* checkpoint: ``{"v": 1, "kind": "checkpoint", "id", "parent", "checkpoint": <blob>, "metadata": <blob>,
  "values": {channel: [version, "v" | "m", <blob>]}}``: LangGraph's serialized checkpoint (without its channel
  values) and metadata, each a blob, and where each channel's value is. A channel value is a blob of the
  serde's bytes (``"v"``), stored once per channel version; a **messages channel** (a list of LangChain
  messages) is a list node (``"m"``): ``{"lg": "messages", "prev": <node>, "items": [<message blob>...], "n":
  <length>}``, where ``prev`` is the parent checkpoint's node when the new list extends it. Each message is
  its own blob, so a message is stored once however many checkpoints hold it, and a conversation of N messages
  costs O(N) storage, not O(N^2). Whether the list extends the parent's is decided by content: the parent
  node's messages (cached, else read from the store) are compared field by field with the new list's first
  ones, so a message a node edited in place is stored as edited; any other list (a message removed, replaced
  or edited) starts a new node holding every item, stored blobs reused. The cached messages are the saver's
  own copies, never handed out; a read hands out the message objects it handed out last (or LangGraph gave
  it in ``put``), checked against those copies in one C-speed pass and replaced where someone edited them,
  so a turn neither copies nor compares the whole conversation in Python (a quiet 1,000-turn run still
  grows more than LangGraph alone: README, LangGraph benchmark) and editing a read state changes nothing
  stored or read next.
* writes: ``{"v": 1, "kind": "writes", "checkpoint", "task", "path", "writes": [[idx, channel, <blob>]...]}``.

**The conversation.** The channel named ``messages`` (``MessagesState``'s) is also the branch's conversation,
so ``compile`` (every dialect), ``log``, ``find_tool_calls`` / ``find_tool_turns`` and the viewer show it: a
``put`` first commits what the list changed, in the same transaction as its checkpoint commit, which links
those commits. Each **message commit** is a content commit whose metadata is ``{"v": 1, "kind": "message",
"id": <LangChain message id>, "blob": <the message's blob>}`` (the same blob the list node names; linked): a
human message a ``user`` turn, an AI message an ``assistant`` turn with its ``tool_calls`` (``args`` as the
arguments), a tool message a ``tool`` result (``status="error"``: ``is_error``), a system message an
``instruction``; text only (content blocks other than text stay in the checkpoint; a tool result without text
shows ``(no output)``, an AI message with neither text nor calls is not shown). When the list extends the one
the conversation shows (LangGraph's usual path) each new message is an ``append``: O(new). Otherwise (a fork
from an earlier checkpoint, a message replaced by id or removed, the first write of a thread written before
this) the list is compared with the conversation by message id: a message replaced is an ``edit`` of its
commit, one gone a ``skip`` annotation, a new one an ``append`` (so compile shows the latest checkpoint's
messages; a reordering keeps the conversation's order). What LangGraph reads is still the list node, so
threads written before read as before. The index follows the conversation (message id -> commit and blob)
as it follows checkpoints. Other channels are not shown.

``prune(strategy="keep_latest")`` and ``delete_for_runs`` are the exception to append-only (LangGraph's
contract asks for them): the branch moves to a history without the dropped checkpoints (:meth:`TractkvSaver.
_rewrite`), and ``gc`` reclaims them once the reflog entry ages.

Everything a resume reads is therefore an immutable object reachable from the branch: the project's
invariant, so a store holding threads syncs with the ordinary remotes, and a graph interrupted on one
machine resumes on another after ``pull`` or ``clone``. An in-memory index per branch (checkpoint id ->
commit, writes per checkpoint) is rebuilt from the commits by a walk from the tip, incrementally as the
branch grows; it is never stored. The walk follows every parent: when a thread moved on two machines and
``pull`` merged them, the merge commit brings the other side's checkpoints into the index, and the thread
resumes from the newest checkpoint of either side (checkpoint ids are time-ordered); the other side's are
in ``list`` / ``get_state_history`` and reachable by their ids.

**Hostile input.** What a store holds may have come from another machine, so it is read as untrusted: the
metadata and blobs are checked for shape (:class:`~tractkv.errors.DecodeError` otherwise), serialized values
of a ``pickle`` type are refused on write and on read whatever serializer is configured (nothing from a
store is ever unpickled), and the default serializer is LangGraph's ``JsonPlusSerializer`` in strict
msgpack mode (only LangGraph's safe types, plus the types a compiled graph's state schema adds through
``with_allowlist``), never the permissive default that imports and calls any name the bytes give.

Concurrency: one lock per saver serializes its operations (LangGraph calls ``put_writes`` from worker
threads); the async methods run the same code in a worker thread. Two processes writing one thread at once
get :class:`~tractkv.errors.ConcurrentUpdate` (LangGraph assumes one runner per thread).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import copy
import itertools
import operator
import random
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import attrs

from tractkv.errors import (
    BranchNotFound,
    ConcurrentUpdate,
    DecodeError,
    InvalidInput,
    ObjectNotFound,
    TractError,
)
from tractkv.ids import ObjectId, is_object_id
from tractkv.integrations import (
    branch_component,
    check_id,
    check_not_checked_out,
    missing_extra,
    parse_component,
)

try:
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        PendingWrite,
        get_checkpoint_metadata,
        writes_sort_key,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
except ImportError as exc:  # the extra is missing (tests/integrations/test_extras.py)
    raise missing_extra("tractkv.integrations.langgraph", "langgraph", exc) from exc

from tractkv.engine import open_session
from tractkv.engine.content import content_objects
from tractkv.engine.history import HEADS
from tractkv.engine.session import Session, Tip
from tractkv.model import Blob, Commit
from tractkv.store import WriteBatch
from tractkv.tract import Tract

__all__ = ["ROOT_PREFIX", "SUBGRAPH_PREFIX", "TractkvSaver", "thread_branch"]

ROOT_PREFIX = "langgraph/"
SUBGRAPH_PREFIX = "langgraph-ns/"
LINK = "langgraph"
FORMAT = 1
SAFE_SERDE_TYPES = frozenset({"null", "bytes", "bytearray", "msgpack", "json"})
MAX_SESSIONS = 32  # writing sessions kept open (one per branch written recently)
MAX_LISTS = 256  # message lists kept decoded (by node id)
MESSAGES = "messages"  # the channel whose messages become the branch's conversation (MessagesState's)
_CONTENT = {"type": "reasoning", "text": "LangGraph checkpoint"}


def thread_branch(thread_id: str, checkpoint_ns: str = "") -> str:
    """The branch holding ``thread_id``'s checkpoints in namespace ``checkpoint_ns`` (``""``: the root graph).
    An id or namespace longer than :data:`~tractkv.integrations.MAX_ID_BYTES` encoded is
    :class:`~tractkv.errors.InvalidInput` (the first read of a thread refuses it, before a graph runs)."""
    thread = check_id("LangGraph thread id", str(thread_id))
    if not checkpoint_ns:
        return ROOT_PREFIX + thread
    return f"{SUBGRAPH_PREFIX}{thread}/{check_id('LangGraph checkpoint namespace', checkpoint_ns)}"


def _parse_branch(name: str) -> tuple[str, str] | None:
    """(thread, ns) of a branch :func:`thread_branch` names, else None."""
    if name.startswith(ROOT_PREFIX):
        thread = parse_component(name[len(ROOT_PREFIX) :])
        return (thread, "") if thread is not None else None
    if name.startswith(SUBGRAPH_PREFIX):
        parts = name[len(SUBGRAPH_PREFIX) :].split("/")
        if len(parts) != 2:
            return None
        thread, ns = parse_component(parts[0]), parse_component(parts[1])
        return (thread, ns) if thread is not None and ns else None
    return None


# --- the index of one branch (derived from its commits, in memory only) --------------------------------------


@attrs.frozen
class _Ref:
    """Where a channel value is: ``kind`` "v" (one value blob) or "m" (a message list node)."""

    version: str | int | float
    kind: str
    oid: ObjectId


@attrs.frozen
class _Checkpoint:
    id: str
    parent: str | None
    saved: ObjectId
    meta: ObjectId
    values: dict[str, _Ref]
    commit: ObjectId


@attrs.frozen
class _Write:
    task: str
    path: str
    idx: int
    channel: str
    oid: ObjectId


@attrs.define
class _Branch:
    ref: str
    thread: str
    ns: str
    tip: ObjectId | None = None
    checkpoints: dict[str, _Checkpoint] = attrs.Factory(dict)
    writes: dict[str, list[_Write]] = attrs.Factory(dict)
    latest: str | None = None
    commits: set[ObjectId] = attrs.Factory(set)  # every commit indexed (all parents, not the first only)
    # the conversation the branch shows: LangChain message id -> (its message commit, its message blob)
    shown: dict[str, tuple[ObjectId, ObjectId]] = attrs.Factory(dict)
    by_commit: dict[ObjectId, str] = attrs.Factory(dict)  # message commit -> LangChain message id
    shown_node: ObjectId | None = None  # the list node ``shown`` equals, when known (set by a put)

    def reset(self) -> None:
        self.tip, self.latest, self.shown_node = None, None, None
        self.checkpoints.clear()
        self.writes.clear()
        self.commits.clear()
        self.shown.clear()
        self.by_commit.clear()

    def take(self, oid: ObjectId, commit: Commit, annotation: Any = None) -> None:
        """Index one commit of the branch (commits without a ``langgraph`` record are not ours: skipped, but
        for a ``skip`` annotation of a message commit, ``annotation`` its payload, which hides it)."""
        self.commits.add(oid)
        if commit.operation == "annotate":
            lc_id = self.by_commit.get(commit.edit_target) if commit.edit_target is not None else None
            if lc_id is not None and isinstance(annotation, dict) and annotation.get("priority") == "skip":
                if self.shown.get(lc_id, (None,))[0] == commit.edit_target:
                    del self.shown[lc_id]
                self.shown_node = None
            return
        meta = commit.metadata
        record = meta.get(LINK) if isinstance(meta, dict) else None
        if record is None:
            return
        where = f"commit {oid} on {self.ref[len(HEADS) :]}"
        if not isinstance(record, dict) or type(record.get("v")) is not int or record["v"] != FORMAT:
            raise DecodeError(f"{where}: not a LangGraph record of format {FORMAT}", oid)
        kind = record.get("kind")
        if kind == "message":
            lc_id = _text(record.get("id"), where, "id")
            blob = _oid(record.get("blob"), where, "blob")
            target = commit.edit_target if commit.operation == "edit" else None
            if target is not None:
                if self.by_commit.get(target) == lc_id and lc_id in self.shown:
                    self.shown[lc_id] = (self.shown[lc_id][0], blob)
            else:
                self.shown.pop(lc_id, None)  # re-added after a removal: at the end, as compile shows it
                self.shown[lc_id] = (oid, blob)
                self.by_commit[oid] = lc_id
            self.shown_node = None
        elif kind == "checkpoint":
            ckpt = _Checkpoint(
                id=_text(record.get("id"), where, "id"),
                parent=_text(record.get("parent"), where, "parent", optional=True),
                saved=_oid(record.get("checkpoint"), where, "checkpoint"),
                meta=_oid(record.get("metadata"), where, "metadata"),
                values=_values(record.get("values"), where),
                commit=oid,
            )
            self.checkpoints[ckpt.id] = ckpt
            if self.latest is None or ckpt.id > self.latest:
                self.latest = ckpt.id
        elif kind == "writes":
            target = _text(record.get("checkpoint"), where, "checkpoint")
            task = _text(record.get("task"), where, "task")
            path = _text(record.get("path"), where, "path")
            rows = record.get("writes")
            if not isinstance(rows, list):
                raise DecodeError(f"{where}: writes is not a list", oid)
            out = self.writes.setdefault(target, [])
            for row in rows:
                if not (isinstance(row, list) and len(row) == 3 and type(row[0]) is int):
                    raise DecodeError(f"{where}: a write is not [idx, channel, blob]", oid)
                out.append(
                    _Write(task, path, row[0], _text(row[1], where, "channel"), _oid(row[2], where, "write"))
                )
        else:
            raise DecodeError(f"{where}: unknown LangGraph record kind {kind!r}", oid)


def _text(value: object, where: str, what: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise DecodeError(f"{where}: {what} is not a string")
    return value


def _oid(value: object, where: str, what: str) -> ObjectId:
    if not (isinstance(value, str) and is_object_id(value)):
        raise DecodeError(f"{where}: {what} is not an object id")
    return ObjectId(value)


def _values(raw: object, where: str) -> dict[str, _Ref]:
    if not isinstance(raw, dict):
        raise DecodeError(f"{where}: values is not a map")
    out = {}
    for channel, entry in raw.items():
        if not (
            isinstance(entry, list)
            and len(entry) == 3
            and type(entry[0]) in (str, int, float)
            and entry[1] in ("v", "m")
        ):
            raise DecodeError(f"{where}: value of channel {channel!r} is not [version, kind, blob]")
        out[channel] = _Ref(entry[0], entry[1], _oid(entry[2], where, f"value of {channel!r}"))
    return out


def _record(commit: Commit) -> dict[str, Any] | None:
    """The ``langgraph`` record of a commit (None: not one of the saver's)."""
    meta = commit.metadata
    record = meta.get(LINK) if isinstance(meta, dict) else None
    return record if isinstance(record, dict) else None


def _kept(commit: Commit, keep: set[str]) -> bool:
    """Whether a rewrite keeping the checkpoints ``keep`` keeps ``commit``: a checkpoint it names, a write
    to one, every message commit and annotation (the conversation); anything else is the caller's call."""
    record = _record(commit)
    if record is None:
        return commit.operation == "annotate"
    kind = record.get("kind")
    if kind == "message":
        return True
    return record.get("id" if kind == "checkpoint" else "checkpoint") in keep


def _linking(ids: tuple[ObjectId, ...]) -> Any:
    """A commit's ``stage``: links ``ids`` (stored already) as ``links["langgraph"]``."""

    def stage(_batch: WriteBatch) -> dict[str, tuple[ObjectId, ...]]:
        return {LINK: ids}

    return stage


def _same(a: Any, b: Any) -> bool:
    """Whether two messages hold the same content (every field, not identity: a node may edit a message in
    place). Field by field, which is cheaper than pydantic's ``==`` and as strict."""
    if type(a) is not type(b):
        return False
    try:
        return bool(
            a.__dict__ == b.__dict__
            and getattr(a, "__pydantic_extra__", None) == getattr(b, "__pydantic_extra__", None)
        )
    except AttributeError:
        return bool(a == b)


def _fresh(message: Any) -> Any:
    """A copy of ``message`` sharing nothing mutable with it (what :func:`copy.deepcopy` gives, several
    times faster for a pydantic message: its fields are strings, numbers and JSON-like lists and maps)."""
    cls: Any = type(message)
    try:
        fields, fields_set = message.__dict__, message.__pydantic_fields_set__
        extra, private = message.__pydantic_extra__, message.__pydantic_private__
    except AttributeError:
        return copy.deepcopy(message)
    out = cls.__new__(cls)
    setattr_ = object.__setattr__
    setattr_(
        out, "__dict__", {k: _fresh_value(v) if type(v) in (list, dict) else v for k, v in fields.items()}
    )
    setattr_(out, "__pydantic_fields_set__", set(fields_set))
    setattr_(out, "__pydantic_extra__", _fresh_value(extra) if extra is not None else None)
    setattr_(out, "__pydantic_private__", copy.deepcopy(private) if private else private)
    return out


def _fresh_value(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {k: _fresh_value(v) for k, v in value.items()} if value else {}
    if kind is list:
        return [_fresh_value(v) for v in value] if value else []
    if value is None or kind in (str, int, float, bool):
        return value
    return copy.deepcopy(value)


_DICT = operator.attrgetter("__dict__")
_EXTRA = operator.attrgetter("__pydantic_extra__")


def _all_same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether the messages of ``a`` hold the same content as the first ones of ``b`` (:func:`_same` for
    each, in three passes at C speed: no Python code runs per message)."""
    return (
        all(map(operator.is_, map(type, a), map(type, b)))
        and all(map(operator.eq, map(_DICT, a), map(_DICT, b)))
        and all(map(operator.eq, map(_EXTRA, a), map(_EXTRA, b)))
    )


def _text_of(content: Any) -> str:
    """The text of a LangChain message's content: a string, or the text of its blocks joined."""
    if isinstance(content, str):
        return content
    out: builtins.list[str] = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, str):
            out.append(block)
        elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            out.append(block["text"])
    return "".join(out)


def _payload(message: Any) -> dict[str, Any] | None:
    """The tractkv content a LangChain message shows as (None: none): a human message a user turn, an AI
    message an assistant turn with its tool calls, a tool message a tool result (``status="error"`` an
    error result), a system message an instruction. Only text is shown (other content blocks stay in the
    checkpoint); a tool result with no text shows as ``(no output)``, so its call keeps a result."""
    kind = getattr(message, "type", None)
    text = _text_of(getattr(message, "content", ""))
    if kind == "system":
        return {"type": "instruction", "text": text} if text else None
    if kind == "human":
        out: dict[str, Any] = {"type": "dialogue", "role": "user", "text": text or "(no text)"}
    elif kind == "ai":
        calls = [
            {
                "id": call.get("id") or f"{message.id}:{i}",
                "name": call.get("name"),
                "arguments": call.get("args") or {},
            }
            for i, call in enumerate(getattr(message, "tool_calls", None) or ())
        ]
        out = {"type": "dialogue", "role": "assistant", "text": text}
        if calls:
            out["tool_calls"] = calls
        elif not text:
            return None
    elif kind == "tool":
        out = {
            "type": "dialogue",
            "role": "tool",
            "text": text or "(no output)",
            "tool_call_id": str(getattr(message, "tool_call_id", "")),
        }
        if getattr(message, "status", None) == "error":
            out["is_error"] = True
    else:
        return None
    name = getattr(message, "name", None)
    if isinstance(name, str) and name and kind != "tool":
        out["name"] = name
    return out


def _is_messages(value: object) -> bool:
    return (
        isinstance(value, list) and bool(value) and all(map(isinstance, value, itertools.repeat(BaseMessage)))
    )


# --- the saver ----------------------------------------------------------------------------------------------


class TractkvSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer keeping each thread on a tractkv branch (see the module docstring).

    ``TractkvSaver(tract)`` uses an open :class:`~tractkv.Tract` (its HEAD is never moved; closing the saver
    leaves the Tract open); :meth:`from_path` opens (or creates) a store and closes it with the saver.
    ``serde`` replaces the default serializer (strict ``JsonPlusSerializer``); ``pickle`` output is refused
    whatever it is.
    """

    def __init__(self, tract: Tract, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde or JsonPlusSerializer(allowed_msgpack_modules=None))
        self.tract = tract
        self._owns = False
        self._lock = threading.RLock()
        self._branches: dict[str, _Branch] = {}
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lists: OrderedDict[ObjectId, tuple[Any, ...]] = OrderedDict()
        self._live: dict[ObjectId, tuple[Any, ...]] = {}  # node -> the message objects last handed out
        content, _media = content_objects(_CONTENT)
        self._content = content

    @classmethod
    def from_path(
        cls, path: str, *, durable: bool = True, serde: SerializerProtocol | None = None
    ) -> TractkvSaver:
        """A saver over the store at ``path`` (created when absent), closed with :meth:`close`.
        ``durable=False`` skips fsync per checkpoint (survives a process crash, not an OS crash)."""
        saver = cls(Tract.open(path, durable=durable), serde=serde)
        saver._owns = True
        return saver

    def close(self) -> None:
        """Close the writing sessions (they save compile checkpoints) and, from :meth:`from_path`, the store."""
        with self._lock:
            while self._sessions:
                _ref, session = self._sessions.popitem()
                session.close()
            if self._owns:
                self.tract.close()

    def __enter__(self) -> TractkvSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- reading --------------------------------------------------------------------------------------------

    def _branch(self, thread_id: str, ns: str) -> _Branch:
        """The index of the thread's branch for ``ns``, brought up to date with the store."""
        ref = HEADS + thread_branch(thread_id, ns)
        branch = self._branches.get(ref)
        if branch is None:
            branch = self._branches[ref] = _Branch(ref, str(thread_id), ns)
        store = self.tract.store
        value = store.get_ref(ref)
        tip = ObjectId(value) if value is not None else None
        if tip == branch.tip:
            return branch
        chain, reached = self._walk(branch, tip)
        if not reached:  # the old tip is no ancestor (deleted, reset, a fresh index): index from scratch
            branch.reset()
            chain, _reached = self._walk(branch, tip)
        for oid, commit in reversed(chain):
            branch.take(oid, commit, self._annotation(commit))
        branch.tip = tip
        return branch

    def _annotation(self, commit: Commit) -> Any:
        """The payload of an annotation commit (None for other commits)."""
        if commit.operation != "annotate" or commit.content is None:
            return None
        obj = self.tract.store.get(commit.content)
        return obj.data if isinstance(obj, Blob) else None

    def _walk(self, branch: _Branch, tip: ObjectId | None) -> tuple[list[tuple[ObjectId, Commit]], bool]:
        """The commits reachable from ``tip`` (every parent: a merge made by ``pull`` brings the other
        machine's checkpoints) not indexed yet, newest first, and whether the indexed tip is among the
        ancestors. Ends: each commit is visited once, and history has no cycle."""
        store = self.tract.store
        chain: list[tuple[ObjectId, Commit]] = []
        visited: set[ObjectId] = set()
        reached = branch.tip is None
        todo = [tip] if tip is not None else []
        while todo:
            cursor = todo.pop()
            if cursor == branch.tip:
                reached = True
            if cursor in visited or cursor in branch.commits:
                continue
            visited.add(cursor)
            commit = store.get_commit(cursor)
            chain.append((cursor, commit))
            todo.extend(reversed(commit.parents))
        return chain, reached

    def _blob(self, oid: ObjectId, kind: str) -> dict[str, Any]:
        obj = self.tract.store.get(oid)
        if obj is None:
            raise ObjectNotFound(oid)
        data = obj.data if isinstance(obj, Blob) else None
        if not (isinstance(data, dict) and data.get("lg") == kind):
            raise DecodeError(f"not a LangGraph {kind} blob", oid)
        return data

    def _loads(self, oid: ObjectId, kind: str = "value") -> Any:
        data = self._blob(oid, kind)
        serde_type, raw = data.get("serde"), data.get("data")
        if not (isinstance(serde_type, str) and isinstance(raw, bytes)):
            raise DecodeError(f"a LangGraph {kind} blob holds no serialized value", oid)
        if serde_type.split("+", 1)[0] not in SAFE_SERDE_TYPES:
            raise DecodeError(f"refused serialization type {serde_type!r} (never unpickled)", oid)
        try:
            return self.serde.loads_typed((serde_type, raw))
        except Exception as exc:  # hostile or damaged bytes: whatever the serializer raises
            raise DecodeError(f"cannot deserialize a LangGraph {kind}: {exc}", oid) from exc

    def _dumps(self, value: Any) -> dict[str, Any]:
        serde_type, raw = self.serde.dumps_typed(value)
        if serde_type.split("+", 1)[0] not in SAFE_SERDE_TYPES:
            raise InvalidInput(
                f"a checkpoint value serialized as {serde_type!r}: tractkv stores no pickles (a store syncs, "
                "and unpickling is code execution); make the value serializable without pickle"
            )
        return {"lg": "value", "serde": serde_type, "data": bytes(raw)}

    def _messages(self, node: ObjectId) -> tuple[Any, ...]:
        """The messages of a list node (decoded once, then cached by node id)."""
        cached = self._lists.get(node)
        if cached is not None:
            self._lists.move_to_end(node)
            return cached
        chain: list[tuple[ObjectId, dict[str, Any]]] = []
        cursor: ObjectId | None = node
        while cursor is not None and cursor not in self._lists:  # ends: a node names an older node
            data = self._blob(cursor, "messages")
            items, total, prev = data.get("items"), data.get("n"), data.get("prev")
            if not (isinstance(items, list) and type(total) is int and total >= len(items)):
                raise DecodeError("a LangGraph message list node is malformed", cursor)
            chain.append((cursor, data))
            cursor = _oid(prev, f"list node {cursor}", "prev") if prev is not None else None
        out: list[Any] = list(self._lists[cursor]) if cursor is not None else []
        for depth, (oid, data) in reversed(list(enumerate(chain))):
            out.extend(self._loads(_oid(i, "a message list", "item")) for i in data["items"])
            if len(out) != data["n"]:
                raise DecodeError("a LangGraph message list node does not hold the length it states", node)
            if depth < MAX_LISTS:  # the nodes walked are the older checkpoints' lists: a history listing
                self._remember(oid, tuple(out))  # reads them next, so it decodes each message once
        return self._lists[node]

    def _remember(self, node: ObjectId, messages: tuple[Any, ...]) -> None:
        """Cache a node's messages. They are the saver's own objects: never handed out (:meth:`_tuple`
        copies them) and never objects LangGraph holds (:meth:`_stage_list` copies those)."""
        self._lists[node] = messages
        self._lists.move_to_end(node)
        while len(self._lists) > MAX_LISTS:
            old, _messages = self._lists.popitem(last=False)
            self._live.pop(old, None)

    def _read_list(self, node: ObjectId) -> builtins.list[Any]:
        """The messages of a list node as a read hands them out: the objects the saver last handed out for
        it (to a read, or received from LangGraph in :meth:`put`), each checked against the saver's own copy
        in one pass at C speed (their ``__dict__``, nothing copied); a message someone edited since is
        replaced by a fresh copy of the stored one. So a read costs no copy of the state, and an edit made
        to what a read returned never reaches the next read (two reads may share message objects; a field
        outside the message class's schema, pydantic's extra, is not compared). The first read of a node in
        a process copies its messages once."""
        private = self._messages(node)
        live = self._live.get(node)
        if live is None or len(live) != len(private):
            live = tuple(_fresh(m) for m in private)
        elif not all(map(operator.eq, map(_DICT, live), map(_DICT, private))):
            live = tuple(m if _same(m, p) else _fresh(p) for m, p in zip(live, private, strict=True))
        self._live[node] = live
        return builtins.list(live)

    def _tuple(self, branch: _Branch, ckpt: _Checkpoint) -> CheckpointTuple:
        checkpoint = self._loads(ckpt.saved)
        metadata = self._loads(ckpt.meta)
        if not (
            isinstance(checkpoint, dict)
            and isinstance(metadata, dict)
            and checkpoint.get("id") == ckpt.id
            and isinstance(checkpoint.get("channel_versions"), dict)
            and isinstance(checkpoint.get("versions_seen"), dict)
        ):
            raise DecodeError(f"checkpoint {ckpt.id!r} is not a LangGraph checkpoint of that id", ckpt.commit)
        values: dict[str, Any] = {}
        for channel, ref in ckpt.values.items():
            if ref.kind == "m":  # the caller may edit what it gets: the saver's own copies never change
                values[channel] = self._read_list(ref.oid)
            else:
                values[channel] = self._loads(ref.oid)
        checkpoint["channel_values"] = values
        configurable = {"thread_id": branch.thread, "checkpoint_ns": branch.ns}
        parent = (
            {"configurable": {**configurable, "checkpoint_id": ckpt.parent}}
            if ckpt.parent is not None
            else None
        )
        return CheckpointTuple(
            config={"configurable": {**configurable, "checkpoint_id": ckpt.id}},
            checkpoint=checkpoint,  # type: ignore[arg-type]  # a checked map of LangGraph's own fields
            metadata=metadata,  # type: ignore[arg-type]
            parent_config=parent,  # type: ignore[arg-type]
            pending_writes=self._pending(branch, ckpt.id),
        )

    def _pending(self, branch: _Branch, checkpoint_id: str) -> list[PendingWrite]:
        chosen: dict[tuple[str, int], _Write] = {}
        for write in branch.writes.get(checkpoint_id, ()):
            key = (write.task, write.idx)
            if write.idx < 0 or key not in chosen:  # regular writes: the first wins; special ones: the last
                chosen[key] = write
        ordered = sorted(chosen.values(), key=lambda w: writes_sort_key(w.path, w.task, w.idx))
        return [(w.task, w.channel, self._loads(w.oid)) for w in ordered]

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        with self._lock:
            branch = self._branch(configurable["thread_id"], configurable.get("checkpoint_ns", ""))
            wanted = configurable.get("checkpoint_id") or branch.latest
            ckpt = branch.checkpoints.get(wanted) if wanted else None
            return self._tuple(branch, ckpt) if ckpt is not None else None

    def _branches_of(self, thread_id: str | None) -> list[tuple[str, str]]:
        """(thread, ns) of every stored branch of ``thread_id`` (every thread when None), root first."""
        store = self.tract.store
        if thread_id is None:
            prefixes = [HEADS + ROOT_PREFIX, HEADS + SUBGRAPH_PREFIX]
        else:
            prefixes = [
                HEADS + thread_branch(thread_id),
                HEADS + SUBGRAPH_PREFIX + branch_component(str(thread_id)) + "/",
            ]
        out = []
        for prefix in prefixes:
            for ref, _value in store.iter_refs(prefix):
                parsed = _parse_branch(ref[len(HEADS) :])
                if parsed is not None and (thread_id is None or parsed[0] == str(thread_id)):
                    out.append(parsed)
        return out

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first per thread and namespace (``config`` narrows to a thread, its
        ``checkpoint_ns`` and ``checkpoint_id`` when given), matching ``filter`` on metadata, older than
        ``before``'s checkpoint, at most ``limit``."""
        configurable = (config or {}).get("configurable") or {}
        thread = configurable.get("thread_id")
        want_ns = configurable.get("checkpoint_ns")
        want_id = configurable.get("checkpoint_id")
        before_id = ((before or {}).get("configurable") or {}).get("checkpoint_id")
        with self._lock:
            found = [
                (self._branch(t, ns), ckpt_id)
                for t, ns in self._branches_of(thread)
                if want_ns is None or ns == want_ns
                for ckpt_id in sorted(self._branch(t, ns).checkpoints, reverse=True)
                if (not want_id or ckpt_id == want_id) and (not before_id or ckpt_id < before_id)
            ]
        for branch, ckpt_id in found:
            if limit is not None and limit <= 0:
                return
            with self._lock:  # never held across a yield: the caller may write between two items
                ckpt = branch.checkpoints.get(ckpt_id)
                item = self._tuple(branch, ckpt) if ckpt is not None else None
            if item is None or (filter and any(item.metadata.get(k) != v for k, v in filter.items())):
                continue
            if limit is not None:
                limit -= 1
            yield item

    # --- writing --------------------------------------------------------------------------------------------

    def _session(self, ref: str) -> Session:
        """A writing session on ``ref`` (the Tract's own HEAD is never moved)."""
        session = self._sessions.get(ref)
        if session is None:
            session = open_session(  # with the default policy: the branch budget checks its commits, as a Tract's
                self.tract.store, counter=self.tract.token_counter, branch=ref[len(HEADS) :]
            )
            self._sessions[ref] = session
            while len(self._sessions) > MAX_SESSIONS:
                _old, evicted = self._sessions.popitem(last=False)
                evicted.close()
        self._sessions.move_to_end(ref)
        return session

    def _commit(
        self,
        branch: _Branch,
        record: dict[str, Any],
        note: str,
        stage: Any,
    ) -> ObjectId:
        session = self._session(branch.ref)
        tip = session.writable()
        if tip.head != branch.tip:  # moved since the index was read: index it first (it is what we build on)
            self._branch(branch.thread, branch.ns)
        info = session.commit_content(
            self._content,
            operation="append",
            message=note,
            metadata={LINK: record},
            stage=stage,
            tip=tip,
        )
        oid = info.commit_id
        branch.take(oid, session.reader().get_commit(oid))
        branch.tip = oid
        return oid

    def _stage_list(
        self, batch: WriteBatch, messages: builtins.list[Any], parent: _Ref | None, linked: set[ObjectId]
    ) -> tuple[ObjectId, ObjectId | None, builtins.list[ObjectId]]:
        """Store a messages channel value as a list node (extending the parent's when it can); returns it,
        the parent's node when it extends (or is) that, and the message blobs it adds.
        The list extends the parent's when its first messages hold the parent's content (compared with the
        saver's own copies at C speed, :func:`_all_same`: a message a node edited in place is seen)."""
        prefix: tuple[Any, ...] = ()
        prev: ObjectId | None = None
        if parent is not None and parent.kind == "m":
            try:
                prefix = self._messages(parent.oid)
            except ObjectNotFound:
                prefix = ()
            if len(prefix) <= len(messages) and self._unchanged(parent.oid, prefix, messages):
                prev = parent.oid
            else:
                prefix = ()
        new = messages[len(prefix) :]
        if prev is not None and not new:
            self._live[prev] = tuple(messages)
            return prev, prev, []
        blobs = [batch.put(Blob(data=self._dumps(message))) for message in new]
        linked.update(blobs)
        node: dict[str, Any] = {"lg": "messages", "items": [str(b) for b in blobs], "n": len(messages)}
        if prev is not None:
            node["prev"] = str(prev)
        oid = batch.put(Blob(data=node))
        self._remember(oid, (*prefix, *map(_fresh, new)))  # not LangGraph's objects
        self._live[oid] = tuple(messages)  # LangGraph's: what the next put's list starts with
        return oid, prev, blobs

    def _forget(self, branch: _Branch) -> None:
        """After a failed write: drop what the write may have indexed or cached that was never stored."""
        branch.reset()
        self._lists.clear()
        self._live.clear()

    def _node_items(self, node: ObjectId, reader: Any) -> builtins.list[ObjectId]:
        """The message blobs of a list node, oldest first (read through ``reader``: a batch sees its own)."""
        chain: builtins.list[builtins.list[Any]] = []
        cursor: ObjectId | None = node
        while cursor is not None:  # ends: a node names an older node
            obj = reader.get(cursor)
            data = obj.data if isinstance(obj, Blob) else None
            if not (
                isinstance(data, dict)
                and data.get("lg") == "messages"
                and isinstance(data.get("items"), list)
            ):
                raise DecodeError("not a LangGraph messages blob", cursor)
            chain.append(data["items"])
            prev = data.get("prev")
            cursor = _oid(prev, f"list node {cursor}", "prev") if prev is not None else None
        return [_oid(i, "a message list", "item") for items in reversed(chain) for i in items]

    def _converse(
        self,
        session: Session,
        branch: _Branch,
        messages: builtins.list[Any],
        node: ObjectId,
        base: ObjectId | None,
        blobs: builtins.list[ObjectId],
    ) -> builtins.list[ObjectId]:
        """Bring the branch's conversation (its message commits) to ``messages``, the list ``node`` stores;
        returns the commits made. When the list extends the one the conversation shows (``base``, LangGraph's
        usual path), each new message becomes one commit (``blobs`` are their blobs): O(new). Otherwise (the
        first write of a thread written before, a fork from an earlier checkpoint, a message replaced or
        removed) the list is compared with the conversation by LangChain message id: a message gone is a
        ``skip`` annotation, one whose stored form changed an ``edit`` of its commit, a new one a commit."""
        made: builtins.list[ObjectId] = []
        if node == branch.shown_node:
            return made
        if base is None or base != branch.shown_node:
            blobs = self._node_items(node, session.reader())
            wanted = {m.id: i for i, m in enumerate(messages) if m.id is not None}
            for lc_id, (commit, _blob) in builtins.list(branch.shown.items()):
                if lc_id not in wanted:
                    info = session.annotate(
                        str(commit), "skip", reason="LangGraph: not in the thread's messages"
                    )
                    branch.take(
                        info.commit_id, session.reader().get_commit(info.commit_id), {"priority": "skip"}
                    )
                    branch.tip = info.commit_id
                    made.append(info.commit_id)
            start = 0
        else:
            start = len(messages) - len(blobs)
        for index, blob in enumerate(blobs[-(len(messages) - start) :] if len(messages) > start else []):
            message = messages[start + index]
            lc_id = message.id if message.id is not None else f"{node}:{start + index}"
            shown = branch.shown.get(lc_id)
            if shown is not None and shown[1] == blob:
                continue
            oid = self._say(session, branch, message, lc_id, blob, shown[0] if shown is not None else None)
            if oid is not None:
                made.append(oid)
        branch.shown_node = node
        return made

    def _say(
        self,
        session: Session,
        branch: _Branch,
        message: Any,
        lc_id: str,
        blob: ObjectId,
        target: ObjectId | None,
    ) -> ObjectId | None:
        """Commit one message of the conversation (an ``edit`` of ``target`` when given); None when tractkv's
        payloads cannot show it (it stays in the checkpoint, which is what LangGraph reads)."""
        payload = _payload(message)
        if payload is None:
            return None
        try:
            content, media = content_objects(payload)
        except TractError:
            return None
        record = {"v": FORMAT, "kind": "message", "id": lc_id, "blob": str(blob)}
        try:
            info = session.commit_content(
                content,
                operation="edit" if target is not None else "append",
                target=target,
                metadata={LINK: record},
                stage=_linking((blob,)),
                media=media,
            )
        except InvalidInput:  # refused by the write path: not shown, the checkpoint is what LangGraph reads
            return None
        branch.take(info.commit_id, session.reader().get_commit(info.commit_id))
        branch.tip = info.commit_id
        return info.commit_id

    def _unchanged(self, node: ObjectId, prefix: tuple[Any, ...], messages: Sequence[Any]) -> bool:
        """Whether ``messages`` starts with the content of ``prefix`` (the saver's copies of ``node``'s
        messages). When they are the very objects the saver last handed out for the node (LangGraph's usual
        path: a read, then puts of the lists its reducer builds on them), one C-speed pass compares their
        fields (``__dict__``: a field a node edited in place is seen); else every message is compared."""
        live = self._live.get(node)
        if live is not None and len(live) == len(prefix) and all(map(operator.is_, live, messages)):
            return all(map(operator.eq, map(_DICT, prefix), map(_DICT, messages)))
        return _all_same(prefix, messages)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread_id, ns = str(configurable["thread_id"]), configurable.get("checkpoint_ns", "")
        parent_id = configurable.get("checkpoint_id")
        saved: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = saved.pop("channel_values")
        versions = checkpoint["channel_versions"]
        with self._lock:
            branch = self._branch(thread_id, ns)
            session = self._session(branch.ref)
            if session.writable().head != branch.tip:  # moved since the index was read
                branch = self._branch(thread_id, ns)
            parent = branch.checkpoints.get(parent_id) if parent_id else None
            inherited = parent.values if parent is not None else {}
            record: dict[str, Any] = {"v": FORMAT, "kind": "checkpoint", "id": checkpoint["id"]}
            if parent_id is not None:
                record["parent"] = parent_id
            try:
                with session.batch():  # the conversation's commits and the checkpoint: one transaction
                    batch = session.reader()
                    assert isinstance(batch, WriteBatch)
                    linked: set[ObjectId] = set()
                    refs: dict[str, list[Any]] = {}
                    for channel, version in versions.items():
                        if channel in new_versions:
                            if channel not in values:
                                continue  # an emptied channel: absent from the checkpoint
                            value = values[channel]
                            if _is_messages(value):
                                old = inherited.get(channel)
                                oid, base, blobs = self._stage_list(batch, value, old, linked)
                                kind = "m"
                                if channel == MESSAGES:
                                    turns = self._converse(session, branch, value, oid, base, blobs)
                                    linked.update(turns)
                            else:
                                oid, kind = batch.put(Blob(data=self._dumps(value))), "v"
                        else:
                            old = inherited.get(channel)
                            if old is None or old.version != version:
                                continue
                            oid, kind = old.oid, old.kind
                        linked.add(oid)
                        refs[channel] = [version, kind, str(oid)]
                    saved_id = batch.put(Blob(data=self._dumps(saved)))
                    meta_id = batch.put(Blob(data=self._dumps(get_checkpoint_metadata(config, metadata))))
                    linked.update((saved_id, meta_id))
                    record.update({"checkpoint": str(saved_id), "metadata": str(meta_id), "values": refs})
                    note = f"checkpoint {checkpoint['id']} (step {metadata.get('step')}, {metadata.get('source')})"
                    self._commit(branch, record, note, _linking(tuple(sorted(linked))))
            except BaseException:
                self._forget(branch)
                raise
        return {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        configurable = config["configurable"]
        thread_id, ns = str(configurable["thread_id"]), configurable.get("checkpoint_ns", "")
        checkpoint_id = configurable["checkpoint_id"]
        with self._lock:
            branch = self._branch(thread_id, ns)
            have = {(w.task, w.idx) for w in branch.writes.get(checkpoint_id, ())}
            todo = [
                (WRITES_IDX_MAP.get(channel, idx), channel, value)
                for idx, (channel, value) in enumerate(writes)
            ]
            todo = [w for w in todo if w[0] < 0 or (task_id, w[0]) not in have]
            if not todo:
                return
            record: dict[str, Any] = {
                "v": FORMAT,
                "kind": "writes",
                "checkpoint": checkpoint_id,
                "task": task_id,
                "path": task_path,
            }

            def stage(batch: WriteBatch) -> dict[str, tuple[ObjectId, ...]]:
                ids = [batch.put(Blob(data=self._dumps(value))) for _idx, _channel, value in todo]
                record["writes"] = [[w[0], w[1], str(oid)] for w, oid in zip(todo, ids, strict=True)]
                return {LINK: tuple(sorted(set(ids)))}

            self._commit(branch, record, f"writes for {checkpoint_id} (task {task_id})", stage)

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's branches (root and subgraph namespaces) through tractkv's own branch delete
        (:meth:`Tract.delete_branch`, forced: a thread's commits are on no other branch). Their reflog keeps
        the commits until ``gc``; a remote keeps its copy until it is pushed to or gc'd there. A branch that
        is checked out (the saver's Tract's branch, or the store's HEAD, which the next ``tractkv`` command
        opens) is refused with :class:`~tractkv.errors.InvalidInput` and nothing is deleted: switch first."""
        with self._lock:
            names = [thread_branch(thread, ns) for thread, ns in self._branches_of(str(thread_id))]
            check_not_checked_out(self.tract, names, f"LangGraph thread {thread_id!r}")
            for name in names:
                self._delete_branch(name)

    def _delete_thread_branch(self, thread_id: str, checkpoint_ns: str) -> None:
        """Delete one branch of a thread (the namespace ``checkpoint_ns``), as :meth:`delete_thread` does."""
        with self._lock:
            name = thread_branch(thread_id, checkpoint_ns)
            check_not_checked_out(self.tract, [name], f"LangGraph thread {thread_id!r}")
            self._delete_branch(name)

    def _delete_branch(self, name: str) -> None:
        ref = HEADS + name
        session = self._sessions.pop(ref, None)
        if session is not None:
            session.close()
        self._branches.pop(ref, None)
        with contextlib.suppress(BranchNotFound):  # deleted meanwhile by another handle
            self.tract.delete_branch(name, force=True)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread: each of its branches (root and subgraph namespaces) gets a twin for the target
        thread at the same tip (:meth:`Tract.branch`; no object is copied: the history is shared). A target
        thread that has checkpoints already is refused (:class:`~tractkv.errors.InvalidInput`)."""
        source, target = str(source_thread_id), str(target_thread_id)
        with self._lock:
            if self._branches_of(target):
                raise InvalidInput(
                    f"cannot copy LangGraph thread {source!r} to {target!r}: the target exists"
                )
            store = self.tract.store
            for thread, ns in self._branches_of(source):
                tip = store.get_ref(HEADS + thread_branch(thread, ns))
                if tip is not None:
                    self.tract.branch(thread_branch(target, ns), tip, switch=False)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``strategy="keep_latest"``: each branch of each thread (root and subgraph namespaces) keeps only
        its latest checkpoint and that checkpoint's writes; ``"delete"``: :meth:`delete_thread` for each.
        Keeping the latest moves the branch (see :meth:`_rewrite`): the dropped checkpoints leave the
        thread at once and their objects go at the ``gc`` after the reflog entry ages. Threads that do not
        exist are skipped."""
        if strategy not in ("keep_latest", "delete"):
            raise InvalidInput(f"prune strategy must be 'keep_latest' or 'delete', not {strategy!r}")
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            with self._lock:
                for thread, ns in self._branches_of(str(thread_id)):
                    latest = self._branch(thread, ns).latest
                    self._rewrite(thread, ns, {latest} if latest is not None else set(), "prune")

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Remove every checkpoint whose metadata names one of ``run_ids`` (``run_id``, as LangGraph records
        it), with its writes, from every thread: each branch holding one moves to a history without them
        (:meth:`_rewrite`); their objects go at the ``gc`` after the reflog entry ages. Reads every
        checkpoint's metadata of the store once."""
        runs = {str(r) for r in run_ids}
        if not runs:
            return
        with self._lock:
            for thread, ns in self._branches_of(None):
                branch = self._branch(thread, ns)
                keep = {
                    ckpt.id
                    for ckpt in branch.checkpoints.values()
                    if str(self._loads(ckpt.meta).get("run_id")) not in runs
                }
                self._rewrite(thread, ns, keep, "delete_for_runs")

    def _rewrite(self, thread: str, ns: str, keep: set[str], why: str) -> None:
        """Move the thread's branch to a history holding only the checkpoints ``keep`` names and their
        writes, in one transaction (compare-and-swapped from the tip read: another writer's move makes it
        :class:`~tractkv.errors.ConcurrentUpdate`, nothing moved). The longest run of the history that
        loses nothing is kept as is; each later commit kept is made again on top (a new commit with the
        same record and a fresh timestamp), linking what its checkpoint reads that only a dropped commit
        linked (a value it inherited, a message list node it extends), so everything a kept checkpoint
        reads stays reachable. Merge commits after that run are not made again (the history becomes a
        line). The old tip stays in the branch's reflog: ``reset`` to it undoes the move until ``gc``
        ages the entry (``gc(min_age_hours=0)`` reclaims the dropped objects at once). A branch left with
        no checkpoint is deleted as :meth:`delete_thread` deletes one. A commit the saver did not write
        (other than a merge) is :class:`~tractkv.errors.InvalidInput`, nothing moved."""
        branch = self._branch(thread, ns)
        if set(branch.checkpoints) <= keep:
            return
        history = self._history(branch.tip)
        name = branch.ref[len(HEADS) :]
        base: ObjectId | None = None
        cut = 0
        for cut, (oid, commit) in enumerate(history):  # noqa: B007  # cut: the first commit not kept as is
            if commit.parents != ((base,) if base is not None else ()) or not _kept(commit, keep):
                break
            base = oid
        else:
            cut = len(history)
        tail: builtins.list[tuple[ObjectId, Commit]] = []
        for oid, commit in history[cut:]:
            if _record(commit) is None and commit.operation != "annotate":
                if len(commit.parents) > 1:
                    continue  # a merge: its sides' commits are in the history, made again in a line
                raise InvalidInput(
                    f"cannot rewrite {name}: commit {oid} is not a LangGraph checkpoint, writes, message or "
                    "annotation commit (nothing was moved)"
                )
            if _kept(commit, keep):
                tail.append((oid, commit))
        if not any(ckpt in keep for ckpt in branch.checkpoints):
            self._delete_thread_branch(thread, ns)
            return
        have: set[ObjectId] = set()
        for _done, commit in history[:cut]:
            have.update(ObjectId(o) for o in (commit.links or {}).get(LINK, ()))
        session = self._session(branch.ref)
        start = session.writable(why)
        if start.head != branch.tip:  # moved since it was read: read again
            raise ConcurrentUpdate(branch.ref, branch.tip, start.head, f"{why} not done")
        try:
            with session.batch():
                dropped = f"{why}: {len(branch.checkpoints) - len(keep)} checkpoints dropped"
                session.move_branch(start, base, why, dropped)  # type: ignore[arg-type]
                self._remake(session, branch.ref, base, tail, have)
        finally:
            self._forget(branch)
        branch = self._branch(thread, ns)
        latest = branch.checkpoints.get(branch.latest) if branch.latest is not None else None
        ref = latest.values.get(MESSAGES) if latest is not None else None
        if ref is not None and ref.kind == "m":  # the conversation shows the latest checkpoint's messages
            with session.batch():
                self._converse(session, branch, list(self._messages(ref.oid)), ref.oid, None, [])

    def _remake(
        self,
        session: Session,
        ref: str,
        parent: ObjectId | None,
        tail: builtins.list[tuple[ObjectId, Commit]],
        have: set[ObjectId],
    ) -> None:
        """Make each commit of ``tail`` again on ``parent`` (see :meth:`_rewrite`); ``have``: what the
        commits kept as is link."""
        store = self.tract.store
        moved: dict[ObjectId, ObjectId] = {}  # old message commit -> its new one
        for old, commit in tail:
            links = {ObjectId(o) for o in (commit.links or {}).get(LINK, ())}
            links = {moved.get(o, o) for o in links}
            record = _record(commit)
            if record is None:  # an annotation (of a message commit)
                payload = self._annotation(commit)
                target = commit.edit_target
                if not isinstance(payload, dict) or target is None:
                    continue
                info = session.annotate(
                    str(moved.get(target, target)),
                    payload.get("priority"),
                    reason=payload.get("reason"),
                    cache=payload.get("cache"),
                )
                parent = info.commit_id
                continue
            if record.get("kind") == "checkpoint":
                for value in _values(record.get("values"), ref).values():
                    self._reach(value, have, links)
            have |= links
            content = store.get(commit.content) if commit.content is not None else None
            if not isinstance(content, Blob):
                raise DecodeError(f"commit {old}: its content is not a blob", old)
            target = commit.edit_target
            info = session.commit_content(
                content,
                operation=commit.operation,
                target=moved.get(target, target) if target is not None else None,
                message=commit.message,
                metadata=commit.metadata,
                stage=_linking(tuple(sorted(links))),
                tip=Tip(ref, parent),
            )
            moved[old] = parent = info.commit_id

    def _reach(self, ref: _Ref, have: set[ObjectId], out: set[ObjectId]) -> None:
        """Add to ``out`` what reading ``ref`` needs that ``have`` lacks (a message node's older nodes and
        their items up to the first one held)."""
        if ref.kind == "v":
            if ref.oid not in have:
                out.add(ref.oid)
            return
        cursor: ObjectId | None = ref.oid
        while cursor is not None and cursor not in have:  # ends: a node names an older node
            data = self._blob(cursor, "messages")
            out.add(cursor)
            items = data.get("items")
            if not isinstance(items, list):
                raise DecodeError("a LangGraph message list node is malformed", cursor)
            out.update(_oid(i, "a message list", "item") for i in items)
            prev = data.get("prev")
            cursor = _oid(prev, f"list node {cursor}", "prev") if prev is not None else None

    def _history(self, tip: ObjectId | None) -> builtins.list[tuple[ObjectId, Commit]]:
        """Every commit reachable from ``tip``, oldest first (the order the index takes them in)."""
        chain, _reached = self._walk(_Branch("", "", ""), tip)
        return chain[::-1]

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions unique across forks (a counter plus a random fraction), as LangGraph's own savers make."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".", 1)[0])
        return f"{number + 1:032}.{random.random():016}"

    # --- async twins (the same code in a worker thread: the event loop never waits on the store) -------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        items = self.list(config, filter=filter, before=before, limit=limit)
        done = object()
        while True:  # one item at a time in a worker thread: the history is never all in memory at once
            item = await asyncio.to_thread(next, items, done)
            if item is done:
                return
            yield item  # type: ignore[misc]  # not the sentinel

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(lambda: self.prune(thread_ids, strategy=strategy))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)
