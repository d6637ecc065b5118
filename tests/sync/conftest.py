"""Fixtures for the sync tests: a fake clock, stores on disk, and real `tractkv serve` hubs on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tractkv import Tract
from tractkv.store import LmdbStore, fsck
from tractkv.toolkit import ToolContext, ToolExecutor, tool

START_US = 1_700_000_000_000_000
ADMIN = "admin-token-0123456789abcdef"
READER = "reader-token-0123456789abcdef"
EDGE = "edge7-token-0123456789abcdef"


class Clock:
    """A shared fake clock (µs): every call advances 1 ms, so every store's commits have distinct times."""

    def __init__(self) -> None:
        self.now = START_US

    def __call__(self) -> int:
        self.now += 1_000
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def open_store_tract(tmp_path: Path, clock: Clock) -> Iterator[Callable[..., Tract]]:
    """``factory(name)``: a Tract on ``tmp_path/name`` (LMDB, not durable); all closed and fsck'd at the end."""
    opened: list[Tract] = []

    def factory(name: str, **kwargs: Any) -> Tract:
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("durable", False)
        t = Tract.open(str(tmp_path / name), **kwargs)
        opened.append(t)
        return t

    yield factory
    for t in opened:
        path = t.store.path if hasattr(t.store, "path") else None
        t.close()
        if path is not None and os.path.exists(path):
            with LmdbStore(path, durable=False) as st:
                report = fsck(st)
            assert report.ok, (path, report.problems)


class Hub:
    """A `tractkv serve` (or `tractkv view`) subprocess; ``url`` is where it listens."""

    def __init__(self, store: Path, *args: str, command: str = "serve") -> None:
        self.store = store
        cmd = [sys.executable, "-m", "tractkv", "--store", str(store), command, "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()  # printed once the socket listens
        if not line.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"hub did not start: {line!r} {self.stop()}")
        self.url = line.removesuffix("/ui/")  # `view` prints the viewer's address

    def stop(self) -> str:
        """Interrupt (Ctrl-C) and wait; returns what the hub wrote on stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=10)
        return err or ""


@pytest.fixture
def start_hub(tmp_path: Path) -> Iterator[Callable[..., Hub]]:
    """``start_hub(*serve_args, store=None, command="serve")``: a real hub (or, with ``command="view"``, a
    viewer) on 127.0.0.1 (port picked by the OS); stopped and its store fsck'd at the end."""
    hubs: list[Hub] = []

    def factory(*args: str, store: Path | None = None, command: str = "serve") -> Hub:
        hub = Hub(store or tmp_path / f"hub{len(hubs)}", *args, command=command)
        hubs.append(hub)
        return hub

    yield factory
    for hub in hubs:
        killed = hub.proc.returncode == -signal.SIGKILL  # a crash test killed it on purpose
        err = hub.stop()
        assert killed or hub.proc.returncode == 0, err
        assert killed or "Traceback" not in err, err
        if hub.store.exists():
            with LmdbStore(str(hub.store), durable=False) as st:
                report = fsck(st)
            assert report.ok, report.problems


@pytest.fixture
def tokens_file(tmp_path: Path) -> str:
    path = tmp_path / "tokens.json"
    path.write_text(
        json.dumps({"tokens": {ADMIN: ["admin"], READER: ["read"], EDGE: ["write:agents/edge-7/*"]}})
    )
    return str(path)


@tool
def add(a: int, b: int, *, context: ToolContext) -> str:
    """Add two integers."""
    return str(a + b)


def tool_session(t: Tract, turns: int = 2) -> None:
    """A session with tools, tool calls, results and recorded tool executions (through the agent loop)."""
    from tractkv.llm import ScriptedLLM

    t.system("You add numbers with the add tool.")
    ex = ToolExecutor(t, profile=None, tools=[add])
    for i in range(turns):
        t.user(f"what is {i} + {i + 1}?")
        call = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{t.status().commit_count}",
                    "type": "function",
                    "function": {"name": "add", "arguments": json.dumps({"a": i, "b": i + 1})},
                }
            ],
        }
        t.run(ScriptedLLM([call, f"{2 * i + 1}"]), ex)


def snapshot(t: Tract) -> tuple[Any, ...]:
    """What must be identical on both sides of a sync: messages, tools and tool-usage history."""
    ctx = t.compile()
    usages = [(u.id, u.tool_name, u.status, u.result) for u in t.tool_usages()]
    return (ctx.to_openai(), ctx.tools, usages, t.head)
