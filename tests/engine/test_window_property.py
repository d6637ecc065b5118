"""``compile(max_tokens=N)`` on random histories: never over N, always a request both providers accept (the
independent rules of ``test_pairing_property``), system and pinned messages always kept, and exactly what
skipping the dropped messages with ordinary annotations compiles to (the semantics a budget's ``trim`` commits).
"""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tractkv import BudgetExceeded, InvalidInput, Tract
from tractkv.engine.compile.slots import PRIORITY_CODES

from .test_pairing_property import OPERATIONS, History, check_context


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(OPERATIONS, min_size=3, max_size=16),
    st.floats(min_value=0.0, max_value=1.1),
    st.booleans(),
)
def test_compile_to_a_limit_is_within_it_valid_and_keeps_system_and_pinned(
    operations: list[tuple[Any, ...]], share: float, reasoning: bool
) -> None:
    with Tract.open() as t:
        history = History(t)
        for op in operations:
            with contextlib.suppress(InvalidInput):  # refused (see test_pairing_property): nothing written
                history.run(op)
        full = t.compile(include_reasoning=reasoning)
        limit = max(1, int(full.token_count * share))  # a limit near the context's size
        state = t._session.head_state()
        pinned = {s.commit for s in state.slots if s.priority == PRIORITY_CODES["pinned"]}
        try:
            ctx = t.compile(max_tokens=limit, include_reasoning=reasoning)
        except BudgetExceeded as exc:
            refused = exc
        else:
            refused = None
        if refused is not None:
            event("refused: system and pinned over the limit")
            assert refused.limit == limit < refused.token_count
            kept = [
                c
                for m, c in zip(full.messages, full.commit_ids, strict=True)
                if m.role == "system" or c in pinned
            ]
            assert kept or full.tools  # something that may not go is over the limit
            return
        assert ctx.token_count <= limit
        check_context(ctx)
        assert set(ctx.dropped).isdisjoint(ctx.commit_ids)
        assert set(ctx.dropped) <= set(full.commit_ids)
        for message, commit in zip(full.messages, full.commit_ids, strict=True):
            if message.role == "system" or commit in pinned:
                assert commit in ctx.commit_ids
        if full.token_count <= limit:
            event("fits whole")
            assert ctx == full
            assert ctx.dropped == ()
            return
        event("dropped")
        if reasoning:
            return
        event("dropped, checked against skip annotations")
        # the same drops as ordinary skip annotations, on a branch: the very same context
        here = t.current_branch
        t.branch(history.fresh("check"))
        for commit in ctx.dropped:
            t.annotate(commit, "skip")
        skipped = t.compile()
        assert list(skipped.commit_ids) == list(ctx.commit_ids)
        assert [m.to_dict() for m in skipped.messages] == [m.to_dict() for m in ctx.messages]
        assert skipped.token_count == ctx.token_count
        assert here is not None
