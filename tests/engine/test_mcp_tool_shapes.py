"""MCP tool definitions in every form the SDKs give them: the protocol's camelCase (mcp 1.x dumps), the mcp
2.x SDK's snake_case ``Tool.model_dump()``, SDK objects and a whole ``tools/list`` result; and the rule that
tells an mcp 2.x dump from an Anthropic tool (both say ``input_schema``)."""

from __future__ import annotations

from typing import Any

import pytest

from tractkv import InvalidInput, Tract
from tractkv.engine.content.render.anthropic import tool_to_anthropic
from tractkv.engine.content.render.openai import tool_to_openai
from tractkv.engine.content.toolsets import ANTHROPIC, MCP, read_tool, tool_schemas
from tractkv.llm import ScriptedLLM

PARAMS = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
OUTPUT = {"type": "object", "properties": {"text": {"type": "string"}}}

# what mcp 2.x's Tool(...).model_dump() gives: snake_case, every optional field present (None when unset)
MCP2_DUMP: dict[str, Any] = {
    "name": "read_file",
    "title": "Read a file",
    "description": "Read a text file",
    "input_schema": PARAMS,
    "execution": None,
    "output_schema": OUTPUT,
    "icons": None,
    "annotations": {"readOnlyHint": True, "title": None},
    "meta": None,
}
MCP1_DUMP: dict[str, Any] = {  # the protocol's camelCase (mcp 1.x model_dump(), a tools/list on the wire)
    "name": "read_file",
    "title": "Read a file",
    "description": "Read a text file",
    "inputSchema": PARAMS,
    "outputSchema": OUTPUT,
    "annotations": {"readOnlyHint": True},
    "_meta": {"x": 1},
}
RENDERED_OPENAI = {
    "type": "function",
    "function": {"name": "read_file", "description": "Read a text file", "parameters": PARAMS},
}
RENDERED_ANTHROPIC = {"name": "read_file", "description": "Read a text file", "input_schema": PARAMS}


@pytest.mark.parametrize("tool", [MCP2_DUMP, MCP1_DUMP], ids=["mcp2-snake", "mcp1-camel"])
def test_an_mcp_tool_in_either_case_reads_as_mcp_and_renders_without_its_mcp_fields(
    tool: dict[str, Any],
) -> None:
    spec = read_tool(tool)
    assert (spec.shape, spec.name, spec.parameters) == (MCP, "read_file", PARAMS)
    assert tool_to_openai(tool) == RENDERED_OPENAI
    assert tool_to_anthropic(tool) == RENDERED_ANTHROPIC  # Anthropic refuses title / output_schema / meta
    t = Tract.open()
    t.set_tools([tool])
    t.user("hi")
    ctx = t.compile()
    (responses,) = ctx.to_responses_params()["tools"]
    assert (responses["name"], responses["parameters"]) == ("read_file", PARAMS)
    (gemini,) = ctx.to_gemini_params()["tools"][0]["function_declarations"]
    assert (gemini["name"], gemini["parameters_json_schema"]) == ("read_file", PARAMS)


def test_an_mcp2_dump_was_read_as_an_anthropic_tool_before_and_refused() -> None:
    """The rule: with ``input_schema``, a key only MCP has (even None) makes it MCP's. Each one alone."""
    for key in ("title", "output_schema", "annotations", "meta", "_meta", "execution", "icons"):
        tool = {"name": "f", "input_schema": PARAMS, key: None}
        assert read_tool(tool).shape == MCP, key


def test_name_description_and_input_schema_alone_read_as_anthropic_and_render_the_same_either_way() -> None:
    tool = {"name": "read_file", "description": "Read a text file", "input_schema": PARAMS}
    assert read_tool(tool).shape == ANTHROPIC  # the documented default for the ambiguous form
    assert tool_to_anthropic(tool) == RENDERED_ANTHROPIC
    assert tool_to_openai(tool) == RENDERED_OPENAI


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        ({**MCP2_DUMP, "inputSchema": PARAMS}, "one shape per tool"),
        ({**MCP2_DUMP, "outputSchema": OUTPUT}, "one shape per tool"),
        ({**MCP1_DUMP, "output_schema": OUTPUT}, "one shape per tool"),
        ({**MCP2_DUMP, "output_schema": "text"}, "output_schema must be a JSON object"),
        ({**MCP2_DUMP, "input_schema": {"type": "array"}}, "input_schema must be a JSON object schema"),
        ({**MCP2_DUMP, "meta": [1]}, "meta must be a dict"),
        ({**MCP2_DUMP, "annotations": "ro"}, "annotations must be a dict"),
        ({**MCP2_DUMP, "icons": {}}, "icons must be a list"),
        (
            {**MCP2_DUMP, "cache_control": {"type": "ephemeral"}, "title": None},
            None,
        ),  # MCP keeps extra fields
    ],
)
def test_malformed_mcp2_dumps_are_refused_naming_the_field(tool: dict[str, Any], message: str | None) -> None:
    if message is None:
        assert read_tool(tool).shape == MCP
        return
    with pytest.raises(InvalidInput, match=message):
        read_tool(tool)


def test_set_tools_takes_a_tools_list_result_and_stores_each_tool_as_given() -> None:
    t = Tract.open()
    result = {"tools": [MCP1_DUMP, {**MCP2_DUMP, "name": "stat"}], "nextCursor": None}
    stored = t.set_tools(result)
    assert [tool["name"] for tool in stored] == ["read_file", "stat"]
    assert stored[0] == MCP1_DUMP
    t.user("hi")
    assert t.compile().to_anthropic_params()["tools"] == [
        RENDERED_ANTHROPIC,
        {**RENDERED_ANTHROPIC, "name": "stat"},
    ]
    with pytest.raises(InvalidInput, match="tools/list result"):
        t.set_tools({"tools": "read_file"})  # type: ignore[arg-type]


def test_the_mcp_sdks_own_objects_are_accepted_in_their_wire_form() -> None:
    types = pytest.importorskip("mcp.types")
    tool = types.Tool(name="read_file", description="Read a text file", input_schema=PARAMS)
    listing = types.ListToolsResult(tools=[tool])
    t = Tract.open()
    assert t.set_tools(listing) == [  # type: ignore[arg-type]
        {"name": "read_file", "description": "Read a text file", "inputSchema": PARAMS}
    ]
    assert read_tool(tool.model_dump()).shape == MCP  # its snake_case dump, None fields and all
    assert [s.schema for s in tool_schemas([tool])] == [
        {"name": "read_file", "description": "Read a text file", "inputSchema": PARAMS}
    ]


def test_generate_offers_the_tools_of_a_tools_list_result() -> None:
    llm = ScriptedLLM(["ok"])
    t = Tract.open(llm=llm)
    t.user("hi")
    t.generate(tools={"tools": [MCP2_DUMP]})  # type: ignore[arg-type]
    assert [tool["name"] for tool in t.get_commit_tools("HEAD")] == ["read_file"]
    assert llm.calls[0].tools == [MCP2_DUMP]
