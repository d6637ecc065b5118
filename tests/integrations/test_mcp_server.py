"""``tractkv mcp`` and tractkv.integrations.mcp_server: the toolkit's tools served over MCP, driven by the SDK's
own client in-process, through a ``tractkv mcp`` subprocess over stdio, and over streamable HTTP against a real
server process on 127.0.0.1 with the hub's token rules."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
import httpx
from click.testing import CliRunner
from mcp import Client, StdioServerParameters, stdio_client

from tractkv import Tract
from tractkv.cli import cli
from tractkv.integrations.mcp import MCPConnection
from tractkv.integrations.mcp_server import create_server
from tractkv.store import LmdbStore
from tractkv.toolkit import ToolExecutor, ToolResult, as_tools

ROOT = Path(__file__).resolve().parent.parent.parent
ENV = {"PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(ROOT)) if p)}
SELF_TOOLS = ["commit", "compile", "annotate", "status", "log", "compress", "branch", "switch", "reset"]
ADMIN = "admin-token-0123456789"
READER = "read-token-0123456789ab"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def _store(path: Path) -> str:
    with Tract.open(str(path)) as t:
        t.user("hello from the store")
    return str(path)


def test_the_sdk_client_in_process_lists_and_calls_the_tools() -> None:
    t = Tract.open()
    t.user("hi")
    executor = ToolExecutor(t, profile="full")

    @executor.register
    def chart(*, context: Any) -> ToolResult:
        """A chart, as an image."""
        return ToolResult(
            "chart",
            True,
            output="the chart",
            parts=["the chart", {"type": "image", "data": PNG, "media_type": "image/png"}],
        )

    async def drive() -> dict[str, Any]:
        async with Client(create_server(executor)) as client:
            listing = await client.list_tools()
            status = await client.call_tool("status", {})
            commit = await client.call_tool("commit", {"content": "noted"})
            image = await client.call_tool("chart", {})
            unknown = await client.call_tool("nope", {})
            bad = await client.call_tool("commit", {"content": 3})
            return {
                "names": [tool.name for tool in listing.tools],
                "schema": listing.tools[0].input_schema,
                "hints": {t.name: t.annotations for t in listing.tools},
                "status": status,
                "commit": commit,
                "image": image,
                "unknown": unknown,
                "bad": bad,
            }

    out = anyio.run(drive)
    assert len(out["names"]) == 16
    assert out["names"][:1] == ["commit"]
    assert out["schema"] == executor.get("commit").parameters  # type: ignore[union-attr]
    hints = out["hints"]
    assert hints["status"].read_only_hint is True
    assert hints["commit"].read_only_hint is False
    assert hints["reset"].destructive_hint is True
    assert hints["chart"] is None  # a tool of the executor's own: its effects are unknown
    assert not out["status"].is_error
    assert out["status"].content[0].text.startswith("On branch main")
    assert not out["commit"].is_error
    assert t.compile().messages[-1].content == "noted"  # the tool acted on the store
    assert [c.type for c in out["image"].content] == ["text", "image"]
    assert base64.b64decode(out["image"].content[1].data) == PNG
    assert out["unknown"].is_error
    assert "unknown tool 'nope'" in out["unknown"].content[0].text
    assert out["bad"].is_error
    assert "invalid arguments" in out["bad"].content[0].text
    usages = [(u.tool_name, u.status) for u in sorted(t.tool_usages(), key=lambda u: u.started_at)]
    assert usages == [  # every call through MCP leaves a usage record, failed ones too
        ("status", "success"),
        ("commit", "success"),
        ("chart", "success"),
        ("nope", "error"),
        ("commit", "error"),
    ]


@pytest.mark.slow  # a tractkv mcp subprocess
def test_tractkv_mcp_over_stdio_as_a_subprocess(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")

    async def drive(profile: str) -> tuple[list[str], str, str]:
        args = ["-m", "tractkv", "mcp", "--store", store, "--profile", profile]
        params = StdioServerParameters(command=sys.executable, args=args, env=ENV)
        async with Client(stdio_client(params)) as client:
            listing = await client.list_tools()
            committed = await client.call_tool("commit", {"content": f"via {profile}"})
            return (
                [t.name for t in listing.tools],
                listing.tools[0].description or "",
                committed.content[0].text,
            )

    names, description, committed = anyio.run(drive, "self")
    assert names == SELF_TOOLS
    assert description == as_tools("self", format="anthropic")[0]["description"]
    assert committed.startswith("Committed")
    names, description, _ = anyio.run(drive, "supervisor")
    assert len(names) == 15
    assert description == as_tools("supervisor", format="anthropic")[0]["description"]
    with Tract.open(store) as t:
        assert [m.content for m in t.compile().messages] == [
            "hello from the store",
            "via self",
            "via supervisor",
        ]
        assert sorted(u.tool_name for u in t.tool_usages()) == ["commit", "commit"]


class McpProcess:
    """A ``tractkv mcp --http`` process; ``url`` is its MCP endpoint."""

    def __init__(self, store: str, *args: str) -> None:
        cmd = [sys.executable, "-m", "tractkv", "--store", store, "mcp", "--http", "127.0.0.1:0", *args]
        env = {**os.environ, **ENV}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.err: list[str] = []
        self._reader = threading.Thread(target=lambda: self.err.extend(self.proc.stderr or ()), daemon=True)
        self._reader.start()
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://127.0.0.1:"):
            self.stop()
            raise RuntimeError(f"tractkv mcp did not start: {self.url!r} {''.join(self.err)}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=10)
        finally:
            self._reader.join(5)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Any]:
    processes: list[McpProcess] = []

    def start(*args: str) -> McpProcess:
        process = McpProcess(_store(tmp_path / f"s{len(processes)}"), *args)
        processes.append(process)
        return process

    yield start
    for process in processes:
        process.stop()


@pytest.mark.slow  # a tractkv mcp subprocess
def test_streamable_http_with_tokens_against_a_real_server_process(tmp_path: Path, served: Any) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {ADMIN: ["admin"], READER: ["read"]}}))
    server = served("--tokens", str(tokens), "--profile", "full")
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    anonymous = httpx.post(server.url, json=initialize, headers=accept)
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"] == "Bearer"
    wrong = httpx.post(
        server.url, json=initialize, headers={**accept, "Authorization": "Bearer not-a-known-token!"}
    )
    assert wrong.status_code == 401
    reader = httpx.post(server.url, json=initialize, headers={**accept, "Authorization": f"Bearer {READER}"})
    assert reader.status_code == 403
    assert "admin" in reader.json()["error"]

    # tractkv's own MCP client, over HTTP, with the admin token
    with MCPConnection(server.url, headers={"Authorization": f"Bearer {ADMIN}"}) as connection:
        assert len(connection.tools()) == 15
        status = connection.call("status")
        committed = connection.call("commit", {"content": "over http"})
    assert status.success
    assert "On branch main" in status.output
    assert committed.success

    async def sdk_client() -> str:  # the SDK's own client with the token
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {ADMIN}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(streamable_http_client(server.url, http_client=http)) as client,
        ):
            result = await client.call_tool("log", {})
            return str(result.content[0].text)

    assert "over http" in anyio.run(sdk_client)
    assert server.stop() == 0
    assert "bearer tokens with the admin scope required" in "".join(server.err)


@pytest.mark.slow  # a tractkv mcp subprocess
def test_loopback_serves_without_tokens_and_other_hosts_need_them(tmp_path: Path, served: Any) -> None:
    server = served()
    with MCPConnection(server.url) as connection:
        assert [t["name"] for t in connection.tools()] == SELF_TOOLS
    store = _store(tmp_path / "other")
    runner = CliRunner()
    refused = runner.invoke(cli, ["--store", store, "mcp", "--http", "0.0.0.0:0"])
    assert refused.exit_code == 1
    assert "only loopback may be unauthenticated" in refused.output
    stdio_tokens = runner.invoke(cli, ["mcp", "--store", store, "--tokens", "t.json"])
    assert stdio_tokens.exit_code == 1
    assert "--tokens applies to --http only" in stdio_tokens.output
    bad = runner.invoke(cli, ["mcp", "--store", store, "--http", "localhost"])
    assert bad.exit_code == 1
    assert "HOST:PORT" in bad.output
    missing = runner.invoke(cli, ["mcp", "--store", str(tmp_path / "none")])
    assert missing.exit_code == 1
    assert "tractkv init" in missing.output
    assert not (tmp_path / "none").exists()
    LmdbStore(store).close()  # the refused commands left the store as it was


@pytest.mark.slow  # a fresh interpreter
def test_without_the_mcp_extra_the_command_and_the_client_say_which_extra_to_install(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    code = (
        "import sys; sys.modules['mcp'] = None; from tractkv.cli import main; sys.argv[0] = 'tractkv'; main()"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, "--store", store, "mcp"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **ENV, "TRACTKV_DEBUG": ""},
    )
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        "Error: tractkv.integrations.mcp_server needs the mcp extra: pip install 'tractkv[mcp]' "
        "(no module named 'mcp')"
    ]
    code = "import sys; sys.modules['mcp'] = None; import tractkv.integrations.mcp"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **ENV},
    )
    assert (
        "MissingExtra: tractkv.integrations.mcp needs the mcp extra: pip install 'tractkv[mcp]'" in out.stderr
    )


def test_a_result_part_that_cannot_be_mcp_content_is_an_error_result() -> None:
    t = Tract.open()
    executor = ToolExecutor(t, profile="self")

    @executor.register
    def broken(*, context: Any) -> ToolResult:
        """An image part without its media type."""
        return ToolResult("broken", True, output="x", parts=[{"type": "image", "data": b"\x89PNG"}])

    async def drive() -> Any:
        async with Client(create_server(executor)) as client:
            return await client.call_tool("broken", {})

    result = anyio.run(drive)
    assert result.is_error
    assert "broken" in result.content[0].text
    t.close()


def test_the_token_gate_passes_only_http_and_lifespan_scopes() -> None:
    from tractkv.integrations.mcp_server import _TokenGate
    from tractkv.sync.auth import TokenTable

    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["type"])

    gate = _TokenGate(app, TokenTable({ADMIN: ["admin"]}))
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def drive() -> None:
        headers = [(b"authorization", f"Bearer {ADMIN}".encode())]
        await gate({"type": "websocket", "path": "/mcp", "headers": headers}, receive, send)
        with pytest.raises(ValueError, match="weird"):
            await gate({"type": "weird"}, receive, send)
        await gate({"type": "lifespan"}, receive, send)

    anyio.run(drive)
    assert reached == ["lifespan"]
    assert sent == [{"type": "websocket.close", "code": 1008}]


def test_serve_http_runs_off_the_main_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    from tractkv.integrations.mcp_server import serve_http

    ran: list[str] = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: ran.append("run"))
    failures: list[BaseException] = []
    urls: list[str] = []

    def serve() -> None:
        try:
            serve_http(_store(tmp_path / "s"), "self", "127.0.0.1", 0, None, on_ready=urls.append)
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    thread.join(30)
    assert failures == []
    assert ran == ["run"]
    assert urls[0].startswith("http://127.0.0.1:")


def _tool_threads() -> list[threading.Thread]:
    return [th for th in threading.enumerate() if th.name.startswith("tractkv-mcp-tools")]


def test_create_server_leaves_no_worker_thread_behind() -> None:
    import time

    before = len(_tool_threads())
    for _ in range(3):
        t = Tract.open()
        server = create_server(ToolExecutor(t, profile="self"))

        async def drive(server: Any = server) -> None:
            for _run in range(2):  # a server may run again: it gets a worker again
                async with Client(server) as client:
                    assert not (await client.call_tool("status", {})).is_error

        anyio.run(drive)
        deadline = time.monotonic() + 5
        while len(_tool_threads()) > before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(_tool_threads()) == before
        t.close()
