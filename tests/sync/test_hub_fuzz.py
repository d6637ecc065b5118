"""A fuzz test of the hub (issue 14): random methods, paths, headers, bodies and push streams (valid ones
mutated: cut, bytes flipped, bytes inserted) against the in-process hub and, for a few examples, a real
``tractkv serve`` on 127.0.0.1. Asserted: no 5xx ever, every error answer is JSON ``{"error", "message"}``,
and the hub's store is fsck-clean afterwards. Bounded: max_examples and a per-example deadline.

The viewer's pages (``/ui/``) are not fuzzed here: only the sync API and unknown routes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tractkv import Tract
from tractkv.ids import ObjectId
from tractkv.store import LmdbStore, fsck
from tractkv.sync.auth import TokenTable
from tractkv.sync.frames import encode_stream
from tractkv.sync.negotiate import candidate_ids, raw_objects
from tractkv.sync.remote import RefUpdate
from tractkv.sync.wire import encode_push_head

from .conftest import ADMIN, EDGE, READER, Hub, InProcessHub, tool_session

Factory = Callable[..., Tract]
PATHS = [
    "/v1/info",
    "/v1/refs",
    "/v1/missing",
    "/v1/fetch",
    "/v1/push",
    "/v1/",
    "/",
    "/v2/push",
    "/v1/push/x",
]
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]
AUTH = [None, f"Bearer {ADMIN}", f"Bearer {READER}", f"Bearer {EDGE}", "Bearer nope", "Basic abc", "Bearer"]
REFS = ["refs/heads/main", "refs/heads/agents/edge-7/x", "refs/heads/../x", "refs/tags/v1", "", "HEAD"]
OID = "cd" * 32

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=70),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["wants", "haves", "x"]), inner)
    ),
    max_leaves=12,
)


def _push_body(
    objects: list[tuple[ObjectId, bytes]], tip: ObjectId, ref: str, old: ObjectId | None, force: bool
) -> bytes:
    head = encode_push_head([RefUpdate(ref, old, tip, force=force)], atomic=False)
    return head + b"".join(encode_stream(objects))


@st.composite
def push_streams(draw: st.DrawFn, objects: list[tuple[ObjectId, bytes]], tip: ObjectId) -> bytes:
    """A valid push of (a prefix of) ``objects``, then maybe mutated."""
    count = draw(st.integers(0, len(objects)))
    ref = draw(st.sampled_from(REFS))
    old = draw(st.sampled_from([None, tip, ObjectId(OID)]))
    body = bytearray(_push_body(objects[:count], tip, ref, old, draw(st.booleans())))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["cut", "flip", "insert", "none"]))
        if not body:
            break
        at = draw(st.integers(0, len(body) - 1))
        if kind == "cut":
            del body[at:]
        elif kind == "flip":
            body[at] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            body[at:at] = draw(st.binary(min_size=1, max_size=16))
    return bytes(body)


def requests(objects: list[tuple[ObjectId, bytes]], tip: ObjectId) -> st.SearchStrategy[dict[str, Any]]:
    bodies = st.one_of(
        st.binary(max_size=200),
        json_values.map(lambda v: json.dumps(v).encode()),
        st.lists(st.sampled_from([tip, OID, "zz", ""]), max_size=4).map(
            lambda w: json.dumps({"wants": w, "haves": []}).encode()
        ),
        st.lists(st.sampled_from([bytes.fromhex(tip), bytes.fromhex(OID), b"\x00" * 32]), max_size=4).map(
            b"".join
        ),
        push_streams(objects, tip),
    )
    return st.fixed_dictionaries(
        {
            "method": st.sampled_from(METHODS),
            "path": st.one_of(
                st.sampled_from(PATHS), st.text("abcxyz/%.?=", max_size=12).map(lambda p: "/x" + p)
            ),
            "query": st.sampled_from(["", "?prefix=refs/heads/", "?prefix=refs/", "?prefix=", "?prefix=%00"]),
            "auth": st.sampled_from(AUTH),
            "content_type": st.sampled_from(
                [None, "application/json", "application/x-tractkv-stream", "text/x"]
            ),
            "body": bodies,
        }
    )


def _source(open_store_tract: Factory) -> tuple[list[tuple[ObjectId, bytes]], ObjectId]:
    a = open_store_tract("fuzz-source")
    tool_session(a, turns=2)
    tip = ObjectId(a.head)
    return list(raw_objects(a.store, candidate_ids(a.store, [tip], []))), tip


def _send(client: httpx.Client, request: dict[str, Any]) -> httpx.Response:
    headers = {}
    if request["auth"] is not None:
        headers["Authorization"] = request["auth"]
    if request["content_type"] is not None:
        headers["Content-Type"] = request["content_type"]
    body = request["body"] if request["method"] not in ("GET", "HEAD") or request["body"][:1] == b"{" else b""
    return client.request(
        request["method"], request["path"] + request["query"], headers=headers, content=body or None
    )


def _check(response: httpx.Response, method: str) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:300])
    if response.status_code >= 400 and method != "HEAD" and response.content:
        assert response.headers["content-type"].startswith("application/json"), response.headers
        body = response.json()
        assert isinstance(body.get("error"), str)
        assert isinstance(body.get("message"), str)


@pytest.mark.parametrize("with_tokens", [False, True])
def test_fuzz_in_process_hub(
    in_process_hub: Callable[..., InProcessHub], open_store_tract: Factory, with_tokens: bool
) -> None:
    tokens = TokenTable({ADMIN: ["admin"], READER: ["read"], EDGE: ["write:agents/edge-7/*"]})
    hub = in_process_hub(tokens=tokens if with_tokens else None, max_object=64 * 1024, max_request=256 * 1024)
    objects, tip = _source(open_store_tract)

    @settings(
        max_examples=150,
        deadline=10_000,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(request=requests(objects, tip))
    def check(request: dict[str, Any]) -> None:
        with hub.client() as client:
            _check(_send(client, request), request["method"])

    check()
    report = fsck(hub.store)
    assert report.ok, report.problems


def test_fuzz_real_hub(start_hub: Callable[..., Hub], open_store_tract: Factory, tokens_file: str) -> None:
    """A few examples over a real socket: the connection handling (keep-alive after errors, early answers
    mid-upload) is uvicorn's, which the in-process transport does not exercise."""
    hub = start_hub("--tokens", tokens_file, "--host", "127.0.0.1")
    objects, tip = _source(open_store_tract)

    with httpx.Client(base_url=hub.url, timeout=20) as client:

        @settings(max_examples=30, deadline=20_000, suppress_health_check=list(HealthCheck))
        @given(request=requests(objects, tip))
        def check(request: dict[str, Any]) -> None:
            _check(_send(client, request), request["method"])

        check()
        assert client.get("/v1/info").status_code == 200
    assert "Traceback" not in hub.stop()
    with LmdbStore(str(hub.store), create=False, durable=False) as store:
        report = fsck(store)
    assert report.ok, report.problems
