"""Reset (soft / hard), the reflog, and gc: what is reclaimed, what is kept, and that fsck stays clean."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tractkv import DetachedHead, InvalidInput, MissingRefTarget, Tract
from tractkv.engine.compile import CHUNK_PREFIX, CKPT_PREFIX
from tractkv.engine.session import Session
from tractkv.ids import ObjectId, raw_to_oid
from tractkv.store import Table, fsck

from .conftest import FakeClock


def texts(t: Tract, at: str | None = None) -> list[str]:
    return [m.content for m in t.compile(at=at).messages]


def gc_checked(t: Tract, **kwargs: float | bool) -> int:
    """Run gc, check fsck is clean and HEAD still compiles; returns the number of removed objects."""
    before = t.compile().to_dicts()
    result = t.gc(**kwargs)  # type: ignore[arg-type]
    report = fsck(t.store)
    assert report.ok, report.problems
    assert t.compile().to_dicts() == before
    assert result.kept_objects == t.store.count_objects()
    return result.removed_objects


def checkpoints(t: Tract) -> set[ObjectId]:
    return {raw_to_oid(k[len(CKPT_PREFIX) :]) for k, _ in t.store.table_iter(Table.DERIVED, CKPT_PREFIX)}


def _history(t: Tract, n: int = 4) -> list[ObjectId]:
    return [t.user(f"message {i}").commit_id for i in range(n)]


# --- reset and reflog --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_reset_moves_the_branch_and_is_undone_through_the_reflog(tract: Tract, mode: str) -> None:
    ids = _history(tract)
    assert tract.reset("HEAD~2", mode=mode) == ids[1]
    assert tract.head == ids[1]
    assert texts(tract) == ["message 0", "message 1"]
    assert len(tract.log()) == 2
    entry = tract.reflog()[0]
    assert (entry.old, entry.new, entry.operation, entry.hard) == (
        ids[3],
        ids[1],
        f"reset --{mode}",
        mode == "hard",
    )
    # undo: reset back to the old tip the reflog shows
    tract.reset(entry.old)  # type: ignore[arg-type]
    assert texts(tract) == [f"message {i}" for i in range(4)]
    assert tract.head == ids[3]
    # new work after a reset starts from the reset point
    tract.reset(ids[0], mode=mode)
    tract.user("fresh")
    assert texts(tract) == ["message 0", "fresh"]
    assert tract.get_commit("HEAD~1").commit_id == ids[0]


def test_reflog_records_every_move_newest_first(tract: Tract) -> None:
    ids = _history(tract, 2)
    tract.branch("side")
    tract.user("side")
    tract.switch("main")
    tract.merge("side")
    tract.reset(ids[0], mode="hard")
    ops = [e.operation for e in tract.reflog()]
    assert ops == ["reset --hard", "merge", "append", "append"]
    assert [e.operation for e in tract.reflog("side")] == ["append", "branch"]
    assert len(tract.reflog(limit=2)) == 2
    seqs = [e.seq for e in tract.reflog()]
    assert seqs == sorted(seqs, reverse=True)
    # timestamps come from the Tract's clock, like commit timestamps
    newest = tract.reflog()[0].created_at
    assert newest >= tract.get_commit(ids[1]).created_at


def test_reset_errors(tract: Tract) -> None:
    ids = _history(tract, 2)
    with pytest.raises(InvalidInput):
        tract.reset(ids[0], mode="mixed")
    tract.checkout(ids[0])
    with pytest.raises(DetachedHead):
        tract.reset(ids[1])
    tract.switch("main")
    assert tract.head == ids[1]


def test_reset_to_another_branch_commit(tract: Tract) -> None:
    _history(tract, 2)
    tract.branch("other")
    tip = tract.user("other work").commit_id
    tract.switch("main")
    tract.reset("other")
    assert tract.head == tip
    assert texts(tract) == ["message 0", "message 1", "other work"]


# --- gc ------------------------------------------------------------------------------------------------


def test_gc_after_hard_reset_removes_abandoned_commits(tract: Tract) -> None:
    ids = _history(tract)
    tract.reset(ids[1], mode="hard")
    removed = gc_checked(tract, min_age_hours=0)
    assert removed == 4  # two commits and their two blobs
    for oid in ids[2:]:
        assert tract.store.get(oid) is None
    for oid in ids[:2]:
        assert tract.store.get(oid) is not None
    assert texts(tract) == ["message 0", "message 1"]
    assert gc_checked(tract, min_age_hours=0) == 0  # nothing left to reclaim


def test_gc_after_soft_reset_keeps_abandoned_commits_while_young(tract: Tract) -> None:
    ids = _history(tract)
    tract.reset(ids[1], mode="soft")
    assert gc_checked(tract, min_age_hours=10_000) == 0
    for oid in ids:
        assert tract.store.get(oid) is not None
    tract.reset(ids[3])  # still undoable
    assert len(texts(tract)) == 4


def test_gc_min_age_zero_reclaims_soft_reset_too(tract: Tract) -> None:
    ids = _history(tract)
    tract.reset(ids[1], mode="soft")
    assert gc_checked(tract, min_age_hours=0) == 4
    assert tract.store.get(ids[3]) is None


@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_gc_ages_with_the_clock(tract: Tract, clock: FakeClock, mode: str) -> None:
    """Old commits, reset just now: the soft reset's reflog entry protects them; the hard one does not."""
    ids = _history(tract)
    clock.advance(100)
    tract.reset(ids[1], mode=mode)
    removed = gc_checked(tract, min_age_hours=72)
    if mode == "soft":
        assert removed == 0
        clock.advance(100)  # the reset entry ages out as well
        assert gc_checked(tract, min_age_hours=72) == 4
    else:
        assert removed == 4
    assert tract.store.get(ids[3]) is None


