"""``ToolContext``: what a tool handler gets, built right before its call and dropped right after.

A handler declares it keyword-only (``def handler(..., *, context: ToolContext)``) and the executor injects
it. Through it a handler reads the tract and the compiled context the call came from, calls the model, and
orchestrates: ``context.execute(...)`` runs another tool and ``context.run_child(...)`` runs a child agent
loop; both are recorded as children of the current usage and publish on the same event bus.

Tools that change the context the model is in the middle of (a commit, a branch switch, a reset...) must
not land between an assistant's tool call and its result: an API rejects a tool result that does not
follow its call. Inside an agent step such changes go through :meth:`ToolContext.defer`, which runs them
right after the step's tool results are committed (outside a step, at once).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from tractkv.errors import InvalidInput
from tractkv.ids import ObjectId

if TYPE_CHECKING:
    from tractkv.engine.values import CompiledContext, RunResult
    from tractkv.llm.protocol import LLMClient
    from tractkv.tract import Tract

    from .definitions import ToolDefinition, ToolProfile, ToolResult
    from .events import EventBus


Deferred = Callable[[], "str | None"]


class Executor(Protocol):
    """What a call's context and the child loops it starts use of the executor running the call: a
    :class:`~tractkv.toolkit.ToolExecutor` (named by this protocol because the executor, which builds
    contexts, sits above this module)."""

    events: EventBus
    result_limit: int

    def execute(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, parent_id: str | None = None
    ) -> ToolResult: ...

    def get(self, name: str) -> ToolDefinition | None: ...


# The child agent loop of run_child is the agent loop's (.loop, above the executor, which is above this module):
# the toolkit package, which sits above them all, hands it here when it is imported (see provide_child_loop).
_child_loop: list[Callable[..., RunResult]] = []


def provide_child_loop(run_child: Callable[..., RunResult]) -> None:
    """Set the function :meth:`ToolContext.run_child` calls (``tractkv/toolkit/__init__.py`` does, once)."""
    _child_loop[:] = [run_child]


class AgentStep:
    """One agent step on one tract: the changes its tools deferred until its tool results are committed."""

    def __init__(self, tract: Tract) -> None:
        self.tract = tract
        self.deferred: list[tuple[str, Deferred]] = []

    def defer(self, tool_name: str, action: Deferred) -> None:
        self.deferred.append((tool_name, action))

    def take(self) -> list[tuple[str, Deferred]]:
        out, self.deferred = self.deferred, []
        return out


@attrs.frozen(kw_only=True)
class ToolContext:
    """Everything a tool handler may use for one call (frozen and slotted; never kept past the call).

    Attributes:
        tract: the tract the tools act on (the executor's).
        compiled: the compiled context the model saw when it made the call (None outside an agent step).
        llm: the model client of the run (or the tract's), or None.
        executor: the executor running this call, a :class:`~tractkv.toolkit.ToolExecutor`
            (``context.executor.execute`` nests under this usage; typed by the :class:`Executor` protocol).
        events: the event bus every nested execution publishes on.
        usage_id: this execution's usage id.
        parent_id: the enclosing execution's usage id, or None at the top level.
        commit_id: the assistant commit whose tool call started this execution, or None.
        tool_call_id: the model's id for the call, or None.
        tool_name: the tool being run.
        step: the agent step this call belongs to (for :meth:`defer`), or None.
    """

    tract: Tract
    compiled: CompiledContext | None
    llm: LLMClient | None
    executor: Executor
    events: EventBus
    usage_id: str
    parent_id: str | None = None
    commit_id: ObjectId | None = None
    tool_call_id: str | None = None
    tool_name: str = ""
    step: AgentStep | None = None

    def execute(self, name: str, arguments: dict[str, Any] | None = None) -> ToolResult:
        """Run another tool of this executor as a child of this usage (never raises; see ToolResult)."""
        return self.executor.execute(name, arguments, parent_id=self.usage_id)

    def run_child(
        self,
        prompt: str,
        *,
        llm: LLMClient | None = None,
        tools: Iterable[str | ToolDefinition] = (),
        profile: str | ToolProfile | None = None,
        system: str | None = None,
        max_steps: int = 8,
        branch: str | None = None,
        **params: Any,
    ) -> RunResult:
        """Run a child agent loop on a fresh branch of the same store; its tool executions nest here.

        Args:
            prompt: the task, committed as the child's first user message.
            llm: the child's model (default: this call's model).
            tools: tools the child may call: names of this executor's tools, or definitions.
            profile: built-in tools the child gets on its own context (``"self"``...), or None.
            system: a system instruction committed before the prompt.
            max_steps: the child's step limit.
            branch: keep the child's conversation on this branch; by default it runs on a temporary branch
                that is deleted afterwards (its commits stay reachable through the usage records).
            **params: generation parameters for the child's model calls.

        Returns:
            The child's :class:`~tractkv.toolkit.RunResult` (its final text and step count).
        """
        return _child_loop[0](
            self,
            prompt,
            llm=llm if llm is not None else self.llm,
            tools=tools,
            profile=profile,
            system=system,
            max_steps=max_steps,
            branch=branch,
            params=params,
        )

    def defer(self, action: Deferred, note: str) -> str:
        """Run ``action`` after this agent step's tool results are committed, or now outside a step.

        Returns ``note`` (what to tell the model) when deferred, else what ``action`` returned.
        """
        if not callable(action):
            raise InvalidInput("defer() takes a callable")
        if self.step is not None and self.step.tract is self.tract:
            self.step.defer(self.tool_name, action)
            return note
        return action() or ""
