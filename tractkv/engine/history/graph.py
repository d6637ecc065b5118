"""Commit-graph walks: ancestors, merge bases, topological order, first-parent chains.

Only commits are visited (through ``parents``); object reachability for sync and gc is in
:mod:`tractkv.store.walk`.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator, Sequence

from tractkv.ids import ObjectId
from tractkv.model import Commit
from tractkv.store import Reader


def ancestors(reader: Reader, tip: ObjectId, *, stop: set[ObjectId] | None = None) -> set[ObjectId]:
    """Every commit reachable from ``tip`` (inclusive), not walking into commits in ``stop``."""
    seen: set[ObjectId] = set()
    stack = [tip]
    while stack:
        oid = stack.pop()
        if oid in seen or (stop is not None and oid in stop):
            continue
        seen.add(oid)
        stack.extend(reader.get_commit(oid).parents)
    return seen


def is_ancestor(reader: Reader, ancestor: ObjectId, descendant: ObjectId) -> bool:
    """True when ``ancestor`` is reachable from ``descendant`` (a commit is its own ancestor)."""
    seen: set[ObjectId] = set()
    stack = [descendant]
    while stack:
        oid = stack.pop()
        if oid == ancestor:
            return True
        if oid in seen:
            continue
        seen.add(oid)
        stack.extend(reader.get_commit(oid).parents)
    return False


def merge_base(reader: Reader, a: ObjectId, b: ObjectId) -> ObjectId | None:
    """A best common ancestor of two commits (one not reachable from another common ancestor), or None."""
    common = ancestors(reader, a) & ancestors(reader, b)
    if not common:
        return None
    # Drop every common ancestor that is a strict ancestor of another common ancestor.
    redundant: set[ObjectId] = set()
    for oid in common:
        for parent in reader.get_commit(oid).parents:
            if parent in common:
                redundant |= ancestors(reader, parent) & common
    best = sorted(common - redundant, key=lambda o: (-reader.get_commit(o).created_at, o))
    return best[0] if best else None


def topo_order(reader: Reader, tip: ObjectId, members: set[ObjectId]) -> list[ObjectId]:
    """``members`` (commits reachable from ``tip``) ordered parents first; first parents before others."""
    return parents_first(tip, lambda oid: reader.get_commit(oid).parents, members)


def parents_first(
    tip: ObjectId, parents_of: Callable[[ObjectId], Sequence[ObjectId]], members: Container[ObjectId]
) -> list[ObjectId]:
    """``members`` reachable from ``tip`` ordered parents first, a first parent's side before the others'
    (``parents_of`` gives a commit's parents: read from a store, or from commits already loaded)."""
    order: list[ObjectId] = []
    done: set[ObjectId] = set()
    stack: list[tuple[ObjectId, bool]] = [(tip, False)]
    while stack:
        oid, expanded = stack.pop()
        if oid in done or oid not in members:
            continue
        if expanded:
            done.add(oid)
            order.append(oid)
            continue
        stack.append((oid, True))
        # push later parents first so the first parent is finished first
        for parent in reversed(parents_of(oid)):
            if parent not in done and parent in members:
                stack.append((parent, False))
    return order


def first_parent_chain(reader: Reader, tip: ObjectId) -> Iterator[tuple[ObjectId, Commit]]:
    """(id, commit) from ``tip`` back to the root along first parents."""
    oid: ObjectId | None = tip
    while oid is not None:
        commit = reader.get_commit(oid)
        yield oid, commit
        oid = commit.parents[0] if commit.parents else None


def iter_log(
    reader: Reader, tips: Iterable[ObjectId], get: Callable[[ObjectId], Commit] | None = None
) -> Iterator[tuple[ObjectId, Commit]]:
    """Every commit reachable from ``tips``, newest first by timestamp (lazy: ``limit`` reads little).
    ``get`` reads a commit (default ``reader.get_commit``; the viewer passes one that caches).

    Children are stamped after their parents by one clock; with clocks of several machines disagreeing, a
    parent may be listed before a child, as in ``git log --date-order``'s worst case.
    """
    import heapq  # lazy: keeps `import tractkv` light

    get_commit = reader.get_commit if get is None else get
    heap: list[tuple[int, ObjectId]] = []
    queued: set[ObjectId] = set()
    commits: dict[ObjectId, Commit] = {}
    for oid in tips:
        if oid not in queued:
            queued.add(oid)
            commits[oid] = get_commit(oid)
            heapq.heappush(heap, (-commits[oid].created_at, oid))
    while heap:
        _, oid = heapq.heappop(heap)
        commit = commits.pop(oid)
        yield oid, commit
        for parent in commit.parents:
            if parent not in queued:
                queued.add(parent)
                commits[parent] = get_commit(parent)
                heapq.heappush(heap, (-commits[parent].created_at, parent))


def ahead_behind(reader: Reader, a: ObjectId, b: ObjectId) -> tuple[int, int]:
    """(commits reachable from ``a`` but not ``b``, commits reachable from ``b`` but not ``a``).

    Walks newest first (a child is newer than its parents as one clock stamps them, see ``Session.now``;
    commits from clocks that disagree can break that, as in git, and so can a child stamped by the clock
    under a parent more than a day ahead of it: then the counts may be off), painting each commit
    with the sides that reach it, and stops once only commits both sides reach are queued: the cost is the
    diverged part of history, not all of it.
    """
    import heapq  # lazy: keeps `import tractkv` light

    if a == b:
        return 0, 0
    flags: dict[ObjectId, int] = {}
    heap: list[tuple[int, ObjectId]] = []
    pending = 0  # queued commits not yet known to be common

    def paint(oid: ObjectId, side: int) -> None:
        nonlocal pending
        old = flags.get(oid, 0)
        new = old | side
        if new == old:
            return
        flags[oid] = new
        if old == 0:
            heapq.heappush(heap, (-reader.get_commit(oid).created_at, oid))
            pending += new != 3
        elif new == 3:
            pending -= 1

    paint(a, 1)
    paint(b, 2)
    done: set[ObjectId] = set()
    counts = [0, 0, 0, 0]
    while heap and pending > 0:
        _, oid = heapq.heappop(heap)
        if oid in done:
            continue
        done.add(oid)
        side = flags[oid]
        counts[side] += 1
        if side != 3:
            pending -= 1
        for parent in reader.get_commit(oid).parents:
            if parent in done:
                continue
            paint(parent, side)
    return counts[1], counts[2]
