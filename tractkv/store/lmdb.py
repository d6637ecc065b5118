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
      Another process's growth is picked up on the next transaction, and by an open that races it (LMDB's
      ``MDB_MAP_RESIZED`` on the open's own transactions: the open retries, up to 64 times).
    * Processes: one LMDB environment per path per process (LMDB's rule; opening a path twice in one
      process shares the environment). A store must not be used across ``fork()``: the child gets a
      :class:`~tractkv.errors.StoreError` and must open its own. Reader slots left by killed processes are
      cleared on open.

Damage: LMDB maps ``data.mdb`` and follows page numbers into the map, so a page past the end of a
truncated file is a SIGBUS that kills the process, not an error. Before the first open in a process maps
the file, :func:`check_data_file` reads the two meta pages with plain file I/O, takes the valid one with
the higher transaction id, and compares ``(last_pg + 1) * page size`` with the file size. A healthy file
may end early only by free pages (LMDB never writes a page it allocated and freed in the same
transaction), so a short file is accepted only when every missing page is on LMDB's free list (read with
plain I/O too; a free-list page past the end is itself damage). Anything else (a missing or damaged meta
page, a page in use past the end) is refused with :class:`~tractkv.errors.StoreCorrupt`, and nothing is
written. To tell a store that lost its data from a new one, the first successful open writes a marker
file, ``tractkv-store``, next to ``data.mdb`` (stores made before it existed get it on their next open);
with the marker present an empty or missing ``data.mdb`` is :class:`~tractkv.errors.StoreCorrupt`, never
a fresh empty store. The marker is best effort: a read-only directory has none, and then an empty data
file opens as an empty store. The check reads LMDB 0.9's 64-bit layout (the one python-lmdb bundles;
on a 32-bit build it is skipped). It covers truncation only: a flipped byte in an object is found by fsck
and refused by reads (objects are rehashed), but a damaged B-tree page inside the file is not looked for.

