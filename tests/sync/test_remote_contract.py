"""The Remote contract: one set of cases, run on every transport.

Transports (the ``backend`` fixture): ``path`` (another store on this machine), ``http-asgi`` (the hub's app
in this process, through an injected httpx transport: no socket), ``http-hub`` (a real ``tractkv serve``
process on 127.0.0.1), ``s3`` (SeaweedFS) and ``bundle`` (a read-only remote: its read subset, and its
refusal of every write).

Cases: list / fetch / clone; force push and force-with-lease; prune on fetch; diverged (non-fast-forward)
refusal with nothing changed on either side; atomic multi-ref push; an interrupted push and an interrupted
fetch (a link-closed prefix stays, no ref moves, a retry completes). A transport that cannot do something
asserts its documented refusal instead of skipping: a bundle refuses every write with "read-only", S3
refuses deleting a branch and updating several refs atomically.

Every remote's state is also read besides the transport under test (its store, its bucket or its file), so
"nothing changed" and "a closed prefix" are checked on what the remote really holds.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tractkv import Tract
from tractkv.errors import PushRejected, SyncError
from tractkv.ids import ObjectId
from tractkv.store import LmdbStore, MemoryStore, Store
from tractkv.sync import remotes, transfer
from tractkv.sync.bundle import BundleRemote, write_bundle
from tractkv.sync.frames import decode_stream
from tractkv.sync.http_client import HttpRemote
from tractkv.sync.negotiate import ASK_THRESHOLD, candidate_ids, objects_for, raw_objects
from tractkv.sync.path import PathRemote
from tractkv.sync.receive import receive_objects, verify
from tractkv.sync.remote import PushOutcome, RefUpdate, Remote
from tractkv.sync.s3 import S3Remote

from .conftest import BUCKET, Hub, InProcessHub

Factory = Callable[..., Tract]
HEADS = "refs/heads/"
MAIN = "refs/heads/main"
FEATURE = "refs/heads/feature"
LONG_HISTORY = 200  # commits: over ASK_THRESHOLD objects, so a retried push asks what is missing


class StreamCut(Exception):
    """The connection broke off (raised by a stream the test cuts midway)."""


def cut_after(pairs: Iterable[tuple[ObjectId, bytes]], n: int) -> Iterator[tuple[ObjectId, bytes]]:
    """The first ``n`` of ``pairs``, then the connection breaks."""
    for i, pair in enumerate(pairs):
        if i == n:
            raise StreamCut(f"cut after {n} objects")
        yield pair


class CutFetch(Remote):
    """``remote``, except that every fetch stream breaks off after ``n`` objects."""

    def __init__(self, remote: Remote, n: int) -> None:
        self.url = remote.url
        self._remote = remote
        self._n = n

    def list_refs(self, prefix: str = HEADS) -> dict[str, ObjectId]:
        return self._remote.list_refs(prefix)

    def missing(self, oids: Sequence[ObjectId]) -> set[ObjectId]:
        return self._remote.missing(oids)

    def push(
        self, objects: Iterable[tuple[ObjectId, bytes]], updates: Sequence[RefUpdate], *, atomic: bool = False
    ) -> PushOutcome:
        return self._remote.push(objects, updates, atomic=atomic)

    def fetch(
        self,
        wants: Sequence[ObjectId],
        haves: Sequence[ObjectId],
        known: Callable[[ObjectId], bool] | None = None,
    ) -> Iterator[tuple[ObjectId, bytes]]:
        stream = self._remote.fetch(wants, haves, known)
        try:
            yield from cut_after(stream, self._n)
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()  # the transport's stream is abandoned, as when a connection drops


# --- the transports under test -------------------------------------------------------------------------------


class Backend(abc.ABC):
    """One remote of one kind, and an independent view of what it holds."""

    kind: str
    url: str
    writable = True  # False: every write is refused with "read-only"
    deletes_branches = True  # False: a push that deletes a branch is refused ("invalid")
    atomic_multi_ref = True  # False: an atomic push of several refs is refused ("atomic")

    @abc.abstractmethod
    def connect(self) -> Remote:
        """A new connection to the remote (the transport under test)."""

    @abc.abstractmethod
    def held(self) -> tuple[dict[str, str], dict[ObjectId, bytes]]:
        """The remote's branches and objects, read without the transport under test."""

    def publish(self, source: Store, branches: Sequence[str]) -> None:
        """Make the remote hold ``branches`` as ``source`` has them (what another writer would do)."""
        with self.connect() as remote:
            for name in branches:
                assert transfer.push_to(source, remote, "publisher", HEADS + name, force=True).ok

    def remove_branch(self, name: str) -> None:
        """Delete a branch on the remote through the transport (or assert its refusal and do it aside)."""
        refs, _ = self.held()
        with self.connect() as remote:
            outcome = remote.push([], [RefUpdate(name, ObjectId(refs[name]), None)])
        assert outcome.ok, outcome.results

    def clone(self, path: Path) -> Tract:
        return Tract.clone(self.url, str(path), durable=False)

    def settle(self) -> None:  # noqa: B027 - only a real process needs to be waited for
        """Wait until the remote has finished with a request the client broke off (in-process: done)."""

    def close(self) -> None:  # noqa: B027 - most backends hold nothing
        """Release what the backend holds."""


