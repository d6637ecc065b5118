"""Shared CLI plumbing: the store option, --json, output, and id resolution."""

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
        root = ctx.find_root()
        path = root.params.get("store_path") or default_store_path()
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
