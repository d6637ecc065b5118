"""A branch's token budget, and what a commit over it does.

**Where it lives.** A local setting: the ``meta`` row ``budget:<branch ref>`` holds CBOR ``{"max": int,
"action": str, "threshold": float}`` (a row written before actions existed holds a bare CBOR int and reads as
``action="warn", threshold=1.0``), like the remotes config and ``set_tools``'s setting. It never syncs: a
budget is a policy of the process that writes, which another machine (a smaller model, a larger window) may
set differently. What a budget *does* is ordinary history: a ``trim`` or ``compress`` commit, validated on
receive like any other, so a clone or a pull compiles exactly the trimmed or compressed context. It is the one
budget: ``Tract.open(token_budget=N)`` (deprecated) stores it as :meth:`~tractkv.Tract.set_budget` does. The
last overrun is recorded next to the setting (``budget-overrun:<ref>``, local), and removed once it no longer
holds: by a check that finds the branch within its limit (a write only when the row exists) and by
:func:`set_budget` changing or clearing the budget; ``status`` shows it only while it holds
(:func:`current_overrun`).

**How it is consulted.** :class:`BudgetPolicy` is a session's write policy
(:class:`~tractkv.engine.session.WritePolicy`, passed when the session is made): its check runs on every
transaction that moves a branch, with the summarizer a ``compress`` budget uses, and tells its listener of an
overrun once that transaction landed. A trim or compress commit goes through the session's one write function
(:meth:`~tractkv.engine.session.Session.stage_commit`), as every commit does.

**When it acts.** When a commit lands on the branch, the compiled context it makes (messages, placeholder
results and tool definitions) is counted as ``status`` counts it (:func:`_calibrated`: the provider's
reported count where :mod:`tractkv.engine.calibration` has one, else the estimate of :func:`_context_tokens`)
and compared with the limit, ``floor(threshold * max_tokens)``. At or under it nothing happens. Over it:

* ``warn``: the commit is written; the overrun is recorded and the ``budget_exceeded`` event
  (:meth:`tractkv.Tract.on`) receives a :class:`~tractkv.engine.values.records.BudgetOverrun` once it landed;
* ``reject``: :class:`~tractkv.errors.BudgetExceeded`, and nothing of the commit is written;
* ``trim``: a ``trim`` commit (op ``trim``, ``links["targets"]``: the messages it skips, an annotation blob
  of priority ``skip``) lands in the same transaction, skipping the oldest unpinned non-system messages (tool
  turns whole) until the context's estimate is within the limit (:mod:`tractkv.engine.compile.window`);
* ``compress``: those oldest messages, planned to leave a quarter of the limit for the summary, are replaced
  by the configured summarizer's summary (in the same transaction, the commit ``Tract.compress`` makes of that
  range and summary: one planner and one commit shape, :func:`tractkv.engine.merging.plan_compress`); no model
  configured is :class:`~tractkv.errors.NoLLMConfigured` and nothing is written.

Both plan on estimates (:func:`_context_tokens`) against the limit itself, and drop at least one unit (the
count is over even when a reported count is over and the estimate is not). Skipping or compressing a message
a provider's reply counted ends that reply's anchoring (:mod:`tractkv.engine.calibration`), so the count after
the action is then the estimate. The count after the action is taken as ``status`` takes it
(:func:`_calibrated`): still over the limit (only the messages after the reply could go, and the reported count
still holds; or the summary is too long) is :class:`~tractkv.errors.BudgetExceeded` and nothing is written.

The trim or compress commit lands in the transaction of the commit that went over (whose reflog entry
then ends at it: the commit that went over was never a tip by itself). ``trim`` and ``compress`` never drop
a unit holding a message the transaction being checked added (every commit of a ``t.batch()`` block, or the
one commit outside a batch), nor the newest unit: when the rest cannot make room, it is
:class:`~tractkv.errors.BudgetExceeded` and nothing is written. ``trim``, ``compress`` and ``warn`` also
emit the event, naming the commit that brought the context back.

**Ref moves.** A move of the branch is checked as a commit is, in the transaction that moves it: a
fast-forward merge or pull and a reset (:meth:`~tractkv.engine.session.Session.move_branch`), and a push
this store receives (:func:`check_received`, from :mod:`tractkv.sync.receive`). ``warn`` records and tells;
``reject`` moves nothing (a pull keeps what its fetch stored: objects and the tracking ref, as git keeps
fetched objects; a push is refused ``over-budget``); ``trim`` / ``compress`` commit on the new tip in the
move's transaction, so the branch is never left over its limit and a failing action moves nothing. The move
adds no commit of its own, so only the newest unit is protected. A fetch moves only tracking refs and a
clone makes a store with no budget: neither is checked.

**Reported usage from a peer is a claim.** A reply's ``metadata["usage"]`` is whatever the process that
wrote the commit put there. A commit this process writes is counted with it (its own model's answer), but a
move that brings commits from another store (a push received by :func:`check_received`, a pull's
fast-forward: ``peer=True``) counts the larger of the calibrated count and the local estimate: a claim may
raise the count (a provider that counted more than the estimate), never lower it below what this store
measures (issue 29 item 17: a pushed reply claiming 1 input token took a 10k-token context past a 2,000-token
``reject`` budget). ``status`` still shows the calibrated count.

**Batches.** Inside ``t.batch()`` the check runs once, at the block's end, on the context the block made
(one read of the setting per batch); ``reject`` then raises and the whole block is written nowhere. Without a
budget the write path reads one ``meta`` row per transaction and does nothing else.

**Concurrent writers.** The check runs on the state the commit is actually made on (the tip the
compare-and-swap extends): a writer that loses the race writes nothing, and a rebased append
(``rebase_appends``) is checked again on the new tip.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import attrs

from tractkv import codec
from tractkv.engine.session import Session, WritePolicy
from tractkv.engine.values import CompiledContext
from tractkv.errors import BudgetExceeded, DecodeError, DetachedHead, InvalidInput, NoLLMConfigured
from tractkv.ids import ObjectId
from tractkv.model import Blob, Commit
from tractkv.store import Reader, Store, Table, WriteBatch

if TYPE_CHECKING:
    from tractkv.engine.compile import CompileState, Fit
    from tractkv.engine.content import TokenCounter
    from tractkv.engine.values import BudgetOverrun

BUDGET = b"budget:"  # meta key prefix: branch ref -> the branch's budget policy (CBOR; see the module doc)
OVERRUN = b"budget-overrun:"  # meta key prefix: branch ref -> the last overrun recorded (CBOR)
ACTIONS = ("warn", "reject", "compress", "trim")
EVENT = "budget_exceeded"
SUMMARY_SHARE = 4  # compress leaves 1/SUMMARY_SHARE of the limit for the summary

Summarize = Callable[[str, int], str]
"""What a ``compress`` budget summarizes with: (text, target tokens) -> the summary."""


class BudgetPolicy(WritePolicy[Session]):
    """The branch budget as a session's write policy (:class:`~tractkv.engine.session.WritePolicy`): its check
    is :func:`check` on every transaction that moves a branch, with ``summarize`` for a ``compress`` budget
    (None: :class:`~tractkv.errors.NoLLMConfigured`); ``on_overrun`` hears of each overrun once its
    transaction landed."""

    def __init__(
        self,
        summarize: Summarize | None = None,
        on_overrun: Callable[[BudgetOverrun], None] | None = None,
    ) -> None:
        self.summarize = summarize
        self.on_overrun = on_overrun

    def check(
        self,
        session: Session,
        batch: WriteBatch,
        ref: str,
        state: CompileState | None,
        *,
        moved: str | None,
        peer: bool,
    ) -> BudgetOverrun | None:
        return check(session, batch, ref, state, moved=moved, peer=peer, summarize=self.summarize)

    def landed(self, session: Session, outcome: object) -> None:
        if self.on_overrun is not None:
            self.on_overrun(outcome)  # type: ignore[arg-type]  # what check returned: a BudgetOverrun


@attrs.frozen(kw_only=True)
class Budget:
    """A branch's stored budget policy."""

    max_tokens: int
    action: str = "warn"
    threshold: float = 1.0

    @property
    def limit(self) -> int:
        """The most tokens a context may hold before the action runs: ``floor(threshold * max_tokens)``."""
        return max(1, math.floor(self.threshold * self.max_tokens))


