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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tractkv import codec
from tractkv.engine.content import (
    ANNOTATION,
    MESSAGE_OVERHEAD,
    Message,
    TokenCounter,
    is_message,
    message_text,
    part_tokens,
    text_message,
    to_message,
)
from tractkv.errors import DecodeError
from tractkv.ids import ObjectId, hash_bytes, oid_to_raw
from tractkv.model import Commit
from tractkv.store import Reader, Table, WriteBatch

if TYPE_CHECKING:
    pass
from tractkv.engine.compile.checkpoint import (
    CheckpointRecord,
    _Chunk,
    _record_check,
    check_chunk_size,
    check_stored,
    read_chunk,
    read_record,
)
from tractkv.engine.compile.slots import (
    _REASONING,
    _TEXT_CODES,
    CHUNK_PREFIX,
    CHUNK_SLOTS,
    CKPT_PREFIX,
    PRIORITY_CODES,
    Slot,
    SlotTable,
    _eligible,
    _rows_bytes,
    message_shape,
)
from tractkv.engine.compile.view import View, _Base, _media_loader, _payload, _Renderer, view_summary


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
            extra = slot.extra  # an annotated slot renders through the view's load (its cache breakpoint)
            view.add(
                slot if extra is not None and extra[2] is not None else messages.get(slot.raw_blob, slot),
                slot,
            )
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


def count_tokens(
    data: dict[str, Any], counter: TokenCounter, load_media: Callable[[str], bytes | None] | None = None
) -> int:
    """Tokens a message payload costs: text plus per-message overhead, plus its parts' estimates
    (:func:`tractkv.engine.content.tokens.part_tokens`; ``load_media`` gives media bytes, else fixed figures)."""
    tokens = counter.count(message_text(data)) + MESSAGE_OVERHEAD
    parts = data.get("parts")
    if parts:
        tokens += part_tokens(parts, counter, load_media or (lambda _oid: None))
    return tokens
