"""Branches and merges: branch bookkeeping, fast-forward, three-way merge order, conflicts and strategies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tractkv import (
    BranchExists,
    BranchNotFound,
    InvalidInput,
    MergeConflict,
    Tract,
)

TOOL_A = {"name": "search", "description": "web search", "input_schema": {"type": "object", "properties": {}}}
TOOL_B = {
    "type": "function",
    "function": {"name": "calc", "parameters": {"type": "object", "properties": {}}},
}
TOOL_C = {"name": "search", "description": "v2", "input_schema": {"type": "object", "properties": {}}}


def texts(t: Tract, at: str | None = None) -> list[str]:
    return [m.content for m in t.compile(at=at).messages]


def footprint(t: Tract) -> tuple[Any, ...]:
    return (t.head, len(t.log()), t.store.count_objects(), dict(t.store.iter_refs()), len(t.reflog()))


def edit(t: Tract, target: str, text: str, role: str = "user") -> str:
    return t.commit(
        {"type": "dialogue", "role": role, "text": text}, operation="edit", edit_target=target
    ).commit_id


# --- branch bookkeeping ------------------------------------------------------------------------------------


def test_branch_switch_and_list(tract: Tract) -> None:
    root = tract.user("root").commit_id
    info = tract.branch("feature")
    assert (info.name, info.head, info.is_current) == ("feature", root, True)
    assert tract.current_branch == "feature"
    tract.user("on feature")
    stay = tract.branch("later", switch=False)
    assert not stay.is_current
    assert tract.current_branch == "feature"
    branches = tract.list_branches()
    assert [(b.name, b.is_current) for b in branches] == [
        ("feature", True),
        ("later", False),
        ("main", False),
    ]
    assert {b.name: b.head for b in branches}["main"] == root
    assert tract.switch("main").head == root
    assert texts(tract) == ["root"]
    assert texts(tract, at="feature") == ["root", "on feature"]
    tract.branch("from-rev", source="feature~1", switch=False)
    assert tract.get_commit("from-rev").commit_id == root


def test_branch_errors(tract: Tract) -> None:
    with pytest.raises(InvalidInput, match="no commits"):
        tract.branch("early")
    tract.user("x")
    tract.branch("dup", switch=False)
    with pytest.raises(BranchExists):
        tract.branch("dup")
    with pytest.raises(BranchNotFound):
        tract.switch("nosuch")
    with pytest.raises(BranchNotFound):
        tract.delete_branch("nosuch")
    assert tract.current_branch == "main"


def test_unborn_current_branch_is_listed(open_tract: Callable[..., Tract]) -> None:
    t = open_tract(branch="fresh")
    assert [(b.name, b.head, b.is_current) for b in t.list_branches()] == [("fresh", None, True)]
    t.user("first")
    assert [b.name for b in t.list_branches()] == ["fresh"]


def test_delete_branch(tract: Tract) -> None:
    tract.user("root")
    tract.branch("merged")
    tract.switch("main")
    tract.branch("unmerged")
    tip = tract.user("only here").commit_id
    with pytest.raises(InvalidInput, match="current"):
        tract.delete_branch("unmerged")
    tract.switch("main")
    before = footprint(tract)
    with pytest.raises(InvalidInput, match="force"):
        tract.delete_branch("unmerged")
    assert footprint(tract) == before
    tract.delete_branch("merged")  # its commits are on main
    assert tract.delete_branch("unmerged", force=True) == tip
    assert [b.name for b in tract.list_branches()] == ["main"]
    # the reflog keeps the deleted tip: the branch can be recreated from it
    (last, *_) = tract.reflog("unmerged")
    assert (last.old, last.new, last.operation) == (tip, None, "delete")
    tract.branch("unmerged", source=tip, switch=False)
    assert texts(tract, at="unmerged") == ["root", "only here"]


def test_delete_branch_merged_elsewhere(tract: Tract) -> None:
    tract.user("root")
    tract.branch("side")
    tract.user("side work")
    tract.switch("main")
    tract.branch("integration")
    tract.merge("side")
    tract.switch("main")
    tract.delete_branch("side")  # reachable from integration, though not from main
    assert {b.name for b in tract.list_branches()} == {"integration", "main"}


# --- fast-forward and up-to-date ---------------------------------------------------------------------------


def test_fast_forward(tract: Tract) -> None:
    tract.user("root")
    tract.branch("feature")
    tract.user("f1")
    tip = tract.assistant("f2").commit_id
    tract.switch("main")
    objects = tract.store.count_objects()
    result = tract.merge("feature")
    assert (result.kind, result.head) == ("fast-forward", tip)
    assert result.commit is not None
    assert result.commit.commit_id == tip
    assert tract.head == tip
    assert tract.store.count_objects() == objects  # no merge commit
    assert texts(tract) == ["root", "f1", "f2"]
    assert tract.reflog()[0].operation == "merge"
    # continuing on main after a fast-forward extends the same history
    tract.user("after")
    assert tract.get_commit("HEAD~1").commit_id == tip


def test_fast_forward_into_unborn_branch(open_tract: Callable[..., Tract]) -> None:
    t = open_tract()
    t.user("root")
    t.branch("feature")
    t.user("f")
    other = open_tract(branch="empty")
    result = other.merge("feature")
    assert result.kind == "fast-forward"
    assert texts(other) == ["root", "f"]


def test_up_to_date(tract: Tract) -> None:
    tract.user("root")
    tract.branch("old")
    tract.switch("main")
    tract.user("newer")
    before = footprint(tract)
    result = tract.merge("old")
    assert (result.kind, result.head, result.commit) == ("up-to-date", tract.head, None)
    assert tract.merge("HEAD~1").kind == "up-to-date"
    assert tract.merge("main").kind == "up-to-date"
    assert footprint(tract) == before


def test_merge_rejects_bad_strategy(tract: Tract) -> None:
    tract.user("x")
    with pytest.raises(InvalidInput):
        tract.merge("main", strategy="recursive")


# --- three-way merge -----------------------------------------------------------------------------------


def _diverged(t: Tract) -> dict[str, str]:
    ids = {}
    ids["sys"] = t.system("sys").commit_id
    ids["q"] = t.user("question").commit_id
    t.branch("theirs")
    ids["t1"] = t.assistant("their answer").commit_id
    ids["t2"] = t.user("their follow-up").commit_id
    t.switch("main")
    ids["o1"] = t.assistant("our answer").commit_id
    ids["o2"] = t.user("our follow-up").commit_id
    return ids


def test_merge_commit_order_ours_then_theirs(tract: Tract) -> None:
    ids = _diverged(tract)
    result = tract.merge("theirs")
    assert result.kind == "merge"
    assert result.conflicts_resolved == 0
    assert result.commit is not None
    merge = tract.get_commit("HEAD")
    assert merge.parent_ids == (ids["o2"], ids["t2"])
    assert merge.operation == "merge"
    assert merge.token_count == 0
    assert merge.role is None
    ctx = tract.compile()
    assert [m.content for m in ctx.messages] == [
        "sys",
        "question",
        "our answer",
        "our follow-up",
        "their answer",
        "their follow-up",
    ]
    assert ctx.commit_ids == tuple(ids[k] for k in ("sys", "q", "o1", "o2", "t1", "t2"))
    assert ctx.commit_count == 7  # 6 messages + the merge commit
    # the merge blob is bookkeeping and never becomes a message, whatever is asked
    assert len(tract.compile(include_reasoning=True).messages) == 6
    assert all(m.role in ("system", "user", "assistant") for m in ctx.messages)
    # merging from the other side puts theirs (now main's) messages second
    tract.switch("theirs")
    tract.merge("main~1")
    assert texts(tract) == [
        "sys",
        "question",
        "their answer",
        "their follow-up",
        "our answer",
        "our follow-up",
    ]


def test_merge_takes_one_sided_changes(tract: Tract) -> None:
    ids = _diverged(tract)
    tract.switch("theirs")
    edit(tract, ids["q"], "question (theirs)")
    tract.annotate(ids["sys"], "skip")
    tract.switch("main")
    tract.annotate(ids["o1"], "pinned")
    edit(tract, ids["o1"], "our answer, fixed", role="assistant")
    result = tract.merge("theirs")
    assert result.conflicts_resolved == 0
    assert texts(tract) == [
        "question (theirs)",
        "our answer, fixed",
        "our follow-up",
        "their answer",
        "their follow-up",
    ]


def test_same_change_on_both_sides_is_not_a_conflict(tract: Tract) -> None:
    ids = _diverged(tract)
    edit(tract, ids["q"], "same fix")
    tract.annotate(ids["sys"], "pinned")
    tract.switch("theirs")
    edit(tract, ids["q"], "same fix")
    tract.annotate(ids["sys"], "pinned")
    tract.switch("main")
    assert tract.merge("theirs").conflicts_resolved == 0
    assert texts(tract)[:2] == ["sys", "same fix"]


def _conflicted(t: Tract) -> dict[str, str]:
    """Both sides change the question's content, the system message (skip vs edit) and the tool set."""
    ids = _diverged(t)
    t.switch("theirs")
    edit(t, ids["q"], "question (theirs)")
    edit(t, ids["sys"], "sys (theirs)")
    t.commit({"type": "dialogue", "role": "user", "text": "tools (theirs)"}, tools=[TOOL_B])
    t.switch("main")
    edit(t, ids["q"], "question (ours)")
    t.annotate(ids["sys"], "skip")
    t.commit({"type": "dialogue", "role": "user", "text": "tools (ours)"}, tools=[TOOL_A])
    return ids


