"""Nested orchestration: a tool that runs other tools and a sub-agent through its ``ToolContext``.

The ``report`` tool searches twice with ``context.execute`` and hands the hits to a writer sub-agent with
``context.run_child`` (a child agent loop on a temporary branch, with its own tool). Every nested execution
is recorded under the one that started it; the example prints that usage tree.

Run it with ``python examples/nested.py`` (offline, on a scripted model).
"""

from __future__ import annotations

from typing import Any

from tractkv import Tract, toolkit
from tractkv.llm import LLMClient, ScriptedLLM
from tractkv.toolkit import ToolContext, ToolExecutor, UsageNode, tool


@tool
def search(query: str, *, context: ToolContext) -> str:
    """Search the notes.

    Args:
        query: What to look for.
    """
    return f"3 notes mention {query!r}."


@tool
def count_words(text: str, *, context: ToolContext) -> str:
    """Count the words of a text.

    Args:
        text: The text.
    """
    return str(len(text.split()))


@tool
def report(topic: str, *, context: ToolContext) -> str:
    """Research a topic and write a short report on it.

    Args:
        topic: The topic.
    """
    hits = [context.execute("search", {"query": f"{topic} {aspect}"}).text for aspect in ("cost", "risk")]
    writer = context.run_child(
        "Write a two-sentence report from these findings:\n" + "\n".join(hits),
        system="You write short reports. Check their length with count_words.",
        tools=["count_words"],  # the child may call this tool of ours (and no other)
    )
    return writer.text


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A scripted assistant message calling one tool."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}],
    }


def print_tree(nodes: list[UsageNode]) -> list[str]:
    """Print each usage indented under the one it ran inside; return the lines."""
    lines = [
        f"{'  ' * depth}{u.tool_name} {u.status} {u.arguments}" for node in nodes for depth, u in node.walk()
    ]
    print("\n".join(lines))
    return lines


def main(llm: LLMClient | None = None) -> dict[str, Any]:
    """Run the orchestrator; return its answer, the usage tree and its printed lines."""
    if llm is None:  # replies in the order the calls happen: the parent, then the child loop, then the parent
        llm = ScriptedLLM(
            [
                call("c1", "report", {"topic": "caching"}),  # parent: run the report tool
                call("w1", "count_words", {"text": "Caching saves cost. It adds risk."}),  # child
                "Caching saves cost. It adds risk.",  # child's final text: report's result
                "Report: caching saves cost but adds risk.",  # parent's answer
            ]
        )
    with Tract.open() as t:
        executor = ToolExecutor(t, profile=None, tools=[search, count_words, report])
        t.user("Write me a report on caching.")
        result = toolkit.run(t, llm, executor, max_steps=4)
        print(f"answer: {result.text}\nusage tree:")
        tree = t.usage_tree()
        lines = print_tree(tree)
        return {"answer": result.text, "tree": tree, "lines": lines}


if __name__ == "__main__":
    main()
