"""The view: the compiled messages of a state, in context order, rendered on first use, and its lazy checkpoint
base (:class:`_Base`: the positions of a checkpoint's default view, each chunk read and verified on first use).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from tractkv.engine.compile.pairing import PLACEHOLDER_TEXT, Pairing, placeholder_tokens
from tractkv.engine.content import MESSAGE_ROLES, Message, TokenCounter, to_message
from tractkv.errors import ContentError, DecodeError
from tractkv.ids import ObjectId, oid_to_raw
from tractkv.model import Blob
from tractkv.store import Reader, Table

if TYPE_CHECKING:
    pass
from tractkv.engine.compile.checkpoint import CheckpointRecord, ViewSummary, _read_summary
from tractkv.engine.compile.slots import (
    _REASONING,
    _TOOL,
    CHUNK_SLOTS,
    UNREAD,
    Slot,
    SlotTable,
    _eligible,
    _first_word,
    _Unread,
)


class View:
    """The visible part of a state, kept in step with appends so compile after an append is O(1).

    Messages pass through the tool-pairing pass (:mod:`tractkv.engine.compile.pairing`) as they are added: an orphan
    tool result is left out, placeholder results are placed before a message that closes open calls. The
    lists are append-only (compile hands out :class:`~tractkv.engine.values.records.FrozenPrefix` views of them);
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


class Rebuilt(Protocol):
    """What a base's ``rebuild`` returns: a state that renders its view (a :class:`CompileState`)."""

    def render(self, reader: Reader) -> View: ...


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
        self, record: CheckpointRecord, reader: Reader, rebuild: Callable[[Reader], Rebuilt]
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
        annotation = slot.annotation
        if annotation is not None:  # its cache breakpoint, cached by blob and annotation (read once)
            key = slot.raw_blob + oid_to_raw(annotation)
            marked = self.messages.get(key)
            if marked is None:
                cache = annotation_cache(self.reader, slot)
                marked = self.messages[key] = message if cache is None else attrs.evolve(message, cache=cache)
            return marked
        return message


def annotation_cache(reader: Reader, slot: Slot) -> str | None:
    """The cache breakpoint of a slot's message: the one its latest annotation states (``"5m"`` / ``"1h"``),
    or None."""
    if slot.annotation is None:
        return None
    commit = reader.get_commit(slot.annotation)
    cache = None if commit.content is None else _payload(reader, commit.content).get("cache")
    return cache if isinstance(cache, str) else None


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


def _payload(reader: Reader, oid: ObjectId) -> dict[str, Any]:
    obj = reader[oid]
    if isinstance(obj, Blob) and isinstance(obj.data, dict):
        return obj.data
    return {}
