"""Budgets check ref moves too: a fast-forward merge, a reset, a pull and a push a store receives move a
budgeted branch only as a commit would (``warn`` records it and tells the listeners, ``reject`` moves nothing,
``trim`` / ``compress`` add their commit in the move's transaction). Before, a move was never checked: the
branch could sit over its budget until the next commit there.

Limits are derived from measured counts (the base and the tip the move goes to), so "over" is exact whatever
the token counter's estimate is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tractkv import BudgetExceeded, NoLLMConfigured, Tract
from tractkv.cli import cli
from tractkv.engine.budget import OVERRUN
from tractkv.errors import PushRejected
from tractkv.llm import ScriptedLLM
from tractkv.store import Store, Table, fsck, open_store

from .conftest import FakeClock

MAIN = "refs/heads/main"


def rows(store: Store) -> dict[str, list[tuple[bytes, bytes]]]:
    """Every row of every table: what "nothing changed" compares."""
    return {table.value: list(store.table_iter(table)) for table in Table}


def base_and_side(t: Tract, extra: int = 6) -> tuple[str, str]:
    """main: a system message and two questions; side: main plus ``extra`` more. Returns (main's tip, side's
    tip), HEAD back on main."""
    t.system("You are terse.")
    for i in range(2):
        t.user(f"Question {i}: what is {i} plus {i}, in words please?")
    base = t.head
    t.branch("side")
    for i in range(extra):
        t.user(f"Side question {i}: what is {i} plus {i}, in words please, and show the steps?")
    side = t.head
    t.switch("main")
    assert base is not None
    assert side is not None
    return base, side


def limit_between(t: Tract, side: str) -> int:
    """A budget the base is within and the side's tip is over."""
    low, high = t.compile().token_count, t.compile(at=side).token_count
    assert high > low + 40
    return (low + high) // 2


def via_merge(t: Tract, tmp_path: Path) -> Any:
    return t.merge("side")


def via_reset(t: Tract, tmp_path: Path) -> Any:
    return t.reset("side")


def via_hard_reset(t: Tract, tmp_path: Path) -> Any:
    return t.reset("side", mode="hard")


def via_pull(t: Tract, tmp_path: Path) -> Any:
    return t.pull("origin", "side")


MOVES: dict[str, Callable[[Tract, Path], Any]] = {
    "merge": via_merge,
    "reset": via_reset,
    "reset --hard": via_hard_reset,
    "pull": via_pull,
}
WHAT = {
    "merge": "the fast-forward",
    "reset": "the reset",
    "reset --hard": "the reset",
    "pull": "the fast-forward",
}


def prepared(tmp_path: Path, move: str, **kwargs: Any) -> tuple[Tract, str, str]:
    """A store with main and side; for a pull, side lives on the remote ``origin`` (fetched by the pull)."""
    t = Tract.open(str(tmp_path / "s"), clock=FakeClock(), **kwargs)
    base, side = base_and_side(t)
    if move == "pull":
        origin = str(tmp_path / "origin")
        Tract.open(origin).close()
        t.remote_add("origin", origin)
        t.push("origin", "side")
        t.delete_branch("side", force=True)
        t.remote_remove("origin")  # forget the tracking branch the push made: the pull fetches it
        t.remote_add("origin", origin)
    return t, base, side


@pytest.mark.parametrize("move", list(MOVES))
def test_warn_records_the_overrun_of_a_move_and_tells_the_listeners(tmp_path: Path, move: str) -> None:
    t, _base, side = prepared(tmp_path, move)
    with t:
        limit = limit_between(t, side)
        t.set_budget(limit, action="warn")
        heard: list[Any] = []
        t.on("budget_exceeded", heard.append)
        MOVES[move](t, tmp_path)
        assert t.head == side  # warn moves the branch
        assert [(o.action, o.commit_id, o.limit) for o in heard] == [("warn", side, limit)]
        assert heard[0].token_count == t.compile().token_count > limit
        overrun = t.status().budget_overrun
        assert overrun is not None
        assert overrun.commit_id == side


@pytest.mark.parametrize("move", list(MOVES))
def test_reject_refuses_the_move_and_changes_nothing(tmp_path: Path, move: str) -> None:
    t, base, side = prepared(tmp_path, move)
    with t:
        limit = limit_between(t, side)
        t.set_budget(limit, action="reject")
        if move == "pull":
            t.fetch("origin")  # what a refused pull keeps: the fetch (objects, the tracking branch)
        before = rows(t.store)
        heard: list[Any] = []
        t.on("budget_exceeded", heard.append)
        with pytest.raises(BudgetExceeded) as info:
            MOVES[move](t, tmp_path)
        assert info.value.limit == limit
        assert info.value.token_count > limit
        assert str(info.value).startswith(f"{WHAT[move]} would take the context of branch 'main' to ")
        assert str(info.value).endswith("action reject): 'main' did not move")
        assert rows(t.store) == before  # not the branch, its reflog, an overrun record nor a checkpoint
        assert t.head == base
        assert heard == []
        assert t.user("still writable where it was").commit_id != side


