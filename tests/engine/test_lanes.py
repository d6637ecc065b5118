"""The lane layout shared by the CLI's ``log --graph`` and the viewer: unit cases and a property on random DAGs."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from tractkv.engine.history import LaneLayout, layout_lanes
from tractkv.engine.history.lanes import LaneRow
from tractkv.ids import ObjectId

A, B, C, D = (ObjectId(ch * 64) for ch in "abcd")


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[int, ...]]:
    """A random commit DAG: commit i's parents are earlier commits (0 = a root; 2+ = a merge)."""
    size = draw(st.integers(1, 40))
    out: list[tuple[int, ...]] = [()]
    for i in range(1, size):
        kind = draw(st.sampled_from(["child", "child", "child", "merge", "root"]))
        if kind == "root":
            out.append(())
        elif kind == "merge" and i >= 2:
            parents = draw(st.lists(st.integers(0, i - 1), min_size=2, max_size=3, unique=True))
            out.append(tuple(parents))
        else:
            out.append((draw(st.integers(max(0, i - 4), i - 1)),))
    return out


def newest_first(parents: list[tuple[int, ...]]) -> list[tuple[ObjectId, tuple[ObjectId, ...]]]:
    """The DAG as (id, parent ids) newest first, with one extra head joining every tip (so a walk from it
    reaches everything, as ``iter_log`` from one branch does)."""
    ids = [ObjectId(f"{i:064x}") for i in range(len(parents) + 1)]
    tips = set(range(len(parents))) - {p for ps in parents for p in ps}
    pairs = [(ids[i], tuple(ids[p] for p in ps)) for i, ps in enumerate(parents)]
    pairs.append((ids[-1], tuple(ids[t] for t in sorted(tips))))
    return pairs[::-1]


def test_a_linear_history_is_one_lane() -> None:
    rows = list(layout_lanes([(C, (B,)), (B, (A,)), (A, ())]))
    assert [r.lane for r in rows] == [0, 0, 0]
    assert [r.top for r in rows] == [(), ((0, 0),), ((0, 0),)]
    assert [r.bottom for r in rows] == [((0, 0),), ((0, 0),), ()]
    assert not any(r.is_merge or r.is_fork for r in rows)


def test_lanes_follow_a_fork_and_a_merge() -> None:
    layout = LaneLayout()
    # newest first: d merges c (first parent) and b; c and b both have parent a
    merge = layout.place(D, (C, B))
    assert (merge.lane, merge.top, merge.bottom, merge.width) == (0, (), ((0, 0), (0, 1)), 2)
    assert merge.is_merge
    assert merge.parent_lanes == (0, 1)
    assert merge.node_width == 1
    assert layout.place(C, (A,)).lane == 0
    side = layout.place(B, (A,))
    assert (side.lane, side.top, side.bottom) == (1, ((0, 0), (1, 1)), ((0, 0), (1, 1)))
    root = layout.place(A, ())
    assert (root.lane, root.top, root.bottom) == (0, ((0, 0), (1, 0)), ())  # both lanes end in the root
    assert root.is_fork
    assert not root.is_merge
    assert root.node_width == 1


def test_a_freed_lane_is_reused_and_a_merge_joins_a_waiting_lane() -> None:
    e = ObjectId("e" * 64)
    rows = list(layout_lanes([(e, (D, B)), (D, (B,)), (B, (A,)), (A, ())]))
    # e's second parent b is new: lane 1; then d's parent b is already waited for in lane 1
    assert rows[0].bottom == ((0, 0), (0, 1))
    assert rows[1].bottom == ((0, 0), (1, 1))
    assert rows[2].top == ((0, 0), (1, 0))
    assert rows[2].lane == 0


def test_a_row_lists_the_commit_it_places() -> None:
    row = LaneLayout().place(A, ())
    assert row == LaneRow(commit_id=A, lane=0, top=(), bottom=(), width=1)


@given(histories())
def test_lanes_are_continuous_from_row_to_row(parents: list[tuple[int, ...]]) -> None:
    pairs = newest_first(parents)
    rows = list(layout_lanes(pairs))
    assert [r.commit_id for r in rows] == [oid for oid, _ in pairs]
    assert rows[0].top == ()  # nothing above the newest commit
    for above, below in pairwise(rows):
        # every line leaving a row's bottom edge enters the next row's top edge, and nothing else does
        assert {b for _, b in above.bottom} == {a for a, _ in below.top}
        assert all(b == below.lane for a, b in below.top if a != b)  # only lines into the node bend
    for row, (_, parent_ids) in zip(rows, pairs, strict=True):
        assert len({b for a, b in row.bottom if a == row.lane}) == len(set(parent_ids))  # a line per parent
        assert all(a == b for a, b in row.bottom if a != row.lane)  # only lines out of the node bend
        assert row.width == max([row.lane, *(x for s in (*row.top, *row.bottom) for x in s)]) + 1
    assert rows[-1].bottom == ()  # the oldest commit is a root: nothing below it


@given(histories(), st.integers(0, 45))
def test_skipping_rows_leaves_the_lanes_as_placing_them_does(
    parents: list[tuple[int, ...]], start: int
) -> None:
    """A page that starts at row ``start`` (the viewer's later pages) draws the rows the whole layout draws."""
    pairs = newest_first(parents)
    every = list(layout_lanes(pairs))
    layout = LaneLayout()
    for oid, parent_ids in pairs[:start]:
        layout.skip(oid, parent_ids)
    assert [layout.place(oid, ps) for oid, ps in pairs[start:]] == every[start:]
