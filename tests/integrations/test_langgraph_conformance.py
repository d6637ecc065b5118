"""LangGraph's own checkpointer conformance suite (``langgraph-checkpoint-conformance``) against TractkvSaver.

The whole suite, every capability: ``delete_for_runs`` and ``prune(strategy="keep_latest")`` move the thread's
branch to a history without the dropped checkpoints (then ``gc`` reclaims them; tests/integrations/
test_langgraph.py checks that part)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

from langgraph.checkpoint.conformance import checkpointer_test, validate

from tractkv import Tract
from tractkv.integrations.langgraph import TractkvSaver

BASE = {"put", "put_writes", "get_tuple", "list", "delete_thread", "copy_thread", "delete_for_runs", "prune"}


def test_the_saver_passes_langgraphs_conformance_suite(tmp_path: Path) -> None:
    counter = itertools.count()
    opened: list[Tract] = []

    async def fresh_saver() -> AsyncIterator[TractkvSaver]:
        tract = Tract.open(str(tmp_path / f"store-{next(counter)}"), durable=False)
        opened.append(tract)
        yield TractkvSaver(tract)

    registered = checkpointer_test(name="TractkvSaver")(fresh_saver)
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
    assert passed == BASE, (passed, results)
    skipped = {name for name, result in results.items() if not result.detected or result.passed is None}
    assert not skipped - BASE, skipped
    assert sum(result.tests_passed for result in results.values()) >= 81  # the whole suite ran (0.0.2: 81)
