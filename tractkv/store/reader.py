"""Tables, raw access to them, and the typed reads every store, snapshot and write batch shares.

See :mod:`tractkv.store.base` for what each table holds and the guarantees a store gives.
"""

from __future__ import annotations

import abc
import enum
import struct
from collections.abc import Iterable, Iterator
from typing import Any, Final

from tractkv import codec
from tractkv.errors import InvalidInput, ObjectNotFound
from tractkv.ids import ObjectId, is_object_id, is_oid_prefix, oid_to_raw, raw_to_oid
from tractkv.model import Commit, StoredObject, decode, kind_of


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
META_SEQ = b"seq"  # format 1's counter of sequenced appends (the migration to format 2 drops it)
SEQ = struct.Struct(">Q")  # the number ending a sequenced key, ``prefix NUL seq``
MAX_KEY_BYTES: Final = 511  # LMDB's key size limit (a build default), applied to both stores


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

    def last_seq(self, table: Table, prefix: bytes) -> int:
        """The highest number ending a key ``prefix seq`` (``prefix`` ends with its NUL; 0: no such key)."""
        return last_seq_of(self.iter(table, prefix, reverse=True), prefix)


def last_seq_of(rows: Iterator[tuple[bytes, bytes]], prefix: bytes) -> int:
    """The first number ending a key ``prefix seq`` among ``rows`` (keys in descending order), or 0.

    Keys of one length sort as their numbers do, so the first key of that length is the highest."""
    size = len(prefix) + SEQ.size
    for key, _ in rows:
        if len(key) == size:
            return int(SEQ.unpack_from(key, len(prefix))[0])
    return 0


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
    ``oid in reader`` tests presence (False for anything that is not an object id). Every object read is
    checked against its id. A malformed id given to ``get``, ``[]``, ``has`` or ``get_raw`` raises
    :class:`~tractkv.errors.InvalidObjectId`.

    Three kinds of reader share this contract: a store (each read sees the latest applied batch), a
    ``store.snapshot()`` (one consistent view: batches applied after it opened are invisible) and a
    :class:`WriteBatch` (the store as it will be once the batch is applied).
    """

    def _raw_get(self, table: Table, key: bytes) -> bytes | None:
        raise NotImplementedError

    def _raw_iter(
        self, table: Table, prefix: bytes = b"", *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        raise NotImplementedError

    def _raw_last_seq(self, table: Table, prefix: bytes) -> int:
        """:meth:`RawReader.last_seq` over this view (a store may answer it without reading the range)."""
        return last_seq_of(self._raw_iter(table, prefix, reverse=True), prefix)

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
        return is_object_id(oid) and self.has(ObjectId(str(oid)))

    def has(self, oid: ObjectId) -> bool:
        """True when the object is stored."""
        return self._raw_get(Table.OBJECTS, oid_to_raw(oid)) is not None

    def stored(self, oids: Iterable[ObjectId]) -> set[ObjectId]:
        """The ids among ``oids`` whose objects are stored (one lookup each; a store's snapshot does them in
        one tight loop). Text that is not an object id is never stored, and is left out rather than raising."""
        return {oid for oid in oids if is_object_id(oid) and self.has(oid)}

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
        """The tool-set id a commit carries, or None.

        Raises:
            ObjectNotFound: no such object. InvalidInput: the object is not a commit.
        """
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
