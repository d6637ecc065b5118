"""``compile(max_tokens=N)``: a session's compiled context fitted to a token limit, nothing written.

The planning (which messages go) is :func:`tractkv.engine.compile.fit`; this is the operation a session runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from tractkv.engine.compile import CompileState, context_of, fit
from tractkv.engine.values import CompiledContext
from tractkv.errors import BudgetExceeded, InvalidInput

if TYPE_CHECKING:
    from tractkv.engine.session import Session


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
    reader = session.reader()
    state = session.state_at(at)
    tools, tool_cost = session.tools_of(state.tools), session.tool_tokens_of(state.tools)

    def compiled(other: CompileState) -> CompiledContext:
        return context_of(reader, other, session.counter, tools, include_reasoning, tool_tokens=tool_cost)

    result = fit(state, compiled, session.counter, max_tokens)
    if not result.fits:
        raise BudgetExceeded(
            result.context.token_count,
            max_tokens,
            f"the system and pinned messages and tool definitions alone take {result.context.token_count} "
            f"tokens, over max_tokens={max_tokens}: unpin messages or raise the limit",
        )
    return result.context