def lmdb_held(store: Store) -> tuple[dict[str, str], dict[ObjectId, bytes]]:
    return dict(store.iter_refs(HEADS)), dict(store.iter_raw_objects())


class PathBackend(Backend):
    kind = "path"

    def __init__(self, path: Path) -> None:
        self.url = str(path)
        self.store = LmdbStore(self.url)  # as PathRemote opens it (one process shares one environment)

    def connect(self) -> Remote:
        return PathRemote(self.url)

    def held(self) -> tuple[dict[str, str], dict[ObjectId, bytes]]:
        return lmdb_held(self.store)

    def close(self) -> None:
        self.store.close()


class AsgiBackend(Backend):
    """The hub's Starlette app over a store, reached through an injected transport (no socket)."""

    kind = "http-asgi"

    def __init__(self, hub: InProcessHub, monkeypatch: pytest.MonkeyPatch) -> None:
        self.url = hub.url
        self.hub = hub
        self._monkeypatch = monkeypatch

    def connect(self) -> Remote:
        return self.hub.remote()

    def held(self) -> tuple[dict[str, str], dict[ObjectId, bytes]]:
        return lmdb_held(self.hub.store)

    def clone(self, path: Path) -> Tract:
        # Clone opens its remote by URL; route this URL to the in-process hub.
        with self._monkeypatch.context() as patch:
            patch.setattr(remotes, "open_remote", lambda url, token_env=None: self.connect())
            return super().clone(path)


class HubBackend(Backend):
    """A real `tractkv serve` process; its store is read from this process while it runs (LMDB allows it)."""

    kind = "http-hub"

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.url = hub.url

    def connect(self) -> Remote:
        return HttpRemote(self.url)

    def held(self) -> tuple[dict[str, str], dict[ObjectId, bytes]]:
        with LmdbStore(str(self.hub.store), create=False, durable=False) as store:
            return lmdb_held(store)

    def settle(self) -> None:
        """Poll (at most 10 s) until the hub's objects stop changing: it stores a broken-off push's prefix
        after the client has gone."""
        count = len(self.held()[1])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(0.2)
            again = len(self.held()[1])
            if again == count and again > 0:
                return
            count = again


