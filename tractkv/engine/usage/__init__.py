"""Tool usage: the local ``usage`` rows of running executions (``rows``), every execution of a history as a
tree (``tree``), per-tool statistics (``stats``) and the queries a session asks (``queries``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tractkv import _lazy

if TYPE_CHECKING:
    from .queries import (
        history_stats,
        history_trees,
        history_usages,
    )
    from .rows import (
        DEFAULT_RESULT_LIMIT,
        USAGE_LINK,
        PendingUsage,
        abandon,
        begin,
        delete_rows,
        finish,
        held_ids,
        interrupted_records,
        iter_pending,
        new_usage_id,
        note_head,
        retire_rows,
        truncate,
    )
    from .stats import (
        ToolStats,
        usage_stats,
    )
    from .tree import (
        RERUNNABLE,
        STATUSES,
        ToolUsage,
        UsageNode,
        flatten,
        load_tree,
        select_trees,
        usage_forest,
    )
else:
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "DEFAULT_RESULT_LIMIT": ".rows",
            "PendingUsage": ".rows",
            "RERUNNABLE": ".tree",
            "STATUSES": ".tree",
            "ToolStats": ".stats",
            "ToolUsage": ".tree",
            "USAGE_LINK": ".rows",
            "UsageNode": ".tree",
            "abandon": ".rows",
            "begin": ".rows",
            "delete_rows": ".rows",
            "finish": ".rows",
            "flatten": ".tree",
            "held_ids": ".rows",
            "history_stats": ".queries",
            "history_trees": ".queries",
            "history_usages": ".queries",
            "interrupted_records": ".rows",
            "iter_pending": ".rows",
            "load_tree": ".tree",
            "new_usage_id": ".rows",
            "note_head": ".rows",
            "retire_rows": ".rows",
            "select_trees": ".tree",
            "truncate": ".rows",
            "usage_forest": ".tree",
            "usage_stats": ".stats",
        },
    )

__all__ = [
    "DEFAULT_RESULT_LIMIT",
    "RERUNNABLE",
    "STATUSES",
    "USAGE_LINK",
    "PendingUsage",
    "ToolStats",
    "ToolUsage",
    "UsageNode",
    "abandon",
    "begin",
    "delete_rows",
    "finish",
    "flatten",
    "held_ids",
    "history_stats",
    "history_trees",
    "history_usages",
    "interrupted_records",
    "iter_pending",
    "load_tree",
    "new_usage_id",
    "note_head",
    "retire_rows",
    "select_trees",
    "truncate",
    "usage_forest",
    "usage_stats",
]
