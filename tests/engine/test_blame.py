"""Blame and tool-set diff (issue 34 item 4): each compiled message's origin and the commits that shaped it;
``diff`` reports tools added, removed and given another schema. A property: every compiled message has
exactly one blame origin, the id compile gives it, and each edit / annotation blame lists names it."""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tractkv import Tract
from tractkv.engine.compile import tool_changes
from tractkv.errors import TractError
from tractkv.store import MemoryStore

WEATHER = {
    "name": "get_weather",
    "description": "weather",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
CLOCK = {"name": "clock", "description": "time", "input_schema": {"type": "object"}}


def test_blame_names_origin_edits_annotations_and_summaries(tract: Tract) -> None:
    system = tract.system("be brief")
    question = tract.user("q1")
    edit1 = tract.commit({"type": "dialogue", "role": "user", "text": "q2"}, "edit", question.commit_id)
    edit2 = tract.commit({"type": "dialogue", "role": "user", "text": "q3"}, "edit", edit1.commit_id)
    pin = tract.annotate(question.commit_id, "pinned", reason="keep")
    answer = tract.assistant("a1")
    entries = tract.blame()
    assert [e.commit_id for e in entries] == [system.commit_id, question.commit_id, answer.commit_id]
    assert [e.index for e in entries] == [0, 1, 2]
    q = entries[1]
    assert q.shown == edit2.commit_id
    assert q.edits == (edit1.commit_id, edit2.commit_id)  # an edit of an edit counts for the message
    assert q.annotations == (pin.commit_id,)
    assert (q.role, q.operation, q.placeholder) == ("user", "append", False)
    assert entries[2].shown == answer.commit_id
    assert entries[2].edits == ()
    summary = tract.compress(content="short", from_commit=answer.commit_id)
    last = tract.blame()[-1]
    assert last.commit_id == summary.commit_id
    assert last.operation == "compress"
    assert last.compressed == (answer.commit_id,)
    # at an older revision: the context then
    assert [e.commit_id for e in tract.blame(pin.commit_id)] == [system.commit_id, question.commit_id]


def test_blame_of_a_placeholder_result(tract: Tract) -> None:
    call = tract.assistant(tool_calls=[{"id": "c1", "name": "f", "arguments": {}}])
    tract.user("moving on")  # the call is never answered: compile puts a placeholder result after it
    entries = tract.blame()
    assert [(e.commit_id, e.role, e.placeholder) for e in entries[:2]] == [
        (call.commit_id, "assistant", False),
        (call.commit_id, "tool", True),
    ]


def test_blame_of_an_empty_branch(tract: Tract) -> None:
    assert tract.blame() == []


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.integers(0, 3)),
        st.tuples(st.just("assistant"), st.integers(0, 3)),
        st.tuples(st.just("edit"), st.integers(0, 30)),
        st.tuples(st.just("annotate"), st.integers(0, 30)),
        st.tuples(st.just("compress"), st.integers(0, 30)),
        st.tuples(st.just("call"), st.integers(0, 1)),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS)
def test_every_compiled_message_has_exactly_one_origin(ops: list[tuple[str, int]]) -> None:
    t = Tract(MemoryStore(), owns_store=True)
    calls = 0
    for kind, n in ops:
        messages = t.compile().commit_ids if t.head is not None else []
        if kind in ("user", "assistant"):
            getattr(t, kind)(f"{kind} {n}")
        elif kind == "call":
            calls += 1
            t.assistant(tool_calls=[{"id": f"c{calls}", "name": "f", "arguments": {}}])
            if n:
                t.tool_result(f"c{calls}", None, "done")
        elif messages:
            target = messages[n % len(messages)]
            info = t.get_commit(target)
            if kind == "edit" and info.role in ("user", "assistant") and info.operation == "append":
                t.commit({"type": "dialogue", "role": info.role, "text": f"edited {n}"}, "edit", target)
            elif kind == "annotate":
                t.annotate(target, "normal", reason=f"r{n}")
            elif kind == "compress" and info.role in ("user", "assistant"):
                with suppress(TractError):  # a range compress may refuse (a cut tool turn): not tested here
                    t.compress(content="summary", from_commit=target, to_commit=target)
    if t.head is None:
        return
    ctx = t.compile()
    entries = t.blame()
    assert len(entries) == len(ctx.messages)
    assert [e.commit_id for e in entries] == list(ctx.commit_ids)
    assert [e.role for e in entries] == [m.role for m in ctx.messages]
    history = {info.commit_id: info for info in t.log()}
    for entry, message in zip(entries, ctx.messages, strict=True):
        assert entry.commit_id in history
        assert sum(1 for e in entries if e.commit_id == entry.commit_id and not e.placeholder) == 1
        for edit in entry.edits:
            assert history[edit].operation == "edit"
        for note in entry.annotations:
            assert history[note].operation == "annotate"
            assert _message_of(history, history[note].edit_target) == entry.commit_id
        if not entry.placeholder:
            shown = history[entry.shown]
            assert shown.commit_id == (entry.edits[-1] if entry.edits else entry.commit_id)
            if shown.role == message.role and isinstance(shown.content, dict) and "text" in shown.content:
                assert shown.content["text"] == message.content


def _message_of(history: dict[str, Any], oid: str | None) -> str | None:
    while oid is not None and history[oid].operation == "edit":
        oid = history[oid].edit_target
    return oid


# --- tool-set diff ------------------------------------------------------------------------------------------


def test_diff_reports_tools_added_removed_and_changed(tract: Tract) -> None:
    tract.set_tools([WEATHER])
    a = tract.user("one")
    changed = {**WEATHER, "description": "the weather in a city"}
    tract.set_tools([changed, CLOCK])
    tract.user("two")
    diff = tract.diff(a.commit_id)
    assert [(c.change, c.name) for c in diff.tools] == [("changed", "get_weather"), ("added", "clock")]
    assert diff.tools[0].changed_keys == ("description",)
    assert diff.tools[0].before == WEATHER
    assert diff.tools[0].after == changed
    back = tract.diff("HEAD", a.commit_id)
    assert [(c.change, c.name) for c in back.tools] == [("changed", "get_weather"), ("removed", "clock")]
    assert not tract.diff("HEAD", "HEAD").tools
    assert tract.diff("HEAD", "HEAD").is_empty


def test_a_tool_diff_alone_is_a_difference(tract: Tract) -> None:
    one = tract.user("one")
    # an edit to the same text that brings a tool set: no message changes, the tools do
    tract.commit({"type": "dialogue", "role": "user", "text": "one"}, "edit", one.commit_id, tools=[WEATHER])
    diff = tract.diff("HEAD~1")
    assert not diff.entries
    assert not diff.is_empty
    assert [(c.change, c.name) for c in diff.tools] == [("added", "get_weather")]


def test_tool_changes_ignore_key_order_and_tool_order() -> None:
    reordered = {"input_schema": WEATHER["input_schema"], "description": "weather", "name": "get_weather"}
    assert tool_changes([WEATHER, CLOCK], [CLOCK, reordered]) == ()
    assert [c.change for c in tool_changes([], [WEATHER])] == ["added"]
    assert [c.change for c in tool_changes([WEATHER], [])] == ["removed"]
