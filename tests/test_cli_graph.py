"""``tractkv log --graph``: the engine's lane layout drawn as ASCII; exact small cases and a property on random
DAGs (one ``*`` per commit, every parent edge connects, no line ends in the air)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner
from engine.test_lanes import histories, newest_first
from hypothesis import given

from tractkv.cli import cli
from tractkv.cli.engine_cmds import graph_lines
from tractkv.engine.values import CommitInfo
from tractkv.ids import ObjectId

COMMIT_LINE = re.compile(r"^([ *|/\\]*?)([0-9a-f]{12}) ")


def info(oid: ObjectId, parent_ids: tuple[ObjectId, ...]) -> CommitInfo:
    return CommitInfo(
        commit_id=oid,
        parent_ids=parent_ids,
        operation="append",
        content_type="dialogue",
        role="user",
        message=None,
        metadata=None,
        token_count=1,
        created_at=datetime(2024, 1, 1, tzinfo=UTC),
        content={"type": "dialogue", "role": "user", "text": "a | b / c \\ d *"},  # graph characters
    )


def draw(pairs: list[tuple[ObjectId, tuple[ObjectId, ...]]]) -> list[str]:
    return graph_lines([info(oid, ps) for oid, ps in pairs])


def graph_part(line: str) -> str:
    found = COMMIT_LINE.match(line)
    return found.group(1) if found else line


def oid(ch: str) -> ObjectId:
    return ObjectId(ch * 64)


def test_a_merge_fans_out_and_the_fork_closes_as_git_draws_it() -> None:
    m, o, t, b = (oid(c) for c in "abcd")
    lines = draw([(m, (o, t)), (o, (b,)), (t, (b,)), (b, ())])
    assert [graph_part(line) for line in lines] == ["* ", "|\\", "* | ", "| * ", "|/", "* "]
    assert lines[0] == f"* {m[:12]} append user: a | b / c \\ d *"


def test_a_lane_ending_across_another_moves_one_lane_per_line() -> None:
    h, x, q, y, p, r = (oid(c) for c in "abcdef")
    # h merges x, q, y; x and y share the parent p; q's line passes between them
    lines = draw([(h, (x, q, y)), (x, (p,)), (q, (r,)), (y, (p,)), (p, (r,)), (r, ())])
    assert [graph_part(line) for line in lines] == [
        "* ",
        "|\\",  # the edges to q (lane 1) and y (lane 2) leave together; y's goes on one more lane
        "| |\\",
        "* | | ",
        "| * | ",
        "| | * ",
        "| |/",  # y's lane ends in p (lane 0): one lane per line, across q's lane
        "|/|",
        "* | ",
        "|/",
        "* ",
    ]


def test_a_commit_under_an_unrelated_root_is_set_apart() -> None:
    a, b, c = (oid(ch) for ch in "abc")
    # two tips: a is a root, b (unrelated) takes the lane a freed; an empty line keeps them apart
    lines = draw([(a, ()), (b, (c,)), (c, ())])
    assert [graph_part(line) for line in lines] == ["* ", "", "* ", "* "]


def test_log_graph_refuses_an_operation_filter(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    runner = CliRunner()
    assert runner.invoke(cli, ["--store", store, "init"]).exit_code == 0
    assert runner.invoke(cli, ["--store", store, "commit", "hi"]).exit_code == 0
    refused = runner.invoke(cli, ["--store", store, "log", "--graph", "--op", "edit"])
    assert refused.exit_code == 2
    assert "--graph draws every commit's edges" in refused.stderr
    assert runner.invoke(cli, ["--store", store, "log", "--op", "append"]).exit_code == 0


def parse(
    lines: list[str], order: list[ObjectId]
) -> tuple[dict[ObjectId, tuple[int, int]], set[tuple[tuple[int, int], tuple[int, int]]]]:
    """(commit -> (line, lane) of its ``*``, edges) where an edge joins two points (boundary, lane): boundary
    ``k`` is the edge between text lines ``k - 1`` and ``k``."""
    stars: dict[ObjectId, tuple[int, int]] = {}
    edges: set[tuple[tuple[int, int], tuple[int, int]]] = set()
    pending = iter(order)
    for number, line in enumerate(lines):
        found = COMMIT_LINE.match(line)
        graph = found.group(1) if found else line
        if found:
            commit = next(pending)
            assert found.group(2) == commit[:12]
            assert graph.count("*") == 1, line
            stars[commit] = (number, graph.index("*") // 2)
        else:
            assert set(graph) <= set(" |/\\"), line  # a line between commits: no *
        for col, ch in enumerate(graph):
            if ch in "*|":
                assert col % 2 == 0, line
            elif ch in "/\\":
                assert col % 2 == 1, line
            if ch == "|":
                edges.add(((number, col // 2), (number + 1, col // 2)))
            elif ch == "\\":
                edges.add(((number, col // 2), (number + 1, col // 2 + 1)))
            elif ch == "/":
                edges.add(((number, col // 2 + 1), (number + 1, col // 2)))
    assert next(pending, None) is None  # one commit line per commit
    return stars, edges


@given(histories())
def test_the_ascii_graph_has_one_star_per_commit_and_every_parent_edge_connects(
    parents: list[tuple[int, ...]],
) -> None:
    pairs = newest_first(parents)
    lines = draw(pairs)
    stars, edges = parse(lines, [o for o, _ in pairs])
    above_star = {(line, lane): c for c, (line, lane) in stars.items()}  # the point right above each *
    below_star = {(line + 1, lane) for line, lane in stars.values()}
    starts = {a for a, _ in edges}
    ends = {b for _, b in edges}
    # no line ends in the air: every point a line reaches goes on down or is a commit; nothing starts from
    # nowhere; nothing enters the newest commit or leaves the oldest
    assert ends <= starts | set(above_star), lines
    assert starts <= ends | below_star, lines
    assert not any(b == (0, lane) for b in ends for lane in range(100))
    assert {a for a in starts if a[0] == len(lines)} == set()
    down: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for a, b in edges:
        down.setdefault(a, []).append(b)
    for commit, parent_ids in pairs:
        line, lane = stars[commit]
        start = (line + 1, lane)  # the point right below the commit's *
        if not parent_ids:
            assert start not in starts | set(above_star), lines  # a root: nothing below it
            continue
        reached: set[ObjectId] = set()
        stack = [start]
        seen: set[tuple[int, int]] = set()
        while stack:
            point = stack.pop()
            if point in seen:
                continue
            seen.add(point)
            if point in above_star:
                reached.add(above_star[point])
                continue
            stack += down.get(point, ())
        assert set(parent_ids) <= reached, (commit[-3:], lines)
