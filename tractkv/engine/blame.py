"""Blame: for each message of a compiled context, the commit that wrote it and the commits that shaped it.

:func:`blame` returns one :class:`~tractkv.engine.values.BlameEntry` per message compile returns at the
revision, in context order. Its origin (``commit_id``) is the id compile gives the message (an append, the
compress commit of a summary, the call's commit for a placeholder result); ``shown`` is the commit whose
content compile shows (the latest edit, from the compile state's slot); ``edits`` and ``annotations`` are every
edit and annotate commit in the revision's history naming that message (an edit of an edit counts for the
message it edits), in causal order (parents first); ``compressed`` the messages a summary's compress commit
replaced (its ``sources`` link). A history walk reads every commit reachable from the revision: O(history).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tractkv.engine.search import history_of
from tractkv.engine.values import BlameEntry, timestamp
from tractkv.ids import ObjectId

if TYPE_CHECKING:
    from tractkv.engine.session import Session


def blame(session: Session, rev: str | None = None) -> list[BlameEntry]:
    """Where each message of the context at ``rev`` (default HEAD) comes from (see the module docstring).

    Raises:
        UnknownRevision: ``rev`` names no commit."""
    reader = session.reader()
    tip = session.resolve(rev, reader) if rev is not None else session.head_commit(reader)
    if tip is None:
        return []
    state, ctx = session.compiled_at(tip)
    edits: dict[ObjectId, list[ObjectId]] = {}
    annotations: dict[ObjectId, list[ObjectId]] = {}
    targets: dict[ObjectId, ObjectId] = {}  # an edit -> the message it edits
    for oid, commit in history_of(reader, tip):
        target = commit.edit_target
        if target is None:
            continue
        target = targets.get(target, target)
        if commit.operation == "edit":
            targets[oid] = target
            edits.setdefault(target, []).append(oid)
        elif commit.operation == "annotate":
            annotations.setdefault(target, []).append(oid)
    out: list[BlameEntry] = []
    seen: set[ObjectId] = set()
    for index, (oid, message) in enumerate(zip(ctx.commit_ids, ctx.messages, strict=True)):
        commit = reader.get_commit(oid)
        placeholder = oid in seen  # a placeholder result carries the id of the call's message
        seen.add(oid)
        position = state.index.get(oid)
        shown = state.slots[position].source if position is not None and not placeholder else oid
        out.append(
            BlameEntry(
                index=index,
                commit_id=oid,
                role=message.role,
                operation=commit.operation,
                shown=shown,
                edits=() if placeholder else tuple(edits.get(oid, ())),
                annotations=() if placeholder else tuple(annotations.get(oid, ())),
                compressed=tuple(commit.links.get("sources", ())) if commit.operation == "compress" else (),
                placeholder=placeholder,
                created_at=timestamp(commit.created_at),
            )
        )
    return out
