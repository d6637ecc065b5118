"""Reachability: the one walk that gc, sync and the invariant tests share.

Links are whatever :meth:`StoredObject.iter_links` yields (parents, content, tool sets, tools, edit targets,
usage records, ``links`` maps), so a new object kind that declares its links is walked everywhere at once.
Walks read only the link fields of each object (:func:`tractkv.model.objects.links_of`): the bytes are the
store's own, verified when they were written or received.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator

from tractkv.ids import ObjectId
from tractkv.model.objects import links_of

from .base import Reader


def iter_reachable(
    reader: Reader,
    roots: Iterable[ObjectId],
    *,
    stop: Container[ObjectId] = frozenset(),
    sizes: dict[ObjectId, int] | None = None,
) -> Iterator[ObjectId]:
    """Every stored object reachable from ``roots``, each once, in post-order (an object after its links).

    Ids in ``stop`` are not visited, nor is anything reachable only through them. Missing objects are
    skipped (see :func:`closure_missing`). Post-order lets a receiver store objects in the order given and
    always find a commit's parent already stored. ``sizes``, when given, receives each visited object's
    size in bytes (the walk reads every object anyway).
    """
    seen: set[ObjectId] = set()
    for root in roots:
        if root in seen or root in stop:
            continue
        data = reader.get_raw(root)
        if data is None:
            continue
        seen.add(root)
        if sizes is not None:
            sizes[root] = len(data)
        stack: list[tuple[ObjectId, Iterator[ObjectId]]] = [(root, iter(links_of(data)))]
        while stack:
            oid, links = stack[-1]
            for link in links:
                if link in seen or link in stop:
                    continue
                raw = reader.get_raw(link)
                if raw is None:
                    continue
                seen.add(link)
                if sizes is not None:
                    sizes[link] = len(raw)
                stack.append((link, iter(links_of(raw))))
                break
            else:
                stack.pop()
                yield oid


def closure_missing(
    reader: Reader, root: ObjectId, *, stop: Container[ObjectId] = frozenset()
) -> ObjectId | None:
    """The first id in ``root``'s closure that is not stored (``root`` itself included), or None if complete.

    ``stop`` names ids whose closure is known complete (e.g. the ref's current value), to bound the walk.
    """
    seen: set[ObjectId] = set()
    stack = [root]
    while stack:
        oid = stack.pop()
        if oid in seen or oid in stop:
            continue
        seen.add(oid)
        data = reader.get_raw(oid)
        if data is None:
            return oid
        stack.extend(link for link in links_of(data) if link not in seen)
    return None
