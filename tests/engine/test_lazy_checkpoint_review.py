"""Review of the lazily loaded compile checkpoints (issue 18): a failure while the checkpoint's slots are read
leaves the state whole, a landed commit never fails for its checkpoint, and a lazy compiled context stays usable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import patch_compile

import tractkv.engine.compile.slots as slots_mod
import tractkv.engine.compile.state as state_mod
from tractkv import Tract
from tractkv.errors import StoreClosed, StoreError
from tractkv.store import Table

N = 300  # more than CHECKPOINT_EVERY: closing writes a checkpoint


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    path = str(tmp_path / "s")
    t = Tract.open(path, durable=False)
    for i in range(N):
        t.user(f"m{i}")
    t.close()
    return path


def fail_once(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> dict[str, int]:
    """Make the first read of a checkpoint's chunks raise ``exc``."""
    orig = state_mod.CompileState._load_slots.__func__  # type: ignore[attr-defined]
    calls = {"n": 0}

    def flaky(cls: Any, *args: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise exc
        return orig(cls, *args)

    monkeypatch.setattr(state_mod.CompileState, "_load_slots", classmethod(flaky))
    return calls


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), MemoryError(), StoreError("EIO")])
def test_an_interrupted_checkpoint_load_leaves_the_state_whole(
    store_path: str, monkeypatch: pytest.MonkeyPatch, exc: BaseException
) -> None:
    t = Tract.open(store_path, durable=False)
    t.user("after-1")  # an append reads no chunk: the checkpoint stays pending
    calls = fail_once(monkeypatch, exc)
    with pytest.raises(type(exc)):
        t.compile(include_reasoning=True)  # a view with reasoning is made from the slots: they are read
    assert calls["n"] == 1
    assert len(t.compile().messages) == N + 1
    for i in range(N):  # crosses CHECKPOINT_EVERY: a checkpoint of this state is saved
        t.user(f"x{i}")
    t.close()
    with Tract.open(store_path, durable=False) as t:
        assert len(t.compile().messages) == 2 * N + 1


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), MemoryError(), StoreError("EIO")])
def test_an_interrupted_chunk_read_of_a_compiled_context_can_be_retried(
    store_path: str, monkeypatch: pytest.MonkeyPatch, exc: BaseException
) -> None:
    """A context compiled from a checkpoint's view summary reads a chunk when one of its messages is first used:
    a failure then leaves nothing half-read (the same message is read again on the next use)."""
    with Tract.open(store_path, durable=False) as t:
        ctx = t.compile()
        real = slots_mod._chunk_rows
        calls = {"n": 0}

        def flaky(key: bytes, raw: bytes) -> Any:
            calls["n"] += 1
            if calls["n"] == 1:
                raise exc
            return real(key, raw)

        patch_compile(monkeypatch, "_chunk_rows", flaky)
        with pytest.raises(type(exc)):
            ctx.messages[0]
        assert ctx.messages[0].content == "m0"
        assert [m.content for m in ctx.messages] == [f"m{i}" for i in range(N)]


