"""docs/PROTOCOL.md and docs/openapi.json cannot drift from the hub: the OpenAPI paths and methods are exactly
the JSON routes the app `tractkv serve` runs serves, and real answers (errors above all) match the documented
statuses and schemas."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from starlette.testclient import TestClient

from tractkv import Tract
from tractkv.store import LmdbStore
from tractkv.sync.auth import TokenTable
from tractkv.sync.frames import MAGIC, encode_stream
from tractkv.sync.remote import RefUpdate, RejectReason
from tractkv.sync.wire import PROTOCOL, encode_push_head
from tractkv.view.app import COOKIE, create_app

from .conftest import ADMIN, EDGE, READER

DOCS = Path(__file__).resolve().parents[2] / "docs"
SPEC: dict[str, Any] = json.loads((DOCS / "openapi.json").read_text())
NOT_JSON = {"/", "/ui", "/favicon.ico"}  # a redirect, a redirect, an empty icon
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = SPEC
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def check(value: Any, schema: dict[str, Any], where: str = "$") -> None:
    """Validate ``value`` against the subset of JSON Schema 2020-12 the spec uses (no jsonschema needed)."""
    schema = _resolve(schema)
    kinds = {
        "object": dict,
        "array": list,
        "string": str,
        "integer": int,
        "boolean": bool,
        "null": type(None),
    }
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        ok = any(
            isinstance(value, kinds[t]) and not (t == "integer" and isinstance(value, bool)) for t in types
        )
        assert ok, f"{where}: {value!r} is not {types}"
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
    if "pattern" in schema and isinstance(value, str):
        assert re.search(schema["pattern"], value), f"{where}: {value!r} !~ {schema['pattern']}"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            assert key in value, f"{where}: {key!r} missing from {value!r}"
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                check(item, props[key], f"{where}.{key}")
            elif extra is False:
                raise AssertionError(f"{where}: unexpected key {key!r}")
            elif isinstance(extra, dict):
                check(item, extra, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            check(item, schema["items"], f"{where}[{i}]")


def _template(path: str) -> str:
    return re.sub(r"\{(\w+):\w+\}", r"{\1}", path)  # Starlette's {rev:path} is OpenAPI's {rev}


def json_routes(app: Any) -> dict[str, set[str]]:
    """Path template -> methods, for every route that answers JSON (or the protocol's binary bodies): all but
    the HTML pages under /ui/ (their .json routes count) and the two redirects and the icon."""
    out: dict[str, set[str]] = {}
    for route in app.routes:
        path = _template(route.path)
        if path in NOT_JSON or (path.startswith("/ui/") and not path.endswith(".json")):
            continue
        out.setdefault(path, set()).update(m.lower() for m in route.methods if m != "HEAD")
    return out


def documented() -> dict[str, set[str]]:
    return {path: {m for m in item if m in METHODS} for path, item in SPEC["paths"].items()}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, LmdbStore]]:
    path = tmp_path / "hub"
    with Tract.open(str(path), durable=False) as t:
        t.user("hello")
    tokens = TokenTable({ADMIN: ["admin"], READER: ["read"], EDGE: ["write:agents/edge-7/*"]})
    with LmdbStore(str(path), durable=False) as st:
        app, _ = create_app(st, tokens=tokens, max_request=64 * 1024)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            yield client, st


def test_the_openapi_paths_are_the_json_routes_the_app_serves(tmp_path: Path) -> None:
    assert SPEC["openapi"].startswith("3.1.")
    assert SPEC["x-tractkv-protocol"] == PROTOCOL
    assert SPEC["components"]["securitySchemes"]["signInCookie"]["name"] == COOKIE
    with LmdbStore(str(tmp_path / "s"), durable=False) as st:
        serve_app, _ = create_app(st)
        view_app, _ = create_app(st, sync=False)
        assert json_routes(serve_app) == documented()
        view_routes = json_routes(view_app)
        assert view_routes.items() <= documented().items()
        assert "/v1/info" not in view_routes
    # every documented response is a real status code with a schema for JSON bodies
    for path, item in SPEC["paths"].items():
        for method, operation in item.items():
            assert operation["responses"]["405"], (path, method)
            for status, response in operation["responses"].items():
                assert re.fullmatch(r"[1-5]\d\d", status)
                for media in _resolve(response).get("content", {}).values():
                    assert "schema" in media


def test_documented_errors_match_what_the_server_answers(served: tuple[TestClient, LmdbStore]) -> None:
    client, store = served
    admin = {"Authorization": f"Bearer {ADMIN}"}
    reader = {"Authorization": f"Bearer {READER}"}
    edge = {"Authorization": f"Bearer {EDGE}"}
    tip = store.get_ref("refs/heads/main")
    new_branch = encode_push_head([RefUpdate("refs/heads/x", None, tip)], False)  # type: ignore[arg-type]
    forged = encode_push_head([RefUpdate("refs/heads/x", None, "ab" * 32)], False)
    cases: list[tuple[str, str, str, dict[str, str], bytes | None, int, str]] = [
        ("get", "/v1/refs", "/v1/refs", {}, None, 401, "AuthError"),
        ("get", "/v1/refs?prefix=refs/remotes/", "/v1/refs", reader, None, 403, "AuthError"),
        ("delete", "/v1/info", "/v1/info", {}, None, 405, "MethodNotAllowed"),
        ("post", "/v1/missing", "/v1/missing", admin, b"x" * 33, 400, "TransferError"),
        ("post", "/v1/missing", "/v1/missing", {}, b"", 401, "AuthError"),
        ("post", "/v1/fetch", "/v1/fetch", admin, b'{"wants": ["zz"]}', 400, "TransferError"),
        ("post", "/v1/fetch", "/v1/fetch", edge, b'{"wants": []}', 403, "AuthError"),
        ("post", "/v1/push", "/v1/push", edge, new_branch + MAGIC, 403, "AuthError"),
        ("post", "/v1/push", "/v1/push", admin, b"\0\0", 400, "TransferError"),
        ("post", "/v1/push", "/v1/push", admin, forged + b"".join(encode_stream([])) + b"x" * 70_000, 413,
         "RequestTooLarge"),
        ("post", "/v1/push", "/v1/push", {**admin, "Content-Length": "99999999999"}, None, 413,
         "RequestTooLarge"),
        ("post", "/v1/missing", "/v1/missing", {**admin, "Content-Length": "99999999999"}, None, 413,
         "RequestTooLarge"),
        ("post", "/v1/push", "/v1/push", admin, forged + b"".join(encode_stream([("ab" * 32, b"junk")])),
         422, "RejectedObject"),
        ("get", "/ui/commit/nosuch/request.json", "/ui/commit/{rev}/request.json", reader, None, 404,
         "UnknownRevision"),
        ("get", "/ui/commit/main/request.json?fmt=x", "/ui/commit/{rev}/request.json", reader, None, 400,
         "InvalidInput"),
        ("get", "/ui/commit/main/request.json", "/ui/commit/{rev}/request.json", {}, None, 401, "AuthError"),
        ("post", "/healthz", "/healthz", {}, None, 405, "MethodNotAllowed"),
        ("get", "/v1/nope", "", admin, None, 404, "NotFound"),
    ]  # fmt: skip
    error_schema = SPEC["components"]["schemas"]["Error"]
    for method, url, template, headers, body, status, name in cases:
        response = client.request(method.upper(), url, headers=headers, content=body)
        what = (method, url, response.text)
        assert response.status_code == status, what
        assert response.headers["content-type"] == "application/json", what
        check(response.json(), error_schema)
        assert response.json()["error"] == name, what
        if template:  # a documented operation documents this status, with the Error shape
            operations = SPEC["paths"][template]
            operation = operations.get(method) or next(iter(operations.values()))
            documented_response = _resolve(operation["responses"][str(status)])
            schema = documented_response["content"]["application/json"]["schema"]
            assert _resolve(schema) == error_schema
    assert client.request("POST", "/v1/push", headers=admin, content=b"\0\0").json()["oid"] is None


def test_documented_answers_match_what_the_server_answers(served: tuple[TestClient, LmdbStore]) -> None:
    client, store = served
    admin = {"Authorization": f"Bearer {ADMIN}"}
    tip = store.get_ref("refs/heads/main")
    schemas = SPEC["components"]["schemas"]
    check(client.get("/healthz").json(), schemas["Health"])
    check(client.get("/v1/info").json(), schemas["Info"])
    check(client.get("/v1/refs", headers=admin).json(), schemas["Refs"])
    head = encode_push_head([RefUpdate("refs/heads/copy", None, tip)], False)  # type: ignore[arg-type]
    pushed = client.post("/v1/push", headers=admin, content=head + b"".join(encode_stream([]))).json()
    check(pushed, schemas["PushResult"])
    assert pushed["results"][0]["ok"] is True
    stale = client.post("/v1/push", headers=admin, content=head + b"".join(encode_stream([]))).json()
    check(stale, schemas["PushResult"])
    assert stale["results"][0]["reason"] == "stale"
    fetched = client.post("/v1/fetch", headers=admin, content=json.dumps({"wants": [tip]}))
    assert fetched.headers["content-type"] == "application/x-tractkv-stream"
    assert fetched.content.startswith(MAGIC)
    check(client.get("/ui/commit/main/request.json", headers=admin).json(), _resolve(
        SPEC["paths"]["/ui/commit/{rev}/request.json"]["get"]["responses"]["200"]
    )["content"]["application/json"]["schema"])  # fmt: skip


def test_protocol_md_states_the_version_frames_and_reasons() -> None:
    text = (DOCS / "PROTOCOL.md").read_text()
    assert f"**Protocol version {PROTOCOL}**" in text
    assert json.dumps(MAGIC.decode())[1:-1] in text  # "TKVSTREAM1\n"
    for reason in get_args(RejectReason):
        assert f'"{reason}"' in text, reason
    documented_reasons = SPEC["components"]["schemas"]["RefResult"]["properties"]["reason"]["enum"]
    assert set(documented_reasons) == {*get_args(RejectReason), None}
    for path in SPEC["paths"]:
        assert path.split("{")[0] in text, path
