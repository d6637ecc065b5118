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
one role merged) stay with the renderers, as for any context. ``protect_last`` keeps the last unit and
``protect`` every unit holding one of its commits (a budget's action never drops a message the transaction it
checks added: the commit just made, or every commit of a ``t.batch()`` block). When what may not be dropped is already
over the limit, the plan says so (``fits`` False) and the caller decides what to raise.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import attrs

from tractkv.engine.compile.pairing import placeholder_tokens
from tractkv.engine.compile.slots import PRIORITY_CODES
from tractkv.engine.compile.state import CompileState
from tractkv.engine.content import TokenCounter
from tractkv.engine.values import CompiledContext
from tractkv.ids import ObjectId

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
    protect: Collection[ObjectId] = (),
) -> WindowPlan:
    """Plan the drops that bring ``ctx`` (compiled from ``state``) within ``limit`` tokens (see the module doc)."""
    ids = list(ctx.commit_ids)
    found = units(ctx, state, counter, protect)
    total = ctx.token_count
    dropped: set[int] = set()
    candidates = found[:-1] if protect_last else found
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


def units(
    ctx: CompiledContext, state: CompileState, counter: TokenCounter, protect: Collection[ObjectId] = ()
) -> list[tuple[list[int], int, bool]]:
    """The units of ``ctx`` (compiled from ``state``; see the module doc), in context order: each unit's
    positions, its tokens, and whether it may go (no system, pinned or ``protect``-ed message in it)."""
    slots, index = state.slots, state.index
    seen: set[ObjectId] = set()
    found: list[tuple[list[int], int, bool]] = []
    in_turn = False
    for position, commit in enumerate(ctx.commit_ids):
        placeholder = commit in seen  # commit ids repeat only for the placeholder results of a call
        seen.add(commit)
        slot = slots[index[commit]]
        tokens = placeholder_tokens(counter) if placeholder else slot.tokens
        role = "tool" if placeholder else slot.role
        if role == "system":
            found.append(([position], tokens, False))
            in_turn = False
            continue
        may_go = slot.priority != _PINNED and commit not in protect
        if role == "tool" and in_turn:
            members, total, free = found[-1]
            found[-1] = ([*members, position], total + tokens, free and may_go)
            continue
        found.append(([position], tokens, may_go))
        in_turn = role == "assistant" and bool(slot.calls)
    return found


@attrs.frozen(kw_only=True)
class Fit:
    """A context fitted to a limit: ``context`` is what the ``state`` (the original one with every dropped
    message skipped) compiles to, its ``dropped`` listing those messages' commits in context order."""

    state: CompileState
    context: CompiledContext
    limit: int

    @property
    def fits(self) -> bool:
        return self.context.token_count <= self.limit


def fit(
    state: CompileState,
    compiled: Callable[[CompileState], CompiledContext],
    counter: TokenCounter,
    limit: int,
    *,
    protect_last: bool = False,
    protect: Collection[ObjectId] = (),
) -> Fit:
    """Drop units (see the module doc) until the context ``compiled(state)`` is within ``limit``, or nothing
    more may go.

    The result is what compile gives with the dropped messages skipped, as a ``trim`` commit skips them: the
    pairing pass runs again on what is left (a tool result that answered nothing may answer its call once the
    message between them is gone, a placeholder result may no longer be needed), so the count is taken again
    after each round of drops and another round planned while it is over. Each round drops at least one
    unit, so there are at most as many rounds as messages.
    """
    full = compiled(state)
    ctx, current = full, state
    dropped: list[ObjectId] = []
    for _ in range(len(full.commit_ids) + 1):  # bounded: each round drops a unit or stops
        if ctx.token_count <= limit:
            break
        plan = plan_window(ctx, current, counter, limit, protect_last=protect_last, protect=protect)
        if not plan.dropped:
            break
        dropped.extend(plan.dropped)
        current = skipped(state, dropped)
        ctx = compiled(current)
    order = {commit: position for position, commit in enumerate(full.commit_ids)}
    names = tuple(sorted(dict.fromkeys(dropped), key=lambda c: order.get(c, len(order))))
    return Fit(state=current, context=attrs.evolve(ctx, dropped=names), limit=limit)


def skipped(state: CompileState, commits: Sequence[ObjectId]) -> CompileState:
    """A copy of ``state`` with the messages of ``commits`` skipped (what a ``trim`` naming them makes)."""
    other = state.copy()
    skip = PRIORITY_CODES["skip"]
    slots, index = other.slots, other.index
    for commit in commits:
        position = index.get(commit)
        if position is not None:
            slots[position] = slots[position].evolve(priority=skip)
    other.view = None
    return other
