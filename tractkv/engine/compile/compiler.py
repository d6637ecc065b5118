"""Compile: the state at any commit, from an in-memory cache, a persisted checkpoint, or objects.

Cost model:
    * compile right after an append: O(1) work plus one C-level copy of the message list (the head state is
      kept in memory and extended by every commit);
    * a fresh process: load the nearest checkpoint on the first-parent chain (chunked, one read per 1,024
      messages; through a store or batch its record only, the chunks on first use: an append needs none) and
      replay the commits after it; no blob is read until a compiled message is used; checkpoints are written
      every :data:`CHECKPOINT_EVERY` replayed commits and when a Tract closes;
    * a merge replays as a three-way merge of the states of the merge base, ours and theirs.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from tractkv.engine.compile.state import CompileState, bulk
from tractkv.engine.compile.view import View, annotation_cache
from tractkv.engine.content import MERGE, Message, TokenCounter, apply_key_order
from tractkv.engine.history import ancestors, merge_base
from tractkv.engine.values import CompiledContext, FrozenPrefix
from tractkv.ids import ObjectId
from tractkv.model import Blob, Commit, ToolSchema, ToolSet
from tractkv.store import Reader, Store, WriteBatch

if TYPE_CHECKING:
    from tractkv.engine.compile.merge3 import Conflict

CHECKPOINT_EVERY = 256  # replayed commits after which the resulting state is saved as a checkpoint
CACHE_STATES = 8  # compile states kept in memory (besides the one a Tract extends)


class Compiler:
    """Computes and caches :class:`CompileState` objects for commits of one store."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._cache: OrderedDict[ObjectId, CompileState] = OrderedDict()
        self._deep: dict[ObjectId, CompileState] = {}  # states of a deep merge replay (see state_at)
        self._replaying = False  # inside an outermost state_at (nested replays of merges run under it)
        self.unsaved: dict[ObjectId, CompileState] = {}  # states worth a checkpoint, saved by flush()

    def clear(self) -> None:
        self._cache.clear()
        self._deep.clear()
        self.unsaved.clear()

    def remember(self, state: CompileState) -> None:
        """Cache a state (most recently used last)."""
        if state.head is None:
            return
        self._cache[state.head] = state
        self._cache.move_to_end(state.head)
        while len(self._cache) > CACHE_STATES:
            self._cache.popitem(last=False)

    def peek(self, oid: ObjectId) -> CompileState | None:
        return self._cache.get(oid)

    def state_at(self, reader: Reader, oid: ObjectId | None, *, take: bool = False) -> CompileState:
        """The state at a commit (None: the empty state).

        With ``take=True`` the caller owns the returned state (it is removed from the cache and may be
        mutated); otherwise it is shared and must be treated as read-only.
        """
        if oid is None:
            return CompileState(self.counter.name)
        deep = self._deep.get(oid)
        if deep is not None:
            return deep.copy() if take else deep
        cached = self._cache.get(oid)
        if cached is not None:
            if take:
                del self._cache[oid]
                return cached
            self._cache.move_to_end(oid)
            return cached
        if isinstance(reader, Store):
            # A checkpoint load or a replay reads many rows and objects: one read transaction for all.
            with reader.snapshot() as snapshot:
                return self._state_at_any_depth(snapshot, oid, take, later=reader)
        return self._state_at_any_depth(
            reader, oid, take, later=reader if isinstance(reader, WriteBatch) else None
        )

    def rebuild(self, reader: Reader, oid: ObjectId) -> CompileState:
        """The state at ``oid`` replayed from objects, its own checkpoint not used (a lazily loaded checkpoint
        found damaged when its slots are read: :meth:`CompileState.load`). Owned by the caller; not cached."""
        if isinstance(reader, Store):
            with reader.snapshot() as snapshot:
                return self._state_at(snapshot, oid, take=True, from_objects=True)
        return self._state_at(reader, oid, take=True, from_objects=True)

    def _state_at_any_depth(
        self, reader: Reader, oid: ObjectId, take: bool, *, later: Reader | None = None
    ) -> CompileState:
        """:meth:`_state_at`, which replays a merge by computing the merged-in side's state first (a
        recursion). Merges nested hundreds deep exceed Python's recursion limit: then the outermost call
        computes the states of the merged-in sides iteratively, deepest first, so the replay finds each one
        ready and never recurses more than one level."""
        if self._replaying:  # a replay inside a merge: the outermost call handles the depth
            return self._state_at(reader, oid, take)
        self._replaying = True
        try:
            try:
                return self._state_at(reader, oid, take, later=later)
            except RecursionError:
                pass
            for needed in self._merge_order(reader, oid):
                self._remember_deep(self._state_at(reader, needed, take=True))
            return self._state_at(reader, oid, take)
        finally:
            self._replaying = False
            self._deep.clear()  # only this replay needed them (and they can be many)

    def _later(
        self, later: Reader | None, oid: ObjectId
    ) -> tuple[Reader, Callable[[Reader], CompileState]] | None:
        if later is None:
            return None
        return later, lambda reader: self.rebuild(reader, oid)  # holds no reader: a batch may be retargeted

    def retarget(self, batch: WriteBatch, store: Store) -> None:
        """A batch landed in ``store``: every cached state (and live compiled context) that read through it
        reads through the store from now on, so none keeps the batch (every object it staged) alive."""
        for state in [*self._cache.values(), *self.unsaved.values(), *self._deep.values()]:
            state.retarget(batch, store)
        for ref in list(_LAZY.values()):
            messages = ref()
            if messages is not None:
                messages.view.retarget(batch, store)

    def _merge_order(self, reader: Reader, oid: ObjectId) -> list[ObjectId]:
        """Every merged-in side (and merge base) the replay of ``oid`` needs, deepest first (an explicit
        stack: no recursion, however deep the nesting)."""
        order: list[ObjectId] = []
        seen: set[ObjectId] = set()
        stack: list[tuple[ObjectId, bool]] = [(oid, False)]
        while stack:
            current, done = stack.pop()
            if done:
                if current != oid:
                    order.append(current)
                continue
            if current in seen:
                continue
            seen.add(current)
            stack.append((current, True))
            walk: ObjectId | None = current
            while walk is not None and walk not in self._deep:
                commit = reader.get_commit(walk)
                for other in commit.parents[1:]:
                    stack.append((other, False))
                    base = merge_base(reader, commit.parents[0], other)
                    if base is not None:
                        stack.append((base, False))
                walk = commit.parents[0] if commit.parents else None
        return order

    def _remember_deep(self, state: CompileState) -> None:
        """Keep a state computed for a deep replay (the LRU is too small for a nesting hundreds deep)."""
        if state.head is not None:
            self._deep[state.head] = state

    def _state_at(
        self,
        reader: Reader,
        oid: ObjectId,
        take: bool,
        *,
        later: Reader | None = None,
        from_objects: bool = False,
    ) -> CompileState:
        """The state at ``oid``: the nearest cached or checkpointed state on its first-parent chain, then the
        commits after it replayed. ``later``: a reader that outlives this call, through which a checkpoint's
        slots are read on first use (:meth:`CompileState.load`). ``from_objects``: no cache or checkpoint of
        ``oid`` itself (:meth:`rebuild`)."""
        chain: list[tuple[ObjectId, Commit]] = []
        current: ObjectId | None = oid
        state: CompileState | None = None
        while current is not None:
            skip = from_objects and current == oid
            found = None if skip else self._cache.pop(current, None)
            if found is None and not skip and current in self._deep:
                found = self._deep[current].copy()
            if found is None and not skip:
                found = CompileState.load(
                    reader, current, self.counter.name, later=self._later(later, current)
                )
            if found is not None:
                state = found
                break
            commit = reader.get_commit(current)
            chain.append((current, commit))
            current = commit.parents[0] if commit.parents else None
        if state is None:
            state = CompileState(self.counter.name)
        with bulk():  # a long replay makes many long-lived objects and no cycles (state.bulk)
            for commit_id, commit in reversed(chain):
                if len(commit.parents) > 1:
                    state, _ = self._merge(reader, state, commit_id, commit)
                else:
                    state.apply(reader, commit_id, commit, self.counter)
        if len(chain) >= CHECKPOINT_EVERY and not from_objects:
            self.unsaved[oid] = state
        if not take:
            self.remember(state)
        return state

    def _merge(
        self, reader: Reader, ours: CompileState, oid: ObjectId, commit: Commit
    ) -> tuple[CompileState, list[Conflict]]:
        strategy = merge_strategy(reader, commit)
        state = ours
        conflicts: list[Conflict] = []
        if state.ancestors is None and state.head is not None:
            state.ancestors = ancestors(reader, state.head)
        for other in commit.parents[1:]:
            state, found = self.merge_into(reader, state, other, strategy)
            conflicts.extend(found)
        state.head = oid
        state.rel_since = None  # a merge: its relation row is built from its history (engine/relations.py)
        if state.ancestors is not None:
            state.ancestors.add(oid)
            state.commit_count = len(state.ancestors)
        if commit.tools is not None:
            state.tools, state.tools_commit = commit.tools, oid
        return state, conflicts

    def merge_into(
        self, reader: Reader, ours: CompileState, theirs_oid: ObjectId, strategy: str
    ) -> tuple[CompileState, list[Conflict]]:
        """Three-way merge of ``theirs_oid`` into a state (which is not modified)."""
        base_oid = merge_base(reader, ours.head, theirs_oid) if ours.head is not None else None
        theirs = self.state_at(reader, theirs_oid)
        base = self.state_at(reader, base_oid)
        from tractkv.engine.compile.merge3 import merge_states  # lazy: only a merge loads the three-way merge

        merged, conflicts = merge_states(
            base, ours, theirs, strategy, lambda slot: annotation_cache(reader, slot)
        )
        if ours.ancestors is None and ours.head is not None:
            ours.ancestors = ancestors(reader, ours.head)
        assert ours.ancestors is not None or ours.head is None
        known = ours.ancestors or set()
        merged.ancestors = known | ancestors(reader, theirs_oid, stop=known)
        merged.commit_count = len(merged.ancestors)
        return merged, conflicts

    def flush(self, store: Store, extra: CompileState | None = None) -> None:
        """Write pending checkpoints (and ``extra``) in one small transaction."""
        batch = store.new_batch()
        if self.stage(batch, extra):
            store.apply(batch)

    def stage(self, batch: WriteBatch, extra: CompileState | None = None) -> bool:
        """Stage pending checkpoints (and ``extra``) in a batch, e.g. the one that writes the commits they
        checkpoint (one transaction instead of two); True when anything was staged."""
        states = dict(self.unsaved)
        if extra is not None and extra.head is not None:
            states[extra.head] = extra
        self.unsaved.clear()
        from tractkv.engine.compile.relations import stage_row  # lazy: keeps `import tractkv` light

        for state in states.values():
            if state.head is not None and not batch.has(state.head):
                # a replayed state a session took and then moved on in a batch that failed: its commits never
                # landed, so there is nothing to checkpoint (the session rebuilds from the store)
                continue
            state.save(batch)
            stage_row(batch, state)  # the spawn / collapse summary of its history (engine/relations.py)
        return bool(states)


