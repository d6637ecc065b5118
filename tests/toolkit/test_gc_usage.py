"""gc keeps what running tool executions hold: finished nested records not yet linked from any commit."""

from __future__ import annotations

from tractkv import Tract
from tractkv.engine import usage_rows
from tractkv.model.objects import UsageRecord


def test_gc_keeps_nested_records_of_a_running_execution() -> None:
    with Tract.open() as t:
        t.user("start")
        store = t._store
        parent = usage_rows.PendingUsage.start(
            usage_id="u-parent",
            tool_name="delegate",
            arguments={},
            started_at=1,
            commit=None,
            tool_call_id="c1",
            parent_id=None,
        )
        usage_rows.begin(store, parent)
        child = UsageRecord(
            usage_id="u-child",
            tool_name="search",
            status="success",
            started_at=2,
            completed_at=3,
            result="ok",
            parent_id="u-parent",
        )
        child_id = usage_rows.finish(store, child, had_row=False)
        assert store.has(child_id)

        t.gc(min_age_hours=0)
        assert store.has(child_id), "gc dropped a record a running execution still holds"

        usage_rows.delete_rows(store, ["u-parent"])  # the execution went away without linking it
        t.gc(min_age_hours=0)
        assert not store.has(child_id)
