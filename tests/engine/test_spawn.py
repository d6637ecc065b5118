"""Spawn and collapse (issue 21): child contexts on their own branches, folded back into the parent.

Every case runs on both stores (``open_tract``: memory and LMDB, fsck'd at the end)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tractkv import (
    BranchExists,
    ChildInfo,
    ConcurrentUpdate,
    DetachedHead,
    InvalidInput,
    Message,
    NoLLMConfigured,
    Tract,
)
from tractkv.llm import ScriptedLLM

from .conftest import FakeClock

Factory = Callable[..., Tract]
TOOLS = [{"name": "lookup", "description": "Look a key up.", "input_schema": {"type": "object"}}]


def conversation(t: Tract) -> None:
    """A parent context with an instruction, a tool turn, a skipped message and a later question."""
    t.set_tools(TOOLS)
    t.system("You coordinate.")
    t.user("What is a?")
    t.assistant("", tool_calls=[{"id": "c1", "name": "lookup", "arguments": {"key": "a"}}])
    t.tool_result("c1", "lookup", "1")
    t.assistant("a is 1.")
    noise = t.user("noise")
    t.annotate(noise.commit_id, "skip")
    t.user("And b?")


def where(t: Tract) -> tuple[str | None, str | None, str | None]:
    """The parent's branch, HEAD commit and the store's stored HEAD: spawning must move none of them."""
    return t.current_branch, t.head, t.store.get_ref("HEAD")


def test_snapshot_child_starts_with_the_compiled_messages_on_its_own_history(open_tract: Factory) -> None:
    parent = open_tract()
    conversation(parent)
    before = where(parent)
    expected = parent.compile()

    with parent.spawn("research b") as child:
        assert where(parent) == before
        assert child.current_branch == "main.spawn/research-b"
        got = child.compile()
        assert list(got.messages) == list(expected.messages)
        assert got.token_count < expected.token_count  # the same messages, without the tool definitions
        assert got.tools == ()  # tools=False: the child offers none
        log = child.log()
        assert [c.operation for c in reversed(log)] == ["spawn"] + ["append"] * len(expected.messages)
        assert log[-1].parent_ids == ()  # a history of its own, rooted at the spawn commit
        info = child.parent()
        assert info is not None
        assert (info.branch, info.commit, info.purpose, info.inherit) == (
            "main",
            parent.head,
            "research b",
            "snapshot",
        )
        assert info.spawn_commit == log[-1].commit_id
    assert parent.parent() is None


def test_full_child_continues_the_parents_history(open_tract: Factory) -> None:
    parent = open_tract()
    conversation(parent)
    before = where(parent)
    with parent.spawn("dig", inherit="full") as child:
        assert where(parent) == before
        assert list(child.compile().messages) == list(parent.compile().messages)
        assert child.compile().tools == ()  # the history's tool set is dropped: tools=False
        (spawn,) = child.log(limit=1)
        assert (spawn.operation, spawn.parent_ids) == ("spawn", (parent.head,))
        assert {c.commit_id for c in parent.log()} < {c.commit_id for c in child.log()}
        child.user("child work")
        assert len(child.compile().messages) == len(parent.compile().messages) + 1
    assert parent.compile().messages[-1].content == "And b?"


def test_none_child_starts_empty_and_records_its_parent(open_tract: Factory) -> None:
    parent = open_tract()
    conversation(parent)
    with parent.spawn("fresh start", inherit="none", branch="scratch") as child:
        assert child.current_branch == "scratch"
        assert list(child.compile().messages) == []
        assert [c.operation for c in child.log()] == ["spawn"]
        info = child.parent()
        assert info is not None
        assert (info.branch, info.commit, info.inherit) == ("main", parent.head, "none")


def test_spawn_from_an_empty_branch(open_tract: Factory) -> None:
    parent = open_tract()
    with parent.spawn("first") as child:
        assert list(child.compile().messages) == []
        info = child.parent()
        assert info is not None
        assert (info.branch, info.commit) == ("main", None)
    assert parent.head is None


def test_select_keeps_what_the_predicate_keeps_and_tool_turns_whole(open_tract: Factory) -> None:
    parent = open_tract()
    conversation(parent)
    asked: list[Message] = []

    def keep(message: Message) -> bool:
        asked.append(message)
        return message.role in ("system", "assistant")

    with parent.spawn("only answers", select=keep) as child:
        got = [(m.role, m.content) for m in child.compile().messages]
    assert got == [
        ("system", "You coordinate."),
        ("assistant", ""),  # the tool call...
        ("tool", "1"),  # ...brings its result
        ("assistant", "a is 1."),
    ]
    assert all(m.role != "tool" for m in asked)  # results go with their call: never asked
    assert [m.content for m in asked][-1] == "And b?"

    # a result whose call is left out is left out too
    with parent.spawn("questions", select=lambda m: m.role == "user") as child:
        assert [m.content for m in child.compile().messages] == ["What is a?", "And b?"]
        assert child.compile().repairs == ()


@pytest.mark.parametrize("inherit", ["snapshot", "full", "none"])
def test_tools_true_carries_the_parents_tool_set(open_tract: Factory, inherit: str) -> None:
    parent = open_tract()
    conversation(parent)
    with parent.spawn("with tools", inherit=inherit, tools=True) as child:
        assert child.compile().tools == parent.compile().tools
        assert [t["name"] for t in child.compile().tools] == ["lookup"]
        if inherit != "none":
            assert child.compile().token_count == parent.compile().token_count
        child.user("more")  # later commits keep the tools in force
        assert child.compile().tools == parent.compile().tools


def test_default_branch_names_are_unique_and_derived_from_parent_and_purpose(open_tract: Factory) -> None:
    parent = open_tract()
    parent.user("x")
    names = []
    for _ in range(3):
        with parent.spawn("Look up: the Weather!") as child:
            names.append(child.current_branch)
    assert names == [
        "main.spawn/look-up-the-weather",
        "main.spawn/look-up-the-weather-2",
        "main.spawn/look-up-the-weather-3",
    ]
    with pytest.raises(BranchExists):
        parent.spawn("again", branch="main.spawn/look-up-the-weather")


def test_spawn_refuses_bad_arguments_and_writes_nothing(open_tract: Factory) -> None:
    parent = open_tract()
    parent.user("x")
    refs = dict(parent.store.iter_refs("refs/"))
    for kwargs, words in [
        ({"purpose": ""}, "purpose"),
        ({"purpose": "p", "inherit": "copy"}, "inherit"),
        ({"purpose": "p", "inherit": "full", "select": lambda m: True}, "select"),
        ({"purpose": "p", "select": 3}, "select"),
        ({"purpose": "p", "tools": "yes"}, "tools"),
        ({"purpose": "p", "branch": "bad name"}, "not allowed"),
    ]:
        with pytest.raises(InvalidInput, match=words):
            parent.spawn(**kwargs)  # type: ignore[arg-type]
    assert dict(parent.store.iter_refs("refs/")) == refs


def test_collapse_with_content_links_the_child_and_deletes_its_branch(
    open_tract: Factory, clock: FakeClock
) -> None:
    parent = open_tract()
    conversation(parent)
    child = parent.spawn("research b")
    child.user("b?")
    child.assistant("b is 2.")
    child_head = child.head
    child_context = child.compile().to_dicts()
    before = len(parent.compile().messages)

    info = parent.collapse(child, content="Sub-agent: b is 2.")

    assert (info.operation, info.role, info.content["text"]) == ("append", "user", "Sub-agent: b is 2.")
    assert info.metadata == {"collapse": {"branch": "main.spawn/research-b", "purpose": "research b"}}
    stored = parent.store.get_commit(info.commit_id)
    assert stored.links == {"child": (child_head,)}
    assert len(parent.compile().messages) == before + 1
    assert parent.compile().messages[-1].content == "Sub-agent: b is 2."
    # the child's branch is gone; its handle is detached at the collapsed head and still reads
    assert [b.name for b in parent.list_branches()] == ["main"]
    assert child.is_detached
    assert child.head == child_head
    with pytest.raises(DetachedHead):
        child.user("more")
    child.close()
    # the history stays inspectable through the link
    assert child_head is not None
    assert parent.compile(at=child_head).to_dicts() == child_context
    (listed,) = parent.children()
    assert isinstance(listed, ChildInfo)
    assert (
        listed.purpose,
        listed.state,
        listed.branch,
        listed.head,
        listed.collapsed_by,
        listed.collapsed_via,
    ) == (
        "research b",
        "collapsed",
        None,
        child_head,
        info.commit_id,
        "collapse",
    )
    # gc keeps the collapsed child's history alive (old enough to go, if it were not linked)
    clock.advance(1000)
    parent.gc(min_age_hours=0)
    assert parent.compile(at=child_head).to_dicts() == child_context
    assert [c.operation for c in parent.log(rev=child_head)][-1] == "spawn"


def test_collapse_by_name_after_reopen(open_tract: Factory) -> None:
    parent = open_tract()
    parent.user("q")
    with parent.spawn("side task", inherit="none") as child:
        child.user("work")
        head = child.head
    parent.close()
    again = open_tract()
    assert again.current_branch == "main"  # the spawn never moved the stored HEAD
    (open_child,) = again.children()
    assert (open_child.state, open_child.branch, open_child.head) == ("open", "main.spawn/side-task", head)
    again.collapse("main.spawn/side-task", content="done")
    (collapsed,) = again.children()
    assert (collapsed.state, collapsed.head, collapsed.spawn_commit) == (
        "collapsed",
        head,
        open_child.spawn_commit,
    )


def test_collapse_with_a_summarizer(open_tract: Factory) -> None:
    parent = open_tract()
    conversation(parent)
    summarizer = ScriptedLLM(["b is 2 (from the sub-agent)."])
    parent.configure_llm(None, summarizer=summarizer)
    with parent.spawn("research b", inherit="none") as child:
        child.user("Find b.")
        child.assistant("b is 2.")
        info = parent.collapse(child, instructions="Say what b is.")
    assert info.content["text"] == "b is 2 (from the sub-agent)."
    (request,) = summarizer.calls
    assert request.messages[0].content == "Say what b is."
    assert request.messages[1].content == "user: Find b.\nassistant: b is 2."


def test_collapse_without_a_model_raises_and_writes_nothing(open_tract: Factory) -> None:
    parent = open_tract()
    parent.user("q")
    child = parent.spawn("task")
    child.user("w")
    refs = dict(parent.store.iter_refs("refs/"))
    with pytest.raises(NoLLMConfigured, match="collapse"):
        parent.collapse(child)
    assert dict(parent.store.iter_refs("refs/")) == refs
    assert child.current_branch == "main.spawn/task"
    child.close()


def test_collapse_refuses_what_is_not_a_child_of_this_branch(open_tract: Factory) -> None:
    parent = open_tract()
    parent.user("q")
    parent.branch("plain", switch=False)
    child = parent.spawn("task")
    refs = dict(parent.store.iter_refs("refs/"))
    with pytest.raises(InvalidInput, match="not a child"):
        parent.collapse("plain", content="x")
    with pytest.raises(InvalidInput, match="no branch"):
        parent.collapse("nope", content="x")
    with pytest.raises(InvalidInput, match="not both"):
        parent.collapse(child, content="x", instructions="y")
    with pytest.raises(InvalidInput, match="non-empty"):
        parent.collapse(child, content="  ")
    # a grandchild collapses into its own parent, not into main
    grandchild = child.spawn("deeper")
    with pytest.raises(InvalidInput, match="not a child"):
        parent.collapse(grandchild, content="x")
    # not between a tool call and its result
    parent.assistant("", tool_calls=[{"id": "c9", "name": "lookup", "arguments": {}}])
    refs = dict(parent.store.iter_refs("refs/"))
    with pytest.raises(InvalidInput, match="waiting for results"):
        parent.collapse(child, content="x")
    assert dict(parent.store.iter_refs("refs/")) == refs
    child.collapse(grandchild, content="deep result")
    assert child.compile().messages[-1].content == "deep result"
    assert [c.purpose for c in child.children()] == ["deeper"]
    assert [c.purpose for c in parent.children()] == ["task"]  # grandchildren are the child's
    grandchild.close()
    child.close()


def test_children_lists_open_and_collapsed_children_in_spawn_order(open_tract: Factory) -> None:
    parent = open_tract()
    parent.user("q")
    first = parent.spawn("first", inherit="full")
    second = parent.spawn("second", inherit="none")
    first.user("1")
    parent.collapse(first, content="one")
    parent.branch("side", switch=False)  # a plain branch: no child
    listed = parent.children()
    assert [(c.purpose, c.state, c.inherit) for c in listed] == [
        ("first", "collapsed", "full"),
        ("second", "open", "none"),
    ]
    assert listed[1].to_json()["state"] == "open"
    # another branch made off a child does not hide it nor count twice
    second.branch("second-alt", switch=False)
    assert [c.branch for c in parent.children()] == [None, "main.spawn/second"]
    assert second.children() == []
    # a full child inherits the history that collapsed "first": that child is still main's, not its
    with parent.spawn("third", inherit="full") as third:
        assert third.children() == []
        assert [c.purpose for c in parent.children()] == ["first", "second", "third"]
    first.close()
    second.close()


def test_a_snapshot_keeps_media_parts_stored_once(open_tract: Factory) -> None:
    from .media_files import png

    parent = open_tract()
    parent.user(["look", {"type": "image", "data": png(4, 3), "media_type": "image/png"}])
    parent.assistant("a tiny image")
    objects = parent.store.count_objects()
    with parent.spawn("describe it") as child:
        assert child.compile().to_openai() == parent.compile().to_openai()
        # the spawn commit and two appends: the message blobs and the image are the parent's
        assert parent.store.count_objects() == objects + 3


def test_spawn_onto_the_current_branch_is_refused_even_when_it_is_unborn(open_tract: Factory) -> None:
    empty = open_tract()  # main has no commit yet
    with pytest.raises(InvalidInput, match="current branch 'main'"):
        empty.spawn("self", branch="main")
    assert empty.parent() is None
    assert empty.children() == []
    assert dict(empty.store.iter_refs("refs/")) == {}
    empty.user("x")
    empty.branch("other", switch=False)
    for name in ("main", "other"):  # the current branch, or any existing one
        with pytest.raises(InvalidInput, match=r"main|exists already"):
            empty.spawn("p", branch=name)
    assert [b.name for b in empty.list_branches()] == ["main", "other"]
    assert empty.children() == []


def branch_log(t: Tract, name: str) -> list[str]:
    head = t.store.get_ref(f"refs/heads/{name}")
    return [] if head is None else [c.operation for c in t.log(rev=head)]


def test_a_child_handle_refuses_to_write_after_its_branch_was_collapsed_by_name(open_tract: Factory) -> None:
    parent = open_tract()
    parent.system("s")
    parent.user("hi")
    child = parent.spawn("work")
    child.user("child msg")
    parent.collapse("main.spawn/work", content="result")  # by name: the child's handle is not detached

    with pytest.raises(ConcurrentUpdate, match=r"'main\.spawn/work' was deleted by another handle"):
        child.user("late child write")
    with pytest.raises(ConcurrentUpdate, match="deleted"), child.batch():
        child.user("late, in a batch")
    assert [b.name for b in parent.list_branches()] == ["main"]  # not re-created with a parentless commit
    assert [(c.purpose, c.state, c.branch) for c in parent.children()] == [("work", "collapsed", None)]
    with pytest.raises(InvalidInput, match="no branch"):
        parent.collapse("main.spawn/work", content="again")
    assert [m.content for m in parent.compile().messages] == ["s", "hi", "result"]


@pytest.mark.parametrize("rebase", [False, True])
def test_a_handle_refuses_to_write_on_a_branch_another_handle_deleted(
    open_tract: Factory, rebase: bool
) -> None:
    t = open_tract()
    t.system("s")
    t.user("hi")
    t.branch("b", switch=False)
    fresh = open_tract(branch="b", rebase_appends=rebase)  # never wrote: it saw the branch's tip at open
    other = open_tract(branch="b", rebase_appends=rebase)
    other.user("on b")
    t.delete_branch("b", force=True)
    for handle in (other, fresh):
        with pytest.raises(ConcurrentUpdate, match="'b' was deleted"):
            handle.user("after delete")
    assert "b" not in [x.name for x in t.list_branches()]
    # switching to it again is the explicit way to start the branch anew
    other.switch("b")
    other.user("new start")
    assert branch_log(t, "b") == ["append"]
    # an unborn branch stays writable
    unborn = open_tract(branch="c")
    unborn.user("first")
    assert branch_log(t, "c") == ["append"]


def test_a_rebasing_append_stops_when_the_branch_is_deleted_during_the_write(open_tract: Factory) -> None:
    t = open_tract()
    t.user("hi")
    t.branch("b", switch=False)
    armed: list[Tract] = []

    def clock() -> int:  # called while the append is built: another handle deletes the branch then
        if armed:
            armed.pop().delete_branch("b", force=True)
        return 1_800_000_000_000_000 + len(armed)

    writer = open_tract(branch="b", rebase_appends=True, clock=clock)
    writer.user("before")
    armed.append(t)
    with pytest.raises(ConcurrentUpdate, match="'b' was deleted"):
        writer.user("during")
    assert "b" not in [x.name for x in t.list_branches()]
