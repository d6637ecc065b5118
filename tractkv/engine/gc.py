"""Garbage collection: remove objects nothing keeps alive.

An object survives when it is reachable (through commit parents, content, tools, targets and links) from:
    * any ref (every branch, remote-tracking ref and a detached HEAD), or only the current branch and
      remote-tracking refs with ``keep_branches=False`` (other local branches are then deleted, with a
      reflog entry, as the caller asked);
    * a reflog entry younger than ``min_age_hours``: its new value, and its old value unless the entry is a
      hard reset (``reset(mode="hard")`` makes the abandoned tip reclaimable at once);
    * a commit made less than ``min_age_hours`` ago (work in flight: a concurrent writer or an interrupted
      transfer whose ref has not moved yet);
    * with ``keep_pinned``, a message annotated ``pinned`` by any stored annotation commit.
Checkpoints of removed commits and chunks no checkpoint uses are removed with them, in the same transaction.
fsck is clean afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from tractkv import codec
from tractkv.errors import InvalidInput
from tractkv.ids import ObjectId, is_object_id, raw_to_oid
from tractkv.model import Blob, Commit, decode
from tractkv.store import Store, Table

from .content import ANNOTATION
from .records import GcResult
from .reflog import iter_all_reflogs, log_ref_move
from .refs import HEAD, HEADS
from .relations import REL_PREFIX, is_stale_rel
from .session import Session
from .state import CHUNK_PREFIX, CKPT_PREFIX, is_stale_row


def collect_garbage(
    store: Store,
    *,
    min_age_hours: float,
    keep_pinned: bool,
    keep_branches: bool,
    current_branch: str | None,
    now_us: int | None = None,
    extra_roots: Iterable[ObjectId] = (),
) -> GcResult:
    """Remove unreachable objects (see the module doc); returns what was removed.

    ``extra_roots`` are ids higher layers still need though no ref reaches them yet (the finished nested
    records and conversation tips listed in running tool executions' rows, see tractkv.engine.usage_rows).
    """
    now = time.time_ns() // 1000 if now_us is None else now_us
    horizon = now - int(min_age_hours * 3600 * 1_000_000)
    batch = store.new_batch()
    roots: set[ObjectId] = set(extra_roots)
    with store.snapshot() as snap:
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
        for entry in iter_all_reflogs(snap):
            if entry.created_at.timestamp() * 1_000_000 < horizon:
                continue
            if entry.new is not None:
                roots.add(entry.new)
            if entry.old is not None and not entry.hard:
                roots.add(entry.old)
        pinned: set[ObjectId] = set()
        commits_seen = 0
        for oid, data in snap.iter_raw_objects():
            obj = decode(data)
            if not isinstance(obj, Commit):
                continue
            commits_seen += 1
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
        live = _reachable(snap, roots)
        removed = removed_bytes = kept = 0
        for oid, data in snap.iter_raw_objects():
            if oid in live:
                kept += 1
                continue
            batch.delete_object(oid)
            removed += 1
            removed_bytes += len(data)
        removed_checkpoints = _drop_checkpoints(snap, batch, live)
    if len(batch):
        store.apply(batch)
    return GcResult(
        removed_objects=removed,
        removed_bytes=removed_bytes,
        kept_objects=kept,
        removed_checkpoints=removed_checkpoints,
    )


def _reachable(snap: object, roots: set[ObjectId]) -> set[ObjectId]:
    # TODO(sync): switch to tractkv.store.walk.iter_reachable once it lands (same walk, shared with sync).
    from tractkv.store import Reader

    assert isinstance(snap, Reader)
    live: set[ObjectId] = set()
    stack = [r for r in roots if snap.has(r)]
    while stack:
        oid = stack.pop()
        if oid in live:
            continue
        obj = snap.get(oid)
        if obj is None:
            continue
        live.add(oid)
        stack.extend(link for link in obj.iter_links() if link not in live)
    return live


def _drop_checkpoints(snap: object, batch: object, live: Iterable[ObjectId]) -> int:
    from tractkv.store import Reader, WriteBatch

    assert isinstance(snap, Reader)
    assert isinstance(batch, WriteBatch)
    live_set = set(live)
    removed = 0
    used_chunks: set[bytes] = set()
    for key, value in snap.table_iter(Table.DERIVED, CKPT_PREFIX):
        if raw_to_oid(key[len(CKPT_PREFIX) :]) not in live_set:
            batch.table_put(Table.DERIVED, key, None)
            removed += 1
            continue
        try:
            used_chunks.update(codec.loads(value)["chunks"])
        except Exception:
            batch.table_put(Table.DERIVED, key, None)
            removed += 1
    for key, _ in snap.table_iter(Table.DERIVED, CHUNK_PREFIX):
        if key not in used_chunks:
            batch.table_put(Table.DERIVED, key, None)
    for key, _ in snap.table_iter(Table.DERIVED, REL_PREFIX):  # relation rows of removed commits
        if raw_to_oid(key[len(REL_PREFIX) :]) not in live_set:
            batch.table_put(Table.DERIVED, key, None)
    for key, _ in snap.table_iter(Table.DERIVED):
        if is_stale_row(key) or is_stale_rel(key):  # an older row format: nothing reads it any more
            batch.table_put(Table.DERIVED, key, None)
    return removed


def collect_for(
    session: Session, min_age_hours: float = 72.0, keep_pinned: bool = True, keep_branches: bool = True
) -> GcResult:
    """gc from a session: its HEAD state is flushed first, the ids running tool executions hold are kept
    (:func:`~tractkv.engine.usage_rows.held_ids`), and its caches are dropped afterwards."""
    from .usage_rows import held_ids

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
        extra_roots=held_ids(session.store),
    )
    session.after_store_rewrite()
    return result
