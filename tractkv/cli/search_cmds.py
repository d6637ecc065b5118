"""``grep`` and ``blame``: search a branch's history, and say where each message of a context comes from
(:mod:`tractkv.engine.search`, :mod:`tractkv.engine.blame`)."""

from __future__ import annotations

import sys
from typing import Any

import click

from tractkv.cli.common import CliState, complete_revisions, echo_json, json_option, with_state
from tractkv.engine.history import clip, short_id
from tractkv.model import to_jsonable
from tractkv.store.lmdb import files_writable

ROLES = ("system", "user", "assistant", "tool")
NO_MATCH = 1  # git grep's exit code when nothing matched


@click.command("grep")
@click.option("-i", "--ignore-case", is_flag=True, help="Fold case.")
@click.option("-E", "--regex", "regex", is_flag=True, help="PATTERN is a (Python) regular expression.")
@click.option("--role", type=click.Choice(ROLES), default=None, help="Only messages of this speaker.")
@click.option("--tool", default=None, help="Only calls to, and results of, this tool.")
@click.option("--context", "in_context", is_flag=True, help="Search the compiled context, not the history.")
@click.option("--after", default=None, help="Only commits made after this revision (REV..after).")
@click.option("-n", "--max-count", "limit", type=click.IntRange(min=0), default=None, help="At most N hits.")
@json_option
@click.argument("pattern")
@click.argument("rev", required=False, shell_complete=complete_revisions)
@with_state
def grep(st: CliState, pattern: str, rev: str | None, as_json: bool, **options: Any) -> None:
    """Find PATTERN in the history of REV (default HEAD): message text, tool calls (name, arguments), tool
    results, notes and metadata; one line per matching field, newest first. Exit 1 when nothing matches."""
    # writable: the index it builds is saved in the store's derived table; read-only (the index in memory only)
    # when this process cannot write the store (a read-only filesystem, no write permission)
    hits = st.tract(readonly=not files_writable(st.store_path)).search(
        pattern,
        regex=options["regex"],
        ignore_case=options["ignore_case"],
        role=options["role"],
        tool=options["tool"],
        scope="context" if options["in_context"] else "history",
        branch=rev,
        after=options["after"],
        limit=options["limit"],
    )
    if as_json:
        echo_json(to_jsonable(hits))
    else:
        color = sys.stdout.isatty()
        for hit in hits:
            flat = hit.snippet.replace("\n", " ").replace("\r", " ").replace("\t", " ")
            match = flat[hit.start : hit.end]
            shown = click.style(match, fg="red", bold=True) if color else match
            where = hit.field if hit.tool is None else f"{hit.field}({hit.tool})"
            click.echo(
                f"{short_id(hit.commit_id)} {hit.role or hit.operation} {where}: "
                f"{flat[: hit.start]}{shown}{flat[hit.end :]}"
            )
    if not hits:
        raise SystemExit(NO_MATCH)


@click.command("blame")
@click.argument("rev", required=False, shell_complete=complete_revisions)
@json_option
@with_state
def blame(st: CliState, rev: str | None, as_json: bool) -> None:
    """For each message of the compiled context at REV (default HEAD): the commit that wrote it, and the
    edits, annotations and compression that shaped it."""
    t = st.tract(readonly=True)
    entries = t.blame(rev)
    if as_json:
        echo_json(to_jsonable(entries))
        return
    messages = t.compile(rev).messages if entries else []
    for entry, message in zip(entries, messages, strict=True):
        shaped = []
        if entry.placeholder:
            shaped.append("placeholder result")
        if entry.edits:
            shaped.append("edited by " + ", ".join(short_id(e) for e in entry.edits))
        if entry.annotations:
            shaped.append("annotated by " + ", ".join(short_id(a) for a in entry.annotations))
        if entry.compressed:
            shaped.append(f"summarizes {len(entry.compressed)} message{'s' * (len(entry.compressed) != 1)}")
        suffix = f"  ({'; '.join(shaped)})" if shaped else ""
        text = message.content
        if message.tool_calls:
            text = f"{text} [calls {', '.join(c.name for c in message.tool_calls)}]".strip()
        click.echo(
            f"{entry.index:>3} {short_id(entry.commit_id)} {entry.role:<9} {entry.operation:<8} "
            f"{clip(text, 60)}{suffix}"
        )


COMMANDS = (grep, blame)
