"""Branches as a session sees them: list, create, delete, reflog, and status against the upstream.

Creating and deleting a branch is one transaction with its reflog entry; the branch a session is on (and a
detached HEAD) is never deleted, and without ``force`` only a branch whose commits another branch has.
"""

from __future__ import annotations

from tractkv.engine.history import (
    HEAD,
    HEADS,
    REMOTES,
    ahead_behind,
    ancestors,
    branch_ref,
    check_branch_name,
    is_ancestor,
    iter_reflog,
    log_ref_move,
)
from tractkv.engine.session import Session, Tip
from tractkv.engine.values import BranchInfo, ReflogEntry, StatusInfo
from tractkv.errors import BranchExists, BranchNotFound, DetachedHead, InvalidInput, RefConflict
from tractkv.ids import ObjectId
from tractkv.store import Reader


def list_branches(session: Session, *, remotes: bool = True) -> list[BranchInfo]:
    """Local branches (the session's own, even unborn), then remote-tracking ones as ``<remote>/<branch>``."""
    reader = session.reader()
    out = [
        BranchInfo(name=ref[len(HEADS) :], head=ObjectId(v), is_current=ref == session.branch_ref)
        for ref, v in reader.iter_refs(HEADS)
    ]
    if session.branch_ref is not None and reader.get_ref(session.branch_ref) is None:
        out.append(BranchInfo(name=session.branch_ref[len(HEADS) :], head=None, is_current=True))
        out.sort(key=lambda b: b.name)
    if remotes:
        out.extend(
            BranchInfo(name=ref[len(REMOTES) :], head=ObjectId(v), is_current=False, is_remote=True)
            for ref, v in reader.iter_refs(REMOTES)
        )
    return out


def create_branch(session: Session, name: str, source: str | None = None) -> ObjectId:
    """Create ``name`` at ``source`` (default HEAD); returns its tip."""
    ref = branch_ref(name)
    session.check_writes("branch", in_batch=False)
    reader = session.reader()
    if reader.get_ref(ref) is not None:
        raise BranchExists(name)
    start = session.resolve(source, reader) if source is not None else session.head_commit(reader)
    if start is None:
        raise InvalidInput(f"cannot branch from {session.where()}: it has no commits yet")
    try:  # a budget set on the branch while it was unborn checks its creation as a move
        tip = session.move_branch(
            Tip(ref, None), start, "branch", f"created from {source or 'HEAD'}", moved="creating the branch"
        )
    except RefConflict as exc:
        raise BranchExists(name) from exc
    return tip or start


def delete_branch(session: Session, name: str, *, force: bool = False) -> ObjectId:
    """Delete a branch other than the session's; returns its old tip (the reflog keeps it until gc)."""
    session.check_writes("delete_branch", in_batch=False)
    ref = branch_ref(name)
    if ref == session.branch_ref:
        raise InvalidInput(f"cannot delete the current branch {name!r}; switch first")
    tip = session.store.get_ref(ref)
    if tip is None:
        raise BranchNotFound(name)
    tip_id = ObjectId(tip)
    if not force:
        others = [ObjectId(v) for r, v in session.store.iter_refs(HEADS) if r != ref]
        if session.detached is not None:
            others.append(session.detached)
        if not any(is_ancestor(session.store, tip_id, other) for other in others):
            raise InvalidInput(
                f"branch {name!r} has commits no other branch has; merge it, or delete it anyway "
                "(force=True, --force)"
            )
    from tractkv.engine.budget import drop_budget

    session.render_live()  # its commits' blobs may go at the next gc
    batch = session.store.new_batch()
    batch.set_ref(ref, None, expected=tip)
    drop_budget(batch, ref)
    log_ref_move(batch, ref, tip_id, None, "delete", f"deleted branch {name}", now_us=session.clock())
    session.store.apply(batch)
    return tip_id


def status(session: Session) -> StatusInfo:
    """Branch, HEAD, commit / message / token counts, budget, ahead / behind the upstream. The budget is the
    branch's stored one (:mod:`tractkv.engine.budget`), with its action and threshold and the last overrun
    recorded on the branch; the token count is calibrated by the provider when it can be
    (:mod:`tractkv.engine.calibration`)."""
    from tractkv.engine.budget import current_overrun, read_budget

    reader = session.reader()
    policy = read_budget(reader, session.branch_ref)
    token_budget = None if policy is None else policy.max_tokens
    state = session.head_state(reader)
    view = state.render(reader)
    from tractkv.engine.calibration import calibrated  # lazy: keeps `import tractkv` light

    count = calibrated(session, state, reader=reader)
    tracked = upstream(session, reader)
    ahead = behind = None
    if tracked is not None:
        if state.head is None:
            ahead, behind = 0, len(ancestors(reader, tracked[1]))
        else:
            ahead, behind = ahead_behind(reader, state.head, tracked[1])
    return StatusInfo(
        upstream=tracked[0] if tracked else None,
        ahead=ahead,
        behind=behind,
        branch=session.current_branch,
        head=state.head,
        detached=session.branch_ref is None,
        commit_count=state.commit_count,
        message_count=len(view),
        token_count=count.tokens,
        token_budget=token_budget,
        token_source=session.counter.name,
        count_source=count.source,
        estimated_tokens=count.estimated,
        reported_by=count.reported_by,
        budget_action=None if policy is None else policy.action,
        budget_threshold=None if policy is None else policy.threshold,
        budget_overrun=current_overrun(reader, session.branch_ref, policy, state.head, count.tokens),
    )


def upstream(session: Session, reader: Reader) -> tuple[str, ObjectId] | None:
    """The tracking branch the current branch follows: ``origin/<name>`` first, else the first remote's."""
    if session.branch_ref is None:
        return None
    name = session.branch_ref[len(HEADS) :]
    candidates = sorted(
        (ref[len(REMOTES) :], ObjectId(v))
        for ref, v in reader.iter_refs(REMOTES)
        if ref[len(REMOTES) :].split("/", 1)[-1] == name
    )
    candidates.sort(key=lambda c: not c[0].startswith("origin/"))
    return candidates[0] if candidates else None


def reflog(session: Session, branch: str | None = None, limit: int | None = None) -> list[ReflogEntry]:
    """Moves of a branch (default, or ``HEAD``: the session's), newest first."""
    if branch is None or branch == HEAD:
        if session.branch_ref is None:
            raise DetachedHead(str(session.detached), "show the reflog of HEAD")
        ref = session.branch_ref
    else:
        ref = HEADS + check_branch_name(branch)
    reader = session.reader()
    out: list[ReflogEntry] = []
    for entry in iter_reflog(reader, ref):
        if limit is not None and len(out) >= limit:
            break
        out.append(entry)
    if (
        branch not in (None, HEAD)
        and reader.get_ref(ref) is None
        and next(iter_reflog(reader, ref), None) is None
    ):
        raise BranchNotFound(ref[len(HEADS) :])  # never was a branch here (a deleted one keeps its reflog)
    return out
