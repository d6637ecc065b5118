"""Tool-usage statistics: per tool, counts by status and p50 / p95 durations.

The input is any iterable of :class:`~tractkv.engine.usage.tree.ToolUsage` (a whole history flattened, or a
selection of it); see :mod:`tractkv.engine.usage.tree` for where those come from.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import attrs

from tractkv.engine.usage.tree import ToolUsage
from tractkv.model import to_jsonable


@attrs.frozen(kw_only=True)
class ToolStats:
    """Counts and durations of one tool's executions (nested ones included)."""

    tool_name: str
    count: int
    success: int
    error: int
    interrupted: int
    pending: int
    p50_ms: float | None
    p95_ms: float | None

    @property
    def success_rate(self) -> float | None:
        """Successes over finished executions (success, error, interrupted); None when none finished."""
        finished = self.success + self.error + self.interrupted
        return self.success / finished if finished else None

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict of the fields plus ``success_rate``."""
        return dict(to_jsonable(self, _STATS_KEYS))


_STATS_KEYS = (*(f.name for f in attrs.fields(ToolStats)), "success_rate")


def percentile(values: list[float], pct: float) -> float | None:
    """The nearest-rank percentile of ``values`` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def usage_stats(usages: Iterable[ToolUsage]) -> dict[str, ToolStats]:
    """Per-tool statistics, by tool name."""
    groups: dict[str, list[ToolUsage]] = {}
    for usage in usages:
        groups.setdefault(usage.tool_name, []).append(usage)
    out: dict[str, ToolStats] = {}
    for name in sorted(groups):
        items = groups[name]
        durations = [u.duration_ms for u in items if u.duration_ms is not None]
        out[name] = ToolStats(
            tool_name=name,
            count=len(items),
            success=sum(u.status == "success" for u in items),
            error=sum(u.status == "error" for u in items),
            interrupted=sum(u.status == "interrupted" for u in items),
            pending=sum(u.status == "pending" for u in items),
            p50_ms=percentile(durations, 50),
            p95_ms=percentile(durations, 95),
        )
    return out
