"""tractkv: git for LLM context windows.

The public names are listed in ``__all__``; heavier parts (the CLI, sync, LLM clients) load on first use.
"""

from __future__ import annotations

from tractkv.engine.content import (
    ArtifactContent,
    DialogueContent,
    FreeformContent,
    InstructionContent,
    Message,
    ReasoningContent,
    ToolCall,
)
from tractkv.engine.results import (
    BranchInfo,
    CommitInfo,
    CompiledContext,
    ContextDiff,
    DiffEntry,
    GcResult,
    MergeResult,
    ReflogEntry,
    StatusInfo,
)
from tractkv.engine.state import Conflict
from tractkv.engine.tokens import HeuristicCounter, TiktokenCounter, TokenCounter
from tractkv.errors import (
    BranchExists,
    BranchNotFound,
    ConcurrentUpdate,
    ContentError,
    CorruptObject,
    DecodeError,
    DetachedHead,
    EncodeError,
    InvalidInput,
    InvalidObjectId,
    InvalidRefName,
    MergeConflict,
    ObjectNotFound,
    RefConflict,
    RefNotFound,
    StoreClosed,
    StoreError,
    StoreFormatError,
    TractError,
    UnknownRevision,
    UnsupportedFormat,
)
from tractkv.ids import ObjectId, hash_bytes
from tractkv.model import Blob, Commit, ToolSchema, ToolSet, object_id
from tractkv.store import LmdbStore, MemoryStore, Store, fsck, open_store
from tractkv.tract import Tract

__version__ = "0.1.0"

__all__ = [
    "ArtifactContent",
    "Blob",
    "BranchExists",
    "BranchInfo",
    "BranchNotFound",
    "Commit",
    "CommitInfo",
    "CompiledContext",
    "ConcurrentUpdate",
    "Conflict",
    "ContentError",
    "ContextDiff",
    "CorruptObject",
    "DecodeError",
    "DetachedHead",
    "DialogueContent",
    "DiffEntry",
    "EncodeError",
    "FreeformContent",
    "GcResult",
    "HeuristicCounter",
    "InstructionContent",
    "InvalidInput",
    "InvalidObjectId",
    "InvalidRefName",
    "LmdbStore",
    "MemoryStore",
    "MergeConflict",
    "MergeResult",
    "Message",
    "ObjectId",
    "ObjectNotFound",
    "ReasoningContent",
    "RefConflict",
    "RefNotFound",
    "ReflogEntry",
    "StatusInfo",
    "Store",
    "StoreClosed",
    "StoreError",
    "StoreFormatError",
    "TiktokenCounter",
    "TokenCounter",
    "ToolCall",
    "ToolSchema",
    "ToolSet",
    "Tract",
    "TractError",
    "UnknownRevision",
    "UnsupportedFormat",
    "__version__",
    "fsck",
    "hash_bytes",
    "object_id",
    "open_store",
]
