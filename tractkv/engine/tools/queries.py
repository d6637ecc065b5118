"""Queries over the tool calls and results of a branch: in HEAD's compiled context, or in its whole history.

Two scopes (:data:`SCOPES`), one shape: each is a list of :class:`CommitInfo` for the assistant messages that
call tools and the tool results, in order, each message **once**, at its latest version, under the id of the
commit that first wrote it (an edited result shows the edit's content with the original's id, so calls and
results keep pairing up and :meth:`tractkv.Tract.original_of` recovers the raw text).

* ``context``: the messages compile sends now (:func:`context_infos`). Compressed, skipped and orphan
  results are not there; placeholder results are not commits and never listed.
* ``history``: every such message reachable from HEAD (:func:`history_infos`), whatever compile does with it
  now (compressed away, skipped, an orphan). Commits of merged-in branches count, as they do for ``log``,
  ``tool_usages`` and compile; the order is causal: parents before children, a merge's first-parent side
  before the side it brought in (so a linear branch lists in commit order, whatever the clocks said).

``after=<rev>`` keeps the messages committed after ``rev``: those not reachable from it (git's
``rev..HEAD``); a message's place is where it was first committed, so an edit made after ``rev`` of a result
made before it does not bring that result in. ``rev`` must be in the history of HEAD.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from tractkv.engine.compile import commit_info
from tractkv.engine.content import content_type
from tractkv.engine.history import ancestors, is_ancestor, parents_first
from tractkv.engine.session import Session
from tractkv.engine.values import CommitInfo
from tractkv.errors import InvalidInput
from tractkv.ids import ObjectId
from tractkv.model import Blob, Commit

SCOPES = ("history", "context")


@attrs.frozen(kw_only=True)
class ToolTurn:
    """One assistant message with tool calls, and the tool results that answer its calls (in context order)."""

    call: CommitInfo
    results: tuple[CommitInfo, ...]
    tool_names: tuple[str, ...]

    @property
    def result_ids(self) -> tuple[ObjectId, ...]:
        return tuple(r.commit_id for r in self.results)

    @property
    def all_ids(self) -> tuple[ObjectId, ...]:
        return (self.call.commit_id, *self.result_ids)

    @property
    def total_tokens(self) -> int:
        return self.call.token_count + sum(r.token_count for r in self.results)


def group_turns(
    infos: list[CommitInfo], name: str | None, call_ids_of: Callable[[CommitInfo], list[str]]
) -> list[ToolTurn]:
    """Group context messages (in order) into tool turns; ``name`` keeps turns that called that tool."""
    turns: list[ToolTurn] = []
    owner: dict[str, int] = {}  # call id -> the latest message making it
    by_commit: dict[ObjectId, int] = {}  # the message's commit id -> its place in pending
    pending: list[tuple[CommitInfo, list[CommitInfo], list[str], list[str]]] = []
    for info in infos:
        data = info.content if isinstance(info.content, dict) else {}
        if info.role == "assistant" and data.get("tool_calls"):
            names = [str(c["name"]) for c in data["tool_calls"]]
            ids = call_ids_of(info)
            by_commit[info.commit_id] = len(pending)
            pending.append((info, [], names, ids))
            for call_id in ids:
                owner[call_id] = len(pending) - 1
        elif info.role == "tool":
            call_id = str(data.get("tool_call_id"))
            # the call the result says it answers (reply_to) when that message made this call: call ids are
            # only unique per message (a scripted model may reuse "call_1"); else the latest call of that id
            index = by_commit.get(info.reply_to) if info.reply_to is not None else None
            if index is None or call_id not in pending[index][3]:
                index = owner.get(call_id)
            if index is not None:
                pending[index][1].append(info)
    for call, results, names, _ in pending:
        if name is None or name in names:
            turns.append(ToolTurn(call=call, results=tuple(results), tool_names=tuple(names)))
    return turns


def context_infos(session: Session) -> list[CommitInfo]:
    """The messages of HEAD's compiled context as CommitInfo, in order; an edited message shows its latest
    content under the original commit's id (so calls and results keep pairing up). Placeholder results are
    not commits and are left out (as are orphan results, which compile leaves out)."""
    reader = session.reader()
    state = session.head_state(reader)
    view = state.render(reader)
    infos = []
    for _, commit_id in view.originals():
        source = state.slots[state.index[commit_id]].source
        info = commit_info(reader, source, reader.get_commit(source), session.counter)
        infos.append(attrs.evolve(info, commit_id=commit_id) if source != commit_id else info)
    return infos


def is_tool_message(data: Any) -> bool:
    """True for a tool result or an assistant message that calls tools (a dialogue payload)."""
    if content_type(data) != "dialogue":
        return False
    return data.get("role") == "tool" or (data.get("role") == "assistant" and bool(data.get("tool_calls")))


def tool_infos(session: Session, scope: str = "context", after: str | None = None) -> list[CommitInfo]:
    """The tool-calling assistant messages and tool results of HEAD's ``context`` or ``history`` (module
    doc), in order, optionally only those committed after ``after``.

    Raises:
        InvalidInput: ``scope`` is not one of :data:`SCOPES`, or ``after`` is not in the history of HEAD.
        UnknownRevision: ``after`` names no commit.
    """
    if scope not in SCOPES:
        raise InvalidInput(f"scope must be 'history' or 'context', not {scope!r}")
    reader = session.reader()
    head = session.head_commit(reader)
    since = session.resolve(after, reader) if after is not None else None
    if since is not None and (head is None or not is_ancestor(reader, since, head)):
        raise InvalidInput(f"after={after!r}: {since[:12]} is not in the history of {session.where()}")
    if head is None:
        return []
    if scope == "history":
        return history_infos(session, head, since)
    infos = [i for i in context_infos(session) if is_tool_message(i.content)]
    if since is None:
        return infos
    before = ancestors(reader, since)
    return [i for i in infos if i.commit_id not in before]


def history_infos(session: Session, head: ObjectId, since: ObjectId | None = None) -> list[CommitInfo]:
    """Every tool-calling assistant message and tool result reachable from ``head`` (and not from ``since``),
    once each at its latest version (the last edit in causal order) under its first commit's id, in causal
    order (module doc). Reads each commit in range once, and only the content of appends and edits; counts
    tokens only for the messages it returns."""
    reader = session.reader()
    stop = ancestors(reader, since) if since is not None else set()
    commits: dict[ObjectId, Commit] = {}
    stack = [head]
    while stack:
        oid = stack.pop()
        if oid in commits or oid in stop:
            continue
        commit = commits[oid] = reader.get_commit(oid)
        stack.extend(commit.parents)
    place: dict[ObjectId, int] = {}  # an append's place in causal order
    latest: dict[ObjectId, tuple[ObjectId, Commit, Any]] = {}  # first commit -> (its latest version, data)
    for oid in parents_first(head, lambda o: commits[o].parents, commits):  # none when head is since
        commit = commits[oid]
        if commit.content is None or commit.operation not in ("append", "edit"):
            continue  # merges, annotations and compress summaries are not tool messages
        target = commit.edit_target if commit.operation == "edit" else oid
        if target is None or (commit.operation == "edit" and target not in place):
            continue  # an edit of a message committed before ``since``: that message is not in range
        if commit.operation == "append":
            place[oid] = len(place)
        blob = reader.get(commit.content)
        data = blob.data if isinstance(blob, Blob) else None
        if is_tool_message(data):
            latest[target] = (oid, commit, data)
        else:
            latest.pop(target, None)  # an edit may turn a message into another kind
    infos = []
    for target in sorted(latest, key=place.__getitem__):
        source, commit, data = latest[target]
        info = commit_info(reader, source, commit, session.counter, data)
        infos.append(attrs.evolve(info, commit_id=target) if source != target else info)
    return infos


def tool_turns(infos: list[CommitInfo], name: str | None = None) -> list[ToolTurn]:
    """Each assistant tool-calling message in ``infos`` with the results answering its calls."""
    return group_turns(infos, name, call_ids)


def call_ids(info: CommitInfo) -> list[str]:
    """The ids of the tool calls an assistant message makes."""
    data = info.content if isinstance(info.content, dict) else {}
    return [str(c["id"]) for c in data.get("tool_calls", ())]


def call_names(info: CommitInfo) -> list[str]:
    """The names of the tools an assistant message calls, in call order."""
    data = info.content if isinstance(info.content, dict) else {}
    return [str(c["name"]) for c in data.get("tool_calls", ())]
