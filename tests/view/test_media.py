"""Images in the viewer: a thumbnail loaded from /ui/media/<id> (raster types only, sniffed from the blob's
own bytes), never inlined, the CSP loading images from 'self' only, markers for documents, base64 elided from
the JSON view."""

from __future__ import annotations

import base64
import re
import struct
import zlib
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tractkv import Tract
from tractkv.model import Blob, object_id
from tractkv.store import LmdbStore
from tractkv.sync.auth import TokenTable
from tractkv.view.app import create_app
from tractkv.view.media import content_blocks, elide_media, image

from .conftest import READER


def png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 8 for _ in range(8))
    ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + ihdr + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


PNG = png()
PNG_ID = object_id(Blob(data=PNG))
B64 = base64.b64encode(PNG).decode()
INDEX = {B64: PNG_ID}


def test_thumbnail_only_for_a_known_raster_blob() -> None:
    shown = image("image/png", B64, INDEX)
    assert f'<img src="/ui/media/{PNG_ID}"' in shown
    assert 'loading="lazy"' in shown
    assert "base64" not in shown  # never inlined
    for media_type, data, index in [
        ("image/svg+xml", "PHN2Zz4=", {"PHN2Zz4=": PNG_ID}),  # never SVG, even if an id were known
        ("image/png", 'AAAA" onerror="alert(1)', {}),  # no known blob: a marker, nothing copied
        ("image/png", B64, {B64: '" onerror="x'}),  # an index entry that is no object id
        ("text/html", "PGI+", {"PGI+": PNG_ID}),
    ]:
        marker = image(media_type, data, index)
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
        ],
        INDEX,
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
                assert "img-src 'self';" in csp
                assert "data:" not in csp
                assert "default-src 'none'" in csp
                html = page.text
                assert len(re.findall(rf'<img src="/ui/media/{PNG_ID}"', html)) == images
                assert '<img src="data:' not in html
            served = client.get(f"/ui/media/{PNG_ID}")
            assert served.status_code == 200
            assert served.content == PNG
            assert served.headers["content-type"] == "image/png"
            assert served.headers["x-content-type-options"] == "nosniff"
            assert served.headers["cache-control"] == "private, max-age=31536000, immutable"
            exact = client.get(f"/ui/commit/{head.commit_id}/request.json?fmt=anthropic").json()
            assert exact["messages"][0]["content"][1]["source"]["data"] == B64


def test_a_page_with_one_big_image_in_many_messages_stays_small(tmp_path: Path) -> None:
    """30 messages carrying one 2.9 MB image: the page links the image, it does not inline it 30 times."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
    from media_files import png as big_png

    path = tmp_path / "s"
    big = big_png(16, 16, size=2_900_000, seed=3)
    with Tract.open(str(path), durable=False) as t:
        for i in range(30):
            head = t.user([f"shot {i}", {"type": "image", "data": big, "media_type": "image/png"}])
    with LmdbStore(path) as st:
        app, _ = create_app(st, sync=False)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            for fmt in ("openai", "anthropic"):
                page = client.get(f"/ui/commit/{head.commit_id}?fmt={fmt}")
                assert page.status_code == 200
                assert len(page.content) < 200_000
                assert page.text.count(f'src="/ui/media/{object_id(Blob(data=big))}"') == 30


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>', "svg"),
        (b"%PDF-1.4\n%%EOF\n", "a pdf"),
        (b"<html><script>alert(1)</script></html>", "html"),
        ({"type": "dialogue", "role": "user", "text": "x"}, "a message blob"),
    ],
)
def test_the_media_route_serves_raster_images_only(tmp_path: Path, data: object, why: str) -> None:
    path = tmp_path / "s"
    blob = Blob(data=data)
    with LmdbStore(path) as st:
        batch = st.new_batch()
        batch.put(blob)
        batch.put(Blob(data=PNG))
        st.apply(batch)
        app, _ = create_app(st, sync=False)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            assert client.get(f"/ui/media/{object_id(blob)}").status_code == 404, why
            assert client.get(f"/ui/media/{'0' * 64}").status_code == 404  # not stored
            assert client.get(f"/ui/media/{PNG_ID.upper()}").status_code == 404  # not an id
            assert client.get("/ui/media/..%2Fstatic%2Fapp.js").status_code == 404
            assert client.get(f"/ui/media/{PNG_ID}").status_code == 200


def test_the_media_route_needs_the_viewers_token(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with LmdbStore(path) as st:
        batch = st.new_batch()
        batch.put(Blob(data=PNG))
        st.apply(batch)
        app, _ = create_app(st, tokens=TokenTable({READER: ["read"]}))
        with TestClient(app, base_url="http://127.0.0.1") as client:
            assert client.get(f"/ui/media/{PNG_ID}").status_code == 401
            ok = client.get(f"/ui/media/{PNG_ID}", headers={"Authorization": f"Bearer {READER}"})
            assert ok.status_code == 200
            assert ok.content == PNG


def test_anthropic_document_markers_show_the_size_of_the_bytes() -> None:
    """A base64 source shows its decoded size, a text source its UTF-8 size (each converted once)."""
    pdf = base64.b64encode(b"%PDF-1.4 " + b"x" * 3063).decode()  # 3,072 bytes
    html = content_blocks(
        [
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": pdf}},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "é" * 50}},
        ],
        INDEX,
    )
    assert "[document application/pdf 3 KB]" in html
    assert "[document text/plain 100 B]" in html
