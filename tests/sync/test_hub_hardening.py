"""Hub hardening (issue 14, items 6 and 7): malformed bodies get JSON 400 on a connection that stays alive,
routing errors are JSON, partial requests time out, connections are capped, push buffers are bounded, and
``/v1/missing`` tells a write-only token nothing about objects outside its namespace.

Real hubs listen on 127.0.0.1 only; every loop here is bounded in count and time.
"""

from __future__ import annotations

import http.client
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tractkv import Tract
from tractkv.ids import ObjectId
from tractkv.store import LmdbStore, fsck
from tractkv.sync.auth import TokenTable
from tractkv.sync.http_client import HttpRemote
from tractkv.sync.negotiate import candidate_ids, raw_objects
from tractkv.sync.remote import RefUpdate
from tractkv.sync.transfer import push_to
from tractkv.sync.wire import parse_fetch_request

from .conftest import ADMIN, EDGE, READER, Hub, InProcessHub, tool_session

Factory = Callable[..., Tract]
OID = "ab" * 32

MALFORMED_FETCH: list[bytes] = [
    b'{"wants": ["zz"]}',
    b'"wants"',
    b'{"wants": {"a": 1}}',
    b'{"wants": "' + OID.encode() + b'"}',
    b'{"wants": [1, 2]}',
    b'{"wants": [null]}',
    b'{"wants": ["' + OID.upper().encode() + b'"]}',
    b'{"wants": [], "haves": "x"}',
    b'{"wants": [], "haves": [{}]}',
    b'{"haves": []}',
    b'{"wants": [], "extra": 1}',
    b"[]",
    b"null",
    b"17",
    b"",
    b"{",
    b"\xff\xfe",
    b"[" * 100_000,
]
MALFORMED_MISSING: list[bytes] = [b'{"wants": ["zz"]}', b"x" * 33, b"\x00"]


def _info_ok(conn: http.client.HTTPConnection) -> None:
    conn.request("GET", "/v1/info")
    response = conn.getresponse()
    assert response.status == 200
    assert json.loads(response.read())["protocol"] == 1


def _raw_conn(url: str) -> http.client.HTTPConnection:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    assert host == "127.0.0.1"
    return http.client.HTTPConnection(host, int(port), timeout=10)


# --- every endpoint validates its body ----------------------------------------------------------------------


@pytest.mark.parametrize("body", MALFORMED_FETCH, ids=range(len(MALFORMED_FETCH)))
def test_parse_fetch_request_refuses_with_a_message(body: bytes) -> None:
    from tractkv.errors import TransferError

    with pytest.raises(TransferError) as info:
        parse_fetch_request(body)
    assert info.value.status == 400
    assert info.value.reason


def test_parse_fetch_request_accepts_the_client_shape() -> None:
    assert parse_fetch_request(json.dumps({"wants": [OID], "haves": []}).encode()) == ([OID], [])
    assert parse_fetch_request(json.dumps({"wants": []}).encode()) == ([], [])
    with pytest.raises(Exception, match="more than 2 ids"):
        parse_fetch_request(json.dumps({"wants": [OID] * 2, "haves": [OID]}).encode(), max_ids=2)


def test_malformed_bodies_get_json_400_and_the_connection_lives(start_hub: Callable[..., Hub]) -> None:
    hub = start_hub()
    conn = _raw_conn(hub.url)
    _info_ok(conn)
    sock = conn.sock
    cases = [("/v1/fetch", b) for b in MALFORMED_FETCH] + [("/v1/missing", b) for b in MALFORMED_MISSING]
    cases.append(("/v1/push", b"\x00\x00\x00\x05abcde"))  # a push head that is not CBOR
    cases.append(("/v1/push", b"\x00\x00"))  # a body that ends inside the head length
    for path, body in cases:
        conn.request("POST", path, body=body)
        response = conn.getresponse()
        answer = json.loads(response.read())
        assert response.status == 400, (path, body[:40], answer)
        assert set(answer) >= {"error", "message"}, answer
        assert answer["message"], answer
        assert not response.will_close, (path, body[:40])
    _info_ok(conn)
    assert conn.sock is sock  # the same kept-alive connection answered every request
    conn.close()
    assert "Traceback" not in hub.stop()


