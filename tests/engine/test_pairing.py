"""The tool-pairing pass (engine/pairing.py): each rule, the trailing tool run, alignment of what compile returns,
rebuilds against incremental appends, strict mode, and the users of a view (compress, tool turns, status)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tractkv import CompiledContext, InvalidInput, Repair, ToolPairingError, Tract
from tractkv.cli import cli
from tractkv.engine.compile import placeholder_tokens
from tractkv.engine.compile.pairing import DROPPED_RESULT, PLACEHOLDER_RESULT, PLACEHOLDER_TEXT, Pairing
from tractkv.engine.content import DEFAULT_COUNTER, Message, ToolCall
from tractkv.ids import ObjectId

A = ObjectId("a" * 64)
B = ObjectId("b" * 64)
C = ObjectId("c" * 64)


def call(*ids: str) -> Message:
    return Message(role="assistant", content="", tool_calls=tuple(ToolCall(id=i, name="f") for i in ids))


def result(call_id: str) -> Message:
    return Message(role="tool", content=f"r-{call_id}", tool_call_id=call_id)


def calls(*ids: str) -> list[dict[str, Any]]:
    return [{"id": i, "name": "f", "arguments": {}} for i in ids]


def late_result(t: Tract, call_id: str, text: str) -> Any:
    """A result committed as a raw tool message after its call was closed (t.tool_result refuses that; such
    history arrives by merges, edits, skips and raw commits, and compile repairs it)."""
    return t.commit({"type": "dialogue", "role": "tool", "tool_call_id": call_id, "text": text})


def shape(ctx: CompiledContext) -> list[tuple[str, str | None, bool]]:
    """(role, tool_call_id, is_error) of each message: enough to see pairing."""
    return [(m.role, m.tool_call_id, m.is_error) for m in ctx.messages]


# --- the pass itself ----------------------------------------------------------------------------------------


def test_a_result_answering_an_open_call_is_kept_and_closes_it() -> None:
    p = Pairing()
    assert p.step(call("x", "y"), A) == ()
    assert p.step(result("y"), B) == ()  # any order within the turn
    assert list(p.open) == ["x"]
    assert p.step(result("x"), C) == ()
    assert not p.open
    assert not p.repairs
    assert p.step(Message(role="user", content="next"), C) == ()
    assert not p.repairs


def test_orphans_are_dropped_with_a_repair_each() -> None:
    p = Pairing()
    assert p.step(result("nobody"), A) is None  # no call at all
    p.step(call("x"), A)
    assert p.step(result("other"), B) is None  # not a call of the latest message
    assert p.step(result("x"), B) == ()
    assert p.step(result("x"), C) is None  # answered already
    assert [(r.kind, r.commit_id, r.call_id) for r in p.repairs] == [
        (DROPPED_RESULT, A, "nobody"),
        (DROPPED_RESULT, B, "other"),
        (DROPPED_RESULT, C, "x"),
    ]
    assert "already answered" in p.repairs[-1].detail


@pytest.mark.parametrize("role", ["user", "assistant", "system"])
def test_a_non_tool_message_gets_placeholders_for_open_calls_first(role: str) -> None:
    p = Pairing()
    p.step(call("x", "y", "z"), A)
    p.step(result("y"), B)
    before = p.step(Message(role=role, content="hi"), C)
    assert before is not None
    assert [(m.role, m.tool_call_id, m.is_error, m.content, c) for m, c in before] == [
        ("tool", "x", True, PLACEHOLDER_TEXT, A),
        ("tool", "z", True, PLACEHOLDER_TEXT, A),
    ]
    assert [(r.kind, r.commit_id, r.call_id) for r in p.repairs] == [
        (PLACEHOLDER_RESULT, A, "x"),
        (PLACEHOLDER_RESULT, A, "z"),
    ]
    assert not p.open
    assert p.step(result("z"), C) is None  # its call is closed: a late result is an orphan


def test_a_new_call_message_closes_the_previous_one_and_opens_its_own() -> None:
    p = Pairing()
    p.step(call("x"), A)
    before = p.step(call("y"), B)
    assert before is not None
    assert [(m.tool_call_id, c) for m, c in before] == [("x", A)]
    assert list(p.open) == ["y"]
    assert p.call_commit == B
    assert p.step(result("x"), C) is None
    assert p.step(result("y"), C) == ()


def test_copy_is_independent() -> None:
    p = Pairing()
    p.step(call("x", "y"), A)
    q = p.copy()
    q.step(result("x"), B)
    q.step(Message(role="user", content="u"), C)
    assert list(p.open) == ["x", "y"]
    assert not p.repairs
    assert len(q.repairs) == 1


# --- through compile ----------------------------------------------------------------------------------------


def test_trailing_call_stays_as_the_last_message_without_repairs() -> None:
    with Tract.open() as t:
        t.user("go")
        t.assistant(tool_calls=calls("x", "y"))
        ctx = t.compile()
        assert shape(ctx)[-1] == ("assistant", None, False)
        assert ctx.repairs == ()
        t.tool_result("x", "f", "one")  # a tool run in progress: the turn so far stays open
        ctx = t.compile(strict=True)
        assert shape(ctx)[-2:] == [("assistant", None, False), ("tool", "x", False)]
        assert ctx.repairs == ()
        ctx.to_openai_params(strict=True)
        ctx.to_anthropic_params(strict=True)


def test_compile_keeps_messages_commit_ids_configs_and_tokens_aligned() -> None:
    with Tract.open() as t:
        t.user("go")
        made = t.assistant(tool_calls=calls("x", "y"), generation_config={"model": "m"})
        answered = t.tool_result("x", "f", "one")
        assert answered is not None
        before = t.compile()
        late_user = t.user("what happened?")
        ctx = t.compile()
        assert shape(ctx) == [
            ("user", None, False),
            ("assistant", None, False),
            ("tool", "x", False),
            ("tool", "y", True),
            ("user", None, False),
        ]
        assert list(ctx.commit_ids)[2:] == [answered.commit_id, made.commit_id, late_user.commit_id]
        assert list(ctx.generation_configs)[1] == {"model": "m"}
        assert list(ctx.generation_configs)[3] is None
        assert ctx.repairs == (
            Repair(
                kind=PLACEHOLDER_RESULT, commit_id=made.commit_id, call_id="y", detail=ctx.repairs[0].detail
            ),
        )
        placeholder = placeholder_tokens(DEFAULT_COUNTER)
        assert ctx.token_count == before.token_count + late_user.token_count + placeholder
        assert t.status().token_count == ctx.token_count
        assert t.status().message_count == len(ctx)
        orphan = late_result(t, "y", "too late")
        assert orphan is not None
        after = t.compile()
        assert list(after.messages) == list(ctx.messages)  # dropped
        assert after.token_count == ctx.token_count  # a dropped result costs nothing
        assert after.repairs[-1].kind == DROPPED_RESULT
        assert after.repairs[-1].commit_id == orphan.commit_id
        assert t.diff(late_user.commit_id).is_empty


def test_reasoning_inside_a_tool_turn_waits_for_its_results() -> None:
    """Reasoning recorded between a call and its result (compiled with include_reasoning) is placed after the
    turn's results instead of cutting the pair apart; if the results never come, the call gets a placeholder
    before it, as before any message."""
    with Tract.open() as t:
        t.user("go")
        t.assistant(tool_calls=calls("x"))
        t.commit({"type": "reasoning", "text": "thinking about it"})
        t.tool_result("x", "f", "one")
        assert t.compile().repairs == ()
        with_reasoning = t.compile(include_reasoning=True)
        assert with_reasoning.repairs == ()
        assert shape(with_reasoning)[2:] == [("tool", "x", False), ("assistant", None, False)]
        assert with_reasoning.messages[-1].content == "thinking about it"
        t.user("and then?")
        assert [m.role for m in t.compile(include_reasoning=True).messages] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
        ]

        t.assistant(tool_calls=calls("y"))
        t.commit({"type": "reasoning", "text": "still waiting"})
        waiting = t.compile(include_reasoning=True)
        assert [r.kind for r in waiting.repairs] == [PLACEHOLDER_RESULT]
        assert shape(waiting)[-2:] == [("tool", "y", True), ("assistant", None, False)]


def compile_everywhere(t: Tract) -> list[CompiledContext]:
    """The context at HEAD compiled incrementally, by a fresh handle on the same store, and from a rebuilt view."""
    incremental = t.compile()
    fresh = Tract(t.store, owns_store=False)
    try:
        rebuilt = fresh.compile()
    finally:
        fresh.close()
    state = t._session.head_state()
    state.view = None  # force a rebuild from the slots
    return [incremental, rebuilt, t.compile()]


def test_rebuild_after_edit_and_annotate_equals_incremental_appends() -> None:
    with Tract.open() as t:
        t.user("go")
        made = t.assistant(tool_calls=calls("x", "y"))
        rx = t.tool_result("x", "f", "one")
        t.tool_result("y", "f", "two")
        t.user("thanks")
        assert rx is not None
        # skip a result: its call gets a placeholder before "thanks"
        t.annotate(rx.commit_id, "skip")
        # edit the call into plain text: the other result becomes an orphan
        t.commit({"type": "dialogue", "role": "assistant", "text": "no tools"}, "edit", made.commit_id)
        t.assistant(tool_calls=calls("z"))
        t.tool_result("z", "f", "three")
        late_result(t, "z", "three again")
        t.user("bye")
        contexts = compile_everywhere(t)
        first = contexts[0]
        for other in contexts[1:]:
            assert other == first
            assert other.repairs == first.repairs
            assert other.token_count == first.token_count
            assert list(other.generation_configs) == list(first.generation_configs)
        assert [r.kind for r in first.repairs] == [DROPPED_RESULT, DROPPED_RESULT]
        assert shape(first) == [
            ("user", None, False),
            ("assistant", None, False),
            ("user", None, False),
            ("assistant", None, False),
            ("tool", "z", False),
            ("user", None, False),
        ]
        # a fresh session appending one message after a rebuild keeps agreeing
        t.user("again")
        assert compile_everywhere(t)[0] == compile_everywhere(t)[1]


def test_a_reopened_store_compiles_the_same_repairs_from_its_checkpoint(tmp_path: Path) -> None:
    path = str(tmp_path / "s.tkv")
    with Tract.open(path, durable=False) as t:
        t.user("go")
        t.assistant(tool_calls=calls("x", "y"))
        t.tool_result("y", "f", "one")
        t.user("interrupt")
        late_result(t, "y", "again")
        before = t.compile()
    with Tract.open(path) as again:
        state = again._session.head_state()
        # loaded from the checkpoint close() wrote: the view is made from its summary (format 4), no chunk read
        assert state.view is not None
        assert state.view.base is not None
        ctx = again.compile()
    assert ctx == before
    assert ctx.repairs == before.repairs
    assert ctx.token_count == before.token_count
    assert [r.kind for r in ctx.repairs] == [PLACEHOLDER_RESULT, DROPPED_RESULT]


def test_strict_raises_naming_the_first_repair() -> None:
    with Tract.open() as t:
        t.user("go")
        made = t.assistant(tool_calls=calls("x"))
        t.user("interrupt")
        with pytest.raises(ToolPairingError) as caught:
            t.compile(strict=True)
        assert isinstance(caught.value, InvalidInput)
        assert "'x'" in str(caught.value)
        assert made.commit_id[:12] in str(caught.value)
        assert [r.kind for r in caught.value.repairs] == [PLACEHOLDER_RESULT]
        ctx = t.compile()
        for render in (ctx.to_openai_params, ctx.to_anthropic_params):
            with pytest.raises(ToolPairingError):
                render(strict=True)
            assert render()["messages"]
        with pytest.raises(ToolPairingError):
            t._session.compile(strict=True)


def test_compress_ignores_placeholders_and_refuses_a_skipped_start() -> None:
    with Tract.open() as t:
        first = t.user("go")
        t.assistant(tool_calls=calls("x"))
        t.user("interrupt")
        skipped = t.user("noise")
        t.annotate(skipped.commit_id, "skip")
        t.user("tail")
        with pytest.raises(InvalidInput, match="skipped"):
            t.compress(from_commit=skipped.commit_id, content="s")
        with pytest.raises(InvalidInput, match="skipped"):
            t.compress(to_commit=skipped.commit_id, content="s")
        summary = t.compress(from_commit=first.commit_id, content="summary")
        sources = t.store.get_commit(summary.commit_id).links["sources"]
        assert len(sources) == len(set(sources)) == 4  # go, the call, interrupt, tail: no placeholder
        ctx = t.compile(strict=True)
        assert [m.content for m in ctx.messages] == ["summary"]


def test_tool_turns_and_results_see_no_placeholders_or_orphans() -> None:
    with Tract.open() as t:
        t.user("go")
        made = t.assistant(tool_calls=calls("x", "y"))
        t.tool_result("x", "f", "one")
        t.user("interrupt")
        late_result(t, "y", "late")
        turns = t.find_tool_turns(scope="context")
        assert len(turns) == 1
        assert turns[0].call.commit_id == made.commit_id
        assert [r.content["tool_call_id"] for r in turns[0].results] == ["x"]
        assert [r.content["text"] for r in t.find_tool_results(scope="context")] == ["one"]
        # the history lists what was committed, the orphan too (compile leaves it out; nothing is invented)
        assert [r.content["text"] for r in t.find_tool_results()] == ["one", "late"]
        (turn,) = t.find_tool_turns()
        assert [r.content["tool_call_id"] for r in turn.results] == ["x", "y"]


def test_cli_compile_reports_repairs_and_strict_fails(tmp_path: Path) -> None:
    path = str(tmp_path / "s.tkv")
    with Tract.open(path) as t:
        t.user("go")
        t.assistant(tool_calls=calls("x"))
        t.user("interrupt")
    runner = CliRunner()
    done = runner.invoke(cli, ["--store", path, "compile", "--format", "openai"])
    assert done.exit_code == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("repaired: ")] == [
        done.stderr.strip()
    ]
    assert "'x'" in done.stderr
    strict = runner.invoke(cli, ["--store", path, "compile", "--strict"])
    assert strict.exit_code == 1
    assert strict.stdout == ""
    assert strict.stderr.startswith("Error: tool calls and results do not pair up")
    assert len(strict.stderr.strip().splitlines()) == 1
    as_json = runner.invoke(cli, ["--store", path, "compile", "--format", "json"])
    assert as_json.exit_code == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert [(r["kind"], r["call_id"]) for r in data["repairs"]] == [("placeholder_result", "x")]
    assert data["open_calls"] == []
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "tool", "user"]


def test_tool_result_refuses_a_call_no_longer_waiting_for_one() -> None:
    """A result compile would always leave out is refused, nothing written: answered already, closed by a
    later message, or its call skipped. Editing an existing result stays possible."""
    with Tract.open() as t:
        t.user("go")
        made = t.assistant(tool_calls=calls("x", "y"))
        first = t.tool_result("x", "f", "one")
        assert first is not None
        head = t.head
        with pytest.raises(InvalidInput, match="not waiting for a result"):
            t.tool_result("x", "f", "one again")  # answered already
        assert t.head == head
        t.user("interrupt")  # closes y
        head = t.head
        with pytest.raises(InvalidInput, match="edit="):
            t.tool_result("y", "f", "late")
        assert t.head == head
        edited = t.tool_result("x", "f", "one, corrected", edit=first.commit_id)
        assert edited is not None
        assert next(m.content for m in t.compile().messages if m.role == "tool") == "one, corrected"
        t.assistant(tool_calls=calls("z"))
        t.annotate(t.head, "skip")
        with pytest.raises(InvalidInput, match="not waiting"):
            t.tool_result("z", "f", "for a skipped call")
        assert made.commit_id in t.compile().commit_ids
