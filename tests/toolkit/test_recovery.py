"""Recovery without a second run of a tool: a result that never landed, a handler cut short in-process;
and a supervisor managing another agent's context."""

from __future__ import annotations

import pytest

from tractkv import Tract, toolkit
from tractkv.llm import ScriptedLLM
from tractkv.store import Table
from tractkv.toolkit import ToolContext, ToolExecutor, tool
from tractkv.toolkit.loop import INTERRUPTED

from .conftest import call


def test_a_completed_call_whose_result_never_landed_is_not_run_again(tract: Tract) -> None:
    runs: list[str] = []

    @tool
    def charge(amount: int, *, context: ToolContext) -> str:
        """Charge a card (a side effect that must not happen twice)."""
        runs.append("charged")
        return f"charged {amount}"

    tract.user("pay 5")
    reply = tract.assistant("", tool_calls=[{"id": "c1", "name": "charge", "arguments": {"amount": 5}}])
    ex = ToolExecutor(tract, profile=None, tools=[charge])
    # what the loop does, up to a crash right before the result commit
    done = ex.execute("charge", {"amount": 5}, tool_call_id="c1", commit=reply.commit_id)
    assert runs == ["charged"]
    (shown,) = tract.tool_usages()  # visible from its record while it awaits the link
    assert (shown.id, shown.status, shown.result, shown.result_commit) == (
        done.usage_id,
        "success",
        "charged 5",
        None,
    )

    llm = ScriptedLLM(["paid"])
    result = toolkit.run(tract, llm, ex)
    assert runs == ["charged"]  # not again
    assert result.text == "paid"
    assert llm.calls[0].messages[-1].content == "charged 5"
    (linked,) = tract.tool_usages()
    assert linked.id == done.usage_id
    assert linked.result_commit == tract.compile().commit_ids[2]
    assert list(tract.store.table_iter(Table.USAGE)) == []


def test_a_handler_cut_short_in_process_shows_as_interrupted_at_once(tract: Tract) -> None:
    @tool
    def wait(*, context: ToolContext) -> str:
        """Wait for input."""
        raise KeyboardInterrupt

    tract.user("go")
    reply = tract.assistant("", tool_calls=[{"id": "c1", "name": "wait", "arguments": {}}])
    ex = ToolExecutor(tract, profile=None, tools=[wait])
    with pytest.raises(KeyboardInterrupt):
        ex.execute("wait", {}, tool_call_id="c1", commit=reply.commit_id)
    (usage,) = tract.tool_usages()
    assert usage.status == "interrupted"
    llm = ScriptedLLM(["ok"])
    toolkit.run(tract, llm, ex)
    assert llm.calls[0].messages[-1].content == f"Error: {INTERRUPTED}"
    (usage,) = tract.tool_usages()
    assert usage.status == "interrupted"
    assert usage.oid is not None


def test_a_supervisor_manages_another_agents_context(tract: Tract) -> None:
    with Tract(tract.store, owns_store=False, branch="agent") as agent:
        agent.user("agent task")
        agent.assistant("agent working")
        tract.switch("main")
        tract.user("Supervise the agent.")
        llm = ScriptedLLM(
            [
                call("s1", "compile", {}),
                call("s2", "commit", {"content": "Focus on the task.", "role": "system"}),
                "supervised",
            ]
        )
        toolkit.run(tract, llm, ToolExecutor(agent, profile="supervisor"))
        # the change to the managed context applied at once (it is not the context mid-turn)
        assert [m.content for m in agent.compile().messages] == [
            "agent task",
            "agent working",
            "Focus on the task.",
        ]
        assert "agent task" in tract.compile().messages[2].content
        assert "managed agent" in (llm.calls[0].tools or [])[0]["function"]["description"]
        assert [u.tool_name for u in tract.tool_usages()] == ["compile", "commit"]
        assert agent.tool_usages() == []  # the supervisor's history holds its tool usage
