"""Usage rows (the local ``usage`` table) and per-tool statistics, below the executor that drives them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import attrs
import pytest

from tractkv import Tract, codec
from tractkv.engine.usage import (
    PendingUsage,
    ToolUsage,
    abandon,
    begin,
    delete_rows,
    finish,
    held_ids,
    iter_pending,
    new_usage_id,
    note_head,
    truncate,
    usage_stats,
)
from tractkv.engine.usage.stats import percentile
from tractkv.errors import DecodeError, MissingLinkTarget
from tractkv.ids import ObjectId
from tractkv.model import UsageRecord
from tractkv.store import MemoryStore, Table

COMMIT = ObjectId("c" * 64)
HEAD = ObjectId("d" * 64)


def _row(
    usage_id: str = "u1", *, parent_id: str | None = None, commit: ObjectId | None = COMMIT
) -> PendingUsage:
    return PendingUsage.start(
        usage_id=usage_id,
        tool_name="search",
        arguments={"q": "x"},
        started_at=5,
        commit=commit,
        tool_call_id="c1" if parent_id is None else None,
        parent_id=parent_id,
    )


def _record(usage_id: str, *, parent_id: str | None = None, commit: ObjectId = COMMIT) -> UsageRecord:
    return UsageRecord(
        usage_id=usage_id,
        tool_name="search",
        status="success",
        started_at=5,
        completed_at=9,
        result="ok",
        commit=commit,
        tool_call_id="c1" if parent_id is None else None,
        parent_id=parent_id,
    )


def test_a_row_round_trips_and_omits_empty_fields() -> None:
    row = attrs.evolve(_row(), children=(HEAD,), heads=(HEAD,), record=HEAD, output="full")
    assert PendingUsage.from_row(row.to_row()) == row

    bare = attrs.evolve(_row(commit=None), tool_call_id=None, process_start=None)
    assert sorted(codec.loads(bare.to_row())) == ["args", "host", "id", "pid", "run", "start", "tool"]
    assert PendingUsage.from_row(bare.to_row()) == bare


def test_malformed_rows_are_decode_errors() -> None:
    with pytest.raises(DecodeError, match="must be a map"):
        PendingUsage.from_row(codec.dumps(["u1"]))
    with pytest.raises(DecodeError, match="malformed usage row"):
        PendingUsage.from_row(codec.dumps({"id": "u1", "tool": "search"}))  # no start


def test_status_follows_the_owner_process() -> None:
    mine = _row()
    assert mine.status == "pending"
    assert attrs.evolve(mine, record=HEAD).status == "completed"

    other = attrs.evolve(mine, run="another run")  # same host, so its pid can be checked
    assert attrs.evolve(other, host="elsewhere").status == "pending"  # another host: cannot tell
    assert attrs.evolve(other, pid=os.getpid()).status == "interrupted"  # an earlier process with our pid
    assert attrs.evolve(other, pid=0).status == "interrupted"  # abandoned

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert attrs.evolve(other, host=socket.gethostname(), pid=gone.pid).status == "interrupted"

    parent = attrs.evolve(other, pid=os.getppid(), process_start=None)
    assert parent.status == "pending"  # alive, start time unknown
    assert attrs.evolve(parent, process_start=-1).status == "interrupted"  # the pid now names a newer process


def test_completion_retires_rows_and_rows_hold_what_gc_must_keep() -> None:
    t = Tract(MemoryStore())
    store = t.store
    commit = t.user("the call's turn").commit_id  # what a record links is stored (the store checks it)
    begin(store, _row("parent", commit=commit))
    begin(store, _row("child", parent_id="parent", commit=commit))
    note_head(store, "parent", HEAD)
    child_id = finish(store, _record("child", parent_id="parent", commit=commit), had_row=True)
    assert [r.usage_id for r in iter_pending(store)] == ["parent"]  # the child's row is gone...
    (parent,) = iter_pending(store)
    assert (parent.children, parent.heads) == ((child_id,), (HEAD,))  # ...and its record noted in the parent
    assert held_ids(store) == {child_id, HEAD, commit}

    record_id = finish(store, _record("parent", commit=commit), had_row=True, output="the full output")
    (marker,) = iter_pending(store)  # a top-level answer to a call awaits its link
    assert (marker.status, marker.record, marker.output) == ("completed", record_id, "the full output")
    assert held_ids(store) == {child_id, HEAD, commit, record_id}

    with pytest.raises(MissingLinkTarget):  # a record linking a commit the store does not hold: refused
        finish(store, _record("orphan"), had_row=False)

    delete_rows(store, ["parent", "never-written"])
    assert list(iter_pending(store)) == []
    assert held_ids(store) == set()


def test_abandoned_rows_show_as_interrupted_and_unreadable_rows_are_skipped() -> None:
    store = MemoryStore()
    begin(store, _row("u1"))
    abandon(store, "u1")
    abandon(store, "absent")  # nothing to do
    batch = store.new_batch()
    batch.table_put(Table.USAGE, b"junk", b"\xff")
    store.apply(batch)
    assert [(r.usage_id, r.status) for r in iter_pending(store)] == [("u1", "interrupted")]


def test_usage_ids_sort_by_start_and_truncation_keeps_the_full_length() -> None:
    ids = [new_usage_id(t) for t in (2, 10, 300, 2**40)]
    assert sorted(ids) == ids
    assert len({len(i) for i in ids}) == 1
    assert truncate("abc", 3) == ("abc", None)
    cut, full = truncate("abcdef", 2)
    assert (cut[:2], full) == ("ab", 6)
    assert "2 of 6 characters kept" in cut


def _usage(name: str, status: str, ms: float | None) -> ToolUsage:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    return ToolUsage(
        id=f"{name}-{status}-{ms}",
        commit_id=None,
        parent_id=None,
        tool_name=name,
        arguments={},
        result=None,
        status=status,
        error=None,
        started_at=start,
        completed_at=None if ms is None else start + timedelta(milliseconds=ms),
    )


def test_stats_count_each_status_and_take_nearest_rank_percentiles() -> None:
    usages = [
        _usage("search", "success", 10),
        _usage("search", "error", 30),
        _usage("search", "interrupted", None),
        _usage("search", "success", 20),
        _usage("fetch", "pending", None),
    ]
    stats = usage_stats(usages)
    assert list(stats) == ["fetch", "search"]
    search = stats["search"]
    assert (search.count, search.success, search.error, search.interrupted, search.pending) == (4, 2, 1, 1, 0)
    assert (search.p50_ms, search.p95_ms, search.success_rate) == (20.0, 30.0, 0.5)
    fetch = stats["fetch"]
    assert (fetch.pending, fetch.p50_ms, fetch.success_rate) == (1, None, None)  # nothing finished yet
    assert fetch.to_json()["success_rate"] is None

    assert percentile([], 50) is None
    assert [percentile([4.0, 1.0, 3.0, 2.0], p) for p in (1, 25, 26, 50, 100)] == [1.0, 1.0, 2.0, 2.0, 4.0]
