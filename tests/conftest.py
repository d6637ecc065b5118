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


def compile_bindings(name: str) -> list[tuple[object, str]]:
    """Every module of the compile package that binds ``name`` (a constant such as ``CHUNK_SLOTS`` or a helper
    such as ``_chunk_rows``, imported from where it is defined), so a test can change it everywhere at once."""
    import importlib
    import pkgutil

    import tractkv.engine.compile as package

    found: list[tuple[object, str]] = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        if name in vars(module):
            found.append((module, name))
    return found


def patch_compile(monkeypatch: pytest.MonkeyPatch, name: str, value: object) -> None:
    """Set ``name`` to ``value`` in every compile module that binds it (see :func:`compile_bindings`)."""
    for module, attr in compile_bindings(name):
        monkeypatch.setattr(module, attr, value)
