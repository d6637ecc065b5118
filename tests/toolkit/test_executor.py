"""ToolExecutor: whitelisting, validation, failures as results, ToolContext, nesting, events, usage records."""

from __future__ import annotations

import threading
from typing import Any

import attrs
import pytest

from tractkv import Tract
from tractkv.engine.usage import PendingUsage
from tractkv.errors import InvalidInput
from tractkv.model import UsageRecord, object_id
from tractkv.store import Table
from tractkv.toolkit import EventBus, ToolContext, ToolDefinition, ToolEvent, ToolExecutor, ToolResult, tool

from .conftest import FakeClock


@tool
def echo(text: str, times: int = 1, *, context: ToolContext) -> str:
    """Repeat a text.

    Args:
        text: What to repeat.
        times: How often.
    """
    return text * times


@tool
def fail(reason: str = "boom", *, context: ToolContext) -> str:
    """Always raises."""
    raise RuntimeError(reason)


def _executor(t: Tract, *tools: Any, **kwargs: Any) -> ToolExecutor:
    return ToolExecutor(t, profile=None, tools=tools, **kwargs)


def test_a_user_tool_runs_and_leaves_a_success_record(tract: Tract) -> None:
    ex = _executor(tract, echo)
    result = ex.execute("echo", {"text": "ab", "times": 2})
    assert (result.tool_name, result.success, result.output, result.error) == ("echo", True, "abab", "")
    (record,) = result.usage_objects
    assert record.status == "success"
    assert record.result == "abab"
    assert record.arguments == {"text": "ab", "times": 2}
    assert record.completed_at is not None
    assert record.completed_at >= record.started_at
    assert record.usage_id == result.usage_id
    assert tract.store.get(object_id(record)) == record  # stored when it completed
    # its pending row became a marker holding the record (no call to answer: no output kept), so a
    # direct execution, which nothing links, is still shown
    ((_, raw),) = tract.store.table_iter(Table.USAGE)
    row = PendingUsage.from_row(raw)
    assert (row.record, row.output, row.status) == (object_id(record), None, "completed")
    assert [(u.id, u.status, u.result) for u in tract.tool_usages()] == [(result.usage_id, "success", "abab")]


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("nope", {}, "unknown tool 'nope'; available tools: echo, fail"),
        ("echo", {"text": "a", "color": "red"}, "undeclared argument(s) 'color'; echo takes: text, times"),
        ("echo", {}, "invalid arguments: arguments: missing required property 'text'"),
        ("echo", {"text": 1, "times": "2"}, "arguments.text: expected string, got integer"),
        ("echo", ["a"], "arguments must be a JSON object, not list"),
        ("echo", {"text": "a", "times": True}, "arguments.times: expected integer, got boolean"),
    ],
)
def test_bad_calls_are_error_results_and_the_handler_never_runs(
    tract: Tract, name: str, arguments: Any, message: str
) -> None:
    calls: list[Any] = []

    @tool
    def echo(text: str, times: int = 1, *, context: ToolContext) -> str:
        """Repeat."""
        calls.append(text)
        return text

    ex = _executor(tract, echo, fail)
    result = ex.execute(name, arguments)
    assert not result.success
    assert message in result.error
    assert result.text == f"Error: {result.error}"
    assert calls == []
    (record,) = result.usage_objects
    assert record.status == "error"
    assert record.error == result.error


def test_an_exception_inside_a_handler_is_an_error_result(tract: Tract) -> None:
    result = _executor(tract, fail).execute("fail", {"reason": "disk on fire"})
    assert result == ToolResult("fail", False, error="RuntimeError: disk on fire", usage_id=result.usage_id)
    assert result.usage_objects[0].status == "error"


def test_tractkv_errors_keep_their_message(tract: Tract) -> None:
    result = ToolExecutor(tract, profile="full").execute("get_commit", {"rev": "nosuchbranch"})
    assert not result.success
    assert result.error.startswith("unknown revision 'nosuchbranch'")


