"""The checkpoint format: a record (``ckpt:`` row: a state's head, its chunks, counts and view summary) and its
chunks (``chunk:`` rows of slots), read as hostile until verified (:func:`read_record`, :func:`read_chunk`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from tractkv import codec
from tractkv.engine.compile.pairing import DROPPED_RESULT, PLACEHOLDER_RESULT
from tractkv.errors import DecodeError
from tractkv.ids import ObjectId, hash_bytes, raw_to_oid
from tractkv.model import ToolSet
from tractkv.store import Reader

if TYPE_CHECKING:
    from tractkv.engine.values import Repair
from tractkv.engine.compile.slots import (
    CHUNK_PREFIX,
    CHUNK_SLOTS,
    CKPT_PREFIX,
    Slot,
    _chunk_rows,
    _eligible,
    _fields_from_row,
    check_unique_ids,
)


@attrs.frozen(slots=True)
class ViewSummary:
    """What a checkpoint records of its default view (compile without reasoning): enough to make the view
    (:meth:`View.from_base`) and to find the slot of any position without reading a chunk first.

    A message is *eligible* when it is neither skipped nor reasoning: the view is the eligible slots in
    order, less the ones the tool-pairing pass dropped, plus the placeholder results it placed. Everything
    here but ``counts`` is as long as the repairs the pass made, not as the history.
    """

    counts: tuple[int, ...]  # eligible slots in each chunk
    length: int  # positions in the view
    tokens: int  # View.tokens (placeholders not included)
    dropped: tuple[int, ...]  # the eligible ranks (0 = the first eligible slot) of the dropped results
    placeholders: tuple[tuple[int, ObjectId, str], ...]  # (position, the call's commit, call id)
    open: tuple[str, ...]  # the pass's state at the end (Pairing)
    answered: tuple[str, ...]
    call_commit: ObjectId | None
    repairs: tuple[Repair, ...]


@attrs.frozen(slots=True)
class CheckpointRecord:
    """A decoded, verified checkpoint record (the ``ckpt:`` row of one commit)."""

    head: ObjectId
    counter: str
    chunks: tuple[bytes, ...]  # chunk keys, in slot order
    n: int  # slots
    commits: int
    tools: ObjectId | None
    tools_commit: ObjectId | None
    removed: frozenset[ObjectId]
    view: ViewSummary | None = None  # None: the state had no default view when saved


_RECORD_FIELDS = frozenset(
    {"counter", "chunks", "n", "commits", "tools", "tools_commit", "removed", "view", "check"}
)


def _record_check(key: bytes, body: dict[str, Any]) -> bytes:
    """The checksum a record carries: blake3 of its key and its other fields (binds a record to its commit)."""
    return bytes.fromhex(hash_bytes(key + codec.dumps(body)))


def _raw_id(value: object, what: str) -> ObjectId:
    if type(value) is not bytes or len(value) != 32:
        raise DecodeError(f"{what} is not a 32-byte id")
    return raw_to_oid(value)


def _count(value: object, what: str) -> int:
    if type(value) is not int or value < 0:
        raise DecodeError(f"{what} is not a non-negative integer")
    return value


def read_record(key: bytes, raw: bytes) -> CheckpointRecord:
    """Decode and verify a checkpoint record: its checksum, its fields and their types, consistent counts.

    Raises:
        DecodeError: the row is damaged (or was not written by this release's layout).
    """
    if not key.startswith(CKPT_PREFIX) or len(key) != len(CKPT_PREFIX) + 32:
        raise DecodeError("not a checkpoint key")
    value = codec.loads(raw)
    if isinstance(value, dict) and set(value) == _RECORD_FIELDS - {"check"}:
        raise DecodeError("checkpoint record without a checksum (written before they had one)")
    if not isinstance(value, dict) or set(value) != _RECORD_FIELDS:
        raise DecodeError("checkpoint record fields are wrong")
    body = {k: v for k, v in value.items() if k != "check"}
    if value["check"] != _record_check(key, body):
        raise DecodeError("checkpoint record checksum mismatch")
    counter, chunks, removed = body["counter"], body["chunks"], body["removed"]
    if type(counter) is not str or type(chunks) is not list or type(removed) is not list:
        raise DecodeError("checkpoint record field types are wrong")
    n = _count(body["n"], "slot count")
    commits = _count(body["commits"], "commit count")
    if n > commits:
        raise DecodeError("more slots than commits")
    if len(chunks) != -(-n // CHUNK_SLOTS):
        raise DecodeError("chunk count does not match the slot count")
    for chunk_key in chunks:
        if type(chunk_key) is not bytes or not chunk_key.startswith(CHUNK_PREFIX):
            raise DecodeError("not a chunk key")
        _raw_id(chunk_key[len(CHUNK_PREFIX) :], "chunk key")
    tools = None if body["tools"] is None else _raw_id(body["tools"], "tools")
    tools_commit = None if body["tools_commit"] is None else _raw_id(body["tools_commit"], "tools_commit")
    if (tools is None) != (tools_commit is None):
        raise DecodeError("tools and tools_commit disagree")
    return CheckpointRecord(
        head=raw_to_oid(key[len(CKPT_PREFIX) :]),
        counter=counter,
        chunks=tuple(chunks),
        n=n,
        commits=commits,
        tools=tools,
        tools_commit=tools_commit,
        removed=frozenset(_raw_id(o, "removed id") for o in removed),
        view=None if body["view"] is None else _read_summary(body["view"], n, len(chunks)),
    )


_SUMMARY_FIELDS = frozenset(
    {"counts", "length", "tokens", "dropped", "placeholders", "open", "answered", "call_commit", "repairs"}
)


def _strings(value: object, what: str) -> tuple[str, ...]:
    if type(value) is not list or any(type(v) is not str for v in value):
        raise DecodeError(f"{what} is not a list of strings")
    return tuple(value)


def _ascending(value: object, what: str, below: int) -> tuple[int, ...]:
    """A strictly ascending list of counts, each below ``below``."""
    if type(value) is not list:
        raise DecodeError(f"{what} is not a list")
    previous = -1
    for item in value:
        if _count(item, what) <= previous or item >= below:
            raise DecodeError(f"{what} are not ascending positions in range")
        previous = item
    return tuple(value)


def _read_summary(value: object, n: int, chunks: int) -> ViewSummary:
    """Decode and verify a record's view summary: types, and counts consistent with each other and the slots.

    Raises:
        DecodeError: it is damaged.
    """
    if type(value) is not dict or set(value) != _SUMMARY_FIELDS:
        raise DecodeError("view summary fields are wrong")
    counts = value["counts"]
    if type(counts) is not list or len(counts) != chunks:
        raise DecodeError("view summary counts do not match the chunks")
    for number, count in enumerate(counts):
        if _count(count, "eligible count") > min(CHUNK_SLOTS, n - number * CHUNK_SLOTS):
            raise DecodeError(f"view summary counts more messages than chunk {number} holds")
    eligible = sum(counts)
    length = _count(value["length"], "view length")
    tokens = _count(value["tokens"], "view tokens")
    dropped = _ascending(value["dropped"], "dropped ranks", eligible)
    placeholders = value["placeholders"]
    if type(placeholders) is not list:
        raise DecodeError("view placeholders are not a list")
    places: list[tuple[int, ObjectId, str]] = []
    for item in placeholders:
        if type(item) is not list or len(item) != 3 or type(item[2]) is not str:
            raise DecodeError("a view placeholder is not [position, commit, call id]")
        places.append(
            (_count(item[0], "placeholder position"), _raw_id(item[1], "placeholder commit"), item[2])
        )
    _ascending([p for p, _, _ in places], "placeholder positions", length)
    if length != eligible - len(dropped) + len(places):
        raise DecodeError("view length does not match its messages")
    call_commit = None if value["call_commit"] is None else _raw_id(value["call_commit"], "call commit")
    open_calls = _strings(value["open"], "open calls")
    if open_calls and call_commit is None:
        raise DecodeError("open calls without their commit")
    repairs = value["repairs"]
    if type(repairs) is not list or len(repairs) != len(places) + len(dropped):
        raise DecodeError("view repairs do not match its placeholders and dropped results")
    made: list[Repair] = []
    if repairs:
        from tractkv.engine.values import Repair  # lazy: only a history with repairs needs the class
    for item in repairs:
        if (
            type(item) is not list
            or len(item) != 4
            or item[0] not in (PLACEHOLDER_RESULT, DROPPED_RESULT)
            or type(item[2]) is not str
            or type(item[3]) is not str
        ):
            raise DecodeError("a view repair is not [kind, commit, call id, detail]")
        made.append(
            Repair(kind=item[0], commit_id=_raw_id(item[1], "repair commit"), call_id=item[2], detail=item[3])
        )
    return ViewSummary(
        counts=tuple(counts),
        length=length,
        tokens=tokens,
        dropped=dropped,
        placeholders=tuple(places),
        open=open_calls,
        answered=_strings(value["answered"], "answered calls"),
        call_commit=call_commit,
        repairs=tuple(made),
    )


def read_chunk(key: bytes, raw: bytes) -> list[Slot]:
    """Decode and verify one chunk of slots: its bytes hash to its key, every row has the slot shape.

    Raises:
        DecodeError: the chunk is damaged.
    """
    return [Slot.packed(*_fields_from_row(row)) for row in _chunk_rows(key, raw)]


def check_chunk_size(record: CheckpointRecord, number: int, slots: list[Slot]) -> None:
    """Chunk ``number`` of a record holds :data:`CHUNK_SLOTS` slots, the last one the rest.

    Raises:
        DecodeError: it holds another number.
    """
    if len(slots) != min(CHUNK_SLOTS, record.n - number * CHUNK_SLOTS):
        raise DecodeError(f"chunk {number} holds {len(slots)} slots")


def index_slots(slots: list[Slot]) -> dict[ObjectId, int]:
    """The index of a state's slots (message and edit commits -> position).

    A slot's commit may also be in a state's ``removed`` set: a merge keeps a message one side pinned while the
    other side's compression removed it (the merged state shows it and remembers the removal): not damage.

    Raises:
        DecodeError: a commit names two slots.
    """
    index: dict[ObjectId, int] = {}
    for position, slot in enumerate(slots):
        if slot.commit in index:
            raise DecodeError(f"slot {position} repeats commit {slot.commit}")
        index[slot.commit] = position
        if slot.source != slot.commit:
            if slot.source in index:
                raise DecodeError(f"slot {position} repeats commit {slot.source}")
            index[slot.source] = position
    return index


def check_unique(slots: list[Slot]) -> None:
    """What :func:`index_slots` checks, without making the index: no commit names two slots (sorting the ids
    takes a fraction of the memory of the index).

    Raises:
        DecodeError: a commit names two slots.
    """
    ids = [slot.raw_commit for slot in slots]
    ids.extend(slot.raw_source for slot in slots if slot.raw_source is not None)
    check_unique_ids(ids)


def check_stored(reader: Reader, record: CheckpointRecord) -> None:
    """The cheap existence checks: the head and the tools commit are stored, the tool set is one."""
    if not reader.has(record.head):
        raise DecodeError(f"checkpoint of {record.head}, which is not stored")
    if record.tools_commit is not None and not reader.has(record.tools_commit):
        raise DecodeError(f"tools commit {record.tools_commit} is not stored")
    if record.tools is not None and not isinstance(reader.get(record.tools), ToolSet):
        raise DecodeError(f"tools {record.tools} is not a stored tool set")


class _Chunk:
    """What :meth:`CompileState.save` knows of a chunk it saved: the (immutable) Slot objects it encoded, its
    key, how many of them the default view feeds to the pairing pass (None: not yet counted) and, while the
    chunk is partial, the encoded rows (a growing branch's next save encodes only the slots appended since:
    a canonical CBOR list is its head followed by its items' encodings)."""

    __slots__ = ("count", "key", "rows", "slots")

    def __init__(self, slots: list[Slot], key: bytes = b"") -> None:
        self.slots = slots
        self.key = key
        self.count: int | None = None
        self.rows: bytes | None = None

    def eligible(self) -> int:
        if self.count is None:
            self.count = sum(_eligible(s.code) for s in self.slots)
        return self.count