class S3Backend(Backend):
    kind = "s3"
    deletes_branches = False
    atomic_multi_ref = False

    def __init__(self, url: str, endpoint: str) -> None:
        import boto3

        self.url = url
        self._prefix = url.removeprefix(f"s3://{BUCKET}/") + "/"
        self._s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")

    def connect(self) -> Remote:
        return S3Remote(self.url)

    def _keys(self, under: str) -> list[str]:
        pages = self._s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=self._prefix + under)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def _read(self, key: str) -> bytes:
        body: bytes = self._s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        return body

    def held(self) -> tuple[dict[str, str], dict[ObjectId, bytes]]:
        refs = {k[len(self._prefix) :]: self._read(k).decode().strip() for k in self._keys(HEADS)}
        objects = {ObjectId(k.rsplit("/", 1)[1]): self._read(k) for k in self._keys("objects/")}
        for key in self._keys("packs/"):  # magic, u32 index length, index, then an object stream
            data = self._read(key)
            assert data.startswith(b"TKVPACK1\n"), key
            start = len(b"TKVPACK1\n") + 4
            stream = data[start + int.from_bytes(data[start - 4 : start], "big") :]
            objects.update(decode_stream([stream], max_request=1 << 40))
        return refs, objects

    def remove_branch(self, name: str) -> None:
        refs, _ = self.held()
        with self.connect() as remote:
            outcome = remote.push([], [RefUpdate(name, ObjectId(refs[name]), None)])
        assert [(r.ok, r.reason) for r in outcome.results] == [(False, "invalid")]
        assert "not supported on S3" in outcome.results[0].detail
        assert self.held()[0] == refs
        self._s3.delete_object(Bucket=BUCKET, Key=self._prefix + name)  # what an operator would do

    def close(self) -> None:
        self._s3.close()


class BundleBackend(Backend):
    """A bundle file: read-only, so publishing writes a new bundle in its place."""

    kind = "bundle"
    writable = False

    def __init__(self, path: Path) -> None:
        self.url = str(path)

    def connect(self) -> Remote:
        return BundleRemote(self.url)

    def held(self) -> tuple[dict[str, str], dict[ObjectId, bytes]]:
        with BundleRemote(self.url) as bundle:
            return dict(bundle.list_refs()), dict(bundle.fetch([], []))

    def publish(self, source: Store, branches: Sequence[str]) -> None:
        refs = {HEADS + name: ObjectId(source.get_ref(HEADS + name) or "") for name in branches}
        write_bundle(source, self.url, refs)

    def remove_branch(self, name: str) -> None:
        refs, objects = self.held()
        with self.connect() as remote, pytest.raises(SyncError, match="read-only"):
            remote.push([], [RefUpdate(name, ObjectId(refs[name]), None)])
        assert self.held() == (refs, objects)
        store = MemoryStore()
        receive_objects(store, objects.items())
        write_bundle(store, self.url, {n: ObjectId(v) for n, v in refs.items() if n != name})  # a new bundle


@pytest.fixture(
    params=[
        "path",
        "http-asgi",
        pytest.param("http-hub", marks=pytest.mark.slow),
        pytest.param("s3", marks=pytest.mark.slow),
        "bundle",
    ]
)
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    kind = request.param
    chosen: Backend
    if kind == "path":
        chosen = PathBackend(tmp_path / "remote")
    elif kind == "http-asgi":
        chosen = AsgiBackend(request.getfixturevalue("in_process_hub")(), monkeypatch)
    elif kind == "http-hub":
        chosen = HubBackend(request.getfixturevalue("start_hub")())
    elif kind == "s3":
        chosen = S3Backend(request.getfixturevalue("s3_url"), request.getfixturevalue("s3_endpoint"))
    else:
        chosen = BundleBackend(tmp_path / "remote.tkvbundle")
    yield chosen
    chosen.close()


# --- helpers ---------------------------------------------------------------------------------------------------


def heads(store: Store) -> dict[str, str]:
    return dict(store.iter_refs(HEADS))


def tip(t: Tract) -> ObjectId:
    assert t.head is not None
    return ObjectId(t.head)


def assert_closed(objects: dict[ObjectId, bytes]) -> None:
    """Every object verifies and every object it links is there too (what fsck checks of a store)."""
    for oid, data in objects.items():
        for link in verify(oid, data).iter_links():
            assert link in objects, f"{oid} links to {link}, which is not there"


def assert_read_only(backend: Backend, write: Callable[[], object]) -> None:
    """A bundle refuses a write, clearly and changing nothing."""
    before = backend.held()
    with pytest.raises(SyncError, match="read-only"):
        write()
    assert backend.held() == before


