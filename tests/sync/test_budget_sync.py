"""Budgets on the branches sync moves, through a real hub process: a pull's fast-forward is checked by the
pulling store's budget (reject: the branch stays, the fetch is kept; trim: the trim commit lands with the
move), and a push is checked by the hub store's budget (reject: ``over-budget``, the hub's branch stays;
trim: the hub's branch ends at a trim commit the pusher gets with its next pull)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tractkv.store import LmdbStore

from .conftest import Hub
from .test_cli_sync import tkv

MAIN = "refs/heads/main"


def refs(store: Path) -> dict[str, str]:
    with LmdbStore(str(store), create=False, durable=False) as st:
        return dict(st.iter_refs("refs/"))


def tokens(store: Path) -> int:
    return int(json.loads(tkv(store, "status", "--json").stdout)["token_count"])


def grow(store: Path, count: int) -> None:
    for i in range(count):
        tkv(store, "commit", f"Question {i}: what is {i} plus {i}, in words please, and show the steps?")


def test_a_pull_through_a_hub_is_checked_by_the_pulling_stores_budget(
    start_hub: Callable[..., Hub], tmp_path: Path
) -> None:
    hub = start_hub()
    a, b = tmp_path / "a", tmp_path / "b"
    tkv(a, "init")
    tkv(a, "commit", "--role", "system", "You are terse.")
    tkv(a, "commit", "hello")
    tkv(a, "remote", "add", "origin", hub.url)
    tkv(a, "push", "-q")
    tkv(tmp_path, "clone", hub.url, str(b))
    small = tokens(b)
    grow(a, 5)
    tkv(a, "push", "-q")
    limit = (small + tokens(a)) // 2
    assert small < limit < tokens(a)

    tkv(b, "budget", str(limit), "--action", "reject")
    before = refs(b)
    out = tkv(b, "pull", "-q", ok=False)
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.splitlines() == [out.stderr.strip()]  # one line
    assert out.stderr.startswith("Error: the fast-forward would take the context of branch 'main' to ")
    assert out.stderr.strip().endswith("'main' did not move")
    after = refs(b)
    assert after[MAIN] == before[MAIN]  # the branch stays
    assert after["refs/remotes/origin/main"] == refs(a)[MAIN]  # what the fetch received is kept

    tkv(b, "budget", str(limit), "--action", "trim")
    assert tkv(b, "pull", "-q").stdout.startswith("fast-forward ")
    log = json.loads(tkv(b, "log", "--json").stdout)
    assert log[0]["operation"] == "trim"
    assert log[1]["commit_id"] == refs(a)[MAIN]
    assert tokens(b) <= limit


def test_a_push_to_a_hub_is_checked_by_the_hub_stores_budget(
    start_hub: Callable[..., Hub], tmp_path: Path
) -> None:
    a, hub_store = tmp_path / "a", tmp_path / "hubstore"
    tkv(a, "init")
    tkv(a, "commit", "--role", "system", "You are terse.")
    tkv(a, "commit", "hello")
    small = tokens(a)
    grow(a, 5)
    limit = (small + tokens(a)) // 2
    tkv(hub_store, "init")
    tkv(hub_store, "budget", str(limit), "--action", "reject")  # a local setting of the hub's store
    hub = start_hub(store=hub_store)
    tkv(a, "remote", "add", "origin", hub.url)

    out = tkv(a, "push", ok=False)
    assert out.returncode == 1
    assert len(out.stderr.splitlines()) == 1
    assert out.stderr.startswith("Error: push rejected: main (over-budget): the push would take the context ")
    assert "trim or compress the branch's context, then push again" in out.stderr
    assert MAIN not in refs(hub_store)

    tkv(hub_store, "budget", str(limit), "--action", "trim")  # changed while the hub runs (LMDB: fine)
    pushed = json.loads(tkv(a, "push", "--json").stdout)
    assert pushed["results"][0]["ok"] is True
    tip = refs(hub_store)[MAIN]
    assert tip != refs(a)[MAIN]  # the hub's budget added its trim on the pushed tip
    assert tkv(a, "pull", "-q").stdout.startswith("fast-forward ")
    log = json.loads(tkv(a, "log", "--json").stdout)
    assert (log[0]["commit_id"], log[0]["operation"]) == (tip, "trim")
    assert tokens(a) <= limit