def test_unknown_routes_and_methods_answer_json(in_process_hub: Callable[..., InProcessHub]) -> None:
    hub = in_process_hub()
    with hub.client() as client:
        for method, path, status in [
            ("GET", "/v1/nope", 404),
            ("POST", "/nowhere", 404),
            ("GET", "/v1/push", 405),
            ("DELETE", "/v1/info", 405),
            ("PUT", "/v1/fetch", 405),
        ]:
            response = client.request(method, path)
            assert response.status_code == status, (method, path)
            assert response.headers["content-type"] == "application/json"
            body = response.json()
            assert body["error"] in ("NotFound", "MethodNotAllowed")
            assert path in body["message"]
            if status == 405:
                assert "allow" in response.headers


def test_fetch_validation_in_process(in_process_hub: Callable[..., InProcessHub]) -> None:
    hub = in_process_hub()
    with hub.client() as client:
        for body in MALFORMED_FETCH:
            response = client.post("/v1/fetch", content=body)
            assert response.status_code == 400, body[:40]
            assert response.json()["error"] == "TransferError"


# --- /v1/missing answers only within what the token may read ------------------------------------------------


def test_missing_tells_a_write_only_token_nothing_outside_its_namespace(
    in_process_hub: Callable[..., InProcessHub], open_store_tract: Factory
) -> None:
    tokens = TokenTable({ADMIN: ["admin"], READER: ["read"], EDGE: ["write:agents/edge-7/*"]})
    hub = in_process_hub(tokens=tokens)
    a = open_store_tract("a")
    tool_session(a, turns=3)
    main = ObjectId(a.head)
    with hub.remote(ADMIN) as admin:
        push_to(a.store, admin, "hub", "refs/heads/main")
    secret = candidate_ids(a.store, [main], [])
    assert hub.state()[1] >= len(secret)

    with hub.remote(READER) as reader:
        assert reader.missing(secret) == set()  # a reader may know what the hub holds
    with hub.remote(EDGE) as edge:
        assert edge.missing(secret) == set(secret)  # objects only main reaches: never "present"
        # The edge agent's own branch: what it reaches counts as present for it.
        a.branch("agents/edge-7/run")
        a.user("an edge turn")
        tip = ObjectId(a.head)
        outcome = push_to(a.store, edge, "hub", "refs/heads/agents/edge-7/run")
        assert outcome.ok
        assert edge.missing(secret) == set()  # now reachable from a branch the token may write
        assert edge.missing([tip, ObjectId(OID)]) == {ObjectId(OID)}


def test_a_write_only_push_cannot_probe_for_objects_outside_its_namespace(
    in_process_hub: Callable[..., InProcessHub], open_store_tract: Factory
) -> None:
    """Pointing a branch at, or linking to, an object the push did not send and the token's branches do not
    reach gets the same refusal whether the hub holds that object or not."""
    from tractkv.errors import RejectedObject

    tokens = TokenTable({ADMIN: ["admin"], EDGE: ["write:agents/edge-7/*"]})
    hub = in_process_hub(tokens=tokens)
    a = open_store_tract("a")
    a.user("a secret on main")
    secret = ObjectId(a.head)
    with hub.remote(ADMIN) as admin:
        assert push_to(a.store, admin, "hub", "refs/heads/main").ok
    b = open_store_tract("b")
    b.user("never pushed")
    absent = ObjectId(b.head)

    with hub.remote(EDGE) as edge:
        answers = []
        for target in (secret, absent):
            outcome = edge.push([], [RefUpdate(f"refs/heads/agents/edge-7/{target[:6]}", None, target)])
            (result,) = outcome.results
            answers.append((result.ok, result.reason, result.detail.replace(target, "<id>")))
        assert answers[0] == answers[1] == (False, "missing-objects", "<id> is not here")

        refusals = []
        for t, parent in ((a, secret), (b, absent)):
            t.branch("agents/edge-7/child")
            t.user("a child of a commit the edge token cannot see")
            tip = ObjectId(t.head)
            objects = list(raw_objects(t.store, candidate_ids(t.store, [tip], [parent])))
            assert parent not in {oid for oid, _ in objects}
            with pytest.raises(RejectedObject) as info:
                edge.push(objects, [RefUpdate("refs/heads/agents/edge-7/child", None, tip)])
            refusals.append(str(info.value).replace(parent, "<parent>").replace(tip, "<tip>"))
        assert refusals[0] == refusals[1]
        assert "did not send" in refusals[0]

        # The same branch pushed whole (the secret parent included) is accepted: the token proved it has it.
        a.switch("agents/edge-7/child")
        assert push_to(a.store, edge, "hub", "refs/heads/agents/edge-7/child").ok
    assert hub.state()[0]["refs/heads/main"] == secret
    assert "refs/heads/agents/edge-7/" + secret[:6] not in hub.state()[0]


