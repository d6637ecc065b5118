"""A store written before today's tool shape rules (any dict with a name was a tool) stays usable: it compiles,
renders for both providers and through both SDKs' request types, passes fsck, pushes, clones and shows in the
viewer. The rules are input policy (set_tools / commit(tools=) / generate(tools=)), checked in
tests/engine/test_tool_shapes.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tractkv import InvalidInput, Tract
from tractkv.cli import cli
from tractkv.engine.content import ACTIVE_TOOLS, put_toolset, read_stored
from tractkv.engine.content.toolsets import LEGACY
from tractkv.model import ToolSchema
from tractkv.store import LmdbStore, Table

# What earlier releases stored as given: parameters {} (no type), a name with a space, a field no provider
# knows, an unknown type with a name.
LEGACY_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "description": "w", "parameters": {}}},
    {"name": "search docs", "description": "space in name", "input_schema": {"type": "object"}},
    {"name": "legacy", "parameters": {"properties": {"q": {"type": "string"}}}, "extra": 1},
    {"type": "plugin", "name": "plug", "inputSchema": {"type": "object", "properties": {}}, "strict": True},
]
AS_OPENAI = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "w",
            "parameters": {"type": "object", "properties": {}},
        },
    },
    {
        "type": "function",
        "function": {"name": "search docs", "description": "space in name", "parameters": {"type": "object"}},
    },
    {
        "type": "function",
        "function": {
            "name": "legacy",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {"name": "plug", "parameters": {"type": "object", "properties": {}}, "strict": True},
    },
]
AS_ANTHROPIC = [
    {"name": "get_weather", "description": "w", "input_schema": {"type": "object", "properties": {}}},
    {"name": "search docs", "description": "space in name", "input_schema": {"type": "object"}},
    {"name": "legacy", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}},
    {"name": "plug", "input_schema": {"type": "object", "properties": {}}, "strict": True},
]


def old_store(path: Path) -> None:
    """Write a store the way releases before the shape rules did: tool objects straight into a batch."""
    with Tract.open(str(path), durable=False) as t:
        t.system("You help.")
    with LmdbStore(str(path), durable=False) as store:
        batch = store.new_batch()
        schemas = [ToolSchema(name=read_stored(tool).name, schema=tool) for tool in LEGACY_TOOLS]
        toolset = put_toolset(batch, schemas)
        batch.table_put(Table.META, ACTIVE_TOOLS + b"refs/heads/main", toolset.encode())
        store.apply(batch)
    with Tract.open(str(path), durable=False) as t:
        t.user("weather?")
        t.assistant(tool_calls=[{"id": "c1", "name": "get_weather", "arguments": {}}])
        t.tool_result("c1", "get_weather", "sunny")
        t.assistant("Sunny.")


def test_the_legacy_tools_read_as_legacy() -> None:
    for tool in LEGACY_TOOLS:
        spec = read_stored(tool)
        assert spec.shape == LEGACY, tool
        assert spec.legacy, tool


def test_an_old_store_compiles_and_renders_for_both_providers(tmp_path: Path) -> None:
    old_store(tmp_path / "old")
    with Tract.open(str(tmp_path / "old")) as t:
        assert t.get_tools() == LEGACY_TOOLS
        ctx = t.compile()
        assert list(ctx.tools) == LEGACY_TOOLS
        assert ctx.to_openai_params()["tools"] == AS_OPENAI
        assert ctx.to_anthropic_params()["tools"] == AS_ANTHROPIC
        assert ctx.token_count == t.status().token_count > Tract.open().user("x").token_count
        # input policy still holds: re-offering a legacy definition names what to fix
        with pytest.raises(InvalidInput, match="JSON object schema"):
            t.set_tools(t.get_tools())
        t.set_tools([{**AS_ANTHROPIC[0]}])  # the fix: a corrected definition, linked from the next commit
        t.user("and tomorrow?")
        assert t.compile().to_anthropic_params()["tools"] == [AS_ANTHROPIC[0]]


def test_an_old_store_is_clean_for_fsck_and_syncs(tmp_path: Path) -> None:
    old_store(tmp_path / "old")
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "old"), "fsck"])
    assert result.exit_code == 0, result.output
    assert "ok" in result.output
    with Tract.open(str(tmp_path / "remote"), durable=False):
        pass
    with Tract.open(str(tmp_path / "old")) as t:
        head = t.head
        t.remote_add("origin", str(tmp_path / "remote"))
        t.push("origin", "main")
    with Tract.clone(str(tmp_path / "remote"), str(tmp_path / "clone"), durable=False) as c:
        assert c.head == head
        assert c.compile().to_openai_params()["tools"] == AS_OPENAI
        assert c.compile().to_anthropic_params()["tools"] == AS_ANTHROPIC
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "clone"), "fsck"])
    assert result.exit_code == 0, result.output


def test_an_old_store_shows_its_request_in_the_viewer(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from tractkv.view.app import create_app

    old_store(tmp_path / "old")
    with Tract.open(str(tmp_path / "old")) as t:
        tip = t.head
    with LmdbStore(str(tmp_path / "old")) as st:
        app, _ = create_app(st, sync=False)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            assert c.get(f"/ui/commit/{tip}").status_code == 200
            for fmt, tools in (("openai", AS_OPENAI), ("anthropic", AS_ANTHROPIC)):
                response = c.get(f"/ui/commit/{tip}/request.json?fmt={fmt}")
                assert response.status_code == 200
                assert response.json()["tools"] == tools