def compiled(t: Tract, rev: str) -> Any:
    return t.compile(at=rev).to_openai()


@pytest.fixture(scope="module")
def long_history() -> list[tuple[ObjectId, bytes]]:
    """A one-branch history of LONG_HISTORY commits with 1 KB messages (several stream chunks), links first."""
    from .conftest import Clock

    t = Tract(MemoryStore(), clock=Clock())
    t.system("a long session")
    for i in range(LONG_HISTORY):
        t.user(f"message {i} " + "x" * 1000)
    pairs = list(objects_for(t.store, [tip(t)], []))
    assert len(pairs) > ASK_THRESHOLD
    return pairs


def store_with(pairs: list[tuple[ObjectId, bytes]]) -> Store:
    """A memory store holding ``pairs`` with main at the last (the tip)."""
    store = MemoryStore()
    receive_objects(store, pairs)
    batch = store.new_batch()
    batch.set_ref(MAIN, pairs[-1][0], expected=None)
    store.apply(batch)
    return store


# --- the contract ----------------------------------------------------------------------------------------------


def test_list_refs_fetch_and_clone(backend: Backend, open_store_tract: Factory, tmp_path: Path) -> None:
    source = open_store_tract("source")
    source.system("shared start")
    source.user("on main")
    source.branch("feature")
    source.user("on feature")
    backend.publish(source.store, ["main", "feature"])
    local = open_store_tract("local")
    with backend.connect() as remote:
        assert remote.list_refs() == heads(source.store)
        assert remote.list_refs("refs/heads/feat") == {FEATURE: source.store.get_ref(FEATURE)}
        result = transfer.fetch_from(local.store, remote, "origin")
        assert set(result.updated) == {"refs/remotes/origin/main", "refs/remotes/origin/feature"}
        assert result.new_objects == len(backend.held()[1])
        again = transfer.fetch_from(local.store, remote, "origin")
        assert (again.updated, again.objects) == ({}, 0)  # up to date: nothing asked, nothing sent
    clone = backend.clone(tmp_path / "clone")
    try:
        assert heads(clone.store) == heads(source.store)
        assert clone.current_branch == "main"
        for name in ("main", "feature"):
            assert compiled(clone, name) == compiled(source, name)
    finally:
        clone.close()


def test_force_push_and_force_with_lease(backend: Backend, open_store_tract: Factory) -> None:
    t = open_store_tract("t")
    t.system("s")
    first = tip(t)
    t.user("published, then rewritten")
    published = tip(t)
    backend.publish(t.store, ["main"])
    t.reset(first, mode="hard")
    t.user("the rewrite")
    rewrite = tip(t)
    with backend.connect() as remote:
        before = backend.held()
        with pytest.raises(PushRejected) as info:
            transfer.push_to(t.store, remote, "origin", MAIN)
        assert [r.reason for r in info.value.results] == ["non-fast-forward"]
        assert backend.held() == before  # refused before anything was sent
        if not backend.writable:
            assert_read_only(backend, lambda: transfer.push_to(t.store, remote, "origin", MAIN, force=True))
            return
        with pytest.raises(PushRejected) as info:  # a lease on a value the remote no longer has
            transfer.push_to(t.store, remote, "origin", MAIN, force=True, expect=first)
        assert [r.reason for r in info.value.results] == ["stale"]
        assert backend.held()[0] == {MAIN: published}
        outcome = transfer.push_to(t.store, remote, "origin", MAIN, force=True, expect=published)
        assert outcome.ok
        assert backend.held()[0] == {MAIN: rewrite}
        assert remote.list_refs() == {MAIN: rewrite}
    assert t.store.get_ref("refs/remotes/origin/main") == rewrite


