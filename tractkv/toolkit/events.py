"""An in-process event bus for tool executions: ``tool_start``, ``tool_complete``, ``tool_error``.

Every execution publishes ``tool_start`` before its handler runs and then exactly one of ``tool_complete``
(success) or ``tool_error`` (unknown tool, bad arguments, or the handler raised). Nested executions (a
handler running tools or a child agent loop through its :class:`~tractkv.toolkit.ToolContext`) publish on
the same bus, with ``parent_id`` set.

Subscribers run synchronously on the thread that executes the tool, in subscription order. A subscriber that
raises is logged (logger ``tractkv.toolkit.events``) and skipped: observing a tool never breaks it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

import attrs

from tractkv.errors import InvalidInput
from tractkv.ids import ObjectId
from tractkv.model import to_jsonable

EVENT_KINDS = ("tool_start", "tool_complete", "tool_error")
ANY_EVENT = "*"  # subscribe to every kind

_log = logging.getLogger(__name__)


@attrs.frozen(kw_only=True)
class ToolEvent:
    """One event: what happened to which usage, when (the payload of the reference's tool events).

    Every event carries the execution's identity and inputs: ``usage_id``; ``parent_id`` (the enclosing
    execution's usage id, None at the top level); ``commit_id`` (the assistant commit whose tool call started
    it: the reference's message id); ``branch`` (the branch of the conversation that made the call, the
    reference's conversation id; None when detached); ``tool_name``; ``tool_call_id``; ``arguments`` (as the
    usage record keeps them: a value it cannot encode is shown as text); ``description`` (the first line of the
    tool's description; None for an unknown tool); ``rerun_of`` (the usage id of the failed execution this
    one re-runs, else None). ``timestamp`` is when the event happened (UTC).

    ``tool_complete`` and ``tool_error`` add ``started_at`` and ``duration_ms`` (None on ``tool_start``);
    ``output`` is set on ``tool_complete`` (possibly cut to the executor's result limit) and ``error`` on
    ``tool_error``.
    """

    kind: str
    usage_id: str
    parent_id: str | None
    commit_id: ObjectId | None
    tool_name: str
    timestamp: datetime
    tool_call_id: str | None = None
    branch: str | None = None
    arguments: dict[str, Any] = attrs.field(factory=dict, hash=False)
    description: str | None = None
    rerun_of: str | None = None
    started_at: datetime | None = None
    duration_ms: float | None = None
    output: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (timestamps as ISO 8601), e.g. to forward the event over a socket."""
        return dict(to_jsonable(self, _EVENT_KEYS))


_EVENT_KEYS = (
    *("kind", "usage_id", "parent_id", "commit_id", "branch", "tool_name", "tool_call_id", "arguments"),
    *("description", "rerun_of", "timestamp", "started_at", "duration_ms", "output", "error"),
)  # ToolEvent.to_json's keys, in its order (not the fields' order)

Subscriber = Callable[[ToolEvent], object]


class EventBus:
    """Publish tool events to subscribers (thread-safe)."""

    def __init__(self) -> None:
        self._subscribers: dict[str, list[Subscriber]] = {kind: [] for kind in (*EVENT_KINDS, ANY_EVENT)}
        self._lock = threading.Lock()

    def subscribe(self, kind: str, handler: Subscriber) -> Subscriber:
        """Call ``handler(event)`` for every event of ``kind`` (``"*"`` for all); returns the handler."""
        self._check(kind)
        if not callable(handler):
            raise InvalidInput("an event handler must be callable")
        with self._lock:
            self._subscribers[kind].append(handler)
        return handler

    on = subscribe

    def unsubscribe(self, kind: str, handler: Subscriber) -> None:
        """Stop calling ``handler`` for ``kind``."""
        self._check(kind)
        with self._lock:
            try:
                self._subscribers[kind].remove(handler)
            except ValueError:
                raise InvalidInput(f"that handler is not subscribed to {kind!r}") from None

    def publish(self, event: ToolEvent) -> None:
        """Deliver ``event`` to its kind's subscribers, then to the ``"*"`` subscribers."""
        self._check(event.kind)
        with self._lock:
            handlers = [*self._subscribers[event.kind], *self._subscribers[ANY_EVENT]]
        for handler in handlers:
            try:
                handler(event)
            except Exception:
                _log.exception("tool event subscriber %r raised on %s", handler, event.kind)

    @staticmethod
    def _check(kind: str) -> None:
        if kind not in EVENT_KINDS and kind != ANY_EVENT:
            raise InvalidInput(f"unknown tool event {kind!r}; known: {', '.join(EVENT_KINDS)} or '*'")
