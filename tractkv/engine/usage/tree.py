"""Tool-usage trees: every execution of a branch's history as :class:`ToolUsage` values, nested.

A completed execution is a stored :class:`~tractkv.model.UsageRecord` linked from the tool_result commit
that answered its call (or nested in another record); a running or interrupted one is a row of the local
``usage`` table. :func:`usage_forest` reads both into one forest of :class:`UsageNode`; :func:`select_usages`
and :func:`select_trees` filter it. See :mod:`tractkv.engine.usage.rows` for the lifecycle of a row and
what a crash leaves, and :mod:`tractkv.engine.usage.stats` for per-tool statistics.

**Linear in the records, whatever the store holds.** Records form trees (the validator refuses a record
listing a child twice or one another record lists, and trees deeper than ``MAX_USAGE_DEPTH``), but a store
written before those rules may hold records whose ``children`` repeat or share ids, which expand
exponentially when walked as trees (issue 29 item 12), or chains deeper than Python's recursion limit. So a
forest is built without recursion, reading each record once and showing it once (under the first parent met,
depth first in start order), down to ``MAX_USAGE_DEPTH`` levels below its root.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

import attrs

from tractkv.engine.history import iter_log
from tractkv.engine.usage.rows import USAGE_LINK, PendingUsage, iter_pending
from tractkv.engine.values import timestamp
from tractkv.ids import ObjectId
from tractkv.model import MAX_USAGE_DEPTH, Commit, UsageRecord, to_jsonable
from tractkv.store import Reader

STATUSES = ("pending", "success", "error", "interrupted")  # the statuses a ToolUsage may show
RERUNNABLE = ("error", "interrupted")  # the statuses of a failed execution, which may be re-run


def load_tree(reader: Reader, oid: ObjectId) -> list[UsageRecord]:
    """A stored record and every record nested in it, each once (nested ones first, the root last)."""
    out: list[UsageRecord] = []
    record = reader.get(oid)
    if not isinstance(record, UsageRecord):
        return out
    seen = {oid}
    stack: list[tuple[UsageRecord, Iterator[ObjectId]]] = [(record, iter(record.children))]
    while stack:
        top, children = stack[-1]
        for child in children:
            if child in seen:
                continue
            seen.add(child)
            nested = reader.get(child)
            if isinstance(nested, UsageRecord):
                stack.append((nested, iter(nested.children)))
                break
        else:
            stack.pop()
            out.append(top)
    return out


@attrs.frozen(kw_only=True)
class ToolUsage:
    """One tool execution as queries show it (completed, running, or interrupted).

    Attributes:
        id: the usage id (given at start; events and pending rows use it too).
        commit_id: the assistant commit whose tool call started it (inherited by nested executions).
        parent_id: the usage id of the execution it ran inside, or None at the top level.
        status: ``pending``, ``success``, ``error`` or ``interrupted``.
        result: the output as recorded, cut to the executor's limit with a marker (see ``result_chars``).
        oid: the id of the stored record (None while pending or interrupted without a record).
        result_commit: the tool_result commit that links this (top-level) record.
        children: the usage ids of the executions nested in it, in start order.
        heads: the last commits of conversations it ran (a child agent loop's tip).
        rerun_of: the usage id of the failed execution this one re-ran, or None.
    """

    id: str
    commit_id: ObjectId | None
    parent_id: str | None
    tool_name: str
    arguments: dict[str, Any] = attrs.field(eq=False, hash=False)
    result: str | None
    status: str
    error: str | None
    started_at: datetime
    completed_at: datetime | None
    tool_call_id: str | None = None
    oid: ObjectId | None = None
    result_commit: ObjectId | None = None
    result_chars: int | None = None
    children: tuple[str, ...] = ()
    heads: tuple[ObjectId, ...] = ()
    rerun_of: str | None = None

    @property
    def duration_ms(self) -> float | None:
        """Milliseconds from start to completion (None until completed)."""
        if self.completed_at is None:
            return None
        return (self.completed_at - self.started_at).total_seconds() * 1000

    @property
    def truncated(self) -> bool:
        """Whether ``result`` was cut (the full text is in the tool_result commit)."""
        return self.result_chars is not None

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (timestamps as ISO 8601; ``duration_ms`` added, ``truncated`` left out)."""
        return dict(to_jsonable(self, _USAGE_KEYS))

    @classmethod
    def from_record(cls, record: UsageRecord, oid: ObjectId, result_commit: ObjectId | None) -> ToolUsage:
        """A completed (or recorded interrupted) execution from its stored record.

        Args:
            record: the stored record.
            oid: its id.
            result_commit: the tool_result commit linking it (None for a nested or not yet linked record).
        """
        return cls(
            id=record.usage_id,
            commit_id=record.commit,
            parent_id=record.parent_id,
            tool_name=record.tool_name,
            arguments=dict(record.arguments or {}),
            result=record.result,
            status=record.status,
            error=record.error,
            started_at=timestamp(record.started_at),
            completed_at=timestamp(record.completed_at) if record.completed_at is not None else None,
            tool_call_id=record.tool_call_id,
            oid=oid,
            result_commit=result_commit,
            result_chars=record.result_chars,
            heads=record.heads,
            rerun_of=record.rerun_of,
        )

    @classmethod
    def from_pending(cls, row: PendingUsage) -> ToolUsage:
        """A running or interrupted execution from its row (no record yet; status judged from its owner)."""
        return cls(
            id=row.usage_id,
            commit_id=row.commit,
            parent_id=row.parent_id,
            tool_name=row.tool_name,
            arguments=dict(row.arguments),
            result=None,
            status=row.status,
            error=None,
            started_at=timestamp(row.started_at),
            completed_at=None,
            tool_call_id=row.tool_call_id,
            heads=row.heads,
        )


_USAGE_KEYS = (
    *("id", "tool_name", "status", "commit_id", "parent_id", "tool_call_id", "arguments", "result"),
    *("result_chars", "error", "started_at", "completed_at", "duration_ms", "oid", "result_commit"),
    *("children", "heads", "rerun_of"),
)  # ToolUsage.to_json's keys, in its order (not the fields' order)


@attrs.frozen(kw_only=True)
class UsageNode:
    """A usage and the usages nested in it."""

    usage: ToolUsage
    children: tuple[UsageNode, ...] = ()

    def walk(self) -> Iterator[tuple[int, ToolUsage]]:
        """(depth, usage) for this node and every descendant, depth first in start order."""
        stack: list[tuple[int, UsageNode]] = [(0, self)]
        while stack:
            depth, node = stack.pop()
            yield depth, node.usage
            stack.extend((depth + 1, child) for child in reversed(node.children))

    def to_json(self) -> dict[str, Any]:
        """The usage's JSON dict with ``children`` holding the nested nodes' dicts instead of their ids."""
        return {**self.usage.to_json(), "children": [c.to_json() for c in self.children]}


class _Records:
    """Usage records read once each, and which ones a forest already shows."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.read: dict[ObjectId, UsageRecord | None] = {}
        self.shown: set[ObjectId] = set()

    def get(self, oid: ObjectId) -> UsageRecord | None:
        if oid in self.read:
            return self.read[oid]
        record = self.reader.get(oid)
        found = self.read[oid] = record if isinstance(record, UsageRecord) else None
        return found  # None: missing (not synced, or collected) or not a usage: fsck reports it

    def nested(self, roots: Iterable[ObjectId]) -> set[ObjectId]:
        """Every record listed as a child by a record reachable from ``roots`` (each record read once)."""
        out: set[ObjectId] = set()
        seen: set[ObjectId] = set()
        stack = list(roots)
        while stack:
            oid = stack.pop()
            if oid in seen:
                continue
            seen.add(oid)
            record = self.get(oid)
            if record is not None:
                out.update(record.children)
                stack.extend(record.children)
        return out

    def node(self, oid: ObjectId, result_commit: ObjectId | None) -> UsageNode | None:
        """The tree under a record not shown yet: each record once, down to ``MAX_USAGE_DEPTH`` levels."""
        record = self.get(oid)
        if record is None or oid in self.shown:
            return None
        self.shown.add(oid)
        order: list[tuple[ObjectId, UsageRecord, list[ObjectId]]] = []  # parents before their children
        stack: list[tuple[ObjectId, UsageRecord, int]] = [(oid, record, 0)]
        while stack:
            top, rec, depth = stack.pop()
            kept: list[tuple[ObjectId, UsageRecord]] = []
            if depth < MAX_USAGE_DEPTH:
                for child in rec.children:
                    nested = self.get(child)
                    if nested is not None and child not in self.shown:
                        self.shown.add(child)
                        kept.append((child, nested))
                stack.extend((c, r, depth + 1) for c, r in reversed(kept))
            order.append((top, rec, [c for c, _ in kept]))
        nodes: dict[ObjectId, UsageNode] = {}
        for top, rec, below in reversed(order):
            children = tuple(nodes.pop(c) for c in below)
            usage = ToolUsage.from_record(rec, top, result_commit if top == oid else None)
            usage = attrs.evolve(usage, children=tuple(c.usage.id for c in children))
            nodes[top] = UsageNode(usage=usage, children=children)
        return nodes[oid]


def _pending_node(
    records: _Records, row: PendingUsage, by_parent: dict[str, list[PendingUsage]]
) -> UsageNode:
    finished = [n for n in (records.node(c, None) for c in row.children) if n is not None]
    running = [_pending_node(records, r, by_parent) for r in by_parent.get(row.usage_id, ())]
    children = tuple(sorted([*finished, *running], key=lambda n: n.usage.started_at))
    usage = attrs.evolve(ToolUsage.from_pending(row), children=tuple(c.usage.id for c in children))
    return UsageNode(usage=usage, children=children)


def usage_forest(reader: Reader, tip: ObjectId | None, *, include_pending: bool = True) -> list[UsageNode]:
    """Every top-level usage in the history of ``tip`` (oldest first), then the pending and interrupted
    executions of that history (and those not tied to any commit), each with its nested usages.

    Cost: one walk of the history (every commit reachable from ``tip``) plus one read per usage record;
    each record is shown once (see the module doc).
    """
    roots: list[UsageNode] = []
    history: set[ObjectId] = set()
    records = _Records(reader)
    if tip is not None:
        linked: list[tuple[ObjectId, Commit]] = []
        for oid, commit in iter_log(reader, [tip]):
            history.add(oid)
            if commit.links.get(USAGE_LINK):
                linked.append((oid, commit))
        # A record linked by a commit and also nested in another (a child agent's branch merged into this
        # one) shows once, under its parent.
        nested = records.nested(u for _, commit in linked for u in commit.links[USAGE_LINK])
        for commit_id, commit in reversed(linked):
            for usage_oid in commit.links[USAGE_LINK]:
                node = records.node(usage_oid, commit_id) if usage_oid not in nested else None
                if node is not None:
                    roots.append(node)
    if include_pending:
        recorded = {usage.id for root in roots for _, usage in root.walk()}
        rows = [r for r in iter_pending(reader) if r.usage_id not in recorded]
        for row in rows:  # completed, awaiting the commit that links them: shown from their records
            if row.record is not None and (row.commit is None or row.commit in history):
                node = records.node(row.record, None)
                if node is not None:
                    roots.append(node)
        rows = [r for r in rows if r.record is None]
        ids = {r.usage_id for r in rows}
        by_parent: dict[str, list[PendingUsage]] = {}
        for row in rows:
            if row.parent_id is not None and row.parent_id in ids:
                by_parent.setdefault(row.parent_id, []).append(row)
        for row in rows:
            if row.parent_id is not None and row.parent_id in ids:
                continue
            if row.commit is None or row.commit in history:
                roots.append(_pending_node(records, row, by_parent))
    return roots


def flatten(roots: Iterable[UsageNode]) -> list[ToolUsage]:
    """Every usage of a forest, depth first in start order."""
    return [usage for root in roots for _, usage in root.walk()]


# --- selections ----------------------------------------------------------------------------------------------


def _about(usage: ToolUsage, commit: ObjectId) -> bool:
    return commit in (usage.commit_id, usage.result_commit)


def select_usages(
    roots: Iterable[UsageNode],
    *,
    commit: ObjectId | None = None,
    name: str | None = None,
    status: str | None = None,
) -> list[ToolUsage]:
    """The usages of a forest (nested ones included) started by / answered in ``commit``, of tool
    ``name``, with ``status``; depth first in start order."""
    return [
        usage
        for usage in flatten(roots)
        if (commit is None or _about(usage, commit))
        and (name is None or usage.tool_name == name)
        and (status is None or usage.status == status)
    ]


def select_trees(roots: Iterable[UsageNode], commit: ObjectId | None = None) -> list[UsageNode]:
    """The top-level trees started by (the assistant commit) or answered in (the tool result) ``commit``."""
    return [root for root in roots if commit is None or _about(root.usage, commit)]
