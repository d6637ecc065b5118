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

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import attrs

from tractkv.errors import (
    BranchExists,
    BranchNotFound,
    ConcurrentUpdate,
    ContentError,
    DetachedHead,
    InvalidInput,
    MergeConflict,
    ModelCallFailed,
    NoLLMConfigured,
    NotFastForward,
    RefConflict,
    StoreClosed,
    TractError,
    UnknownRevision,
)
from tractkv.ids import ObjectId, is_object_id
from tractkv.model import Blob, Commit, ToolSchema, ToolSet, UsageRecord, object_id
from tractkv.store import Reader, Store, Table, WriteBatch, open_store
from tractkv.toolkit.hooks import HookRegistry, PendingToolResult
from tractkv.toolkit.queries import ToolTurn, group_turns

from .engine import graph
from .engine.compiler import CHECKPOINT_EVERY, Compiler, context_of, load_tools, merge_payload
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
from .engine.render import tool_to_openai
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

if TYPE_CHECKING:
    from tractkv.engine.usage_stats import ToolStats
    from tractkv.engine.usage_tree import ToolUsage, UsageNode
    from tractkv.sync.ops import FetchResult
    from tractkv.sync.remote import PushOutcome
    from tractkv.toolkit.executor import ToolExecutor
    from tractkv.toolkit.loop import RunResult
    from tractkv.toolkit.profiles import ToolProfile

