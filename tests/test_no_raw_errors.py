"""No raw Python exception reaches a user: the CLI prints one ``Error:`` line, the viewer an error page (never
a 500), whatever fails underneath (a bug, or store content no check caught yet)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tractkv import Tract
from tractkv.cli import DEBUG_ENV, cli
from tractkv.errors import CorruptObject, InvalidInput


def _store(tmp_path: Path) -> str:
    path = str(tmp_path / "s")
    with Tract.open(path, durable=False) as t:
        t.user("hello")
    return path


@pytest.mark.parametrize("failure", [TypeError("bytes is not JSON serializable"), KeyError("slot")])
def test_cli_prints_one_error_line_for_an_unexpected_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    path = _store(tmp_path)

    def broken(*args: object, **kwargs: object) -> None:
        raise failure

    monkeypatch.setattr(Tract, "compile", broken)
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    result = CliRunner().invoke(cli, ["--store", path, "compile"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"Error: unexpected {type(failure).__name__}")
    assert "tractkv fsck" in lines[0]
    assert "Traceback" not in result.output


def test_cli_shows_the_traceback_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _store(tmp_path)

    def broken(*args: object, **kwargs: object) -> None:
        raise TypeError("boom")

    monkeypatch.setattr(Tract, "compile", broken)
    monkeypatch.setenv(DEBUG_ENV, "1")
    result = CliRunner().invoke(cli, ["--store", path, "compile"])
    assert isinstance(result.exception, TypeError)


def test_viewer_renders_an_error_page_never_a_500(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from starlette.testclient import TestClient

    from tractkv.view.app import create_app

    with Tract.open(str(tmp_path / "v"), durable=False) as t:
        info = t.user("hello")
        app, viewer = create_app(t.store, sync=False)

        def broken(*args: object, **kwargs: object) -> None:
            raise TypeError("an unexpected shape")

        monkeypatch.setattr(viewer.inspector, "branches", broken)

        def corrupt(*args: object, **kwargs: object) -> None:
            raise CorruptObject("a" * 64, "b" * 64)

        monkeypatch.setattr(viewer.inspector, "commit", corrupt)
        client = TestClient(app, raise_server_exceptions=False)
        page = client.get("/ui/")
        assert page.status_code == 422
        assert "TypeError: an unexpected shape" in page.text
        for url in (f"/ui/commit/{info.commit_id}", f"/ui/commit/{info.commit_id}/request.json"):
            answer = client.get(url)
            assert answer.status_code == 422, url
            assert "tractkv fsck" in answer.text


def test_unknown_viewer_pages_are_html_and_unknown_api_routes_json(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from tractkv.view.app import create_app

    with Tract.open(str(tmp_path / "v"), durable=False) as t:
        app, _ = create_app(t.store, sync=True)
        client = TestClient(app, raise_server_exceptions=False)
        page = client.get("/ui/no-such-page")
        assert page.status_code == 404
        assert page.headers["content-type"].startswith("text/html")
        assert "/ui/no-such-page" in page.text
        api = client.get("/v1/no-such-route")
        assert api.status_code == 404
        assert api.json()["error"]
        wrong = client.delete("/ui/")
        assert wrong.status_code == 405
        assert wrong.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize("path", ["store-dir", Path("store-dir"), b"store-dir"])
def test_a_tract_given_a_path_instead_of_a_store_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: object
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match=r"Tract\.open\(path\)"):
        Tract(path)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []  # nothing created
