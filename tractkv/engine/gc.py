"""Garbage collection: remove objects nothing keeps alive.

An object survives when it is reachable (through commit parents, content, tools, targets and links) from:
    * any ref (every branch, remote-tracking ref and a detached HEAD), or only the current branch and
      remote-tracking refs with ``keep_branches=False`` (other local branches are then deleted, with a
      reflog entry, as the caller asked);
    * a reflog entry younger than ``min_age_hours``: its new value, and its old value unless the entry is a
      hard reset (``reset(mode="hard")`` makes the abandoned tip reclaimable at once);
    * a commit made less than ``min_age_hours`` ago (work in flight: a concurrent writer or an interrupted
      transfer whose ref has not moved yet);
    * with ``keep_pinned``, a message annotated ``pinned`` by any stored annotation commit;
    * a per-branch ``set_tools`` setting (the tool set later commits will link).
Checkpoints of removed commits, chunks no checkpoint uses, relation rows and the reflog entries that moved to a
removed commit go with them, in the same transaction. fsck is clean afterwards.

gc beside writers: the marking reads a snapshot; the deletion is one later write transaction that first keeps
every candidate a writer made live meanwhile (refs that moved, and the ids writers recorded while this gc's
record was in ``meta/gc-runs``: see :mod:`tractkv.store.base`), so an object a writer wrote again while
already stored is never deleted under it. docs/decisions.md ("gc beside writers") gives the design.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from contextlib import suppress

from tractkv import codec
from tractkv.engine.compile import CHUNK_PREFIX, CKPT_PREFIX, REL_PREFIX, is_stale_rel, is_stale_row
from tractkv.engine.content import ACTIVE_TOOLS, ANNOTATION
from tractkv.engine.history import HEAD, HEADS, iter_all_reflogs, log_ref_move
from tractkv.engine.session import Session
from tractkv.engine.values import GcResult
from tractkv.errors import InvalidInput, StoreError
from tractkv.ids import ObjectId, is_object_id, raw_to_oid
from tractkv.model import Blob, Commit, decode
from tractkv.store import Reader, Store, Table, WriteBatch
from tractkv.store.base import (
    META_GC_RUNS,
    META_GC_SEEN,
    SEQ,
    gc_running,
    gc_runs,
    live_gc_runs,
    pack_gc_runs,
)
from tractkv.store.walk import iter_reachable


def collect_garbage(
    store: Store,
    *,
    min_age_hours: float,
    keep_pinned: bool,
    keep_branches: bool,
    current_branch: str | None,
    now_us: int | None = None,
    extra_roots: Callable[[Reader], Iterable[ObjectId]] | None = None,
) -> GcResult:
    """Remove unreachable objects (see the module doc); returns what was removed.

    ``extra_roots`` reads ids higher layers still need though no ref reaches them yet (the finished nested
    records and conversation tips listed in running tool executions' rows, see tractkv.engine.usage.rows):
    gc calls it on its snapshot, taken after it announced itself, and again inside its deleting transaction,
    so rows written at any time before that transaction are honoured.

    Beside writers: gc marks from a read snapshot, then deletes in one write transaction that keeps every
    candidate a writer made live again meanwhile (see "gc beside writers" in the module doc).
    """
    now = time.time_ns() // 1000 if now_us is None else now_us
    horizon = now - int(min_age_hours * 3600 * 1_000_000)
    token = os.urandom(8)
    _announce(store, token)
    try:
        return _collect(store, token, horizon, now, keep_pinned, keep_branches, current_branch, extra_roots)
    except BaseException:
        with suppress(Exception):  # best effort: a record left behind goes stale (GC_RUN_TTL_US, dead pid)
            _withdraw(store, token)
        raise


def _collect(
    store: Store,
    token: bytes,
    horizon: int,
    now: int,
    keep_pinned: bool,
    keep_branches: bool,
    current_branch: str | None,
    extra_roots: Callable[[Reader], Iterable[ObjectId]] | None,
) -> GcResult:
    batch = store.new_batch()
    batch.gc_token = token
    with store.snapshot() as snap:
        roots: set[ObjectId] = set(extra_roots(snap)) if extra_roots is not None else set()
        refs = dict(snap.iter_refs())
        for name, value in refs.items():
            if not is_object_id(value):
                continue
            if not keep_branches and name.startswith(HEADS) and name != current_branch:
                batch.set_ref(name, None, expected=value)
                log_ref_move(
                    batch, name, ObjectId(value), None, "gc", "deleted by gc(keep_branches=False)", now_us=now
                )
                continue
            roots.add(ObjectId(value))
        head = refs.get(HEAD)
        if head is not None and is_object_id(head):
            roots.add(ObjectId(head))
        for _, raw in snap.table_iter(Table.META, ACTIVE_TOOLS):  # a set_tools setting is a root
            with suppress(UnicodeDecodeError):
                if is_object_id(raw.decode()):
                    roots.add(ObjectId(raw.decode()))
        logged: list[tuple[bytes, ObjectId]] = []  # reflog entries and the commit each moved to
        for entry in iter_all_reflogs(snap):
            if entry.new is not None:
                logged.append((entry.ref.encode() + b"\0" + SEQ.pack(entry.seq), entry.new))
            if entry.created_at.timestamp() * 1_000_000 < horizon:
                continue
            if entry.new is not None:
                roots.add(entry.new)
            if entry.old is not None and not entry.hard:
                roots.add(entry.old)
        pinned: set[ObjectId] = set()
        for oid, data in snap.iter_raw_objects():
            obj = decode(data)
            if not isinstance(obj, Commit):
                continue
            if obj.created_at >= horizon:
                roots.add(oid)
            if keep_pinned and obj.operation == "annotate" and obj.content is not None and obj.edit_target:
                blob = snap.get(obj.content)
                payload = blob.data if isinstance(blob, Blob) else None
                if (
                    isinstance(payload, dict)
                    and payload.get("type") == ANNOTATION
                    and payload.get("priority") == "pinned"
                ):
                    pinned.add(obj.edit_target)
                    pinned.add(oid)
        roots |= {p for p in pinned if snap.has(p)}
        live = set(iter_reachable(snap, roots))
        candidates: dict[ObjectId, int] = {}  # unreachable in the snapshot: id -> size
        kept = 0
        for oid, data in snap.iter_raw_objects():
            if oid in live:
                kept += 1
            else:
                candidates[oid] = len(data)
    outcome = _Outcome(kept)

    def finish(view: Reader, staged: WriteBatch) -> None:
        _finish(view, staged, token, refs, live, candidates, logged, outcome, extra_roots)

    batch.prepare = finish
    store.apply(batch)
    return GcResult(
        removed_objects=outcome.removed,
        removed_bytes=outcome.removed_bytes,
        kept_objects=outcome.kept,
        removed_checkpoints=outcome.removed_checkpoints,
    )


class _Outcome:
    """What the deleting transaction removed (written by :func:`_finish`, restaged from scratch if rerun)."""

    def __init__(self, kept: int) -> None:
        self.base_kept = kept
        self.kept = kept
        self.removed = self.removed_bytes = self.removed_checkpoints = 0


def _finish(
    view: Reader,
    batch: WriteBatch,
    token: bytes,
    refs: dict[str, str],
    live: set[ObjectId],
    candidates: dict[ObjectId, int],
    logged: list[tuple[bytes, ObjectId]],
    outcome: _Outcome,
    extra_roots: Callable[[Reader], Iterable[ObjectId]] | None,
) -> None:
    """Inside the deleting transaction: keep every candidate a writer made live since the snapshot, stage the
    deletion of the rest (with their reflog entries, checkpoints and relation rows), and end this gc's run."""
    batch.deletions.clear()
    batch.rows.clear()
    runs_value = view.table_get(Table.META, META_GC_RUNS)
    mine = [run for run in gc_runs(runs_value) if run[0] == token]
    if not mine or not gc_running(pack_gc_runs(mine)):
        raise StoreError(
            "gc ran longer than writers keep recording for it (24 h), or its record was removed: nothing was "
            "removed; run gc again"
        )
    # What writers made live meanwhile: refs that moved, and every id a batch staged, assumed or moved a
    # ref to while this gc's record was there (tractkv.store.base: apply_batch records them).
    again: list[ObjectId] = [
        ObjectId(value) for name, value in view.iter_refs() if is_object_id(value) and refs.get(name) != value
    ]
    seen_rows = list(view.table_iter(Table.META, META_GC_SEEN))
    again.extend(raw_to_oid(key[len(META_GC_SEEN) :]) for key, _ in seen_rows)
    for _, raw in view.table_iter(Table.META, ACTIVE_TOOLS):
        with suppress(UnicodeDecodeError):
            if is_object_id(raw.decode()):
                again.append(ObjectId(raw.decode()))
    if extra_roots is not None:  # rows written before gc announced itself, after its caller read them
        again.extend(extra_roots(view))
    rescued = _rescued(view, again, live, candidates)
    deleted = {oid for oid in candidates if oid not in rescued}
    outcome.kept = outcome.base_kept + len(rescued)
    outcome.removed = len(deleted)
    outcome.removed_bytes = sum(candidates[oid] for oid in deleted)
    for oid in deleted:
        batch.delete_object(oid)
    for key, new in logged:  # git expires reflog entries whose commits are gone: none is offered as a target
        if new in deleted:
            batch.table_put(Table.REFLOG, key, None)
    outcome.removed_checkpoints = _drop_checkpoints(view, batch, deleted)
    from tractkv.engine.search import drop_index_rows  # lazy: only gc and search load the index module

    drop_index_rows(view, batch, deleted)
    others = [run for run in live_gc_runs(runs_value) if run[0] != token]
    batch.gc_row(META_GC_RUNS, pack_gc_runs(others))
    if not others:  # the last gc running: nobody needs what writers recorded
        for key, _ in seen_rows:
            batch.gc_row(key, None)


def _rescued(
    view: Reader, roots: Iterable[ObjectId], live: set[ObjectId], candidates: dict[ObjectId, int]
) -> set[ObjectId]:
    """The candidates reachable from ``roots`` now, walking through objects made since the snapshot and
    stopping at what the snapshot found live (its closure is live already)."""
    return {oid for oid in iter_reachable(view, roots, stop=live) if oid in candidates}


def _announce(store: Store, token: bytes) -> None:
    """Record this gc in ``meta/gc-runs`` (writers record what they write from now on), dropping the
    records of gcs that crashed; with no other gc alive, what writers recorded for those goes too."""
    batch = store.new_batch()
    batch.gc_token = token
    start = time.time_ns() // 1000  # the wall clock: writers age the record by it, not by a Tract's clock

    def prepare(view: Reader, staged: WriteBatch) -> None:
        staged.rows.clear()
        others = live_gc_runs(view.table_get(Table.META, META_GC_RUNS))
        if not others:
            for key, _ in view.table_iter(Table.META, META_GC_SEEN):
                staged.gc_row(key, None)
        staged.gc_row(META_GC_RUNS, pack_gc_runs([*others, (token, start, os.getpid())]))

    batch.prepare = prepare
    store.apply(batch)


def _withdraw(store: Store, token: bytes) -> None:
    """Remove this gc's record after a failure (and the recorded ids, when no other gc is alive)."""
    batch = store.new_batch()
    batch.gc_token = token

    def prepare(view: Reader, staged: WriteBatch) -> None:
        staged.rows.clear()
        others = [run for run in live_gc_runs(view.table_get(Table.META, META_GC_RUNS)) if run[0] != token]
        staged.gc_row(META_GC_RUNS, pack_gc_runs(others))
        if not others:
            for key, _ in view.table_iter(Table.META, META_GC_SEEN):
                staged.gc_row(key, None)

    batch.prepare = prepare
    store.apply(batch)


def _drop_checkpoints(view: Reader, batch: WriteBatch, deleted: set[ObjectId]) -> int:
    """Stage the removal of the derived rows of commits this gc deletes or the store no longer holds:
    checkpoints, chunks no kept checkpoint uses, relation rows, and rows of an older format."""

    def gone(key: bytes, prefix: bytes) -> bool:
        oid = raw_to_oid(key[len(prefix) :])
        return oid in deleted or not view.has(oid)

    removed = 0
    used_chunks: set[bytes] = set()
    for key, value in view.table_iter(Table.DERIVED, CKPT_PREFIX):
        if gone(key, CKPT_PREFIX):
            batch.table_put(Table.DERIVED, key, None)
            removed += 1
            continue
        try:
            used_chunks.update(codec.loads(value)["chunks"])
        except Exception:
            batch.table_put(Table.DERIVED, key, None)
            removed += 1
    for key, _ in view.table_iter(Table.DERIVED, CHUNK_PREFIX):
        if key not in used_chunks:
            batch.table_put(Table.DERIVED, key, None)
    for key, _ in view.table_iter(Table.DERIVED, REL_PREFIX):  # relation rows of removed commits
        if gone(key, REL_PREFIX):
            batch.table_put(Table.DERIVED, key, None)
    for key, _ in view.table_iter(Table.DERIVED):
        if is_stale_row(key) or is_stale_rel(key):  # an older row format: nothing reads it any more
            batch.table_put(Table.DERIVED, key, None)
    return removed


def collect_for(
    session: Session, min_age_hours: float = 72.0, keep_pinned: bool = True, keep_branches: bool = True
) -> GcResult:
    """gc from a session: its HEAD state is flushed first, the ids running tool executions hold are kept
    (:func:`~tractkv.engine.usage.rows.held_ids`), and its caches are dropped afterwards."""
    from tractkv.engine.usage import held_ids

    if min_age_hours < 0:
        raise InvalidInput("min_age_hours must be >= 0")
    session.before_gc()
    result = collect_garbage(
        session.store,
        min_age_hours=min_age_hours,
        keep_pinned=keep_pinned,
        keep_branches=keep_branches,
        current_branch=session.branch_ref,
        now_us=int(session.clock()),
        extra_roots=held_ids,
    )
    session.after_store_rewrite()
    return result
