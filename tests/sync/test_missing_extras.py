"""A core install (no `server` / `s3` extra): every command that would reach an http(s):// or s3:// remote says in
one line which extra to install, and changes nothing (issue 17, item 1: it used to print a 30-line traceback
ending in "No module named 'httpx'"). Each run is a real process in which the module cannot be imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tractkv import Tract
from tractkv.errors import MissingExtra, RemoteUnavailable, SyncError
from tractkv.sync.remotes import open_remote

HTTP = "http://127.0.0.1:9"  # never contacted: the command stops before any connection
SERVER_HINT = (
    "Error: http(s):// remotes need the server extra: pip install 'tractkv[server]' (no module named 'httpx')"
)
S3_HINT = "Error: s3:// remotes need the s3 extra: pip install 'tractkv[s3]' (no module named 'boto3')"

# Run the CLI in a process where ``module`` cannot be imported, as on an install without its extra.
WITHOUT = "import sys; sys.modules[{module!r}] = None; from tractkv.cli import main; sys.argv[0] = 'tractkv'; main()"


def tkv_without(module: str, store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT.format(module=module), "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "TRACTKV_DEBUG": ""},
    )


def refs_and_remotes(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    with Tract.open(str(path), create=False) as t:
        return dict(t.store.iter_refs()), t.remotes()


@pytest.fixture
def store_with_http_remote(tmp_path: Path) -> Path:
    path = tmp_path / "a"
    with Tract.open(str(path)) as t:
        t.user("hello")
        t.remote_add("origin", HTTP)  # added where httpx is installed
    return path


@pytest.mark.parametrize("command", [["fetch"], ["push"], ["pull"], ["fetch", "origin"]])
def test_sync_commands_on_an_http_remote_name_the_server_extra(
    store_with_http_remote: Path, command: list[str]
) -> None:
    before = refs_and_remotes(store_with_http_remote)
    out = tkv_without("httpx", store_with_http_remote, *command)
    assert out.returncode == 1
    assert out.stderr.splitlines() == [SERVER_HINT]
    assert "Traceback" not in out.stderr
    assert refs_and_remotes(store_with_http_remote) == before


def test_remote_add_of_an_http_url_names_the_server_extra_and_adds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "a"
    Tract.open(str(path)).close()
    before = refs_and_remotes(path)
    out = tkv_without("httpx", path, "remote", "add", "origin", HTTP)
    assert out.returncode == 1
    assert out.stderr.splitlines() == [SERVER_HINT]
    assert refs_and_remotes(path) == before
    assert before[1] == {}


def test_clone_of_an_http_url_names_the_server_extra_and_creates_nothing(tmp_path: Path) -> None:
    out = tkv_without("httpx", tmp_path, "clone", HTTP, str(tmp_path / "b"))
    assert out.returncode == 1
    assert out.stderr.splitlines() == [SERVER_HINT]
    assert not (tmp_path / "b").exists()


def test_s3_commands_name_the_s3_extra(tmp_path: Path) -> None:
    path = tmp_path / "a"
    Tract.open(str(path)).close()
    out = tkv_without("boto3", path, "remote", "add", "origin", "s3://bucket/prefix")
    assert out.returncode == 1
    assert out.stderr.splitlines() == [S3_HINT]
    out = tkv_without("boto3", tmp_path, "clone", "s3://bucket/prefix", str(tmp_path / "b"))
    assert out.stderr.splitlines() == [S3_HINT]
    assert not (tmp_path / "b").exists()


def test_library_users_get_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)
    monkeypatch.delitem(sys.modules, "tractkv.sync.http_client", raising=False)
    with pytest.raises(MissingExtra) as info:
        open_remote(HTTP)
    assert isinstance(info.value, RemoteUnavailable)  # what s3 raised before: callers catching it still do
    assert (info.value.extra, info.value.module) == ("server", "httpx")


def test_an_integrations_missing_extra_is_no_sync_error() -> None:
    """Only a transport's missing extra is a RemoteUnavailable; an integration's is a MissingExtra alone."""
    from tractkv.integrations import missing_extra

    error = missing_extra(
        "tractkv.integrations.langgraph", "langgraph", ModuleNotFoundError(name="langgraph")
    )
    assert isinstance(error, MissingExtra)
    assert not isinstance(error, SyncError)
    assert "pip install 'tractkv[langgraph]'" in str(error)
