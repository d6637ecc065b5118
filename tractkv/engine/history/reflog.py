"""The reflog: every move of a ref, newest first, kept locally (never synced) for undo and for gc's
protection of recently abandoned tips. A ``batch()`` moves its branch once, so it logs one entry for its
commits (from the tip it started from to its last commit), as git logs one per operation. A key is
``ref NUL seq(8 bytes BE)``; a value is CBOR ``{old, new, op, msg, ts[, hard]}``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tractkv.engine.values import timestamp
from tractkv.ids import ObjectId, is_object_id
from tractkv.store import Reader, Table, WriteBatch

if TYPE_CHECKING:
    from tractkv.engine.values import ReflogEntry


def log_ref_move(
    batch: WriteBatch,
    ref: str,
    old: ObjectId | None,
    new: ObjectId | None,
    operation: str,
    message: str,
    *,
    hard: bool = False,
    now_us: int | None = None,
) -> dict[str, Any]:
    """Stage a reflog entry for a ref move (local history, never synced); returns the entry staged.

    ``now_us`` stamps it (µs since the epoch; default: the wall clock). A Tract passes its own clock, the one
    that stamps commits and that gc ages both by: an entry stamped by another clock would be aged wrongly.
    """
    entry: dict[str, Any] = {
        "old": old,
        "new": new,
        "op": operation,
        "msg": message,
        "ts": time.time_ns() // 1000 if now_us is None else now_us,
    }
    if hard:
        entry["hard"] = True
    batch.append_log(Table.REFLOG, ref.encode(), entry)
    return entry


def iter_reflog(reader: Reader, ref: str) -> Iterator[ReflogEntry]:
    """A ref's reflog, newest first."""
    for seq, entry in reader.log_entries(Table.REFLOG, ref.encode(), reverse=True):
        yield _entry(ref, seq, entry)


def iter_all_reflogs(reader: Reader) -> Iterator[ReflogEntry]:
    """Every reflog entry of every ref (for gc)."""
    from tractkv import codec

    for key, value in reader.table_iter(Table.REFLOG):
        ref = key[:-9].decode()  # key = ref NUL seq(8 bytes)
        seq = int.from_bytes(key[-8:], "big")
        yield _entry(ref, seq, codec.loads(value))


def _entry(ref: str, seq: int, entry: dict[str, Any]) -> ReflogEntry:
    from tractkv.engine.values import ReflogEntry

    old, new = entry.get("old"), entry.get("new")
    return ReflogEntry(
        ref=ref,
        old=old if is_object_id(old) else None,
        new=new if is_object_id(new) else None,
        operation=str(entry.get("op", "")),
        message=str(entry.get("msg", "")),
        created_at=timestamp(int(entry.get("ts", 0))),
        hard=bool(entry.get("hard", False)),
        seq=seq,
    )
