"""S3 remotes store one pack per push (issue 18): clone and fetch cost O(pushes) requests, not O(commits).

Against the real SeaweedFS the S3 tests start (``s3_url``). Requests are counted by the remote's own counter
(a botocore ``before-send`` hook: every HTTP request, retries included). The bucket is also read and written
directly with boto3, to check what a push leaves there and to plant what old or hostile writers leave.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cbor2
import pytest

from tractkv import Tract
from tractkv.errors import RejectedObject, RemoteUnavailable, TransferError
from tractkv.ids import ObjectId, hash_bytes
from tractkv.store import LmdbStore, MemoryStore, Store, fsck
from tractkv.sync.negotiate import objects_for
from tractkv.sync.s3 import PACK_SUFFIX, S3Remote, encode_pack
from tractkv.sync.transfer import fetch_from, push_to

from .conftest import BUCKET, Clock
from .test_cli_sync import messages, tkv

pytestmark = pytest.mark.slow
Factory = Callable[..., Tract]
MAIN = "refs/heads/main"


class Bucket:
    """The prefix of an s3:// URL, read and written with plain boto3 (not the transport under test)."""

    def __init__(self, url: str, endpoint: str) -> None:
        import boto3

        self.prefix = url.removeprefix(f"s3://{BUCKET}/") + "/"
        self.s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")

    def keys(self, under: str = "") -> list[str]:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=self.prefix + under)
        return [item["Key"][len(self.prefix) :] for page in pages for item in page.get("Contents", [])]

    def put(self, key: str, body: bytes) -> None:
        self.s3.put_object(Bucket=BUCKET, Key=self.prefix + key, Body=body)

    def get(self, key: str) -> bytes:
        body: bytes = self.s3.get_object(Bucket=BUCKET, Key=self.prefix + key)["Body"].read()
        return body


def history(commits: int, clock: Clock | None = None) -> Tract:
    t = Tract(MemoryStore(), clock=clock or Clock())
    t.system("a session stored in a bucket")
    for i in range(commits - 1):
        (t.user if i % 2 == 0 else t.assistant)(f"message {i}")
    return t


def push(store: Store, url: str) -> S3Remote:
    remote = S3Remote(url)
    try:
        assert push_to(store, remote, "origin", MAIN).ok
    finally:
        remote.close()
    return remote


def fetch_requests(store: Store, url: str) -> int:
    with S3Remote(url) as remote:
        fetch_from(store, remote, "origin")
        return remote.requests


def test_clone_and_fetch_take_the_same_requests_for_20_and_200_commits(s3_url: str) -> None:
    counts = {}
    for n in (20, 200):
        url = f"{s3_url}-{n}"
        source = history(n)
        push(source.store, url)
        local = MemoryStore()
        clone = fetch_requests(local, url)
        assert local.get_ref("refs/remotes/origin/main") == source.head
        source.user("one more")
        push(source.store, url)
        fetch_one = fetch_requests(local, url)
        for i in range(3):
            source.user(f"push {i}")
            push(source.store, url)
        fetch_three = fetch_requests(local, url)
        assert local.get_ref("refs/remotes/origin/main") == source.head
        assert fsck(local).ok
        counts[n] = (clone, fetch_one, fetch_three)
    assert counts[20] == counts[200]
    clone, fetch_one, fetch_three = counts[200]
    # LIST refs/heads/, GET the ref, LIST refs/tags/ (none: no GET), LIST packs/, GET each pack the fetcher
    # lacks the tips of
    assert clone == fetch_one == 5
    assert fetch_three == 4 + 3  # O(pushes since the last fetch)


def test_each_push_writes_one_pack_and_a_small_push_takes_constant_requests(s3_url: str) -> None:
    source = history(200)
    first = push(source.store, s3_url)
    source.user("one more")
    with S3Remote(s3_url) as remote:
        assert push_to(source.store, remote, "origin", MAIN).ok
        one = remote.requests
    # probe (PUT, PUT, PUT, DELETE), LIST refs + GET ref, PUT the pack, GET the ref + PUT it with If-Match
    assert one == 9
    # the first: no ref to GET in list_refs, but over 256 objects, so one LIST of packs/ asks what is missing
    assert first.requests == one
    endpoint = S3Remote(s3_url)._s3.meta.endpoint_url
    bucket = Bucket(s3_url, endpoint)
    packs = bucket.keys("packs/")
    assert len(packs) == 2
    assert all(k.endswith(PACK_SUFFIX) for k in packs)
    assert bucket.keys("objects/") == []
    assert any(k.endswith(f"-{source.head}{PACK_SUFFIX}") for k in packs)  # named after the tip it moved to


