"""Commit and compile: shorthands, content types, edits, annotations, compiled shapes, HEAD and revisions."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import pytest

from tractkv import (
    ArtifactContent,
    ContentError,
    DetachedHead,
    DialogueContent,
    FreeformContent,
    InstructionContent,
    InvalidInput,
    InvalidRefName,
    ReasoningContent,
    Tract,
    UnknownRevision,
)
from tractkv.engine.content import MESSAGE_OVERHEAD
from tractkv.model import Commit
from tractkv.store import MemoryStore

from .conftest import FakeClock


def dicts(t: Tract, **kwargs: Any) -> list[dict[str, Any]]:
    return t.compile(**kwargs).to_dicts()


def texts(t: Tract, **kwargs: Any) -> list[str]:
    return [m.content for m in t.compile(**kwargs).messages]


def footprint(t: Tract) -> tuple[Any, ...]:
    """What a failed operation must leave unchanged: head, log length, objects, refs."""
    return (t.head, len(t.log()), t.store.count_objects(), dict(t.store.iter_refs()))


# --- shorthands and content types ------------------------------------------------------------------------


def test_shorthands_compile_to_messages(tract: Tract) -> None:
    tract.system("be brief")
    tract.user("what is 2+2?", name="ann")
    tract.assistant("let me check", tool_calls=[{"id": "c1", "name": "calc", "arguments": {"x": "2+2"}}])
    tract.commit({"type": "dialogue", "role": "tool", "text": "4", "tool_call_id": "c1", "name": "calc"})
    tract.assistant("4")
    assert dicts(tract) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "what is 2+2?", "name": "ann"},
        {
            "role": "assistant",
            "content": "let me check",
            "tool_calls": [{"id": "c1", "name": "calc", "arguments": {"x": "2+2"}}],
        },
        {"role": "tool", "content": "4", "name": "calc", "tool_call_id": "c1"},
        {"role": "assistant", "content": "4"},
    ]
    ctx = tract.compile()
    assert ctx.commit_count == 5
    assert ctx.head == tract.head


def test_assistant_tool_calls_with_openai_string_arguments(tract: Tract) -> None:
    tract.assistant("", tool_calls=[{"id": "c1", "name": "f", "arguments": '{"a": 1}'}])
    (message,) = tract.compile().messages
    assert message.tool_calls[0].arguments == {"a": 1}
    assert message.content == ""


CONTENT_CASES: list[tuple[Any, dict[str, Any]]] = [
    ({"type": "instruction", "text": "rules"}, {"role": "system", "content": "rules"}),
    (InstructionContent("rules"), {"role": "system", "content": "rules"}),
    ({"type": "dialogue", "role": "user", "text": "hi"}, {"role": "user", "content": "hi"}),
    (DialogueContent("assistant", "yo", name="bot"), {"role": "assistant", "content": "yo", "name": "bot"}),
    (
        {"type": "artifact", "text": "print(1)", "artifact_type": "code"},
        {"role": "user", "content": "print(1)"},
    ),
    (ArtifactContent("doc", role="assistant"), {"role": "assistant", "content": "doc"}),
    (
        {"type": "freeform", "payload": {"b": [1, 2.5, None], "a": "é"}},
        {"role": "user", "content": '{"a":"é","b":[1,2.5,null]}'},
    ),
    (FreeformContent(payload=[1, "x"], role="assistant"), {"role": "assistant", "content": '[1,"x"]'}),
]


@pytest.mark.parametrize(("content", "expected"), CONTENT_CASES)
def test_every_content_type_compiles(tract: Tract, content: Any, expected: dict[str, Any]) -> None:
    info = tract.commit(content)
    assert dicts(tract) == [expected]
    assert tract.compile().commit_ids == (info.commit_id,)


@pytest.mark.parametrize("content", [{"type": "reasoning", "text": "think"}, ReasoningContent("think")])
def test_reasoning_is_hidden_unless_asked(tract: Tract, content: Any) -> None:
    tract.user("q")
    reasoning = tract.commit(content)
    tract.assistant("a")
    assert texts(tract) == ["q", "a"]
    full = tract.compile(include_reasoning=True)
    assert [m.content for m in full.messages] == ["q", "think", "a"]
    assert full.messages[1].role == "assistant"
    assert full.commit_ids[1] == reasoning.commit_id
    assert full.token_count > tract.compile().token_count
    # asking for reasoning does not leak into the default view afterwards
    assert texts(tract) == ["q", "a"]


MALFORMED: list[Any] = [
    "plain text",
    None,
    {"text": "no type"},
    {"type": "nonsense", "text": "x"},
    {"type": "instruction"},
    {"type": "instruction", "text": 5},
    {"type": "instruction", "text": "x", "extra": 1},
    {"type": "dialogue", "role": "robot", "text": "x"},
    {"type": "dialogue", "role": "user", "text": ""},
    {"type": "dialogue", "role": "user", "text": "x", "tool_calls": [{"id": "a", "name": "f"}]},
    {"type": "dialogue", "role": "assistant", "tool_calls": [{"id": "a"}]},
    {"type": "dialogue", "role": "assistant", "tool_calls": [{"id": "a", "name": "f", "arguments": "{bad"}]},
    {"type": "dialogue", "role": "assistant", "tool_calls": [{"id": "a", "name": "f", "arguments": [1]}]},
    {
        "type": "dialogue",
        "role": "assistant",
        "tool_calls": [{"id": "a", "name": "f"}, {"id": "a", "name": "g"}],
    },
    {"type": "dialogue", "role": "tool", "text": "result without a call id"},
    {"type": "dialogue", "role": "user", "text": "x", "tool_call_id": "c1"},
    {"type": "artifact", "text": "x", "role": "system"},
    {"type": "freeform", "role": "user"},
    {"type": "freeform", "payload": float("nan")},
    {"type": "freeform", "payload": {1: "non-str key"}},
    {"type": "reasoning", "text": None},
    {"type": "annotation", "priority": "pinned"},
    {"type": "merge", "strategy": "ours"},
]


@pytest.mark.parametrize("content", MALFORMED, ids=[repr(c)[:40] for c in MALFORMED])
def test_malformed_content_raises_and_writes_nothing(tract: Tract, content: Any) -> None:
    tract.user("before")
    before = footprint(tract)
    with pytest.raises(ContentError):
        tract.commit(content)
    assert footprint(tract) == before
    assert texts(tract) == ["before"]


def test_malformed_edit_writes_nothing(tract: Tract) -> None:
    original = tract.user("before")
    before = footprint(tract)
    with pytest.raises(ContentError):
        tract.commit({"type": "dialogue", "role": "user"}, operation="edit", edit_target=original.commit_id)
    assert footprint(tract) == before


@pytest.mark.parametrize(
    "kwargs",
    [
        {"operation": "annotate"},
        {"operation": "edit"},
        {"operation": "append", "edit_target": "HEAD"},
    ],
)
def test_bad_operation_arguments_write_nothing(tract: Tract, kwargs: dict[str, Any]) -> None:
    tract.user("before")
    before = footprint(tract)
    with pytest.raises(InvalidInput):
        tract.commit({"type": "dialogue", "role": "user", "text": "x"}, **kwargs)
    assert footprint(tract) == before


# --- edits -------------------------------------------------------------------------------------------------


def test_edit_replaces_in_place_and_log_keeps_both(tract: Tract) -> None:
    tract.system("sys")
    question = tract.user("what is 2+2?")
    tract.assistant("5")
    edit = tract.commit(
        {"type": "dialogue", "role": "user", "text": "what is 2+3?"},
        operation="edit",
        edit_target=question.commit_id,
    )
    ctx = tract.compile()
    assert [m.content for m in ctx.messages] == ["sys", "what is 2+3?", "5"]
    # the message keeps its position and its original commit's hash
    assert ctx.commit_ids[1] == question.commit_id
    assert edit.edit_target == question.commit_id
    log = tract.log()
    assert [c.operation for c in log] == ["edit", "append", "append", "append"]
    assert {c.commit_id for c in log} >= {question.commit_id, edit.commit_id}
    assert tract.get_commit(question.commit_id).content["text"] == "what is 2+2?"
    assert ctx.commit_count == 4


def test_edit_may_change_the_content_type(tract: Tract) -> None:
    message = tract.user("draft")
    tract.commit({"type": "reasoning", "text": "hidden now"}, operation="edit", edit_target=message.commit_id)
    assert texts(tract) == []
    assert texts(tract, include_reasoning=True) == ["hidden now"]
    tract.commit(
        {"type": "instruction", "text": "system now"}, operation="edit", edit_target=message.commit_id
    )
    assert dicts(tract) == [{"role": "system", "content": "system now"}]


def test_edit_of_an_edit_replaces_the_same_message(tract: Tract) -> None:
    first = tract.user("v1")
    tract.assistant("reply")
    second = tract.commit(
        {"type": "dialogue", "role": "user", "text": "v2"}, operation="edit", edit_target=first.commit_id
    )
    third = tract.commit(
        {"type": "dialogue", "role": "user", "text": "v3"}, operation="edit", edit_target=second.commit_id
    )
    ctx = tract.compile()
    assert [m.content for m in ctx.messages] == ["v3", "reply"]
    assert ctx.commit_ids == (first.commit_id, ctx.commit_ids[1])
    # an edit naming an edit is recorded against the message it replaces
    assert third.edit_target == first.commit_id
    # a later edit through the original still wins over earlier ones
    tract.commit(
        {"type": "dialogue", "role": "user", "text": "v4"}, operation="edit", edit_target=first.commit_id
    )
    assert texts(tract) == ["v4", "reply"]
    # and the history compiles the same in a fresh handle
    assert Tract(tract.store, owns_store=False).compile().to_dicts() == tract.compile().to_dicts()


def test_edit_target_not_in_branch_is_an_error(tract: Tract) -> None:
    tract.user("shared")
    tract.branch("side")
    elsewhere = tract.user("only on side")
    tract.switch("main")
    tract.user("on main")
    before = footprint(tract)
    with pytest.raises(InvalidInput, match="not a message"):
        tract.commit(
            {"type": "dialogue", "role": "user", "text": "x"},
            operation="edit",
            edit_target=elsewhere.commit_id,
        )
    with pytest.raises(InvalidInput, match="not a message"):
        tract.annotate(elsewhere.commit_id, "skip")
    assert footprint(tract) == before


def test_edit_target_must_be_a_message(tract: Tract) -> None:
    message = tract.user("x")
    note = tract.annotate(message.commit_id, "pinned")
    before = footprint(tract)
    with pytest.raises(InvalidInput):
        tract.commit(
            {"type": "dialogue", "role": "user", "text": "y"}, operation="edit", edit_target=note.commit_id
        )
    with pytest.raises(UnknownRevision):
        tract.commit(
            {"type": "dialogue", "role": "user", "text": "y"}, operation="edit", edit_target="f" * 64
        )
    assert footprint(tract) == before


# --- annotations -------------------------------------------------------------------------------------------


def test_annotate_skip_normal_pinned(tract: Tract) -> None:
    a = tract.user("a")
    b = tract.assistant("b")
    c = tract.user("c")
    tract.annotate(b.commit_id, "skip", reason="noise")
    ctx = tract.compile()
    assert [m.content for m in ctx.messages] == ["a", "c"]
    assert ctx.commit_ids == (a.commit_id, c.commit_id)
    tract.annotate(b.commit_id, "pinned")
    assert texts(tract) == ["a", "b", "c"]
    tract.annotate(b.commit_id, "skip")
    tract.annotate(b.commit_id, "normal")
    assert texts(tract) == ["a", "b", "c"]
    # a skipped message can still be edited, and stays hidden until un-skipped
    tract.annotate(a.commit_id, "skip")
    tract.commit({"type": "dialogue", "role": "user", "text": "A"}, operation="edit", edit_target=a.commit_id)
    assert texts(tract) == ["b", "c"]
    tract.annotate(a.commit_id, "normal")
    assert texts(tract) == ["A", "b", "c"]
    # annotations are commits but never messages
    assert [x.operation for x in tract.log(op_filter="annotate")] == ["annotate"] * 6
    assert len(tract.compile().messages) == 3


def test_annotate_rejects_bad_priority(tract: Tract) -> None:
    a = tract.user("a")
    before = footprint(tract)
    with pytest.raises(InvalidInput):
        tract.annotate(a.commit_id, "important")
    assert footprint(tract) == before


def test_annotation_through_an_edit_commit(tract: Tract) -> None:
    a = tract.user("a")
    edit = tract.commit(
        {"type": "dialogue", "role": "user", "text": "A"}, operation="edit", edit_target=a.commit_id
    )
    note = tract.annotate(edit.commit_id, "skip")
    assert note.edit_target == a.commit_id
    assert texts(tract) == []


# --- compile at older commits ------------------------------------------------------------------------------


def test_compile_at_older_commit_equals_what_compile_returned_then(
    open_tract: Callable[..., Tract],
) -> None:
    t = open_tract()
    snapshots: list[tuple[str, list[dict[str, Any]], int, int, tuple[str, ...]]] = []

    def snap() -> None:
        ctx = t.compile()
        assert ctx.head is not None
        snapshots.append((ctx.head, ctx.to_dicts(), ctx.token_count, ctx.commit_count, ctx.commit_ids))

    t.system("sys")
    snap()
    q = t.user("q1")
    snap()
    a = t.assistant("a1", generation_config={"temperature": 0.5})
    snap()
    t.commit({"type": "dialogue", "role": "user", "text": "q1'"}, operation="edit", edit_target=q.commit_id)
    snap()
    t.annotate(a.commit_id, "skip")
    snap()
    t.branch("side")
    t.user("side message")
    snap()
    t.switch("main")
    t.user("main message")
    snap()
    t.merge("side", strategy="ours")
    snap()
    t.annotate(a.commit_id, "normal")
    snap()
    for handle in (t, open_tract()):
        for head, messages, tokens, count, hashes in snapshots:
            ctx = handle.compile(at=head)
            assert (ctx.to_dicts(), ctx.token_count, ctx.commit_count, ctx.commit_ids) == (
                messages,
                tokens,
                count,
                hashes,
            )
            assert ctx.head == head


# --- compiled context shapes -------------------------------------------------------------------------------


def test_compiled_context_lists_are_aligned_and_tokens_add_up(tract: Tract) -> None:
    tract.system("You are terse.")
    tract.user("Tell me about LMDB, the memory-mapped key-value store.")
    reply = tract.assistant("It is a B+tree.", generation_config={"model": "m1", "temperature": 0.2})
    tract.user("thanks!")
    ctx = tract.compile()
    assert len(ctx) == len(ctx.messages) == len(ctx.commit_ids) == len(ctx.generation_configs) == 4
    assert ctx.generation_configs[2] == {"model": "m1", "temperature": 0.2}
    assert ctx.generation_configs[0] is None
    assert ctx.commit_ids[2] == reply.commit_id
    counter = tract.token_counter
    assert ctx.token_count == sum(counter.count(m.content) + MESSAGE_OVERHEAD for m in ctx.messages)
    assert ctx.token_count == sum(tract.get_commit(h).token_count for h in ctx.commit_ids)
    assert ctx.token_source == counter.name
    status = tract.status()
    assert (status.message_count, status.token_count, status.commit_count) == (4, ctx.token_count, 4)


def test_token_count_follows_edits_and_skips(tract: Tract) -> None:
    a = tract.user("short")
    tract.user("another message here")
    before = tract.compile().token_count
    tract.commit(
        {"type": "dialogue", "role": "user", "text": "a much, much longer replacement text " * 10},
        operation="edit",
        edit_target=a.commit_id,
    )
    ctx = tract.compile()
    assert ctx.token_count > before
    assert ctx.token_count == sum(
        tract.token_counter.count(m.content) + MESSAGE_OVERHEAD for m in ctx.messages
    )
    tract.annotate(a.commit_id, "skip")
    ctx = tract.compile()
    assert ctx.token_count == tract.token_counter.count("another message here") + MESSAGE_OVERHEAD


def _tool_history(t: Tract) -> None:
    t.system("sys one")
    t.user("weather in Paris and Rome?")
    t.assistant(
        "checking",
        tool_calls=[
            {"id": "c1", "name": "weather", "arguments": {"city": "Paris"}},
            {"id": "c2", "name": "weather", "arguments": {"city": "Rome"}},
        ],
    )
    t.commit({"type": "dialogue", "role": "tool", "text": "sunny", "tool_call_id": "c1", "name": "weather"})
    t.commit(
        {"type": "dialogue", "role": "tool", "text": "boom", "tool_call_id": "c2", "is_error": True},
    )
    t.system("sys two")
    t.assistant("Paris is sunny.")


def test_to_openai_shape(tract: Tract) -> None:
    _tool_history(tract)
    assert tract.compile().to_openai() == [
        {"role": "system", "content": "sys one"},
        {"role": "user", "content": "weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": "checking",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Rome"}'},
                },
            ],
        },
        {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
        {"role": "tool", "content": "boom", "tool_call_id": "c2"},
        {"role": "system", "content": "sys two"},
        {"role": "assistant", "content": "Paris is sunny."},
    ]


def test_to_openai_empty_text_with_tool_calls_is_null_content(tract: Tract) -> None:
    tract.assistant(tool_calls=[{"id": "c1", "name": "f", "arguments": {}}])
    (entry,) = tract.compile().to_openai()
    assert entry["content"] is None
    assert entry["tool_calls"][0]["function"] == {"name": "f", "arguments": "{}"}


def test_to_anthropic_shape(tract: Tract) -> None:
    _tool_history(tract)
    assert tract.compile().to_anthropic() == {
        "system": "sys one",
        "messages": [
            {"role": "user", "content": "weather in Paris and Rome?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "checking"},
                    {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "c2", "name": "weather", "input": {"city": "Rome"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": "sunny"},
                    {"type": "tool_result", "tool_use_id": "c2", "content": "boom", "is_error": True},
                    {"type": "text", "text": "System: sys two"},  # a later system message stays in place
                ],
            },
            {"role": "assistant", "content": "Paris is sunny."},
        ],
    }


def test_to_anthropic_merges_consecutive_turns_of_one_role(tract: Tract) -> None:
    tract.user("one")
    tract.user("two")
    tract.assistant("three")
    rendered = tract.compile().to_anthropic()
    assert rendered == {
        "system": "",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
            {"role": "assistant", "content": "three"},
        ],
    }


def test_to_dicts_returns_fresh_copies(tract: Tract) -> None:
    tract.assistant("x", tool_calls=[{"id": "c1", "name": "f", "arguments": {"k": 1}}])
    first = tract.compile().to_dicts()
    first[0]["content"] = "mutated"
    first[0]["tool_calls"].append("junk")
    assert tract.compile().to_dicts() == [
        {
            "role": "assistant",
            "content": "x",
            "tool_calls": [{"id": "c1", "name": "f", "arguments": {"k": 1}}],
        }
    ]


# --- detached HEAD and branch names ------------------------------------------------------------------------


def test_commits_on_a_detached_checkout_raise(tract: Tract) -> None:
    first = tract.user("one")
    tract.user("two")
    assert tract.checkout(first.commit_id) == first.commit_id
    assert tract.is_detached
    assert tract.current_branch is None
    assert texts(tract) == ["one"]
    before = footprint(tract)
    with pytest.raises(DetachedHead):
        tract.user("nope")
    with pytest.raises(DetachedHead):
        tract.commit({"type": "instruction", "text": "nope"})
    with pytest.raises(DetachedHead):
        tract.annotate(first.commit_id, "skip")
    with pytest.raises(DetachedHead):
        tract.merge("main")
    with pytest.raises(DetachedHead):
        tract.reset(first.commit_id)
    with pytest.raises(DetachedHead):
        tract.reflog()
    assert footprint(tract) == before
    tract.switch("main")
    assert texts(tract) == ["one", "two"]


BAD_NAMES = [
    "",
    "HEAD",
    "has space",
    "tab\there",
    "a..b",
    "a~1",
    "a^2",
    "a:b",
    "a?",
    "a*",
    "a[b",
    "a\\b",
    "a@{1}",
    "a//b",
    "/lead",
    "trail/",
    "dot.",
    "x.lock",
    ".hidden",
    "a/.b",
    "-dash",
    "nul\x00byte",
    "del\x7f",
    "x" * 401,
]


@pytest.mark.parametrize("name", BAD_NAMES, ids=[repr(n)[:20] for n in BAD_NAMES])
def test_invalid_branch_names_are_refused(tract: Tract, name: str) -> None:
    tract.user("x")
    before = footprint(tract)
    with pytest.raises(InvalidRefName):
        tract.branch(name)
    with pytest.raises(InvalidRefName):
        tract.switch(name)
    assert footprint(tract) == before
    assert tract.current_branch == "main"


def test_invalid_branch_name_on_open() -> None:
    with pytest.raises(InvalidRefName):
        Tract.open(branch="a..b")


@pytest.mark.parametrize("name", ["agents/a17/main", "feature-1", "v1.2", "ünï", "a/b/c/d"])
def test_valid_branch_names(tract: Tract, name: str) -> None:
    tract.user("x")
    info = tract.branch(name)
    assert info.name == name
    assert tract.current_branch == name
    tract.user("y")
    assert texts(tract, at=name) == ["x", "y"]


# --- revisions ---------------------------------------------------------------------------------------------


def test_revision_syntax(tract: Tract) -> None:
    a = tract.user("a").commit_id
    b = tract.user("b").commit_id
    c = tract.user("c").commit_id
    tract.branch("side", source=b, switch=False)
    tract.switch("side")
    s = tract.user("s").commit_id
    tract.switch("main")
    merge = tract.merge("side").head
    assert merge is not None
    get = tract.get_commit
    assert get("HEAD").commit_id == merge
    assert get("HEAD^").commit_id == c
    assert get("HEAD^1").commit_id == c
    assert get("HEAD^2").commit_id == s
    assert get("HEAD~1").commit_id == c
    assert get("HEAD~2").commit_id == b
    assert get("HEAD~3").commit_id == a
    assert get("HEAD^2~1").commit_id == b
    assert get("HEAD^^").commit_id == b
    assert get("HEAD~0").commit_id == merge
    assert get("HEAD^0").commit_id == merge
    assert get("side").commit_id == s
    assert get("side~2").commit_id == a
    assert get("main").commit_id == merge
    assert get("refs/heads/side").commit_id == s
    assert get(a).commit_id == a
    assert get(a[:4]).commit_id == a or len({x[:4] for x in (a, b, c, s, merge)}) < 5
    assert get(b[:12]).commit_id == b
    assert get(f"{c[:10]}~1").commit_id == b
    for bad in (
        "HEAD~4",
        "HEAD^3",
        "HEAD~2^2",
        "nosuch",
        "abc",
        "0000000000",
        "f" * 64,
        "",
        "HEAD@{99}",
        "side@{9}",
    ):
        with pytest.raises(UnknownRevision):
            get(bad)


def test_head_of_an_unborn_branch(tract: Tract) -> None:
    assert tract.head is None
    assert tract.compile().messages == ()
    assert tract.log() == []
    with pytest.raises(UnknownRevision, match="no commits"):
        tract.get_commit("HEAD")


def _commit_prefix_cases(t: Tract) -> dict[str, list[str]]:
    """Every 4-digit prefix shared by two or more objects, with the commits among them."""
    by_prefix: dict[str, list[str]] = collections.defaultdict(list)
    for oid in t.store.iter_oids():
        by_prefix[oid[:4]].append(oid)
    return {
        p: [o for o in oids if isinstance(t.store.get(o), Commit)]
        for p, oids in by_prefix.items()
        if len(oids) > 1
    }


def test_ambiguous_prefix_and_prefixes_shared_with_blobs() -> None:
    clock = FakeClock()
    t = Tract(MemoryStore(), clock=clock)
    with t.batch():
        for i in range(3000):
            t.user(f"message {i}")
    cases = _commit_prefix_cases(t)
    ambiguous = [p for p, commits in cases.items() if len(commits) > 1]
    shadowed = [p for p, commits in cases.items() if len(commits) == 1]
    assert ambiguous
    assert shadowed
    for prefix in ambiguous:
        with pytest.raises(UnknownRevision, match="ambiguous"):
            t.get_commit(prefix)
    # a blob sharing a commit's prefix neither hides the commit nor makes it ambiguous
    for prefix in shadowed:
        assert t.get_commit(prefix).commit_id == cases[prefix][0]
    # a prefix of a blob only names no commit
    blob = t.get_commit("HEAD").content_id
    assert blob is not None
    with pytest.raises(UnknownRevision):
        t.get_commit(blob)
    t.close()
