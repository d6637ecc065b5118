"""One compress: ``Tract.compress`` and a budget's ``compress`` action plan with one planner
(``merging.plan_compress``) and write one commit shape (``merging.summary_commit``), so for the same history and
summary they make the very same commit."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tractkv import Tract
from tractkv.llm import ScriptedLLM

from .conftest import START_US

SUMMARY = "Ada asked sums and got them."
WEATHER = {"name": "weather", "description": "The weather in a city.", "parameters": {"type": "object"}}
LAST = "And now a last question, a little longer than the others were."


def still() -> int:
    """A clock that never moves: every commit is stamped one microsecond after its parent, whatever path
    (and however many clock reads) made it, so the two surfaces' commits can be compared by id."""
    return START_US


def plain(t: Tract) -> None:
    t.system("You are terse.")
    for i in range(4):
        t.user(f"Question {i}: what is {i} plus {i}, in words please?")
        t.assistant(f"{i} plus {i} is {2 * i}.")


def tools_pins_and_a_turn(t: Tract) -> None:
    t.system("You are terse.")
    first = t.user("My name is Ada; remember it.", tools=[WEATHER])
    t.annotate(first.commit_id, "pinned")
    t.user("What is the weather in Paris, and in Rome?")
    t.assistant(
        tool_calls=[
            {"id": "c1", "name": "weather", "arguments": {"city": "Paris"}},
            {"id": "c2", "name": "weather", "arguments": {"city": "Rome"}},
        ]
    )
    t.tool_result("c1", "weather", "Sunny, 21 degrees.")
    t.tool_result("c2", "weather", "Rain, 14 degrees.")
    t.assistant("Paris is sunny, Rome is wet.")
    t.user("Thanks. Anything else I should know about travelling between them?")
    t.assistant("Take the night train; it is the cheapest way.")


@pytest.mark.parametrize("history", [plain, tools_pins_and_a_turn])
def test_a_compress_budget_and_compress_make_the_same_commit(history: Callable[[Tract], None]) -> None:
    with Tract.open(clock=still) as measure:
        history(measure)
        measure.user(LAST)
        limit = measure.compile().token_count - 1  # the last message takes the context one token over
    with Tract.open(clock=still) as by_budget:
        by_budget.configure_llm(None, summarizer=ScriptedLLM([SUMMARY]))
        history(by_budget)
        by_budget.set_budget(limit, action="compress")
        by_budget.user(LAST)
        made = by_budget.log(limit=1)[0]
        assert made.operation == "compress"
        commit = by_budget.store.get_commit(made.commit_id)
        sources = commit.links["sources"]
        context = by_budget.compile()
    with Tract.open(clock=still) as by_call:
        history(by_call)
        by_call.user(LAST)
        # the budget folded the oldest messages that may go up to its last source: compress() of that range
        info = by_call.compress(to_commit=sources[-1], content=SUMMARY)
        assert by_call.store.get_commit(info.commit_id) == commit
        assert info.commit_id == made.commit_id
        assert by_call.compile().to_openai_params() == context.to_openai_params()
    assert commit.message == f"compress {len(sources)} messages"
    if history is tools_pins_and_a_turn:
        assert commit.tools is not None  # the tool set in force, linked as by compress()
        assert len(sources) >= 4  # the tool turn went whole, the pinned message stayed


def test_the_planner_keeps_what_it_is_told_to_and_fits_oldest_first() -> None:
    from tractkv.engine.merging import plan_compress

    with Tract.open(clock=still) as t:
        plain(t)
        ids = list(t.compile().commit_ids)  # system, then four question / answer pairs
        session = t._session
        everything = plan_compress(session)
        assert everything.sources == tuple(ids[1:])  # the instruction stays
        kept = plan_compress(session, protect={ids[3]}, keep_last=True)
        assert kept.sources == tuple(c for c in ids[1:-1] if c != ids[3])
        assert kept.role == "user"  # the last source's side: the last answer stays
        ranged = plan_compress(session, ids[2], ids[5])
        assert ranged.sources == tuple(ids[2:6])
        full = t.compile().token_count
        fitted = plan_compress(session, fit_to=full - 1, keep_last=True)
        assert fitted.sources == (ids[1],)  # the oldest unit that may go, and only as many as it takes
        assert fitted.fitted is not None
        assert fitted.fitted <= full - 1
        assert fitted.text.startswith("user: Question 0")
        assert fitted.tip is not None
        assert fitted.tip.head == t.head
