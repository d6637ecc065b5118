"""Fixtures for the toolkit tests: a fake clock, Tracts over both stores (fsck on teardown), script helpers."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tractkv import Tract
from tractkv.store import LmdbStore, MemoryStore, fsck

START_US = 1_700_000_000_000_000  # a fixed instant (Nov 2023) so ids and timestamps are reproducible


class FakeClock:
    """A clock in µs: every call advances ``step``; tests move it with ``advance_ms`` inside tools."""

    def __init__(self, start: int = START_US, step: int = 1_000) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> int:
        self.now += self.step
        return self.now

    def advance_ms(self, ms: float) -> None:
        self.now += int(ms * 1000)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["memory", "lmdb"])
def open_tract(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> Iterator[Callable[..., Tract]]:
    """A factory for Tracts on one store (memory or LMDB); all are closed and the store fsck'd at the end."""
    opened: list[Tract] = []
    path = None if request.param == "memory" else str(tmp_path / "store")
    memory = MemoryStore() if path is None else None

    def factory(**kwargs: Any) -> Tract:
        kwargs.setdefault("clock", clock)
        if memory is not None:
            t = Tract(memory, owns_store=False, **kwargs)
        else:
            kwargs.setdefault("durable", False)
            t = Tract.open(path, **kwargs)
        opened.append(t)
        return t

    factory.is_lmdb = path is not None  # type: ignore[attr-defined]
    yield factory
    for t in opened:
        t.close()
    if memory is not None:
        report = fsck(memory)
        memory.close()
    elif path is not None and os.path.exists(path):
        with LmdbStore(path, durable=False) as store:
            report = fsck(store)
    else:
        return
    assert report.ok, report.problems


@pytest.fixture
def tract(open_tract: Callable[..., Tract]) -> Tract:
    """One Tract on a fresh store (memory and LMDB)."""
    return open_tract()


def call(call_id: str, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """A scripted assistant reply making one tool call (OpenAI shape)."""
    return calls((call_id, name, arguments or {}))


def calls(*items: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    """A scripted assistant reply making several tool calls."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in items
        ],
    }
