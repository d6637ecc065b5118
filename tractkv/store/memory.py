"""An in-memory store with the same interface and guarantees as the LMDB store (minus durability)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tractkv.errors import StoreClosed
from tractkv.store.base import RawWriter, Reader, Store, Table, WriteBatch, apply_batch, ensure_format


class _DictTables(RawWriter):
    """Tables as dicts; writes go to a copy-on-write overlay so a failed batch leaves nothing behind."""

    def __init__(self, tables: dict[Table, dict[bytes, bytes]]) -> None:
        self._tables = tables
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

    def put(self, table: Table, key: bytes, value: bytes) -> None:
        self.pending.setdefault(table, {})[key] = value

    def add(self, table: Table, key: bytes, value: bytes) -> bool:
        if self.get(table, key) is not None:
            return False
        self.put(table, key, value)
        return True

    def delete(self, table: Table, key: bytes) -> None:
        self.pending.setdefault(table, {})[key] = None

    def commit(self) -> None:
        for table, rows in self.pending.items():
            target = self._tables[table]
            for key, value in rows.items():
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value
        self.pending.clear()


class MemoryStore(Store):
    """A store held in process memory: for tests, scratch sessions and ``Tract.open()`` without a path.

    Guarantees: batches are atomic and ref updates compare-and-swap, exactly as in the LMDB store, and the
    store is safe to use from several threads. Nothing survives the process.
    """

    def __init__(self) -> None:
        self._tables: dict[Table, dict[bytes, bytes]] = {t: {} for t in Table}
        self._lock = threading.RLock()
        self._closed = False
        writer = _DictTables(self._tables)
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
        # Reads of immutable objects need no isolation; refs and rows are read one by one as in a fresh
        # LMDB read transaction per call. Copying the tables would make the snapshot exact but O(store).
        yield self

    def apply(self, batch: WriteBatch) -> None:
        self._check()
        with self._lock:
            writer = _DictTables(self._tables)
            apply_batch(writer, batch)
            writer.commit()

    def close(self) -> None:
        self._closed = True

    def table_count(self, table: Table) -> int:
        self._check()
        return len(self._tables[table])

    def size_bytes(self) -> int:
        return sum(len(k) + len(v) for rows in self._tables.values() for k, v in rows.items())

    def __repr__(self) -> str:
        return f"MemoryStore(objects={len(self._tables[Table.OBJECTS])})"
