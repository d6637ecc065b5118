"""A session's core: HEAD, the compile state kept for it, its reads, and its write policies' registry.

Concurrency: several sessions (threads or processes) may share a store. Each has its own HEAD (the store's
``HEAD`` ref only records where the next open resumes). Every operation reads its branch tip once, when it
starts (:class:`~tractkv.engine.session.values.Tip`, :meth:`SessionCore.writable`), and commits by
compare-and-swap from that tip, so nothing computed from what it read (a model's reply, a merge's conflicts,
a compress plan) lands on a tip it did not see.

Read-only mode (``readonly=True``) is what the viewer and the CLI's read commands use: no write is possible,
HEAD is never recorded and no compile checkpoint is ever flushed, so reading a store changes none of its
tables."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from tractkv.engine.compile import (
    CHECKPOINT_EVERY,
    Compiler,
    CompileState,
    commit_info,
    context_of,
    load_tools,
    render_all,
)
from tractkv.engine.content import (
    ACTIVE_TOOLS,
    DEFAULT_COUNTER,
    EMPTY_TOOLSET_ID,
    TokenCounter,
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
    iter_log,
    read_head,
)
from tractkv.engine.history import OPERATIONS as LOGGED_OPERATIONS
from tractkv.engine.history import resolve_revision as _resolve
from tractkv.engine.values import CommitInfo, CompiledContext
from tractkv.errors import (
    ConcurrentUpdate,
    DetachedHead,
    InvalidInput,
    ReadOnlySession,
    RefConflict,
    StoreClosed,
    TractError,
)
from tractkv.ids import ObjectId
from tractkv.model import Blob, Commit, ToolSchema
from tractkv.store import Reader, Store, Table, WriteBatch

from .policy import Outcomes, WritePolicy, overrides
from .values import BatchLog, Tip

if TYPE_CHECKING:  # loaded on first use: keeps `import tractkv` light
    from tractkv.engine.values import ContextDiff


class SessionCore:
    """One handle's position in a store (a branch, or a detached commit): its HEAD, the compile state kept for
    it, what it reads, and the write policies its writes consult. :class:`~tractkv.engine.session.Session` adds
    the moves and the write path.

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
        policies: Sequence[WritePolicy[Any]] = (),
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
        self._batch_log: BatchLog | None = None
        self._batch_tools_setting: tuple[ObjectId | None] | None = None
        # The write policies, and those of them whose before_write / check hooks do something (the write
        # path loops over these: nothing to do when there are none).
        self._policies: tuple[WritePolicy[Any], ...] = ()
        self._guards: tuple[WritePolicy[Any], ...] = ()
        self._checks: tuple[WritePolicy[Any], ...] = ()
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
        """Write a compile checkpoint for HEAD if useful (never in read-only mode): after commits, or after a
        long replay found no usable checkpoint (``compiler.unsaved``: e.g. one made with another counter, which
        this open rebuilt from objects and would otherwise rebuild again at every open)."""
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
                and (self._since_checkpoint or self.compiler.unsaved)
            ):
                self.compiler.flush(self.store, self._state)
        finally:
            self.closed = True

    # --- policies -----------------------------------------------------------------------------------------

    @property
    def policies(self) -> tuple[WritePolicy[Any], ...]:
        """The write policies this session consults, in order."""
        return self._policies

    def add_policy(self, policy: WritePolicy[Any]) -> None:
        """Register a write policy (:class:`WritePolicy`): consulted from the next write on, after those
        registered before it. The one way a layer above the session changes what its writes do."""
        self._policies = (*self._policies, policy)
        if overrides(policy, "before_write"):
            self._guards = (*self._guards, policy)
        if overrides(policy, "check"):
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

    def apply_ref_batch(self, batch: WriteBatch) -> None:
        """Apply a batch of ref moves; a lost compare-and-swap is :class:`ConcurrentUpdate`, nothing written."""
        try:
            self.store.apply(batch)
        except RefConflict as exc:
            self._state = None
            raise ConcurrentUpdate(exc.ref, exc.expected, exc.actual, "nothing was written") from exc

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

    def info(self, oid: ObjectId, commit: Commit, payload: dict[str, Any] | None = None) -> CommitInfo:
        """The CommitInfo of a commit; token counts come from the HEAD state when it holds the commit."""
        tokens = None
        state = self._state
        if state is not None and payload is not None:
            slot = state.appended_slot(oid)
            if slot is not None:
                tokens = slot.tokens  # counted once, when the state took the commit
        return commit_info(self.reader(), oid, commit, self.counter, payload, tokens=tokens)

    def _checkpoint_due(self) -> bool:
        """Whether the HEAD state has taken enough commits since its last checkpoint to save one now."""
        return self._state is not None and self._since_checkpoint >= CHECKPOINT_EVERY
