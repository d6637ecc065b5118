"""Tool results that are more than text (``ToolResult.parts``) and tools that change while a loop runs
(``ToolExecutor.add_refresher``): what the MCP client builds on, pinned without MCP."""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest

from tractkv import InvalidInput, Tract
from tractkv.llm import ScriptedLLM
from tractkv.toolkit import ToolContext, ToolExecutor, ToolResult, run

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def _call(call_id: str, name: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": {}}]}


def test_a_result_with_parts_is_committed_as_parts_and_recorded_as_text() -> None:
    t = Tract.open()
    executor = ToolExecutor(t)

    @executor.register
    def chart(*, context: ToolContext) -> ToolResult:
        """Draw the chart."""
        image = {"type": "image", "data": PNG, "media_type": "image/png"}
        return ToolResult("chart", True, output="the chart [image]", parts=["the chart", image])

    t.user("draw")
    run(t, ScriptedLLM([_call("c1", "chart"), "done"]), executor)
    block = t.compile().to_anthropic_params()["messages"][2]["content"][0]
    assert block["content"][1]["source"]["data"] == base64.b64encode(PNG).decode()
    assert block["content"][0] == {"type": "text", "text": "the chart"}
    assert t.tool_usages()[0].result == "the chart [image]"  # the usage record keeps the text


def test_parts_the_store_refuses_become_the_text_with_a_note() -> None:
    t = Tract.open()
    executor = ToolExecutor(t)

    @executor.register
    def chart(*, context: ToolContext) -> ToolResult:
        """Draw the chart."""
        fake = {"type": "image", "data": b"not a png", "media_type": "image/png"}
        return ToolResult("chart", True, output="the chart", parts=["the chart", fake])

    t.user("draw")
    run(t, ScriptedLLM([_call("c1", "chart"), "done"]), executor)
    result = t.compile().messages[2]
    assert result.role == "tool"
    assert result.content.startswith("the chart\n[the result's parts could not be kept:")


def test_failed_results_and_nested_reviews_drop_parts() -> None:
    assert ToolResult("x", False, error="no", parts=["a", "b"]).content == "Error: no"
    assert ToolResult("x", True, output="a").content == "a"
    assert ToolResult("x", True, output="ab", parts=("a", "b")).content == ["a", "b"]


def test_refreshers_run_before_the_tools_are_listed_or_run_and_a_failing_one_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    t = Tract.open()
    executor = ToolExecutor(t)
    calls: list[str] = []

    def late(*, context: ToolContext) -> str:
        """A tool that appears during the run."""
        return "late"

    def refresh() -> None:
        calls.append("refresh")
        if len(calls) == 3 and executor.get("late") is None:  # the second step's listing
            executor.register(late)

    def broken() -> None:
        raise RuntimeError("source down")

    executor.add_refresher(refresh)
    executor.add_refresher(broken)

    @executor.register
    def first(*, context: ToolContext) -> str:
        """The first tool."""
        return "first"

    llm = ScriptedLLM([_call("c1", "first"), _call("c2", "late"), "done"])
    t.user("go")
    with caplog.at_level(logging.ERROR, logger="tractkv.toolkit.executor"):
        result = run(t, llm, executor)
    assert result.stop_reason == "done"
    assert [[tool["function"]["name"] for tool in call.tools or ()] for call in llm.calls] == [
        ["first"],
        ["first", "late"],  # read again at the second step: the new tool is offered and recorded
        ["first", "late"],
    ]
    assert [m.content for m in t.compile().messages if m.role == "tool"] == ["first", "late"]
    assert "source down" in caplog.text
    with pytest.raises(InvalidInput, match="add_refresher"):
        executor.add_refresher("not callable")  # type: ignore[arg-type]


def test_only_a_schema_that_says_so_and_a_kwargs_handler_take_undeclared_arguments() -> None:
    from tractkv.toolkit import ToolDefinition

    def anything(*, context: ToolContext, **arguments: Any) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(arguments.items()))

    def named(*, context: ToolContext, path: str = "") -> str:
        return path

    open_schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "additionalProperties": {"type": "integer"},
    }
    closed = {"type": "object", "properties": {"path": {"type": "string"}}}
    executor = ToolExecutor(Tract.open())
    executor.register(ToolDefinition("open", "Takes more.", open_schema, anything))
    executor.register(ToolDefinition("closed", "Takes path.", closed, anything))
    executor.register(ToolDefinition("named", "No kwargs.", open_schema, named))
    assert executor.execute("open", {"path": "a", "n": 2}).output == "n=2,path=a"
    wrong = executor.execute("open", {"n": "two"})  # checked as the schema says: integers only
    assert not wrong.success
    assert "expected integer" in wrong.error
    assert "undeclared argument(s) 'n'" in executor.execute("closed", {"n": 2}).error
    assert "undeclared argument(s) 'n'" in executor.execute("named", {"n": 2}).error