ACTIVE_TOOLS = b"tools:"  # meta key prefix: branch ref -> tool set id linked to later commits (set_tools)
EMPTY_TOOLSET_ID = object_id(ToolSet(tools=()))
DEFAULT_SUMMARY_INSTRUCTIONS = (
    "Summarize this tool output for an AI agent. Keep every fact, number, name and error it may need; "
    "drop repetition and boilerplate."
)
COMPRESS_INSTRUCTIONS = (
    "Summarize this conversation so far for the assistant who will continue it. Keep decisions, facts, "
    "open questions and commitments; be concise."
)
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
        llm: Any = None,
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
        self._last_commit: tuple[ObjectId, Commit] | None = None  # the next commit's parent, usually
        self._closed = False
        self._llm: Any = llm
        self._hooks = HookRegistry()
        self._summarization: dict[str, Any] = {"instructions": {}, "auto_threshold": None, "default": None}
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
        llm: Any = None,
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
            llm: the model summarize, compress and generate use (see :meth:`configure_llm`).
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
                llm=llm,
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
                if self._state is not None and self._since_checkpoint >= CHECKPOINT_EVERY:
                    self._compiler.stage(batch, self._state)  # the checkpoint lands with the commits
                    self._since_checkpoint = 0
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
            last = self._last_commit  # an id names one commit forever: no need to read it back
            parent_commit = last[1] if last is not None and last[0] == parent else None
            if parent_commit is None and parent is not None:
                parent_commit = reader.get_commit(parent)
            own = self._batch is None
            batch = self._store.new_batch() if own else self._batch
            assert batch is not None
            commit = build(batch, parent, parent_commit)
            oid = batch.put(commit)
            batch.set_ref(ref, oid, expected=parent)
            log_ref_move(batch, ref, parent, oid, reflog_op, summary, now_us=commit.created_at)
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
        return self._commit_payload(
            ref,
            head,
            payload,
            operation=operation,
            target=target,
            reply=reply,
            message=message,
            metadata=metadata,
            generation_config=generation_config,
            tools=tools,
        )

    def _commit_payload(
        self,
        ref: str,
        head: ObjectId | None,
        payload: dict[str, Any],
        *,
        operation: str,
        target: ObjectId | None = None,
        reply: ObjectId | None = None,
        message: str | None = None,
        metadata: dict[str, Any] | None = None,
        generation_config: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        links: dict[str, tuple[Any, ...]] | None = None,
        extra_objects: tuple[Any, ...] = (),
        toolset: ObjectId | None = None,
    ) -> CommitInfo:
        """Commit a normalized payload with the tools in force (explicit ``tools`` win over set_tools;
        ``toolset`` links an existing tool set)."""
        blob = Blob(data=payload)
        tool_objects = self._toolset_objects(tools) if tools is not None else []
        inherited = toolset or (self._tools_for_next_commit() if tools is None else None)

        def build(batch: WriteBatch, parent: ObjectId | None, parent_commit: Commit | None) -> Commit:
            toolset_id = inherited
            for obj in tool_objects:
                toolset_id = batch.put(obj)  # the tool set comes last
            for obj in extra_objects:
                batch.put(obj)
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
                links=links or {},
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
            state.apply(reader, oid, commit, self._counter, payload)
        else:
            self._state = None
            state = self._head_state(reader)
        self._since_checkpoint += 1
        self._last_commit = (oid, commit)
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
        return context_of(
            reader, state, self._counter.name, self._tools_of(reader, state.tools), include_reasoning
        )

    def _tools_of(self, reader: Reader, toolset_id: ObjectId | None) -> tuple[dict[str, Any], ...]:
        if toolset_id is None:
            return ()
        cached = self._tools_cache.get(toolset_id)
        if cached is None:
            cached = self._tools_cache[toolset_id] = load_tools(reader, toolset_id)
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
        upstream = self._upstream(reader)
        ahead = behind = None
        if upstream is not None:
            if state.head is None:
                ahead, behind = 0, len(graph.ancestors(reader, upstream[1]))
            else:
                ahead, behind = graph.ahead_behind(reader, state.head, upstream[1])
        return StatusInfo(
            upstream=upstream[0] if upstream else None,
            ahead=ahead,
            behind=behind,
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
        log_ref_move(
            batch, ref, None, start, "branch", f"created from {source or 'HEAD'}", now_us=self._clock()
        )
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
        log_ref_move(batch, ref, tip_id, None, "delete", f"deleted branch {name}", now_us=self._clock())
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
            log_ref_move(batch, ref, head, theirs, "merge", f"fast-forward to {source}", now_us=self._clock())
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
        log_ref_move(
            batch,
            ref,
            head,
            oid,
            f"reset --{mode}",
            f"reset to {target}",
            hard=mode == "hard",
            now_us=self._clock(),
        )
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
            extra_roots=self._usage_roots(),
        )
        self._compiler.clear()
        self._state = None
        self._tools_cache.clear()
        return result

    def _usage_roots(self) -> set[ObjectId]:
        """Ids that running (or interrupted) tool executions' rows hold: gc must keep them."""
        from tractkv.engine.usage_rows import iter_pending

        roots: set[ObjectId] = set()
        for row in iter_pending(self._store):
            roots.update(row.children)
            roots.update(row.heads)
            if row.record is not None:
                roots.add(row.record)
            if row.commit is not None:
                roots.add(row.commit)
        return roots

    # --- sync (tractkv.sync, loaded on first use) --------------------------------------------------------

    def remote_add(self, name: str, url: str, *, token_env: str | None = None) -> None:
        """Remember a remote: a store path or ``file://`` URL, ``http://host:port`` (a ``tractkv serve`` hub),
        ``s3://bucket/prefix`` or a bundle file. ``token_env`` names the environment variable holding the
        hub's bearer token (default ``TRACTKV_TOKEN``); tokens are never stored.
        """
        from tractkv.sync import ops

        self._no_batch("remote_add")
        ops.add_remote(self._store, name, url, token_env=token_env)

    def remotes(self) -> dict[str, str]:
        """Configured remotes: name -> URL."""
        from tractkv.sync import ops

        return ops.list_remotes(self._store)

    def remote_remove(self, name: str) -> None:
        """Forget a remote and its remote-tracking branches (the objects stay until gc)."""
        from tractkv.sync import ops

        self._no_batch("remote_remove")
        ops.remove_remote(self._store, name)

    def fetch(self, remote: str = "origin", *, progress: Callable[[int], None] | None = None) -> FetchResult:
        """Receive the remote's branches as ``<remote>/<branch>`` tracking branches; local branches stay."""
        from tractkv.sync import ops

        self._no_batch("fetch")
        with ops.open_named(self._store, remote) as conn:
            return ops.fetch_from(self._store, conn, remote, progress=progress)

    def pull(
        self,
        remote: str = "origin",
        branch: str | None = None,
        ff_only: bool = False,
        *,
        strategy: str = "auto",
        progress: Callable[[int], None] | None = None,
    ) -> MergeResult:
        """Fetch, then bring ``<remote>/<branch>`` (default: the current branch's name) into the current
        branch: a fast-forward when possible, else a merge commit through :meth:`merge` (``strategy``
        settles conflicts as there).

        Raises:
            NotFastForward: ``ff_only`` and the histories diverged (nothing moved locally but the fetch).
            BranchNotFound: the remote has no such branch.
        """
        self.fetch(remote, progress=progress)
        ref, head = self._writable("pull")
        name = branch if branch is not None else ref[len(HEADS) :]
        tracking = f"{remote}/{check_branch_name(name)}"
        theirs = self._store.get_ref(REMOTES + tracking)
        if theirs is None:
            raise BranchNotFound(tracking)
        if (
            ff_only
            and head is not None
            and not graph.is_ancestor(self._store, head, ObjectId(theirs))
            and not graph.is_ancestor(self._store, ObjectId(theirs), head)
        ):
            raise NotFastForward(ref[len(HEADS) :], tracking)
        return self.merge(REMOTES + tracking, strategy, message=f"Merge {tracking}")

    def push(
        self,
        remote: str = "origin",
        branch: str | None = None,
        force: bool = False,
        expect: str | None = None,
        *,
        progress: Callable[[int], None] | None = None,
    ) -> PushOutcome:
        """Send a branch (default: the current one) to the same name on the remote.

        The remote's ref moves by compare-and-swap from the value it advertised, or from ``expect`` (an id
        or revision: force-with-lease when combined with ``force``). Without ``force`` a push that is not a
        fast-forward is refused before any object is sent.

        Raises:
            PushRejected: the remote refused the update (``.results`` says why: non-fast-forward, stale, ...).
        """
        from tractkv.sync import ops

        self._no_batch("push")
        if branch is None:
            if self._branch_ref is None:
                raise DetachedHead(str(self._detached), "push")
            ref = self._branch_ref
        else:
            ref = branch_ref(branch)
        lease: object = ...
        if expect is not None:
            lease = ObjectId(expect) if is_object_id(expect) else resolve_revision(self._store, expect)
        with ops.open_named(self._store, remote) as conn:
            return ops.push_to(self._store, conn, remote, ref, force=force, expect=lease, progress=progress)

    @classmethod
    def clone(
        cls,
        url: str,
        path: str | None,
        *,
        branch: str | None = None,
        remote: str = "origin",
        token_env: str | None = None,
        durable: bool = True,
        progress: Callable[[int], None] | None = None,
        **kwargs: Any,
    ) -> Tract:
        """Make a new store at ``path`` (None: in memory) from the remote at ``url``.

        Every remote branch becomes a local branch and a ``<remote>/<branch>`` tracking branch; HEAD is
        ``branch``, else ``main`` when the remote has it, else the first. A clone that fails leaves no
        store behind at ``path``.
        """
        import os
        import shutil

        from tractkv.sync import ops

        if path is not None and os.path.exists(path) and os.listdir(path):
            raise InvalidInput(f"cannot clone into {path!r}: it exists and is not empty")
        created = path is not None and not os.path.exists(path)
        tract: Tract | None = None
        try:
            tract = cls.open(path, durable=durable, **kwargs)
            ops.add_remote(tract._store, remote, url, token_env=token_env)
            with ops.open_named(tract._store, remote) as conn:
                ops.fetch_from(tract._store, conn, remote, progress=progress)
            prefix = f"{REMOTES}{remote}/"
            tips = {ref[len(prefix) :]: ObjectId(v) for ref, v in tract._store.iter_refs(prefix)}
            if branch is not None and branch not in tips:
                raise BranchNotFound(f"{remote}/{branch}")
            batch = tract._store.new_batch()
            for name, tip in tips.items():
                batch.set_ref(HEADS + name, tip, expected=None)
                log_ref_move(
                    batch, HEADS + name, None, tip, "clone", f"clone from {url}", now_us=tract._clock()
                )
            tract._store.apply(batch)
            start = branch or ("main" if "main" in tips or not tips else sorted(tips)[0])
            tract._branch_ref, tract._detached, tract._state = branch_ref(start), None, None
            tract._save_head()
            return tract
        except BaseException:
            if tract is not None:
                tract.close()
            if created and path is not None:
                shutil.rmtree(path, ignore_errors=True)
            raise

    def _upstream(self, reader: Reader) -> tuple[str, ObjectId] | None:
        """The tracking branch the current branch follows: ``origin/<name>`` first, else the first remote's."""
        if self._branch_ref is None:
            return None
        name = self._branch_ref[len(HEADS) :]
        candidates = sorted(
            (ref[len(REMOTES) :], ObjectId(v))
            for ref, v in reader.iter_refs(REMOTES)
            if ref[len(REMOTES) :].split("/", 1)[-1] == name
        )
        candidates.sort(key=lambda c: not c[0].startswith("origin/"))
        return candidates[0] if candidates else None

    # --- tools in context ---------------------------------------------------------------------------------

    def _tools_key(self) -> bytes | None:
        return None if self._branch_ref is None else ACTIVE_TOOLS + self._branch_ref.encode()

    def _tools_for_next_commit(self) -> ObjectId | None:
        """The tool set set_tools() links to the next commit (an empty set once, right after clearing)."""
        key = self._tools_key()
        raw = self._reader().table_get(Table.META, key) if key is not None else None
        if raw is None:
            return None
        toolset = ObjectId(raw.decode())
        if toolset == EMPTY_TOOLSET_ID:
            reader = self._reader()
            state = self._head_state(reader)
            if not self._tools_of(reader, state.tools):
                return None  # already cleared in the context: nothing to link
        return toolset

    def set_tools(self, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
        """Link these tool schemas to every later commit on this branch, until changed or cleared with None.

        The setting is kept in the store (it survives reopening) per branch; the schemas are stored at once.
        After ``set_tools(None)`` the next commit records an empty tool set, so compile shows no tools.
        """
        self._no_batch("set_tools")
        key = self._tools_key()
        if key is None:
            raise DetachedHead(str(self._detached), "set tools")
        objects = self._toolset_objects(tools) if tools is not None else [ToolSet(tools=())]
        batch = self._store.new_batch()
        toolset_id = None
        for obj in objects:
            toolset_id = batch.put(obj)
        assert toolset_id is not None
        batch.table_put(Table.META, key, toolset_id.encode())
        self._store.apply(batch)
        return self.get_tools()

    def get_tools(self) -> list[dict[str, Any]]:
        """The tools set_tools() configured for this branch, or else the tools in force at HEAD."""
        reader = self._reader()
        key = self._tools_key()
        raw = reader.table_get(Table.META, key) if key is not None else None
        if raw is not None:
            return [dict(t) for t in self._tools_of(reader, ObjectId(raw.decode()))]
        return [dict(t) for t in self._tools_of(reader, self._head_state(reader).tools)]

    def get_commit_tools(self, rev: str) -> list[dict[str, Any]]:
        """The exact tool schemas, in order, that were in force at a commit (latest tool set wins)."""
        reader = self._reader()
        state = self._compiler.state_at(reader, resolve_revision(reader, rev))
        return [dict(t) for t in self._tools_of(reader, state.tools)]

    def tool_versions(self, name: str) -> list[dict[str, Any]]:
        """Every stored version of a tool (same name, different schema), oldest first."""
        reader = self._reader()
        out = []
        for oid in reader.tool_versions(name):
            tool = reader[oid]
            assert isinstance(tool, ToolSchema)
            out.append(dict(tool.schema))
        return out

    def on(self, event: str, handler: Callable[[Any], object]) -> None:
        """Register a hook (``"tool_result"``: see :mod:`tractkv.toolkit.hooks`)."""
        self._hooks.on(event, handler)

    def off(self, event: str, handler: Callable[[Any], object] | None = None) -> None:
        """Remove a hook handler (all of the event's handlers when ``handler`` is None)."""
        self._hooks.off(event, handler)

    def configure_llm(self, llm: Any) -> None:
        """Set the model (anything with ``chat(messages, tools=None, **params)``) used by model-backed calls."""
        if llm is not None and not callable(getattr(llm, "chat", None)):
            raise InvalidInput("an LLM client needs a chat(messages, tools=None, **params) method")
        self._llm = llm

    @property
    def llm(self) -> Any:
        return self._llm

    def configure_tool_summarization(
        self,
        instructions: dict[str, str] | None = None,
        auto_threshold: int | None = None,
        default_instructions: str | None = None,
    ) -> None:
        """Per-tool summarization instructions, and a token threshold above which results are summarized
        automatically (when no hook decides otherwise)."""
        if auto_threshold is not None and auto_threshold < 1:
            raise InvalidInput("auto_threshold must be a positive token count")
        self._summarization = {
            "instructions": dict(instructions or {}),
            "auto_threshold": auto_threshold,
            "default": default_instructions,
        }

    def _summarize_text(
        self, tool_name: str | None, text: str, instructions: str | None, target: int | None
    ) -> str:
        if self._llm is None:
            raise NoLLMConfigured("summarize")
        settings = self._summarization
        guide = instructions or (settings["instructions"].get(tool_name) if tool_name else None)
        guide = guide or settings["default"] or DEFAULT_SUMMARY_INSTRUCTIONS
        if target:
            guide += f" Keep it under about {target} tokens."
        response = self._llm.chat([{"role": "system", "content": guide}, {"role": "user", "content": text}])
        summary = getattr(response, "text", response)
        if not isinstance(summary, str) or not summary.strip():
            raise ContentError("the model returned an empty summary")
        return summary

    def tool_result(
        self,
        tool_call_id: str,
        name: str,
        content: Any,
        *,
        edit: str | None = None,
        is_error: bool = False,
        message: str | None = None,
        metadata: dict[str, Any] | None = None,
        usages: Sequence[UsageRecord] = (),
        hooks: bool = True,
    ) -> CommitInfo | None:
        """Commit the result of a tool call (answering the assistant message that made the call).

        With ``edit=<result commit>`` it replaces an earlier result (hooks are bypassed; the call id and name
        must match). Otherwise the ``tool_result`` hooks run first (see :mod:`tractkv.toolkit.hooks`) and may
        edit, summarize or reject it: then the return value is None and nothing is committed. Results over the
        configured auto-summarization threshold are summarized when no hook is registered. Whenever the
        committed text differs from ``content``, the raw original is kept (:meth:`original_of`).

        ``usages`` are the tool-usage records of the call (``ToolResult.usage_objects``): they are stored in
        the same transaction and the top-level ones linked (``links["usages"]``), so the usage history
        travels with the branch. ``hooks=False`` commits ``content`` as given (the agent loop uses it to
        answer a call whose result a hook rejected).
        """
        if not isinstance(tool_call_id, str) or not tool_call_id:
            raise InvalidInput("tool_call_id must be a non-empty string")
        if not isinstance(name, str) or not name:
            raise InvalidInput("name must be a non-empty string")
        text = (
            content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, sort_keys=True)
        )
        ref, head = self._writable("commit a tool result")
        reader = self._reader()
        call_commit, call_name = self._find_call(reader, tool_call_id)
        if call_name != name:
            raise InvalidInput(f"tool call {tool_call_id!r} called {call_name!r}, not {name!r}")
        target = None
        final: str | None = text
        if edit is not None:
            target = self._result_target(reader, edit, tool_call_id)
        elif hooks:
            final = self._run_result_hooks(tool_call_id, name, text)
            if final is None:
                return None
        assert final is not None
        return self._commit_tool_result(
            ref,
            head,
            call_commit,
            tool_call_id,
            name,
            final,
            text,
            target,
            is_error,
            message,
            metadata,
            usages,
        )

    def _result_target(self, reader: Reader, rev: str, tool_call_id: str) -> ObjectId:
        target = self._message_target(reader, rev)
        old = commit_info(reader, target, reader.get_commit(target), self._counter).content
        if not isinstance(old, dict) or old.get("tool_call_id") != tool_call_id:
            raise InvalidInput(f"{rev} is not a result of tool call {tool_call_id!r}")
        return target

    def _commit_tool_result(
        self,
        ref: str,
        head: ObjectId | None,
        call_commit: ObjectId,
        tool_call_id: str,
        name: str,
        final: str,
        text: str,
        target: ObjectId | None,
        is_error: bool,
        message: str | None,
        metadata: dict[str, Any] | None,
        usages: Sequence[UsageRecord] = (),
    ) -> CommitInfo:
        payload: dict[str, Any] = {
            "type": "dialogue",
            "role": "tool",
            "text": final,
            "tool_call_id": tool_call_id,
            "name": name,
        }
        if is_error:
            payload["is_error"] = True
        payload = normalize(payload)
        links: dict[str, tuple[Any, ...]] = {}
        extra: tuple[Any, ...] = ()
        if final != text:
            original = Blob(data={"type": "tool_original", "text": text})
            extra = (original,)
            links["original"] = (object_id(original),)
        if usages:
            nested = {child for record in usages for child in record.children}
            extra = (*extra, *usages)  # re-stored here: a gc since they were recorded cannot drop them
            links["usages"] = tuple(o for o in map(object_id, usages) if o not in nested)
        return self._commit_payload(
            ref,
            head,
            payload,
            operation="edit" if target is not None else "append",
            target=target,
            reply=call_commit,
            message=message,
            metadata=metadata,
            links=links,
            extra_objects=extra,
        )

    def _run_result_hooks(self, tool_call_id: str, name: str, text: str) -> str | None:
        tokens = self._counter.count(text)
        threshold = self._summarization["auto_threshold"]
        if not self._hooks.has("tool_result"):
            if threshold is not None and tokens > threshold:
                return self._summarize_text(name, text, None, None)
            return text
        pending = PendingToolResult(
            tool_call_id=tool_call_id,
            tool_name=name,
            content=text,
            token_count=tokens,
            summarizer=self._summarize_text,
            counter=self._counter.count,
        )
        self._hooks.run_tool_result(pending)
        return None if pending.decision == "reject" else pending.content

    def _find_call(self, reader: Reader, tool_call_id: str) -> tuple[ObjectId, str]:
        """The assistant commit in this context that made a tool call, and the tool's name."""
        state = self._head_state(reader)
        for slot in reversed(state.slots):
            message = state.message_of(reader, slot)
            for call in message.tool_calls:
                if call.id == tool_call_id:
                    return slot.commit, call.name
        raise InvalidInput(f"no assistant message in {self._where()} made tool call {tool_call_id!r}")

    def original_of(self, rev: str) -> str:
        """The raw tool result behind a (possibly edited or summarized) result commit."""
        reader = self._reader()
        oid = resolve_revision(reader, rev)
        commit = reader.get_commit(oid)
        for original_id in commit.links.get("original", ()):
            blob = reader[original_id]
            if isinstance(blob, Blob) and isinstance(blob.data, dict):
                return str(blob.data.get("text", ""))
        info = commit_info(reader, oid, commit, self._counter)
        if not isinstance(info.content, dict) or info.role != "tool":
            raise InvalidInput(f"{oid[:12]} is not a tool result")
        return str(info.content.get("text", ""))

    def _context_infos(self) -> list[CommitInfo]:
        reader = self._reader()
        state = self._head_state(reader)
        view = state.render(reader)
        infos = []
        for commit_id in view.commits:
            commit = reader.get_commit(commit_id)
            position = state.index[commit_id]
            source = state.slots[position].source
            shown = reader.get_commit(source) if source != commit_id else commit
            info = commit_info(reader, source, shown, self._counter)
            infos.append(attrs.evolve(info, commit_hash=commit_id) if source != commit_id else info)
        return infos

    def find_tool_results(self, name: str | None = None, after: str | None = None) -> list[CommitInfo]:
        """Tool results in the current context (optionally of one tool, or after a commit), in order."""
        infos = self._context_infos()
        if after is not None:
            after_id = resolve_revision(self._reader(), after)
            ids = [i.commit_hash for i in infos]
            infos = infos[ids.index(after_id) + 1 :] if after_id in ids else []
        return [
            i for i in infos if i.role == "tool" and (name is None or (i.content or {}).get("name") == name)
        ]

    def find_tool_calls(self, name: str | None = None) -> list[CommitInfo]:
        """Assistant messages in the current context that call tools (optionally a given tool)."""
        return [t.call for t in self.find_tool_turns(name)]

    def find_tool_turns(self, name: str | None = None) -> list[ToolTurn]:
        """Each assistant tool-calling message with the results answering its calls."""
        return group_turns(self._context_infos(), name, _call_ids)

    # --- generation ---------------------------------------------------------------------------------------

    def generate(
        self, llm: Any = None, tools: list[dict[str, Any]] | None = None, **params: Any
    ) -> CommitInfo:
        """Compile, call the model with the context's tools (or ``tools``), and commit its reply.

        The reply (text and tool calls) is committed with the tool set it was generated with and the
        generation parameters as ``generation_config``. A model error raises and commits nothing.
        """
        model = llm if llm is not None else self._llm
        if model is None:
            raise NoLLMConfigured("generate")
        ref, head = self._writable("generate")
        reader = self._reader()
        ctx = self.compile()
        offered = list(tools) if tools is not None else list(ctx.tools)
        openai_tools = [tool_to_openai(t) for t in offered] or None
        response = call_model(model, ctx.to_openai(), openai_tools, params)
        payload = normalize(
            {
                "type": "dialogue",
                "role": "assistant",
                "text": response_text(response),
                "tool_calls": response_tool_calls(response),
            }
        )
        config = {k: v for k, v in params.items() if v is not None}
        reported = getattr(response, "model", None)
        if isinstance(reported, str) and reported:
            config["model"] = reported
        state = self._head_state(reader)
        return self._commit_payload(
            ref,
            head,
            payload,
            operation="append",
            generation_config=config,
            tools=list(tools) if tools is not None else None,
            toolset=None if tools is not None else state.tools,
        )

    def chat(self, text: str, llm: Any = None, **params: Any) -> CommitInfo:
        """Commit a user message and the model's reply in one transaction (nothing lands if the model fails)."""
        with self.batch():
            self.user(text)
            return self.generate(llm, **params)

    # --- compression ---------------------------------------------------------------------------------------

    def compress(
        self,
        target_tokens: int | None = None,
        from_commit: str | None = None,
        to_commit: str | None = None,
        instructions: str | None = None,
        content: str | None = None,
    ) -> CommitInfo:
        """Replace a range of messages by a summary (from the model, or ``content`` given by you).

        The range runs from ``from_commit`` to ``to_commit`` (default: every message); pinned messages and
        system instructions in it stay verbatim. The summary commit records its sources and keeps the tool
        set in force. Nothing is deleted: the summarized commits stay in history (see ``log``).
        """
        ref, head = self._writable("compress")
        reader = self._reader()
        state = self._head_state(reader)
        view = state.render(reader)
        ids = list(view.commits)
        if not ids:
            raise InvalidInput("nothing to compress: the context is empty")
        start = ids.index(self._message_target(reader, from_commit)) if from_commit else 0
        end = ids.index(self._message_target(reader, to_commit)) if to_commit else len(ids) - 1
        if start > end:
            raise InvalidInput("from_commit comes after to_commit")
        in_range = set(ids[start : end + 1])
        keep = {
            c
            for c in in_range
            if state.slots[state.index[c]].priority == 1 or state.slots[state.index[c]].kind == "instruction"
        }
        # A tool call and its results stay together (APIs reject a result without its call): a turn that is
        # partly pinned or partly outside the range is kept whole.
        for turn in self.find_tool_turns():
            members = set(turn.all_hashes)
            if members & in_range and (members - in_range or members & keep):
                keep |= members
        sources = [c for c in ids[start : end + 1] if c not in keep]
        if not sources:
            raise InvalidInput(
                "nothing to compress in that range (every message is pinned or an instruction)"
            )
        if content is None:
            text = "\n".join(
                f"{m.role}: {m.content}"
                for m, c in zip(view.messages, view.commits, strict=True)
                if c in sources
            )
            content = self._summarize_text(None, text, instructions or COMPRESS_INSTRUCTIONS, target_tokens)
        payload = normalize({"type": "dialogue", "role": "user", "text": content})
        return self._commit_payload(
            ref,
            head,
            payload,
            operation="compress",
            message=f"compress {len(sources)} messages",
            links={"sources": tuple(sources)},
            toolset=state.tools,
        )

    def compress_tool_calls(
        self, name: str | None = None, commits: list[str] | None = None
    ) -> list[CommitInfo]:
        """Summarize tool results (of one tool, or the given result commits) in place, as edits.

        Each result keeps its call id and name, so calls and results still pair up; the raw original stays
        recoverable with :meth:`original_of`. Needs a model (see :meth:`configure_llm`).
        """
        if commits is not None:
            reader = self._reader()
            wanted = {self._message_target(reader, c) for c in commits}
            results = [r for r in self.find_tool_results() if r.commit_hash in wanted]
        else:
            results = self.find_tool_results(name)
        out = []
        for result in results:
            data = result.content if isinstance(result.content, dict) else {}
            tool = str(data.get("name", ""))
            original = self.original_of(result.commit_hash)
            summary = self._summarize_text(tool, str(data.get("text", "")), None, None)
            ref, head = self._writable("compress tool results")
            reader = self._reader()
            call_id = str(data.get("tool_call_id"))
            call_commit, _ = self._find_call(reader, call_id)
            committed = self._commit_tool_result(
                ref,
                head,
                call_commit,
                call_id,
                tool,
                summary,
                original,
                result.commit_hash,
                bool(data.get("is_error")),
                f"compress {tool}",
                None,
            )
            out.append(committed)
        return out

    # --- agent toolkit (tractkv.toolkit, loaded on first use) ------------------------------------------------

    def as_tools(
        self,
        profile: str | ToolProfile = "self",
        overrides: dict[str, str] | None = None,
        format: str = "openai",
    ) -> list[dict[str, Any]]:
        """The built-in tools of a profile (``self``, ``supervisor``, ``full``) as request-ready schemas,
        with ``overrides`` ({name: description}) applied; ``format`` is ``openai`` or ``anthropic``."""
        from tractkv.toolkit.profiles import as_tools

        return as_tools(profile, overrides, format)

    def tool_usages(
        self, commit: str | None = None, name: str | None = None, status: str | None = None
    ) -> list[ToolUsage]:
        """Tool executions in the history of HEAD (nested ones included), plus running and interrupted ones.

        ``commit`` keeps those started by that assistant commit or answered in that tool result commit;
        ``name`` those of one tool; ``status`` one of pending, success, error, interrupted.
        """
        from tractkv.engine.usage_tree import STATUSES, select_usages, usage_forest

        if status is not None and status not in STATUSES:
            raise InvalidInput(f"status must be one of {STATUSES}, not {status!r}")
        reader = self._reader()
        commit_id = resolve_revision(reader, commit) if commit is not None else None
        roots = usage_forest(reader, self._head_commit(reader))
        return select_usages(roots, commit=commit_id, name=name, status=status)

    def usage_tree(self, commit: str | None = None) -> list[UsageNode]:
        """The usage trees of one message (an assistant commit or its tool result) or of the whole history."""
        from tractkv.engine.usage_tree import select_trees, usage_forest

        reader = self._reader()
        commit_id = resolve_revision(reader, commit) if commit is not None else None
        return select_trees(usage_forest(reader, self._head_commit(reader)), commit_id)

    def tool_usage_stats(self) -> dict[str, ToolStats]:
        """Per tool: count, successes, errors, success rate, p50 / p95 duration (history of HEAD)."""
        from tractkv.engine.usage_stats import usage_stats
        from tractkv.engine.usage_tree import flatten, usage_forest

        reader = self._reader()
        return usage_stats(flatten(usage_forest(reader, self._head_commit(reader))))

    def export(self, format: str = "json") -> str:
        """The conversation at HEAD with its tool-usage history, as ``json`` or ``markdown`` text."""
        from tractkv.toolkit.export import export_conversation

        return export_conversation(self, format)

    def run(
        self, llm: Any = None, executor: ToolExecutor | None = None, max_steps: int = 10, **params: Any
    ) -> RunResult:
        """The agent loop: compile, generate with the executor's tools, execute the calls (usage tracked,
        results through the tool_result hooks), repeat until the model stops calling tools or ``max_steps``
        model calls (see :mod:`tractkv.toolkit.loop`). The default executor offers the ``self`` profile."""
        from tractkv.toolkit.loop import run

        return run(self, llm, executor, max_steps=max_steps, **params)

    def _no_batch(self, action: str) -> None:
        if self._batch is not None:
            raise InvalidInput(f"{action} is not allowed inside batch()")


