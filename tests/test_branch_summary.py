"""One branch summary (``tractkv.engine.branches.summary``): the CLI (``status``, ``branch -v``), the API
(``Tract.status``, ``Tract.branches``) and the viewer's data (``Inspector.branches``) report the same summary of
the same store: counts, the provider-calibrated token count, the budget and its last overrun, ahead / behind the
upstream, when each branch was last committed to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from llm.conftest import openai_completion

from tractkv import Tract
from tractkv.cli import cli
from tractkv.model import to_jsonable
from tractkv.store import LmdbStore
from tractkv.view.inspector import Inspector


def cli_json(store: str, *args: str) -> Any:
    result = CliRunner().invoke(cli, ["--store", store, *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def a_store(tmp_path: Path) -> str:
    """Two local branches, a remote-tracking one main is ahead of and behind, a budget main is over (the
    overrun recorded), a recorded reply whose usage calibrates main's count."""
    origin, path = str(tmp_path / "origin"), str(tmp_path / "s")
    with Tract.open(origin) as t:
        t.system("You answer weather questions briefly.")
        t.user("What is the weather in Paris today?")
    with Tract.clone(origin, path) as t:
        body = openai_completion("Sunny in Paris.", model="gpt-x")
        body["usage"] = {"prompt_tokens": 31, "completion_tokens": 5, "total_tokens": 36}
        t.record_response(body)
        t.branch("explore", switch=False)
        t.set_budget(20, action="warn")
        t.user("And tomorrow, in Rome?")
    with Tract.open(origin) as t:
        t.user("Another question on the origin.")
    with Tract.open(path) as t:
        t.fetch("origin")
    return path


def test_the_cli_the_api_and_the_viewer_report_one_summary(tmp_path: Path) -> None:
    path = a_store(tmp_path)
    with Tract.open(path) as t:
        api = [to_jsonable(s) for s in t.branches()]
        status = to_jsonable(t.status())
    cli_status = cli_json(path, "status")
    cli_branches = cli_json(path, "branch", "-v")
    with LmdbStore(path) as st:
        viewer = [to_jsonable(s) for s in Inspector(st).branches()]
    assert [s["ref"] for s in api] == ["refs/heads/explore", "refs/heads/main", "refs/remotes/origin/main"]
    main = api[1]
    assert main == status
    assert (main["is_current"], main["count_source"], main["ahead"], main["behind"]) == (
        True,
        "reported",
        2,
        1,
    )
    assert main["budget_overrun"] is not None
    assert main["last_activity"] is not None
    assert main["token_count"] > 20 == main["token_budget"]
    used = [s.pop("budget_used") for s in [cli_status, *cli_branches]]
    assert used == [main["token_count"] / 20, None, main["token_count"] / 20, None]
    assert cli_status == status
    assert cli_branches == api
    assert viewer == api