@pytest.mark.parametrize("move", list(MOVES))
@pytest.mark.parametrize("action", ["trim", "compress"])
def test_trim_and_compress_commit_in_the_moves_transaction(tmp_path: Path, move: str, action: str) -> None:
    t, base, side = prepared(tmp_path, move)
    with t:
        t.configure_llm(None, summarizer=ScriptedLLM(["Side sums, asked."]))
        limit = limit_between(t, side)
        t.set_budget(limit, action=action)
        heard: list[Any] = []
        t.on("budget_exceeded", heard.append)
        result = MOVES[move](t, tmp_path)
        top = t.log(limit=1)[0]
        assert top.operation == action
        assert t.get_commit(top.commit_id).parent_ids == (side,)  # on the tip the move went to
        if move in ("merge", "pull"):
            assert (result.kind, result.head) == ("fast-forward", top.commit_id)
        ctx = t.compile()
        assert ctx.token_count <= limit
        assert ctx.messages[0].role == "system"
        assert ctx.commit_ids[-1] == side  # the newest message is never what a budget drops
        assert [(o.action, o.commit_id, o.result_id) for o in heard] == [(action, side, top.commit_id)]
        # one transaction: one reflog entry, from the old tip to the budget's commit (side was never a tip)
        entry = t.reflog("main")[0]
        assert (entry.old, entry.new) == (base, top.commit_id)
        assert f"; then {action} " in entry.message
    with open_store(str(tmp_path / "s"), create=False) as store:
        assert fsck(store).ok


@pytest.mark.parametrize("move", ["merge", "reset"])
def test_compress_without_a_model_and_a_trim_that_cannot_fit_move_nothing(tmp_path: Path, move: str) -> None:
    t, base, side = prepared(tmp_path, move)
    with t:
        limit = limit_between(t, side)
        t.set_budget(limit, action="compress")
        before = rows(t.store)
        with pytest.raises(NoLLMConfigured, match="a compress budget"):
            MOVES[move](t, tmp_path)
        assert rows(t.store) == before
        assert t.head == base
        t.set_budget(5, action="trim")  # the system message and the newest one alone are over 5
        before = rows(t.store)
        with pytest.raises(BudgetExceeded, match="'main' did not move"):
            MOVES[move](t, tmp_path)
        assert rows(t.store) == before
        assert t.head == base


def test_a_fast_forward_inside_a_batch_is_checked_at_the_blocks_end(tmp_path: Path) -> None:
    with Tract.open(str(tmp_path / "s"), clock=FakeClock()) as t:
        base, side = base_and_side(t)
        t.set_budget(limit_between(t, side), action="reject")
        before = rows(t.store)
        with pytest.raises(BudgetExceeded), t.batch():
            assert t.merge("side").kind == "fast-forward"
        assert rows(t.store) == before
        assert t.head == base


def test_a_reset_back_within_the_limit_clears_the_overrun(tmp_path: Path) -> None:
    """The overrun row said the branch was over; a reset that brings it back is checked now and removes it
    (before, the move was not checked and the row stayed, hidden only by status's own test)."""
    with Tract.open(str(tmp_path / "s"), clock=FakeClock()) as t:
        base, side = base_and_side(t)
        t.set_budget(limit_between(t, side), action="warn")
        t.reset("side")
        key = OVERRUN + MAIN.encode()
        assert t.store.table_get(Table.META, key) is not None
        t.reset(base)
        assert t.store.table_get(Table.META, key) is None
        assert t.status().budget_overrun is None


def test_a_checkout_of_a_remote_branch_moves_no_branch(tmp_path: Path) -> None:
    """Checking out ``origin/side`` detaches HEAD there (read-only): no local branch moves, so no budget acts
    and none is needed."""
    t, base, side = prepared(tmp_path, "pull")
    with t:
        t.set_budget(limit_between(t, side), action="reject")
        t.fetch("origin")
        assert t.checkout("origin/side") == side
        assert t.is_detached
        assert t.store.get_ref(MAIN) == base


# --- a push received -------------------------------------------------------------------------------------------