def call_model(
    model: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, params: dict[str, Any]
) -> Any:
    """Call ``model.chat``; wrap anything that is not a tractkv error so callers catch one root."""
    try:
        return model.chat(messages, tools=tools, **params)
    except TractError:
        raise
    except Exception as exc:
        raise ModelCallFailed(f"model call failed: {exc!r}") from exc


def response_text(response: Any) -> str:
    """The text of a model reply (an LLMResponse, a plain string, or an OpenAI-shaped message dict)."""
    if isinstance(response, str):
        return response
    if isinstance(response, dict):
        return str(response.get("content") or "")
    text = getattr(response, "text", None)
    if text is not None and not isinstance(text, str):
        raise ContentError(f"model reply text must be a string, got {type(text).__name__}")
    return text or ""


def response_tool_calls(response: Any) -> list[Any]:
    """The tool calls of a model reply, as ``{"id", "name", "arguments"}`` dicts."""
    raw = response.get("tool_calls") if isinstance(response, dict) else getattr(response, "tool_calls", None)
    calls = []
    for call in raw or ():
        if isinstance(call, dict) and isinstance(call.get("function"), dict):  # OpenAI wire shape
            calls.append(
                {
                    "id": call.get("id"),
                    "name": call["function"].get("name"),
                    "arguments": call["function"].get("arguments") or "{}",
                }
            )
        else:
            calls.append(call)
    return calls


def _call_ids(info: CommitInfo) -> list[str]:
    data = info.content if isinstance(info.content, dict) else {}
    return [str(c["id"]) for c in data.get("tool_calls", ())]


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
