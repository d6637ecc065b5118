"""Shared fixtures: hypothesis profiles and a store fixture run against both stores (fsck on teardown)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tractkv.store import LmdbStore, MemoryStore, Store, fsck

settings.register_profile("dev", max_examples=60, deadline=None)
settings.register_profile(
    "ci", max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("deep", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(params=["memory", "lmdb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Each contract test runs against the in-memory and the LMDB store; teardown checks fsck is clean."""
    st: Store = MemoryStore() if request.param == "memory" else LmdbStore(tmp_path / "store", durable=False)
    yield st
    report = fsck(st)
    st.close()
    assert report.ok, report.problems
