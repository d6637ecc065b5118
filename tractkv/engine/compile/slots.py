"""Slots: one compiled message's place in a compile state, packed (commit, content blob, tokens, kind/role/priority
code), the ``SlotTable`` that stores many in flat arrays, and the row format checkpoint chunks store them in.

The checkpoint format constants (``DERIVED_FORMAT``, the ``ckpt:`` / ``chunk:`` key prefixes) live here too:
the row format is part of that format (:mod:`tractkv.engine.compile.checkpoint` reads records and chunks).
"""

from __future__ import annotations

import itertools
import sys
from array import array
from typing import TYPE_CHECKING, Any

from tractkv import codec
from tractkv.engine.content import MESSAGE_ROLES, MESSAGE_TYPES
from tractkv.errors import DecodeError
from tractkv.ids import ObjectId, hash_bytes, oid_to_raw

if TYPE_CHECKING:
    pass


DERIVED_FORMAT = (
    4  # bump when the checkpoint layout changes: old rows are then stale (ignored; gc drops them)
)


# 2: each record carries a checksum of its key and fields (format-1 rows have none)
# 3: each slot row carries its message's role and tool-call shape (a view is rebuilt without reading blobs)
# 4: each record carries the summary of its default view (:class:`ViewSummary`: what the tool-pairing pass
#    made of it), so open + compile reads no chunk until a message is used
CHUNK_SLOTS = 1024  # slots per persisted chunk


CKPT_PREFIX = b"ckpt:%d:" % DERIVED_FORMAT


CHUNK_PREFIX = b"chunk:%d:" % DERIVED_FORMAT


def is_stale_row(key: bytes) -> bool:
    """A checkpoint or chunk row of another checkpoint format (``ckpt:<n>:`` / ``chunk:<n>:``): a cache nothing
    reads any more, never damage."""
    for prefix, current in ((b"ckpt:", CKPT_PREFIX), (b"chunk:", CHUNK_PREFIX)):
        if key.startswith(prefix) and not key.startswith(current):
            number, sep, _ = key[len(prefix) :].partition(b":")
            return bool(sep) and number.isdigit()
    return False


PRIORITY_CODES = {"normal": 0, "pinned": 1, "skip": 2}


PRIORITY_NAMES = {v: k for k, v in PRIORITY_CODES.items()}


_KIND_NAMES: list[str] = sorted(MESSAGE_TYPES)  # slot kind codes (a kind outside them gets the next code)


_KIND_CODES = {kind: code for code, kind in enumerate(_KIND_NAMES)}


_ROLE_CODES = {role: code for code, role in enumerate(MESSAGE_ROLES)}


_REASONING = _KIND_CODES["reasoning"]


_TOOL = _ROLE_CODES["tool"]


# the packed code (Slot) of a plain-text dialogue message by role, priority normal (CompileState.apply_text)
_TEXT_CODES = {role: _KIND_CODES["dialogue"] << 4 | _ROLE_CODES[role] << 2 for role in ("user", "assistant")}


def _kind_code(kind: str) -> int:
    code = _KIND_CODES.get(kind)
    if code is None:
        code = _KIND_CODES[kind] = len(_KIND_NAMES)
        _KIND_NAMES.append(kind)
    return code


