"""One bounded walk of every JSON-bound value (issue 29, item 7): a value that contains itself, nests too
deep, expands past any object through shared parts, or holds a non-JSON type is refused at once with
ContentError, at every place such a value enters; before, ``t.commit`` of a self-containing payload hung."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from tractkv import Tract
from tractkv.cli import cli
from tractkv.engine.content import MAX_JSON_DEPTH, check_json
from tractkv.errors import ContentError
from tractkv.integrations.openai_agents import json_problem
from tractkv.store import Table
from tractkv.toolkit import ToolContext, ToolDefinition, ToolExecutor, tool

LIMIT_S = 5  # a refusal is immediate; a hang is stopped here (the bug walked forever)


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    def stop(signum: int, frame: object) -> None:
        raise TimeoutError(f"still walking after {LIMIT_S} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _cycle_dict() -> dict[str, Any]:
    d: dict[str, Any] = {"a": 1}
    d["self"] = d
    return d


def _cycle_list() -> list[Any]:
    items: list[Any] = [1]
    items.append(items)
    return items


def _shared(levels: int = 40) -> list[Any]:
    """A list sharing one list twice, ``levels`` deep: 2**levels values once written out."""
    x: list[Any] = [0]
    for _ in range(levels):
        x = [x, x]
    return x


def _deep(levels: int = MAX_JSON_DEPTH + 10) -> dict[str, Any]:
    x: dict[str, Any] = {}
    for _ in range(levels):
        x = {"k": x}
    return x


BAD: list[tuple[str, Callable[[], object], str]] = [
    ("cycle-dict", _cycle_dict, "contains itself"),
    ("cycle-list", _cycle_list, "contains itself"),
    ("shared", _shared, "expands to more than"),
    ("deep", _deep, "nested deeper than"),
    ("set", lambda: {"s": {1, 2}}, "type set is not allowed"),
]


def _objects(t: Tract) -> int:
    return sum(1 for _ in t.store.table_iter(Table.OBJECTS))


@pytest.mark.parametrize(("name", "make", "why"), BAD, ids=[b[0] for b in BAD])
def test_the_walker_refuses_at_once(name: str, make: Callable[[], object], why: str) -> None:
    started = time.perf_counter()
    with pytest.raises(ContentError, match=why):
        check_json(make(), "value")
    assert time.perf_counter() - started < 1.0


def test_the_walker_names_the_path_and_keeps_valid_values() -> None:
    with pytest.raises(ContentError, match=r"^payload\.a\[1\]\.self: contains itself"):
        check_json({"a": [0, _cycle_dict()]}, "payload")
    with pytest.raises(ContentError, match=r"payload\.k\[1\]: map keys must be str, not int"):
        check_json({"k": {1: 2}}, "payload")
    with pytest.raises(ContentError, match="bytes cannot be sent"):
        check_json({"b": b"x"}, "payload")
    check_json({"b": b"x"}, "metadata", binary=True)
    shared = {"same": 1}
    check_json([shared, shared, (1, 2.5, None, True, "s")], "value")  # sharing is fine; tuples are lists
    with pytest.raises(ContentError, match="type tuple is not allowed"):
        check_json([(1,)], "item", tuples=False)
    check_json(_deep(MAX_JSON_DEPTH), "value")
    for bad in (float("nan"), float("inf"), 2**64):
        with pytest.raises(ContentError):
            check_json({"x": bad}, "value")


@pytest.mark.parametrize(("name", "make", "why"), BAD, ids=[b[0] for b in BAD])
def test_every_entry_point_refuses(tmp_path: Any, name: str, make: Callable[[], object], why: str) -> None:
    entries: list[tuple[str, Callable[[Tract, Any], object]]] = [
        ("payload", lambda t, v: t.commit({"type": "freeform", "payload": v})),
        (
            "tool arguments",
            lambda t, v: t.assistant("", tool_calls=[{"id": "c1", "name": "f", "arguments": {"v": v}}]),
        ),
        ("metadata", lambda t, v: t.user("hi", metadata={"v": v})),
        ("generation_config", lambda t, v: t.assistant("hi", generation_config={"v": v})),
        ("tool result metadata", lambda t, v: t.tool_result("c0", "f", "done", metadata={"v": v})),
        (
            "tool schema",
            lambda t, v: t.set_tools([{"name": "g", "input_schema": {"type": "object", "default": v}}]),
        ),
        (
            "toolkit parameters",
            lambda t, v: ToolDefinition(
                name="g", description="d", parameters={"type": "object", "properties": {"a": {"default": v}}}
            ),
        ),
    ]
    with Tract.open(str(tmp_path / "s"), durable=False) as t:
        t.assistant("", tool_calls=[{"id": "c0", "name": "f", "arguments": {}}])
        before, head = _objects(t), t.head
        for entry, act in entries:
            with pytest.raises(ContentError, match=why):
                act(t, make())
            assert (t.head, _objects(t)) == (head, before), entry  # nothing written


@pytest.mark.parametrize(("name", "make", "why"), BAD, ids=[b[0] for b in BAD])
def test_agents_sdk_items_are_walked_once(name: str, make: Callable[[], object], why: str) -> None:
    problem = json_problem({"role": "user", "content": make()})
    assert problem is not None
    assert why in problem


def test_recorded_arguments_are_bounded(tmp_path: Any) -> None:
    """An argument that cannot be recorded as it is (a usage record's data) is shown as a bounded repr."""

    @tool
    def echo(value: Any, *, context: ToolContext) -> str:
        """Echo."""
        return "ok"

    with Tract.open(str(tmp_path / "s"), durable=False) as t:
        executor = ToolExecutor(t, profile=None, tools=[echo])
        for _, make, _ in BAD:
            result = executor.execute("echo", {"value": make()})
            assert not result.success
            assert "cannot be recorded" in result.error
            (record,) = result.usage_objects
            assert len(repr(record.arguments)) < 10_000  # recorded as a bounded repr


def test_cli_metadata_too_deep_is_one_line(tmp_path: Any) -> None:
    store = str(tmp_path / "s")
    runner = CliRunner()
    assert runner.invoke(cli, ["--store", store, "init"]).exit_code == 0
    result = runner.invoke(cli, ["--store", store, "commit", "--metadata", json.dumps(_deep()), "hi"])
    assert result.exit_code != 0
    assert "nested deeper than" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    result = runner.invoke(cli, ["--store", store, "commit", "--type", "freeform", json.dumps(_deep())])
    assert result.exit_code != 0
    assert "nested deeper than" in result.output
