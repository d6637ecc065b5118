"""What the sync commands tell a CLI user (issue 17, items 7 and 11): refusals name the flag or the variable to
use, and a push's progress line shows n/total. `tractkv` subprocesses against real hubs and stores."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tractkv import Tract

from .conftest import ADMIN, Hub

REPO = Path(__file__).resolve().parents[2]


def tkv(
    store: Path, *args: str, env: dict[str, str] | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("TRACTKV_TOKEN", "EDGE_TOKEN")}
    out = subprocess.run(
        [sys.executable, "-m", "tractkv", "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**base, "PYTHONPATH": str(REPO), **(env or {})},
    )
    if ok:
        assert out.returncode == 0, (args, out.stdout, out.stderr)
    else:
        assert out.returncode == 1, (args, out.stdout, out.stderr)
        assert out.stderr.startswith("Error: "), out.stderr
        assert out.stderr.count("\n") == 1, out.stderr
        assert "Traceback" not in out.stderr
    return out


def refs(store: Path) -> dict[str, str]:
    return {b["name"]: b["head"] for b in json.loads(tkv(store, "branch", "--json").stdout)}


def test_refused_pushes_and_pulls_say_what_to_do(start_hub: Callable[..., Hub], tmp_path: Path) -> None:
    hub = start_hub()
    a, b = tmp_path / "a", tmp_path / "b"
    tkv(a, "init")
    first = tkv(a, "commit", "The meeting is on Monday at ten in the small room.").stdout.strip()
    tkv(a, "remote", "add", "origin", hub.url)
    tkv(a, "push")
    tkv(tmp_path, "clone", hub.url, str(b))
    tkv(b, "commit", "--edit", first, "The meeting is on Tuesday.")
    tkv(b, "push")
    tkv(a, "commit", "--edit", first, "The meeting is on Wednesday.")
    before = refs(a)
    refused = tkv(a, "push", ok=False).stderr
    assert "non-fast-forward" in refused
    assert "pull first" in refused
    assert "--force" in refused
    remote_tip = refs(b)["main"]
    wrong = tkv(a, "push", "--expect", "HEAD~1", ok=False).stderr
    assert "the remote is not at the value you expected" in wrong
    assert "--expect" in wrong
    assert remote_tip[:12] in wrong
    assert "non-fast-forward" not in wrong
    assert refs(a) == before
    conflict = tkv(a, "pull", ok=False).stderr
    assert "merging origin/main into main" in conflict
    assert 'main: "The meeting is on Wednesday."' in conflict
    assert 'origin/main: "The meeting is on Tuesday."' in conflict
    assert "--strategy ours|theirs" in conflict
    assert "strategy='ours'" in conflict  # the library's spelling stays beside the flag
    tkv(a, "pull", "--strategy", "ours")
    tkv(a, "push")  # a fast-forward now
    tkv(a, "push", "--force", "--expect", refs(a)["main"])  # the lease holds: up to date
    assert "remote is not at" not in tkv(a, "push", "--expect", "origin/main").stderr


def test_a_401_names_the_token_variable_and_the_flag(
    start_hub: Callable[..., Hub], tokens_file: str, tmp_path: Path
) -> None:
    hub = start_hub("--tokens", tokens_file)
    a = tmp_path / "a"
    tkv(a, "init")
    tkv(a, "commit", "hello")
    tkv(a, "remote", "add", "origin", hub.url)
    denied = tkv(a, "push", ok=False).stderr
    assert "$TRACTKV_TOKEN" in denied
    assert "--token-env" in denied
    assert "bearer" not in denied.lower()
    fetch = tkv(a, "fetch", ok=False).stderr
    assert "$TRACTKV_TOKEN" in fetch
    wrong = tkv(a, "push", env={"TRACTKV_TOKEN": "not-a-token-the-hub-knows"}, ok=False).stderr
    assert "does not accept the token in $TRACTKV_TOKEN" in wrong
    assert "not-a-token-the-hub-knows" not in wrong
    tkv(a, "remote", "add", "edge", hub.url, "--token-env", "EDGE_TOKEN")
    named = tkv(a, "push", "edge", ok=False).stderr
    assert "$EDGE_TOKEN" in named
    cloned = tkv(tmp_path, "clone", hub.url, str(tmp_path / "c"), ok=False).stderr
    assert "$TRACTKV_TOKEN" in cloned
    assert not (tmp_path / "c").exists()
    tkv(a, "push", env={"TRACTKV_TOKEN": ADMIN})


def test_push_progress_shows_the_total_on_a_terminal(tmp_path: Path) -> None:
    a, remote = tmp_path / "a", tmp_path / "remote"
    with Tract.open(str(a), durable=False) as t:
        for n in range(200):  # 400 objects: more than one progress step of 256
            t.user(f"message {n}")
    tkv(remote, "init")
    tkv(a, "remote", "add", "origin", str(remote))
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tractkv", "--store", str(a), "push"],
            stdout=subprocess.PIPE,
            stderr=slave,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        os.close(slave)
        drawn = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal closed: the process is done with it
                break
            if not chunk:
                break
            drawn += chunk
        assert proc.wait(timeout=120) == 0
        assert proc.stdout is not None
        assert proc.stdout.read() == b"main: ok\n"
        proc.stdout.close()
    finally:
        os.close(master)
    text = drawn.decode()
    assert "sending: 256/400 objects" in text
    assert "sending: 400/400 objects" in text
    assert "sent 400 objects" in text


def test_clone_of_a_missing_branch_and_an_unbundle_with_nothing_new_say_so(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tractkv.cli import cli

    source = str(tmp_path / "source")
    with Tract.open(source) as t:
        t.user("hi")
    runner = CliRunner()
    result = runner.invoke(cli, ["clone", source, str(tmp_path / "copy"), "--branch", "nosuch"])
    assert result.exit_code == 1
    assert f"the remote {source} has no branch named 'nosuch' (its branches: main)" in result.output
    assert not (tmp_path / "copy").exists()
    bundle = str(tmp_path / "b.tkvbundle")
    assert runner.invoke(cli, ["--store", source, "bundle", "create", bundle]).exit_code == 0
    result = runner.invoke(cli, ["--store", source, "bundle", "unbundle", bundle])
    assert result.exit_code == 0
    assert "this store already had every object of the bundle" in result.output
    assert "of 0" not in result.output


def test_remote_alone_lists_the_remotes(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tractkv.cli import cli

    store = str(tmp_path / "s")
    runner = CliRunner()
    assert runner.invoke(cli, ["--store", store, "init"]).exit_code == 0
    assert (
        runner.invoke(cli, ["--store", store, "remote", "add", "origin", str(tmp_path / "o")]).exit_code == 0
    )
    result = runner.invoke(cli, ["--store", store, "remote"])
    assert result.exit_code == 0
    assert result.output == f"origin\t{tmp_path / 'o'}\n"
