"""Merge and compress: the two session operations that combine messages rather than add one.

* :func:`merge` fast-forwards when one side contains the other, else makes a merge commit whose compile is
  the three-way merge of states described in :mod:`tractkv.engine.compile.state`. The merge commit is stamped after
  both parents, so ``log`` order stays causal on every machine.
* :func:`plan_compress` picks what a compress replaces (pinned messages, instructions and tool turns cut by
  the range stay verbatim: an API rejects a tool result without its call), for ``Tract.compress`` and for a
  budget's ``compress`` action alike; :func:`summary_commit` is the one shape of the summary commit (op
  ``compress``, ``links["sources"]``, the tool set in force), which :func:`commit_compress` commits on top of
  the branch and a budget stages in its transaction: history is never rewritten.

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
from collections.abc import Callable, Collection

import attrs

from tractkv.engine.compile import CompileState, Conflict, context_of, fit, load_tools, merge_payload, units
from tractkv.engine.content import MERGE_STRATEGIES, content_blob, message_text, schema_name, tool_tokens
from tractkv.engine.history import clip, is_ancestor, short_ref
from tractkv.engine.session import Session, Tip
from tractkv.engine.values import CommitInfo, CompiledContext, MergeResult
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
            [explained(session, reader, c) for c in conflicts], ours=ours_name, theirs=theirs_name
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


def explained(session: Session, reader: Reader, conflict: Conflict) -> Conflict:
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
    tools: ObjectId | None  # the tool set the summary commit links: the one in force
    tip: Tip | None  # the tip the plan was made at: the summary commits on it or not at all (None: ``at``)
    fitted: int | None = None  # with ``fit_to``: the context's estimated tokens once the sources are gone


def plan_compress(
    session: Session,
    from_commit: str | None = None,
    to_commit: str | None = None,
    *,
    at: tuple[Reader, CompileState] | None = None,
    fit_to: int | None = None,
    protect: Collection[ObjectId] = (),
    keep_last: bool = False,
) -> CompressPlan:
    """The messages of a context that a compress replaces: the one planner of ``Tract.compress`` and of a
    budget's ``compress`` action (:mod:`tractkv.engine.budget`).

    The context is HEAD's, or ``at`` (a reader and a compile state: a budget plans on the state its
    transaction makes). It is read as the units of :mod:`tractkv.engine.compile.window`: a system message
    (instruction) and a pinned message never go, a tool turn goes whole or not at all. The units that may go
    are those wholly from ``from_commit`` to ``to_commit`` (default: all) holding no commit of ``protect``
    (nor the last unit with ``keep_last``). Without ``fit_to`` every one of them is replaced; with it, the
    oldest of them until the context's estimate (messages, placeholder results, tool definitions) is within
    ``fit_to`` tokens, or none is left (``fitted`` says where it ended; the caller judges it).

    Raises:
        InvalidInput: (without ``fit_to``) an empty context, a revision not in it, a reversed range, or
            nothing in the range that may go.
        DetachedHead, ReadOnlySession: (without ``at``) HEAD cannot be written.
    """
    tip = session.writable("compress") if at is None else None
    if at is None:
        reader = session.reader()
        state = session.head_state(reader)
    else:
        reader, state = at
    originals = list(state.render(reader).originals())  # placeholder results are not messages to replace
    ids = [commit for _, commit in originals]
    outside: set[ObjectId] = set()
    if from_commit is not None or to_commit is not None or fit_to is None:
        if not ids:
            raise InvalidInput("nothing to compress: the context is empty")
        start = _position(session, ids, from_commit, "from_commit") if from_commit else 0
        end = _position(session, ids, to_commit, "to_commit") if to_commit else len(ids) - 1
        if start > end:
            raise InvalidInput("from_commit comes after to_commit")
        outside = {*ids[:start], *ids[end + 1 :]}
    kept = {*protect, *outside}
    compiled = _compiler(session, reader, state)
    fitted = None
    if fit_to is None:
        ctx = compiled(state)
        found = units(ctx, state, session.counter, kept)
        folded = [p for positions, _, free in (found[:-1] if keep_last else found) if free for p in positions]
        sources = tuple(dict.fromkeys(ctx.commit_ids[p] for p in sorted(folded)))
        if not sources:
            raise InvalidInput(
                "nothing to compress in that range (every message is pinned or an instruction)"
            )
    else:
        plan = fit(state, compiled, session.counter, fit_to, protect_last=keep_last, protect=kept)
        sources, fitted = plan.context.dropped, plan.context.token_count
    wanted = set(sources)
    replaced = [m for m, c in originals if c in wanted]
    text = "\n".join(f"{m.role}: {m.content}" for m in replaced)
    role = "assistant" if replaced and replaced[-1].role == "assistant" else "user"
    tools = state.tools if state.tools is not None or at is not None else session.tools_for_next_commit()
    return CompressPlan(sources=sources, text=text, role=role, tools=tools, tip=tip, fitted=fitted)


def _compiler(
    session: Session, reader: Reader, state: CompileState
) -> Callable[[CompileState], CompiledContext]:
    """What a state with ``state``'s tool set compiles to, counted as a budget counts (tool definitions in)."""
    tools = load_tools(reader, state.tools)
    cost = tool_tokens(tools, session.counter)

    def compiled(other: CompileState) -> CompiledContext:
        return context_of(reader, other, session.counter, tools, tool_tokens=cost)

    return compiled


def _position(session: Session, ids: list[ObjectId], rev: str, what: str) -> int:
    target = session.message_target(rev)
    if target not in ids:
        raise InvalidInput(f"{what} {target[:12]} is not in the compiled context (it is skipped)")
    return ids.index(target)


def summary_blob(plan: CompressPlan, summary: str) -> Blob:
    """The summary's content: a dialogue message of the plan's role (see the module doc)."""
    return content_blob({"type": "dialogue", "role": plan.role, "text": summary})


def summary_commit(
    batch: WriteBatch, plan: CompressPlan, blob: Blob, parent: ObjectId, created_at: int
) -> Commit:
    """The one shape of a compress commit, whoever makes it: ``blob`` (:func:`summary_blob`) on ``parent``
    with op ``compress``, ``links["sources"]`` the replaced messages and the plan's tool set (the one in
    force: a compress changes no tool)."""
    count = len(plan.sources)
    return Commit(
        parents=(parent,),
        content=batch.put(blob),
        tools=plan.tools,
        operation="compress",
        message=f"compress {count} message{'s' if count != 1 else ''}",
        links={"sources": plan.sources},
        created_at=created_at,
    )


def commit_compress(session: Session, plan: CompressPlan, summary: str) -> CommitInfo:
    """Commit ``summary`` in place of the plan's sources on the tip the plan was made at
    (:func:`summary_commit`)."""
    blob = summary_blob(plan, summary)

    def build(batch: WriteBatch, parent: ObjectId | None, parent_commit: Commit | None) -> Commit:
        assert parent is not None  # a plan has sources: the branch has commits
        return summary_commit(batch, plan, blob, parent, session.now(parent_commit))

    count = len(plan.sources)
    oid, commit = session.commit_with(
        build,
        "compress",
        f"compress {count} message{'s' if count != 1 else ''}",
        tip=plan.tip,
        action="compress",
        payload=blob.data,
    )
    return session.info(oid, commit, blob.data)
