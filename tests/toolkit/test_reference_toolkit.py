"""Issue 16, items 7 and 9: the toolkit as the reference (seed 004) describes it, and the foot-guns fixed.

The reference's import line, ``get_all_tools``, ``available_tools`` names, the ``commit`` and ``gc`` tools'
parameters; no built-in tool unless a profile is named; nested results through the result hooks; a handler
that commits while its call is open refused early; the compress summary's role; the summarizer's own model.
"""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

from tractkv import Tract, toolkit
from tractkv.engine.content import messages_to_anthropic, messages_to_openai
from tractkv.errors import InvalidInput, MalformedResponse
from tractkv.llm import ScriptedLLM
from tractkv.toolkit import ToolContext, ToolExecutor, get_all_tools, tool

from .conftest import call

# Seed 004, task 1 <verify> and the package's exports, with the package renamed (tract -> tractkv).
REFERENCE_IMPORT = (
    "from tractkv.toolkit import ToolDefinition, ToolProfile, get_all_tools, get_profile, SELF_PROFILE, "
    "SUPERVISOR_PROFILE, FULL_PROFILE; print('imports OK')"
)
REFERENCE_EXPORTS = (
    "from tractkv.toolkit import ToolDefinition, ToolProfile, ToolConfig, ToolExecutor, ToolResult, ToolCall, "
    "get_all_tools, get_profile, SELF_PROFILE, SUPERVISOR_PROFILE, FULL_PROFILE"
)


def test_the_reference_import_lines_run_verbatim() -> None:
    out = subprocess.run(
        [sys.executable, "-c", REFERENCE_IMPORT], capture_output=True, text=True, check=True
    ).stdout
    assert out == "imports OK\n"
    subprocess.run([sys.executable, "-c", REFERENCE_EXPORTS], check=True)
    from tractkv import ToolCall as EngineToolCall
    from tractkv.toolkit import ToolCall

    assert ToolCall is EngineToolCall


def test_get_all_tools_returns_the_15_definitions(tract: Tract) -> None:
    tools = get_all_tools(tract)
    assert [t.name for t in tools] == [
        "commit",
        "compile",
        "annotate",
        "status",
        "log",
        "diff",
        "compress",
        "branch",
        "switch",
        "merge",
        "reset",
        "checkout",
        "gc",
        "list_branches",
        "get_commit",
    ]
    assert all(t.description and t.parameters["type"] == "object" and t.handler for t in tools)
    with pytest.raises(InvalidInput, match="takes a Tract"):
        get_all_tools("not a tract")


