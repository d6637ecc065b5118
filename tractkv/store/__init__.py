"""Storage: the store interface, the LMDB and in-memory stores, and fsck."""

from tractkv.store.base import ANY, Reader, Store, Table, WriteBatch
from tractkv.store.format import STORE_FORMAT
from tractkv.store.fsck import FsckReport, Problem, fsck
from tractkv.store.lmdb import LmdbStore, open_store
from tractkv.store.memory import MemoryStore

__all__ = [
    "ANY",
    "STORE_FORMAT",
    "FsckReport",
    "LmdbStore",
    "MemoryStore",
    "Problem",
    "Reader",
    "Store",
    "Table",
    "WriteBatch",
    "fsck",
    "open_store",
]
