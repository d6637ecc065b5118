"""The store interface shared by the LMDB and in-memory stores.

A store is a set of ordered byte tables (:class:`Table`) in one transactional unit:

* ``objects``: id (32 raw bytes) -> canonical bytes of the object. Immutable; a write of an existing id is
  a no-op. The only table that sync moves, together with the refs it names.
* ``refs``: ref name (UTF-8) -> ``<64 hex id>`` or ``ref: <name>`` (symbolic, as ``HEAD`` usually is).
* ``commit_tools`` (index): commit id -> tool-set id, for each commit whose tool set differs from its first
  parent's (where a tool set was introduced or changed). Sparse on purpose: 1,000 commits sharing one tool set
  cost one row, not 1,000 (each commit object carries its tool-set id anyway).
* ``tool_versions`` (index): ``name NUL seq`` -> tool-schema id, every version of a tool oldest first.
* ``reflog``: ``ref NUL seq`` -> CBOR entry. Local history of ref moves (not synced, as in git).
* ``meta``: store format version and settings.
* ``derived``: caches rebuilt from objects (compile state, token counts). Never trusted over objects.
* ``usage``: mutable records of tool executions in progress (completed ones become objects).

Writes go through a :class:`WriteBatch`: reads inside it see its own pending writes (and deletes, and the
index rows and sequence numbers the store will derive from them); nothing reaches the store until the batch
is applied, and then everything lands in one transaction or nothing does.

Sequenced keys (``prefix NUL seq``, seq 8 bytes big-endian: tool versions, log entries) are numbered per
prefix: one more than the highest number the prefix holds in the transaction that writes them (read with a
cursor at the end of the prefix's range), so numbers rise within a prefix and a write touches no row besides
its own. (Format 1 kept one counter for every prefix in ``meta``: a row, so a B-tree page, every commit
wrote; format 2 dropped it.) A number freed by deleting the highest entries of a prefix (gc) may be given
again; entries still present keep their order.

Keys: every key is 1 to :data:`MAX_KEY_BYTES` bytes (LMDB's limit, enforced for both stores when a write is
staged). A read of a key no table can hold finds nothing.

Guarantees (both stores):
    * Atomicity: a batch's objects, index rows, table rows and ref moves land together or not at all.
    * Compare-and-swap: every ref update in a batch carries the value it expects; if any ref holds another
      value when the batch is applied, :class:`~tractkv.errors.RefConflict` is raised and nothing is written.
      The check and the write happen under the store's single-writer lock (across processes for LMDB).
    * Index rows are written by the store itself when an object is first stored, in the same transaction.
"""

from __future__ import annotations

import abc
import os
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final

from tractkv import codec
from tractkv.errors import (
    ContentTooLarge,
    InvalidInput,
    MissingLinkTarget,
    MissingRefTarget,
    RefConflict,
)
from tractkv.ids import ObjectId, hash_bytes, is_object_id, oid_to_raw, raw_to_oid
from tractkv.model import (
    MAX_OBJECT_BYTES,
    Blob,
    Commit,
    StoredObject,
    ToolSchema,
    decode,
    encode_with_id,
    kind_of,
)
from tractkv.store.reader import (
    MAX_KEY_BYTES,
    META_FORMAT,
    META_SEQ,
    SEQ,
    RawReader,
    RawWriter,
    Reader,
    Table,
    last_seq_of,
)

__all__ = [
    "ANY",
    "GC_RUN_TTL_US",
    "MAX_KEY_BYTES",
    "META_FORMAT",
    "META_GC_RUNS",
    "META_GC_SEEN",
    "META_SEQ",
    "SEQ",
    "RawReader",
    "RawWriter",
    "Reader",
    "RefExpectation",
    "Store",
    "Table",
    "WriteBatch",
    "apply_batch",
    "verify_raw",
]

_INDEXES: Final = (Table.COMMIT_TOOLS, Table.TOOL_VERSIONS)  # rows the store derives from objects
_STORE_META: Final = (META_FORMAT, META_SEQ)  # meta rows the store owns (seq: format 1's counter)

