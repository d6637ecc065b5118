"""The tool-result pipeline of reference 002: ``tool_result(edit=)``, ``tool_result`` hooks (``"*"`` included)
and ``PendingToolResult``, ``configure_tool_summarization``, ``compress_tool_calls``, provenance and
``original_of``. The summarizer is a :class:`ScriptedLLM`, so every model call is checked."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tractkv import CommitInfo, PendingToolResult, Tract
from tractkv.errors import (
    ConcurrentUpdate,
    InvalidInput,
    NoLLMConfigured,
    ScriptExhausted,
    ToolHookError,
)
from tractkv.llm import ScriptedLLM
from tractkv.model import Blob, object_id

GREP_OUT = "\n".join(f"src/module_{i}.py:{i}: TODO fix" for i in range(40))


def _tract(replies: list[str] | None = None) -> tuple[Tract, ScriptedLLM]:
    llm = ScriptedLLM(replies or [])
    t = Tract.open(llm=llm)
    t.system("You are a coding agent.")
    t.user("Find the TODOs.")
    return t, llm


def _call(t: Tract, call_id: str = "c1", name: str = "grep", *more: tuple[str, str]) -> CommitInfo:
    calls = [{"id": call_id, "name": name, "arguments": {}}]
    calls += [{"id": i, "name": n, "arguments": {}} for i, n in more]
    return t.assistant("", tool_calls=calls)


def _committed(result: object) -> CommitInfo:
    assert isinstance(result, CommitInfo), result
    return result


def _instructions(llm: ScriptedLLM, index: int = -1) -> str:
    """The system message (the instructions) of a summarizer call."""
    return str(llm.calls[index].messages[0].content)


def _original_link(t: Tract, commit_id: str) -> tuple[str, ...]:
    commit = t.store.get_commit(commit_id)
    assert commit is not None
    return tuple(commit.links.get("original", ()))


def _raw_id(text: str) -> str:
    return object_id(Blob(data={"type": "tool_original", "text": text}))


# --- tool_result(edit=) ------------------------------------------------------------------------------------


def test_tool_result_edit_basic() -> None:
    t, _ = _tract()
    _call(t)
    first = _committed(t.tool_result("c1", "grep", GREP_OUT))
    edit = _committed(t.tool_result("c1", "grep", "40 TODOs in src/", edit=first.commit_id))
    assert edit.operation == "edit"
    assert edit.edit_target == first.commit_id
    assert t.get_commit(first.commit_id).content["text"] == GREP_OUT  # the original stays in history


def test_tool_result_edit_preserves_metadata() -> None:
    t, _ = _tract()
    _call(t)
    first = _committed(t.tool_result("c1", "grep", GREP_OUT))
    edit = _committed(t.tool_result("c1", "grep", "short", edit=first.commit_id))
    assert (edit.content["tool_call_id"], edit.content["name"]) == ("c1", "grep")
    message = t.compile().messages[-1]
    assert (message.role, message.tool_call_id, message.name) == ("tool", "c1", "grep")
    _call(t, "c2", "grep")
    with pytest.raises(InvalidInput, match="not a result of tool call 'c2'"):
        t.tool_result("c2", "grep", "x", edit=first.commit_id)


def test_tool_result_edit_compiled_shows_new() -> None:
    t, _ = _tract()
    _call(t)
    first = _committed(t.tool_result("c1", "grep", GREP_OUT))
    t.tool_result("c1", "grep", "short", edit=first.commit_id)
    assert [m.content for m in t.compile().messages][-1] == "short"
    assert len(t.compile().messages) == 4  # replaced in place, not appended


def test_tool_result_edit_log_shows_both() -> None:
    t, _ = _tract()
    _call(t)
    first = _committed(t.tool_result("c1", "grep", GREP_OUT))
    edit = _committed(t.tool_result("c1", "grep", "short", edit=first.commit_id))
    ids = [c.commit_id for c in t.log()]
    assert ids[:2] == [edit.commit_id, first.commit_id]


def test_original_of_an_edit_is_the_raw_result() -> None:
    t, _ = _tract(["summary of the grep"])
    t.configure_tool_summarization(instructions={"grep": "List the files only."})
    _call(t)
    first = _committed(t.tool_result("c1", "grep", GREP_OUT))  # summarized on the way in
    edit = _committed(t.tool_result("c1", "grep", "hand-written", edit=first.commit_id))
    second = _committed(t.tool_result("c1", "grep", "again", edit=edit.commit_id))  # an edit of the edit
    for rev in (first.commit_id, edit.commit_id, second.commit_id):
        assert t.original_of(rev) == GREP_OUT
    t.configure_tool_summarization()
    _call(t, "c2", "ls")
    plain = _committed(t.tool_result("c2", "ls", "a.txt"))
    fixed = _committed(t.tool_result("c2", "ls", "a.txt b.txt", edit=plain.commit_id))
    assert t.original_of(fixed.commit_id) == "a.txt"  # not the edited text
    user = next(c for c in t.log() if c.role == "user")
    with pytest.raises(InvalidInput, match="not a tool result"):
        t.original_of(user.commit_id)


# --- hooks and PendingToolResult -----------------------------------------------------------------------------


def test_hook_fires_on_tool_result() -> None:
    t, _ = _tract()
    _call(t)
    seen: list[PendingToolResult] = []

    def handler(pending: PendingToolResult) -> None:
        seen.append(pending)
        pending.approve()

    t.on("tool_result", handler)
    info = _committed(t.tool_result("c1", "grep", GREP_OUT))
    (pending,) = seen
    assert (pending.tool_call_id, pending.tool_name, pending.content) == ("c1", "grep", GREP_OUT)
    assert pending.status == "approved"
    assert pending.result == info
    assert info.metadata is not None
    assert info.metadata["triggered_by"] == f"hook:{handler.__qualname__}"
    assert "summarized_from" not in info.metadata


def test_hook_carries_token_count() -> None:
    t, _ = _tract()
    _call(t)
    counts: list[int] = []
    t.on("tool_result", lambda p: (counts.append(p.token_count), p.approve()))
    t.tool_result("c1", "grep", GREP_OUT)
    assert counts == [t.token_counter.count(GREP_OUT)]
    assert counts[0] > 0


def test_hook_edit_result() -> None:
    t, _ = _tract()
    _call(t)
    snapshots: list[tuple[str, str | None]] = []

    def handler(p: PendingToolResult) -> None:
        p.edit_result("40 TODOs")
        snapshots.append((p.content, p.original_content))
        p.approve()

    t.on("tool_result", handler)
    info = _committed(t.tool_result("c1", "grep", GREP_OUT))
    assert snapshots == [("40 TODOs", GREP_OUT)]
    assert t.compile().messages[-1].content == "40 TODOs"
    assert t.original_of(info.commit_id) == GREP_OUT
    assert _original_link(t, info.commit_id) == (_raw_id(GREP_OUT),)
    assert info.metadata is not None
    assert "summarized_from" not in info.metadata


def test_hook_summarize() -> None:
    t, llm = _tract(["module_0 .. module_39 have TODOs"])
    _call(t)
    t.on("tool_result", lambda p: (p.summarize(instructions="Files only.", target_tokens=20), p.approve()))
    info = _committed(t.tool_result("c1", "grep", GREP_OUT))
    (request,) = llm.calls
    assert request.messages[1].content == GREP_OUT
    assert _instructions(llm).startswith("Files only.")
    assert "20 tokens" in _instructions(llm)
    assert t.compile().messages[-1].content == "module_0 .. module_39 have TODOs"
    assert info.metadata is not None
    assert info.metadata["summarized_from"] == _raw_id(GREP_OUT) == _original_link(t, info.commit_id)[0]
    assert t.original_of(info.commit_id) == GREP_OUT


def test_hook_summarize_uses_the_tools_configured_instructions() -> None:
    t, llm = _tract(["files: 40"])
    t.configure_tool_summarization(instructions={"grep": "Only the file names."})
    _call(t)
    t.on("tool_result", lambda p: (p.summarize(), p.approve()))
    t.tool_result("c1", "grep", GREP_OUT)
    assert _instructions(llm) == "Only the file names."


def test_hook_reject() -> None:
    t, _ = _tract()
    _call(t)
    head = t.head
    t.on("tool_result", lambda p: p.reject("too noisy"))
    assert t.tool_result("c1", "grep", GREP_OUT) is None
    assert t.head == head


def test_hook_no_fire_on_edit() -> None:
    t, _ = _tract()
    _call(t)
    first = _committed(t.tool_result("c1", "grep", GREP_OUT))
    fired: list[object] = []
    t.on("tool_result", fired.append)
    t.on("*", fired.append)
    _committed(t.tool_result("c1", "grep", "short", edit=first.commit_id))
    assert fired == []


def test_hook_passthrough() -> None:
    t, _ = _tract()
    _call(t)
    t.on("tool_result", lambda p: p.approve())
    info = _committed(t.tool_result("c1", "grep", GREP_OUT))
    assert t.compile().messages[-1].content == GREP_OUT
    assert _original_link(t, info.commit_id) == ()  # nothing changed: no original to keep


def test_no_hook_commits_directly() -> None:
    t, llm = _tract()
    _call(t)
    info = _committed(t.tool_result("c1", "grep", GREP_OUT))
    assert info.metadata is None or "triggered_by" not in info.metadata
    assert llm.calls == []


def test_a_star_hook_handles_every_tool_result() -> None:
    t, _ = _tract()
    _call(t, "c1", "grep", ("c2", "ls"))
    names: list[str] = []
    t.on("*", lambda p: (names.append(p.tool_name), p.approve()))
    t.tool_result("c1", "grep", "x")
    t.tool_result("c2", "ls", "y")
    assert names == ["grep", "ls"]


def test_a_tool_result_hook_wins_over_a_star_hook() -> None:
    t, _ = _tract()
    _call(t, "c1", "grep", ("c2", "ls"))
    ran: list[str] = []
    t.on("*", lambda p: (ran.append("*"), p.approve()))
    t.on("tool_result", lambda p: (ran.append("tool_result"), p.approve()))
    t.tool_result("c1", "grep", "x")
    assert ran == ["tool_result"]
    t.off("tool_result")
    t.tool_result("c2", "ls", "y")
    assert ran == ["tool_result", "*"]
    with pytest.raises(InvalidInput, match="unknown event"):
        t.on("commit", print)
    with pytest.raises(InvalidInput, match="callable"):
        t.on("*", "not a function")  # type: ignore[arg-type]


def test_handlers_run_in_order_until_one_decides() -> None:
    t, _ = _tract()
    _call(t)
    ran: list[str] = []
    t.on("tool_result", lambda p: (ran.append("trim"), p.edit_result(p.content[:10])))
    t.on("tool_result", lambda p: (ran.append("approve"), p.approve()))
    t.on("tool_result", lambda p: ran.append("never"))
    info = _committed(t.tool_result("c1", "grep", GREP_OUT))
    assert ran == ["trim", "approve"]
    assert t.compile().messages[-1].content == GREP_OUT[:10]
    assert info.metadata is not None
    assert info.metadata["triggered_by"].endswith("<lambda>")


def test_an_undecided_result_is_returned_pending_and_approved_later() -> None:
    t, _ = _tract()
    _call(t)
    head = t.head
    t.on("tool_result", lambda p: p.edit_result("trimmed"))  # changes it, decides nothing
    pending = t.tool_result("c1", "grep", GREP_OUT)
    assert isinstance(pending, PendingToolResult)
    assert (pending.status, pending.content, pending.original_content) == ("pending", "trimmed", GREP_OUT)
    assert t.head == head  # nothing committed yet
    pending.edit_result("trimmed twice")
    assert pending.original_content == GREP_OUT  # the raw result, not the first edit
    info = pending.approve()
    assert pending.status == "approved"
    assert pending.result == info
    assert t.compile().messages[-1].content == "trimmed twice"
    assert t.original_of(info.commit_id) == GREP_OUT
    for act in (pending.approve, pending.reject, lambda: pending.edit_result("x"), pending.summarize):
        with pytest.raises(InvalidInput, match="approved already"):
            act()


def test_a_pending_result_can_be_summarized_or_rejected_later() -> None:
    t, llm = _tract(["short"])
    _call(t, "c1", "grep", ("c2", "grep"))
    t.on("tool_result", lambda p: None)
    first = t.tool_result("c1", "grep", GREP_OUT)
    second = t.tool_result("c2", "grep", "noise")
    assert isinstance(first, PendingToolResult)
    assert isinstance(second, PendingToolResult)
    first.summarize(instructions="Be brief.")
    info = first.approve()
    second.reject("noise")
    assert second.status == "rejected"
    assert second.reason == "noise"
    assert [m.content for m in t.compile().messages if m.role == "tool"] == ["short"]
    assert info.metadata is not None
    assert info.metadata["summarized_from"] == _raw_id(GREP_OUT)
    assert len(llm.calls) == 1


def test_a_pending_result_whose_call_was_closed_cannot_be_approved() -> None:
    t, _ = _tract()
    _call(t)
    t.on("tool_result", lambda p: None)
    pending = t.tool_result("c1", "grep", GREP_OUT)
    assert isinstance(pending, PendingToolResult)
    t.off("tool_result")
    t.tool_result("c1", "grep", "answered another way")
    head = t.head
    with pytest.raises(InvalidInput, match="not waiting for a result"):
        pending.approve()
    assert pending.status == "pending"
    assert t.head == head


def test_a_handler_that_raises_is_a_tool_hook_error_and_commits_nothing() -> None:
    t, _ = _tract()
    _call(t)
    head = t.head

    def broken(p: PendingToolResult) -> None:
        raise KeyError("oops")

    t.on("tool_result", broken)
    with pytest.raises(ToolHookError, match="broken"):
        t.tool_result("c1", "grep", GREP_OUT)
    assert t.head == head
    t.off("tool_result", broken)
    t.on("tool_result", lambda p: (p.summarize(), p.approve()))  # a tractkv error passes unchanged
    t.configure_llm(None)
    with pytest.raises(NoLLMConfigured):
        t.tool_result("c1", "grep", GREP_OUT)
    assert t.head == head
    with pytest.raises(InvalidInput, match="not registered"):
        t.off("tool_result", broken)


def test_a_tool_result_committed_inside_a_hook_skips_the_hooks() -> None:
    t, _ = _tract()
    _call(t, "c1", "grep", ("c2", "ls"))
    seen: list[str] = []

    def handler(p: PendingToolResult) -> None:
        seen.append(p.tool_name)
        if p.tool_name == "grep":
            t.tool_result("c2", "ls", "committed from the hook")

    t.on("tool_result", handler)
    pending = t.tool_result("c1", "grep", GREP_OUT)
    assert seen == ["grep"]  # the nested result did not re-enter the hooks
    assert isinstance(pending, PendingToolResult)
    pending.approve()  # later: on the tip as it is now
    assert [m.content for m in t.compile().messages if m.role == "tool"] == [
        "committed from the hook",
        GREP_OUT,
    ]


def test_approve_inside_a_hook_refuses_a_tip_another_handle_moved(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    with Tract.open(path, durable=False) as a, Tract.open(path, durable=False) as b:
        a.user("hi")
        _call(a)
        b.switch("main")

        def slow(p: PendingToolResult) -> None:
            b.user("meanwhile")
            p.approve()

        a.on("tool_result", slow)
        with pytest.raises(ConcurrentUpdate):
            a.tool_result("c1", "grep", GREP_OUT)


# --- configure_tool_summarization ----------------------------------------------------------------------------


def test_config_per_tool_instructions() -> None:
    t, llm = _tract(["40 files", "1 file"])
    t.configure_tool_summarization(instructions={"grep": "List matching file names only."})  # no threshold
    _call(t, "c1", "grep", ("c2", "read"))
    info = _committed(t.tool_result("c1", "grep", GREP_OUT))
    assert _instructions(llm) == "List matching file names only."
    assert t.compile().messages[-1].content == "40 files"
    assert info.metadata == {
        "triggered_by": "configure_tool_summarization",
        "summarized_from": _raw_id(GREP_OUT),
    }
    _committed(t.tool_result("c2", "read", GREP_OUT))  # unlisted, no threshold: as it is
    assert t.compile().messages[-1].content == GREP_OUT
    assert len(llm.calls) == 1
    _call(t, "c3", "grep")
    t.tool_result("c3", "grep", "x")  # listed: summarized however small
    assert t.compile().messages[-1].content == "1 file"
    assert len(llm.calls) == 2


def test_config_auto_threshold() -> None:
    t, llm = _tract(["summary"])
    t.configure_tool_summarization(auto_threshold=50)
    _call(t, "c1", "read")
    t.tool_result("c1", "read", GREP_OUT)
    assert t.compile().messages[-1].content == "summary"
    assert "Summarize this tool output" in _instructions(llm)  # the built-in instructions


def test_config_under_threshold_passthrough() -> None:
    t, llm = _tract()
    t.configure_tool_summarization(auto_threshold=50, default_instructions="Short.")
    _call(t, "c1", "read")
    info = _committed(t.tool_result("c1", "read", "tiny"))
    assert t.compile().messages[-1].content == "tiny"
    assert llm.calls == []
    assert info.metadata is None or "triggered_by" not in info.metadata


def test_config_default_instructions() -> None:
    t, llm = _tract(["grep summary", "read summary"])
    t.configure_tool_summarization(
        instructions={"grep": "Files only."}, auto_threshold=50, default_instructions="Key facts only."
    )
    _call(t, "c1", "grep", ("c2", "read"))
    t.tool_result("c1", "grep", GREP_OUT)
    t.tool_result("c2", "read", GREP_OUT)
    assert [_instructions(llm, 0), _instructions(llm, 1)] == ["Files only.", "Key facts only."]


def test_config_override_with_custom_handler() -> None:
    t, llm = _tract(["custom summary"])
    t.configure_tool_summarization(instructions={"grep": "Files only."}, auto_threshold=1)
    _call(t, "c1", "grep", ("c2", "read"))
    t.on(
        "tool_result", lambda p: p.approve() if p.tool_name == "grep" else (p.summarize("Mine."), p.approve())
    )
    t.tool_result("c1", "grep", GREP_OUT)  # the handler decides: not summarized
    t.tool_result("c2", "read", GREP_OUT)
    assert [m.content for m in t.compile().messages if m.role == "tool"] == [GREP_OUT, "custom summary"]
    assert [_instructions(llm)] == ["Mine."]


def test_config_can_be_turned_off_and_replaced() -> None:
    t, llm = _tract()
    t.configure_tool_summarization(instructions={"grep": "Files only."}, auto_threshold=1)
    t.configure_tool_summarization()  # no arguments: nothing is summarized automatically
    _call(t)
    t.tool_result("c1", "grep", GREP_OUT)
    assert t.compile().messages[-1].content == GREP_OUT
    assert llm.calls == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"instructions": ["grep"]},
        {"instructions": {"grep": ""}},
        {"instructions": {"": "x"}},
        {"auto_threshold": 0},
        {"auto_threshold": 2.5},
        {"auto_threshold": True},
        {"default_instructions": "  "},
    ],
)
def test_config_refuses_malformed_settings(kwargs: dict[str, Any]) -> None:
    t, llm = _tract(["s"])
    t.configure_tool_summarization(instructions={"grep": "Files only."})
    with pytest.raises(InvalidInput):
        t.configure_tool_summarization(**kwargs)
    _call(t)
    t.tool_result("c1", "grep", GREP_OUT)  # the previous settings still apply
    assert _instructions(llm) == "Files only."


def test_a_failed_summary_commits_nothing() -> None:
    t, _ = _tract([])  # the script is empty: the summarizer call fails
    t.configure_tool_summarization(instructions={"grep": "Files only."})
    _call(t)
    head = t.head
    with pytest.raises(ScriptExhausted):
        t.tool_result("c1", "grep", GREP_OUT)
    assert t.head == head


# --- compress_tool_calls -----------------------------------------------------------------------------------


def _two_results(t: Tract) -> tuple[CommitInfo, CommitInfo]:
    _call(t, "c1", "grep", ("c2", "read"))
    return _committed(t.tool_result("c1", "grep", GREP_OUT)), _committed(
        t.tool_result("c2", "read", "body " * 50)
    )


def test_compress_tool_calls_with_instructions() -> None:
    t, llm = _tract(["grep, short", "read, short"])
    grep, read = _two_results(t)
    edits = t.compress_tool_calls(instructions="One line each.", target_tokens=30)
    assert [e.edit_target for e in edits] == [grep.commit_id, read.commit_id]
    assert all(_instructions(llm, i).startswith("One line each.") for i in (0, 1))
    assert "30 tokens" in _instructions(llm)
    tools = [m for m in t.compile().messages if m.role == "tool"]
    assert [(m.content, m.tool_call_id, m.name) for m in tools] == [
        ("grep, short", "c1", "grep"),
        ("read, short", "c2", "read"),
    ]
    assert t.original_of(edits[0].commit_id) == GREP_OUT
    assert t.original_of(grep.commit_id) == GREP_OUT
    assert edits[0].metadata == {"triggered_by": "compress_tool_calls", "summarized_from": _raw_id(GREP_OUT)}


def test_compress_tool_calls_by_name_and_by_commit() -> None:
    t, llm = _tract(["grep only", "read only"])
    grep, read = _two_results(t)
    t.configure_tool_summarization(instructions={"read": "Configured for read."})
    (edit,) = t.compress_tool_calls(name="grep")
    assert edit.edit_target == grep.commit_id
    (edit,) = t.compress_tool_calls(commits=[read.commit_id])
    assert edit.edit_target == read.commit_id
    assert _instructions(llm) == "Configured for read."  # no instructions=: the tool's configured ones
    with pytest.raises(InvalidInput):
        t.compress_tool_calls(instructions="")


def test_compress_tool_calls_a_second_time_keeps_the_raw_original() -> None:
    t, _ = _tract(["first summary", "second summary"])
    _grep, _ = _two_results(t)
    t.compress_tool_calls(name="grep")
    (again,) = t.compress_tool_calls(name="grep")
    assert t.original_of(again.commit_id) == GREP_OUT


def test_compress_tool_calls_needs_a_model_and_leaves_compressed_history_alone() -> None:
    t, _ = _tract()
    _two_results(t)
    t.configure_llm(None)
    head = t.head
    with pytest.raises(NoLLMConfigured):
        t.compress_tool_calls()
    assert t.head == head
    t.compress(content="we grepped and read")  # the results leave the context
    t.configure_llm(ScriptedLLM([]))
    assert t.compress_tool_calls() == []


# --- provenance travels with the branch ----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["hook", "config", "compress"])
def test_provenance_syncs_with_the_branch(tmp_path: Path, how: str) -> None:
    path = str(tmp_path / "a")
    with Tract.open(path, durable=False, llm=ScriptedLLM(["the summary"])) as t:
        t.user("go")
        _call(t)
        act: dict[str, Callable[[], CommitInfo]] = {
            "hook": lambda: _committed(t.tool_result("c1", "grep", GREP_OUT)),
            "config": lambda: _committed(t.tool_result("c1", "grep", GREP_OUT)),
            "compress": lambda: (t.tool_result("c1", "grep", GREP_OUT), t.compress_tool_calls()[0])[1],
        }
        if how == "hook":
            t.on("tool_result", lambda p: (p.summarize(), p.approve()))
        elif how == "config":
            t.configure_tool_summarization(instructions={"grep": "Files."})
        info = act[how]()
        meta = info.metadata
    assert meta is not None
    assert meta["summarized_from"] == _raw_id(GREP_OUT)
    with Tract.clone(path, None) as c:
        copy = c.get_commit(info.commit_id)
        assert copy.metadata == meta
        assert c.original_of(info.commit_id) == GREP_OUT
        assert c.compile().messages[-1].content == "the summary"


# --- property: original_of always finds the raw result ---------------------------------------------------------

STEPS = st.lists(st.sampled_from(["edit", "compress"]), max_size=5)


@settings(max_examples=40, deadline=None)
@given(raw=st.text(min_size=1, max_size=40), summarized=st.booleans(), steps=STEPS)
def test_original_of_is_the_raw_result_after_any_edits_and_summaries(
    raw: str, summarized: bool, steps: list[str]
) -> None:
    t, _ = _tract([f"summary {i}" for i in range(len(steps) + 1)])
    if summarized:
        t.configure_tool_summarization(instructions={"grep": "Short."})
    _call(t)
    first = _committed(t.tool_result("c1", "grep", raw))
    revs = [first.commit_id]
    for i, step in enumerate(steps):
        if step == "edit":
            revs.append(_committed(t.tool_result("c1", "grep", f"edit {i}", edit=first.commit_id)).commit_id)
        else:
            revs.append(t.compress_tool_calls()[0].commit_id)
    assert [t.original_of(rev) for rev in revs] == [raw] * len(revs)


def test_a_pending_result_approved_later_only_answers_its_own_call_on_its_own_branch() -> None:
    """Approving later re-checks the branch and the call: the same id made by another tool (or on another
    branch) is not the call this result answers; nothing is written, and it stays pending."""
    t = Tract.open()
    t.user("x")
    t.branch("other", switch=False)
    t.assistant(tool_calls=[{"id": "call_1", "name": "grep", "arguments": {}}])
    t.on("tool_result", lambda p: None)
    pending = t.tool_result("call_1", "grep", "GREP OUTPUT")
    assert isinstance(pending, PendingToolResult)
    t.switch("other")
    t.assistant(tool_calls=[{"id": "call_1", "name": "delete_file", "arguments": {}}])
    head = t.head
    with pytest.raises(InvalidInput, match="belongs to refs/heads/main"):
        pending.approve()
    assert t.head == head
    assert pending.status == "pending"
    t.switch("main")
    info = pending.approve()
    assert info.content["text"] == "GREP OUTPUT"
    t.close()