def test_diverged_push_is_refused_and_changes_nothing_on_either_side(
    backend: Backend, open_store_tract: Factory, tmp_path: Path
) -> None:
    ours = open_store_tract("ours")
    ours.system("shared start")
    base = tip(ours)
    backend.publish(ours.store, ["main"])
    theirs = backend.clone(tmp_path / "theirs")
    try:
        theirs.user("their work")
        backend.publish(theirs.store, ["main"])  # they push first
        their_tip = tip(theirs)
    finally:
        theirs.close()
    ours.user("our work")
    local_before = dict(ours.store.iter_refs("refs/"))
    remote_before = backend.held()
    with backend.connect() as remote:
        with pytest.raises(PushRejected) as info:
            transfer.push_to(ours.store, remote, "origin", MAIN)
        assert [r.reason for r in info.value.results] == ["non-fast-forward"]
        assert backend.held() == remote_before  # refused before any object was sent
        assert dict(ours.store.iter_refs("refs/")) == local_before
        # A pusher that read the remote before their push (a lost race) is refused by the remote itself.
        race = list(raw_objects(ours.store, candidate_ids(ours.store, [tip(ours)], [base])))
        update = RefUpdate(MAIN, base, tip(ours))
        if not backend.writable:
            assert_read_only(backend, lambda: remote.push(race, [update]))
            return
        outcome = remote.push(race, [update])
    assert [(r.ok, r.reason) for r in outcome.results] == [(False, "non-fast-forward")]
    refs, objects = backend.held()
    assert refs == {MAIN: their_tip}
    assert_closed(objects)  # the objects that arrived may stay (a retry sends less); no ref points at them
    assert dict(ours.store.iter_refs("refs/")) == local_before


def test_fetch_keeps_tracking_branches_the_remote_no_longer_shows_unless_prune(
    backend: Backend, open_store_tract: Factory
) -> None:
    """Issue 29 item 10: a plain fetch deleted the tracking branches it could not see; as git's, it keeps them
    and only ``prune=True`` (``--prune``) deletes them, on every transport."""
    source = open_store_tract("source")
    source.system("s")
    source.branch("feature")
    source.user("f")
    feature_tip = tip(source)
    backend.publish(source.store, ["main", "feature"])
    local = open_store_tract("local")
    with backend.connect() as remote:
        transfer.fetch_from(local.store, remote, "origin")
    assert set(dict(local.store.iter_refs("refs/remotes/"))) == {
        "refs/remotes/origin/main",
        "refs/remotes/origin/feature",
    }
    backend.remove_branch(FEATURE)
    with backend.connect() as remote:
        kept = transfer.fetch_from(local.store, remote, "origin")
        assert kept.updated == {}
        assert local.store.get_ref("refs/remotes/origin/feature") == feature_tip
        result = transfer.fetch_from(local.store, remote, "origin", prune=True)
    assert result.updated == {"refs/remotes/origin/feature": (feature_tip, None)}
    assert result.objects == 0
    assert set(dict(local.store.iter_refs("refs/remotes/"))) == {"refs/remotes/origin/main"}


def test_atomic_multi_ref_push_is_all_or_nothing(backend: Backend, open_store_tract: Factory) -> None:
    t = open_store_tract("t")
    t.system("s")
    base = tip(t)
    t.branch("feature", switch=False)
    backend.publish(t.store, ["main", "feature"])
    t.user("main 1")
    main_1 = tip(t)
    t.switch("feature")
    t.user("feature 1")
    feature_1 = tip(t)

    def objects() -> list[tuple[ObjectId, bytes]]:
        return list(raw_objects(t.store, candidate_ids(t.store, [main_1, feature_1], [base])))

    good = [RefUpdate(MAIN, base, main_1), RefUpdate(FEATURE, base, feature_1)]
    one_stale = [RefUpdate(MAIN, base, main_1), RefUpdate(FEATURE, main_1, feature_1)]
    with backend.connect() as remote:
        if not backend.writable:
            assert_read_only(backend, lambda: remote.push(objects(), good, atomic=True))
            return
        before = backend.held()
        outcome = remote.push(objects(), one_stale, atomic=True)
        if backend.atomic_multi_ref:
            assert [(r.ok, r.reason) for r in outcome.results] == [(False, "atomic"), (False, "stale")]
            assert backend.held()[0] == before[0]
        else:
            assert [(r.ok, r.reason) for r in outcome.results] == [(False, "atomic")] * 2
            assert "several refs atomically" in outcome.results[0].detail
            assert outcome.objects_sent == 0
            assert backend.held() == before  # refused before any object was sent
        outcome = remote.push(objects(), good, atomic=True)
        if backend.atomic_multi_ref:
            assert outcome.ok
            assert backend.held()[0] == {MAIN: main_1, FEATURE: feature_1}
            return
        assert [(r.ok, r.reason) for r in outcome.results] == [(False, "atomic")] * 2
        outcome = remote.push(objects(), one_stale)  # without atomic, each ref on its own
        assert [(r.ok, r.reason) for r in outcome.results] == [(True, None), (False, "stale")]
        assert backend.held()[0] == {MAIN: main_1, FEATURE: base}


