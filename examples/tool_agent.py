"""A tool-calling agent whose bulky tool results are summarized, then compressed further.

Shows: tools defined with ``@tool``, ``configure_tool_summarization`` (a fetched page is summarized before
it enters the context, the raw text stays recoverable with ``original_of``), the agent loop ``toolkit.run(t, ...)``, and
``compress_tool_calls``, which summarizes earlier tool results in place to shrink the context.

Run it with ``python examples/tool_agent.py``. It runs offline on scripted models (``ScriptedLLM``); pass
real clients to ``main`` (e.g. ``tractkv.llm.OpenAIClient``) to run it against a provider.
"""

from __future__ import annotations

from typing import Any

from tractkv import Tract, toolkit
from tractkv.llm import LLMClient, ScriptedLLM
from tractkv.toolkit import ToolContext, ToolExecutor, tool

PAGE = "\n".join(f"Line {i}: the Pro plan costs 20 EUR a month; Team costs 50 EUR." for i in range(60))


@tool
def search(query: str, *, context: ToolContext) -> str:
    """Search the web and list the matching pages.

    Args:
        query: What to look for.
    """
    return "\n".join(f"https://example.com/pricing/{i} - {query} pricing, page {i} of 8" for i in range(8))


@tool
def fetch_page(url: str, *, context: ToolContext) -> str:
    """Fetch a web page as text.

    Args:
        url: The page's address.
    """
    return PAGE


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A scripted assistant message calling one tool."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}],
    }


def main(llm: LLMClient | None = None, summarizer: LLMClient | None = None) -> dict[str, Any]:
    """Run the agent; return what happened (answer, summaries, token counts)."""
    if llm is None:  # the agent's model: search, fetch the first hit, answer
        llm = ScriptedLLM(
            [
                call("c1", "search", {"query": "tractkv"}),
                call("c2", "fetch_page", {"url": "https://example.com/pricing/0"}),
                "Pro costs 20 EUR a month and Team 50 EUR.",
            ]
        )
    if summarizer is None:  # a separate model writes the summaries (one for the page, one for the search)
        summarizer = ScriptedLLM(
            ["Pro plan: 20 EUR/month. Team plan: 50 EUR/month.", "8 pricing pages found."]
        )

    with Tract.open(llm=summarizer) as t:  # in memory; Tract.open(path) keeps it on disk
        # fetch_page results are always summarized with these instructions; others only above 200 tokens
        t.configure_tool_summarization(
            instructions={"fetch_page": "Keep only the prices, per plan."}, auto_threshold=200
        )
        executor = ToolExecutor(t, profile=None, tools=[search, fetch_page])  # our tools, no built-ins
        t.system("You answer questions about product pricing. Use the tools.")
        t.user("How much does tractkv Pro cost?")
        result = toolkit.run(t, llm, executor, max_steps=5)

        for m in t.compile().messages:
            text = m.content or "calls " + ", ".join(c.name for c in m.tool_calls)
            print(f"{m.role:>9}: {' '.join(text.split())[:90]}")
        (page,) = t.find_tool_results("fetch_page")
        raw = t.original_of(page.commit_id)
        print(f"fetch_page: {len(raw)} characters fetched, {page.token_count} tokens kept in the context")

        before = t.compile().token_count
        compressed = t.compress_tool_calls(name="search")  # the search hits served their purpose
        after = t.compile().token_count
        print(f"compress_tool_calls: {before} -> {after} tokens")
        return {
            "answer": result.text,
            "page_in_context": page.content["text"],
            "page_original": raw,
            "compressed": len(compressed),
            "tokens_before": before,
            "tokens_after": after,
        }


if __name__ == "__main__":
    main()
