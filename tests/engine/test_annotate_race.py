"""``annotate`` behaves as the other appends when another writer moves the branch between the moment it read the
tip and its compare-and-swap: with ``rebase_appends=True`` (and always in the CLI) it is re-made on the new tip,
with backoff, as long as its target is still a message there; without, :class:`ConcurrentUpdate` and nothing
written. Before, annotate never retried: a raced ``tractkv annotate`` failed where ``tractkv commit`` landed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tractkv import Tract
from tractkv.cli import cli
from tractkv.engine.session import Session
from tractkv.errors import ConcurrentUpdate, InvalidInput
from tractkv.store import fsck, open_store

ROOT = Path(__file__).resolve().parents[2]


def race_once(
    monkeypatch: pytest.MonkeyPatch, write: Callable[[], Any], after: str = "writable"
) -> threading.Thread:
    """Make another thread run ``write`` right after the next operation reads its branch tip (``after`` its
    ``Session`` method of that name returned), and wait for it to finish before going on: the interleaving
    two writers can have, made certain."""
    original = getattr(Session, after)
    tip_read, written = threading.Event(), threading.Event()

    def other() -> None:
        tip_read.wait(30)
        try:
            write()
        finally:
            written.set()

    def hooked(self: Session, *args: Any) -> Any:
        value = original(self, *args)
        if threading.current_thread() is threading.main_thread() and not tip_read.is_set():
            tip_read.set()
            written.wait(30)
        return value

    monkeypatch.setattr(Session, after, hooked)
    thread = threading.Thread(target=other)
    thread.start()
    return thread


def store_with_messages(path: Path) -> tuple[str, str]:
    with Tract.open(str(path)) as t:
        first = t.user("first, the one to annotate")
        t.assistant("noted")
        return first.commit_id, t.head or ""


def test_an_annotate_raced_by_another_thread_is_re_made_on_the_new_tip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s"
    target, _ = store_with_messages(path)
    with Tract.open(str(path), rebase_appends=True) as mine, Tract.open(str(path)) as theirs:
        thread = race_once(monkeypatch, lambda: theirs.user("meanwhile, from another thread"))
        info = mine.annotate(target, "pinned", reason="keep it")
        thread.join(30)
        log = mine.log(limit=2)
        assert [c.operation for c in log] == ["annotate", "append"]
        assert log[0].commit_id == info.commit_id == mine.head
        assert log[1].content["text"] == "meanwhile, from another thread"  # kept, the annotation on top
        ctx = mine.compile()
        assert [m.content for m in ctx.messages] == [
            "first, the one to annotate",
            "noted",
            "meanwhile, from another thread",
        ]
        assert mine.log(op_filter="annotate")[0].commit_id == info.commit_id


def test_without_rebase_appends_a_raced_annotate_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s"
    target, _ = store_with_messages(path)
    with Tract.open(str(path)) as mine, Tract.open(str(path)) as theirs:
        thread = race_once(monkeypatch, lambda: theirs.user("meanwhile"))
        with pytest.raises(ConcurrentUpdate):
            mine.annotate(target, "skip")
        thread.join(30)
        assert not mine.log(op_filter="annotate")


def test_a_raced_annotate_whose_target_left_the_branch_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s"
    with Tract.open(str(path)) as t:
        root = t.system("s")
        target = t.user("to annotate").commit_id
    with Tract.open(str(path), rebase_appends=True) as mine, Tract.open(str(path)) as theirs:
        # the reset lands after annotate found its target and before it commits
        thread = race_once(monkeypatch, lambda: theirs.reset(root.commit_id), after="message_target")
        with pytest.raises(InvalidInput, match="no longer a message in the history of branch 'main'"):
            mine.annotate(target, "pinned")
        thread.join(30)
        assert mine.head == root.commit_id
        assert not mine.log(op_filter="annotate")


def test_cli_annotate_raced_by_another_writer_lands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s"
    target, _ = store_with_messages(path)
    theirs = Tract.open(str(path))
    try:
        thread = race_once(monkeypatch, lambda: theirs.user("meanwhile"))
        result = CliRunner().invoke(cli, ["--store", str(path), "annotate", target, "skip"])
        thread.join(30)
    finally:
        theirs.close()
    assert result.exit_code == 0, result.output
    with Tract.open(str(path), readonly=True) as t:
        assert t.log(limit=1)[0].commit_id == result.stdout.strip()
        assert [m.content for m in t.compile().messages] == ["noted", "meanwhile"]


WRITER = textwrap.dedent(
    """
    import os, sys, time
    from tractkv.cli import cli

    store, kind, target, count, go = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    deadline = time.monotonic() + 30
    while not os.path.exists(go) and time.monotonic() < deadline:  # start together
        time.sleep(0.001)
    failed = 0
    for i in range(count):
        if kind == "annotate":
            args = ["annotate", target, "pinned" if i % 2 == 0 else "normal"]
        else:
            args = ["commit", f"{kind} {i}"]
        try:
            cli.main(["--store", store, *args], prog_name="tractkv")
        except SystemExit as exc:
            failed += bool(exc.code)
    sys.exit(failed)
    """
)


def test_cli_annotating_and_committing_in_several_processes_all_land(tmp_path: Path) -> None:
    path = tmp_path / "s"
    target, _ = store_with_messages(path)
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    count = 30
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), kind, target, str(count), str(go)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for kind in ("annotate", "a", "b")
    ]
    time.sleep(0.5)  # let them all start
    go.touch()
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    with Tract.open(str(path), readonly=True) as t:
        assert len(t.log(op_filter="annotate")) == count
        assert len(t.log(op_filter="append")) == 2 + 2 * count
    with open_store(str(path), create=False) as store:
        assert fsck(store).ok


def losing(t: Tract, monkeypatch: pytest.MonkeyPatch, losses: float) -> list[int]:
    """Make the first ``losses`` writes of ``t``'s store lose their compare-and-swap (another writer moved the
    branch each time, as a fast writer does to a slow one); returns the count of writes tried."""
    from tractkv.errors import RefConflict

    store = t.store
    real = store.apply
    tried = [0]

    def apply(batch: Any) -> None:
        tried[0] += 1
        if tried[0] <= losses:
            raise RefConflict("refs/heads/main", "a" * 64, "b" * 64)
        real(batch)

    monkeypatch.setattr(store, "apply", apply)
    return tried


def test_a_writer_that_loses_many_races_retries_past_sixteen_and_lands(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A slow writer (a loaded machine, an annotation computing the raced tip's state) may lose more than
    MAX_REBASE_ATTEMPTS races in a row to fast writers: it keeps retrying for REBASE_PATIENCE_S, so its
    commit lands (16 losses and a ConcurrentUpdate before)."""
    from tractkv.engine.session import write

    monkeypatch.setattr(write, "backoff", lambda attempt: None)
    with Tract.open(rebase_appends=True) as t:
        t.user("first")
        tried = losing(t, monkeypatch, write.MAX_REBASE_ATTEMPTS * 3)
        info = t.user("second, after 48 lost races")
        assert tried[0] == write.MAX_REBASE_ATTEMPTS * 3 + 1
        assert [m.content for m in t.compile().messages] == ["first", "second, after 48 lost races"]
        assert t.head == info.commit_id


def test_a_writer_that_always_loses_gives_up_after_its_patience(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bounded: a writer that loses every race stops once both MAX_REBASE_ATTEMPTS tries and
    REBASE_PATIENCE_S seconds are used, with ConcurrentUpdate and nothing written."""
    from tractkv.engine.session import write

    monkeypatch.setattr(write, "REBASE_PATIENCE_S", 0.2)
    monkeypatch.setattr(write, "backoff", lambda attempt: time.sleep(0.005))
    with Tract.open(rebase_appends=True) as t:
        t.user("first")
        head = t.head
        tried = losing(t, monkeypatch, float("inf"))
        started = time.monotonic()
        with pytest.raises(ConcurrentUpdate, match="nothing was written"):
            t.user("never lands")
        assert time.monotonic() - started >= 0.2
        assert tried[0] > write.MAX_REBASE_ATTEMPTS
        assert t.head == head
        assert [m.content for m in t.compile().messages] == ["first"]
    with Tract.open() as t:  # not a pure append's rebase: the first lost race is the answer
        t.user("first")
        tried = losing(t, monkeypatch, float("inf"))
        with pytest.raises(ConcurrentUpdate):
            t.user("refused at once")
        assert tried[0] == 1
