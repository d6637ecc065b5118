"""tractkv.integrations.mcp: an MCP server written with the SDK (tests/integrations/mcp_app.py, over stdio as
a subprocess) driven by the agent loop through an :class:`MCPConnection`: content parts (an image the dialects
render, never a repr), ``isError``, usage records, a tool list change becoming a new tool-set version, timeouts,
and a connection that leaves no thread or process behind."""

from __future__ import annotations

import base64
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import types as mcp_types

from tractkv import InvalidInput, ToolServerUnavailable, Tract
from tractkv.integrations.mcp import MCPConnection, result_from_mcp
from tractkv.llm import ScriptedLLM
from tractkv.toolkit import ToolExecutor, run

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
APP = [sys.executable, str(HERE / "mcp_app.py")]
# the servers import what this process imports (a PYTHONPATH given, e.g. an older mcp to check the floor)
ENV = {"PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(ROOT), str(HERE)) if p)}
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def _children() -> set[int]:
    """This process's live child processes (Linux /proc)."""
    pids: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            pids.update(int(p) for p in (task / "children").read_text().split())
        except OSError:
            continue
    return pids


def _bridge_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("tractkv-mcp")]


@pytest.fixture
def clean() -> Any:
    """Every test here must leave no bridge thread and no server process behind."""
    before = _children()
    yield
    deadline = time.monotonic() + 5
    while (_bridge_threads() or _children() - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _bridge_threads() == []
    assert _children() - before == set()


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


@pytest.mark.slow  # a server subprocess
@pytest.mark.parametrize("mode", ["auto", "legacy"])  # a 2026-07-28 session, and the initialize handshake
def test_run_drives_an_mcp_server_with_an_image_an_error_and_a_tool_list_change(
    mode: str, clean: None
) -> None:
    t = Tract.open()
    llm = ScriptedLLM(
        [
            _call("c1", "picture"),
            _call("c2", "unlock"),
            _call("c3", "secret", word="hi"),
            _call("c4", "fail"),
            _call("c5", "add", a=2, b=3),
            "done",
        ]
    )
    with MCPConnection(APP, env=ENV, mode=mode) as server:
        executor = ToolExecutor(t)
        assert server.register(executor) == [
            "add",
            "crash",
            "fail",
            "files",
            "picture",
            "reveal",
            "slow",
            "unlock",
        ]
        assert server.version == 1
        t.user("go")
        result = run(t, llm, executor)
        assert server.version == 2  # the listing after unlock
    assert (result.stop_reason, result.text, len(result.usage_ids)) == ("done", "done", 5)

    offered = [[tool["function"]["name"] for tool in call.tools or ()] for call in llm.calls]
    assert "secret" not in offered[1]
    assert "secret" in offered[2]
    replies = [c for c in t.log() if c.content_type == "dialogue" and c.role == "assistant"]
    before, after = (t.get_commit_tools(c.commit_id) for c in (replies[-1], replies[0]))
    assert "secret" not in [s["function"]["name"] for s in before]
    assert "secret" in [s["function"]["name"] for s in after]  # a new tool-set version on the branch

    anthropic = t.compile().to_anthropic_params()["messages"]
    picture = anthropic[2]["content"][0]
    assert picture["type"] == "tool_result"
    assert picture["tool_use_id"] == "c1"
    assert picture["content"] == [
        {"type": "text", "text": "the chart:"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()},
        },
    ]
    openai = t.compile().to_openai_params()["messages"]
    assert "b'" not in str(openai[2]["content"])
    assert "ImageContent" not in str(openai[2]["content"])
    assert openai[3]["role"] == "user"  # OpenAI's tool messages hold text: the image follows as an attachment
    assert openai[3]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")

    output = t.compile().to_responses_params()["input"][2]["output"]  # the Responses dialect: input parts
    assert output[1]["image_url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
    gemini = t.compile().to_gemini_params()["contents"][2]["parts"]  # Gemini: inline_data after the response
    assert {"inline_data": {"mime_type": "image/png", "data": PNG}} in gemini
    tools = [m for m in t.compile().messages if m.role == "tool"]
    assert [tools[1].content, tools[4].content] == ["unlocked", "5"]
    assert tools[2].content == "HI"
    # mcp 2.0's MCPServer adds the exception's text
    assert tools[3].content.startswith("Error: Error executing tool fail")
    assert [m.is_error for m in tools] == [False, False, False, True, False]
    usages = {u.tool_name: u for u in t.tool_usages()}
    assert set(usages) == {"picture", "unlock", "secret", "fail", "add"}
    assert usages["picture"].result == "the chart:\n[image (image/png, 70 bytes)]"
    assert usages["fail"].status == "error"
    assert usages["fail"].error == tools[3].content.removeprefix("Error: ")
    assert usages["secret"].arguments == {"word": "hi"}


@pytest.mark.slow  # a server subprocess
def test_results_keep_text_images_and_resources_as_parts_never_a_repr(clean: None) -> None:
    with MCPConnection(APP, env=ENV) as server:
        result = server.call("files")
        picture = server.call("picture")
    assert result.success
    assert picture.parts == (
        {"type": "text", "text": "the chart:"},
        {"type": "image", "data": PNG, "media_type": "image/png"},
    )
    text, pdf, link, audio, svg = result.parts
    assert text["type"] == "document"
    assert text["media_type"] == "text/plain"
    assert (text["data"], text["title"]) == (b"# Notes", "file:///notes.md")
    assert (pdf["type"], pdf["media_type"], pdf["title"]) == (
        "document",
        "application/pdf",
        "file:///report.pdf",
    )
    assert pdf["data"].startswith(b"%PDF-")
    assert link == {"type": "text", "text": "[resource link: file:///big.csv (big.csv, text/csv)]"}
    assert audio["type"] == "text"
    assert "audio (audio/wav, 12 bytes): not kept" in audio["text"]
    assert svg["type"] == "text"
    assert "image/svg+xml" in svg["text"]
    assert "# Notes" in result.output
    assert "b'" not in result.output

    t = Tract.open()  # the parts commit as a tool result every dialect renders
    t.assistant("", tool_calls=[{"id": "c1", "name": "files", "arguments": {}}])
    t.tool_result("c1", "files", list(result.parts))
    blocks = t.compile().to_anthropic_params()["messages"][-1]["content"][0]["content"]
    assert [b["type"] for b in blocks] == ["document", "document", "text", "text", "text"]


def test_is_error_and_structured_only_results() -> None:
    error = result_from_mcp("f", {"content": [{"type": "text", "text": "no such file"}], "isError": True})
    assert (error.success, error.error, error.parts) == (False, "no such file", ())
    empty_error = result_from_mcp("f", mcp_types.CallToolResult(content=[], is_error=True))
    assert empty_error.error == "the tool reported an error"
    structured = result_from_mcp(
        "f", mcp_types.CallToolResult(content=[], structured_content={"b": 1, "a": [2]})
    )
    assert (structured.success, structured.output, structured.parts) == (True, '{"a": [2], "b": 1}', ())
    garbled = result_from_mcp("f", {"content": [{"type": "image", "data": "%%%", "mimeType": "image/png"}]})
    # a result of text alone is plain text (no parts)
    assert (garbled.output, garbled.parts) == ("[image (image/png): its data is not base64, not kept]", ())
    lying = result_from_mcp(
        "f", {"content": [{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}]}
    )
    assert (lying.parts, lying.output) == (
        (),
        "[image (image/png, 5 bytes): not kept, tractkv keeps PNG, JPEG, GIF and WebP images and PDFs]",
    )  # bytes that are no PNG are never stored as one


@pytest.mark.slow  # a server subprocess
def test_a_call_over_its_timeout_is_an_error_result_and_the_connection_goes_on(clean: None) -> None:
    with MCPConnection(APP, env=ENV, timeout=0.5) as server:
        slow = server.call("slow", {"seconds": 3})
        assert not slow.success
        assert "timed out" in slow.error
        assert server.call("add", {"a": 1, "b": 1}).output == "2"
        assert server.call("slow", {"seconds": 0.01}, timeout=5).output == "awake"
        unknown = server.call("nope")
        assert not unknown.success
        assert "nope" in unknown.error
    after = server.call("add", {"a": 1, "b": 1})
    assert not after.success
    assert "closed" in after.error


@pytest.mark.slow  # server subprocesses
@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-c", "import sys; sys.exit(3)"],  # exits at once
        ["/nonexistent/tractkv-mcp-server"],  # cannot start
        "http://127.0.0.1:9/mcp",  # nothing listens there
        [sys.executable, "-c", "import time; time.sleep(60)"],  # never answers the handshake
    ],
)
def test_a_server_that_cannot_be_reached_raises_and_leaves_nothing_running(
    command: list[str], clean: None
) -> None:
    with pytest.raises(ToolServerUnavailable, match="MCP server"):
        MCPConnection(command, connect_timeout=2, close_timeout=2)


