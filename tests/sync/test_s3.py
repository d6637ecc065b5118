"""s3:// remotes against a real S3-compatible server (SeaweedFS on 127.0.0.1: the ``s3_url`` fixture in conftest)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tractkv import Tract
from tractkv.errors import ConditionalWritesUnsupported, PushRejected
from tractkv.sync.s3 import S3Remote
from tractkv.sync.transfer import push_to

from .conftest import snapshot, tool_session

pytestmark = pytest.mark.slow
Factory = Callable[..., Tract]


def test_push_clone_pull_through_s3(open_store_tract: Factory, s3_url: str, tmp_path: Path) -> None:
    a = open_store_tract("a")
    tool_session(a)
    a.remote_add("origin", s3_url)  # probes conditional writes
    assert a.push().ok
    b = Tract.clone(s3_url, str(tmp_path / "b"), durable=False)
    try:
        assert snapshot(b) == snapshot(a)
        b.user("from b")
        assert b.push().ok
    finally:
        b.close()
    a.user("from a")
    with pytest.raises(PushRejected) as info:
        a.push()
    assert info.value.results[0].reason == "non-fast-forward"
    assert a.pull().kind == "merge"
    assert a.push().ok
    c = open_store_tract("c")
    c.remote_add("origin", s3_url)
    c.pull()
    assert snapshot(c) == snapshot(a)


def test_two_pushers_race_for_one_ref_and_exactly_one_wins(open_store_tract: Factory, s3_url: str) -> None:
    base = open_store_tract("base")
    base.system("shared")
    base.remote_add("origin", s3_url)
    base.push()
    agents = []
    for name in "xyzw":
        t = open_store_tract(name)
        t.remote_add("origin", s3_url)
        t.pull()
        for i in range(5):
            t.user(f"{name} {i}")
        agents.append(t)
    barrier = threading.Barrier(len(agents))
    outcomes: list[Any] = [None] * len(agents)

    def push(i: int) -> None:
        with S3Remote(s3_url) as remote:
            refs = remote.list_refs()
            assert refs  # read before the race: every pusher expects the same old value
            barrier.wait(timeout=60)
            try:
                outcomes[i] = push_to(agents[i].store, remote, "origin", "refs/heads/main")
            except PushRejected as exc:
                outcomes[i] = exc

    threads = [threading.Thread(target=push, args=(i,)) for i in range(len(agents))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    winners = [o for o in outcomes if o is not None and not isinstance(o, PushRejected)]
    losers = [o for o in outcomes if isinstance(o, PushRejected)]
    assert len(winners) == 1
    assert len(losers) == len(agents) - 1
    assert {o.results[0].reason for o in losers} == {"non-fast-forward"}
    with S3Remote(s3_url) as remote:
        final = remote.list_refs()["refs/heads/main"]
    assert final in {t.head for t in agents}


class IgnoresConditions:
    """An S3 client that accepts every conditional write (as some S3-compatible servers do)."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def put_object(self, Bucket: str, Key: str, Body: bytes, **conditions: Any) -> dict[str, Any]:  # noqa: N803
        self.objects[Key] = Body
        return {"ETag": '"x"'}

    def delete_object(self, Bucket: str, Key: str) -> None:  # noqa: N803
        self.objects.pop(Key, None)


def test_probe_refuses_an_endpoint_that_ignores_conditional_writes() -> None:
    fake = IgnoresConditions()
    with pytest.raises(ConditionalWritesUnsupported):
        S3Remote("s3://bucket/p", client=fake).probe()
    assert fake.objects == {}  # the probe cleans up


def test_probe_accepts_the_real_server(s3_url: str) -> None:
    remote = S3Remote(s3_url)
    try:
        remote.probe()
    finally:
        remote.close()


def test_cli_push_and_clone_through_s3(s3_url: str, tmp_path: Path) -> None:
    from .test_cli_sync import messages, tkv

    a = tmp_path / "a"
    tkv(a, "init")
    tkv(a, "commit", "--role", "system", "fleet agent")
    tkv(a, "commit", "stored in a bucket")
    tkv(a, "remote", "add", "origin", s3_url)
    tkv(a, "push", "-q")
    tkv(tmp_path, "clone", s3_url, str(tmp_path / "b"))
    assert messages(tmp_path / "b") == messages(a) == ["fleet agent", "stored in a bucket"]
