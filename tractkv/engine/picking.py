"""Cherry-pick and rebase: re-apply commits' changes on another tip (git's ``cherry-pick`` and ``rebase``).

A commit's *change* is what its operation does to the context (:mod:`tractkv.engine.compile.state`): an
``append`` adds its message, an ``edit`` replaces its target's content, an ``annotate`` sets its target's
priority, a ``compress`` replaces its sources, a ``trim`` skips its targets, and a commit whose tool set differs
from the one in force before it changes the tools. Re-applying it makes a new commit of the same operation and
content on the new parent, with its links carried over: a target, a source, a ``reply_to`` that was itself
re-applied in the same operation is replaced by its copy. The new commit names its original in its metadata
(``picked_from``: the original's id, hashed with the commit), and its time is the clock's (after its parent).

* **A tool turn moves whole.** Picking an assistant message with tool calls picks the results answering it
  (commits whose ``reply_to`` is it, on the first-parent line of a local branch that holds it, the line with
  most of them), and picking a result picks its call and every result: an API refuses a result without its
  call and a call without its results.
* **Conflicts are merge conflicts.** An edit or annotation of a message the branch being written also changed
  since the original's parent (its content, or its priority), or a tool set changed on both sides, is a
  :class:`~tractkv.engine.compile.Conflict`, reported as a merge reports them (:class:`MergeConflict`,
  nothing written) with ``strategy="auto"``; ``ours`` keeps the side commits land on (the current branch for
  cherry-pick; ``onto`` for rebase, as in git) and leaves that change out, ``theirs`` applies the picked
  commit's. A change the side already has (the same content) is left out as applied. An edit, annotation or
  compress whose target is not in the context it lands in is refused (:class:`InvalidInput`).
* **Rebase** replays the commits reachable from the branch and not from ``onto`` (git's ``onto..HEAD``),
  parents first, leaving out merge and spawn commits (git's ``rebase`` drops merges too) and those ``onto``
  already has a copy of (or whose original it has, by ``picked_from``), on ``onto``'s tip,
  and moves the branch to the last copy, all in one transaction: a conflict with ``auto`` writes nothing, so
  there is no half-rebased branch to ``--abort`` or ``--continue`` (settle with a strategy, or edit first).
  A branch that already contains ``onto`` is up to date (rebase onto its own base is a no-op).
* Both write reflog entries (``cherry-pick``; ``rebase``: the move to ``onto``, then the replayed commits), and
  the branch's budget checks what they made as it checks any batch.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

import attrs

from tractkv.engine.compile import CompileState, Conflict
from tractkv.engine.content import MERGE_STRATEGIES
from tractkv.engine.history import (
    HEADS,
    first_parent_chain,
    parents_first,
)
from tractkv.engine.merging import explained
from tractkv.engine.session import Session, Tip
from tractkv.engine.values import PickResult
from tractkv.errors import InvalidInput, MergeConflict
from tractkv.ids import ObjectId
from tractkv.model import Blob, Commit
from tractkv.store import Reader, WriteBatch

PICKED_FROM = "picked_from"  # the metadata key naming a copy's original
SKIPPED_OPS = frozenset({"merge", "spawn"})  # what a rebase leaves out (and a cherry-pick refuses)


def cherry_pick(session: Session, rev: str, strategy: str = "auto") -> PickResult:
    """Re-apply one commit's change (a tool turn whole) on the session's branch (see the module doc)."""
    _check_strategy(strategy)
    session.check_writes("cherry-pick", in_batch=False)
    tip = session.writable("cherry-pick")
    reader = session.reader()
    oid = session.resolve(rev, reader)
    commit = reader.get_commit(oid)
    if commit.operation in SKIPPED_OPS:
        raise InvalidInput(f"{rev} is a {commit.operation} commit: cherry-pick one of its changes instead")
    if tip.head is not None and _contains(reader, tip.head, oid, commit.created_at):
        raise InvalidInput(f"{rev} ({oid[:12]}) is already in {session.where()}'s history")
    originals = _turn(session, reader, oid, commit)
    done = _copied(reader, tip.head, originals)
    if len(done) == len(originals):
        raise InvalidInput(f"{rev} ({oid[:12]}) was cherry-picked into {session.where()} already")
    todo = [each for each in originals if each not in done]
    return _replay(session, tip, tip.head, todo, strategy, "cherry-pick", onto=None, skipped=tuple(done))


def _contains(reader: Reader, head: ObjectId, oid: ObjectId, stamp: int) -> bool:
    """Whether ``head`` reaches ``oid`` (stamped ``stamp``), walking only commits not older than it (an
    ancestor is never newer than its descendant): a pick from a recent branch reads little of a long one."""
    seen: set[ObjectId] = set()
    stack = [head]
    while stack:
        each = stack.pop()
        if each == oid:
            return True
        if each in seen:
            continue
        seen.add(each)
        commit = reader.get_commit(each)
        if commit.created_at >= stamp:
            stack.extend(commit.parents)
    return False


def _copied(reader: Reader, head: ObjectId | None, originals: list[ObjectId]) -> set[ObjectId]:
    """Which of ``originals`` have a copy (``picked_from``) on ``head``'s first-parent line: a copy is made
    after its original, so the walk stops at the first commit older than every original."""
    if head is None:
        return set()
    wanted = set(originals)
    oldest = min(reader.get_commit(each).created_at for each in originals)
    found: set[ObjectId] = set()
    for _, commit in first_parent_chain(reader, head):
        if commit.created_at < oldest:
            break
        original = (commit.metadata or {}).get(PICKED_FROM)
        if original in wanted:
            found.add(ObjectId(original))
    return found


def rebase(session: Session, onto: str, strategy: str = "auto") -> PickResult:
    """Replay the session branch's own commits on ``onto`` (see the module doc)."""
    _check_strategy(strategy)
    session.check_writes("rebase", in_batch=False)
    tip = session.writable("rebase")
    reader = session.reader()
    target = session.resolve(onto, reader)
    head = tip.head
    if head is None:
        raise InvalidInput(f"cannot rebase {session.where()}: it has no commits yet")
    own, upstream = sides(reader, head, target)
    if not upstream:  # the branch contains onto: nothing to replay on it
        return PickResult(kind="up-to-date", head=head, strategy=strategy, onto=target)
    order = parents_first(head, lambda oid: reader.get_commit(oid).parents, own)
    applied = _upstream_changes(reader, upstream)
    originals = [oid for oid in order if _replayed(reader, oid, applied)]
    kept = set(originals)
    skipped = tuple(oid for oid in order if oid not in kept)
    return _replay(session, tip, target, originals, strategy, "rebase", onto=(target, onto), skipped=skipped)


