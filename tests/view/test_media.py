"""Images in the viewer: a thumbnail from a checked data: URL (raster types only, base64 only, capped), the
CSP allowing data: images and nothing more, markers for documents, base64 elided from the JSON view."""

from __future__ import annotations

import base64
import re
import struct
import zlib
from pathlib import Path

from starlette.testclient import TestClient

from tractkv import Tract
from tractkv.store import LmdbStore
from tractkv.view.app import create_app
from tractkv.view.media import MAX_THUMBNAIL_BASE64, content_blocks, elide_media, image


def png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 8 for _ in range(8))
    ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + ihdr + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


PNG = png()
B64 = base64.b64encode(PNG).decode()


def test_thumbnail_only_for_checked_raster_base64() -> None:
    shown = image("image/png", B64)
    assert f'src="data:image/png;base64,{B64}"' in shown
    for media_type, data in [
        ("image/svg+xml", "PHN2Zz4="),  # never SVG
        ("image/png", 'AAAA" onerror="alert(1)'),  # not base64: no attribute injection
        ("image/png", "A" * (MAX_THUMBNAIL_BASE64 + 4)),  # too large
        ("text/html", "PGI+"),
    ]:
        marker = image(media_type, data)
        assert "<img" not in marker
        assert "[image " in marker


def test_blocks_of_both_shapes() -> None:
    html = content_blocks(
        [
            {"type": "text", "text": "<b>hi</b>"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
            {"type": "image_url", "image_url": {"url": "https://example.test/a.png"}},
            {
                "type": "file",
                "file": {"filename": "r.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"},
            },
            {
                "type": "tool_result",
                "tool_use_id": "c1",
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}}
                ],
            },
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
        ]
    )
    assert "&lt;b&gt;hi&lt;/b&gt;" in html
    assert html.count("<img ") == 2
    assert "[image https://example.test/a.png]" in html
    assert "[document application/pdf 6 B r.pdf]" in html
    assert "tool_result c1" in html


def test_elide_media_keeps_short_values() -> None:
    params = {
        "messages": [
            {
                "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 400}},
                    {"type": "text", "text": "x" * 500},
                ]
            }
        ]
    }
    out = elide_media(params)
    assert (
        out["messages"][0]["content"][0]["image_url"]["url"]
        == "data:image/png;base64,<400 base64 characters>"
    )
    assert out["messages"][0]["content"][1]["text"] == "x" * 500


def test_commit_page_shows_the_image_as_a_thumbnail(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with Tract.open(str(path), durable=False) as t:
        t.user(["What is this?", {"type": "image", "data": PNG, "media_type": "image/png"}])
        t.assistant(tool_calls=[{"id": "c1", "name": "shot", "arguments": {}}])
        head = t.tool_result(
            "c1", "shot", ["screen:", {"type": "image", "data": PNG, "media_type": "image/png"}]
        )
        assert head is not None
    with LmdbStore(path) as st:
        app, _ = create_app(st, sync=False)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            for fmt, images in (("openai", 2), ("anthropic", 2)):
                page = client.get(f"/ui/commit/{head.commit_id}?fmt={fmt}")
                assert page.status_code == 200
                csp = page.headers["content-security-policy"]
                assert "img-src 'self' data:;" in csp
                assert "default-src 'none'" in csp
                html = page.text
                assert len(re.findall(rf'<img src="data:image/png;base64,{re.escape(B64)}"', html)) == images
            exact = client.get(f"/ui/commit/{head.commit_id}/request.json?fmt=anthropic").json()
            assert exact["messages"][0]["content"][1]["source"]["data"] == B64
