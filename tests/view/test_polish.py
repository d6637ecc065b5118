"""Viewer polish (issue 34, item 6), in process: error pages keep the nav bar, a typo in the Compare form shows
the form again with the error, titles name a branch as the nav does, the usage page links a re-run instead of
offering its command again, an image's size is the size of its bytes. The browser checks (layout, screenshots
at 800 and 1280 px): test_browser_polish.py."""

from __future__ import annotations

import base64
import html
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tractkv import Tract, toolkit
from tractkv.llm import ScriptedLLM
from tractkv.store import LmdbStore
from tractkv.sync.auth import TokenTable
from tractkv.toolkit import ToolContext, ToolExecutor, ToolUsage, tool
from tractkv.view.app import create_app
from tractkv.view.media import decoded_size, image

from .conftest import READER
from .session import call

MAIN = "refs/heads/main"
NAV = '<nav><a href="/ui/">Branches</a><a href="/ui/tools">Tools</a><a href="/ui/diff">Compare</a>'


@pytest.fixture
def client(demo: tuple[Path, dict[str, str]]) -> Iterator[TestClient]:
    with LmdbStore(demo[0]) as st:
        app, _ = create_app(st, sync=False)
        with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as c:
            yield c


def title(text: str) -> str:
    match = re.search(r"<title>(.*?)</title>", text)
    assert match, text
    return html.unescape(match.group(1))


def test_error_pages_keep_the_nav_bar(client: TestClient) -> None:
    for path, status in {
        "/ui/nothing": 404,  # no such route
        "/ui/commit/" + "0" * 64: 404,  # no such commit
        "/ui/log?ref=refs/heads/nope": 404,
        "/ui/log?ref=HEAD": 400,
        "/ui/media/" + "0" * 64: 404,
        "/ui/static/nope.js": 404,
        "/ui/tool?name=nope": 404,
    }.items():
        response = client.get(path)
        assert response.status_code == status, path
        assert NAV in response.text, path
        assert "<h1>" in response.text


def test_error_pages_of_a_hub_with_tokens_keep_the_sign_out_button(tmp_path: Path) -> None:
    with Tract.open(str(tmp_path / "s")) as t:
        t.user("hello")
    with LmdbStore(tmp_path / "s") as st:
        app, _ = create_app(st, tokens=TokenTable({READER: ["read"]}))
        with TestClient(app, base_url="http://127.0.0.1") as locked:
            for path in ("/ui/nothing", "/ui/commit/" + "0" * 64):
                response = locked.get(path, headers={"Authorization": f"Bearer {READER}"})
                assert response.status_code == 404
                assert NAV in response.text
                assert 'action="/ui/logout"' in response.text


def test_a_typo_in_the_compare_form_shows_the_form_again(client: TestClient) -> None:
    response = client.get("/ui/diff?a=mian&b=main")
    assert response.status_code == 404  # the status still says what was wrong
    text = response.text
    assert NAV in text
    assert title(text) == "Compare two commits · tractkv"
    assert '<form method="get" action="/ui/diff"' in text
    error = re.search(r'<p class="error-text form-error" role="alert">(.*?)</p>', text)
    assert error
    assert html.unescape(error.group(1)) == "unknown revision 'mian': names no commit"
    inputs = dict(re.findall(r'<input type="text" name="(\w)" ([^>]*)/?>', text))
    assert 'value="mian"' in inputs["a"]
    assert 'aria-invalid="true"' in inputs["a"]
    assert "autofocus" in inputs["a"]
    assert 'value="main"' in inputs["b"]
    assert "aria-invalid" not in inputs["b"]
    other = client.get("/ui/diff?a=main&b=main~99")
    assert other.status_code == 404
    assert "main~99" in other.text
    assert 'name="b" value="main~99"' in other.text
    assert (
        client.get("/ui/diff?a=main&b=main&ref=HEAD").status_code == 400
    )  # the page's branch: an error page


def test_titles_name_the_branch_as_the_nav_does(client: TestClient) -> None:
    for path, expected in {
        f"/ui/log?ref={MAIN}": "History of main",
        "/ui/log": "History of main",
        f"/ui/usage?ref={MAIN}": "Tool usage on main",
        "/ui/log?ref=refs/heads/explore": "History of explore",
    }.items():
        text = client.get(path).text
        assert title(text) == f"{expected} · tractkv", path
        nav_ref = re.search(r'<span class="ref" title="([^"]+)">([^<]+)</span>', text)
        assert nav_ref
        assert expected.endswith(nav_ref.group(2))
        h1 = re.search(r"<h1>(.*?)</h1>", text)
        assert h1
        assert re.sub(r"<[^>]+>", "", h1.group(1)) == expected
        assert "refs/heads/" not in title(text)


