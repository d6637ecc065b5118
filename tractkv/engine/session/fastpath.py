"""The plain-text append's fast path, all of it: :func:`append_text_fast`, behind the general path's signature.

``t.user("hi")`` / ``t.assistant("hi")`` (a plain dialogue text) make the same commit, rows and result either
way: :func:`~tractkv.engine.session.write.append_text_general` (``Session.commit`` of the dialogue payload) or
:func:`append_text_fast`, which skips what cannot apply to plain text (targets, media, tool schemas, a
general content check, a re-check of the commit it built) and, for a commit after the first of a batch, what
the session already knows (the tip, the parent, the state, the reflog entry). The one place that chooses is
the binding ``append_text`` of :mod:`tractkv.engine.session`; a property test runs both by name."""

from __future__ import annotations

from functools import partial

from tractkv.engine.compile import (
    CompileState,
    text_commit_info,
)
from tractkv.engine.content import MESSAGE_OVERHEAD
from tractkv.engine.history import (
    TS_MAX,
    TS_MIN,
    check_commit,
    trusted_tag,
)
from tractkv.engine.values import CommitInfo
from tractkv.ids import ObjectId, hash_bytes
from tractkv.model import Commit
from tractkv.model.objects import MAX_OBJECT_BYTES, text_blob_bytes, trusted_blob, trusted_commit
from tractkv.store import WriteBatch

from .write import Session, _first_line, append_text_general


def append_text_fast(session: Session, role: str, text: str) -> CommitInfo:
    """:func:`append_text_general` (the same checks, errors, objects, rows and result) without the steps of the
    general path that cannot apply to plain text (targets, media, tool schemas, a general content check).
    Content that is not plain text (a lone surrogate, a non-str) takes the general path."""
    batch = session._batch
    if batch is not None and not session.readonly and not session.closed:
        info = _append_in_batch(session, batch, role, text)
        if info is not None:
            return info
    payload = {"type": "dialogue", "role": role, "text": text}
    data = _plain_bytes(role, text)
    if data is None:  # not plain text: the general path checks (and refuses) it
        return append_text_general(session, role, text)
    tip = session.writable()
    blob = trusted_blob(payload)  # checked above, as content_objects checks plain text
    inherited = session.tools_for_next_commit()
    blob_id = hash_bytes(data)

    def build(batch: WriteBatch, parent: ObjectId | None, parent_commit: Commit | None) -> Commit:
        if len(data) > MAX_OBJECT_BYTES:
            batch.put(blob)  # refuses it (ContentTooLarge), as for any object
        batch.put_raw(blob_id, data, blob)  # batch.put(blob) without encoding it again
        last = session._last_commit  # its id is the hash this session computed (a batch's tip is that str)
        commit = trusted_commit(
            parents=(parent,) if parent is not None else (),
            content=blob_id,
            tools=inherited,
            operation="append",
            created_at=session.now(parent_commit),
            made=last[0] if last is not None else None,
            made_tools=last[1].tools if last is not None else None,  # checked when that was made
        )
        own = session._batch is None
        tools = commit.tools
        if (tools is not None and not _linked(session, tools, own)) or not (
            TS_MIN <= commit.created_at <= TS_MAX
        ):  # what construction does not vouch for: checked as the general path checks it
            known: dict[ObjectId, str] = {blob_id: trusted_tag(payload)}
            if parent is not None:
                known[parent] = "commit"
            if tools is not None and _linked(session, tools, own):
                known[tools] = "toolset"
            check_commit(batch, commit, known, session.clock_read)
        # else: one parent at most (the tip this operation read), a message blob checked above, no tool set
        # or one this session linked, a clock value in range: it passes every rule check_commit applies.
        return commit

    def derive(oid: ObjectId, commit: Commit, batch: WriteBatch) -> CompileState:
        state = session.parent_state(
            batch, commit.parents[0] if commit.parents else None, batch is not session._batch
        )
        state.apply_text(oid, commit, role, text, session.counter.count(text) + MESSAGE_OVERHEAD)
        return state

    oid, commit = session.commit_with(
        build,
        "append",
        partial(_first_line, text),  # a plain text's summary; made only if the reflog shows it
        tip=tip,
        rebase=session.rebase_appends,
        payload=payload,
        derive=derive,
    )
    state = session._state
    slot = state.appended_slot(oid) if state is not None and state.head is oid else None
    if slot is not None:  # the slot apply_text made for it
        return text_commit_info(oid, commit, payload, role, slot.tokens)
    return session.info(oid, commit, payload)


