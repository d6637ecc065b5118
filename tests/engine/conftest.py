"""Fixtures for the engine tests: a fake clock and Tracts over both stores (fsck on teardown)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tractkv import Tract
from tractkv.store import LmdbStore, MemoryStore, fsck

START_US = 1_700_000_000_000_000  # a fixed instant (Nov 2023) so ids and timestamps are reproducible


class FakeClock:
    """A clock for ``Tract.open(clock=...)``: every call advances one millisecond; ``advance`` jumps ahead."""

    def __init__(self, start: int = START_US, step: int = 1_000) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> int:
        self.now += self.step
        return self.now

    def advance(self, hours: float) -> None:
        self.now += int(hours * 3600 * 1_000_000)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["memory", "lmdb"])
def open_tract(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> Iterator[Callable[..., Tract]]:
    """A factory for Tracts on one store (memory or LMDB); every one opened is closed and fsck'd at the end.

    For LMDB each call opens the store directory again (a fresh handle, as a new process would). For memory
    every call opens a further handle on one store, which outlives the handles (closing one is a "reopen").
    """
    opened: list[Tract] = []
    path = None if request.param == "memory" else str(tmp_path / "store")
    memory = MemoryStore() if path is None else None

    def factory(**kwargs: object) -> Tract:
        kwargs.setdefault("clock", clock)
        if memory is not None:
            t = Tract(memory, owns_store=False, **kwargs)  # type: ignore[arg-type]
        else:
            kwargs.setdefault("durable", False)
            t = Tract.open(path, **kwargs)  # type: ignore[arg-type]
        opened.append(t)
        return t

    factory.is_lmdb = path is not None  # type: ignore[attr-defined]
    yield factory
    for t in opened:
        t.close()  # closing writes checkpoints: check the store after that
    if memory is not None:
        report = fsck(memory)
        memory.close()
    elif os.path.exists(path):  # type: ignore[arg-type]
        with LmdbStore(path, durable=False) as store:  # type: ignore[arg-type]
            report = fsck(store)
    else:
        return
    assert report.ok, report.problems


@pytest.fixture
def tract(open_tract: Callable[..., Tract]) -> Tract:
    """One Tract on a fresh store (memory and LMDB)."""
    return open_tract()