def test_a_failed_periodic_checkpoint_does_not_fail_the_landed_commit(
    store_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = Tract.open(store_path, durable=False)
    b = t.store.new_batch()
    for key, _ in t.store.table_iter(Table.DERIVED):
        if key.startswith(state_mod.CHUNK_PREFIX):
            b.table_put(Table.DERIVED, key, b"\x80damaged")  # the save must read the tail chunk: it fails
    t.store.apply(b)
    fail_once(monkeypatch, StoreError("simulated transient read failure"))
    for i in range(N):
        t.user(f"x{i}")  # never raises: every commit landed
    assert len(t.log(limit=10_000)) == 2 * N
    assert len(t.compile().messages) == 2 * N
    t.close()
    with Tract.open(store_path, durable=False) as t:
        assert len(t.compile().messages) == 2 * N


def old_history(path: str) -> None:
    t = Tract.open(path, durable=False, clock=lambda: 1_000_000)  # old commits: gc does not wait for them
    for i in range(N):
        t.user(f"message number {i}")
    t.close()  # checkpoint of the tip


def test_a_lazy_context_survives_a_hard_reset_and_gc_in_its_session(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    old_history(path)
    with Tract.open(path, durable=False) as t:
        ctx = t.compile()  # from the checkpoint: no blob read yet
        root = t.log(limit=1000)[-1].commit_id
        t.reset(root, mode="hard")
        assert t.gc(min_age_hours=0).removed_objects > 0
        assert [m.content for m in ctx.messages] == [f"message number {i}" for i in range(N)]


def test_a_lazy_context_survives_delete_branch_and_gc_in_its_session(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    t = Tract.open(path, durable=False, clock=lambda: 1_000_000)
    t.user("root")
    t.branch("side")
    for i in range(N):
        t.user(f"side {i}")
    t.close()
    with Tract.open(path, durable=False) as t:
        ctx = t.compile()
        t.switch("main")
        t.delete_branch("side", force=True)
        assert t.gc(min_age_hours=0, keep_branches=False).removed_objects > 0
        assert [m.content for m in ctx.messages][-1] == f"side {N - 1}"


def test_load_materializes_a_lazy_context_against_another_handles_gc(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    old_history(path)
    with Tract.open(path, durable=False) as t:
        ctx = t.compile().load()
        root = t.log(limit=1000)[-1].commit_id
        with Tract.open(path, durable=False) as other:  # stands for another process
            other.reset(root, mode="hard")
            other.gc(min_age_hours=0)
        assert [m.content for m in ctx.messages][-1] == f"message number {N - 1}"


@pytest.mark.parametrize("error", [StoreError("ENOSPC on the follow-up transaction"), StoreClosed()])
def test_a_failing_space_release_does_not_fail_the_landed_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    import tractkv.store.lmdb as lmdb_mod

    def failing(writer: Any) -> None:
        raise error

    monkeypatch.setattr(lmdb_mod, "_release_freed_pages", failing)
    with Tract.open(str(tmp_path / "s")) as t:
        t.user("first")
        with t.batch():
            for i in range(N):  # >= RELEASE_AFTER_ROWS rows: the follow-up transaction runs
                t.user(f"batched {i}")
        assert len(t.log(limit=10_000)) == N + 1


@pytest.mark.parametrize("compile_in_batch", [False, True])
def test_a_landed_batch_is_not_kept_alive(store_path: str, compile_in_batch: bool) -> None:
    import gc
    import weakref

    t = Tract.open(store_path, durable=False)
    contexts = []
    with t.batch():
        for i in range(50):
            t.user(f"batched {i}")
        if compile_in_batch:
            contexts.append(t.compile())  # a lazy context reading through the batch
        ref = weakref.ref(t._session._batch)  # type: ignore[attr-defined]
    for i in range(N):  # appends outside the batch (a checkpoint is saved meanwhile)
        t.user(f"after {i}")
    gc.collect()
    assert ref() is None
    assert len(t.compile().messages) == 2 * N + 50
    for ctx in contexts:
        assert ctx.messages[-1].content == "batched 49"
    t.close()


def test_a_lazy_context_pickles_and_deep_copies(store_path: str) -> None:
    import copy
    import pickle

    with Tract.open(store_path, durable=False) as t:
        eager = t.compile().load()
    with Tract.open(store_path, durable=False) as t:
        lazy = t.compile()  # from the checkpoint: messages read on first use
        assert type(lazy.messages).__name__ == "_LazyMessages"
        for ctx in (eager, lazy):
            for clone in (pickle.loads(pickle.dumps(ctx)), copy.deepcopy(ctx)):
                assert clone == eager
                assert list(clone.commit_ids) == list(eager.commit_ids)
                assert [m.content for m in clone.messages] == [f"m{i}" for i in range(N)]


def test_a_checkpoint_that_cannot_be_staged_does_not_fail_the_batch(
    store_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = Tract.open(store_path, durable=False)
    b = t.store.new_batch()
    for key, _ in t.store.table_iter(Table.DERIVED):
        if key.startswith(state_mod.CHUNK_PREFIX):
            b.table_put(Table.DERIVED, key, b"\x80damaged")
    t.store.apply(b)
    fail_once(monkeypatch, StoreError("simulated transient read failure"))
    with t.batch():
        for i in range(N):  # the batch stages the checkpoint with its commits
            t.user(f"x{i}")
    assert len(t.log(limit=10_000)) == 2 * N
    assert len(t.compile().messages) == 2 * N
    t.close()
    with Tract.open(store_path, durable=False) as t:
        assert len(t.compile().messages) == 2 * N
