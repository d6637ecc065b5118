"""Tool-result hooks: inspect, edit, summarize or reject a tool result before it is committed.

``t.on("tool_result", handler)`` registers a handler; :meth:`tractkv.Tract.tool_result` builds a
:class:`PendingToolResult`, runs every handler in registration order, and commits what they decided:

* ``approve()`` commits the (possibly edited) content;
* ``edit_result(text)`` replaces the content and approves it;
* ``summarize(instructions=None, target_tokens=None)`` asks the configured model for a summary, replaces the
  content with it and approves it;
* ``reject(reason=None)`` commits nothing (``tool_result`` returns None).

A handler must decide: if, after every handler ran, nothing approved or rejected, :class:`ToolHookError` is
raised and nothing is committed. When the committed text differs from the raw result, the raw original is
stored as a blob linked from the result commit (``links["original"]``), so it syncs with the branch and
``t.original_of(commit)`` recovers it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tractkv.errors import InvalidInput, ToolHookError

EVENTS = ("tool_result",)

Summarizer = Callable[[str, str, "str | None", "int | None"], str]
"""(tool name, text, instructions, target tokens) -> summary text."""


class PendingToolResult:
    """A tool result on its way into the context; handlers decide what is committed."""

    def __init__(
        self,
        *,
        tool_call_id: str,
        tool_name: str,
        content: str,
        token_count: int,
        summarizer: Summarizer,
        counter: Callable[[str], int],
    ) -> None:
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.original_content = content
        self.content = content
        self.token_count = token_count
        self.decision: str | None = None
        self.reason: str | None = None
        self._summarizer = summarizer
        self._counter = counter

    def approve(self) -> None:
        """Commit the current content."""
        self.decision = "approve"

    def reject(self, reason: str | None = None) -> None:
        """Commit nothing."""
        self.decision = "reject"
        self.reason = reason

    def edit_result(self, text: str) -> None:
        """Replace the content with ``text`` and approve it."""
        if not isinstance(text, str):
            raise InvalidInput("edit_result takes the new text as a string")
        self.content = text
        self.token_count = self._counter(text)
        self.decision = "approve"

    def summarize(self, instructions: str | None = None, target_tokens: int | None = None) -> str:
        """Replace the content with a model summary (see ``configure_tool_summarization``) and approve it."""
        summary = self._summarizer(self.tool_name, self.content, instructions, target_tokens)
        self.edit_result(summary)
        return summary

    def __repr__(self) -> str:
        return (
            f"PendingToolResult(tool_call_id={self.tool_call_id!r}, tool_name={self.tool_name!r}, "
            f"token_count={self.token_count}, decision={self.decision!r})"
        )


class HookRegistry:
    """Handlers per event, run in registration order."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[Callable[[Any], object]]] = {event: [] for event in EVENTS}

    def on(self, event: str, handler: Callable[[Any], object]) -> None:
        self._check(event)
        if not callable(handler):
            raise InvalidInput("a hook handler must be callable")
        self._handlers[event].append(handler)

    def off(self, event: str, handler: Callable[[Any], object] | None = None) -> None:
        """Remove one handler, or every handler of the event when ``handler`` is None."""
        self._check(event)
        if handler is None:
            self._handlers[event].clear()
            return
        try:
            self._handlers[event].remove(handler)
        except ValueError:
            raise InvalidInput(f"that handler is not registered for {event!r}") from None

    def has(self, event: str) -> bool:
        return bool(self._handlers.get(event))

    def run_tool_result(self, pending: PendingToolResult) -> PendingToolResult:
        for handler in list(self._handlers["tool_result"]):
            try:
                handler(pending)
            except ToolHookError:
                raise
            except Exception as exc:
                raise ToolHookError(f"tool_result handler {_name(handler)} raised: {exc!r}") from exc
            if pending.decision == "reject":
                break
        if pending.decision is None:
            raise ToolHookError(
                f"no tool_result handler approved or rejected the result of {pending.tool_name!r} "
                f"(call {pending.tool_call_id}); call approve(), reject(), edit_result() or summarize()"
            )
        return pending

    @staticmethod
    def _check(event: str) -> None:
        if event not in EVENTS:
            raise InvalidInput(f"unknown event {event!r}; known: {', '.join(EVENTS)}")


def _name(handler: object) -> str:
    return getattr(handler, "__qualname__", None) or repr(handler)
