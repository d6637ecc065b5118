"""fsck for compile checkpoints: find the ``derived`` rows a load would refuse, and drop them.

The ``derived`` table is a local cache (``engine/state.py``: ``ckpt:`` records and content-addressed
``chunk:`` rows). A load already ignores a damaged checkpoint and rebuilds the state from objects, so damage
never changes what compile returns; this module makes it visible and removable:

* :func:`check_checkpoints` verifies every row, more thoroughly than a load: each chunk's bytes hash to its
  key and its rows have the slot shape; each record's checksum, fields, types and counts, that every chunk it
  names is present, sound and of the right size, that no commit names two slots, that its view summary is
  what the tool-pairing pass makes of its slots (format 4: a load trusts it without reading the chunks), and
  that every id it names (its commit, its tools commit and tool set, each slot's commits, blob and
  annotation, the removed messages, the summary's commits) is stored. Rows outside the two key prefixes are
  reported too, except the search index's (``grep:`` / ``gchunk:``: ``engine/search.py`` checks them) and
  rows of an older checkpoint format: stale, not damaged (loads ignore them, gc drops them).
* Relation rows (``rel:`` keys, :mod:`tractkv.engine.compile.relations`, written with the checkpoints) are checked
  against the commits they summarize (:func:`~tractkv.engine.compile.relations.check_rows`).
* :func:`drop_checkpoints` deletes the damaged rows in one transaction (``tractkv fsck --repair``). A record
  whose chunk is damaged is dropped with it. Dropping is always safe: the next compile rebuilds the state
  from objects and a writing handle saves a fresh checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import suppress
from typing import TYPE_CHECKING

import attrs

from tractkv.errors import CorruptObject, DecodeError
from tractkv.ids import raw_to_oid
from tractkv.store import Reader, Store, Table

if TYPE_CHECKING:
    from tractkv.store.fsck import Problem

from tractkv.engine.compile.checkpoint import (
    CheckpointRecord,
    check_chunk_size,
    check_stored,
    index_slots,
    read_chunk,
    read_record,
)
from tractkv.engine.compile.relations import REL_PREFIX, check_rows, is_stale_rel
from tractkv.engine.compile.slots import CHUNK_PREFIX, CKPT_PREFIX, Slot, is_stale_row
from tractkv.engine.compile.view import summary_of_slots

SEARCH_PREFIXES = (b"grep:", b"gchunk:")  # rows of the search index (engine/search.py), in the same table


@attrs.frozen
class CheckpointReport:
    """What :func:`check_checkpoints` found: rows checked, a problem per damaged row, and their keys."""

    records: int  # checkpoint records checked
    chunks: int  # chunk rows checked
    problems: tuple[Problem, ...]
    damaged: tuple[bytes, ...]  # the derived keys to drop, in table order
    stale: int = 0  # rows of an older checkpoint format: ignored by loads, not damage (gc drops them)
    relations: int = 0  # relation rows checked (engine/relations.py)

    @property
    def ok(self) -> bool:
        return not self.damaged


def describe_key(key: bytes) -> str:
    """A derived row's key as a person reads it (``checkpoint <commit>``, ``chunk <hash>``, or its bytes)."""
    if key.startswith(CKPT_PREFIX) and len(key) == len(CKPT_PREFIX) + 32:
        return f"checkpoint {raw_to_oid(key[len(CKPT_PREFIX) :])}"
    if key.startswith(CHUNK_PREFIX) and len(key) == len(CHUNK_PREFIX) + 32:
        return f"chunk {key[len(CHUNK_PREFIX) :].hex()}"
    if key.startswith(REL_PREFIX) and len(key) == len(REL_PREFIX) + 32:
        return f"relation row {raw_to_oid(key[len(REL_PREFIX) :])}"
    return f"derived row {key!r}"


def check_checkpoints(reader: Reader) -> CheckpointReport:
    """Verify every row of the ``derived`` table (pass a store or a snapshot; a store reads in one snapshot)."""
    if isinstance(reader, Store):
        with reader.snapshot() as snapshot:
            return check_checkpoints(snapshot)
    from tractkv.store.fsck import Problem  # lazy: the write path never needs fsck

    problems: list[Problem] = []
    damaged: list[bytes] = []
    chunks: dict[bytes, list[Slot]] = {}
    records: list[tuple[bytes, bytes]] = []
    relations: list[tuple[bytes, bytes]] = []
    chunk_rows = 0
    stale = 0

    def damage(key: bytes, detail: str) -> None:
        problems.append(Problem("checkpoint", describe_key(key), detail))
        damaged.append(key)

    for key, raw in reader.table_iter(Table.DERIVED):
        if key.startswith(CHUNK_PREFIX):
            chunk_rows += 1
            try:
                chunks[key] = read_chunk(key, raw)
            except DecodeError as exc:
                damage(key, exc.reason)
        elif key.startswith(CKPT_PREFIX):
            records.append((key, raw))
        elif key.startswith(REL_PREFIX):
            relations.append((key, raw))
        elif is_stale_row(key) or is_stale_rel(key):
            stale += 1
        elif key.startswith(SEARCH_PREFIXES):  # the search index's rows: engine/search.py checks them
            continue
        else:
            damage(key, "not a checkpoint or chunk key")
    for key, raw in records:
        try:
            _check_record(reader, read_record(key, raw), chunks)
        except DecodeError as exc:
            damage(key, exc.reason)
    for key, problem in check_rows(reader, relations):
        problems.append(problem)
        damaged.append(key)
    damaged.sort()
    return CheckpointReport(
        records=len(records),
        chunks=chunk_rows,
        problems=tuple(problems),
        damaged=tuple(damaged),
        stale=stale,
        relations=len(relations),
    )


def _check_record(reader: Reader, record: CheckpointRecord, chunks: dict[bytes, list[Slot]]) -> None:
    slots: list[Slot] = []
    for number, chunk_key in enumerate(record.chunks):
        part = chunks.get(chunk_key)
        if part is None:
            raise DecodeError(f"chunk {number} ({describe_key(chunk_key)}) is missing or damaged")
        check_chunk_size(record, number, part)
        slots.extend(part)
    index_slots(slots)
    if record.view is not None and summary_of_slots(slots, len(record.chunks)) != record.view:
        raise DecodeError("the view summary is not what the pairing pass makes of the slots")
    with suppress(CorruptObject):  # the tool set's bytes are damaged: the object check reports that
        check_stored(reader, record)
    for position, slot in enumerate(slots):
        for oid in (slot.commit, slot.source, slot.blob, slot.annotation):
            if oid is not None and not reader.has(oid):
                raise DecodeError(f"slot {position} names {oid}, which is not stored")
    for oid in record.removed:
        if not reader.has(oid):
            raise DecodeError(f"removed message {oid} is not stored")
    if record.view is not None:
        named = [commit for _, commit, _ in record.view.placeholders]
        named.extend(repair.commit_id for repair in record.view.repairs)
        if record.view.call_commit is not None:
            named.append(record.view.call_commit)
        for oid in named:
            if not reader.has(oid):
                raise DecodeError(f"the view summary names {oid}, which is not stored")


def drop_checkpoints(store: Store, keys: Iterable[bytes]) -> int:
    """Delete these ``derived`` rows (the ``damaged`` keys of a report) in one transaction; how many."""
    batch = store.new_batch()
    count = 0
    for key in keys:
        batch.table_put(Table.DERIVED, key, None)
        count += 1
    if count:
        store.apply(batch)
    return count
