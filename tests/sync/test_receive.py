"""The receiving side: verification, batched storage that keeps what arrived, and compare-and-swap ref updates."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import cbor2
import pytest

from tractkv import Tract
from tractkv.errors import RejectedObject, TransferError
from tractkv.ids import ObjectId, hash_bytes
from tractkv.model import Blob
from tractkv.store import MemoryStore, Store, fsck
from tractkv.sync.negotiate import objects_for
from tractkv.sync.receive import apply_ref_updates, receive_objects, verify
from tractkv.sync.remote import RefUpdate

MAIN = "refs/heads/main"


def session(n: int = 5) -> Tract:
    t = Tract(MemoryStore())
    t.system("s")
    for i in range(n):
        t.user(f"message {i}")
    return t


def all_objects(t: Tract) -> list[tuple[ObjectId, bytes]]:
    assert t.head is not None
    return list(objects_for(t.store, [t.head], []))


def test_verify_rejects_a_bad_hash_naming_the_id() -> None:
    data = all_objects(session(1))[0][1]
    wrong = hash_bytes(b"something else")
    with pytest.raises(RejectedObject) as info:
        verify(wrong, data)
    assert info.value.oid == wrong
    assert wrong in str(info.value)
    assert info.value.status == 422


def test_verify_rejects_an_unknown_kind_even_when_the_hash_matches() -> None:
    data = cbor2.dumps({"t": "mystery", "v": 1, "x": 1}, canonical=True)
    with pytest.raises(RejectedObject, match="not a readable tractkv object"):
        verify(hash_bytes(data), data)


def test_an_interrupted_transfer_keeps_whole_objects_and_a_retry_stores_the_rest() -> None:
    pairs = all_objects(session(20))
    target = MemoryStore()

    def cut(after: int) -> Iterator[tuple[ObjectId, bytes]]:
        yield from pairs[:after]
        raise TransferError("connection dropped")

    with pytest.raises(TransferError):
        receive_objects(target, cut(15), batch_objects=4)
    assert all(target.has(oid) for oid, _ in pairs[:15])
    assert not any(target.has(oid) for oid, _ in pairs[15:])
    assert fsck(target).ok  # objects without refs are fine; nothing is half-written
    stats = receive_objects(target, pairs)
    assert (stats.objects, stats.new_objects) == (len(pairs), len(pairs) - 15)


def test_a_corrupt_object_stops_the_transfer_and_keeps_the_verified_ones() -> None:
    pairs = all_objects(session(3))
    bad = (pairs[2][0], pairs[2][1][:-1] + b"!")
    target = MemoryStore()
    with pytest.raises(RejectedObject) as info:
        receive_objects(target, [*pairs[:2], bad, *pairs[3:]])
    assert info.value.oid == pairs[2][0]
    assert [target.has(o) for o, _ in pairs[:4]] == [True, True, False, False]


def received(t: Tract) -> Store:
    target = MemoryStore()
    receive_objects(target, all_objects(t))
    return target


def test_ref_update_rules() -> None:
    t = session(3)
    head = t.head
    assert head is not None
    parent = t.get_commit("HEAD~1").commit_id
    target = received(t)

    def one(update: RefUpdate) -> tuple[bool, str | None]:
        (r,) = apply_ref_updates(target, [update])
        return r.ok, r.reason

    assert one(RefUpdate("refs/notes/x", None, head)) == (False, "invalid")  # only branches and tags
    assert one(RefUpdate("refs/tags/x", None, head)) == (True, None)  # a lightweight tag (issue 34)
    assert one(RefUpdate("refs/tags/x", head, parent)) == (False, "already-exists")  # tags never move
    assert one(RefUpdate("refs/tags/x", head, parent, force=True)) == (True, None)
    assert one(RefUpdate("refs/tags/bad..name", None, head)) == (False, "invalid")
    assert one(RefUpdate("refs/heads/bad..name", None, head)) == (False, "invalid")
    blob = next(o for o, _ in all_objects(t) if isinstance(target.get(o), Blob))
    assert one(RefUpdate(MAIN, None, blob)) == (False, "invalid")
    assert one(RefUpdate(MAIN, None, hash_bytes(b"absent"))) == (False, "missing-objects")
    assert one(RefUpdate(MAIN, None, parent)) == (True, None)
    assert one(RefUpdate(MAIN, None, head)) == (False, "stale")
    assert one(RefUpdate(MAIN, parent, head)) == (True, None)
    assert one(RefUpdate(MAIN, head, parent)) == (False, "non-fast-forward")
    assert one(RefUpdate(MAIN, head, parent, force=True)) == (True, None)
    assert target.get_ref(MAIN) == parent
    assert one(RefUpdate(MAIN, parent, None)) == (True, None)
    assert target.get_ref(MAIN) is None


def test_an_object_linking_to_something_absent_is_rejected_so_the_store_stays_closed() -> None:
    t = session(3)
    assert t.head is not None
    pairs = all_objects(t)
    target = MemoryStore()
    root = pairs[0][0]  # links come first: the first object is in the oldest commit's closure
    with pytest.raises(RejectedObject, match=f"links to {root}"):
        receive_objects(target, [p for p in pairs if p[0] != root])
    assert fsck(target).ok
    (r,) = apply_ref_updates(target, [RefUpdate(MAIN, None, t.head)])
    assert (r.ok, r.reason) == (False, "missing-objects")
    assert target.get_ref(MAIN) is None


@pytest.mark.parametrize("atomic", [False, True])
def test_a_target_gc_removes_after_the_closure_check_is_refused_per_ref(
    monkeypatch: pytest.MonkeyPatch, atomic: bool
) -> None:
    """The closure check reads before the ref's write transaction; gc may remove the tip in between (issue
    29): the move's own check refuses it as ``missing-objects``, never as a crash or a broken ref."""
    from tractkv.sync import receive

    t = session(2)
    assert t.head is not None
    target = MemoryStore()
    receive_objects(target, all_objects(t))
    batch = target.new_batch()
    batch.delete_object(t.head)  # what a gc did right after check_update read the closure
    target.apply(batch)
    monkeypatch.setattr(receive, "check_update", lambda *args: None)
    (r,) = apply_ref_updates(target, [RefUpdate(MAIN, None, t.head)], atomic=atomic)
    assert (r.ok, r.reason) == (False, "missing-objects")
    assert target.get_ref(MAIN) is None


