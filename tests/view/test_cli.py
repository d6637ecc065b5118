"""`tractkv view` and the viewer inside `tractkv serve`, as real processes on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tractkv import Tract

from .conftest import READER

MAIN = "refs/heads/main"


def test_view_refuses_a_missing_store_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tractkv", "--store", str(tmp_path / "none"), "view"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"Error: no tractkv store at {tmp_path / 'none'} (create one with `tractkv init`, or `tractkv clone URL`)"
    ]
    assert not (tmp_path / "none").exists()


def test_serve_mounts_the_viewer_beside_the_sync_api(
    demo: tuple[Path, dict[str, str]], start_hub: Callable[..., Any], tokens_file: str
) -> None:
    path, _ = demo
    hub = start_hub("--tokens", tokens_file, store=path)
    auth = {"Authorization": f"Bearer {READER}"}
    with httpx.Client(base_url=hub.url, timeout=30) as client:
        assert client.get("/", follow_redirects=False).headers["location"] == "/ui/"
        assert client.get("/ui/").status_code == 401
        assert client.get("/ui/", headers=auth).status_code == 200
        assert set(client.get("/v1/refs", headers=auth).json()["refs"]) == {MAIN, "refs/heads/explore"}


def test_an_open_event_stream_gets_changes_and_does_not_hold_up_shutdown(
    tmp_path: Path, start_hub: Callable[..., Any]
) -> None:
    path = tmp_path / "live"
    with Tract.open(str(path), durable=False) as t:
        t.user("first")
    hub = start_hub(store=path, command="view")
    lines: list[str] = []
    opened = threading.Event()
    changed = threading.Event()

    def listen() -> None:
        with httpx.Client(timeout=60) as client, client.stream("GET", hub.url + "/ui/events") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            for line in response.iter_lines():
                lines.append(line)
                opened.set()
                if line.startswith("data:") and MAIN in line:
                    changed.set()

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    assert opened.wait(30)
    with Tract.open(str(path), durable=False) as t:
        head = t.user("second").commit_id
    assert changed.wait(30), lines
    assert f'data: {{"refs": {{"{MAIN}": "{head}"}}}}' in lines
    started = time.monotonic()
    err = hub.stop()  # SIGINT while the stream is open: the server ends it and exits cleanly
    assert hub.proc.returncode == 0, err
    # well inside uvicorn's 5 s graceful-shutdown timeout, which only a stream left open would run into
    assert time.monotonic() - started < 4, err
    listener.join(30)
    assert not listener.is_alive()


def test_a_push_to_the_hub_reaches_an_open_viewer(tmp_path: Path, start_hub: Callable[..., Any]) -> None:
    hub = start_hub()
    seen: list[str] = []
    opened = threading.Event()
    pushed = threading.Event()

    def listen() -> None:
        with httpx.Client(timeout=60) as client, client.stream("GET", hub.url + "/ui/events") as response:
            for line in response.iter_lines():
                opened.set()
                seen.append(line)
                if line.startswith("data:") and MAIN in line:
                    pushed.set()
                    return

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    assert opened.wait(30)
    with Tract.open(str(tmp_path / "edge"), durable=False) as edge:
        edge.user("pushed from the edge")
        edge.remote_add("origin", hub.url)
        assert edge.push().ok
        head = edge.head
    assert pushed.wait(30), seen
    assert f'data: {{"refs": {{"{MAIN}": "{head}"}}}}' in seen
    with httpx.Client(base_url=hub.url, timeout=30) as client:
        assert "pushed from the edge" in client.get(f"/ui/log?ref={MAIN}").text
    listener.join(30)
