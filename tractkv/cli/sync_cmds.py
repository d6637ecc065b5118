"""Sync commands: remote, fetch, pull, push, clone, serve, bundle."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from tractkv.cli.common import (
    CliState,
    complete_branches,
    complete_remotes,
    echo_json,
    json_option,
    note,
    stderr_is_tty,
    with_state,
)
from tractkv.errors import InvalidInput

F = TypeVar("F", bound=Callable[..., Any])


class Progress:
    """Objects transferred so far (``n/total`` when the transfer knows its total), redrawn on stderr at most
    10 times a second and once at the end (only on a terminal)."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label = label
        self.enabled = enabled
        self.count = 0
        self.total: int | None = None
        self._start = time.monotonic()
        self._drawn = 0.0

    def set_total(self, total: int) -> None:
        """How many objects the transfer will carry (called by push before it sends)."""
        self.total = total

    def warn(self, text: str) -> None:
        """A warning line on stderr (shown with ``--quiet`` too: it is not progress), below the progress."""
        if self.enabled and self._drawn:
            sys.stderr.write("\r\x1b[K")
        note(f"warning: {text}")

    def __call__(self, n: int) -> None:
        self.count += n
        now = time.monotonic()
        if self.enabled and (now - self._drawn >= 0.1 or self.count == self.total):
            self._drawn = now
            rate = self.count / max(now - self._start, 1e-6)
            done = f"{self.count}/{self.total}" if self.total is not None else f"{self.count}"
            sys.stderr.write(f"\r{self.label}: {done} objects ({rate:,.0f}/s)")
            sys.stderr.flush()

    def done(self) -> None:
        if self.enabled and self._drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def _progress(label: str, quiet: bool) -> Progress:
    return Progress(label, enabled=not quiet and stderr_is_tty())


quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress output.")


_prune_option = click.option(
    "--prune",
    "-p",
    is_flag=True,
    help="Delete tracking branches the remote no longer shows (kept otherwise, as git does).",
)


def _max_object_option(what: str) -> Callable[[F], F]:
    return click.option(
        "--max-object-bytes",
        type=click.IntRange(1),
        help=f"{what} (default 16 MiB: the size limit every store, hub and bundle shares).",
    )


@click.group(invoke_without_command=True)
@click.pass_context
def remote(ctx: click.Context) -> None:
    """Manage remotes (other stores this one syncs with); alone, list them (as git remote -v)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(remote_list, as_json=False)


@remote.command("add")
@click.argument("name")
@click.argument("url")
@click.option("--token-env", help="Environment variable holding the hub's token (default TRACTKV_TOKEN).")
@with_state
def remote_add(state: CliState, name: str, url: str, token_env: str | None) -> None:
    """Add a remote: a store path, file://..., http://host:port, s3://bucket/prefix or a bundle file."""
    t = state.tract()
    warning = t.remote_add(name, url, token_env=token_env)
    note(f"added remote {name} -> {t.remotes().get(name, url)}")  # a relative path as recorded: absolute
    if warning:
        note(f"warning: {warning}")


@remote.command("list")
@json_option
@with_state
def remote_list(state: CliState, as_json: bool) -> None:
    """List remotes (name and URL)."""
    remotes = state.tract().remotes()
    if as_json:
        echo_json(remotes)
        return
    for name, url in remotes.items():
        click.echo(f"{name}\t{url}")


@remote.command("remove")
@click.argument("name", shell_complete=complete_remotes)
@with_state
def remote_remove(state: CliState, name: str) -> None:
    """Forget a remote and its remote-tracking branches."""
    state.tract().remote_remove(name)
    note(f"removed remote {name}")


