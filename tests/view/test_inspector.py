"""The viewer's queries agree with the Tract API, page correctly, and never write to the store."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

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
        branches = {b.branch: b for b in Inspector(st).branches()}
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
        found = [(x.ref, x.branch, x.is_remote, x.commit_count) for x in Inspector(st).branches()]
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
        inspector.tool_in_force(inspector.tool_versions("search"))
        inspector.diff(ids["system"], "explore")
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
    # the viewer's rows are the engine's lane layout (tractkv.engine.history.lanes, unit-tested in tests/engine)
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


def test_the_current_branch_is_heads_branch(demo: tuple[Path, dict[str, str]]) -> None:
    path, _ = demo
    with LmdbStore(path) as st:
        inspector = Inspector(st)
        assert [b.branch for b in inspector.branches() if b.is_current] == ["main"]
        assert inspector.current_branch() == MAIN
    with Tract.open(str(path)) as t:
        t.switch("explore")  # what `tractkv switch explore` does: the store's HEAD moves
    with LmdbStore(path) as st:
        assert [b.branch for b in Inspector(st).branches() if b.is_current] == ["explore"]


def test_graph_rows_name_the_branches_at_their_tips(demo: tuple[Path, dict[str, str]]) -> None:
    path, ids = demo
    with LmdbStore(path) as st:
        explore = st.get_ref("refs/heads/explore")
        st.set_ref("refs/remotes/origin/main", ids["edit"])  # a tracking branch behind main
        st.set_ref("refs/heads/also", ids["compress"])
        page = Inspector(st).graph_page(MAIN)
    tips = {r.info.commit_id: r.tips for r in page.rows if r.tips}
    assert page.current == MAIN
    assert tips == {
        ids["compress"]: (MAIN, "refs/heads/also"),  # HEAD's branch first, as `git log --decorate`
        explore: ("refs/heads/explore",),
        ids["edit"]: ("refs/remotes/origin/main",),
    }


def test_a_commit_lists_its_calls_and_the_executions_they_started(demo: tuple[Path, dict[str, str]]) -> None:
    path, ids = demo
    with Tract.open(str(path)) as t:
        (asking,) = t.find_tool_calls("research")
        (result,) = t.find_tool_results("research")
        started = {u.id for u in t.tool_usages(commit=asking.commit_id) if u.parent_id is None}
    with LmdbStore(path) as st:
        inspector = Inspector(st)
        view = inspector.commit(asking.commit_id, MAIN)
        (call,) = view.calls
        assert (call.call.id, call.call.name, call.call.arguments) == (
            "call-1",
            "research",
            {"topic": "LMDB"},
        )
        assert {n.usage.id for n in call.executions} == started
        (root,) = call.executions
        assert [c.usage.tool_name for c in root.children] == ["search", "search", "lookup"]
        assert root.usage.result_commit == result.commit_id
        assert view.usage_ref == MAIN
        # without a branch: HEAD's; the tool result shows the execution it answers
        answered = inspector.commit(result.commit_id)
        assert answered.usage_ref == MAIN
        assert answered.calls == ()
        assert [n.usage.id for n in answered.executions] == [root.usage.id]
        # a branch that does not contain the commit: the commit's own history (no result there yet)
        with Tract.open(str(path)) as t:
            t.branch("early", ids["hostile"], switch=False)
        elsewhere = inspector.commit(asking.commit_id, "refs/heads/early")
        assert elsewhere.usage_ref is None
        assert elsewhere.calls[0].executions == ()
        assert inspector.commit(ids["system"], MAIN).calls == ()


def _oracle_ranges(t: Tract, branch: str, schemas: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Where each version was in force along a branch's first-parent line, from compile itself
    (``Tract.get_commit_tools`` at every commit): (version, first, last, commits, at tip)."""
    chain = [t.get_commit(branch)]
    while chain[-1].parent_ids:
        chain.append(t.get_commit(chain[-1].parent_ids[0]))
    out: list[tuple[Any, ...]] = []
    open_: dict[int, list[Any]] = {}
    for info in reversed(chain):
        tools = t.get_commit_tools(info.commit_id)
        present = {i for i, schema in enumerate(schemas, start=1) if schema in tools}
        for v in [v for v in open_ if v not in present]:
            out.append((v, *open_.pop(v), False))
        for v in present:
            if v in open_:
                open_[v][1:] = [info.commit_id, open_[v][2] + 1]
            else:
                open_[v] = [info.commit_id, info.commit_id, 1]
    out += [(v, *r, True) for v, r in open_.items()]
    return sorted(out)