Caveats: never put a store on NFS or another network file system (LMDB's locks do not work there).
A full disk makes the write fail with :class:`~tractkv.errors.StoreError`; nothing is half-written.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import lmdb

from tractkv.errors import StoreClosed, StoreCorrupt, StoreError, StoreFormatError, StoreNotFound, TractError
from tractkv.ids import OID_RAW_LEN, ObjectId, oid_to_raw
from tractkv.store.base import (
    MAX_KEY_BYTES,
    META_FORMAT,
    SEQ,
    RawWriter,
    Reader,
    Store,
    Table,
    WriteBatch,
    apply_batch,
)
from tractkv.store.format import READABLE_AS_IS, STORE_FORMAT, ensure_format

DEFAULT_MAP_SIZE = 64 * 1024 * 1024  # bytes; the map doubles on demand, the file grows only as used
MAX_MAP_SIZE = 1 << 44  # 16 TiB: a ceiling for doubling, far above any sane store
MAX_READERS = 254  # concurrent read transactions across all processes and threads
_MAX_DBS = len(Table) + 4  # fixed when the environment opens: room for tables a later format adds
_RESIZE_RETRIES = 64  # times a transaction is begun again after another process grew the map
RELEASE_AFTER_ROWS = 512  # a batch writing this many rows is followed by a tiny transaction (see apply)


DATA_FILE = "data.mdb"
LOCK_FILE = "lock.mdb"
STORE_MARKER = "tractkv-store"  # written next to data.mdb once a store exists: see "Damage" in the module
_MARKER_TEXT = "a tractkv store lives here; an empty or missing data.mdb beside this file means damage\n"

# LMDB's data file as plain bytes (LMDB 0.9, 64-bit, native byte order). Page 0 and page 1 are the two
# meta pages; each page starts with a 16-byte header (pgno u64, pad u16, flags u16, lower u16, upper u16;
# an overflow page keeps its page count as u32 where lower/upper are). A meta follows its header: magic,
# version, address, mapsize, the free-list and main MDB_db records (pad u32 = the page size in the
# free-list one, flags u16, depth u16, branch, leaf and overflow page counts, entries, root), last_pg,
# txnid. Leaf and branch nodes: lo u16, hi u16, flags u16, ksize u16, key, then data.
_HEADER = struct.Struct("=QHHHH")
_META = struct.Struct("=IIQQ" + "IHHQQQQQ" * 2 + "QQ")
_NODE = struct.Struct("=HHHH")
_U16 = struct.Struct("=H")
_U32 = struct.Struct("=I")
_U64 = struct.Struct("=Q")
_MDB_MAGIC = 0xBEEFC0DE
_MDB_DATA_VERSION = 1
_P_INVALID = (1 << 64) - 1
_P_BRANCH, _P_LEAF, _P_OVERFLOW, _P_META = 0x01, 0x02, 0x04, 0x08
_F_BIGDATA = 0x01
_RESTORE = "; restore the directory from a copy, or clone the store again from a remote"
_CHECK_RETRIES = 8  # a writer committing while the free list is read: read it again from the new meta


class _Meta:
    """The fields of one LMDB meta page the truncation check needs."""

    def __init__(self, psize: int, free_root: int, free_depth: int, last_pg: int, txnid: int) -> None:
        self.psize = psize
        self.free_root = free_root
        self.free_depth = free_depth
        self.last_pg = last_pg
        self.txnid = txnid


def _read_meta(fd: int, offset: int) -> _Meta | None:
    """The meta page at ``offset``, or None when it is cut short or is not an LMDB meta page."""
    raw = os.pread(fd, _HEADER.size + _META.size, offset)
    if len(raw) < _HEADER.size + _META.size:
        return None
    flags = _HEADER.unpack_from(raw)[2]
    fields = _META.unpack_from(raw, _HEADER.size)
    magic, version, psize = fields[0], fields[1], fields[4]
    if magic != _MDB_MAGIC or version != _MDB_DATA_VERSION or not flags & _P_META:
        return None
    if psize < 512 or psize > 65536 or psize & (psize - 1):
        return None
    # fields[4:12] is the free-list MDB_db (pad, flags, depth, branch, leaf, overflow, entries, root)
    return _Meta(psize, fields[11], fields[6], fields[-2], fields[-1])


def _newest_meta(fd: int) -> _Meta | str:
    """The meta page LMDB would use (the valid one with the higher txnid), or what is wrong."""
    first = _read_meta(fd, 0)
    if first is None:
        return "its first meta page is missing or damaged"
    second = _read_meta(fd, first.psize)
    if second is None:
        return "its second meta page is missing or damaged"
    return second if second.txnid > first.txnid else first


def _free_pages(fd: int, meta: _Meta, pages_in_file: int) -> set[int] | str:
    """Every page number LMDB's free list (its FREE_DBI tree) holds, read with plain file I/O.

    Returns what is wrong instead when a page of the free list itself lies past the end of the file or
    does not parse (its pages are reachable, so LMDB wrote them before it wrote the meta naming them).
    """
    psize = meta.psize
    free: set[int] = set()
    if meta.free_root == _P_INVALID:
        return free
    stack = [meta.free_root]
    seen: set[int] = set()
    while stack:
        pgno = stack.pop()
        if pgno in seen or pgno > meta.last_pg or len(seen) > pages_in_file:
            return f"its free list is damaged (page {pgno})"
        seen.add(pgno)
        if pgno >= pages_in_file:
            return f"page {pgno} of its free list lies past the end of the file"
        page = os.pread(fd, psize, pgno * psize)
        if len(page) < psize:
            return f"page {pgno} of its free list lies past the end of the file"
        stored, _pad, flags, lower, _upper = _HEADER.unpack_from(page)
        if stored != pgno or not flags & (_P_BRANCH | _P_LEAF) or lower < _HEADER.size or lower > psize:
            return f"page {pgno} of its free list is damaged"
        for i in range((lower - _HEADER.size) >> 1):
            (at,) = _U16.unpack_from(page, _HEADER.size + 2 * i)
            lo, hi, nflags, ksize = _NODE.unpack_from(page, at)
            if flags & _P_BRANCH:
                stack.append(lo | hi << 16 | nflags << 32)
                continue
            size, data_at = lo | hi << 16, at + _NODE.size + ksize
            if nflags & _F_BIGDATA:
                (first,) = _U64.unpack_from(page, data_at)
                head = os.pread(fd, _HEADER.size, first * psize)
                if len(head) < _HEADER.size:
                    return f"overflow page {first} of its free list lies past the end of the file"
                (count,) = _U32.unpack_from(head, 12)
                if first + count > pages_in_file:
                    return f"overflow pages {first}+{count} of its free list lie past the end of the file"
                data = os.pread(fd, size, first * psize + _HEADER.size)
            else:
                data = page[data_at : data_at + size]
            if len(data) < size or size < 8:
                return f"page {pgno} of its free list is damaged"
            (n,) = _U64.unpack_from(data)  # an IDL: a count, then that many page numbers
            if 8 * (n + 1) > size:
                return f"page {pgno} of its free list is damaged"
            free.update(struct.unpack_from(f"={n}Q", data, 8))
    return free


def _truncation(fd: int) -> tuple[str | None, int]:
    """What makes the data file unsafe to map (None: nothing), and the txnid of the meta it judged by.

    LMDB maps the file and reads pages by address, so a page past the end of a shorter file is a SIGBUS,
    not an error. The newest meta page says how many pages the last transaction uses (``last_pg + 1``);
    the file may legitimately end before that only by pages on the free list (LMDB does not write a page
    allocated and freed in the same transaction), so a short file is checked page by page against it.
    """
    meta = _newest_meta(fd)
    if isinstance(meta, str):
        return meta, -1
    size = os.fstat(fd).st_size  # after the meta: a writer writes its pages before the meta that names them
    pages_in_file = size // meta.psize
    if meta.last_pg < pages_in_file:
        return None, meta.txnid
    try:
        free = _free_pages(fd, meta, pages_in_file)
    except (struct.error, ValueError, OverflowError, OSError) as exc:
        return f"its free list does not parse ({exc})", meta.txnid
    if isinstance(free, str):
        return free, meta.txnid
    missing = meta.last_pg + 1 - pages_in_file
    if missing > len(free) or any(p not in free for p in range(pages_in_file, meta.last_pg + 1)):
        need = (meta.last_pg + 1) * meta.psize
        return f"it is {size} bytes but its last transaction uses {need} (truncated)", meta.txnid
    return None, meta.txnid


def check_data_file(path: str) -> None:
    """Refuse a store whose data file is damaged, before LMDB maps it (see "Damage" in the module).

    Raises:
        StoreCorrupt: data.mdb is missing or empty although the store marker says the store existed, is
            not an LMDB file, or is shorter than its newest meta page says (truncated).
        StoreError: the file cannot be read.
    """
    if struct.calcsize("P") != 8:
        return  # the layout above is LMDB's 64-bit one
    data = os.path.join(path, DATA_FILE)
    marked = os.path.exists(os.path.join(path, STORE_MARKER))
    try:
        fd = os.open(data, os.O_RDONLY)
    except FileNotFoundError:
        if marked:
            raise StoreCorrupt(f"store {path} is damaged: {DATA_FILE} is missing{_RESTORE}") from None
        return
    except OSError as exc:
        raise StoreError(f"cannot read store {path}: {exc}") from exc
    try:
        if os.fstat(fd).st_size == 0:
            if marked:
                raise StoreCorrupt(f"store {path} is damaged: {DATA_FILE} is empty{_RESTORE}")
            return  # a new store: LMDB writes its meta pages
        problem: str | None = None
        for _ in range(_CHECK_RETRIES):
            problem, txnid = _truncation(fd)
            if problem is None:
                return
            again = _newest_meta(fd)
            if txnid < 0 or isinstance(again, str) or again.txnid == txnid:
                break  # judged against a meta no writer replaced meanwhile: the verdict stands
        raise StoreCorrupt(f"store {path} is damaged: {DATA_FILE}: {problem}{_RESTORE}")
    except OSError as exc:
        raise StoreError(f"cannot read store {path}: {exc}") from exc
    finally:
        os.close(fd)


def files_writable(path: str) -> bool:
    """Whether this process can write the store at ``path``: its ``data.mdb`` and ``lock.mdb`` (or the
    directory, to create it). False on a read-only filesystem or without write permission: a read-only open
    (``migrate=False``, ``create=False``) of such a store opens LMDB read-only (unlocked when ``lock.mdb`` is
    not writable: a writer elsewhere meanwhile is not seen as LMDB's reader table would)."""
    lock = os.path.join(path, LOCK_FILE)
    return os.access(os.path.join(path, DATA_FILE), os.W_OK) and os.access(
        lock if os.path.exists(lock) else path, os.W_OK
    )


def _mark(path: str) -> None:
    """Write the store marker (once; best effort: a read-only directory only loses the empty-file check)."""
    marker = os.path.join(path, STORE_MARKER)
    if os.path.exists(marker):
        return
    try:
        with open(marker, "x", encoding="utf-8") as out:
            out.write(_MARKER_TEXT)
    except OSError:  # written by another process meanwhile (FileExistsError), or not writable
        return


class _Env:
    """One opened LMDB environment, shared by every LmdbStore of its path in this process."""

    def __init__(self, path: str, durable: bool, map_size: int, readonly: bool = False) -> None:
        self.path = path
        self.durable = durable
        self.readonly = readonly
        self.pid = os.getpid()
        self.refs = 0
        self.env = self._open(map_size)
        try:
            self.env.reader_check()  # clear reader slots left by killed processes
            if self.env.max_key_size() < MAX_KEY_BYTES:
                limit = self.env.max_key_size()
                raise StoreError(f"this LMDB build takes keys of {limit} bytes at most, not {MAX_KEY_BYTES}")
            self.dbs = self._open_tables()
        except lmdb.Error as exc:
            self.env.close()
            raise StoreError(f"cannot open store at {path}: {exc}") from exc
        except BaseException:
            self.env.close()
            raise
        self.write_lock = threading.Lock()  # LMDB write txns must not interleave between threads

    def _open(self, map_size: int) -> Any:
        """``lmdb.open``, again when another process grew the map under it.

        The map is at least as large as the data the file's newest transaction uses when LMDB reads its
        meta pages; ``lmdb.open`` then begins a transaction of its own, which ``MDB_MAP_RESIZED`` refuses
        when another process committed past that size in between (a failed open closes itself).
        """
        for _ in range(_RESIZE_RETRIES):
            try:
                return lmdb.open(
                    self.path,
                    map_size=map_size,
                    subdir=True,
                    max_dbs=_MAX_DBS,
                    max_readers=MAX_READERS,
                    sync=self.durable,
                    metasync=self.durable,
                    readahead=False,  # random access by hash: readahead only pollutes the page cache
                    meminit=False,
                    readonly=self.readonly,
                    # a reader that cannot write lock.mdb cannot take a reader slot: it reads unlocked
                    lock=not self.readonly or os.access(os.path.join(self.path, LOCK_FILE), os.W_OK),
                )
            except lmdb.MapResizedError:
                continue
            except lmdb.Error as exc:
                raise StoreError(f"cannot open store at {self.path}: {exc}") from exc
        raise StoreError(f"cannot open store at {self.path}: another process kept growing its map")

    def _open_tables(self) -> dict[Table, Any]:
        """Open (creating when absent) every table in one write transaction.

        Another process may grow the map between ``lmdb.open`` and this transaction (or while it waits for
        the writer lock): LMDB then refuses to begin with ``MDB_MAP_RESIZED``; the map is adopted and the
        transaction begun again, as every read and write does.
        """
        if self.readonly:  # py-lmdb opens each in a read transaction of its own (ours would not keep them)
            return {t: self.env.open_db(t.value.encode(), create=False) for t in Table}
        for _ in range(_RESIZE_RETRIES):
            try:
                with self.env.begin(write=True) as txn:
                    return {t: self.env.open_db(t.value.encode(), txn=txn, create=True) for t in Table}
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)  # adopt the size another process grew the map to
        raise StoreError(f"cannot open store at {self.path}: another process kept growing its map")