def test_gc_keeps_young_commits(tract: Tract, clock: FakeClock) -> None:
    ids = _history(tract)
    tract.reset(ids[1], mode="hard")
    # made less than min_age_hours ago: possibly another writer's work in flight
    assert gc_checked(tract, min_age_hours=1) == 0
    clock.advance(2)
    assert gc_checked(tract, min_age_hours=1) == 4


def test_gc_keep_pinned(tract: Tract) -> None:
    ids = _history(tract, 2)
    pinned = tract.user("pin me").commit_id
    note = tract.annotate(pinned, "pinned").commit_id
    tract.user("unpinned")
    tract.reset(ids[1], mode="hard")
    assert gc_checked(tract, min_age_hours=0, keep_pinned=True) == 2  # only the last message and its blob
    assert tract.store.get(pinned) is not None
    assert tract.store.get(note) is not None
    assert gc_checked(tract, min_age_hours=0, keep_pinned=False) == 4
    assert tract.store.get(pinned) is None


def test_gc_keep_branches_false_deletes_other_branches(tract: Tract) -> None:
    _history(tract, 2)
    tract.branch("side")
    side_tip = tract.user("side only").commit_id
    tract.branch("nested/feature")
    tract.user("nested")
    tract.switch("main")
    tract.user("main only")
    assert gc_checked(tract, min_age_hours=0) == 0
    assert gc_checked(tract, min_age_hours=0, keep_branches=False) == 4
    assert [b.name for b in tract.list_branches()] == ["main"]
    assert tract.store.get(side_tip) is None
    assert tract.reflog("side")[0].operation == "gc"


def test_gc_keeps_a_detached_head(open_tract: Callable[..., Tract]) -> None:
    t = open_tract()
    ids = _history(t)
    t.reset(ids[0], mode="hard")
    viewer = open_tract()
    viewer.checkout(ids[2])  # the store's HEAD records the detached commit
    assert gc_checked(t, min_age_hours=0) == 2
    assert t.store.get(ids[2]) is not None
    assert texts(viewer) == ["message 0", "message 1", "message 2"]


def test_gc_drops_checkpoints_of_removed_commits(open_tract: Callable[..., Tract]) -> None:
    t = open_tract()
    ids = _history(t, 3)
    t.close()  # a checkpoint for HEAD
    t = open_tract()
    assert checkpoints(t) == {ids[2]}
    t.reset(ids[0], mode="hard")
    t.user("new")
    t.close()
    t = open_tract()
    assert len(checkpoints(t)) == 2
    result = t.gc(min_age_hours=0)
    assert result.removed_checkpoints == 1
    assert checkpoints(t) == {t.head}
    used = set()
    for _, value in t.store.table_iter(Table.DERIVED, CKPT_PREFIX):
        from tractkv import codec

        used.update(codec.loads(value)["chunks"])
    chunks = {k for k, _ in t.store.table_iter(Table.DERIVED, CHUNK_PREFIX)}
    assert chunks == used
    assert fsck(t.store).ok
    assert texts(t) == ["message 0", "new"]
    assert texts(open_tract()) == ["message 0", "new"]


