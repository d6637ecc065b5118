"""The compile state of one commit, built incrementally from its parent's state.

How history compiles (the definition the tests check against a simple model):

* ``append`` of message content adds a message at the end.
* ``edit`` (``edit_target`` = a message commit, or an edit of it) replaces that message's content in place;
  the latest edit wins. The original stays in history.
* ``annotate`` sets a message's priority: ``skip`` leaves it out of compile, ``pinned`` keeps it verbatim
  through compression, ``normal`` restores the default. The latest annotation wins.
* ``trim`` (a budget's action, :mod:`tractkv.engine.budget`) skips every message its ``targets`` link names,
  as one ``skip`` annotation of each would (the latest annotation of a message wins, so a later one can
  restore it).
* ``compress`` replaces the messages listed in its ``sources`` link with its own content (a summary), placed
  where the first of them stood; pinned sources stay verbatim. The originals stay in history (they are
  ancestors): compression changes the context, never what was written.
* A commit's ``tools`` (a tool set) becomes the context's tool set; the latest commit with one wins.
* ``merge`` (parents ``[ours, theirs]``) is a three-way merge of the states of the merge base, ours and
  theirs (:func:`merge_states`): ours' messages in ours' order, then theirs' messages that ours does not have,
  in theirs' order. A message changed (content or priority) on one side only takes that side's version; one
  changed on both sides differently is a conflict, and so is a tool set changed on both sides. The merge
  commit records a strategy that settles every conflict (``ours`` or ``theirs``); ``auto`` merges only
  happen without conflicts. A merge commit itself never becomes a message.

State is persisted as checkpoints in the local ``derived`` table (keyed by commit id, chunked so that two
checkpoints of one growing branch share all but their last chunk). Checkpoints are a cache, and hostile until
verified: a chunk's key is the hash of its bytes, a record carries a checksum of its key and fields, every
field's type and the counts are checked, and the commit, tools commit and tool set it names must be stored
(:func:`read_record`, :func:`read_chunk`). One that is missing, damaged or of another format is ignored and
the state rebuilt from objects; ``tractkv fsck`` reports damaged rows and ``fsck --repair`` drops them
(``engine/checkpoints.py``). A record also carries the summary of its default view (:class:`ViewSummary`,
format 4), from which a lazy load makes the view without reading a chunk; each chunk is then read and
verified (against the summary too) when one of its messages is first used, and a damaged one makes the view
answer from the state rebuilt from objects (:class:`_Base`); fsck checks the summary against a replay of
every slot.
"""

from __future__ import annotations

import gc
import itertools
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import attrs

from tractkv import codec
from tractkv.errors import ContentError, DecodeError
from tractkv.ids import ObjectId, hash_bytes, oid_to_raw, raw_to_oid
from tractkv.model import Blob, Commit, ToolSet
from tractkv.store import Reader, Table, WriteBatch

from .content import (
    ANNOTATION,
    MESSAGE_ROLES,
    MESSAGE_TYPES,
    Message,
    is_message,
    message_text,
    text_message,
    to_message,
)
from .pairing import DROPPED_RESULT, PLACEHOLDER_RESULT, PLACEHOLDER_TEXT, Pairing, placeholder_tokens
from .tokens import MESSAGE_OVERHEAD, TokenCounter, part_tokens

if TYPE_CHECKING:
    from .reports import Repair

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
    """The role of the message a payload compiles to and its :func:`~tractkv.engine.pairing.shape_of`, read
    from the payload (as :func:`~tractkv.engine.content.to_message` would make them, without making it)."""
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


