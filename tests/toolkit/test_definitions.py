"""Tool definitions, tools from functions (schemas from hints and docstrings), and the handler contract."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import pytest

from tractkv.errors import InvalidInput
from tractkv.toolkit import ToolContext, ToolDefinition, ToolResult, tool
from tractkv.toolkit.definitions import json_schema_for, parse_docstring


def _params(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "additionalProperties": False}


def test_openai_and_anthropic_shapes() -> None:
    def handler(q: str, *, context: ToolContext) -> str:
        return q

    params = {**_params(q={"type": "string"}), "required": ["q"]}
    d = ToolDefinition("search", "Search things.", params, handler)
    assert d.to_openai() == {
        "type": "function",
        "function": {"name": "search", "description": "Search things.", "parameters": params},
    }
    assert d.to_anthropic() == {"name": "search", "description": "Search things.", "input_schema": params}
    assert d.to_format("anthropic") == d.to_anthropic()
    d.to_openai()["function"]["parameters"]["properties"]["q"]["type"] = "changed"
    assert d.parameters["properties"]["q"]["type"] == "string"  # a copy each time
    with pytest.raises(InvalidInput, match="format"):
        d.to_format("gemini")


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def test_a_function_becomes_a_tool_from_hints_and_docstring() -> None:
    @tool
    def search(
        query: str,
        limit: int | None = None,
        tags: list[str] | None = None,
        mode: Literal["fast", "deep"] = "fast",
        exact: bool = False,
        threshold: float = 0.5,
        filters: dict[str, Any] | None = None,
        color: Color = Color.RED,
        note: Annotated[str, "A free note."] = "",
        *,
        context: ToolContext,
    ) -> str:
        """Search the notes for a phrase.

        Use it before answering
        questions about earlier work.

        Args:
            query: The phrase to look for.
            limit: At most this many hits;
                all when omitted.
            tags (list[str]): Only notes with these tags.

        Returns:
            The hits, one per line.
        """
        return query

    assert isinstance(search, ToolDefinition)
    assert search.name == "search"
    assert search.description == (
        "Search the notes for a phrase.\n\nUse it before answering questions about earlier work."
    )
    props = search.parameters["properties"]
    assert search.parameters["required"] == ["query"]
    assert search.parameters["additionalProperties"] is False
    assert props["query"] == {"type": "string", "description": "The phrase to look for."}
    assert props["limit"] == {
        "type": ["integer", "null"],
        "description": "At most this many hits; all when omitted.",
        "default": None,
    }
    assert props["tags"] == {
        "type": ["array", "null"],
        "items": {"type": "string"},
        "description": "Only notes with these tags.",
        "default": None,
    }
    assert props["mode"] == {"type": "string", "enum": ["fast", "deep"], "default": "fast"}
    assert props["exact"] == {"type": "boolean", "default": False}
    assert props["threshold"] == {"type": "number", "default": 0.5}
    assert props["filters"] == {"type": ["object", "null"], "default": None}
    assert props["color"] == {"type": "string", "enum": ["red", "blue"]}  # an enum default is not JSON
    assert props["note"] == {"type": "string", "description": "A free note.", "default": ""}
    assert "context" not in props
    # the definition stays callable
    assert search("x", context=None) == "x"  # type: ignore[arg-type]


def test_tool_decorator_with_arguments_and_no_docstring() -> None:
    @tool(name="lookup_v2", description="Look a key up.")
    def lookup(key: str, *, context: ToolContext) -> str:
        return key

    assert (lookup.name, lookup.description) == ("lookup_v2", "Look a key up.")

    def nodoc(key: str, *, context: ToolContext) -> str:
        return key

    with pytest.raises(InvalidInput, match="docstring"):
        tool(nodoc)


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (int | None, {"type": ["integer", "null"]}),
        (str | int, {"type": ["string", "integer"]}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (tuple[str, ...], {"type": "array", "items": {"type": "string"}}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (Literal["a", "b"] | None, {"type": ["string", "null"], "enum": ["a", "b", None]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Any, {}),
        (list[int] | dict[str, Any], {"type": ["array", "object"], "items": {"type": "integer"}}),
    ],
)
def test_type_hints_map_to_json_schema(hint: Any, schema: dict[str, Any]) -> None:
    assert json_schema_for(hint) == schema


def test_unsupported_hints_and_missing_hints_are_refused() -> None:
    with pytest.raises(InvalidInput, match="no JSON Schema"):
        json_schema_for(complex)

    def untyped(x, *, context: ToolContext) -> str:  # type: ignore[no-untyped-def]
        """Doc."""
        return ""

    with pytest.raises(InvalidInput, match="needs a type hint"):
        tool(untyped)

    def star(*items: str, context: ToolContext) -> str:
        """Doc."""
        return ""

    with pytest.raises(InvalidInput, match=r"\*items"):
        tool(star)


def test_parse_docstring_sections() -> None:
    summary, args = parse_docstring(
        """Do a thing.

        Args:
            a: First.
            b (int): Second,
                continued.
            **kwargs: Extra.

        Raises:
            ValueError: never an arg.
        """
    )
    assert summary == "Do a thing."
    assert args == {"a": "First.", "b": "Second, continued.", "kwargs": "Extra."}


# --- the handler contract ---------------------------------------------------------------------------------


def _no_context(q: str) -> str:
    return q


def _positional_context(q: str, context: ToolContext) -> str:
    return q


def _missing_param(*, context: ToolContext) -> str:
    return ""


def _unrequired(q: str, *, context: ToolContext) -> str:
    return q


@pytest.mark.parametrize(
    ("handler", "params", "message"),
    [
        (_no_context, {**_params(q={"type": "string"}), "required": ["q"]}, "keyword-only parameter"),
        (_positional_context, {**_params(q={"type": "string"}), "required": ["q"]}, "keyword-only parameter"),
        (_missing_param, _params(q={"type": "string"}), "no parameter 'q'"),
        (_unrequired, _params(q={"type": "string"}), "must declare it as required"),
        (lambda *, context: "", _params(context={"type": "string"}), "reserved"),
        ("not callable", _params(), "not callable"),
    ],
)
def test_unfit_handlers_are_refused_when_the_definition_is_made(
    handler: Any, params: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        ToolDefinition("t", "A tool.", params, handler)


def test_a_handler_taking_kwargs_accepts_any_declared_parameter() -> None:
    def handler(*, context: ToolContext, **kwargs: Any) -> str:
        return ""

    ToolDefinition("t", "A tool.", _params(a={"type": "string"}, b={"type": "integer"}), handler)


def test_a_function_without_context_is_refused_by_tool() -> None:
    def plain(q: str) -> str:
        """Doc."""
        return q

    with pytest.raises(InvalidInput, match=r"def plain\(\.\.\., \*, context: ToolContext\)"):
        tool(plain)


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "dot.name"])
def test_bad_names_and_descriptions(name: str) -> None:
    with pytest.raises(InvalidInput):
        ToolDefinition(name, "A tool.", _params())
    with pytest.raises(InvalidInput, match="description"):
        ToolDefinition("ok", "  ", _params())


def test_tool_result_text() -> None:
    assert ToolResult("t", True, "out").text == "out"
    assert ToolResult("t", True).text == "(no output)"
    assert str(ToolResult("t", False, error="boom")) == "Error: boom"
    assert ToolResult("t", True, "x") == ToolResult("t", True, "x")
