"""The :class:`Tract` facade: one handle on a store, positioned on a branch (or detached at a commit).

Thin by design: it resolves arguments, builds objects, stages them in one batch per operation, moves refs with
compare-and-swap, and delegates compile, merge, history and gc to :mod:`tractkv.engine`.

Concurrency: several handles (threads or processes) may use one store. Each handle has its own HEAD (the
store's ``HEAD`` ref only records where to resume on the next open). Every ref move is a compare-and-swap, so
two handles appending to one branch never lose a commit: the loser gets :class:`ConcurrentUpdate` (nothing
written; its next call starts from the new tip), or, with ``rebase_appends=True``, a pure append is re-made
on top of the new tip automatically (its parent changes; its content, message and metadata do not).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tractkv.errors import (
    BranchExists,
    BranchNotFound,
    ConcurrentUpdate,
    ContentError,
    DetachedHead,
    InvalidInput,
    MergeConflict,
    RefConflict,
    StoreClosed,
    UnknownRevision,
)
from tractkv.ids import ObjectId
from tractkv.model import Blob, Commit, ToolSchema, ToolSet, object_id
from tractkv.store import Reader, Store, WriteBatch, open_store

from .engine import graph
from .engine.compiler import CHECKPOINT_EVERY, Compiler, merge_payload
from .engine.content import ANNOTATION, PRIORITIES, normalize
from .engine.gc import collect_garbage
from .engine.history import commit_info, diff_states, iter_reflog, log_ref_move
from .engine.refs import (
    HEAD,
    HEADS,
    REMOTES,
    SYMBOLIC,
    branch_name,
    branch_ref,
    check_branch_name,
    read_head,
    resolve_revision,
)
from .engine.results import (
    BranchInfo,
    CommitInfo,
    CompiledContext,
    ContextDiff,
    GcResult,
    MergeResult,
    ReflogEntry,
    StatusInfo,
)
from .engine.state import CompileState
from .engine.tokens import DEFAULT_COUNTER, TokenCounter

MAX_REBASE_ATTEMPTS = 16  # bounded retries of an automatic append rebase under contention
OPERATIONS = ("append", "edit")  # what commit() makes; annotate/merge/compress have their own methods


class Tract:
    """A handle on a tractkv store: commit, compile, branch, merge, reset, inspect.

    Use :meth:`open` to make one. A Tract is a context manager; closing it writes a compile checkpoint so the
    next process compiles without replaying history.
    """

    def __init__(
        self,
        store: Store,
        *,
        token_counter: TokenCounter | None = None,
        token_budget: int | None = None,
        rebase_appends: bool = False,
        clock: Callable[[], int] | None = None,
        branch: str | None = None,
        owns_store: bool = True,
    ) -> None:
        self._store = store
        self._owns_store = owns_store
        self._counter: TokenCounter = token_counter or DEFAULT_COUNTER
        self.token_budget = token_budget
        self.rebase_appends = rebase_appends
        self._clock = clock or (lambda: time.time_ns() // 1000)
        self._compiler = Compiler(self._counter)
        self._batch: WriteBatch | None = None
        self._state: CompileState | None = None
        self._since_checkpoint = 0
        self._tools_cache: dict[ObjectId, tuple[dict[str, Any], ...]] = {}
        self._closed = False
        ref, detached = read_head(store)
        self._branch_ref: str | None = ref
        self._detached: ObjectId | None = detached if ref is None else None
        if branch is not None:
            self._branch_ref, self._detached = branch_ref(branch), None
        if store.get_ref(HEAD) is None or branch is not None:
            self._save_head()

    # --- opening and closing -----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | None = None,
        *,
        branch: str | None = None,
        durable: bool = True,
        token_counter: TokenCounter | None = None,
        token_budget: int | None = None,
        rebase_appends: bool = False,
        create: bool = True,
        clock: Callable[[], int] | None = None,
    ) -> Tract:
        """Open (or create) a store at ``path``; an in-memory store when ``path`` is None.

        Args:
            path: the store directory.
            branch: work on this branch (created when the first commit lands) instead of the one HEAD names.
            durable: fsync every commit (default); False is faster and survives process crashes, not OS ones.
            token_counter: counts tokens (default: an offline heuristic).
            token_budget: a context budget in tokens, reported by :meth:`status`.
            rebase_appends: re-make a pure append on a branch another handle moved, instead of raising.
            create: create the store when absent.
            clock: returns the time in µs since the epoch (tests pass a fake one).
        """
        store = open_store(None) if path is None else open_store(path, durable=durable, create=create)
        try:
            return cls(
                store,
                token_counter=token_counter,
                token_budget=token_budget,
                rebase_appends=rebase_appends,
                clock=clock,
                branch=branch,
            )
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        """Write a compile checkpoint for HEAD if useful, and release the store."""
        if self._closed:
            return
        try:
            if self._batch is None and self._state is not None and self._since_checkpoint:
                self._compiler.flush(self._store, self._state)
        finally:
            self._closed = True
            if self._owns_store:
                self._store.close()

    def __enter__(self) -> Tract:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def store(self) -> Store:
        """The underlying store."""
        return self._store

    @property
    def token_counter(self) -> TokenCounter:
        return self._counter

    def __repr__(self) -> str:
        where = self._store.path or "memory"
        at = branch_name(self._branch_ref) if self._branch_ref else f"detached {self._detached}"
        return f"Tract({where!r}, {at})"

    # --- HEAD ---------------------------------------------------------------------------------------------

    @property
    def current_branch(self) -> str | None:
        """The branch name this handle is on, or None when detached."""
        return branch_name(self._branch_ref) if self._branch_ref else None

    @property
    def head(self) -> ObjectId | None:
        """The commit this handle's HEAD points at (None on a branch with no commits yet)."""
        return self._head_commit(self._reader())

    @property
    def is_detached(self) -> bool:
        return self._branch_ref is None

    def _reader(self) -> Reader:
        if self._closed:
            raise StoreClosed
        return self._batch if self._batch is not None else self._store

    def _head_commit(self, reader: Reader) -> ObjectId | None:
        if self._branch_ref is None:
            return self._detached
        value = reader.get_ref(self._branch_ref)
        return ObjectId(value) if value is not None else None

    def _save_head(self) -> None:
        value = SYMBOLIC + self._branch_ref if self._branch_ref else str(self._detached)
        if self._store.get_ref(HEAD) != value:
            self._store.set_ref(HEAD, value)

    def _head_state(self, reader: Reader) -> CompileState:
        """This handle's (owned) compile state for HEAD, brought up to date with the store."""
        head = self._head_commit(reader)
        state = self._state
        if state is None or state.head != head:
            if state is not None and state.head is not None:
                self._compiler.remember(state)  # keep it: a switch back or compile(at=) may want it
            state = self._compiler.state_at(reader, head, take=True)
            self._state = state
            self._since_checkpoint = 0
        return state

    def _writable(self, action: str = "commit") -> tuple[str, ObjectId | None]:
        if self._branch_ref is None:
            raise DetachedHead(str(self._detached), action)
        return self._branch_ref, self._head_commit(self._reader())

    def _now(self, parent: Commit | None) -> int:
        now = int(self._clock())
        if parent is not None and now <= parent.created_at:
            now = parent.created_at + 1  # a child is never older than its parent: log order stays causal
        return now

    # --- writing ------------------------------------------------------------------------------------------

    @contextmanager
    def batch(self) -> Iterator[Tract]:
        """Stage every commit made inside the block and write them in one transaction at its end.

        Reads inside the block (compile, log) see the staged commits. If the block raises, nothing is
        written. Nested blocks join the outer one.
        """
        if self._batch is not None:
            yield self
            return
        self._batch = self._store.new_batch()
        try:
            yield self
            batch, self._batch = self._batch, None
            if len(batch):
                self._store.apply(batch)
        except RefConflict as exc:
            self._batch = None
            self._state = None
            raise ConcurrentUpdate(exc.ref, exc.expected, exc.actual, "batch not written") from exc
        except BaseException:
            self._batch = None
            self._state = None  # staged commits never landed: rebuild from the store
            raise
        self._maybe_checkpoint()

    def _commit_objects(
        self,
        ref: str,
        parent: ObjectId | None,
        build: Callable[[WriteBatch, ObjectId | None, Commit | None], Commit],
        reflog_op: str,
        summary: str,
        *,
        rebase: bool = False,
    ) -> tuple[ObjectId, Commit]:
        """Stage what ``build`` puts plus its commit on ``ref`` with compare-and-swap; apply unless in batch()."""
        attempts = 0
        while True:
            reader = self._reader()
            parent_commit = reader.get_commit(parent) if parent is not None else None
            own = self._batch is None
            batch = self._store.new_batch() if own else self._batch
            assert batch is not None
            commit = build(batch, parent, parent_commit)
            oid = batch.put(commit)
            batch.set_ref(ref, oid, expected=parent)
            log_ref_move(batch, ref, parent, oid, reflog_op, summary)
            if not own:
                return oid, commit
            try:
                self._store.apply(batch)
                return oid, commit
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
                parent = self._head_commit(self._store)

    def commit(
        self,
        content: Any,
        operation: str = "append",
        edit_target: str | None = None,
        message: str | None = None,
        response_to: str | None = None,
        metadata: dict[str, Any] | None = None,
        generation_config: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> CommitInfo:
        """Append a message (``operation="append"``) or replace one (``"edit"`` with ``edit_target``).

        Args:
            content: a payload dict (``{"type": "dialogue", "role": "user", "text": ...}``) or a content object.
            operation: ``append`` or ``edit``.
            edit_target: the message commit (or a revision naming it) an edit replaces.
            message: a note for people (never sent to a model).
            response_to: the commit this one answers.
            metadata: JSON-like data kept with the commit.
            generation_config: the model parameters that produced this content.
            tools: tool schemas available for this commit (stored once each, as an ordered set).

        Raises:
            DetachedHead: HEAD is a read-only checkout.
            ContentError: malformed content. InvalidInput: a bad operation or target.
            ConcurrentUpdate: another handle moved the branch (see the class doc).
        """
        if operation not in OPERATIONS:
            raise InvalidInput(
                f"operation must be one of {OPERATIONS}, not {operation!r} (see annotate/merge)"
            )
        ref, head = self._writable()
        payload = normalize(content)
        reader = self._reader()
        target: ObjectId | None = None
        if operation == "edit":
            if edit_target is None:
                raise InvalidInput("an edit needs edit_target (the message commit it replaces)")
            target = self._message_target(reader, edit_target)
        elif edit_target is not None:
            raise InvalidInput("edit_target is only for operation='edit'")
        reply = resolve_revision(reader, response_to) if response_to is not None else None
        blob = Blob(data=payload)
        tool_objects = self._toolset_objects(tools)

        def build(batch: WriteBatch, parent: ObjectId | None, parent_commit: Commit | None) -> Commit:
            toolset_id = None
            for obj in tool_objects:
                toolset_id = batch.put(obj)  # the tool set comes last
            return Commit(
                parents=(parent,) if parent is not None else (),
                content=batch.put(blob),
                tools=toolset_id,
                operation=operation,
                edit_target=target,
                response_to=reply,
                message=message,
                metadata=metadata or None,
                generation_config=generation_config or None,
                created_at=self._now(parent_commit),
            )

        summary = message or _summary(payload)
        oid, commit = self._commit_objects(
            ref, head, build, operation, summary, rebase=self.rebase_appends and operation == "append"
        )
        return self._after_commit(oid, commit, payload)

    def _after_commit(
        self, oid: ObjectId, commit: Commit, payload: dict[str, Any] | None = None
    ) -> CommitInfo:
        reader = self._reader()
        state = self._state
        if (
            state is not None
            and commit.parents
            and state.head == commit.parents[0]
            and len(commit.parents) == 1
        ):
            state.apply(reader, oid, commit, self._counter)
        else:
            self._state = None
            state = self._head_state(reader)
        self._since_checkpoint += 1
        self._maybe_checkpoint()
        return commit_info(reader, oid, commit, self._counter, payload)

    def _maybe_checkpoint(self) -> None:
        if self._batch is None and self._state is not None and self._since_checkpoint >= CHECKPOINT_EVERY:
            self._compiler.flush(self._store, self._state)
            self._since_checkpoint = 0

    def _message_target(self, reader: Reader, rev: str) -> ObjectId:
        """The message commit a revision names, which must be a message in this branch's context."""
        oid = resolve_revision(reader, rev)
        state = self._head_state(reader)
        position = state.index.get(oid)
        if position is None:
            raise InvalidInput(f"{oid[:12]} is not a message in the history of {self._where()}")
        return state.slots[position].commit

    def _where(self) -> str:
        return f"branch {self.current_branch!r}" if self._branch_ref else f"detached HEAD {self._detached}"

    def _toolset_objects(self, tools: list[dict[str, Any]] | None) -> list[ToolSchema | ToolSet]:
        """The schemas and (last) the tool set for a tools list; empty for None."""
        if tools is None:
            return []
        if not isinstance(tools, list | tuple):
            raise InvalidInput("tools must be a list of tool schemas")
        schemas = [_tool_schema(t) for t in tools]
        return [*schemas, ToolSet(tools=tuple(object_id(s) for s in schemas))]

    def system(self, text: str, **kwargs: Any) -> CommitInfo:
        """Append a system instruction."""
        return self.commit({"type": "instruction", "text": text}, **kwargs)

    def user(self, text: str, *, name: str | None = None, **kwargs: Any) -> CommitInfo:
        """Append a user message."""
        payload: dict[str, Any] = {"type": "dialogue", "role": "user", "text": text}
        if name is not None:
            payload["name"] = name
        return self.commit(payload, **kwargs)

    def assistant(self, text: str = "", *, tool_calls: list[Any] | None = None, **kwargs: Any) -> CommitInfo:
        """Append an assistant message, optionally with tool calls (``[{"id", "name", "arguments"}]``)."""
        payload: dict[str, Any] = {"type": "dialogue", "role": "assistant", "text": text}
        if tool_calls:
            payload["tool_calls"] = list(tool_calls)
        return self.commit(payload, **kwargs)

    def annotate(self, target: str, priority: str, reason: str | None = None) -> CommitInfo:
        """Set a message's priority: ``pinned`` (kept through compression), ``normal``, or ``skip`` (left out).

        The annotation is a commit on the branch, so it syncs and compiles everywhere the branch goes.
        """
        if priority not in PRIORITIES:
            raise InvalidInput(f"priority must be one of {PRIORITIES}, not {priority!r}")
        if reason is not None and not isinstance(reason, str):
            raise InvalidInput("reason must be a string")
        ref, head = self._writable("annotate")
        target_id = self._message_target(self._reader(), target)
        payload: dict[str, Any] = {"type": ANNOTATION, "priority": priority}
        if reason:
            payload["reason"] = reason
        blob = Blob(data=payload)

        def build(batch: WriteBatch, parent: ObjectId | None, parent_commit: Commit | None) -> Commit:
            return Commit(
                parents=(parent,) if parent is not None else (),
                content=batch.put(blob),
                operation="annotate",
                edit_target=target_id,
                message=reason,
                created_at=self._now(parent_commit),
            )

        oid, commit = self._commit_objects(ref, head, build, "annotate", f"{priority} {target_id[:12]}")
        return self._after_commit(oid, commit, payload)

    # --- reading ------------------------------------------------------------------------------------------

    def compile(self, at: str | None = None, *, include_reasoning: bool = False) -> CompiledContext:
        """The context at HEAD (or at any revision): messages, tools, token count, provenance."""
        reader = self._reader()
        if at is None:
            state = self._head_state(reader)
        else:
            state = self._compiler.state_at(reader, resolve_revision(reader, at))
        view = state.render(reader, include_reasoning)
        return CompiledContext(
            messages=tuple(view.messages),
            token_count=view.tokens,
            commit_count=state.commit_count,
            commit_hashes=tuple(view.commits),
            generation_configs=tuple(view.gens),
            token_source=self._counter.name,
            head=state.head,
            tools=self._tools_of(reader, state.tools),
        )

    def _tools_of(self, reader: Reader, toolset_id: ObjectId | None) -> tuple[dict[str, Any], ...]:
        if toolset_id is None:
            return ()
        cached = self._tools_cache.get(toolset_id)
        if cached is None:
            toolset = reader[toolset_id]
            assert isinstance(toolset, ToolSet)
            schemas = []
            for tool_id in toolset.tools:
                tool = reader[tool_id]
                assert isinstance(tool, ToolSchema)
                schemas.append(tool.schema)
            cached = self._tools_cache[toolset_id] = tuple(schemas)
        return cached

    def get_commit(self, rev: str) -> CommitInfo:
        """A commit by id, unique prefix, branch or ``HEAD~N``."""
        reader = self._reader()
        oid = resolve_revision(reader, rev)
        return commit_info(reader, oid, reader.get_commit(oid), self._counter)

    def log(
        self, limit: int | None = None, op_filter: str | None = None, *, rev: str | None = None
    ) -> list[CommitInfo]:
        """Commits reachable from HEAD (or ``rev``), newest first; edits and their originals both appear."""
        if limit is not None and limit < 0:
            raise InvalidInput("limit must be >= 0")
        reader = self._reader()
        tip = resolve_revision(reader, rev) if rev is not None else self._head_commit(reader)
        if tip is None:
            return []
        out: list[CommitInfo] = []
        for oid, commit in graph.iter_log(reader, [tip]):
            if limit is not None and len(out) >= limit:
                break
            if op_filter is not None and commit.operation != op_filter:
                continue
            out.append(commit_info(reader, oid, commit, self._counter))
        return out

    def diff(self, a: str, b: str | None = None) -> ContextDiff:
        """Message-level changes between the compiled contexts of ``a`` and ``b`` (default HEAD)."""
        reader = self._reader()
        state_a = self._compiler.state_at(reader, resolve_revision(reader, a)).copy()
        if b is None:
            state_b = self._head_state(reader)
        else:
            state_b = self._compiler.state_at(reader, resolve_revision(reader, b))
        return diff_states(reader, state_a, state_b)

    def status(self) -> StatusInfo:
        """Branch, HEAD, commit / message / token counts and budget use."""
        reader = self._reader()
        state = self._head_state(reader)
        view = state.render(reader)
        return StatusInfo(
            branch=self.current_branch,
            head=state.head,
            detached=self.is_detached,
            commit_count=state.commit_count,
            message_count=len(view.messages),
            token_count=view.tokens,
            token_budget=self.token_budget,
            token_source=self._counter.name,
        )

    # --- branches -----------------------------------------------------------------------------------------

    def branch(self, name: str, source: str | None = None, switch: bool = True) -> BranchInfo:
        """Create a branch at ``source`` (default HEAD) and, by default, switch to it."""
        ref = branch_ref(name)
        self._no_batch("branch")
        reader = self._reader()
        if reader.get_ref(ref) is not None:
            raise BranchExists(name)
        start = resolve_revision(reader, source) if source is not None else self._head_commit(reader)
        if start is None:
            raise InvalidInput(f"cannot branch from {self._where()}: it has no commits yet")
        batch = self._store.new_batch()
        batch.set_ref(ref, start, expected=None)
        log_ref_move(batch, ref, None, start, "branch", f"created from {source or 'HEAD'}")
        try:
            self._store.apply(batch)
        except RefConflict as exc:
            raise BranchExists(name) from exc
        if switch:
            self.switch(name)
        return BranchInfo(name=name, head=start, is_current=switch)

    def switch(self, name: str) -> BranchInfo:
        """Make ``name`` this handle's branch (and the store's HEAD for the next open)."""
        self._no_batch("switch")
        ref = branch_ref(name)
        head = self._store.get_ref(ref)
        if head is None and ref != self._branch_ref:
            raise BranchNotFound(name)
        if self._state is not None and self._state.head is not None:
            self._compiler.remember(self._state)
        self._state = None
        self._branch_ref, self._detached = ref, None
        self._save_head()
        return BranchInfo(name=name, head=ObjectId(head) if head else None, is_current=True)

    def checkout(self, rev: str) -> ObjectId:
        """Detach HEAD at a commit: compile and inspect it; committing there is an error."""
        self._no_batch("checkout")
        oid = resolve_revision(self._store, rev)
        if self._state is not None and self._state.head is not None:
            self._compiler.remember(self._state)
        self._state = None
        self._branch_ref, self._detached = None, oid
        self._save_head()
        return oid

    def list_branches(self, *, remotes: bool = True) -> list[BranchInfo]:
        """Local branches (and remote-tracking ones as ``<remote>/<branch>``), sorted by name."""
        reader = self._reader()
        out = [
            BranchInfo(name=ref[len(HEADS) :], head=ObjectId(v), is_current=ref == self._branch_ref)
            for ref, v in reader.iter_refs(HEADS)
        ]
        if self._branch_ref is not None and reader.get_ref(self._branch_ref) is None:
            out.append(BranchInfo(name=self._branch_ref[len(HEADS) :], head=None, is_current=True))
            out.sort(key=lambda b: b.name)
        if remotes:
            out.extend(
                BranchInfo(name=ref[len(REMOTES) :], head=ObjectId(v), is_current=False, is_remote=True)
                for ref, v in reader.iter_refs(REMOTES)
            )
        return out

    def delete_branch(self, name: str, *, force: bool = False) -> ObjectId:
        """Delete a branch (not the current one). Without ``force`` its commits must be reachable from
        another branch; either way the reflog keeps its tip until gc ages it out.
        """
        self._no_batch("delete_branch")
        ref = branch_ref(name)
        if ref == self._branch_ref:
            raise InvalidInput(f"cannot delete the current branch {name!r}; switch first")
        tip = self._store.get_ref(ref)
        if tip is None:
            raise BranchNotFound(name)
        tip_id = ObjectId(tip)
        if not force:
            others = [ObjectId(v) for r, v in self._store.iter_refs(HEADS) if r != ref]
            if self._detached is not None:
                others.append(self._detached)
            if not any(graph.is_ancestor(self._store, tip_id, other) for other in others):
                raise InvalidInput(
                    f"branch {name!r} has commits no other branch has; merge it or pass force=True"
                )
        batch = self._store.new_batch()
        batch.set_ref(ref, None, expected=tip)
        log_ref_move(batch, ref, tip_id, None, "delete", f"deleted branch {name}")
        self._store.apply(batch)
        return tip_id

    # --- merge, reset, reflog, gc --------------------------------------------------------------------------

    def merge(self, source: str, strategy: str = "auto", message: str | None = None) -> MergeResult:
        """Merge a branch or commit into the current branch.

        Fast-forwards when possible; otherwise makes a merge commit with parents (HEAD, source) that compiles
        as described in :mod:`tractkv.engine.state`. ``auto`` raises :class:`MergeConflict` listing every
        conflict; ``ours`` / ``theirs`` settle them. Merge bookkeeping never appears as a message.
        """
        if strategy not in ("auto", "ours", "theirs"):
            raise InvalidInput(f"strategy must be auto, ours or theirs, not {strategy!r}")
        ref, head = self._writable("merge")
        reader = self._reader()
        theirs = resolve_revision(reader, source)
        if head is not None and graph.is_ancestor(reader, theirs, head):
            return MergeResult(kind="up-to-date", head=head, commit=None, strategy=strategy)
        if head is None or graph.is_ancestor(reader, head, theirs):
            batch = self._store.new_batch() if self._batch is None else self._batch
            batch.set_ref(ref, theirs, expected=head)
            log_ref_move(batch, ref, head, theirs, "merge", f"fast-forward to {source}")
            if self._batch is None:
                self._apply_or_conflict(batch)
            self._state = None
            return MergeResult(
                kind="fast-forward",
                head=theirs,
                commit=commit_info(reader, theirs, reader.get_commit(theirs), self._counter),
                strategy=strategy,
            )
        ours_state = self._head_state(reader)
        _, conflicts = self._compiler.merge_into(reader, ours_state, theirs, strategy)
        if conflicts and strategy == "auto":
            raise MergeConflict(conflicts)
        blob = Blob(data=merge_payload(strategy, source, len(conflicts)))

        def build(batch: WriteBatch, parent: ObjectId | None, parent_commit: Commit | None) -> Commit:
            assert parent is not None
            stamp = self._now(parent_commit)
            stamp = max(stamp, reader.get_commit(theirs).created_at + 1)
            return Commit(
                parents=(parent, theirs),
                content=batch.put(blob),
                operation="merge",
                message=message or f"Merge {source}",
                created_at=stamp,
            )

        oid, _ = self._commit_objects(ref, head, build, "merge", message or f"merge {source} ({strategy})")
        self._compiler.remember(ours_state)
        self._state = None
        info = commit_info(self._reader(), oid, self._reader().get_commit(oid), self._counter)
        return MergeResult(
            kind="merge", head=oid, commit=info, conflicts_resolved=len(conflicts), strategy=strategy
        )

    def _apply_or_conflict(self, batch: WriteBatch) -> None:
        try:
            self._store.apply(batch)
        except RefConflict as exc:
            self._state = None
            raise ConcurrentUpdate(exc.ref, exc.expected, exc.actual, "nothing was written") from exc

    def reset(self, target: str, mode: str = "soft") -> ObjectId:
        """Move the current branch to ``target``.

        ``soft`` keeps the abandoned commits protected from gc (through the reflog) until they are older than
        gc's ``min_age_hours``; ``hard`` leaves them unprotected, so the next gc reclaims them. Either way,
        until gc runs, ``reflog()`` shows the old tip and ``reset(old_tip)`` undoes the reset.
        """
        if mode not in ("soft", "hard"):
            raise InvalidInput(f"mode must be 'soft' or 'hard', not {mode!r}")
        self._no_batch("reset")
        ref, head = self._writable("reset")
        oid = resolve_revision(self._store, target)
        batch = self._store.new_batch()
        batch.set_ref(ref, oid, expected=head)
        log_ref_move(batch, ref, head, oid, f"reset --{mode}", f"reset to {target}", hard=mode == "hard")
        self._apply_or_conflict(batch)
        if self._state is not None and self._state.head is not None:
            self._compiler.remember(self._state)
        self._state = None
        return oid

    def reflog(self, branch: str | None = None, limit: int | None = None) -> list[ReflogEntry]:
        """Moves of a branch (default: the current one), newest first."""
        if branch is None:
            if self._branch_ref is None:
                raise DetachedHead(str(self._detached), "show the reflog")
            ref = self._branch_ref
        else:
            ref = HEADS + check_branch_name(branch)
        out: list[ReflogEntry] = []
        for entry in iter_reflog(self._reader(), ref):
            if limit is not None and len(out) >= limit:
                break
            out.append(entry)
        return out

    def gc(
        self, min_age_hours: float = 72.0, keep_pinned: bool = True, keep_branches: bool = True
    ) -> GcResult:
        """Remove objects no ref, young reflog entry, young commit or pin keeps (see :mod:`tractkv.engine.gc`)."""
        if min_age_hours < 0:
            raise InvalidInput("min_age_hours must be >= 0")
        self._no_batch("gc")
        if self._state is not None and self._since_checkpoint:
            self._compiler.flush(self._store, self._state)
            self._since_checkpoint = 0
        result = collect_garbage(
            self._store,
            min_age_hours=min_age_hours,
            keep_pinned=keep_pinned,
            keep_branches=keep_branches,
            current_branch=self._branch_ref,
            now_us=int(self._clock()),
        )
        self._compiler.clear()
        self._state = None
        self._tools_cache.clear()
        return result

    def _no_batch(self, action: str) -> None:
        if self._batch is not None:
            raise InvalidInput(f"{action} is not allowed inside batch()")


def _summary(payload: dict[str, Any]) -> str:
    text = str(payload.get("text") or payload.get("type"))
    first = text.splitlines()[0] if text else ""
    return first[:72]


def _tool_schema(tool: Any) -> ToolSchema:
    if isinstance(tool, ToolSchema):
        return tool
    if not isinstance(tool, dict):
        raise InvalidInput("a tool schema must be a dict (OpenAI or Anthropic shape)")
    name = tool.get("name")
    if tool.get("type") == "function" and isinstance(tool.get("function"), dict):
        name = tool["function"].get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInput("a tool schema needs a name (function.name for OpenAI, name for Anthropic)")
    try:
        return ToolSchema(name=name, schema=tool)
    except InvalidInput as exc:
        raise ContentError(f"tool {name!r}: {exc}") from exc


__all__ = ["Tract", "UnknownRevision"]