def test_conflicts_are_listed_and_nothing_is_written(tract: Tract) -> None:
    ids = _conflicted(tract)
    before = footprint(tract)
    compiled = tract.compile().to_dicts()
    with pytest.raises(MergeConflict) as caught:
        tract.merge("theirs")
    conflicts = caught.value.conflicts
    found = {(c.target, c.kind) for c in conflicts}
    assert found == {(ids["q"], "content"), (ids["sys"], "content+priority"), (None, "tools")}
    assert len(conflicts) == 3
    message = str(caught.value)
    assert "3 merge conflict(s)" in message
    assert "tool set" in message
    assert ids["q"][:12] in message
    assert footprint(tract) == before
    assert tract.compile().to_dicts() == compiled


def test_priority_conflict(tract: Tract) -> None:
    ids = _diverged(tract)
    tract.annotate(ids["q"], "skip")
    tract.switch("theirs")
    tract.annotate(ids["q"], "pinned")
    tract.switch("main")
    with pytest.raises(MergeConflict) as caught:
        tract.merge("theirs")
    assert [(c.target, c.kind) for c in caught.value.conflicts] == [(ids["q"], "priority")]
    tract.merge("theirs", strategy="theirs")
    assert "question" in texts(tract)


@pytest.mark.parametrize("strategy", ["ours", "theirs"])
def test_strategy_resolves_conflicts(open_tract: Callable[..., Tract], strategy: str) -> None:
    t = open_tract()
    _conflicted(t)
    result = t.merge("theirs", strategy=strategy)
    assert (result.kind, result.conflicts_resolved, result.strategy) == ("merge", 3, strategy)
    ctx = t.compile()
    if strategy == "ours":
        expected = ["question (ours)", "our answer", "our follow-up", "tools (ours)"]
        tools = [TOOL_A]
    else:
        expected = ["sys (theirs)", "question (theirs)", "our answer", "our follow-up", "tools (ours)"]
        tools = [TOOL_B]
    expected += ["their answer", "their follow-up", "tools (theirs)"]
    assert [m.content for m in ctx.messages] == expected
    assert list(ctx.tools) == tools
    # the recorded strategy makes every other handle compile the merge the same way
    fresh = open_tract()
    assert fresh.compile().to_dicts() == ctx.to_dicts()
    assert list(fresh.compile().tools) == tools
    # a commit after the merge keeps the merged tool set
    t.user("after")
    assert list(t.compile().tools) == tools


