"""Queries over the tool calls and results in a compiled context."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from tractkv.ids import ObjectId

from .commit_info import commit_info
from .records import CommitInfo
from .session import Session


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
    owner: dict[str, int] = {}
    pending: list[tuple[CommitInfo, list[CommitInfo], list[str]]] = []
    for info in infos:
        data = info.content if isinstance(info.content, dict) else {}
        if info.role == "assistant" and data.get("tool_calls"):
            names = [str(c["name"]) for c in data["tool_calls"]]
            pending.append((info, [], names))
            for call_id in call_ids_of(info):
                owner[call_id] = len(pending) - 1
        elif info.role == "tool":
            index = owner.get(str(data.get("tool_call_id")))
            if index is not None:
                pending[index][1].append(info)
    for call, results, names in pending:
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


def tool_turns(infos: list[CommitInfo], name: str | None = None) -> list[ToolTurn]:
    """Each assistant tool-calling message in ``infos`` with the results answering its calls."""
    return group_turns(infos, name, call_ids)


def call_ids(info: CommitInfo) -> list[str]:
    """The ids of the tool calls an assistant message makes."""
    data = info.content if isinstance(info.content, dict) else {}
    return [str(c["id"]) for c in data.get("tool_calls", ())]
