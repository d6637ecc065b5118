"""An in-memory store with the same interface and guarantees as the LMDB store (minus durability).

A snapshot is exact, as an LMDB read transaction is: while one is open, every batch applied records the
values it replaces in the snapshot's undo log, so opening a snapshot costs nothing and a write costs one
dict entry per changed row and open snapshot.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from tractkv.errors import StoreClosed, StoreError
from tractkv.store.base import SEQ, RawWriter, Reader, Store, Table, WriteBatch, apply_batch
from tractkv.store.format import ensure_format
from tractkv.store.reader import last_seq_of


class _DictTables(RawWriter):
    """Tables as dicts; writes go to a copy-on-write overlay so a failed batch leaves nothing behind.

    ``tops`` caches :meth:`last_seq` of the committed tables per (table, prefix), kept by :meth:`commit`
    (dicts are unordered: without it each sequenced write would scan its table)."""

    def __init__(
        self, tables: dict[Table, dict[bytes, bytes]], tops: dict[tuple[Table, bytes], int] | None = None
    ) -> None:
        self._tables = tables
        self._tops = {} if tops is None else tops
        self.pending: dict[Table, dict[bytes, bytes | None]] = {}

    def get(self, table: Table, key: bytes) -> bytes | None:
        pending = self.pending.get(table)
        if pending is not None and key in pending:
            return pending[key]
        return self._tables[table].get(key)

    def iter(
        self, table: Table, prefix: bytes = b"", *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        rows = dict(self._tables[table])
        for key, value in self.pending.get(table, {}).items():
            if value is None:
                rows.pop(key, None)
            else:
                rows[key] = value
        for key in sorted((k for k in rows if k.startswith(prefix)), reverse=reverse):
            yield key, rows[key]

    def count(self, table: Table) -> int:
        return sum(1 for _ in self.iter(table))

    def last_seq(self, table: Table, prefix: bytes) -> int:
        pending = self.pending.get(table, {})
        if any(value is None and key.startswith(prefix) for key, value in pending.items()):
            return super().last_seq(table, prefix)  # a pending delete in the range: look at every key
        top = self._tops.get((table, prefix))
        if top is None:
            rows = self._tables[table]
            keys = sorted((k for k in rows if k.startswith(prefix)), reverse=True)
            top = last_seq_of(((k, rows[k]) for k in keys), prefix)
            self._tops[(table, prefix)] = top
        size = len(prefix) + SEQ.size
        for key in pending:
            if len(key) == size and key.startswith(prefix):
                top = max(top, SEQ.unpack_from(key, len(prefix))[0])
        return int(top)

    def put(self, table: Table, key: bytes, value: bytes) -> None:
        self.pending.setdefault(table, {})[key] = value

    def add(self, table: Table, key: bytes, value: bytes) -> bool:
        if self.get(table, key) is not None:
            return False
        self.put(table, key, value)
        return True

    def delete(self, table: Table, key: bytes) -> None:
        self.pending.setdefault(table, {})[key] = None

    def commit(self, snapshots: Iterable[_MemorySnapshot] = ()) -> None:
        """Write the pending rows, first saving the values they replace in every open snapshot."""
        for table, rows in self.pending.items():
            target = self._tables[table]
            for snapshot in snapshots:
                snapshot.remember(table, target, rows)
            for key, value in rows.items():
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value
                if len(key) > SEQ.size and (table, key[: -SEQ.size]) in self._tops:  # a sequenced key
                    slot = (table, key[: -SEQ.size])
                    if value is None:
                        del self._tops[slot]  # its highest may be gone: read again when next asked
                    else:
                        self._tops[slot] = max(self._tops[slot], SEQ.unpack_from(key, len(key) - SEQ.size)[0])
        self.pending.clear()


class _MemorySnapshot(Reader):
    """The tables as they were when the snapshot opened: the live tables behind an undo log."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._undo: dict[Table, dict[bytes, bytes | None]] = {}
        self.closed = False  # set when its with-block ends: the undo log stops following writes then

    def _check(self) -> None:
        if self.closed:
            raise StoreError("a snapshot was read after its with-block ended")
        self._store._check()

    def remember(self, table: Table, live: dict[bytes, bytes], changes: dict[bytes, bytes | None]) -> None:
        """Keep the values ``changes`` are about to replace (None: the row did not exist), first one wins."""
        undo = self._undo.setdefault(table, {})
        for key in changes:
            if key not in undo:
                undo[key] = live.get(key)

    def _raw_get(self, table: Table, key: bytes) -> bytes | None:
        store = self._store
        self._check()
        with store._lock:
            undo = self._undo.get(table)
            if undo is not None and key in undo:
                return undo[key]
            return store._tables[table].get(key)

    def _raw_iter(
        self, table: Table, prefix: bytes = b"", *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        store = self._store
        self._check()
        with store._lock:
            rows = {k: v for k, v in store._tables[table].items() if k.startswith(prefix)}
            for key, value in self._undo.get(table, {}).items():
                if not key.startswith(prefix):
                    continue
                if value is None:
                    rows.pop(key, None)
                else:
                    rows[key] = value
        return iter(sorted(rows.items(), reverse=reverse))


class MemoryStore(Store):
    """A store held in process memory: for tests, scratch sessions and ``Tract.open()`` without a path.

    Guarantees: batches are atomic and ref updates compare-and-swap, exactly as in the LMDB store, and the
    store is safe to use from several threads. Nothing survives the process.
    """

    def __init__(self) -> None:
        self._tables: dict[Table, dict[bytes, bytes]] = {t: {} for t in Table}
        self._lock = threading.RLock()
        self._closed = False
        self._snapshots: set[_MemorySnapshot] = set()
        self._tops: dict[tuple[Table, bytes], int] = {}  # see _DictTables
        writer = _DictTables(self._tables, self._tops)
        ensure_format(writer)
        writer.commit()

    def _check(self) -> None:
        if self._closed:
            raise StoreClosed

    def _raw_get(self, table: Table, key: bytes) -> bytes | None:
        self._check()
        return self._tables[table].get(key)

    def _raw_iter(
        self, table: Table, prefix: bytes = b"", *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        self._check()
        with self._lock:
            rows = [(k, v) for k, v in self._tables[table].items() if k.startswith(prefix)]
        rows.sort(reverse=reverse)
        return iter(rows)

    @contextmanager
    def snapshot(self) -> Iterator[Reader]:
        self._check()
        snapshot = _MemorySnapshot(self)
        with self._lock:
            self._snapshots.add(snapshot)
        try:
            yield snapshot
        finally:
            snapshot.closed = True
            with self._lock:
                self._snapshots.discard(snapshot)

    def apply(self, batch: WriteBatch) -> None:
        self._check()
        with self._lock:
            writer = _DictTables(self._tables, self._tops)
            apply_batch(writer, batch)
            writer.commit(self._snapshots)

    def close(self) -> None:
        self._closed = True

    def table_count(self, table: Table) -> int:
        self._check()
        return len(self._tables[table])

    def size_bytes(self) -> int:
        return sum(len(k) + len(v) for rows in self._tables.values() for k, v in rows.items())

    def __repr__(self) -> str:
        return f"MemoryStore(objects={len(self._tables[Table.OBJECTS])})"
