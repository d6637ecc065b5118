"""tractkv: git for LLM context windows.

The public surface (``__all__``, pinned by ``tests/test_public_api.py``): the :class:`Tract` facade, the
:class:`Store` type it wraps, the message content it commits, the results its core operations return, the token
counters, and every error in :mod:`tractkv.errors` (one root, :class:`TractError`).

Everything else is reached from its subpackage: concrete stores, ``open_store`` and ``fsck`` from
:mod:`tractkv.store`; stored objects from :mod:`tractkv.model`; ``ObjectId`` (a ``str`` at run time) from
:mod:`tractkv.ids`; the agent toolkit from :mod:`tractkv.toolkit`; model clients from :mod:`tractkv.llm`; sync
from :mod:`tractkv.sync`. Those heavier parts (and the CLI) load on first use, not on ``import tractkv``.

So do the values only the less frequent operations return (``StatusInfo``, ``BranchInfo``, ``ContextDiff``,
``ReflogEntry``, ``GcResult``, ...: :mod:`tractkv.engine.values`), the content classes (``InstructionContent``,
...: :mod:`tractkv.engine.content`) and ``PendingToolResult``: ``tractkv.X``, ``from
tractkv import X`` and ``dir(tractkv)`` offer them as any other name, and their module loads on first access
(PEP 562; ``tests/test_import_time.py`` pins which modules ``import tractkv`` leaves for later).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tractkv import _lazy
from tractkv import tract as _tract
from tractkv._version import __version__
from tractkv.engine.content import HeuristicCounter, Message, Part, TiktokenCounter, TokenCounter, ToolCall
from tractkv.engine.values import CommitInfo, CompiledContext
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
    ToolServerUnavailable,
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
    from tractkv.engine.compile import Conflict as Conflict
    from tractkv.engine.content import ArtifactContent as ArtifactContent
    from tractkv.engine.content import DialogueContent as DialogueContent
    from tractkv.engine.content import FreeformContent as FreeformContent
    from tractkv.engine.content import InstructionContent as InstructionContent
    from tractkv.engine.content import ReasoningContent as ReasoningContent
    from tractkv.engine.tools import PendingToolResult as PendingToolResult
    from tractkv.engine.values import BlameEntry as BlameEntry
    from tractkv.engine.values import BranchInfo as BranchInfo
    from tractkv.engine.values import BudgetOverrun as BudgetOverrun
    from tractkv.engine.values import ChildInfo as ChildInfo
    from tractkv.engine.values import ContextDiff as ContextDiff
    from tractkv.engine.values import DiffEntry as DiffEntry
    from tractkv.engine.values import GcResult as GcResult
    from tractkv.engine.values import MergeResult as MergeResult
    from tractkv.engine.values import ParentInfo as ParentInfo
    from tractkv.engine.values import PickResult as PickResult
    from tractkv.engine.values import ReflogEntry as ReflogEntry
    from tractkv.engine.values import Repair as Repair
    from tractkv.engine.values import SearchHit as SearchHit
    from tractkv.engine.values import StatusInfo as StatusInfo
    from tractkv.engine.values import TagInfo as TagInfo
    from tractkv.engine.values import ToolChange as ToolChange
else:
    # public name -> the module that defines it, imported on the first access to one of its names
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "ArtifactContent": "tractkv.engine.content",
            "Conflict": "tractkv.engine.compile",
            "BlameEntry": "tractkv.engine.values",
            "BranchInfo": "tractkv.engine.values",
            "BudgetOverrun": "tractkv.engine.values",
            "ChildInfo": "tractkv.engine.values",
            "ContextDiff": "tractkv.engine.values",
            "DialogueContent": "tractkv.engine.content",
            "DiffEntry": "tractkv.engine.values",
            "FreeformContent": "tractkv.engine.content",
            "GcResult": "tractkv.engine.values",
            "InstructionContent": "tractkv.engine.content",
            "MergeResult": "tractkv.engine.values",
            "ParentInfo": "tractkv.engine.values",
            "PendingToolResult": "tractkv.engine.tools",
            "PickResult": "tractkv.engine.values",
            "ReasoningContent": "tractkv.engine.content",
            "ReflogEntry": "tractkv.engine.values",
            "Repair": "tractkv.engine.values",
            "SearchHit": "tractkv.engine.values",
            "StatusInfo": "tractkv.engine.values",
            "TagInfo": "tractkv.engine.values",
            "ToolChange": "tractkv.engine.values",
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
    "BlameEntry",
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
    "PickResult",
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
    "SearchHit",
    "StatusInfo",
    "Store",
    "StoreClosed",
    "StoreCorrupt",
    "StoreError",
    "StoreFormatError",
    "StoreNotFound",
    "SyncError",
    "TagInfo",
    "TiktokenCounter",
    "TokenCounter",
    "ToolCall",
    "ToolChange",
    "ToolHookError",
    "ToolPairingError",
    "ToolServerUnavailable",
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
