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
* ``meta``: store format version, sequence counter, and settings.
* ``derived``: caches rebuilt from objects (compile state, token counts). Never trusted over objects.
* ``usage``: mutable records of tool executions in progress (completed ones become objects).

Writes go through a :class:`WriteBatch`: reads inside it see its own pending writes; nothing reaches the
store until the batch is applied, and then everything lands in one transaction or nothing does.

Guarantees (both stores):
    * Atomicity: a batch's objects, index rows, table rows and ref moves land together or not at all.
    * Compare-and-swap: every ref update in a batch carries the value it expects; if any ref holds another
      value when the batch is applied, :class:`~tractkv.errors.RefConflict` is raised and nothing is written.
      The check and the write happen under the store's single-writer lock (across processes for LMDB).
    * Index rows are written by the store itself when an object is first stored, in the same transaction.
"""

from __future__ import annotations

import abc
import enum
import struct
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final

from tractkv import codec
from tractkv.errors import InvalidInput, ObjectNotFound, RefConflict
from tractkv.ids import ObjectId, hash_bytes, is_oid_prefix, oid_to_raw, raw_to_oid
from tractkv.model import Commit, StoredObject, ToolSchema, decode, encode_with_id, kind_of

STORE_FORMAT: Final = 1  # kept in meta["format"]; a store with a higher number is refused on open


class Table(enum.StrEnum):
    """The named tables of a store (LMDB named databases)."""

    OBJECTS = "objects"
    REFS = "refs"
    COMMIT_TOOLS = "commit_tools"
    TOOL_VERSIONS = "tool_versions"
    REFLOG = "reflog"
    META = "meta"
    DERIVED = "derived"
    USAGE = "usage"


META_FORMAT = b"format"
META_SEQ = b"seq"  # 8-byte big-endian counter shared by every sequenced append
SEQ = struct.Struct(">Q")


class _Any:
    """Marker: a ref update that does not check the old value."""

    def __repr__(self) -> str:
        return "ANY"


ANY: Final = _Any()
"""Pass as ``expected`` to update a ref whatever it holds now."""

RefExpectation = str | None | _Any


class RawReader(abc.ABC):
    """Byte-level reads of one consistent view of the tables."""

    @abc.abstractmethod
    def get(self, table: Table, key: bytes) -> bytes | None: ...

    @abc.abstractmethod
    def iter(
        self, table: Table, prefix: bytes = b"", *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Rows whose key starts with ``prefix``, in key order (descending with ``reverse``)."""

    @abc.abstractmethod
    def count(self, table: Table) -> int: ...


class RawWriter(RawReader):
    """Byte-level writes inside one transaction (used only while a batch is applied)."""

    @abc.abstractmethod
    def put(self, table: Table, key: bytes, value: bytes) -> None: ...

    @abc.abstractmethod
    def add(self, table: Table, key: bytes, value: bytes) -> bool:
        """Put unless the key exists; True when written."""

    @abc.abstractmethod
    def delete(self, table: Table, key: bytes) -> None: ...


