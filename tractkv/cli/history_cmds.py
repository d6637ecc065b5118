"""Commands that name or replay history: tag, cherry-pick, rebase.

Each parses, calls one :class:`~tractkv.Tract` method and prints; each takes ``--json``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from tractkv.cli.common import (
    CliState,
    complete_revisions,
    complete_tags,
    echo_json,
    json_option,
    note,
    with_state,
)
from tractkv.model import to_jsonable

if TYPE_CHECKING:
    from tractkv.engine.values import PickResult, TagInfo

_STRATEGY = click.option(
    "--strategy",
    "-X",
    type=click.Choice(["auto", "ours", "theirs"]),
    default="auto",
    show_default=True,
    help="auto refuses conflicts (nothing is written); ours keeps the side commits land on, theirs the "
    "replayed commit's change.",
)


def _tag_json(info: TagInfo) -> dict[str, Any]:
    return {**to_jsonable(info), "annotated": info.annotated}


@click.command("tag")
@click.argument("name", required=False, shell_complete=complete_tags)
@click.argument("rev", required=False, shell_complete=complete_revisions)
@click.option("--annotate", "-a", is_flag=True, help="Make an annotated tag (a tag object; needs -m).")
@click.option("--message", "-m", default=None, help="The tag's message (makes it annotated).")
@click.option("--delete", "-d", "delete", is_flag=True, help="Delete tag NAME.")
@click.option("--force", "-f", is_flag=True, help="Move tag NAME if it exists.")
@json_option
@with_state
def tag(
    st: CliState,
    name: str | None,
    rev: str | None,
    annotate: bool,
    message: str | None,
    delete: bool,
    force: bool,
    as_json: bool,
) -> None:
    """List tags, or tag REV (default HEAD) as NAME, or delete NAME (-d)."""
    if name is None:
        if delete or annotate or message is not None or rev is not None or force:
            raise click.UsageError("give a tag NAME")
        tags = st.tract(readonly=True).tags()
        if as_json:
            echo_json([_tag_json(info) for info in tags])
            return
        for info in tags:
            said = f"  {info.message.splitlines()[0] if info.message else ''}" if info.annotated else ""
            click.echo(f"{info.name}\t{info.commit[:12]}{said}")
        return
    t = st.tract()
    if delete:
        if rev is not None or annotate or message is not None:
            raise click.UsageError("-d takes only a tag NAME")
        info = t.delete_tag(name)
        if as_json:
            echo_json(_tag_json(info))
            return
        click.echo(f"Deleted tag {info.name} (was {(info.tag_id or info.commit)[:12]})")
        return
    if annotate and message is None:
        raise click.UsageError("an annotated tag needs a message: -m MSG")
    info = t.tag(name, rev, message, force=force)
    if as_json:
        echo_json(_tag_json(info))
        return
    kind = "annotated tag" if info.annotated else "tag"
    note(f"{kind} {info.name} -> {info.commit[:12]}")
    click.echo(info.tag_id or info.commit)


def _pick_json(result: PickResult) -> dict[str, Any]:
    out: dict[str, Any] = to_jsonable(result)
    out["picked"] = [{"original": a, "commit": b} for a, b in result.picked]
    return out


def _print_pick(result: PickResult, as_json: bool) -> None:
    if as_json:
        echo_json(_pick_json(result))
        return
    for original, made in result.picked:
        click.echo(f"{original[:12]} -> {made[:12]}")
    extra = f", {result.conflicts_resolved} conflict(s) settled ({result.strategy})"
    left = f", {len(result.skipped)} left out" if result.skipped else ""
    tail = (extra if result.conflicts_resolved else "") + left
    click.echo(f"{result.kind}: {result.head}{tail}")


@click.command("cherry-pick")
@click.argument("rev", shell_complete=complete_revisions)
@_STRATEGY
@json_option
@with_state
def cherry_pick(st: CliState, rev: str, strategy: str, as_json: bool) -> None:
    """Re-apply REV's change on the current branch (a tool call with its results, whole)."""
    _print_pick(st.tract().cherry_pick(rev, strategy=strategy), as_json)


@click.command("rebase")
@click.argument("onto", shell_complete=complete_revisions)
@_STRATEGY
@json_option
@with_state
def rebase(st: CliState, onto: str, strategy: str, as_json: bool) -> None:
    """Replay the current branch's own commits on ONTO, in one transaction (a conflict writes nothing)."""
    _print_pick(st.tract().rebase(onto, strategy=strategy), as_json)


COMMANDS = (tag, cherry_pick, rebase)
