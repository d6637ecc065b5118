"""Values the engine returns: commit info, compiled contexts, status, diffs, reflog, gc reports."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, overload

import attrs

from tractkv.errors import ToolPairingError
from tractkv.ids import ObjectId

from .content import Message

T = TypeVar("T")


class FrozenPrefix(Sequence[T]):
    """A read-only view of the first ``n`` items of an append-only list: O(1) to make, however long.

    compile() hands these out instead of tuple copies, so compiling after an append costs the same at 1k
    and 100k messages. Sound because the engine only ever appends to the lists it shares (View.add) and
    replaces a view wholesale otherwise. Compares equal to any sequence of equal items (tuples and lists
    included); slicing returns a tuple.

    With ``resolve``, item *i* is ``resolve(i)`` instead of ``items[i]`` (a compiled view renders a message on
    first use, :meth:`tractkv.engine.state.View.message`).
    """

    __slots__ = ("_items", "_n", "_resolve")

    def __init__(
        self, items: list[T], n: int | None = None, resolve: Callable[[int], T] | None = None
    ) -> None:
        self._items = items
        self._n = len(items) if n is None else n
        self._resolve = resolve

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...
    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        resolve = self._resolve
        if isinstance(index, slice):
            if resolve is not None:
                return tuple(resolve(i) for i in range(self._n)[index])
            return (
                tuple(self._items[: self._n][index])
                if self._n != len(self._items)
                else tuple(self._items[index])
            )
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("index out of range")
        return self._items[index] if resolve is None else resolve(index)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle (and so ``copy.deepcopy``) the items, rendered now: a lazy sequence pickles as a tuple (its
        ``resolve`` reads a store, which cannot be pickled), a plain one as a FrozenPrefix of its n items."""
        if self._resolve is not None:
            return (tuple, (tuple(self),))
        return (FrozenPrefix, (list(itertools.islice(self._items, self._n)),))

    def __iter__(self) -> Iterator[T]:
        if self._resolve is not None:
            return map(self._resolve, range(self._n))
        return itertools.islice(self._items, self._n)

    def __reversed__(self) -> Iterator[T]:
        get = self._resolve or self._items.__getitem__
        return (get(i) for i in range(self._n - 1, -1, -1))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenPrefix | tuple | list):
            return len(other) == self._n and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


