"""The three-way merge of compile states (:func:`merge_states`): ours' messages in ours' order, then theirs'
that ours lacks; a message or tool set changed on both sides differently is a :class:`Conflict`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from tractkv.ids import ObjectId

if TYPE_CHECKING:
    pass
from tractkv.engine.compile.slots import PRIORITY_NAMES, Slot
from tractkv.engine.compile.state import CompileState


@attrs.frozen
class Conflict:
    """Both sides of a merge changed one message (or the tool set) differently since the merge base.

    ``ours`` / ``theirs`` describe each side's version; a merge that refuses conflicts fills them with the
    start of each side's text (and its priority when that changed), and with the tool names for the tool set.
    ``ours_id`` / ``theirs_id`` are each side's content blob (the tool set id for kind ``tools``)."""

    target: ObjectId | None  # the message commit, or None for the tool set
    kind: str  # "content", "priority", "cache" or several joined by "+" ("content+priority"), or "tools"
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


def _describe(slot: Slot | None, cache: str | None = None) -> str:
    """A side's priority (``pinned``, ``normal``, ``skip``) and its cache breakpoint when it has one; merge
    adds the start of its text."""
    if slot is None:
        return "absent"
    return PRIORITY_NAMES[slot.priority] + ("" if cache is None else f", cache {cache}")


def _no_cache(_slot: Slot) -> str | None:
    return None


Version = tuple[ObjectId, int, str | None]


def _version(slot: Slot | None, cache_of: Callable[[Slot], str | None]) -> Version | None:
    """A message's version as the merge compares it: content, priority, cache breakpoint."""
    if slot is None:
        return None
    return slot.blob, slot.priority, None if slot.annotation is None else cache_of(slot)


def _conflict(ours: Slot, theirs: Slot, our_key: Version | None, their_key: Version | None) -> Conflict:
    """The conflict of a message both sides changed differently (``*_key``: each side's :func:`_version`)."""
    assert our_key is not None
    assert their_key is not None
    kinds = [
        k for k, a, b in zip(("content", "priority", "cache"), our_key, their_key, strict=True) if a != b
    ]
    return Conflict(
        theirs.commit,
        "+".join(kinds),
        _describe(ours, our_key[2]),
        _describe(theirs, their_key[2]),
        ours.blob,
        theirs.blob,
    )


def merge_states(
    base: CompileState,
    ours: CompileState,
    theirs: CompileState,
    strategy: str,
    cache_of: Callable[[Slot], str | None] = _no_cache,
) -> tuple[CompileState, list[Conflict]]:
    """Three-way merge of compile states (see the module doc). Returns the merged state and the conflicts.

    ``strategy`` settles conflicts: ``ours`` keeps ours' version, ``theirs`` takes theirs'; ``auto`` keeps
    ours' (callers refuse an ``auto`` merge that has conflicts before it is committed). A message's version
    is its content, priority and cache breakpoint (``cache_of``: the one its latest annotation states), so a
    breakpoint set on one side alone is merged as a priority is.
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
        if our_slot is their_slot:
            continue
        our_key, their_key = _version(our_slot, cache_of), _version(their_slot, cache_of)
        if our_key == their_key:
            continue
        base_key = _version(base_slots.get(their_slot.commit), cache_of)
        ours_changed = our_key != base_key
        theirs_changed = their_key != base_key
        if ours_changed and theirs_changed:
            conflicts.append(_conflict(our_slot, their_slot, our_key, their_key))
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
