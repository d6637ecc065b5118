"""find_tool_results / find_tool_calls / find_tool_turns (seed 002, phase 2): the reference's checklist, the two
scopes (history, the default, and context), ``after=``, edits, compression, merges, and a property pinning the
history scope to an independent statement over ``log``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tractkv import InvalidInput, Tract, UnknownRevision
from tractkv.engine.tools import ToolTurn


def call(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": {}}


def texts(infos: list[Any]) -> list[str]:
    return [i.content["text"] for i in infos]


def agent(t: Tract) -> dict[str, Any]:
    """user, grep (1 call), user, read + grep (2 calls), a final answer: the commits by name."""
    made: dict[str, Any] = {"u1": t.user("find foo")}
    made["c1"] = t.assistant(tool_calls=[call("a", "grep")])
    made["r1"] = t.tool_result("a", "grep", "a.py:1 foo")
    made["u2"] = t.user("and read it")
    made["c2"] = t.assistant(tool_calls=[call("b", "read"), call("c", "grep")])
    made["r2"] = t.tool_result("b", "read", "def foo(): ...")
    made["r3"] = t.tool_result("c", "grep", "b.py:9 foo")
    made["end"] = t.assistant("foo is in a.py and b.py")
    return made


# --- the reference's tests (002, phase 2) ----------------------------------------------------------------------


def test_find_tool_results_all() -> None:
    with Tract.open() as t:
        made = agent(t)
        found = t.find_tool_results()
        assert [i.commit_id for i in found] == [made[k].commit_id for k in ("r1", "r2", "r3")]
        assert texts(found) == ["a.py:1 foo", "def foo(): ...", "b.py:9 foo"]
        assert all(i.role == "tool" for i in found)


def test_find_tool_results_by_name() -> None:
    with Tract.open() as t:
        agent(t)
        assert texts(t.find_tool_results("grep")) == ["a.py:1 foo", "b.py:9 foo"]
        assert texts(t.find_tool_results(name="read")) == ["def foo(): ..."]
        assert t.find_tool_results("nope") == []


@pytest.mark.parametrize("scope", ["history", "context"])
def test_find_tool_results_after(scope: str) -> None:
    with Tract.open() as t:
        made = agent(t)
        assert texts(t.find_tool_results(after=made["u2"].commit_id, scope=scope)) == [
            "def foo(): ...",
            "b.py:9 foo",
        ]
        assert texts(t.find_tool_results(after=made["r2"].commit_id, scope=scope)) == [
            "b.py:9 foo"
        ]  # exclusive
        assert t.find_tool_results(after="HEAD", scope=scope) == []
        assert texts(t.find_tool_results("grep", after=made["u1"].commit_id, scope=scope)) == [
            "a.py:1 foo",
            "b.py:9 foo",
        ]
        assert texts(t.find_tool_results(after="HEAD~4", scope=scope)) == ["def foo(): ...", "b.py:9 foo"]


def test_find_tool_calls_all() -> None:
    with Tract.open() as t:
        made = agent(t)
        assert [i.commit_id for i in t.find_tool_calls()] == [made["c1"].commit_id, made["c2"].commit_id]
        assert [i.commit_id for i in t.find_tool_calls(after=made["c1"].commit_id)] == [made["c2"].commit_id]


def test_find_tool_calls_by_name() -> None:
    with Tract.open() as t:
        made = agent(t)
        assert [i.commit_id for i in t.find_tool_calls("grep")] == [
            made["c1"].commit_id,
            made["c2"].commit_id,
        ]
        assert [i.commit_id for i in t.find_tool_calls("read")] == [made["c2"].commit_id]
        assert t.find_tool_calls("nope") == []


def test_find_tool_turns_groups_correctly() -> None:
    with Tract.open() as t:
        made = agent(t)
        turns = t.find_tool_turns()
        assert [turn.call.commit_id for turn in turns] == [made["c1"].commit_id, made["c2"].commit_id]
        first = turns[0]
        assert isinstance(first, ToolTurn)
        assert first.tool_names == ("grep",)
        assert first.result_ids == (made["r1"].commit_id,)
        assert first.all_ids == (made["c1"].commit_id, made["r1"].commit_id)
        assert first.total_tokens == made["c1"].token_count + made["r1"].token_count > 0


def test_find_tool_turns_multi_tool() -> None:
    with Tract.open() as t:
        made = agent(t)
        turn = t.find_tool_turns()[1]
        assert turn.tool_names == ("read", "grep")
        assert turn.result_ids == (made["r2"].commit_id, made["r3"].commit_id)


def test_find_tool_turns_by_name() -> None:
    with Tract.open() as t:
        made = agent(t)
        assert [turn.call.commit_id for turn in t.find_tool_turns("read")] == [made["c2"].commit_id]
        assert len(t.find_tool_turns("grep")) == 2
        assert t.find_tool_turns(after=made["r1"].commit_id)[0].call.commit_id == made["c2"].commit_id


def test_find_tool_turns_empty() -> None:
    with Tract.open() as t:
        for scope in ("history", "context"):
            assert t.find_tool_turns(scope=scope) == []  # an unborn branch
        t.user("hi")
        t.assistant("hello")
        for scope in ("history", "context"):
            assert t.find_tool_turns(scope=scope) == []
            assert t.find_tool_results(scope=scope) == []
            assert t.find_tool_calls(scope=scope) == []


# --- history versus context (issue 16 item 3) ---------------------------------------------------------------


def test_after_compress_history_still_finds_everything_and_context_nothing() -> None:
    with Tract.open() as t:
        made = agent(t)
        t.compress(content="we found foo in a.py and b.py")
        assert t.find_tool_results(scope="context") == []
        assert t.find_tool_turns(scope="context") == []
        assert [i.commit_id for i in t.find_tool_results()] == [made[k].commit_id for k in ("r1", "r2", "r3")]
        assert len(t.find_tool_turns()) == 2
        assert t.original_of(t.find_tool_results("read")[0].commit_id) == "def foo(): ..."


def test_skipped_results_are_history_not_context() -> None:
    with Tract.open() as t:
        made = agent(t)
        t.annotate(made["r1"].commit_id, "skip")
        assert "a.py:1 foo" not in texts(t.find_tool_results(scope="context"))
        assert texts(t.find_tool_results()) == ["a.py:1 foo", "def foo(): ...", "b.py:9 foo"]


@pytest.mark.parametrize("scope", ["history", "context"])
def test_an_edited_result_is_listed_once_at_its_latest_version_under_its_first_id(scope: str) -> None:
    with Tract.open() as t:
        made = agent(t)
        t.tool_result("a", "grep", "a.py", edit=made["r1"].commit_id)
        edit = t.tool_result("a", "grep", "a.py (1 hit)", edit=made["r1"].commit_id)
        assert edit is not None
        found = t.find_tool_results("grep", scope=scope)
        assert [i.commit_id for i in found] == [made["r1"].commit_id, made["r3"].commit_id]
        assert texts(found) == ["a.py (1 hit)", "b.py:9 foo"]
        assert t.original_of(found[0].commit_id) == "a.py:1 foo"
        assert t.find_tool_turns(scope=scope)[0].result_ids == (made["r1"].commit_id,)
        # an edit made after ``after`` does not bring in a result committed before it
        assert texts(t.find_tool_results("grep", after=made["u2"].commit_id, scope=scope)) == ["b.py:9 foo"]


def test_merged_in_results_count_after_the_first_parent_side() -> None:
    with Tract.open() as t:
        t.user("start")
        t.branch("side")
        side_call = t.assistant(tool_calls=[call("s", "fetch")])
        side_result = t.tool_result("s", "fetch", "page")
        t.switch("main")
        main_call = t.assistant(tool_calls=[call("m", "grep")])
        main_result = t.tool_result("m", "grep", "hit")
        t.merge("side", strategy="ours")
        assert [i.commit_id for i in t.find_tool_results()] == [main_result.commit_id, side_result.commit_id]
        assert [i.commit_id for i in t.find_tool_calls()] == [main_call.commit_id, side_call.commit_id]
        # after= a side commit: what is not reachable from it (the main side), git's side..HEAD
        assert [i.commit_id for i in t.find_tool_results(after=side_result.commit_id)] == [
            main_result.commit_id
        ]
        t.switch("side")  # the side branch's history is its own
        assert [i.commit_id for i in t.find_tool_results()] == [side_result.commit_id]


def test_reused_call_ids_pair_with_the_message_each_result_answers() -> None:
    with Tract.open() as t:  # a scripted model says "call_1" every time
        t.user("go")
        first = t.assistant(tool_calls=[call("call_1", "grep")])
        r1 = t.tool_result("call_1", "grep", "one")
        second = t.assistant(tool_calls=[call("call_1", "grep")])
        r2 = t.tool_result("call_1", "grep", "two")
        t.compress(content="summary")
        turns = t.find_tool_turns()
        assert [(x.call.commit_id, x.result_ids) for x in turns] == [
            (first.commit_id, (r1.commit_id,)),
            (second.commit_id, (r2.commit_id,)),
        ]


def test_queries_work_on_a_detached_head_and_read_its_history() -> None:
    with Tract.open() as t:
        made = agent(t)
        t.checkout(made["r2"].commit_id)
        assert texts(t.find_tool_results()) == ["a.py:1 foo", "def foo(): ..."]
        assert len(t.find_tool_turns(scope="context")) == 2


@pytest.mark.parametrize(
    "query",
    [Tract.find_tool_results, Tract.find_tool_calls, Tract.find_tool_turns],
    ids=["results", "calls", "turns"],
)
def test_bad_scope_and_after_are_refused(query: Callable[..., Any]) -> None:
    with Tract.open() as t:
        agent(t)
        with pytest.raises(InvalidInput, match="scope must be 'history' or 'context'"):
            query(t, scope="all")
        with pytest.raises(UnknownRevision):
            query(t, after="feedbeef")
        t.branch("other")
        elsewhere = t.user("only on other")
        t.switch("main")
        with pytest.raises(InvalidInput, match="not in the history of"):
            query(t, after=elsewhere.commit_id)
    with Tract.open() as t:
        first = t.user("x")
        unborn = Tract(t.store, branch="fresh", owns_store=False)
        assert unborn.find_tool_results() == []
        with pytest.raises(InvalidInput, match="not in the history of"):
            query(unborn, after=first.commit_id)


def test_the_history_walk_reads_no_content_before_after() -> None:
    with Tract.open() as t:
        made = agent(t)
        tail = t.assistant(tool_calls=[call("z", "grep")])
        t.tool_result("z", "grep", "late hit")
        reads: list[str] = []
        store_get = type(t.store).get

        def counting_get(self: Any, oid: Any) -> Any:
            reads.append(oid)
            return store_get(self, oid)

        mp = pytest.MonkeyPatch()
        mp.setattr(type(t.store), "get", counting_get)
        try:
            assert texts(t.find_tool_results(after=made["end"].commit_id)) == ["late hit"]
        finally:
            mp.undo()
        early = {t.get_commit(made[k].commit_id).content_id for k in made}
        assert not early & set(reads)  # contents of commits before ``after`` are never loaded
        assert tail.content_id in reads


# --- property: history scope = an independent statement over log() -------------------------------------------

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.integers(0, 3)),
        st.tuples(st.just("calls"), st.integers(1, 3)),
        st.tuples(st.just("result"), st.integers(0, 5)),
        st.tuples(st.just("edit"), st.integers(0, 20)),
        st.tuples(st.just("skip"), st.integers(0, 20)),
        st.tuples(st.just("compress"), st.integers(0, 1)),
    ),
    max_size=25,
)


def tool_of(call_id: str) -> str:
    return f"tool{int(call_id[-1]) % 2}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_history_scope_matches_the_log(ops: list[tuple[str, int]]) -> None:
    with Tract.open() as t:
        open_calls: list[str] = []
        results: list[str] = []
        for counter, (op, arg) in enumerate(ops):
            if op == "user":
                t.user(f"u{counter}")
                open_calls = []
            elif op == "calls":
                ids = [f"k{counter}_{i}" for i in range(arg)]
                t.assistant(tool_calls=[call(i, tool_of(i)) for i in ids])
                open_calls = ids
            elif op == "result" and open_calls:
                call_id = open_calls.pop(0)
                made = t.tool_result(call_id, tool_of(call_id), f"r{counter}")
                assert made is not None
                results.append(made.commit_id)
            elif op == "edit" and results:
                target = t.get_commit(results[arg % len(results)])
                if target.commit_id in {i.commit_id for i in t.find_tool_results(scope="context")}:
                    call_id = target.content["tool_call_id"]
                    t.tool_result(call_id, tool_of(call_id), f"e{counter}", edit=target.commit_id)
            elif op == "skip" and results:
                target_id = results[arg % len(results)]
                if target_id in {i.commit_id for i in t.find_tool_results(scope="context")}:
                    t.annotate(target_id, "skip")
            elif op == "compress" and t.compile().messages and not t.compile().open_calls:
                with contextlib.suppress(InvalidInput):  # nothing compressible (cut tool turns only)
                    t.compress(content=f"s{counter}")
        # independent statement: every tool-result append in log order, each with its newest edit's text
        log = list(reversed(t.log()))
        appended = [c for c in log if c.operation == "append" and c.role == "tool"]
        newest = {c.edit_target: c.content["text"] for c in log if c.operation == "edit"}
        expected = [(c.commit_id, newest.get(c.commit_id, c.content["text"])) for c in appended]
        assert [(i.commit_id, i.content["text"]) for i in t.find_tool_results()] == expected
        calls_in_log = [
            c.commit_id for c in log if c.role == "assistant" and (c.content or {}).get("tool_calls")
        ]
        assert [i.commit_id for i in t.find_tool_calls()] == calls_in_log
        # the context scope is the part of it compile still sends
        history_ids = [i.commit_id for i in t.find_tool_results()]
        context_ids = [i.commit_id for i in t.find_tool_results(scope="context")]
        assert [c for c in history_ids if c in context_ids] == context_ids
        for turn in t.find_tool_turns():
            made = [c["id"] for c in turn.call.content["tool_calls"]]
            assert all(r.content["tool_call_id"] in made for r in turn.results)