def _begin_read(shared: _Env, path: str) -> Any:
    """A read transaction, adopting the map size each time another process has grown it."""
    for _ in range(_RESIZE_RETRIES):
        try:
            return shared.env.begin(write=False)
        except lmdb.MapResizedError:
            shared.env.set_mapsize(0)  # adopt the size another process grew the map to
        except lmdb.Error as exc:
            raise StoreError(f"cannot read store {path}: {exc}") from exc
    raise StoreError(f"cannot read store {path}: another process kept growing its map")


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
            found = _last_below(cursor, prefix)  # reverse: from the last key with this prefix
            while found:
                key = cursor.key()
                if not key.startswith(prefix):
                    return
                yield bytes(key), bytes(cursor.value())
                found = cursor.prev()

    def count(self, table: Table) -> int:
        return int(self.txn.stat(self.dbs[table])["entries"])

    def last_seq(self, table: Table, prefix: bytes) -> int:
        # A cursor at the end of the prefix's range: the pages it reads are the ones the key it numbers is
        # written to (a sequenced write reads no counter row, so dirties no page but its own).
        size = len(prefix) + SEQ.size
        with self.txn.cursor(db=self.dbs[table]) as cursor:
            found = _last_below(cursor, prefix)
            while found:
                key = cursor.key()
                if not key.startswith(prefix):
                    return 0
                if len(key) == size:
                    return int(SEQ.unpack_from(key, len(prefix))[0])
                found = cursor.prev()
        return 0

    def put(self, table: Table, key: bytes, value: bytes) -> None:
        self.txn.put(key, value, db=self.dbs[table])

    def add(self, table: Table, key: bytes, value: bytes) -> bool:
        return bool(self.txn.put(key, value, db=self.dbs[table], overwrite=False))

    def delete(self, table: Table, key: bytes) -> None:
        self.txn.delete(key, db=self.dbs[table])


