"""Remotes and the sync operations on a store: remote config, fetch, push (pull and clone build on these).

Remote config lives in the store's local ``meta`` table (``remote:<name>`` -> CBOR ``{"url", "token_env"}``);
it never syncs. Remote-tracking refs are ``refs/remotes/<remote>/<branch>``: fetch moves them (and prunes
branches the remote no longer has), a successful push moves the pushed one.

Tokens for an HTTP hub come from the environment variable the remote names (``token_env``), else
``TRACTKV_TOKEN``; they never appear in a URL, in config or in a message.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

import attrs

from tractkv import codec
from tractkv.engine.graph import is_ancestor
from tractkv.engine.history import log_ref_move
from tractkv.engine.refs import HEADS, REMOTES, check_branch_name
from tractkv.engine.results import MergeResult
from tractkv.engine.session import Session
from tractkv.errors import (
    InvalidInput,
    PushRejected,
    RemoteExists,
    RemoteNotFound,
    TransferError,
    UnsupportedURL,
)
from tractkv.ids import ObjectId, is_object_id
from tractkv.store import Store, Table

from .negotiate import ASK_THRESHOLD, candidate_ids, raw_objects
from .receive import receive_objects
from .remote import PushOutcome, RefResult, RefUpdate, Remote

REMOTE_KEY = b"remote:"
TOKEN_ENV = "TRACTKV_TOKEN"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

Progress = Callable[[int], None]


@attrs.frozen
class FetchResult:
    """What a fetch did: tracking refs moved (name -> (old, new)), objects received and newly stored."""

    updated: dict[str, tuple[ObjectId | None, ObjectId | None]]
    objects: int
    new_objects: int
    bytes: int


# --- config ------------------------------------------------------------------------------------------------


def check_remote_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name.endswith(".lock"):
        raise InvalidInput(f"invalid remote name {name!r}: letters, digits, '.', '_' and '-' (up to 64)")
    return name


def remote_config(store: Store, name: str) -> dict[str, Any]:
    raw = store.table_get(Table.META, REMOTE_KEY + check_remote_name(name).encode())
    if raw is None:
        raise RemoteNotFound(name)
    config = codec.loads(raw)
    assert isinstance(config, dict)
    return config


def list_remotes(store: Store) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in store.table_iter(Table.META, REMOTE_KEY):
        config = codec.loads(value)
        if isinstance(config, dict) and isinstance(config.get("url"), str):
            out[key[len(REMOTE_KEY) :].decode()] = config["url"]
    return out


def add_remote(
    store: Store, name: str, url: str, *, token_env: str | None = None, probe: bool = True
) -> None:
    """Record a remote. The URL must be of a kind tractkv can reach; S3 endpoints are probed for
    conditional writes (a bucket that ignores them could lose pushes silently)."""
    key = REMOTE_KEY + check_remote_name(name).encode()
    if store.table_get(Table.META, key) is not None:
        raise RemoteExists(name)
    kind = url_kind(url)
    if probe and kind == "s3":
        from .s3 import S3Remote

        remote = S3Remote(url)
        try:
            remote.probe()
        finally:
            remote.close()
    config: dict[str, Any] = {"url": url}
    if token_env is not None:
        config["token_env"] = token_env
    batch = store.new_batch()
    batch.table_put(Table.META, key, codec.dumps(config))
    store.apply(batch)


def remove_remote(store: Store, name: str) -> int:
    """Forget a remote and its tracking refs (one transaction). Returns how many tracking refs went."""
    remote_config(store, name)
    batch = store.new_batch()
    batch.table_put(Table.META, REMOTE_KEY + name.encode(), None)
    prefix = f"{REMOTES}{name}/"
    dropped = 0
    for ref, value in store.iter_refs(prefix):
        batch.set_ref(ref, None, expected=value)
        dropped += 1
    store.apply(batch)
    return dropped


# --- transports ---------------------------------------------------------------------------------------------


def url_kind(url: str) -> str:
    """``path``, ``bundle``, ``http`` or ``s3`` (raises UnsupportedURL for anything else)."""
    if not isinstance(url, str) or not url:
        raise UnsupportedURL(str(url), "empty")
    lowered = url.lower()
    if lowered.startswith(("http://", "https://")):
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None:
            host = parts.hostname or ""
            shown = f"{parts.scheme}://{host}{':' + str(parts.port) if parts.port else ''}{parts.path}"
            raise UnsupportedURL(shown, "credentials never go in a URL: set TRACTKV_TOKEN or --token-env")
        return "http"
    if lowered.startswith("s3://"):
        return "s3"
    if "://" in url and not lowered.startswith("file://"):
        raise UnsupportedURL(url, "use a path, file://, http(s)://, s3:// or a .tkvbundle file")
    from .bundle import SUFFIX, is_bundle
    from .path import path_of

    path = path_of(url)
    if path.endswith(SUFFIX) or is_bundle(path):
        return "bundle"
    return "path"


def open_remote(url: str, *, token_env: str | None = None) -> Remote:
    """A :class:`Remote` for ``url`` (imports a transport's optional dependencies only when used)."""
    kind = url_kind(url)
    if kind == "http":
        from .http_client import HttpRemote

        token = os.environ.get(token_env) if token_env else None
        return HttpRemote(url, token=token or os.environ.get(TOKEN_ENV))
    if kind == "s3":
        from .s3 import S3Remote

        return S3Remote(url)
    if kind == "bundle":
        from .bundle import BundleRemote
        from .path import path_of

        return BundleRemote(path_of(url))
    from .path import PathRemote

    return PathRemote(url)


def open_named(store: Store, name: str) -> Remote:
    config = remote_config(store, name)
    return open_remote(config["url"], token_env=config.get("token_env"))


# --- operations ---------------------------------------------------------------------------------------------


def _counting(
    pairs: Iterable[tuple[ObjectId, bytes]], progress: Progress | None
) -> Iterator[tuple[ObjectId, bytes]]:
    for n, pair in enumerate(pairs, 1):
        if progress is not None and n % 256 == 0:
            progress(256)
        yield pair


def local_tips(store: Store) -> list[ObjectId]:
    """Every branch and remote-tracking tip: what this store can tell a remote it has."""
    tips = {ObjectId(v) for _, v in store.iter_refs(HEADS) if is_object_id(v)}
    tips |= {ObjectId(v) for _, v in store.iter_refs(REMOTES) if is_object_id(v)}
    return sorted(tips)


def fetch_from(
    store: Store, remote: Remote, name: str, *, progress: Progress | None = None, prune: bool = True
) -> FetchResult:
    """Receive the remote's branches and move ``refs/remotes/<name>/*`` to them."""
    advertised = remote.list_refs(HEADS)
    wants = sorted({oid for oid in advertised.values() if not store.has(oid)})
    stats = None
    if wants:
        stats = receive_objects(store, _counting(remote.fetch(wants, local_tips(store), store.has), progress))
    lacking = [tip for tip in wants if not store.has(tip)]
    if lacking:  # the store is closed under links, so having the tip means having its history
        raise TransferError(f"{remote.url} did not send the commit its branch names", lacking[0])
    prefix = f"{REMOTES}{name}/"
    current = dict(store.iter_refs(prefix))
    batch = store.new_batch()
    updated: dict[str, tuple[ObjectId | None, ObjectId | None]] = {}
    for ref, tip in advertised.items():
        tracking = prefix + ref[len(HEADS) :]
        old = current.get(tracking)
        if old != tip:
            batch.set_ref(tracking, tip, expected=old)
            log_ref_move(batch, tracking, ObjectId(old) if old else None, tip, "fetch", f"fetch {name}")
            updated[tracking] = (ObjectId(old) if old else None, tip)
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
    )


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
    if old is not None and not force:
        if not store.has(ObjectId(old)):
            _reject(
                ref,
                "non-fast-forward",
                f"the remote has {old[:12]}, which is not here: fetch and merge first",
            )
        if not is_ancestor(store, ObjectId(old), tip):
            _reject(
                ref,
                "non-fast-forward",
                f"{tip[:12]} does not descend from the remote's {old[:12]}: pull first",
            )
    if old == tip:
        return PushOutcome(results=(RefResult(ref, True, None, "up to date"),), objects_sent=0, bytes_sent=0)
    haves = [oid for oid in advertised.values() if store.has(oid)]
    candidates = candidate_ids(store, [tip], haves)
    if len(candidates) > ASK_THRESHOLD:
        lacking = remote.missing(candidates)
        candidates = [c for c in candidates if c in lacking]
    update = RefUpdate(ref, ObjectId(old) if old else None, tip, force=force)
    outcome = remote.push(_counting(raw_objects(store, candidates), progress), [update])
    if not outcome.ok:
        raise PushRejected(list(outcome.results))
    tracking = f"{REMOTES}{name}/{ref[len(HEADS) :]}"
    current = store.get_ref(tracking)
    batch = store.new_batch()
    batch.set_ref(tracking, tip, expected=current)
    log_ref_move(batch, tracking, ObjectId(current) if current else None, tip, "push", f"push to {name}")
    store.apply(batch)
    return outcome


