"""The session: one handle's HEAD, the compile state kept for it, batches, and the one write path.

Every change a handle makes goes through :meth:`Session.commit_with`: build the objects, stage them with the
commit in one batch, move the branch by compare-and-swap from the value this handle read, apply. Everything
derived (the compile state, token counts, the returned :class:`CommitInfo`) is computed from the objects
already built, never by reading them back, and before the transaction: a commit whose derived data cannot
be computed is never written. Each commit is checked by :func:`tractkv.engine.history.validate.check_commit` (the
rules a receiving store applies) before it is staged.

Concurrency: several sessions (threads or processes) may share a store. Each has its own HEAD (the store's
``HEAD`` ref only records where the next open resumes). The loser of an append race gets
:class:`ConcurrentUpdate` (nothing written; its next call starts from the new tip) or, with
``rebase_appends=True``, a pure append is re-made on the new tip (its parent changes; its content, message
and metadata do not), at most :data:`MAX_REBASE_ATTEMPTS` times.

Every operation reads its branch tip once, when it starts (:class:`Tip`), and commits by compare-and-swap
from that tip, so nothing computed from what it read (a model's reply, a merge's conflicts, a compress plan)
lands on a tip it did not see.

Read-only mode (``readonly=True``) is what the viewer and the CLI's read commands use: no write is possible,
HEAD is never recorded and no compile checkpoint is ever flushed, so reading a store changes none of its
tables.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from tractkv import codec
from tractkv.engine.compile import (
    CHECKPOINT_EVERY,
    Compiler,
    CompileState,
    commit_info,
    context_of,
    load_tools,
    render_all,
    text_commit_info,
)
from tractkv.engine.content import (
    ACTIVE_TOOLS,
    ANNOTATION,
    DEFAULT_COUNTER,
    EMPTY_TOOLSET_ID,
    MEDIA_LINK,
    MESSAGE_OVERHEAD,
    PRIORITIES,
    TokenCounter,
    check_json,
    content_objects,
    kept_by_edit,
    media_ids,
    put_toolset,
    tool_schemas,
    tool_tokens,
)
from tractkv.engine.history import (
    HEAD,
    MAX_FUTURE_US,
    SYMBOLIC,
    TS_MAX,
    TS_MIN,
    branch_name,
    branch_ref,
    check_commit,
    iter_log,
    log_ref_move,
    read_head,
    trusted_tag,
)
from tractkv.engine.history import OPERATIONS as LOGGED_OPERATIONS
from tractkv.engine.history import resolve_revision as _resolve
from tractkv.engine.values import CommitInfo, CompiledContext
from tractkv.errors import (
    BranchNotFound,
    ConcurrentUpdate,
    DetachedHead,
    InvalidInput,
    ObjectNotFound,
    ReadOnlySession,
    RefConflict,
    StoreClosed,
    TractError,
)
from tractkv.ids import ObjectId, hash_bytes
from tractkv.model import Blob, Commit, ToolSchema
from tractkv.model.objects import MAX_OBJECT_BYTES, text_blob_bytes, trusted_blob, trusted_commit
from tractkv.store import Reader, Store, Table, WriteBatch

if TYPE_CHECKING:  # loaded on first use: keeps `import tractkv` light
    from tractkv.engine.values import BranchInfo, ContextDiff

MAX_REBASE_ATTEMPTS = 16  # bounded retries of an automatic append rebase under contention
REBASE_BACKOFF_S = 0.0005  # the first retry's ceiling; doubled per retry, at most REBASE_BACKOFF_MAX_S
REBASE_BACKOFF_MAX_S = 0.05
# Inside batch(): young objects between two runs of the cyclic garbage collector (Python's default: 700).
BATCH_GC_THRESHOLD = 50_000


def _backoff(attempt: int) -> None:
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

Build = Callable[[WriteBatch, ObjectId | None, Commit | None], Commit]
"""Stages a commit's objects in the batch and returns the commit, given its parent id and parent commit."""

Derive = Callable[[ObjectId, Commit, WriteBatch], CompileState]
"""Brings the HEAD state to a commit just staged (its id, the commit, the batch staging it); returns it."""

_T = TypeVar("_T")


class Tip(NamedTuple):
    """The branch an operation writes to and its tip as read when the operation started.

    Every write compares-and-swaps the branch from this tip, so anything the operation computed from it (a
    merge's conflicts, a compress plan, a model's reply to the compiled context, an edit's target) is never
    committed on top of a tip it did not see: another handle's move makes it :class:`ConcurrentUpdate`.
    """

    ref: str
    head: ObjectId | None