def merge_strategy(reader: Reader, commit: Commit) -> str:
    """The conflict strategy a merge commit recorded (``ours``, as git, when it recorded none)."""
    if commit.content is not None:
        blob = reader.get(commit.content)
        if isinstance(blob, Blob) and isinstance(blob.data, dict) and blob.data.get("type") == MERGE:
            return str(blob.data.get("strategy", "ours"))
    return "ours"


def merge_payload(strategy: str, source: str, conflicts: int) -> dict[str, Any]:
    """The content blob of a merge commit (bookkeeping: never compiled into a message)."""
    return {"type": MERGE, "strategy": strategy, "source": source, "conflicts": conflicts}


class _LazyMessages(FrozenPrefix[Message]):
    """The messages of a compiled context whose view renders them on first use (tracked while alive, so the
    session can render the rest before its store closes)."""

    __slots__ = ("__weakref__", "view")

    def __init__(self, view: View) -> None:
        super().__init__(view.messages, len(view), resolve=view.message)  # type: ignore[arg-type]
        self.view = view


# Live lazy contexts by id (not a WeakSet: that would hash them, and a sequence hashes by its items).
_LAZY: dict[int, weakref.ref[_LazyMessages]] = {}


def _lazy_messages(view: View) -> FrozenPrefix[Message]:
    messages = _LazyMessages(view)
    key = id(messages)
    _LAZY[key] = weakref.ref(messages, lambda _ref: _LAZY.pop(key, None))
    return messages


