"""Tags, cherry-pick and rebase on one store (issue 34 items 1 and 2): the API, its refusals, gc, fsck, reflog,
conflicts and strategies, and two properties (rebase onto its own base is a no-op; cherry-picking every commit
of a branch onto its base compiles to the branch's context)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tractkv import Tract
from tractkv.engine.history import fsck_objects
from tractkv.errors import InvalidInput, InvalidRefName, MergeConflict, RefNotFound, UnknownRevision
from tractkv.ids import ObjectId
from tractkv.model import Tag, decode, encode, object_id
from tractkv.store import MemoryStore, fsck


def _clock() -> Any:
    counter = itertools.count(1_700_000_000_000_000, 1_000)
    return lambda: next(counter)


def tract() -> Tract:
    return Tract(MemoryStore(), clock=_clock())


def texts(t: Tract, rev: str | None = None) -> list[Any]:
    return [(m.role, m.content) for m in t.compile(at=rev).messages]


# --- tags ------------------------------------------------------------------------------------------------------


def test_lightweight_and_annotated_tags_name_a_commit_wherever_a_revision_is() -> None:
    t = tract()
    t.user("one")
    first = t.assistant("two").commit_id
    light = t.tag("v1")
    annotated = t.tag("v2", message="release two")
    t.user("three")
    assert (light.commit, light.tag_id, light.annotated) == (first, None, False)
    assert annotated.commit == first
    assert annotated.annotated
    assert annotated.message == "release two"
    obj = decode(t.store.get_raw(annotated.tag_id) or b"", annotated.tag_id, strict=True)
    assert isinstance(obj, Tag)
    assert (obj.target, obj.name) == (first, "v2")
    assert t.store.get_ref("refs/tags/v1") == first  # lightweight: the commit itself
    assert t.store.get_ref("refs/tags/v2") == annotated.tag_id  # annotated: the tag object
    for rev in ("v1", "v2", "refs/tags/v2", "v2~1", annotated.tag_id, annotated.tag_id[:10]):
        assert t.compile(at=rev).messages == t.compile(at=first if "~" not in rev else "v1~1").messages
    assert t.get_commit("v2").commit_id == first
    assert [i.name for i in t.tags()] == ["v1", "v2"]
    assert [e.operation for e in t.reflog("refs/tags/v2")] == ["tag"]


def test_a_taken_name_is_refused_unless_forced_and_a_moved_tag_keeps_its_reflog() -> None:
    t = tract()
    old = t.user("one").commit_id
    t.tag("v1")
    new = t.user("two").commit_id
    with pytest.raises(InvalidInput, match="exists already"):
        t.tag("v1")
    assert t.tags()[0].commit == old
    assert t.tag("v1", force=True).commit == new
    assert [(e.old, e.new, e.operation) for e in t.reflog("refs/tags/v1")] == [
        (old, new, "tag -f"),
        (None, old, "tag"),
    ]


def test_names_follow_branch_rules_and_a_branch_tag_clash_is_refused_or_ambiguous() -> None:
    t = tract()
    t.user("one")
    for bad in ("", "a..b", "x y", "-x", "v1.lock", "HEAD", "a:b"):
        with pytest.raises(InvalidRefName):
            t.tag(bad)
    with pytest.raises(InvalidInput, match="is a branch"):
        t.tag("main")
    t.tag("release")
    with pytest.raises(InvalidInput, match="is a tag"):
        t.branch("release")
    # A clash made another way (a fetch brings tags): the revision is refused as ambiguous, as git warns.
    t.store.set_ref("refs/heads/release", t.head)
    with pytest.raises(UnknownRevision, match=r"ambiguous.*refs/heads/release or refs/tags/release"):
        t.compile(at="release")
    assert t.compile(at="refs/tags/release").messages == t.compile(at="refs/heads/release").messages
    with pytest.raises(UnknownRevision):
        t.tag("x", "no-such-rev")


def test_delete_tag_and_errors() -> None:
    t = tract()
    t.user("one")
    info = t.tag("v1", message="m")
    assert t.delete_tag("v1") == info
    assert t.tags() == []
    with pytest.raises(RefNotFound):
        t.delete_tag("v1")
    with pytest.raises(UnknownRevision):
        t.compile(at="v1")
    empty = tract()
    with pytest.raises(InvalidInput, match="no commits"):
        empty.tag("v0")


def test_gc_keeps_what_tags_reach_and_fsck_accepts_tag_refs() -> None:
    t = tract()
    t.user("kept by a tag only")
    t.tag("light")
    t.assistant("and by an annotated tag")
    info = t.tag("heavy", message="annotated")
    t.branch("other")
    t.switch("other")
    t.delete_branch("main", force=True)
    t.reset("light~0", mode="hard")
    t.user("elsewhere")
    t.gc(min_age_hours=0)
    assert t.compile(at="heavy").messages[-1].content == "and by an annotated tag"
    assert t.store.get_raw(info.tag_id) is not None
    assert fsck(t.store).ok
    assert fsck_objects(t.store) == ()
    t.delete_tag("heavy")
    t.delete_tag("light")
    t.gc(min_age_hours=0)
    assert t.store.get_raw(info.tag_id) is None  # nothing keeps it now


def test_a_tag_object_is_checked_by_the_receivers_rules() -> None:
    t = tract()
    t.user("one")
    blob = t.get_commit("HEAD").content_id
    assert blob is not None
    bad = Tag(target=blob, name="v1", created_at=1)
    store = MemoryStore()
    from tractkv.errors import RejectedObject
    from tractkv.model import Blob
    from tractkv.sync.receive import receive_objects

    pairs = [(blob, encode(Blob(data=t.message_content("HEAD")))), (object_id(bad), encode(bad))]
    with pytest.raises(RejectedObject, match="target"):
        receive_objects(store, pairs)
    head = t.head
    assert head is not None
    named = Tag(target=head, name="a..b", created_at=1)
    pairs = [*((o, t.store.get_raw(o) or b"") for o in _closure(t)), (object_id(named), encode(named))]
    with pytest.raises(RejectedObject, match="name"):
        receive_objects(store, pairs)
    assert dict(store.iter_refs("refs/")) == {}


def _closure(t: Tract) -> list[Any]:
    from tractkv.sync.negotiate import objects_for

    assert t.head is not None
    return [oid for oid, _ in objects_for(t.store, [t.head], [])]


# --- cherry-pick -------------------------------------------------------------------------------------------------


def tool_turn(t: Tract, call_id: str) -> None:
    t.assistant(tool_calls=[{"id": call_id, "name": "add", "arguments": '{"a": 1, "b": 2}'}])
    t.tool_result(call_id, "add", "3")


def test_cherry_pick_moves_a_tool_turn_whole_and_records_its_original() -> None:
    t = tract()
    t.system("s")
    t.user("q")
    t.branch("side")
    tool_turn(t, "c1")
    t.assistant("it is 3")
    t.switch("main")
    t.user("main's own")
    result = t.cherry_pick("side~1")  # the result: its call comes with it
    assert result.kind == "picked"
    assert len(result.picked) == 2
    roles = [m.role for m in t.compile().messages]
    assert roles == ["system", "user", "user", "assistant", "tool"]
    for original, made in result.picked:
        assert t.get_commit(made).metadata == {"picked_from": original} | (
            t.get_commit(original).metadata or {}
        )
    with pytest.raises(InvalidInput, match="cherry-picked into branch 'main' already"):
        t.cherry_pick("side~2")  # the call: its turn is here already
    entries = t.reflog(limit=1)
    assert entries[0].operation == "cherry-pick"


def test_cherry_pick_of_an_ancestor_or_a_merge_is_refused() -> None:
    t = tract()
    t.user("a")
    t.branch("x")
    t.user("x1")
    t.switch("main")
    t.user("m1")
    t.merge("x", message="m")
    with pytest.raises(InvalidInput, match="already in"):
        t.cherry_pick("x")
    t.branch("y", source="main~1")
    with pytest.raises(InvalidInput, match="merge commit"):
        t.cherry_pick("main")


def edit_of(t: Tract, target: str, text: str) -> Any:
    return t.commit({"type": "dialogue", "role": "user", "text": text}, operation="edit", edit_target=target)


def test_an_edit_both_sides_made_is_a_merge_conflict_settled_by_a_strategy() -> None:
    t = tract()
    q = t.user("question").commit_id
    t.assistant("answer")
    t.branch("side")
    edit_of(t, q, "side's question")
    t.switch("main")
    edit_of(t, q, "main's question")
    before = t.head
    with pytest.raises(MergeConflict, match="content changed on both sides"):
        t.cherry_pick("side")
    assert t.head == before  # nothing written
    ours = t.cherry_pick("side", strategy="ours")
    assert (ours.kind, ours.conflicts_resolved, ours.head) == ("empty", 1, before)
    theirs = t.cherry_pick("side", strategy="theirs")
    assert theirs.kind == "picked"
    assert theirs.conflicts_resolved == 1
    assert texts(t)[0] == ("user", "side's question")


def test_an_edit_of_a_message_the_branch_lacks_is_refused() -> None:
    t = tract()
    t.user("shared")
    t.branch("side")
    only = t.user("only on side").commit_id
    edit_of(t, only, "edited")
    t.switch("main")
    with pytest.raises(InvalidInput, match="not in the context"):
        t.cherry_pick("side")


# --- rebase ---------------------------------------------------------------------------------------------------


def test_rebase_replays_own_commits_edits_and_annotations_mapped_to_their_copies() -> None:
    t = tract()
    t.system("s")
    t.branch("side")
    q = t.user("side q").commit_id
    edit_of(t, q, "side q, edited")
    t.annotate(q, "pinned")
    tool_turn(t, "c9")
    t.switch("main")
    t.user("main moved on")
    t.switch("side")
    expected = texts(t)[1:]
    result = t.rebase("main")
    assert result.kind == "rebased"
    assert len(result.picked) == 5
    assert texts(t) == [("system", "s"), ("user", "main moved on"), *expected]
    pinned = [s for s in t.compile().messages if s.content == "side q, edited"]
    assert pinned
    assert [e.operation for e in t.reflog(limit=2)] == ["rebase", "rebase"]
    assert t.rebase("main").kind == "up-to-date"
    assert fsck(t.store).ok
    assert fsck_objects(t.store) == ()


def test_a_rebase_conflict_writes_nothing_with_auto_and_is_settled_by_ours_or_theirs() -> None:
    t = tract()
    q = t.user("q").commit_id
    t.branch("side")
    edit_of(t, q, "side edit")
    t.user("side more")
    t.switch("main")
    edit_of(t, q, "main edit")
    t.switch("side")
    before = (t.head, t.reflog())
    with pytest.raises(MergeConflict):
        t.rebase("main")
    assert (t.head, t.reflog()) == before
    t.branch("side2", switch=False)
    ours = t.rebase("main", strategy="ours")
    assert texts(t) == [("user", "main edit"), ("user", "side more")]
    assert ours.conflicts_resolved == 1
    assert len(ours.skipped) == 1
    t.switch("side2")
    t.rebase("main", strategy="theirs")
    assert texts(t) == [("user", "side edit"), ("user", "side more")]


def test_rebase_skips_changes_the_new_base_already_has() -> None:
    t = tract()
    t.user("base")
    t.branch("side")
    t.user("side 1")
    t.switch("main")
    t.cherry_pick("side")
    t.switch("side")
    result = t.rebase("main")
    assert texts(t) == [("user", "base"), ("user", "side 1")]
    assert result.picked == ()
    assert len(result.skipped) == 1


def test_rebase_replays_a_text_the_new_base_also_said() -> None:
    """Provenance, not equal content, says a change is there already: "ok" said on both sides is two messages."""
    t = tract()
    t.user("base")
    t.branch("side")
    t.user("ok")
    t.switch("main")
    t.user("ok")
    t.switch("side")
    result = t.rebase("main")
    assert len(result.picked) == 1
    assert texts(t) == [("user", "base"), ("user", "ok"), ("user", "ok")]


# --- properties --------------------------------------------------------------------------------------------------

STEP = st.one_of(
    st.tuples(st.just("user"), st.text(min_size=1, max_size=8)),
    st.tuples(st.just("assistant"), st.text(min_size=1, max_size=8)),
    st.tuples(st.just("edit"), st.integers(0, 50), st.text(min_size=1, max_size=8)),
    st.tuples(st.just("annotate"), st.integers(0, 50), st.sampled_from(["skip", "pinned", "normal"])),
    st.tuples(st.just("tools"), st.integers(1, 3)),
)


def play(t: Tract, steps: list[Any], messages: list[str]) -> None:
    """Apply generated steps on t's branch; ``messages`` are the message commits steps may target."""
    for step in steps:
        kind = step[0]
        if kind in ("user", "assistant"):
            messages.append(getattr(t, kind)(step[1]).commit_id)
        elif kind == "edit" and messages:
            edit_of(t, messages[step[1] % len(messages)], step[2])
        elif kind == "annotate" and messages:
            t.annotate(messages[step[1] % len(messages)], step[2])
        elif kind == "tools":
            tools = [
                {"name": f"t{i}", "description": "d", "parameters": {"type": "object"}}
                for i in range(step[1])
            ]
            t.commit({"type": "dialogue", "role": "user", "text": "tools"}, tools=tools)


