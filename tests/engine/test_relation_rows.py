"""Relation rows (engine/relations.py): the derived rows that cut the spawn / collapse walks short.

Every answer read with rows is compared with the full walk of objects (``SpawnIndex(rows=False)``) on random
histories with appends, batches, spawns of every kind, collapses, tool results linking a child (run_child),
branches and merges, reopened handles, and clones through a path remote; damaged rows change no answer and
fsck finds them; read-only handles write none; gc drops the rows of removed commits."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

from tractkv import Tract, TractError, codec, toolkit
from tractkv.engine.compile import (
    REL_PREFIX,
    SpawnIndex,
    check_checkpoints,
    compiler,
    drop_checkpoints,
    relations,
)
from tractkv.engine.compile.relations import _row_check, read_row
from tractkv.engine.session import core as session_core
from tractkv.engine.spawning import children_of, parent_at
from tractkv.ids import ObjectId
from tractkv.llm import ScriptedLLM
from tractkv.store import LmdbStore, Store, Table
from tractkv.toolkit import ToolContext, ToolExecutor, tool

from .conftest import FakeClock


@tool
def lookup(key: str, *, context: ToolContext) -> str:
    """Look a key up in the table.

    Args:
        key: The key.
    """
    return {"a": "1", "b": "2"}.get(key, "missing")


@tool
def delegate(task: str, *, context: ToolContext) -> str:
    """Hand a task to a sub-agent that can look keys up.

    Args:
        task: What the sub-agent should do.
    """
    result = context.run_child(task, tools=["lookup"], system="You are a lookup helper.", max_steps=5)
    return f"sub-agent says: {result.text}"


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    tool_call = {"id": call_id, "type": "function", "function": function}
    return {"role": "assistant", "content": None, "tool_calls": [tool_call]}


def _agent_history(t: Tract) -> None:
    """A tool result whose usage record links the head of a child run by ``run_child``."""
    t.system("You coordinate.")
    t.user("What is a?")
    script = [
        _call("c1", "delegate", {"task": "find a"}),
        _call("k1", "lookup", {"key": "a"}),
        "a=1",
        "a is 1",
    ]
    llm = ScriptedLLM(script)
    toolkit.run(t, llm, ToolExecutor(t, profile=None, tools=[delegate, lookup]))


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def often(monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint (and so a relation row) every 3 commits, so small histories have many rows."""
    monkeypatch.setattr(compiler, "CHECKPOINT_EVERY", 3)
    monkeypatch.setattr(session_core, "CHECKPOINT_EVERY", 3)


def rel_rows(store: Store) -> dict[bytes, bytes]:
    return dict(store.table_iter(Table.DERIVED, REL_PREFIX))


def answers(store: Store, tip: ObjectId, name: str | None, rows: bool) -> tuple[Any, Any, int]:
    with store.snapshot() as reader:
        index = SpawnIndex(reader, rows=rows)
        parent = parent_at(reader, tip, index)
        kids = children_of(reader, tip, name, index)
        return parent, kids, len(index.peeked)


def assert_same_as_full_walk(store: Store, extra: list[ObjectId] = ()) -> int:  # type: ignore[assignment]
    """Every branch tip (and ``extra`` commits) answers the same with rows as from objects; the commits the
    walks with rows read, summed."""
    read = 0
    tips = [(ref.removeprefix("refs/heads/"), ObjectId(v)) for ref, v in store.iter_refs("refs/heads/")]
    tips += [(None, oid) for oid in extra]
    for name, tip in tips:
        fast = answers(store, tip, name, rows=True)
        slow = answers(store, tip, name, rows=False)
        assert fast[:2] == slow[:2], (name, tip)
        read += fast[2]
    return read


