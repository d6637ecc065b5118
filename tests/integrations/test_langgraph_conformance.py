"""LangGraph's own checkpointer conformance suite (``langgraph-checkpoint-conformance``) against TractkvSaver.

Every capability the suite tests must pass. ``delete_for_runs`` and ``prune`` are skipped: the saver raises
``Unsupported`` for them (``prune(strategy="keep_latest")``, ``delete_for_runs``: both would rewrite history
that has already synced), as the README says; ``prune(strategy="delete")`` has tests of its own."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

from langgraph.checkpoint.conformance import checkpointer_test, validate

from tractkv import Tract
from tractkv.integrations.langgraph import TractkvSaver

BASE = {"put", "put_writes", "get_tuple", "list", "delete_thread", "copy_thread"}
UNSUPPORTED = {"delete_for_runs", "prune"}


def test_the_saver_passes_langgraphs_conformance_suite(tmp_path: Path) -> None:
    counter = itertools.count()
    opened: list[Tract] = []

    async def fresh_saver() -> AsyncIterator[TractkvSaver]:
        tract = Tract.open(str(tmp_path / f"store-{next(counter)}"), durable=False)
        opened.append(tract)
        yield TractkvSaver(tract)

    registered = checkpointer_test(name="TractkvSaver", skip_capabilities=UNSUPPORTED)(fresh_saver)
    try:
        report = asyncio.run(validate(registered))
    finally:
        for tract in opened:
            tract.close()
    results = report.results
    failures = {
        name: result.failures
        for name, result in results.items()
        if result.detected and result.passed is False
    }
    assert not failures, failures
    passed = {name for name, result in results.items() if result.detected and result.passed}
    assert passed >= BASE, (passed, results)
    assert sum(result.tests_passed for result in results.values()) >= 66  # the suite really ran (0.0.2: 66)
