"""Push / pull / fetch / clone between stores on this machine (path remotes) and through bundle files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tractkv import Tract
from tractkv.errors import (
    BranchNotFound,
    InvalidInput,
    NotFastForward,
    PushRejected,
    RemoteExists,
    RemoteNotFound,
    RemoteUnavailable,
    SyncError,
    UnsupportedURL,
)
from tractkv.ids import ObjectId
from tractkv.store import LmdbStore, fsck
from tractkv.store.walk import iter_reachable
from tractkv.sync import remotes, transfer
from tractkv.sync.bundle import write_bundle

from .conftest import snapshot, tool_session

Factory = Callable[..., Tract]


def hub_at(tmp_path: Path) -> str:
    path = tmp_path / "hub"
    LmdbStore(str(path), durable=False).close()
    return str(path)


def test_push_then_clone_reproduces_messages_tools_and_tool_usages(
    open_store_tract: Factory, tmp_path: Path
) -> None:
    a = open_store_tract("a")
    tool_session(a)
    assert len(a.tool_usages()) == 2
    a.remote_add("origin", hub_at(tmp_path))
    outcome = a.push()
    assert outcome.ok
    assert outcome.objects_sent > 0
    b = Tract.clone(str(tmp_path / "hub"), str(tmp_path / "b"), durable=False)
    try:
        assert snapshot(b) == snapshot(a)
        assert b.current_branch == "main"
        assert b.remotes() == {"origin": str(tmp_path / "hub")}
        assert [x.name for x in b.list_branches()] == ["main", "origin/main"]
        assert b.status().upstream == "origin/main"
        assert (b.status().ahead, b.status().behind) == (0, 0)
    finally:
        b.close()
    with LmdbStore(str(tmp_path / "b"), durable=False) as st:
        assert fsck(st).ok


def test_second_push_sends_only_the_new_commit(open_store_tract: Factory, tmp_path: Path) -> None:
    a = open_store_tract("a")
    tool_session(a)
    a.remote_add("origin", hub_at(tmp_path))
    a.push()
    a.user("one more question")
    outcome = a.push()
    assert outcome.objects_sent == 2  # the commit and its content blob; tools and history are there
    assert a.push().objects_sent == 0  # up to date


def test_diverged_push_is_refused_before_sending_then_pull_merges_and_push_succeeds(
    open_store_tract: Factory, tmp_path: Path
) -> None:
    a = open_store_tract("a")
    a.system("shared start")
    a.remote_add("origin", hub_at(tmp_path))
    a.push()
    b = open_store_tract("b")
    b.remote_add("origin", str(tmp_path / "hub"))
    b.pull()
    b.user("b's question")
    b.push()
    a.user("a's question")
    with pytest.raises(PushRejected) as info:
        a.push()
    assert [r.reason for r in info.value.results] == ["non-fast-forward"]
    with pytest.raises(NotFastForward):
        a.pull(ff_only=True)
    before = a.head
    assert a.head == before  # ff_only moved nothing
    merged = a.pull()
    assert merged.kind == "merge"
    texts = [m["content"] for m in a.compile().to_openai()]
    assert "a's question" in texts
    assert "b's question" in texts
    assert a.push().ok
    assert b.pull().kind == "fast-forward"
    assert snapshot(b) == snapshot(a)


def test_status_reports_ahead_and_behind(open_store_tract: Factory, tmp_path: Path) -> None:
    a = open_store_tract("a")
    a.system("s")
    a.remote_add("origin", hub_at(tmp_path))
    a.push()
    a.user("1")
    a.user("2")
    status = a.status()
    assert (status.upstream, status.ahead, status.behind) == ("origin/main", 2, 0)
    b = open_store_tract("b")
    b.remote_add("origin", str(tmp_path / "hub"))
    b.pull()
    b.user("x")
    b.push()
    a.fetch()
    status = a.status()
    assert (status.ahead, status.behind) == (2, 1)


def test_force_push_and_lease(open_store_tract: Factory, tmp_path: Path) -> None:
    a = open_store_tract("a")
    a.system("s")
    a.remote_add("origin", hub_at(tmp_path))
    a.push()
    first = a.head
    assert first is not None
    a.user("kept?")
    a.push()
    a.reset(first, mode="hard")
    a.user("rewritten")
    with pytest.raises(PushRejected):
        a.push()
    with pytest.raises(PushRejected) as info:  # lease on a value the remote no longer has
        a.push(force=True, expect=first)
    assert info.value.results[0].reason == "stale"
    assert a.push(force=True, expect="origin/main").ok
    with LmdbStore(str(tmp_path / "hub"), durable=False) as hub:
        assert hub.get_ref("refs/heads/main") == a.head


def test_fetch_tracks_and_prunes_remote_branches(open_store_tract: Factory, tmp_path: Path) -> None:
    a = open_store_tract("a")
    a.system("s")
    a.branch("feature")
    a.user("f")
    a.remote_add("origin", hub_at(tmp_path))
    a.push(branch="feature")
    a.push(branch="main")
    b = open_store_tract("b")
    b.remote_add("origin", str(tmp_path / "hub"))
    result = b.fetch()
    assert set(result.updated) == {"refs/remotes/origin/main", "refs/remotes/origin/feature"}
    assert result.new_objects == result.objects > 0
    assert [x.name for x in b.list_branches() if x.is_remote] == ["origin/feature", "origin/main"]
    with LmdbStore(str(tmp_path / "hub"), durable=False) as hub:
        batch = hub.new_batch()
        batch.set_ref("refs/heads/feature", None)
        hub.apply(batch)
    assert b.fetch().updated == {}  # kept without prune, as git keeps them
    b.pull(branch="main")
    assert [x.name for x in b.list_branches() if x.is_remote] == ["origin/feature", "origin/main"]
    result = b.fetch(prune=True)
    assert result.updated == {"refs/remotes/origin/feature": (a.store.get_ref("refs/heads/feature"), None)}
    assert result.objects == 0
    b.remote_remove("origin")
    assert b.remotes() == {}
    assert [x for x in b.list_branches() if x.is_remote] == []


def test_pull_into_an_empty_store_fast_forwards(open_store_tract: Factory, tmp_path: Path) -> None:
    a = open_store_tract("a")
    tool_session(a, turns=1)
    a.remote_add("origin", hub_at(tmp_path))
    a.push()
    b = open_store_tract("b")
    b.remote_add("origin", str(tmp_path / "hub"))
    assert b.pull().kind == "fast-forward"
    assert snapshot(b) == snapshot(a)
    with pytest.raises(BranchNotFound):
        b.pull(branch="nope")


def test_remote_config_errors(open_store_tract: Factory, tmp_path: Path) -> None:
    a = open_store_tract("a")
    a.remote_add("origin", str(tmp_path / "x"))
    with pytest.raises(RemoteExists):
        a.remote_add("origin", str(tmp_path / "y"))
    with pytest.raises(InvalidInput):
        a.remote_add("bad name", str(tmp_path / "y"))
    with pytest.raises(UnsupportedURL):
        a.remote_add("ftp", "ftp://example/x")
    with pytest.raises(UnsupportedURL) as info:
        a.remote_add("creds", "http://user:s3cret-token@127.0.0.1:9/")
    assert "s3cret" not in str(info.value)
    # Issue 29 item 10: a URL that names no host (or a bad port) was accepted until the first fetch.
    for bad in ("http://", "https://", "http:///x", "http://:8080", "https://host:99999", "http://h:port"):
        with pytest.raises(UnsupportedURL, match=r"host|port"):
            a.remote_add("nohost", bad)
    with pytest.raises(UnsupportedURL):
        a.remote_add("nul", "a\x00b")
    assert set(a.remotes()) == {"origin"}
    with pytest.raises(RemoteNotFound):
        a.fetch("nope")
    with pytest.raises(RemoteNotFound):
        a.remote_remove("nope")
    a.system("s")
    with pytest.raises(RemoteUnavailable):  # no store at that path: a clear error, nothing created
        a.push()
    assert not (tmp_path / "x").exists()
    assert a.remotes() == {"origin": str(tmp_path / "x")}


def test_url_kinds(tmp_path: Path) -> None:
    assert remotes.url_kind("http://127.0.0.1:1/") == "http"
    assert remotes.url_kind("s3://bucket/prefix") == "s3"
    assert remotes.url_kind(str(tmp_path / "store")) == "path"
    assert remotes.url_kind(f"file://{tmp_path}/store") == "path"
    assert remotes.url_kind(str(tmp_path / "s.tkvbundle")) == "bundle"
    with pytest.raises(UnsupportedURL):
        remotes.url_kind("file://otherhost/x")
    with pytest.raises(UnsupportedURL):
        remotes.url_kind("")


def test_clone_into_a_non_empty_directory_or_from_nowhere_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "file").write_text("x")
    with pytest.raises(InvalidInput):
        Tract.clone(str(tmp_path / "nowhere"), str(tmp_path / "full"))
    with pytest.raises(RemoteUnavailable):
        Tract.clone(str(tmp_path / "nowhere"), str(tmp_path / "new"))
    assert not (tmp_path / "new").exists()


def test_bundle_round_trip_and_clone_from_bundle(open_store_tract: Factory, tmp_path: Path) -> None:
    a = open_store_tract("a")
    tool_session(a)
    a.branch("side")
    a.user("on side")
    path = str(tmp_path / "session.tkvbundle")
    refs = dict(a.store.iter_refs("refs/heads/"))
    count = write_bundle(a.store, path, refs)  # type: ignore[arg-type]
    assert count == len(set(iter_reachable(a.store, [ObjectId(v) for v in refs.values()])))
    b = Tract.clone(path, str(tmp_path / "b"), branch="side", durable=False)
    try:
        assert b.current_branch == "side"
        assert snapshot(b) == snapshot(a)
        b.user("new here")
        with pytest.raises(SyncError, match="read-only"):
            b.push()
    finally:
        b.close()


def test_corrupt_bundle_is_rejected_naming_the_object(open_store_tract: Factory, tmp_path: Path) -> None:
    a = open_store_tract("a")
    a.system("a system prompt worth corrupting")
    path = tmp_path / "s.tkvbundle"
    write_bundle(a.store, str(path), {"refs/heads/main": a.head})  # type: ignore[dict-item]
    data = bytearray(path.read_bytes())
    at = data.index(b"a system prompt")
    data[at] ^= 0x20
    path.write_bytes(bytes(data))
    b = open_store_tract("b")
    b.remote_add("usb", str(path))
    from tractkv.errors import RejectedObject

    with pytest.raises(RejectedObject) as info:
        b.fetch("usb")
    assert info.value.oid is not None
    assert info.value.oid in str(info.value)
    assert b.list_branches() == [b.list_branches()[0]]
    assert not any(x.is_remote for x in b.list_branches())


def test_a_remote_that_omits_objects_moves_no_tracking_ref(open_store_tract: Factory, tmp_path: Path) -> None:
    from tractkv.errors import TransferError
    from tractkv.sync.path import PathRemote

    a = open_store_tract("a")
    a.system("s")
    a.user("u")

    class Forgetful(PathRemote):
        def fetch(self, wants, haves, known=None):  # type: ignore[no-untyped-def]
            return iter(list(super().fetch(wants, haves, known))[:-1])  # drops the tip commit

    b = open_store_tract("b")
    with Forgetful(str(tmp_path / "a"), store=a.store) as remote, pytest.raises(TransferError) as info:
        transfer.fetch_from(b.store, remote, "origin")
    assert info.value.oid == a.head
    assert list(b.store.iter_refs("refs/remotes/")) == []


def test_a_relative_path_remote_is_recorded_absolute(
    open_store_tract: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29 item 10: a relative path remote resolved against whatever directory a later fetch ran in.
    ``remote add`` records it absolute, resolved against the directory it was given in."""
    a = open_store_tract("a")
    a.system("s")
    a.remote_add("origin", hub_at(tmp_path))
    a.push()
    b = open_store_tract("b")
    monkeypatch.chdir(tmp_path)
    b.remote_add("origin", "hub")
    b.remote_add("bundled", "./x.tkvbundle")
    assert b.remotes() == {"origin": str(tmp_path / "hub"), "bundled": str(tmp_path / "x.tkvbundle")}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert set(b.fetch().updated) == {"refs/remotes/origin/main"}
