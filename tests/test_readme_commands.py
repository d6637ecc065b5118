"""The README's command table documents every command and every option `--help` shows (issue 17)."""

from __future__ import annotations

from pathlib import Path

import click

from tractkv.cli import cli

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
ROWS = [line for line in README.splitlines() if line.startswith("| `tractkv ")]
# said once above the table: --json (read commands), --store and -C (every command)
COMMON = {"--help", "--json", "--store", "-C"}


def _commands() -> list[tuple[str, click.Command]]:
    out = []
    for name, command in cli.commands.items():
        if isinstance(command, click.Group):
            out += [(f"{name} {sub}", c) for sub, c in command.commands.items()]
        else:
            out.append((name, command))
    return out


def _rows_of(path: str) -> list[str]:
    """The rows whose first cell names the command (a group's subcommands share a row)."""
    name, _, sub = path.partition(" ")
    found = []
    for row in ROWS:
        cell = row.split("` |", 1)[0]
        if f"tractkv {path}" in cell or (sub and f"tractkv {name} " in cell and f" {sub}" in cell):
            found.append(cell)
    return found


def test_every_command_has_a_row() -> None:
    missing = [path for path, _ in _commands() if not _rows_of(path)]
    assert missing == []


def test_every_option_is_in_its_commands_row() -> None:
    missing = []
    for path, command in _commands():
        cells = " ".join(_rows_of(path))
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            names = [*param.opts, *param.secondary_opts]
            if set(names) & COMMON:
                continue
            if not any(n in cells for n in names):
                missing.append(f"{path}: {'/'.join(names)}")
    assert missing == []
