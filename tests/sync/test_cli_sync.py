"""The sync commands end to end: `tractkv` subprocesses against a real `tractkv serve` hub and a bundle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from .conftest import ADMIN, EDGE, Hub


def tkv(
    store: Path, *args: str, env: dict[str, str] | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, "-m", "tractkv", "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if ok:
        assert out.returncode == 0, (args, out.stdout, out.stderr)
    return out


def messages(store: Path) -> list[str]:
    data = json.loads(tkv(store, "compile", "--format", "openai").stdout)
    return [m["content"] for m in data["messages"]]


def test_remote_push_clone_pull_status_through_a_hub(start_hub: Callable[..., Hub], tmp_path: Path) -> None:
    hub = start_hub()
    a, b = tmp_path / "a", tmp_path / "b"
    tkv(a, "init")
    tkv(a, "commit", "--role", "system", "You are terse.")
    tkv(a, "commit", "hello from a")
    tkv(a, "remote", "add", "origin", hub.url)
    assert tkv(a, "remote", "list").stdout == f"origin\t{hub.url}\n"
    assert json.loads(tkv(a, "remote", "list", "--json").stdout) == {"origin": hub.url}
    pushed = tkv(a, "push", "--json")
    assert json.loads(pushed.stdout)["results"][0]["ok"] is True
    assert "\r" not in pushed.stderr  # no progress bar when stderr is not a terminal
    out = tkv(tmp_path, "clone", hub.url, str(b))
    assert "on main" in out.stdout
    assert messages(b) == messages(a)
    tkv(b, "commit", "reply from b")
    tkv(b, "push", "-q")
    tkv(a, "commit", "a keeps going")
    refused = tkv(a, "push", ok=False)
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1
    assert "non-fast-forward" in refused.stderr
    ff_only = tkv(a, "pull", "--ff-only", ok=False)
    assert ff_only.returncode == 1
    assert "diverged" in ff_only.stderr
    status = tkv(a, "status").stdout
    assert "upstream  origin/main: ahead 1, behind 1" in status
    assert tkv(a, "pull").stdout.startswith("merge ")
    tkv(a, "push")
    tkv(b, "pull")
    assert messages(b) == messages(a)
    assert "reply from b" in messages(a)
    fetched = tkv(b, "fetch")
    assert fetched.stdout == "up to date\n"
    tkv(b, "remote", "remove", "origin")
    assert tkv(b, "remote", "list").stdout == ""


def test_tokens_from_the_environment_and_scoped_pushes(
    start_hub: Callable[..., Hub], tokens_file: str, tmp_path: Path
) -> None:
    hub = start_hub("--tokens", tokens_file)
    a = tmp_path / "a"
    tkv(a, "init")
    tkv(a, "commit", "edge agent session")
    tkv(a, "remote", "add", "origin", hub.url, "--token-env", "EDGE_TOKEN")
    denied = tkv(a, "push", ok=False)
    assert "authentication required" in denied.stderr
    forbidden = tkv(a, "push", env={"EDGE_TOKEN": EDGE}, ok=False)
    assert "forbidden" in forbidden.stderr
    assert EDGE not in forbidden.stderr
    tkv(a, "branch", "agents/edge-7/main")
    tkv(a, "push", "origin", "agents/edge-7/main", env={"EDGE_TOKEN": EDGE})
    out = tkv(
        tmp_path,
        "clone",
        hub.url,
        str(tmp_path / "b"),
        "--branch",
        "agents/edge-7/main",
        env={"TRACTKV_TOKEN": ADMIN},
    )
    assert "on agents/edge-7/main" in out.stdout


def test_bundle_create_and_unbundle(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    tkv(a, "init")
    tkv(a, "commit", "carried on a USB stick")
    bundle = tmp_path / "session.tkvbundle"
    assert "1 branch(es)" in tkv(a, "bundle", "create", str(bundle)).stdout
    tkv(b, "init")
    out = tkv(b, "bundle", "unbundle", str(bundle))
    assert out.stdout.startswith("bundle/main ")
    tkv(b, "merge", "bundle/main")
    assert messages(b) == ["carried on a USB stick"]
    missing = tkv(a, "bundle", "create", str(tmp_path / "x.tkvbundle"), "nope", ok=False)
    assert "no branch named nope" in missing.stderr
    tkv(tmp_path, "clone", str(bundle), str(tmp_path / "c"))
    assert messages(tmp_path / "c") == messages(a)


def test_a_narrower_token_fetch_keeps_the_tracking_branches_it_cannot_see(
    start_hub: Callable[..., Hub], tokens_file: str, tmp_path: Path
) -> None:
    """Issue 29 item 10: fetching with a narrower token printed `- [deleted] origin/main` and deleted it; as
    git, a fetch keeps tracking branches it no longer sees and only `--prune` deletes them. A relative path
    and a host-less URL are settled at `remote add`."""
    hub = start_hub("--tokens", tokens_file)
    a = tmp_path / "a"
    tkv(a, "init")
    tkv(a, "commit", "on main")
    tkv(a, "branch", "agents/edge-7/main")
    tkv(a, "remote", "add", "origin", hub.url)
    admin = {"TRACTKV_TOKEN": ADMIN}
    tkv(a, "push", "origin", "main", env=admin)
    tkv(a, "push", "origin", "agents/edge-7/main", env=admin)
    b = tmp_path / "b"
    tkv(b, "init")
    tkv(b, "remote", "add", "origin", hub.url, "--token-env", "B_TOKEN")
    first = tkv(b, "fetch", env={"B_TOKEN": ADMIN})
    assert "[new] origin/main" in first.stdout
    assert "[new] origin/agents/edge-7/main" in first.stdout
    narrow = tkv(b, "fetch", env={"B_TOKEN": EDGE})
    assert "deleted" not in narrow.stdout
    assert narrow.stdout == "up to date\n"
    assert tracking(b) == ["origin/agents/edge-7/main", "origin/main"]
    tkv(b, "pull", "origin", "agents/edge-7/main", env={"B_TOKEN": EDGE})  # the pull's fetch keeps it too
    assert tracking(b) == ["origin/agents/edge-7/main", "origin/main"]
    pruned = tkv(b, "fetch", "--prune", env={"B_TOKEN": EDGE})
    assert pruned.stdout == "  - [deleted] origin/main\n"
    assert tracking(b) == ["origin/agents/edge-7/main"]
    bad = tkv(b, "remote", "add", "x", "http://", ok=False)
    assert bad.returncode == 1
    assert bad.stderr.count("\n") == 1
    assert "no host" in bad.stderr
    assert "x\t" not in tkv(b, "remote", "list").stdout
    subprocess.run(  # a relative path, given in tmp_path: recorded absolute
        [sys.executable, "-m", "tractkv", "--store", "b", "remote", "add", "rel", "a"],
        cwd=tmp_path,
        check=True,
    )
    assert f"rel\t{tmp_path / 'a'}\n" in tkv(b, "remote", "list").stdout
    assert "[new] rel/main" in tkv(b, "fetch", "rel").stdout  # from another directory: the same store


def tracking(store: Path) -> list[str]:
    return sorted(b["name"] for b in json.loads(tkv(store, "branch", "--json").stdout) if b["is_remote"])
