"""Tool turns: the tool-result pipeline (``results``), its hooks (``hooks``), the queries over tool calls
and results (``queries``) and the branch's tool setting (``settings``: ``set_tools``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tractkv import _lazy

if TYPE_CHECKING:
    from .hooks import PendingToolResult
    from .queries import (
        ToolTurn,
        context_infos,
        tool_turns,
    )
    from .results import ToolResults
    from .settings import (
        get_tools,
        set_tools,
    )
else:
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "PendingToolResult": ".hooks",
            "ToolResults": ".results",
            "ToolTurn": ".queries",
            "context_infos": ".queries",
            "get_tools": ".settings",
            "set_tools": ".settings",
            "tool_turns": ".queries",
        },
    )

__all__ = [
    "PendingToolResult",
    "ToolResults",
    "ToolTurn",
    "context_infos",
    "get_tools",
    "set_tools",
    "tool_turns",
]
