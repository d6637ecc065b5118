"""Fixtures for the viewer tests: the demo session on disk, real servers (from the sync tests' fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sync.conftest import READER, Clock, clock, start_hub, tokens_file  # noqa: F401  (fixtures, re-exported)

from tractkv import Tract

from .session import build


@pytest.fixture
def demo(tmp_path: Path, clock: Clock) -> tuple[Path, dict[str, str]]:  # noqa: F811
    """The demo session in an LMDB store at ``tmp_path/demo``, closed; (path, commit ids by name)."""
    path = tmp_path / "demo"
    with Tract.open(str(path), clock=clock, durable=False) as t:
        ids = build(t)
    return path, ids


__all__ = ["READER", "demo"]
