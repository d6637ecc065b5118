"""A small MCP server written with the SDK (``MCPServer``), run over stdio by tests/integrations/test_mcp_client.py:
text, an image, resources, audio, an error, a slow tool, and a tool that adds another and announces the change."""

from __future__ import annotations

import base64
import contextlib
import os
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

# a 1x1 PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"

server = MCPServer("test-app")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def picture() -> list[TextContent | ImageContent]:
    """A chart, as an image."""
    return [
        TextContent(text="the chart:"),
        ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png"),
    ]


@server.tool()
def files() -> list[EmbeddedResource | ResourceLink | AudioContent | ImageContent]:
    """Resources of every kind."""
    return [
        EmbeddedResource(
            resource=TextResourceContents(uri="file:///notes.md", mime_type="text/markdown", text="# Notes")
        ),
        EmbeddedResource(
            resource=BlobResourceContents(
                uri="file:///report.pdf", mime_type="application/pdf", blob=base64.b64encode(PDF).decode()
            )
        ),
        ResourceLink(uri="file:///big.csv", name="big.csv", mime_type="text/csv"),
        AudioContent(data=base64.b64encode(b"RIFF0000WAVE").decode(), mime_type="audio/wav"),
        ImageContent(data=base64.b64encode(b"<svg/>").decode(), mime_type="image/svg+xml"),
    ]


def secret(word: str) -> str:
    """Say the word, loudly."""
    return word.upper()


@server.tool()
async def unlock(ctx: Context) -> str:
    """Unlock the secret tool."""
    server.add_tool(secret)
    await ctx.notify_tools_changed()  # 2026-07-28 sessions: subscriptions/listen streams
    with contextlib.suppress(Exception):  # handshake-era sessions: the notification itself (modern: none)
        await ctx.request_context.session.send_tool_list_changed()
    return "unlocked"


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("the disk is on fire")


@server.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "awake"


def hidden() -> str:
    """A tool added without announcing it."""
    return "found"


@server.tool()
def reveal() -> str:
    """Add the hidden tool, quietly (no tools/list_changed)."""
    server.add_tool(hidden)
    return "revealed"


@server.tool()
def crash() -> str:
    """End the server process at once."""
    os._exit(1)


if __name__ == "__main__":
    server.run("stdio")
