"""Small real media files for tests: a PNG of any size (optionally padded to a byte size), JPEG / GIF / WebP
headers with a pixel size, a PDF with pages."""

from __future__ import annotations

import os
import struct
import zlib


def png(width: int = 2, height: int = 2, size: int | None = None, seed: int = 0) -> bytes:
    """A valid PNG; ``size`` pads it (an ancillary chunk of random bytes) to about that many bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes([seed % 256]) * (width * 3) for _ in range(height))
    head = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    body = chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    if size is not None:
        pad = max(0, size - len(head) - len(body) - 12)
        head += chunk(b"tEXt", b"x\x00" + os.urandom(pad)[: max(0, pad - 2)])
    return head + body


def jpeg(width: int, height: int) -> bytes:
    """A JPEG header (SOI, APP0, SOF0) saying ``width`` x ``height``."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00;"


def webp(width: int, height: int) -> bytes:
    """A WebP (VP8X) header saying ``width`` x ``height``."""
    vp8x = b"VP8X" + struct.pack("<I", 10) + b"\x00\x00\x00\x00"
    vp8x += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", 4 + len(vp8x)) + b"WEBP" + vp8x


def pdf(pages: int) -> bytes:
    """A minimal PDF with ``pages`` page objects (and one /Pages node)."""
    objs = [b"1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj"]
    kids = " ".join(f"{3 + i} 0 R" for i in range(pages)).encode()
    objs.append(b"2 0 obj << /Type /Pages /Kids [" + kids + b"] /Count %d >> endobj" % pages)
    objs += [b"%d 0 obj << /Type /Page /Parent 2 0 R >> endobj" % (3 + i) for i in range(pages)]
    return b"%PDF-1.4\n" + b"\n".join(objs) + b"\ntrailer << /Root 1 0 R >>\n%%EOF\n"