@settings(max_examples=40, deadline=None)
@given(base=st.lists(STEP, max_size=6), own=st.lists(STEP, min_size=1, max_size=8))
def test_rebase_onto_its_own_base_is_a_no_op(base: list[Any], own: list[Any]) -> None:
    t = tract()
    messages: list[str] = []
    t.user("root")
    play(t, base, messages)
    t.branch("side")
    play(t, own, messages)
    head, log = t.head, t.reflog()
    result = t.rebase("main")
    assert result.kind == "up-to-date"
    assert (t.head, t.reflog()) == (head, log)


@settings(max_examples=40, deadline=None)
@given(base=st.lists(STEP, max_size=6), own=st.lists(STEP, min_size=1, max_size=8))
def test_cherry_picking_every_commit_onto_the_base_compiles_to_the_branch(
    base: list[Any], own: list[Any]
) -> None:
    t = tract()
    messages: list[str] = []
    t.user("root")
    play(t, base, messages)
    t.branch("side")
    play(t, own, messages)
    side = t.compile()
    commits = [i.commit_id for i in t.log(rev="side")][: len(t.log(rev="side")) - len(t.log(rev="main"))]
    t.branch("copy", source="main")
    for oid in reversed(commits):
        t.cherry_pick(oid)
    copy = t.compile()
    assert copy.messages == side.messages
    assert copy.tools == side.tools
    assert copy.to_openai_params() == side.to_openai_params()