def test_return_values_become_readable_text(tract: Tract) -> None:
    @tool
    def data(*, context: ToolContext) -> dict[str, Any]:
        """Return data."""
        return {"b": [1, 2], "a": "x"}

    @tool
    def nothing(*, context: ToolContext) -> None:
        """Return nothing."""

    @tool
    def refuse(*, context: ToolContext) -> ToolResult:
        """Report a failure without raising."""
        return ToolResult("refuse", False, error="not allowed")

    ex = _executor(tract, data, nothing, refuse)
    assert ex.execute("data").output == '{\n  "a": "x",\n  "b": [\n    1,\n    2\n  ]\n}'
    assert ex.execute("nothing").text == "(no output)"
    refused = ex.execute("refuse")
    assert (refused.success, refused.error) == (False, "not allowed")
    assert refused.usage_objects[0].status == "error"


def test_builtins_return_readable_summaries(tract: Tract) -> None:
    tract.system("Be brief.")
    first = tract.user("hello there")
    tract.assistant("hi")
    ex = ToolExecutor(tract, profile="full")
    outputs = {
        "status": ex.execute("status", {}).output,
        "log": ex.execute("log", {"limit": 2}).output,
        "compile": ex.execute("compile", {}).output,
        "get_commit": ex.execute("get_commit", {"rev": first.commit_id[:8]}).output,
        "list_branches": ex.execute("list_branches").output,
        "diff": ex.execute("diff", {"a": first.commit_id}).output,
    }
    for name, text in outputs.items():
        assert text, (name, text)
        assert "Info(" not in text, (name, text)
        assert "ObjectId(" not in text, (name, text)
    assert outputs["status"].startswith("On branch main at ")
    assert "3 messages in context" in outputs["status"]
    assert outputs["compile"].splitlines()[1].endswith("system: Be brief.")
    assert "user" in outputs["get_commit"]
    assert "hello there" in outputs["get_commit"]
    assert outputs["list_branches"].startswith("* main ")
    assert outputs["diff"].startswith("1 change(s)")


def test_context_changing_builtins_apply_at_once_outside_an_agent_step(tract: Tract) -> None:
    ex = ToolExecutor(tract, profile="full")
    out = ex.execute("commit", {"content": "remember: x=1", "role": "user"})
    assert out.output.startswith("Committed user message ")
    assert tract.compile().messages[-1].content == "remember: x=1"
    assert ex.execute("branch", {"name": "side"}).output.startswith("Created branch side at ")
    assert tract.current_branch == "side"
    assert ex.execute("switch", {"name": "nope"}).error == "no branch named 'nope'"
    assert ex.execute("switch", {"name": "main"}).success
    assert tract.current_branch == "main"
    result = ex.execute("compress", {})
    assert not result.success
    assert "needs a model" in result.error  # compress without content needs one
    assert ex.execute("compress", {"content": "summary"}).success
    assert [m.content for m in tract.compile().messages] == ["summary"]


