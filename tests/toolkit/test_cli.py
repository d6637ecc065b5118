"""``tractkv usage`` and ``tractkv export``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tractkv import Tract, toolkit
from tractkv.cli import cli
from tractkv.llm import ScriptedLLM
from tractkv.toolkit import ToolExecutor

from .conftest import FakeClock, call
from .test_loop import delegate, explode, lookup


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "store")
    with Tract.open(path, clock=FakeClock()) as t:
        t.user("What is a?")
        llm = ScriptedLLM(
            [
                call("c1", "delegate", {"task": "find a"}),
                call("k1", "lookup", {"key": "a"}),
                "a=1",
                call("c2", "explode", {"x": 2}),
                "a is 1",
            ]
        )
        toolkit.run(t, llm, ToolExecutor(t, profile=None, tools=[delegate, lookup, explode]))
    return path


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_usage_tree(store: str) -> None:
    code, out, err = _run("--store", store, "usage")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("✓ delegate success ")
    assert lines[1].startswith("  ✓ lookup success ")
    assert lines[2].startswith("✗ explode error ")
    assert lines[2].endswith(": RuntimeError: cannot handle 2")
    assert "3 tool execution(s) in 2 tree(s)" in err


def test_usage_json_filters_and_stats(store: str) -> None:
    code, out, _ = _run("--store", store, "usage", "--json")
    trees = json.loads(out)
    assert [t["tool_name"] for t in trees] == ["delegate", "explode"]
    assert trees[0]["children"][0]["tool_name"] == "lookup"

    code, out, _ = _run("--store", store, "usage", "--tool", "lookup", "--json")
    (only,) = json.loads(out)
    assert (only["tool_name"], only["parent_id"]) == ("lookup", trees[0]["id"])

    code, out, _ = _run("--store", store, "usage", "--tool", "lookup")
    assert out.startswith("✓ lookup success")

    code, out, _ = _run("--store", store, "usage", "--stats", "--json")
    stats = json.loads(out)
    assert stats["explode"]["success_rate"] == 0.0
    assert stats["lookup"]["count"] == 1

    code, out, _ = _run("--store", store, "usage", "--stats")
    assert out.splitlines()[0].split() == [
        "tool",
        "count",
        "ok",
        "err",
        "int",
        "rate",
        "p50",
        "ms",
        "p95",
        "ms",
    ]
    assert len(out.splitlines()) == 4

    code, out, _ = _run("--store", store, "usage", "--commit", trees[1]["commit_id"][:10], "--json")
    assert [t["tool_name"] for t in json.loads(out)] == ["explode"]

    code, out, err = _run("--store", store, "usage", "--status", "interrupted")
    assert (code, out) == (0, "")
    assert "no matching tool usage" in err


def test_usage_errors_are_one_line(store: str) -> None:
    code, _, err = _run("--store", store, "usage", "--rev", "nope")
    assert code == 1
    assert err.startswith("Error: unknown revision 'nope'")


def test_export(store: str, tmp_path: Path) -> None:
    code, out, _ = _run("--store", store, "export")
    assert code == 0
    data = json.loads(out)
    assert data["format"] == "tractkv-conversation"
    assert [m["role"] for m in data["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]

    code, out, _ = _run("--store", store, "export", "--format", "markdown")
    assert out.startswith("# Conversation on branch `main`")
    assert "## Tool usage history" in out

    target = tmp_path / "out.md"
    code, out, err = _run("--store", store, "export", "--format", "markdown", "-o", str(target))
    assert (code, out) == (0, "")
    assert target.read_text().startswith("# Conversation")
    assert f"wrote {target}" in err


def test_usage_of_another_revision(store: str) -> None:
    with Tract.open(store) as t:
        # newest first: the answer, c2's result, the explode call, c1's result, the delegate call, the user
        log = t.log()
    first_result = log[3].commit_id
    assert log[3].role == "tool"

    code, out, err = _run("--store", store, "usage", "--rev", first_result, "--json")
    assert code == 0, err
    (tree,) = json.loads(out)
    assert (tree["tool_name"], [c["tool_name"] for c in tree["children"]]) == ("delegate", ["lookup"])

    code, out, _ = _run("--store", store, "usage", "--rev", first_result, "--stats", "--json")
    assert sorted(json.loads(out)) == ["delegate", "lookup"]

    code, out, _ = _run("--store", store, "usage", "--rev", first_result, "--tool", "explode", "--json")
    assert json.loads(out) == []

    code, out, err = _run("--store", store, "usage", "--rev", log[-1].commit_id)
    assert (code, out) == (0, "")
    assert "no tool usage" in err

    _, at_main, _ = _run("--store", store, "usage", "--rev", "main", "--json")
    _, at_head, _ = _run("--store", store, "usage", "--json")
    assert json.loads(at_main) == json.loads(at_head)


def test_export_markdown_shows_conversation_text_exactly_never_as_markup(tmp_path: Path) -> None:
    """Issue 17, item 10: a message is shown exactly (code with < and & intact), and nothing in a conversation
    becomes markup, a link or an image, or swallows what follows."""
    store = str(tmp_path / "s.tkv")
    hostile = "<script>alert(1)</script> & [x](javascript:alert(1)) ![i](http://127.0.0.1:9/x.png)"
    code_text = "Use `if a < b && c:`\n```\nprint(x<y)\n```"
    with Tract.open(store) as t:
        t.user("```\nan unclosed fence")
        t.assistant(code_text)
        t.assistant("", tool_calls=[{"id": "c`1", "name": "lookup", "arguments": {"q": "``<b>``"}}])
        t.tool_result("c`1", "lookup", f"result {hostile}")
        t.assistant(f"done {hostile}")
    code, out, _ = _run("--store", store, "export", "--format", "markdown")
    assert code == 0
    assert f"````text\n{code_text}\n````" in out  # exactly, in a fence longer than any inside
    assert "````text\n```\nan unclosed fence\n````" in out  # cannot swallow the messages after it
    assert out.count("## ") >= 6  # every heading survived
    # outside fenced blocks and code spans, nothing that could start markup is left unescaped
    prose = re.sub(r"(?s)(`{3,})text\n.*?\n\1\n|(?<!`)(`+)(?!`).*?(?<!`)\2(?!`)", "", out)
    prose = prose.replace("<sub>", "").replace("</sub>", "")  # the export's own markup
    assert not re.search(r"(?<!\\)[<\[!&]", prose.replace("## ", "")), prose
    assert "call ``c`1``" in out  # a backtick in an id cannot end its code span
    assert '```{"q": "``<b>``"}```' in out
