"""Values the less frequent operations return: branches, status, diffs, merges, reflog, gc, agent runs, budget
overruns and spawned children.

They live apart from :mod:`tractkv.engine.values.records` (what every append and compile returns) so that building
their attrs classes (~0.5-1 ms each) is paid on first use, not by ``import tractkv``: the package's face
(:mod:`tractkv.engine.values`) loads each module on first access to one of its names.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import attrs

from tractkv.ids import ObjectId

if TYPE_CHECKING:
    from tractkv.engine.content import Message
    from tractkv.engine.values.records import CommitInfo


@attrs.frozen(kw_only=True)
class BranchInfo:
    """A local or remote-tracking branch."""

    name: str
    head: ObjectId | None
    is_current: bool
    is_remote: bool = False


@attrs.frozen(kw_only=True)
class TagInfo:
    """A tag (``refs/tags/<name>``): the commit it names (``commit``), and for an annotated tag its object's id
    (``tag_id``), message and tagger time (``created_at``); a lightweight tag has None for the three."""

    name: str
    commit: ObjectId
    tag_id: ObjectId | None = None
    message: str | None = None
    created_at: datetime | None = None

    @property
    def annotated(self) -> bool:
        return self.tag_id is not None


@attrs.frozen(kw_only=True)
class PickResult:
    """What a cherry-pick or a rebase did: ``kind`` ``picked`` / ``rebased`` / ``up-to-date`` (nothing to
    replay) / ``empty`` (every change was already there or settled for the branch's side); the branch's new
    ``head``; ``picked`` the pairs (original, new commit) in the order they were made; ``skipped`` the
    originals left out (a merge commit in a rebased range, or a change settled for ``ours``), and
    ``conflicts_resolved`` how many conflicts ``strategy`` settled."""

    kind: str
    head: ObjectId | None
    picked: tuple[tuple[ObjectId, ObjectId], ...] = ()
    skipped: tuple[ObjectId, ...] = ()
    conflicts_resolved: int = 0
    strategy: str = "auto"
    onto: ObjectId | None = None


@attrs.frozen(kw_only=True)
class StatusInfo:
    """A branch's summary: where its head is and what the context there holds (``status`` is HEAD's, and
    :func:`tractkv.engine.branches.summaries` gives one per branch: the CLI's ``branch -v``, ``Tract.branches``
    and the viewer's branch list). ``branch`` is the branch's name (``origin/main`` for a remote-tracking one,
    None for a detached HEAD), ``ref`` its full ref, ``is_current`` whether it is HEAD's,
    ``last_activity`` when its head was committed.

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
    ref: str | None = None
    is_remote: bool = False
    is_current: bool = False
    last_activity: datetime | None = None

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
    tools: tuple[ToolChange, ...] = ()  # the tool set's changes, by name (added, removed, changed)

    @property
    def is_empty(self) -> bool:
        return not self.entries and not self.tools


@attrs.frozen(kw_only=True)
class ToolChange:
    """One tool's change between the tool sets in force at two commits: ``added``, ``removed`` or ``changed``
    (same name, another schema); ``before`` / ``after`` are the schemas (None on the side without it)."""

    change: str
    name: str
    before: dict[str, Any] | None = attrs.field(eq=False, hash=False)
    after: dict[str, Any] | None = attrs.field(eq=False, hash=False)

    @property
    def changed_keys(self) -> tuple[str, ...]:
        """For ``changed``: the top-level schema keys whose values differ (``description``, ``parameters``...)."""
        if self.before is None or self.after is None:
            return ()
        keys = set(self.before) | set(self.after)
        return tuple(sorted(k for k in keys if self.before.get(k) != self.after.get(k)))


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
        from tractkv.model import to_jsonable

        return dict(to_jsonable(self))


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
        from tractkv.model import to_jsonable

        return dict(to_jsonable(self))
