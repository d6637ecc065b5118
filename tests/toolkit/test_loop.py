"""The agent loop end to end: delegation, failing tools, hooks, deferred context changes, open calls."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tractkv import Tract, toolkit
from tractkv.errors import NoLLMConfigured
from tractkv.llm import ScriptedLLM
from tractkv.model import MAX_OBJECT_BYTES
from tractkv.toolkit import ToolContext, ToolEvent, ToolExecutor, tool
from tractkv.toolkit.loop import WITHHELD

from .conftest import FakeClock, call, calls


@tool
def lookup(key: str, *, context: ToolContext) -> str:
    """Look a key up in the table.

    Args:
        key: The key.
    """
    return {"a": "1", "b": "2"}.get(key, "missing")


@tool
def delegate(task: str, *, context: ToolContext) -> str:
    """Hand a task to a sub-agent that can look keys up.

    Args:
        task: What the sub-agent should do.
    """
    result = context.run_child(task, tools=["lookup"], system="You are a lookup helper.", max_steps=5)
    return f"sub-agent says: {result.text} ({result.steps} steps)"


@tool
def explode(x: int, *, context: ToolContext) -> str:
    """Always raises."""
    raise RuntimeError(f"cannot handle {x}")


def _roles(t: Tract) -> list[str]:
    return [m.role for m in t.compile().messages]


def test_delegation_runs_a_child_loop_recorded_as_a_nested_usage_tree(tract: Tract) -> None:
    tract.system("You coordinate.")
    tract.user("What is a?")
    llm = ScriptedLLM(
        [
            call("c1", "delegate", {"task": "find a"}),  # parent step 1
            call("k1", "lookup", {"key": "a"}),  # child step 1
            calls(("k2", "lookup", {"key": "b"}), ("k3", "lookup", {"key": "zz"})),  # child step 2
            "a is 1",  # child's answer
            "The answer is 1.",  # parent's answer
        ]
    )
    events: list[ToolEvent] = []
    ex = ToolExecutor(tract, profile=None, tools=[delegate, lookup])
    ex.events.subscribe("*", events.append)
    head_ref = tract.store.get_ref("HEAD")

    result = toolkit.run(tract, llm, ex, max_steps=4)

    assert (result.text, result.steps, result.stop_reason) == ("The answer is 1.", 2, "done")
    assert tract.compile().messages[3].content == "sub-agent says: a is 1 (3 steps)"
    (tree,) = tract.usage_tree()
    root = tree.usage
    assert (root.tool_name, root.status, root.parent_id, root.tool_call_id) == (
        "delegate",
        "success",
        None,
        "c1",
    )
    assert result.usage_ids == (root.id,)
    assert [(c.usage.tool_name, c.usage.arguments, c.usage.result) for c in tree.children] == [
        ("lookup", {"key": "a"}, "1"),
        ("lookup", {"key": "b"}, "2"),
        ("lookup", {"key": "zz"}, "missing"),
    ]
    assert all(c.usage.parent_id == root.id for c in tree.children)
    # the children were called by the child's assistant messages, kept reachable through the record
    (child_head,) = root.heads
    child_log = tract.log(rev=child_head)
    assert {c.usage.commit_id for c in tree.children} <= {c.commit_id for c in child_log}
    # the child is a spawned child of main (inherit="none"): its root is the spawn commit
    assert [(c.operation, c.role) for c in child_log[-1:]] == [("spawn", None)]
    assert child_log[-1].metadata["spawn"]["parent_branch"] == "main"
    assert [c.role for c in reversed(child_log[:-1])] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    # the temporary child branch is gone and the stored HEAD did not move
    assert [b.name for b in tract.list_branches()] == ["main"]
    assert tract.store.get_ref("HEAD") == head_ref
    # nested executions published on the same bus, with their parent
    assert [(e.kind, e.tool_name, e.parent_id) for e in events] == [
        ("tool_start", "delegate", None),
        *[(k, "lookup", root.id) for _ in range(3) for k in ("tool_start", "tool_complete")],
        ("tool_complete", "delegate", None),
    ]
    # queries
    assistant_commit = tract.compile().commit_ids[2]
    assert [n.usage.id for n in tract.usage_tree(commit=assistant_commit)] == [root.id]
    assert [n.usage.id for n in tract.usage_tree(commit=tract.compile().commit_ids[3])] == [root.id]
    assert [u.tool_name for u in tract.tool_usages()] == ["delegate", "lookup", "lookup", "lookup"]
    assert [u.tool_name for u in tract.tool_usages(commit=assistant_commit)] == ["delegate"]
    assert len(tract.tool_usages(name="lookup", status="success")) == 3


def test_a_raising_tool_is_an_error_usage_and_the_loop_continues(tract: Tract) -> None:
    tract.user("try it")
    llm = ScriptedLLM([call("c1", "explode", {"x": 7}), call("c2", "lookup", {"key": "a"}), "done"])
    result = toolkit.run(tract, llm, ToolExecutor(tract, profile=None, tools=[explode, lookup]))
    assert (result.text, result.steps) == ("done", 3)
    error_result = tract.compile().messages[2]
    assert (error_result.role, error_result.is_error, error_result.content) == (
        "tool",
        True,
        "Error: RuntimeError: cannot handle 7",
    )
    # the model saw the error on its next call
    assert any(m.content == "Error: RuntimeError: cannot handle 7" for m in llm.calls[1].messages)
    failed, ok = tract.tool_usages()
    assert (failed.status, failed.error, failed.result) == ("error", "RuntimeError: cannot handle 7", None)
    assert ok.status == "success"
    stats = tract.tool_usage_stats()
    assert (stats["explode"].count, stats["explode"].success_rate) == (1, 0.0)
    assert stats["lookup"].success_rate == 1.0


def test_without_an_executor_the_model_gets_no_tools(tract: Tract) -> None:
    # the same default as ToolExecutor(t): built-in tools only when a profile is named
    tract.user("hello")
    llm = ScriptedLLM(["hi"])
    result = toolkit.run(tract, llm)
    assert (result.text, result.stop_reason) == ("hi", "done")
    assert llm.calls[0].tools is None


def test_the_self_profile_executor_and_max_steps_stops(tract: Tract) -> None:
    tract.user("loop forever")
    llm = ScriptedLLM([call(f"c{i}", "status", {}) for i in range(3)])
    result = toolkit.run(tract, llm, ToolExecutor(tract, profile="self"), max_steps=2)
    assert (result.steps, result.stop_reason, result.text) == (2, "max_steps", "")
    offered = [t["function"]["name"] for t in llm.calls[0].tools or []]
    assert offered == [
        "commit",
        "compile",
        "annotate",
        "status",
        "log",
        "compress",
        "branch",
        "switch",
        "reset",
    ]
    assert "your" in (llm.calls[0].tools or [])[0]["function"]["description"]
    assert _roles(tract) == ["user", "assistant", "tool", "assistant", "tool"]
    with pytest.raises(NoLLMConfigured):
        toolkit.run(tract)
    with pytest.raises(ValueError, match="max_steps"):
        toolkit.run(tract, llm, max_steps=0)


def test_results_go_through_the_tool_result_hooks(tract: Tract) -> None:
    tract.user("look")
    tract.on("tool_result", lambda pending: pending.edit_result(pending.content.upper() + "!"))
    llm = ScriptedLLM([call("c1", "lookup", {"key": "a"}), "ok"])
    toolkit.run(tract, llm, ToolExecutor(tract, profile=None, tools=[lookup]))
    result_commit = tract.compile().commit_ids[2]
    assert tract.compile().messages[2].content == "1!"
    assert tract.original_of(result_commit) == "1"
    (usage,) = tract.tool_usages()
    assert usage.result_commit == result_commit
    assert usage.result == "1"


def test_a_rejected_result_is_replaced_by_a_withheld_notice(tract: Tract) -> None:
    tract.user("look")
    tract.on("tool_result", lambda pending: pending.reject("secret"))
    llm = ScriptedLLM([call("c1", "lookup", {"key": "a"}), "ok"])
    toolkit.run(tract, llm, ToolExecutor(tract, profile=None, tools=[lookup]))
    message = tract.compile().messages[2]
    assert (message.content, message.is_error) == (WITHHELD, True)
    (usage,) = tract.tool_usages()
    assert usage.status == "success"  # the tool ran; its usage is still linked from the notice


@tool
def dump(*, context: ToolContext) -> str:
    """Return more than a store can hold."""
    return "x" * (MAX_OBJECT_BYTES + 1)


def test_a_result_too_large_to_store_is_answered_by_an_error_and_the_loop_goes_on(tract: Tract) -> None:
    tract.user("dump it")
    llm = ScriptedLLM([call("c1", "dump", {}), "I will ask for less."])
    result = toolkit.run(tract, llm, ToolExecutor(tract, profile=None, tools=[dump]))
    assert (result.stop_reason, result.text) == ("done", "I will ask for less.")
    message = tract.compile().messages[2]
    assert message.is_error
    assert message.content.startswith("The tool ran, but its result (")
    assert f"limit of {MAX_OBJECT_BYTES:,} bytes" in message.content
    (usage,) = tract.tool_usages()
    assert (usage.status, usage.result_commit) == ("success", tract.compile().commit_ids[2])


def test_context_changes_land_after_the_steps_tool_results(tract: Tract) -> None:
    tract.system("Keep notes.")
    tract.user("remember x=1 and check status")
    llm = ScriptedLLM(
        [
            calls(("c1", "commit", {"content": "note: x=1", "role": "user"}), ("c2", "status", {})),
            "noted",
        ]
    )
    toolkit.run(tract, llm, ToolExecutor(tract, profile="self"))
    messages = tract.compile().messages
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "tool", "user", "assistant"]
    assert (
        messages[3].content
        == "The user message will be committed. It takes effect right after this turn's tool results are committed."
    )
    assert messages[5].content == "note: x=1"
    # the model's second call was well formed: each result follows its call
    sent = llm.calls[1].messages
    assert [m.role for m in sent] == ["system", "user", "assistant", "tool", "tool", "user"]


def test_reset_and_branch_from_a_step(tract: Tract) -> None:
    tract.user("first")
    keep = tract.assistant("first answer")
    tract.user("a bad turn")
    llm = ScriptedLLM(
        [
            call("c1", "reset", {"target": keep.commit_id[:10]}),
            call("c2", "branch", {"name": "explore"}),
            "on the branch",
        ]
    )
    result = toolkit.run(tract, llm, ToolExecutor(tract, profile="self"))
    assert result.text == "on the branch"
    # after the reset the model saw the context at `keep` only
    assert [m.content for m in llm.calls[1].messages] == ["first", "first answer"]
    assert tract.current_branch == "explore"
    assert _roles(tract) == ["user", "assistant", "assistant", "tool", "assistant"]
    # the reset step's tool turn is on main's abandoned tip, still in the reflog
    assert "reset --soft" in [entry.operation for entry in tract.reflog("main")]


def test_a_deferred_change_that_fails_is_reported_to_the_model(tract: Tract) -> None:
    base = tract.user("base")
    tract.branch("other", switch=False)
    tract.commit(
        {"type": "dialogue", "role": "user", "text": "ours"}, operation="edit", edit_target=base.commit_id
    )
    with Tract(tract.store, owns_store=False, branch="other") as other:
        other.commit(
            {"type": "dialogue", "role": "user", "text": "theirs"},
            operation="edit",
            edit_target=base.commit_id,
        )
    tract.switch("main")
    tract.set_tools([unrelated.to_openai()])  # the branch's: the loop's model never sees it
    llm = ScriptedLLM([call("c1", "merge", {"source": "other"}), "ok"])
    ex = ToolExecutor(tract, profile="full")
    toolkit.run(tract, llm, ex)
    compiled = tract.compile()
    messages = compiled.messages
    assert (
        messages[2].content
        == "other will be merged. It takes effect right after this turn's tool results are committed."
    )
    assert (messages[3].role, messages[3].name) == ("user", "tractkv")
    assert messages[3].content.startswith(
        "[merge could not be applied after the tool results: 1 merge conflict(s)"
    )
    assert messages[-1].content == "ok"
    seen = _tool_names(ex.schemas("openai"))
    for oid in compiled.commit_ids[1:]:  # the run's commits, the note included: the tools the model saw
        assert _tool_names(tract.compile(at=oid).tools) == seen


def test_open_calls_at_head_are_answered_before_the_model_is_asked(tract: Tract) -> None:
    tract.user("hi")
    tract.assistant("", tool_calls=[{"id": "c0", "name": "lookup", "arguments": {"key": "b"}}])
    llm = ScriptedLLM(["b is 2"])
    result = toolkit.run(tract, llm, ToolExecutor(tract, profile=None, tools=[lookup]))
    assert result.text == "b is 2"
    assert [m.role for m in llm.calls[0].messages] == ["user", "assistant", "tool"]
    assert llm.calls[0].messages[2].content == "2"
    assert [u.tool_call_id for u in tract.tool_usages()] == ["c0"]


def test_stats_percentiles_use_recorded_durations(open_tract: Callable[..., Tract]) -> None:
    clock = FakeClock(step=0)
    t = open_tract(clock=clock)

    @tool
    def work(ms: int, *, context: ToolContext) -> str:
        """Work for a while."""
        clock.advance_ms(ms)
        return "done"

    t.user("go")
    durations = [10, 20, 30, 40, 1000]
    script: list[Any] = [call(f"c{i}", "work", {"ms": ms}) for i, ms in enumerate(durations)] + ["ok"]
    toolkit.run(
        t, ScriptedLLM(script), ToolExecutor(t, profile=None, tools=[work], clock=clock), max_steps=10
    )
    stats = t.tool_usage_stats()["work"]
    assert (stats.count, stats.success, stats.error, stats.p50_ms, stats.p95_ms) == (5, 5, 0, 30.0, 1000.0)
    assert stats.to_json()["success_rate"] == 1.0


def test_export_json_and_markdown(tract: Tract) -> None:
    tract.user("What is a?")
    llm = ScriptedLLM(
        [call("c1", "delegate", {"task": "find a"}), call("k1", "lookup", {"key": "a"}), "1", "a=1"]
    )
    toolkit.run(tract, llm, ToolExecutor(tract, profile=None, tools=[delegate, lookup]))
    data = json.loads(toolkit.export(tract, "json"))
    assert data["format"] == "tractkv-conversation"
    assert data["branch"] == "main"
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "tool", "assistant"]
    (tree,) = data["messages"][2]["tool_usages"]
    assert tree["tool_name"] == "delegate"
    assert [c["tool_name"] for c in tree["children"]] == ["lookup"]
    assert tree["children"][0]["parent_id"] == tree["id"]
    assert data["tool_usages"] == [tree]
    assert set(data["tool_usage_stats"]) == {"delegate", "lookup"}
    assert toolkit.export(tract, "json") == toolkit.export(tract, "json")  # deterministic
    md = toolkit.export(tract, "markdown")
    assert md.startswith("# Conversation on branch `main`")
    assert "- ✓ delegate success" in md
    assert "  - ✓ lookup success" in md
    assert "| delegate | 1 | 1 | 0 | 0 | 100% |" in md
    with pytest.raises(ValueError, match="format"):
        toolkit.export(tract, "html")


def test_a_kept_child_branch_merged_back_shows_each_usage_once(tract: Tract) -> None:
    @tool
    def helper(task: str, *, context: ToolContext) -> str:
        """Delegate and keep the helper's branch."""
        return context.run_child(task, tools=["lookup"], branch="helper").text

    tract.user("q")
    llm = ScriptedLLM([call("c1", "helper", {"task": "x"}), call("k1", "lookup", {"key": "a"}), "1", "done"])
    toolkit.run(tract, llm, ToolExecutor(tract, profile=None, tools=[helper, lookup]))
    assert [b.name for b in tract.list_branches()] == ["helper", "main"]
    (delegated,) = tract.tool_usages(name="helper")
    with Tract(tract.store, owns_store=False, branch="helper") as child:
        # on the child's own branch its usage is top-level there, with its parent's id
        assert [(u.tool_name, u.parent_id) for u in child.tool_usages()] == [("lookup", delegated.id)]
    tract.switch("main")
    assert tract.merge("helper", strategy="ours").kind == "merge"
    (tree,) = tract.usage_tree()
    assert [(d, u.tool_name) for d, u in tree.walk()] == [(0, "helper"), (1, "lookup")]


