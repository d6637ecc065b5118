"""A commit stamped at the end of time (issue 29, item 4): receivers and the write path refuse commits stamped
more than MAX_FUTURE_US past their clock, fsck warns about stored ones, and the local clock cannot be wedged
(nor dragged) by a parent stamped far ahead of it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from tractkv import Tract
from tractkv.cli import cli
from tractkv.engine.history import MAX_FUTURE_US, TS_MAX, check_commit
from tractkv.errors import InvalidInput, SyncError
from tractkv.model import Blob, Commit
from tractkv.store import MemoryStore

from .conftest import FakeClock

HOUR = 3600 * 1_000_000


def _now_us() -> int:
    return time.time_ns() // 1000


def _history_at(
    path: str, clock: FakeClock | object, texts: tuple[str, ...] = ("at the end of time",)
) -> str:
    with Tract.open(path, durable=False, clock=clock) as t:  # type: ignore[arg-type]
        for text in texts:
            head = t.user(text).commit_id
    return head


def test_a_parent_at_the_end_of_time_does_not_wedge_the_branch(tmp_path: Path) -> None:
    """Before: every append failed with "ts 9007199254740992 is outside [0, 2**53 - 1]", naming no cause."""
    path = str(tmp_path / "s")
    _history_at(path, lambda: TS_MAX)  # a wrong local clock (a receiver now refuses such a commit)
    clock = FakeClock(start=_now_us())
    with Tract.open(path, durable=False, clock=clock) as t:
        info = t.user("after the clock was set right")
        assert int(info.created_at.timestamp() * 1_000_000) // 1000 == clock.now // 1000  # the clock's time
        t.assistant("and on")
        t.branch("side")
        t.user("on the side")
        t.switch("main")
        t.merge("side")
        assert [m.content for m in t.compile().messages][-1] == "on the side"
        # a merge with a side stamped at the end of time: stamped by the clock, not wedged either
        t.branch("late")
    with Tract.open(path, durable=False, clock=lambda: TS_MAX - 5) as t:
        t.switch("late")
        t.user("late too")
        t.switch("main")
    with Tract.open(path, durable=False, clock=clock) as t:
        t.user("main moves on")
        assert t.merge("late").kind == "merge"
        assert t.get_commit("HEAD").created_at.year < 2200
        assert [m.content for m in t.compile().messages][-1] == "late too"


def test_a_parent_far_ahead_does_not_drag_later_commits(tmp_path: Path) -> None:
    clock = FakeClock(start=_now_us())
    with Tract.open(str(tmp_path / "s"), durable=False, clock=clock) as t:
        t.user("stamped by the clock")
        clock.advance(24 * 30)  # a clock a month ahead...
        ahead = t.user("a month ahead").created_at
        clock.advance(-24 * 30)  # ...set right again
        child = t.user("after the fix").created_at
        assert child < ahead  # not dragged a month ahead with its parent
        assert abs(child.timestamp() * 1_000_000 - clock.now) < 1_000_000
        # within the tolerance, a child stays after its parent (log order causal)
        clock.advance(2)
        near = t.user("two hours ahead").created_at
        clock.advance(-2)
        after = t.user("after that").created_at
        assert after > near


def test_a_clock_outside_the_range_is_named() -> None:
    store = MemoryStore()
    with Tract(store, owns_store=False, clock=lambda: TS_MAX + 1) as t:
        with pytest.raises(InvalidInput, match=r"this clock reads 9007199254740992 µs since the epoch"):
            t.user("hi")
        assert t.head is None


def test_the_write_path_refuses_a_commit_far_ahead_of_its_clock() -> None:
    store = MemoryStore()
    now = _now_us()
    blob = store.put(Blob(data={"type": "dialogue", "role": "user", "text": "x"}))
    commit = Commit(operation="append", content=blob, created_at=now + MAX_FUTURE_US + 1)
    check_commit(store, commit)  # without a clock: not checked
    check_commit(store, attrs.evolve(commit, created_at=now + MAX_FUTURE_US), now_us=now)  # at the bound
    with pytest.raises(InvalidInput, match="after this clock"):
        check_commit(store, commit, now_us=now)


@pytest.mark.parametrize(("ahead_hours", "refused"), [(48, True), (1, False)])
def test_a_receiver_refuses_commits_from_the_future(tmp_path: Path, ahead_hours: int, refused: bool) -> None:
    source = str(tmp_path / "source")
    _history_at(source, FakeClock(start=_now_us() + ahead_hours * HOUR), ("hello", "from a clock ahead"))
    with Tract.open(str(tmp_path / "local"), durable=False) as local:
        local.remote_add("origin", source)
        if refused:
            with pytest.raises(SyncError, match="after this clock"):
                local.fetch()
            assert [b.name for b in local.list_branches() if b.is_remote] == []
        else:
            local.fetch()
            assert [b.name for b in local.list_branches() if b.is_remote] == ["origin/main"]
    if refused:
        with pytest.raises(SyncError, match="after this clock"):
            Tract.clone(source, str(tmp_path / "clone"))
        with Tract.open(source, durable=False) as t:  # a push to a receiver is refused the same way
            t.remote_add("hub", str(tmp_path / "target"))
            Tract.open(str(tmp_path / "target")).close()
            with pytest.raises(SyncError):
                t.push("hub", "main")


def test_fsck_warns_about_stored_future_commits(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    head = _history_at(path, FakeClock(start=_now_us() + 48 * HOUR))
    runner = CliRunner()
    result = runner.invoke(cli, ["--store", path, "fsck"])
    assert result.exit_code == 0, result.output
    assert f"warning: future: {head}: ts" in result.output
    assert "after this clock" in result.output
    result = runner.invoke(cli, ["--store", path, "fsck", "--json"])
    report = json.loads(result.output)
    assert report["ok"] is True
    assert [f["where"] for f in report["future"]] == [head]
    with Tract.open(path, durable=False) as t:  # compile reads it as any other
        assert [m.content for m in t.compile().messages] == ["at the end of time"]
