"""The HTTP hub: what only a hub does (auth, limits, malformed requests, a killed hub, racing clients), through
a real `tractkv serve` on 127.0.0.1 (a subprocess per test) or, where no process is needed, the hub's app in
process. Force, lease, prune, diverged refusal, atomic
multi-ref and an interrupted push are in the Remote contract (test_remote_contract.py).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tractkv import Tract
from tractkv.errors import (
    AuthError,
    ObjectTooLarge,
    PushRejected,
    RejectedObject,
    RemoteUnavailable,
    RequestTooLarge,
)
from tractkv.ids import ObjectId
from tractkv.store import LmdbStore, fsck
from tractkv.sync.http_client import HttpRemote
from tractkv.sync.negotiate import objects_for
from tractkv.sync.remote import RefUpdate
from tractkv.sync.transfer import push_to
from tractkv.sync.wire import encode_push_head

from .conftest import ADMIN, EDGE, READER, Hub, InProcessHub, snapshot, tool_session

Factory = Callable[..., Tract]
MAIN = "refs/heads/main"


def hub_state(hub: Hub) -> tuple[dict[str, str], int]:
    """The hub's refs and object count, read from its store while it runs (LMDB allows that)."""
    with LmdbStore(str(hub.store), create=False, durable=False) as st:
        return dict(st.iter_refs("refs/")), sum(1 for _ in st.iter_oids())


def test_push_clone_pull_through_a_hub(
    open_store_tract: Factory, start_hub: Callable[..., Hub], tmp_path: Path
) -> None:
    hub = start_hub()
    a = open_store_tract("a")
    tool_session(a)
    a.remote_add("origin", hub.url)
    assert a.push().ok
    b = Tract.clone(hub.url, str(tmp_path / "b"), durable=False)
    try:
        assert snapshot(b) == snapshot(a)
        b.user("continued on another machine")
        b.push()
    finally:
        b.close()
    assert a.pull().kind == "fast-forward"
    assert a.compile().to_openai()[-1]["content"] == "continued on another machine"


def test_incremental_push_of_one_commit_is_two_requests_and_small(
    open_store_tract: Factory, start_hub: Callable[..., Hub]
) -> None:
    hub = start_hub()
    a = open_store_tract("a")
    tool_session(a)
    with HttpRemote(hub.url) as remote:
        assert remote.info()["protocol"] == 1
        assert remote.info()["auth"] is False
        push_to(a.store, remote, "origin", MAIN)
        a.user("one more short question?")
        remote.requests = remote.bytes_up = 0
        outcome = push_to(a.store, remote, "origin", MAIN)
        assert outcome.ok
        assert outcome.objects_sent == 2
        assert remote.requests == 2  # refs, then push (objects and the ref update in one request)
        assert remote.bytes_up <= 2 * outcome.bytes_sent + 400  # small heads; the benchmark reports the ratio


def test_auth_no_token_wrong_scope_and_a_scoped_namespace(
    open_store_tract: Factory, start_hub: Callable[..., Hub], tokens_file: str
) -> None:
    hub = start_hub("--tokens", tokens_file)
    a = open_store_tract("a")
    a.system("s")
    a.user("hello")
    with HttpRemote(hub.url) as anonymous:
        with pytest.raises(AuthError) as info:
            anonymous.list_refs()
        assert info.value.status == 401
    with HttpRemote(hub.url, token="wrong-token-0123456789") as wrong:
        with pytest.raises(AuthError) as info:
            wrong.list_refs()
        assert info.value.status == 401
    with HttpRemote(hub.url, token=READER) as reader:
        with pytest.raises(AuthError) as info:
            push_to(a.store, reader, "origin", MAIN)
        assert info.value.status == 403
    with HttpRemote(hub.url, token=EDGE) as edge:
        with pytest.raises(AuthError) as info:
            push_to(a.store, edge, "origin", MAIN)  # outside its namespace: refused before any object
        assert info.value.status == 403
        assert hub_state(hub) == ({}, 0)
        a.branch("agents/edge-7/main")
        assert push_to(a.store, edge, "origin", "refs/heads/agents/edge-7/main").ok
    with HttpRemote(hub.url, token=ADMIN) as admin:
        assert push_to(a.store, admin, "origin", MAIN).ok
        assert set(admin.list_refs()) == {MAIN, "refs/heads/agents/edge-7/main"}
    with HttpRemote(hub.url, token=EDGE) as edge:
        assert set(edge.list_refs()) == {"refs/heads/agents/edge-7/main"}  # sees only what it may write
        with pytest.raises(AuthError):
            list(edge.fetch([ObjectId(a.head or "")], []))
    os.environ["TKV_TEST_TOKEN"] = READER
    try:
        b = open_store_tract("b")
        b.remote_add("origin", hub.url, token_env="TKV_TEST_TOKEN")
        assert b.pull().kind == "fast-forward"
        assert snapshot(b)[0] == snapshot(a)[0]
    finally:
        del os.environ["TKV_TEST_TOKEN"]


