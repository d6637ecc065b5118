"""Media travel with their commits: a pushed image compiles identically on the other store, gc keeps media
while a message reaches them and drops them when nothing does, and fsck stays clean throughout."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from tractkv import Tract
from tractkv.engine.history import fsck_objects
from tractkv.ids import ObjectId
from tractkv.model import Blob, object_id
from tractkv.store import fsck


def png(seed: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes([seed]) * 6 for _ in range(2))
    ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + ihdr + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def test_pushed_image_compiles_identically_on_the_other_store(tmp_path: Path) -> None:
    image = png(9)
    with Tract.open(str(tmp_path / "a"), durable=False) as a:
        a.user(["what is this?", {"type": "image", "data": image, "media_type": "image/png"}])
        a.assistant("a dot")
        a.remote_add("origin", str(tmp_path / "b"))
        Tract.open(str(tmp_path / "b"), durable=False).close()
        assert a.push().ok
        expected = a.compile()
    with Tract.open(str(tmp_path / "b"), durable=False, branch="main", readonly=True) as b:
        got = b.compile()
        assert got.messages == expected.messages
        assert got.to_anthropic() == expected.to_anthropic()
        assert got.to_openai() == expected.to_openai()
        assert got.token_count == expected.token_count
        assert got.messages[0].parts[1].data == image
        assert fsck(b.store).ok
        assert fsck_objects(b.store) == ()


def test_gc_keeps_reachable_media_and_drops_unreachable(tmp_path: Path) -> None:
    kept, dropped = png(1), png(2)
    kept_id, dropped_id = ObjectId(object_id(Blob(data=kept))), ObjectId(object_id(Blob(data=dropped)))
    with Tract.open(str(tmp_path / "s"), durable=False) as t:
        t.user(["keep", {"type": "image", "data": kept, "media_type": "image/png"}])
        base = t.head
        assert base is not None
        t.user(["drop", {"type": "image", "data": dropped, "media_type": "image/png"}])
        t.gc(min_age_hours=0)
        assert t.store.has(kept_id)
        assert t.store.has(dropped_id)
        t.reset(base, mode="hard")
        t.gc(min_age_hours=0)
        assert t.store.has(kept_id)
        assert not t.store.has(dropped_id)
        assert fsck(t.store).ok
        assert fsck_objects(t.store) == ()
        assert t.compile().messages[0].parts[1].data == kept