class WritePolicy(Protocol):
    """What a session consults when it writes: passed at construction (``Session(policies=...)``, which
    :func:`tractkv.engine.open_session` fills with the default ones) or registered with
    :meth:`Session.add_policy`; never an attribute set from above. A policy implements the hooks it needs
    (subclass this protocol to inherit the others, which do nothing):

    * :meth:`before_write`: before an operation moves the session's branch or HEAD (every commit, including
      each commit of a batch, a switch, a checkout, a reset, a merge); raising refuses it, nothing written.
    * :meth:`check`: once per transaction that moves branch ``ref``, before it is applied (a commit outside a
      batch, a batch's end, a ref move). May stage commits in ``batch`` (through :meth:`Session.stage_commit`,
      the one write function) or raise (nothing of the transaction is written); returns what
      :meth:`landed` receives once the transaction landed, or None.
    * :meth:`landed`: after the transaction landed, with what :meth:`check` returned (when not None).

    The branch budget (:class:`tractkv.engine.budget.BudgetPolicy`) is a policy; so is the toolkit's guard
    that refuses context changes while a tool call waits for its result.
    """

    def before_write(self, session: Session, action: str) -> None:
        return None

    def check(
        self,
        session: Session,
        batch: WriteBatch,
        ref: str,
        state: CompileState | None,
        *,
        moved: str | None,
        peer: bool,
    ) -> object | None:
        return None

    def landed(self, session: Session, outcome: object) -> None:
        return None


Outcomes = tuple[tuple[WritePolicy, object], ...]
"""What the policies' checks of one transaction returned, for their :meth:`WritePolicy.landed`."""


