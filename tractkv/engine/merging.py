"""Merge and compress: the two session operations that combine messages rather than add one.

* :func:`merge` fast-forwards when one side contains the other, else makes a merge commit whose compile is
  the three-way merge of states described in :mod:`tractkv.engine.compile.state`. The merge commit is stamped after
  both parents, so ``log`` order stays causal on every machine.
* :func:`plan_compress` picks what a compress replaces (pinned messages, instructions and tool turns cut by
  the range stay verbatim: an API rejects a tool result without its call); :func:`commit_compress` commits the
  summary on top of the branch (op ``compress``, ``links["sources"]``): history is never rewritten.

The summary speaks as the last message it replaces: an assistant message when that was the assistant's, else
a user message (a user message or a tool result, which providers send in a user turn). So the turn that
comes next is the same side's as before compressing: after ``compress()`` of a conversation ending in an
assistant reply, the next ``t.user(...)`` follows an assistant message (no two user messages in a row); in an
agent step, where the context ends with tool results, the model is asked after a user message, as before.
Whatever followed the range follows the same side too. (A range in the middle whose first message follows a
message of the summary's side cannot alternate on both ends with one message; the OpenAI API accepts two
messages of one role in a row, and the Anthropic rendering merges consecutive turns of one role.)
"""

from __future__ import annotations

import json

import attrs

from tractkv.engine.compile import Conflict, merge_payload
from tractkv.engine.content import MERGE_STRATEGIES, content_blob, message_text, schema_name
from tractkv.engine.history import clip, is_ancestor, short_ref
from tractkv.engine.session import Session, Tip
from tractkv.engine.tools import context_infos, tool_turns
from tractkv.engine.values import CommitInfo, MergeResult
from tractkv.errors import InvalidInput, MergeConflict, TractError
from tractkv.ids import ObjectId, is_object_id
from tractkv.model import Blob, Commit
from tractkv.store import Reader, WriteBatch

STRATEGIES = MERGE_STRATEGIES  # one list: what merge() takes is what a merge blob may say
EXCERPT = 40  # characters of each side's text a conflict shows


def merge(
    session: Session, source: str, strategy: str = "auto", message: str | None = None, *, peer: bool = False
) -> MergeResult:
    """Merge a branch or commit into the session's branch (see :meth:`tractkv.Tract.merge`); ``peer``: the
    source came from another store (a pull), so a fast-forward's budget counts at least the estimate."""
    if strategy not in STRATEGIES:
        raise InvalidInput(f"strategy must be auto, ours or theirs, not {strategy!r}")
    tip = session.writable("merge")
    reader = session.reader()
    head = tip.head
    theirs = session.resolve(source)
    if head is not None and is_ancestor(reader, theirs, head):
        return MergeResult(kind="up-to-date", head=head, commit=None, strategy=strategy)
    if head is None or is_ancestor(reader, head, theirs):
        new_head = session.move_branch(
            tip, theirs, "merge", f"fast-forward to {source}", moved="the fast-forward", peer=peer
        )
        return MergeResult(
            kind="fast-forward", head=new_head or theirs, commit=session.get_commit(theirs), strategy=strategy
        )
    ours_state = session.head_state(reader)
    _, conflicts = session.compiler.merge_into(reader, ours_state, theirs, strategy)
    if conflicts and strategy == "auto":
        ours_name = session.current_branch or "HEAD"
        theirs_name = short_ref(source) if not is_object_id(source) else source[:12]
        raise MergeConflict(
            [_explained(session, reader, c) for c in conflicts], ours=ours_name, theirs=theirs_name
        )
    blob = Blob(data=merge_payload(strategy, source, len(conflicts)))
    theirs_stamp = reader.get_commit(theirs).created_at

    def build(batch: WriteBatch, parent: ObjectId | None, parent_commit: Commit | None) -> Commit:
        assert parent is not None
        return Commit(
            parents=(parent, theirs),
            content=batch.put(blob),
            operation="merge",
            message=message or f"Merge {source}",
            created_at=session.now(
                parent_commit, after=theirs_stamp
            ),  # after both sides, within the clock's bound
        )

    oid, commit = session.commit_with(
        build, "merge", message or f"merge {source} ({strategy})", tip=tip, action="merge"
    )
    return MergeResult(
        kind="merge",
        head=oid,
        commit=session.info(oid, commit),
        conflicts_resolved=len(conflicts),
        strategy=strategy,
    )


