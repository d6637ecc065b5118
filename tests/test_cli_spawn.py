"""``spawn``, ``collapse`` and ``children`` end to end (CliRunner), and a push / clone of a collapsed child over
a path remote through subprocesses (issue 21)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tractkv import Tract
from tractkv.cli import cli
from tractkv.store import fsck, open_store

ROOT = Path(__file__).resolve().parent.parent


def run(store: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", store, *args])
    return result.exit_code, result.stdout, result.stderr


def ok(store: str, *args: str) -> str:
    code, out, err = run(store, *args)
    assert code == 0, err
    return out


def snapshot(store: str) -> tuple[dict[str, str], int]:
    with open_store(store, create=False) as s:
        report = fsck(s)
        assert report.ok, report.problems
        return dict(s.iter_refs()), s.count_objects()


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "s.tkv")
    ok(path, "init")
    ok(path, "commit", "--role", "system", "You coordinate.")
    ok(path, "commit", "--role", "user", "What are a and b?")
    return path


def test_spawn_work_collapse_and_list(store: str) -> None:
    out = ok(store, "spawn", "find a", "--inherit", "full")
    assert out == "spawned main.spawn/find-a (full) from main: find a\n"
    assert ok(store, "status", "--json").count('"branch": "main"') == 1  # still on main
    data = json.loads(ok(store, "spawn", "find b", "--inherit", "none", "--switch", "--json"))
    assert data["branch"] == "main.spawn/find-b"
    assert (data["parent"]["branch"], data["parent"]["inherit"]) == ("main", "none")
    ok(store, "commit", "--role", "user", "b?")  # on the child now
    ok(store, "commit", "--role", "assistant", "b is 2")
    child = json.loads(ok(store, "children", "--json"))
    assert child["parent"]["purpose"] == "find b"
    assert child["children"] == []
    assert ok(store, "compile", "--json").count('"role"') == 2
    ok(store, "switch", "main")

    listed = ok(store, "children")
    assert "open" in listed
    assert "main.spawn/find-a" in listed
    assert "main.spawn/find-b" in listed
    out = ok(store, "collapse", "main.spawn/find-b", "--content", "Sub-agent: b is 2.")
    assert out.startswith("collapsed main.spawn/find-b: ")
    collapse_id = out.split(": ")[1].strip()

    data = json.loads(ok(store, "children", "--json"))
    assert data["parent"] is None
    assert [(c["purpose"], c["state"], c["branch"]) for c in data["children"]] == [
        ("find a", "open", "main.spawn/find-a"),
        ("find b", "collapsed", None),
    ]
    assert data["children"][1]["collapsed_by"] == collapse_id
    text = ok(store, "children")
    assert f"collapsed by {collapse_id[:12]}" in text
    # the child's history compiles at its head, through the collapse's link
    head = data["children"][1]["head"]
    compiled = json.loads(ok(store, "compile", "--at", head, "--json"))
    assert [m["content"] for m in compiled["messages"]] == ["b?", "b is 2"]
    assert "main.spawn/find-b" not in ok(store, "branch")


def test_errors_are_one_line_and_change_nothing(store: str) -> None:
    ok(store, "spawn", "task")
    before = snapshot(store)
    for args, words in [
        (("collapse", "main.spawn/task"), "needs --content"),
        (("collapse", "nope", "--content", "x"), "no branch 'nope'"),
        (("collapse", "main", "--content", "x"), "into itself"),
        (("spawn", "again", "--branch", "main.spawn/task"), "exists already"),
        (("spawn", "self", "--branch", "main"), "onto the current branch 'main'"),
        (("spawn", "  "), "purpose"),
        (("spawn", "x", "--inherit", "copy"), "copy"),
    ]:
        code, out, err = run(store, *args)
        assert code != 0, args
        assert words in err, (args, err)
        assert "Traceback" not in err
        assert out == ""
    assert snapshot(store) == before


def test_push_and_clone_carry_a_collapsed_child_through_processes(store: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def tkv(*args: str, at: str = store) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "tractkv", "--store", at, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    remote = str(tmp_path / "remote.tkv")
    tkv("init", at=remote)
    tkv("remote", "add", "origin", remote)
    tkv("spawn", "research", "--switch")
    tkv("commit", "--role", "assistant", "found it")
    tkv("switch", "main")
    tkv("collapse", "main.spawn/research", "--content", "found it")
    tkv("push", "origin", "main")
    clone = str(tmp_path / "clone.tkv")
    subprocess.run(
        [sys.executable, "-m", "tractkv", "clone", remote, clone],
        capture_output=True,
        env=env,
        timeout=120,
        check=True,
    )
    here = json.loads(tkv("children", "--json"))
    there = json.loads(tkv("children", "--json", at=clone))
    assert there == here
    head = here["children"][0]["head"]
    assert tkv("compile", "--at", head, "--json", at=clone) == tkv("compile", "--at", head, "--json")
    with Tract.open(clone, readonly=True) as t:
        assert t.compile(at=head).messages[-1].content == "found it"
