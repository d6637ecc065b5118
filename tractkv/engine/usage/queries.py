"""Tool-usage queries as a session asks them: the executions, trees and per-tool statistics of the history of
HEAD (or any revision), filtered by the commit that started or answered them, the tool, and the status."""

from __future__ import annotations

from tractkv.engine.session import Session
from tractkv.engine.usage.stats import ToolStats, usage_stats
from tractkv.engine.usage.tree import (
    STATUSES,
    ToolUsage,
    UsageNode,
    flatten,
    select_trees,
    select_usages,
    usage_forest,
)
from tractkv.errors import InvalidInput


def history_forest(session: Session, rev: str | None = None) -> list[UsageNode]:
    """The usage trees of the history of ``rev`` (None: HEAD), plus running and interrupted executions."""
    reader = session.reader()
    tip = session.resolve(rev) if rev is not None else session.head_commit(reader)
    return usage_forest(reader, tip)


def history_usages(
    session: Session,
    rev: str | None = None,
    *,
    commit: str | None = None,
    name: str | None = None,
    status: str | None = None,
) -> list[ToolUsage]:
    """Executions (nested ones included) started by or answered in ``commit``, of tool ``name``, with ``status``.

    Raises:
        InvalidInput: an unknown status. UnknownRevision: ``rev`` or ``commit`` names no commit.
    """
    if status is not None and status not in STATUSES:
        raise InvalidInput(f"status must be one of {STATUSES}, not {status!r}")
    commit_id = session.resolve(commit) if commit is not None else None
    return select_usages(history_forest(session, rev), commit=commit_id, name=name, status=status)


def history_trees(session: Session, rev: str | None = None, *, commit: str | None = None) -> list[UsageNode]:
    """The usage trees of one message (an assistant commit or its tool result), or of the whole history."""
    return select_trees(history_forest(session, rev), session.resolve(commit) if commit is not None else None)


def history_stats(session: Session, rev: str | None = None) -> dict[str, ToolStats]:
    """Per tool: count, successes, errors, success rate, p50 / p95 duration."""
    return usage_stats(flatten(history_forest(session, rev)))
