"""Tools in context and the agent toolkit.

* tool definitions, profiles and the 15 built-in tools (:mod:`.definitions`, :mod:`.profiles`,
  :mod:`.builtin`, ``get_all_tools``); a JSON-Schema subset validator (:mod:`.schema`); ``ToolCall`` (a
  model's tool call, as the engine stores it) is re-exported here, as in the reference;
* :class:`ToolExecutor` with :class:`ToolContext` and an :class:`EventBus` (usage rows, trees and
  statistics live in the engine: :mod:`tractkv.engine.usage.rows`, ``usage_tree``, ``usage_stats``);
* the agent loop (:mod:`.loop`) and conversation export (:mod:`.export`).

The toolkit sits above the :class:`~tractkv.Tract` facade and drives it. Every name here loads on first
use (``ToolStats``, ``ToolUsage`` and ``UsageNode`` from the engine, where usage queries live).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tractkv import _lazy

if TYPE_CHECKING:
    from tractkv.engine.content import ToolCall
    from tractkv.engine.usage import ToolStats, ToolUsage, UsageNode
    from tractkv.engine.values import RunResult

    from .builtin import get_all_tools
    from .context import ToolContext
    from .definitions import ToolConfig, ToolDefinition, ToolResult, tool
    from .events import EventBus, ToolEvent
    from .executor import ToolExecutor
    from .export import export_conversation
    from .loop import run
    from .profiles import FULL_PROFILE, SELF_PROFILE, SUPERVISOR_PROFILE, ToolProfile, as_tools, get_profile

# name -> the module holding it, relative to this package; every public name loads on first use (keeps ``import
# tractkv`` light), and tests/toolkit/test_package.py checks that this table is __all__
_LAZY = {
    "EventBus": ".events",
    "FULL_PROFILE": ".profiles",
    "RunResult": ".loop",
    "SELF_PROFILE": ".profiles",
    "SUPERVISOR_PROFILE": ".profiles",
    "ToolCall": "..engine.content",
    "ToolConfig": ".definitions",
    "ToolContext": ".context",
    "ToolDefinition": ".definitions",
    "ToolEvent": ".events",
    "ToolExecutor": ".executor",
    "ToolProfile": ".profiles",
    "ToolResult": ".definitions",
    "ToolStats": "..engine.usage",
    "ToolUsage": "..engine.usage",
    "UsageNode": "..engine.usage",
    "as_tools": ".profiles",
    "export_conversation": ".export",
    "get_all_tools": ".builtin",
    "get_profile": ".profiles",
    "run": ".loop",
    "tool": ".definitions",
}
__getattr__, __dir__ = _lazy.lazy_exports(__name__, _LAZY)


__all__ = [
    "FULL_PROFILE",
    "SELF_PROFILE",
    "SUPERVISOR_PROFILE",
    "EventBus",
    "RunResult",
    "ToolCall",
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
    "get_all_tools",
    "get_profile",
    "run",
    "tool",
]
