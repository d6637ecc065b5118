"""Shared CLI plumbing: the global options (--store, -C), --json, output, and id resolution."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tractkv.errors import InvalidObjectId
from tractkv.ids import ObjectId, is_object_id
from tractkv.store import Reader, Store

if TYPE_CHECKING:
    from tractkv.tract import Tract

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_STORE = ".tractkv"
STORE_ENV = "TRACTKV_STORE"
NO_STORE_HINT = " (create one with `tractkv init`, or `tractkv clone URL`)"
STORE_KEY = "tractkv.store_path"  # ctx.meta: the --store given (before or after the subcommand), if any


class CliState:
    """What the root group parsed; commands open the store through it (lazily, once)."""

    def __init__(self, store_path: str) -> None:
        self.store_path = store_path
        self._store: Store | None = None
        self._tract: Tract | None = None

    def store(self, *, create: bool = False, readonly: bool = False) -> Store:
        """The store at --store. Only ``init`` (and ``clone``, through the library) may create one: every
        other command refuses a path with no store, creating nothing. A read command (``readonly``) that
        opens it first leaves an older store format as it is."""
        if self._store is None:
            from tractkv.errors import StoreNotFound
            from tractkv.store import LmdbStore

            try:
                self._store = LmdbStore(self.store_path, create=create, migrate=not readonly)
            except StoreNotFound as exc:
                raise StoreNotFound(exc.path, NO_STORE_HINT) from None
        return self._store

    def tract(self, *, readonly: bool = False) -> Tract:
        """A Tract over the store (one per command). A writing command's Tract writes its compile checkpoint
        when the command ends; a read command's (``readonly``) writes nothing at all, not even HEAD."""
        if self._tract is None:
            from tractkv.tract import Tract

            self._tract = Tract(self.store(readonly=readonly), owns_store=False, readonly=readonly)
        return self._tract

    def close(self) -> None:
        try:
            if self._tract is not None:
                self._tract.close()
                self._tract = None
        finally:
            if self._store is not None:
                self._store.close()
                self._store = None


# --- the global options: `--store PATH` and `-C DIR`, before or after the subcommand ---------------------------