def test_tools_changed_on_one_side_merge_cleanly(tract: Tract) -> None:
    tract.commit({"type": "dialogue", "role": "user", "text": "start"}, tools=[TOOL_A])
    tract.branch("upgrade")
    tract.commit({"type": "dialogue", "role": "user", "text": "new tools"}, tools=[TOOL_C, TOOL_B])
    tract.switch("main")
    tract.user("meanwhile")
    assert tract.compile().tools == (TOOL_A,)
    assert tract.merge("upgrade").conflicts_resolved == 0
    assert tract.compile().tools == (TOOL_C, TOOL_B)
    assert texts(tract) == ["start", "meanwhile", "new tools"]


def test_merge_bookkeeping_never_appears(tract: Tract) -> None:
    _conflicted(tract)
    tract.merge("theirs", strategy="theirs")
    merge = tract.get_commit("HEAD")
    assert merge.content_type == "merge"
    assert merge.content == {"type": "merge", "strategy": "theirs", "source": "theirs", "conflicts": 3}
    rendered = repr(tract.compile(include_reasoning=True).to_dicts())
    assert "strategy" not in rendered
    assert "Merge theirs" not in rendered


def test_repeated_merges_add_only_new_messages(tract: Tract) -> None:
    ids = _diverged(tract)
    tract.merge("theirs")
    tract.user("ours after merge")
    tract.switch("theirs")
    tract.user("theirs after merge")
    edit(tract, ids["t1"], "their answer, revised", role="assistant")
    tract.switch("main")
    tract.merge("theirs")
    assert texts(tract) == [
        "sys",
        "question",
        "our answer",
        "our follow-up",
        "their answer, revised",
        "their follow-up",
        "ours after merge",
        "theirs after merge",
    ]
    # merging main back into theirs: theirs' order first, nothing duplicated
    tract.switch("theirs")
    result = tract.merge("main")
    assert result.kind == "fast-forward"
    assert len(texts(tract)) == 8