def test_where_each_tool_version_was_in_force_agrees_with_compile(
    demo: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, ids = demo
    with Tract.open(str(path)) as t:
        t.switch("explore")
        t.set_tools(t.get_commit_tools(ids["system"]) or None)  # back to no tools ...
        t.user("no tools here")
        t.set_tools(t.get_commit_tools(ids["annotate"]))  # ... then version 1 again: a second stretch
        t.user("search v1 again")
        t.switch("main")
    with LmdbStore(path) as st:
        inspector = Inspector(st)
        versions = inspector.tool_versions("search")
        ranges, cut = inspector.tool_in_force(versions)
        assert not cut
        with Tract.open(str(path)) as t:
            for branch in ("main", "explore"):
                expected = _oracle_ranges(t, branch, [v.schema for v in versions])
                found = [
                    (r.version, r.first, r.last, r.commits, r.at_tip)
                    for r in ranges
                    if r.ref == f"refs/heads/{branch}"
                ]
                assert sorted(found) == expected, branch
        main_v2 = [r for r in ranges if r.ref == MAIN and r.version == 2]
        assert [(r.first, r.at_tip) for r in main_v2] == [(ids["merge"], True)]  # in force from the merge
        assert len([r for r in ranges if r.ref == "refs/heads/explore" and r.version == 1]) == 2
        # a long branch: only its newest commits are searched, the first of them compiled
        monkeypatch.setattr("tractkv.view.inspector.FORCE_CHAIN", 3)
        short, cut = Inspector(st).tool_in_force(versions)
        assert cut
        meanwhile = st.get_commit(ids["merge"]).parents[0]
        assert [(r.version, r.first, r.last, r.commits, r.at_tip) for r in short if r.ref == MAIN] == [
            (1, meanwhile, meanwhile, 1, False),
            (2, ids["merge"], ids["compress"], 2, True),
        ]


def test_diff_of_two_revisions_is_the_librarys_diff_plus_tools(demo: tuple[Path, dict[str, str]]) -> None:
    path, ids = demo
    with Tract.open(str(path)) as t:
        expected = t.diff(ids["annotate"], "explore")
        edit = t.diff(ids["question"], ids["edit"])
    with LmdbStore(path) as st:
        before = store_image(st)
        inspector = Inspector(st)
        view = inspector.diff(ids["annotate"][:10], "explore")
        assert view.context == expected
        assert view.a.commit_id == ids["annotate"]
        assert view.b.commit_id == st.get_ref("refs/heads/explore")
        (tool,) = view.tools
        assert (tool.name, tool.change) == ("search", "modified")
        assert ("add", '+    "description": "Search the notes (newest first) for a query.",') in tool.lines
        assert view.same_tools == 2
        assert inspector.diff(ids["question"], ids["edit"]).context == edit
        assert [e.change for e in edit.entries] == ["modified"]
        # from no tools to three; a revision with ~
        added = inspector.diff(ids["system"], "main~1")
        assert {(c.name, c.change) for c in added.tools} == {
            ("research", "added"),
            ("search", "added"),
            ("lookup", "added"),
        }
        assert inspector.diff("main", "main").context.entries == ()
        with pytest.raises(UnknownRevision):
            inspector.diff("nope", "main")
        assert store_image(st) == before
