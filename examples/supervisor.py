"""A supervisor agent that manages a research agent's context through the ``supervisor`` tool profile.

The research agent answers wrongly. The supervisor reads the agent's context (``compile``), moves the agent
to a new branch started before the wrong answer (``branch``) and adds a note there (``commit``); the agent
then runs again on that branch and gets it right. The wrong attempt stays on the old branch.

Both agents share one store (two handles on two branches), so the supervisor's tool usage is recorded
in its own history. Run it with ``python examples/supervisor.py`` (offline, on scripted models).
"""

from __future__ import annotations

from typing import Any

from tractkv import Tract, toolkit
from tractkv.llm import LLMClient, ScriptedLLM
from tractkv.toolkit import ToolContext, ToolExecutor, tool


@tool
def search(query: str, *, context: ToolContext) -> str:
    """Look something up in the encyclopedia.

    Args:
        query: What to look up.
    """
    if "capital" in query:
        return "Canberra is the capital of Australia (since 1913)."
    return "Sydney is the largest city of Australia."


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A scripted assistant message calling one tool."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}],
    }


def show(title: str, t: Tract) -> None:
    print(f"--- {title} (branch {t.current_branch})")
    for m in t.compile().messages:
        text = m.content or "calls " + ", ".join(f"{c.name}({c.arguments})" for c in m.tool_calls)
        print(f"{m.role:>9}: {' '.join(text.split())[:100]}")


def main(llm: LLMClient | None = None, agent_llm: LLMClient | None = None) -> dict[str, Any]:
    """Run agent, supervisor, agent again; return the branches and answers. ``llm`` is the supervisor's model."""
    if agent_llm is None:  # the agent: a sloppy search and a wrong answer, then (corrected) the right one
        agent_llm = ScriptedLLM(
            [
                call("a1", "search", {"query": "Australia biggest city"}),
                "The capital of Australia is Sydney.",
                call("a2", "search", {"query": "capital of Australia"}),
                "The capital of Australia is Canberra.",
            ]
        )
    if llm is None:  # the supervisor: read the agent's context, branch before the answer, leave a note
        llm = ScriptedLLM(
            [
                call("s1", "compile", {}),
                call("s2", "branch", {"name": "research-retry", "source": "research~1"}),
                call(
                    "s3",
                    "commit",
                    {"content": "Sydney is the largest city, not the capital. Search again.", "role": "user"},
                ),
                "Moved the agent to research-retry with a correction.",
            ]
        )

    with (
        Tract.open(branch="supervisor") as boss,
        Tract(boss.store, owns_store=False, branch="research") as agent,
    ):
        tools = ToolExecutor(agent, profile=None, tools=[search])
        agent.user("What is the capital of Australia?")
        first = toolkit.run(agent, agent_llm, tools).text
        show("research agent", agent)

        boss.system("You supervise a research agent. Check its work and correct its course.")
        boss.user("Review the research agent's last answer.")
        report = toolkit.run(
            boss, llm, ToolExecutor(agent, profile="supervisor")
        )  # the tools act on the agent
        show("supervisor", boss)

        second = toolkit.run(agent, agent_llm, tools).text
        show("research agent, after supervision", agent)
        return {
            "first_answer": first,
            "report": report.text,
            "agent_branch": agent.current_branch,
            "second_answer": second,
            "old_branch_answer": agent.compile(at="research").messages[-1].content,
            "supervisor_tools": [u.tool_name for u in boss.tool_usages()],
        }


if __name__ == "__main__":
    main()
