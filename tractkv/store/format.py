"""The store format version and its migrations (run when a store is opened, shared by both stores)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from tractkv.errors import StoreFormatError
from tractkv.store.reader import META_FORMAT, META_SEQ, RawWriter, Table

STORE_FORMAT: Final = 4  # kept in meta["format"]; a store with a higher number is refused on open

Migration = Callable[[RawWriter], None]
"""Upgrades a store from format N to N + 1 in place, inside the opening write transaction."""


def _drop_counter(writer: RawWriter) -> None:
    """Format 1 -> 2: sequenced keys are numbered from their own prefix's highest key (each already holds
    the numbers format 1's shared counter gave it, so the next is still higher); the counter row goes.

    Why a new format and not only new code: a format-1 tractkv writing a format-2 store would number from
    its stale counter, below keys the store holds, and overwrite entries. It refuses a format-2 store."""
    writer.delete(Table.META, META_SEQ)


def _key_orders(writer: RawWriter) -> None:
    """Format 2 -> 3: tool sets may record the key order their schemas were given in (``ToolSet.order``,
    docs/format.md "Tool schemas") and a prompt-cache breakpoint after the tools (``ToolSet.cache``), and an
    annotation may carry a cache breakpoint (its ``cache`` field). A format-2 store holds none of them (it
    never kept an order, so there is none to recover) and compiles as before, in canonical key order with no
    breakpoints: nothing to rewrite.

    Why a new format and not only new code: a format-2 tractkv refuses a tool set with an order or a cache,
    or an annotation with a cache, as an object with an unknown field, in the middle of a compile; with the
    number raised it refuses the store on open, saying to upgrade."""
    del writer


def _tags(writer: RawWriter) -> None:
    """Format 3 -> 4: a store may hold annotated tags (``tag`` objects, named by ``refs/tags/<name>``; a
    lightweight tag is a ref only). A format-3 store holds none: nothing to rewrite.

    Why a new format and not only new code: a format-3 tractkv meets a ``tag`` object as an unknown kind in the
    middle of a walk (gc, fsck, a sync); with the number raised it refuses the store on open, saying to
    upgrade."""
    del writer


MIGRATIONS: dict[int, Migration] = {1: _drop_counter, 2: _key_orders, 3: _tags}
"""``MIGRATIONS[n]`` upgrades a store of format ``n`` to ``n + 1``; :func:`ensure_format` runs every step a
store needs in the opening transaction. 1 -> 2: the sequence counter row is dropped (:func:`_drop_counter`);
2 -> 3: tool sets may hold key orders and cache breakpoints, annotations cache breakpoints, nothing stored
changes (:func:`_key_orders`); 3 -> 4: annotated tags may be stored, nothing stored changes (:func:`_tags`)."""

READABLE_AS_IS: Final = frozenset({1, 2, 3})
"""Older formats a read-only open reads without migrating (so it writes nothing): format 1 differs from 2 only
in the counter row, which no read uses; format 2 from 3 only in holding no tool set with a key order or a
cache breakpoint (``ToolSet.order``, ``ToolSet.cache``) and no annotation with a ``cache`` field; format 3 from
4 only in holding no ``tag`` object."""


def ensure_format(writer: RawWriter) -> int:
    """Stamp a new store, or check (and migrate) an existing one; returns the version found.

    Raises:
        StoreFormatError: the store is newer than this tractkv, or no migration path exists.
    """
    raw = writer.get(Table.META, META_FORMAT)
    if raw is None:
        if writer.count(Table.OBJECTS) or writer.count(Table.REFS):
            raise StoreFormatError("store has data but no format version: not a tractkv store")
        writer.put(Table.META, META_FORMAT, str(STORE_FORMAT).encode())
        return STORE_FORMAT
    try:
        found = int(raw.decode())
    except ValueError as exc:
        raise StoreFormatError(f"unreadable store format version {raw!r}") from exc
    if found > STORE_FORMAT:
        raise StoreFormatError(
            f"store format {found} is newer than this tractkv supports ({STORE_FORMAT}); upgrade tractkv"
        )
    version = found
    while version < STORE_FORMAT:
        step = MIGRATIONS.get(version)
        if step is None:
            raise StoreFormatError(f"no migration from store format {version} to {version + 1}")
        step(writer)
        version += 1
        writer.put(Table.META, META_FORMAT, str(version).encode())
    return found