def test_a_hub_refuses_non_loopback_without_tokens(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "tractkv", "--store", str(tmp_path / "h"), "serve", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 1
    assert "without --tokens" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_oversize_object_and_oversize_request_get_413_and_store_nothing(
    open_store_tract: Factory, start_hub: Callable[..., Hub]
) -> None:
    hub = start_hub("--max-object-bytes", "20000", "--max-request-bytes", "100000")
    a = open_store_tract("a")
    a.user("x" * 30_000)
    with HttpRemote(hub.url) as remote:
        with pytest.raises(ObjectTooLarge) as info:
            push_to(a.store, remote, "origin", MAIN)
        assert info.value.oid is not None
    b = open_store_tract("b")
    for i in range(20):
        b.user(f"{i} " + "y" * 10_000)
    with HttpRemote(hub.url) as remote, pytest.raises(RequestTooLarge):
        push_to(b.store, remote, "origin", MAIN)
    refs, _ = hub_state(hub)
    assert refs == {}


def test_corrupted_object_unknown_kind_and_garbage_are_rejected_naming_the_object(
    open_store_tract: Factory, in_process_hub: Callable[..., InProcessHub]
) -> None:
    hub = in_process_hub()
    a = open_store_tract("a")
    a.system("s")
    a.user("to be corrupted")
    assert a.head is not None
    pairs = list(objects_for(a.store, [a.head], []))
    bad_oid, bad_data = pairs[1]
    corrupted = [*pairs[:1], (bad_oid, bad_data.replace(b"s", b"S", 1)), *pairs[2:]]
    with hub.remote() as remote:
        with pytest.raises(RejectedObject) as info:
            remote.push(corrupted, [RefUpdate(MAIN, None, a.head)])
        assert info.value.oid == bad_oid
    refs, count = hub.state()
    assert refs == {}
    assert count == 1  # the object before the bad one was verified and kept
    with hub.client() as client:
        response = client.post("/v1/push", content=b"\x00\x00\x00\x02{}")
        assert response.status_code == 400
        head = encode_push_head([RefUpdate(MAIN, None, a.head)], False)
        response = client.post("/v1/push", content=head + b"garbage, not a stream")
        assert response.status_code == 400
        assert "bad magic" in response.json()["message"]
        response = client.post("/v1/missing", content=b"short")
        assert response.status_code == 400


def test_missing_parent_is_refused(
    open_store_tract: Factory, in_process_hub: Callable[..., InProcessHub]
) -> None:
    hub = in_process_hub()
    a = open_store_tract("a")
    a.system("s")
    a.user("child")
    assert a.head is not None
    pairs = list(objects_for(a.store, [a.head], []))
    parent = a.get_commit("HEAD~1").commit_id
    with hub.remote() as remote, pytest.raises(RejectedObject) as info:
        remote.push([p for p in pairs if p[0] != parent], [RefUpdate(MAIN, None, a.head)])
    assert info.value.oid == a.head
    assert parent in str(info.value)
    assert hub.state()[0] == {}


def big_session(t: Tract, commits: int) -> None:
    with t.batch():
        t.system("a long session")
        for i in range(commits):
            t.user(f"message number {i}")


def _wait_for_a_stored_object(store: Path, timeout: float = 60.0) -> None:
    """Until the hub's store holds an object (its first batch committed): a fixed sleep was too short on a
    loaded machine. Bounded: fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with LmdbStore(str(store), durable=False) as st:
            if next(iter(st.iter_oids()), None) is not None:
                return
        time.sleep(0.02)
    raise AssertionError(f"the hub stored nothing in {timeout} s")


def test_hub_killed_mid_push_then_restarted_is_consistent_and_a_retry_completes(
    open_store_tract: Factory, start_hub: Callable[..., Hub], tmp_path: Path
) -> None:
    hub = start_hub()
    a = open_store_tract("a")
    big_session(a, 3000)
    assert a.head is not None
    pairs = list(objects_for(a.store, [a.head], []))
    killed = threading.Event()

    def kill_midway() -> Iterator[tuple[ObjectId, bytes]]:
        for i, pair in enumerate(pairs):
            if i == 5000:
                _wait_for_a_stored_object(hub.store)  # the hub has committed a batch: kill it mid-push
                hub.proc.send_signal(signal.SIGKILL)
                hub.proc.wait(timeout=10)
                killed.set()
            yield pair

    with HttpRemote(hub.url) as remote, pytest.raises(RemoteUnavailable):
        remote.push(kill_midway(), [RefUpdate(MAIN, None, a.head)])
    assert killed.is_set()
    with LmdbStore(str(hub.store), durable=False) as st:
        assert fsck(st).ok
        assert st.get_ref(MAIN) is None
        kept = sum(1 for _ in st.iter_oids())
    assert kept > 0
    again = start_hub(store=hub.store)
    with HttpRemote(again.url) as remote:
        outcome = push_to(a.store, remote, "origin", MAIN)
    assert outcome.ok
    assert outcome.objects_sent == len(pairs) - kept


def test_concurrent_pushes_to_one_branch_exactly_one_wins(
    open_store_tract: Factory, start_hub: Callable[..., Hub]
) -> None:
    hub = start_hub()
    base = open_store_tract("base")
    base.system("shared")
    base.remote_add("origin", hub.url)
    base.push()
    agents = []
    for name in ("x", "y"):
        t = open_store_tract(name)
        t.remote_add("origin", hub.url)
        t.pull()
        for i in range(50):
            t.user(f"{name} says {i}")
        agents.append(t)
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def push(t: Tract, name: str) -> None:
        with HttpRemote(hub.url) as remote:
            remote.list_refs()
            barrier.wait(timeout=30)
            try:
                outcomes[name] = push_to(t.store, remote, "origin", MAIN)
            except PushRejected as exc:
                outcomes[name] = exc

    threads = [threading.Thread(target=push, args=(t, n)) for t, n in zip(agents, "xy", strict=True)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    rejected = [v for v in outcomes.values() if isinstance(v, PushRejected)]
    assert len(outcomes) == 2
    assert len(rejected) == 1
    assert rejected[0].results[0].reason == "non-fast-forward"
    loser = agents[0] if isinstance(outcomes["x"], PushRejected) else agents[1]
    assert loser.pull().kind == "merge"
    assert loser.push().ok
    final = hub_state(hub)[0][MAIN]
    assert final == loser.head
    texts = [m["content"] for m in loser.compile().to_openai()]
    assert "x says 49" in texts
    assert "y says 49" in texts


def _raw_post(hub: Hub, head: bytes, timeout: float) -> tuple[int, dict[str, object], float]:
    """Send a raw POST /v1/push head (and what body bytes ``head`` holds); (status, JSON body, seconds)."""
    import json
    import socket
    import time

    host, port = hub.url.removeprefix("http://").rsplit(":", 1)
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(head)
        data = b""
        while chunk := s.recv(65536):  # the hub closes the connection after its answer
            data += chunk
    elapsed = time.monotonic() - started
    status_line, _, rest = data.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in headers.lower(), data
    assert b"connection: close" in headers.lower(), data
    return int(status_line.split()[1]), json.loads(body), elapsed


def test_an_oversize_declared_push_is_refused_at_once_and_a_stalled_body_gets_json(
    start_hub: Callable[..., Hub], tokens_file: str
) -> None:
    hub = start_hub("--tokens", tokens_file, "--body-timeout", "2")
    auth = f"Authorization: Bearer {ADMIN}\r\n".encode()
    head = b"POST /v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth
    status, body, elapsed = _raw_post(hub, head + b"Content-Length: 99999999999\r\n\r\n", timeout=10)
    assert (status, body["error"], body["oid"]) == (413, "RequestTooLarge", None), body
    assert "99999999999" in str(body["message"])
    assert elapsed < 1.5  # answered before any body byte, not after the 2 s body timeout
    # a declared length within the limit whose body stalls: a JSON 400 once the body timeout passes
    status, body, elapsed = _raw_post(hub, head + b"Content-Length: 100\r\n\r\n\0\0", timeout=10)
    assert (status, body["error"], body["oid"]) == (400, "BodyTimeout", None), body
    assert "2 s" in str(body["message"])
    assert 1.5 < elapsed < 8
    assert "Traceback" not in hub.stop()
