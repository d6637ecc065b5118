"""The one write path: every commit a session writes is staged by :meth:`Session.stage_commit`.

:meth:`Session.commit_with` builds the objects, stages them with the commit in one batch, lets the write
policies check the transaction, moves the branch by compare-and-swap from the tip the operation read, and
applies. Everything derived (the compile state, token counts, the returned :class:`CommitInfo`) is computed
from the objects already built, never by reading them back, and before the transaction: a commit whose
derived data cannot be computed is never written. Each commit is checked by
:func:`~tractkv.engine.history.check_commit` (the rules a receiving store applies) before it is staged, unless
its maker vouches for it by construction (the plain-text fast path, :mod:`.fastpath`).

The loser of an append race gets :class:`ConcurrentUpdate` (nothing written; its next call starts from the
new tip) or, with ``rebase_appends=True``, a pure append is re-made on the new tip (its parent changes; its
content, message and metadata do not), retried until both :data:`MAX_REBASE_ATTEMPTS` tries and
:data:`REBASE_PATIENCE_S` seconds are used (:func:`may_retry`)."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from tractkv import codec
from tractkv.engine.compile import PRIORITY_NAMES, CompileState, Slot
from tractkv.engine.content import (
    ANNOTATION,
    CACHE_TTLS,
    MEDIA_LINK,
    PRIORITIES,
    check_json,
    content_objects,
    kept_by_edit,
    media_ids,
    put_toolset,
    tool_schemas,
)
from tractkv.engine.history import (
    check_commit,
    log_ref_move,
    trusted_tag,
)
from tractkv.engine.values import CommitInfo
from tractkv.errors import (
    ConcurrentUpdate,
    InvalidInput,
    ObjectNotFound,
    RefConflict,
)
from tractkv.ids import ObjectId
from tractkv.model import Blob, Commit
from tractkv.model.objects import trusted_commit
from tractkv.store import Table, WriteBatch

from .moves import SessionMoves
from .policy import Outcomes
from .values import BatchLog, Build, Derive, Tip

MAX_REBASE_ATTEMPTS = 16  # retries of an automatic append rebase under contention, at least...
REBASE_PATIENCE_S = 10.0  # ...and for at least this long: a slow writer (a loaded machine, an annotation
# that computes the raced tip's state) must not lose every race to fast ones within 16 short waits
REBASE_BACKOFF_S = 0.0005  # the first retry's ceiling; doubled per retry, at most REBASE_BACKOFF_MAX_S
REBASE_BACKOFF_MAX_S = 0.05
# Inside batch(): young objects between two runs of the cyclic garbage collector (Python's default: 700).
BATCH_GC_THRESHOLD = 50_000


def may_retry(attempts: int, started: float) -> bool:
    """Whether a write that lost ``attempts`` races, the first at ``time.monotonic()`` ``started``, is
    tried again: until both :data:`MAX_REBASE_ATTEMPTS` tries and :data:`REBASE_PATIENCE_S` seconds are
    used (bounded either way: each retry waits, :func:`backoff`)."""
    return attempts < MAX_REBASE_ATTEMPTS or time.monotonic() - started < REBASE_PATIENCE_S


def backoff(attempt: int) -> None:
    """Wait before rebase retry ``attempt`` (1-based): a random time up to a ceiling that doubles per retry
    (full jitter). Two writers whose appends take long (a budget that trims plans each attempt) otherwise
    retry in lockstep and the slower one can lose every race."""
    import random

    time.sleep(random.uniform(0, min(REBASE_BACKOFF_MAX_S, REBASE_BACKOFF_S * 2**attempt)))


def _fewer_collections() -> Callable[[], None]:
    """Raise the cyclic garbage collector's first threshold to :data:`BATCH_GC_THRESHOLD` for a batch; returns
    what restores it. Each commit of a batch leaves a few container objects the growing history keeps, so at
    the default threshold the collector ran every ~130 commits and its older generations walked the whole
    history again and again (measured: ~7% of a batched append's CPU). The collector stays on: the block's
    cyclic garbage is still collected, at most that many young objects later. Left alone when collection is
    off (threshold 0) or already that rare; not restored when someone else changed the threshold meanwhile
    (another thread's batch restores its own)."""
    first, second, third = gc.get_threshold()
    if first == 0 or first >= BATCH_GC_THRESHOLD:
        return _nothing
    raised = (BATCH_GC_THRESHOLD, second, third)
    gc.set_threshold(*raised)

    def restore() -> None:
        if gc.get_threshold() == raised:
            gc.set_threshold(first, second, third)

    return restore


def _nothing() -> None:
    return None


OPERATIONS = ("append", "edit")  # what commit() makes; annotate / merge / compress have their own methods

_T = TypeVar("_T")


class Session(SessionMoves):
    """One handle's position in a store (a branch, or a detached commit) and everything it writes: HEAD and its
    reads (:class:`~tractkv.engine.session.core.SessionCore`), its moves
    (:class:`~tractkv.engine.session.moves.SessionMoves`) and the one write path.

    Args:
        store: the store (the session never closes it).
        counter: counts tokens for compile and commit info.
        clock: the time in µs since the epoch (tests pass a fake one).
        branch: work on this branch instead of the one the stored HEAD names (which stays as it is; a store
            without HEAD yet gets this branch as its HEAD).
        rebase_appends: re-make a pure append on a branch another handle moved, instead of raising.
        readonly: refuse every write, never record HEAD, never write a checkpoint.
        policies: what every write consults (:class:`~tractkv.engine.session.policy.WritePolicy`), in order;
            more with :meth:`add_policy`.
    """

    # --- the write path -----------------------------------------------------------------------------------

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Stage every commit made inside the block; write them in one transaction at its end (see Tract)."""
        if self._batch is not None:
            yield
            return
        self.check_writes("batch")
        self._batch = self.store.new_batch()
        self._batch_toolsets.clear()
        self._batch_tools_setting = None
        self._batch_log = None
        restore_gc = _fewer_collections()
        try:
            yield
            batch, self._batch = self._batch, None
            outcomes: Outcomes = ()
            if len(batch):
                if self.branch_ref is not None:  # the policies check what the block made, once
                    outcomes = self.check_policies(batch, self.branch_ref, self._state)
                if self._checkpoint_due():
                    # the checkpoint lands with the commits; a cache: failing to stage it (an I/O error
                    # re-reading a damaged chunk) must not fail the batch (a partial one is never named)
                    try:
                        self.compiler.stage(batch, self._state)
                    except Exception:
                        self._log_checkpoint_failure()
                    else:
                        self._since_checkpoint = 0
                self.store.apply(batch)
                if self.branch_ref is not None and self.branch_ref in batch.ref_updates:
                    staged = batch.ref_updates[self.branch_ref][1]
                    self._seen_tip = (self.branch_ref, ObjectId(staged)) if staged is not None else None
                self.compiler.retarget(batch, self.store)  # read the store, not the landed batch
                if self._state is not None:
                    self._state.retarget(batch, self.store)
                self._stored_toolsets |= self._batch_toolsets  # written: later commits may trust them
        except RefConflict as exc:
            self._batch = None
            self._state = None
            if isinstance(exc, ConcurrentUpdate):  # raised inside the block (a deleted branch): as it is
                raise
            raise ConcurrentUpdate(exc.ref, exc.expected, exc.actual, "batch not written") from exc
        except BaseException as exc:
            self._batch = None
            self._state = None  # staged commits never landed: rebuild from the store
            if isinstance(exc, ObjectNotFound):
                self._stored_toolsets.clear()  # a tool set it trusted is gone (another handle's gc)
            raise
        finally:
            self._batch_toolsets.clear()
            self._batch_tools_setting = None
            self._batch_log = None
            restore_gc()
        self._maybe_checkpoint()
        self._landed(outcomes)

    def commit_with(
        self,
        build: Build,
        reflog_op: str,
        summary: str | Callable[[], str],
        *,
        tip: Tip | None = None,
        action: str = "commit",
        rebase: bool = False,
        payload: dict[str, Any] | None = None,
        derive: Derive | None = None,
    ) -> tuple[ObjectId, Commit]:
        """Stage what ``build`` puts plus its commit on the branch, compare-and-swap it from ``tip`` (what the
        operation read when it started; default: the tip now), apply it (unless inside :meth:`batch`), and
        bring the HEAD state up to date (see :meth:`_commit_with`). Inside :meth:`batch`, a commit refused
        while it is staged (the validator, the clock, a failed derivation) unstages every object it staged:
        the batch goes on without it, and nothing of it reaches the store."""
        batch = self._batch
        mark, refs = (batch.mark(), dict(batch.ref_updates)) if batch is not None else (0, {})
        try:
            return self._commit_with(
                build,
                reflog_op,
                summary,
                tip=tip,
                action=action,
                rebase=rebase,
                payload=payload,
                derive=derive,
            )
        except BaseException:
            if batch is not None and batch.ref_updates == refs:  # refused before its branch move was staged
                batch.drop_since(mark)
            raise

    def _commit_with(
        self,
        build: Build,
        reflog_op: str,
        summary: str | Callable[[], str],
        *,
        tip: Tip | None = None,
        action: str = "commit",
        rebase: bool = False,
        payload: dict[str, Any] | None = None,
        derive: Derive | None = None,
    ) -> tuple[ObjectId, Commit]:
        """Stage what ``build`` puts plus its commit on the branch (through :meth:`stage_commit`),
        compare-and-swap it from ``tip`` (what the operation read when it started; default: the tip now),
        apply it (unless inside :meth:`batch`) after the policies checked it, and bring the HEAD state up to
        date. ``payload`` is the commit's content data when the caller has it. With ``rebase`` (pure appends
        only) a lost swap is retried on the new tip. ``summary`` (the reflog message) may be given as a
        function, called only when the message is written: inside a batch, only the last commit's summary is.
        ``derive`` brings the HEAD state to the commit instead of :meth:`_derive` (the plain-text fast path's
        way); a caller giving it vouches that ``build`` checked what :func:`check_commit` would."""
        tip = tip or self.writable(action)
        ref, parent = tip.ref, tip.head
        attempts, first_loss = 0, 0.0  # races lost, and when the first was
        stale_retried = False
        while True:
            parent_commit = self._parent_commit(parent)
            own = self._batch is None
            batch = self.store.new_batch() if own else self._batch
            assert batch is not None
            if parent is not None and parent_commit is not None:
                batch.note_commit(parent, parent_commit)  # apply derives the tools index row from it
            commit = build(batch, parent, parent_commit)
            known = None if derive is not None else self._known(parent, commit, payload, own)
            # What the commit links but the batch does not write (a parent, a tool set this handle's cache
            # trusts, media) was read outside the writing transaction: the store checks it again inside it
            # (gc may have removed it since: MissingLinkTarget, nothing written).
            try:
                # Everything derived (token counts, the rendered message, the HEAD state) is computed now,
                # before the write: a failure here writes nothing and leaves the branch as it was.
                derived = (derive, batch) if derive is not None else (self._derive, batch, payload, own)
                oid, state = self.stage_commit(
                    batch, ref, parent, commit, known, reflog_op, summary, *derived
                )
                outcomes: Outcomes = ()  # inside a batch, the policies check what the block made, at its end
                checkpointed = False
                if own:
                    outcomes = self.check_policies(batch, ref, state)  # on the tip extended
                    checkpointed = self._stage_checkpoint(batch, state)
                    self.store.apply(batch)
                    self._seen_tip = (ref, oid)
            except ObjectNotFound as exc:
                self._state = None
                if not own or exc.oid not in self._stored_toolsets or stale_retried:
                    raise
                # a tool set this handle had linked is gone (another handle's gc): forget it, check again
                stale_retried = True
                self._stored_toolsets.clear()
                continue
            except RefConflict as exc:
                attempts += 1
                first_loss = first_loss or time.monotonic()
                parent = self._after_lost_swap(exc, ref, attempts, first_loss if rebase else None)
                continue
            except BaseException:
                self._state = None  # it may hold the commit that was not written: rebuild from the store
                raise
            self._state = state
            self._since_checkpoint = 0 if checkpointed else self._since_checkpoint + 1
            self._last_commit = (oid, commit)
            if commit.tools is not None:  # written (or lands with the batch): later commits trust its tag
                (self._stored_toolsets if own else self._batch_toolsets).add(commit.tools)
            self._maybe_checkpoint()
            if outcomes:
                state.retarget(batch, self.store)  # a policy's commit rendered through the landed batch
                self._landed(outcomes)
            return oid, commit

    def _parent_commit(self, parent: ObjectId | None) -> Commit | None:
        """The commit ``parent`` (None: none), the one this session made last without reading it back (an id
        names one commit forever)."""
        last = self._last_commit
        if last is not None and last[0] == parent:
            return last[1]
        return None if parent is None else self.reader().get_commit(parent)

    def _after_lost_swap(
        self, exc: RefConflict, ref: str, attempts: int, first_loss: float | None
    ) -> ObjectId | None:
        """The tip to retry on after ``attempts`` lost races, the first at ``first_loss`` (None: no rebase), after
        a random wait (:func:`backoff`); :class:`ConcurrentUpdate` when no retry is left (:func:`may_retry`)."""
        self._state = None
        if first_loss is None or not may_retry(attempts, first_loss):
            raise ConcurrentUpdate(
                exc.ref, exc.expected, exc.actual, "another handle moved the branch; nothing was written"
            ) from exc
        backoff(attempts)
        parent = self.head_commit(self.store)
        self._check_not_deleted(ref, parent)
        return parent

    def _known(
        self, parent: ObjectId | None, commit: Commit, payload: dict[str, Any] | None, own: bool
    ) -> dict[ObjectId, str]:
        """What :func:`check_commit` may take as checked for a commit this session built on ``parent``: the
        parent (the tip this operation read), its content blob when ``payload`` is its data (checked when it
        was made), and a tool set an earlier commit of this session linked."""
        known: dict[ObjectId, str] = {}
        if parent is not None:
            known[parent] = "commit"
        if payload is not None and commit.content is not None:
            known[commit.content] = trusted_tag(payload)  # content_blob checked it: validate once
        tools = commit.tools
        if tools is not None and (
            tools in self._stored_toolsets or (not own and tools in self._batch_toolsets)
        ):  # a tool set an earlier commit of this session linked
            known[tools] = "toolset"
        return known

    def stage_commit(
        self,
        batch: WriteBatch,
        ref: str,
        parent: ObjectId | None,
        commit: Commit,
        known: dict[ObjectId, str] | None,
        reflog_op: str,
        summary: str | Callable[[], str],
        derive: Callable[..., _T],
        *args: Any,
    ) -> tuple[ObjectId, _T]:
        """The one write function: every commit is staged here (the general path's, each commit of a batch,
        the plain-text fast path's, a policy's such as a budget's trim or compress commit). It checks
        ``commit`` by the rules a receiving store applies (:func:`check_commit`, ``known``: what it may take as
        checked; None: the caller vouches for a commit it built by construction), puts it in ``batch``, brings
        the compile state to it (``derive(oid, commit, *args)``; its result is returned with the commit's id),
        stages the move of branch ``ref`` from
        ``parent`` (a batch keeps its first expectation: the tip it started from) and its reflog entry. One
        transaction moves a branch once, so it logs one entry: a commit after the first of this session's
        :meth:`batch` folds into the batch's entry, a policy's commit into the entry of the move it follows
        (the commit that went over was never a tip by itself). Raises to stage nothing of the branch move
        (the caller unstages the objects, or drops the batch)."""
        if known is not None:
            check_commit(batch, commit, known, self.clock_read)  # the rules a receiver applies too
        oid = batch.put(commit)
        derived = derive(oid, commit, *args)
        batch.set_ref(ref, oid, expected=parent)
        if batch is not self._batch or not self._extend_batch_log(
            batch, ref, oid, reflog_op, summary, commit.created_at
        ):
            self._log_move(batch, ref, parent, oid, reflog_op, summary, commit.created_at)
        return oid, derived

    def _log_move(
        self,
        batch: WriteBatch,
        ref: str,
        parent: ObjectId | None,
        oid: ObjectId,
        operation: str,
        summary: str | Callable[[], str],
        now_us: int,
    ) -> None:
        """The reflog entry of a commit :meth:`stage_commit` staged (see there) that did not fold into the entry
        of its batch's previous commit."""
        if batch is self._batch:
            message = summary if isinstance(summary, str) else summary()
            entry = log_ref_move(batch, ref, parent, oid, operation, message, now_us=now_us)
            self._batch_log = BatchLog(ref, entry, message, len(batch.log_appends) - 1)
            return
        message = summary if isinstance(summary, str) else summary()
        if not batch.log_appends or not _fold_into_move(batch, ref, oid, message, now_us):
            log_ref_move(batch, ref, parent, oid, operation, message, now_us=now_us)

    def _extend_batch_log(
        self,
        batch: WriteBatch,
        ref: str,
        new: ObjectId,
        operation: str,
        summary: str | Callable[[], str],
        now_us: int,
    ) -> bool:
        """Fold this commit's branch move into the reflog entry of the batch's previous commit, when that is
        the batch's last log entry and moved the same branch: a batch moves a branch once (one compare-and-swap
        from the tip it started from), so it logs one move, as git logs one per operation. False when there is
        no such entry (the caller logs a new one). The entry is made when the batch encodes it (a read of the
        reflog, or the write): not once per commit."""
        last = self._batch_log
        if last is None or last.ref != ref or last.index != len(batch.log_appends) - 1:
            return False
        last.count += 1
        last.new = new
        last.ts = now_us
        if last.op != operation:
            last.op = "batch"
        last.summary = summary
        batch.replace_log(last.index, last)
        return True

    def parent_state(self, batch: WriteBatch, parent: ObjectId | None, own: bool) -> CompileState:
        """The owned HEAD state at ``parent``, for a commit staged on it: the state itself when it is there
        (an append stays O(1)), else rebuilt (from cache, checkpoint or objects, read from the store in one
        transaction when ``own``, else through the session's batch)."""
        state = self._state
        if state is None or state.head != parent:
            self._forget_state()
            state = self.compiler.state_at(self.store if own else batch, parent, take=True)
            self._state = state
        return state

    def _derive(
        self, oid: ObjectId, commit: Commit, batch: WriteBatch, payload: dict[str, Any] | None, own: bool
    ) -> CompileState:
        """The HEAD state with ``commit`` (staged in ``batch``, not yet written) applied: the parent's state
        (:meth:`parent_state`) extended; a merge commit's state is the three-way merge, read through the batch
        that holds the merge commit. The caller drops the owned state if anything fails."""
        state = self.parent_state(batch, commit.parents[0] if commit.parents else None, own)
        if len(commit.parents) <= 1:
            state.apply(batch, oid, commit, self.counter, payload)
            return state
        self._state = None
        self.compiler.remember(state)
        return self.compiler.state_at(batch, oid, take=True)

    # --- commits ------------------------------------------------------------------------------------------

    def commit(
        self,
        content: Any,
        operation: str = "append",
        edit_target: str | None = None,
        message: str | None = None,
        reply_to: str | None = None,
        metadata: dict[str, Any] | None = None,
        generation_config: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> CommitInfo:
        """Append a message or replace one (see :meth:`tractkv.Tract.commit`)."""
        if operation not in OPERATIONS:
            raise InvalidInput(
                f"operation must be one of {OPERATIONS}, not {operation!r} (see annotate/merge)"
            )
        tip = self.writable()
        blob, media = content_objects(content, self.stored_media)
        target: ObjectId | None = None
        if operation == "edit":
            if edit_target is None:
                raise InvalidInput("an edit needs edit_target (the message commit it replaces)")
            target = self.message_target(edit_target)
            # an edit keeps the parts its target shows unless it gives its own (one rule, for every caller)
            kept = kept_by_edit(content, blob.data, self.message_content(target))
            if kept is not None:
                blob, media = content_objects(kept, self.stored_media)
        elif edit_target is not None:
            raise InvalidInput("edit_target is only for operation='edit'")
        reply = self.resolve(reply_to) if reply_to is not None else None
        return self.commit_content(
            blob,
            operation=operation,
            target=target,
            reply_to=reply,
            message=message,
            metadata=metadata,
            generation_config=generation_config,
            tools=tools,
            tip=tip,
            rebase=self.rebase_appends and operation == "append",
            media=media,
        )

    def commit_content(
        self,
        blob: Blob,
        *,
        operation: str,
        target: ObjectId | None = None,
        reply_to: ObjectId | None = None,
        message: str | None = None,
        metadata: dict[str, Any] | None = None,
        generation_config: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        links: dict[str, tuple[Any, ...]] | None = None,
        stage: Callable[[WriteBatch], dict[str, tuple[ObjectId, ...]]] | None = None,
        toolset: ObjectId | None = None,
        action: str = "commit",
        tip: Tip | None = None,
        rebase: bool = False,
        media: tuple[Blob, ...] = (),
    ) -> CommitInfo:
        """Commit a content blob (from :func:`~tractkv.engine.content.payload.content_objects`, validated once) with the
        tools in force (explicit ``tools`` win over set_tools; ``toolset`` links an existing tool set).
        ``media`` are the media blobs :func:`~tractkv.engine.content.payload.content_objects` returned with it: they
        are stored with the commit, which links every media id the payload uses as ``links["media"]`` (ids
        of media already stored need no blob here).
        ``stage(batch)`` stores further objects with the commit and returns the links naming them. Only a
        caller whose content does not depend on the context (a plain append) may ask to ``rebase`` it onto a
        tip another handle moved: a model's reply or a tool result was made for the context it saw."""
        if metadata is not None:  # JSON-bound values, walked once, bounded (bytes are allowed here)
            check_json(metadata, "metadata", binary=True)
        if generation_config is not None:
            check_json(generation_config, "generation_config", binary=True)
        payload: dict[str, Any] = blob.data
        used = media_ids(payload)
        schemas = tool_schemas(tools) if tools is not None else None
        inherited = toolset or (self.tools_for_next_commit() if tools is None else None)
        plain = not (target or reply_to or message is not None or metadata or generation_config or links)

        def build(batch: WriteBatch, parent: ObjectId | None, parent_commit: Commit | None) -> Commit:
            toolset_id = put_toolset(batch, schemas) if schemas is not None else inherited
            staged = stage(batch) if stage is not None else {}  # objects linked by the ids put returned
            for item in media:
                batch.put(item)  # a no-op when the store has it: one image in many commits is stored once
            if used:
                staged[MEDIA_LINK] = tuple(ObjectId(oid) for oid in used)
            if plain and not staged:  # the usual append: only fields this path made
                return trusted_commit(
                    parents=(parent,) if parent is not None else (),
                    content=batch.put(blob),
                    tools=toolset_id,
                    operation=operation,
                    created_at=self.now(parent_commit),
                )
            return Commit(
                parents=(parent,) if parent is not None else (),
                content=batch.put(blob),
                tools=toolset_id,
                operation=operation,
                edit_target=target,
                reply_to=reply_to,
                message=message,
                metadata=metadata or None,
                generation_config=generation_config or None,
                created_at=self.now(parent_commit),
                links={**(links or {}), **staged},
            )

        oid, commit = self.commit_with(
            build,
            operation,
            message or _summary(payload),
            tip=tip,
            action=action,
            rebase=rebase,
            payload=payload,
        )
        return self.info(oid, commit, payload)

    def annotate(
        self, target: str, priority: str | None, reason: str | None = None, cache: str | None = None
    ) -> CommitInfo:
        """Set a message's priority and / or cache breakpoint with an annotation commit (see
        :meth:`tractkv.Tract.annotate`). An annotation states both: the one not given is carried from the
        message's latest annotation (computed on the tip the commit is made on, a raced one too)."""
        _check_annotation(priority, cache, reason)
        tip = self.writable("annotate")
        target_id = self.message_target(target)
        payload: dict[
            str, Any
        ] = {}  # filled by build, from the tip it is made on (commit_with reads it after)

        def build(batch: WriteBatch, parent: ObjectId | None, parent_commit: Commit | None) -> Commit:
            state = self.compiler.state_at(self.store, parent) if parent != tip.head else self.head_state()
            position = state.index.get(target_id)
            if position is None:
                # re-made on a tip another handle moved (rebase): only while its target is still there
                raise InvalidInput(
                    f"{target_id[:12]} is no longer a message in the history of {self.where()} (another "
                    "handle moved the branch): nothing was written"
                )
            payload.clear()
            payload.update(_annotation(batch, state.slots[position], priority, cache, reason))
            return Commit(
                parents=(parent,) if parent is not None else (),
                content=batch.put(Blob(data=payload)),
                operation="annotate",
                edit_target=target_id,
                message=reason,
                created_at=self.now(parent_commit),
            )

        oid, commit = self.commit_with(
            build,
            "annotate",
            " ".join(x for x in (priority, None if cache is None else f"cache={cache}", target_id[:12]) if x),
            tip=tip,
            action="annotate",
            payload=payload,
            rebase=self.rebase_appends,  # an annotation adds a commit as an append does: re-made on a raced tip
        )
        return self.info(oid, commit, payload)


def _check_annotation(priority: str | None, cache: str | None, reason: str | None) -> None:
    if priority is not None and priority not in PRIORITIES:
        raise InvalidInput(f"priority must be one of {PRIORITIES}, not {priority!r}")
    if cache is not None and cache not in (*CACHE_TTLS, "off"):
        raise InvalidInput(f"cache must be one of {(*CACHE_TTLS, 'off')} (--cache), not {cache!r}")
    if priority is None and cache is None:
        raise InvalidInput("annotate needs a priority or a cache breakpoint (cache=)")
    if reason is not None and not isinstance(reason, str):
        raise InvalidInput("reason must be a string")


def _annotation(
    reader: WriteBatch, slot: Slot, priority: str | None, cache: str | None, reason: str | None
) -> dict[str, Any]:
    """The annotation blob's data for ``slot``: ``priority`` and ``cache`` as given, else as the slot's latest
    annotation states them (``cache="off"`` removes the breakpoint)."""
    latest: dict[str, Any] = {}
    if slot.annotation is not None:
        content = reader.get_commit(slot.annotation).content
        found = None if content is None else reader.get(content)
        if isinstance(found, Blob) and isinstance(found.data, dict):
            latest = found.data
    payload: dict[str, Any] = {"type": ANNOTATION, "priority": priority or PRIORITY_NAMES[slot.priority]}
    kept = latest.get("cache") if cache is None else cache
    if kept in CACHE_TTLS:
        payload["cache"] = kept
    if reason:
        payload["reason"] = reason
    return payload


def append_text_general(session: Session, role: str, text: str) -> CommitInfo:
    """Append ``text`` as a plain ``role`` (user or assistant) message the general way: :meth:`Session.commit`
    of ``{"type": "dialogue", "role": role, "text": text}``."""
    return session.commit({"type": "dialogue", "role": role, "text": text})


def _fold_into_move(batch: WriteBatch, ref: str, oid: ObjectId, summary: str, now_us: int) -> bool:
    """Fold a commit on ``ref`` into the reflog entry ``batch`` already stages for ``ref`` (the move a policy's
    commit follows): the entry ends at ``oid`` and names it after its own message. False: none staged."""
    logs = batch.encoded_logs()
    staged = [i for i, (table, key, _) in enumerate(logs) if table is Table.REFLOG and key == ref.encode()]
    if not staged:
        return False
    entry = dict(codec.loads(logs[staged[-1]][2]))
    entry["new"] = oid
    entry["msg"] = f"{entry.get('msg')}; then {summary}"
    entry["ts"] = now_us
    batch.replace_log(staged[-1], entry)
    return True


def _summary(payload: dict[str, Any]) -> str:
    return _first_line(str(payload.get("text") or payload.get("type")))


def _first_line(text: str) -> str:
    first = text[:80].splitlines()[0] if text else ""  # the first line's first 72 characters: no more read
    return first[:72]