_OURS, _THEIRS = 1, 2  # which tip reaches a commit, in :func:`sides`


def sides(reader: Reader, ours: ObjectId, theirs: ObjectId) -> tuple[set[ObjectId], set[ObjectId]]:
    """(the commits only ``ours`` reaches, those only ``theirs`` reaches): git's ``theirs..ours`` and
    ``ours..theirs``. Walks newest first from both tips, painting each commit with the tips that reach it, and
    stops once every commit still queued is reached by both: timestamps never go backwards along an edge
    (docs/decisions.md, "Concurrency"; negotiation relies on it too), so what lies below them is common, and
    the cost is the diverged part of history, not all of it. A commit painted again after it was walked is
    walked again."""
    paint: dict[ObjectId, int] = {}
    heap: list[tuple[int, ObjectId]] = []
    one_sided: set[ObjectId] = set()  # queued, not walked with their current paint, reached by one tip only

    def reach(oid: ObjectId, flags: int) -> None:
        before = paint.get(oid, 0)
        after = before | flags
        if after == before:
            return
        paint[oid] = after
        heapq.heappush(heap, (-reader.get_commit(oid).created_at, oid))
        if after == _OURS | _THEIRS:
            one_sided.discard(oid)
        else:
            one_sided.add(oid)

    reach(ours, _OURS)
    reach(theirs, _THEIRS)
    walked: dict[ObjectId, int] = {}
    while heap and one_sided:
        _, oid = heapq.heappop(heap)
        flags = paint[oid]
        if walked.get(oid) == flags:
            continue  # an entry from before its last paint: walked with these flags already
        walked[oid] = flags
        one_sided.discard(oid)
        for parent in reader.get_commit(oid).parents:
            reach(parent, flags)
    own = {oid for oid, flags in paint.items() if flags == _OURS}
    upstream = {oid for oid, flags in paint.items() if flags == _THEIRS}
    return own, upstream


def _upstream_changes(reader: Reader, upstream: set[ObjectId]) -> set[ObjectId]:
    """What the commits only ``onto`` has already apply, by provenance (git skips patches upstream has; a
    context has no diff to compare, and one text said twice is two messages): the commits themselves and the
    originals they copy (``picked_from``)."""
    applied: set[ObjectId] = set(upstream)
    for oid in upstream:
        original = (reader.get_commit(oid).metadata or {}).get(PICKED_FROM)
        if isinstance(original, str):
            applied.add(ObjectId(original))
    return applied


