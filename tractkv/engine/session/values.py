"""The session's values: :class:`Tip` (the branch an operation writes to, as it read it) and the shapes of the
callables the write path takes (:data:`Build`, :data:`Derive`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from tractkv.engine.compile import CompileState
from tractkv.ids import ObjectId
from tractkv.model import Commit
from tractkv.store import WriteBatch

Build = Callable[[WriteBatch, ObjectId | None, Commit | None], Commit]
"""Stages a commit's objects in the batch and returns the commit, given its parent id and parent commit."""

Derive = Callable[[ObjectId, Commit, WriteBatch], CompileState]
"""Brings the HEAD state to a commit just staged (its id, the commit, the batch staging it); returns it."""


class Tip(NamedTuple):
    """The branch an operation writes to and its tip as read when the operation started.

    Every write compares-and-swaps the branch from this tip, so anything the operation computed from it (a
    merge's conflicts, a compress plan, a model's reply to the compiled context, an edit's target) is never
    committed on top of a tip it did not see: another handle's move makes it :class:`ConcurrentUpdate`.
    """

    ref: str
    head: ObjectId | None


class BatchLog:
    """The reflog entry of a batch's moves of one branch: the first commit's entry (old tip, ...) updated by
    each later commit; called, it gives the entry as it stands (what :meth:`WriteBatch.replace_log` encodes
    when the batch is read or written: the message is formatted then, once, not at every commit)."""

    __slots__ = ("count", "entry", "index", "new", "op", "ref", "summary", "ts")

    def __init__(self, ref: str, entry: dict[str, Any], summary: str, index: int) -> None:
        self.ref, self.entry, self.index = ref, entry, index
        self.count = 1
        self.new, self.op, self.ts = entry["new"], entry["op"], entry["ts"]
        self.summary: str | Callable[[], str] = summary

    def __call__(self) -> dict[str, Any]:
        summary = self.summary if isinstance(self.summary, str) else self.summary()
        entry = self.entry
        entry["new"], entry["op"], entry["ts"] = self.new, self.op, self.ts
        entry["msg"] = f"batch of {self.count} commits, the last: {summary}"
        return entry
