"""Tool shapes: every accepted definition renders for both providers, refusals name the problem, and token
totals include the tools in force (estimated once per tool set)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tractkv import HeuristicCounter, InvalidInput, Tract
from tractkv.engine.content import anthropic_params, openai_params, schema_name, tool_tokens
from tractkv.engine.content.render.anthropic import tool_to_anthropic
from tractkv.engine.content.render.openai import tool_to_openai
from tractkv.engine.content.toolsets import (
    ANTHROPIC,
    ANTHROPIC_SERVER,
    EMPTY_PARAMETERS,
    FUNCTION,
    MCP,
    OPENAI_CHAT,
    RESPONSES,
    TOOL_OVERHEAD,
    TOOLS_OVERHEAD,
    read_tool,
    tool_schema,
)

PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
DESCRIPTION = "Current weather for a city"

OPENAI_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "description": DESCRIPTION, "parameters": PARAMS, "strict": True},
}
RESPONSES_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": DESCRIPTION,
    "parameters": PARAMS,
    "strict": False,
}
ANTHROPIC_TOOL = {
    "name": "get_weather",
    "description": DESCRIPTION,
    "input_schema": PARAMS,
    "cache_control": {"type": "ephemeral"},
}
FUNCTION_TOOL = {
    "name": "get_weather",
    "description": DESCRIPTION,
    "parameters": PARAMS,
}  # legacy `functions`
SERVER_TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
MCP_TOOL = {
    "name": "get_weather",
    "title": "Weather",
    "description": DESCRIPTION,
    "inputSchema": PARAMS,
    "outputSchema": {"type": "object", "properties": {"celsius": {"type": "number"}}},
    "annotations": {"readOnlyHint": True},
    "_meta": {"origin": "test"},
}

# shape, definition, OpenAI rendering (None: left out), Anthropic rendering
CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None, dict[str, Any]]] = [
    (
        OPENAI_CHAT,
        OPENAI_TOOL,
        OPENAI_TOOL,
        {"name": "get_weather", "description": DESCRIPTION, "input_schema": PARAMS, "strict": True},
    ),
    (
        RESPONSES,
        RESPONSES_TOOL,
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": DESCRIPTION,
                "parameters": PARAMS,
                "strict": False,
            },
        },
        {"name": "get_weather", "description": DESCRIPTION, "input_schema": PARAMS, "strict": False},
    ),
    (
        ANTHROPIC,
        ANTHROPIC_TOOL,
        {
            "type": "function",
            "function": {"name": "get_weather", "description": DESCRIPTION, "parameters": PARAMS},
        },
        ANTHROPIC_TOOL,
    ),
    (
        FUNCTION,
        FUNCTION_TOOL,
        {"type": "function", "function": FUNCTION_TOOL},
        {"name": "get_weather", "description": DESCRIPTION, "input_schema": PARAMS},
    ),
    (ANTHROPIC_SERVER, SERVER_TOOL, None, SERVER_TOOL),
    (
        MCP,
        MCP_TOOL,
        {
            "type": "function",
            "function": {"name": "get_weather", "description": DESCRIPTION, "parameters": PARAMS},
        },
        {"name": "get_weather", "description": DESCRIPTION, "input_schema": PARAMS},
    ),
]


@pytest.mark.parametrize(("shape", "tool", "as_openai", "as_anthropic"), CASES, ids=[c[0] for c in CASES])
def test_each_shape_renders_for_both_providers(
    shape: str, tool: dict[str, Any], as_openai: dict[str, Any] | None, as_anthropic: dict[str, Any]
) -> None:
    given_copy = copy.deepcopy(tool)
    assert read_tool(tool).shape == shape
    assert schema_name(tool) == tool["name"] if "name" in tool else tool["function"]["name"]
    assert tool_to_openai(tool) == as_openai
    assert tool_to_anthropic(tool) == as_anthropic
    assert tool == given_copy  # rendering never changes the definition


@pytest.mark.parametrize(("shape", "tool", "as_openai", "as_anthropic"), CASES, ids=[c[0] for c in CASES])
def test_a_committed_tool_is_stored_as_given_and_compiles_for_both(
    shape: str, tool: dict[str, Any], as_openai: dict[str, Any] | None, as_anthropic: dict[str, Any]
) -> None:
    t = Tract.open()
    t.commit({"type": "dialogue", "role": "user", "text": "hi"}, tools=[tool])
    ctx = t.compile()
    assert list(ctx.tools) == [tool]
    assert t.get_tools() == [tool]
    openai_request = ctx.to_openai_params()
    assert openai_request.get("tools") == ([as_openai] if as_openai is not None else None)
    assert ctx.to_anthropic_params()["tools"] == [as_anthropic]


def test_absent_schemas_render_as_the_empty_object_schema() -> None:
    bare = [
        {"type": "function", "function": {"name": "ping"}},
        {"type": "function", "name": "ping", "parameters": None, "strict": None, "description": None},
        {"name": "ping"},
    ]
    for tool in bare:
        assert tool_to_openai(tool) == {
            "type": "function",
            "function": {"name": "ping", "parameters": EMPTY_PARAMETERS},
        }
        assert tool_to_anthropic(tool) == {"name": "ping", "input_schema": EMPTY_PARAMETERS}


def test_server_tools_are_left_out_of_openai_requests_only() -> None:
    params = openai_params([], [SERVER_TOOL])
    assert "tools" not in params
    mixed = openai_params([], [SERVER_TOOL, ANTHROPIC_TOOL])
    assert [t["function"]["name"] for t in mixed["tools"]] == ["get_weather"]
    assert anthropic_params([], [SERVER_TOOL, ANTHROPIC_TOOL])["tools"] == [SERVER_TOOL, ANTHROPIC_TOOL]


def test_a_nameless_server_toolset_is_named_by_its_type() -> None:
    toolset = {"type": "computer_toolset_20260801"}
    assert schema_name(toolset) == "computer_toolset_20260801"
    assert tool_to_anthropic(toolset) == toolset
    assert tool_to_openai(toolset) is None


REFUSALS: list[tuple[object, str]] = [
    ("get_weather", "must be a dict"),
    ({"type": "function", "function": {"name": "a.b"}}, "1-64 letters"),
    ({"name": "x" * 65, "input_schema": PARAMS}, "1-64 letters"),
    ({"name": "", "input_schema": PARAMS}, "needs a name"),
    ({"type": "web_search_20250305", "max_uses": 3}, "web_search_20250305 server tool"),  # Anthropic needs it
    ({"type": "function", "function": {"description": "no name"}}, "needs a name"),
    ({"type": "function", "description": "no name"}, "needs a name"),
    ({"type": "function", "function": "get_weather"}, "'function' must be a dict"),
    ({"type": "function", "function": {"name": "a", "parameters": {"type": "string"}}}, "JSON object schema"),
    ({"type": "function", "function": {"name": "a", "parameters": []}}, "JSON object schema"),
    ({"type": "function", "name": "a", "parameters": {"properties": {}}}, "JSON object schema"),
    ({"name": "a", "input_schema": {}}, "JSON object schema"),
    ({"name": "a", "inputSchema": {"type": "array"}}, "inputSchema must be a JSON object schema"),
    ({"name": "a", "inputSchema": PARAMS, "outputSchema": "text"}, "outputSchema must be a JSON object"),
    ({"type": "function", "function": {"name": "a"}, "extra": 1}, "unknown fields ['extra']"),
    (
        {"type": "function", "function": {"name": "a", "input_schema": PARAMS}},
        "unknown fields ['input_schema']",
    ),
    ({"type": "function", "name": "a", "input_schema": PARAMS}, "unknown fields ['input_schema']"),
    ({"name": "a", "input_schema": PARAMS, "parameters": PARAMS}, "unknown fields ['parameters']"),
    ({"name": "a", "parameters": PARAMS, "title": "A"}, "unknown fields ['title']"),
    # an Anthropic tool with a field neither Anthropic nor MCP has (with `title` it would be an mcp 2.x dump)
    ({"name": "a", "input_schema": PARAMS, "surprise": "A"}, "unknown fields ['surprise']"),
    ({"name": "a", "inputSchema": PARAMS, "input_schema": PARAMS}, "one shape per tool"),
    ({"type": "function", "function": {"name": "a", "strict": "yes"}}, "strict must be a boolean"),
    ({"name": "a", "description": 3}, "description must be a string"),
    ({"name": "a", "inputSchema": PARAMS, "title": 3}, "title must be a string"),
    ({"name": "a", "inputSchema": PARAMS, "annotations": []}, "annotations must be a dict"),
    ({"type": "functoin", "name": "a"}, "tool type 'functoin'"),
    ({"type": "web_search", "name": "web_search"}, "tool type 'web_search'"),
    ({"type": "custom", "custom": {"name": "a"}}, "needs a name"),
    ({"name": "a", "input_schema": {"type": "object", "default": b"\x00"}}, "must be JSON"),
]


@pytest.mark.parametrize(("tool", "why"), REFUSALS, ids=[str(i) for i in range(len(REFUSALS))])
def test_malformed_tools_are_refused_naming_the_problem_and_nothing_is_written(
    tool: object, why: str
) -> None:
    with pytest.raises(InvalidInput, match=_escape(why)):
        tool_schema(tool)
    t = Tract.open()
    t.user("hi")
    with pytest.raises(InvalidInput, match=_escape(why)):
        t.commit({"type": "dialogue", "role": "user", "text": "x"}, tools=[tool])
    with pytest.raises(InvalidInput, match=_escape(why)):
        t.set_tools([tool])  # type: ignore[list-item]
    assert t.status().commit_count == 1
    assert t.get_tools() == []


def _escape(text: str) -> str:
    import re

    return re.escape(text)


def test_duplicate_names_in_one_set_are_refused_across_shapes() -> None:
    t = Tract.open()
    with pytest.raises(InvalidInput, match="two tools are named 'get_weather'"):
        t.set_tools([OPENAI_TOOL, MCP_TOOL])
    with pytest.raises(InvalidInput, match="two tools are named 'web_search'"):
        t.commit({"type": "dialogue", "role": "user", "text": "x"}, tools=[SERVER_TOOL, SERVER_TOOL])
    assert t.status().commit_count == 0


def test_rendering_reads_a_definition_the_input_rules_refuse_and_never_raises_for_a_dict() -> None:
    """The shape rules are input policy; rendering (stored tools, or tools given straight to a client) reads
    a refused definition leniently: only its name, description, strict and parameters, an object schema
    made of a parameters dict without ``type``."""
    weird = {"name": "a b", "input_schema": {"type": "string"}, "surprise": 1}
    assert openai_params([], [weird])["tools"] == [
        {"type": "function", "function": {"name": "a b", "parameters": {"type": "string"}}}
    ]
    assert anthropic_params([], [weird])["tools"] == [{"name": "a b", "input_schema": {"type": "string"}}]
    with pytest.raises(InvalidInput, match="must be a dict"):
        anthropic_params([], ["a"])  # type: ignore[list-item]


# --- a property: every shape carries the same function to both providers ---------------------------------

names = st.from_regex(r"[a-zA-Z0-9_-]{1,64}", fullmatch=True)
texts = st.text(max_size=40)
schemas = st.fixed_dictionaries(
    {"type": st.just("object")},
    optional={
        "properties": st.dictionaries(
            names, st.fixed_dictionaries({"type": st.sampled_from(["string", "integer"])})
        ),
        "additionalProperties": st.booleans(),
    },
)


@st.composite
def function_tools(draw: st.DrawFn) -> tuple[dict[str, Any], tuple[str, str | None, Any, bool | None]]:
    name, description = draw(names), draw(st.none() | texts)
    parameters, strict = draw(st.none() | schemas), draw(st.none() | st.booleans())
    shape = draw(st.sampled_from([OPENAI_CHAT, RESPONSES, FUNCTION, ANTHROPIC, MCP]))
    fields: dict[str, Any] = {"name": name}
    if description is not None:
        fields["description"] = description
    if shape == MCP:
        parameters, strict = parameters or EMPTY_PARAMETERS, None
        tool = {**fields, "inputSchema": parameters}
    elif shape == FUNCTION:
        parameters = parameters or EMPTY_PARAMETERS
        tool = {**fields, "parameters": parameters, **({"strict": strict} if strict is not None else {})}
    elif shape == ANTHROPIC:
        tool = {**fields, **({"input_schema": parameters} if parameters is not None else {})}
        tool.update({"strict": strict} if strict is not None else {})
    else:
        extra = {"parameters": parameters} if parameters is not None else {}
        extra.update({"strict": strict} if strict is not None else {})
        function = {**fields, **extra}
        tool = (
            {"type": "function", "function": function}
            if shape == OPENAI_CHAT
            else {"type": "function", **function}
        )
    return tool, (name, description, parameters or EMPTY_PARAMETERS, strict)


@given(function_tools())
def test_every_shape_carries_one_function_to_both_providers(
    case: tuple[dict[str, Any], tuple[str, str | None, Any, bool | None]],
) -> None:
    tool, expected = case
    stored = tool_schema(tool)
    assert stored.schema == tool
    assert stored.name == expected[0]
    for rendered in (tool_to_openai(tool), tool_to_anthropic(tool)):
        assert rendered is not None
        spec = read_tool(rendered)
        assert (spec.name, spec.description, dict(spec.parameters or {}), spec.strict) == expected
        json.dumps(rendered)


# --- token totals -------------------------------------------------------------------------------------------


def fifteen_tools() -> list[dict[str, Any]]:
    """15 tools, ~10 kB of JSON, in every function shape."""
    tools = []
    for i in range(15):
        props = {
            f"field_{j}": {"type": "string", "description": f"parameter {j} of tool {i}: what it filters by"}
            for j in range(6)
        }
        parameters = {"type": "object", "properties": props, "required": ["field_0"]}
        description = f"Tool number {i} searches the records of kind {i} and returns the matching ones."
        name = f"tool_{i}"
        tools.append(
            [
                {
                    "type": "function",
                    "function": {"name": name, "description": description, "parameters": parameters},
                },
                {"type": "function", "name": name, "description": description, "parameters": parameters},
                {"name": name, "description": description, "input_schema": parameters},
                {"name": name, "description": description, "inputSchema": parameters},
            ][i % 4]
        )
    return tools


class CountingCounter(HeuristicCounter):
    name = "counting"

    def __init__(self) -> None:
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        self.texts.append(text)
        return super().count(text)


def test_token_totals_include_the_tools_in_force() -> None:
    tools = fifteen_tools()
    assert 9_000 < len(json.dumps(tools)) < 12_000
    estimate = tool_tokens(tools, HeuristicCounter())
    assert estimate > 2_000  # ~10 kB of JSON is thousands of tokens, not zero
    with_tools, without = Tract.open(), Tract.open()
    for t in (with_tools, without):
        t.system("You are helpful.")
    with_tools.commit({"type": "dialogue", "role": "user", "text": "hi"}, tools=tools)
    without.commit({"type": "dialogue", "role": "user", "text": "hi"})
    assert with_tools.compile().token_count - without.compile().token_count == estimate
    assert with_tools.status().token_count - without.status().token_count == estimate
    with_tools.set_tools(None)
    with_tools.user("and now?")
    without.user("and now?")
    assert with_tools.compile().token_count == without.compile().token_count  # an empty set costs nothing
    assert with_tools.compile(at="HEAD~1").token_count - without.compile(at="HEAD~1").token_count == estimate


def test_the_estimate_is_the_counted_json_plus_the_documented_overheads() -> None:
    counter = CountingCounter()
    total = tool_tokens([OPENAI_TOOL, SERVER_TOOL], counter)
    shown = {"name": "get_weather", "description": DESCRIPTION, "parameters": PARAMS}
    assert counter.texts == [
        json.dumps(shown, sort_keys=True, separators=(",", ":")),
        json.dumps(SERVER_TOOL, sort_keys=True, separators=(",", ":")),
    ]
    expected = (
        sum(HeuristicCounter().count(text) for text in counter.texts) + 2 * TOOL_OVERHEAD + TOOLS_OVERHEAD
    )
    assert total == expected
    assert tool_tokens([], counter) == 0
    # one function, whatever its shape, costs the same (strict, titles, cache_control are not counted)
    shapes = (OPENAI_TOOL, RESPONSES_TOOL, FUNCTION_TOOL, ANTHROPIC_TOOL, MCP_TOOL)
    assert len({tool_tokens([tool], HeuristicCounter()) for tool in shapes}) == 1


def test_tools_are_counted_once_per_tool_set_not_per_compile() -> None:
    counter = CountingCounter()
    t = Tract.open(token_counter=counter)
    tools = fifteen_tools()
    t.commit({"type": "dialogue", "role": "user", "text": "hi"}, tools=tools)
    first = t.compile().token_count

    def tool_counts() -> int:
        return sum(1 for text in counter.texts if text.startswith('{"description":"Tool number'))

    assert tool_counts() == 15
    for i in range(20):
        t.user(f"message {i}")
        assert t.compile().token_count > first
        t.status()
    assert tool_counts() == 15  # appends and compiles reuse the tool set's count
    t.set_tools(tools[:3])
    t.user("fewer tools")
    t.compile()
    assert tool_counts() == 18  # a new tool set is counted once
    t.compile(at="HEAD~1")
    assert tool_counts() == 18  # the old set's count is still cached


def test_schema_name_names_even_a_definition_the_rules_refuse() -> None:
    """Stores written before these rules may hold such tools: the CLI and the viewer still name them."""
    assert schema_name({"type": "function", "function": {"name": "a.b", "parameters": {}}}) == "a.b"
    assert schema_name({"name": "old", "input_schema": {}}) == "old"
    assert schema_name({"description": "nameless"}) == "?"
    assert schema_name("text") == "?"


def test_an_older_stores_refused_tool_is_counted_as_it_renders() -> None:
    old = {"name": "old", "input_schema": {}, "extra": 1}  # accepted before the object-schema rule
    shown = {"name": "old", "parameters": {"type": "object", "properties": {}}}
    text = json.dumps(shown, sort_keys=True, separators=(",", ":"))
    expected = HeuristicCounter().count(text) + TOOL_OVERHEAD + TOOLS_OVERHEAD
    assert tool_tokens([old], HeuristicCounter()) == expected


# --- None in an optional field is absent (what SDK model_dump() output carries) ---------------------------


def _none_dumps() -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """(definition with None fields, OpenAI rendering, Anthropic rendering), from the real SDK types."""
    from openai.types import chat as chat_types
    from openai.types.shared import FunctionDefinition

    empty = {"type": "object", "properties": {}}
    # ChatCompletionFunctionTool: openai >= 1.99 (the SDK floors run this test too)
    chat_tool = getattr(chat_types, "ChatCompletionFunctionTool", None)

    def chat_dump(function: FunctionDefinition) -> dict[str, Any]:
        if chat_tool is None:
            return {"type": "function", "function": function.model_dump()}
        dumped: dict[str, Any] = chat_tool(type="function", function=function).model_dump()
        return dumped

    chat = chat_dump(FunctionDefinition(name="f", parameters=PARAMS))
    bare = chat_dump(FunctionDefinition(name="f"))
    mcp = {  # MCP's Tool.model_dump() (the mcp package is not a dependency): its optional fields as None
        "name": "f",
        "title": None,
        "description": None,
        "inputSchema": PARAMS,
        "outputSchema": None,
        "annotations": None,
        "meta": None,
    }
    anthropic = {
        "name": "f",
        "description": None,
        "input_schema": PARAMS,
        "cache_control": None,
        "strict": None,
    }
    fn = {"type": "function", "function": {"name": "f", "parameters": PARAMS}}
    cases = [
        (chat, fn, {"name": "f", "input_schema": PARAMS}),
        (
            bare,
            {"type": "function", "function": {"name": "f", "parameters": empty}},
            {
                "name": "f",
                "input_schema": empty,
            },
        ),
        (mcp, fn, {"name": "f", "input_schema": PARAMS}),
        (anthropic, fn, {"name": "f", "input_schema": PARAMS}),
    ]
    try:  # the Responses API's types (openai >= 1.66)
        from openai.types.responses import FunctionTool
    except ImportError:
        return cases
    flat = FunctionTool(type="function", name="f", parameters=None, strict=None, description="d")
    return [
        *cases,
        (
            flat.model_dump(),
            {"type": "function", "function": {"name": "f", "description": "d", "parameters": empty}},
            {"name": "f", "description": "d", "input_schema": empty},
        ),
    ]


def test_none_in_an_optional_field_is_absent_at_input_and_not_rendered() -> None:
    pytest.importorskip("openai")
    for tool, as_openai, as_anthropic in _none_dumps():
        assert any(value is None for value in [*tool.values(), *tool.get("function", {}).values()]), tool
        t = Tract.open()
        t.set_tools([tool])
        t.user("hi")
        assert t.get_tools() == [tool]  # stored as given
        ctx = t.compile()
        assert ctx.to_openai_params()["tools"] == [as_openai], tool
        assert ctx.to_anthropic_params()["tools"] == [as_anthropic], tool
        assert tool_schema(tool).name == "f"


def test_none_for_a_required_field_is_still_refused() -> None:
    with pytest.raises(InvalidInput, match="needs a name"):
        tool_schema({"name": None, "input_schema": PARAMS})
    with pytest.raises(InvalidInput, match="needs a name"):
        tool_schema({"type": "function", "function": {"name": None}})