def _linked(session: Session, tools: ObjectId, own: bool) -> bool:
    """Whether an earlier commit of this session linked tool set ``tools`` (its tag is known)."""
    return tools in session._stored_toolsets or (not own and tools in session._batch_toolsets)


PLAIN_ROLES = ("user", "assistant")
"""The roles of plain text: ``{"type": "dialogue", "role": role, "text": text}`` with one of them and a non-empty
str is what ``content_objects`` makes of ``t.user("hi")``, which it takes without a general check."""


def _plain_bytes(role: str, text: str) -> bytes | None:
    """The blob bytes of plain text (see :data:`PLAIN_ROLES`), else None (the general path names the
    problem)."""
    if role not in PLAIN_ROLES or type(text) is not str or not text:
        return None
    try:  # (not ``with suppress``: a context manager per append costs as much as this call)
        return text_blob_bytes(role, text)
    except UnicodeEncodeError:  # a lone surrogate
        return None


def _append_in_batch(session: Session, batch: WriteBatch, role: str, text: str) -> CommitInfo | None:
    """:func:`append_text_fast` of a commit after the first of a batch (the usual one of a large batch), in one
    step: the tip is the commit this session staged last (the batch's value of the branch, that very id), the
    HEAD state is at it and the batch's reflog entry is this branch's, so what :meth:`Session.writable` and
    :meth:`Session.commit_with` would find out is known. None (nothing done, the clock not read) when any of
    that does not hold, or the text is not plain: the caller takes the general way."""
    ref, log, last, state = session.branch_ref, session._batch_log, session._last_commit, session._state
    if ref is None or log is None or last is None or state is None:
        return None
    staged = batch.ref_updates.get(ref)
    parent = last[0]
    if (
        staged is None
        or staged[1] is not parent  # the tip is the commit this session made last: that very str
        or state.head is not parent
        or log.ref != ref
        or log.index != len(batch.log_appends) - 1
    ):
        return None
    if role not in PLAIN_ROLES or type(text) is not str or not text:  # not plain text: content_objects checks
        return None
    payload = {"type": "dialogue", "role": role, "text": text}
    try:
        data = text_blob_bytes(role, text)
    except UnicodeEncodeError:  # a lone surrogate: the general path names the problem
        return None
    if len(data) > MAX_OBJECT_BYTES:  # the general path refuses it
        return None
    tools = session.tools_for_next_commit()
    if tools is not None and tools not in session._stored_toolsets and tools not in session._batch_toolsets:
        return None  # a tool set no commit of this session linked yet: check_commit checks it
    if session._guards:
        session.guard("commit")
    parent_commit = last[1]
    blob_id = hash_bytes(data)
    batch.note_commit(parent, parent_commit)  # apply derives the tools index row from it
    mark = batch.mark()
    tokens = session.counter.count(text) + MESSAGE_OVERHEAD

    try:
        batch.put_raw(blob_id, data, trusted_blob(payload))  # plain text, checked above
        commit = trusted_commit(
            parents=(parent,),
            content=blob_id,
            tools=tools,
            operation="append",
            created_at=session.now(parent_commit),
            made=parent,
            made_tools=parent_commit.tools,  # checked when that commit was made
        )
        known: dict[ObjectId, str] | None = None  # valid by construction ...
        if not TS_MIN <= commit.created_at <= TS_MAX:  # ... but for a clock out of range: refused as usual
            known = {parent: "commit", blob_id: trusted_tag(payload)}
            if tools is not None:
                known[tools] = "toolset"
        summary = partial(_first_line, text)
        oid, _ = session.stage_commit(
            batch, ref, parent, commit, known, "append", summary, state.apply_text, role, text, tokens
        )
    except BaseException:
        if batch.ref_updates.get(ref) is staged:
            batch.drop_since(mark)  # refused: the batch goes on without any of this commit
        session._state = None  # it may hold the commit that was not staged whole: rebuild from the store
        raise
    session._since_checkpoint += 1
    session._last_commit = (oid, commit)
    if tools is not None:
        session._batch_toolsets.add(tools)
    return text_commit_info(oid, commit, payload, role, tokens)


append_text = append_text_fast
"""How a plain-text append is made: the one place that chooses between :func:`append_text_fast` and
:func:`append_text_general` (the same signature and result; tests run both by name)."""
