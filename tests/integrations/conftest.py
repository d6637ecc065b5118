"""Fixtures of the integration tests: running a script in a fresh interpreter, and a real hub process."""

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

from tractkv.store import LmdbStore

ROOT = Path(__file__).resolve().parent.parent.parent
HERE = Path(__file__).resolve().parent


def run_script(script: str, *args: str) -> Any:
    """Run ``tests/integrations/<script>`` in a fresh interpreter (tractkv from this checkout); its one JSON
    line, decoded. A failure shows the child's stderr."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    done = subprocess.run(
        [sys.executable, str(HERE / script), *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Callable[[], str]]:
    """``hub()`` starts a real ``tractkv serve`` on 127.0.0.1 (an empty store) and returns its URL."""
    procs: list[subprocess.Popen[str]] = []

    def start() -> str:
        store = tmp_path / f"hub{len(procs)}"
        LmdbStore(str(store), durable=False).close()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "tractkv", "--store", str(store), "serve", "--port", "0"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()  # printed once the socket listens
        assert line.startswith("http://127.0.0.1:"), line
        return line

    yield start
    for proc in procs:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture
def recorder() -> Iterator[Any]:
    """The LLM SDK tests' recording server (tests/llm/conftest.py) on 127.0.0.1: scripted replies, recorded
    requests."""
    from http.server import ThreadingHTTPServer
    from threading import Thread

    from llm.conftest import Recorder, _handler

    rec = Recorder()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(rec))
    server.daemon_threads = True
    rec.port = server.server_address[1]
    thread = Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