def _explained(session: Session, reader: Reader, conflict: Conflict) -> Conflict:
    """``conflict`` with each side described by what people recognize: the start of its text (and its
    priority when that changed too), or the names of the tools in the set."""

    def side(oid: ObjectId | None, described: str) -> str:
        if conflict.kind == "tools":
            names = [schema_name(t) for t in session.tools_of(oid)]
            return f"tools {', '.join(names)}" if names else "no tools"
        if "content" not in conflict.kind or oid is None:
            return described
        blob = reader.get(oid)
        data = blob.data if isinstance(blob, Blob) else None
        text = message_text(data) if isinstance(data, dict) and "type" in data else ""
        excerpt = json.dumps(clip(text, EXCERPT), ensure_ascii=False)
        return f"{excerpt} ({described})" if "priority" in conflict.kind else excerpt

    try:
        ours = side(conflict.ours_id, conflict.ours)
        theirs = side(conflict.theirs_id, conflict.theirs)
    except TractError:  # unreadable content: the refusal still names the commit
        return conflict
    return attrs.evolve(conflict, ours=ours, theirs=theirs)


@attrs.frozen(kw_only=True)
class CompressPlan:
    """What a compress replaces: ``sources`` (context order) and their text for a summarizer."""

    sources: tuple[ObjectId, ...]
    text: str
    role: str  # the summary's role: the last source's side ("assistant", else "user")
    tools: ObjectId | None
    tip: Tip  # the tip the plan was made at: the summary commits on it or not at all


def plan_compress(
    session: Session, from_commit: str | None = None, to_commit: str | None = None
) -> CompressPlan:
    """The messages of HEAD's context from ``from_commit`` to ``to_commit`` (default: all) that a compress
    would replace: pinned messages, instructions, and any tool turn partly pinned or partly outside the range
    stay."""
    tip = session.writable("compress")
    reader = session.reader()
    state = session.head_state(reader)
    view = state.render(reader)
    originals = list(view.originals())  # placeholder results are not messages a summary can replace
    ids = [commit for _, commit in originals]
    if not ids:
        raise InvalidInput("nothing to compress: the context is empty")
    start = _position(session, ids, from_commit, "from_commit") if from_commit else 0
    end = _position(session, ids, to_commit, "to_commit") if to_commit else len(ids) - 1
    if start > end:
        raise InvalidInput("from_commit comes after to_commit")
    in_range = set(ids[start : end + 1])
    keep = {
        c
        for c in in_range
        if state.slots[state.index[c]].priority == 1 or state.slots[state.index[c]].kind == "instruction"
    }
    for turn in tool_turns(context_infos(session)):
        members = set(turn.all_ids)
        if members & in_range and (members - in_range or members & keep):
            keep |= members
    sources = tuple(c for c in ids[start : end + 1] if c not in keep)
    if not sources:
        raise InvalidInput("nothing to compress in that range (every message is pinned or an instruction)")
    wanted = set(sources)
    replaced = [m for m, c in originals if c in wanted]
    text = "\n".join(f"{m.role}: {m.content}" for m in replaced)
    role = "assistant" if replaced[-1].role == "assistant" else "user"
    return CompressPlan(sources=sources, text=text, role=role, tools=state.tools, tip=tip)


def _position(session: Session, ids: list[ObjectId], rev: str, what: str) -> int:
    target = session.message_target(rev)
    if target not in ids:
        raise InvalidInput(f"{what} {target[:12]} is not in the compiled context (it is skipped)")
    return ids.index(target)


def commit_compress(session: Session, plan: CompressPlan, summary: str) -> CommitInfo:
    """Commit ``summary`` in place of the plan's sources, as a message of the plan's role (see the module doc;
    the tool set in force is kept)."""
    return session.commit_content(
        content_blob({"type": "dialogue", "role": plan.role, "text": summary}),
        operation="compress",
        message=f"compress {len(plan.sources)} messages",
        links={"sources": plan.sources},
        toolset=plan.tools,
        action="compress",
        tip=plan.tip,
    )