def test_export_marks_placeholder_results_and_lists_repairs(tract: Tract) -> None:
    tract.user("Weather?")
    call_info = tract.assistant(tool_calls=[{"id": "w1", "name": "weather", "arguments": {}}])
    tract.user("Never mind.")
    data = json.loads(toolkit.export(tract, "json"))
    placeholder = data["messages"][2]
    assert placeholder["role"] == "tool"
    assert placeholder["placeholder"] is True
    assert placeholder["commit"] == call_info.commit_id
    assert [m.get("placeholder", False) for m in data["messages"]] == [False, False, True, False]
    assert [(r["kind"], r["call_id"]) for r in data["repairs"]] == [("placeholder_result", "w1")]


@tool
def unrelated(x: int, *, context: ToolContext) -> str:
    """A tool set on the branch but never given to the loop's model."""
    return str(x)


def test_every_commit_of_a_run_records_the_tools_the_model_saw(tract: Tract) -> None:
    """Issue 29 item 8: the assistant commits carried the executor's tools and the tool results the branch's
    set_tools, so compile(at=<result>) reported tools the model never saw."""
    tract.set_tools([unrelated.to_openai()])
    tract.user("What are a and b?")
    llm = ScriptedLLM([calls(("k1", "lookup", {"key": "a"}), ("k2", "lookup", {"key": "b"})), "a=1, b=2"])
    ex = ToolExecutor(tract, profile=None, tools=[lookup])
    start = tract.head

    result = toolkit.run(tract, llm, ex, max_steps=3)

    assert result.stop_reason == "done"
    seen = {t["function"]["name"] for t in ex.schemas("openai")}
    run_commits = [
        i.commit_id for i in tract.log() if i.commit_id != start and i.role in ("assistant", "tool")
    ]
    assert len(run_commits) == 4  # call, two results, answer
    for oid in run_commits:
        assert _tool_names(tract.compile(at=oid).tools) == seen, oid
    assert _tool_names(tract.compile().tools) == seen


def _tool_names(tools: Any) -> set[str]:
    return {t["function"]["name"] if "function" in t else t["name"] for t in tools}
