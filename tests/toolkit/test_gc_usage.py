"""gc keeps what running tool executions hold: finished nested records not yet linked from any commit."""

from __future__ import annotations

import pytest

from tractkv import Tract
from tractkv.engine.usage import rows as usage_rows
from tractkv.ids import ObjectId
from tractkv.model.objects import UsageRecord

PARENT = usage_rows.PendingUsage.start(
    usage_id="u-parent",
    tool_name="delegate",
    arguments={},
    started_at=1,
    commit=None,
    tool_call_id="c1",
    parent_id=None,
)
CHILD = UsageRecord(
    usage_id="u-child",
    tool_name="search",
    status="success",
    started_at=2,
    completed_at=3,
    result="ok",
    parent_id="u-parent",
)


def test_gc_keeps_nested_records_of_a_running_execution() -> None:
    with Tract.open() as t:
        t.user("start")
        store = t._store
        usage_rows.begin(store, PARENT)
        child_id = usage_rows.finish(store, CHILD, had_row=False)
        assert store.has(child_id)

        t.gc(min_age_hours=0)
        assert store.has(child_id), "gc dropped a record a running execution still holds"

        usage_rows.delete_rows(store, ["u-parent"])  # the execution went away without linking it
        t.gc(min_age_hours=0)
        assert not store.has(child_id)


def test_a_row_written_while_gc_starts_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    """A running execution's row written after gc's caller could have read the rows, but before gc
    announced itself (so no writer records it for gc): gc reads the rows inside its own snapshot and again in
    its deleting transaction, and keeps the nested record the row holds."""
    from tractkv.engine import gc as gc_module

    with Tract.open() as t:
        t.user("start")
        store = t._store
        held: list[ObjectId] = []
        announce = gc_module._announce

        def late_row_then_announce(st: object, token: bytes) -> None:
            usage_rows.begin(store, PARENT)  # another process's tool finishes its nested call now
            held.append(usage_rows.finish(store, CHILD, had_row=False))
            announce(store, token)

        monkeypatch.setattr(gc_module, "_announce", late_row_then_announce)
        t.gc(min_age_hours=0)
        assert len(held) == 1
        assert store.has(held[0]), "gc dropped a record a row written as it started holds"
