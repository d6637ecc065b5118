"""The CLI's tag, cherry-pick and rebase (issue 34 items 1 and 2), in text and --json; tags in `log`, and
`push --tags` / `fetch` / `bundle` carrying them to another store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tractkv.cli import cli
from tractkv.store import fsck, open_store


def run(store: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", store, *args])
    return result.exit_code, result.stdout, result.stderr


def ok(store: str, *args: str) -> str:
    code, out, err = run(store, *args)
    assert code == 0, err
    return out


def refused(store: str, *args: str) -> str:
    """A command that must fail: exit 1, one line ``Error: ...``, the refs unchanged."""
    with open_store(store, create=False) as s:
        before = dict(s.iter_refs())
    code, out, err = run(store, *args)
    assert code != 0, (out, err)
    assert "Error: " in err, err
    with open_store(store, create=False) as s:
        assert dict(s.iter_refs()) == before
        assert fsck(s).ok
    return err


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "s.tkv")
    ok(path, "init")
    ok(path, "commit", "one")
    ok(path, "commit", "--role", "assistant", "two")
    return path


def test_tag_create_list_show_and_delete_in_text_and_json(store: str) -> None:
    head = ok(store, "log", "-n", "1", "--json")
    first = json.loads(head)[0]["commit_id"]
    assert ok(store, "tag", "v1").strip() == first
    made = json.loads(ok(store, "tag", "-a", "-m", "release two", "v2", "HEAD~1", "--json"))
    assert made["annotated"] is True
    assert made["message"] == "release two"
    assert made["commit"] != first
    listed = json.loads(ok(store, "tag", "--json"))
    assert [(i["name"], i["annotated"]) for i in listed] == [("v1", False), ("v2", True)]
    assert ok(store, "tag").splitlines() == [f"v1\t{first[:12]}", f"v2\t{made['commit'][:12]}  release two"]
    # a tag is a revision: log shows it, compile takes it
    assert "(tag: v1)" in ok(store, "log").splitlines()[0]
    assert json.loads(ok(store, "log", "--json"))[0]["tags"] == ["v1"]
    assert "(tag: v2)" in ok(store, "log", "--graph")
    assert json.loads(ok(store, "compile", "--at", "v2", "--json"))["messages"][-1]["content"] == "one"
    assert "Deleted tag v1" in ok(store, "tag", "-d", "v1")
    gone = json.loads(ok(store, "tag", "-d", "v2", "--json"))
    assert gone["name"] == "v2"
    assert json.loads(ok(store, "tag", "--json")) == []


def test_tag_refusals_are_one_line_errors(store: str) -> None:
    ok(store, "tag", "v1")
    assert "exists already" in refused(store, "tag", "v1")
    assert "needs a message" in refused(store, "tag", "-a", "v3")
    assert "is a branch" in refused(store, "tag", "main")
    assert "'..' is not allowed" in refused(store, "tag", "bad..name")
    assert "unknown revision 'nope'" in refused(store, "tag", "v4", "nope")
    ok(store, "commit", "three")
    assert ok(store, "tag", "-f", "v1").strip() != ""


def test_cherry_pick_and_rebase_in_text_and_json(store: str) -> None:
    ok(store, "switch", "-c", "side")
    ok(store, "commit", "side one")
    ok(store, "commit", "side two")
    ok(store, "switch", "main")
    ok(store, "commit", "main three")
    out = ok(store, "cherry-pick", "side~1")
    assert out.splitlines()[-1].startswith("picked: ")
    assert " -> " in out.splitlines()[0]
    assert "already" in refused(store, "cherry-pick", "side~1")
    ok(store, "branch", "other", "main~1", "--switch")
    picked = json.loads(ok(store, "cherry-pick", "side~1", "--json"))
    assert picked["kind"] == "picked"
    assert (
        picked["picked"][0]["original"]
        == json.loads(ok(store, "log", "side~1", "-n", "1", "--json"))[0]["commit_id"]
    )
    shown = json.loads(ok(store, "show", picked["head"], "--json"))
    assert shown["metadata"] == {"picked_from": picked["picked"][0]["original"]}
    ok(store, "switch", "main")
    ok(store, "switch", "side")
    result = json.loads(ok(store, "rebase", "main", "--json"))
    assert result["kind"] == "rebased"
    assert len(result["picked"]) == 1  # side one is already on main: left out
    assert len(result["skipped"]) == 1
    assert result["picked"][0]["original"] != result["picked"][0]["commit"]
    texts = [m["content"] for m in json.loads(ok(store, "compile", "--json"))["messages"]]
    assert texts == ["one", "two", "main three", "side one", "side two"]
    assert ok(store, "rebase", "main").startswith("up-to-date: ")
    reflog = ok(store, "reflog", "-n", "2")
    assert reflog.count(" rebase: ") == 2


def test_a_conflicting_rebase_writes_nothing_and_a_strategy_settles_it(store: str) -> None:
    first = json.loads(ok(store, "log", "--json"))[-1]["commit_id"]
    ok(store, "switch", "-c", "side")
    ok(store, "commit", "--edit", first, "side's one")
    ok(store, "switch", "main")
    ok(store, "commit", "--edit", first, "main's one")
    ok(store, "switch", "side")
    err = refused(store, "rebase", "main")
    assert "conflict" in err
    assert "--strategy ours|theirs" in err
    result = json.loads(ok(store, "rebase", "main", "-X", "theirs", "--json"))
    assert result["conflicts_resolved"] == 1
    texts = [m["content"] for m in json.loads(ok(store, "compile", "--json"))["messages"]]
    assert texts[0] == "side's one"


def test_push_tags_fetch_and_bundle_carry_tags(store: str, tmp_path: Path) -> None:
    ok(store, "tag", "-m", "first release", "v1")
    other = str(tmp_path / "other.tkv")
    ok(other, "init")
    ok(store, "remote", "add", "origin", other)
    assert ok(store, "push").strip()
    pushed = json.loads(ok(store, "push", "--tags", "--json"))
    assert [(r["name"], r["ok"]) for r in pushed["results"]] == [("refs/tags/v1", True)]
    assert "tag v1: up to date" in ok(store, "push", "--tags")
    clone = str(tmp_path / "clone.tkv")
    CliRunner().invoke(cli, ["clone", other, clone])
    assert [i["name"] for i in json.loads(ok(clone, "tag", "--json"))] == ["v1"]
    ok(store, "tag", "-f", "v1", "HEAD~1")
    assert "already-exists" in refused(store, "push", "--tags")
    ok(store, "push", "--tags", "--force")
    out = ok(clone, "fetch")
    assert "[rejected] tag v1" in out
    assert json.loads(ok(clone, "fetch", "--force", "--json"))["tags_refused"] == []
    assert (
        json.loads(ok(clone, "tag", "--json"))[0]["commit"]
        == json.loads(ok(store, "tag", "--json"))[0]["commit"]
    )
    bundle = str(tmp_path / "b.tkvbundle")
    assert "1 tag(s)" in ok(store, "bundle", "create", bundle)
    fresh = str(tmp_path / "fresh.tkv")
    ok(fresh, "init")
    ok(fresh, "bundle", "unbundle", bundle)
    assert [i["name"] for i in json.loads(ok(fresh, "tag", "--json"))] == ["v1"]