def test_criss_cross_merges_compile_alike_everywhere(open_tract: Callable[..., Tract]) -> None:
    t = open_tract()
    ids = _diverged(t)
    main_tip = t.head
    t.switch("theirs")
    their_tip = t.head
    assert main_tip is not None
    assert their_tip is not None
    t.merge(main_tip)
    t.switch("main")
    t.merge(their_tip)
    edit(t, ids["q"], "main's question")
    t.switch("theirs")
    t.user("more theirs")
    t.switch("main")
    t.merge("theirs")
    expected = t.compile().to_dicts()
    assert [d["content"] for d in expected].count("their answer") == 1
    assert "main's question" in [d["content"] for d in expected]
    assert open_tract().compile().to_dicts() == expected


def test_merge_of_unrelated_histories(open_tract: Callable[..., Tract]) -> None:
    t = open_tract()
    t.user("main root")
    other = open_tract(branch="island")
    other.user("island root")
    result = t.merge("island")
    assert result.kind == "merge"
    assert texts(t) == ["main root", "island root"]


def test_merge_compiles_identically_after_reopen(open_tract: Callable[..., Tract]) -> None:
    t = open_tract()
    ids = _conflicted(t)
    t.merge("theirs", strategy="theirs")
    at_merge = t.compile()
    t.annotate(ids["o1"], "skip")
    expected = t.compile()
    t.close()
    fresh = open_tract()
    again = fresh.compile()
    assert again.to_dicts() == expected.to_dicts()
    assert again.commit_ids == expected.commit_ids
    assert (again.token_count, again.commit_count, again.tools) == (
        expected.token_count,
        expected.commit_count,
        expected.tools,
    )
    assert fresh.compile(at="HEAD~1").to_dicts() == at_merge.to_dicts()
    assert fresh.compile(at="HEAD~1").commit_count == at_merge.commit_count
