"""Binary media in messages: the media types a message may carry, checks that bytes are what their media
type says, data: URLs and base64, and what a file's header tells (an image's pixel size, a PDF's pages).

Accepted media types (what both providers take):

* images: ``image/png``, ``image/jpeg``, ``image/gif``, ``image/webp`` (never SVG: it is a document that
  can hold script);
* documents: ``application/pdf`` and ``text/plain`` (UTF-8).

The bytes must start the way their media type says (PNG signature, JPEG SOI marker, ``GIF87a`` / ``GIF89a``,
``RIFF....WEBP``, ``%PDF-``; plain text must decode as UTF-8): Anthropic rejects an image whose bytes do not
match its declared type, so a mismatch is refused when the message is written, not when it is sent.
:func:`check_format` states these format rules; :func:`sniff` is the set of media types some bytes satisfy
(what the validator compares a received part's declared type against).

**Size limits** (:func:`check_bytes`, policy for new writes): an image whose base64 form is over
:data:`MAX_IMAGE_BYTES` (5 MB, so about 3.75 MB of file) or with more than :data:`MAX_IMAGE_SIDE` (8000)
pixels on a side, or a document over :data:`MAX_DOCUMENT_BYTES` (32 MB), is refused when the message is
written. So is a document over :data:`MAX_MEDIA_BYTES` (just under 16 MiB): the file is one stored object, and
no object may be over :data:`~tractkv.model.MAX_OBJECT_BYTES`, the one size limit every store, hub and bundle
shares (docs/format.md, "Size limits"), which makes the 32 MB figure unreachable today.
The figures are Anthropic's, the tighter of the two providers (Vision guide,
https://docs.anthropic.com/en/docs/build-with-claude/vision: at most 5 MB per image through the API, and
images larger than 8000 x 8000 px are rejected; the API measures the 5 MB on the base64 data it receives.
API overview, https://docs.anthropic.com/en/api/overview: a Messages request is at most 32 MB): a part over
them could be stored but never sent. Anthropic's tighter rule for requests with more than 20 images (2000 px
per side) depends on the whole request, so it is not checked here. The validator does not re-check sizes on receive
or fsck: limits are policy for what this library writes and may change; a received object is judged by the
format rules only, so a store written by another version stays readable.
"""

from __future__ import annotations

import re
import struct

from tractkv.model import MAX_OBJECT_BYTES, Blob, encode

IMAGE_TYPES = ("image/gif", "image/jpeg", "image/png", "image/webp")
DOCUMENT_TYPES = ("application/pdf", "text/plain")
PDF = "application/pdf"
TEXT = "text/plain"


MAX_IMAGE_BYTES = 5 * 1024 * 1024  # Anthropic API: 5 MB per image, measured on its base64 form
MAX_IMAGE_SIDE = 8000  # Anthropic: an image larger than 8000 px on a side is rejected
MAX_DOCUMENT_BYTES = 32 * 1024 * 1024  # Anthropic: a Messages request is at most 32 MB
#: The largest file one media blob holds within the object size limit (a blob's own encoding around the bytes,
#: plus 4 for the CBOR length of a byte string over 64 KiB): the tighter limit for documents in practice.
MAX_MEDIA_BYTES = MAX_OBJECT_BYTES - len(encode(Blob(data=b""))) - 4


