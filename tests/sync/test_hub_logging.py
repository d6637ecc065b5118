"""`tractkv serve` / `tractkv view` as real processes on 127.0.0.1: the access log (one line a request, no
token or cookie ever), `--log-level`, and `/healthz` for process managers."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import httpx
from click.testing import CliRunner

from tractkv import Tract, __version__
from tractkv.cli import cli

from .conftest import ADMIN, READER, Hub

ACCESS = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ INFO tractkv\.access 127\.0\.0\.1 (\S+) (\S+) (\d{3}) \d+\.\dms$"
)
SECRET = "s3cret-query-value-77"


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "served"
    with Tract.open(str(path), durable=False) as t:
        t.user("hello")
    return path


def _access_lines(err: str) -> list[tuple[str, str, int]]:
    lines = [line for line in err.splitlines() if " tractkv.access " in line]
    found = []
    for line in lines:
        match = ACCESS.match(line)
        assert match, line
        found.append((match.group(1), match.group(2), int(match.group(3))))
    return found


def test_the_access_log_has_one_line_a_request_and_never_a_token_or_cookie(
    tmp_path: Path, start_hub: Callable[..., Hub], tokens_file: str
) -> None:
    hub = start_hub("--tokens", tokens_file, store=_store(tmp_path))
    admin = {"Authorization": f"Bearer {ADMIN}"}
    with httpx.Client(base_url=hub.url, timeout=30) as c:
        assert c.get("/healthz").status_code == 200
        assert c.get("/v1/refs", headers=admin).status_code == 200
        assert c.get("/v1/refs").status_code == 401
        assert c.post("/v1/fetch", content=b"{", headers=admin).status_code == 400
        assert c.get("/v1/nope", headers=admin).status_code == 404
        assert c.post("/ui/login", data={"token": READER}).status_code == 303  # sets the cookie
        assert c.cookies.get("tractkv_token") == READER
        assert c.get("/ui/").status_code == 200  # signed in by the cookie
        json_url = f"/ui/commit/main/request.json?fmt=openai&access_token={SECRET}&apiKey={SECRET}"
        assert c.get(json_url).status_code == 200
    err = hub.stop()
    assert _access_lines(err) == [
        ("GET", "/healthz", 200),
        ("GET", "/v1/refs", 200),
        ("GET", "/v1/refs", 401),
        ("POST", "/v1/fetch", 400),
        ("GET", "/v1/nope", 404),
        ("POST", "/ui/login", 303),
        ("GET", "/ui/", 200),
        ("GET", "/ui/commit/main/request.json?fmt=openai&access_token=REDACTED&apiKey=REDACTED", 200),
    ]
    for secret in (ADMIN, READER, SECRET):
        assert secret not in err, err
    assert "Traceback" not in err


def test_log_level_chooses_what_is_logged_for_serve_and_view(
    tmp_path: Path, start_hub: Callable[..., Hub]
) -> None:
    path = _store(tmp_path)
    quiet = start_hub("--log-level", "warning", store=path)
    view_default = start_hub(store=path, command="view")
    view_info = start_hub("--log-level", "INFO", store=path, command="view")
    for hub in (quiet, view_default, view_info):
        with httpx.Client(base_url=hub.url, timeout=30) as c:
            assert c.get("/healthz").status_code == 200
            assert c.get("/ui/commit/HEAD/request.json").status_code == 200
    assert _access_lines(quiet.stop()) == []
    assert _access_lines(view_default.stop()) == []
    assert _access_lines(view_info.stop()) == [
        ("GET", "/healthz", 200),
        ("GET", "/ui/commit/HEAD/request.json", 200),
    ]
    for command in ("serve", "view"):
        result = CliRunner().invoke(cli, ["--store", str(path), command, "--log-level", "loud"])
        assert result.exit_code == 2
        assert "Invalid value for '--log-level'" in result.output
        help_text = CliRunner().invoke(cli, [command, "--help"]).output
        assert "critical|error|warning|info|debug" in help_text


def test_healthz_answers_without_a_token_on_serve_and_view(
    tmp_path: Path, start_hub: Callable[..., Hub], tokens_file: str
) -> None:
    path = _store(tmp_path)
    for hub in (start_hub("--tokens", tokens_file, store=path), start_hub(store=path, command="view")):
        with httpx.Client(base_url=hub.url, timeout=30) as c:
            response = c.get("/healthz")
            assert response.status_code == 200
            assert response.headers["content-type"] == "application/json"
            assert response.json() == {"status": "ok", "tractkv": __version__, "protocol": 1}
            assert c.head("/healthz").status_code == 200
            wrong = c.delete("/healthz")
            assert wrong.status_code == 405
            assert wrong.json()["error"] == "MethodNotAllowed"
