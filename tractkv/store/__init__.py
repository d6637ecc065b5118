"""Storage: the store interface, the LMDB and in-memory stores, and fsck.

``fsck`` (with ``FsckReport`` and ``Problem``) and ``MemoryStore`` load on first use (PEP 562): an append or a
compile needs neither, and ``import tractkv`` does not build their classes.
"""

import sys
import types
from typing import TYPE_CHECKING, Any

from tractkv import _lazy
from tractkv.store.base import ANY, Reader, Store, Table, WriteBatch
from tractkv.store.format import STORE_FORMAT
from tractkv.store.lmdb import LmdbStore, open_store

if TYPE_CHECKING:
    from tractkv.store.fsck import FsckReport, Problem, fsck
    from tractkv.store.memory import MemoryStore
else:
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "FsckReport": "tractkv.store.fsck",
            "Problem": "tractkv.store.fsck",
            "fsck": "tractkv.store.fsck",
            "MemoryStore": "tractkv.store.memory",
        },
    )

    # Not lazy_exports' business: only here is a lazy name (the function fsck) also a submodule's name, which
    # the import system binds on the package, by setattr, whenever that submodule loads.
    class _StorePackage(types.ModuleType):
        """``tractkv.store.fsck`` is the function, as when it was imported eagerly. Loading the submodule of
        the same name (``from tractkv.store.fsck import Problem``, before or after) binds the module as this
        package's ``fsck``: that binding is dropped, so ``from tractkv.store import fsck`` stays the function."""

        def __setattr__(self, name: str, value: Any) -> None:
            if name == "fsck" and isinstance(value, types.ModuleType):
                return
            super().__setattr__(name, value)

    sys.modules[__name__].__class__ = _StorePackage

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