def render_all(reader: Reader) -> None:
    """Render every message still left as a slot in a live compiled context that reads through ``reader`` (a
    session calls it before its store closes, so a compiled context stays usable after the Tract is closed;
    a context already dropped costs nothing)."""
    for key, ref in list(_LAZY.items()):
        messages = ref()
        if messages is None:
            continue
        view = messages.view
        through = view.reader
        if isinstance(through, WriteBatch):
            through = through._base  # a batch reads its store for what it does not hold
        if through is reader:
            view.render_all()
            _LAZY.pop(key, None)


class ToolDefinitions(tuple[dict[str, Any], ...]):
    """The schemas of a tool set (a tuple) with its prompt-cache breakpoint (``cache``: ``"5m"`` / ``"1h"`` /
    None), which :func:`context_of` hands to the compiled context."""

    cache: str | None = None


def load_tools(reader: Reader, toolset_id: ObjectId | None) -> tuple[dict[str, Any], ...]:
    """The schemas of a tool set, in order (empty for None), each with its keys in the order the tool set
    records (:func:`~tractkv.engine.content.apply_key_order`; canonical order where it records none); a
    :class:`ToolDefinitions` when the set has a cache breakpoint."""
    if toolset_id is None:
        return ()
    toolset = reader[toolset_id]
    assert isinstance(toolset, ToolSet)
    schemas = []
    for index, tool_id in enumerate(toolset.tools):
        tool = reader[tool_id]
        assert isinstance(tool, ToolSchema)
        order = toolset.order[index] if toolset.order else None
        schemas.append(tool.schema if order is None else apply_key_order(tool.schema, order))
    return tuple(schemas) if toolset.cache is None else marked_tools(schemas, toolset.cache)