class Reader:
    """Typed reads (objects, refs, table rows) over a :class:`RawReader`-like source.

    Mapping semantics: ``reader[oid]`` raises :class:`ObjectNotFound`, ``reader.get(oid)`` returns None,
    ``oid in reader`` tests presence. Every object read is checked against its id.
    """

    def _raw_get(self, table: Table, key: bytes) -> bytes | None:
        raise NotImplementedError

    def _raw_iter(
        self, table: Table, prefix: bytes = b"", *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        raise NotImplementedError

    # objects ------------------------------------------------------------------------------------------

    def get_raw(self, oid: ObjectId) -> bytes | None:
        """The stored bytes of an object, or None."""
        return self._raw_get(Table.OBJECTS, oid_to_raw(oid))

    def get(self, oid: ObjectId) -> StoredObject | None:
        """The object, or None when absent.

        Raises:
            CorruptObject: the stored bytes do not hash to ``oid``.
        """
        data = self.get_raw(oid)
        return None if data is None else decode(data, oid)

    def __getitem__(self, oid: ObjectId) -> StoredObject:
        obj = self.get(oid)
        if obj is None:
            raise ObjectNotFound(oid)
        return obj

    def __contains__(self, oid: object) -> bool:
        return isinstance(oid, str) and self.has(ObjectId(oid))

    def has(self, oid: ObjectId) -> bool:
        """True when the object is stored."""
        return self._raw_get(Table.OBJECTS, oid_to_raw(oid)) is not None

    def get_commit(self, oid: ObjectId) -> Commit:
        """The commit with this id.

        Raises:
            ObjectNotFound: absent. InvalidInput: the object is not a commit.
        """
        obj = self[oid]
        if not isinstance(obj, Commit):
            raise InvalidInput(f"{oid} is a {obj.KIND}, not a commit")
        return obj

    def iter_oids(self) -> Iterator[ObjectId]:
        """Every stored object id, in byte order."""
        for key, _ in self._raw_iter(Table.OBJECTS):
            yield raw_to_oid(key)

    def iter_raw_objects(self) -> Iterator[tuple[ObjectId, bytes]]:
        """Every (id, stored bytes) pair, unverified (fsck checks them)."""
        for key, value in self._raw_iter(Table.OBJECTS):
            yield raw_to_oid(key), value

    def resolve_prefix(self, prefix: str, *, kind: str | None = None) -> list[ObjectId]:
        """Ids starting with a hex prefix (4+ digits); up to 2 (enough to tell unique from ambiguous).

        With ``kind`` (``"commit"``...) only objects of that kind count, so a blob sharing the prefix neither
        hides a second commit nor makes a unique commit prefix look ambiguous.
        """
        if not is_oid_prefix(prefix):
            raise InvalidInput(f"{prefix!r} is not a hex id prefix of 4 to 64 digits")
        raw_prefix = bytes.fromhex(prefix[: len(prefix) - len(prefix) % 2])
        out: list[ObjectId] = []
        for key, data in self._raw_iter(Table.OBJECTS, raw_prefix):
            oid = raw_to_oid(key)
            if oid.startswith(prefix) and (kind is None or kind_of(data) == kind):
                out.append(oid)
                if len(out) == 2:
                    break
        return out

    # refs ---------------------------------------------------------------------------------------------

    def get_ref(self, name: str) -> str | None:
        """A ref's value: an id, ``ref: <name>`` for a symbolic ref, or None when absent."""
        value = self._raw_get(Table.REFS, name.encode())
        return None if value is None else value.decode()

    def iter_refs(self, prefix: str = "") -> Iterator[tuple[str, str]]:
        """(name, value) of every ref whose name starts with ``prefix``, in name order."""
        for key, value in self._raw_iter(Table.REFS, prefix.encode()):
            yield key.decode(), value.decode()

    # indexes and tables -------------------------------------------------------------------------------

    def commit_toolset(self, commit_id: ObjectId) -> ObjectId | None:
        """The tool-set id a commit carries, or None."""
        return self.get_commit(commit_id).tools

    def iter_toolset_changes(self) -> Iterator[tuple[ObjectId, ObjectId]]:
        """(commit, tool set) for every commit whose tool set differs from its first parent's (the index)."""
        for key, value in self._raw_iter(Table.COMMIT_TOOLS):
            yield raw_to_oid(key), raw_to_oid(value)

    def tool_versions(self, name: str) -> list[ObjectId]:
        """Every stored schema id for a tool name, oldest first (from the index)."""
        return [raw_to_oid(v) for _, v in self._raw_iter(Table.TOOL_VERSIONS, name.encode() + b"\0")]

    def tool_names(self) -> list[str]:
        """Every tool name with at least one stored schema, sorted."""
        names: list[str] = []
        for key, _ in self._raw_iter(Table.TOOL_VERSIONS):
            name = key[: -(SEQ.size + 1)].decode()
            if not names or names[-1] != name:
                names.append(name)
        return names

    def table_get(self, table: Table, key: bytes) -> bytes | None:
        """A row of a local table."""
        return self._raw_get(table, key)

    def table_iter(
        self, table: Table, prefix: bytes = b"", *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Rows of a local table whose key starts with ``prefix``."""
        return self._raw_iter(table, prefix, reverse=reverse)

    def log_entries(self, table: Table, prefix: bytes, *, reverse: bool = False) -> Iterator[tuple[int, Any]]:
        """(sequence number, decoded value) of entries appended with :meth:`WriteBatch.append_log`."""
        full = prefix + b"\0"
        for key, value in self._raw_iter(table, full, reverse=reverse):
            (seq,) = SEQ.unpack(key[len(full) :])
            yield seq, codec.loads(value)


class WriteBatch(Reader):
    """Pending writes, applied all at once by :meth:`Store.apply` (or at the end of ``with store.batch()``).

    Reads through the batch see its own pending writes first, then the store.
    """

    def __init__(self, base: Reader) -> None:
        self._base = base
        self.objects: dict[ObjectId, tuple[bytes, StoredObject | None]] = {}
        self.rows: dict[tuple[Table, bytes], bytes | None] = {}
        self.ref_updates: dict[str, tuple[RefExpectation, str | None]] = {}
        self.log_appends: list[tuple[Table, bytes, bytes]] = []
        self.deletions: set[ObjectId] = set()

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
        """Stage an object; return its id. Staging an object the store has already is a no-op."""
        oid, data = encode_with_id(obj)
        if oid not in self.objects:
            self.objects[oid] = (data, obj)
        return oid

    def put_raw(self, oid: ObjectId, data: bytes, obj: StoredObject | None = None) -> None:
        """Stage bytes already verified to hash to ``oid`` (sync does that check while receiving)."""
        if oid not in self.objects:
            self.objects[oid] = (data, obj)

    def delete_object(self, oid: ObjectId) -> None:
        """Stage the removal of an object and its index rows (gc only: objects are otherwise immutable)."""
        self.objects.pop(oid, None)
        self.deletions.add(oid)

    def set_ref(self, name: str, value: str | None, expected: RefExpectation = ANY) -> None:
        """Stage a ref move (``value=None`` deletes it), checked against ``expected`` when applied.

        Several moves of one ref in a batch keep the first expectation and the last value.
        """
        if name in self.ref_updates:
            first_expected, _ = self.ref_updates[name]
            self.ref_updates[name] = (first_expected, value)
        else:
            self.ref_updates[name] = (expected, value)

    def table_put(self, table: Table, key: bytes, value: bytes | None) -> None:
        """Stage a row of a local table (``None`` deletes it)."""
        if table in (Table.OBJECTS, Table.REFS):
            raise InvalidInput(f"use put()/set_ref() for the {table} table")
        self.rows[(table, key)] = value

    def append_log(self, table: Table, prefix: bytes, value: Any) -> None:
        """Stage an entry keyed ``prefix NUL seq``, where seq is allocated when the batch is applied."""
        if b"\0" in prefix:
            raise InvalidInput("a log prefix cannot hold a NUL byte")
        self.log_appends.append((table, prefix, codec.dumps(value)))

    # reads through the overlay ------------------------------------------------------------------------

    def _raw_get(self, table: Table, key: bytes) -> bytes | None:
        if table is Table.OBJECTS:
            pending = self.objects.get(raw_to_oid(key))
            if pending is not None:
                return pending[0]
        elif table is Table.REFS:
            name = key.decode()
            if name in self.ref_updates:
                value = self.ref_updates[name][1]
                return None if value is None else value.encode()
        elif (table, key) in self.rows:
            return self.rows[(table, key)]
        return self._base._raw_get(table, key)

    def _raw_iter(
        self, table: Table, prefix: bytes = b"", *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        overlay: dict[bytes, bytes | None]
        if table is Table.OBJECTS:
            overlay = {oid_to_raw(o): d for o, (d, _) in self.objects.items()}
        elif table is Table.REFS:
            overlay = {
                n.encode(): (None if v is None else v.encode()) for n, (_, v) in self.ref_updates.items()
            }
        else:
            overlay = {k: v for (t, k), v in self.rows.items() if t is table}
        overlay = {k: v for k, v in overlay.items() if k.startswith(prefix)}
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


def _first_parent_tools(writer: RawReader, commit: Commit) -> ObjectId | None:
    if not commit.parents:
        return None
    raw = writer.get(Table.OBJECTS, oid_to_raw(commit.parents[0]))
    parent = decode(raw) if raw is not None else None
    return parent.tools if isinstance(parent, Commit) else None


def _read_seq(reader: RawReader) -> int:
    raw = reader.get(Table.META, META_SEQ)
    return SEQ.unpack(raw)[0] if raw is not None else 0


def apply_batch(writer: RawWriter, batch: WriteBatch) -> None:
    """Write a batch through a raw writer inside one transaction (shared by both stores).

    Checks every ref expectation before writing anything, so a conflict leaves the store untouched.
    The caller aborts the transaction if this raises.
    """
    for name, (expected, _) in batch.ref_updates.items():
        if isinstance(expected, _Any):
            continue
        raw = writer.get(Table.REFS, name.encode())
        actual = None if raw is None else raw.decode()
        if actual != expected:
            raise RefConflict(name, expected, actual)

    seq = seq_start = -1  # the shared counter is read only when this batch allocates a number
    for oid, (data, obj) in batch.objects.items():
        if not writer.add(Table.OBJECTS, oid_to_raw(oid), data):
            continue  # already stored: objects are immutable, index rows exist already
        stored = decode(data, oid) if obj is None else obj
        if isinstance(stored, Commit):
            if stored.tools is not None and stored.tools != _first_parent_tools(writer, stored):
                writer.put(Table.COMMIT_TOOLS, oid_to_raw(oid), oid_to_raw(stored.tools))
        elif isinstance(stored, ToolSchema):
            if seq < 0:
                seq = seq_start = _read_seq(writer)
            seq += 1
            writer.put(Table.TOOL_VERSIONS, stored.name.encode() + b"\0" + SEQ.pack(seq), oid_to_raw(oid))
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
    for table, prefix, value in batch.log_appends:
        if seq < 0:
            seq = seq_start = _read_seq(writer)
        seq += 1
        writer.put(table, prefix + b"\0" + SEQ.pack(seq), value)
    for name, (_, new) in batch.ref_updates.items():
        if new is None:
            writer.delete(Table.REFS, name.encode())
        else:
            writer.put(Table.REFS, name.encode(), new.encode())
    if seq != seq_start:
        writer.put(Table.META, META_SEQ, SEQ.pack(seq))


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


# --- store format and migrations -------------------------------------------------------------------------

Migration = Any  # Callable[[RawWriter], None]: upgrades a store from version N to N + 1 in place
MIGRATIONS: dict[int, Migration] = {}
"""``MIGRATIONS[n]`` upgrades a store of format ``n`` to ``n + 1``. Format 1 is the first; a later format
adds its step here, and :func:`ensure_format` runs every step a store needs in the opening transaction."""


def ensure_format(writer: RawWriter) -> int:
    """Stamp a new store, or check (and migrate) an existing one; returns the version found.

    Raises:
        StoreFormatError: the store is newer than this tractkv, or no migration path exists.
    """
    from tractkv.errors import StoreFormatError

    raw = writer.get(Table.META, META_FORMAT)
    if raw is None:
        if writer.count(Table.OBJECTS) or writer.count(Table.REFS):
            raise StoreFormatError("store has data but no format version: not a tractkv store")
        writer.put(Table.META, META_FORMAT, str(STORE_FORMAT).encode())
        return STORE_FORMAT
    try:
        found = int(raw.decode())
    except ValueError as exc:
        raise StoreFormatError(f"unreadable store format version {raw!r}") from exc
    if found > STORE_FORMAT:
        raise StoreFormatError(
            f"store format {found} is newer than this tractkv supports ({STORE_FORMAT}); upgrade tractkv"
        )
    version = found
    while version < STORE_FORMAT:
        step = MIGRATIONS.get(version)
        if step is None:
            raise StoreFormatError(f"no migration from store format {version} to {version + 1}")
        step(writer)
        version += 1
        writer.put(Table.META, META_FORMAT, str(version).encode())
    return found
