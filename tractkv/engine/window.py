"""Fitting a context into a token limit: the one drop planner behind ``compile(max_tokens=N)`` and a budget's
``trim`` and ``compress`` actions (:mod:`tractkv.engine.budget`).

The planner reads a compiled context as **units**, in context order:

* a system message (an instruction) is never dropped, and neither is a pinned message;
* a **tool turn** (an assistant message with tool calls and the results, or placeholder results, that follow
  it) is one unit: dropped whole, and kept whole when any of its messages is pinned;
* every other message is a unit of its own.

Units that may go are dropped oldest first until the context's tokens (its messages, placeholder results and
tool definitions, as ``CompiledContext.token_count`` counts them) are within the limit. Dropping whole units
keeps the tool pairing intact (no result loses its call, no call its results), so the fitted context is as
valid a request as the full one; the providers' other rules (Anthropic's first turn is a user turn, turns of
one role merged) stay with the renderers, as for any context. ``protect_last`` keeps the last unit (a
budget's action never drops the message that was just committed). When what may not be dropped is already
over the limit, the plan says so (``fits`` False) and the caller decides what to raise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from tractkv.errors import BudgetExceeded, InvalidInput
from tractkv.ids import ObjectId

from .pairing import placeholder_tokens
from .records import CompiledContext
from .state import PRIORITY_CODES, CompileState
from .tokens import TokenCounter

if TYPE_CHECKING:
    from .session import Session

_PINNED = PRIORITY_CODES["pinned"]


@attrs.frozen(kw_only=True)
class WindowPlan:
    """What fitting a context to ``limit`` keeps and drops.

    Attributes:
        keep: the positions of the context's messages that stay, in order.
        drop: the positions dropped, in order.
        dropped: the commits of the dropped messages, in context order, each once (a placeholder result names
            the commit of its call, which is dropped with it).
        token_count: the context's tokens once the dropped messages are gone.
        limit: the limit planned for.
    """

    keep: tuple[int, ...]
    drop: tuple[int, ...]
    dropped: tuple[ObjectId, ...]
    token_count: int
    limit: int

    @property
    def fits(self) -> bool:
        return self.token_count <= self.limit


def plan_window(
    ctx: CompiledContext,
    state: CompileState,
    counter: TokenCounter,
    limit: int,
    *,
    protect_last: bool = False,
) -> WindowPlan:
    """Plan the drops that bring ``ctx`` (compiled from ``state``) within ``limit`` tokens (see the module doc)."""
    ids = list(ctx.commit_ids)
    slots, index = state.slots, state.index
    seen: set[ObjectId] = set()
    units: list[tuple[list[int], int, bool]] = []  # (positions, tokens, may go)
    in_turn = False
    for position, commit in enumerate(ids):
        placeholder = commit in seen  # commit ids repeat only for the placeholder results of a call
        seen.add(commit)
        slot = slots[index[commit]]
        tokens = placeholder_tokens(counter) if placeholder else slot.tokens
        role = "tool" if placeholder else slot.role
        if role == "system":
            units.append(([position], tokens, False))
            in_turn = False
            continue
        if role == "tool" and in_turn:
            members, total, free = units[-1]
            units[-1] = ([*members, position], total + tokens, free and slot.priority != _PINNED)
            continue
        units.append(([position], tokens, slot.priority != _PINNED))
        in_turn = role == "assistant" and bool(slot.calls)
    total = ctx.token_count
    dropped: set[int] = set()
    candidates = units[:-1] if protect_last else units
    for members, tokens, free in candidates:
        if total <= limit:
            break
        if free:
            dropped.update(members)
            total -= tokens
    keep = tuple(p for p in range(len(ids)) if p not in dropped)
    drop = tuple(sorted(dropped))
    names: dict[ObjectId, None] = {}
    for position in drop:
        names.setdefault(ids[position], None)
    return WindowPlan(keep=keep, drop=drop, dropped=tuple(names), token_count=total, limit=limit)


def fitted(ctx: CompiledContext, plan: WindowPlan) -> CompiledContext:
    """``ctx`` without the messages ``plan`` drops: its ``dropped`` field lists their commits, its repairs
    and open calls those of the messages kept."""
    keep = plan.keep
    gone = set(plan.dropped)
    open_calls = ctx.open_calls
    if open_calls and len(ctx.commit_ids) - 1 in plan.drop:  # the tool run in progress went with its turn
        open_calls = ()
    return attrs.evolve(
        ctx,
        messages=tuple(ctx.messages[p] for p in keep),
        commit_ids=tuple(ctx.commit_ids[p] for p in keep),
        generation_configs=tuple(ctx.generation_configs[p] for p in keep),
        token_count=plan.token_count,
        repairs=tuple(r for r in ctx.repairs if r.commit_id not in gone),
        open_calls=open_calls,
        dropped=plan.dropped,
    )


def compile_within(
    session: Session,
    at: str | None,
    max_tokens: int,
    *,
    include_reasoning: bool = False,
    strict: bool = False,
) -> CompiledContext:
    """``compile(at, max_tokens=N)``: the compiled context fitted to ``max_tokens`` (see the module doc);
    nothing is written.

    Raises:
        InvalidInput: ``max_tokens`` is not a positive int.
        BudgetExceeded: the messages that may not be dropped (system and pinned ones, with the tool
            definitions) are alone over ``max_tokens``.
    """
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0:
        raise InvalidInput(f"max_tokens is a positive number of tokens, not {max_tokens!r}")
    ctx = session.compile(at, include_reasoning=include_reasoning, strict=strict)
    if ctx.token_count <= max_tokens:
        return attrs.evolve(ctx, dropped=())
    state = session.state_at(at)
    plan = plan_window(ctx, state, session.counter, max_tokens)
    if not plan.fits:
        raise BudgetExceeded(
            plan.token_count,
            max_tokens,
            f"the system and pinned messages and tool definitions alone take {plan.token_count} tokens, "
            f"over max_tokens={max_tokens}: unpin messages or raise the limit",
        )
    return fitted(ctx, plan)
