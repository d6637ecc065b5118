"""Tags on the graph page (issue 34 item 1): a tagged commit's row carries a ``tag: <name>`` badge beside the
branch badges, for a lightweight and an annotated tag alike (peeled to the commit)."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from tractkv import Tract
from tractkv.store import LmdbStore
from tractkv.view.app import create_app
from tractkv.view.inspector import Inspector


def test_graph_rows_show_tag_badges(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    with Tract.open(path, durable=False) as t:
        first = t.user("one").commit_id
        t.tag("v1")
        second = t.assistant("two").commit_id
        t.tag("v2", message="annotated")
    with LmdbStore(path) as st:
        rows = {row.info.commit_id: row.tips for row in Inspector(st).graph_page("refs/heads/main").rows}
        assert rows[first] == ("refs/tags/v1",)
        assert rows[second] == ("refs/heads/main", "refs/tags/v2")
        app, _ = create_app(st, sync=False)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            graph = client.get("/ui/log?ref=refs/heads/main").text
    assert '<span class="badge tip kind-tag" title="refs/tags/v1">tag: v1</span>' in graph
    assert '<span class="badge tip kind-tag" title="refs/tags/v2">tag: v2</span>' in graph
