"""Sync operations on a store: fetch, push, clone, and bringing a tracking branch into a session's branch.

Remote-tracking refs are ``refs/remotes/<remote>/<branch>``: fetch moves them (and, only when asked to prune as
git's ``--prune``, deletes those of branches the remote no longer shows), a successful push moves the pushed
one. Tags are not tracked per remote: fetch brings the remote's tags into ``refs/tags/*`` (a tag that differs
from the local one of its name is refused unless forced), ``push_tags_to`` sends the local ones. Refs move only
after every object they need is stored.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

import attrs

from tractkv.engine.history import HEADS, REMOTES, TAGS, check_branch_name, is_ancestor, log_ref_move, peel
from tractkv.engine.session import Session
from tractkv.engine.values import MergeResult
from tractkv.errors import (
    AuthError,
    InvalidInput,
    InvalidRefName,
    ObjectTooLarge,
    PushRejected,
    RequestTooLarge,
    TransferError,
)
from tractkv.ids import ObjectId, is_object_id
from tractkv.model import Commit, kind_of
from tractkv.store import Store, WriteBatch

from .frames import HEADER, OID_BYTES
from .negotiate import ASK_THRESHOLD, candidate_ids, raw_objects
from .receive import receive_objects
from .remote import PushOutcome, RefResult, RefUpdate, Remote
from .remotes import add_remote, open_named

Progress = Callable[[int], None]
FRAME_BYTES = HEADER.size + OID_BYTES  # what the stream adds to each object
STREAM_BYTES = 4096  # the stream's magic and end frame, and the push head (one update), with room to spare


@attrs.frozen
class FetchResult:
    """What a fetch did: tracking refs moved (name -> (old, new)), objects received and newly stored, and
    what the remote holds that did not verify and was skipped (an S3 remote's packs: "<key>: <reason>")."""

    updated: dict[str, tuple[ObjectId | None, ObjectId | None]]
    objects: int
    new_objects: int
    bytes: int
    skipped: tuple[str, ...] = ()
    #: the remote's tags that differ from a local tag of that name, left as they are (git's "would clobber
    #: existing tag"): fetch with ``force_tags`` to move them
    tags_refused: tuple[str, ...] = ()


def _counting(
    pairs: Iterable[tuple[ObjectId, bytes]], progress: Progress | None
) -> Iterator[tuple[ObjectId, bytes]]:
    n = 0
    for n, pair in enumerate(pairs, 1):
        if progress is not None and n % 256 == 0:
            progress(256)
        yield pair
    if progress is not None and n % 256:
        progress(n % 256)  # the rest, so the counts add up to what was transferred


def _announce(progress: Progress, total: int) -> None:
    """Tell a progress callback how many objects will pass, when it wants to know (a ``set_total(n)``
    method, as the CLI's progress line has): it can then show ``n/total``."""
    set_total = getattr(progress, "set_total", None)
    if callable(set_total):
        set_total(total)


def local_tips(store: Store) -> list[ObjectId]:
    """Every branch and remote-tracking tip: what this store can tell a remote it has."""
    tips = {ObjectId(v) for _, v in store.iter_refs(HEADS) if is_object_id(v)}
    tips |= {ObjectId(v) for _, v in store.iter_refs(REMOTES) if is_object_id(v)}
    tips |= {ObjectId(v) for _, v in store.iter_refs(TAGS) if is_object_id(v)}
    return sorted(tips)


def remote_tags(remote: Remote) -> dict[str, ObjectId]:
    """The remote's tags, checked as its branches are (valid names, object ids); none from a hub that serves
    only branches (one from before tags: it answers 403 to the prefix)."""
    try:
        tags = remote.list_refs(TAGS)
    except AuthError as exc:
        if exc.status != 403:
            raise
        return {}
    for ref, value in tags.items():
        if not ref.startswith(TAGS) or not is_object_id(value):
            raise TransferError(f"{remote.url} advertised {ref!r} -> {value!r}, which is not a tag")
        try:
            check_branch_name(ref[len(TAGS) :])
        except InvalidRefName as exc:
            raise TransferError(f"{remote.url} advertised a tag with an invalid name: {exc}") from exc
    return tags


def check_max_object(max_object: object) -> int:
    """``max_object`` (``--max-object-bytes``) as a limit on one object, or :class:`InvalidInput`."""
    if isinstance(max_object, bool) or not isinstance(max_object, int) or max_object < 1:
        raise InvalidInput(
            f"max_object (--max-object-bytes) is a positive number of bytes, not {max_object!r}"
        )
    return max_object


def _limited(pairs: Iterable[tuple[ObjectId, bytes]], limit: int) -> Iterator[tuple[ObjectId, bytes]]:
    """``pairs``, refusing an object over ``limit`` bytes (for transports that do not decode a stream)."""
    for oid, data in pairs:
        if len(data) > limit:
            raise ObjectTooLarge(f"object of {len(data)} bytes is over the {limit}-byte limit", oid)
        yield oid, data


def fetch_from(
    store: Store,
    remote: Remote,
    name: str,
    *,
    progress: Progress | None = None,
    prune: bool = False,
    max_object: int | None = None,
    force_tags: bool = False,
) -> FetchResult:
    """Receive the remote's branches and move ``refs/remotes/<name>/*`` to them, and its tags into
    ``refs/tags/*`` (a new tag is created; one that differs from the local tag of its name is refused, listed
    in ``tags_refused``, unless ``force_tags``: tags never move by themselves, git's rule). A tracking branch the remote
    no longer shows (deleted there, or out of a narrower token's sight) stays, unless ``prune`` (git's
    ``--prune``) deletes it.

    An object over ``max_object`` bytes (default: the remote's ``max_receive``, the one size limit unless
    raised) is :class:`ObjectTooLarge` and no ref moves; the objects stored before it stay (each arrived
    whole, with its history: a retry does not fetch them again, gc collects them if nothing comes to need
    them), as a fetch that broke off keeps them."""
    if max_object is not None:  # for this fetch only: the transports read the remote's limit
        saved, remote.max_receive = remote.max_receive, check_max_object(max_object)
        try:
            return fetch_from(store, remote, name, progress=progress, prune=prune, force_tags=force_tags)
        finally:
            remote.max_receive = saved
    limit = remote.max_receive
    advertised = remote.list_refs(HEADS)
    for ref, tip in advertised.items():  # a remote is hostile until checked: only branches, by valid names
        if not ref.startswith(HEADS) or not is_object_id(tip):
            raise TransferError(f"{remote.url} advertised {ref!r} -> {tip!r}, which is not a branch")
        try:
            check_branch_name(ref[len(HEADS) :])
        except InvalidRefName as exc:
            raise TransferError(f"{remote.url} advertised a branch with an invalid name: {exc}") from exc
    tags = remote_tags(remote)
    wants = sorted({oid for oid in (*advertised.values(), *tags.values()) if not store.has(oid)})
    stats = None
    if wants:
        pairs = _limited(remote.fetch(wants, local_tips(store), store.has), limit)
        try:
            stats = receive_objects(store, _counting(pairs, progress), max_object=limit)
        except ObjectTooLarge as exc:
            if "--max-object-bytes" in exc.reason:  # the transport said how already (a bundle)
                raise
            raise ObjectTooLarge(
                f"{exc.reason} on one object a fetch takes: no branch moved (if you trust {remote.url}, "
                "fetch, pull or clone with --max-object-bytes N, max_object=N)",
                exc.oid,
            ) from None
    skipped = remote.skipped if wants else ()
    if skipped and progress is not None:
        warn = getattr(progress, "warn", None)  # a progress line that shows warnings (the CLI's)
        if callable(warn):
            for item in skipped:
                warn(f"skipped a pack that does not verify: {item}")
    lacking = [tip for tip in wants if not store.has(tip)]
    if lacking:  # the store is closed under links, so having the tip means having its history
        raise TransferError(f"{remote.url} did not send the commit its branch names", lacking[0])
    for (
        ref,
        tip,
    ) in advertised.items():  # a branch must name a commit: a store never holds a ref it cannot compile
        if not isinstance(store.get(tip), Commit):
            raise TransferError(
                f"{remote.url}: branch {ref[len(HEADS) :]!r} names {tip}, which is not a commit", tip
            )
    for ref, value in tags.items():  # a tag must name a commit, or a tag object of one
        if peel(store, value) is None:
            raise TransferError(
                f"{remote.url}: tag {ref[len(TAGS) :]!r} names {value}, which is not a commit"
            )
    prefix = f"{REMOTES}{name}/"
    current = dict(store.iter_refs(prefix))
    batch = store.new_batch()
    refused = _stage_tags(store, batch, tags, name, force_tags)
    updated: dict[str, tuple[ObjectId | None, ObjectId | None]] = {}
    for ref, tip in advertised.items():
        tracking = prefix + ref[len(HEADS) :]
        old = current.get(tracking)
        if old != tip:
            batch.set_ref(tracking, tip, expected=old)
            log_ref_move(batch, tracking, ObjectId(old) if old else None, tip, "fetch", f"fetch {name}")
            updated[tracking] = (ObjectId(old) if old else None, tip)
    for ref, (old_value, new_value) in batch.ref_updates.items():
        if ref.startswith(TAGS):
            updated[ref] = (
                ObjectId(old_value) if isinstance(old_value, str) else None,
                ObjectId(str(new_value)),
            )
    if prune:
        for tracking, old in current.items():
            if HEADS + tracking[len(prefix) :] not in advertised:
                batch.set_ref(tracking, None, expected=old)
                log_ref_move(batch, tracking, ObjectId(old), None, "fetch", f"pruned: gone from {name}")
                updated[tracking] = (ObjectId(old), None)
    if len(batch):
        store.apply(batch)  # refs only after every object they need is stored
    return FetchResult(
        updated=updated,
        objects=stats.objects if stats else 0,
        new_objects=stats.new_objects if stats else 0,
        bytes=stats.bytes if stats else 0,
        skipped=skipped,
        tags_refused=tuple(refused),
    )


def _stage_tags(
    store: Store, batch: WriteBatch, tags: dict[str, ObjectId], name: str, force: bool
) -> list[str]:
    """Stage the remote's tags into ``refs/tags/*``: new ones, and (``force``) moved ones; returns the names
    of those refused because the local tag differs."""
    refused: list[str] = []
    for ref, value in sorted(tags.items()):
        current = store.get_ref(ref)
        if current == value:
            continue
        if current is not None and not force:
            refused.append(ref[len(TAGS) :])
            continue
        batch.set_ref(ref, value, expected=current)
        old = ObjectId(current) if current else None
        log_ref_move(batch, ref, old, value, "fetch", f"tag from {name}" + (" (forced)" if old else ""))
    return refused


def push_tags_to(
    store: Store, remote: Remote, *, force: bool = False, progress: Progress | None = None
) -> PushOutcome:
    """Send every local tag (``refs/tags/*``) the remote lacks, or holds at another value (refused before
    anything is sent unless ``force``: a tag never moves by itself), in one push."""
    local = {ref: ObjectId(v) for ref, v in store.iter_refs(TAGS) if is_object_id(v)}
    if not local:
        raise InvalidInput("nothing to push: this store has no tags")
    advertised = remote_tags(remote)
    updates = []
    for ref, value in sorted(local.items()):
        old = advertised.get(ref)
        if old == value:
            continue
        if old is not None and not force:
            _reject(ref, "already-exists", f"the remote's tag names {old[:12]}; push --force to move it")
        updates.append(RefUpdate(ref, old, value, force=force))
    if not updates:
        results = tuple(RefResult(ref, True, None, "up to date") for ref in sorted(local))
        return PushOutcome(results=results, objects_sent=0, bytes_sent=0)
    haves = [oid for oid in (*remote.list_refs(HEADS).values(), *advertised.values()) if store.has(oid)]
    sizes: dict[ObjectId, int] = {}
    candidates = candidate_ids(store, [u.new for u in updates if u.new is not None], haves, sizes=sizes)
    if len(candidates) > ASK_THRESHOLD:
        lacking = remote.missing(candidates)
        candidates = [c for c in candidates if c in lacking]
    check_sizes(store, remote, candidates, sizes)
    if progress is not None:
        _announce(progress, len(candidates))
    outcome = remote.push(_counting(raw_objects(store, candidates), progress), updates)
    if not outcome.ok:
        raise PushRejected(list(outcome.results))
    return outcome


def push_to(
    store: Store,
    remote: Remote,
    name: str,
    ref: str,
    *,
    force: bool = False,
    expect: ObjectId | object | None = ...,
    progress: Progress | None = None,
) -> PushOutcome:
    """Send ``ref`` (a local branch) to the same name on the remote.

    The remote's current value (or ``expect``, force-with-lease) is the compare-and-swap's old value. A
    push that cannot be a fast-forward is refused before any object is sent, unless ``force``.
    """
    tip_raw = store.get_ref(ref)
    if tip_raw is None or not is_object_id(tip_raw):
        raise InvalidInput(f"nothing to push: {ref} has no commits")
    tip = ObjectId(tip_raw)
    advertised = remote.list_refs(HEADS)
    old = advertised.get(ref) if expect is ... else expect
    assert old is None or isinstance(old, str)
    if expect is not ... and advertised.get(ref) != old:
        _reject(ref, "stale", _not_expected(advertised.get(ref), old))
    if old is not None and not force:
        if not store.has(ObjectId(old)):
            _reject(ref, "non-fast-forward", f"the remote has {old[:12]}, which this store does not have")
        if not is_ancestor(store, ObjectId(old), tip):
            _reject(ref, "non-fast-forward", f"{tip[:12]} does not descend from the remote's {old[:12]}")
    if old == tip:
        return PushOutcome(results=(RefResult(ref, True, None, "up to date"),), objects_sent=0, bytes_sent=0)
    haves = [oid for oid in advertised.values() if store.has(oid)]
    sizes: dict[ObjectId, int] = {}
    candidates = candidate_ids(store, [tip], haves, sizes=sizes)
    if len(candidates) > ASK_THRESHOLD:
        lacking = remote.missing(candidates)
        candidates = [c for c in candidates if c in lacking]
    check_sizes(store, remote, candidates, sizes)
    update = RefUpdate(ref, ObjectId(old) if old else None, tip, force=force)
    if progress is not None:
        _announce(progress, len(candidates))
    outcome = remote.push(_counting(raw_objects(store, candidates), progress), [update])
    if not outcome.ok:
        results = list(outcome.results)
        if expect is not ...:  # another pusher moved it after list_refs: the lease is what failed
            now_at = remote.list_refs(HEADS).get(ref)
            results = [
                RefResult(r.name, False, "stale", _not_expected(now_at, old))
                if r.reason in ("stale", "non-fast-forward")
                else r
                for r in results
            ]
        raise PushRejected(results)
    tracking = f"{REMOTES}{name}/{ref[len(HEADS) :]}"
    current = store.get_ref(tracking)
    batch = store.new_batch()
    batch.set_ref(tracking, tip, expected=current)
    log_ref_move(batch, tracking, ObjectId(current) if current else None, tip, "push", f"push to {name}")
    store.apply(batch)
    return outcome


def check_sizes(
    store: Store, remote: Remote, oids: Iterable[ObjectId], sizes: Mapping[ObjectId, int] | None = None
) -> None:
    """Refuse, before anything is sent, a push the remote would refuse for its size: an object over its
    per-object limit (:class:`ObjectTooLarge`, naming the object) or more bytes in all than one push request
    may carry (:class:`RequestTooLarge`). A store only holds larger objects when it received them under a raised
    limit (``bundle unbundle --max-object-bytes``) or from an older tractkv. ``sizes`` gives the objects'
    sizes when the caller knows them (the negotiation walk read every object); else they are read."""
    limit, total = remote.max_object, 0
    with store.snapshot() as snap:
        for oid in oids:
            size = sizes.get(oid) if sizes is not None else None
            if size is None:
                data = snap.get_raw(oid)
                if data is None:
                    continue
                size = len(data)
            total += FRAME_BYTES + size
            if size > limit:
                data = snap.get_raw(oid)
                kind = kind_of(data) if data else "object"
                raise ObjectTooLarge(
                    f"a {kind} of {size:,} bytes is over {remote.url}'s {limit:,}-byte limit on "
                    "one object: nothing was sent",
                    oid,
                )
    if remote.max_request is not None and total + STREAM_BYTES > remote.max_request:
        raise RequestTooLarge(
            f"the push is {total:,} bytes of objects, over {remote.url}'s {remote.max_request:,}-byte limit on "
            "one push: nothing was sent (push part of the history first, from a branch at an older commit, or "
            "raise the hub's --max-request-bytes)"
        )


def _not_expected(actual: str | None, expected: str | None) -> str:
    """The refusal of a push whose lease (``expect``) does not hold."""
    at = f"it is at {actual[:12]}" if actual else "it has no such branch"
    wanted = expected[:12] if expected else "no branch"
    return f"the remote is not at the value you expected (expect=, --expect): {at}, not {wanted}"


def _reject(ref: str, reason: str, detail: str) -> None:
    raise PushRejected([RefResult(ref, False, reason, detail)])  # type: ignore[arg-type]


@contextmanager
def cloning_into(path: str | None) -> Iterator[None]:
    """The directory a clone fills: refused unless absent or empty; removed again (when the block made it)
    if the block raises, so a clone that fails leaves no store behind. The block opens the store there and
    fills it (:func:`clone_into`), closing it before it raises.

    Raises:
        InvalidInput: ``path`` exists and is not empty.
    """
    import shutil

    if path is not None and os.path.exists(path) and os.listdir(path):
        raise InvalidInput(f"cannot clone into {path!r}: it exists and is not empty")
    created = path is not None and not os.path.exists(path)
    try:
        yield
    except BaseException:
        if created and path is not None:
            shutil.rmtree(path, ignore_errors=True)
        raise


def clone_into(
    session: Session,
    url: str,
    remote_name: str,
    *,
    token_env: str | None = None,
    branch: str | None = None,
    progress: Progress | None = None,
    max_object: int | None = None,
) -> None:
    """Fill the new store ``session`` is on from ``url``: remember the remote, fetch (objects up to
    ``max_object`` bytes, see :func:`fetch_from`), make every remote branch a local branch, and put the
    session (and the store's HEAD) on ``branch``, else ``main`` when the remote has it, else the first by
    name. A new store has no budgets: no branch the clone makes is checked by one. Run it inside
    :func:`cloning_into`, which removes what a failed clone wrote.

    Raises:
        BranchNotFound: the remote has no ``branch``. ReadOnlySession: a read-only session.
    """
    from tractkv.errors import BranchNotFound

    session.check_writes("clone", in_batch=False)
    store = session.store
    add_remote(store, remote_name, url, token_env=token_env, probe=False)  # reading needs no probe
    with open_named(store, remote_name) as conn:
        fetch_from(store, conn, remote_name, progress=progress, max_object=max_object)
    prefix = f"{REMOTES}{remote_name}/"
    tips = {ref[len(prefix) :]: ObjectId(v) for ref, v in store.iter_refs(prefix)}
    if branch is not None and branch not in tips:
        raise BranchNotFound(branch, where=f"the remote {url}", known=sorted(tips))
    batch = store.new_batch()
    for name, tip in tips.items():
        batch.set_ref(HEADS + name, tip, expected=None)
        log_ref_move(batch, HEADS + name, None, tip, "clone", f"clone from {url}", now_us=session.clock())
    store.apply(batch)
    session.place(HEADS + (branch or ("main" if "main" in tips or not tips else sorted(tips)[0])))


def merge_tracking(
    session: Session,
    remote_name: str,
    branch: str | None = None,
    *,
    ff_only: bool = False,
    strategy: str = "auto",
) -> MergeResult:
    """Bring ``<remote>/<branch>`` (default: the session's branch name) into the session's branch: a
    fast-forward when possible, else a merge commit (``strategy`` settles conflicts).

    Raises:
        NotFastForward: ``ff_only`` and the histories diverged. BranchNotFound: no such tracking branch.
    """
    from tractkv.engine.merging import merge
    from tractkv.errors import BranchNotFound, NotFastForward

    tip = session.writable("pull")
    ref, head = tip.ref, tip.head
    tracking = f"{remote_name}/{check_branch_name(branch if branch is not None else ref[len(HEADS) :])}"
    theirs = session.store.get_ref(REMOTES + tracking)
    if theirs is None:
        raise BranchNotFound(tracking)
    store, theirs_id = session.store, ObjectId(theirs)
    related = (
        not ff_only
        or head is None
        or is_ancestor(store, head, theirs_id)
        or is_ancestor(store, theirs_id, head)
    )
    if not related:
        raise NotFastForward(ref[len(HEADS) :], tracking)
    return merge(session, REMOTES + tracking, strategy, message=f"Merge {tracking}", peer=True)