class Slot:
    """One message position: the commit that added it and the commit whose content it shows now. Immutable
    (:meth:`evolve` makes a changed copy); compared by identity.

    A state holds one per message, so a slot is kept small: ids raw (32 bytes, about half the memory of their
    hex form; :attr:`commit`, :attr:`source` and :attr:`blob` give them as ids), kind, role and priority packed
    in one small int, the rarely set source, generation config and annotation in one optional tuple.
    """

    __slots__ = ("calls", "code", "extra", "raw_blob", "raw_commit", "tokens")

    def __init__(
        self,
        raw_commit: bytes,  # the message commit (what annotate/edit target)
        raw_blob: bytes,  # the content blob shown
        kind: str,  # content type
        tokens: int,
        *,
        raw_source: bytes | None = None,  # the commit whose content is shown (the latest edit); None: commit
        priority: int = 0,
        gen: dict[str, Any] | None = None,
        annotation: ObjectId | None = None,  # the commit that set the priority
        role: str = "user",  # the compiled message's role
        # what the tool-pairing pass reads besides the role (pairing.shape_of): a tool result's call id, an
        # assistant message's call ids, else None. With the role, a view is rebuilt without reading the blob.
        calls: tuple[str, ...] | str | None = None,
    ) -> None:
        self.raw_commit = raw_commit
        self.raw_blob = raw_blob
        self.tokens = tokens
        self.code = _kind_code(kind) << 4 | _ROLE_CODES.get(role, 1) << 2 | priority
        self.calls = calls
        self.extra: tuple[bytes | None, dict[str, Any] | None, ObjectId | None] | None = (
            None
            if raw_source is None and gen is None and annotation is None
            else (raw_source, gen, annotation)
        )

    @property
    def kind(self) -> str:
        return _KIND_NAMES[self.code >> 4]

    @property
    def role(self) -> str:
        return MESSAGE_ROLES[self.code >> 2 & 3]

    @property
    def priority(self) -> int:
        return self.code & 3

    @property
    def raw_source(self) -> bytes | None:
        return None if self.extra is None else self.extra[0]

    @property
    def gen(self) -> dict[str, Any] | None:
        return None if self.extra is None else self.extra[1]

    @property
    def annotation(self) -> ObjectId | None:
        return None if self.extra is None else self.extra[2]

    @property
    def commit(self) -> ObjectId:
        """The message commit (what annotate and edit target)."""
        return ObjectId(self.raw_commit.hex())

    @property
    def source(self) -> ObjectId:
        """The commit whose content is shown (the latest edit, or :attr:`commit` itself)."""
        raw = self.raw_source
        return ObjectId((self.raw_commit if raw is None else raw).hex())

    @property
    def blob(self) -> ObjectId:
        """The content blob's id."""
        return ObjectId(self.raw_blob.hex())

    @classmethod
    def packed(
        cls,
        raw_commit: bytes,
        raw_blob: bytes,
        tokens: int,
        code: int,
        calls: tuple[str, ...] | str | None,
        extra: tuple[bytes | None, dict[str, Any] | None, ObjectId | None] | None,
    ) -> Slot:
        """A slot from its packed fields (what a checkpoint row decodes to: no argument is checked here)."""
        slot = cls.__new__(cls)
        slot.raw_commit, slot.raw_blob, slot.tokens = raw_commit, raw_blob, tokens
        slot.code, slot.calls, slot.extra = code, calls, extra
        return slot

    def evolve(self, **changes: Any) -> Slot:
        """A copy with ``changes`` (keyword arguments of the constructor)."""
        fields: dict[str, Any] = {
            "raw_commit": self.raw_commit,
            "raw_blob": self.raw_blob,
            "kind": self.kind,
            "tokens": self.tokens,
            "raw_source": self.raw_source,
            "priority": self.priority,
            "gen": self.gen,
            "annotation": self.annotation,
            "role": self.role,
            "calls": self.calls,
        }
        fields.update(changes)
        return Slot(**fields)

    def __repr__(self) -> str:
        return (
            f"Slot(commit={self.commit[:12]}, source={self.source[:12]}, blob={self.blob[:12]}, "
            f"kind={self.kind}, tokens={self.tokens}, priority={self.priority}, role={self.role}, "
            f"calls={self.calls!r})"
        )


_ROLES = {role: role for role in MESSAGE_ROLES}  # one str object per role, however many slots


def message_shape(data: dict[str, Any]) -> tuple[str, tuple[str, ...] | str | None]:
    """The role of the message a payload compiles to and its :func:`~tractkv.engine.compile.pairing.shape_of`, read
    from the payload (as :func:`~tractkv.engine.content.payload.to_message` would make them, without making it)."""
    kind = data.get("type")
    if kind == "instruction":
        return "system", None
    if kind == "reasoning":
        return "assistant", None
    role = _ROLES.get(data.get("role"), "user")  # type: ignore[arg-type]
    if role == "tool":
        call_id = data.get("tool_call_id") if kind == "dialogue" else None
        return role, call_id if isinstance(call_id, str) else ""
    if role == "assistant" and kind == "dialogue":
        calls = data.get("tool_calls")
        if calls:
            return role, tuple(str(call["id"]) for call in calls)
    return role, None


