"""``tractkv mcp``: the toolkit's tools as an MCP server (extra ``mcp``; see :mod:`tractkv.integrations.mcp_server`)."""

from __future__ import annotations

import sys

import click

from tractkv.cli.common import NO_STORE_HINT, CliState, with_state
from tractkv.errors import InvalidInput, StoreNotFound


def _host_port(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as (host, port)."""
    host, sep, port = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise InvalidInput(f"--http takes HOST:PORT (e.g. 127.0.0.1:8766; port 0 picks one), not {value!r}")
    return host, int(port)


@click.command("mcp")
@click.option(
    "--profile",
    type=click.Choice(["self", "supervisor", "full"]),
    default="self",
    show_default=True,
    help="Which built-in tools to serve: self (9, on 'your context'), supervisor or full (all 15).",
)
@click.option("--http", "http", metavar="HOST:PORT", help="Serve streamable HTTP at http://HOST:PORT/mcp.")
@click.option("--tokens", "tokens_file", type=click.Path(dir_okay=False), help="JSON tokens file (--http).")
@with_state
def mcp_cmd(state: CliState, profile: str, http: str | None, tokens_file: str | None) -> None:
    """Serve the toolkit's tools on this store to an MCP client: over stdio (default; the client starts this
    command) or streamable HTTP (--http HOST:PORT; without --tokens loopback only, and a token needs the
    admin scope). The tools act on the store's current branch; every call leaves a usage record."""
    from tractkv.integrations import mcp_server  # MissingExtra (one line) without the mcp extra

    path = state.store_path  # the global --store (before or after `mcp`)
    try:
        if http is None:
            if tokens_file:
                raise InvalidInput("--tokens applies to --http only (stdio has no network peer)")
            mcp_server.serve_stdio(path, profile)
            return
        from tractkv.sync.auth import TokenTable

        host, port = _host_port(http)
        tokens = TokenTable.from_file(tokens_file) if tokens_file else None

        def ready(url: str) -> None:
            auth = (
                "bearer tokens with the admin scope required"
                if tokens
                else "no authentication: loopback only"
            )
            click.echo(f"serving the {profile} tools of {path} over MCP at {url} ({auth})", err=True)
            click.echo(url)
            sys.stdout.flush()

        mcp_server.serve_http(path, profile, host, port, tokens, on_ready=ready)
    except StoreNotFound as exc:
        raise StoreNotFound(exc.path, NO_STORE_HINT) from None


COMMANDS = (mcp_cmd,)