class Session:
    """One handle's position in a store (a branch, or a detached commit) and everything it writes.

    Args:
        store: the store (the session never closes it).
        counter: counts tokens for compile and commit info.
        clock: the time in µs since the epoch (tests pass a fake one).
        branch: work on this branch instead of the one the stored HEAD names (which stays as it is; a store
            without HEAD yet gets this branch as its HEAD).
        rebase_appends: re-make a pure append on a branch another handle moved, instead of raising.
        readonly: refuse every write, never record HEAD, never write a checkpoint.
        policies: what every write consults (:class:`WritePolicy`), in order; more with :meth:`add_policy`.
    """

    def __init__(
        self,
        store: Store,
        *,
        counter: TokenCounter | None = None,
        clock: Callable[[], int] | None = None,
        branch: str | None = None,
        rebase_appends: bool = False,
        readonly: bool = False,
        policies: Sequence[WritePolicy] = (),
    ) -> None:
        self.store = store
        self.counter: TokenCounter = counter or DEFAULT_COUNTER
        self.clock = clock or (lambda: time.time_ns() // 1000)
        self.clock_read: int | None = None  # the clock's last reading (by now()): what the write path checks
        self.rebase_appends = rebase_appends
        self.readonly = readonly
        self.compiler = Compiler(self.counter)
        self.closed = False
        self._batch: WriteBatch | None = None
        self._state: CompileState | None = None
        self._since_checkpoint = 0
        self._tools_cache: dict[ObjectId, tuple[dict[str, Any], ...]] = {}
        self._tool_tokens_cache: dict[ObjectId, int] = {}
        self._last_commit: tuple[ObjectId, Commit] | None = None  # the next commit's parent, usually
        self._stored_toolsets: set[ObjectId] = set()  # tool sets this session's written commits linked
        # Inside batch(): tool sets commits of the batch linked (they land with it, so later commits of the
        # batch may trust their tag), and the set_tools setting read once (set_tools is refused in a batch).
        self._batch_toolsets: set[ObjectId] = set()
        # Inside batch(): the reflog entry of the batch's commits so far.
        self._batch_log: _BatchLog | None = None
        self._batch_tools_setting: tuple[ObjectId | None] | None = None
        # The write policies, and those of them whose before_write / check hooks do something (the write
        # path loops over these: nothing to do when there are none).
        self._policies: tuple[WritePolicy, ...] = ()
        self._guards: tuple[WritePolicy, ...] = ()
        self._checks: tuple[WritePolicy, ...] = ()
        for policy in policies:
            self.add_policy(policy)
        ref, detached = read_head(store)
        self.branch_ref: str | None = ref
        self.detached: ObjectId | None = detached if ref is None else None
        if branch is not None:
            self.branch_ref, self.detached = branch_ref(branch), None
        # The last tip this handle saw its branch at (None: it never saw the branch with a commit, i.e. it is
        # unborn for this handle). A write that finds the branch gone although this is set refuses: another
        # handle deleted it (delete_branch, a collapse), and re-creating it would drop that history.
        self._seen_tip: tuple[str, ObjectId] | None = None  # (branch ref, tip)
        self._note_tip()
        if (
            not readonly and store.get_ref(HEAD) is None
        ):  # a new store's first HEAD; else only switch/checkout
            self._save_head()

    def close(self) -> None:
        """Write a compile checkpoint for HEAD if useful (never in read-only mode)."""
        if self.closed:
            return
        try:
            with suppress(
                TractError
            ):  # a store closed first: those messages then raise StoreClosed when read
                render_all(self.store)  # compiled contexts outlive the Tract: render what they have not yet
            if (
                not self.readonly
                and self._batch is None
                and self._state is not None
                and self._since_checkpoint
            ):
                self.compiler.flush(self.store, self._state)
        finally:
            self.closed = True

    # --- policies -----------------------------------------------------------------------------------------

    @property
    def policies(self) -> tuple[WritePolicy, ...]:
        """The write policies this session consults, in order."""
        return self._policies

    def add_policy(self, policy: WritePolicy) -> None:
        """Register a write policy (:class:`WritePolicy`): consulted from the next write on, after those
        registered before it. The one way a layer above the session changes what its writes do."""
        self._policies = (*self._policies, policy)
        if _overrides(policy, "before_write"):
            self._guards = (*self._guards, policy)
        if _overrides(policy, "check"):
            self._checks = (*self._checks, policy)

    def guard(self, action: str) -> None:
        """Ask every policy whether ``action`` may move this session's branch or HEAD now (raising refuses)."""
        for policy in self._guards:
            policy.before_write(self, action)

    def check_policies(
        self,
        batch: WriteBatch,
        ref: str,
        state: CompileState | None,
        *,
        moved: str | None = None,
        peer: bool = False,
    ) -> Outcomes:
        """Run the policies' checks of a transaction that moves ``ref`` (``state``: the compile state at its
        new tip, None: read through the batch), before it is applied."""
        if not self._checks:
            return ()
        found = []
        for policy in self._checks:
            outcome = policy.check(self, batch, ref, state, moved=moved, peer=peer)
            if outcome is not None:
                found.append((policy, outcome))
        return tuple(found)

    def _landed(self, outcomes: Outcomes) -> None:
        for policy, outcome in outcomes:
            policy.landed(self, outcome)

    # --- HEAD ---------------------------------------------------------------------------------------------

    @property
    def current_branch(self) -> str | None:
        return branch_name(self.branch_ref) if self.branch_ref else None

    @property
    def head(self) -> ObjectId | None:
        return self.head_commit(self.reader())

    def where(self) -> str:
        """``branch 'x'`` or ``detached HEAD <id>``, for messages."""
        return f"branch {self.current_branch!r}" if self.branch_ref else f"detached HEAD {self.detached}"

    def reader(self) -> Reader:
        """What reads see: the open batch (with its staged commits) or the store."""
        if self.closed:
            raise StoreClosed
        return self._batch if self._batch is not None else self.store

    def stored_media(self, oid: str) -> bytes | None:
        """The bytes of the media blob ``oid`` as this session reads it (None when no blob of non-empty bytes
        has that id): what content a caller gives in the stored form is checked against."""
        obj = self.reader().get(ObjectId(oid))
        if isinstance(obj, Blob) and isinstance(obj.data, bytes) and obj.data:
            return obj.data
        return None

    def head_commit(self, reader: Reader) -> ObjectId | None:
        if self.branch_ref is None:
            return self.detached
        batch = self._batch
        if reader is batch and batch is not None:  # the branch a batch moved: its staged value, read directly
            staged = batch.ref_updates.get(self.branch_ref)
            if staged is not None:
                return ObjectId(staged[1]) if staged[1] is not None else None
        value = reader.get_ref(self.branch_ref)
        if value is None:
            return None
        self._seen_tip = (self.branch_ref, ObjectId(value))
        return self._seen_tip[1]

    def _note_tip(self) -> None:
        """Reset what this handle saw of its branch to the branch's tip now (after HEAD moved)."""
        self._seen_tip = None
        if self.branch_ref is not None:
            value = self.store.get_ref(self.branch_ref)
            self._seen_tip = (self.branch_ref, ObjectId(value)) if value is not None else None

    def _check_not_deleted(self, ref: str, head: ObjectId | None) -> None:
        """Refuse to write on a branch another handle deleted after this one saw a commit on it."""
        seen = self._seen_tip
        if head is None and seen is not None and seen[0] == ref:
            name = branch_name(ref) or ref
            raise ConcurrentUpdate(
                ref,
                seen[1],
                None,
                f"branch {name!r} was deleted by another handle (delete_branch, or a collapse of it) after "
                "this one wrote or read it; nothing was written (switch to it again to start it anew)",
            )

    def resolve(self, rev: str, reader: Reader | None = None) -> ObjectId:
        """A revision (id, prefix, branch, ``HEAD~N``...) as a commit id; ``HEAD`` is this session's HEAD
        (which a read-only session or another handle's switch may have made differ from the stored one)."""
        reader = reader or self.reader()
        if isinstance(rev, str) and rev.startswith((HEAD, "@{")):
            return _resolve(reader, rev, head=self.head_commit(reader), head_ref=self.branch_ref)
        return _resolve(reader, rev)

    def head_state(self, reader: Reader | None = None) -> CompileState:
        """This session's (owned) compile state for HEAD, brought up to date with the store."""
        reader = reader or self.reader()
        head = self.head_commit(reader)
        state = self._state
        if state is None or state.head != head:
            self._forget_state()
            state = self.compiler.state_at(reader, head, take=True)
            self._state = state
            self._since_checkpoint = 0
        return state

    def _forget_state(self) -> None:
        """Drop the owned state, keeping it in the cache (a switch back or compile(at=) may want it)."""
        if self._state is not None and self._state.head is not None:
            self.compiler.remember(self._state)
        self._state = None

    def _save_head(self) -> None:
        value = SYMBOLIC + self.branch_ref if self.branch_ref else str(self.detached)
        if self.store.get_ref(HEAD) != value:
            self.store.set_ref(HEAD, value)

    def writable(self, action: str = "commit") -> Tip:
        """The branch this session writes to and its tip now (read once, at the start of an operation), or an
        error when it cannot write (read-only, detached, or refused by a policy's ``before_write``)."""
        self.check_writes(action)
        for policy in self._guards:
            policy.before_write(self, action)
        if self.branch_ref is None:
            raise DetachedHead(str(self.detached), action)
        head = self.head_commit(self.reader())
        self._check_not_deleted(self.branch_ref, head)
        return Tip(self.branch_ref, head)

    def check_writes(self, action: str, *, in_batch: bool = True) -> None:
        """Raise unless ``action`` may write now (``in_batch=False``: not inside :meth:`batch` either)."""
        if self.readonly:
            raise ReadOnlySession(action)
        if self.closed:
            raise StoreClosed
        if not in_batch and self._batch is not None:
            raise InvalidInput(f"{action} is not allowed inside batch()")

    def now(self, parent: Commit | None, after: int = -1) -> int:
        """A timestamp for a child of ``parent`` (and of a commit stamped ``after``, a merge's other side):
        later than them, so log order stays causal, but never more than :data:`MAX_FUTURE_US` past the clock.
        A parent stamped beyond that (a wrong clock set right since, or a store from before receivers refused
        such commits) does not drag its children's time along nor wedge the branch: the child takes the
        clock's time. The clock's own reading is refused when it is outside the valid range.

        Raises:
            InvalidInput: the clock reads a time outside ``[0, 2**53 - 1]`` µs (it names the clock).
        """
        now = int(self.clock())
        if not TS_MIN <= now <= TS_MAX:
            raise InvalidInput(
                f"this clock reads {now} µs since the epoch, outside [0, 2**53 - 1] (1970 to 2255): "
                "nothing was written; set the clock right"
            )
        self.clock_read = now
        last = after if parent is None or parent.created_at < after else parent.created_at
        if now <= last < now + MAX_FUTURE_US and last < TS_MAX:
            now = last + 1
        return now

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
                if self._state is not None and self._since_checkpoint >= CHECKPOINT_EVERY:
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
        attempts = 0
        stale_retried = False
        while True:
            reader = self.reader()
            last = self._last_commit  # an id names one commit forever: no need to read it back
            parent_commit = last[1] if last is not None and last[0] == parent else None
            if parent_commit is None and parent is not None:
                parent_commit = reader.get_commit(parent)
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
                self._state = None
                attempts += 1
                if not rebase or attempts >= MAX_REBASE_ATTEMPTS:
                    raise ConcurrentUpdate(
                        exc.ref,
                        exc.expected,
                        exc.actual,
                        "another handle moved the branch; nothing was written",
                    ) from exc
                _backoff(attempts)  # writers that collided do not collide again at once
                parent = self.head_commit(self.store)
                self._check_not_deleted(ref, parent)
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
            self._batch_log = _BatchLog(ref, entry, message, len(batch.log_appends) - 1)
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

    def info(self, oid: ObjectId, commit: Commit, payload: dict[str, Any] | None = None) -> CommitInfo:
        """The CommitInfo of a commit; token counts come from the HEAD state when it holds the commit."""
        tokens = None
        state = self._state
        if state is not None and payload is not None:
            slot = state.appended_slot(oid)
            if slot is not None:
                tokens = slot.tokens  # counted once, when the state took the commit
        return commit_info(self.reader(), oid, commit, self.counter, payload, tokens=tokens)

    def _stage_checkpoint(self, batch: WriteBatch, state: CompileState | None) -> bool:
        """Stage the periodic checkpoint in the batch of the commit that is due to save it, so it lands in
        that commit's transaction (a durable commit then pays one fsync, not two); True when staged. A cache:
        failing to stage it does not fail the commit (:meth:`_maybe_checkpoint` tries after it lands)."""
        if state is None or self._since_checkpoint + 1 < CHECKPOINT_EVERY:
            return False
        try:
            self.compiler.stage(batch, state)
        except Exception:
            self._log_checkpoint_failure()
            return False
        return True

    def _maybe_checkpoint(self) -> None:
        """Save the periodic checkpoint after a commit landed. A checkpoint is a cache: failing to write it
        (an I/O error, a full disk) must not turn the landed commit into an error, so it is logged and tried
        again after the next commit."""
        if self._batch is None and self._state is not None and self._since_checkpoint >= CHECKPOINT_EVERY:
            try:
                self.compiler.flush(self.store, self._state)
            except Exception:  # a cache write: the commit is already written
                self._log_checkpoint_failure()
                return
            self._since_checkpoint = 0

    @staticmethod
    def _log_checkpoint_failure() -> None:
        import logging  # only on this rare path: keeps ``import tractkv`` light

        logging.getLogger(__name__).warning("compile checkpoint not saved (will retry)", exc_info=True)

    def apply_ref_batch(self, batch: WriteBatch) -> None:
        """Apply a batch of ref moves; a lost compare-and-swap is :class:`ConcurrentUpdate`, nothing written."""
        try:
            self.store.apply(batch)
        except RefConflict as exc:
            self._state = None
            raise ConcurrentUpdate(exc.ref, exc.expected, exc.actual, "nothing was written") from exc

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

    def annotate(self, target: str, priority: str, reason: str | None = None) -> CommitInfo:
        """Set a message's priority with an annotation commit (see :meth:`tractkv.Tract.annotate`)."""
        if priority not in PRIORITIES:
            raise InvalidInput(f"priority must be one of {PRIORITIES}, not {priority!r}")
        if reason is not None and not isinstance(reason, str):
            raise InvalidInput("reason must be a string")
        tip = self.writable("annotate")
        target_id = self.message_target(target)
        payload: dict[str, Any] = {"type": ANNOTATION, "priority": priority}
        if reason:
            payload["reason"] = reason
        blob = Blob(data=payload)

        def build(batch: WriteBatch, parent: ObjectId | None, parent_commit: Commit | None) -> Commit:
            if parent != tip.head and target_id not in self.compiler.state_at(self.store, parent).index:
                # re-made on a tip another handle moved (rebase): only while its target is still there
                raise InvalidInput(
                    f"{target_id[:12]} is no longer a message in the history of {self.where()} (another "
                    "handle moved the branch): nothing was written"
                )
            return Commit(
                parents=(parent,) if parent is not None else (),
                content=batch.put(blob),
                operation="annotate",
                edit_target=target_id,
                message=reason,
                created_at=self.now(parent_commit),
            )

        oid, commit = self.commit_with(
            build,
            "annotate",
            f"{priority} {target_id[:12]}",
            tip=tip,
            action="annotate",
            payload=payload,
            rebase=self.rebase_appends,  # an annotation adds a commit as an append does: re-made on a raced tip
        )
        return self.info(oid, commit, payload)

    def message_target(self, rev: str) -> ObjectId:
        """The message commit a revision names, which must be a message in this branch's context."""
        reader = self.reader()
        oid = self.resolve(rev, reader)
        state = self.head_state(reader)
        position = state.index.get(oid)
        if position is None:
            raise InvalidInput(f"{oid[:12]} is not a message in the history of {self.where()}")
        return state.slots[position].commit

    def message_content(self, rev: str) -> dict[str, Any]:
        """The content a message shows now (its latest edit's, else its own) for a revision naming it, as
        :meth:`message_target` finds it."""
        target = self.message_target(rev)
        reader = self.reader()
        state = self.head_state(reader)
        blob = reader.get(state.slots[state.index[target]].blob)
        return dict(blob.data) if isinstance(blob, Blob) and isinstance(blob.data, dict) else {}

    # --- reading ------------------------------------------------------------------------------------------

    def state_at(self, rev: str | None) -> CompileState:
        """The compile state at a revision (None: HEAD). Shared: treat as read-only."""
        reader = self.reader()
        return (
            self.head_state(reader)
            if rev is None
            else self.compiler.state_at(reader, self.resolve(rev, reader))
        )

    def compile(
        self, at: str | None = None, *, include_reasoning: bool = False, strict: bool = False
    ) -> CompiledContext:
        """The compiled context at a revision (None: HEAD), its tool pairing repaired
        (:mod:`tractkv.engine.compile.pairing`).

        Raises:
            ToolPairingError: ``strict`` and the history needed a repair (the error names the first).
            UnknownRevision: ``at`` names no commit.
        """
        reader = self.reader()
        state = self.state_at(at)
        tools, tool_cost = self.tools_of(state.tools), self.tool_tokens_of(state.tools)
        ctx = context_of(reader, state, self.counter, tools, include_reasoning, tool_tokens=tool_cost)
        if strict:
            ctx.check_pairing()
        return ctx

    def compiled_at(self, oid: ObjectId | None) -> tuple[CompileState, CompiledContext]:
        """The (shared, read-only) compile state at a commit id (None: the empty state) and its context."""
        reader = self.reader()
        state = self.compiler.state_at(reader, oid)
        tools, tool_cost = self.tools_of(state.tools), self.tool_tokens_of(state.tools)
        return state, context_of(reader, state, self.counter, tools, tool_tokens=tool_cost)

    def tools_of(self, toolset_id: ObjectId | None) -> tuple[dict[str, Any], ...]:
        """The schemas of a tool set, in order (cached: a tool set id names one list forever)."""
        if toolset_id is None:
            return ()
        cached = self._tools_cache.get(toolset_id)
        if cached is None:
            cached = self._tools_cache[toolset_id] = load_tools(self.reader(), toolset_id)
        return cached

    def tool_tokens_of(self, toolset_id: ObjectId | None) -> int:
        """The estimated tokens of a tool set's definitions (:func:`~tractkv.engine.content.toolsets.tool_tokens`;
        cached per tool set id, so a compile after an append does not count them again)."""
        if toolset_id is None:
            return 0
        cached = self._tool_tokens_cache.get(toolset_id)
        if cached is None:
            cached = self._tool_tokens_cache[toolset_id] = tool_tokens(
                self.tools_of(toolset_id), self.counter
            )
        return cached

    def get_commit(self, rev: str) -> CommitInfo:
        reader = self.reader()
        oid = self.resolve(rev, reader)
        return commit_info(reader, oid, reader.get_commit(oid), self.counter)

    def log(
        self, limit: int | None = None, op_filter: str | None = None, *, rev: str | None = None
    ) -> list[CommitInfo]:
        if limit is not None and limit < 0:
            raise InvalidInput("limit must be >= 0")
        if op_filter is not None and op_filter not in LOGGED_OPERATIONS:
            raise InvalidInput(
                f"unknown operation {op_filter!r}: one of {', '.join(sorted(LOGGED_OPERATIONS))}"
            )
        reader = self.reader()
        tip = self.resolve(rev, reader) if rev is not None else self.head_commit(reader)
        if tip is None:
            return []
        out: list[CommitInfo] = []
        for oid, commit in iter_log(reader, [tip]):
            if limit is not None and len(out) >= limit:
                break
            if op_filter is None or commit.operation == op_filter:
                out.append(commit_info(reader, oid, commit, self.counter))
        return out

    def diff(self, a: str, b: str | None = None) -> ContextDiff:
        from tractkv.engine.compile import diff_states  # lazy: keeps `import tractkv` light

        reader = self.reader()
        state_a = self.compiler.state_at(reader, self.resolve(a, reader)).copy()
        return diff_states(reader, state_a, self.state_at(b), self.counter)

    # --- branches -----------------------------------------------------------------------------------------

    def switch(self, name: str) -> BranchInfo:
        """Make ``name`` this session's branch (and, unless read-only, the store's HEAD for the next open)."""
        if self._batch is not None:
            raise InvalidInput("switch is not allowed inside batch()")
        self.guard("switch")
        ref = branch_ref(name)
        head = self.store.get_ref(ref)
        if head is None and ref != self.branch_ref:
            raise BranchNotFound(name)
        self._move_head(ref, None)
        from tractkv.engine.values import BranchInfo  # lazy: keeps `import tractkv` light

        return BranchInfo(name=name, head=ObjectId(head) if head else None, is_current=True)

    def checkout(self, rev: str) -> ObjectId:
        """Detach HEAD at a commit (read-only there)."""
        if self._batch is not None:
            raise InvalidInput("checkout is not allowed inside batch()")
        self.guard("checkout")
        oid = self.resolve(rev, self.store)
        self._move_head(None, oid)
        return oid

    def _move_head(self, ref: str | None, detached: ObjectId | None) -> None:
        self._forget_state()
        self.branch_ref, self.detached = ref, detached
        self._note_tip()
        if not self.readonly:
            self._save_head()

    def move_branch(
        self,
        tip: Tip,
        target: ObjectId,
        reflog_op: str,
        summary: str,
        *,
        hard: bool = False,
        moved: str = "the move",
        peer: bool = False,
    ) -> ObjectId | None:
        """Move the branch from ``tip`` (read when the operation started) to ``target`` by compare-and-swap
        (reset, fast-forward merge): if another handle moved it since, nothing moves. The branch's budget
        checks the move as it checks a commit (``moved`` names it in messages), in the same transaction: a
        ``trim`` / ``compress`` commit lands with the move, a refusal moves nothing. Returns the branch's new
        tip (``target``, or the commit the budget made on it); inside :meth:`batch`, the block's end checks.
        ``peer``: ``target`` came from another store (a pull), so the budget counts at least the estimate."""
        ref, head = tip.ref, tip.head
        own = self._batch is None
        batch = self.store.new_batch() if own else self._batch
        assert batch is not None
        batch.set_ref(ref, target, expected=head)
        log_ref_move(batch, ref, head, target, reflog_op, summary, hard=hard, now_us=self.clock())
        self._forget_state()
        if not own:
            return target
        try:
            outcomes = self.check_policies(batch, ref, None, moved=moved, peer=peer)
            self.apply_ref_batch(batch)
        except BaseException:
            self._state = None  # it may hold the budget's commit, which was not written
            raise
        self.compiler.retarget(batch, self.store)
        if self._state is not None:
            self._state.retarget(batch, self.store)
        staged = batch.ref_updates[ref][1]
        self._landed(outcomes)
        return ObjectId(staged) if staged is not None else None

    def reset(self, target: str, mode: str = "soft") -> ObjectId:
        if mode not in ("soft", "hard"):
            raise InvalidInput(f"mode must be 'soft' or 'hard', not {mode!r}")
        self.check_writes("reset", in_batch=False)
        tip = self.writable("reset")
        oid = self.resolve(target, self.store)
        if mode == "hard":
            self.render_live()  # the abandoned commits' blobs may go at the next gc
        self.move_branch(
            tip, oid, f"reset --{mode}", f"reset to {target}", hard=mode == "hard", moved="the reset"
        )
        return oid

    # --- tools in context ---------------------------------------------------------------------------------

    def tools_for_next_commit(self) -> ObjectId | None:
        """The tool set the branch's setting (:func:`tractkv.engine.tools.set_tools`) links to the next commit (an
        empty set once, right after clearing)."""
        cached = self._batch_tools_setting if self._batch is not None else None
        if cached is not None:
            toolset = cached[0]  # one str for the whole batch: trusted_commit checks it once (made_tools)
        else:
            key = None if self.branch_ref is None else ACTIVE_TOOLS + self.branch_ref.encode()
            raw = self.reader().table_get(Table.META, key) if key is not None else None
            toolset = None if raw is None else ObjectId(raw.decode())
            if self._batch is not None:
                self._batch_tools_setting = (toolset,)  # set_tools is refused inside a batch: read it once
        if toolset is None:
            return None
        if toolset == EMPTY_TOOLSET_ID and not self.tools_of(self.head_state().tools):
            return None  # already cleared in the context: nothing to link
        return toolset

    def tool_versions(self, name: str) -> list[dict[str, Any]]:
        reader = self.reader()
        out = []
        for oid in reader.tool_versions(name):
            tool = reader[oid]
            assert isinstance(tool, ToolSchema)
            out.append(dict(tool.schema))
        return out

    # --- gc -----------------------------------------------------------------------------------------------

    def render_live(self) -> None:
        """Render every message a live compiled context of this store still reads on first use (before gc, a
        hard reset or a branch deletion lets their blobs go). A blob already gone: that context raises when
        read, as it would have anyway."""
        with suppress(TractError):
            render_all(self.store)

    def before_gc(self) -> None:
        """Flush the HEAD state (gc may drop unflushed work) and refuse inside a batch."""
        self.check_writes("gc", in_batch=False)
        self.render_live()
        if self._state is not None and self._since_checkpoint:
            self.compiler.flush(self.store, self._state)
            self._since_checkpoint = 0

    def after_store_rewrite(self) -> None:
        """Forget every cached state and tool set (gc deleted objects, a clone moved HEAD...)."""
        self.compiler.clear()
        self._state = None
        self._tools_cache.clear()
        self._tool_tokens_cache.clear()
        self._stored_toolsets.clear()

    def place(self, ref: str | None, detached: ObjectId | None = None) -> None:
        """Put HEAD on ``ref`` (or detached) without checks: used right after a clone created the refs."""
        self._state = None
        self.branch_ref, self.detached = ref, detached
        self._note_tip()
        if not self.readonly:
            self._save_head()


# --- plain-text appends: the general path and the fast path, one signature --------------------------------


def append_text_general(session: Session, role: str, text: str) -> CommitInfo:
    """Append ``text`` as a plain ``role`` (user or assistant) message the general way: :meth:`Session.commit`
    of ``{"type": "dialogue", "role": role, "text": text}``."""
    return session.commit({"type": "dialogue", "role": role, "text": text})


def append_text_fast(session: Session, role: str, text: str) -> CommitInfo:
    """:func:`append_text_general` (the same checks, errors, objects, rows and result) without the steps of the
    general path that cannot apply to plain text (targets, media, tool schemas, a general content check).
    Content that is not plain text (a lone surrogate, a non-str) takes the general path."""
    batch = session._batch
    if batch is not None and not session.readonly and not session.closed:
        info = _append_in_batch(session, batch, role, text)
        if info is not None:
            return info
    payload = {"type": "dialogue", "role": role, "text": text}
    data = _plain_bytes(role, text)
    if data is None:  # not plain text: the general path checks (and refuses) it
        return append_text_general(session, role, text)
    tip = session.writable()
    blob = trusted_blob(payload)  # checked above, as content_objects checks plain text
    inherited = session.tools_for_next_commit()
    blob_id = hash_bytes(data)

    def build(batch: WriteBatch, parent: ObjectId | None, parent_commit: Commit | None) -> Commit:
        if len(data) > MAX_OBJECT_BYTES:
            batch.put(blob)  # refuses it (ContentTooLarge), as for any object
        batch.put_raw(blob_id, data, blob)  # batch.put(blob) without encoding it again
        last = session._last_commit  # its id is the hash this session computed (a batch's tip is that str)
        commit = trusted_commit(
            parents=(parent,) if parent is not None else (),
            content=blob_id,
            tools=inherited,
            operation="append",
            created_at=session.now(parent_commit),
            made=last[0] if last is not None else None,
            made_tools=last[1].tools if last is not None else None,  # checked when that was made
        )
        own = session._batch is None
        tools = commit.tools
        if (tools is not None and not _linked(session, tools, own)) or not (
            TS_MIN <= commit.created_at <= TS_MAX
        ):  # what construction does not vouch for: checked as the general path checks it
            known: dict[ObjectId, str] = {blob_id: trusted_tag(payload)}
            if parent is not None:
                known[parent] = "commit"
            if tools is not None and _linked(session, tools, own):
                known[tools] = "toolset"
            check_commit(batch, commit, known, session.clock_read)
        # else: one parent at most (the tip this operation read), a message blob checked above, no tool set
        # or one this session linked, a clock value in range: it passes every rule check_commit applies.
        return commit

    def derive(oid: ObjectId, commit: Commit, batch: WriteBatch) -> CompileState:
        state = session.parent_state(
            batch, commit.parents[0] if commit.parents else None, batch is not session._batch
        )
        state.apply_text(oid, commit, role, text, session.counter.count(text) + MESSAGE_OVERHEAD)
        return state

    oid, commit = session.commit_with(
        build,
        "append",
        partial(_first_line, text),  # a plain text's summary; made only if the reflog shows it
        tip=tip,
        rebase=session.rebase_appends,
        payload=payload,
        derive=derive,
    )
    state = session._state
    slot = state.appended_slot(oid) if state is not None and state.head is oid else None
    if slot is not None:  # the slot apply_text made for it
        return text_commit_info(oid, commit, payload, role, slot.tokens)
    return session.info(oid, commit, payload)


def _linked(session: Session, tools: ObjectId, own: bool) -> bool:
    """Whether an earlier commit of this session linked tool set ``tools`` (its tag is known)."""
    return tools in session._stored_toolsets or (not own and tools in session._batch_toolsets)


PLAIN_ROLES = ("user", "assistant")
"""The roles of plain text: ``{"type": "dialogue", "role": role, "text": text}`` with one of them and a non-empty
str is what ``content_objects`` makes of ``t.user("hi")``, which it takes without a general check."""


def _plain_bytes(role: str, text: str) -> bytes | None:
    """The blob bytes of plain text (see :data:`PLAIN_ROLES`), else None (the general path names the
    problem)."""
    if role not in PLAIN_ROLES or type(text) is not str or not text:
        return None
    try:  # (not ``with suppress``: a context manager per append costs as much as this call)
        return text_blob_bytes(role, text)
    except UnicodeEncodeError:  # a lone surrogate
        return None


def _append_in_batch(session: Session, batch: WriteBatch, role: str, text: str) -> CommitInfo | None:
    """:func:`append_text_fast` of a commit after the first of a batch (the usual one of a large batch), in one
    step: the tip is the commit this session staged last (the batch's value of the branch, that very id), the
    HEAD state is at it and the batch's reflog entry is this branch's, so what :meth:`Session.writable` and
    :meth:`Session.commit_with` would find out is known. None (nothing done, the clock not read) when any of
    that does not hold, or the text is not plain: the caller takes the general way."""
    ref, log, last, state = session.branch_ref, session._batch_log, session._last_commit, session._state
    if ref is None or log is None or last is None or state is None:
        return None
    staged = batch.ref_updates.get(ref)
    parent = last[0]
    if (
        staged is None
        or staged[1] is not parent  # the tip is the commit this session made last: that very str
        or state.head is not parent
        or log.ref != ref
        or log.index != len(batch.log_appends) - 1
    ):
        return None
    if role not in PLAIN_ROLES or type(text) is not str or not text:  # not plain text: content_objects checks
        return None
    payload = {"type": "dialogue", "role": role, "text": text}
    try:
        data = text_blob_bytes(role, text)
    except UnicodeEncodeError:  # a lone surrogate: the general path names the problem
        return None
    if len(data) > MAX_OBJECT_BYTES:  # the general path refuses it
        return None
    tools = session.tools_for_next_commit()
    if tools is not None and tools not in session._stored_toolsets and tools not in session._batch_toolsets:
        return None  # a tool set no commit of this session linked yet: check_commit checks it
    if session._guards:
        session.guard("commit")
    parent_commit = last[1]
    blob_id = hash_bytes(data)
    batch.note_commit(parent, parent_commit)  # apply derives the tools index row from it
    mark = batch.mark()
    tokens = session.counter.count(text) + MESSAGE_OVERHEAD

    try:
        batch.put_raw(blob_id, data, trusted_blob(payload))  # plain text, checked above
        commit = trusted_commit(
            parents=(parent,),
            content=blob_id,
            tools=tools,
            operation="append",
            created_at=session.now(parent_commit),
            made=parent,
            made_tools=parent_commit.tools,  # checked when that commit was made
        )
        known: dict[ObjectId, str] | None = None  # valid by construction ...
        if not TS_MIN <= commit.created_at <= TS_MAX:  # ... but for a clock out of range: refused as usual
            known = {parent: "commit", blob_id: trusted_tag(payload)}
            if tools is not None:
                known[tools] = "toolset"
        summary = partial(_first_line, text)
        oid, _ = session.stage_commit(
            batch, ref, parent, commit, known, "append", summary, state.apply_text, role, text, tokens
        )
    except BaseException:
        if batch.ref_updates.get(ref) is staged:
            batch.drop_since(mark)  # refused: the batch goes on without any of this commit
        session._state = None  # it may hold the commit that was not staged whole: rebuild from the store
        raise
    session._since_checkpoint += 1
    session._last_commit = (oid, commit)
    if tools is not None:
        session._batch_toolsets.add(tools)
    return text_commit_info(oid, commit, payload, role, tokens)


append_text = append_text_fast
"""How a plain-text append is made: the one place that chooses between :func:`append_text_fast` and
:func:`append_text_general` (the same signature and result; tests run both by name)."""


def _overrides(policy: WritePolicy, hook: str) -> bool:
    """Whether ``policy`` implements ``hook`` itself (not the protocol's default, which does nothing)."""
    return getattr(type(policy), hook, None) is not getattr(WritePolicy, hook)


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


class _BatchLog:
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
