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


def test_a_pushers_reported_usage_cannot_lower_the_hubs_count(
    start_hub: Callable[..., Hub], tmp_path: Path
) -> None:
    """Issue 29 item 17: the usage a reply's metadata reports is the pusher's claim, not a measurement. A
    10k-token context whose last reply claims 1 input token is still over a 2,000-token ``reject`` budget
    on the hub (the receiving side counts at least its own estimate); the same claim still calibrates the
    pusher's own count (its own status and local budget)."""
    from tractkv import Tract

    a, hub_store = tmp_path / "a", tmp_path / "hubstore"
    with Tract.open(str(a), durable=False) as t:
        t.system("You are terse.")
        for i in range(25):
            t.user(f"Question {i}: " + "please explain in detail the following words. " * 40)
        t.assistant("Done.", metadata={"usage": {"input_tokens": 1, "output_tokens": 1}})
        count = t.status()
    assert count.token_count < 100  # the claim calibrates the pusher's own count
    assert count.estimated_tokens is not None
    assert count.estimated_tokens > 10_000
    tkv(hub_store, "init")
    tkv(hub_store, "budget", "2000", "--action", "reject")
    hub = start_hub(store=hub_store)
    tkv(a, "remote", "add", "origin", hub.url)

    out = tkv(a, "push", ok=False)
    assert out.returncode == 1
    assert out.stderr.startswith("Error: push rejected: main (over-budget): the push would take the context ")
    assert MAIN not in refs(hub_store)

    tkv(hub_store, "budget", "20000", "--action", "reject")  # a budget the estimate fits: accepted
    assert json.loads(tkv(a, "push", "--json").stdout)["results"][0]["ok"] is True


def test_a_pulls_fast_forward_counts_at_least_the_local_estimate(
    start_hub: Callable[..., Hub], tmp_path: Path
) -> None:
    """The same rule for a pull: the pulled reply's claimed usage cannot take a fast-forward past the pulling
    store's budget."""
    from tractkv import Tract

    hub = start_hub()
    a, b = tmp_path / "a", tmp_path / "b"
    tkv(a, "init")
    tkv(a, "commit", "hello")
    tkv(a, "remote", "add", "origin", hub.url)
    tkv(a, "push", "-q")
    tkv(tmp_path, "clone", hub.url, str(b))
    with Tract.open(str(a), durable=False) as t:
        for i in range(25):
            t.user(f"Question {i}: " + "please explain in detail the following words. " * 40)
        t.assistant("Done.", metadata={"usage": {"input_tokens": 1, "output_tokens": 1}})
    tkv(a, "push", "-q")
    tkv(b, "budget", "2000", "--action", "reject")
    before = refs(b)[MAIN]
    out = tkv(b, "pull", "-q", ok=False)
    assert out.returncode == 1
    assert out.stderr.startswith("Error: the fast-forward would take the context of branch 'main' to ")
    assert refs(b)[MAIN] == before
