"""Denial of service on the HTTP hub (issue 29, items 13-15), each attack in its own shape against a real
`tractkv serve` process on 127.0.0.1, with small configured deadlines so each test takes seconds:

* 13: ten pushes that send their head, then drip a byte at a time, must not hold the push slots: each push
  has a total deadline (not per read) and waiting for a slot ends in a 503.
* 14: a 6 MiB array of empty maps (one byte each, ~160 bytes each decoded) pushed by a write-only token is
  refused from an estimate of its decoded size, before it is decoded: the hub's memory and time stay small.
* 15: sixteen unauthenticated ``POST /ui/login`` bodies dripped a byte at a time against a 16-connection cap
  are cut by the body's total deadline, so an admin is served again within seconds.

Attackers are raw sockets driven from one thread; every loop is bounded in count and time.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tractkv import Tract, codec
from tractkv.errors import DecodeError, ObjectTooLarge, RemoteUnavailable
from tractkv.ids import ObjectId, hash_bytes
from tractkv.store import LmdbStore
from tractkv.sync.frames import MAGIC
from tractkv.sync.http_client import HttpRemote
from tractkv.sync.remote import RefUpdate
from tractkv.sync.transfer import push_to
from tractkv.sync.wire import STREAM_TYPE, encode_push_head

from .conftest import ADMIN, EDGE, Hub

Factory = Callable[..., Tract]
OID = ObjectId("ab" * 32)
MIB = 1024 * 1024


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    assert host == "127.0.0.1"
    return socket.create_connection((host, int(port)), timeout=5)


class Drip:
    """Raw connections that each sent ``first`` and then get one byte every ``interval`` seconds (from one
    thread, for at most ``limit`` seconds), until the hub answers or closes them; ``answers`` collects what
    each got back."""

    def __init__(self, socks: list[socket.socket], interval: float, limit: float) -> None:
        self.socks = socks
        self.answers: dict[int, bytes] = {}
        self.closed_at: dict[int, float] = {}
        self._interval = interval
        self._until = time.monotonic() + limit
        self._stop = threading.Event()
        for s in socks:
            s.setblocking(False)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and time.monotonic() < self._until:
            for i, s in enumerate(self.socks):
                if i in self.closed_at:
                    continue
                try:
                    data = s.recv(65536)
                except BlockingIOError:
                    data = None
                except OSError:
                    data = b""
                if data:
                    self.answers[i] = self.answers.get(i, b"") + data
                    continue
                if data == b"":
                    self.closed_at[i] = time.monotonic()
                    continue
                try:
                    s.send(b"\x00")
                except OSError:
                    self.closed_at[i] = time.monotonic()
            if len(self.closed_at) == len(self.socks):
                return
            self._stop.wait(self._interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for s in self.socks:
            s.close()

    def statuses(self) -> list[tuple[int, str]]:
        """(status, error name) of each answer received."""
        out = []
        for raw in self.answers.values():
            head, _, body = raw.partition(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            out.append((status, json.loads(body)["error"] if body.startswith(b"{") else ""))
        return out


# --- 13: dripping pushes ------------------------------------------------------------------------------------


def _dripping_push(url: str, i: int) -> socket.socket:
    head = encode_push_head([RefUpdate(f"refs/heads/drip{i}", None, OID)], False)
    s = _connect(url)
    s.sendall(
        b"POST /v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + f"Content-Type: {STREAM_TYPE}\r\nContent-Length: 10000000\r\n\r\n".encode()
        + head
        + MAGIC
        + b"O\x00\x00\x10\x20"  # an object frame of 4,096 bytes after its id, which will never be whole
    )
    return s


def test_dripping_pushes_are_cut_by_the_push_deadline_and_others_push(
    start_hub: Callable[..., Hub], open_store_tract: Factory
) -> None:
    """Ten pushes send a head, then a byte every 0.3 s (a per-read timer of 30 s never fires): they hold
    every slot until their 2 s push deadline, waiters get a 503 after 1 s, and a real push, retried on 503,
    succeeds within 6 s while they still drip. Before, the drips held the slots for as long as they liked."""
    hub = start_hub("--push-timeout", "2", "--push-wait", "1")
    drip = Drip([_dripping_push(hub.url, i) for i in range(10)], interval=0.3, limit=15)
    try:
        time.sleep(0.5)  # every dripping push has its slot, or waits for one
        a = open_store_tract("a")
        a.user("a push that must get through")
        a.remote_add("origin", hub.url)
        started = time.monotonic()
        refused = 0
        busy: list[str] = []
        for _ in range(60):  # bounded: ~12 s at most
            try:
                assert a.push().ok
                break
            except RemoteUnavailable as exc:
                busy.append(str(exc))
                refused += 1
                time.sleep(0.2)
        took = time.monotonic() - started
        assert all("503" in m for m in busy), busy
        assert all("retry later" in m for m in busy), busy
        assert a.push().ok  # nothing left to send: up to date
        assert took < 6.0, f"a push waited {took:.1f} s behind the dripping pushes ({refused} answered 503)"
        deadline = time.monotonic() + 6
        while len(drip.answers) < 10 and time.monotonic() < deadline:
            time.sleep(0.1)
        statuses = drip.statuses()
        assert len(statuses) == 10, statuses
        assert set(statuses) <= {(400, "BodyTimeout"), (503, "Overloaded")}, statuses
        assert (400, "BodyTimeout") in statuses
    finally:
        drip.stop()
    with LmdbStore(str(hub.store), create=False, durable=False) as st:
        assert not [n for n, _ in st.iter_refs("refs/heads/drip")]


def _dripping_token_push(url: str, token: str, ref: str) -> socket.socket:
    head = encode_push_head([RefUpdate(ref, None, OID)], False)
    s = _connect(url)
    s.sendall(
        b"POST /v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + f"Authorization: Bearer {token}\r\nContent-Type: {STREAM_TYPE}\r\n".encode()
        + b"Content-Length: 10000000\r\n\r\n"
        + head
        + MAGIC
        + b"O\x00\x00\x10\x20"
    )
    return s


def test_one_token_cannot_hold_every_push_slot(
    start_hub: Callable[..., Hub], tokens_file: str, tmp_path: Path
) -> None:
    """Six pushes from one write token drip a byte every 0.3 s under a long (60 s) push deadline, against
    the default 3 push slots: the token holds at most its share (one of three), its pushes beyond that get
    503 after the 1 s slot wait, and another token's push gets a slot at once, with no 503. Before, three
    of the drips held every slot until their push deadline and every other push was answered 503."""
    hub = start_hub("--tokens", tokens_file, "--push-timeout", "60", "--push-wait", "1")
    socks = [_dripping_token_push(hub.url, EDGE, f"refs/heads/agents/edge-7/drip{i}") for i in range(6)]
    drip = Drip(socks, interval=0.3, limit=15)
    try:
        time.sleep(0.5)  # every dripping push has its slot, or waits for one
        with Tract.open(str(tmp_path / "a"), durable=False) as a:
            a.user("a push that must get through")
            started = time.monotonic()
            busy: list[str] = []
            with HttpRemote(hub.url, token=ADMIN, timeout=10) as admin:
                for _ in range(15):  # bounded: ~4 s at most
                    try:
                        assert push_to(a.store, admin, "hub", "refs/heads/main").ok
                        break
                    except RemoteUnavailable as exc:
                        busy.append(str(exc))
                        time.sleep(0.2)
            took = time.monotonic() - started
        assert not busy, f"another token's push was refused while one token dripped: {busy}"
        assert took < 1.0, f"another token's push waited {took:.1f} s"
        deadline = time.monotonic() + 3
        while len(drip.answers) < 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        statuses = drip.statuses()
        assert statuses == [(503, "Overloaded")] * 5, statuses  # one still drips, in its slot
        assert b"its share" in b"".join(drip.answers.values())
    finally:
        drip.stop()


def test_push_slots_are_shared_per_party(tmp_path: Path) -> None:
    """The accounting itself: a party takes at most its share (half the slots by default, at least one; an
    option over the slots is clamped), every party together at most the slots, and a slot given back is
    free again (the per-party table forgets a party at zero)."""
    from tractkv.sync.auth import TokenTable
    from tractkv.sync.server import Hub as HubApp

    with LmdbStore(str(tmp_path / "s"), durable=False) as st:
        hub = HubApp(st)
        assert (hub.push_slots, hub.push_slots_per_token) == (3, 1)
        assert hub._take_slot("a") is None
        assert hub._take_slot("a") == "party"
        assert hub._take_slot("b") is None
        assert hub._take_slot("c") is None
        assert hub._take_slot("d") == "hub"
        hub._give_slot("a")
        assert hub._take_slot("a") is None
        for party in "abc":
            hub._give_slot(party)
        assert hub._slots_held == 0
        assert hub._slots_by_party == {}
        wide = HubApp(st, push_memory=10 * hub.push_share)
        assert (wide.push_slots, wide.push_slots_per_token) == (10, 5)
        assert HubApp(st, push_slots_per_token=9).push_slots_per_token == 3
    # each token is its own party (a digest, never the token); an open hub counts client addresses
    table = TokenTable({ADMIN: ["admin"], EDGE: ["admin"]})
    a, b = table.authenticate(f"Bearer {ADMIN}"), table.authenticate(f"Bearer {EDGE}")
    assert a == b
    assert a.who != b.who
    assert len(a.who) == 16
    assert ADMIN not in a.who


# --- 14: decoded size ---------------------------------------------------------------------------------------


def _empty_maps_blob(size: int) -> bytes:
    """A blob whose data is an array of ``size`` - 21 empty maps: ``size`` bytes, canonical."""
    n = size - 21
    data = b"\xa3\x61t\x64blob\x61v\x01\x64data\x9a" + n.to_bytes(4, "big") + b"\xa0" * n
    assert len(data) == size
    return data


def _rss_anon(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon")


def test_decoded_size_estimate_refuses_the_dense_object_at_once() -> None:
    data = _empty_maps_blob(6 * MIB)
    started = time.monotonic()
    with pytest.raises(ObjectTooLarge, match="more than"):
        codec.decoded_size(data, 49 * MIB)
    assert time.monotonic() - started < 1.0
    # an indefinite-length array (never canonical) would be decoded item by item past any estimate: refused
    with pytest.raises(DecodeError, match="canonical"):
        codec.decoded_size(b"\x9f" + b"\xa0" * 100_000 + b"\xff", 1 << 40)
    # text and media, the large objects appends write, are estimated at 2-3x their size: a hub's limit
    # (server.DECODE_FACTOR times its max_object, plus 1 MiB) admits the largest it admits at all
    for value in ("x" * MIB, b"y" * MIB):
        encoded = codec.dumps({"t": "blob", "v": 1, "data": value})
        assert codec.decoded_size(encoded, 1 << 40) <= 3 * len(encoded) + 4096


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads RssAnon from /proc")
def test_a_dense_object_from_a_write_only_token_is_refused_before_it_is_decoded(
    start_hub: Callable[..., Hub], tokens_file: str
) -> None:
    """The issue's attack: a write-only token pushes a 6 MiB array of empty maps (before: +976 MiB hub RSS
    and 28.6 s). Refused 413 ObjectTooLarge within 5 s, the hub's anonymous memory growing by less than
    64 MiB (the bytes themselves pass through a few buffers), and the hub still serves."""
    hub = start_hub("--tokens", tokens_file)
    data = _empty_maps_blob(6 * MIB)
    oid = hash_bytes(data)
    time.sleep(0.3)
    baseline = _rss_anon(hub.proc.pid)
    peak = baseline
    done = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _rss_anon(hub.proc.pid))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    try:
        with HttpRemote(hub.url, token=EDGE, timeout=20) as edge, pytest.raises(ObjectTooLarge) as info:
            edge.push([(oid, data)], [RefUpdate("refs/heads/agents/edge-7/x", None, oid)])
        took = time.monotonic() - started
    finally:
        done.set()
        watcher.join(10)
    assert info.value.oid == oid
    assert "decoding it would take more than" in str(info.value)
    assert took < 5.0, f"the refusal took {took:.1f} s"
    growth = peak - baseline
    assert growth < 64 * MIB, f"hub grew by {growth / MIB:.0f} MiB"
    with HttpRemote(hub.url, token=ADMIN) as admin:
        assert admin.list_refs() == {}
        assert admin.missing([oid]) == {oid}


@pytest.mark.parametrize("via", ["fetch", "clone"])
def test_a_dense_object_in_a_bundle_is_refused_before_it_is_decoded(tmp_path: Path, via: str) -> None:
    """The same object read by a client: a fetch or clone of a hostile bundle (the receiver every pulling
    transport uses) estimates before it decodes, within a second, and stores nothing."""
    from tractkv.sync.bundle import _LEN, BUNDLE_MAGIC
    from tractkv.sync.frames import encode_stream

    data = _empty_maps_blob(6 * MIB)
    oid = hash_bytes(data)
    header = codec.dumps({"refs": {"refs/heads/main": oid}})
    bundle = tmp_path / "hostile.tkvbundle"
    bundle.write_bytes(
        BUNDLE_MAGIC + _LEN.pack(len(header)) + header + b"".join(encode_stream([(oid, data)]))
    )
    t = Tract.open(str(tmp_path / "here"))
    t.remote_add("b", str(bundle))
    read = (
        (lambda: t.fetch("b")) if via == "fetch" else (lambda: Tract.clone(str(bundle), str(tmp_path / "c")))
    )
    started = time.monotonic()
    with pytest.raises(ObjectTooLarge, match="decoding it would take more than"):
        read()
    assert time.monotonic() - started < 2.0
    assert oid not in t.store
    assert not [name for name, _ in t.store.iter_refs("refs/remotes/")]


# --- 15: unauthenticated connection exhaustion --------------------------------------------------------------


def _dripping_login(url: str) -> socket.socket:
    s = _connect(url)
    s.sendall(
        b"POST /ui/login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 4000\r\n\r\ntoken="
    )
    return s


def _admin_status(url: str) -> int:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("GET", "/v1/refs", headers={"Authorization": f"Bearer {ADMIN}"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_dripping_login_bodies_cannot_hold_the_connection_cap(
    start_hub: Callable[..., Hub], tokens_file: str
) -> None:
    """16 connections drip a 4,000-byte login body one byte per 0.5 s against a 16-connection cap: an admin
    gets 503 while they hold it, and 200 again within the 2 s body deadline plus slack, because a body's
    deadline is a total, not a per-read timer (before, every drip renewed it and the admin got 503 for as
    long as the attacker liked)."""
    hub = start_hub("--tokens", tokens_file, "--max-connections", "16", "--body-timeout", "2")
    drip = Drip([_dripping_login(hub.url) for _ in range(16)], interval=0.5, limit=15)
    try:
        time.sleep(0.3)
        assert _admin_status(hub.url) == 503  # the cap is held
        started = time.monotonic()
        status = 503
        for _ in range(50):  # bounded: ~10 s at most
            status = _admin_status(hub.url)
            if status == 200:
                break
            time.sleep(0.2)
        took = time.monotonic() - started
        assert status == 200, "the dripping login bodies held the connection cap"
        assert took < 5.0, f"an admin waited {took:.1f} s"
        deadline = time.monotonic() + 3
        while len(drip.answers) < 16 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert set(drip.statuses()) == {(400, "BodyTimeout")}, drip.statuses()
        assert len(drip.answers) == 16
    finally:
        drip.stop()


def test_an_oversized_login_form_is_refused_before_it_is_read(
    start_hub: Callable[..., Hub], tokens_file: str
) -> None:
    hub = start_hub("--tokens", tokens_file)
    s = _connect(hub.url)
    try:
        s.sendall(b"POST /ui/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000000\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 413"), answer[:100]
        assert b"connection: close" in answer.lower()
    finally:
        s.close()
