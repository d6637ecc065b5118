"""The store format version and its migrations (run when a store is opened, shared by both stores)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from tractkv.errors import StoreFormatError
from tractkv.store.reader import META_FORMAT, META_SEQ, RawWriter, Table

STORE_FORMAT: Final = 2  # kept in meta["format"]; a store with a higher number is refused on open

Migration = Callable[[RawWriter], None]
"""Upgrades a store from format N to N + 1 in place, inside the opening write transaction."""


def _drop_counter(writer: RawWriter) -> None:
    """Format 1 -> 2: sequenced keys are numbered from their own prefix's highest key (each already holds
    the numbers format 1's shared counter gave it, so the next is still higher); the counter row goes.

    Why a new format and not only new code: a format-1 tractkv writing a format-2 store would number from
    its stale counter, below keys the store holds, and overwrite entries. It refuses a format-2 store."""
    writer.delete(Table.META, META_SEQ)


MIGRATIONS: dict[int, Migration] = {1: _drop_counter}
"""``MIGRATIONS[n]`` upgrades a store of format ``n`` to ``n + 1``; :func:`ensure_format` runs every step a
store needs in the opening transaction. 1 -> 2: the sequence counter row is dropped (:func:`_drop_counter`)."""

READABLE_AS_IS: Final = frozenset({1})
"""Older formats a read-only open reads without migrating (so it writes nothing): format 1 differs from 2 only
in the counter row, which no read uses."""


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
