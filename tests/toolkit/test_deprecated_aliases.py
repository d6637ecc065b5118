"""The toolkit's functions of a Tract (``tractkv.toolkit.run``, ``as_tools``, ``export``, ``rerun_tool_usage``)
and the deprecated ``Tract`` methods of those names, kept for one release: each warns once per process (a
``DeprecationWarning`` pointing at its caller), then calls the toolkit's function."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import tractkv.tract
from tractkv import Tract, toolkit
from tractkv.llm import ScriptedLLM
from tractkv.toolkit import ToolContext, ToolExecutor, tool

FAILED: list[bool] = []  # fetch fails once: the first time after the fixture empties this


@tool
def fetch(url: str, *, context: ToolContext) -> str:
    """Fetch a page (fails the first time)."""
    if not FAILED:
        FAILED.append(True)
        raise ConnectionError("timed out")
    return f"page {url}"


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(args)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


@pytest.fixture
def tract() -> Iterator[Tract]:
    FAILED.clear()
    with Tract.open(None) as t:
        t.user("fetch a.example")
        yield t


def test_the_toolkit_functions_take_the_tract(tract: Tract) -> None:
    ex = ToolExecutor(tract, profile=None, tools=[fetch])
    result = toolkit.run(tract, ScriptedLLM([_call("c1", "fetch", {"url": "a.example"}), "it failed"]), ex)
    assert (result.text, result.stop_reason) == ("it failed", "done")
    (failed,) = tract.tool_usages(status="error")
    again = toolkit.rerun_tool_usage(tract, failed.id, ex)
    assert (again.status, again.rerun_of, again.result) == ("success", failed.id, "page a.example")
    assert json.loads(toolkit.export(tract))["tool_usages"][1]["rerun_of"] == failed.id
    assert toolkit.export(tract, "markdown") == toolkit.export_conversation(tract, "markdown")
    assert len(toolkit.as_tools("self")) == 9
    assert len(toolkit.as_tools("full", format="anthropic")) == 15


def _deprecated_calls(tract: Tract) -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    """(name, the deprecated call, the toolkit call it stands for), in an order in which each works."""
    ex = ToolExecutor(tract, profile=None, tools=[fetch])

    def run_args() -> tuple[ScriptedLLM, ToolExecutor]:
        return ScriptedLLM([_call(f"c{len(tract.log())}", "fetch", {"url": "a.example"}), "ok"]), ex

    def failed() -> str:
        return tract.tool_usages(status="error")[-1].id

    return [
        (
            "run",
            lambda: tract.run(*run_args()).stop_reason,
            lambda: toolkit.run(tract, *run_args()).stop_reason,
        ),
        ("as_tools", lambda: tract.as_tools("full"), lambda: toolkit.as_tools("full")),
        ("export", lambda: tract.export("markdown"), lambda: toolkit.export(tract, "markdown")),
        (
            "rerun_tool_usage",
            lambda: tract.rerun_tool_usage(failed(), ex).status,
            lambda: "success",  # the one failed execution is re-run by the alias (twice would be refused)
        ),
    ]


def test_each_deprecated_method_warns_once_then_calls_the_toolkit(
    tract: Tract, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tractkv.tract, "_warned", set())  # as in a fresh process
    for name, deprecated, replacement in _deprecated_calls(tract):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first = deprecated()
        assert [w.category for w in caught] == [DeprecationWarning], name
        assert f"tractkv.toolkit.{name}(" in str(caught[0].message)
        assert caught[0].filename == __file__  # it points at the caller, not at tract.py
        assert first == replacement(), name
        if name == "rerun_tool_usage":
            continue  # a second re-run of the same execution is refused (it succeeded); the warning is the point
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert deprecated() == replacement(), name
        assert caught == [], f"{name} warned twice"


def test_the_deprecated_methods_work_without_importing_the_toolkit() -> None:
    # tract.py never imports the toolkit: the package root hands it the way to it, and `import tractkv` still
    # loads nothing of the toolkit until a deprecated method is called
    code = (
        "import sys, warnings, tractkv\n"
        "warnings.simplefilter('error')\n"
        "t = tractkv.Tract.open()\n"
        "assert not any(m.startswith('tractkv.toolkit') for m in sys.modules)\n"
        "try:\n"
        "    t.as_tools()\n"
        "except DeprecationWarning as exc:\n"
        "    print(exc)\n"
        "warnings.simplefilter('default')\n"
        "print(len(t.as_tools()), t.export('markdown').splitlines()[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    first, second = out.splitlines()[:2]
    assert "Tract.as_tools is deprecated" in first
    assert "tractkv.toolkit.as_tools(" in first
    assert second.startswith("9 ")
