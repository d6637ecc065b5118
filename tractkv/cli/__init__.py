"""The ``tractkv`` command line: a thin layer that parses, calls the library and prints.

Data goes to stdout, notices to stderr. Every library error becomes a one-line ``Error: ...`` on stderr
with exit code 1, never a traceback (one place: :class:`_Group`). So does any other failure (a bug, or store
content nothing caught yet): one line naming it and what to do; ``TRACTKV_DEBUG=1`` shows the traceback.
Ctrl-C (SIGINT) ends a command with exit code 130 (128 + SIGINT, the shell convention) and one line; a
closed stdout (``tractkv log | head -1``) ends it quietly with 141 (128 + SIGPIPE), as git does.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from tractkv.cli.common import STORE_ENV, CliState, default_store_path, note
from tractkv.errors import ConcurrentUpdate, TractError

DEBUG_ENV = "TRACTKV_DEBUG"  # set to show the traceback of an unexpected failure instead of one line
INTERRUPTED = 130  # the exit code of a command Ctrl-C stopped (128 + SIGINT)
BROKEN_PIPE = 141  # the exit code when the reader of stdout went away (128 + SIGPIPE), as git's


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush of a closed pipe prints nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real descriptor (an in-process runner)
        pass


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (KeyboardInterrupt, click.exceptions.Abort):  # Ctrl-C (click turns it into Abort in prompts)
            note("Interrupted.")
            raise click.exceptions.Exit(INTERRUPTED) from None
        except (click.exceptions.ClickException, click.exceptions.Exit):
            raise
        except BrokenPipeError:  # `tractkv log | head -1`: the reader has what it wanted; stop quietly
            _silence_stdout()
            raise click.exceptions.Exit(BROKEN_PIPE) from None
        except ConcurrentUpdate as exc:  # an append re-makes itself; anything else stops here
            raise click.ClickException(
                f"{exc}. Another command moved it while this one ran: see `tractkv log`, then run this one again"
            ) from exc
        except TractError as exc:
            raise click.ClickException(str(exc)) from exc
        except Exception as exc:
            if os.environ.get(DEBUG_ENV):
                raise
            raise click.ClickException(
                f"unexpected {type(exc).__name__}: {exc} (run `tractkv fsck`; if it reports nothing, this is a "
                f"bug: rerun with {DEBUG_ENV}=1 for the traceback)"
            ) from exc
        finally:
            obj = ctx.find_object(CliState)
            if obj is not None:
                obj.close()


@click.group(cls=_Group)
@click.option(
    "--store",
    "store_path",
    default=default_store_path,
    show_default=f"${STORE_ENV} or ./.tractkv",
    type=click.Path(file_okay=False),
    help="The store directory.",
)
@click.version_option(package_name="tractkv")
@click.pass_context
def cli(ctx: click.Context, store_path: str) -> None:
    """tractkv: git for LLM context windows."""
    ctx.obj = CliState(store_path)


def _register() -> None:
    from tractkv.cli import store_cmds

    for command in (store_cmds.init, store_cmds.fsck_cmd, store_cmds.cat_object, store_cmds.stats):
        cli.add_command(command)

    from tractkv.cli import engine_cmds

    for command in engine_cmds.COMMANDS:
        cli.add_command(command)

    from tractkv.cli import branch_cmds

    for command in branch_cmds.COMMANDS:
        cli.add_command(command)

    from tractkv.cli import history_cmds

    for command in history_cmds.COMMANDS:
        cli.add_command(command)

    from tractkv.cli import usage_cmds

    for command in (usage_cmds.usage, usage_cmds.export):
        cli.add_command(command)

    from tractkv.cli import sync_cmds

    for command in sync_cmds.COMMANDS:
        cli.add_command(command)

    from tractkv.cli import spawn_cmds

    for command in spawn_cmds.COMMANDS:
        cli.add_command(command)

    from tractkv.cli import mcp_cmds

    for command in mcp_cmds.COMMANDS:
        cli.add_command(command)


_register()


def main() -> None:
    """Entry point of the ``tractkv`` script and ``python -m tractkv``."""
    cli(prog_name="tractkv")