def test_registration_forms_and_refusals(tract: Tract) -> None:
    ex = _executor(tract)

    @ex.register
    def add(a: int, b: int = 0, *, context: ToolContext) -> int:
        """Add two numbers."""
        return a + b

    @ex.register(name="mul", description="Multiply two numbers.")
    def times(a: int, b: int, *, context: ToolContext) -> int:
        return a * b

    def sub(a: int, b: int, *, context: ToolContext) -> int:
        """Subtract b from a."""
        return a - b

    ex.register(sub)
    assert ex.available_tools() == ["add", "mul", "sub"]
    assert [d.name for d in ex.definitions()] == ["add", "mul", "sub"]
    assert ex.execute("add", {"a": 2, "b": 3}).output == "5"
    assert ex.execute("mul", {"a": 2, "b": 3}).output == "6"
    with pytest.raises(InvalidInput, match="registered already"):
        ex.register(sub)
    ex.register(ToolDefinition.from_function(sub, description="Subtract, v2."), replace=True)
    assert ex.get("sub") is not None
    assert ex.get("sub").description == "Subtract, v2."  # type: ignore[union-attr]

    def legacy(a: int) -> int:
        """No context parameter."""
        return a

    with pytest.raises(
        InvalidInput, match=r"keyword-only parameter: def legacy\(\.\.\., \*, context: ToolContext\)"
    ):
        ex.register(legacy)
    with pytest.raises(InvalidInput, match="no handler"):
        ex.register(ToolDefinition("x", "Schema only.", {"type": "object", "properties": {}}))
    ex.unregister("add")
    assert "add" not in ex.tool_names
    assert ToolExecutor(tract).tool_names == []  # no built-in unless a profile is named
    assert ToolExecutor(tract, profile="full").tool_names[:3] == ["commit", "compile", "annotate"]


def test_a_handler_that_slipped_through_is_never_called(tract: Tract) -> None:
    calls: list[int] = []

    def bad(a: int) -> int:
        calls.append(a)
        return a

    ex = _executor(tract, echo)
    definition = ex.get("echo")
    assert definition is not None
    original = definition.handler
    object.__setattr__(definition, "handler", bad)  # what a buggy subclass or a monkeypatch could do
    try:
        result = ex.execute("echo", {"text": "x"})
    finally:
        object.__setattr__(definition, "handler", original)
    assert not result.success
    assert "not run" in result.error
    assert "keyword-only" in result.error
    assert calls == []


def test_tool_context_is_frozen_slotted_and_complete(tract: Tract) -> None:
    seen: list[ToolContext] = []
    llm = object()

    @tool
    def probe(*, context: ToolContext) -> str:
        """Look at the context."""
        seen.append(context)
        return "ok"

    ex = _executor(tract, probe, llm=llm)
    tract.user("hi")
    info = tract.assistant("", tool_calls=[{"id": "c1", "name": "probe", "arguments": {}}])
    compiled = tract.compile()
    result = ex.execute("probe", {}, tool_call_id="c1", commit=info.commit_id, compiled=compiled)
    (ctx,) = seen
    assert ctx.tract is tract
    assert ctx.executor is ex
    assert ctx.events is ex.events
    assert ctx.llm is llm
    assert ctx.compiled is compiled
    assert (ctx.usage_id, ctx.commit_id, ctx.tool_call_id, ctx.parent_id) == (
        result.usage_id,
        info.commit_id,
        "c1",
        None,
    )
    assert not hasattr(ctx, "__dict__")  # slotted
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ctx.usage_id = "x"  # type: ignore[misc]
    # discarded after the call: it can no longer start nested executions
    late = ctx.execute("probe")
    assert not late.success
    assert "is not running" in late.error
    # the compiled context is None outside an agent step
    ex.execute("probe")
    assert seen[-1].compiled is None


