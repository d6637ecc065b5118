"""The LMDB store: one LMDB environment (a directory holding ``data.mdb`` and ``lock.mdb``) per store.

This is the only module that imports lmdb.

Guarantees:
    * Durability: with ``durable=True`` (the default) a batch is on disk when :meth:`LmdbStore.apply`
      returns (LMDB fsyncs data and meta pages at commit). With ``durable=False`` commits are not fsynced:
      about 5-10x faster, safe against a crash of the process (the OS still holds the pages), but an OS
      crash or power loss may lose the last transactions (and LMDB warns that a file system that reorders
      writes can then corrupt the file). Call :meth:`LmdbStore.sync` to flush at a point of your choosing.
    * Atomicity and isolation: every batch is one LMDB write transaction. LMDB admits one writer at a time
      across all processes (a lock in ``lock.mdb``), so compare-and-swap on refs is atomic across
      processes. Readers see a consistent snapshot and never block writers.
    * Growth: the memory map starts at ``map_size`` and doubles whenever a transaction does not fit; the
      whole batch is then re-applied (a failed LMDB transaction is lost whole, never half-written).
      Another process's growth is picked up on the next transaction.
    * Processes: one LMDB environment per path per process (LMDB's rule; opening a path twice in one
      process shares the environment). A store must not be used across ``fork()``: the child gets a
      :class:`~tractkv.errors.StoreError` and must open its own. Reader slots left by killed processes are
      cleared on open.

Caveats: never put a store on NFS or another network file system (LMDB's locks do not work there).
A full disk makes the write fail with :class:`~tractkv.errors.StoreError`; nothing is half-written.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import lmdb

from tractkv.errors import StoreClosed, StoreError, StoreFormatError, TractError
from tractkv.store.base import (
    MAX_KEY_BYTES,
    META_FORMAT,
    RawWriter,
    Reader,
    Store,
    Table,
    WriteBatch,
    apply_batch,
)
from tractkv.store.format import STORE_FORMAT, ensure_format

DEFAULT_MAP_SIZE = 64 * 1024 * 1024  # bytes; the map doubles on demand, the file grows only as used
MAX_MAP_SIZE = 1 << 44  # 16 TiB: a ceiling for doubling, far above any sane store
MAX_READERS = 254  # concurrent read transactions across all processes and threads
_MAX_DBS = len(Table) + 4  # fixed when the environment opens: room for tables a later format adds


class _Env:
    """One opened LMDB environment, shared by every LmdbStore of its path in this process."""

    def __init__(self, path: str, durable: bool, map_size: int) -> None:
        self.path = path
        self.durable = durable
        self.pid = os.getpid()
        self.refs = 0
        try:
            self.env = lmdb.open(
                path,
                map_size=map_size,
                subdir=True,
                max_dbs=_MAX_DBS,
                max_readers=MAX_READERS,
                sync=durable,
                metasync=durable,
                readahead=False,  # random access by hash: readahead only pollutes the page cache
                meminit=False,
                lock=True,
            )
            self.env.reader_check()  # clear reader slots left by killed processes
            if self.env.max_key_size() < MAX_KEY_BYTES:
                limit = self.env.max_key_size()
                self.env.close()
                raise StoreError(f"this LMDB build takes keys of {limit} bytes at most, not {MAX_KEY_BYTES}")
            with self.env.begin(write=True) as txn:
                self.dbs = {t: self.env.open_db(t.value.encode(), txn=txn, create=True) for t in Table}
        except lmdb.Error as exc:
            raise StoreError(f"cannot open store at {path}: {exc}") from exc
        self.write_lock = threading.Lock()  # LMDB write txns must not interleave between threads


_ENVS: dict[str, _Env] = {}
_ENVS_LOCK = threading.Lock()
_PID = os.getpid()  # this process's id, refreshed in a forked child (os.getpid() is a system call)


def _after_fork_in_child() -> None:
    global _PID  # noqa: PLW0603 - one process-wide value, written only here
    _PID = os.getpid()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _LmdbTxn(RawWriter):
    def __init__(self, txn: Any, dbs: dict[Table, Any]) -> None:
        self.txn = txn
        self.dbs = dbs

    def get(self, table: Table, key: bytes) -> bytes | None:
        try:
            value = self.txn.get(key, db=self.dbs[table])
        except lmdb.BadValsizeError:
            return None  # an empty or oversized key: no row can have it
        return None if value is None else bytes(value)

    def iter(
        self, table: Table, prefix: bytes = b"", *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        with self.txn.cursor(db=self.dbs[table]) as cursor:
            if not reverse:
                if not cursor.set_range(prefix):
                    return
                for key, value in cursor:
                    if not key.startswith(prefix):
                        return
                    yield bytes(key), bytes(value)
                return
            # reverse: position on the last key with this prefix
            upper = _prefix_upper_bound(prefix)
            if upper is None:
                found = cursor.last()
            elif cursor.set_range(upper):
                found = cursor.prev()
            else:
                found = cursor.last()
            while found:
                key = cursor.key()
                if not key.startswith(prefix):
                    return
                yield bytes(key), bytes(cursor.value())
                found = cursor.prev()

    def count(self, table: Table) -> int:
        return int(self.txn.stat(self.dbs[table])["entries"])

    def put(self, table: Table, key: bytes, value: bytes) -> None:
        self.txn.put(key, value, db=self.dbs[table])

    def add(self, table: Table, key: bytes, value: bytes) -> bool:
        return bool(self.txn.put(key, value, db=self.dbs[table], overwrite=False))

    def delete(self, table: Table, key: bytes) -> None:
        self.txn.delete(key, db=self.dbs[table])


def _prefix_upper_bound(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None: no such key)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


class _Snapshot(Reader):
    def __init__(self, txn: _LmdbTxn) -> None:
        self._txn = txn

    def _raw_get(self, table: Table, key: bytes) -> bytes | None:
        return self._txn.get(table, key)

    def _raw_iter(
        self, table: Table, prefix: bytes = b"", *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        return self._txn.iter(table, prefix, reverse=reverse)


class LmdbStore(Store):
    """A store in an LMDB environment at ``path`` (a directory, created if needed).

    Args:
        path: the store directory.
        durable: fsync every commit (default). False trades power-loss durability for speed (see module).
        map_size: initial memory-map size in bytes; it grows by doubling as needed.
        create: create the store when absent (otherwise a missing store is a :class:`StoreError`).

    Raises:
        StoreError: the path cannot be opened as a store.
        StoreFormatError: the store was written by a newer tractkv.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durable: bool = True,
        map_size: int = DEFAULT_MAP_SIZE,
        create: bool = True,
    ) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.durable = durable
        if not create and not os.path.exists(os.path.join(self.path, "data.mdb")):
            raise StoreError(f"no tractkv store at {self.path}")
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise StoreError(f"{self.path} is a file, not a store directory")
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create store directory {self.path}: {exc}") from exc
        key = os.path.realpath(self.path)
        with _ENVS_LOCK:
            shared = _ENVS.get(key)
            if shared is not None and shared.pid != os.getpid():
                del _ENVS[key]  # inherited across fork: never reuse the parent's environment
                shared = None
            if shared is None:
                shared = _Env(self.path, durable, map_size)
                _ENVS[key] = shared
            elif shared.durable != durable:
                raise StoreError(
                    f"store {self.path} is already open in this process with durable={shared.durable}"
                )
            shared.refs += 1
        self._key = key
        self._env: _Env | None = shared
        try:
            self._ensure_format()
        except BaseException:
            self.close()
            raise

    # plumbing -----------------------------------------------------------------------------------------

    def _shared(self) -> _Env:
        env = self._env
        if env is None:
            raise StoreClosed
        if env.pid != _PID:
            raise StoreError("this store was opened before fork(); open it again in the child process")
        return env

    def _ensure_format(self) -> None:
        with self.snapshot() as snap:
            raw = snap.table_get(Table.META, META_FORMAT)
        if raw is not None and raw == str(STORE_FORMAT).encode():
            return
        self._write(ensure_format)

    @contextmanager
    def _read_txn(self) -> Iterator[_LmdbTxn]:
        shared = self._shared()
        try:
            txn = shared.env.begin(write=False)
        except lmdb.MapResizedError:
            shared.env.set_mapsize(0)  # adopt the size another process grew the map to
            txn = shared.env.begin(write=False)
        except lmdb.Error as exc:
            raise StoreError(f"cannot read store {self.path}: {exc}") from exc
        try:
            yield _LmdbTxn(txn, shared.dbs)
        except lmdb.Error as exc:
            raise StoreError(f"read failed in {self.path}: {exc}") from exc
        finally:
            txn.abort()

    def _write(self, body: Any) -> Any:
        """Run ``body(writer)`` in one write transaction; on MapFull grow the map and run it again."""
        shared = self._shared()
        with shared.write_lock:
            while True:
                try:
                    with shared.env.begin(write=True) as txn:
                        return body(_LmdbTxn(txn, shared.dbs))
                except lmdb.MapFullError:
                    self._grow(shared)
                except lmdb.MapResizedError:
                    shared.env.set_mapsize(0)
                except TractError:
                    raise
                except lmdb.Error as exc:
                    raise StoreError(f"write failed in {self.path}: {exc}") from exc

    def _grow(self, shared: _Env) -> None:
        current = int(shared.env.info()["map_size"])
        if current >= MAX_MAP_SIZE:
            raise StoreError(f"store {self.path} reached the maximum map size ({MAX_MAP_SIZE} bytes)")
        try:
            shared.env.set_mapsize(min(current * 2, MAX_MAP_SIZE))
        except lmdb.Error as exc:
            raise StoreError(f"cannot grow store {self.path}: {exc}") from exc

    # Reader primitives (one short read transaction per call; use snapshot() for many reads) ------------

    def _raw_get(self, table: Table, key: bytes) -> bytes | None:
        # The hot read (a ref, a setting, an object outside a snapshot): _read_txn inlined, without the
        # generator-based context manager, which costs as much as the LMDB read itself.
        shared = self._shared()
        try:
            txn = shared.env.begin(write=False)
        except lmdb.MapResizedError:
            shared.env.set_mapsize(0)  # adopt the size another process grew the map to
            txn = shared.env.begin(write=False)
        except lmdb.Error as exc:
            raise StoreError(f"cannot read store {self.path}: {exc}") from exc
        try:
            value = txn.get(key, db=shared.dbs[table])
        except lmdb.BadValsizeError:
            value = None  # an empty or oversized key: no row can have it
        except lmdb.Error as exc:
            raise StoreError(f"read failed in {self.path}: {exc}") from exc
        finally:
            txn.abort()
        return None if value is None else bytes(value)

    def _raw_iter(
        self, table: Table, prefix: bytes = b"", *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        # Materialized: a generator holding a read transaction open across caller code invites leaks.
        with self._read_txn() as txn:
            return iter(list(txn.iter(table, prefix, reverse=reverse)))

    # Store interface ----------------------------------------------------------------------------------

    @contextmanager
    def snapshot(self) -> Iterator[Reader]:
        with self._read_txn() as txn:
            yield _Snapshot(txn)

    def apply(self, batch: WriteBatch) -> None:
        self._write(lambda writer: apply_batch(writer, batch))

    def table_count(self, table: Table) -> int:
        with self._read_txn() as txn:
            return txn.count(table)

    def size_bytes(self) -> int:
        shared = self._shared()
        info = shared.env.info()
        stat = shared.env.stat()
        return (int(info["last_pgno"]) + 1) * int(stat["psize"])

    def map_size(self) -> int:
        """The current memory-map size in bytes."""
        return int(self._shared().env.info()["map_size"])

    def sync(self) -> None:
        """Flush every committed transaction to disk (useful with ``durable=False``)."""
        try:
            self._shared().env.sync(True)
        except lmdb.Error as exc:
            raise StoreError(f"sync failed for {self.path}: {exc}") from exc

    def close(self) -> None:
        shared, self._env = self._env, None
        if shared is None:
            return
        with _ENVS_LOCK:
            shared.refs -= 1
            if shared.refs <= 0:
                if _ENVS.get(self._key) is shared:
                    del _ENVS[self._key]
                if shared.pid == os.getpid():
                    shared.env.close()

    def __repr__(self) -> str:
        return f"LmdbStore({self.path!r}, durable={self.durable})"


def open_store(path: str | os.PathLike[str] | None = None, **options: Any) -> Store:
    """An :class:`LmdbStore` at ``path``, or a :class:`~tractkv.store.memory.MemoryStore` when None."""
    if path is None:
        from tractkv.store.memory import MemoryStore

        return MemoryStore()
    return LmdbStore(path, **options)


__all__ = ["DEFAULT_MAP_SIZE", "LmdbStore", "StoreFormatError", "open_store"]