def test_available_tools_are_names(tract: Tract) -> None:
    ex = ToolExecutor(tract, profile="self")
    assert ex.available_tools() == [
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
    assert [d.name for d in ex.definitions()] == ex.available_tools()


def test_no_built_in_tool_unless_a_profile_is_named(tract: Tract) -> None:
    ex = ToolExecutor(tract)

    @ex.register
    def add(a: int, b: int, *, context: ToolContext) -> int:
        """Add."""
        return a + b

    assert ex.available_tools() == ["add"]
    assert [s["function"]["name"] for s in ex.schemas()] == ["add"]
    assert len(ToolExecutor(tract, profile="full").available_tools()) == 15


def test_commit_tool_takes_content_objects_operation_and_metadata(tract: Tract) -> None:
    ex = ToolExecutor(tract, profile="full")
    schema = ex.get("commit").parameters  # type: ignore[union-attr]
    assert {"content", "role", "operation", "edit_target", "message", "metadata"} <= set(schema["properties"])
    done = ex.execute(
        "commit",
        {
            "content": {"type": "dialogue", "role": "user", "text": "hello"},
            "metadata": {"source": "test"},
            "message": "a note",
        },
    )
    assert done.success, done.error
    first = tract.log(limit=1)[0]
    assert (first.role, first.metadata, first.message) == ("user", {"source": "test"}, "a note")
    edited = ex.execute(
        "commit",
        {"content": "hello, world", "role": "user", "operation": "edit", "edit_target": first.commit_id},
    )
    assert edited.output.startswith("Edited user message "), edited
    assert [m.content for m in tract.compile().messages] == ["hello, world"]
    artifact = {"type": "artifact", "artifact_type": "code", "text": "print(1)"}
    assert ex.execute("commit", {"content": artifact}).success
    assert ex.execute("commit", {"content": "Be brief.", "role": "system"}).success
    assert [m.role for m in tract.compile().messages] == [
        "user",
        "user",
        "system",
    ]  # an artifact is shown as user
    # refusals come back as results, before anything is committed
    head = tract.head
    for args, problem in [
        ({"content": {"type": "dialogue", "role": "user"}}, "text"),
        ({"content": {"type": "dialogue", "role": "user", "text": "x"}, "role": "user"}, "role applies"),
        ({"content": "x", "operation": "edit"}, "needs edit_target"),
        ({"content": "x", "edit_target": first.commit_id}, "operation 'edit' only"),
        ({"content": "x", "operation": "edit", "edit_target": "nosuch"}, "nosuch"),
    ]:
        result = ex.execute("commit", args)
        assert not result.success, args
        assert problem in result.error, (args, result.error)
    assert tract.head == head


def test_gc_tool_takes_keep_branches(tract: Tract) -> None:
    tract.user("on main")
    tract.branch("side", switch=False)
    ex = ToolExecutor(tract, profile="full")
    assert "keep_branches" in ex.get("gc").parameters["properties"]  # type: ignore[union-attr]
    assert ex.execute("gc", {"min_age_hours": 0}).success
    assert {b.name for b in tract.list_branches()} == {"main", "side"}
    assert ex.execute("gc", {"min_age_hours": 0, "keep_branches": False}).success
    assert {b.name for b in tract.list_branches()} == {"main"}


# --- 9c: a handler committing while its call is open ---------------------------------------------------------


@tool
def note_directly(text: str, *, context: ToolContext) -> str:
    """Write a note into the context (wrongly, at once).

    Args:
        text: The note.
    """
    context.tract.user(text)
    return "noted"


@tool
def note_deferred(text: str, *, context: ToolContext) -> str:
    """Write a note into the context after this turn.

    Args:
        text: The note.
    """
    return context.defer(lambda: str(context.tract.user(text).commit_id), "will note")


@tool
def pin_first(*, context: ToolContext) -> str:
    """Pin the first message (an annotation adds no message: allowed at once)."""
    first = context.tract.compile().commit_ids[0]
    return str(context.tract.annotate(first, "pinned").commit_id)


def test_a_handler_committing_while_its_call_is_open_is_refused_naming_defer(tract: Tract) -> None:
    tract.user("take notes")
    llm = ScriptedLLM(
        [
            call("c1", "note_directly", {"text": "x=1"}),
            call("c2", "note_deferred", {"text": "y=2"}),
            call("c3", "pin_first", {}),
            "done",
        ]
    )
    result = toolkit.run(tract, llm, ToolExecutor(tract, tools=[note_directly, note_deferred, pin_first]))
    assert result.stop_reason == "done"
    messages = tract.compile().messages
    refused = messages[2]
    assert (refused.role, refused.is_error) == ("tool", True)
    assert "tried to commit while its tool call waits for its result" in refused.content
    assert "context.defer" in refused.content
    assert "x=1" not in [m.content for m in messages]  # nothing landed between call and result
    assert [m.role for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert messages[5].content == "y=2"  # deferred: after the step's result
    assert tract.status().message_count == len(messages)
    # outside an agent step nothing is open: the same handler commits at once
    assert ToolExecutor(tract, tools=[note_directly]).execute("note_directly", {"text": "z"}).success
    assert tract.compile().messages[-1].content == "z"


# --- 9b: nested results through the result hooks -------------------------------------------------------------


@tool
def fetch(url: str, *, context: ToolContext) -> str:
    """Fetch a page.

    Args:
        url: The page.
    """
    return "word " * 400


@tool
def research(url: str, *, context: ToolContext) -> str:
    """Fetch a page through the fetch tool and report it.

    Args:
        url: The page.
    """
    page = context.execute("fetch", {"url": url})
    return page.output if page.success else f"failed: {page.error}"


def test_nested_results_are_summarized_when_configured(tract: Tract) -> None:
    tract.configure_llm(None, summarizer=ScriptedLLM(["a page of words"]))
    tract.configure_tool_summarization(auto_threshold=100)
    ex = ToolExecutor(tract, tools=[fetch, research])
    out = ex.execute("research", {"url": "https://example.invalid/"})
    assert out.output == "a page of words"  # the handler got the summary, not 400 words
    nested = next(r for r in out.usage_objects if r.tool_name == "fetch")
    assert nested.result is not None
    assert nested.result.startswith("word word")  # the record keeps the raw output


def test_nested_results_go_through_hooks_edit_and_reject(tract: Tract) -> None:
    ex = ToolExecutor(tract, tools=[fetch, research])
    seen: list[str] = []

    def hook(pending: object) -> None:
        seen.append(pending.tool_name)  # type: ignore[attr-defined]
        if pending.tool_name == "fetch":  # type: ignore[attr-defined]
            pending.edit_result("short page")  # type: ignore[attr-defined]

    tract.on("tool_result", hook)
    assert ex.execute("research", {"url": "x"}).output == "short page"
    assert seen == ["fetch"]  # top-level results outside the loop are not committed: no hook
    tract.off("tool_result")
    tract.on("tool_result", lambda pending: pending.reject("secret"))
    out = ex.execute("research", {"url": "x"})
    assert out.output == "failed: The tool ran, but a tool_result hook withheld its result."


# --- 9d: the compress summary's role -----------------------------------------------------------------------


def test_compress_summary_keeps_turns_alternating_in_both_renderings(tract: Tract) -> None:
    tract.system("Be brief.")
    tract.user("q1")
    tract.assistant("a1")
    tract.user("q2")
    tract.assistant("a2")
    tract.compress(content="We talked about q1 and q2.")
    tract.user("q3")
    messages = tract.compile().messages
    assert [m.role for m in messages] == ["system", "assistant", "user"]
    openai = messages_to_openai(messages)
    assert [m["role"] for m in openai] == ["system", "assistant", "user"]
    anthropic = messages_to_anthropic(messages)["messages"]
    roles = [m["role"] for m in anthropic]
    assert roles == ["user", "assistant", "user"]  # the API's leading user turn, then alternation
    assert all(a != b for a, b in itertools.pairwise(roles))


def test_compress_in_an_agent_step_leaves_the_model_a_user_turn(tract: Tract) -> None:
    tract.user("work, then compress")
    llm = ScriptedLLM([call("c1", "compress", {"content": "Summary of the work."}), "carrying on"])
    toolkit.run(tract, llm, ToolExecutor(tract, profile="self"))
    sent = llm.calls[1].messages  # the context ended with the tool result: the summary speaks for that side
    assert [m.role for m in sent] == ["user"]
    assert [m["role"] for m in messages_to_anthropic(sent)["messages"]] == ["user"]
    assert [m.role for m in tract.compile().messages] == ["user", "assistant"]


# --- 9e: the summarizer's own model ------------------------------------------------------------------------


def test_a_shared_script_handing_the_summarizer_a_tool_call_is_loud(tract: Tract) -> None:
    shared = ScriptedLLM([call("c1", "fetch", {"url": "x"}), call("c2", "fetch", {"url": "y"}), "done"])
    tract.configure_llm(shared)
    tract.configure_tool_summarization(auto_threshold=100)
    tract.user("read x")
    with pytest.raises(MalformedResponse, match="summarizer=") as info:
        toolkit.run(tract, executor=ToolExecutor(tract, tools=[fetch]))
    assert "fetch" in str(info.value)
    assert [m.role for m in tract.compile().messages] == ["user", "assistant"]  # no wrong result committed


def test_the_summarizer_gets_its_own_model(tract: Tract) -> None:
    agent = ScriptedLLM([call("c1", "fetch", {"url": "x"}), "the page is about words"])
    summaries = ScriptedLLM(["words, repeated"])
    tract.configure_llm(agent, summarizer=summaries)
    assert tract.summarizer is summaries
    tract.configure_tool_summarization(auto_threshold=100)
    tract.user("read x")
    result = toolkit.run(tract, executor=ToolExecutor(tract, tools=[fetch]))
    assert result.text == "the page is about words"
    assert tract.compile().messages[2].content == "words, repeated"
    assert (agent.remaining, summaries.remaining) == (0, 0)
    tract.configure_llm(agent)
    assert tract.summarizer is agent  # default: the same model
    with pytest.raises(InvalidInput):
        tract.configure_llm(agent, summarizer="nope")  # type: ignore[arg-type]


def test_each_call_gets_its_own_context_and_nested_calls_share_the_bus(tract: Tract) -> None:
    seen: list[ToolContext] = []
    kinds: list[tuple[str, str]] = []

    @tool
    def probe(*, context: ToolContext) -> str:
        """Record the context."""
        seen.append(context)
        return "ok"

    @tool
    def outer(*, context: ToolContext) -> str:
        """Call probe twice."""
        seen.append(context)
        return context.execute("probe").output + context.execute("probe").output

    ex = ToolExecutor(tract, tools=[probe, outer])
    ex.events.subscribe("*", lambda event: kinds.append((event.kind, event.tool_name)))
    assert ex.execute("outer").output == "okok"
    assert len({id(c) for c in seen}) == 3  # a fresh, frozen context per call
    assert seen[1].parent_id == seen[2].parent_id == seen[0].usage_id
    assert [k for k, _ in kinds].count("tool_start") == 3  # the nested calls published on the same bus
