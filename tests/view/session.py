"""A session that exercises every page of the viewer: tools (two versions of one), nested tool executions
with an error, a branch and a merge, an edit, an annotation, a compression, and a hostile message."""

from __future__ import annotations

import json
from typing import Any

from tractkv import Tract, toolkit
from tractkv.llm import ScriptedLLM
from tractkv.toolkit import ToolContext, ToolExecutor, tool

HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'


@tool
def search(query: str, *, context: ToolContext) -> str:
    """Search the notes for a query."""
    return f"3 notes mention {query}"


@tool
def lookup(key: str, *, context: ToolContext) -> str:
    """Look a key up; fails on unknown keys."""
    raise KeyError(f"no entry for {key}")


@tool
def research(topic: str, *, context: ToolContext) -> str:
    """Research a topic: searches twice, looks one fact up."""
    first = context.execute("search", {"query": topic})
    second = context.execute("search", {"query": topic + " history"})
    missing = context.execute("lookup", {"key": topic})
    return f"{first.output}; {second.output}; lookup: {missing.output}"


def call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        ],
    }


def build(t: Tract) -> dict[str, str]:
    """Fill ``t`` (on main); returns the interesting commit ids by name."""
    ids: dict[str, str] = {}
    ids["system"] = t.system("You are a careful research assistant.").commit_id
    ids["hostile"] = t.user(HOSTILE).commit_id
    ex = ToolExecutor(t, profile=None, tools=[research, search, lookup])
    t.user("Research LMDB for me.")
    toolkit.run(
        t, ScriptedLLM([call("call-1", "research", {"topic": "LMDB"}), "LMDB is a B+tree store."]), ex
    )
    ids["answer"] = t.head or ""
    ids["question"] = t.user("And what about CBOR?").commit_id
    ids["edit"] = t.commit(
        {"type": "dialogue", "role": "user", "text": "And what about canonical CBOR?"},
        operation="edit",
        edit_target=ids["question"],
    ).commit_id
    ids["annotate"] = t.annotate(ids["hostile"], "pinned", "keep the odd message in view").commit_id
    # a second version of the search tool's schema, set on a side branch, merged back
    t.branch("explore")
    schemas = ex.schemas()
    changed = [dict(s) for s in schemas]
    changed[1] = json.loads(json.dumps(changed[1]))
    changed[1]["function"]["description"] = "Search the notes (newest first) for a query."
    t.set_tools(changed)
    t.user("Explore: compare LMDB and SQLite.")
    t.assistant("SQLite is relational; LMDB is a key-value store.")
    t.switch("main")
    t.user("Meanwhile on main: anything else?")
    ids["merge"] = t.merge("explore").head or ""
    ids["compress"] = t.compress(
        from_commit=ids["system"], to_commit=ids["answer"], content="Summary: LMDB researched."
    ).commit_id
    return ids
