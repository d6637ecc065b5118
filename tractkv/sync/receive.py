"""The receiving side, shared by every transport: verify objects, store them in batches, move refs by CAS.

Objects are checked one by one as they arrive (rehash, known kind, strict decode, then the semantic rules
of :mod:`tractkv.engine.history.validate`: what each link points at, content a commit can compile, timestamp
ranges, and no commit stamped more than a day past this side's clock) and committed in batches, so an
interrupted transfer keeps every object that arrived whole and a retry sends only the rest.
Refs move only after their objects, each by compare-and-swap on the value the pusher expected, and only
to a commit whose closure is complete here: a receiving store never has a ref it cannot compile. The
closure check is bounded by what arrived: a :class:`Receiver` remembers the links of the objects it stored,
so for a tip the transfer brought it walks those and checks in one read snapshot that everything reached is
(still) stored, without reading or decoding the closure again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from contextlib import ExitStack

import attrs

from tractkv.engine.history import (
    HEADS,
    TAGS,
    MissingLink,
    ObjectRuleError,
    Tags,
    check,
    check_branch_name,
    is_ancestor,
    log_ref_move,
)
from tractkv.errors import (
    DecodeError,
    InvalidRefName,
    MissingLinkTarget,
    MissingRefTarget,
    ObjectTooLarge,
    RefConflict,
    RejectedObject,
    TransferError,
)
from tractkv.ids import ObjectId, hash_bytes, is_object_id
from tractkv.model import MAX_OBJECT_BYTES, Commit, StoredObject, Tag
from tractkv.model.objects import decode_received
from tractkv.store import Store, WriteBatch
from tractkv.store.walk import closure_missing

from .remote import RefResult, RefUpdate

BATCH_OBJECTS = 4096
DECODE_FACTOR = 3  # an object may take this many times the byte limit (plus 1 MiB) decoded: text takes ~3x
DECODED_BATCH_BYTES = (
    8 * 1024 * 1024
)  # a batch whose objects take more decoded (estimated) is committed early


def decode_limit(max_object: int) -> int:
    """The most one received object may take decoded (estimated before decoding, see :func:`verify`) when
    objects of up to ``max_object`` bytes are taken: every receiver's bound, the hub's, fetch's, a bundle's."""
    return DECODE_FACTOR * max_object + 1024 * 1024


@attrs.frozen
class ReceiveStats:
    """Objects seen, of which newly stored, and their bytes."""

    objects: int
    new_objects: int
    bytes: int


def verify(
    oid: ObjectId, data: bytes, max_decoded: int | None = None, spent: list[int] | None = None
) -> StoredObject:
    """The object ``data`` holds; :class:`RejectedObject` unless it hashes to ``oid`` and decodes strictly.

    Each object is hashed once and decoded once (canonical bytes, allowed values, a known kind with fields
    of the right types): the one verification every received object gets. The decode is
    :func:`~tractkv.model.objects.decode_received`: ``decode(strict=True)``, faster for the shapes appends
    write. An id equal to a digest is well formed, so the id's form is checked only when the hash differs.
    ``max_decoded`` bounds the memory the decode may take, estimated before anything is decoded
    (:func:`~tractkv.codec.decoded_size`): an object over it is an :class:`ObjectTooLarge`; ``spent[0]``
    grows by the estimate.
    """
    if hash_bytes(data) != oid:
        if not is_object_id(oid):
            raise RejectedObject("malformed object id", str(oid))
        raise RejectedObject("object bytes do not hash to their id", oid)
    try:
        return decode_received(data, max_decoded, spent)
    except ObjectTooLarge as exc:
        raise ObjectTooLarge(f"object of {len(data)} bytes: {exc.reason}", oid) from None
    except DecodeError as exc:
        raise RejectedObject(f"not a readable tractkv object ({exc})", oid) from exc


#: A :class:`Receiver` remembers what at most this many received objects link (for the ref-update check
#: bounded by what arrived); a larger transfer forgets it and the check walks the stored closure instead.
REMEMBER_OBJECTS = 1 << 20

Admit = Callable[[ObjectId, StoredObject], None]
"""Called with each verified object before it is stored; raises :class:`RejectedObject` to refuse it."""

Held = Callable[[Sequence[ObjectId]], Container[ObjectId]]
"""Which of some ids count as already here (default: what the store holds)."""


class Receiver:
    """One transfer's receiving side: verifies and stores objects over one or more :meth:`receive` calls (a
    hub receives a push batch by batch), and remembers which objects arrived and what each links, so a ref
    update's closure check (:meth:`closure_hole`) reads only what this transfer did not bring.
    """

    def __init__(
        self,
        store: Store,
        *,
        batch_objects: int = BATCH_OBJECTS,
        admit: Admit | None = None,
        remember: int = REMEMBER_OBJECTS,
        track_links: bool = True,
        held: Held | None = None,
        max_decoded: int | None = decode_limit(MAX_OBJECT_BYTES),
        max_held: int | None = DECODED_BATCH_BYTES,
    ) -> None:
        """``held``: which ids count as already here (skipped: not checked, stored or counted as new),
        instead of the store's answer; a hub gives a write-only token's reach, so that an object the store
        holds outside it is received as if absent (checked, counted new, its put a no-op)."""
        self.store = store
        # Decoded memory: ``max_decoded`` bounds one object's decode (see :func:`verify`); ``max_held`` what
        # the objects of one uncommitted batch take decoded (estimated): past it the batch is committed.
        self.max_decoded = max_decoded
        self.max_held = max_held
        self.batch_objects = batch_objects
        self.admit = admit
        self.held = held
        self.remember = remember
        self.tags = Tags(store)
        # id -> links of each object this transfer verified and stored; None without ``track_links`` (a
        # fetch moves no ref by :func:`check_update`) or once over ``remember`` (then the closure check
        # walks the store, as for a commit this transfer did not bring)
        self.arrived: dict[ObjectId, tuple[ObjectId, ...]] | None = {} if track_links else None

    def receive(self, pairs: Iterable[tuple[ObjectId, bytes]]) -> ReceiveStats:
        """Verify and store ``pairs`` in transactions of ``batch_objects``.

        Senders stream objects after the objects they link (post-order), so every link must already be in
        the store or earlier in the stream; an object with a dangling link is rejected, and so is one that
        breaks a rule of :mod:`tractkv.engine.history.validate` (a :class:`RejectedObject` naming the object and the
        rule). Each object is hashed and decoded once: the validator reads the tags recorded for objects
        earlier in the transfer. The store therefore stays closed under links whatever happens: when
        ``pairs`` raises midway (a truncated stream, a rejected object, a client that died), the objects
        verified before it are committed first, then the exception propagates.
        """
        seen = new = size = 0
        store, tags, admit, arrived, held = self.store, self.tags, self.admit, self.arrived, self.held
        now_us = time.time_ns() // 1000  # a commit stamped over MAX_FUTURE_US past this clock is refused
        max_decoded = self.max_decoded
        max_held = self.max_held
        spent = [0] if max_held is not None else None
        known = tags.known
        batch = store.new_batch()
        with ExitStack() as stack:
            # Lookups go through a read snapshot renewed after every batch (one transaction, not one per
            # lookup), for a chunk of ids at once (``Reader.stored``). Objects of this transfer are found in
            # ``tags.known`` first, so the snapshot lagging behind a concurrent writer only means an object is
            # put twice, which is harmless.
            view = tags.reader = stack.enter_context(store.snapshot())
            try:
                for chunk, failure in _chunks(pairs, LOOKUP_CHUNK):
                    asked = [oid for oid, _ in chunk if type(oid) is str and oid not in known]
                    present: Container[ObjectId] | None = view.stored(asked) if held is None else held(asked)
                    for oid, data in chunk:
                        obj = verify(oid, data, max_decoded, spent)
                        if admit is not None:
                            admit(oid, obj)
                        seen += 1
                        size += len(data)
                        if oid in known or (
                            oid in present
                            if present is not None
                            else (view.has(oid) if held is None else oid in held([oid]))
                        ):
                            continue
                        try:
                            check(obj, tags, tags.claims, now_us=now_us)
                        except MissingLink as exc:
                            raise RejectedObject(
                                f"links to {exc.oid}, which is neither here nor earlier in the stream", oid
                            ) from None
                        except ObjectRuleError as exc:
                            raise RejectedObject(f"invalid {obj.KIND}: {exc}", oid) from None
                        tags.add(oid, obj)
                        if arrived is not None:
                            arrived[oid] = tuple(obj.iter_links())
                        batch.put_raw(oid, data, obj)
                        new += 1
                        if len(batch.objects) >= self.batch_objects or (
                            spent is not None and max_held is not None and spent[0] > max_held
                        ):
                            if spent is not None:
                                spent[0] = 0
                            _apply(store, batch)
                            batch = store.new_batch()
                            stack.close()
                            if len(known) > self.remember:  # bound the memory of a huge transfer
                                tags.clear()
                                arrived = self.arrived = None
                            view = tags.reader = stack.enter_context(store.snapshot())
                            present = None  # looked up in the old snapshot: ask the new one, one by one
                    if failure is not None:  # the pairs before it were whole: verified and kept above
                        raise failure
            finally:
                stack.close()
                tags.reader = store
                if batch.objects:
                    _apply(store, batch)
        return ReceiveStats(objects=seen, new_objects=new, bytes=size)

    def closure_hole(self, tip: ObjectId, stop: Container[ObjectId] = frozenset()) -> ObjectId | None:
        """The first id in ``tip``'s closure that is not stored, or None when it is complete.

        For a tip this transfer brought, the walk follows the links recorded while receiving (nothing is read
        or decoded again) and then checks, in one read snapshot, that every object it reached is still
        stored: the ones that arrived (a concurrent gc may have removed them since) and the links they have
        outside this transfer (each was stored when checked, and a stored object's closure is stored). Any
        other tip is walked in the store (:func:`closure_missing`). ``stop`` names ids whose closure is known
        complete (the ref's current value).
        """
        arrived = self.arrived
        if arrived is None or tip not in arrived:
            return closure_missing(self.store, tip, stop=stop)
        reached = [tip]
        seen = {tip}
        stack = [tip]
        while stack:
            for link in arrived[stack.pop()]:
                if link in seen or link in stop:
                    continue
                seen.add(link)
                reached.append(link)
                if link in arrived:
                    stack.append(link)
        with self.store.snapshot() as snap:
            present = snap.stored(reached)
        return next((oid for oid in reached if oid not in present), None)


#: Pairs taken from the stream at a time, so the ids already stored are looked up together.
LOOKUP_CHUNK = 512


def _chunks(
    pairs: Iterable[tuple[ObjectId, bytes]], size: int
) -> Iterator[tuple[list[tuple[ObjectId, bytes]], Exception | None]]:
    """``pairs`` in lists of ``size``, each with None, except that when taking the next pair raises, the
    pairs taken before it come with that exception (the receiver stores them, then raises it)."""
    it = iter(pairs)
    while True:
        chunk: list[tuple[ObjectId, bytes]] = []
        try:
            for pair in it:
                chunk.append(pair)
                if len(chunk) >= size:
                    break
        except Exception as exc:  # a truncated stream, a dead connection: keep what came whole first
            yield chunk, exc
            return
        if not chunk:
            return
        yield chunk, None


def _apply(store: Store, batch: WriteBatch) -> None:
    """Write a batch of received objects; a link gc removed after it was checked is a :class:`TransferError`
    (the batch is not written; the sender learns the object is missing and sends it again)."""
    try:
        store.apply(batch)
    except MissingLinkTarget as exc:
        raise TransferError(
            f"{exc.source} links {exc.oid}, which this store no longer holds (gc removed it while the transfer "
            "ran): nothing of this batch was written; send again",
            exc.oid,
        ) from None


def receive_objects(
    store: Store,
    pairs: Iterable[tuple[ObjectId, bytes]],
    *,
    batch_objects: int = BATCH_OBJECTS,
    max_object: int = MAX_OBJECT_BYTES,
) -> ReceiveStats:
    """Verify and store ``pairs`` (see :meth:`Receiver.receive`) in transactions of ``batch_objects``; for
    transfers whose ref updates are not checked by :func:`check_update` (fetch, clone, unbundle). Objects of
    up to ``max_object`` bytes are taken (the caller enforces that limit on the stream); what one takes
    decoded is bounded by :func:`decode_limit` of it, as on a hub."""
    receiver = Receiver(
        store, batch_objects=batch_objects, track_links=False, max_decoded=decode_limit(max_object)
    )
    return receiver.receive(pairs)


def missing_ids(store: Store, oids: Sequence[ObjectId]) -> set[ObjectId]:
    """Which of ``oids`` the store lacks (one read snapshot)."""
    with store.snapshot() as snap:
        present = snap.stored(oids)
    return {oid for oid in oids if oid not in present}


def check_update(
    store: Store,
    update: RefUpdate,
    may_write: Callable[[str], bool] | None,
    received: Receiver | None = None,
) -> RefResult | None:
    """Why ``update`` must be refused (a :class:`RefResult`), or None when it may be applied.

    ``received`` is the transfer that brought the objects, when there was one: the closure check then walks
    only what arrived (:meth:`Receiver.closure_hole`)."""
    name = update.name

    def refuse(reason: str, detail: str) -> RefResult:
        return RefResult(name=name, ok=False, reason=reason, detail=detail)  # type: ignore[arg-type]

    is_tag = name.startswith(TAGS)
    if not name.startswith(HEADS) and not is_tag:
        return refuse("invalid", "only branches (refs/heads/...) and tags (refs/tags/...) can be pushed")
    try:
        check_branch_name(name[len(TAGS if is_tag else HEADS) :])
    except InvalidRefName as exc:
        return refuse("invalid", str(exc))
    for value in (update.old, update.new):
        if value is not None and not is_object_id(value):
            return refuse("invalid", f"{value!r} is not an object id")
    if may_write is not None and not may_write(name):
        return refuse("forbidden", "these credentials may not write this ref")
    current = store.get_ref(name)
    if current != update.old:
        return moved(store, update, current)
    if update.new is None:
        return None
    obj = store.get(update.new)
    if obj is None:
        return refuse("missing-objects", f"{update.new} is not here")
    if is_tag and isinstance(obj, Tag) and isinstance(store.get(obj.target), Commit):
        pass  # an annotated tag of a stored commit
    elif not isinstance(obj, Commit):
        return refuse("invalid", f"{update.new} is a {type(obj).KIND}, not a commit (or a tag of one)")
    stop = {ObjectId(current)} if current else frozenset()
    if received is not None:
        hole = received.closure_hole(update.new, stop)
    else:
        hole = closure_missing(store, update.new, stop=stop)
    if hole is not None:
        return refuse("missing-objects", f"{hole} (in the history of {update.new[:12]}) is not here")
    if is_tag:  # tags never move by themselves (git's "already exists")
        if current is not None and current != update.new and not update.force:
            return refuse("already-exists", f"tag names {current[:12]}; force to move it")
        return None
    if current is not None and not update.force and not is_ancestor(store, ObjectId(current), update.new):
        return refuse("non-fast-forward", f"{update.new[:12]} does not descend from {current[:12]}")
    return None


def moved(store: Store, update: RefUpdate, current: str | None) -> RefResult:
    """The refusal of an update whose ref is no longer at the expected old value.

    ``non-fast-forward`` when the new value does not contain the current one (the pusher must pull and
    merge, as after losing a race to another pusher), else ``stale`` (re-read and retry).
    """
    detail = f"expected {update.old or 'absent'}, found {current or 'absent'}"
    if update.name.startswith(TAGS):  # a tag has no ancestry: only "someone moved it since"
        return RefResult(update.name, False, "already-exists" if current else "stale", detail)
    if (
        current is not None
        and not update.force
        and update.new is not None
        and store.has(update.new)
        and (not store.has(ObjectId(current)) or not is_ancestor(store, ObjectId(current), update.new))
    ):
        return RefResult(update.name, False, "non-fast-forward", f"{detail}: someone pushed first")
    return RefResult(update.name, False, "stale", detail)


def apply_ref_updates(
    store: Store,
    updates: Sequence[RefUpdate],
    *,
    atomic: bool = False,
    may_write: Callable[[str], bool] | None = None,
    operation: str = "push",
    received: Receiver | None = None,
) -> list[RefResult]:
    """Check and apply ref updates; one transaction each, or one for all with ``atomic``.

    ``received``: the :class:`Receiver` of the transfer that brought the objects, if any (see
    :func:`check_update`).

    The store's compare-and-swap decides: a ref moved by someone else between the checks and the write is
    reported ``stale``, never as a success.
    """
    names = [u.name for u in updates]
    if len(set(names)) != len(names):
        return [RefResult(n, False, "invalid", "a ref is named twice in one push") for n in names]
    checked = [(u, check_update(store, u, may_write, received)) for u in updates]
    if atomic:
        if any(r is not None for _, r in checked):
            return [
                r if r is not None else RefResult(u.name, False, "atomic", "another ref was refused")
                for u, r in checked
            ]
        batch = store.new_batch()
        for u, _ in checked:
            _stage(batch, u, operation)
        over = {u.name: why for u, _ in checked if (why := over_budget(store, batch, u, operation))}
        if over:
            return [
                RefResult(u.name, False, "over-budget", over[u.name])
                if u.name in over
                else RefResult(u.name, False, "atomic", "another ref was refused")
                for u, _ in checked
            ]
        try:
            store.apply(batch)
        except RefConflict as exc:
            return [
                moved(store, u, store.get_ref(u.name))
                if u.name == exc.ref
                else RefResult(u.name, False, "atomic", str(exc))
                for u, _ in checked
            ]
        except MissingRefTarget as exc:  # gc removed part of the closure after check_update read it
            return [
                RefResult(u.name, False, "missing-objects", f"{exc.oid} is not here")
                if u.name == exc.ref
                else RefResult(u.name, False, "atomic", str(exc))
                for u, _ in checked
            ]
        return [RefResult(u.name, True) for u, _ in checked]
    results: list[RefResult] = []
    for u, refused in checked:
        if refused is not None:
            results.append(refused)
            continue
        batch = store.new_batch()
        _stage(batch, u, operation)
        why = over_budget(store, batch, u, operation)
        if why is not None:
            results.append(RefResult(u.name, False, "over-budget", why))
            continue
        try:
            store.apply(batch)
        except RefConflict:
            results.append(moved(store, u, store.get_ref(u.name)))
            continue
        except MissingRefTarget as exc:  # gc removed part of the closure after check_update read it
            results.append(RefResult(u.name, False, "missing-objects", f"{exc.oid} is not here"))
            continue
        results.append(RefResult(u.name, True))
    return results


def over_budget(store: Store, batch: WriteBatch, update: RefUpdate, operation: str) -> str | None:
    """Run the receiving store's budget of the branch ``update`` moves (a local setting: see
    :mod:`tractkv.engine.budget`) on the move staged in ``batch``: why it is refused, or None (a ``trim``
    then stages its commit in ``batch``, a ``warn`` its record)."""
    if update.new is None:
        return None
    from tractkv.engine.budget import check_received

    return check_received(store, batch, update.name, f"the {operation}")


def _stage(batch: WriteBatch, update: RefUpdate, operation: str) -> None:
    batch.set_ref(update.name, update.new, expected=update.old)
    note = f"{operation} (forced)" if update.force else operation
    log_ref_move(batch, update.name, update.old, update.new, operation, note)