def test_interrupted_push_keeps_a_closed_prefix_and_a_retry_sends_the_rest(
    backend: Backend, long_history: list[tuple[ObjectId, bytes]]
) -> None:
    store = store_with(long_history)
    head = long_history[-1][0]
    half = len(long_history) // 2
    update = RefUpdate(MAIN, None, head)
    if not backend.writable:
        backend.publish(store, ["main"])
        with backend.connect() as remote:
            assert_read_only(backend, lambda: remote.push(cut_after(long_history, half), [update]))
        return
    with backend.connect() as remote, pytest.raises(StreamCut):
        remote.push(cut_after(long_history, half), [update])
    backend.settle()
    refs, kept = backend.held()
    assert refs == {}  # no ref moved
    assert 0 < len(kept) <= half
    assert set(kept) <= {oid for oid, _ in long_history[:half]}  # a prefix of the stream...
    assert_closed(kept)  # ...closed under links
    with backend.connect() as remote:
        outcome = transfer.push_to(store, remote, "origin", MAIN)
    assert outcome.ok
    assert outcome.objects_sent == len(long_history) - len(kept)  # only the rest
    refs, objects = backend.held()
    assert refs == {MAIN: head}
    assert set(objects) == {oid for oid, _ in long_history}


def test_interrupted_fetch_keeps_a_closed_prefix_and_a_retry_completes(
    backend: Backend, long_history: list[tuple[ObjectId, bytes]]
) -> None:
    head = long_history[-1][0]
    backend.publish(store_with(long_history), ["main"])
    local = MemoryStore()
    half = len(long_history) // 2
    with backend.connect() as remote, pytest.raises(StreamCut):
        transfer.fetch_from(local, CutFetch(remote, half), "origin")
    kept = dict(local.iter_raw_objects())
    assert len(kept) == half  # every object that arrived whole was verified and kept
    assert_closed(kept)
    assert list(local.iter_refs("refs/remotes/")) == []  # no tracking ref moved
    with backend.connect() as remote:
        result = transfer.fetch_from(local, remote, "origin")
    assert result.new_objects == len(long_history) - half
    assert local.get_ref("refs/remotes/origin/main") == head
    assert set(local.iter_oids()) == {oid for oid, _ in long_history}


def children_seen(t: Tract) -> list[tuple[Any, ...]]:
    return [(c.purpose, c.state, c.branch, c.head, c.spawn_commit, c.collapsed_by) for c in t.children()]