def pushed_to_a_budgeted_store(tmp_path: Path, action: str) -> tuple[Tract, Tract, str, str, int]:
    """``a`` (main = base, side = the longer history) and ``origin`` (main = base, budget ``action``)."""
    a = Tract.open(str(tmp_path / "a"), clock=FakeClock())
    base, side = base_and_side(a)
    limit = limit_between(a, side)
    origin = Tract.open(str(tmp_path / "origin"), clock=FakeClock())
    a.remote_add("origin", str(tmp_path / "origin"))
    a.push("origin")
    origin.set_budget(limit, action=action)
    a.reset("side")  # the push sends main at side's tip
    return a, origin, base, side, limit


def test_a_push_over_the_receivers_reject_budget_is_refused_and_moves_nothing(tmp_path: Path) -> None:
    a, origin, base, _side, _limit = pushed_to_a_budgeted_store(tmp_path, "reject")
    with a, origin:
        with pytest.raises(PushRejected) as info:
            a.push("origin")
        (result,) = info.value.results
        assert (result.ok, result.reason) == (False, "over-budget")
        assert result.detail.startswith("the push would take the context of branch 'main' to ")
        assert "trim or compress the branch's context, then push again" in str(info.value)
        assert origin.store.get_ref(MAIN) == base
        assert origin.store.table_get(Table.META, OVERRUN + MAIN.encode()) is None


@pytest.mark.parametrize("action", ["warn", "trim", "compress"])
def test_a_push_received_acts_as_the_receivers_budget_says(tmp_path: Path, action: str) -> None:
    a, origin, base, side, limit = pushed_to_a_budgeted_store(tmp_path, action)
    with a, origin:
        if action == "compress":  # the receiving store has no model: refused, nothing moves
            with pytest.raises(PushRejected, match="has no model to summarize with"):
                a.push("origin")
            assert origin.store.get_ref(MAIN) == base
            return
        assert a.push("origin").ok
        tip = origin.store.get_ref(MAIN)
        overrun = origin.status().budget_overrun
        assert overrun is not None
        assert overrun.commit_id == side
        if action == "warn":
            assert tip == side
            return
        trim = origin.get_commit(tip)
        assert (trim.operation, trim.parent_ids) == ("trim", (side,))
        assert origin.compile().token_count <= limit
        assert a.pull("origin").kind == "fast-forward"  # the pusher gets the trim with its next pull
        assert a.head == tip


# --- the command line ------------------------------------------------------------------------------------------


def cli_run(store: str, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--store", store, *args])


def snapshot(store: str) -> tuple[dict[str, str], int, list[tuple[bytes, bytes]]]:
    with open_store(store, create=False) as s:
        return dict(s.iter_refs()), s.count_objects(), list(s.table_iter(Table.REFLOG))


@pytest.mark.parametrize("command", [["merge", "side"], ["reset", "side"], ["pull", "origin", "side"]])
def test_cli_moves_over_a_budget(tmp_path: Path, command: list[str]) -> None:
    t, _base, side = prepared(tmp_path, "pull" if command[0] == "pull" else "merge")
    limit = limit_between(t, side)
    t.close()
    store = str(tmp_path / "s")
    assert cli_run(store, "budget", str(limit), "--action", "reject").exit_code == 0
    if command[0] == "pull":
        assert cli_run(store, "fetch", "-q").exit_code == 0
    before = snapshot(store)
    refused = cli_run(store, *command)
    assert refused.exit_code == 1
    assert refused.stdout == ""
    assert refused.stderr.count("\n") == 1
    assert refused.stderr.startswith("Error: the ")
    assert "'main' did not move" in refused.stderr
    assert snapshot(store) == before
    assert cli_run(store, "budget", str(limit), "--action", "trim").exit_code == 0
    moved = cli_run(store, *command)
    assert moved.exit_code == 0, moved.output
    log = json.loads(cli_run(store, "log", "--json").stdout)
    assert log[0]["operation"] == "trim"
    assert json.loads(cli_run(store, "status", "--json").stdout)["token_count"] <= limit
    assert side in {entry["commit_id"] for entry in log}


def test_a_budget_set_while_a_branch_was_unborn_checks_its_creation(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    with Tract.open(path, clock=FakeClock()) as t:
        _, side = base_and_side(t)
        limit = limit_between(t, side)
    with Tract.open(path, branch="fresh", clock=FakeClock()) as t:
        t.set_budget(limit, action="reject")  # on the unborn branch the handle is on
        before = rows(t.store)
        with pytest.raises(
            BudgetExceeded, match="creating the branch would take the context of branch 'fresh'"
        ):
            t.branch("fresh", "side")
        assert rows(t.store) == before
        t.set_budget(limit, action="trim")
        tip = t.branch("fresh", "side").head
        trim = t.get_commit(tip or "")
        assert (trim.operation, trim.parent_ids) == ("trim", (side,))
        assert t.compile().token_count <= limit
