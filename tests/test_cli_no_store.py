"""No command but `init` and `clone` creates a store: a --store path with none is refused in one line, offering
`tractkv init`, and nothing is created there (issue 17, item 5: `serve` used to create and serve an empty one)."""

from __future__ import annotations

import json
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
    "cherry-pick": ["cherry-pick", "other"],
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
    "rebase": ["rebase", "other"],
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
    "tag": ["tag"],
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


# --- the global options: `--store PATH` and `-C DIR` before or after the subcommand (issue 34, item 5) -------


def command_paths() -> list[tuple[str, ...]]:
    """Every command of the click tree (groups and their subcommands, recursively), as argv prefixes."""

    def walk(command: click.Command, path: tuple[str, ...]) -> list[tuple[str, ...]]:
        found = [path]
        if isinstance(command, click.Group):
            for name, sub in sorted(command.commands.items()):
                found += walk(sub, (*path, name))
        return found

    return walk(cli, ())


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "tractkv")
def test_every_command_takes_the_global_options_and_dash_h(path: tuple[str, ...]) -> None:
    runner = CliRunner()
    short = runner.invoke(cli, [*path, "-h"])
    assert short.exit_code == 0, short.output
    assert short.stdout == runner.invoke(cli, [*path, "--help"]).stdout
    assert "--store PATH" in short.stdout
    assert "-C DIR" in short.stdout


@pytest.mark.parametrize("position", ["before", "after"])
@pytest.mark.parametrize("name", sorted(INVOCATIONS))
def test_store_and_dash_c_before_or_after_the_command(
    name: str, position: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--store` after the command is the global one; `-C DIR` makes a relative `--store` relative to DIR; the
    process's directory is back as it was after the command (in-process callers run on)."""
    (tmp_path / "in.tkvbundle").write_bytes(b"not read")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # a relative path resolved here instead of in tmp_path would miss
    argv = [a.replace("{tmp}", str(tmp_path)) for a in INVOCATIONS[name]]
    for options, missing in (
        (["--store", str(tmp_path / "typo")], tmp_path / "typo"),
        (["-C", str(tmp_path), "--store", "typo"], tmp_path / "typo"),
        (["-C", str(tmp_path)], tmp_path / ".tractkv"),  # the default store, in DIR
    ):
        full = [*options, *argv] if position == "before" else [*argv, *options]
        result = CliRunner().invoke(cli, full)
        assert result.exit_code == 1, (full, result.output)
        assert result.stderr.strip().splitlines() == [f"Error: no tractkv store at {missing} {HINT}"], full
        assert Path.cwd() == work
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.tkvbundle", "work"]
    assert list(work.iterdir()) == []


def test_the_store_after_the_command_wins_and_dash_c_chains(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["init", "-C", str(tmp_path), "--store", "a"]).exit_code == 0
    assert (tmp_path / "a" / "data.mdb").is_file()
    (tmp_path / "d").mkdir()
    assert (
        runner.invoke(cli, ["-C", str(tmp_path), "-C", "d", "init"]).exit_code == 0
    )  # each -C from the last
    assert (tmp_path / "d" / ".tractkv" / "data.mdb").is_file()
    made = runner.invoke(
        cli, ["--store", str(tmp_path / "nope"), "commit", "hi", "--store", str(tmp_path / "a")]
    )
    assert made.exit_code == 0, made.output
    assert not (tmp_path / "nope").exists()
    log = runner.invoke(cli, ["log", "--json", "-C", str(tmp_path), "--store", "a"])
    assert [c["commit_id"] for c in json.loads(log.stdout)] == [made.stdout.strip()]
    text = runner.invoke(cli, ["-C", str(tmp_path / "a"), "log", "--store", "."])
    assert text.stdout.startswith(made.stdout[:12])
    clone = runner.invoke(cli, ["clone", str(tmp_path / "a"), "-C", str(tmp_path), "--store", "b", "-q"])
    assert clone.exit_code == 0, clone.output
    assert (tmp_path / "b" / "data.mdb").is_file()
    bad = runner.invoke(cli, ["log", "-C", str(tmp_path / "no-such-dir")])
    assert bad.exit_code == 2
    assert "cannot change to" in bad.stderr


def test_a_command_added_later_gets_the_global_options(tmp_path: Path) -> None:
    """A new command needs nothing for `--store` / `-C`: registering it (even a subcommand added to a group
    after the group was registered) is enough."""

    @click.group("scratch-group")
    def group() -> None:
        pass

    cli.add_command(group)
    try:

        @group.command("where")
        @click.pass_context
        def where(ctx: click.Context) -> None:
            from tractkv.cli.common import state

            click.echo(state(ctx).store_path)
            click.echo(Path.cwd())

        out = CliRunner().invoke(cli, ["scratch-group", "where", "-C", str(tmp_path), "--store", "s"])
        assert out.exit_code == 0, out.output
        assert out.stdout.splitlines() == ["s", str(tmp_path)]
    finally:
        cli.commands.pop("scratch-group")
