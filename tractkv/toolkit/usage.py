"""Tool-usage records: where they live, how a crash shows, and how they are queried.

Lifecycle of one execution (see :class:`~tractkv.toolkit.ToolExecutor`):

1. **Start.** Before the handler runs, a *pending row* is written to the local ``usage`` table (key: the
   usage id) in its own transaction, so it is on disk (``durable=True``) or at least in the OS page cache
   (``durable=False``) before any side effect of the tool can happen.
2. **Completion.** One transaction stores the completed :class:`~tractkv.model.UsageRecord` object and
   retires the pending row: a nested execution's row is deleted and the record's id added to its parent's
   row (so a parent that is interrupted later still shows the children that finished); the row of a
   top-level execution answering a tool call is replaced by an *awaiting-link* marker holding the record's
   id and the full output.
3. **Link.** The agent loop commits the tool result with ``links["usages"]`` naming the top-level record
   (and re-stores the whole tree in that transaction, so a concurrent gc between 2 and 3 cannot drop it),
   then deletes the marker. From then on the record, its nested records and the commits they name are
   reachable from the branch: they sync, survive gc, and pass fsck like any other object.

Why the marker (a departure from "delete the row when the record is stored"): a crash between 2 and 3 would
otherwise leave a call that ran with no trace on the branch, and the next run would execute it a second
time. With the marker the next run commits the recorded output instead: a tool's side effects happen at
most once per call. Queries show a marked execution from its record; a marker whose record is already
linked (a crash right after 3) is ignored.

A process that dies between 1 and 2 leaves its pending row behind. Rows carry the owner's host, pid, process
start time and a per-process token; a row whose owner is gone is reported with status ``interrupted``
(never dropped). The agent loop turns the interrupted rows of a call it finds unanswered into an
``interrupted`` record linked from an error result, so that fact, too, travels with the branch.

Caveats: ownership is judged on this host only. A row written on another host (a store copied between
machines, or a container with its own hostname) is reported ``pending`` because its owner cannot be
checked from here. An execution that ends without being linked (``executor.execute`` outside the loop,
with no ``t.tool_result(..., usages=...)``) leaves an unreachable record that gc reclaims: history is what a
branch reaches.
"""

from __future__ import annotations

import math
import os
import secrets
import socket
import threading
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

import attrs

from tractkv import codec
from tractkv.engine import graph
from tractkv.engine.results import timestamp
from tractkv.errors import DecodeError
from tractkv.ids import ObjectId, is_object_id
from tractkv.model import Commit, UsageRecord, object_id
from tractkv.store import Reader, Store, Table

USAGE_LINK = "usages"  # the Commit.links name under which a tool result links its usage records
STATUSES = ("pending", "success", "error", "interrupted")
DEFAULT_RESULT_LIMIT = 2_000  # characters of a result kept in its usage record (the commit has all of it)

_ROW_LOCK = threading.Lock()  # parent-row read-modify-write from concurrent child completions


# --- this process's identity (for telling live rows from orphans) --------------------------------------------