def _replayed(reader: Reader, oid: ObjectId, applied: set[ObjectId]) -> bool:
    """Whether a rebase replays ``oid``: not a merge or spawn commit, not copied onto ``onto`` already, not a
    copy of something ``onto`` has."""
    commit = reader.get_commit(oid)
    if commit.operation in SKIPPED_OPS or oid in applied:
        return False
    return (commit.metadata or {}).get(PICKED_FROM) not in applied


def _check_strategy(strategy: str) -> None:
    if strategy not in MERGE_STRATEGIES:
        raise InvalidInput(f"strategy must be auto, ours or theirs, not {strategy!r}")


def _turn(session: Session, reader: Reader, oid: ObjectId, commit: Commit) -> list[ObjectId]:
    """The commits one pick moves: ``oid``, or the whole tool turn it belongs to (call first, then results)."""
    call = commit.reply_to
    if call is None:
        if not _has_calls(reader, commit):
            return [oid]
        call = oid
    best: list[ObjectId] = []
    heads = [ObjectId(v) for _, v in reader.iter_refs(HEADS)]
    since = reader.get_commit(call).created_at  # its results come after it: no line is walked further back
    for tip in dict.fromkeys(heads):
        results: list[ObjectId] = []
        for each, found in first_parent_chain(reader, tip):
            if each == call:
                if len(results) > len(best) or not best:
                    best = results[::-1]
                break
            if found.created_at < since:
                break
            if found.reply_to == call:
                results.append(each)
    if oid != call and oid not in best:
        best.append(oid)  # a result on a line no branch holds: with its call at least
    return [call, *best]


def _has_calls(reader: Reader, commit: Commit) -> bool:
    if commit.content is None or commit.operation != "append":
        return False
    blob = reader.get(commit.content)
    data = blob.data if isinstance(blob, Blob) else None
    return isinstance(data, dict) and data.get("role") == "assistant" and bool(data.get("tool_calls"))


def _replay(
    session: Session,
    tip: Tip,
    start: ObjectId | None,
    originals: Iterable[ObjectId],
    strategy: str,
    what: str,
    *,
    onto: tuple[ObjectId, str] | None,
    skipped: tuple[ObjectId, ...] = (),
) -> PickResult:
    """Copy ``originals`` (parents first) on ``start`` in one batch and move the branch from ``tip`` to the last
    copy; a conflict with ``auto`` raises before anything is written."""
    picked: dict[ObjectId, ObjectId] = {}
    left_out = list(skipped)
    settled = 0
    parent = start
    with session.batch():
        if start != tip.head:
            assert start is not None
            session.move_branch(tip, start, what, f"{what}: onto {start[:12]}")
        for oid in originals:
            batch = session.reader()
            assert isinstance(batch, WriteBatch)
            original = batch.get_commit(oid)
            here = session.parent_state(batch, parent, own=False)
            copier = _Copier(session, batch, here, picked)
            copy = copier.copy(oid, original)
            conflicts = [explained(session, batch, c) for c in copier.conflicts]
            if conflicts and strategy == "auto":
                ours = (session.current_branch or "HEAD") if onto is None else onto[1]
                raise MergeConflict(conflicts, ours=ours, theirs=oid[:12])
            settled += len(conflicts)
            if strategy == "ours" and any(c.kind != "tools" for c in conflicts):
                copy = None  # ours keeps this side's version of the message: the change is left out
            elif strategy == "ours" and conflicts:
                copy = _evolve(copy, tools=here.tools) if copy is not None else None  # keep our tool set
            if copy is None:
                left_out.append(oid)
                continue
            made = _commit(session, batch, Tip(tip.ref, parent), copy, what, oid)
            picked[oid] = made
            parent = made
    new_head = session.head_commit(session.reader())
    if not picked and start == tip.head:
        kind = "empty"
    else:
        kind = "rebased" if onto is not None else ("picked" if picked else "empty")
    return PickResult(
        kind=kind,
        head=new_head,
        picked=tuple(picked.items()),
        skipped=tuple(left_out),
        conflicts_resolved=settled,
        strategy=strategy,
        onto=onto[0] if onto is not None else None,
    )


def _commit(
    session: Session, batch: WriteBatch, tip: Tip, copy: Commit, what: str, original: ObjectId
) -> ObjectId:
    def build(_batch: WriteBatch, parent: ObjectId | None, parent_commit: Commit | None) -> Commit:
        return _evolve(
            copy,
            parents=(parent,) if parent is not None else (),
            created_at=session.now(parent_commit),
        )

    oid, _ = session.commit_with(build, what, f"{what}: {original[:12]}", tip=tip, action=what)
    return oid


def _evolve(commit: Commit, **changes: Any) -> Commit:
    return attrs.evolve(commit, **changes)  # the validating constructor: the copy is checked as any commit


