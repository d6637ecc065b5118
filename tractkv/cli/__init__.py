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

from tractkv.cli.common import (
    STORE_KEY,
    CliState,
    add_global_options,
    default_store_path,
    global_options,
    note,
)
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
    """The root group: one place for errors (see the module), and the global options of every command."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        add_global_options(cmd)  # --store and -C after the subcommand too
        super().add_command(cmd, name)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        for command in self.commands.values():  # a subcommand added to a group after it was registered
            add_global_options(command)
        cwd = os.getcwd()  # -C changes it; an in-process caller (tests, click's runner) gets it back
        try:
            return super().main(*args, **kwargs)
        finally:
            os.chdir(cwd)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:  # `commit "-3C, snow"`: say how to pass a value starting with '-'
            raise _dash_hint(exc) from None
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


def _dash_hint(exc: click.NoSuchOption) -> click.NoSuchOption:
    """``exc`` with a hint for a command that takes arguments: a value starting with ``-`` (a negative
    number, ``-3C, snow``) goes after ``--``, as in git."""
    ctx = exc.ctx
    if ctx is None or not any(isinstance(p, click.Argument) for p in ctx.command.params):
        return exc
    hint = (
        "A value that starts with '-' goes after `--`, which ends the options: "
        f"`{ctx.command_path} [OPTIONS] -- VALUE`."
    )
    return click.NoSuchOption(
        exc.option_name, f"{exc.message} {hint}", possibilities=exc.possibilities, ctx=ctx
    )


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tractkv")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """tractkv: git for LLM context windows.

    --store PATH and -C DIR may come before or after the command (`tractkv log --store s` is
    `tractkv --store s log`)."""
    ctx.obj = CliState(ctx.meta.get(STORE_KEY) or default_store_path())


cli.params.extend(global_options(root=True))


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

    from tractkv.cli import search_cmds

    for command in search_cmds.COMMANDS:
        cli.add_command(command)

    from tractkv.cli import mcp_cmds

    for command in mcp_cmds.COMMANDS:
        cli.add_command(command)


_register()


def main() -> None:
    """Entry point of the ``tractkv`` script and ``python -m tractkv``."""
    cli(prog_name="tractkv")
