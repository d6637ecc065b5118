"""Every ``ToolExecutor.execute`` records a usage, whoever calls it (issue 33 item 6).

A direct call (a script, an MCP client's ``tools/call``) leaves a record kept and shown from the local
``usage`` table until a commit links it; the agent loop links each execution's record exactly once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tractkv import Tract, toolkit
from tractkv.engine.usage import PendingUsage, iter_pending
from tractkv.llm import ScriptedLLM
from tractkv.model import object_id
from tractkv.store import Table
from tractkv.toolkit import ToolContext, ToolExecutor, tool

from .conftest import FakeClock, call, calls


@tool
def lookup(key: str, *, context: ToolContext) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return {"a": "1", "b": "2"}.get(key, "missing")


@tool
def explode(x: int, *, context: ToolContext) -> str:
    """Always raises."""
    raise RuntimeError(f"cannot handle {x}")


@tool
def both(*, context: ToolContext) -> str:
    """Look up a and b with nested calls."""
    return "+".join(context.execute("lookup", {"key": k}).output for k in ("a", "b"))


def _executor(t: Tract) -> ToolExecutor:
    return ToolExecutor(t, profile=None, tools=[lookup, explode, both])


def _rows(t: Tract) -> list[PendingUsage]:
    return list(iter_pending(t.store))


def test_a_direct_execute_records_one_usage_with_its_arguments_and_result(
    open_tract: Callable[..., Tract], clock: FakeClock
) -> None:
    t = open_tract()
    t.user("hello")
    result = _executor(t).execute("lookup", {"key": "a"})
    assert (result.success, result.output) == (True, "1")
    (usage,) = t.tool_usages()
    assert (usage.id, usage.tool_name, usage.status) == (result.usage_id, "lookup", "success")
    assert (usage.arguments, usage.result, usage.error) == ({"key": "a"}, "1", None)
    assert (usage.parent_id, usage.commit_id, usage.result_commit) == (None, None, None)
    assert usage.oid == object_id(result.usage_objects[-1])
    assert t.tool_usage_stats()["lookup"].count == 1
    t.close()
    clock.advance_ms(1000 * 3600 * 100)
    again = open_tract()  # another handle on the same store: the record lasts, and gc keeps it
    again.gc(min_age_hours=1)
    (kept,) = again.tool_usages()
    assert kept == usage


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("explode", {"x": 3}, "RuntimeError: cannot handle 3"),  # the handler raised (it had a row)
        ("nope", {"q": 1}, "unknown tool 'nope'"),  # refused before any row was written
        ("lookup", {"key": 5}, "invalid arguments"),
        ("lookup", {"key": "a", "extra": 1}, "undeclared argument(s) 'extra'"),
    ],
)
def test_a_direct_execute_that_fails_records_its_error(
    tract: Tract, name: str, arguments: dict[str, Any], error: str
) -> None:
    result = _executor(tract).execute(name, arguments)
    assert not result.success
    assert error in result.error
    (usage,) = tract.tool_usages()
    assert (usage.id, usage.tool_name, usage.status) == (result.usage_id, name, "error")
    assert (usage.arguments, usage.error, usage.result) == (arguments, result.error, None)
    ((_, raw),) = tract.store.table_iter(Table.USAGE)
    assert PendingUsage.from_row(raw).record == object_id(result.usage_objects[-1])


def test_the_loop_records_exactly_one_usage_per_execution_and_leaves_no_row(tract: Tract) -> None:
    tract.user("Look things up.")
    llm = ScriptedLLM(
        [
            calls(("c1", "lookup", {"key": "a"}), ("c2", "explode", {"x": 1}), ("c3", "nope", {})),
            call("c4", "both"),
            "done",
        ]
    )
    ex = _executor(tract)
    assert toolkit.run(tract, llm, ex).text == "done"
    usages = tract.tool_usages()
    top = [u for u in usages if u.parent_id is None]
    assert [(u.tool_call_id, u.tool_name, u.status) for u in top] == [
        ("c1", "lookup", "success"),
        ("c2", "explode", "error"),
        ("c3", "nope", "error"),
        ("c4", "both", "success"),
    ]
    assert len({u.id for u in usages}) == len(usages) == 6  # the 4 calls and both's 2 nested lookups
    assert all(u.result_commit is not None for u in top)  # each linked from its tool result
    assert _rows(tract) == []  # and no marker is left behind: recorded once, on the branch


def test_nested_executions_of_a_direct_execute_link_to_their_parent(tract: Tract) -> None:
    result = _executor(tract).execute("both", {})
    assert result.output == "1+2"
    (tree,) = tract.usage_tree()
    assert (tree.usage.id, tree.usage.tool_name, tree.usage.status) == (result.usage_id, "both", "success")
    assert [(c.usage.tool_name, c.usage.arguments, c.usage.parent_id) for c in tree.children] == [
        ("lookup", {"key": "a"}, result.usage_id),
        ("lookup", {"key": "b"}, result.usage_id),
    ]
    assert tree.usage.children == tuple(c.usage.id for c in tree.children)
    assert [r.usage_id for r in _rows(tract)] == [result.usage_id]  # nested rows retired into the parent's
    assert len(tract.tool_usages()) == 3


def test_linking_a_direct_execution_retires_its_marker(tract: Tract) -> None:
    tract.user("Look a up.")
    asked = tract.assistant("", tool_calls=[{"id": "c1", "name": "lookup", "arguments": {"key": "a"}}])
    result = _executor(tract).execute("lookup", {"key": "a"}, tool_call_id="c1", commit=asked.commit_id)
    assert [r.output for r in _rows(tract)] == ["1"]  # answering a call: the marker keeps the output
    answered = tract.tool_result("c1", "lookup", result.output, usages=result.usage_objects)
    assert _rows(tract) == []
    (usage,) = tract.tool_usages()
    assert (usage.id, usage.commit_id, usage.result_commit) == (
        result.usage_id,
        asked.commit_id,
        answered.commit_id,
    )


def test_a_link_inside_a_batch_retires_the_marker_only_when_the_batch_lands(tract: Tract) -> None:
    tract.user("Look a up.")
    asked = tract.assistant("", tool_calls=[{"id": "c1", "name": "lookup", "arguments": {"key": "a"}}])
    result = _executor(tract).execute("lookup", {"key": "a"}, tool_call_id="c1", commit=asked.commit_id)

    def abandoned_batch() -> None:
        with tract.batch():
            tract.tool_result("c1", "lookup", result.output, usages=result.usage_objects)
            raise RuntimeError("abandon the batch")

    with pytest.raises(RuntimeError, match="abandon"):
        abandoned_batch()
    assert [r.usage_id for r in _rows(tract)] == [result.usage_id]  # nothing linked it: still recorded
    (usage,) = tract.tool_usages()
    assert usage.result_commit is None
    with tract.batch():
        tract.tool_result("c1", "lookup", result.output, usages=result.usage_objects)
        assert [r.usage_id for r in _rows(tract)] == [result.usage_id]  # not before the batch lands
    assert _rows(tract) == []
    (usage,) = tract.tool_usages()
    assert usage.result_commit is not None