def marked_tools(schemas: Iterable[dict[str, Any]], cache: str) -> ToolDefinitions:
    """``schemas`` as :class:`ToolDefinitions` with the cache breakpoint ``cache``."""
    marked = ToolDefinitions(schemas)
    marked.cache = cache
    return marked


def context_of(
    reader: Reader,
    state: CompileState,
    counter: TokenCounter,
    tools: tuple[dict[str, Any], ...],
    include_reasoning: bool = False,
    *,
    tool_tokens: int = 0,
) -> CompiledContext:
    """What compile returns for ``state`` (``tools`` are its tool set's schemas, see :func:`load_tools`;
    ``tool_tokens`` their estimated tokens, added to the messages' in ``token_count``), with the repairs the
    tool-pairing pass made (:mod:`tractkv.engine.compile.pairing`)."""
    view = state.render(reader, include_reasoning)
    # O(1): the view's lists are append-only. A view rebuilt from a checkpoint renders each message on first
    # use (a session renders what is left before its store closes: render_all).
    messages: FrozenPrefix[Message] = (
        _lazy_messages(view) if view.lazy or view.base is not None else FrozenPrefix(view.messages)  # type: ignore[arg-type]
    )
    return CompiledContext(
        messages=messages,
        token_count=view.total_tokens(counter) + tool_tokens,
        commit_count=state.commit_count,
        commit_ids=FrozenPrefix(view.commits, len(view), resolve=view.commit_at),  # type: ignore[arg-type]
        generation_configs=FrozenPrefix(view.commits, len(view), resolve=view.gen_at),  # type: ignore[arg-type]
        token_source=counter.name,
        head=state.head,
        tools=tools,
        tools_cache=getattr(tools, "cache", None),
        repairs=tuple(view.pairing.repairs),
        open_calls=tuple(view.pairing.open),
    )