def check_bytes(media_type: str, data: bytes) -> str | None:
    """Why ``data`` may not be written as a ``media_type`` part (None when it may): the format rules
    (:func:`check_format`) and the size limits (see the module docstring)."""
    problem = check_format(media_type, data)
    if problem is not None:
        return problem
    if media_type in IMAGE_TYPES:
        encoded = 4 * ((len(data) + 2) // 3)  # its base64 length, what Anthropic measures
        if encoded > MAX_IMAGE_BYTES:
            return (
                f"the image is {_mb(len(data))} ({_mb(encoded)} as base64), over the {_mb(MAX_IMAGE_BYTES)} "
                "of base64 Anthropic takes per image"
            )
        size = image_size(data)
        if size is not None and max(size) > MAX_IMAGE_SIDE:
            return (
                f"the image is {size[0]} x {size[1]} pixels, over the {MAX_IMAGE_SIDE} px per side "
                "providers take (scale it down first)"
            )
    elif len(data) > MAX_DOCUMENT_BYTES:
        return f"the document is {_mb(len(data))}, over the {_mb(MAX_DOCUMENT_BYTES)} a request may hold"
    elif len(data) > MAX_MEDIA_BYTES:
        return (
            f"the document is {len(data):,} bytes, over the {MAX_MEDIA_BYTES:,} one stored object holds "
            f"(the {_mb(MAX_OBJECT_BYTES)} size limit every store, hub and bundle reads)"
        )
    return None


def _mb(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB"


def sniff(data: bytes) -> frozenset[str]:
    """The accepted media types whose format rules ``data`` satisfies (:func:`check_format`; empty when
    none). Several at once is possible: a PDF or a GIF may also be valid UTF-8 text."""
    return frozenset(t for t in (*IMAGE_TYPES, *DOCUMENT_TYPES) if check_format(t, data) is None)


def raster_type(data: bytes) -> str | None:
    """The image media type ``data`` is by its header (PNG, JPEG, GIF or WebP: raster images only, never
    SVG), None when it is none of them."""
    return next((t for t in IMAGE_TYPES if check_format(t, data) is None), None)


def check_format(media_type: str, data: bytes) -> str | None:
    """Why ``data`` is not a valid ``media_type`` file (None when it is, as far as its header tells); no
    size limits."""
    if not data:
        return "empty data"
    if media_type == "image/png":
        ok = data.startswith(b"\x89PNG\r\n\x1a\n")
    elif media_type == "image/jpeg":
        ok = data.startswith(b"\xff\xd8\xff")
    elif media_type == "image/gif":
        ok = data.startswith((b"GIF87a", b"GIF89a"))
    elif media_type == "image/webp":
        ok = len(data) >= 12 and data.startswith(b"RIFF") and data[8:12] == b"WEBP"
    elif media_type == PDF:
        ok = data.startswith(b"%PDF-")
    elif media_type == TEXT:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return "text/plain data is not UTF-8"
        return None
    else:
        return f"unsupported media type {media_type!r}"
    return None if ok else f"the data is not a {media_type} file (its first bytes say otherwise)"


def decode_base64(text: object) -> bytes:
    """Strict standard base64 (whitespace-free, padded) to bytes.

    Raises:
        ValueError: not a string, or not valid base64.
    """
    if not isinstance(text, str):
        raise ValueError(f"base64 data must be a string, not {type(text).__name__}")
    import base64  # lazy: keeps `import tractkv` light
    import binascii

    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"invalid base64 data ({exc})") from None


# Patterns are compiled on first use (re caches them): ``import tractkv`` compiles none of them.
_DATA_URL = r"data:([a-zA-Z0-9.+/-]+);base64,(.*)"


def parse_data_url(url: str) -> tuple[str, bytes]:
    """``data:<media type>;base64,<data>`` as (media type, bytes).

    Raises:
        ValueError: another form (only base64 data: URLs are accepted) or invalid base64.
    """
    match = re.fullmatch(_DATA_URL, url, re.DOTALL)
    if match is None:
        raise ValueError("a data: URL must be data:<media type>;base64,<data>")
    return match.group(1).lower(), decode_base64(match.group(2))


def data_url(media_type: str, data: bytes) -> str:
    """The base64 data: URL of ``data`` (what OpenAI takes for inline images and files)."""
    import base64  # lazy: keeps `import tractkv` light

    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def b64(data: bytes) -> str:
    """Standard base64 text of ``data``."""
    import base64  # lazy: keeps `import tractkv` light

    return base64.b64encode(data).decode("ascii")


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) in pixels from a PNG, GIF, JPEG or WebP header; None when the header does not say."""
    try:
        if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR":
            w, h = struct.unpack(">II", data[16:24])
            return _positive(w, h)
        if data.startswith((b"GIF87a", b"GIF89a")):
            w, h = struct.unpack("<HH", data[6:10])
            return _positive(w, h)
        if data.startswith(b"RIFF") and data[8:12] == b"WEBP":
            return _webp_size(data)
        if data.startswith(b"\xff\xd8"):
            return _jpeg_size(data)
    except struct.error:
        return None
    return None


def _positive(w: int, h: int) -> tuple[int, int] | None:
    return (w, h) if w > 0 and h > 0 else None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return _positive(w, h)
    if chunk == b"VP8L" and data[20:21] == b"\x2f":
        bits = int.from_bytes(data[21:25], "little")
        return _positive((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        w, h = struct.unpack("<HH", data[26:30])
        return _positive(w & 0x3FFF, h & 0x3FFF)
    return None


_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    n = len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if marker in _SOF:
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return _positive(w, h)
        if length < 2:
            return None
        i += 2 + length
    return None


_PDF_PAGE = rb"/Type\s*/Page(?![A-Za-z])"


def pdf_pages(data: bytes) -> int:
    """The number of page objects (``/Type /Page``, not ``/Pages``) in a PDF; 0 when none is found (e.g. in
    compressed object streams)."""
    return len(re.findall(_PDF_PAGE, data))