@pytest.mark.slow  # a server subprocess
def test_prefixes_collisions_and_the_tools_set_tools_takes(clean: None) -> None:
    t = Tract.open()
    with MCPConnection(APP, env=ENV) as server:
        executor = ToolExecutor(t)

        @executor.register
        def add(a: int, *, context: Any) -> int:
            """A local add."""
            return a

        with pytest.raises(InvalidInput, match=r"has tools named \['add'\]"):
            server.register(executor)
        assert server.register(executor, prefix="m_")[0] == "m_add"
        assert executor.execute("m_add", {"a": 2, "b": 2}).output == "4"
        assert executor.execute("add", {"a": 7}).output == "7"
        bad = executor.execute("m_add", {"a": "two", "b": 2})  # checked before the call, like any tool
        assert not bad.success
        assert "invalid arguments" in bad.error
        stored = t.set_tools(server.tools())  # the protocol's own shape, as set_tools takes it
        assert [s["name"] for s in stored] == [
            "add",
            "picture",
            "files",
            "unlock",
            "fail",
            "slow",
            "reveal",
            "crash",
        ]
        assert "inputSchema" in stored[0]
    assert executor.available_tools() == ["add"]  # a closed connection's tools leave the executor
    with pytest.raises(InvalidInput, match="http"):
        MCPConnection("localhost:8000")
    with pytest.raises(InvalidInput, match="prefix"):
        server.register(executor, prefix="has space")


