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
        _missing(client, absent)  # warm the hub's caches
        times: dict[ObjectId, list[float]] = {secret: [], absent: []}
        for _ in range(5):  # interleaved, bounded
            for oid in (secret, absent):
                elapsed, answer = _missing(client, oid)
                assert answer == [oid]  # absent for this token either way
                times[oid].append(elapsed)
    held_elsewhere, nowhere = statistics.median(times[secret]), statistics.median(times[absent])
    assert 0.5 < held_elsewhere / nowhere < 2, (held_elsewhere, nowhere)
