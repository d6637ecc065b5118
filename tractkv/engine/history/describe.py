"""One description of a commit, shared by every surface that lists history (CLI, viewer, built-in tools).

:func:`describe_commit` turns a :class:`~tractkv.engine.values.records.CommitInfo` into a
:class:`CommitDescription`: what kind of commit it is, who speaks, the commits it acts on, and one line of
text. Each surface only chooses how wide a line it has room for (:meth:`CommitDescription.line`).

==============================  ===============  ====================================================
commit                          kind             summary
==============================  ===============  ====================================================
a message (append or edit)      ``message``      its text (freeform: the compact JSON the model sees)
assistant message with calls    ``tool_call``    ``<text> [calls a, b]`` (``calls a, b`` without text)
tool result                     ``tool_result``  ``[result of a] <text>`` (``[error from a]`` on error)
compress                        ``summary``      the summary's text (``targets``: none; the sources
                                                 are in the commit's ``sources`` link)
annotate                        ``annotation``   ``pinned <target> (<reason>)``
trim (a budget's)               ``annotation``   its note (``trim 3 messages to fit ...``)
merge                           ``merge``        ``<source> (<strategy>[, N conflicts settled])``, the
                                                 source as people name it (``origin/main``)
anything else                   ``other``        the commit's note, else its operation
==============================  ===============  ====================================================
"""

from __future__ import annotations

from typing import Any

import attrs

from tractkv.engine.content import ANNOTATION, MERGE, MESSAGE_TYPES, freeform_text, part_markers
from tractkv.engine.history.refs import short_ref
from tractkv.engine.values import CommitInfo
from tractkv.ids import ObjectId

KINDS = ("message", "tool_call", "tool_result", "summary", "annotation", "merge", "other")


def clip(text: str, width: int) -> str:
    """``text`` on one line (runs of whitespace become one space), cut to ``width`` characters with "…"."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(0, width - 1)] + "…"


def short_id(oid: str | None) -> str:
    """The first 12 hex digits of an id (the way every surface shows ids), or "-" for None."""
    return oid[:12] if oid else "-"


@attrs.frozen(kw_only=True)
class CommitDescription:
    """What a commit is and does, in words. Build it with :func:`describe_commit`.

    Attributes:
        commit_id: the commit.
        operation: the stored operation (``append``, ``edit``, ``annotate``, ``merge``, ``compress``).
        kind: one of :data:`KINDS` (see the module docstring).
        role: who speaks in the message (``system``, ``user``, ``assistant``, ``tool``); None for bookkeeping.
        summary: one line (whitespace collapsed), not cut: :meth:`line` cuts it.
        text: the full readable body: the message's text (line breaks kept) or, for bookkeeping, the summary.
        targets: the commits it acts on: the edited or annotated message, the assistant message a tool result
            answers, the merged-in commit.
        tool_calls: the names of the tools an assistant message calls, in order.
        tool_name: for a tool result, the tool that produced it.
        is_error: a tool result that reports a failure.
    """

    commit_id: ObjectId
    operation: str
    kind: str
    role: str | None
    summary: str
    text: str
    targets: tuple[ObjectId, ...] = ()
    tool_calls: tuple[str, ...] = ()
    tool_name: str | None = None
    is_error: bool = False

    @property
    def label(self) -> str:
        """The operation and the speaker, e.g. ``append user``, ``edit tool``, ``merge``."""
        return f"{self.operation} {self.role}" if self.role else self.operation

    def line(self, width: int) -> str:
        """The summary cut to ``width`` characters."""
        return clip(self.summary, width)


def describe_commit(info: CommitInfo) -> CommitDescription:
    """Describe one commit (its content is read from ``info.content``; nothing else is loaded).

    Args:
        info: the commit, as :func:`tractkv.engine.compile.info.commit_info` returns it.

    Returns:
        The description; never raises for content this release cannot read (kind ``other``).
    """
    data: dict[str, Any] = info.content if isinstance(info.content, dict) else {}
    kind = data.get("type")
    common: dict[str, Any] = {"commit_id": info.commit_id, "operation": info.operation}
    if kind == ANNOTATION:
        target = info.edit_target
        if target is None and info.operation == "trim":  # a budget's trim: its note says what it skips
            return _bookkeeping(common, "annotation", info.message or "trim", ())
        summary = f"{data.get('priority')} {short_id(target)}"
        if data.get("cache"):
            summary += f" cache {data.get('cache')}"
        if data.get("reason"):
            summary += f" ({data.get('reason')})"
        return _bookkeeping(common, "annotation", summary, (target,) if target else ())
    if kind == MERGE:
        summary = f"{short_ref(str(data.get('source', '?')))} ({data.get('strategy', 'ours')}"
        conflicts = data.get("conflicts")
        if isinstance(conflicts, int) and conflicts:
            summary += f", {conflicts} conflict{'s' if conflicts != 1 else ''} settled"
        return _bookkeeping(common, "merge", summary + ")", tuple(info.parent_ids[1:]))
    if kind not in MESSAGE_TYPES:
        return _bookkeeping(common, "other", info.message or info.operation, _targets(info))
    text = _message_text(data)
    calls = tuple(str(c.get("name")) for c in data.get("tool_calls") or () if isinstance(c, dict))
    tool_name = str(data["name"]) if info.role == "tool" and data.get("name") is not None else None
    is_error = bool(data.get("is_error"))
    summary = text
    if info.operation == "compress":
        message_kind = "summary"
    elif info.role == "tool":
        message_kind = "tool_result"
        prefix = f"[error from {tool_name or 'tool'}]" if is_error else f"[result of {tool_name or 'tool'}]"
        summary = f"{prefix} {text}"
    elif calls:
        message_kind = "tool_call"
        named = "calls " + ", ".join(calls)
        summary = f"{text} [{named}]" if text.strip() else named
    else:
        message_kind = "message"
    return CommitDescription(
        **common,
        kind=message_kind,
        role=info.role,
        summary=" ".join(summary.split()),
        text=text,
        targets=_targets(info),
        tool_calls=calls,
        tool_name=tool_name,
        is_error=is_error,
    )


def _message_text(data: dict[str, Any]) -> str:
    if data.get("type") == "freeform":
        return freeform_text(data.get("payload"))  # exactly what the model receives
    text = data.get("text")
    text = text if isinstance(text, str) else ""
    markers = part_markers(data.get("parts"))  # images, documents, thinking, refusal: shown, never hidden
    return f"{text} {markers}" if text and markers else text or markers


def _targets(info: CommitInfo) -> tuple[ObjectId, ...]:
    return tuple(t for t in (info.edit_target, info.reply_to) if t is not None)


def _bookkeeping(
    common: dict[str, Any], kind: str, summary: str, targets: tuple[ObjectId, ...]
) -> CommitDescription:
    flat = " ".join(summary.split())
    return CommitDescription(**common, kind=kind, role=None, summary=flat, text=flat, targets=targets)