def test_a_tag_objects_encoding_is_pinned() -> None:
    """Golden bytes and id: a tag is {"t": "tag", "v": 1, "ts", "name", "target", "message"?} in canonical CBOR."""
    tag = Tag(target="ab" * 32, name="v1", created_at=1_700_000_000_000_000, message="first release")  # type: ignore[arg-type]
    assert encode(tag).hex() == (
        "a66174637461676176016274731b00060a24181e4000646e616d65627631667461726765745820"
        + "ab" * 32
        + "676d6573736167656d66697273742072656c65617365"
    )
    assert object_id(tag) == "3afd97cb7b6d196edf6b923ba139b3e187ff1a9b929f47b6b45621ee2664e276"
    assert decode(encode(tag), strict=True) == tag
    light = Tag(target="ab" * 32, name="v1", created_at=1)  # type: ignore[arg-type]
    assert (
        object_id(light) == "ff4d3c4a460a89f8265add1d6d9df0e925cc709b6db81f00b75a0f484a1df739"
    )  # no message
    with pytest.raises(AttributeError):
        tag.name = "v2"  # type: ignore[misc]


@settings(max_examples=60, deadline=None)
@given(
    script=st.lists(
        st.tuples(st.sampled_from(["commit", "commit", "commit", "switch", "merge"]), st.integers(0, 2)),
        min_size=1,
        max_size=40,
    ),
    pair=st.tuples(st.integers(0, 2), st.integers(0, 2)),
)
def test_sides_agrees_with_whole_ancestor_sets(script: list[Any], pair: tuple[int, int]) -> None:
    """The bounded walk rebase uses gives git's ``a..b`` and ``b..a`` on histories with forks and merges."""
    from tractkv.engine.history import ancestors
    from tractkv.engine.picking import sides

    t = tract()
    t.user("root")
    names = ["main", "b1", "b2"]
    for name in names[1:]:
        t.branch(name, switch=False)
    for number, (action, which) in enumerate(script):
        if action == "commit":
            t.user(f"m{number}")
        elif action == "switch":
            t.switch(names[which])
        elif names[which] != t.current_branch:
            t.merge(names[which], strategy="theirs")
    a, b = (ObjectId(t.store.get_ref("refs/heads/" + names[i]) or "") for i in pair)
    whole_a, whole_b = ancestors(t.store, a), ancestors(t.store, b)
    event(f"one-sided commits: {min(len(whole_a - whole_b), 6)}+")
    assert sides(t.store, a, b) == (whole_a - whole_b, whole_b - whole_a)
