"""The JSON side of the app `tractkv serve` runs, in process: `/ui/commit/<rev>/request.json` takes any
revision and answers errors as JSON, routing errors and unexpected exceptions on JSON routes are JSON (logged,
never leaked), and `/healthz` reads nothing."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tractkv.store import LmdbStore
from tractkv.sync.auth import TokenTable
from tractkv.sync.server import INTERNAL_ERROR
from tractkv.view.app import create_app

from .conftest import READER

MAIN = "refs/heads/main"
WRITER = "writer-token-0123456789abcdef"
ERROR_KEYS = {"error", "message", "oid"}


@pytest.fixture
def store(demo: tuple[Path, dict[str, str]]) -> Iterator[LmdbStore]:
    with LmdbStore(demo[0]) as st:
        yield st


@pytest.fixture
def client(store: LmdbStore) -> Iterator[TestClient]:
    app, _ = create_app(store)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        yield c


def _json_error(response: Any, status: int, name: str | None = None) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json", response.text
    body = response.json()
    assert set(body) == ERROR_KEYS, body
    assert isinstance(body["message"], str)
    assert body["message"]
    if name is not None:
        assert body["error"] == name, body
    assert "Traceback" not in response.text
    return dict(body)


def test_request_json_takes_a_branch_a_ref_head_or_any_revision(client: TestClient, store: LmdbStore) -> None:
    tip = store.get_ref(MAIN)
    assert tip is not None
    parent = store.get_commit(tip).parents[0]  # type: ignore[arg-type]

    def params(rev: str, fmt: str = "openai") -> object:
        response = client.get(f"/ui/commit/{rev}/request.json", params={"fmt": fmt})
        assert response.status_code == 200, (rev, response.text)
        assert response.headers["content-type"] == "application/json"
        return response.json()

    for fmt in ("openai", "anthropic"):
        at_tip = params(tip, fmt)
        for rev in ("main", MAIN, "HEAD", tip[:10]):
            assert params(rev, fmt) == at_tip, rev
        assert params("main~1", fmt) == params(parent, fmt)
        assert params("main^", fmt) == params(parent, fmt)
    explore = store.get_ref("refs/heads/explore")
    assert explore is not None
    assert params("explore") == params("refs/heads/explore") == params(explore)
    assert params("explore") != params("main")
    # the commit page takes the same revisions (a ref with slashes too)
    for rev in ("main", MAIN, "main~1"):
        assert client.get(f"/ui/commit/{rev}").status_code == 200, rev


def test_request_json_errors_are_json(store: LmdbStore) -> None:
    tokens = TokenTable({READER: ["read"], WRITER: ["write:agents/*"]})
    app, _ = create_app(store, tokens=tokens)
    reader = {"Authorization": f"Bearer {READER}"}
    with TestClient(app, base_url="http://127.0.0.1") as c:
        url = "/ui/commit/main/request.json"
        unauthenticated = c.get(url)
        _json_error(unauthenticated, 401, "AuthError")
        assert unauthenticated.headers["www-authenticate"] == "Bearer"
        _json_error(c.get(url, headers={"Authorization": f"Bearer {WRITER}"}), 403, "AuthError")
        _json_error(c.get(url, headers={"Authorization": "Bearer nope-0123456789"}), 401, "AuthError")
        body = _json_error(c.get("/ui/commit/nosuch/request.json", headers=reader), 404, "UnknownRevision")
        assert "nosuch" in str(body["message"])
        _json_error(c.get("/ui/commit/main~99/request.json", headers=reader), 404, "UnknownRevision")
        body = _json_error(c.get(url + "?fmt=gemini", headers=reader), 400, "InvalidInput")
        assert "openai" in str(body["message"])
        wrong = c.post(url, headers=reader)
        _json_error(wrong, 405, "MethodNotAllowed")
        assert set(wrong.headers["allow"].split(", ")) == {"GET", "HEAD"}
        _json_error(c.get("/ui/nosuch.json", headers=reader), 404, "NotFound")
        # the sign-in cookie works for the JSON route as for pages
        c.cookies.set("tractkv_token", READER)
        assert c.get(url).status_code == 200
        # pages keep their HTML error pages
        page = c.get("/ui/commit/nosuch")
        assert page.status_code == 404
        assert page.headers["content-type"].startswith("text/html")


def test_api_routing_errors_are_json_in_serve_and_view(store: LmdbStore) -> None:
    for sync in (True, False):
        app, _ = create_app(store, sync=sync)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            _json_error(c.get("/v1/nope"), 404, "NotFound")
            _json_error(c.get("/v2/refs"), 404, "NotFound")
            _json_error(c.post("/healthz"), 405, "MethodNotAllowed")
            if sync:
                _json_error(c.put("/v1/fetch"), 405, "MethodNotAllowed")
                _json_error(c.post("/v1/fetch", content=b"{"), 400, "TransferError")
            else:
                _json_error(c.get("/v1/refs"), 404, "NotFound")  # `view` serves no sync API


def test_an_unexpected_exception_is_a_json_500_logged_with_its_traceback(
    store: LmdbStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("private detail 8231")

    monkeypatch.setattr("tractkv.view.pages.request_params", broken)
    monkeypatch.setattr("tractkv.sync.server.iter_candidates", broken)
    app, _ = create_app(store)
    # raise_server_exceptions stays on: the exception must not escape the app at all
    with TestClient(app, base_url="http://127.0.0.1") as c, caplog.at_level(logging.ERROR, "tractkv"):
        for response in (
            c.get("/ui/commit/main/request.json"),
            c.post("/v1/fetch", content=json.dumps({"wants": [store.get_ref(MAIN)]})),
        ):
            _json_error(response, 500, "InternalError")
            assert response.json() == INTERNAL_ERROR
            assert "8231" not in response.text
            assert response.headers["connection"] == "close"
    failures = [r for r in caplog.records if r.name == "tractkv.sync.server" and r.exc_info]
    assert [r.getMessage() for r in failures] == [
        "GET /ui/commit/main/request.json failed",
        "POST /v1/fetch failed",
    ]
    for record in failures:
        assert record.exc_info is not None
        assert str(record.exc_info[1]) == "private detail 8231"


def test_an_unexpected_exception_on_a_page_is_an_html_500(
    store: LmdbStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from tractkv.view.app import Viewer

    async def broken(self: Viewer, request: object) -> object:
        raise RuntimeError("private detail 5512")

    monkeypatch.setattr(Viewer, "static", broken)
    app, _ = create_app(store)
    with TestClient(app, base_url="http://127.0.0.1") as c, caplog.at_level(logging.ERROR, "tractkv"):
        response = c.get("/ui/static/app.css")
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("text/html")
    assert "5512" not in response.text
    assert any(r.exc_info and "5512" in str(r.exc_info[1]) for r in caplog.records)


def test_healthz_reads_nothing_from_the_store(tmp_path: Path, demo: tuple[Path, dict[str, str]]) -> None:
    from tractkv import __version__
    from tractkv.sync.server import create_app as hub_app
    from tractkv.sync.wire import PROTOCOL

    st = LmdbStore(str(demo[0]))
    tokens = TokenTable({READER: ["read"]})
    apps = [create_app(st, tokens=tokens)[0], create_app(st, sync=False)[0], hub_app(st, tokens=tokens)]
    st.close()  # every read now raises StoreClosed
    for app in apps:
        with TestClient(app, base_url="http://127.0.0.1") as c:
            response = c.get("/healthz")  # no token either
            assert response.status_code == 200
            assert response.json() == {"status": "ok", "tractkv": __version__, "protocol": PROTOCOL}
            assert c.head("/healthz").status_code == 200
            # a route that reads the closed store: a JSON 5xx, not a traceback
            refs = c.get("/v1/refs", headers={"Authorization": f"Bearer {READER}"})
            if refs.status_code != 404:  # `view` has no /v1/
                _json_error(refs, 500, "StoreClosed")


def test_head_on_a_hub_store_only_pushed_to_is_mains_tip(start_hub: Any, tmp_path: Path, clock: Any) -> None:
    import httpx

    from tractkv import Tract
    from tractkv.engine.history import read_head

    hub = start_hub()  # a store made by init: no HEAD ref is ever written to it, pushes only move main
    with Tract.open(str(tmp_path / "a"), clock=clock, durable=False) as t:
        t.system("You are terse.")
        t.user("hello")
        t.remote_add("origin", hub.url)
        assert t.push().ok
    with LmdbStore(str(hub.store), create=False, durable=False) as st:
        assert st.get_ref("HEAD") is None
        tip = st.get_ref(MAIN)
        assert tip is not None
        assert read_head(st) == (MAIN, tip)
    with httpx.Client(base_url=hub.url, timeout=30) as c:
        for fmt in ("openai", "anthropic"):
            at_main = c.get("/ui/commit/main/request.json", params={"fmt": fmt})
            at_head = c.get("/ui/commit/HEAD/request.json", params={"fmt": fmt})
            assert at_main.status_code == at_head.status_code == 200, at_head.text
            assert at_head.json() == at_main.json()
        page = c.get("/ui/commit/HEAD")
        assert page.status_code == 200, page.text
        assert tip[:12] in page.text


def test_an_unknown_format_is_a_400_on_the_json_route_and_the_page(
    start_hub: Any, demo: tuple[Path, dict[str, str]]
) -> None:
    import httpx

    viewer = start_hub(store=demo[0], command="view")
    with httpx.Client(base_url=viewer.url, timeout=30) as c:
        for param in ("format", "fmt"):
            body = _json_error(c.get(f"/ui/commit/main/request.json?{param}=bogus"), 400, "InvalidInput")
            assert "bogus" in str(body["message"])
            page = c.get(f"/ui/commit/main?{param}=bogus")
            assert page.status_code == 400, page.text
            assert page.headers["content-type"].startswith("text/html")
            assert "bogus" in page.text
        # format is fmt's other spelling; the two disagreeing is a 400 too
        anthropic = c.get("/ui/commit/main/request.json?fmt=anthropic").json()
        assert c.get("/ui/commit/main/request.json?format=anthropic").json() == anthropic
        assert c.get("/ui/commit/main/request.json").json() != anthropic
        _json_error(c.get("/ui/commit/main/request.json?fmt=openai&format=anthropic"), 400, "InvalidInput")
