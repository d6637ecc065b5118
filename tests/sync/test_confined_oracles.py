"""A write-only token learns nothing about objects outside its reach (issue 29 item 16), through a real hub.

Pushing a guessed blob answered ``new_objects`` 0 when the hub held it on ``main`` and 1 when it did not, and
``/v1/missing`` answered in 373 ms for an id held elsewhere against 5.4 ms for an absent one (20k commits):
both confirmed a secret. Answers to a confined token are now computed from what its branches reach only: an
object outside that reach counts as absent whether the hub holds it or not, and finding that out costs the
same walk of the token's own reach either way.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tractkv import Tract
from tractkv.ids import ObjectId
from tractkv.model import Blob, encode_with_id
from tractkv.sync.frames import encode_stream
from tractkv.sync.http_client import HttpRemote
from tractkv.sync.remote import RefUpdate
from tractkv.sync.transfer import push_to
from tractkv.sync.wire import IDS_TYPE, STREAM_TYPE, encode_push_head, ids_from_bytes, ids_to_bytes

from .conftest import ADMIN, EDGE, Hub

SECRET = {"type": "dialogue", "role": "user", "text": "the launch code is 0000"}


def raw_push(
    url: str, token: str, pairs: list[tuple[ObjectId, bytes]], update: RefUpdate
) -> dict[str, object]:
    body = encode_push_head([update], False) + b"".join(encode_stream(pairs))
    response = httpx.post(
        f"{url}/v1/push",
        content=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": STREAM_TYPE},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    data: dict[str, object] = response.json()
    return data


def test_pushing_a_guessed_blob_tells_nothing(
    start_hub: Callable[..., Hub], tokens_file: str, tmp_path: Path
) -> None:
    hub = start_hub("--tokens", tokens_file)
    with Tract.open(str(tmp_path / "a"), durable=False) as a:
        a.user(SECRET["text"])
        with HttpRemote(hub.url, token=ADMIN) as admin:
            assert push_to(a.store, admin, "hub", "refs/heads/main").ok
    held = encode_with_id(Blob(data=SECRET))
    absent = encode_with_id(Blob(data={**SECRET, "text": "the launch code is 0001"}))
    with HttpRemote(hub.url, token=ADMIN) as admin:
        assert admin.missing([held[0], absent[0]]) == {absent[0]}  # the hub holds the first one, on main

    answers = []
    for pair in (held, absent):
        update = RefUpdate(f"refs/heads/agents/edge-7/probe-{pair[0][:6]}", None, pair[0])
        reply = raw_push(hub.url, EDGE, [pair], update)
        answers.append((reply["objects"], reply["new_objects"], reply["bytes"] == len(pair[1])))
    assert answers[0] == answers[1] == (1, 1, True)

    # Within its own reach a confined token is told what the hub already has, as before.
    with Tract.open(str(tmp_path / "a"), durable=False) as a:
        a.branch("agents/edge-7/own")
        a.user("an edge turn")
        with HttpRemote(hub.url, token=EDGE) as edge:
            assert push_to(a.store, edge, "hub", "refs/heads/agents/edge-7/own").ok
        own = encode_with_id(a.store.get(a.store.get_commit(ObjectId(a.head)).content))  # type: ignore[arg-type]
    reply = raw_push(hub.url, EDGE, [own], RefUpdate("refs/heads/agents/edge-7/again", None, own[0]))
    assert reply["new_objects"] == 0


COMMITS = 20_000  # the scale: the edge token's own branch


def _missing(client: httpx.Client, oid: ObjectId) -> tuple[float, list[ObjectId]]:
    began = time.perf_counter()
    response = client.post("/v1/missing", content=ids_to_bytes([oid]), headers={"Content-Type": IDS_TYPE})
    elapsed = time.perf_counter() - began
    assert response.status_code == 200, response.text
    return elapsed, ids_from_bytes(response.content)


def test_missing_takes_as_long_for_an_id_held_elsewhere_as_for_an_absent_one(
    start_hub: Callable[..., Hub], tokens_file: str, tmp_path: Path
) -> None:
    hub = start_hub("--tokens", tokens_file)
    with Tract.open(str(tmp_path / "a"), durable=False) as a:
        a.user(SECRET["text"])
        secret = ObjectId(a.head)
        with HttpRemote(hub.url, token=ADMIN) as admin:
            assert push_to(a.store, admin, "hub", "refs/heads/main").ok
    with Tract.open(str(tmp_path / "e"), durable=False) as e:
        with e.batch():
            for i in range(COMMITS):
                e.user(f"turn {i}")
        e.branch("agents/edge-7/long")
        with HttpRemote(hub.url, token=EDGE) as edge:
            assert push_to(e.store, edge, "hub", "refs/heads/agents/edge-7/long").ok
    absent = ObjectId("ab" * 32)

    headers = {"Authorization": f"Bearer {EDGE}"}
    with httpx.Client(base_url=hub.url, headers=headers, timeout=60) as client:
        cold, _ = _missing(client, absent)  # warm the hub's caches: the token's reach is walked once here
        times: dict[ObjectId, list[float]] = {secret: [], absent: []}
        for _ in range(15):  # interleaved, bounded
            for oid in (secret, absent):
                elapsed, answer = _missing(client, oid)
                assert answer == [oid]  # absent for this token either way
                times[oid].append(elapsed)
    held_elsewhere, nowhere = statistics.median(times[secret]), statistics.median(times[absent])
    # The same within noise (a cached reach answers in ~1 ms, so 2 ms of slack; before: 373 ms vs 5.4 ms)
    assert held_elsewhere < 2 * nowhere + 0.002, (held_elsewhere, nowhere)
    assert nowhere < 2 * held_elsewhere + 0.002, (held_elsewhere, nowhere)
    # An unchanged namespace is not walked again (before: every request walked all 20k commits)
    assert max(held_elsewhere, nowhere) < cold / 3, (cold, held_elsewhere, nowhere)


# --- the reach is cached per scope, keyed by its branch tips -------------------------------------------------


def _walks(hub: Hub) -> list[int]:
    """The objects each walk of a confined reach visited, from the hub's debug log."""
    return [
        int(line.split("walked ")[1].split()[0]) for line in hub.stderr().splitlines() if "reach:" in line
    ]