def test_gc_refused_inside_batch(tract: Tract) -> None:
    tract.user("x")
    with pytest.raises(InvalidInput), tract.batch():
        tract.gc()
    with pytest.raises(InvalidInput):
        tract.gc(min_age_hours=-1)


# --- ref moves to commits gc removed (issue 29, item 3) ----------------------------------------------------


def _after_gc_of_two(t: Tract) -> list[ObjectId]:
    """init; four commits; ``reset HEAD~2 --hard``; ``gc --min-age-hours 0`` (the issue's sequence)."""
    ids = _history(t)
    t.reset("HEAD~2", mode="hard")
    assert gc_checked(t, min_age_hours=0) == 4
    return ids


def test_the_reflog_offers_no_entry_whose_commit_gc_removed(tract: Tract) -> None:
    ids = _after_gc_of_two(tract)
    assert not {e.new for e in tract.reflog()} & set(ids[2:])  # git expires them too
    tract.reset("main@{1}")  # now an entry that names a stored commit
    assert tract.store.get(tract.log()[0].commit_id) is not None
    tract.user("and on")
    assert fsck(tract.store).ok


def _gc_after_resolving(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """Make the next revision a handle resolves be removed, by another handle's gc, before the move lands:
    the read-then-move window every ref move has (a reflog entry read before gc pruned it, too)."""
    original = Session.resolve

    def resolve_then_gc(self: Session, *args: Any, **kwargs: Any) -> ObjectId:
        oid = original(self, *args, **kwargs)
        monkeypatch.setattr(Session, "resolve", original)
        with Tract.open(path) as other:
            other.gc(min_age_hours=0)
        return oid

    monkeypatch.setattr(Session, "resolve", resolve_then_gc)


@pytest.mark.parametrize("how", ["reset", "branch"])
def test_a_move_to_a_commit_gc_removed_is_refused_and_moves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Before: ``reset`` / ``branch`` to a commit gc removed succeeded and left a branch every read failed on
    (log, status, compile, commit; fsck exit 1)."""
    path = str(tmp_path / "s")
    with Tract.open(path) as t:
        ids = _history(t)
        t.reset("HEAD~2", mode="hard")
        _gc_after_resolving(monkeypatch, path)

        def move() -> object:
            return t.reset(ids[3], mode="hard") if how == "reset" else t.branch("newb", ids[3])

        with pytest.raises(MissingRefTarget) as caught:
            move()
        assert caught.value.oid == ids[3]
        assert t.log()[0].commit_id == ids[1]
        assert "newb" not in [b.name for b in t.list_branches()]
        assert fsck(t.store).ok
        t.user("still writable")


def test_the_store_refuses_a_ref_move_to_a_missing_target_or_link(tract: Tract) -> None:
    """The one check, in the move's own transaction (every ref move passes apply): the target and what it links
    directly must be stored once the batch lands."""
    ids = _history(tract, 2)
    commit = tract.store.get_commit(ids[1])
    batch = tract.store.new_batch()
    batch.set_ref("refs/heads/x", "0" * 64)
    with pytest.raises(MissingRefTarget) as caught:
        tract.store.apply(batch)
    assert caught.value.oid == "0" * 64
    batch = tract.store.new_batch()
    batch.delete_object(commit.content)  # type: ignore[arg-type]
    batch.set_ref("refs/heads/x", ids[1])
    with pytest.raises(MissingRefTarget) as caught:
        tract.store.apply(batch)
    assert caught.value.oid == commit.content
    assert "removed by gc" in str(caught.value)
    assert tract.store.get_ref("refs/heads/x") is None
    assert tract.store.get(commit.content) is not None  # type: ignore[arg-type]


def test_cli_reset_to_a_removed_commit_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from tractkv.cli import cli

    path = str(tmp_path / "s")
    with Tract.open(path) as t:
        ids = _history(t)
        t.reset("HEAD~2", mode="hard")
    _gc_after_resolving(monkeypatch, path)
    result = CliRunner().invoke(cli, ["--store", path, "reset", ids[3]])
    assert result.exit_code != 0
    assert result.output.strip().count("\n") == 0, result.output
    assert "not in the store (removed by gc?)" in result.output
    with Tract.open(path) as t:
        assert t.log()[0].commit_id == ids[1]