attempts: list[str] = []


@tool
def fetch(url: str, *, context: ToolContext) -> str:
    """Fetch a page (fails the first time for each url)."""
    attempts.append(url)
    if attempts.count(url) == 1:
        raise ConnectionError(f"timed out reading {url}")
    return f"page {url}"


def rerun_store(path: Path) -> dict[str, ToolUsage]:
    """Two failed fetches; the first re-run successfully, the second not: usages by name."""
    attempts.clear()
    with Tract.open(str(path), durable=False) as t:
        ex = ToolExecutor(t, profile=None, tools=[fetch])
        t.user("read a and b")
        llm = ScriptedLLM(
            [call("c1", "fetch", {"url": "a"}), call("c2", "fetch", {"url": "b"}), "both failed"]
        )
        toolkit.run(t, llm, ex)
        first, second = t.tool_usages()
        again = toolkit.rerun_tool_usage(t, first.id, ex)
    assert (first.status, second.status, again.status) == ("error", "error", "success")
    return {"rerun": first, "failed": second, "again": again}


def usage_card(text: str, usage_id: str) -> str:
    start = text.index(f'id="u-{usage_id}"')
    end = text.find("<details", start)
    return text[start : end if end != -1 else len(text)]


def test_the_usage_page_links_a_rerun_instead_of_offering_it_again(tmp_path: Path) -> None:
    usages = rerun_store(tmp_path / "s")
    with LmdbStore(tmp_path / "s") as st:
        app, _ = create_app(st, sync=False)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            text = client.get(f"/ui/usage?ref={MAIN}").text
            filtered = client.get(f"/ui/usage?ref={MAIN}&status=error").text
    rerun, failed, again = usages["rerun"], usages["failed"], usages["again"]
    card = usage_card(text, rerun.id)
    assert "rerun-command" not in card  # running it would be refused: it was re-run already
    assert f'<a href="#u-{again.id}" class="rerun-link">{again.id}</a>' in card
    assert "re-run as" in card
    assert f"tractkv usage rerun {failed.id}" in usage_card(text, failed.id)  # never re-run: offered
    assert f'href="#u-{rerun.id}"' in usage_card(text, again.id)  # and the re-run links back
    # filtered to errors, the re-run is not on the page: the link leads to the page of its message
    card = usage_card(filtered, rerun.id)
    assert "rerun-command" not in card
    link = f"/ui/usage?ref=refs%2Fheads%2Fmain&amp;commit={again.commit_id}#u-{again.id}"
    assert f'href="{link}"' in card


def gradient_png(size: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(
        b"\x00" + b"".join(bytes((255 * x // size, 80, 255 * y // size)) for x in range(size))
        for y in range(size)
    )
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def test_an_image_shows_the_size_of_its_bytes(tmp_path: Path) -> None:
    png = gradient_png(24)
    assert len(png) % 3 == 1  # base64 pads it: its length * 3 / 4 is 2 bytes over
    assert len(png) < 1024  # shown to the byte
    with Tract.open(str(tmp_path / "s")) as t:
        info = t.user(["Look:", {"type": "image", "data": png, "media_type": "image/png"}])
    with LmdbStore(tmp_path / "s") as st:
        app, _ = create_app(st, sync=False)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            for fmt in ("openai", "anthropic"):
                text = client.get(f"/ui/commit/{info.commit_id}?fmt={fmt}").text
                caption = re.search(r"<figcaption ([^>]*)>([^<]*)</figcaption>", text)
                assert caption, fmt
                assert caption.group(2) == f"image/png {len(png)} B"
                assert f'title="{len(png):,} bytes"' in caption.group(1)
    data = base64.b64encode(png).decode()
    assert len(data) * 3 // 4 == len(png) + 2
    assert f"[image image/png {len(png)} B]" in image("image/png", data, {})  # a marker: the same size
    assert decoded_size(data) == len(png)
    assert decoded_size(base64.encodebytes(png).decode()) == len(png)  # line breaks hold no bytes
