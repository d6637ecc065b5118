"""tractkv: git for LLM context windows.

The public names are listed in ``__all__``; heavier parts (the CLI, sync, LLM clients) load on first use.
"""

from __future__ import annotations

from tractkv.errors import (
    CorruptObject,
    DecodeError,
    EncodeError,
    InvalidInput,
    InvalidObjectId,
    InvalidRefName,
    ObjectNotFound,
    RefConflict,
    RefNotFound,
    StoreClosed,
    StoreError,
    StoreFormatError,
    TractError,
    UnsupportedFormat,
)
from tractkv.ids import ObjectId, hash_bytes
from tractkv.model import Blob, Commit, ToolSchema, ToolSet, object_id
from tractkv.store import LmdbStore, MemoryStore, Store, fsck, open_store

__version__ = "0.1.0"

__all__ = [
    "Blob",
    "Commit",
    "CorruptObject",
    "DecodeError",
    "EncodeError",
    "InvalidInput",
    "InvalidObjectId",
    "InvalidRefName",
    "LmdbStore",
    "MemoryStore",
    "ObjectId",
    "ObjectNotFound",
    "RefConflict",
    "RefNotFound",
    "Store",
    "StoreClosed",
    "StoreError",
    "StoreFormatError",
    "ToolSchema",
    "ToolSet",
    "TractError",
    "UnsupportedFormat",
    "__version__",
    "fsck",
    "hash_bytes",
    "object_id",
    "open_store",
]