def random_history(t: Tract, rng: random.Random, steps: int, path: str, clock: FakeClock) -> Tract:
    """Random operations on the store at ``path``; returns the handle open at the end."""
    t.system("root")
    for step in range(steps):
        roll = rng.random()
        branches = [b.name for b in t.list_branches(remotes=False)]
        children = [b for b in branches if ".spawn/" in b]
        if roll < 0.35:
            t.user(f"message {step}")
        elif roll < 0.45:
            with t.batch():
                for i in range(rng.randint(2, 7)):
                    t.assistant(f"batched {step}.{i}")
        elif roll < 0.58:
            inherit = rng.choice(["snapshot", "full", "none"])
            with t.spawn(f"task {step}", inherit=inherit) as child:
                for i in range(rng.randint(0, 4)):
                    child.user(f"child {step}.{i}")
        elif roll < 0.68 and children:
            child = rng.choice(children)
            if child.startswith(f"{t.current_branch}.spawn/"):
                t.collapse(child, content=f"done {child}")
            else:
                t.switch(child)
        elif roll < 0.76:
            t.switch(rng.choice(branches))
        elif roll < 0.84:
            name = f"side{step}"
            t.branch(name, switch=False)
            with Tract.open(path, durable=False, clock=clock) as other:
                other.switch(name)
                for i in range(rng.randint(1, 4)):
                    other.user(f"side {step}.{i}")
            if rng.random() < 0.7:
                t.merge(name)
        elif roll < 0.92:
            t.close()
            t = Tract.open(path, durable=False, clock=clock)
        else:
            others = [b for b in branches if b != t.current_branch]
            if others:
                with suppress(TractError):  # a merge the history refuses (unrelated roots): not tested here
                    t.merge(rng.choice(others), strategy="ours")
    return t


