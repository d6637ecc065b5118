"""The three-way merge of compile states (:func:`merge_states`): ours' messages in ours' order, then theirs'
that ours lacks; a message or tool set changed on both sides differently is a :class:`Conflict`.
"""

from __future__ import annotations

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
