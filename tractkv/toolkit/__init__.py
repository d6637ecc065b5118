"""Tools in context and the agent toolkit.

* tool-result hooks (:mod:`.hooks`) and tool-call queries (:mod:`.queries`), used by the Tract facade;
* tool definitions, profiles and the 15 built-in tools (:mod:`.definitions`, :mod:`.profiles`,
  :mod:`.builtin`); a JSON-Schema subset validator (:mod:`.schema`);
* :class:`ToolExecutor` with :class:`ToolContext`, usage tracking (:mod:`.usage`) and an :class:`EventBus`;
* the agent loop (:mod:`.loop`) and conversation export (:mod:`.export`).

``import tractkv`` loads only the hooks and queries; every other name here loads on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .context import ToolContext
    from .definitions import ToolConfig, ToolDefinition, ToolResult, tool
    from .events import EventBus, ToolEvent
    from .executor import ToolExecutor
    from .export import export_conversation
    from .loop import RunResult, run
    from .profiles import FULL_PROFILE, SELF_PROFILE, SUPERVISOR_PROFILE, ToolProfile, as_tools, get_profile
    from .usage import ToolStats, ToolUsage, UsageNode

_LAZY = {
    "EventBus": "events",
    "FULL_PROFILE": "profiles",
    "RunResult": "loop",
    "SELF_PROFILE": "profiles",
    "SUPERVISOR_PROFILE": "profiles",
    "ToolConfig": "definitions",
    "ToolContext": "context",
    "ToolDefinition": "definitions",
    "ToolEvent": "events",
    "ToolExecutor": "executor",
    "ToolProfile": "profiles",
    "ToolResult": "definitions",
    "ToolStats": "usage",
    "ToolUsage": "usage",
    "UsageNode": "usage",
    "as_tools": "profiles",
    "export_conversation": "export",
    "get_profile": "profiles",
    "run": "loop",
    "tool": "definitions",
}


def __getattr__(name: str) -> Any:
    """Load a toolkit name on first use (keeps ``import tractkv`` light)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "FULL_PROFILE",
    "SELF_PROFILE",
    "SUPERVISOR_PROFILE",
    "EventBus",
    "RunResult",
    "ToolConfig",
    "ToolContext",
    "ToolDefinition",
    "ToolEvent",
    "ToolExecutor",
    "ToolProfile",
    "ToolResult",
    "ToolStats",
    "ToolUsage",
    "UsageNode",
    "as_tools",
    "export_conversation",
    "get_profile",
    "run",
    "tool",
]
