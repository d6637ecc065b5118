"""The lane layout of a commit graph, as ``git log --graph`` draws it: pure data, no drawing.

Commits are placed newest first (the order :func:`tractkv.engine.history.graph.iter_log` yields). Each lane waits for
one commit id. A commit takes the first lane waiting for it (or the first free one), ends the other lanes that
waited for it (several children shared it: a fork, read from the bottom up), hands its lane to its first
parent, and opens or joins a lane for each further parent (a merge). A lane keeps its index while it lives,
so lines never shift sideways; a freed lane is reused by the next commit or parent that needs one.

Each :class:`LaneRow` holds the segments drawn from the row's top edge to the node (``top``) and from the
node to the bottom edge (``bottom``) as (from lane, to lane) pairs. Between two consecutive rows the lanes
leaving one row's bottom are exactly those entering the next row's top, and only lines into or out of the
node bend. The CLI draws rows as ASCII (:func:`tractkv.cli.engine_cmds.graph_lines`), the viewer as SVG
(:func:`tractkv.view.pages.lanes_svg`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import attrs

from tractkv.ids import ObjectId

Segment = tuple[int, int]  # (lane at the start, lane at the end), lanes counted from 0 at the left


@attrs.frozen(kw_only=True)
class LaneRow:
    """One commit's place in the graph.

    Attributes:
        commit_id: the commit drawn in this row.
        lane: the lane of its node.
        top: segments from the row's top edge to the node's height; ``(i, lane)`` with ``i != lane`` is a
            child's lane ending in this node, ``(i, i)`` a lane passing by (or the node's own lane).
        bottom: segments from the node's height to the bottom edge; ``(lane, j)`` goes to a parent,
            ``(i, i)`` with ``i != lane`` is a lane passing by.
        width: lanes the row spans (every segment and the node fit in ``range(width)``).
    """

    commit_id: ObjectId
    lane: int
    top: tuple[Segment, ...]
    bottom: tuple[Segment, ...]
    width: int

    @property
    def parent_lanes(self) -> tuple[int, ...]:
        """The lanes the node's parent edges go to (one per distinct parent), left to right."""
        return tuple(sorted({b for a, b in self.bottom if a == self.lane}))

    @property
    def is_merge(self) -> bool:
        """True when the node has edges to more than one parent."""
        return len(self.parent_lanes) > 1

    @property
    def is_fork(self) -> bool:
        """True when more than one child's lane ends in this node (history forked here)."""
        return sum(b == self.lane for _, b in self.top) > 1

    @property
    def node_width(self) -> int:
        """Lanes in use at the node's height (the node and the lanes passing by it)."""
        used = [self.lane, *(b for _, b in self.top), *(a for a, _ in self.bottom)]
        return max(used) + 1


class LaneLayout:
    """Places commits one at a time, newest first (a page of history costs what it and earlier rows do)."""

    def __init__(self) -> None:
        self._lanes: list[ObjectId | None] = []  # the commit each lane waits for; None = free

    def place(self, commit_id: ObjectId, parent_ids: Sequence[ObjectId]) -> LaneRow:
        """Place the next commit (every commit placed earlier is newer); returns its row."""
        lanes = self._lanes
        passing = [i for i, x in enumerate(lanes) if x is not None and x != commit_id]
        lane, waiting, targets = self._advance(commit_id, parent_ids)
        top = {(i, lane) for i in waiting}
        top |= {(i, i) for i in passing}
        bottom = {(lane, lane)} if parent_ids else set()
        bottom |= {(lane, target) for target in targets}
        bottom |= {(i, i) for i, x in enumerate(lanes) if x is not None and i != lane and (i, i) in top}
        width = max([lane, *(x for s in (*top, *bottom) for x in s)]) + 1
        return LaneRow(
            commit_id=commit_id, lane=lane, top=tuple(sorted(top)), bottom=tuple(sorted(bottom)), width=width
        )

    def skip(self, commit_id: ObjectId, parent_ids: Sequence[ObjectId]) -> None:
        """Place the next commit without building its row (the rows before a page still move the lanes)."""
        self._advance(commit_id, parent_ids)

    def _advance(
        self, commit_id: ObjectId, parent_ids: Sequence[ObjectId]
    ) -> tuple[int, list[int], list[int]]:
        """Move the lanes past one commit: its lane, the lanes that waited for it, its extra parents' lanes."""
        lanes = self._lanes
        waiting = [i for i, x in enumerate(lanes) if x == commit_id]
        if waiting:
            lane = waiting[0]
        else:
            lane = lanes.index(None) if None in lanes else len(lanes)
            if lane == len(lanes):
                lanes.append(None)
        for i in waiting[1:]:
            lanes[i] = None  # several children shared this parent: their lanes end here
        lanes[lane] = parent_ids[0] if parent_ids else None
        targets = []
        for parent in parent_ids[1:]:
            if parent in lanes:
                target = lanes.index(parent)
            else:
                free = [i for i, x in enumerate(lanes) if x is None and i != lane]
                target = free[0] if free else len(lanes)
                if target == len(lanes):
                    lanes.append(None)
                lanes[target] = parent
            targets.append(target)
        while lanes and lanes[-1] is None:
            lanes.pop()
        return lane, waiting, targets


def layout_lanes(commits: Iterable[tuple[ObjectId, Sequence[ObjectId]]]) -> Iterator[LaneRow]:
    """Rows for ``(commit id, parent ids)`` pairs given newest first (lazily, one row per pair)."""
    layout = LaneLayout()
    for commit_id, parent_ids in commits:
        yield layout.place(commit_id, parent_ids)
