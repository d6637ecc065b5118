"""What to send: the closure of the wanted tips minus what the other side is known to have.

Content addressing makes negotiation one question. The sender walks commits newest first from the wanted
tips and from the tips the receiver advertised (``haves``), as ``git rev-list wants --not haves`` does:
timestamps never go backwards along a branch, so by the time a commit is reached every descendant in the
walk has been, and a commit any have reaches is known to be on the other side. The walk stops as soon as
only such commits are left, so its cost is the diverged part of history, not all of it. The objects to
offer are then the closure of the wanted tips, pruned at those commits and at the objects they link
directly (the tool set and tools an unchanged branch keeps using are not offered again).

When the candidate set is large, the caller asks the receiver which candidates it lacks
(:meth:`Remote.missing`, one round trip) before sending: that catches objects shared through other paths
(a compression's sources, a tool-usage record's child conversation) without a multi-round walk.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence

from tractkv.ids import ObjectId
from tractkv.model import Commit, Tag, decode
from tractkv.store import Reader, Store
from tractkv.store.walk import iter_reachable

#: Above this many candidates, ask the receiver which it lacks before sending.
ASK_THRESHOLD = 256


def known_on_remote(reader: Reader, wants: Sequence[ObjectId], haves: Sequence[ObjectId]) -> set[ObjectId]:
    """Commits (and the objects they link directly) the receiver has, as far as the walk needed to look."""
    flags: dict[ObjectId, bool] = {}  # True = the receiver has it ("uninteresting")
    heap: list[tuple[int, ObjectId]] = []
    commits: dict[ObjectId, Commit] = {}
    done: set[ObjectId] = set()
    interesting = 0

    def push(oid: ObjectId, have: bool) -> None:
        nonlocal interesting
        previous = flags.get(oid)
        if previous is None:
            data = reader.get_raw(oid)
            if data is None:
                return
            obj = decode(data, oid)
            if isinstance(obj, Tag):  # an annotated tag: walk from the commit it names
                push(obj.target, have)
                return
            if not isinstance(obj, Commit):
                return
            commits[oid] = obj
            flags[oid] = have
            interesting += not have
            heapq.heappush(heap, (-obj.created_at, oid))
        elif have and not previous and oid not in done:
            flags[oid] = True
            interesting -= 1

    for oid in haves:
        push(oid, True)
    for oid in wants:
        push(oid, False)
    while heap and interesting > 0:
        _, oid = heapq.heappop(heap)
        if oid in done:
            continue
        done.add(oid)
        have = flags[oid]
        if not have:
            interesting -= 1
        for parent in commits[oid].parents:
            push(parent, have)
    # Everything painted "have" is on the receiver, popped or still queued: with its direct links.
    known: set[ObjectId] = set()
    for oid, have in flags.items():
        if have:
            known.add(oid)
            commit = commits[oid]
            known.update(link for link in commit.iter_links() if link not in commit.parents)
    return known


def candidate_ids(
    reader: Reader,
    wants: Sequence[ObjectId],
    haves: Sequence[ObjectId],
    *,
    sizes: dict[ObjectId, int] | None = None,
) -> list[ObjectId]:
    """Ids to offer: the closure of ``wants`` minus what :func:`known_on_remote` found, links first.
    ``sizes``, when given, receives each candidate's size in bytes."""
    if isinstance(reader, Store):  # one read transaction for the whole walk, not one per object
        with reader.snapshot() as snap:
            return _candidates(snap, wants, haves, sizes)
    return _candidates(reader, wants, haves, sizes)


def _candidates(
    reader: Reader,
    wants: Sequence[ObjectId],
    haves: Sequence[ObjectId],
    sizes: dict[ObjectId, int] | None,
) -> list[ObjectId]:
    stop: set[ObjectId] = set()
    if haves:
        stop = known_on_remote(reader, wants, haves)
        stop.update(h for h in haves if reader.has(h))
    return list(iter_reachable(reader, wants, stop=stop, sizes=sizes))


def iter_candidates(
    store: Store, wants: Sequence[ObjectId], haves: Sequence[ObjectId]
) -> Iterator[tuple[ObjectId, bytes]]:
    """``(id, bytes)`` of :func:`candidate_ids`, links first, yielded as the walk finds them, so a sender
    streams while it walks (the hub's fetch: the receiver verifies the first objects while the rest are found).
    One read snapshot, held until the iterator is exhausted or closed."""
    with store.snapshot() as snap:
        stop: set[ObjectId] = set()
        if haves:
            stop = known_on_remote(snap, wants, haves)
            stop.update(h for h in haves if snap.has(h))
        for oid in iter_reachable(snap, wants, stop=stop):
            data = snap.get_raw(oid)
            if data is not None:
                yield oid, data


def objects_for(
    reader: Reader, wants: Sequence[ObjectId], haves: Sequence[ObjectId]
) -> Iterator[tuple[ObjectId, bytes]]:
    """Raw bytes of :func:`candidate_ids`, links before the objects that name them."""
    yield from raw_objects(reader, candidate_ids(reader, wants, haves))


def raw_objects(reader: Reader, oids: Sequence[ObjectId]) -> Iterator[tuple[ObjectId, bytes]]:
    """``(id, bytes)`` for each stored id, in the order given."""
    if isinstance(reader, Store):
        with reader.snapshot() as snap:
            for oid in oids:
                data = snap.get_raw(oid)
                if data is not None:
                    yield oid, data
        return
    for oid in oids:
        data = reader.get_raw(oid)
        if data is not None:
            yield oid, data
