"""``spawn``, ``collapse``, ``children``: sub-agent contexts from the command line (see
:mod:`tractkv.engine.spawning`)."""

from __future__ import annotations

import click

from tractkv.cli.common import CliState, complete_branches, echo_json, json_option, with_state

INHERIT = ("snapshot", "full", "none")


@click.command("spawn")
@click.argument("purpose")
@click.option(
    "--inherit",
    type=click.Choice(INHERIT),
    default="snapshot",
    show_default=True,
    help="What the child starts with: the compiled messages, the whole history, or nothing.",
)
@click.option("--tools", is_flag=True, help="Give the child the current context's tool set.")
@click.option("--branch", default=None, help="The child's branch (default: <branch>.spawn/<purpose>).")
@click.option("--switch", "do_switch", is_flag=True, help="Make the child's branch the current one.")
@json_option
@with_state
def spawn(
    st: CliState, purpose: str, inherit: str, tools: bool, branch: str | None, do_switch: bool, as_json: bool
) -> None:
    """Start a child context for PURPOSE on a new branch; the current branch does not move."""
    t = st.tract()
    with t.spawn(purpose, inherit=inherit, tools=tools, branch=branch) as child:
        name, head = child.current_branch, child.head
        info = child.parent()
    assert name is not None
    assert info is not None
    if do_switch:
        t.switch(name)
    if as_json:
        echo_json({"branch": name, "head": head, "parent": info.to_json()})
        return
    click.echo(f"spawned {name} ({inherit}) from {info.branch or 'a detached HEAD'}: {purpose}")


@click.command("collapse")
@click.argument("child", shell_complete=complete_branches)
@click.option("--content", default=None, help="The message that brings the child's result back (required).")
@json_option
@with_state
def collapse(st: CliState, child: str, content: str | None, as_json: bool) -> None:
    """Add one message (--content) to the current branch that links CHILD's history, and delete CHILD's
    branch (its history stays reachable through the link)."""
    if content is None:
        raise click.UsageError("collapse needs --content: the command line has no model to summarize with")
    info = st.tract().collapse(child, content=content)
    if as_json:
        echo_json(info.to_json())
        return
    click.echo(f"collapsed {child}: {info.commit_id}")


@click.command("children")
@json_option
@with_state
def children(st: CliState, as_json: bool) -> None:
    """The children spawned from the current branch (open and collapsed), and its own parent if spawned."""
    t = st.tract(readonly=True)
    listed = t.children()
    parent = t.parent()
    if as_json:
        echo_json(
            {
                "branch": t.current_branch,
                "parent": parent.to_json() if parent is not None else None,
                "children": [c.to_json() for c in listed],
            }
        )
        return
    if parent is not None:
        at = parent.commit[:12] if parent.commit else "an empty branch"
        click.echo(f"spawned from {parent.branch or 'a detached HEAD'} at {at}: {parent.purpose}")
    if not listed:
        click.echo("no children")
    for c in listed:
        where = c.branch if c.branch is not None else f"collapsed by {(c.collapsed_by or '')[:12]}"
        click.echo(f"{c.state:<9}  {c.head[:12]}  {where}  {c.purpose}")


COMMANDS = (spawn, collapse, children)