def test_a_collapsed_childs_history_travels_with_its_parent(
    backend: Backend, open_store_tract: Factory, tmp_path: Path
) -> None:
    """Spawn / collapse (issue 21): the collapse commit links the child's head, so every transport sends the
    child's whole history with the parent's branch (after an earlier publish too: an incremental push), and
    the receiver compiles the child's history and lists the same children."""
    source = open_store_tract("source")
    source.system("coordinate")
    source.user("what are a and b?")
    backend.publish(source.store, ["main"])  # the remote has main before the children exist
    with source.spawn("find a") as child:
        child.user("a?")
        child.assistant("a is 1")
        collapsed = child.head
        source.collapse(child, content="a is 1")
    opened = source.spawn("find b", inherit="full")
    opened.user("b?")
    opened.close()
    assert collapsed is not None
    assert [b.name for b in source.list_branches(remotes=False)] == ["main", "main.spawn/find-b"]
    if backend.writable:
        with backend.connect() as remote:
            for name in ("main", "main.spawn/find-b"):
                assert transfer.push_to(source.store, remote, "origin", HEADS + name).ok
    else:
        backend.publish(source.store, ["main", "main.spawn/find-b"])
    _, objects = backend.held()
    assert collapsed in objects  # the child's head, reachable from main only through the link
    assert_closed(objects)
    clone = backend.clone(tmp_path / "clone")
    try:
        assert compiled(clone, collapsed) == compiled(source, collapsed)
        assert compiled(clone, "main") == compiled(source, "main")
        assert children_seen(clone) == children_seen(source)
        assert [c.state for c in clone.children()] == ["collapsed", "open"]
        clone.switch("main.spawn/find-b")
        parent = clone.parent()
        assert parent is not None
        assert (parent.branch, parent.purpose, parent.inherit) == ("main", "find b", "full")
    finally:
        clone.close()


# --- tags, cherry-picks and rebases (issue 34) -----------------------------------------------------------------

TAGS = "refs/tags/"


def publish_with_tags(backend: Backend, source: Tract, *, force: bool = False) -> None:
    """The remote holds ``source``'s main and tags: pushed (``push --tags``), or a new bundle of them."""
    if not backend.writable:
        refs = {MAIN: ObjectId(source.store.get_ref(MAIN) or ""), **dict(source.store.iter_refs(TAGS))}
        write_bundle(source.store, backend.url, refs)  # type: ignore[arg-type]
        return
    with backend.connect() as remote:
        assert transfer.push_to(source.store, remote, "origin", MAIN, force=True).ok
        assert transfer.push_tags_to(source.store, remote, force=force).ok


def test_tags_and_rewritten_history_travel_and_a_moved_tag_is_refused_unless_forced(
    backend: Backend, open_store_tract: Factory, tmp_path: Path
) -> None:
    source = open_store_tract("source")
    source.system("s")
    source.user("first")
    source.tag("v1")
    source.branch("side")
    source.user("on side")
    source.assistant("side answer")
    source.switch("main")
    source.user("on main")
    source.cherry_pick("side~1")  # the user message of side
    source.tag("v2", message="release two\n\nwith notes")
    source.switch("side")
    source.rebase("main")
    source.switch("main")
    source.merge("side")  # a fast-forward: main holds the rebased commits
    publish_with_tags(backend, source)
    with backend.connect() as remote:
        assert set(remote.list_refs(TAGS)) == {TAGS + "v1", TAGS + "v2"}
    clone = backend.clone(tmp_path / "clone")
    try:
        assert clone.tags() == source.tags()
        for rev in ("v1", "v2", "main"):
            assert compiled(clone, rev) == compiled(source, rev)
        picked = [i.metadata.get("picked_from") for i in clone.log() if i.metadata]
        assert len([p for p in picked if p]) == 2  # the cherry-pick, and the rebased assistant reply
        # A tag moved on the source is refused on fetch unless forced (git's rule), and on push unless forced.
        source.tag("v1", "HEAD", force=True)
        if backend.writable:
            with backend.connect() as remote, pytest.raises(PushRejected) as info:
                transfer.push_tags_to(source.store, remote)
            assert [r.reason for r in info.value.results] == ["already-exists"]
            with backend.connect() as remote:
                assert remote.list_refs(TAGS)[TAGS + "v1"] == clone.tags()[0].commit  # nothing moved
        publish_with_tags(backend, source, force=True)
        before = clone.tags()
        with backend.connect() as remote:
            result = transfer.fetch_from(clone.store, remote, "origin")
        assert result.tags_refused == ("v1",)
        assert clone.tags() == before
        with backend.connect() as remote:
            result = transfer.fetch_from(clone.store, remote, "origin", force_tags=True)
        assert result.tags_refused == ()
        assert TAGS + "v1" in result.updated
        assert clone.tags() == source.tags()
    finally:
        clone.close()