def read_budget(reader: Reader, ref: str | None) -> Budget | None:
    """The budget stored for branch ref ``ref`` (None: none stored, a detached HEAD, or an unreadable row)."""
    if ref is None:
        return None
    raw = reader.table_get(Table.META, BUDGET + ref.encode())
    return None if raw is None else _decode(raw)


def _decode(raw: bytes) -> Budget | None:
    try:
        value = codec.loads(raw)
    except DecodeError:  # a damaged local setting reads as no budget; it changes nothing compile returns
        return None
    if _is_count(value):
        return Budget(max_tokens=value)  # a row written before budgets had actions
    if not isinstance(value, dict):
        return None
    max_tokens, action, threshold = value.get("max"), value.get("action"), value.get("threshold")
    if not _is_count(max_tokens) or action not in ACTIONS or not _is_threshold(threshold):
        return None
    assert isinstance(max_tokens, int)
    assert isinstance(threshold, int | float)
    return Budget(max_tokens=max_tokens, action=str(action), threshold=float(threshold))


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _is_threshold(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 1


def stored_budget(reader: Reader, ref: str | None) -> int | None:
    """The ``max_tokens`` of the budget stored for ``ref`` (None: none)."""
    budget = read_budget(reader, ref)
    return None if budget is None else budget.max_tokens


def set_budget(
    session: Session, max_tokens: int | None, action: str = "warn", threshold: float = 1.0
) -> int | None:
    """Store the session's branch budget (``max_tokens`` None clears it); returns what is stored now.

    Raises:
        InvalidInput: not a positive int, an unknown action, a threshold outside (0, 1].
        DetachedHead: HEAD is detached (a budget belongs to a branch).
    """
    if max_tokens is not None and not _is_count(max_tokens):
        raise InvalidInput(f"a token budget is a positive number of tokens, not {max_tokens!r}")
    if action not in ACTIONS:
        raise InvalidInput(f"a budget's action is one of {', '.join(ACTIONS)}, not {action!r}")
    if not _is_threshold(threshold):
        raise InvalidInput(
            f"a budget's threshold is a fraction of it, more than 0 and at most 1, not {threshold!r}"
        )
    session.check_writes("set_budget", in_batch=False)
    if session.branch_ref is None:
        raise DetachedHead(str(session.detached), "set a budget")
    key = session.branch_ref.encode()
    batch = session.store.new_batch()
    new = None if max_tokens is None else Budget(max_tokens=max_tokens, action=action, threshold=threshold)
    if new is None:
        batch.table_put(Table.META, BUDGET + key, None)
    else:
        row = {"max": max_tokens, "action": action, "threshold": float(threshold)}
        batch.table_put(Table.META, BUDGET + key, codec.dumps(row))
    if new != read_budget(session.store, session.branch_ref) and (
        batch.table_get(Table.META, OVERRUN + key) is not None
    ):  # the last overrun was against another budget (or none now): it no longer says anything
        batch.table_put(Table.META, OVERRUN + key, None)
    session.store.apply(batch)
    return max_tokens


def drop_budget(batch: WriteBatch, ref: str) -> None:
    """Stage the removal of ``ref``'s budget rows (a deleted branch keeps no setting)."""
    for prefix in (BUDGET, OVERRUN):
        if batch.table_get(Table.META, prefix + ref.encode()) is not None:
            batch.table_put(Table.META, prefix + ref.encode(), None)


def read_overrun(reader: Reader, ref: str | None) -> BudgetOverrun | None:
    """The last overrun recorded on branch ref ``ref`` (None: none, or an unreadable row)."""
    if ref is None:
        return None
    raw = reader.table_get(Table.META, OVERRUN + ref.encode())
    if raw is None:
        return None
    from tractkv.engine.values import BudgetOverrun  # lazy: a branch without an overrun never needs the class

    try:
        data = codec.loads(raw)
        return BudgetOverrun(
            branch=str(data["branch"]),
            commit_id=ObjectId(data["commit"]),
            token_count=int(data["tokens"]),
            limit=int(data["limit"]),
            max_tokens=int(data["max"]),
            threshold=float(data["threshold"]),
            action=str(data["action"]),
            result_id=ObjectId(data["result"]) if data.get("result") else None,
            token_count_after=int(data["after"]) if data.get("after") is not None else None,
            created_at=datetime.fromtimestamp(int(data["ts"]) / 1_000_000, tz=UTC),
        )
    except (DecodeError, KeyError, TypeError, ValueError):  # a damaged local record: none to show
        return None


def current_overrun(
    reader: Reader, ref: str | None, budget: Budget | None, head: ObjectId | None, tokens: int
) -> BudgetOverrun | None:
    """The last overrun of ``ref`` while it holds (what ``status`` shows): the branch's head is the commit
    that went over or what the budget made of it, or the branch (now ``tokens``) is over ``budget``'s limit.
    (A move checked within the limit removes the row; one made before moves were checked may have left it.)"""
    overrun = read_overrun(reader, ref)
    if overrun is None or budget is None:
        return None
    if head in (overrun.commit_id, overrun.result_id) or tokens > budget.limit:
        return overrun
    return None


# --- the one token count ------------------------------------------------------------------------------------


def _context_tokens(session: Session, state: CompileState, reader: Reader) -> int:
    """The tokens of the context ``state`` compiles to, as a budget counts them: its messages, placeholder
    results and tool definitions (what ``CompiledContext.token_count`` and ``status`` say). Every budget
    decision counts through here."""
    from tractkv.engine.compile import load_tools
    from tractkv.engine.content import tool_tokens

    tools = 0
    if state.tools is not None:
        tools = tool_tokens(load_tools(reader, state.tools), session.counter)
    return state.render(reader).total_tokens(session.counter) + tools


def _calibrated(session: Session, state: CompileState, reader: Reader) -> tuple[int, int]:
    """``(tokens, estimated)`` of the context at ``state``'s head: ``tokens`` as ``status`` counts it,
    calibrated by the provider's reported usage where it can be (:mod:`tractkv.engine.calibration`), else the
    estimate; ``estimated`` the estimate of :func:`_context_tokens` (what a plan counts). Only for a state that
    is the branch's real head: a trial state of the planner has that head too, so it is counted by
    :func:`_context_tokens` alone."""
    from tractkv.engine.calibration import calibrated

    count = calibrated(session, state, reader=reader)
    return count.tokens, count.estimated


def _compiled(session: Session, state: CompileState, reader: Reader) -> CompiledContext:
    """The context ``state`` compiles to, its ``token_count`` from :func:`_context_tokens`."""
    from tractkv.engine.compile import context_of, load_tools

    tools = load_tools(reader, state.tools) if state.tools is not None else ()
    ctx = context_of(reader, state, session.counter, tools)
    return attrs.evolve(ctx, token_count=_context_tokens(session, state, reader))


# --- the check on the write path ------------------------------------------------------------------------------


def check(
    session: Session,
    batch: WriteBatch,
    ref: str,
    state: CompileState | None,
    *,
    moved: str | None = None,
    peer: bool = False,
    summarize: Summarize | None = None,
) -> BudgetOverrun | None:
    """Run ``ref``'s budget on what ``batch`` (about to be applied) makes of the branch: ``state`` is the
    compile state at its new tip (None: read it through the batch). Returns the overrun to report once the
    batch landed, or None; may stage a trim or compress commit in the batch; raises to write nothing.
    ``moved`` names a ref move the batch stages instead of a commit (``"the fast-forward"``, ``"the reset"``,
    ``"the push"``): only the messages say so. ``peer``: the move brings another store's commits, whose
    reported usage is a claim: the count is at least the local estimate (see the module doc). ``summarize``:
    what a ``compress`` budget summarizes with.

    Raises:
        BudgetExceeded: a ``reject`` budget, or a ``trim`` / ``compress`` that cannot make the context fit.
        NoLLMConfigured: a ``compress`` budget with no summarizer configured.
    """
    raw = batch.table_get(Table.META, BUDGET + ref.encode())  # the one read when no budget is set
    if raw is None:
        return None
    budget = _decode(raw)
    update = batch.ref_updates.get(ref)
    if budget is None or update is None or update[1] is None:
        return None
    head = ObjectId(update[1])
    if state is None or state.head != head:
        if ref == session.branch_ref:
            state = session.head_state(batch)
        else:  # another branch than the session's (a push received): its state, owned for the action
            state = session.compiler.state_at(batch, head, take=True)
    tokens, estimated = _calibrated(session, state, batch)
    if peer:
        tokens = max(tokens, estimated)
    limit = budget.limit
    if tokens <= limit:
        key = OVERRUN + ref.encode()
        if batch.table_get(Table.META, key) is not None:  # the overrun no longer holds: stop showing it
            batch.table_put(Table.META, key, None)
        return None
    name = ref.removeprefix("refs/heads/")
    nothing = "nothing was written" if moved is None else f"{name!r} did not move"
    if budget.action == "reject":
        raise BudgetExceeded(
            tokens,
            limit,
            f"{moved or 'the commit'} would take the context of branch {name!r} to {tokens} tokens, over its "
            f"budget's limit of {limit} ({_policy(budget)}, action reject): {nothing}",
        )
    result: ObjectId | None = None
    after: int | None = None
    if budget.action in ("trim", "compress"):
        # The plan counts estimates, against the limit itself; it drops at least one unit (the count is
        # over even when the estimate is not). The count after the action is then taken as status takes it.
        plan = _Plan(session, batch, ref, state, head)
        plan.limit, plan.estimated, plan.tokens, plan.name, plan.nothing = (
            limit,
            estimated,
            tokens,
            name,
            nothing,
        )
        result = _trim(plan) if budget.action == "trim" else _compress(plan, summarize)
        after, after_estimated = _calibrated(session, state, batch)
        if peer:
            after = max(after, after_estimated)
        if after > limit:
            raise BudgetExceeded(
                after,
                limit,
                f"the {'summary' if budget.action == 'compress' else 'trim'} left the context of branch "
                f"{name!r} at {after} tokens "
                f"({_source(after, _context_tokens(session, state, batch))}), over its budget's limit "
                f"of {limit}: {nothing}",
            )
    now = session.clock()
    record: dict[str, Any] = {
        "branch": name,
        "commit": head,
        "tokens": tokens,
        "limit": limit,
        "max": budget.max_tokens,
        "threshold": budget.threshold,
        "action": budget.action,
        "ts": now,
    }
    if result is not None:
        record["result"] = result
        record["after"] = after
    batch.table_put(Table.META, OVERRUN + ref.encode(), codec.dumps(record))
    from tractkv.engine.values import BudgetOverrun  # lazy: a commit within its budget never needs the class

    return BudgetOverrun(
        branch=name,
        commit_id=head,
        token_count=tokens,
        limit=limit,
        max_tokens=budget.max_tokens,
        threshold=budget.threshold,
        action=budget.action,
        result_id=result,
        token_count_after=after,
        created_at=datetime.fromtimestamp(now / 1_000_000, tz=UTC),
    )


def check_received(store: Store, batch: WriteBatch, ref: str, moved: str) -> str | None:
    """Run ``ref``'s budget on the move ``batch`` stages in a store no session writes to (a push received
    by a path remote or a hub): as :func:`check` with a read-only session on the branch (the default token
    counter, no summarizer, no listener: ``warn`` records the overrun, ``trim`` stages its commit in
    ``batch``), counting at least the local estimate (``peer``: the pushed usage is a claim). Returns why
    the move is refused (``reject``, a trim that cannot fit, ``compress`` with no model here), or None; one
    ``meta`` read when the branch has no budget."""
    if batch.table_get(Table.META, BUDGET + ref.encode()) is None:
        return None
    from tractkv.engine.history import HEADS

    session = Session(store, branch=ref.removeprefix(HEADS), readonly=True)
    try:
        check(session, batch, ref, None, moved=moved, peer=True)
    except BudgetExceeded as exc:
        return str(exc)
    except NoLLMConfigured:
        name = ref.removeprefix(HEADS)
        return (
            f"{moved} would take the context of branch {name!r} over its compress budget here, and a store "
            f"receiving a push has no model to summarize with: {name!r} did not move"
        )
    finally:
        session.close()
    return None


def _messages(count: int) -> str:
    return f"{count} message{'s' if count != 1 else ''}"


def _source(tokens: int, estimated: int) -> str:
    return "estimated" if tokens == estimated else f"reported; estimated {estimated}"


def _policy(budget: Budget) -> str:
    if budget.threshold == 1:
        return f"budget {budget.max_tokens}"
    return f"budget {budget.max_tokens} x threshold {budget.threshold:g}"


def _fit(session: Session, state: CompileState, batch: WriteBatch, limit: int) -> Fit:
    """Fit ``state`` to ``limit`` estimated tokens, never dropping a message the transaction being checked
    added (every commit ``batch`` stages: the whole ``t.batch()`` block, or the one commit) nor the newest
    unit."""
    from tractkv.engine.compile import fit

    def compiled(other: CompileState) -> CompiledContext:
        return _compiled(session, other, batch)

    added = batch.objects.keys()  # the commits this transaction makes (with their blobs)
    return fit(state, compiled, session.counter, limit, protect_last=True, protect=added)


class _Plan:
    """What a ``trim`` or ``compress`` budget acts on: the branch ``ref`` (``name``) whose new tip ``head``
    (``state``, owned for the action) is over ``limit`` (``tokens`` counted, ``estimated`` estimated), in the
    transaction ``batch``; ``nothing`` says what a refusal leaves. (A plain class: an attrs class would be
    built, its code generated and compiled, when a Tract loads this module.)"""

    __slots__ = (
        "batch",
        "estimated",
        "head",
        "limit",
        "name",
        "nothing",
        "ref",
        "session",
        "state",
        "tokens",
    )

    def __init__(
        self, session: Session, batch: WriteBatch, ref: str, state: CompileState, head: ObjectId
    ) -> None:
        self.session, self.batch, self.ref, self.state, self.head = session, batch, ref, state, head
        self.limit = self.estimated = self.tokens = 0
        self.name = self.nothing = ""


def _trim(plan: _Plan) -> ObjectId:
    """Stage the trim commit that skips the oldest messages until the context's estimate fits the limit
    (and at least one unit, the count being over)."""
    from tractkv.engine.content import ANNOTATION

    limit = plan.limit
    fitted = _fit(plan.session, plan.state, plan.batch, min(limit, plan.estimated - 1))
    dropped = fitted.context.dropped
    if fitted.context.token_count > limit or not dropped:
        raise BudgetExceeded(
            plan.tokens,
            limit,
            f"the context of branch {plan.name!r} would hold {plan.tokens} tokens, over its budget's limit of "
            f"{limit}, and trimming every unpinned message older than the ones it adds leaves "
            f"{fitted.context.token_count}: {plan.nothing}",
        )
    payload = {"type": ANNOTATION, "priority": "skip", "reason": f"trim to the {limit}-token budget"}
    blob = Blob(data=payload)
    commit = Commit(
        parents=(plan.head,),
        content=plan.batch.put(blob),
        operation="trim",
        message=f"trim {_messages(len(dropped))} to fit the {limit}-token budget",
        links={"targets": dropped},
        created_at=plan.session.now(plan.batch.get_commit(plan.head)),
    )
    return _stage(plan, commit, payload)


def _compress(plan: _Plan, summarize: Summarize | None) -> ObjectId:
    """Stage a compress commit summarizing the oldest messages so that the context's estimate fits the limit
    (at least one unit summarized, the count being over): planned and shaped as ``Tract.compress`` plans and
    shapes one (:func:`tractkv.engine.merging.plan_compress`), never folding what the transaction added."""
    from tractkv.engine.merging import plan_compress, summary_blob, summary_commit

    session, batch, limit = plan.session, plan.batch, plan.limit
    if summarize is None:
        raise NoLLMConfigured(
            f"the compress budget of branch {plan.name!r} ({plan.nothing}: it would take the context "
            f"to {plan.tokens} tokens, over the limit of {limit})"
        )
    room = max(1, limit // SUMMARY_SHARE)
    compress = plan_compress(
        session,
        at=(batch, plan.state),
        fit_to=min(limit - room, plan.estimated - 1),
        protect=batch.objects.keys(),  # the commits this transaction makes (with their blobs)
        keep_last=True,
    )
    if compress.fitted is None or compress.fitted > limit - room or not compress.sources:
        raise BudgetExceeded(
            plan.tokens,
            limit,
            f"the context of branch {plan.name!r} would hold {plan.tokens} tokens, over its budget's limit of "
            f"{limit}, and compressing every older unpinned message leaves no room for a summary: "
            f"{plan.nothing}",
        )
    blob = summary_blob(compress, summarize(compress.text, room))
    commit = summary_commit(batch, compress, blob, plan.head, session.now(batch.get_commit(plan.head)))
    return _stage(plan, commit, blob.data)


def _apply(
    oid: ObjectId,
    commit: Commit,
    state: CompileState,
    batch: WriteBatch,
    counter: TokenCounter,
    payload: dict[str, Any],
) -> None:
    state.apply(batch, oid, commit, counter, payload)


def _stage(plan: _Plan, commit: Commit, payload: dict[str, Any]) -> ObjectId:
    """Stage ``commit`` on top of the plan's head through the session's one write function
    (:meth:`~tractkv.engine.session.Session.stage_commit`: checked, put, applied to the plan's state, the
    branch moved, its reflog entry folded into the move it follows)."""
    session, state = plan.session, plan.state

    oid, _ = session.stage_commit(
        plan.batch,
        plan.ref,
        plan.head,
        commit,
        {plan.head: "commit"},
        commit.operation,
        commit.message or commit.operation,
        _apply,
        state,
        plan.batch,
        session.counter,
        payload,
    )
    return oid
