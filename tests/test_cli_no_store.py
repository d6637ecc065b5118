"""No command but `init` and `clone` creates a store: a --store path with none is refused in one line, offering
`tractkv init`, and nothing is created there (issue 17, item 5: `serve` used to create and serve an empty one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tractkv.cli import cli

HINT = "(create one with `tractkv init`, or `tractkv clone URL`)"

# One invocation of every command and subcommand that needs a store (argv after `--store PATH`).
INVOCATIONS: dict[str, list[str]] = {
    "annotate": ["annotate", "HEAD", "pinned"],
    "blame": ["blame"],
    "branch": ["branch"],
    "budget": ["budget", "1000"],
    "bundle create": ["bundle", "create", "{tmp}/out.tkvbundle"],
    "bundle unbundle": ["bundle", "unbundle", "{tmp}/in.tkvbundle"],
    "cat-object": ["cat-object", "abcd"],
    "checkout": ["checkout", "main"],
    "children": ["children"],
    "collapse": ["collapse", "main.spawn/x", "--content", "done"],
    "commit": ["commit", "hello"],
    "compile": ["compile"],
    "diff": ["diff", "HEAD"],
    "export": ["export"],
    "fetch": ["fetch"],
    "fsck": ["fsck"],
    "gc": ["gc"],
    "grep": ["grep", "x"],
    "log": ["log"],
    "mcp": ["mcp"],
    "merge": ["merge", "other"],
    "pull": ["pull"],
    "push": ["push"],
    "reflog": ["reflog"],
    "remote": ["remote"],
    "remote add": ["remote", "add", "origin", "{tmp}/elsewhere"],
    "remote prune": ["remote", "prune", "origin"],
    "remote list": ["remote", "list"],
    "remote remove": ["remote", "remove", "origin"],
    "reset": ["reset", "HEAD"],
    "serve": ["serve", "--port", "0"],
    "show": ["show"],
    "spawn": ["spawn", "a task"],
    "stats": ["stats"],
    "status": ["status"],
    "switch": ["switch", "main"],
    "usage": ["usage"],
    "usage rerun": ["usage", "rerun", "abcd"],
    "view": ["view", "--port", "0"],
}
CREATORS = {"init", "clone"}


def all_commands() -> set[str]:
    names: set[str] = set()
    for name, command in cli.commands.items():
        if isinstance(command, click.Group):
            names |= {f"{name} {sub}" for sub in command.commands}
            if command.invoke_without_command:
                names.add(name)
        else:
            names.add(name)
    return names - CREATORS


def test_the_table_names_every_command() -> None:
    assert set(INVOCATIONS) == all_commands()


@pytest.mark.parametrize("name", sorted(INVOCATIONS))
def test_a_command_refuses_a_missing_store_and_creates_nothing(name: str, tmp_path: Path) -> None:
    (tmp_path / "in.tkvbundle").write_bytes(b"not read")
    missing = tmp_path / "typo"
    argv = [a.replace("{tmp}", str(tmp_path)) for a in INVOCATIONS[name]]
    result = CliRunner().invoke(cli, ["--store", str(missing), *argv])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().splitlines() == [f"Error: no tractkv store at {missing} {HINT}"]
    assert not missing.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.tkvbundle"]


def test_serve_refuses_a_missing_store_in_a_real_process(tmp_path: Path) -> None:
    missing = tmp_path / "typo"
    out = subprocess.run(
        [sys.executable, "-m", "tractkv", "--store", str(missing), "serve", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [f"Error: no tractkv store at {missing} {HINT}"]
    assert out.stdout == ""
    assert not missing.exists()


def test_init_then_serve_works(tmp_path: Path) -> None:
    store = tmp_path / "s"
    assert CliRunner().invoke(cli, ["--store", str(store), "init"]).exit_code == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "tractkv", "--store", str(store), "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("http://127.0.0.1:")
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
