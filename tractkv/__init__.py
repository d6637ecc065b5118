"""tractkv: git for LLM context windows.

The public surface (``__all__``, pinned by ``tests/test_public_api.py``): the :class:`Tract` facade, the
:class:`Store` type it wraps, the message content it commits, the results its core operations return, the token
counters, and every error in :mod:`tractkv.errors` (one root, :class:`TractError`).

Everything else is reached from its subpackage: concrete stores, ``open_store`` and ``fsck`` from
:mod:`tractkv.store`; stored objects from :mod:`tractkv.model`; ``ObjectId`` (a ``str`` at run time) from
:mod:`tractkv.ids`; the agent toolkit from :mod:`tractkv.toolkit`; model clients from :mod:`tractkv.llm`; sync
from :mod:`tractkv.sync`. Those heavier parts (and the CLI) load on first use, not on ``import tractkv``.

So do the values only the less frequent operations return (``StatusInfo``, ``BranchInfo``, ``ContextDiff``,
``ReflogEntry``, ``GcResult``, ...: :mod:`tractkv.engine.reports`), the content classes (``InstructionContent``,
...: :mod:`tractkv.engine.content_classes`) and ``PendingToolResult``: ``tractkv.X``, ``from
tractkv import X`` and ``dir(tractkv)`` offer them as any other name, and their module loads on first access
(PEP 562; ``tests/test_import_time.py`` pins which modules ``import tractkv`` leaves for later).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tractkv import _lazy
from tractkv import tract as _tract
from tractkv._version import __version__
from tractkv.engine.content import Message, Part, ToolCall
from tractkv.engine.records import CommitInfo, CompiledContext
from tractkv.engine.state import Conflict
from tractkv.engine.tokens import HeuristicCounter, TiktokenCounter, TokenCounter
from tractkv.errors import (
    AuthError,
    BranchExists,
    BranchNotFound,
    BudgetExceeded,
    ConcurrentUpdate,
    ConditionalWritesUnsupported,
    ContentError,
    ContentTooLarge,
    CorruptObject,
    DecodeError,
    DetachedHead,
    EncodeError,
    InvalidInput,
    InvalidObjectId,
    InvalidRefName,
    InvalidResponse,
    LLMError,
    LLMHTTPError,
    MalformedResponse,
    MergeConflict,
    MissingExtra,
    MissingLinkTarget,
    MissingRefTarget,
    MissingTransportExtra,
    ModelCallFailed,
    NoLLMConfigured,
    NotFastForward,
    ObjectNotFound,
    ObjectTooLarge,
    PushRejected,
    ReadOnlySession,
    RefConflict,
    RefNotFound,
    RejectedObject,
    RemoteExists,
    RemoteNotFound,
    RemoteUnavailable,
    RequestTooLarge,
    ScriptExhausted,
    StoreClosed,
    StoreCorrupt,
    StoreError,
    StoreFormatError,
    StoreNotFound,
    SyncError,
    ToolHookError,
    ToolPairingError,
    TractError,
    TransferError,
    UnansweredToolCalls,
    UnknownRevision,
    Unsupported,
    UnsupportedFormat,
    UnsupportedURL,
)
from tractkv.store import Store
from tractkv.tract import Tract

if TYPE_CHECKING:  # loaded on first access: see _lazy.lazy_exports below
    from tractkv.engine.content_classes import ArtifactContent as ArtifactContent
    from tractkv.engine.content_classes import DialogueContent as DialogueContent
    from tractkv.engine.content_classes import FreeformContent as FreeformContent
    from tractkv.engine.content_classes import InstructionContent as InstructionContent
    from tractkv.engine.content_classes import ReasoningContent as ReasoningContent
    from tractkv.engine.hooks import PendingToolResult as PendingToolResult
    from tractkv.engine.reports import BranchInfo as BranchInfo
    from tractkv.engine.reports import BudgetOverrun as BudgetOverrun
    from tractkv.engine.reports import ChildInfo as ChildInfo
    from tractkv.engine.reports import ContextDiff as ContextDiff
    from tractkv.engine.reports import DiffEntry as DiffEntry
    from tractkv.engine.reports import GcResult as GcResult
    from tractkv.engine.reports import MergeResult as MergeResult
    from tractkv.engine.reports import ParentInfo as ParentInfo
    from tractkv.engine.reports import ReflogEntry as ReflogEntry
    from tractkv.engine.reports import Repair as Repair
    from tractkv.engine.reports import StatusInfo as StatusInfo
else:
    # public name -> the module that defines it, imported on the first access to one of its names
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "ArtifactContent": "tractkv.engine.content_classes",
            "BranchInfo": "tractkv.engine.reports",
            "BudgetOverrun": "tractkv.engine.reports",
            "ChildInfo": "tractkv.engine.reports",
            "ContextDiff": "tractkv.engine.reports",
            "DialogueContent": "tractkv.engine.content_classes",
            "DiffEntry": "tractkv.engine.reports",
            "FreeformContent": "tractkv.engine.content_classes",
            "GcResult": "tractkv.engine.reports",
            "InstructionContent": "tractkv.engine.content_classes",
            "MergeResult": "tractkv.engine.reports",
            "ParentInfo": "tractkv.engine.reports",
            "PendingToolResult": "tractkv.engine.hooks",
            "ReasoningContent": "tractkv.engine.content_classes",
            "ReflogEntry": "tractkv.engine.reports",
            "Repair": "tractkv.engine.reports",
            "StatusInfo": "tractkv.engine.reports",
        },
    )


def _toolkit_function(name: str) -> Any:
    """A function of :mod:`tractkv.toolkit` by name, for the deprecated ``Tract`` methods that call it (the
    facade sits below the toolkit and never imports it; this layer may, and does so on first use)."""
    from tractkv import toolkit

    return getattr(toolkit, name)


_tract.provide_toolkit(_toolkit_function)

__all__ = [
    "ArtifactContent",
    "AuthError",
    "BranchExists",
    "BranchInfo",
    "BranchNotFound",
    "BudgetExceeded",
    "BudgetOverrun",
    "ChildInfo",
    "CommitInfo",
    "CompiledContext",
    "ConcurrentUpdate",
    "ConditionalWritesUnsupported",
    "Conflict",
    "ContentError",
    "ContentTooLarge",
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
    "InvalidResponse",
    "LLMError",
    "LLMHTTPError",
    "MalformedResponse",
    "MergeConflict",
    "MergeResult",
    "Message",
    "MissingExtra",
    "MissingLinkTarget",
    "MissingRefTarget",
    "MissingTransportExtra",
    "ModelCallFailed",
    "NoLLMConfigured",
    "NotFastForward",
    "ObjectNotFound",
    "ObjectTooLarge",
    "ParentInfo",
    "Part",
    "PendingToolResult",
    "PushRejected",
    "ReadOnlySession",
    "ReasoningContent",
    "RefConflict",
    "RefNotFound",
    "ReflogEntry",
    "RejectedObject",
    "RemoteExists",
    "RemoteNotFound",
    "RemoteUnavailable",
    "Repair",
    "RequestTooLarge",
    "ScriptExhausted",
    "StatusInfo",
    "Store",
    "StoreClosed",
    "StoreCorrupt",
    "StoreError",
    "StoreFormatError",
    "StoreNotFound",
    "SyncError",
    "TiktokenCounter",
    "TokenCounter",
    "ToolCall",
    "ToolHookError",
    "ToolPairingError",
    "Tract",
    "TractError",
    "TransferError",
    "UnansweredToolCalls",
    "UnknownRevision",
    "Unsupported",
    "UnsupportedFormat",
    "UnsupportedURL",
    "__version__",
]
