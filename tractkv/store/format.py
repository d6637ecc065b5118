"""The store format version and its migrations (run when a store is opened, shared by both stores)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from tractkv.errors import StoreFormatError
from tractkv.store.reader import META_FORMAT, RawWriter, Table

STORE_FORMAT: Final = 1  # kept in meta["format"]; a store with a higher number is refused on open

Migration = Callable[[RawWriter], None]
"""Upgrades a store from format N to N + 1 in place, inside the opening write transaction."""

MIGRATIONS: dict[int, Migration] = {}
"""``MIGRATIONS[n]`` upgrades a store of format ``n`` to ``n + 1``. Format 1 is the first; a later format
adds its step here, and :func:`ensure_format` runs every step a store needs in the opening transaction."""


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
