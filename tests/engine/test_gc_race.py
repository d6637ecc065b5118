"""gc beside writers (issue 29, items 1 and 2): gc marks from a snapshot and deletes in a later transaction; a
writer that meanwhile writes an object already stored (a repeated "continue", a tool set) or moves a ref to it
must make gc keep it. gc runs in another process, paused between its snapshot and its deletion (a wrapper
around the store's snapshot in that process, no hook in the library), while this process writes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tractkv import Tract, TractError
from tractkv.engine.content import ACTIVE_TOOLS
from tractkv.ids import ObjectId
from tractkv.store import Table, fsck, open_store

from .conftest import START_US, FakeClock

ROOT = Path(__file__).resolve().parents[2]
TOOL = {"name": "lookup", "description": "find a thing", "parameters": {"type": "object", "properties": {}}}

# gc in a child process that stops after its marking snapshot closes, until the flag file is removed.
GC_SCRIPT = textwrap.dedent(
    """
    import contextlib, os, sys, time
    import tractkv.engine.gc as gc
    from tractkv import Tract

    path, flag, hours = sys.argv[1], sys.argv[2], float(sys.argv[3])
    original = gc.collect_garbage

    def paused(store, **kwargs):
        real, first = store.snapshot, [True]

        @contextlib.contextmanager
        def snapshot():
            with real() as snap:
                yield snap
            if first[0]:
                first[0] = False
                open(flag + ".marked", "w").close()
                deadline = time.monotonic() + 30
                while os.path.exists(flag) and time.monotonic() < deadline:
                    time.sleep(0.005)

        store.snapshot = snapshot
        try:
            return original(store, **kwargs)
        finally:
            del store.snapshot

    gc.collect_garbage = paused
    with Tract.open(path) as t:
        print(t.gc(min_age_hours=hours).removed_objects)
    """
)


def start_paused_gc(path: Path, flag: Path, hours: float = 72.0) -> subprocess.Popen[str]:
    flag.touch()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", GC_SCRIPT, str(path), str(flag), str(hours)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    marked = Path(str(flag) + ".marked")
    deadline = time.monotonic() + 30
    while not marked.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"gc did not reach its pause: {proc.communicate()}")
        time.sleep(0.005)
    return proc


def release(proc: subprocess.Popen[str], flag: Path) -> str:
    flag.unlink()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return out


def old_history(path: Path, commits: int) -> None:
    """``commits`` old commits (four days ago: older than gc's 72 h), the last one "continue", then a hard
    reset that makes the text "continue" unreachable."""
    with Tract.open(str(path), clock=FakeClock(start=int(time.time() * 1e6) - 96 * 3600 * 1_000_000)) as t:
        with t.batch():
            for i in range(commits - 1):
                t.user(f"old message {i}")
        t.user("continue")
        t.reset("HEAD~1", mode="hard")


def assert_clean(path: Path) -> None:
    with open_store(str(path)) as store:
        report = fsck(store)
    assert report.ok, report.problems
    with Tract.open(str(path)) as t:
        t.compile()
        t.user("and one more")
        assert t.compile().messages[-1].content == "and one more"


@pytest.mark.slow
def test_a_repeated_text_committed_while_gc_runs_survives(tmp_path: Path) -> None:
    """The issue's repro, ten trials: "continue" is unreachable when gc marks, a writer commits it again
    before gc deletes. Before: fsck "missing: <commit>: content", compile and every commit failed."""
    base = tmp_path / "base"
    old_history(base, 2_000)
    for trial in range(10):
        path = tmp_path / f"trial{trial}"
        shutil.copytree(base, path)
        flag = tmp_path / f"flag{trial}"
        proc = start_paused_gc(path, flag)
        with Tract.open(str(path)) as t:
            t.user("continue")  # the blob is stored already: the batch writes nothing new for it
        release(proc, flag)
        assert_clean(path)


@pytest.mark.slow
def test_a_path_push_received_while_gc_runs_survives(tmp_path: Path) -> None:
    """The hub's hole at the store level: a push whose commit links a blob the receiver already holds
    (unreachable there, so not sent) lands between gc's marking and its deletion."""
    target = tmp_path / "target"
    old_history(target, 200)
    source = tmp_path / "source"
    with Tract.clone(str(target), str(source)) as s:
        s.user("continue")
        flag = tmp_path / "flag"
        proc = start_paused_gc(target, flag)
        s.push("origin")
        release(proc, flag)
    assert_clean(target)
    with Tract.open(str(target)) as t:
        assert "continue" in [m.content for m in t.compile().messages]


@pytest.mark.slow
def test_gc_in_another_process_keeps_the_tool_set_set_tools_names(tmp_path: Path) -> None:
    """Item 2: handle A sets tools and appends; another process hard-resets and runs gc(0); A's next commit
    links the setting's tool set, which gc must have kept (a setting is a root). Before: a commit naming a
    missing tool set, and fsck failed."""
    path = tmp_path / "s"
    with Tract.open(str(path)) as a:
        a.user("root")
        a.set_tools([TOOL])
        a.user("with tools")
        script = textwrap.dedent(
            """
            import sys
            from tractkv import Tract
            with Tract.open(sys.argv[1]) as b:
                b.reset("HEAD~1", mode="hard")
                b.gc(min_age_hours=0)
            """
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-c", script, str(path)], env=env, check=True, timeout=60)
        a.user("after the outside gc")
        assert [t["name"] for t in a.get_tools()] == ["lookup"]
    assert_clean(path)


def test_a_tool_set_removed_under_a_handle_is_checked_in_the_writing_transaction(tmp_path: Path) -> None:
    """Item 2, the cache: handle A linked a tool set (cached as stored); another handle resets the branch and
    removes that commit and the tool set (as a gc without the set_tools root did). A's next commit must not
    link it unchecked: it is refused with a TractError, nothing written, fsck clean. Before: the commit
    landed naming the missing tool set."""
    path = tmp_path / "s"
    with Tract.open(str(path), clock=FakeClock(start=START_US)) as a:
        a.user("root")
        a.set_tools([TOOL])
        with_tools = a.user("with tools").commit_id
        with Tract.open(str(path)) as b:
            b.reset("HEAD~1", mode="hard")
            tip = b.log()[0].commit_id
            raw = b._store.table_get(Table.META, ACTIVE_TOOLS + b"refs/heads/main")
            assert raw is not None
            batch = b._store.new_batch()
            batch.delete_object(with_tools)
            batch.delete_object(ObjectId(raw.decode()))
            b._store.apply(batch)
        with pytest.raises(TractError):
            a.user("after the removal")
        assert a.log()[0].commit_id == tip
    with open_store(str(path)) as store:
        assert fsck(store).ok


def test_a_gc_that_crashed_is_bounded_and_cleared(tmp_path: Path) -> None:
    """A gc killed between its record and its deletion leaves ``meta/gc-runs``: writers record what they write
    only while the record is younger than GC_RUN_TTL_US, and the next gc (or ``fsck --repair``) drops a record
    whose process is gone, with what writers recorded."""
    from click.testing import CliRunner

    from tractkv.cli import cli
    from tractkv.store.base import GC_RUN_TTL_US, META_GC_RUNS, META_GC_SEEN, pack_gc_runs

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], check=True, capture_output=True, text=True
    )
    pid = int(dead.stdout)  # a process that has exited
    path = str(tmp_path / "s")

    def seen(t: Tract) -> int:
        return len(list(t._store.table_iter(Table.META, META_GC_SEEN)))

    def crashed_gc(t: Tract, age_us: int) -> None:
        batch = t._store.new_batch()
        start = int(time.time() * 1e6) - age_us
        batch.gc_row(META_GC_RUNS, pack_gc_runs([(b"crashed!", start, pid)]))
        t._store.apply(batch)

    with Tract.open(path) as t:
        t.user("root")
        crashed_gc(t, GC_RUN_TTL_US + 1)  # older than the limit: writers ignore it
        t.user("not recorded")
        assert seen(t) == 0
        crashed_gc(t, 0)  # fresh: writers record (for at most GC_RUN_TTL_US)
        t.user("recorded")
        assert seen(t) > 0
        t.gc()  # the next gc drops the dead record and what was recorded for it
        assert t._store.table_get(Table.META, META_GC_RUNS) is None
        assert seen(t) == 0
        crashed_gc(t, 0)
        t.user("recorded again")
        assert seen(t) > 0
    result = CliRunner().invoke(cli, ["--store", path, "fsck", "--repair"])
    assert result.exit_code == 0, result.output
    assert "dropped 1 record(s) of a gc that did not finish" in result.output
    with Tract.open(path) as t:
        assert t._store.table_get(Table.META, META_GC_RUNS) is None
        assert seen(t) == 0