class View:
    """The visible part of a state, kept in step with appends so compile after an append is O(1).

    Messages pass through the tool-pairing pass (:mod:`tractkv.engine.pairing`) as they are added: an orphan
    tool result is left out, placeholder results are placed before a message that closes open calls. The
    lists are append-only (compile hands out :class:`~tractkv.engine.records.FrozenPrefix` views of them);
    ``tokens`` counts the kept messages, :meth:`total_tokens` adds the placeholders.

    A view rebuilt from a checkpoint's slots reads no blob: ``messages`` then holds the :class:`Slot` of each
    message not rendered yet, and :meth:`message` renders it on first use through ``load`` (and keeps it in
    its place, so an item changes from slot to message exactly once; every reader goes through
    :meth:`message` or :meth:`originals`).

    A view made from a checkpoint's :class:`ViewSummary` (:meth:`from_base`) reads no chunk either: its first
    ``offset`` positions are the checkpoint's view (:class:`_Base`, which reads the chunk of a position on
    first use), and ``messages`` / ``commits`` hold only what was appended since, so the view holds nothing
    per message of the checkpoint.
    """

    __slots__ = (
        "__weakref__",
        "base",
        "commits",
        "deferred",
        "dropped",
        "fed",
        "lazy",
        "load",
        "messages",
        "offset",
        "pairing",
        "placeholders",
        "reader",
        "rows",
        "table",
        "tokens",
    )

    def __init__(self) -> None:
        # a message, the Slot of one not rendered yet, or UNREAD: one of ``table``'s, at ``rows[position]``
        self.messages: list[Message | Slot | _Unread] = []
        self.table: SlotTable | None = None  # the packed slots of the checkpoint the view was rebuilt from
        self.rows = array("i")  # with a table, per position: its slot's position there (-1: not one of them)
        self.load: Callable[[Slot], Message] | None = None  # renders a slot left in ``messages``
        self.reader: Reader | None = None  # what ``load`` reads through
        self.lazy = 0  # slots placed in ``messages`` (some may have been rendered since)
        # the commit of each message: its Slot (whose raw id gives it: no hex string kept per message), or
        # the id itself for a placeholder result (:meth:`commit_at`)
        self.commits: list[Slot | ObjectId | _Unread] = []
        self.tokens = 0
        self.pairing = Pairing()
        self.placeholders: list[int] = []  # positions of placeholder results in ``messages``
        self.deferred: list[tuple[Message | Slot, Slot]] = []  # reasoning recorded inside an open tool turn
        self.base: _Base | None = None  # the checkpoint's view, positions 0 to ``offset`` (from_base)
        self.offset = 0  # positions before ``messages[0]``
        self.fed = 0  # messages fed to the pairing pass (each one's rank, for ``dropped``)
        self.dropped: list[int] = []  # the ranks of the messages the pass dropped (orphan results)

    @classmethod
    def from_base(cls, base: _Base, load: Callable[[Slot], Message], reader: Reader) -> View:
        """The view a checkpoint's summary describes, reading no chunk (see the class doc)."""
        summary = base.summary
        view = cls()
        view.base, view.offset = base, summary.length
        view.load, view.reader, view.lazy = load, reader, 1
        view.tokens = summary.tokens
        view.fed = sum(summary.counts)
        view.dropped = list(summary.dropped)
        view.placeholders = [position for position, _, _ in summary.placeholders]
        pairing = view.pairing
        pairing.open = dict.fromkeys(summary.open)
        pairing.answered = set(summary.answered)
        pairing.call_commit = summary.call_commit
        pairing.repairs = list(summary.repairs)
        return view

    def __len__(self) -> int:
        return self.offset + len(self.messages)

    def add(self, message: Message | Slot, slot: Slot) -> None:
        """Add the next visible message. A reasoning message (compiled with ``include_reasoning``) recorded
        while tool calls are open is held back until the turn's results are in (the next non-tool message,
        or :meth:`finish`), so a model's notes between a call and its result do not cut the pair apart."""
        code = slot.code  # kind, role and priority packed (Slot): read once, no property calls
        if code >> 4 == _REASONING and self.pairing.open:
            self.deferred.append((message, slot))
            return
        if self.deferred and code >> 2 & 3 != _TOOL:
            self.finish()
        self._place(message, slot)

    def add_row(self, row: int) -> None:
        """:meth:`add` for the slot at ``row`` of :attr:`table`, without making a Slot (see :class:`SlotTable`)."""
        table = self.table
        assert table is not None
        code = table.codes[row]
        if code >> 4 == _REASONING and self.pairing.open:
            slot = table.slot(row)
            self.deferred.append((slot, slot))
            return
        if self.deferred and code >> 2 & 3 != _TOOL:
            self.finish()
        pairing = self.pairing
        role = MESSAGE_ROLES[code >> 2 & 3]
        calls = table.calls.get(row)
        before = () if pairing.step_quiet(role, calls) else pairing.step_shape(role, calls, table.commit(row))
        self.fed += 1
        if before is None:
            self.dropped.append(self.fed - 1)
            return  # an orphan tool result: a repair, not a message
        self._placeholders(before)
        self.lazy += 1
        self.messages.append(UNREAD)
        self.commits.append(UNREAD)
        self.rows.append(row)
        self.tokens += table.tokens[row]

    def _placeholders(self, before: tuple[tuple[Message, ObjectId], ...]) -> None:
        for placeholder, commit in before:
            self.placeholders.append(self.offset + len(self.messages))
            self.messages.append(placeholder)
            self.commits.append(commit)
            if self.table is not None:
                self.rows.append(-1)

    def finish(self) -> None:
        """Place the reasoning held back by :meth:`add` (its turn's open calls, if still open, then get
        placeholder results before it, as before any message)."""
        deferred, self.deferred = self.deferred, []
        for message, slot in deferred:
            self._place(message, slot)

    def _place(self, message: Message | Slot, slot: Slot) -> None:
        pairing = self.pairing
        role = MESSAGE_ROLES[slot.code >> 2 & 3]
        calls = slot.calls
        before = () if pairing.step_quiet(role, calls) else pairing.step_shape(role, calls, slot.commit)
        self.fed += 1
        if before is None:
            self.dropped.append(self.fed - 1)
            return  # an orphan tool result: a repair, not a message
        if before:
            self._placeholders(before)
        if message is slot:
            self.lazy += 1
        self.messages.append(message)
        self.commits.append(slot)
        if self.table is not None:  # ``rows`` runs parallel to ``messages`` in a view of a SlotTable only
            self.rows.append(-1)
        self.tokens += slot.tokens

    def message(self, position: int) -> Message:
        """The message at ``position``, rendered now if the view holds its slot (see the class doc)."""
        if position < self.offset:
            assert self.base is not None
            assert self.load is not None
            return self.base.message(position, self.load)
        position -= self.offset
        item = self.messages[position]
        if item is UNREAD:
            assert self.load is not None
            assert self.table is not None
            item = self.messages[position] = self.load(self.table.slot(self.rows[position]))
        elif type(item) is Slot:
            assert self.load is not None
            item = self.messages[position] = self.load(item)
        return item  # type: ignore[return-value]

    def commit_at(self, position: int) -> ObjectId:
        """The commit id of the message at ``position``."""
        if position < self.offset:
            assert self.base is not None
            return self.base.commit(position)
        position -= self.offset
        item = self.commits[position]
        if item is UNREAD:
            assert self.table is not None
            return self.table.commit(self.rows[position])
        return item.commit if type(item) is Slot else item  # type: ignore[return-value]

    def gen_at(self, position: int) -> dict[str, Any] | None:
        """The generation config of the message at ``position`` (None for a placeholder result)."""
        if position < self.offset:
            assert self.base is not None
            return self.base.gen(position)
        position -= self.offset
        item = self.commits[position]
        if item is UNREAD:
            assert self.table is not None
            return self.table.gen(self.rows[position])
        return item.gen if type(item) is Slot else None

    def shape_at(self, position: int) -> tuple[int, ObjectId, int] | None:
        """The packed code (:attr:`Slot.code`), commit id and tokens of the message at ``position``, rendering
        nothing; None for a placeholder result."""
        if position < self.offset:
            assert self.base is not None
            return self.base.shape(position)
        item = self.commits[position - self.offset]
        if item is UNREAD:
            assert self.table is not None
            row = self.rows[position - self.offset]
            return self.table.codes[row], self.table.commit(row), self.table.tokens[row]
        if type(item) is Slot:
            return item.code, item.commit, item.tokens
        return None

    def commit_ids(self) -> list[ObjectId]:
        """Every message's commit id, in order."""
        return [self.commit_at(position) for position in range(len(self))]

    def render_all(self) -> None:
        """Render every slot the view still holds (before the store it reads from goes away)."""
        if self.lazy:
            for position in range(len(self)):
                self.message(position)
            if self.base is None:
                self.lazy = 0

    def retarget(self, old: Reader, new: Reader) -> None:
        """Read through ``new`` instead of ``old`` (a batch that landed in the store ``new``), so the view
        no longer keeps the batch alive."""
        if self.reader is old:
            self.reader = new
        if isinstance(self.load, _Renderer) and self.load.reader is old:
            self.load.reader = new
        if self.base is not None:
            self.base.retarget(old, new)

    def copy(self) -> View:
        other = View()
        other.load, other.lazy, other.reader = self.load, self.lazy, self.reader
        other.messages = list(self.messages)
        other.commits = list(self.commits)
        other.table, other.rows = self.table, array("i", self.rows)
        other.tokens = self.tokens
        other.pairing = self.pairing.copy()
        other.placeholders = list(self.placeholders)
        other.deferred = list(self.deferred)
        other.base, other.offset, other.fed = self.base, self.offset, self.fed
        other.dropped = list(self.dropped)
        return other

    def total_tokens(self, counter: TokenCounter) -> int:
        """The tokens of every message in the view, placeholder results included."""
        if not self.placeholders:
            return self.tokens
        return self.tokens + len(self.placeholders) * placeholder_tokens(counter)

    def originals(self) -> Iterator[tuple[Message, ObjectId]]:
        """The messages history holds, with their commits, in order: the view without placeholder results."""
        skip = set(self.placeholders)
        return (
            (self.message(position), self.commit_at(position))
            for position in range(len(self))
            if position not in skip
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


def _eligible(code: int) -> bool:
    """A slot (by :attr:`Slot.code`) the default view feeds to the pairing pass: not skipped, not reasoning."""
    return code & 3 != 2 and code >> 4 != _REASONING


class _Base:
    """The positions of a checkpoint's default view (:class:`ViewSummary`), each slot read on first use.

    A position's chunk is read, verified and kept when one of its positions is first used. Every chunk is
    checked as a load checks it (its bytes hash to its key, every row has the slot shape, it holds as many
    slots as the record says), and against the summary (as many eligible slots as it says, each dropped
    result a tool result), and no commit may name two slots of the chunks read. A damaged chunk makes the
    base rebuild the state at the checkpoint's commit from objects (``rebuild``) and answer from its view
    from then on; a view that does not have the summary's length then is an error (a checkpoint consistent
    in itself that disagrees with history: ``tractkv fsck --repair`` drops it).
    """

    __slots__ = (
        "chunks",
        "cum",
        "fallback",
        "head",
        "keys",
        "n",
        "places",
        "reader",
        "rebuild",
        "seen",
        "summary",
    )

    def __init__(
        self, record: CheckpointRecord, reader: Reader, rebuild: Callable[[Reader], CompileState]
    ) -> None:
        summary = record.view
        assert summary is not None
        self.summary = summary
        self.head = record.head
        self.keys, self.n = record.chunks, record.n
        self.reader, self.rebuild = reader, rebuild
        cum = array("q", [0])
        for count in summary.counts:
            cum.append(cum[-1] + count)
        self.cum = cum  # eligible slots before each chunk
        self.places = [position for position, _, _ in summary.placeholders]
        self.chunks: dict[int, tuple[SlotTable, array[int]]] = {}  # chunk -> its slots, their eligible rows
        # the first 8 bytes of the commits of the chunks read: two equal ids share them (two different ids
        # sharing them, a mere 2**-64 chance, would only make the base rebuild the state: never wrong)
        self.seen: set[int] = set()
        self.fallback: View | None = None

    def retarget(self, old: Reader, new: Reader) -> None:
        if self.reader is old:
            self.reader = new
        if self.fallback is not None:
            self.fallback.retarget(old, new)

    def _item(self, position: int) -> tuple[SlotTable, int] | tuple[Message, ObjectId] | None:
        """The packed chunk and row of the slot at ``position``, or a placeholder result and its commit; None
        once the base fell back."""
        if self.fallback is not None:
            return None
        places = self.places
        at = 0
        if places:
            at = bisect_left(places, position)
            if at < len(places) and places[at] == position:
                _, commit, call_id = self.summary.placeholders[at]
                message = Message(role="tool", content=PLACEHOLDER_TEXT, tool_call_id=call_id, is_error=True)
                return message, commit
        wanted = position - at  # the wanted message's rank among the kept ones
        dropped = self.summary.dropped
        rank = wanted
        while dropped:  # its eligible rank: the least rank r >= wanted with r = wanted + (dropped ranks <= r)
            moved = wanted + bisect_right(dropped, rank)
            if moved == rank:
                break
            rank = moved
        cum = self.cum
        number = bisect_right(cum, rank) - 1
        try:
            table, rows = self._chunk(number)
        except DecodeError:
            self._fall_back()
            return None
        return table, rows[rank - cum[number]]

    def _chunk(self, number: int) -> tuple[SlotTable, array[int]]:
        got = self.chunks.get(number)
        if got is not None:
            return got
        key = self.keys[number]
        raw = self.reader.table_get(Table.DERIVED, key)
        if raw is None:
            raise DecodeError(f"chunk {number} is missing")
        table = SlotTable()
        size = table.add_chunk(key, raw)
        if size != min(CHUNK_SLOTS, self.n - number * CHUNK_SLOTS):
            raise DecodeError(f"chunk {number} holds {size} slots")
        codes = table.codes
        rows = array("i", [row for row in range(size) if _eligible(codes[row])])
        first, after = self.cum[number], self.cum[number + 1]
        if len(rows) != after - first:
            raise DecodeError(f"chunk {number} does not hold the messages its checkpoint's view shows")
        dropped = self.summary.dropped
        for rank in dropped[bisect_left(dropped, first) : bisect_left(dropped, after)]:
            if codes[rows[rank - first]] >> 2 & 3 != _TOOL:
                raise DecodeError(f"chunk {number}: a dropped result is not a tool result")
        with memoryview(table.ids) as view, view.cast("Q") as words:
            ids = list(words[::8])  # each commit's first 8 bytes (a slot is 64 bytes: commit, blob)
        ids.extend(_first_word(extra[0], 0, 8) for extra in table.extra.values() if extra[0] is not None)
        fresh = set(ids)
        if len(fresh) != len(ids) or not self.seen.isdisjoint(fresh):
            raise DecodeError(f"chunk {number}: a commit names two slots")
        self.seen |= fresh
        self.chunks[number] = got = (table, rows)
        return got

    def _fall_back(self) -> None:
        view = self.rebuild(self.reader).render(self.reader)
        if len(view) != self.summary.length:
            raise DecodeError(
                f"the checkpoint of {self.head} disagrees with history (run `tractkv fsck --repair`)"
            )
        self.fallback = view

    def message(self, position: int, load: Callable[[Slot], Message]) -> Message:
        item = self._item(position)
        if item is None:
            assert self.fallback is not None
            return self.fallback.message(position)
        where, row = item
        if type(where) is SlotTable:
            return load(where.slot(row))  # type: ignore[arg-type]  # a Slot for this use only
        return where  # type: ignore[return-value]  # a placeholder result

    def commit(self, position: int) -> ObjectId:
        item = self._item(position)
        if item is None:
            assert self.fallback is not None
            return self.fallback.commit_at(position)
        where, row = item
        return where.commit(row) if type(where) is SlotTable else row  # type: ignore[return-value,arg-type]

    def shape(self, position: int) -> tuple[int, ObjectId, int] | None:
        """:meth:`View.shape_at` for a position of the base."""
        item = self._item(position)
        if item is None:
            assert self.fallback is not None
            return self.fallback.shape_at(position)
        where, row = item
        if type(where) is SlotTable:
            return where.codes[row], where.commit(row), where.tokens[row]  # type: ignore[arg-type,index]
        return None

    def gen(self, position: int) -> dict[str, Any] | None:
        item = self._item(position)
        if item is None:
            assert self.fallback is not None
            return self.fallback.gen_at(position)
        where, row = item
        return where.gen(row) if type(where) is SlotTable else None  # type: ignore[arg-type]


def _media_loader(cache: dict[str, bytes], reader: Reader, *, strict: bool = True) -> Callable[[str], Any]:
    """:meth:`CompileState.media_loader` over the media cache ``cache``."""

    def load(oid: str) -> bytes | None:
        data = cache.get(oid)
        if data is None:
            obj = reader.get(ObjectId(oid)) if not strict else reader[ObjectId(oid)]
            if isinstance(obj, Blob) and isinstance(obj.data, bytes) and obj.data:
                data = cache[oid] = obj.data
            elif strict:
                raise ContentError(f"media {oid} is not a blob of bytes")
        return data

    return load


class _Renderer:
    """Renders a slot's message from its blob, read through ``reader``, cached in ``messages`` by blob id.
    What a view calls on first use of a message: it holds the state's caches, not the state, so a view and
    its state form no reference cycle (a dropped state is freed at once, not at the next gc)."""

    __slots__ = ("media", "messages", "reader")

    def __init__(self, messages: dict[bytes, Message], media: dict[str, bytes], reader: Reader) -> None:
        self.messages, self.media, self.reader = messages, media, reader

    def __call__(self, slot: Slot) -> Message:
        message = self.messages.get(slot.raw_blob)
        if message is None:
            message = self.messages[slot.raw_blob] = to_message(
                _payload(self.reader, slot.blob), _media_loader(self.media, self.reader)
            )
        return message


def _index_of(slots: list[Slot]) -> dict[ObjectId, int]:
    index: dict[ObjectId, int] = {}
    for position, slot in enumerate(slots):
        index[slot.commit] = position
        if slot.source != slot.commit:
            index[slot.source] = position
    return index


class _Pending:
    """A checkpoint whose slots a state has not read yet (:meth:`CompileState.load` with ``later``)."""

    __slots__ = ("commits_since", "reader", "rebuild", "record", "tools_since")

    def __init__(
        self, reader: Reader, record: CheckpointRecord, rebuild: Callable[[Reader], CompileState]
    ) -> None:
        self.reader = reader  # a store or a batch: it outlives the load (retargeted once a batch landed)
        self.record = record
        self.rebuild = rebuild  # the state at the record's commit from objects (through a reader), when a
        # chunk is damaged
        self.commits_since = 0  # commits the state took since
        self.tools_since = False  # one of them set the tool set


class CompileState:
    """Everything compile needs at one commit. Mutated in place while history is replayed."""

    __slots__ = (
        "_index",
        "_pending",
        "_slots",
        "_table",
        "ancestors",
        "chunk_keys",
        "commit_count",
        "counter_name",
        "head",
        "media",
        "messages",
        "rel_since",
        "removed",
        "tools",
        "tools_commit",
        "view",
    )

    def __init__(self, counter_name: str) -> None:
        self.head: ObjectId | None = None
        self._slots: list[Slot] = []
        self._index: dict[ObjectId, int] | None = {}  # message commit and its edits -> slot position
        # A checkpoint loaded lazily (:meth:`load` with ``later``): its slots are read, verified and put
        # before ``_slots`` (which then holds only the messages appended since) on first use of
        # :attr:`slots` / :attr:`index`. Appends and :meth:`save` do not need them.
        self._pending: _Pending | None = None
        # A checkpoint's slots once read: packed (SlotTable), before ``_slots`` (then only the slots appended
        # since). Compile and appends use it as it is; anything needing Slot objects (:attr:`slots`, the
        # index: an edit, an annotation, a merge) unpacks it into ``_slots`` for good.
        self._table: SlotTable | None = None
        self.commit_count = 0
        self.tools: ObjectId | None = None
        self.tools_commit: ObjectId | None = None
        self.counter_name = counter_name
        self.ancestors: set[ObjectId] | None = set()  # None when unknown (loaded from a checkpoint)
        self.messages: dict[bytes, Message] = {}  # raw blob id -> rendered message
        self.media: dict[str, bytes] = {}  # media blob id -> its bytes, loaded once (shared by copies)
        self.removed: set[ObjectId] = (
            set()
        )  # message commits a compression replaced (merge never revives them)
        self.view: View | None = View()  # what compile returns by default; None = rebuild lazily
        # save() cache: chunk start -> the slot objects it encoded, its key... (_Chunk). Valid while those
        # exact (immutable) Slot objects still fill the chunk, so a growing branch encodes only what it
        # appended since (its last chunk's new rows).
        self.chunk_keys: dict[int, _Chunk] = {}
        # (P,): every commit since P (a checkpointed commit; None: the empty history) is a single-parent
        # commit on the chain that is no spawn and links no child head, so P's relation row stands for the
        # history's (engine/relations.py). None: unknown (a merge, or a commit that is not such).
        self.rel_since: tuple[ObjectId | None] | None = (None,)

    @property
    def slots(self) -> list[Slot]:
        """The message slots in order (a lazily loaded checkpoint's are read now)."""
        if self._pending is not None:
            self._load_pending()
        if self._table is not None:
            self._unpack()
        return self._slots

    @slots.setter
    def slots(self, value: list[Slot]) -> None:
        self._load_pending()
        self._table = None
        self._slots = value

    def _unpack(self) -> None:
        """Make the packed slots of the checkpoint Slot objects, before the ones appended since."""
        table, self._table = self._table, None
        if table is None:
            return
        slots = table.slots()
        for number, key in enumerate(table.keys):  # save() re-encodes none of these chunks
            start = number * CHUNK_SLOTS
            self.chunk_keys[start] = _Chunk(slots[start : start + CHUNK_SLOTS], key)
        slots.extend(self._slots)
        self._slots = slots

    @property
    def index(self) -> dict[ObjectId, int]:
        """Message commits and their edits -> slot position."""
        if self._index is None:
            self._index = _index_of(self.slots)
        return self._index

    @index.setter
    def index(self, value: dict[ObjectId, int]) -> None:
        self._load_pending()
        self._index = value

    def slots_reversed(self) -> Iterator[Slot]:
        """The slots, last first, without unpacking a loaded checkpoint's (one Slot made at a time)."""
        self._load_pending()
        table = self._table
        yield from reversed(self._slots)
        if table is not None:
            for row in range(table.n - 1, -1, -1):
                yield table.slot(row)

    def slot_count(self) -> int:
        """How many slots (without reading a lazily loaded checkpoint)."""
        pending, table = self._pending, self._table
        return (
            len(self._slots)
            + (0 if pending is None else pending.record.n)
            + (0 if table is None else table.n)
        )

    def appended_slot(self, oid: ObjectId) -> Slot | None:
        """The slot whose shown content ``oid`` (a commit this state just took) added or edited, if it is
        one; reads no lazily loaded checkpoint when ``oid`` was appended after it."""
        slots = self._slots
        if slots and slots[-1].extra is None and slots[-1].raw_commit.hex() == oid:
            return slots[-1]  # the usual case: the message ``oid`` appended last (it shows its own content)
        if self._pending is not None or self._table is not None:
            # ``oid`` came after the checkpoint was loaded (an edit or annotation would have unpacked it):
            # it can only be appended
            for slot in reversed(self._slots):
                if slot.source == oid:
                    return slot
            return None
        position = self.index.get(oid)
        if position is None:
            return None
        slot = self.slots[position]
        return slot if slot.source == oid else None

    def _load_pending(self) -> None:
        """Put a lazily loaded checkpoint's slots in place: read and verified now; damaged or gone since, the
        state at the checkpoint's commit is rebuilt from objects (the checkpoint is a cache)."""
        pending = self._pending
        if pending is None:
            return
        # ``_pending`` stays set until the slots are read (or rebuilt): any failure (an I/O error, Ctrl-C, a
        # failed rebuild) leaves the state as it was, never holding only the slots appended since.
        rebuilt = False
        try:
            with bulk():
                loaded = CompileState._load_slots(pending.reader, pending.record, self.counter_name)
        except DecodeError:
            loaded, rebuilt = pending.rebuild(pending.reader), True
        self._pending = None
        if rebuilt:
            self.removed = set(loaded.removed)
            self.commit_count = loaded.commit_count + pending.commits_since
            if not pending.tools_since:
                self.tools, self.tools_commit = loaded.tools, loaded.tools_commit
            base, index = loaded.slots, loaded._index
            for slot in self._slots:
                if index is not None:
                    index[slot.commit] = len(base)
                base.append(slot)
            self._slots, self._index, self._table = base, index, None
            self.chunk_keys = loaded.chunk_keys
            self.view = None  # one made from the checkpoint's summary is not trusted over objects
        else:
            self._table = loaded._table  # the slots appended since stay in ``_slots``, after it
        self.messages = {**loaded.messages, **self.messages}

    def retarget(self, old: Reader, new: Reader) -> None:
        """Read through ``new`` instead of ``old`` from now on (``old`` a batch that landed in the store
        ``new``: what the batch held is in the store), so the state no longer keeps the batch alive."""
        if self._pending is not None and self._pending.reader is old:
            self._pending.reader = new
        if self.view is not None:
            self.view.retarget(old, new)

    def copy(self) -> CompileState:
        self._load_pending()
        other = CompileState(self.counter_name)
        other.head = self.head
        other._table = self._table  # immutable: shared
        other._slots = list(self._slots)
        other._index = None if self._index is None else dict(self._index)
        other.commit_count = self.commit_count
        other.tools = self.tools
        other.tools_commit = self.tools_commit
        other.ancestors = None if self.ancestors is None else set(self.ancestors)
        other.messages = dict(self.messages)
        other.media = self.media  # immutable bytes by content id: one cache for every copy
        other.removed = set(self.removed)
        other.view = None if self.view is None else self.view.copy()
        if other.view is not None and other.view.reader is not None:  # render into the copy's own cache
            other.view.load = _Renderer(other.messages, other.media, other.view.reader)
        other.chunk_keys = dict(self.chunk_keys)
        other.rel_since = self.rel_since
        return other

    # --- replay ---------------------------------------------------------------------------------------

    def apply(
        self,
        reader: Reader,
        oid: ObjectId,
        commit: Commit,
        counter: TokenCounter,
        payload: dict[str, Any] | None = None,
    ) -> None:
        """Apply one single-parent (or root) commit.

        ``payload`` is the data of the commit's content blob when the caller has it (it just made the
        commit), which saves reading and decoding the blob again.
        """
        self._apply_change(reader, oid, commit, counter, skip_targets=None, payload=payload)
        self._advance(oid, commit)

    def apply_text(self, oid: ObjectId, commit: Commit, role: str, text: str, tokens: int) -> Slot:
        """:meth:`apply` of a plain-text append the write path just made: ``commit`` an append whose content
        blob is ``{"type": "dialogue", "role": role, "text": text}`` (``role`` user or assistant, ``text`` a
        non-empty str; ``content_objects`` checked it), ``tokens`` what :func:`count_tokens` gives for it.
        The same slot, message and view as :meth:`apply`, without deriving again what the caller knows; returns
        the slot (its ``tokens`` are the commit's)."""
        assert commit.content is not None
        slot = Slot.__new__(Slot)
        slot.raw_commit = bytes.fromhex(oid)  # both ids were just computed: 64 lowercase hex digits
        slot.raw_blob = raw_blob = bytes.fromhex(commit.content)
        slot.tokens = tokens
        slot.code = _TEXT_CODES[role]
        slot.calls = None
        slot.extra = None  # no source, generation config nor annotation
        messages = self.messages
        message = messages.get(raw_blob)
        if message is None:
            message = messages[raw_blob] = text_message(role, text)
        if self._index is not None:
            self._index[oid] = len(self._slots)
        self._slots.append(slot)
        if self.view is not None:
            self.view.add(message, slot)
        self._advance(oid, commit)
        return slot

    def _advance(self, oid: ObjectId, commit: Commit) -> None:
        if self.rel_since is not None and (
            commit.parents != ((self.head,) if self.head is not None else ())
            or commit.operation == "spawn"
            or "child" in commit.links
            or "usages" in commit.links
        ):
            self.rel_since = None  # see __init__
        self.head = oid
        self.commit_count += 1
        if self.ancestors is not None:
            self.ancestors.add(oid)
        if self._pending is not None:
            self._pending.commits_since += 1
        if commit.tools is not None:
            self.tools = commit.tools
            self.tools_commit = oid
            if self._pending is not None:
                self._pending.tools_since = True

    def _apply_change(
        self,
        reader: Reader,
        oid: ObjectId,
        commit: Commit,
        counter: TokenCounter,
        skip_targets: set[ObjectId] | None,
        payload: dict[str, Any] | None = None,
    ) -> None:
        op = commit.operation
        if commit.content is None:
            return
        if op == "edit" and commit.edit_target is not None:
            position = self.index.get(commit.edit_target)
            if position is None:
                return  # target outside this history (validated at commit time; tolerated on replay)
            slot = self.slots[position]
            if skip_targets is not None and slot.commit in skip_targets:
                return
            data = payload if payload is not None else _payload(reader, commit.content)
            role, calls = message_shape(data)
            self.slots[position] = slot.evolve(
                raw_source=oid_to_raw(oid),
                raw_blob=oid_to_raw(commit.content),
                kind=str(data.get("type")),
                tokens=count_tokens(data, counter, self.media_loader(reader, strict=False)),
                gen=commit.generation_config,
                role=role,
                calls=calls,
            )
            self.index[oid] = position
            self.view = None
            return
        if op == "compress":
            self._apply_compress(reader, oid, commit, counter)
            return
        if op == "trim":
            self._apply_trim(oid, commit, skip_targets)
            return
        if op == "annotate" and commit.edit_target is not None:
            position = self.index.get(commit.edit_target)
            if position is None:
                return
            slot = self.slots[position]
            if skip_targets is not None and slot.commit in skip_targets:
                return
            data = payload if payload is not None else _payload(reader, commit.content)
            if data.get("type") != ANNOTATION:
                return
            self.slots[position] = slot.evolve(
                priority=PRIORITY_CODES.get(str(data.get("priority")), 0), annotation=oid
            )
            self.view = None
            return
        data = payload if payload is not None else _payload(reader, commit.content)
        if not is_message(data):
            return
        kind = str(data["type"])
        role, calls = message_shape(data)
        parts = data.get("parts")  # media loaders only for parts (plain text needs none)
        raw_blob = bytes.fromhex(commit.content)  # a Commit's ids are checked ids
        slot = Slot(
            raw_commit=oid_to_raw(oid),
            raw_blob=raw_blob,
            kind=kind,
            tokens=count_tokens(data, counter, self.media_loader(reader, strict=False) if parts else None),
            gen=commit.generation_config,
            role=role,
            calls=calls,
        )
        message = self.messages.get(raw_blob)
        if message is None:
            message = self.messages[raw_blob] = (
                to_message(data, self.media_loader(reader)) if parts else to_message(data)
            )
        if self._index is not None:  # else it is made from the slots on first use
            self._index[oid] = len(self._slots)  # (an index is only made once the slots are unpacked)
        self._slots.append(slot)
        if self.view is not None and kind != "reasoning":
            self.view.add(message, slot)

    # --- rendering ------------------------------------------------------------------------------------

    def _apply_compress(self, reader: Reader, oid: ObjectId, commit: Commit, counter: TokenCounter) -> None:
        """Replace the source messages by the summary (at the first source's place); pinned sources stay."""
        assert commit.content is not None
        sources = set(commit.links.get("sources", ()))
        data = _payload(reader, commit.content)
        role, calls = message_shape(data)
        summary = Slot(
            raw_commit=oid_to_raw(oid),
            raw_blob=oid_to_raw(commit.content),
            kind=str(data.get("type")),
            tokens=count_tokens(data, counter, self.media_loader(reader, strict=False)),
            gen=commit.generation_config,
            role=role,
            calls=calls,
        )
        kept: list[Slot] = []
        placed = False
        for slot in self.slots:
            if slot.commit in sources and slot.priority != PRIORITY_CODES["pinned"]:
                if not placed:
                    kept.append(summary)
                    placed = True
                self.removed.add(slot.commit)
                continue
            kept.append(slot)
        if not placed:
            kept.append(summary)
        self._reindex(kept)

    def _apply_trim(self, oid: ObjectId, commit: Commit, skip_targets: set[ObjectId] | None) -> None:
        """Skip each target message (as a ``skip`` annotation does); a target outside this history is
        tolerated on replay, as an annotation's is."""
        skip = PRIORITY_CODES["skip"]
        for target in commit.links.get("targets", ()):
            position = self.index.get(target)
            if position is None:
                continue
            slot = self.slots[position]
            if skip_targets is not None and slot.commit in skip_targets:
                continue
            self.slots[position] = slot.evolve(priority=skip, annotation=oid)
        self.view = None

    def _reindex(self, slots: list[Slot]) -> None:
        self.slots = slots
        self.index = _index_of(slots)
        self.view = None

    def render(self, reader: Reader, include_reasoning: bool = False) -> View:
        """What compile shows: visible messages in order, their commits, configs and token total.

        Reads no blob: a message this state has not rendered yet stays a slot in the view until it is used
        (:meth:`View.message`), then is read through ``reader``, which must outlive the view (a store or a
        batch, never a snapshot; :meth:`Compiler.render_all` renders what is left before a store closes).
        """
        if not include_reasoning and self.view is not None:
            return self.view
        with bulk():
            return self._render(reader, include_reasoning)

    def _render(self, reader: Reader, include_reasoning: bool) -> View:
        view = View()
        view.load, view.reader = _Renderer(self.messages, self.media, reader), reader
        skip = PRIORITY_CODES["skip"]
        messages = self.messages
        self._load_pending()
        table = self._table
        if table is not None:  # the checkpoint's slots stay packed: the view keeps their positions
            view.table = table
            codes = table.codes
            for row in range(table.n):
                code = codes[row]
                if code & 3 == skip or (code >> 4 == _REASONING and not include_reasoning):
                    continue
                view.add_row(row)
        for slot in self._slots:
            code = slot.code  # kind, role and priority packed (Slot)
            if code & 3 == skip or (code >> 4 == _REASONING and not include_reasoning):
                continue
            view.add(messages.get(slot.raw_blob, slot), slot)
        if include_reasoning:
            view.finish()  # a rendering with reasoning is built whole each time, never extended
        else:
            self.view = view
        return view

    def message_of(self, reader: Reader, slot: Slot) -> Message:
        """The rendered message of a slot (cached by blob id)."""
        return _Renderer(self.messages, self.media, reader)(slot)

    def media_loader(self, reader: Reader, *, strict: bool = True) -> Callable[[str], Any]:
        """A function giving a media blob's bytes by id, each read from ``reader`` once per state (and its
        copies). ``strict``: a missing media blob raises (``ObjectNotFound``; a non-bytes one
        ``ContentError``); otherwise it gives None (token estimates then use their fixed figures)."""
        return _media_loader(self.media, reader, strict=strict)

    # --- persistence ----------------------------------------------------------------------------------

    def save(self, batch: WriteBatch) -> None:
        """Stage this state as a checkpoint (chunks already stored are not written again). A lazily loaded
        checkpoint's full chunks are named again unread; only its last, partial one is read."""
        if self.head is None:
            return
        chunk_keys: list[bytes] = []
        counts: list[int] | None = []  # eligible slots per chunk (the view summary's; None: unknown)
        view = self.view
        if view is not None and view.base is not None and view.base.fallback is not None:
            self._load_pending()  # its view found a chunk damaged: read (or rebuild) every slot now
        slots, first = self._slots, 0
        pending = self._pending
        if pending is not None:
            full = pending.record.n // CHUNK_SLOTS
            if all(batch.table_get(Table.DERIVED, key) is not None for key in pending.record.chunks[:full]):
                try:
                    rest = self._pending_tail_chunk(pending, full)
                except DecodeError:
                    self._load_pending()  # damaged: read (or rebuild) every slot
                else:
                    chunk_keys = list(pending.record.chunks[:full])
                    slots, first = rest + self._slots, full * CHUNK_SLOTS
                    summary = pending.record.view
                    counts = None if summary is None else list(summary.counts[:full])
            else:
                self._load_pending()
            if self._pending is None and self._table is None:  # rebuilt: every slot is in ``_slots``
                slots, first, chunk_keys, counts = self._slots, 0, [], []
        table = self._table
        if self._pending is None and table is not None:
            full = table.n // CHUNK_SLOTS
            if all(batch.table_get(Table.DERIVED, key) is not None for key in table.keys[:full]):
                chunk_keys = table.keys[:full]
                slots, first = table.slots(full * CHUNK_SLOTS) + self._slots, full * CHUNK_SLOTS
                counts = table.eligible_counts(full)
            else:  # gc dropped one: write every chunk again
                self._unpack()
                slots, first, chunk_keys, counts = self._slots, 0, [], []
        for offset in range(0, len(slots), CHUNK_SLOTS):
            start = first + offset
            part = slots[offset : offset + CHUNK_SLOTS]
            cached = self.chunk_keys.get(start)
            if cached is not None and cached.slots != part[: len(cached.slots)]:
                # Slot has no __eq__: lists compare their items by identity (fast, in C)
                cached = None  # a slot of it changed (an edit, an annotation): encode it anew
            if (
                cached is not None
                and len(cached.slots) == len(part)
                and batch.table_get(Table.DERIVED, cached.key) is not None  # gc may have dropped it
            ):
                chunk_keys.append(cached.key)
                if counts is not None:
                    counts.append(cached.eligible())
                continue
            entry = _Chunk(part)
            if cached is not None and cached.rows is not None and len(cached.slots) < len(part):
                # a prefix of it encoded (the slots before those appended since): encode the rest
                entry.rows = cached.rows + _rows_bytes(part[len(cached.slots) :])
                entry.count = cached.eligible() + sum(_eligible(s.code) for s in part[len(cached.slots) :])
            else:
                entry.rows = _rows_bytes(part)
            data = codec.head(0x80, len(part)) + entry.rows  # codec.dumps of the list of rows
            key = entry.key = CHUNK_PREFIX + bytes.fromhex(hash_bytes(data))
            if len(part) == CHUNK_SLOTS:
                entry.rows = None  # full: never extended, so its bytes need not stay in memory
            if counts is not None:
                counts.append(entry.eligible())
            if batch.table_get(Table.DERIVED, key) != data:  # absent, or damaged: (re)write it
                batch.table_put(Table.DERIVED, key, data)
            self.chunk_keys[start] = entry
            chunk_keys.append(key)
        record = {
            "counter": self.counter_name,
            "chunks": chunk_keys,
            "n": first + len(slots),
            "commits": self.commit_count,
            "tools": None if self.tools is None else oid_to_raw(self.tools),
            "tools_commit": None if self.tools_commit is None else oid_to_raw(self.tools_commit),
            "removed": sorted(oid_to_raw(o) for o in self.removed),
            "view": None if counts is None else view_summary(self.view, counts),
        }
        key = CKPT_PREFIX + oid_to_raw(self.head)
        record["check"] = _record_check(key, record)
        batch.table_put(Table.DERIVED, key, codec.dumps(record))

    def _pending_tail_chunk(self, pending: _Pending, full: int) -> list[Slot]:
        """The slots of a lazily loaded checkpoint's last chunk when it is partial (read and verified).

        Raises:
            DecodeError: missing or damaged.
        """
        record = pending.record
        if full == len(record.chunks):
            return []
        key = record.chunks[full]
        raw = pending.reader.table_get(Table.DERIVED, key)
        if raw is None:
            raise DecodeError("the last chunk is missing")
        rest = read_chunk(key, raw)
        check_chunk_size(record, full, rest)
        return rest

    @classmethod
    def load(
        cls,
        reader: Reader,
        oid: ObjectId,
        counter_name: str,
        *,
        later: tuple[Reader, Callable[[Reader], CompileState]] | None = None,
    ) -> CompileState | None:
        """The checkpoint of a commit, or None when absent, damaged, or made with another counter.

        A checkpoint is a local cache, so it is verified before it is trusted (:func:`read_record`,
        :func:`read_chunk`): any damage makes it ignored and the state is rebuilt from objects.

        With ``later`` (a reader that outlives this call: a store or a batch, and a function rebuilding the
        state at ``oid`` from objects) only the record is read and verified now; the slots are read and
        verified on first use, and rebuilt from objects if they turn out damaged (:meth:`_load_pending`).
        So opening a long history and appending to it reads one row, not the whole checkpoint.
        """
        key = CKPT_PREFIX + oid_to_raw(oid)
        raw = reader.table_get(Table.DERIVED, key)
        if raw is None:
            return None
        try:
            record = read_record(key, raw)
            if record.counter != counter_name:
                return None
            view: View | None = None
            if later is not None:
                state = cls(counter_name)
                state._pending = _Pending(later[0], record, later[1])
                state._index = None
                if record.view is not None:  # the view too, reading no chunk (_Base reads them on use)
                    base = _Base(record, later[0], later[1])
                    view = View.from_base(base, _Renderer(state.messages, state.media, later[0]), later[0])
            else:
                with bulk():
                    state = cls._load_slots(reader, record, counter_name)
            check_stored(reader, record)
        except DecodeError:
            return None  # a cache: never trusted over objects
        state.head = oid
        state.rel_since = (oid,)
        state.commit_count = record.commits
        state.tools = record.tools
        state.tools_commit = record.tools_commit
        state.removed = set(record.removed)
        state.ancestors = None
        state.view = view
        return state

    @classmethod
    def _load_slots(cls, reader: Reader, record: CheckpointRecord, counter_name: str) -> CompileState:
        """A state holding the verified slots of ``record``'s chunks, packed (:class:`SlotTable`; the rest of
        its fields unset).

        Raises:
            DecodeError: a chunk is missing or damaged.
        """
        state = cls(counter_name)
        table = SlotTable()
        for number, chunk_key in enumerate(record.chunks):
            chunk = reader.table_get(Table.DERIVED, chunk_key)
            if chunk is None:
                raise DecodeError(f"chunk {number} is missing")
            added = table.add_chunk(chunk_key, chunk)
            if added != min(CHUNK_SLOTS, record.n - number * CHUNK_SLOTS):
                raise DecodeError(f"chunk {number} holds {added} slots")
        table.check_unique()
        state._table = table
        state._index = None  # made on first use (compile from a checkpoint needs none)
        return state


@contextmanager
def bulk() -> Iterator[None]:
    """Pause the cyclic garbage collector while many long-lived objects are made (a checkpoint's slots, a
    view): they hold no cycles, and each collection would walk every one made so far (a third of a fresh
    100k-commit compile). Reference counting still frees everything; the collector resumes after."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


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
        from .reports import Repair  # lazy: only a history with repairs needs the class
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


def summary_of_slots(slots: list[Slot], chunks: int) -> ViewSummary | None:
    """The view summary a record of ``slots`` (in ``chunks`` chunks) must carry: the default view made from
    them, as a compile makes it (fsck's check of a record's summary)."""
    view = View()
    for slot in slots:
        if _eligible(slot.code):
            view.add(slot, slot)
    counts = [
        sum(_eligible(s.code) for s in slots[i : i + CHUNK_SLOTS]) for i in range(0, len(slots), CHUNK_SLOTS)
    ]
    value = view_summary(view, counts)
    return None if value is None else _read_summary(value, len(slots), chunks)


def view_summary(view: View | None, counts: list[int]) -> dict[str, Any] | None:
    """What a record stores of a state's default ``view`` (see :class:`ViewSummary`), given the eligible slots
    of each chunk; None when there is none (or it cannot be trusted: a base that fell back)."""
    if view is None or view.deferred or (view.base is not None and view.base.fallback is not None):
        return None
    if sum(counts) != view.fed:
        return None
    placeholders: list[list[Any]] = []
    if view.base is not None:
        placeholders = [[p, oid_to_raw(c), i] for p, c, i in view.base.summary.placeholders]
    for position in view.placeholders:
        if position >= view.offset:
            message = view.messages[position - view.offset]
            commit = view.commits[position - view.offset]
            assert isinstance(message, Message)
            assert isinstance(commit, str)
            placeholders.append([position, oid_to_raw(ObjectId(commit)), message.tool_call_id or ""])
    pairing = view.pairing
    return {
        "counts": counts,
        "length": len(view),
        "tokens": view.tokens,
        "dropped": list(view.dropped),
        "placeholders": placeholders,
        "open": list(pairing.open),
        "answered": sorted(pairing.answered),
        "call_commit": None if pairing.call_commit is None else oid_to_raw(pairing.call_commit),
        "repairs": [[r.kind, oid_to_raw(r.commit_id), r.call_id, r.detail] for r in pairing.repairs],
    }


def read_chunk(key: bytes, raw: bytes) -> list[Slot]:
    """Decode and verify one chunk of slots: its bytes hash to its key, every row has the slot shape.

    Raises:
        DecodeError: the chunk is damaged.
    """
    return [Slot.packed(*_fields_from_row(row)) for row in _chunk_rows(key, raw)]


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


def check_unique_ids(ids: list[bytes]) -> None:
    """No id is in ``ids`` twice (sorts ``ids`` in place).

    Raises:
        DecodeError: one is.
    """
    ids.sort()
    for previous, current in zip(ids, itertools.islice(ids, 1, None), strict=False):
        if previous == current:
            raise DecodeError(f"two slots name commit {current.hex()}")


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


def _payload(reader: Reader, oid: ObjectId) -> dict[str, Any]:
    obj = reader[oid]
    if isinstance(obj, Blob) and isinstance(obj.data, dict):
        return obj.data
    return {}


def count_tokens(
    data: dict[str, Any], counter: TokenCounter, load_media: Callable[[str], bytes | None] | None = None
) -> int:
    """Tokens a message payload costs: text plus per-message overhead, plus its parts' estimates
    (:func:`tractkv.engine.tokens.part_tokens`; ``load_media`` gives media bytes, else fixed figures)."""
    tokens = counter.count(message_text(data)) + MESSAGE_OVERHEAD
    parts = data.get("parts")
    if parts:
        tokens += part_tokens(parts, counter, load_media or (lambda _oid: None))
    return tokens


@attrs.frozen
class Conflict:
    """Both sides of a merge changed one message (or the tool set) differently since the merge base.

    ``ours`` / ``theirs`` describe each side's version; a merge that refuses conflicts fills them with the
    start of each side's text (and its priority when that changed), and with the tool names for the tool set.
    ``ours_id`` / ``theirs_id`` are each side's content blob (the tool set id for kind ``tools``)."""

    target: ObjectId | None  # the message commit, or None for the tool set
    kind: str  # "content", "priority", "content+priority", "tools"
    ours: str  # a short description of ours' version
    theirs: str
    ours_id: ObjectId | None = attrs.field(default=None, eq=False)
    theirs_id: ObjectId | None = attrs.field(default=None, eq=False)

    def __str__(self) -> str:
        return self.describe()

    def describe(self, ours: str = "ours", theirs: str = "theirs") -> str:
        """One line naming the sides ``ours`` and ``theirs`` (e.g. the branch and the merged revision)."""
        where = f"message {self.target[:12]}" if self.target else "tool set"
        return f"{where}: {self.kind} changed on both sides ({ours}: {self.ours}; {theirs}: {self.theirs})"


def _describe(slot: Slot | None) -> str:
    """A side's priority (``pinned``, ``normal``, ``skip``); merge adds the start of its text."""
    return "absent" if slot is None else PRIORITY_NAMES[slot.priority]


def merge_states(
    base: CompileState, ours: CompileState, theirs: CompileState, strategy: str
) -> tuple[CompileState, list[Conflict]]:
    """Three-way merge of compile states (see the module doc). Returns the merged state and the conflicts.

    ``strategy`` settles conflicts: ``ours`` keeps ours' version, ``theirs`` takes theirs'; ``auto`` keeps
    ours' (callers refuse an ``auto`` merge that has conflicts before it is committed).
    """
    take_theirs = strategy == "theirs"
    merged = ours.copy()
    conflicts: list[Conflict] = []
    base_slots = {s.commit: s for s in base.slots}
    merged.removed |= theirs.removed
    for their_slot in theirs.slots:
        if their_slot.commit in merged.removed:
            continue  # ours compressed it away: a summary stands for it
        position = merged.index.get(their_slot.commit)
        if position is None:
            position = len(merged.slots)
            merged.slots.append(their_slot)
            merged.index[their_slot.commit] = position
            if their_slot.source != their_slot.commit:
                merged.index[their_slot.source] = position
            continue
        our_slot = merged.slots[position]
        if (our_slot.blob, our_slot.priority) == (their_slot.blob, their_slot.priority):
            continue
        base_slot = base_slots.get(their_slot.commit)
        base_key = None if base_slot is None else (base_slot.blob, base_slot.priority)
        ours_changed = (our_slot.blob, our_slot.priority) != base_key
        theirs_changed = (their_slot.blob, their_slot.priority) != base_key
        if ours_changed and theirs_changed:
            kinds = []
            if our_slot.blob != their_slot.blob:
                kinds.append("content")
            if our_slot.priority != their_slot.priority:
                kinds.append("priority")
            conflicts.append(
                Conflict(
                    their_slot.commit,
                    "+".join(kinds),
                    _describe(our_slot),
                    _describe(their_slot),
                    our_slot.blob,
                    their_slot.blob,
                )
            )
            use_theirs = take_theirs
        else:
            use_theirs = theirs_changed
        if use_theirs:
            merged.slots[position] = their_slot
            merged.index[their_slot.source] = position
    if theirs.tools != ours.tools:
        ours_changed = ours.tools != base.tools
        theirs_changed = theirs.tools != base.tools
        if ours_changed and theirs_changed:
            conflicts.append(
                Conflict(None, "tools", str(ours.tools), str(theirs.tools), ours.tools, theirs.tools)
            )
        if (theirs_changed and not ours_changed) or (ours_changed and theirs_changed and take_theirs):
            merged.tools, merged.tools_commit = theirs.tools, theirs.tools_commit
    merged.messages.update(theirs.messages)
    if theirs.removed - ours.removed:  # theirs compressed messages ours still had
        merged._reindex([s for s in merged.slots if s.commit not in theirs.removed or s.priority == 1])
    merged.view = None
    if merged.ancestors is not None and theirs.ancestors is not None:
        merged.ancestors |= theirs.ancestors
    else:
        merged.ancestors = None
    return merged, conflicts
