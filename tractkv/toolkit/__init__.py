"""Tools in context and the agent toolkit.

* tool definitions, profiles and the 15 built-in tools (:mod:`.definitions`, :mod:`.profiles`,
  :mod:`.builtin`, ``get_all_tools``); a JSON-Schema subset validator (:mod:`.schema`); ``ToolCall`` (a
  model's tool call, as the engine stores it) is re-exported here, as in the reference;
* :class:`ToolExecutor` with :class:`ToolContext` and an :class:`EventBus` (usage rows, trees and
  statistics live in the engine: :mod:`tractkv.engine.usage.rows`, ``usage_tree``, ``usage_stats``);
* the agent loop (:mod:`.loop`: ``run(t, llm, executor)``), conversation export (:mod:`.transcript`:
  ``export(t, format)``), re-running a failed execution (:mod:`.rerun`: ``rerun_tool_usage(t, usage_id)``) and
  the profiles' tools as schemas (``as_tools(profile)``): functions of a Tract, which the facade does not
  reach up to (its ``Tract.run`` / ``as_tools`` / ``export`` / ``rerun_tool_usage`` are deprecated aliases).

The toolkit sits above the :class:`~tractkv.Tract` facade and drives it. Every name here loads on first
use (``ToolStats``, ``ToolUsage`` and ``UsageNode`` from the engine, where usage queries live).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tractkv import _lazy

from . import context as _context

if TYPE_CHECKING:
    from tractkv.engine.content import ToolCall
    from tractkv.engine.usage import ToolStats, ToolUsage, UsageNode
    from tractkv.engine.values import RunResult

    from .builtin import get_all_tools
    from .context import ToolContext
    from .definitions import ToolConfig, ToolDefinition, ToolProfile, ToolResult, tool
    from .events import EventBus, ToolEvent
    from .executor import ToolExecutor
    from .loop import run
    from .profiles import FULL_PROFILE, SELF_PROFILE, SUPERVISOR_PROFILE, as_tools, get_profile
    from .rerun import rerun_tool_usage
    from .transcript import export, export_conversation

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
    "ToolProfile": ".definitions",
    "ToolResult": ".definitions",
    "ToolStats": "..engine.usage",
    "ToolUsage": "..engine.usage",
    "UsageNode": "..engine.usage",
    "as_tools": ".profiles",
    "export": ".transcript",
    "export_conversation": ".transcript",
    "get_all_tools": ".builtin",
    "get_profile": ".profiles",
    "rerun_tool_usage": ".rerun",
    "run": ".loop",
    "tool": ".definitions",
}
__getattr__, __dir__ = _lazy.lazy_exports(__name__, _LAZY)


def _run_child(*args: Any, **kwargs: Any) -> RunResult:
    """``ToolContext.run_child``'s child loop: the agent loop's, imported on first use (this package sits above
    both the call context and the loop, so neither imports the other's side)."""
    from .loop import run_child

    return run_child(*args, **kwargs)


_context.provide_child_loop(_run_child)


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
    "export",
    "export_conversation",
    "get_all_tools",
    "get_profile",
    "rerun_tool_usage",
    "run",
    "tool",
]
