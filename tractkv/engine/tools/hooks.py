"""Tool-result hooks: inspect, edit, summarize or reject a tool result before it is committed.

``t.on("tool_result", handler)`` registers a handler; ``t.on("*", handler)`` one for every hookable event
(``tool_result``, and the ``budget_exceeded`` notification). Handlers of the event itself win: when any is
registered, the ``"*"`` handlers do not run for that event. :meth:`tractkv.Tract.tool_result` builds a
:class:`PendingToolResult` and runs the handlers in registration order until one decides:

* ``approve()`` commits the current content and returns the :class:`~tractkv.engine.values.records.CommitInfo`;
* ``reject(reason=None)`` commits nothing (``tool_result`` returns None);
* ``edit_result(text)`` and ``summarize(instructions=None, target_tokens=None)`` change the content (the raw
  result stays in ``original_content``) **without deciding**: approve or reject afterwards.

When no handler decided, ``tool_result`` returns the pending result itself, to be approved (or edited,
summarized, rejected) later; its call keeps waiting for a result meanwhile. A pending result is decided once:
acting on a decided one raises :class:`~tractkv.errors.InvalidInput`.

Provenance: the committed result's metadata names the hook that ran (``triggered_by: "hook:<name>"``), and,
when ``summarize()`` ran, ``summarized_from``: the id of the raw result's ``tool_original`` blob, which the
commit links (``links["original"]``) whenever the committed text differs from the raw one. Both are part of
the commit, so they sync with the branch; ``t.original_of(commit)`` recovers the raw text.

Notifications: ``t.on("budget_exceeded", handler)`` hears of every commit that took the branch's context over
its budget's limit (:mod:`tractkv.engine.budget`), once that commit (and the trim or compress commit the
budget added) landed: the handler receives a :class:`~tractkv.engine.values.records.BudgetOverrun` and decides
nothing. ``"*"`` handlers receive these too (tell the events apart by the payload's type).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tractkv.errors import InvalidInput, ToolHookError, TractError

if TYPE_CHECKING:
    from tractkv.engine.values import CommitInfo

EVENTS = ("tool_result", "budget_exceeded")
ANY_EVENT = "*"  # a handler for every event (one registered for the event itself wins)

Summarizer = Callable[[str, str, "str | None", "int | None"], str]
"""(tool name, text, instructions, target tokens) -> summary text."""

PENDING, APPROVED, REJECTED = "pending", "approved", "rejected"


class PendingToolResult:
    """A tool result on its way into the context; a handler (or the caller, later) decides what is committed.

    Attributes:
        tool_call_id, tool_name: the call this result answers.
        content: the text to commit (what ``edit_result`` / ``summarize`` changed).
        original_content: the raw result once the content was changed, else None.
        token_count: tokens of ``content``.
        is_error: the result reports a failure.
        status: ``"pending"``, ``"approved"`` or ``"rejected"``.
        reason: why it was rejected (``reject(reason)``).
        result: the committed :class:`~tractkv.engine.values.records.CommitInfo` once approved.
        triggered_by: the hook that handled it (``"hook:<name>"``), recorded in the commit's metadata.
        summarized: ``summarize()`` produced (part of) the content.
    """

    def __init__(
        self,
        *,
        tool_call_id: str,
        tool_name: str,
        content: str,
        token_count: int,
        summarizer: Summarizer,
        counter: Callable[[str], int],
        commit: Callable[[PendingToolResult], CommitInfo],
        is_error: bool = False,
    ) -> None:
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.content = content
        self.original_content: str | None = None
        self.token_count = token_count
        self.is_error = is_error
        self.status = PENDING
        self.reason: str | None = None
        self.result: CommitInfo | None = None
        self.triggered_by: str | None = None
        self.summarized = False
        self._summarizer = summarizer
        self._counter = counter
        self._commit = commit

    @property
    def raw_content(self) -> str:
        """The result as the tool returned it."""
        return self.content if self.original_content is None else self.original_content

    def approve(self) -> CommitInfo:
        """Commit the current content and return the commit.

        Inside a handler it commits on the tip ``tool_result`` started from; later (a result returned
        undecided) on the branch's current tip, provided the call still waits for a result there.

        Raises:
            InvalidInput: decided already, or (later) the call no longer waits for a result.
            ConcurrentUpdate: another handle moved the branch while the handler ran; nothing committed, and
                the result stays pending.
        """
        self._require_pending("approve")
        self.result = self._commit(self)  # raises before any state change when the commit fails
        self.status = APPROVED
        return self.result

    def reject(self, reason: str | None = None) -> None:
        """Commit nothing; ``tool_result`` returns None.

        Raises:
            InvalidInput: decided already.
        """
        self._require_pending("reject")
        self.status = REJECTED
        self.reason = reason

    def edit_result(self, text: str) -> None:
        """Replace the content with ``text`` (the raw result stays in ``original_content``); still pending.

        Raises:
            InvalidInput: ``text`` is not a string, or the result was decided already.
        """
        self._require_pending("edit")
        if not isinstance(text, str):
            raise InvalidInput("edit_result takes the new text as a string")
        if self.original_content is None:
            self.original_content = self.content
        self.content = text
        self.token_count = self._counter(text)

    def summarize(self, instructions: str | None = None, target_tokens: int | None = None) -> str:
        """Replace the content with a model summary of it and return the summary; still pending.

        Instructions: ``instructions``, else the tool's (``configure_tool_summarization``), else the
        default ones. The model is the Tract's (``configure_llm``).

        Raises:
            InvalidInput: decided already. NoLLMConfigured, ModelCallFailed, ContentError (empty summary):
                the content is unchanged.
        """
        self._require_pending("summarize")
        summary = self._summarizer(self.tool_name, self.content, instructions, target_tokens)
        self.edit_result(summary)
        self.summarized = True
        return summary

    def _require_pending(self, action: str) -> None:
        if self.status != PENDING:
            raise InvalidInput(
                f"cannot {action} the result of {self.tool_name!r} (call {self.tool_call_id}): it was "
                f"{self.status} already"
            )

    def __repr__(self) -> str:
        return (
            f"PendingToolResult(tool_call_id={self.tool_call_id!r}, tool_name={self.tool_name!r}, "
            f"token_count={self.token_count}, status={self.status!r})"
        )


class HookRegistry:
    """Handlers per event (or ``"*"``), run in registration order."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[Callable[[Any], object]]] = {
            event: [] for event in (*EVENTS, ANY_EVENT)
        }

    def on(self, event: str, handler: Callable[[Any], object]) -> None:
        """Register ``handler`` for ``event`` (``"*"``: every event).

        Raises:
            InvalidInput: an unknown event, or a handler that is not callable.
        """
        self._check(event)
        if not callable(handler):
            raise InvalidInput("a hook handler must be callable")
        self._handlers[event].append(handler)

    def off(self, event: str, handler: Callable[[Any], object] | None = None) -> None:
        """Remove one handler, or every handler of the event when ``handler`` is None.

        Raises:
            InvalidInput: an unknown event, or a handler not registered for it.
        """
        self._check(event)
        if handler is None:
            self._handlers[event].clear()
            return
        try:
            self._handlers[event].remove(handler)
        except ValueError:
            raise InvalidInput(f"that handler is not registered for {event!r}") from None

    def handlers(self, event: str) -> list[Callable[[Any], object]]:
        """The handlers that run for ``event``: its own when it has any, else the ``"*"`` ones."""
        return list(self._handlers[event] or self._handlers[ANY_EVENT])

    def has(self, event: str) -> bool:
        return bool(self.handlers(event))

    def run_tool_result(self, pending: PendingToolResult) -> PendingToolResult:
        """Run the handlers until one decides; the pending result is returned decided or not.

        Raises:
            ToolHookError: a handler raised a non-tractkv exception (tractkv errors, such as
                ConcurrentUpdate from ``approve()`` or ModelCallFailed from ``summarize()``, pass unchanged).
        """
        for handler in self.handlers("tool_result"):
            pending.triggered_by = f"hook:{_name(handler)}"
            try:
                handler(pending)
            except TractError:
                raise
            except Exception as exc:
                done = (
                    f" (the result was committed as {pending.result.commit_id[:12]})"
                    if pending.result
                    else ""
                )
                raise ToolHookError(f"tool_result handler {_name(handler)} raised: {exc!r}{done}") from exc
            if pending.status != PENDING:
                break
        return pending

    def notify(self, event: str, payload: object) -> None:
        """Run the handlers of a notification event with ``payload``, in registration order.

        Raises:
            ToolHookError: a handler raised a non-tractkv exception (what the event reports stays done).
        """
        for handler in self.handlers(event):
            try:
                handler(payload)
            except TractError:
                raise
            except Exception as exc:
                raise ToolHookError(
                    f"{event} handler {_name(handler)} raised: {exc!r} (what it reports was done already)"
                ) from exc

    @staticmethod
    def _check(event: str) -> None:
        if event not in EVENTS and event != ANY_EVENT:
            raise InvalidInput(f"unknown event {event!r}; known: {', '.join(EVENTS)}, or '*' for every event")


def _name(handler: object) -> str:
    return getattr(handler, "__qualname__", None) or type(handler).__name__