def _release_freed_pages(writer: _LmdbTxn) -> None:
    """A transaction that changes nothing but commits: after a large batch, it lets the next one reuse the
    pages the batch freed.

    Copy-on-write: a transaction writes every page it touches to a free page and frees the old copy, and LMDB
    hands a page freed by transaction N out again only from transaction N + 2 on (N + 1 may still be read).
    Objects are keyed by random ids, so a batch of a thousand commits touches most leaves of the objects
    table; without a transaction in between, the next batch could not reuse them and the file would hold two
    freed copies of the table besides the live one (10k commits in batches of 1,000: 20.5 MB, against 12.6 MB
    one commit per transaction; with it, 16.2 MB). Rewriting the format row with its own value dirties one
    page, so LMDB commits a new transaction id."""
    value = writer.get(Table.META, META_FORMAT)
    if value is not None:
        writer.put(Table.META, META_FORMAT, value)


def _last_below(cursor: lmdb.Cursor, prefix: bytes) -> bool:
    """Put ``cursor`` on the last key below every key past ``prefix``'s range (the last key with the prefix,
    when there is one); False when there is no such key."""
    upper = _prefix_upper_bound(prefix)
    if upper is not None and cursor.set_range(upper):
        return bool(cursor.prev())
    return bool(cursor.last())


