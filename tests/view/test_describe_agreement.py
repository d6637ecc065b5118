"""The CLI (``log`` / ``show``), the viewer's log page and the built-in tools (``log`` / ``get_commit``)
describe every commit alike: the demo history holds a merge, an annotation, an edit, a compress and a tool
turn (a call, its result)."""

from __future__ import annotations

import html
import re
from pathlib import Path

from click.testing import CliRunner

from tractkv import Tract
from tractkv.cli import cli
from tractkv.cli.engine_cmds import LINE
from tractkv.engine.history import describe_commit
from tractkv.engine.history.describe import CommitDescription
from tractkv.store import open_store
from tractkv.toolkit import ToolExecutor
from tractkv.toolkit.builtin import LOG_LINE
from tractkv.view.inspector import Inspector
from tractkv.view.pages import PREVIEW, graph_body

MAIN = "refs/heads/main"


def cli_out(path: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--store", str(path), *args])
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_every_surface_describes_each_commit_alike(demo: tuple[Path, dict[str, str]]) -> None:
    path, ids = demo
    with Tract.open(str(path)) as t:
        described: dict[str, CommitDescription] = {i.commit_id: describe_commit(i) for i in t.log()}
    kinds = {d.kind for d in described.values()}
    assert {"merge", "annotation", "summary", "tool_call", "tool_result", "message"} <= kinds
    assert described[ids["edit"]].operation == "edit"
    assert described[ids["merge"]].summary == "explore (auto)"
    assert described[ids["annotate"]].summary.startswith(f"pinned {ids['hostile'][:12]} (keep the odd")

    # the CLI: one log line per commit, and show's summary line
    log_lines = cli_out(path, "log").splitlines()
    assert log_lines == [f"{oid[:12]} {d.label}: {d.line(LINE)}" for oid, d in described.items()]
    for oid, d in described.items():
        assert f"summary    {d.line(LINE)}\n" in cli_out(path, "show", oid)

    # the viewer's log page: each row's kind, role and summary
    with open_store(str(path), create=False) as store:
        page = str(graph_body(Inspector(store).graph_page(MAIN)))
    rows = re.findall(r'<tr data-commit="([0-9a-f]{64})" data-kind="([a-z_]+)".*?</tr>', page, re.S)
    assert [(oid, kind) for oid, kind in rows] == [(oid, d.kind) for oid, d in described.items()]
    for oid, d in described.items():
        row = re.search(rf'<tr data-commit="{oid}".*?</tr>', page, re.S)
        assert row is not None
        assert f'<td class="role">{d.role or ""}</td>' in row.group(0)
        assert f'class="preview">{html.escape(d.line(PREVIEW))}</a>' in row.group(0)

    # the built-in tools
    with Tract.open(str(path)) as t:
        tools = ToolExecutor(t, profile="full")
        log = tools.execute("log", {"limit": 200}).output.splitlines()
        assert [line[:12] + line[32:] for line in log] == [
            f"{oid[:12]} {d.label}: {d.line(LOG_LINE)}" for oid, d in described.items()
        ]
        for oid, d in described.items():
            shown = tools.execute("get_commit", {"rev": oid}).output
            assert f"\nsummary: {d.line(LOG_LINE)}\n" in shown
            assert shown.endswith("\n" + (d.text or d.summary))
