"""Always-valid compile: the tool-pairing pass that makes every compiled context a request providers accept.

OpenAI and Anthropic both reject a request in which a tool call is not answered before the next message, or a
tool result answers no call of the assistant message right before it. History built with the public API can
hold both (a skipped or edited call, a result skipped or answered twice, a user message between a call and
its result, merges), so compile runs this pass over the visible messages, in order, one at a time. The rules,
checked in order for each message:

* a ``tool`` message whose ``tool_call_id`` answers a call still **open** (made by the latest assistant
  message with tool calls, and not answered yet) is kept, and closes that call;
* any other ``tool`` message is an **orphan** (its call was skipped, edited away or already answered, or a
  later message closed it) and is dropped from the compiled context: a ``dropped_result`` repair;
* any other message (user, assistant, system) arriving while calls are open first gets a
  **placeholder result** for each open call, in call order: a ``tool`` message with
  :data:`PLACEHOLDER_TEXT` and ``is_error=True``, placed under the commit id of the message that made the
  call (a ``placeholder_result`` repair);
* a reasoning message recorded while calls are open is held back by the view until the turn's results are
  in (:meth:`tractkv.engine.compile.state.View.add`), then passes through these rules like any message;
* at the end, open calls stay open: the last tool turn (the assistant message and the results so far) is a
  tool run in progress, and only the end of the context may hold one.

The pass is incremental (:class:`Pairing` is fed by :class:`tractkv.engine.compile.state.View` as messages are
appended, and its state is a few small containers, copied with the view), so compile after an append stays
O(1); rebuilding a view runs the same pass from the start, so both give the same result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tractkv.engine.content import MESSAGE_OVERHEAD, Message, TokenCounter
from tractkv.ids import ObjectId

if TYPE_CHECKING:
    from tractkv.engine.values import Repair

PLACEHOLDER_RESULT = "placeholder_result"
DROPPED_RESULT = "dropped_result"
PLACEHOLDER_TEXT = "[no result: this tool call was not answered in the recorded history]"
"""The text of every placeholder result (fixed, so a compile is deterministic and its tokens known)."""


def placeholder_tokens(counter: TokenCounter) -> int:
    """Tokens one placeholder result costs: its text plus the per-message overhead."""
    return counter.count(PLACEHOLDER_TEXT) + MESSAGE_OVERHEAD


def shape_of(message: Message) -> tuple[str, ...] | str | None:
    """What the pass reads of a message besides its role: a tool result's call id (``""`` when it has none),
    an assistant message's call ids, else None."""
    if message.role == "tool":
        return message.tool_call_id or ""
    if message.role == "assistant" and message.tool_calls:
        return tuple(call.id for call in message.tool_calls)
    return None


class Pairing:
    """The state of the pairing pass after the messages fed so far (see the module doc).

    Attributes:
        open: the ids of the calls still open, in call order (the latest assistant message's unanswered calls).
        answered: the ids of that message's calls already answered (a second result is an orphan).
        call_commit: the commit of the latest assistant message with tool calls.
        repairs: every repair made so far, in context order.
    """

    __slots__ = ("answered", "call_commit", "open", "repairs")

    def __init__(self) -> None:
        self.open: dict[str, None] = {}
        self.answered: set[str] = set()
        self.call_commit: ObjectId | None = None
        self.repairs: list[Repair] = []

    def copy(self) -> Pairing:
        """An independent copy (cheap: the open calls of one message and the repairs)."""
        other = Pairing()
        other.open = dict(self.open)
        other.answered = set(self.answered)
        other.call_commit = self.call_commit
        other.repairs = list(self.repairs)
        return other

    def step(self, message: Message, commit: ObjectId) -> tuple[tuple[Message, ObjectId], ...] | None:
        """Feed the next visible message (added by ``commit``).

        Returns None when the message is an orphan result to drop; otherwise the placeholder results to place
        before it (usually none), each with the commit id it takes (the call's message). Records every repair
        in :attr:`repairs`.
        """
        return self.step_shape(message.role, shape_of(message), commit)

    def step_quiet(self, role: str, calls: tuple[str, ...] | str | None) -> bool:
        """Feed a message that can neither need nor make a repair (no calls open, not a tool result, no calls
        of its own) without its commit id; False (nothing done) for any other: :meth:`step_shape` it."""
        if role == "tool" or calls is not None or self.open:
            return False
        if self.answered:
            self.answered = set()
        return True

    def step_shape(
        self, role: str, calls: tuple[str, ...] | str | None, commit: ObjectId
    ) -> tuple[tuple[Message, ObjectId], ...] | None:
        """:meth:`step` for a message known only by its role and ``calls`` (:func:`shape_of`): what the pass
        reads of a message, which a compile state keeps per slot so a view is rebuilt without its text."""
        if role == "tool":
            call_id = calls if isinstance(calls, str) else ""
            if call_id in self.open:
                del self.open[call_id]
                self.answered.add(call_id)
                return ()
            why = (
                "answers a call already answered"
                if call_id in self.answered
                else "answers no open call (its call is skipped, edited away, or closed by a later message)"
            )
            from tractkv.engine.values import Repair

            self.repairs.append(
                Repair(
                    kind=DROPPED_RESULT,
                    commit_id=commit,
                    call_id=call_id,
                    detail=f"tool result {commit[:12]} for call {call_id!r} {why}: left out of the request",
                )
            )
            return None
        placeholders: tuple[tuple[Message, ObjectId], ...] = ()
        if self.open and self.call_commit is not None:
            call_commit = self.call_commit
            placeholders = tuple(
                (
                    Message(role="tool", content=PLACEHOLDER_TEXT, tool_call_id=call_id, is_error=True),
                    call_commit,
                )
                for call_id in self.open
            )
            from tractkv.engine.values import Repair

            self.repairs.extend(
                Repair(
                    kind=PLACEHOLDER_RESULT,
                    commit_id=call_commit,
                    call_id=call_id,
                    detail=(
                        f"tool call {call_id!r} of {call_commit[:12]} has no result before the next "
                        f"{role} message: a placeholder error result stands in for it"
                    ),
                )
                for call_id in self.open
            )
            self.open = {}
        if role == "assistant" and isinstance(calls, tuple) and calls:
            self.open = dict.fromkeys(calls)
            self.answered = set()
            self.call_commit = commit
        elif self.answered:
            self.answered = set()
        return placeholders