def test_an_sdk_server_object_connects_in_process_and_unofferable_tools_are_skipped(clean: None) -> None:
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("inproc")

    @app.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    @app.tool(name="has.dots")
    def dots() -> str:
        """A name providers refuse."""
        return "dots"

    @app.tool()
    def takes_context(context: str) -> str:
        """A parameter named like the tool context."""
        return context

    with MCPConnection(app) as server:
        names = [d.name for d in server.definitions()]
        assert names == ["echo", "has_dots"]
        assert "context" in server.skipped["takes_context"]
        executor = ToolExecutor(Tract.open())
        server.register(executor)
        assert executor.execute("has_dots", {}).output == "dots"
        assert executor.execute("echo", {"text": "hi"}).output == "hi"


@pytest.mark.slow  # a server subprocess
def test_a_server_that_dies_mid_session_gives_error_results_and_closes_cleanly(clean: None) -> None:
    t = Tract.open()
    with MCPConnection(APP, env=ENV, timeout=10) as server:
        executor = ToolExecutor(t)
        server.register(executor)
        crashed = executor.execute("crash", {})
        assert not crashed.success
        assert "MCP server" in crashed.error
        after = executor.execute("add", {"a": 1, "b": 2})
        assert not after.success
        assert "MCP server" in after.error
    assert [u.status for u in t.tool_usages()] == ["error", "error"]  # every execution is a usage record


@pytest.mark.slow  # a server subprocess
def test_refresh_lists_the_tools_again_when_the_server_changed_them_quietly(clean: None) -> None:
    with MCPConnection(APP, env=ENV) as server:
        executor = ToolExecutor(Tract.open())
        server.register(executor)
        assert executor.execute("reveal", {}).output == "revealed"
        assert "hidden" not in executor.available_tools()  # not announced: not known
        assert server.version == 1
        assert "hidden" in [tool["name"] for tool in server.refresh()]
        assert server.version == 2
        assert executor.execute("hidden", {}).output == "found"  # the executor picked the new list up
        server.refresh()
        assert server.version == 2  # a listing that changed nothing is no new version


def test_refresh_raises_when_listing_fails_or_times_out_and_bad_results_are_invalid_input(
    clean: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio
    from mcp.server.mcpserver import MCPServer

    from tractkv.integrations import mcp as mcp_module

    with pytest.raises(InvalidInput):
        result_from_mcp("f", {"content": "nope"})
    app = MCPServer("inproc")

    @app.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    with MCPConnection(app, timeout=0.5) as server:

        async def failing(client: Any, cursor: str | None) -> Any:
            raise RuntimeError("listing broke")

        monkeypatch.setattr(mcp_module, "_list_page", failing)
        with pytest.raises(ToolServerUnavailable, match="listing broke"):
            server.refresh()

        async def hanging(client: Any, cursor: str | None) -> Any:
            await anyio.sleep(5)

        monkeypatch.setattr(mcp_module, "_list_page", hanging)
        with pytest.raises(ToolServerUnavailable, match="no answer"):
            server.refresh()
        monkeypatch.undo()
        assert [tool["name"] for tool in server.refresh()] == ["echo"]
