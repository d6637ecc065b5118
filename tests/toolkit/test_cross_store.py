"""A supervisor whose managed agent lives in another store (issue 16, item 8): the usage of the supervisor's
calls is recorded where the calls are, and nothing is left behind in the managed store."""

from __future__ import annotations

from tractkv import Tract, toolkit
from tractkv.llm import ScriptedLLM
from tractkv.store import MemoryStore, Table, fsck
from tractkv.toolkit import ToolContext, ToolExecutor

from .conftest import call


def test_a_supervisor_in_another_store_leaves_no_rows_in_the_managed_store() -> None:
    with Tract(MemoryStore()) as agent, Tract(MemoryStore()) as supervisor:
        agent.user("agent task")
        agent.assistant("agent working")
        supervisor.user("Supervise the agent.")
        llm = ScriptedLLM(
            [
                call("s1", "compile", {}),
                call("s2", "commit", {"content": "Focus on the task.", "role": "system"}),
                "supervised",
            ]
        )
        toolkit.run(supervisor, llm, ToolExecutor(agent, profile="supervisor"))
        assert agent.compile().messages[-1].content == "Focus on the task."
        # no awaiting-link (or any) row anywhere: the records are linked from the supervisor's branch
        assert list(agent.store.table_iter(Table.USAGE)) == []
        assert list(supervisor.store.table_iter(Table.USAGE)) == []
        usages = supervisor.tool_usages()
        assert [(u.tool_name, u.status) for u in usages] == [("compile", "success"), ("commit", "success")]
        assert all(u.result_commit is not None for u in usages)
        assert agent.tool_usages() == []
        # the managed store holds no usage record (nothing there to collect), and both stores are sound
        assert not any(
            kind == "usage" for kind in (agent.store.get(o).KIND for o, _ in agent.store.iter_raw_objects())
        )
        assert fsck(agent.store).ok
        assert fsck(supervisor.store).ok


def test_nested_calls_of_a_cross_store_supervisor_tool_nest_in_the_supervisors_tree() -> None:
    with Tract(MemoryStore()) as agent, Tract(MemoryStore()) as supervisor:
        agent.user("agent task")
        ex = ToolExecutor(agent, profile="supervisor")

        @ex.register
        def review(*, context: ToolContext) -> str:
            """Review the managed agent's context."""
            return context.execute("status").output[:20]

        supervisor.user("Review it.")
        toolkit.run(supervisor, ScriptedLLM([call("r1", "review"), "done"]), ex)
        (tree,) = supervisor.usage_tree()
        assert [(d, u.tool_name) for d, u in tree.walk()] == [(0, "review"), (1, "status")]
        assert list(agent.store.table_iter(Table.USAGE)) == []
        assert fsck(supervisor.store).ok
        assert fsck(agent.store).ok