# gc beside writers (see apply_batch and tractkv.engine.gc). While a gc runs, ``meta/gc-runs`` lists it
# (20-byte records: token 8, start µs 8, pid 4, big-endian); every other batch applied meanwhile records,
# in the same transaction, each id it staged (new or already stored) or moved a ref to,
# as a row ``gc-seen NUL <raw id>``. gc's deleting transaction keeps every candidate those ids reach, then
# removes its record and, when it was the last gc running, the seen rows. A record older than
# GC_RUN_TTL_US (a gc that crashed) is ignored by writers, so a crash makes them record for a bounded time;
# the next gc (or ``fsck --repair``) drops stale records and, with no gc left, the seen rows.
META_GC_RUNS: Final = b"gc-runs"
META_GC_SEEN: Final = b"gc-seen\0"
GC_RUN_TTL_US: Final = 24 * 3600 * 1_000_000
_GC_RUN = struct.Struct(">8sQI")


class _Any:
    """Marker: a ref update that does not check the old value."""

    def __repr__(self) -> str:
        return "ANY"


ANY: Final = _Any()
"""Pass as ``expected`` to update a ref whatever it holds now."""

RefExpectation = str | None | _Any


class WriteBatch(Reader):
    """Pending writes, applied all at once by :meth:`Store.apply` (or at the end of ``with store.batch()``).

    Reads through the batch see the store as it will be once the batch is applied: its pending objects,
    deletes, rows, log entries and ref moves over the store, plus the index rows and sequence numbers the
    store derives from them (numbered as if no other batch lands first). Within a batch the last write of an
    object, row or ref wins (a put after a delete keeps the object).
    """

    def __init__(self, base: Reader) -> None:
        self._base = base
        self.objects: dict[ObjectId, tuple[bytes, StoredObject | None]] = {}
        self.rows: dict[tuple[Table, bytes], bytes | None] = {}
        self.ref_updates: dict[str, tuple[RefExpectation, str | None]] = {}
        self.log_appends: list[tuple[Table, bytes, bytes]] = []
        self.deletions: set[ObjectId] = set()
        self._log_tables: set[Table] = set()  # the tables log_appends write to (checked on every row read)
        self._log_values: dict[int, Any] = {}  # log entries replaced since last encoded (replace_log)
        # Stored commits the caller holds decoded (a new commit's parent), so deriving the commit_tools row
        # of a new commit need not read and decode its parent again (see note_commit).
        self.known_commits: dict[ObjectId, Commit] = {}
        # Called inside the applying transaction, before anything is written, with a view of the store as
        # that transaction sees it; it may stage more (gc decides there what it deletes). It may run more
        # than once (LMDB re-runs a transaction that outgrew the map): it must restage from scratch.
        self.prepare: Callable[[Reader, WriteBatch], None] | None = None
        self.gc_token: bytes | None = None  # set on gc's own batches: not recorded as a writer's

    def __len__(self) -> int:
        return (
            len(self.objects)
            + len(self.rows)
            + len(self.ref_updates)
            + len(self.log_appends)
            + len(self.deletions)
        )

    # writes -------------------------------------------------------------------------------------------

    def put(self, obj: StoredObject) -> ObjectId:
        """Stage an object and return its id. Staging an object the store has already is a no-op.

        This is where every object the library makes is written, so the one size limit is enforced here: a new
        object whose encoding is over :data:`~tractkv.model.MAX_OBJECT_BYTES` raises :class:`ContentTooLarge`
        (received objects come through :meth:`put_raw`, judged by their transfer's limit).

        The object is encoded and hashed here once: callers take the id ``put`` returns rather than computing
        it first with :func:`~tractkv.model.object_id` (which would encode the object a second time).
        """
        oid, data = encode_with_id(obj)
        if len(data) > MAX_OBJECT_BYTES and oid not in self.objects and not self._base.has(oid):
            raise ContentTooLarge(obj.KIND, len(data), MAX_OBJECT_BYTES)
        if oid not in self.objects:
            self.objects[oid] = (data, obj)
        self.deletions.discard(oid)
        return oid

    def mark(self) -> int:
        """Where the batch stands now (objects staged), for :meth:`drop_since`."""
        return len(self.objects)

    def drop_since(self, mark: int) -> None:
        """Unstage every object staged after :meth:`mark` returned ``mark``: what a commit refused while being
        staged had put, so that nothing it staged is written (nor its links checked). Objects staged before the
        mark stay, even when the refused commit put them again (a no-op)."""
        objects = self.objects
        while len(objects) > mark:
            objects.popitem()  # dicts pop the last inserted item: the objects staged after the mark

    def gc_row(self, key: bytes, value: bytes | None) -> None:
        """Stage a ``meta`` row of gc's bookkeeping (``gc-runs``, ``gc-seen`` rows): gc and fsck only."""
        if key != META_GC_RUNS and not key.startswith(META_GC_SEEN):
            raise InvalidInput(f"meta row {key!r} is not gc's")
        self.rows[(Table.META, key)] = value

    def note_commit(self, oid: ObjectId, commit: Commit) -> None:
        """Tell the batch about a stored commit the caller already holds as ``commit`` (read from the store,
        or written by it), so that applying the batch reads it from here instead of decoding it again."""
        self.known_commits[oid] = commit

    def put_raw(self, oid: ObjectId, data: bytes, obj: StoredObject | None = None) -> None:
        """Stage bytes already verified to hash to ``oid`` (sync does that check while receiving)."""
        if oid not in self.objects:
            self.objects[oid] = (data, obj)
        self.deletions.discard(oid)

    def delete_object(self, oid: ObjectId) -> None:
        """Stage the removal of an object and its index rows (gc only: objects are otherwise immutable)."""
        self.objects.pop(oid, None)
        self.deletions.add(oid)

    def set_ref(self, name: str, value: str | None, expected: RefExpectation = ANY) -> None:
        """Stage a ref move (``value=None`` deletes it), checked against ``expected`` when applied.

        Several moves of one ref in a batch keep the first expectation and the last value.

        Raises:
            InvalidInput: the name is empty or longer than :data:`MAX_KEY_BYTES` in UTF-8.
        """
        if name in self.ref_updates:
            first_expected, _ = self.ref_updates[name]
            self.ref_updates[name] = (first_expected, value)
        else:
            _check_key(name.encode(), "a ref name")
            self.ref_updates[name] = (expected, value)

    def table_put(self, table: Table, key: bytes, value: bytes | None) -> None:
        """Stage a row of a local table (``None`` deletes it).

        Raises:
            InvalidInput: objects, refs and the indexes are written through :meth:`put` / :meth:`set_ref`
                (the store derives index rows itself); ``format`` and ``seq`` in ``meta`` belong to the
                store; the key is empty or longer than :data:`MAX_KEY_BYTES`.
        """
        if table in (Table.OBJECTS, Table.REFS, *_INDEXES):
            raise InvalidInput(f"the {table} table is written through put()/set_ref(), not table_put()")
        if table is Table.META and (
            key in _STORE_META or key == META_GC_RUNS or key.startswith(META_GC_SEEN)
        ):
            raise InvalidInput(f"meta row {key.decode()!r} belongs to the store")
        _check_key(key, "a row key")
        self.rows[(table, key)] = value

    def append_log(self, table: Table, prefix: bytes, value: Any) -> None:
        """Stage an entry keyed ``prefix NUL seq``, where seq is allocated when the batch is applied (one more
        than the highest number the prefix then holds: see the module doc)."""
        if b"\0" in prefix:
            raise InvalidInput("a log prefix cannot hold a NUL byte")
        if table in _NO_LOGS:
            raise InvalidInput(f"log entries cannot go to the {table} table")
        if len(prefix) + 1 + SEQ.size > MAX_KEY_BYTES:  # the key is prefix NUL seq
            raise InvalidInput(
                f"a log prefix must leave room for its NUL and 8-byte number: {len(prefix)} bytes"
            )
        self.log_appends.append((table, prefix, codec.dumps_local(value)))  # local rows: never hashed
        self._log_tables.add(table)

    def replace_log(self, index: int, value: Any) -> None:
        """Replace the value of the ``index``-th entry staged with :meth:`append_log` (same table and key
        prefix; its number is still allocated when the batch is applied). The value is encoded when the batch
        is read or applied, so a value replaced at every commit of a batch is encoded once. ``value`` may be a
        function (no log value is callable): what it returns then is encoded, made only then."""
        if not 0 <= index < len(self.log_appends):
            raise IndexError(index)
        self._log_values[index] = value

    def encoded_logs(self) -> list[tuple[Table, bytes, bytes]]:
        """:attr:`log_appends` with every replaced value encoded (what reads and :func:`apply_batch` use)."""
        if self._log_values:
            for index, value in self._log_values.items():
                table, prefix, _ = self.log_appends[index]
                made = value() if callable(value) else value
                self.log_appends[index] = (table, prefix, codec.dumps_local(made))
            self._log_values.clear()
        return self.log_appends

    # reads through the overlay ------------------------------------------------------------------------

    def get(self, oid: ObjectId) -> StoredObject | None:
        """The object (a pending one as it was staged, without decoding it again), or None."""
        pending = self.objects.get(oid)
        if pending is not None and pending[1] is not None:
            return pending[1]
        return super().get(oid)

    def _raw_get(self, table: Table, key: bytes) -> bytes | None:
        if table is Table.OBJECTS:
            oid = raw_to_oid(key)
            pending = self.objects.get(oid)
            if pending is not None:
                return pending[0]
            if oid in self.deletions:
                return None
        elif table is Table.REFS:
            name = key.decode()
            if name in self.ref_updates:
                value = self.ref_updates[name][1]
                return None if value is None else value.encode()
        elif self._derives_rows(table, key):
            overlay = self._pending_rows(table)  # rows derived when applied: computed, not kept
            if key in overlay:
                return overlay[key]
        elif (table, key) in self.rows:
            return self.rows[(table, key)]
        return self._base._raw_get(table, key)

    def _raw_iter(
        self, table: Table, prefix: bytes = b"", *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        overlay = {k: v for k, v in self._pending_rows(table).items() if k.startswith(prefix)}
        if not overlay:
            yield from self._base._raw_iter(table, prefix, reverse=reverse)
            return
        merged = dict(self._base._raw_iter(table, prefix))
        for key, value in overlay.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        for key in sorted(merged, reverse=reverse):
            yield key, merged[key]

    def _derives_rows(self, table: Table, key: bytes) -> bool:
        """True when applying the batch derives rows of ``table`` (index rows, numbered log entries)."""
        return table in _INDEXES or table in self._log_tables

    def _pending_rows(self, table: Table) -> dict[bytes, bytes | None]:
        """The rows applying this batch writes (a value) or deletes (None) in ``table``, numbered as
        :func:`apply_batch` would number them now."""
        if table is Table.OBJECTS:
            rows: dict[bytes, bytes | None] = {oid_to_raw(o): None for o in self.deletions}
            rows.update((oid_to_raw(o), data) for o, (data, _) in self.objects.items())
            return rows
        if table is Table.REFS:
            return {n.encode(): (None if v is None else v.encode()) for n, (_, v) in self.ref_updates.items()}
        rows = {k: v for (t, k), v in self.rows.items() if t is table}
        if table is Table.COMMIT_TOOLS:
            rows.update(self._pending_commit_tools())
            return rows
        if table is Table.TOOL_VERSIONS:
            rows.update(self._deleted_tool_versions())
            # numbered per tool name, from the store's highest (written before the batch's deletes)
            numbers = _Numbers(self._base._raw_last_seq)
            for oid, tool in self._new_tool_schemas():
                key = tool.name.encode() + b"\0"
                rows[key + SEQ.pack(numbers.next(table, key))] = oid_to_raw(oid)
            return rows
        if table not in self._log_tables:
            return rows  # no numbered rows here
        numbers = _Numbers(self._last_seq_after_rows)  # log entries land after the batch's rows
        for log_table, prefix, value in self.encoded_logs():
            if log_table is table:
                key = prefix + b"\0"
                rows[key + SEQ.pack(numbers.next(table, key))] = value
        return rows

    def _last_seq_after_rows(self, table: Table, prefix: bytes) -> int:
        """The highest number of ``prefix`` once the batch's own rows (written before its log entries) are."""
        if not any(t is table and k.startswith(prefix) for t, k in self.rows):
            return self._base._raw_last_seq(table, prefix)
        merged = dict(self._base._raw_iter(table, prefix))
        for (t, key), value in self.rows.items():
            if t is table and key.startswith(prefix):
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
        return last_seq_of(((k, merged[k]) for k in sorted(merged, reverse=True)), prefix)

    def _is_new(self, oid: ObjectId) -> bool:
        """True when applying the batch adds this pending object (the store does not hold it yet)."""
        return self._base._raw_get(Table.OBJECTS, oid_to_raw(oid)) is None

    def _new_tool_schemas(self) -> Iterator[tuple[ObjectId, ToolSchema]]:
        for oid, (data, obj) in self.objects.items():
            if obj is None and kind_of(data) != ToolSchema.KIND:
                continue
            tool = _decoded(data, obj)
            if isinstance(tool, ToolSchema) and self._is_new(oid):
                yield oid, tool

    def _pending_commit_tools(self) -> dict[bytes, bytes | None]:
        rows: dict[bytes, bytes | None] = {oid_to_raw(o): None for o in self.deletions}
        for oid, (data, obj) in self.objects.items():
            if obj is None and kind_of(data) != Commit.KIND:
                continue
            commit = _decoded(data, obj)
            if not isinstance(commit, Commit) or commit.tools is None or not self._is_new(oid):
                continue
            if commit.tools != _first_parent_tools(self, self._base._raw_get, commit):
                rows[oid_to_raw(oid)] = oid_to_raw(commit.tools)
        return rows

    def _deleted_tool_versions(self) -> dict[bytes, bytes | None]:
        """The version rows applying the batch deletes (those of deleted tool schemas)."""
        rows: dict[bytes, bytes | None] = {}
        for oid in self.deletions:
            raw_oid = oid_to_raw(oid)
            stored = self._base._raw_get(Table.OBJECTS, raw_oid)
            if stored is None or kind_of(stored) != ToolSchema.KIND:
                continue
            tool = decode(stored)
            assert isinstance(tool, ToolSchema)
            for key, value in self._base._raw_iter(Table.TOOL_VERSIONS, tool.name.encode() + b"\0"):
                if value == raw_oid:
                    rows[key] = None
        return rows


class _Numbers:
    """Numbers for sequenced keys, per (table, prefix): one more than the highest the prefix holds, read once
    from ``last`` (:meth:`RawReader.last_seq`) and then counted on within the batch."""

    def __init__(self, last: Callable[[Table, bytes], int]) -> None:
        self._last = last
        self._top: dict[tuple[Table, bytes], int] = {}

    def next(self, table: Table, prefix: bytes) -> int:
        slot = (table, prefix)
        top = self._top.get(slot)
        top = (self._last(table, prefix) if top is None else top) + 1
        self._top[slot] = top
        return top


_NO_LOGS = frozenset((Table.OBJECTS, Table.REFS, Table.META, *_INDEXES))  # tables whose keys are not logs


def _check_key(key: bytes, what: str) -> None:
    if not key or len(key) > MAX_KEY_BYTES:
        raise InvalidInput(f"{what} must be 1 to {MAX_KEY_BYTES} bytes, not {len(key)}")


def _decoded(data: bytes, obj: StoredObject | None) -> StoredObject:
    return decode(data) if obj is None else obj


RawGet = Callable[[Table, bytes], bytes | None]


def _first_parent_tools(batch: WriteBatch, stored: RawGet, commit: Commit) -> ObjectId | None:
    """The tool set of a commit's first parent, staged in ``batch`` or ``stored`` (None: root or absent).

    The batch comes first, so the index row does not depend on the order a batch stages a commit and its
    parent in.
    """
    if not commit.parents:
        return None
    first = commit.parents[0]
    pending = batch.objects.get(first)
    if pending is not None:
        parent: StoredObject | None = _decoded(*pending)
    elif first in batch.known_commits and first not in batch.deletions:
        parent = batch.known_commits[first]
    else:
        raw = stored(Table.OBJECTS, oid_to_raw(commit.parents[0]))
        parent = decode(raw) if raw is not None else None
    return parent.tools if isinstance(parent, Commit) else None


def apply_batch(writer: RawWriter, batch: WriteBatch) -> None:
    """Write a batch through a raw writer inside one transaction (shared by both stores).

    Checks every ref expectation, every staged object's links and every ref target before writing anything, so a
    refusal leaves the store untouched. The caller aborts the transaction if this raises.
    """
    if batch.prepare is not None:
        batch.prepare(_TxnView(writer), batch)
    for name, (expected, _) in batch.ref_updates.items():
        if isinstance(expected, _Any):
            continue
        raw = writer.get(Table.REFS, name.encode())
        actual = None if raw is None else raw.decode()
        if actual != expected:
            raise RefConflict(name, expected, actual)
    _check_presence(writer, batch)
    if batch.gc_token is None and gc_running(writer.get(Table.META, META_GC_RUNS)):
        _record_for_gc(writer, batch)

    numbers = _Numbers(writer.last_seq)  # read only when this batch numbers a key of a prefix
    for oid, (data, obj) in batch.objects.items():
        if not writer.add(Table.OBJECTS, oid_to_raw(oid), data):
            continue  # already stored: objects are immutable, index rows exist already
        stored = decode(data, oid) if obj is None else obj
        if isinstance(stored, Commit):
            if stored.tools is not None and stored.tools != _first_parent_tools(batch, writer.get, stored):
                writer.put(Table.COMMIT_TOOLS, oid_to_raw(oid), oid_to_raw(stored.tools))
        elif isinstance(stored, ToolSchema):
            key = stored.name.encode() + b"\0"
            seq = numbers.next(Table.TOOL_VERSIONS, key)
            writer.put(Table.TOOL_VERSIONS, key + SEQ.pack(seq), oid_to_raw(oid))
    for oid in batch.deletions:
        raw_oid = oid_to_raw(oid)
        existing = writer.get(Table.OBJECTS, raw_oid)
        if existing is None:
            continue
        writer.delete(Table.OBJECTS, raw_oid)
        writer.delete(Table.COMMIT_TOOLS, raw_oid)
        if kind_of(existing) == ToolSchema.KIND:
            tool = decode(existing)
            assert isinstance(tool, ToolSchema)
            for version_key, version_oid in list(
                writer.iter(Table.TOOL_VERSIONS, tool.name.encode() + b"\0")
            ):
                if version_oid == raw_oid:
                    writer.delete(Table.TOOL_VERSIONS, version_key)
    for (table, key), value in batch.rows.items():
        if value is None:
            writer.delete(table, key)
        else:
            writer.put(table, key, value)
    for table, prefix, value in batch.encoded_logs():
        key = prefix + b"\0"
        writer.put(table, key + SEQ.pack(numbers.next(table, key)), value)
    for name, (_, new) in batch.ref_updates.items():
        if new is None:
            writer.delete(Table.REFS, name.encode())
        else:
            writer.put(Table.REFS, name.encode(), new.encode())


def _check_presence(writer: RawWriter, batch: WriteBatch) -> None:
    """What the batch links is stored once it lands, checked inside the writing transaction, each id outside
    the batch looked up once:

    * every link of every object it stages (:class:`MissingLinkTarget`): the store's own invariant, no stored
      object links a missing one, checked where it can be. Writers check links earlier, against a snapshot
      (the validator, a transfer's stream), and gc may delete between that check and this transaction; gc's
      own deleting transaction keeps whatever a writer recorded while it ran (see ``_record_for_gc``), so the
      two cannot both pass with a dangling link. So a writer may trust a cache of what is stored (a handle's
      tool sets, a parent it read): a stale entry is caught here, nothing written;
    * every ref it moves names an object stored once it lands, and so is every object that object links
      directly (deeper ones are, by the invariant): :class:`MissingRefTarget`. The one check every ref move
      passes (commit, reset, branch, merge, switch, sync, bundles), inside the move's own transaction: a
      reflog entry or id whose commit gc removed is refused, not left as a branch every later read fails on.
    """
    objects, deletions, get = batch.objects, batch.deletions, writer.get
    # What a ref this batch compare-and-swaps names now (apply_batch checked the expectations first): a ref
    # never names a missing object (every move passes this check, gc keeps what refs reach), so a new
    # commit's parent, the tip it read, needs no lookup.
    stored: set[ObjectId] = {
        ObjectId(expected)
        for expected, _ in batch.ref_updates.values()
        if type(expected) is str and expected not in deletions
    }

    def present(oid: ObjectId) -> bool:
        if oid in objects or oid in stored:
            return True
        if oid in deletions or get(Table.OBJECTS, oid_to_raw(oid)) is None:
            return False
        stored.add(oid)
        return True

    for oid, (data, staged) in objects.items():
        obj = decode(data, oid) if staged is None else staged
        kind = type(obj)
        if kind is Blob:
            continue  # links nothing: the most common object
        if kind is Commit:  # the other common one, read field by field (a hot loop: no generator)
            assert isinstance(obj, Commit)
            content, parents = obj.content, obj.parents
            if (
                (content is None or content in objects)
                and (not parents or parents[0] in objects or parents[0] in stored)
                and len(parents) < 2
                and obj.tools is None
                and obj.edit_target is None
                and obj.reply_to is None
                and not obj.links
            ):
                continue  # a plain append whose parent and content are staged here or checked already
        for link in obj.iter_links():
            if link not in objects and link not in stored and not present(link):
                raise MissingLinkTarget(f"{obj.KIND} {oid}", link)
    for name, (_, new) in batch.ref_updates.items():
        if new is None or new in objects or not is_object_id(new):
            continue  # a deletion, a target staged here (its links were checked above), a symbolic ref
        target = ObjectId(new)
        raw = None if target in deletions else get(Table.OBJECTS, oid_to_raw(target))
        if raw is None:
            raise MissingRefTarget(name, target, target)
        for link in decode(raw, target).iter_links():
            if not present(link):
                raise MissingRefTarget(name, target, link)


def gc_runs(value: bytes | None) -> list[tuple[bytes, int, int]]:
    """The records of ``meta/gc-runs``: (token, start µs, pid) per gc that announced itself."""
    if not value:
        return []
    return [_GC_RUN.unpack_from(value, at) for at in range(0, len(value) - _GC_RUN.size + 1, _GC_RUN.size)]


def pack_gc_runs(runs: Iterable[tuple[bytes, int, int]]) -> bytes | None:
    """``meta/gc-runs`` holding ``runs`` (None: no row)."""
    data = b"".join(_GC_RUN.pack(*run) for run in runs)
    return data or None


def gc_running(value: bytes | None, now_us: int | None = None) -> bool:
    """True when ``meta/gc-runs`` names a gc younger than :data:`GC_RUN_TTL_US` (writers then record)."""
    if not value:
        return False
    now = time.time_ns() // 1000 if now_us is None else now_us
    return any(now - start < GC_RUN_TTL_US for _, start, _ in gc_runs(value))


def live_gc_runs(value: bytes | None, now_us: int | None = None) -> list[tuple[bytes, int, int]]:
    """The records of gcs that may still run: younger than the limit, and (on this machine: LMDB stores are
    local) their process alive."""
    now = time.time_ns() // 1000 if now_us is None else now_us
    return [run for run in gc_runs(value) if now - run[1] < GC_RUN_TTL_US and _alive(run[2])]


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by another user
    return True


def clear_stale_gc_runs(store: Store) -> int:
    """Drop the records of gcs that crashed (and, with no gc alive, what writers recorded for them): what
    ``fsck --repair`` does. Returns how many records were dropped."""
    batch = store.new_batch()
    batch.gc_token = b"fsck"
    dropped = [0]

    def prepare(view: Reader, staged: WriteBatch) -> None:
        staged.rows.clear()
        value = view.table_get(Table.META, META_GC_RUNS)
        alive = live_gc_runs(value)
        dropped[0] = len(gc_runs(value)) - len(alive)
        if dropped[0]:
            staged.gc_row(META_GC_RUNS, pack_gc_runs(alive))
        if not alive:
            for key, _ in view.table_iter(Table.META, META_GC_SEEN):
                staged.gc_row(key, None)

    batch.prepare = prepare
    store.apply(batch)
    return dropped[0]


def _record_for_gc(writer: RawWriter, batch: WriteBatch) -> None:
    """Record for a running gc every id this batch stages or moves a ref to (gc walks their links)."""
    seen = list(batch.objects)
    seen.extend(
        ObjectId(new) for _, new in batch.ref_updates.values() if new is not None and is_object_id(new)
    )
    for oid in seen:
        writer.put(Table.META, META_GC_SEEN + oid_to_raw(oid), b"")


class _TxnView(Reader):
    """A :class:`Reader` over the applying transaction (what :attr:`WriteBatch.prepare` reads)."""

    def __init__(self, writer: RawWriter) -> None:
        self._writer = writer

    def _raw_get(self, table: Table, key: bytes) -> bytes | None:
        return self._writer.get(table, key)

    def _raw_iter(
        self, table: Table, prefix: bytes = b"", *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        return self._writer.iter(table, prefix, reverse=reverse)

    def _raw_last_seq(self, table: Table, prefix: bytes) -> int:
        return self._writer.last_seq(table, prefix)


class Store(Reader, abc.ABC):
    """A transactional object + ref store (see the module doc for tables and guarantees)."""

    path: str | None = None
    durable: bool = False

    # subclass primitives ------------------------------------------------------------------------------

    @abc.abstractmethod
    def snapshot(self) -> AbstractContextManager[Reader]:
        """A consistent read view for many reads (one LMDB read transaction)."""

    @abc.abstractmethod
    def apply(self, batch: WriteBatch) -> None:
        """Apply a batch in one transaction (see the module's guarantees).

        Raises:
            RefConflict: a ref did not hold the value the batch expected; nothing was written.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Release the store. Further use raises :class:`~tractkv.errors.StoreClosed`."""

    @abc.abstractmethod
    def table_count(self, table: Table) -> int:
        """Number of rows in a table."""

    @abc.abstractmethod
    def size_bytes(self) -> int:
        """Bytes the store occupies (file size for LMDB, payload bytes in memory)."""

    # conveniences -------------------------------------------------------------------------------------

    def new_batch(self) -> WriteBatch:
        """An empty batch reading through to this store."""
        return WriteBatch(self)

    @contextmanager
    def batch(self) -> Iterator[WriteBatch]:
        """``with store.batch() as b:`` stage writes; they are applied when the block ends without error."""
        batch = self.new_batch()
        yield batch
        if len(batch):
            self.apply(batch)

    def put(self, obj: StoredObject) -> ObjectId:
        """Store one object (a no-op if present) and return its id."""
        batch = self.new_batch()
        oid = batch.put(obj)
        self.apply(batch)
        return oid

    def put_many(self, objs: Iterable[StoredObject]) -> list[ObjectId]:
        """Store several objects in one transaction; ids in input order."""
        batch = self.new_batch()
        oids = [batch.put(obj) for obj in objs]
        self.apply(batch)
        return oids

    def set_ref_if_equals(self, name: str, expected: str | None, new: str | None) -> bool:
        """Move a ref only if it holds ``expected`` now (None = absent); True when moved."""
        batch = self.new_batch()
        batch.set_ref(name, new, expected)
        try:
            self.apply(batch)
        except RefConflict:
            return False
        return True

    def set_ref(self, name: str, value: str | None) -> None:
        """Move (or delete, with None) a ref unconditionally."""
        batch = self.new_batch()
        batch.set_ref(name, value)
        self.apply(batch)

    def count_objects(self) -> int:
        """Number of stored objects."""
        return self.table_count(Table.OBJECTS)

    def format_version(self) -> int:
        """The store format version recorded in the store."""
        raw = self.table_get(Table.META, META_FORMAT)
        return int(raw.decode()) if raw is not None else 0

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def verify_raw(oid: ObjectId, data: bytes) -> bool:
    """True when ``data`` hashes to ``oid``."""
    return hash_bytes(data) == oid