def _prefix_upper_bound(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None: no such key)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


class _Snapshot(Reader):
    def __init__(self, txn: _LmdbTxn) -> None:
        self._txn = txn
        self.closed = False  # set when its with-block ends (its read transaction is gone)

    def _check(self) -> None:
        if self.closed:
            raise StoreError("a snapshot was read after its with-block ended")

    def _raw_get(self, table: Table, key: bytes) -> bytes | None:
        self._check()
        return self._txn.get(table, key)

    def _raw_iter(
        self, table: Table, prefix: bytes = b"", *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        self._check()
        return self._txn.iter(table, prefix, reverse=reverse)

    def get_raw(self, oid: ObjectId) -> bytes | None:
        # Reader.get_raw in one call (the reachability walks of sync and gc read every object through this)
        self._check()
        try:
            value = self._txn.txn.get(oid_to_raw(oid), db=self._txn.dbs[Table.OBJECTS])
        except lmdb.Error as exc:
            raise StoreError(f"read failed: {exc}") from exc
        return None if value is None else bytes(value)

    def stored(self, oids: Iterable[ObjectId]) -> set[ObjectId]:
        # Reader.stored without a Python call per layer per id (sync asks this of thousands of ids at once)
        self._check()
        get, db, fromhex = self._txn.txn.get, self._txn.dbs[Table.OBJECTS], bytes.fromhex
        out: set[ObjectId] = set()
        try:
            for oid in oids:
                try:
                    raw = fromhex(oid)
                except (TypeError, ValueError):
                    continue  # not hex: not an id
                if len(raw) == OID_RAW_LEN and raw.hex() == oid and get(raw, db=db) is not None:
                    out.add(oid)
        except lmdb.Error as exc:
            raise StoreError(f"read failed: {exc}") from exc
        return out


class LmdbStore(Store):
    """A store in an LMDB environment at ``path`` (a directory, created if needed).

    Args:
        path: the store directory.
        durable: fsync every commit (default). False trades power-loss durability for speed (see module).
        map_size: initial memory-map size in bytes; it grows by doubling as needed.
        create: create the store when absent (otherwise a missing store is a :class:`StoreError`).
        migrate: upgrade a store of an older format in place on open (default). False (read-only opens:
            the viewer, the CLI's read commands, ``Tract.open(readonly=True)``) reads a format in
            :data:`~tractkv.store.format.READABLE_AS_IS` as it is and writes nothing; the next writing open
            migrates it. Such an open of a store this process cannot write (:func:`files_writable`: a
            read-only filesystem, no write permission) opens LMDB read-only; a write then raises StoreError.

    Raises:
        StoreError: the path cannot be opened as a store.
        StoreNotFound: no store at ``path`` and ``create`` is False (nothing is created).
        StoreFormatError: the store was written by a newer tractkv.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durable: bool = True,
        map_size: int = DEFAULT_MAP_SIZE,
        create: bool = True,
        migrate: bool = True,
    ) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.durable = durable
        if not create and not os.path.exists(os.path.join(self.path, DATA_FILE)):
            if os.path.exists(os.path.join(self.path, STORE_MARKER)):
                raise StoreCorrupt(f"store {self.path} is damaged: {DATA_FILE} is missing{_RESTORE}")
            raise StoreNotFound(self.path)
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
                check_data_file(self.path)  # before LMDB maps the file: a truncated one would SIGBUS
                data = os.path.join(self.path, DATA_FILE)
                readonly = not migrate and os.path.exists(data) and not files_writable(self.path)
                shared = _Env(self.path, durable, map_size, readonly)
                _ENVS[key] = shared
            elif shared.durable != durable:
                raise StoreError(
                    f"store {self.path} is already open in this process with durable={shared.durable}"
                )
            shared.refs += 1
        self._key = key
        self._env: _Env | None = shared
        try:
            self._ensure_format(migrate)
        except BaseException:
            self.close()
            raise
        _mark(self.path)  # the store exists now: an empty data file from here on is damage

    # plumbing -----------------------------------------------------------------------------------------

    def _shared(self) -> _Env:
        env = self._env
        if env is None:
            raise StoreClosed
        if env.pid != _PID:
            raise StoreError("this store was opened before fork(); open it again in the child process")
        return env

    def _ensure_format(self, migrate: bool) -> None:
        with self.snapshot() as snap:
            raw = snap.table_get(Table.META, META_FORMAT)
        if raw is not None and raw == str(STORE_FORMAT).encode():
            return
        if not migrate and raw is not None and raw in {str(n).encode() for n in READABLE_AS_IS}:
            return  # read as it is; a writing open migrates it
        self._write(ensure_format)

    @contextmanager
    def _read_txn(self) -> Iterator[_LmdbTxn]:
        shared = self._shared()
        txn = _begin_read(shared, shared.path)
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
        except lmdb.Error:
            txn = _begin_read(shared, shared.path)  # the map grew (adopt it), or a real error (wrapped)
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

    def _raw_last_seq(self, table: Table, prefix: bytes) -> int:
        with self._read_txn() as txn:
            return txn.last_seq(table, prefix)

    # Store interface ----------------------------------------------------------------------------------

    @contextmanager
    def snapshot(self) -> Iterator[Reader]:
        with self._read_txn() as txn:
            snapshot = _Snapshot(txn)
            try:
                yield snapshot
            finally:
                snapshot.closed = True

    def apply(self, batch: WriteBatch) -> None:
        self._write(lambda writer: apply_batch(writer, batch))
        if len(batch.objects) + len(batch.rows) + len(batch.log_appends) >= RELEASE_AFTER_ROWS:
            # Best effort: the batch has committed, so no failure of this space-saving transaction (a disk
            # error, StoreClosed from a concurrent close) may report it as failed (a retry would write it
            # twice); the next large batch tries again. KeyboardInterrupt / SystemExit still propagate.
            with suppress(Exception):
                self._write(_release_freed_pages)

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