# --- timeouts and the connection cap (real hubs) ------------------------------------------------------------


def _open_partial(url: str, payload: bytes) -> socket.socket:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(payload)
    s.setblocking(False)
    return s


def _wait_closed(socks: list[socket.socket], deadline: float) -> list[socket.socket]:
    """Read every socket until the hub closes it or ``deadline`` passes; returns those still open."""
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    open_ = set(socks)
    while open_ and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.2):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            try:
                data = s.recv(65536)
            except ConnectionResetError:
                data = b""
            except BlockingIOError:
                continue
            if not data:
                sel.unregister(s)
                open_.discard(s)
    sel.close()
    return list(open_)


PARTIAL_HEAD = b"POST /v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl"
PARTIAL_BODY = b'POST /v1/fetch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n{"wants": ['


def test_partial_requests_time_out_while_others_are_served(
    start_hub: Callable[..., Hub], open_store_tract: Factory
) -> None:
    """300 partial connections (200 stuck in the head, 100 in the body) held open: normal requests and a
    push are still answered, and every partial one is closed within its timeout (plus 8 s of slack: a loaded
    2-core CI machine opens 300 connections slowly)."""
    timeout = 8.0
    hub = start_hub("--header-timeout", str(timeout), "--body-timeout", str(timeout))
    started = time.monotonic()
    partial = [_open_partial(hub.url, PARTIAL_HEAD) for _ in range(200)]
    partial += [_open_partial(hub.url, PARTIAL_BODY) for _ in range(100)]
    try:
        conn = _raw_conn(hub.url)
        for _ in range(5):
            _info_ok(conn)
        conn.close()
        a = open_store_tract("a")
        a.user("still served")
        a.remote_add("origin", hub.url)
        assert a.push().ok
        assert time.monotonic() - started < timeout  # all of that while every partial request was open
        still_open = _wait_closed(partial, started + timeout + 8.0)
        assert still_open == [], f"{len(still_open)} partial connections outlived the timeouts"
        conn = _raw_conn(hub.url)
        _info_ok(conn)
        conn.close()
    finally:
        for s in partial:
            s.close()
    assert "Traceback" not in hub.stop()


def test_an_idle_kept_alive_connection_gets_a_new_head_timer(start_hub: Callable[..., Hub]) -> None:
    hub = start_hub("--header-timeout", "2")
    conn = _raw_conn(hub.url)
    _info_ok(conn)
    time.sleep(0.3)
    _info_ok(conn)  # a head sent within the timer is served on the same connection
    assert conn.sock is not None
    conn.sock.sendall(b"GET /v1/info HTTP/1.1\r\nHost: 1")  # then a head that never ends
    conn.sock.setblocking(False)
    # closed by the head timer (uvicorn's 5 s keep-alive timer stops at the first byte of a new request)
    assert _wait_closed([conn.sock], time.monotonic() + 4.5) == []
    conn.close()


def test_connections_over_the_cap_get_json_503(start_hub: Callable[..., Hub]) -> None:
    hub = start_hub("--max-connections", "20")
    held = [_raw_conn(hub.url) for _ in range(20)]
    try:
        for c in held:
            _info_ok(c)  # accepted and kept alive: 20 open connections
        conn = _raw_conn(hub.url)
        conn.request("GET", "/v1/info")
        response = conn.getresponse()
        body = json.loads(response.read())
        assert response.status == 503
        assert body["error"] == "Overloaded"
        assert response.will_close
        conn.close()
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 5
    while True:  # the hub notices the closed connections
        conn = _raw_conn(hub.url)
        conn.request("GET", "/v1/info")
        response = conn.getresponse()
        response.read()
        conn.close()
        if response.status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert response.status == 200


