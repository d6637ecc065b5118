"""Tool sets: schemas from OpenAI- or Anthropic-shaped dicts, the ordered set a commit links, and the
per-branch setting ``set_tools`` keeps in the local ``meta`` table."""

from __future__ import annotations

from typing import Any

from tractkv.errors import ContentError, InvalidInput
from tractkv.ids import ObjectId
from tractkv.model import ToolSchema, ToolSet, object_id
from tractkv.store import WriteBatch

ACTIVE_TOOLS = b"tools:"  # meta key prefix: branch ref -> tool set id set_tools() links to later commits
EMPTY_TOOLSET_ID = object_id(ToolSet(tools=()))


def tool_schemas(tools: list[dict[str, Any]]) -> list[ToolSchema]:
    """The stored schemas of a tools list (validated, before anything is staged)."""
    if not isinstance(tools, list | tuple):
        raise InvalidInput("tools must be a list of tool schemas")
    return [tool_schema(t) for t in tools]


def put_toolset(batch: WriteBatch, schemas: list[ToolSchema]) -> ObjectId:
    """Stage the schemas and the ordered tool set of their ids (each encoded once); returns the set's id."""
    return batch.put(ToolSet(tools=tuple(batch.put(s) for s in schemas)))


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