def _wait_walks(hub: Hub, n: int) -> list[int]:
    deadline = time.monotonic() + 5
    while len(walks := _walks(hub)) < n and time.monotonic() < deadline:
        time.sleep(0.02)  # the log line is written before the answer, read from the pipe after it
    return walks


def test_a_confined_reach_is_walked_once_then_extended_from_the_new_tips(
    start_hub: Callable[..., Hub], tokens_file: str, tmp_path: Path
) -> None:
    """A second /v1/missing on an unchanged namespace walks nothing (before: every request walked the whole
    reach, ~0.15-0.4 s at 20k commits, and so did every push), and a push that moves the token's branch
    forward walks only what it added, stopping at the reach already known."""
    hub = start_hub("--tokens", tokens_file, "--log-level", "debug")
    ref = "refs/heads/agents/edge-7/long"
    headers = {"Authorization": f"Bearer {EDGE}"}
    with Tract.open(str(tmp_path / "e"), durable=False) as e:
        with e.batch():
            for i in range(3000):
                e.user(f"turn {i}")
        e.branch("agents/edge-7/long")
        with HttpRemote(hub.url, token=EDGE) as edge:
            assert push_to(e.store, edge, "hub", ref).ok
        with httpx.Client(base_url=hub.url, headers=headers, timeout=60) as client:
            _missing(client, ObjectId("ab" * 32))
            walks = _wait_walks(hub, 1)
            assert walks, "no walk of the reach was logged"
            assert sum(walks) >= 6000  # every commit and its text, once
            for _ in range(5):
                assert _missing(client, ObjectId("ab" * 32))[1] == [ObjectId("ab" * 32)]
            time.sleep(0.2)
            assert _walks(hub) == walks, "an unchanged namespace was walked again"
        e.user("one more turn")
        with HttpRemote(hub.url, token=EDGE) as edge:
            assert push_to(e.store, edge, "hub", ref).ok
            assert edge.missing([ObjectId(e.head)]) == set()
        more = _wait_walks(hub, len(walks) + 1)[len(walks) :]
        assert more, "the moved branch was not walked"
        assert sum(more) <= 5, f"moving the branch one commit forward walked {more} objects"