def test_serve_help_documents_the_limits() -> None:
    from click.testing import CliRunner

    from tractkv.cli import cli
    from tractkv.sync import receive, server

    out = " ".join(CliRunner().invoke(cli, ["serve", "--help"]).output.split())
    for option, default in [
        ("--header-timeout", server.HEADER_TIMEOUT),
        ("--body-timeout", server.BODY_TIMEOUT),
        ("--max-connections", server.MAX_CONNECTIONS),
    ]:
        assert option in out
        assert f"[default: {default};" in out, option
    assert f"at most {server.PUSH_MEMORY // 2**20} MiB in all" in out
    assert f"at most {2 * server.BATCH_BYTES // 2**20} MiB plus one object read" in out
    assert f"{receive.DECODE_FACTOR} times the object size decoded" in out
    for option, default in [("--push-timeout", server.PUSH_TIMEOUT), ("--push-wait", server.PUSH_WAIT)]:
        assert f"{option} FLOAT" in out, option
        assert f"[default: {default};" in out, option
    assert "--push-slots-per-token INTEGER RANGE" in out
    assert "half the push slots" in out


# --- bounded memory per push --------------------------------------------------------------------------------

HUB_SCRIPT = """
import sys
from tractkv.store import LmdbStore
from tractkv.sync.server import bind, create_app, serve
store = LmdbStore(sys.argv[1], durable=False)
app = create_app(store, max_object=int(sys.argv[2]), push_memory=int(sys.argv[3]))
sock = bind("127.0.0.1", 0)
print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
try:
    serve(app, sock)
finally:
    store.close()
"""


class ScriptHub:
    """A hub process started from :data:`HUB_SCRIPT` (options the CLI does not take, e.g. push_memory)."""

    def __init__(self, store: Path, max_object: int, push_memory: int) -> None:
        self.store = store
        cmd = [sys.executable, "-c", HUB_SCRIPT, str(store), str(max_object), str(push_memory)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        assert self.url.startswith("http://127.0.0.1:"), self.stop()

    def rss_anon(self) -> int:
        """The hub process's anonymous resident memory in bytes (file-backed LMDB pages excluded)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError("no RssAnon")

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=10)
        return err or ""


@pytest.fixture
def script_hub(tmp_path: Path) -> Iterator[Callable[..., ScriptHub]]:
    hubs: list[ScriptHub] = []

    def factory(**options: Any) -> ScriptHub:
        hub = ScriptHub(tmp_path / f"script-hub{len(hubs)}", **options)
        hubs.append(hub)
        return hub

    yield factory
    for hub in hubs:
        err = hub.stop()
        assert hub.proc.returncode == 0, err
        assert "Traceback" not in err, err
        with LmdbStore(str(hub.store), durable=False) as st:
            report = fsck(st)
        assert report.ok, report.problems


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads RssAnon from /proc")
def test_twenty_concurrent_pushes_stay_under_the_push_memory_bound(
    script_hub: Callable[..., ScriptHub], open_store_tract: Factory
) -> None:
    """20 pushers, each sending ~6 MiB of objects at once: the hub's anonymous memory grows by less than
    ``push_memory`` plus 32 MiB for the interpreter's own working set (without the bound it grew ~15 MiB
    a pusher)."""
    mib = 1024 * 1024
    push_memory = 24 * mib
    hub = script_hub(max_object=1 * mib, push_memory=push_memory)
    a = open_store_tract("a")
    for i in range(24):
        a.user(f"{i} " + "x" * (256 * 1024))
    tip = ObjectId(a.head)
    store = a.store
    ids = candidate_ids(store, [tip], [])
    payload = list(raw_objects(store, ids))
    assert sum(len(d) for _, d in payload) > 6 * mib

    with HttpRemote(hub.url) as warm:  # the first push: the objects are stored once, the rest are no-ops
        assert warm.push(payload, [RefUpdate("refs/heads/warm", None, tip)]).ok
    time.sleep(0.3)
    baseline = hub.rss_anon()
    peak = baseline
    errors: list[BaseException] = []
    done = threading.Event()

    def pusher(i: int) -> None:
        try:
            with HttpRemote(hub.url, timeout=60) as remote:
                assert remote.push(payload, [RefUpdate(f"refs/heads/p{i}", None, tip)]).ok
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=pusher, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()

    def watch() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, hub.rss_anon())
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    for t in threads:
        t.join(timeout=120)
    done.set()
    watcher.join(timeout=10)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    growth = peak - baseline
    assert growth < push_memory + 32 * mib, f"hub grew by {growth / mib:.1f} MiB"
    with LmdbStore(str(hub.store), create=False, durable=False) as st:
        assert {n for n, _ in st.iter_refs("refs/heads/p")} == {f"refs/heads/p{i}" for i in range(20)}