def test_nested_executions_are_children_of_the_running_usage(tract: Tract) -> None:
    events: list[ToolEvent] = []

    @tool
    def outer(*, context: ToolContext) -> str:
        """Run two inner tools."""
        a = context.execute("echo", {"text": "a"})
        b = context.executor.execute("echo", {"text": "b"})  # nests through the context variable
        c = context.execute("fail", {})
        box: list[ToolResult] = []
        thread = threading.Thread(
            target=lambda: box.append(
                context.executor.execute("echo", {"text": "t"}, parent_id=context.usage_id)
            )
        )
        thread.start()
        thread.join()
        return a.output + b.output + c.text + box[0].output

    bus = EventBus()
    bus.subscribe("*", events.append)
    ex = _executor(tract, outer, echo, fail, events=bus)
    result = ex.execute("outer")
    assert result.output == "abError: RuntimeError: boomt"
    *nested, root = result.usage_objects
    assert root.tool_name == "outer"
    assert root.parent_id is None
    assert [r.tool_name for r in nested] == ["echo", "echo", "fail", "echo"]
    assert all(r.parent_id == root.usage_id for r in nested)
    assert root.children == tuple(object_id(r) for r in nested)
    assert [(e.kind, e.tool_name, e.parent_id) for e in events] == [
        ("tool_start", "outer", None),
        ("tool_start", "echo", root.usage_id),
        ("tool_complete", "echo", root.usage_id),
        ("tool_start", "echo", root.usage_id),
        ("tool_complete", "echo", root.usage_id),
        ("tool_start", "fail", root.usage_id),
        ("tool_error", "fail", root.usage_id),
        ("tool_start", "echo", root.usage_id),
        ("tool_complete", "echo", root.usage_id),
        ("tool_complete", "outer", None),
    ]
    assert events[-1].usage_id == root.usage_id
    assert events[-1].output == result.output
    assert events[6].error == "RuntimeError: boom"


def test_the_pending_row_exists_while_the_handler_runs(tract: Tract) -> None:
    observed: list[Any] = []

    @tool
    def look(*, context: ToolContext) -> str:
        """Look at my own usage while running."""
        observed.extend(context.tract.tool_usages(status="pending"))
        return "done"

    tract.user("hi")
    info = tract.assistant("", tool_calls=[{"id": "c1", "name": "look", "arguments": {}}])
    result = _executor(tract, look).execute("look", {}, tool_call_id="c1", commit=info.commit_id)
    (pending,) = observed
    assert (pending.id, pending.status, pending.commit_id, pending.tool_call_id) == (
        result.usage_id,
        "pending",
        info.commit_id,
        "c1",
    )
    assert pending.completed_at is None
    assert pending.oid is None
    assert tract.tool_usages(status="pending") == []


def test_results_are_truncated_in_the_record_with_a_marker(tract: Tract) -> None:
    @tool
    def big(*, context: ToolContext) -> str:
        """A big output."""
        return "x" * 500

    result = _executor(tract, big, result_limit=100).execute("big")
    assert result.output == "x" * 500  # the caller (and the tool_result commit) get all of it
    (record,) = result.usage_objects
    assert record.result is not None
    assert record.result.startswith("x" * 100)
    assert record.result.endswith(
        "[... truncated: 100 of 500 characters kept; the full result is in the tool_result commit]"
    )
    assert record.result_chars == 500
    with pytest.raises(InvalidInput):
        ToolExecutor(tract, result_limit=0)


def test_a_failing_subscriber_does_not_break_the_tool(tract: Tract, caplog: pytest.LogCaptureFixture) -> None:
    ex = _executor(tract, echo)

    def broken(event: ToolEvent) -> None:
        raise ValueError("subscriber bug")

    ex.events.subscribe("tool_start", broken)
    assert ex.execute("echo", {"text": "a"}).output == "a"
    assert "subscriber" in caplog.text
    ex.events.unsubscribe("tool_start", broken)
    with pytest.raises(InvalidInput):
        ex.events.subscribe("tool_done", print)


def test_usage_timestamps_come_from_the_executor_clock(tract: Tract) -> None:
    clock = FakeClock(start=1_000_000_000_000_000, step=10)

    @tool
    def slow(ms: int, *, context: ToolContext) -> str:
        """Take a while."""
        clock.advance_ms(ms)
        return "ok"

    record = _executor(tract, slow, clock=clock).execute("slow", {"ms": 25}).usage_objects[0]
    assert record.started_at == 1_000_000_000_000_010
    assert record.completed_at == record.started_at + 25_000 + 10


def test_usage_record_is_a_usage_object(tract: Tract) -> None:
    record = _executor(tract, echo).execute("echo", {"text": "a"}).usage_objects[0]
    assert isinstance(record, UsageRecord)
    assert record.KIND == "usage"