def test_atomic_updates_apply_all_or_nothing() -> None:
    t = session(2)
    head = t.head
    assert head is not None
    target = received(t)
    results = apply_ref_updates(
        target,
        [RefUpdate("refs/heads/a", None, head), RefUpdate("refs/heads/b", head, head)],
        atomic=True,
    )
    assert [(r.ok, r.reason) for r in results] == [(False, "atomic"), (False, "stale")]
    assert target.get_ref("refs/heads/a") is None
    results = apply_ref_updates(
        target, [RefUpdate("refs/heads/a", None, head), RefUpdate("refs/heads/b", None, head)], atomic=True
    )
    assert all(r.ok for r in results)


def test_a_ref_moved_between_check_and_write_is_reported_stale_not_lost() -> None:
    """Regression: act on the compare-and-swap result (a pure-Python git server once ignored it and
    silently lost pushes). Another writer moves the ref after the checks passed, before the write."""
    t = session(3)
    head = t.head
    assert head is not None
    parent = t.get_commit("HEAD~1").commit_id
    grand = t.get_commit("HEAD~2").commit_id
    target = received(t)
    apply_ref_updates(target, [RefUpdate(MAIN, None, grand)])

    original_apply = target.apply
    moved = False

    def apply_after_a_race(batch: object) -> None:
        nonlocal moved
        if not moved:
            moved = True
            other = target.new_batch()
            other.set_ref(MAIN, parent, expected=grand)  # the other pusher wins the race
            original_apply(other)
        original_apply(batch)  # type: ignore[arg-type]

    target.apply = apply_after_a_race  # type: ignore[method-assign]
    (r,) = apply_ref_updates(target, [RefUpdate(MAIN, grand, head)])
    assert (r.ok, r.reason) == (False, "stale")
    assert target.get_ref(MAIN) == parent  # the winner's value, untouched


@pytest.mark.parametrize("kind", ["memory", "lmdb"])
def test_an_object_whose_link_gc_removes_before_the_write_is_refused(tmp_path: Path, kind: str) -> None:
    """A receiver checks links against a snapshot and writes later; gc's deleting transaction may land in
    between. The write transaction checks every link again: the batch is refused (nothing written, the
    sender sends again), never stored pointing at a removed object (which would make /v1/missing call the
    new commit held, so a retried push never resends what it needs)."""
    from tractkv.store import open_store
    from tractkv.sync.receive import Receiver

    src = Tract.open(None)
    c1 = src.user("one").commit_id
    c2 = src.user("two").commit_id
    old = list(objects_for(src.store, [c1], []))
    new = list(objects_for(src.store, [c2], [c1]))
    store: Store = MemoryStore() if kind == "memory" else open_store(str(tmp_path / "b"))
    receive_objects(store, old)

    def stream() -> Iterator[tuple[ObjectId, bytes]]:
        yield from new
        gone = store.new_batch()  # gc's deleting transaction lands after the check, before the write
        gone.delete_object(c1)
        store.apply(gone)

    with pytest.raises(TransferError, match="no longer holds") as info:
        Receiver(store).receive(stream())
    assert info.value.oid == c1
    assert not store.has(c2)
    assert fsck(store).ok


def test_the_store_refuses_an_object_linking_a_missing_one() -> None:
    """The store's own invariant, checked in the writing transaction whoever writes: nothing is written."""
    from tractkv.errors import MissingLinkTarget
    from tractkv.model import Commit

    store = MemoryStore()
    absent = hash_bytes(b"never stored")
    batch = store.new_batch()
    blob = batch.put(Blob(data={"type": "dialogue", "role": "user", "text": "hi"}))
    commit = batch.put(Commit(parents=(absent,), content=blob, operation="append", created_at=1))
    with pytest.raises(MissingLinkTarget, match="links") as info:
        store.apply(batch)
    assert info.value.oid == absent
    assert not store.has(blob)
    assert not store.has(commit)