def _copies_in(reader: Reader, state: CompileState) -> dict[ObjectId, ObjectId]:
    """The originals of the copies a context holds (``picked_from`` -> the copy), read from its messages'
    commits (only when a change's target is not in the context itself: the rare path)."""
    out: dict[ObjectId, ObjectId] = {}
    for oid in state.index:
        original = (reader.get_commit(oid).metadata or {}).get(PICKED_FROM)
        if isinstance(original, str):
            out[ObjectId(original)] = oid
    return out


class _Copier:
    """Makes the copy of one original for the context ``here`` (:meth:`copy`), mapping what it links to the
    copies made so far (``picked``) or held by the context (an earlier pick), and finding its conflicts."""

    def __init__(
        self, session: Session, reader: Reader, here: CompileState, picked: dict[ObjectId, ObjectId]
    ) -> None:
        self.session, self.reader, self.here, self.picked = session, reader, here, picked
        self._copies: dict[ObjectId, ObjectId] | None = None
        self._then: CompileState | None = None
        self.before: ObjectId | None = None
        self.conflicts: list[Conflict] = []

    def mapped(self, oid: ObjectId) -> ObjectId:
        """``oid``'s copy made by this operation, else the copy of it the context holds, else ``oid``."""
        if oid in self.picked:
            return self.picked[oid]
        if oid in self.here.index:
            return oid
        if self._copies is None:
            self._copies = _copies_in(self.reader, self.here)
        return self._copies.get(oid, oid)

    def state_before(self) -> CompileState:
        """The context the original was made in (its parent's), read once."""
        if self._then is None:
            self._then = self.session.compiler.state_at(self.reader, self.before)
        return self._then

    def copy(self, oid: ObjectId, original: Commit) -> Commit | None:
        """The copy (parents and time set when committed), or None when its change is already there; its
        conflicts are in :attr:`conflicts`."""
        self.before = original.parents[0] if original.parents else None
        self._then = None
        self.conflicts = []
        target = original.edit_target
        if target is not None:
            target = self._target(oid, original, target)
            if target is None:
                return None
        links = dict(original.links)
        for name in ("sources", "targets"):
            if name in links:
                ids = tuple(self.mapped(each) for each in links[name])
                present = tuple(each for each in ids if each in self.here.index)
                if name == "sources" and len(present) != len(ids):
                    raise InvalidInput(
                        f"{oid[:12]} (compress) replaces messages that are not in the context it would land "
                        "in; nothing was changed"
                    )
                if not present:
                    return None
                links[name] = present
        metadata = {**(original.metadata or {}), PICKED_FROM: oid}
        reply_to = self.mapped(original.reply_to) if original.reply_to is not None else None
        tools = self._tools(original)
        return _evolve(
            original, edit_target=target, links=links, tools=tools, metadata=metadata, reply_to=reply_to
        )

    def _target(self, oid: ObjectId, original: Commit, target: ObjectId) -> ObjectId | None:
        """The message an edit or annotation changes, in ``here`` (None: the edit is there already)."""
        new_target = self.mapped(target)
        position = self.here.index.get(new_target)
        if position is None:
            raise InvalidInput(
                f"{oid[:12]} ({original.operation}) changes message {target[:12]}, which is not in the context "
                "it would land in; nothing was changed"
            )
        if new_target != target:  # a copy this side made: the change is the picked side's alone
            return new_target
        now = self.here.slots[position]
        then = self.state_before()
        old_position = then.index.get(target)
        old = then.slots[old_position] if old_position is not None else None
        if original.operation == "edit":
            if now.blob == original.content:
                return None  # the same content already
            if old is not None and now.blob != old.blob:  # this side changed it since, too
                self.conflicts.append(
                    Conflict(
                        target=target,
                        kind="content",
                        ours="",
                        theirs="",
                        ours_id=now.blob,
                        theirs_id=original.content,
                    )
                )
        elif old is not None and now.priority != old.priority:
            self.conflicts.append(
                Conflict(
                    target=target,
                    kind="priority",
                    ours=f"priority code {now.priority}",
                    theirs=f"the annotation {oid[:12]}",
                )
            )
        return target

    def _tools(self, original: Commit) -> ObjectId | None:
        """The tool set of the copy: the original's when it changed the tool set (a conflict when this side
        changed it differently since), else the one in force here."""
        here = self.here.tools
        parent_tools = self.reader.get_commit(self.before).tools if self.before is not None else None
        if original.tools is None or original.tools == parent_tools:
            return here
        before = self.state_before().tools
        if original.tools == before:
            return here
        if here not in (before, original.tools):
            self.conflicts.append(
                Conflict(
                    target=None, kind="tools", ours="", theirs="", ours_id=here, theirs_id=original.tools
                )
            )
        return original.tools