def timestamp(micros: int) -> datetime:
    """A commit timestamp (µs since the epoch) as an aware UTC datetime."""
    if 0 <= micros < _EXACT_MICROS:  # the same datetime, by exact integer arithmetic (one per append)
        return _EPOCH + timedelta(0, 0, micros)
    return datetime.fromtimestamp(micros / 1_000_000, tz=UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Below 2**32 seconds (the year 2106) ``micros / 1e6`` is within a quarter of a µs of the exact time, so
# ``fromtimestamp`` (which rounds to the nearest µs) gives exactly ``micros``: the epoch plus a timedelta is the
# same value (tests/engine/test_commit_info.py checks the two agree at the bounds and in between).
_EXACT_MICROS = 2**32 * 1_000_000


@attrs.frozen(kw_only=True)
class CommitInfo:
    """A commit as users see it.

    Attributes:
        commit_id: the commit's id. parent_ids: its parents (two for a merge).
        operation: append, edit, annotate, merge or compress. content_type / role: of its content.
        message: a note for people. metadata: JSON-like data kept with the commit.
        token_count: tokens its content costs in a context (0 for bookkeeping commits).
        created_at: when it was made (UTC). edit_target: the message an edit or annotation acts on.
        reply_to: the commit it answers (a tool result answers the call). generation_config: model parameters.
        content_id / toolset_id: the ids of its content blob and tool set. content: the content's data.
        usage: the provider's token usage for a recorded or generated reply (``input_tokens``,
            ``output_tokens`` and the provider's own counts), read from ``metadata["usage"]``; else None.
    """

    commit_id: ObjectId
    parent_ids: tuple[ObjectId, ...]
    operation: str
    content_type: str | None
    role: str | None
    message: str | None
    metadata: dict[str, Any] | None = attrs.field(eq=False, hash=False)
    token_count: int
    created_at: datetime
    edit_target: ObjectId | None = None
    reply_to: ObjectId | None = None
    generation_config: dict[str, Any] | None = attrs.field(default=None, eq=False, hash=False)
    content_id: ObjectId | None = None
    toolset_id: ObjectId | None = None
    content: Any = attrs.field(default=None, eq=False, hash=False)
    usage: dict[str, Any] | None = attrs.field(default=None, eq=False, hash=False)

    @property
    def commit_hash(self) -> ObjectId:
        """Deprecated alias of :attr:`commit_id` (the name README examples used before 0.2)."""
        import warnings

        warnings.warn("CommitInfo.commit_hash is deprecated; use commit_id", DeprecationWarning, stacklevel=2)
        return self.commit_id

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (timestamps as ISO 8601)."""
        from tractkv.model import to_jsonable

        out = attrs.asdict(self, recurse=False)
        out["parent_ids"] = list(self.parent_ids)
        out["created_at"] = self.created_at.isoformat()
        return dict(to_jsonable(out))


@attrs.frozen(kw_only=True)
class Repair:
    """One repair compile made so that tool calls and results pair up (:mod:`tractkv.engine.pairing`).

    Attributes:
        kind: ``placeholder_result`` (an unanswered call got a placeholder error result) or
            ``dropped_result`` (a result answering no open call was left out).
        commit_id: the dropped result's commit, or the commit of the message that made the call.
        call_id: the tool call id concerned.
        detail: one sentence for people.
    """

    kind: str
    commit_id: ObjectId
    call_id: str
    detail: str

    def __str__(self) -> str:
        return self.detail


@attrs.frozen(kw_only=True)
class CompiledContext:
    """The exact context a model call needs, compiled from one commit.

    ``messages``, ``commit_ids`` and ``generation_configs`` are aligned: message *i* was added by commit
    ``commit_ids[i]`` (edits keep the original commit's position and hash; a placeholder result takes the
    commit of the message that made its call, and a ``None`` config). ``repairs`` lists what compile changed
    so that every tool call is answered before the next message and every result answers an open call
    (:mod:`tractkv.engine.pairing`); empty for a well-formed history. ``open_calls`` names the calls of the
    last tool turn still waiting for results (a tool run in progress; such a context is not sent to a model:
    ``generate`` raises :class:`~tractkv.errors.UnansweredToolCalls`). ``dropped`` lists the message commits
    ``compile(max_tokens=N)`` left out to fit N tokens (:mod:`tractkv.engine.window`); empty otherwise.

    A context compiled from a checkpoint reads each message's blob from the store on first use of
    ``messages``. Its session renders what is left before it closes, gcs, hard-resets or deletes a branch; a
    ``gc`` run by another process can still remove a blob not read yet (then reading that message raises
    :class:`~tractkv.errors.ObjectNotFound`). :meth:`load` reads every message now.
    """

    messages: Sequence[Message]
    token_count: int
    commit_count: int
    commit_ids: Sequence[ObjectId]
    generation_configs: Sequence[dict[str, Any] | None] = attrs.field(eq=False, hash=False)
    token_source: str
    head: ObjectId | None = None
    tools: tuple[dict[str, Any], ...] = attrs.field(default=(), eq=False, hash=False)
    repairs: tuple[Repair, ...] = ()
    open_calls: tuple[str, ...] = ()
    dropped: tuple[ObjectId, ...] = ()

    def __len__(self) -> int:
        return len(self.messages)

    def load(self) -> CompiledContext:
        """Read every message now (a context compiled from a checkpoint reads them on first use) and return
        this context: later reads need no store (another process's gc cannot take them away)."""
        for _ in self.messages:
            pass
        return self

    def check_pairing(self) -> None:
        """Raise when compile had to repair the pairing of tool calls and results.

        Raises:
            ToolPairingError: ``repairs`` is not empty (the error names the first).
        """
        if self.repairs:
            raise ToolPairingError(self.repairs)

    def to_dicts(self) -> list[dict[str, Any]]:
        """Provider-neutral dicts (``role``, ``content`` and any extras), fresh copies."""
        return [m.to_dict() for m in self.messages]

    def to_openai(self) -> list[dict[str, Any]]:
        """Messages for OpenAI's chat completions API."""
        from tractkv.engine.render import messages_to_openai

        return messages_to_openai(self.messages)

    def to_anthropic(self) -> dict[str, Any]:
        """``{"system": ..., "messages": [...]}`` for Anthropic's messages API."""
        from tractkv.engine.render import messages_to_anthropic

        return messages_to_anthropic(self.messages)

    def to_openai_params(self, strict: bool = False) -> dict[str, Any]:
        """``{"messages": [...], "tools": [...]}`` for ``client.chat.completions.create(**params)``.

        ``tools`` is omitted when the context has none; tool schemas stored in Anthropic's shape are converted.

        Raises:
            ToolPairingError: ``strict`` and compile made repairs (see :meth:`check_pairing`).
        """
        from tractkv.engine.render import openai_params

        if strict:
            self.check_pairing()

        return openai_params(self.messages, copy.deepcopy(list(self.tools)))

    def to_anthropic_params(self, strict: bool = False) -> dict[str, Any]:
        """``{"system": ..., "messages": [...], "tools": [...]}`` for ``client.messages.create(**params)``.

        ``system`` is omitted when empty and ``tools`` when there are none; OpenAI-shaped tools are converted.

        Raises:
            ToolPairingError: ``strict`` and compile made repairs (see :meth:`check_pairing`).
        """
        from tractkv.engine.render import anthropic_params

        if strict:
            self.check_pairing()

        return anthropic_params(self.messages, copy.deepcopy(list(self.tools)))


@attrs.frozen(kw_only=True)
class BranchInfo:
    """A local or remote-tracking branch."""

    name: str
    head: ObjectId | None
    is_current: bool
    is_remote: bool = False


@attrs.frozen(kw_only=True)
class StatusInfo:
    """Where HEAD is and what the context holds.

    ``token_count`` is calibrated by the provider when it can be (:mod:`tractkv.engine.calibration`):
    ``count_source`` says ``"reported"`` (the newest recorded reply's reported input tokens, ``reported_by``,
    plus its output and the estimate of what came after) or ``"estimated"`` (the local estimate).
    ``estimated_tokens`` is the local estimate either way (what ``compile`` reports); ``token_source`` names
    the counter behind the estimate.
    """

    branch: str | None
    head: ObjectId | None
    detached: bool
    commit_count: int
    message_count: int
    token_count: int
    token_budget: int | None
    token_source: str
    upstream: str | None = None
    ahead: int | None = None
    behind: int | None = None
    count_source: str = "estimated"
    estimated_tokens: int | None = None
    reported_by: ObjectId | None = None
    # the branch's stored budget policy (engine/budget.py): what a commit over the limit does, the limit's
    # fraction of the budget, and the last overrun recorded on this branch
    budget_action: str | None = None
    budget_threshold: float | None = None
    budget_overrun: BudgetOverrun | None = None

    @property
    def budget_used(self) -> float | None:
        """Fraction of the token budget in use, or None without a budget."""
        if not self.token_budget:
            return None
        return self.token_count / self.token_budget


@attrs.frozen(kw_only=True)
class DiffEntry:
    """One change between two compiled contexts."""

    change: str  # "added", "removed", "modified"
    commit_id: ObjectId
    before: Message | None
    after: Message | None
    index_before: int | None
    index_after: int | None


@attrs.frozen(kw_only=True)
class ContextDiff:
    """The difference between the compiled contexts of two commits."""

    base: ObjectId | None
    target: ObjectId | None
    entries: tuple[DiffEntry, ...]
    token_delta: int

    @property
    def is_empty(self) -> bool:
        return not self.entries


@attrs.frozen(kw_only=True)
class MergeResult:
    """What merge did: ``fast-forward``, ``merge`` (a merge commit), or ``up-to-date``."""

    kind: str
    head: ObjectId | None
    commit: CommitInfo | None
    conflicts_resolved: int = 0
    strategy: str = "auto"


@attrs.frozen(kw_only=True)
class ReflogEntry:
    """One move of a branch: from ``old`` to ``new``, by which operation, when."""

    ref: str
    old: ObjectId | None
    new: ObjectId | None
    operation: str
    message: str
    created_at: datetime
    hard: bool = False
    seq: int = 0


@attrs.frozen(kw_only=True)
class GcResult:
    """What gc removed and kept."""

    removed_objects: int
    removed_bytes: int
    kept_objects: int
    removed_checkpoints: int


@attrs.frozen(kw_only=True)
class RunResult:
    """How an agent run ended.

    Attributes:
        text: the text of the model's last reply (often "" when the run ended on tool calls).
        steps: model calls made.
        stop_reason: ``done`` (a reply without tool calls), ``max_steps``, or ``detached``.
        head: the commit HEAD points at afterwards.
        usage_ids: the top-level usage ids of the run's tool executions, in order.
    """

    text: str
    steps: int
    stop_reason: str = "done"
    head: ObjectId | None = None
    usage_ids: tuple[str, ...] = ()

    @property
    def tool_calls(self) -> int:
        return len(self.usage_ids)


@attrs.frozen(kw_only=True)
class BudgetOverrun:
    """A commit that took a branch's compiled context over its budget's limit (``threshold * max_tokens``,
    :mod:`tractkv.engine.budget`): the payload of the ``budget_exceeded`` event and what ``status`` shows as
    the branch's last overrun.

    ``commit_id`` is the commit that went over, ``token_count`` the context's tokens with it; ``action`` is
    what the budget did (``warn``: nothing more; ``trim`` / ``compress``: ``result_id`` is the commit that
    brought the context back to ``token_count_after`` tokens, in the same transaction).
    """

    branch: str
    commit_id: ObjectId
    token_count: int
    limit: int
    max_tokens: int
    threshold: float
    action: str
    result_id: ObjectId | None = None
    token_count_after: int | None = None
    created_at: datetime | None = None


@attrs.frozen(kw_only=True)
class ChildInfo:
    """A child context spawned from a branch (:meth:`tractkv.Tract.children`; see :mod:`tractkv.engine.spawning`).

    Attributes:
        purpose: what the child is for, as given to ``spawn``.
        branch: the child's branch now, or None once collapsed (its branch is deleted; ``head`` stays).
        spawned_as: the branch name the child was spawned on.
        inherit: ``snapshot``, ``full`` or ``none`` (a ``select`` snapshot says ``snapshot``).
        state: ``open`` (its branch is live, not collapsed) or ``collapsed``.
        head: the child's last commit: its branch tip, or the head a collapse linked (``compile(at=head)``).
        spawn_commit: the child's spawn commit. parent_commit: the parent's HEAD when it was spawned.
        collapsed_by: the parent commit that linked the child's head: the collapse message, or the tool
            result of a ``ToolContext.run_child`` call (None while open).
        collapsed_via: ``collapse`` or ``tool_result`` (None while open).
        created_at: when it was spawned (UTC).
    """

    purpose: str
    branch: str | None
    spawned_as: str
    inherit: str
    state: str
    head: ObjectId
    spawn_commit: ObjectId
    parent_commit: ObjectId | None
    collapsed_by: ObjectId | None = None
    collapsed_via: str | None = None
    created_at: datetime

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (the timestamp as ISO 8601)."""
        out = attrs.asdict(self, recurse=False)
        out["created_at"] = self.created_at.isoformat()
        return out


@attrs.frozen(kw_only=True)
class ParentInfo:
    """Where a spawned child came from (:meth:`tractkv.Tract.parent`).

    Attributes:
        branch: the parent's branch when the child was spawned (None: spawned from a detached HEAD).
        commit: the parent's HEAD then (None: the parent had no commit yet).
        purpose: what the child is for. inherit: ``snapshot``, ``full`` or ``none``.
        spawn_commit: the child's spawn commit. created_at: when it was spawned (UTC).
    """

    branch: str | None
    commit: ObjectId | None
    purpose: str
    inherit: str
    spawn_commit: ObjectId
    created_at: datetime

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (the timestamp as ISO 8601)."""
        out = attrs.asdict(self, recurse=False)
        out["created_at"] = self.created_at.isoformat()
        return out