def _set_store(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """Record ``--store``: in ``ctx.meta`` (shared by the whole context chain; the root group builds its
    :class:`CliState` from it) and on the CliState once it exists (a ``--store`` after the subcommand)."""
    if value is None:
        return
    ctx.meta[STORE_KEY] = value
    obj = ctx.find_object(CliState)
    if obj is not None:
        obj.store_path = value


def _change_dir(ctx: click.Context, param: click.Parameter, values: tuple[str, ...] | None) -> None:
    """``-C DIR``: run as if started in DIR (as git's ``-C``): every relative path, ``--store`` and
    ``$TRACTKV_STORE`` included, is then relative to DIR; each further ``-C`` is relative to the one before."""
    for directory in values or ():
        try:
            os.chdir(directory)
        except OSError as exc:
            raise click.BadParameter(f"cannot change to {directory!r}: {exc.strerror}", ctx, param) from None


def global_options(*, root: bool = False) -> list[click.Parameter]:
    """Fresh ``--store PATH`` and ``-C DIR`` options. The root group has them, and :func:`add_global_options`
    gives every command and subcommand its own copy, so both may come before or after the subcommand (the
    last ``--store`` given wins; ``-C`` applies in order). They are ``expose_value=False``: commands read the
    store path from their :class:`CliState`, never as a parameter."""
    store = click.Option(
        ["--store", "global_store"],
        metavar="PATH",
        type=click.Path(file_okay=False),
        expose_value=False,
        callback=_set_store,
        show_default=f"${STORE_ENV} or ./{DEFAULT_STORE}" if root else False,
        help="The store directory (before or after the command).",
    )
    chdir = click.Option(
        ["-C", "global_chdir"],
        metavar="DIR",
        multiple=True,
        type=click.Path(file_okay=False),
        expose_value=False,
        callback=_change_dir,
        help="Run as if started in DIR (relative paths, --store too, are relative to it).",
    )
    return [store, chdir]


def add_global_options(command: click.Command) -> None:
    """Give ``command`` and, for a group, each of its subcommands (recursively) ``--store`` and ``-C``
    (:func:`global_options`), once. The root group does this for every command it registers, so a new
    command gets them without asking."""
    if not any(p.name == "global_store" for p in command.params):
        command.params.extend(global_options())
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_global_options(sub)


def state(ctx: click.Context) -> CliState:
    obj = ctx.find_object(CliState)
    if obj is None:  # pragma: no cover - the root group always sets it
        raise click.UsageError("internal: no CLI state")
    return obj


def json_option(func: F) -> F:
    """Add ``--json``: print machine-readable JSON on stdout instead of text."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(func)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False))


def note(message: str) -> None:
    """A notice for people: stderr, never mixed into data on stdout."""
    click.echo(message, err=True)


def resolve_oid(reader: Reader, text: str) -> ObjectId:
    """A full id, or a unique prefix of 4+ hex digits.

    Raises:
        InvalidObjectId: malformed, unknown, or ambiguous.
    """
    if is_object_id(text):
        return ObjectId(text)
    matches = reader.resolve_prefix(text)
    if not matches:
        raise InvalidObjectId(text, "no object starts with it")
    if len(matches) > 1:
        raise InvalidObjectId(text, "ambiguous prefix; give more digits")
    return matches[0]


def default_store_path() -> str:
    return os.environ.get(STORE_ENV) or DEFAULT_STORE


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()


def with_state(func: F) -> F:
    """Pass the :class:`CliState` as the first argument."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(state(click.get_current_context()), *args, **kwargs)

    return wrapper  # type: ignore[return-value]


# --- shell completion (click's: `_TRACTKV_COMPLETE=bash_source tractkv`, see the README) ---------------------


def _complete_names(ctx: click.Context, incomplete: str, kinds: tuple[str, ...]) -> list[Any]:
    """Names of ``kinds`` (``branches``, ``tracking``, ``tags``, ``remotes``, ``head``) in the store the command line
    names, that start with ``incomplete``. Completion must never change a store or print an error: it opens
    an existing store only (never creates one) and returns nothing on any failure."""
    from click.shell_completion import CompletionItem

    try:
        path = ctx.meta.get(STORE_KEY) or default_store_path()
        if not os.path.isfile(os.path.join(str(path), "data.mdb")):
            return []
        from tractkv.engine.history import HEADS, REMOTES, TAGS
        from tractkv.store import LmdbStore
        from tractkv.sync.remotes import list_remotes

        names: list[str] = []
        with LmdbStore(str(path), create=False, migrate=False) as store:
            if "head" in kinds:
                names.append("HEAD")
            if "branches" in kinds:
                names += [ref[len(HEADS) :] for ref, _ in store.iter_refs(HEADS)]
            if "tracking" in kinds:
                names += [ref[len(REMOTES) :] for ref, _ in store.iter_refs(REMOTES)]
            if "tags" in kinds:
                names += [ref[len(TAGS) :] for ref, _ in store.iter_refs(TAGS)]
            if "remotes" in kinds:
                names += sorted(list_remotes(store))
        return [CompletionItem(n) for n in names if n.startswith(incomplete)]
    except Exception:  # completion never fails loudly: a damaged or busy store completes nothing
        return []


def complete_branches(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of a local branch name."""
    return _complete_names(ctx, incomplete, ("branches",))


def complete_remotes(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of a remote name."""
    return _complete_names(ctx, incomplete, ("remotes",))


def complete_revisions(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of a revision: branches, remote-tracking branches, tags and HEAD."""
    return _complete_names(ctx, incomplete, ("branches", "tracking", "tags", "head"))


def complete_tags(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of a tag name."""
    return _complete_names(ctx, incomplete, ("tags",))
