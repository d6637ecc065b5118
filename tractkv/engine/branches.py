"""Branches as a session sees them: list, create, delete, reflog, and the one branch summary
(:func:`summary`: HEAD's is ``status``, every branch's ``summaries``; the CLI, the API and the viewer all show
it).

Creating and deleting a branch is one transaction with its reflog entry; the branch a session is on (and a
detached HEAD) is never deleted, and without ``force`` only a branch whose commits another branch has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs

from tractkv.engine.history import (
    HEAD,
    HEADS,
    REMOTES,
    TAGS,
    ahead_behind,
    ancestors,
    branch_ref,
    check_branch_name,
    is_ancestor,
    iter_reflog,
    log_ref_move,
)
from tractkv.engine.session import Session, Tip
from tractkv.engine.values import BranchInfo, ReflogEntry, StatusInfo, timestamp
from tractkv.errors import BranchExists, BranchNotFound, DetachedHead, InvalidInput, RefConflict
from tractkv.ids import ObjectId, is_object_id
from tractkv.store import Reader

if TYPE_CHECKING:
    from tractkv.engine.calibration import TokenCount
    from tractkv.engine.compile import CompileState


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
    if reader.get_ref(TAGS + name) is not None:
        raise InvalidInput(f"{name!r} is a tag: a branch of that name would make the name ambiguous")
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


@attrs.frozen(kw_only=True)
class HeadCounts:
    """What a branch's summary reads at its head commit. A commit id names immutable history, so it is the
    same for every branch at that commit and a caller may keep it by head id (the viewer does)."""

    commit_count: int
    message_count: int
    count: TokenCount  # calibrated by the provider where it can be (tractkv.engine.calibration)
    created_at: int | None  # the head commit's stamp (None: no commits)


def head_counts(session: Session, reader: Reader, state: CompileState) -> HeadCounts:
    """The :class:`HeadCounts` of ``state``, the compile state at a head read through ``reader``."""
    from tractkv.engine.calibration import calibrated  # lazy: keeps `import tractkv` light

    commit = None if state.head is None else reader.get_commit(state.head)
    return HeadCounts(
        commit_count=state.commit_count,
        message_count=len(state.render(reader)),
        count=calibrated(session, state, reader=reader, head=commit),  # the head read once
        created_at=None if commit is None else commit.created_at,
    )


def summary(
    session: Session,
    ref: str | None,
    reader: Reader,
    *,
    current: str | None,
    counts: Callable[[ObjectId | None], HeadCounts] | None = None,
    remotes: Sequence[tuple[str, str]] | None = None,
) -> StatusInfo:
    """The one branch summary: of ``ref`` (a local or remote-tracking branch's full ref; None: the session's
    detached HEAD), read through ``reader``, ``current`` naming HEAD's branch. Its head, commit / message /
    token counts (:func:`head_counts`, or ``counts(head)`` for a caller that keeps them), when it was last
    committed to; for a local branch its budget (the stored one, with its action and threshold and the last
    overrun while it holds, :mod:`tractkv.engine.budget`) and ahead / behind its upstream (:func:`upstream`;
    ``remotes``: the remote-tracking refs, when the caller has read them)."""
    from tractkv.engine.budget import current_overrun, read_budget

    remote = ref is not None and ref.startswith(REMOTES)
    head = session.detached if ref is None else _tip(reader, ref)
    if counts is not None:
        measured = counts(head)
    elif ref == session.branch_ref:  # the session's own HEAD: its state, kept up to date by the session
        measured = head_counts(session, reader, session.head_state(reader))
    else:
        measured = head_counts(session, reader, session.compiler.state_at(reader, head))
    policy = None if remote else read_budget(reader, ref)
    token_budget = None if policy is None else policy.max_tokens  # the one budget: the stored one
    tracked = None if remote or ref is None else upstream(reader, ref, remotes)
    ahead = behind = None
    if tracked is not None:
        if head is None:
            ahead, behind = 0, len(ancestors(reader, tracked[1]))
        else:
            ahead, behind = ahead_behind(reader, head, tracked[1])
    count = measured.count
    return StatusInfo(
        upstream=tracked[0] if tracked else None,
        ahead=ahead,
        behind=behind,
        branch=None if ref is None else ref[len(REMOTES if remote else HEADS) :],
        head=head,
        detached=ref is None,
        commit_count=measured.commit_count,
        message_count=measured.message_count,
        token_count=count.tokens,
        token_budget=token_budget,
        token_source=session.counter.name,
        count_source=count.source,
        estimated_tokens=count.estimated,
        reported_by=count.reported_by,
        budget_action=None if policy is None else policy.action,
        budget_threshold=None if policy is None else policy.threshold,
        budget_overrun=None if remote else current_overrun(reader, ref, policy, head, count.tokens),
        ref=ref,
        is_remote=remote,
        is_current=ref == current,
        last_activity=None if measured.created_at is None else timestamp(measured.created_at),
    )


def _tip(reader: Reader, ref: str) -> ObjectId | None:
    value = reader.get_ref(ref)
    return ObjectId(value) if value is not None and is_object_id(value) else None


def status(session: Session) -> StatusInfo:
    """HEAD's :func:`summary`: branch, HEAD, commit / message / token counts, the branch's stored budget,
    ahead / behind the upstream."""
    ref = session.branch_ref
    return summary(session, ref, session.reader(), current=ref)


def summaries(
    session: Session,
    *,
    current: str | None,
    unborn: bool = True,
    counts: Callable[[ObjectId | None], HeadCounts] | None = None,
) -> list[StatusInfo]:
    """The :func:`summary` of every branch: local ones by name (with ``unborn``, also ``current`` when it is a
    branch with no commits yet, as :func:`list_branches` lists it), then remote-tracking ones."""
    reader = session.reader()
    local = [ref for ref, _ in reader.iter_refs(HEADS)]
    if unborn and current is not None and current.startswith(HEADS) and reader.get_ref(current) is None:
        local = sorted([*local, current])
    remotes = list(reader.iter_refs(REMOTES))
    return [
        summary(
            session,
            ref,
            reader,
            current=current,
            counts=counts,
            remotes=remotes,
        )
        for ref in [*local, *(ref for ref, _ in remotes)]
    ]


def upstream(
    reader: Reader, ref: str, remotes: Sequence[tuple[str, str]] | None = None
) -> tuple[str, ObjectId] | None:
    """The tracking branch local branch ``ref`` follows: ``origin/<name>`` first, else the first remote's
    (among ``remotes``, the remote-tracking refs and their values; default: read them)."""
    name = ref[len(HEADS) :]
    candidates = sorted(
        (other[len(REMOTES) :], ObjectId(v))
        for other, v in (reader.iter_refs(REMOTES) if remotes is None else remotes)
        if other[len(REMOTES) :].split("/", 1)[-1] == name
    )
    candidates.sort(key=lambda c: not c[0].startswith("origin/"))
    return candidates[0] if candidates else None


def reflog(session: Session, branch: str | None = None, limit: int | None = None) -> list[ReflogEntry]:
    """Moves of a branch (default, or ``HEAD``: the session's; a full ref such as ``refs/tags/v1`` names a tag's
    moves), newest first."""
    if branch is None or branch == HEAD:
        if session.branch_ref is None:
            raise DetachedHead(str(session.detached), "show the reflog of HEAD")
        ref = session.branch_ref
    elif branch.startswith((HEADS, TAGS, REMOTES)):  # a full ref: a tag's moves too
        ref = branch
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
        raise BranchNotFound(
            ref.removeprefix(HEADS)
        )  # never was a branch here (a deleted one keeps its reflog)
    return out
