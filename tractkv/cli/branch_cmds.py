"""A branch's commands: status, branch, switch, checkout, budget, merge, reset, reflog.

Each command parses, calls one :class:`~tractkv.Tract` method and prints; read commands take ``--json``.
``status`` and ``branch -v`` print the engine's one branch summary (:func:`tractkv.engine.branches.summary`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from tractkv.cli.common import (
    CliState,
    complete_branches,
    complete_revisions,
    echo_json,
    json_option,
    note,
    with_state,
)
from tractkv.model import to_jsonable

if TYPE_CHECKING:
    from tractkv.engine.values import StatusInfo


@click.command("status")
@json_option
@with_state
def status(st: CliState, as_json: bool) -> None:
    """Branch, HEAD, commit / message / token counts, budget use, ahead / behind its upstream."""
    info = st.tract(readonly=True).status()
    if as_json:
        echo_json(_summary_json(info))
        return
    where = f"HEAD detached at {str(info.head)[:12]}" if info.detached else f"on branch {info.branch}"
    click.echo(where)
    click.echo(f"head      {info.head or '(no commits yet)'}")
    click.echo(f"commits   {info.commit_count}")
    click.echo(f"messages  {info.message_count}")
    if info.count_source == "reported":
        source = f"reported by {str(info.reported_by)[:12]}; estimated {info.estimated_tokens}, {info.token_source}"
    else:
        source = f"estimated, {info.token_source}"
    tokens = f"tokens    {info.token_count} ({source})"
    if info.token_budget is not None and info.budget_used is not None:
        tokens += f", {info.budget_used:.0%} of a {info.token_budget}-token budget"
        if info.budget_action is not None:
            tokens += f" ({_policy_text(info.budget_action, info.budget_threshold)})"
    click.echo(tokens)
    overrun = info.budget_overrun
    if overrun is not None:
        done = (
            f": {overrun.action} {overrun.result_id[:12]} -> {overrun.token_count_after}"
            if overrun.result_id
            else f" ({overrun.action})"
        )
        click.echo(
            f"over      {overrun.commit_id[:12]} took it to {overrun.token_count} tokens, over {overrun.limit}{done}"
        )
    if info.upstream is not None:
        click.echo(f"upstream  {info.upstream}: ahead {info.ahead}, behind {info.behind}")


@click.command("branch")
@click.argument("name", required=False, shell_complete=complete_branches)
@click.argument("source", required=False, shell_complete=complete_revisions)
@click.option("--switch", "do_switch", is_flag=True, help="Switch to the new branch.")
@click.option("--delete", "-d", "delete", is_flag=True, help="Delete branch NAME.")
@click.option("--force", is_flag=True, help="With --delete: even if its commits are on no other branch.")
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="List each branch with its counts, budget use and ahead / behind its upstream (what status shows).",
)
@json_option
@with_state
def branch(
    st: CliState,
    name: str | None,
    source: str | None,
    do_switch: bool,
    delete: bool,
    force: bool,
    verbose: bool,
    as_json: bool,
) -> None:
    """List branches (-v: with what status shows of each); create NAME at SOURCE (default HEAD); or --delete
    NAME."""
    if verbose and name is None and not delete:
        _branch_summaries(st.tract(readonly=True).branches(), as_json)
        return
    t = st.tract()
    if delete:
        if name is None:
            raise click.UsageError("--delete needs a branch name")
        tip = t.delete_branch(name, force=force)
        note(f"deleted branch {name} (was {tip[:12]})")
        return
    if name is not None:
        created = t.branch(name, source=source, switch=do_switch)
        if as_json:
            echo_json(to_jsonable(created))
        else:
            click.echo(f"{created.name} {created.head}")
        return
    branches = t.list_branches()
    if as_json:
        echo_json([to_jsonable(b) for b in branches])
        return
    for b in branches:
        mark = "*" if b.is_current else " "
        prefix = "remotes/" if b.is_remote else ""
        click.echo(f"{mark} {prefix}{b.name} {str(b.head or '(no commits)')[:12]}")


def _summary_json(info: StatusInfo) -> dict[str, Any]:
    """A branch summary as ``status --json`` and ``branch -v --json`` print it: with ``budget_used``."""
    data: dict[str, Any] = to_jsonable(info)
    data["budget_used"] = info.budget_used
    return data


def _branch_summaries(summaries: list[StatusInfo], as_json: bool) -> None:
    """``branch -v``: a line per branch (``*`` HEAD's), or the summaries as JSON."""
    if as_json:
        echo_json([_summary_json(s) for s in summaries])
        return
    for s in summaries:
        mark = "*" if s.is_current else " "
        prefix = "remotes/" if s.is_remote else ""
        line = f"{mark} {prefix}{s.branch} {str(s.head or '(no commits)')[:12]}"
        line += f" {s.commit_count} commits, {s.message_count} messages, {s.token_count} tokens ({s.count_source})"
        if s.token_budget is not None and s.budget_used is not None:
            line += f", {s.budget_used:.0%} of a {s.token_budget}-token budget"
        if s.upstream is not None:
            line += f" [{s.upstream}: ahead {s.ahead}, behind {s.behind}]"
        click.echo(line)


@click.command("switch")
@click.argument("name", shell_complete=complete_branches)
@click.option("--create", "-c", is_flag=True, help="Create the branch at HEAD first.")
@with_state
def switch(st: CliState, name: str, create: bool) -> None:
    """Make NAME the current branch (stored as HEAD for the next open)."""
    t = st.tract()
    if create:
        t.branch(name, switch=True)
    else:
        t.switch(name)
    note(f"on branch {name}")


@click.command("checkout")
@click.argument("rev", required=False, shell_complete=complete_revisions)
@click.option(
    "-b",
    "new_branch",
    metavar="NAME",
    default=None,
    help="Create branch NAME at REV (default HEAD) and switch to it (as `switch -c`).",
)
@with_state
def checkout(st: CliState, rev: str | None, new_branch: str | None) -> None:
    """Switch to branch REV (as `switch` does), or detach HEAD at any other revision REV: compile and inspect
    it; committing there is an error. With -b NAME: create branch NAME at REV (default HEAD) and switch to
    it."""
    t = st.tract()
    if new_branch is not None:
        created = t.branch(new_branch, source=rev, switch=True)
        note(f"on new branch {new_branch}")
        click.echo(created.head or "")
        return
    if rev is None:
        raise click.UsageError("missing REV (a branch or revision), or -b NAME to create a branch")
    if rev in {b.name for b in t.list_branches(remotes=False)}:
        info = t.switch(rev)
        note(f"on branch {rev}")
        click.echo(info.head or "")
        return
    oid = t.checkout(rev)
    note(f"HEAD detached at {oid[:12]} (read-only; `tractkv switch BRANCH` to go back)")
    click.echo(oid)


def _policy_text(action: str, threshold: float | None) -> str:
    at = f" at {threshold:.0%}" if threshold is not None and threshold != 1 else ""
    return f"{action}{at}"


@click.command("budget")
@click.argument("max_tokens", required=False, type=click.IntRange(min=1), metavar="[N]")
@click.option(
    "--action",
    type=click.Choice(["warn", "reject", "compress", "trim"]),
    default=None,
    help="What a commit over the limit does (default: the stored action, else warn): warn, reject it, "
    "compress or trim the oldest messages.",
)
@click.option(
    "--threshold",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=None,
    help="The limit as a fraction of N (default: the stored threshold, else 1.0): the action runs above "
    "threshold x N tokens.",
)
@click.option("--clear", is_flag=True, help="Remove the current branch's budget.")
@json_option
@with_state
def budget(
    st: CliState,
    max_tokens: int | None,
    action: str | None,
    threshold: float | None,
    clear: bool,
    as_json: bool,
) -> None:
    """Show the current branch's token budget, set it to N tokens (and what a commit over it does), or
    --clear it (`status` reports use against it; a local setting, never synced)."""
    if clear and max_tokens is not None:
        raise click.UsageError("give N or --clear, not both")
    if (action is not None or threshold is not None) and max_tokens is None:
        raise click.UsageError("--action and --threshold go with N")
    if clear or max_tokens is not None:
        t = st.tract()
        if not clear and (action is None or threshold is None):  # keep what is stored unless given
            before = t.status()
            action = action or before.budget_action or "warn"
            threshold = before.budget_threshold if threshold is None else threshold
        t.set_budget(
            None if clear else max_tokens,
            action=action or "warn",
            threshold=1.0 if threshold is None else threshold,
        )
    else:
        t = st.tract(readonly=True)
    info = t.status()
    stored = None if info.budget_action is None else info.token_budget
    if as_json:
        echo_json(
            {
                "branch": t.current_branch,
                "budget": stored,
                "action": info.budget_action,
                "threshold": info.budget_threshold,
            }
        )
    elif stored is None:
        click.echo(f"no token budget on {t.current_branch}" if t.current_branch else "no token budget")
    else:
        policy = _policy_text(str(info.budget_action), info.budget_threshold)
        click.echo(f"{stored} tokens on {t.current_branch} ({policy})")


@click.command("merge")
@click.argument("source", shell_complete=complete_revisions)
@click.option(
    "--strategy",
    type=click.Choice(["auto", "ours", "theirs"]),
    default="auto",
    show_default=True,
    help="auto refuses conflicts; ours / theirs settle them.",
)
@click.option("--message", "-m", default=None, help="The merge commit's message.")
@json_option
@with_state
def merge(st: CliState, source: str, strategy: str, message: str | None, as_json: bool) -> None:
    """Merge SOURCE (a branch or revision) into the current branch."""
    result = st.tract().merge(source, strategy=strategy, message=message)
    if as_json:
        echo_json(to_jsonable(result))
        return
    extra = f", {result.conflicts_resolved} conflict(s) resolved ({result.strategy})"
    click.echo(f"{result.kind}: {result.head}" + (extra if result.conflicts_resolved else ""))


@click.command("reset")
@click.argument("rev", shell_complete=complete_revisions)
@click.option("--soft", "mode", flag_value="soft", default=True, help="Keep the old tip protected (default).")
@click.option("--hard", "mode", flag_value="hard", help="Let the next gc reclaim the abandoned commits.")
@with_state
def reset(st: CliState, rev: str, mode: str) -> None:
    """Move the current branch to REV (undo with `tractkv reset <old tip>` from the reflog)."""
    t = st.tract()
    old = t.head
    oid = t.reset(rev, mode=mode)
    note(f"reset --{mode}: {str(old)[:12]} -> {oid[:12]}")
    click.echo(oid)


@click.command("reflog")
@click.argument("branch", required=False, shell_complete=complete_branches)
@click.option("--limit", "-n", type=click.IntRange(min=0), default=None)
@json_option
@with_state
def reflog(st: CliState, branch: str | None, limit: int | None, as_json: bool) -> None:
    """Moves of BRANCH (default: the current one), newest first."""
    entries = st.tract(readonly=True).reflog(branch, limit=limit)
    if as_json:
        echo_json([to_jsonable(e) for e in entries])
        return
    for e in entries:
        old = str(e.old)[:12] if e.old else "(none)"
        new = str(e.new)[:12] if e.new else "(deleted)"
        hard = " [hard]" if e.hard else ""
        click.echo(f"{e.created_at.isoformat()} {old} -> {new} {e.operation}{hard}: {e.message}")


COMMANDS = (status, branch, switch, checkout, budget, merge, reset, reflog)