@remote.command("prune")
@click.argument("name", shell_complete=complete_remotes)
@click.option("--repack", is_flag=True, help="First write everything the branches need as one pack.")
@click.option(
    "--min-age-hours",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="Keep packs younger than this (a push in flight uploads its pack before it moves its branch).",
)
@json_option
@with_state
def remote_prune(state: CliState, name: str, repack: bool, min_age_hours: float, as_json: bool) -> None:
    """Delete the packs of an S3 remote that no branch needs (--repack: fold the rest into one pack)."""
    from tractkv.sync.remotes import open_named
    from tractkv.sync.s3 import S3Remote

    with open_named(state.tract().store, name) as conn:
        if not isinstance(conn, S3Remote):
            raise InvalidInput(
                f"remote prune is for S3 remotes; {name} is {conn.url} (a hub or a store cleans itself: "
                "tractkv gc there)"
            )
        result = conn.prune(min_age=min_age_hours * 3600, repack=repack)
    if as_json:
        echo_json(
            {
                "packs": result.packs,
                "deleted": list(result.deleted),
                "loose_deleted": result.loose_deleted,
                "kept_young": result.kept_young,
                "repacked": list(result.repacked),
                "unreadable": list(result.unreadable),
            }
        )
        return
    for item in result.unreadable:
        note(f"warning: a pack that does not verify: {item}")
    click.echo(
        f"{name}: deleted {len(result.deleted)} of {result.packs} packs"
        + (f" and {result.loose_deleted} loose objects" if result.loose_deleted else "")
        + (f", wrote {len(result.repacked)} new pack(s)" if result.repacked else "")
        + (f", kept {result.kept_young} younger than {min_age_hours:g} h" if result.kept_young else "")
    )