@pytest.mark.parametrize("seed", range(12))
def test_random_histories_answer_as_the_full_walk(often: None, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    clock = FakeClock()
    path = str(tmp_path / "store")
    t = Tract.open(path, durable=False, clock=clock)
    t = random_history(t, rng, 60, path, clock)
    t.close()
    with LmdbStore(path, durable=False) as store:
        assert rel_rows(store), "no relation row was written"
        commits = [ObjectId(k.hex()) for k, _ in store.table_iter(Table.OBJECTS)]
        sample = [c for c in commits if store.get(c).KIND == "commit"]  # type: ignore[union-attr]
        assert_same_as_full_walk(store, rng.sample(sample, min(25, len(sample))))
        report = check_checkpoints(store)
        assert report.ok, report.problems
        assert report.relations == len(rel_rows(store))


def test_run_child_heads_and_a_clone_answer_as_the_full_walk(often: None, tmp_path: Path) -> None:
    clock = FakeClock()
    source = str(tmp_path / "source")
    with Tract.open(source, durable=False, clock=clock) as t:
        _agent_history(t)  # a tool result whose usage record links a run_child's head
        with t.spawn("open child", inherit="full") as child:
            child.user("still working")
        with t.spawn("folded", inherit="snapshot") as child:
            child.user("answer")
        t.collapse("main.spawn/folded", content="answer")
        for i in range(10):
            t.user(f"after {i}")
        expected = (t.parent(), t.children())
        assert [c.collapsed_via for c in expected[1]] == ["tool_result", None, "collapse"]
    remote = str(tmp_path / "remote")
    LmdbStore(remote, durable=False).close()
    with Tract.open(source, durable=False, clock=clock) as t:
        t.remote_add("origin", remote)
        t.push("origin", "main")
        t.push("origin", "main.spawn/open-child")
    with Tract.clone(remote, str(tmp_path / "clone"), durable=False, clock=clock) as replica:
        assert not rel_rows(replica.store)  # rows are local: none came with the objects
        assert (replica.parent(), replica.children()) == expected
        for i in range(5):
            replica.user(f"on the clone {i}")  # checkpoints write the clone's own rows
    with LmdbStore(tmp_path / "clone", durable=False) as store:
        assert rel_rows(store)
        assert_same_as_full_walk(store)
        assert check_checkpoints(store).ok
    with LmdbStore(source, durable=False) as store:
        assert_same_as_full_walk(store)
        assert check_checkpoints(store).ok


def test_a_long_branch_reads_only_the_commits_since_its_last_row(tmp_path: Path) -> None:
    """The point of the rows: children() and parent() of a 3,000-commit branch read a handful of commits."""
    path = str(tmp_path / "store")
    with Tract.open(path, durable=False, clock=FakeClock()) as t:
        t.system("root")
        with t.spawn("early", inherit="none") as child:
            child.user("early work")
        t.collapse("main.spawn/early", content="early answer")
        for _ in range(3):
            with t.batch():
                for i in range(1000):
                    t.user(f"message {i}")
        t.user("one more")  # after the last checkpoint: read from objects
        tip = ObjectId(t.head)
    with LmdbStore(path, durable=False) as store:
        _, kids, read = answers(store, tip, "main", rows=True)
        assert [k.purpose for k in kids] == ["early"]
        assert read < 20, read  # the tip's commit and rows; the full walk reads every commit
        assert answers(store, tip, "main", rows=False)[2] > 3000


def test_fsck_of_many_rows_reads_each_commit_about_once(
    often: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A linear history's rows name no stop (each stands for the whole history below it); fsck still checks
    each row only down to the row below, so it reads each commit a bounded number of times, not once a row."""
    path = str(tmp_path / "store")
    with Tract.open(path, durable=False, clock=FakeClock()) as t:
        t.system("root")
        for i in range(600):
            t.user(f"message {i}")
    calls = 0
    real = relations.peek

    def counting(reader: Any, oid: ObjectId) -> Any:
        nonlocal calls
        calls += 1
        return real(reader, oid)

    monkeypatch.setattr(relations, "peek", counting)
    with LmdbStore(path, durable=False) as store:
        report = check_checkpoints(store)
        assert report.ok, report.problems
        assert report.relations > 150
    assert calls < 4 * 600, calls


def damage_rows(path: str, change: Any) -> list[bytes]:
    with LmdbStore(path, durable=False) as store:
        rows = rel_rows(store)
        batch = store.new_batch()
        for key, raw in rows.items():
            batch.table_put(Table.DERIVED, key, change(key, raw))
        store.apply(batch)
        return list(rows)


def resign(key: bytes, body: dict[str, Any]) -> bytes:
    body = {k: v for k, v in body.items() if k != "check"}
    return codec.dumps({**body, "check": _row_check(key, body)})


def spawned_history(path: str) -> None:
    with Tract.open(path, durable=False, clock=FakeClock()) as t:
        t.system("root")
        for n in range(3):
            with t.spawn(f"task {n}", inherit="none") as child:
                child.user(f"work {n}")
            t.collapse(f"main.spawn/task-{n}", content=f"answer {n}")
            for i in range(5):
                t.user(f"message {n}.{i}")
        with t.spawn("open", inherit="full") as child:
            child.user("open work")


def flip(key: bytes, raw: bytes) -> bytes:
    return raw[:-1] + bytes([raw[-1] ^ 1])


def drop_marks(key: bytes, raw: bytes) -> bytes:
    body = codec.loads(raw)
    assert isinstance(body, dict)
    return resign(key, {**body, "marks": []})


def missing_stop(key: bytes, raw: bytes) -> bytes:
    body = codec.loads(raw)
    assert isinstance(body, dict)
    return resign(key, {**body, "stops": [b"\x07" * 32]})


def bad_type(key: bytes, raw: bytes) -> bytes:
    body = codec.loads(raw)
    assert isinstance(body, dict)
    return resign(key, {**body, "spawns": "x"})


@pytest.mark.parametrize("change", [flip, missing_stop, bad_type])
def test_damaged_rows_change_no_answer_and_fsck_drops_them(often: None, tmp_path: Path, change: Any) -> None:
    path = str(tmp_path / "store")
    spawned_history(path)
    with Tract.open(path, readonly=True) as t:
        expected = (t.parent(), t.children())
    damaged = damage_rows(path, change)
    with Tract.open(path, readonly=True) as t:
        assert (t.parent(), t.children()) == expected
    with LmdbStore(path, durable=False) as store:
        assert_same_as_full_walk(store)
        report = check_checkpoints(store)
        assert set(damaged) <= set(report.damaged)
        assert all(p.kind == "relation" for p in report.problems)
        drop_checkpoints(store, report.damaged)
        assert check_checkpoints(store).ok
        assert not rel_rows(store)
    with Tract.open(path, readonly=True) as t:
        assert (t.parent(), t.children()) == expected


def test_fsck_finds_a_consistent_row_that_lies(often: None, tmp_path: Path) -> None:
    """A row resigned with its marks removed passes the read checks (like a checkpoint's summary, it is
    trusted on the read path once its checksum and names hold); fsck recomputes it from commits."""
    path = str(tmp_path / "store")
    spawned_history(path)
    with LmdbStore(path, durable=False) as store:
        with_marks = [k for k, raw in rel_rows(store).items() if read_row(k, raw).marks]
    assert with_marks
    damage_rows(path, lambda k, raw: drop_marks(k, raw) if k in with_marks else raw)
    with LmdbStore(path, durable=False) as store:
        report = check_checkpoints(store)
        assert set(with_marks) <= set(report.damaged)
        assert any("marks" in p.detail for p in report.problems)


def tkv(path: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tractkv", "--store", path, *args],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=120,
        check=False,
    )


def test_cli_fsck_reports_and_repair_drops_a_damaged_relation_row(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    spawned_history(path)
    assert tkv(path, "fsck").returncode == 0
    before = tkv(path, "children", "--json").stdout
    damage_rows(path, flip)
    done = tkv(path, "fsck")
    assert done.returncode == 1
    assert "relation row" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert tkv(path, "children", "--json").stdout == before
    repaired = tkv(path, "fsck", "--repair")
    assert repaired.returncode == 0, repaired.stderr
    assert "dropped" in repaired.stdout + repaired.stderr
    assert tkv(path, "fsck").returncode == 0
    assert tkv(path, "children", "--json").stdout == before


def test_read_only_handles_write_no_row(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    spawned_history(path)
    damage_rows(path, lambda k, raw: None)  # delete every row
    with Tract.open(path, readonly=True) as t:
        t.children()
        t.parent()
        t.compile()
        t.log()
    with LmdbStore(path, durable=False) as store:
        assert not rel_rows(store)
    with Tract.open(path, durable=False) as t:
        t.user("a write writes a row again")
    with LmdbStore(path, durable=False) as store:
        assert rel_rows(store)
        assert check_checkpoints(store).ok


def test_gc_drops_the_rows_of_removed_commits(often: None, tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    clock = FakeClock()
    with Tract.open(path, durable=False, clock=clock) as t:
        t.system("root")
        t.branch("doomed")
        for i in range(8):
            t.user(f"doomed {i}")
        t.switch("main")
        t.user("kept")
    with LmdbStore(path, durable=False) as store:
        before = set(rel_rows(store))
    with Tract.open(path, durable=False, clock=clock) as t:
        t.delete_branch("doomed", force=True)
        clock.advance(24 * 365)
        t.gc(min_age_hours=0)
    with LmdbStore(path, durable=False) as store:
        after = set(rel_rows(store))
        assert after < before
        for key in after:
            assert store.has(ObjectId(key[len(REL_PREFIX) :].hex()))
        assert check_checkpoints(store).ok


def test_a_row_made_later_below_a_merge_that_skips_the_merges_stop_is_still_sound(tmp_path: Path) -> None:
    # side: S (a row with no marks or spawns), then B with no row yet; main merges B (M's row stops at S);
    # then B's row is made after S's, taking S's stops: fsck walks M from objects and finds it sound.
    with LmdbStore(tmp_path / "s", durable=False) as store:
        with Tract(store, owns_store=False) as t:
            t.user("A0")
            t.branch("side")
            t.user("S")
        side = Tract(store, owns_store=False, branch="side")
        side.user("B")
        with Tract(store, owns_store=False, branch="main") as main:
            main.user("A1")
            main.merge("side")
        side.close()
        assert len(rel_rows(store)) >= 3
        report = check_checkpoints(store)
        assert report.ok, report.problems
        assert_same_as_full_walk(store)
    out = tkv(str(tmp_path / "s"), "fsck")
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_failed_batch_leaves_no_checkpoint_or_row_for_its_commits(tmp_path: Path) -> None:
    # A session that replayed its history (the state it took is also pending as a checkpoint) appends in a
    # batch that raises: its staged commits never land, and no checkpoint or row may name them.
    with LmdbStore(tmp_path / "s", durable=False) as store:
        with Tract(store, owns_store=False) as t, t.batch():
            for i in range(2 * compiler.CHECKPOINT_EVERY):
                t.user(f"message {i}")
        drop_checkpoints(store, [key for key, _ in store.table_iter(Table.DERIVED)])
        t = Tract(store, owns_store=False)
        t.user("first after reopen")  # replays the history
        staged: list[ObjectId] = []

        def failing_batch() -> None:
            with t.batch():
                staged.append(t.user("never written").commit_id)
                raise RuntimeError("boom")

        with pytest.raises(RuntimeError):
            failing_batch()
        (phantom,) = staged
        t.user("after the failed batch")
        t.close()
        assert not store.has(phantom)
        report = check_checkpoints(store)
        assert report.ok, report.problems
        assert rel_rows(store)