def test_a_confined_reach_shrinks_when_its_branch_moves_back_or_goes(
    start_hub: Callable[..., Hub], tokens_file: str, tmp_path: Path
) -> None:
    """The cache never answers from a reach the branches no longer have: after an admin resets the token's
    branch one commit back, the dropped commit and its text are missing for the token (and pushing that
    text counts it new); after the branch is deleted, nothing of it is held for the token."""
    hub = start_hub("--tokens", tokens_file)
    ref = "refs/heads/agents/edge-7/x"
    with Tract.open(str(tmp_path / "e"), durable=False) as e:
        e.user("kept")
        c1 = ObjectId(e.head)
        e.branch("agents/edge-7/x")
        e.user("dropped")
        c2 = ObjectId(e.head)
        text = encode_with_id(e.store.get(e.store.get_commit(c2).content))  # type: ignore[arg-type]
        with HttpRemote(hub.url, token=EDGE) as edge:
            assert push_to(e.store, edge, "hub", ref).ok
    with HttpRemote(hub.url, token=EDGE) as edge, HttpRemote(hub.url, token=ADMIN) as admin:
        assert edge.missing([c1, c2, text[0]]) == set()  # the cache now holds the reach of c2
        assert edge.missing([c1, c2, text[0]]) == set()
        assert admin.push([], [RefUpdate(ref, c2, c1, force=True)]).results[0].ok
        assert edge.missing([c1, c2, text[0]]) == {c2, text[0]}
        assert admin.push([], [RefUpdate(ref, c1, None)]).results[0].ok
        assert edge.missing([c1, c2, text[0]]) == {c1, c2, text[0]}
    reply = raw_push(hub.url, EDGE, [text], RefUpdate("refs/heads/agents/edge-7/probe", None, text[0]))
    assert reply["new_objects"] == 1


def test_the_reach_cache_is_bounded(tmp_path: Path) -> None:
    """At most ``entries`` scopes and ``ids`` ids in all, least recently used dropped first; a reach larger
    than the whole bound is answered but not kept."""
    from tractkv.sync.auth import Grant
    from tractkv.sync.server import _ReachCache

    with Tract.open(str(tmp_path / "s"), durable=False) as t:
        t.user("root")
        for name in ("a", "b", "c"):
            t.branch(f"agents/{name}", switch=True)
            t.user(f"on {name}")
        grants = [Grant(scopes=(f"write:agents/{name}",)) for name in ("a", "b", "c")]
        cache = _ReachCache(entries=2, ids=1000)
        reaches = [cache.reach(t.store, g) for g in grants]
        assert [len(r) for r in reaches] == [4, 6, 8]  # each branch's commits and texts
        assert list(cache._entries) == [grants[1].scopes, grants[2].scopes]
        assert cache._ids == 14
        assert cache.reach(t.store, grants[2]) is reaches[2]  # kept: the same set, no walk
        small = _ReachCache(entries=8, ids=7)
        assert small.reach(t.store, grants[2]) == reaches[2]
        assert small.reach(t.store, grants[0]) == reaches[0]
        assert list(small._entries) == [grants[0].scopes]  # 8 ids are over the bound: not kept
        assert small._ids == 4
