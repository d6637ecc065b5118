"""A process killed while a tool runs: its pending usage stays visible (pending, then interrupted), and the
agent loop later answers the call with an error result linked to an ``interrupted`` usage record."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tractkv import Tract, toolkit
from tractkv.cli import cli
from tractkv.errors import InvalidInput
from tractkv.llm import ScriptedLLM
from tractkv.store import Table, fsck
from tractkv.toolkit import ToolContext, ToolExecutor, tool
from tractkv.toolkit.loop import INTERRUPTED

pytestmark = pytest.mark.slow

WORKER = textwrap.dedent(
    """
    import sys, time
    from tractkv import Tract
    from tractkv.toolkit import ToolContext, ToolExecutor, tool

    @tool
    def quick(*, context: ToolContext) -> str:
        \"\"\"Finish at once.\"\"\"
        return "quick done"

    @tool
    def slow(*, context: ToolContext) -> str:
        \"\"\"Run a nested tool, then hang.\"\"\"
        context.execute("quick")
        print("started", context.usage_id, flush=True)
        time.sleep(120)
        return "never"

    t = Tract.open(sys.argv[1])
    t.user("go")
    reply = t.assistant("", tool_calls=[{"id": "c1", "name": "slow", "arguments": {}}])
    ToolExecutor(t, profile=None, tools=[slow, quick]).execute(
        "slow", {}, tool_call_id="c1", commit=reply.commit_id
    )
    """
)


@tool
def slow(*, context: ToolContext) -> str:
    """Stands in for the killed process's tool (never called here)."""
    raise AssertionError("an interrupted call must not be run again")


def test_a_killed_tool_is_pending_then_interrupted_then_answered(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    proc = subprocess.Popen([sys.executable, str(script), store], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line[:1] == ["started"], line
        usage_id = line[1]
        # while the worker lives, its execution shows as pending and the loop will not touch the call
        with Tract.open(store) as t:
            (running,) = t.tool_usages(name="slow")
            assert (running.id, running.status) == (usage_id, "pending")
            with pytest.raises(InvalidInput, match="still running in process"):
                toolkit.run(t, ScriptedLLM(["x"]), ToolExecutor(t, profile=None, tools=[slow]))
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    with Tract.open(store) as t:
        reply_commit = t.compile().commit_ids[1]
        (tree,) = t.usage_tree()
        usage = tree.usage
        assert (usage.id, usage.tool_name, usage.status, usage.commit_id, usage.tool_call_id) == (
            usage_id,
            "slow",
            "interrupted",
            reply_commit,
            "c1",
        )
        assert usage.oid is None
        assert usage.completed_at is None
        # the nested tool finished before the crash: its record was kept and shows under its parent
        (child,) = tree.children
        assert (child.usage.tool_name, child.usage.status, child.usage.parent_id) == (
            "quick",
            "success",
            usage_id,
        )
        assert child.usage.oid is not None
        assert [u.tool_name for u in t.tool_usages(status="interrupted")] == ["slow"]

    result = CliRunner().invoke(cli, ["--store", store, "usage"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].startswith(f"! slow interrupted - [{usage_id}]")
    assert result.stdout.splitlines()[1].startswith("  ✓ quick success")

    # the next run answers the open call with an error result and links an interrupted record
    with Tract.open(store) as t:
        llm = ScriptedLLM(["The tool was interrupted; I will not retry."])
        outcome = toolkit.run(t, llm, ToolExecutor(t, profile=None, tools=[slow]))
        assert outcome.text.startswith("The tool was interrupted")
        assert outcome.usage_ids == (usage_id,)
        sent = llm.calls[0].messages
        last = sent[-1]
        assert (last.role, last.tool_call_id, last.content, last.is_error) == (
            "tool",
            "c1",
            f"Error: {INTERRUPTED}",
            True,
        )
        (tree,) = t.usage_tree()
        assert (tree.usage.status, tree.usage.oid is not None) == ("interrupted", True)
        assert tree.usage.result_commit == t.compile().commit_ids[2]
        assert [c.usage.tool_name for c in tree.children] == ["quick"]
        assert list(t.store.table_iter(Table.USAGE)) == []  # the rows became the record
        report = fsck(t.store)
        assert report.ok, report.problems
        assert report.kinds["usage"] == 2
