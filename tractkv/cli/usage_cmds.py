"""Tool-usage commands: ``usage`` (trees, filters, statistics) and ``export`` (a conversation with its usage)."""

from __future__ import annotations

import click

from tractkv.cli.common import CliState, echo_json, json_option, note, with_state
from tractkv.engine.usage import STATUSES, flatten, usage_stats
from tractkv.errors import InvalidInput


@click.group("usage", invoke_without_command=True)
@click.option("--rev", default=None, help="Show the usage history of this revision instead of HEAD.")
@click.option(
    "--commit", "commit", default=None, help="Only the usage of this assistant or tool-result commit."
)
@click.option("--tool", "tool_name", default=None, help="Only executions of this tool (a flat list).")
@click.option(
    "--status",
    type=click.Choice(STATUSES),
    default=None,
    help="Only executions with this status (a flat list).",
)
@click.option("--stats", is_flag=True, help="Per-tool counts, success rate and p50 / p95 durations.")
@json_option
@with_state
def usage(
    st: CliState,
    rev: str | None,
    commit: str | None,
    tool_name: str | None,
    status: str | None,
    stats: bool,
    as_json: bool,
) -> None:
    """Show tool executions as trees (nested calls under their parent), newest history last.

    Running executions show as pending; those whose process died show as interrupted. ``usage rerun ID``
    runs a failed execution again.
    """
    if click.get_current_context().invoked_subcommand is not None:
        return
    from tractkv.toolkit.transcript import format_usage, stats_lines, tree_lines

    if stats:
        table = usage_stats(st.tract(readonly=True).tool_usages(commit, tool_name, status, rev=rev))
        if as_json:
            echo_json({name: s.to_json() for name, s in table.items()})
        elif table:
            for line in stats_lines(table):
                click.echo(line)
        else:
            note("no tool usage")
        return
    if tool_name is not None or status is not None:
        usages = st.tract(readonly=True).tool_usages(commit, tool_name, status, rev=rev)
        if as_json:
            echo_json([u.to_json() for u in usages])
            return
        for item in usages:
            click.echo(format_usage(item))
        if not usages:
            note("no matching tool usage")
        return
    trees = st.tract(readonly=True).usage_tree(commit, rev=rev)
    if as_json:
        echo_json([t.to_json() for t in trees])
        return
    lines = tree_lines(trees)
    for line in lines:
        click.echo(line)
    count = len(flatten(trees))
    note(f"{count} tool execution(s) in {len(trees)} tree(s)" if count else "no tool usage")


@usage.command("rerun")
@click.argument("usage_id")
@click.option(
    "--executor",
    "factory",
    default=None,
    metavar="MODULE:NAME",
    help="A function taking the Tract and returning the ToolExecutor that has the tool "
    "(default: the built-in tools).",
)
@json_option
@with_state
def rerun(st: CliState, usage_id: str, factory: str | None, as_json: bool) -> None:
    """Run the failed execution USAGE_ID (a full id or a unique prefix) again (same tool, arguments and call);
    its result replaces the failed one as an edit, and its record names the failed one."""
    from tractkv.toolkit.rerun import rerun_tool_usage
    from tractkv.toolkit.transcript import format_usage

    t = st.tract()
    executor = _load_executor(factory, t) if factory is not None else None
    new = rerun_tool_usage(t, usage_id, executor)
    if as_json:
        echo_json(new.to_json())
        return
    click.echo(format_usage(new))
    note(f"re-ran {new.rerun_of} as {new.id} ({new.status})")


def _load_executor(spec: str, tract: object) -> object:
    """The executor a ``MODULE:NAME`` factory returns for ``tract``.

    Raises:
        InvalidInput: a malformed spec, a module that cannot be imported, or a name that is not callable.
    """
    import importlib

    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise InvalidInput(f"--executor takes MODULE:NAME, not {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise InvalidInput(
            f"--executor: cannot import {module_name!r} ({type(exc).__name__}: {exc})"
        ) from None
    factory = getattr(module, name, None)
    if not callable(factory):
        raise InvalidInput(f"--executor: {module_name} has no function {name!r}")
    return factory(tract)


@click.command("export")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "markdown"]),
    default="json",
    show_default=True,
    help="The output format.",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="Write to a file.")
@with_state
def export(st: CliState, fmt: str, output: str | None) -> None:
    """Export the conversation at HEAD with its tool-usage history (JSON or Markdown)."""
    from tractkv.toolkit.transcript import export as export_text
    from tractkv.tract import Tract

    with Tract(st.store(readonly=True), owns_store=False, readonly=True) as t:
        text = export_text(t, fmt)
    if output is None:
        click.echo(text, nl=not text.endswith("\n"))
        return
    with open(output, "w", encoding="utf-8") as handle:
        handle.write(text)
    note(f"wrote {output}")