class _Unread:
    """The type of :data:`UNREAD`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNREAD"


UNREAD = _Unread()  # a view's item whose slot is in its SlotTable, not rendered yet (View.add_row)


class SlotTable:
    """The slots of a loaded checkpoint, packed in columns: no Python object per slot.

    A compile state loaded from a checkpoint holds its slots here (read-only: chunks are immutable): per slot
    64 bytes of ids (the commit's then the blob's raw id) in one buffer, its tokens and its packed kind, role
    and priority in two arrays; the rare call ids and ``extra`` fields in dicts by position. A view rebuilt
    from it keeps positions, not slots (:meth:`View.add_row`), so memory grows by about 90 bytes a message
    instead of a :class:`Slot` and its two id objects (~250 bytes). :meth:`slot` makes a Slot when one is
    needed (a message rendered, an edit, a merge: those make every slot, :meth:`CompileState.slots`).
    """

    __slots__ = ("calls", "codes", "counts", "extra", "ids", "keys", "n", "tokens")

    def __init__(self) -> None:
        self.ids = bytearray()  # commit (32 bytes) then blob (32 bytes), per slot
        self.tokens = array("I")
        self.codes = array("H")  # Slot.code
        self.calls: dict[int, tuple[str, ...] | str] = {}  # position -> Slot.calls, when not None
        self.extra: dict[int, tuple[bytes | None, dict[str, Any] | None, ObjectId | None]] = {}
        self.keys: list[bytes] = []  # the chunk keys, in order (chunk i holds slots i * CHUNK_SLOTS on)
        self.n = 0
        self.counts: list[int] = []  # eligible slots of the first chunks, counted once (eligible_counts)

    def __len__(self) -> int:
        return self.n

    def add_chunk(self, key: bytes, raw: bytes) -> int:
        """Append the verified rows of a chunk (:func:`read_chunk`'s checks, no Slot made); how many.

        Raises:
            DecodeError: the chunk is damaged.
        """
        rows = _chunk_rows(key, raw)
        ids, tokens, codes, calls_of, extra_of = self.ids, self.tokens, self.codes, self.calls, self.extra
        position = self.n
        try:
            for row in rows:
                commit, blob, count, code, calls, extra = _fields_from_row(row)
                ids += commit
                ids += blob
                tokens.append(count)
                codes.append(code)
                if calls is not None:
                    calls_of[position] = calls
                if extra is not None:
                    extra_of[position] = extra
                position += 1
        except OverflowError as exc:
            raise DecodeError("a slot's token count is out of range") from exc
        added = position - self.n
        self.n = position
        self.keys.append(key)
        return added

    def eligible_counts(self, full: int) -> list[int]:
        """How many slots of each of the first ``full`` (full) chunks the default view feeds to the pairing
        pass (:func:`_eligible`): counted once per chunk, not at every save of a state appending to it."""
        counts, codes = self.counts, self.codes
        while len(counts) < full:
            start = len(counts) * CHUNK_SLOTS
            counts.append(sum(map(_eligible, codes[start : start + CHUNK_SLOTS])))
        return counts[:full]

    def raw_commit(self, position: int) -> bytes:
        start = position * 64
        return bytes(self.ids[start : start + 32])

    def commit(self, position: int) -> ObjectId:
        start = position * 64
        return ObjectId(self.ids[start : start + 32].hex())

    def gen(self, position: int) -> dict[str, Any] | None:
        extra = self.extra.get(position)
        return None if extra is None else extra[1]

    def slot(self, position: int) -> Slot:
        start = position * 64
        ids = self.ids
        return Slot.packed(
            bytes(ids[start : start + 32]),
            bytes(ids[start + 32 : start + 64]),
            self.tokens[position],
            self.codes[position],
            self.calls.get(position),
            self.extra.get(position),
        )

    def slots(self, start: int = 0, stop: int | None = None) -> list[Slot]:
        return [self.slot(position) for position in range(start, self.n if stop is None else stop)]

    def check_unique(self) -> None:
        """No commit names two slots (:func:`check_unique`), checked without an object per id: a bitmap of
        each id's first 32 bits finds the few candidates, which are then compared in full.

        Raises:
            DecodeError: a commit names two slots.
        """
        sources = [extra[0] for extra in self.extra.values() if extra[0] is not None]
        count = self.n + len(sources)
        bits = 1 << max(16, (count * 16).bit_length())  # about 16 bits per id: ~3% of them collide
        mask = bits - 1
        seen = bytearray(bits >> 3)
        again: set[int] = set()
        with memoryview(self.ids) as view, view.cast("I") as words:  # native order, as _first_word reads
            firsts = itertools.chain(words[::16], (_first_word(source) for source in sources))
            for word in firsts:
                hashed = word & mask
                bit = 1 << (hashed & 7)
                if seen[hashed >> 3] & bit:
                    again.add(hashed)
                else:
                    seen[hashed >> 3] |= bit
        if not again:
            return
        ids = self.ids
        candidates = [self.raw_commit(p) for p in range(self.n) if _first_word(ids, p * 64) & mask in again]
        candidates.extend(source for source in sources if _first_word(source) & mask in again)
        check_unique_ids(candidates)


def _first_word(data: bytes | bytearray, start: int = 0, size: int = 4) -> int:
    """The native-order word of ``size`` bytes at ``start`` (what a memoryview cast to "I" (4) or "Q" (8) reads
    there)."""
    return int.from_bytes(data[start : start + size], sys.byteorder)


def _eligible(code: int) -> bool:
    """A slot (by :attr:`Slot.code`) the default view feeds to the pairing pass: not skipped, not reasoning."""
    return code & 3 != 2 and code >> 4 != _REASONING


def _chunk_rows(key: bytes, raw: bytes) -> list[Any]:
    """A chunk's rows, its bytes checked against its key (each row is checked by :func:`_fields_from_row`).

    Raises:
        DecodeError: the chunk is damaged.
    """
    if key != CHUNK_PREFIX + bytes.fromhex(hash_bytes(raw)):
        raise DecodeError("chunk bytes do not hash to their key")
    rows = codec.loads(raw)
    if type(rows) is not list:
        raise DecodeError("a chunk is not a list")
    return rows


def check_unique_ids(ids: list[bytes]) -> None:
    """No id is in ``ids`` twice (sorts ``ids`` in place).

    Raises:
        DecodeError: one is.
    """
    ids.sort()
    for previous, current in zip(ids, itertools.islice(ids, 1, None), strict=False):
        if previous == current:
            raise DecodeError(f"two slots name commit {current.hex()}")


def _rows_bytes(slots: list[Slot]) -> bytes:
    """The encoded rows of ``slots``, concatenated: ``codec.dumps([_slot_row(s) for s in slots])`` without its
    list head (a property test compares the two). A slot of seven fields (no calls, no extra: every plain
    message) is written directly, field by field; any other goes through :func:`_slot_row`."""
    out: list[bytes] = []
    append, head, parts_of = out.append, codec.head, _PLAIN_ROW_PARTS
    for slot in slots:
        raw_commit, raw_blob = slot.raw_commit, slot.raw_blob
        if slot.calls is None and slot.extra is None and len(raw_commit) == 32 == len(raw_blob):
            parts = parts_of.get(slot.code)
            if parts is None:
                parts = _plain_row_parts(slot.code)
            append(_ROW_START)
            append(raw_commit)
            append(parts[0])  # kind
            append(head(0, slot.tokens))
            append(parts[1])  # priority, then the blob's head
            append(raw_blob)
            append(parts[2])  # role, calls None
        else:
            append(codec.dumps([_slot_row(slot)])[1:])  # a one-row list: its head is one byte
    return b"".join(out)


# A plain row: [commit, kind, tokens, priority, blob, role, None] (:func:`_slot_row`), ids 32 bytes each.
_ROW_START = b"\x87" + codec.head(0x40, 32)


_PLAIN_ROW_PARTS: dict[int, tuple[bytes, bytes, bytes]] = {}  # Slot.code -> the encoded fields around ids


def _plain_row_parts(code: int) -> tuple[bytes, bytes, bytes]:
    """The constant pieces of a plain row of slots of ``code``: (kind, priority + the blob's head, role +
    calls)."""
    parts = (
        codec.dumps(_KIND_NAMES[code >> 4]),
        codec.dumps(code & 3) + codec.head(0x40, 32),
        codec.dumps(MESSAGE_ROLES[code >> 2 & 3]) + codec.dumps(None),
    )
    if len(_PLAIN_ROW_PARTS) < 1024:  # codes are few (kinds x roles x priorities): bounded all the same
        _PLAIN_ROW_PARTS[code] = parts
    return parts


def _slot_row(slot: Slot) -> list[Any]:
    """``[commit, kind, tokens, priority, blob, role, calls]``, plus ``[source, gen, annotation]`` when any of
    them is not its default (ids as raw bytes; ``calls`` None, a call id, or a list of call ids)."""
    calls = list(slot.calls) if isinstance(slot.calls, tuple) else slot.calls
    row: list[Any] = [
        slot.raw_commit,
        slot.kind,
        slot.tokens,
        slot.priority,
        slot.raw_blob,
        slot.role,
        calls,
    ]
    if slot.raw_source is not None or slot.gen is not None or slot.annotation is not None:
        row += [
            slot.raw_commit if slot.raw_source is None else slot.raw_source,
            slot.gen,
            None if slot.annotation is None else oid_to_raw(slot.annotation),
        ]
    return row


_PRIORITY_CODES = frozenset(PRIORITY_NAMES)


_ROW_KINDS = {kind: _KIND_CODES[kind] for kind in MESSAGE_TYPES}  # the kinds a checkpoint row may hold


def _fields_from_row(
    row: object,
) -> tuple[
    bytes,
    bytes,
    int,
    int,
    tuple[str, ...] | str | None,
    tuple[bytes | None, dict[str, Any] | None, ObjectId | None] | None,
]:
    """The packed fields of a slot (the arguments of :meth:`Slot.packed`) from its chunk row
    (:func:`_slot_row`), every field's type checked (inline: a fresh process decodes one row per message).

    Raises:
        DecodeError: the row does not have the shape of a slot.
    """
    if type(row) is not list:
        raise DecodeError("a slot row is not a list")
    size = len(row)
    if size == 7:
        commit, kind, tokens, priority, blob, role, calls = row
        source, gen, annotation = commit, None, None
    elif size == 10:
        commit, kind, tokens, priority, blob, role, calls, source, gen, annotation = row
        if type(source) is not bytes or len(source) != 32:
            raise DecodeError("a slot's source is not a 32-byte id")
        if gen is not None and type(gen) is not dict:
            raise DecodeError("a slot's generation config is not a map")
        if annotation is not None and (type(annotation) is not bytes or len(annotation) != 32):
            raise DecodeError("a slot's annotation is not a 32-byte id")
    else:
        raise DecodeError("a slot row does not have 7 or 10 fields")
    if type(commit) is not bytes or len(commit) != 32 or type(blob) is not bytes or len(blob) != 32:
        raise DecodeError("a slot's commit or blob is not a 32-byte id")
    kind_code = _ROW_KINDS.get(kind) if type(kind) is str else None
    if kind_code is None:
        raise DecodeError("a slot's kind is not a message type")
    role_code = _ROLE_CODES.get(role) if type(role) is str else None
    if role_code is None:
        raise DecodeError("a slot's role is not a message role")
    if role == "tool":
        if type(calls) is not str:
            raise DecodeError("a tool result's slot has no call id")
    elif calls is not None:
        if (
            role != "assistant"
            or type(calls) is not list
            or not calls
            or any(type(c) is not str for c in calls)
        ):
            raise DecodeError("a slot's tool calls are not a list of call ids of an assistant message")
        calls = tuple(calls)
    if type(tokens) is not int or tokens < 0 or type(priority) is not int or priority not in _PRIORITY_CODES:
        raise DecodeError("a slot's tokens or priority is wrong")
    extra = (
        None
        if size == 7 or (source == commit and gen is None and annotation is None)
        else (
            None if source == commit else source,
            gen,
            None if annotation is None else ObjectId(annotation.hex()),
        )
    )
    return commit, blob, tokens, kind_code << 4 | role_code << 2 | priority, calls, extra