class FailingRefWrites:
    """A boto3 client whose conditional writes of refs fail as a network error would (after the packs)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def put_object(self, **kwargs: Any) -> Any:
        if "/refs/heads/" in kwargs["Key"]:
            from botocore.exceptions import EndpointConnectionError

            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:1")
        return self._client.put_object(**kwargs)


def test_a_push_cut_between_its_pack_and_its_ref_leaves_a_consistent_remote(
    s3_url: str, tmp_path: Path
) -> None:
    source = history(30)
    push(source.store, s3_url)
    published = source.head
    source.user("after the crash")
    plain = S3Remote(s3_url)
    with S3Remote(s3_url, client=FailingRefWrites(plain._s3)) as broken, pytest.raises(RemoteUnavailable):
        push_to(source.store, broken, "origin", MAIN)
    bucket = Bucket(s3_url, plain._s3.meta.endpoint_url)
    assert len(bucket.keys("packs/")) == 2  # the pack is there...
    assert bucket.get("refs/heads/main").decode().strip() == published  # ...the ref did not move
    clone = Tract.clone(s3_url, str(tmp_path / "clone"), durable=False)  # readers see the old state whole
    try:
        assert clone.head == published
    finally:
        clone.close()
    with plain:
        assert push_to(source.store, plain, "origin", MAIN).ok  # the retry completes
    local = MemoryStore()
    fetch_from(local, S3Remote(s3_url), "origin")
    assert local.get_ref("refs/remotes/origin/main") == source.head
    assert fsck(local).ok


def plant(bucket: Bucket, pack: bytes, tip: ObjectId, name: str = "0123456789abcdef") -> None:
    """A pack and a branch pointing at ``tip``, written as a (hostile) writer would."""
    bucket.put(f"packs/{name}-{tip}{PACK_SUFFIX}", pack)
    bucket.put("refs/heads/main", f"{tip}\n".encode())


def noncanonical(pairs: list[tuple[ObjectId, bytes]]) -> list[tuple[ObjectId, bytes]]:
    """``pairs`` with the first blob re-encoded with its map keys out of canonical order, under its new hash
    (and everything linking to it re-linked would change ids: so the tip is the blob itself)."""
    for _, data in pairs:
        wire = cbor2.loads(data)
        if wire.get("t") == "blob":
            bad = cbor2.dumps(dict(reversed(list(wire.items()))))
            assert bad != data
            return [(hash_bytes(bad), bad)]
    raise AssertionError("no blob")


@pytest.mark.parametrize("shape", ["bad hash", "truncated", "index lies", "non-canonical"])
def test_a_hostile_pack_is_refused_and_nothing_is_stored(
    shape: str, s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    source = history(5)
    pairs = list(objects_for(source.store, [ObjectId(source.head or "")], []))
    tip = pairs[-1][0]
    if shape == "bad hash":
        pack = encode_pack([(o, d.replace(b"message", b"massage")) for o, d in pairs])
    elif shape == "truncated":
        pack = encode_pack(pairs)[:-20]
    elif shape == "index lies":
        whole = encode_pack(pairs)
        pack = whole[:13] + whole[13 + 32 : 13 + 64] + whole[13 : 13 + 32] + whole[13 + 64 :]
    else:
        pairs = noncanonical(pairs)
        tip = pairs[0][0]
        pack = encode_pack(pairs)
    bucket = Bucket(s3_url, s3_endpoint)
    plant(bucket, pack, tip)
    local = LmdbStore(str(tmp_path / "local"), durable=False)
    try:
        with S3Remote(s3_url) as remote, pytest.raises(TransferError) as info:
            fetch_from(local, remote, "origin")
        if shape == "non-canonical":  # a pack that verifies, holding an object the receiver refuses
            assert isinstance(info.value, RejectedObject)
        else:  # the pack is skipped; the object the branch needs is nowhere else: named, with the pack
            reason = {
                "bad hash": "do not hash",
                "truncated": "cut short",
                "index lies": "index does not list",
            }
            assert reason[shape] in str(info.value)
            assert "in no pack that verifies" in str(info.value)
            assert PACK_SUFFIX in str(info.value)  # names the pack
            assert info.value.oid is not None
        assert list(local.iter_oids()) == []
        assert list(local.iter_refs("refs/")) == []
    finally:
        local.close()
    out = tkv(tmp_path, "clone", s3_url, str(tmp_path / "clone"), ok=False)
    assert out.returncode != 0
    assert out.stderr.startswith("Error: ")
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "clone").exists()


def test_a_prefix_written_by_the_loose_object_layout_still_fetches_and_takes_packs_after(
    s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    """What tractkv wrote before packs (``objects/<id>`` and the ref), planted directly."""
    old = history(12)
    bucket = Bucket(s3_url, s3_endpoint)
    for oid, data in objects_for(old.store, [ObjectId(old.head or "")], []):
        bucket.put(f"objects/{oid}", data)
    bucket.put("refs/heads/main", f"{old.head}\n".encode())
    a = tmp_path / "a"
    tkv(tmp_path, "clone", s3_url, str(a))
    assert messages(a) == [m["content"] for m in old.compile().to_openai()]
    tkv(a, "commit", "new layout from here")
    tkv(a, "push", "-q")
    assert len(bucket.keys("packs/")) == 1  # the new commit went into a pack beside the loose objects
    b = tmp_path / "b"
    tkv(tmp_path, "clone", s3_url, str(b))  # loose history + one pack
    assert messages(b) == messages(a)
    old.user("an old client's view is not changed")
    tkv(b, "commit", "b again")
    tkv(b, "push", "-q")
    tkv(a, "pull")
    assert messages(a) == messages(b)


def test_cli_fetch_pull_and_push_through_packs(s3_url: str, s3_endpoint: str, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    tkv(a, "init")
    tkv(a, "commit", "--role", "system", "fleet agent")
    tkv(a, "remote", "add", "origin", s3_url)
    for i in range(3):
        tkv(a, "commit", f"from a {i}")
        tkv(a, "push", "-q")
    tkv(tmp_path, "clone", s3_url, str(b))
    assert messages(b) == messages(a)
    tkv(b, "commit", "from b")
    tkv(b, "push", "-q")
    tkv(a, "fetch", "-q")
    tkv(a, "pull")
    assert messages(a) == messages(b)
    bucket = Bucket(s3_url, s3_endpoint)
    assert len(bucket.keys("packs/")) == 4
    assert bucket.keys("objects/") == []


def test_remote_prune_deletes_what_no_branch_needs_and_repack_folds_the_rest(
    s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    import json

    from tractkv.sync.negotiate import candidate_ids, raw_objects
    from tractkv.sync.remote import RefUpdate

    a = tmp_path / "a"
    tkv(a, "init")
    tkv(a, "commit", "--role", "system", "pruned agent")
    tkv(a, "remote", "add", "origin", s3_url)
    for i in range(3):
        tkv(a, "commit", f"kept {i}")
        tkv(a, "push", "-q")
    bucket = Bucket(s3_url, s3_endpoint)
    published = bucket.get("refs/heads/main").decode().strip()
    loser = history(4)  # a push refused after its pack was uploaded: an orphan pack
    with S3Remote(s3_url) as remote:
        pairs = list(raw_objects(loser.store, candidate_ids(loser.store, [ObjectId(loser.head or "")], [])))
        outcome = remote.push(pairs, [RefUpdate(MAIN, None, ObjectId(loser.head or ""))])
    assert [r.reason for r in outcome.results] == ["non-fast-forward"]
    assert len(bucket.keys("packs/")) == 4

    young = json.loads(tkv(a, "remote", "prune", "origin", "--json").stdout)
    assert (young["deleted"], young["kept_young"]) == ([], 4)  # all younger than the default hour
    pruned = json.loads(tkv(a, "remote", "prune", "origin", "--min-age-hours", "0", "--json").stdout)
    assert len(pruned["deleted"]) == 1
    assert loser.head in pruned["deleted"][0]  # the orphan, named after the commit it was for
    assert len(bucket.keys("packs/")) == 3
    out = tkv(a, "remote", "prune", "origin", "--min-age-hours", "0", "--repack")
    assert out.stdout.strip() == "origin: deleted 3 of 3 packs, wrote 1 new pack(s)"
    assert len(bucket.keys("packs/")) == 1
    assert bucket.get("refs/heads/main").decode().strip() == published
    b = tmp_path / "b"
    tkv(tmp_path, "clone", s3_url, str(b))
    assert messages(b) == messages(a)
    with S3Remote(s3_url) as remote:
        assert len(list(remote.fetch([ObjectId(published)], []))) == 8  # 4 commits, 4 blobs: from one pack
        assert remote.requests == 2  # LIST packs/, GET the pack

    path_remote = tmp_path / "other"
    tkv(path_remote, "init")
    tkv(a, "remote", "add", "other", str(path_remote))
    refused = tkv(a, "remote", "prune", "other", ok=False)
    assert refused.returncode != 0
    assert refused.stderr.startswith("Error: remote prune is for S3 remotes")


def test_repack_folds_the_loose_object_layout_into_one_pack(
    s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    old = history(6)
    bucket = Bucket(s3_url, s3_endpoint)
    for oid, data in objects_for(old.store, [ObjectId(old.head or "")], []):
        bucket.put(f"objects/{oid}", data)
    bucket.put("refs/heads/main", f"{old.head}\n".encode())
    with S3Remote(s3_url) as remote:
        result = remote.prune(min_age=0, repack=True)
    assert (result.loose_deleted, len(result.repacked)) == (12, 1)
    assert bucket.keys("objects/") == []
    clone = Tract.clone(s3_url, str(tmp_path / "clone"), durable=False)
    try:
        assert clone.compile().to_openai() == old.compile().to_openai()
    finally:
        clone.close()


def test_pushers_of_different_branches_do_not_contend(s3_url: str, tmp_path: Path) -> None:
    import threading

    base = history(3)
    push(base.store, s3_url)
    agents = []
    for i in range(4):
        t = Tract(MemoryStore(), clock=Clock())
        fetch_from(t.store, S3Remote(s3_url), "origin")
        t.branch(f"agent-{i}", "origin/main")
        t.user(f"work of agent {i}")
        agents.append(t)
    barrier = threading.Barrier(len(agents))
    outcomes: list[Any] = [None] * len(agents)

    def run(i: int) -> None:
        with S3Remote(s3_url) as remote:
            remote.list_refs()
            barrier.wait(timeout=60)
            outcomes[i] = push_to(agents[i].store, remote, "origin", f"refs/heads/agent-{i}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(agents))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert all(o is not None and o.ok for o in outcomes)
    clone = Tract.clone(s3_url, str(tmp_path / "clone"), durable=False)
    try:
        for i, t in enumerate(agents):
            assert clone.store.get_ref(f"refs/heads/agent-{i}") == t.head
            assert clone.compile(at=f"agent-{i}").to_openai() == t.compile().to_openai()
    finally:
        clone.close()


def bad_packs(shape: str, source: Tract) -> bytes:
    """A pack of ``source``'s history that does not verify, in one of the shapes a hostile or broken writer
    leaves: garbage bytes, a pack cut short, an object whose bytes do not hash to its id."""
    pairs = list(objects_for(source.store, [ObjectId(source.head or "")], []))
    if shape == "garbage bytes":
        return b"\x00garbage, not a pack\xff" * 40
    if shape == "truncated":
        return encode_pack(pairs)[:-20]
    return encode_pack([(o, d.replace(b"message", b"massage")) for o, d in pairs])


@pytest.mark.parametrize("shape", ["garbage bytes", "truncated", "bad hash"])
def test_a_pack_that_does_not_verify_is_skipped_reported_and_pruned(
    shape: str, s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    """Issue 29 item 5: one garbage ``*.pack`` under ``packs/`` blocked every clone of the remote, and
    ``remote prune`` refused to run while it was there. Readers skip (and report) a pack they cannot verify
    and take what verifies; prune deletes it once past the grace period (a younger one may be a push in
    flight: kept)."""
    source = history(6)
    push(source.store, s3_url)
    bucket = Bucket(s3_url, s3_endpoint)
    (good,) = bucket.keys("packs/")
    # named after the very tip a cloner wants (so the reader picks it), and one named after nothing
    bad = [f"packs/0123456789abcdef-{source.head}{PACK_SUFFIX}", f"packs/junk{PACK_SUFFIX}"]
    for key in bad:
        bucket.put(key, bad_packs(shape, source))

    a = tmp_path / "a"
    cloned = tkv(tmp_path, "clone", s3_url, str(a))
    assert messages(a) == [m["content"] for m in source.compile().to_openai()]
    warnings = [line for line in cloned.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 2
    assert all("skipped a pack that does not verify" in w for w in warnings)
    assert {k for k in bad if any(k in w for w in warnings)} == set(bad)
    local = MemoryStore()
    with S3Remote(s3_url) as remote:
        result = fetch_from(local, remote, "origin")
    assert local.get_ref("refs/remotes/origin/main") == source.head
    assert fsck(local).ok
    assert len(result.skipped) == 2
    assert all(any(k in item for k in bad) for item in result.skipped)

    tkv(a, "commit", "pushed beside the bad packs")  # pushing still works too
    tkv(a, "push", "-q")
    young = json.loads(tkv(a, "remote", "prune", "origin", "--json").stdout)
    assert young["deleted"] == []  # younger than the grace period: could be an upload in flight
    assert len(young["unreadable"]) == 2
    assert set(bad) <= set(bucket.keys("packs/"))
    out = tkv(a, "remote", "prune", "origin", "--min-age-hours", "0")
    assert out.returncode == 0
    assert out.stderr.count("warning: a pack that does not verify") == 2
    assert set(bucket.keys("packs/")).isdisjoint(bad)
    assert good in bucket.keys("packs/")
    b = tmp_path / "b"
    clean = tkv(tmp_path, "clone", s3_url, str(b))
    assert "warning" not in clean.stderr
    assert messages(b) == messages(a)


def test_a_pack_of_a_later_format_is_skipped_by_readers_and_kept_by_prune(
    s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    """A magic that names another pack version is not garbage: a later tractkv wrote it. This one skips it,
    says to upgrade, and prune never deletes it."""
    source = history(4)
    push(source.store, s3_url)
    bucket = Bucket(s3_url, s3_endpoint)
    later = f"packs/later{PACK_SUFFIX}"
    bucket.put(later, b"TKVPACK9\n" + b"\x00" * 64)
    local = MemoryStore()
    with S3Remote(s3_url) as remote:
        result = fetch_from(local, remote, "origin")
        assert local.get_ref("refs/remotes/origin/main") == source.head
        assert len(result.skipped) == 1
        assert "later tractkv format" in result.skipped[0]
        pruned = remote.prune(min_age=0)
    assert later not in pruned.deleted
    assert len(pruned.unreadable) == 1
    assert later in bucket.keys("packs/")


def test_a_needed_object_only_in_a_bad_pack_refuses_prune_and_names_it(s3_url: str, s3_endpoint: str) -> None:
    """When the branch needs what only a pack that does not verify holds, nothing can be kept safely: prune
    deletes nothing and says which object and which pack."""
    source = history(4)
    push(source.store, s3_url)
    bucket = Bucket(s3_url, s3_endpoint)
    (good,) = bucket.keys("packs/")
    source.user("only in the bad pack")
    pairs = list(objects_for(source.store, [ObjectId(source.head or "")], []))
    bucket.put(f"packs/feedfacefeedface-{source.head}{PACK_SUFFIX}", encode_pack(pairs)[:-20])
    bucket.put("refs/heads/main", f"{source.head}\n".encode())
    before = sorted(bucket.keys("packs/"))
    with S3Remote(s3_url) as remote, pytest.raises(TransferError) as info:
        remote.prune(min_age=0)
    assert info.value.oid is not None
    assert "cut short" in str(info.value)
    assert "feedfacefeedface" in str(info.value)
    assert sorted(bucket.keys("packs/")) == before
    assert good in before


def test_a_pack_holding_an_object_over_the_readers_limit_is_not_taken_for_hostile(
    s3_url: str, s3_endpoint: str
) -> None:
    """An object over the limit a fetch reads with is what a raised limit (--max-object-bytes) takes, not a
    sign of a hostile pack: the fetch says ObjectTooLarge with that hint (nothing skipped, no ref moved), the
    same fetch with the limit raised takes it, and prune keeps the pack."""
    from tractkv.errors import ObjectTooLarge

    source = history(2)
    source.user("x" * 4096)
    push(source.store, s3_url)
    (pack,) = Bucket(s3_url, s3_endpoint).keys("packs/")
    local = Tract(MemoryStore())
    local.remote_add("origin", s3_url)
    with pytest.raises(ObjectTooLarge, match="max-object-bytes"):
        local.fetch("origin", max_object=1024)
    assert local.store.get_ref("refs/remotes/origin/main") is None
    assert local.fetch("origin").skipped == ()
    assert local.store.get_ref("refs/remotes/origin/main") == source.head
    with S3Remote(s3_url) as remote:
        remote.max_receive = 1024
        with pytest.raises(ObjectTooLarge):
            remote.prune(min_age=0)
    assert pack in Bucket(s3_url, s3_endpoint).keys("packs/")
