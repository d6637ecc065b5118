"""Tool sets: schemas from OpenAI- or Anthropic-shaped dicts, the ordered set a commit links, and the
per-branch setting ``set_tools`` keeps in the local ``meta`` table."""

from __future__ import annotations

from typing import Any

from tractkv.errors import ContentError, InvalidInput
from tractkv.model import ToolSchema, ToolSet, object_id

ACTIVE_TOOLS = b"tools:"  # meta key prefix: branch ref -> tool set id set_tools() links to later commits
EMPTY_TOOLSET_ID = object_id(ToolSet(tools=()))


def toolset_objects(tools: list[dict[str, Any]] | None) -> list[ToolSchema | ToolSet]:
    """The schemas and (last) the tool set for a tools list; empty for None."""
    if tools is None:
        return []
    if not isinstance(tools, list | tuple):
        raise InvalidInput("tools must be a list of tool schemas")
    schemas = [tool_schema(t) for t in tools]
    return [*schemas, ToolSet(tools=tuple(object_id(s) for s in schemas))]


def tool_schema(tool: Any) -> ToolSchema:
    """A stored tool schema from an OpenAI- or Anthropic-shaped dict."""
    if isinstance(tool, ToolSchema):
        return tool
    if not isinstance(tool, dict):
        raise InvalidInput("a tool schema must be a dict (OpenAI or Anthropic shape)")
    name = tool.get("name")
    if tool.get("type") == "function" and isinstance(tool.get("function"), dict):
        name = tool["function"].get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInput("a tool schema needs a name (function.name for OpenAI, name for Anthropic)")
    try:
        return ToolSchema(name=name, schema=tool)
    except InvalidInput as exc:
        raise ContentError(f"tool {name!r}: {exc}") from exc
