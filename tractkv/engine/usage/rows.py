"""Tool-usage rows: the local ``usage`` table, who owns a row, and what a crash leaves behind.

Lifecycle of one execution (see :class:`~tractkv.toolkit.ToolExecutor`):

1. **Start.** Before the handler runs, a *pending row* is written to the local ``usage`` table (key: the
   usage id) in its own transaction, so it is on disk (``durable=True``) or at least in the OS page cache
   (``durable=False``) before any side effect of the tool can happen.
2. **Completion.** One transaction stores the completed :class:`~tractkv.model.UsageRecord` object and
   retires the pending row: a nested execution's row is deleted and the record's id added to its parent's
   row (so a parent that is interrupted later still shows the children that finished); the row of a
   top-level execution is replaced by an *awaiting-link* marker holding the record's id (and, when it
   answers a tool call, the full output). An execution refused before its handler could run (an unknown
   tool, arguments breaking the schema) never had a row: its marker is written here all the same. So every
   execution leaves a record, whoever called ``execute``.
3. **Link.** A commit links the top-level record: the agent loop's tool result (``links["usages"]``, which
   re-stores the whole tree in that transaction, so a concurrent gc between 2 and 3 cannot drop it), or
   ``t.tool_result(..., usages=result.usage_objects)``. The marker is deleted right after that commit
   (inside ``t.batch()``: with the batch). From then on the record, its nested records and the commits they
   name are reachable from the branch: they sync, survive gc, and pass fsck like any other object.

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
checked from here. An execution nobody links (``executor.execute`` called directly, as an MCP client's
call is) keeps its marker: queries show it (in every history when it names no commit, else in those holding
its commit) and gc keeps its record, but it is this store's only (it does not sync) until a commit links it.

How the records are queried lives next door: :mod:`tractkv.engine.usage.tree` turns the records a branch
links and the rows of this table into trees of :class:`~tractkv.engine.usage.tree.ToolUsage`, and
:mod:`tractkv.engine.usage.stats` counts them per tool.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import attrs

from tractkv import codec
from tractkv.errors import DecodeError
from tractkv.ids import ObjectId, is_object_id
from tractkv.model import UsageRecord, object_id
from tractkv.store import Reader, Store, Table, WriteBatch

USAGE_LINK = "usages"  # the Commit.links name under which a tool result links its usage records
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
    """This process's pid, host, start time and a random token (drawn again in a forked child).

    Read on first use, not at import: ``import tractkv`` stays free of socket and /proc reads."""

    def __init__(self) -> None:
        self._known = False
        self.pid = 0
        self.host = ""
        self.token = ""
        self.start: int | None = None

    def load(self) -> _Process:
        if not self._known:
            import socket

            self.pid = os.getpid()
            self.host = socket.gethostname()
            self.token = os.urandom(8).hex()
            self.start = _process_start(self.pid)
            self._known = True
        return self

    def reset(self) -> None:
        self._known = False


_PROCESS = _Process()
os.register_at_fork(after_in_child=_PROCESS.reset)


def new_usage_id(now_us: int) -> str:
    """A usage id: 14 hex digits of the start time (µs) then 10 random hex digits, so ids sort by start."""
    return f"{now_us:014x}{os.urandom(5).hex()}"


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
        me = _PROCESS.load()
        return cls(
            usage_id=usage_id,
            tool_name=tool_name,
            arguments=arguments,
            started_at=started_at,
            commit=commit,
            tool_call_id=tool_call_id,
            parent_id=parent_id,
            host=me.host,
            pid=me.pid,
            process_start=me.start,
            run=me.token,
        )

    def to_row(self) -> bytes:
        """The row's bytes (the format in the class docstring)."""
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
        if self.output is not None:
            row["out"] = self.output
        if self.process_start is not None:
            row["pstart"] = self.process_start
        return codec.dumps(row)

    @classmethod
    def from_row(cls, data: bytes) -> PendingUsage:
        """A row read back.

        Raises:
            DecodeError: the bytes are not a usage row.
        """
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
        me = _PROCESS.load()
        if self.run == me.token:
            return True
        if self.host != me.host:
            return True  # cannot check another host: assume it is still running
        if self.pid == me.pid or self.pid <= 0:
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
    """Store a completed record and retire its pending row, in one transaction: the row of a top-level
    execution becomes an awaiting-link marker (holding ``output``, the full output, when it answers a call;
    made from the record when the execution never had a row), so the record stays shown and kept until a
    commit links it; a nested execution's row is deleted and the record noted in its parent's row."""
    with _ROW_LOCK:
        batch = store.new_batch()
        oid = batch.put(record)
        key = record.usage_id.encode()
        raw = batch.table_get(Table.USAGE, key) if had_row else None
        if record.parent_id is None:
            row = PendingUsage.from_row(raw) if raw is not None else _row_of(record)
            marker = attrs.evolve(row, record=oid, output=output)
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


def _row_of(record: UsageRecord) -> PendingUsage:
    """The row of an execution that never had one (refused before its handler could run), owned by this
    process."""
    return PendingUsage.start(
        usage_id=record.usage_id,
        tool_name=record.tool_name,
        arguments=dict(record.arguments or {}),
        started_at=record.started_at,
        commit=record.commit,
        tool_call_id=record.tool_call_id,
        parent_id=None,
    )


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


def held_ids(reader: Reader) -> set[ObjectId]:
    """The object ids the rows hold and no ref may reach yet, which gc must keep: finished nested records,
    child conversations' last commits, records awaiting their link, and the commits that started the
    executions."""
    held: set[ObjectId] = set()
    for row in iter_pending(reader):
        held.update(row.children)
        held.update(row.heads)
        if row.record is not None:
            held.add(row.record)
        if row.commit is not None:
            held.add(row.commit)
    return held


def delete_rows(store: Store, usage_ids: Iterable[str]) -> None:
    """Drop rows (after their records were linked from a commit); absent ones are skipped."""
    batch = store.new_batch()
    for usage_id in usage_ids:
        if store.table_get(Table.USAGE, usage_id.encode()) is not None:
            batch.table_put(Table.USAGE, usage_id.encode(), None)
    if len(batch):
        store.apply(batch)


def retire_rows(store: Store, reader: Reader, usage_ids: Iterable[str]) -> None:
    """Drop the rows of records a commit just linked: at once, or with the batch when ``reader`` is the
    session's open batch (then they go only if the batch, and so the commit, lands)."""
    if isinstance(reader, WriteBatch):
        for usage_id in usage_ids:
            if reader.table_get(Table.USAGE, usage_id.encode()) is not None:
                reader.table_put(Table.USAGE, usage_id.encode(), None)
    else:
        delete_rows(store, usage_ids)


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
