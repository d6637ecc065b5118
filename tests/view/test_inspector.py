"""The viewer's queries agree with the Tract API, page correctly, and never write to the store."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from engine.test_lanes import histories
from hypothesis import given

from tractkv import Tract
from tractkv.errors import InvalidInput, ObjectNotFound, UnknownRevision
from tractkv.store import LmdbStore, Table
from tractkv.view.inspector import Inspector, tool_diff

from .conftest import Clock

MAIN = "refs/heads/main"


def store_image(st: LmdbStore) -> dict[str, list[tuple[bytes, bytes]]]:
    return {table.value: list(st.table_iter(table)) for table in Table}


def test_branches_match_the_tract(demo: tuple[Path, dict[str, str]]) -> None:
    path, _ = demo
    with Tract.open(str(path)) as t:
        status = t.status()
        explore = t.compile(at="explore")
    with LmdbStore(path) as st:
        branches = {b.name: b for b in Inspector(st).branches()}
    assert set(branches) == {"main", "explore"}
    main = branches["main"]
    assert (main.head, main.commit_count, main.message_count, main.token_count) == (
        status.head,
        status.commit_count,
        status.message_count,
        status.token_count,
    )
    assert branches["explore"].token_count == explore.token_count
    assert main.last_activity is not None
    assert not main.is_remote


def test_remote_tracking_branches_are_listed(tmp_path: Path, clock: Clock) -> None:
    with Tract.open(str(tmp_path / "a"), clock=clock, durable=False) as a:
        a.user("hello")
    with Tract.open(str(tmp_path / "b"), clock=clock, durable=False) as b:
        b.remote_add("origin", str(tmp_path / "a"))
        b.fetch("origin")
    with LmdbStore(tmp_path / "b") as st:
        found = [(x.ref, x.name, x.is_remote, x.commit_count) for x in Inspector(st).branches()]
    assert found == [("refs/remotes/origin/main", "origin/main", True, 1)]


def test_graph_pages_cover_the_log_once_in_order(demo: tuple[Path, dict[str, str]]) -> None:
    path, ids = demo
    with Tract.open(str(path)) as t:
        log = [c.commit_id for c in t.log()]
    with LmdbStore(path) as st:
        inspector = Inspector(st)
        whole = inspector.graph_page(MAIN)
        assert [r.info.commit_id for r in whole.rows] == log
        assert not whole.more
        paged = []
        start = 0
        while True:
            page = inspector.graph_page(MAIN, start=start, limit=4)
            paged += [r.info.commit_id for r in page.rows]
            if not page.more:
                break
            start += 4
        assert paged == log
        merge = next(r for r in whole.rows if r.info.commit_id == ids["merge"])
        # the merge node has two edges below it: to its first parent's lane and to a second lane
        assert len(merge.bottom) == 2
        assert {a for a, _ in merge.bottom} == {merge.lane}
        assert max(r.width for r in whole.rows) == 2
        with pytest.raises(InvalidInput):
            inspector.graph_page(MAIN, limit=0)
        with pytest.raises(InvalidInput):
            inspector.graph_page("refs/tags/x")
        with pytest.raises(UnknownRevision):
            inspector.graph_page("refs/heads/nope")


def test_commit_view_is_the_compiled_context(demo: tuple[Path, dict[str, str]]) -> None:
    path, ids = demo
    with Tract.open(str(path)) as t:
        expected = t.compile(at=ids["answer"])
        tools = t.get_commit_tools(ids["answer"])
        result = next(c for c in t.log() if c.role == "tool")
    with LmdbStore(path) as st:
        inspector = Inspector(st)
        view = inspector.commit(ids["answer"][:10], MAIN)
        assert view.info.commit_id == ids["answer"]
        assert view.context.to_openai_params() == expected.to_openai_params()
        assert view.context.to_anthropic_params() == expected.to_anthropic_params()
        assert list(view.tools) == tools
        assert len(tools) == 3
        hostile = inspector.commit(ids["hostile"], MAIN)
        assert [(a.priority, a.reason, a.commit) for a in hostile.annotations] == [
            ("pinned", "keep the odd message in view", ids["annotate"])
        ]
        assert inspector.commit(ids["hostile"]).annotations == ()  # at the commit itself: not annotated yet
        later = inspector.commit(ids["merge"], MAIN)
        assert later.message_annotations[ids["hostile"]].priority == "pinned"
        assert inspector.commit(result.commit_id, MAIN).usage_count == 1
        with pytest.raises(UnknownRevision):
            inspector.commit("0" * 64)


def test_usage_page_groups_filters_and_stats(demo: tuple[Path, dict[str, str]]) -> None:
    path, _ = demo
    with Tract.open(str(path)) as t:
        stats = t.tool_usage_stats()
        usages = t.tool_usages()
    with LmdbStore(path) as st:
        inspector = Inspector(st)
        page = inspector.usages(MAIN)
        assert page.stats == stats
        assert page.tool_names == ("lookup", "research", "search")
        assert len(page.groups) == 1
        (root,) = page.groups[0].roots
        assert root.usage.tool_name == "research"
        assert [c.usage.tool_name for c in root.children] == ["search", "search", "lookup"]
        assert page.matching == {u.id for u in usages}
        # a filter keeps the tree around a match and marks only the match
        failed = inspector.usages(MAIN, status="error")
        (kept,) = failed.groups[0].roots
        assert kept.usage.tool_name == "research"
        assert failed.matching == {u.id for u in usages if u.status == "error"}
        assert inspector.usages(MAIN, tool="search").matching == {
            u.id for u in usages if u.tool_name == "search"
        }
        assert inspector.usages(MAIN, tool="nothing").groups == ()
        assert inspector.usages(MAIN, commit=page.groups[0].commit).total_groups == 1
        assert inspector.usages(MAIN, start=1).groups == ()
        with pytest.raises(InvalidInput):
            inspector.usages(MAIN, status="exploded")


def test_tool_versions_and_their_diff(demo: tuple[Path, dict[str, str]]) -> None:
    path, _ = demo
    with LmdbStore(path) as st:
        inspector = Inspector(st)
        assert dict(inspector.tool_names()) == {"lookup": 1, "research": 1, "search": 2}
        old, new = inspector.tool_versions("search")
        lines = tool_diff(old, new)
        assert ("del", '-    "description": "Search the notes for a query.",') in lines
        assert ("add", '+    "description": "Search the notes (newest first) for a query.",') in lines
        assert tool_diff(old, old) == []
        with pytest.raises(ObjectNotFound):
            inspector.tool_versions("nope")


def test_viewing_everything_writes_nothing(demo: tuple[Path, dict[str, str]]) -> None:
    path, ids = demo
    with LmdbStore(path) as st:
        before = store_image(st)
        inspector = Inspector(st)
        inspector.branches()
        inspector.graph_page(MAIN)
        for oid in ids.values():
            inspector.commit(oid, MAIN)
        inspector.usages(MAIN)
        inspector.tool_versions("search")
        assert store_image(st) == before


def test_branch_summaries_compile_each_head_once(
    demo: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = demo
    with LmdbStore(path) as st:
        head = st.get_ref(MAIN)
        assert head is not None
        for i in range(5):  # five agents' branches, all at main's head
            st.set_ref(f"refs/heads/agents/a{i}", head)
        inspector = Inspector(st)
        compiled: list[str | None] = []
        real = inspector._compiled
        monkeypatch.setattr(inspector, "_compiled", lambda oid: compiled.append(oid) or real(oid))
        first = inspector.branches()
        assert sorted(compiled) == sorted({b.head for b in first})  # main's head once, explore's once
        assert inspector.branches() == first
        assert len(compiled) == 2  # nothing recompiled
        assert len({(b.commit_count, b.token_count) for b in first if b.head == head}) == 1


@given(histories())
def test_graph_lanes_are_continuous_from_row_to_row(parents: list[tuple[int, ...]]) -> None:
    # the viewer's rows are the engine's lane layout (tractkv.engine.lanes, unit-tested in tests/engine)
    from tractkv.model import Commit
    from tractkv.store import MemoryStore

    with MemoryStore() as store:
        ids: list[str] = []
        for i, ps in enumerate(parents):
            ids.append(store.put(Commit(parents=tuple(ids[p] for p in ps), created_at=i + 1)))
        tips = set(range(len(parents))) - {p for ps in parents for p in ps}
        # join every tip into one head so that the walk from it visits the whole DAG
        head = store.put(Commit(parents=tuple(ids[t] for t in sorted(tips)), created_at=len(parents) + 1))
        store.set_ref(MAIN, head)
        rows = Inspector(store).graph_page(MAIN, limit=1000).rows
    assert len(rows) == len(parents) + 1
    for above, below in pairwise(rows):
        # every line leaving a row's bottom edge enters the next row's top edge, and nothing else does
        assert {b for _, b in above.bottom} == {a for a, _ in below.top}
        assert all(b == below.lane for a, b in below.top if a != b)  # only lines into the node bend
    for row in rows:
        parents_of = len(row.info.parent_ids)
        assert len({b for a, b in row.bottom if a == row.lane}) == parents_of  # one line per parent
        assert row.width >= max([row.lane, *(x for s in (*row.top, *row.bottom) for x in s)]) + 1
    assert rows[-1].bottom == ()  # the oldest commit is a root: nothing below it