@click.command()
@click.argument("remote_name", default="origin", metavar="[REMOTE]", shell_complete=complete_remotes)
@_max_object_option("Take objects of up to N bytes")
@_prune_option
@click.option("--force", "-f", is_flag=True, help="Move local tags the remote's differ from.")
@quiet_option
@json_option
@with_state
def fetch(
    state: CliState,
    remote_name: str,
    max_object_bytes: int | None,
    prune: bool,
    force: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Download a remote's branches as <remote>/<branch> tracking branches, and its tags."""
    progress = _progress("receiving", quiet)
    result = state.tract().fetch(
        remote_name, progress=progress, max_object=max_object_bytes, prune=prune, force_tags=force
    )
    progress.done()
    if as_json:
        echo_json(
            {
                "updated": {k: list(v) for k, v in result.updated.items()},
                "objects": result.objects,
                "new_objects": result.new_objects,
                "bytes": result.bytes,
                "skipped": list(result.skipped),
                "tags_refused": list(result.tags_refused),
            }
        )
        return
    for tag in result.tags_refused:
        click.echo(f"  ! [rejected] tag {tag} (would clobber the existing tag; fetch --force)")
    for ref, (old, new) in sorted(result.updated.items()):
        name = ref.removeprefix("refs/remotes/").replace("refs/tags/", "tag ")
        if new is None:
            click.echo(f"  - [deleted] {name}")
        elif old is None:
            click.echo(f"  * [new] {name} {new[:12]}")
        else:
            click.echo(f"  {old[:12]}..{new[:12]} {name}")
    if not result.updated:
        click.echo("up to date")
    if not quiet:
        note(f"received {result.objects} objects ({result.new_objects} new, {result.bytes} bytes)")


@click.command()
@click.argument("remote_name", default="origin", metavar="[REMOTE]", shell_complete=complete_remotes)
@click.argument("branch", required=False, shell_complete=complete_branches)
@click.option("--ff-only", is_flag=True, help="Refuse to merge: only fast-forward.")
@click.option(
    "--strategy",
    type=click.Choice(["auto", "ours", "theirs"]),
    default="auto",
    show_default=True,
    help="How a merge settles conflicts.",
)
@_max_object_option("Take objects of up to N bytes")
@_prune_option
@quiet_option
@with_state
def pull(
    state: CliState,
    remote_name: str,
    branch: str | None,
    ff_only: bool,
    strategy: str,
    max_object_bytes: int | None,
    prune: bool,
    quiet: bool,
) -> None:
    """Fetch, then fast-forward or merge <remote>/<branch> into the current branch."""
    progress = _progress("receiving", quiet)
    result = state.tract().pull(
        remote_name,
        branch,
        ff_only=ff_only,
        strategy=strategy,
        progress=progress,
        max_object=max_object_bytes,
        prune=prune,
    )
    progress.done()
    head = result.head[:12] if result.head else "-"
    click.echo(f"{result.kind} {head}")


@click.command()
@click.argument("remote_name", default="origin", metavar="[REMOTE]", shell_complete=complete_remotes)
@click.argument("branch", required=False, shell_complete=complete_branches)
@click.option("--force", "-f", is_flag=True, help="Allow a push that is not a fast-forward.")
@click.option("--expect", metavar="REV", help="Only if the remote branch is at REV (force-with-lease).")
@click.option("--tags", is_flag=True, help="Send every tag (with BRANCH: that branch too; else tags only).")
@quiet_option
@json_option
@with_state
def push(
    state: CliState,
    remote_name: str,
    branch: str | None,
    force: bool,
    expect: str | None,
    tags: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Send a branch (default: the current one) to the same name on a remote; --tags sends the tags."""
    progress = _progress("sending", quiet)
    t = state.tract()
    outcomes = []
    if not tags or branch is not None:
        outcomes.append(t.push(remote_name, branch, force=force, expect=expect, progress=progress))
    if tags:
        outcomes.append(t.push_tags(remote_name, force=force, progress=progress))
    progress.done()
    results = [r for outcome in outcomes for r in outcome.results]
    sent = sum(o.objects_sent for o in outcomes), sum(o.bytes_sent for o in outcomes)
    if as_json:
        echo_json(
            {
                "results": [
                    {"name": r.name, "ok": r.ok, "reason": r.reason, "detail": r.detail} for r in results
                ],
                "objects_sent": sent[0],
                "bytes_sent": sent[1],
            }
        )
        return
    for r in results:
        click.echo(f"{r.name.removeprefix('refs/heads/').replace('refs/tags/', 'tag ')}: {r.detail or 'ok'}")
    if not quiet:
        note(f"sent {sent[0]} objects ({sent[1]} bytes)")


@click.command()
@click.argument("url")
@click.argument("path", required=False)
@click.option("--branch", "-b", help="Check out this branch (default main, else the first).")
@click.option("--token-env", help="Environment variable holding the hub's token (default TRACTKV_TOKEN).")
@_max_object_option("Take objects of up to N bytes")
@quiet_option
@with_state
def clone(
    state: CliState,
    url: str,
    path: str | None,
    branch: str | None,
    token_env: str | None,
    max_object_bytes: int | None,
    quiet: bool,
) -> None:
    """Make a new store at PATH (default: --store) from the remote at URL."""
    from tractkv.tract import Tract

    progress = _progress("receiving", quiet)
    tract = Tract.clone(
        url,
        path or state.store_path,
        branch=branch,
        token_env=token_env,
        progress=progress,
        max_object=max_object_bytes,
    )
    progress.done()
    try:
        branches = [b.name for b in tract.list_branches(remotes=False)]
        click.echo(
            f"cloned {len(branches)} branch(es) into {path or state.store_path}; on {tract.current_branch}"
        )
    finally:
        tract.close()


def _log_level_option(default: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(
        "--log-level",
        type=click.Choice(["critical", "error", "warning", "info", "debug"], case_sensitive=False),
        default=default,
        show_default=True,
        help="What to log on stderr; info adds an access log line per request (never a token or cookie).",
    )


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="0 picks one.")
@click.option("--tokens", "tokens_file", type=click.Path(dir_okay=False), help="JSON tokens file (see docs).")
@click.option("--max-object-bytes", type=click.IntRange(1), help="Per-object limit (default 16 MiB).")
@click.option("--max-request-bytes", type=click.IntRange(1), help="Per-request limit (default 1 GiB).")
@click.option(
    "--header-timeout",
    type=click.FloatRange(0.1),
    default=10.0,
    show_default=True,
    help="Seconds a connection has to send a complete request head; then it is closed.",
)
@click.option(
    "--body-timeout",
    type=click.FloatRange(0.1),
    default=30.0,
    show_default=True,
    help="Seconds a request body has, in total (a push: to send its head), and may pause; then the request "
    "is dropped and the connection closed.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(1),
    default=512,
    show_default=True,
    help="Open connections; one more is answered 503 (JSON) and closed.",
)
@click.option(
    "--push-timeout",
    type=click.FloatRange(0.1),
    default=300.0,
    show_default=True,
    help="Seconds a push has, in total, to send its objects once the hub reads them; then it is cut (what "
    "arrived whole is kept).",
)
@click.option(
    "--push-wait",
    type=click.FloatRange(0.0),
    default=30.0,
    show_default=True,
    help="Seconds a push may wait for the hub to read it (pushes beyond the memory limit wait); then 503.",
)
@click.option(
    "--push-slots-per-token",
    type=click.IntRange(1),
    default=None,
    help="Pushes one token (or, without --tokens, one client address) may have read at once; its further "
    "pushes wait like any other. Default: half the push slots the memory limit allows, at least one.",
)
@_log_level_option("info")
@with_state
def serve(
    state: CliState,
    host: str,
    port: int,
    tokens_file: str | None,
    max_object_bytes: int | None,
    max_request_bytes: int | None,
    header_timeout: float,
    body_timeout: float,
    max_connections: int,
    push_timeout: float,
    push_wait: float,
    push_slots_per_token: int | None,
    log_level: str,
) -> None:
    """Serve this store as an HTTP hub that other stores push to and pull from, with the web viewer at /ui/.

    Malformed requests get a JSON 4xx. Pushes read and decode at most 256 MiB in all (each push at most
    16 MiB plus one object read, and 3 times the object size decoded; pushes beyond that wait their turn,
    at most --push-wait seconds). A token with only write scopes learns from
    /v1/missing only about objects its own branches reach. GET /healthz answers 200 without auth for
    process managers; the protocol is described in docs/PROTOCOL.md."""
    from tractkv.model import MAX_OBJECT_BYTES
    from tractkv.sync.frames import MAX_REQUEST_BYTES

    server, create_app = _server_modules("serve")
    from tractkv.sync.auth import TokenTable

    tokens = TokenTable.from_file(tokens_file) if tokens_file else None
    if tokens is None and not server.is_loopback(host):
        raise InvalidInput(f"refusing to serve {host} without --tokens: only loopback may be unauthenticated")
    store = state.store()
    app, viewer = create_app(
        store,
        tokens=tokens,
        max_object=max_object_bytes or MAX_OBJECT_BYTES,
        max_request=max_request_bytes or MAX_REQUEST_BYTES,
        push_timeout=push_timeout,
        push_wait=push_wait,
        push_slots_per_token=push_slots_per_token,
    )
    sock = server.bind(host, port)
    url = _url(host, sock.getsockname()[1])
    auth = "bearer tokens required" if tokens else "no authentication: loopback only"
    click.echo(f"serving {state.store_path} at {url} (viewer at {url}/ui/; {auth})", err=True)
    click.echo(url)
    sys.stdout.flush()
    server.serve(
        app,
        sock,
        on_exit=viewer.feed.close,
        log_level=log_level.lower(),
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        max_connections=max_connections,
    )


@click.command()
@click.option(
    "--port", default=0, show_default=True, type=click.IntRange(0, 65535), help="0 picks a free one."
)
@_log_level_option("warning")
@with_state
def view(state: CliState, port: int, log_level: str) -> None:
    """Browse this store in a web browser: a read-only viewer on 127.0.0.1 (prints its URL; Ctrl-C stops)."""
    server, create_app = _server_modules("view")
    store = state.store(readonly=True)
    app, viewer = create_app(store, sync=False)
    sock = server.bind("127.0.0.1", port)
    url = _url("127.0.0.1", sock.getsockname()[1])
    click.echo(f"viewing {state.store_path} read-only; open {url}/ui/ (Ctrl-C stops)", err=True)
    click.echo(f"{url}/ui/")
    sys.stdout.flush()
    server.serve(app, sock, on_exit=viewer.feed.close, log_level=log_level.lower())


def _server_modules(command: str) -> tuple[Any, Any]:
    try:
        from tractkv.sync import server
        from tractkv.view.app import create_app
    except ImportError as exc:
        raise InvalidInput(
            f"{command} needs the server extra: pip install 'tractkv[server]' ({exc.name})"
        ) from exc
    return server, create_app


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@click.group()
def bundle() -> None:
    """Write or read bundle files (branches and their objects in one file)."""


@bundle.command("create")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("branches", nargs=-1, shell_complete=complete_branches)
@_max_object_option(
    "Refuse an object over N bytes; a bundle with larger ones needs unbundle --max-object-bytes"
)
@click.option(
    "--tags", "with_tags", is_flag=True, help="With BRANCHES: add every tag too (the default without)."
)
@with_state
def bundle_create(
    state: CliState, file: str, branches: tuple[str, ...], max_object_bytes: int | None, with_tags: bool
) -> None:
    """Write BRANCHES (default: every branch, and every tag) and their history to FILE. An object over the
    size limit is refused (nothing is written): a default unbundle could not read it."""
    from tractkv.model import MAX_OBJECT_BYTES
    from tractkv.sync.bundle import write_bundle

    store = state.store()
    refs: dict[str, Any] = {}
    for ref, value in store.iter_refs("refs/heads/"):
        if not branches or ref.removeprefix("refs/heads/") in branches:
            refs[ref] = value
    unknown = set(branches) - {r.removeprefix("refs/heads/") for r in refs}
    if unknown:
        raise InvalidInput(f"no branch named {', '.join(sorted(unknown))}")
    tags: dict[str, Any] = dict(store.iter_refs("refs/tags/")) if not branches or with_tags else {}
    count = write_bundle(store, file, {**refs, **tags}, max_object=max_object_bytes or MAX_OBJECT_BYTES)
    click.echo(f"wrote {len(refs)} branch(es), {len(tags)} tag(s), {count} objects to {file}")


@bundle.command("unbundle")
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@click.option(
    "--as", "name", default="bundle", show_default=True, help="Tracking branches appear as NAME/<branch>."
)
@_max_object_option("Read objects of up to N bytes")
@with_state
def bundle_unbundle(state: CliState, file: str, name: str, max_object_bytes: int | None) -> None:
    """Verify and store FILE's objects; its branches appear as <NAME>/<branch> (merge or branch from them)."""
    from tractkv.model import MAX_OBJECT_BYTES
    from tractkv.sync.bundle import BundleRemote
    from tractkv.sync.remotes import check_remote_name
    from tractkv.sync.transfer import fetch_from

    store = state.store()
    with BundleRemote(file, max_object=max_object_bytes or MAX_OBJECT_BYTES) as conn:
        result = fetch_from(store, conn, check_remote_name(name), prune=False)
    for ref, (_, new) in sorted(result.updated.items()):
        click.echo(f"{ref.removeprefix('refs/remotes/')} {new[:12] if new else '-'}")
    for tag in result.tags_refused:
        note(f"! [rejected] tag {tag} (would clobber the existing tag)")
    if result.objects:
        note(f"stored {result.new_objects} new objects of {result.objects}")
    else:
        note("this store already had every object of the bundle")


COMMANDS = (remote, fetch, pull, push, clone, serve, view, bundle)
