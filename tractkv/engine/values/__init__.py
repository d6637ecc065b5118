"""The values the engine returns: commit info and compiled contexts (``records``), the repairs compile makes
to tool pairing (``repairs``), what the less frequent operations report (``reports``: status, diffs,
merges, reflog, gc, runs), search hits and blame entries (``found``), and the typed request parameters
(``params``). Each module loads on first use of one of its names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tractkv import _lazy

if TYPE_CHECKING:
    from .found import BlameEntry, SearchHit
    from .params import AnthropicParams, OpenAIChatParams, ResponsesParams
    from .records import (
        CommitInfo,
        CompiledContext,
        FrozenPrefix,
        timestamp,
    )
    from .repairs import Repair
    from .reports import (
        BranchInfo,
        BudgetOverrun,
        ChildInfo,
        ContextDiff,
        DiffEntry,
        GcResult,
        MergeResult,
        ParentInfo,
        PickResult,
        ReflogEntry,
        RunResult,
        StatusInfo,
        TagInfo,
        ToolChange,
    )
else:
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "AnthropicParams": ".params",
            "BlameEntry": ".found",
            "BranchInfo": ".reports",
            "BudgetOverrun": ".reports",
            "ChildInfo": ".reports",
            "CommitInfo": ".records",
            "CompiledContext": ".records",
            "ContextDiff": ".reports",
            "DiffEntry": ".reports",
            "FrozenPrefix": ".records",
            "GcResult": ".reports",
            "MergeResult": ".reports",
            "OpenAIChatParams": ".params",
            "ParentInfo": ".reports",
            "PickResult": ".reports",
            "ReflogEntry": ".reports",
            "Repair": ".repairs",
            "ResponsesParams": ".params",
            "RunResult": ".reports",
            "SearchHit": ".found",
            "StatusInfo": ".reports",
            "TagInfo": ".reports",
            "ToolChange": ".reports",
            "timestamp": ".records",
        },
    )

__all__ = [
    "AnthropicParams",
    "BlameEntry",
    "BranchInfo",
    "BudgetOverrun",
    "ChildInfo",
    "CommitInfo",
    "CompiledContext",
    "ContextDiff",
    "DiffEntry",
    "FrozenPrefix",
    "GcResult",
    "MergeResult",
    "OpenAIChatParams",
    "ParentInfo",
    "PickResult",
    "ReflogEntry",
    "Repair",
    "ResponsesParams",
    "RunResult",
    "SearchHit",
    "StatusInfo",
    "TagInfo",
    "ToolChange",
    "timestamp",
]