def _reject(ref: str, reason: str, detail: str) -> None:
    raise PushRejected([RefResult(ref, False, reason, detail)])  # type: ignore[arg-type]


class Cloned(Protocol):
    """What :func:`clone_into` needs of the handle it fills: its session, and close() for a rollback."""

    @property
    def session(self) -> Session: ...

    def close(self) -> None: ...


HandleT = TypeVar("HandleT", bound=Cloned)


def clone_into(
    path: str | None,
    open_handle: Callable[[], HandleT],
    url: str,
    remote_name: str,
    *,
    token_env: str | None = None,
    branch: str | None = None,
    progress: Progress | None = None,
) -> HandleT:
    """Open a new store at ``path`` with ``open_handle`` and fill it from ``url``: remember the remote,
    fetch, make every remote branch a local branch, and put HEAD on ``branch``, else ``main`` when the remote
    has it, else the first by name.

    Guarantees: a clone that fails closes the handle and leaves no store behind at ``path``.

    Raises:
        InvalidInput: ``path`` exists and is not empty. BranchNotFound: the remote has no ``branch``.
    """
    import shutil

    from tractkv.errors import BranchNotFound

    if path is not None and os.path.exists(path) and os.listdir(path):
        raise InvalidInput(f"cannot clone into {path!r}: it exists and is not empty")
    created = path is not None and not os.path.exists(path)
    handle: HandleT | None = None
    try:
        handle = open_handle()
        session = handle.session
        store = session.store
        add_remote(store, remote_name, url, token_env=token_env)
        with open_named(store, remote_name) as conn:
            fetch_from(store, conn, remote_name, progress=progress)
        prefix = f"{REMOTES}{remote_name}/"
        tips = {ref[len(prefix) :]: ObjectId(v) for ref, v in store.iter_refs(prefix)}
        if branch is not None and branch not in tips:
            raise BranchNotFound(f"{remote_name}/{branch}")
        batch = store.new_batch()
        for name, tip in tips.items():
            batch.set_ref(HEADS + name, tip, expected=None)
            log_ref_move(batch, HEADS + name, None, tip, "clone", f"clone from {url}", now_us=session.clock())
        store.apply(batch)
        session.place(HEADS + (branch or ("main" if "main" in tips or not tips else sorted(tips)[0])))
        return handle
    except BaseException:
        if handle is not None:
            handle.close()
        if created and path is not None:
            shutil.rmtree(path, ignore_errors=True)
        raise


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

    ref = session.writable("pull")
    head = session.head
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
    return merge(session, REMOTES + tracking, strategy, message=f"Merge {tracking}")