def _process_start(pid: int) -> int | None:
    """The start time of a process in clock ticks since boot (Linux), or None when unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return int(fields[19])  # field 22 of the whole line; the command name may hold spaces
    except (OSError, IndexError, ValueError):
        return None


class _Process:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.pid = os.getpid()
        self.host = socket.gethostname()
        self.token = secrets.token_hex(8)
        self.start = _process_start(self.pid)


_SELF = _Process()
os.register_at_fork(after_in_child=_SELF.reset)


def new_usage_id(now_us: int) -> str:
    """A usage id: 14 hex digits of the start time (µs) then 10 random hex digits, so ids sort by start."""
    return f"{now_us:014x}{secrets.token_hex(5)}"


def truncate(text: str, limit: int) -> tuple[str, int | None]:
    """``text`` cut to ``limit`` characters with a marker, and its full length (None when it was not cut)."""
    if len(text) <= limit:
        return text, None
    marker = (
        f"\n[... truncated: {limit} of {len(text)} characters kept; "
        "the full result is in the tool_result commit]"
    )
    return text[:limit] + marker, len(text)


# --- pending rows --------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class PendingUsage:
    """A row of the local ``usage`` table: an execution that started and has not completed (yet).

    Row format (canonical CBOR map, local only, never hashed or synced): ``id``, ``tool``, ``args``,
    ``start`` (µs), ``commit`` (hex or absent), ``call``, ``parent``, ``children`` (hex ids of finished
    nested records), ``heads`` (hex ids of child conversations' last commits), ``done`` and ``out`` (the
    record id and full output, once completed and awaiting its link), and the owner: ``host``,
    ``pid``, ``pstart`` (process start, clock ticks), ``run`` (a token drawn when the process started).
    """

    usage_id: str
    tool_name: str
    arguments: dict[str, Any] = attrs.field(factory=dict, hash=False)
    started_at: int
    commit: ObjectId | None = None
    tool_call_id: str | None = None
    parent_id: str | None = None
    children: tuple[ObjectId, ...] = ()
    heads: tuple[ObjectId, ...] = ()
    record: ObjectId | None = None
    output: str | None = None
    host: str = ""
    pid: int = 0
    process_start: int | None = None
    run: str = ""

    @classmethod
    def start(
        cls,
        *,
        usage_id: str,
        tool_name: str,
        arguments: dict[str, Any],
        started_at: int,
        commit: ObjectId | None,
        tool_call_id: str | None,
        parent_id: str | None,
    ) -> PendingUsage:
        """A row owned by this process."""
        return cls(
            usage_id=usage_id,
            tool_name=tool_name,
            arguments=arguments,
            started_at=started_at,
            commit=commit,
            tool_call_id=tool_call_id,
            parent_id=parent_id,
            host=_SELF.host,
            pid=_SELF.pid,
            process_start=_SELF.start,
            run=_SELF.token,
        )

    def to_row(self) -> bytes:
        row: dict[str, Any] = {
            "id": self.usage_id,
            "tool": self.tool_name,
            "args": self.arguments,
            "start": self.started_at,
            "host": self.host,
            "pid": self.pid,
            "run": self.run,
        }
        if self.commit is not None:
            row["commit"] = self.commit
        if self.tool_call_id is not None:
            row["call"] = self.tool_call_id
        if self.parent_id is not None:
            row["parent"] = self.parent_id
        if self.children:
            row["children"] = list(self.children)
        if self.heads:
            row["heads"] = list(self.heads)
        if self.record is not None:
            row["done"] = self.record
            row["out"] = self.output or ""
        if self.process_start is not None:
            row["pstart"] = self.process_start
        return codec.dumps(row)

    @classmethod
    def from_row(cls, data: bytes) -> PendingUsage:
        row = codec.loads(data)
        if not isinstance(row, dict):
            raise DecodeError("a usage row must be a map")
        try:
            return cls(
                usage_id=str(row["id"]),
                tool_name=str(row["tool"]),
                arguments=dict(row.get("args") or {}),
                started_at=int(row["start"]),
                commit=ObjectId(row["commit"]) if is_object_id(row.get("commit")) else None,
                tool_call_id=row.get("call"),
                parent_id=row.get("parent"),
                children=tuple(ObjectId(c) for c in row.get("children", ()) if is_object_id(c)),
                heads=tuple(ObjectId(c) for c in row.get("heads", ()) if is_object_id(c)),
                record=ObjectId(row["done"]) if is_object_id(row.get("done")) else None,
                output=row.get("out"),
                host=str(row.get("host", "")),
                pid=int(row.get("pid", 0)),
                process_start=row.get("pstart"),
                run=str(row.get("run", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DecodeError(f"malformed usage row: {exc}") from exc

    @property
    def status(self) -> str:
        """``completed`` once its record is stored (awaiting its link), else ``pending`` while its owner may
        still be running it, else ``interrupted``."""
        if self.record is not None:
            return "completed"
        return "pending" if self.owner_alive() else "interrupted"

    def owner_alive(self) -> bool:
        """Whether the process that started it may still be running (see the module's caveats)."""
        if self.run == _SELF.token:
            return True
        if self.host != _SELF.host:
            return True  # cannot check another host: assume it is still running
        if self.pid == _SELF.pid or self.pid <= 0:
            return False  # an earlier process that had our pid
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # it exists, owned by someone else
        if self.process_start is not None:
            now_start = _process_start(self.pid)
            if now_start is not None and now_start != self.process_start:
                return False  # the pid was reused by a newer process
        return True


def begin(store: Store, pending: PendingUsage) -> None:
    """Write a pending row in its own transaction (durable when the store is)."""
    batch = store.new_batch()
    batch.table_put(Table.USAGE, pending.usage_id.encode(), pending.to_row())
    store.apply(batch)


def finish(store: Store, record: UsageRecord, *, had_row: bool, output: str | None = None) -> ObjectId:
    """Store a completed record and retire its pending row, in one transaction: with ``output`` (a top-level
    execution answering a call) the row becomes an awaiting-link marker, else it is deleted and the record
    noted in its parent's row."""
    with _ROW_LOCK:
        batch = store.new_batch()
        oid = batch.put(record)
        key = record.usage_id.encode()
        raw = batch.table_get(Table.USAGE, key) if had_row else None
        if raw is not None and output is not None:
            marker = attrs.evolve(PendingUsage.from_row(raw), record=oid, output=output)
            batch.table_put(Table.USAGE, key, marker.to_row())
        elif raw is not None:
            batch.table_put(Table.USAGE, key, None)
        if record.parent_id is not None:
            raw = batch.table_get(Table.USAGE, record.parent_id.encode())
            if raw is not None:
                parent = PendingUsage.from_row(raw)
                updated = attrs.evolve(parent, children=(*parent.children, oid))
                batch.table_put(Table.USAGE, record.parent_id.encode(), updated.to_row())
        store.apply(batch)
    return oid


def note_head(store: Store, usage_id: str, head: ObjectId) -> None:
    """Add a child conversation's last commit to a running execution's row (so a crash keeps it)."""
    with _ROW_LOCK:
        batch = store.new_batch()
        raw = batch.table_get(Table.USAGE, usage_id.encode())
        if raw is None:
            return
        row = PendingUsage.from_row(raw)
        batch.table_put(Table.USAGE, usage_id.encode(), attrs.evolve(row, heads=(*row.heads, head)).to_row())
        store.apply(batch)


def iter_pending(reader: Reader) -> Iterator[PendingUsage]:
    """Every pending row (running or interrupted), oldest start first; unreadable rows are skipped."""
    for _key, value in reader.table_iter(Table.USAGE):
        try:
            yield PendingUsage.from_row(value)
        except DecodeError:
            continue


def delete_rows(store: Store, usage_ids: Iterable[str]) -> None:
    """Drop rows (after their records were linked from a commit); absent ones are skipped."""
    batch = store.new_batch()
    for usage_id in usage_ids:
        if store.table_get(Table.USAGE, usage_id.encode()) is not None:
            batch.table_put(Table.USAGE, usage_id.encode(), None)
    if len(batch):
        store.apply(batch)


def abandon(store: Store, usage_id: str) -> None:
    """Mark a running execution's row as owned by nobody (its handler was cut short by KeyboardInterrupt or
    SystemExit in a process that goes on), so it shows as interrupted at once."""
    with _ROW_LOCK:
        raw = store.table_get(Table.USAGE, usage_id.encode())
        if raw is None:
            return
        row = attrs.evolve(PendingUsage.from_row(raw), pid=0, run="", process_start=None)
        batch = store.new_batch()
        batch.table_put(Table.USAGE, usage_id.encode(), row.to_row())
        store.apply(batch)


def load_tree(reader: Reader, oid: ObjectId) -> list[UsageRecord]:
    """A stored record and every record nested in it (nested ones first, the root last)."""
    out: list[UsageRecord] = []
    record = reader.get(oid)
    if not isinstance(record, UsageRecord):
        return out
    for child in record.children:
        out.extend(load_tree(reader, child))
    out.append(record)
    return out


def interrupted_records(reader: Reader, root: PendingUsage) -> list[UsageRecord]:
    """Records of status ``interrupted`` for a pending row and the rows nested in it (the root last).

    Each record lists the children that finished before the crash (from its row) and its interrupted
    descendants.
    """
    rows = [r for r in iter_pending(reader) if r.record is None]
    by_parent: dict[str, list[PendingUsage]] = {}
    for row in rows:
        if row.parent_id is not None:
            by_parent.setdefault(row.parent_id, []).append(row)
    out: list[UsageRecord] = []

    def build(row: PendingUsage) -> ObjectId:
        nested = [build(child) for child in by_parent.get(row.usage_id, ())]
        record = UsageRecord(
            usage_id=row.usage_id,
            tool_name=row.tool_name,
            status="interrupted",
            started_at=row.started_at,
            arguments=row.arguments or None,
            error="interrupted: the process running this tool ended before the tool finished",
            commit=row.commit,
            tool_call_id=row.tool_call_id,
            parent_id=row.parent_id,
            children=(*(c for c in row.children if reader.has(c)), *nested),
            heads=tuple(h for h in row.heads if reader.has(h)),
        )
        out.append(record)
        return object_id(record)

    build(root)
    return out


# --- the query view ------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ToolUsage:
    """One tool execution as queries show it (completed, running, or interrupted).

    Attributes:
        id: the usage id (given at start; events and pending rows use it too).
        commit_hash: the assistant commit whose tool call started it (inherited by nested executions).
        parent_id: the usage id of the execution it ran inside, or None at the top level.
        status: ``pending``, ``success``, ``error`` or ``interrupted``.
        result: the output as recorded, cut to the executor's limit with a marker (see ``result_chars``).
        oid: the id of the stored record (None while pending or interrupted without a record).
        result_commit: the tool_result commit that links this (top-level) record.
        children: the usage ids of the executions nested in it, in start order.
        heads: the last commits of conversations it ran (a child agent loop's tip).
    """

    id: str
    commit_hash: ObjectId | None
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
        """A JSON-safe dict (timestamps as ISO 8601)."""
        from tractkv.model import to_jsonable

        return {
            "id": self.id,
            "tool_name": self.tool_name,
            "status": self.status,
            "commit_hash": self.commit_hash,
            "parent_id": self.parent_id,
            "tool_call_id": self.tool_call_id,
            "arguments": to_jsonable(self.arguments),
            "result": self.result,
            "result_chars": self.result_chars,
            "error": self.error,
            "started_at": self.started_at.isoformat(),
            "completed_at": self.completed_at.isoformat() if self.completed_at else None,
            "duration_ms": self.duration_ms,
            "oid": self.oid,
            "result_commit": self.result_commit,
            "children": list(self.children),
            "heads": list(self.heads),
        }

    @classmethod
    def from_record(cls, record: UsageRecord, oid: ObjectId, result_commit: ObjectId | None) -> ToolUsage:
        return cls(
            id=record.usage_id,
            commit_hash=record.commit,
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
        )

    @classmethod
    def from_pending(cls, row: PendingUsage) -> ToolUsage:
        return cls(
            id=row.usage_id,
            commit_hash=row.commit,
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


@attrs.frozen(kw_only=True)
class UsageNode:
    """A usage and the usages nested in it."""

    usage: ToolUsage
    children: tuple[UsageNode, ...] = ()

    def walk(self) -> Iterator[tuple[int, ToolUsage]]:
        """(depth, usage) for this node and every descendant, depth first in start order."""
        yield 0, self.usage
        for child in self.children:
            for depth, usage in child.walk():
                yield depth + 1, usage

    def to_json(self) -> dict[str, Any]:
        return {**self.usage.to_json(), "children": [c.to_json() for c in self.children]}


def _node(reader: Reader, oid: ObjectId, result_commit: ObjectId | None) -> UsageNode | None:
    # No cycle guard needed: a record's id is the hash of its bytes, so it cannot list itself below it.
    record = reader.get(oid)
    if not isinstance(record, UsageRecord):
        return None  # missing (not synced, or collected) or not a usage: fsck reports it
    children = tuple(n for n in (_node(reader, c, None) for c in record.children) if n is not None)
    usage = ToolUsage.from_record(record, oid, result_commit)
    usage = attrs.evolve(usage, children=tuple(c.usage.id for c in children))
    return UsageNode(usage=usage, children=children)


def _pending_node(reader: Reader, row: PendingUsage, by_parent: dict[str, list[PendingUsage]]) -> UsageNode:
    finished = [n for n in (_node(reader, c, None) for c in row.children) if n is not None]
    running = [_pending_node(reader, r, by_parent) for r in by_parent.get(row.usage_id, ())]
    children = tuple(sorted([*finished, *running], key=lambda n: n.usage.started_at))
    usage = attrs.evolve(ToolUsage.from_pending(row), children=tuple(c.usage.id for c in children))
    return UsageNode(usage=usage, children=children)


def usage_forest(reader: Reader, tip: ObjectId | None, *, include_pending: bool = True) -> list[UsageNode]:
    """Every top-level usage in the history of ``tip`` (oldest first), then the pending and interrupted
    executions of that history (and those not tied to any commit), each with its nested usages.

    Cost: one walk of the history (every commit reachable from ``tip``) plus one read per usage record.
    """
    roots: list[UsageNode] = []
    history: set[ObjectId] = set()
    if tip is not None:
        linked: list[tuple[ObjectId, Commit]] = []
        for oid, commit in graph.iter_log(reader, [tip]):
            history.add(oid)
            if commit.links.get(USAGE_LINK):
                linked.append((oid, commit))
        found: set[ObjectId] = set()
        for commit_id, commit in reversed(linked):
            for usage_oid in commit.links[USAGE_LINK]:
                node = _node(reader, usage_oid, commit_id) if usage_oid not in found else None
                found.add(usage_oid)
                if node is not None:
                    roots.append(node)
        # A record linked by a commit and also nested in another (a child agent's branch merged into this
        # one) shows once, under its parent.
        nested = {u.oid for root in roots for depth, u in root.walk() if depth}
        roots = [root for root in roots if root.usage.oid not in nested]
    if include_pending:
        recorded = {usage.id for root in roots for _, usage in root.walk()}
        rows = [r for r in iter_pending(reader) if r.usage_id not in recorded]
        for row in rows:  # completed, awaiting the commit that links them: shown from their records
            if row.record is not None and (row.commit is None or row.commit in history):
                node = _node(reader, row.record, None)
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
                roots.append(_pending_node(reader, row, by_parent))
    return roots


def flatten(roots: Iterable[UsageNode]) -> list[ToolUsage]:
    """Every usage of a forest, depth first in start order."""
    return [usage for root in roots for _, usage in root.walk()]


# --- statistics ----------------------------------------------------------------------------------------------


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
        return {**attrs.asdict(self), "success_rate": self.success_rate}


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


# --- selections ----------------------------------------------------------------------------------------------


def _about(usage: ToolUsage, commit: ObjectId) -> bool:
    return commit in (usage.commit_hash, usage.result_commit)


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
