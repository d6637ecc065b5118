"""A rendered message's content blocks as HTML: text, images as thumbnails, markers for documents and the
rest, for both providers' shapes (OpenAI parts, Anthropic blocks, inside tool results too).

**Thumbnails, safely and small.** A page never inlines image bytes (one 3 MB screenshot in 30 messages would
make a 120 MB page): an image is ``<img src="/ui/media/<id>" loading="lazy">``, its media blob's id found
by its exact base64 text in :func:`media_index` (built from the compiled messages, whose parts know their
blob ids), and only when its declared type is PNG, JPEG, GIF or WebP (never SVG, which is a document that
can hold script). The ``/ui/media/<id>`` route (:mod:`tractkv.view.app`) serves a stored blob only when its
own bytes are one of those raster types (sniffed, never taken from the page or the part), with that type,
``nosniff`` and the viewer's authentication; the CSS caps a thumbnail's size. The page's CSP loads images
from ``'self'`` only (``img-src 'self'``): an image by URL is shown as its URL, one whose blob is unknown as
a marker, like documents (``[document application/pdf 12 KB]``).

:func:`elide_media` makes the "request as JSON" block readable: long base64 strings are replaced by a
marker (the ``request.json`` route still serves the exact request).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from tractkv.engine.content import Message, b64, byte_size

from .html import Markup, el, join, pretty_json

THUMBNAIL_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MEDIA_ROUTE = "/ui/media/"  # + a media blob's 64-hex id: its bytes (view/app.py)
_OBJECT_ID = re.compile(r"[0-9a-f]{64}")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_DATA_URL = re.compile(r"data:([a-z0-9.+/-]+);base64,(.*)", re.DOTALL)
ELIDE = 200  # base64 strings longer than this are elided in the JSON view


MediaIndex = Mapping[str, str]
"""An image's exact base64 text -> its media blob id (:func:`media_index`)."""


def media_index(messages: Iterable[Message]) -> dict[str, str]:
    """The base64 text of each distinct image in compiled messages -> its media blob id: how a rendered
    request's image (base64 in either provider's shape) finds the route that serves its bytes."""
    found: dict[str, bytes] = {}
    for message in messages:
        for part in message.parts:
            if part.type == "image" and part.media is not None and part.data is not None:
                found.setdefault(part.media, part.data)
    return {b64(data): oid for oid, data in found.items()}


def content_blocks(blocks: list[Any], media: MediaIndex | None = None) -> Markup:
    """A list of content blocks (either provider's shape) as HTML; ``media`` finds each image's blob."""
    index = media or {}
    return join([_block(block, index) for block in blocks])


def _block(block: object, media: MediaIndex) -> Markup:
    if not isinstance(block, dict):
        return el("pre", pretty_json(block), class_="json")
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return el("pre", block["text"], class_="text")
    if kind == "image_url" and isinstance(block.get("image_url"), dict):
        link = block["image_url"].get("url")
        match = _DATA_URL.fullmatch(link) if isinstance(link, str) else None
        if match is not None:
            return image(match.group(1), match.group(2), media)
        return _marker(f"image {link}")
    if kind == "image" and isinstance(block.get("source"), dict):
        source = block["source"]
        if source.get("type") == "base64":
            return image(str(source.get("media_type")), str(source.get("data", "")), media)
        return _marker(f"image {source.get('url')}")
    if kind in ("document", "file"):
        return _marker(_document(block))
    if kind == "tool_result":
        inner = block.get("content")
        head = el("span", f"tool_result {block.get('tool_use_id')}", class_="key")
        body = (
            content_blocks(inner, media)
            if isinstance(inner, list)
            else el("pre", str(inner or ""), class_="text")
        )
        return el("div", head, body, class_="block tool-result")
    if kind == "tool_use":  # an Anthropic tool call: its input as indented JSON, like OpenAI's arguments
        head = join(
            el("span", "call ", class_="key"),
            el("span", str(block.get("name")), class_="tool-name"),
            " ",
            el("code", str(block.get("id")), class_="call-id"),
        )
        return el(
            "div",
            el("div", head),
            el("pre", pretty_json(block.get("input")), class_="json"),
            class_="context-call",
        )
    if kind == "thinking":
        return el("details", el("summary", "thinking"), el("pre", str(block.get("thinking")), class_="text"))
    if kind == "redacted_thinking":
        return _marker("redacted thinking")
    return el("pre", pretty_json(block), class_="json")


def image(media_type: str, data: str, media: MediaIndex) -> Markup:
    """A thumbnail loaded from the media route, or a marker when the image is not a raster type or its blob
    is not known (see above)."""
    count = decoded_size(data)
    size = byte_size(count)
    oid = media.get(data)
    if media_type in THUMBNAIL_TYPES and oid is not None and _OBJECT_ID.fullmatch(oid) is not None:
        return el(
            "figure",
            el("img", src=MEDIA_ROUTE + oid, alt=f"image {media_type}", class_="thumb", loading="lazy"),
            el(
                "figcaption",
                f"{media_type} {size}",
                class_="muted",
                title=f"{count:,} bytes",
                data_bytes=count,
            ),
            class_="image",
        )
    return _marker(f"image {media_type} {size}")


def _document(block: dict[str, Any]) -> str:
    if block.get("type") == "file" and isinstance(block.get("file"), dict):
        file = block["file"]
        data = str(file.get("file_data", ""))
        match = _DATA_URL.fullmatch(data)
        kind = match.group(1) if match else "file"
        return (
            f"document {kind} {byte_size(decoded_size(match.group(2)) if match else 0)} "
            f"{file.get('filename', '')}".strip()
        )
    source = block.get("source") if isinstance(block.get("source"), dict) else {}
    assert isinstance(source, dict)
    title = f" {block['title']}" if isinstance(block.get("title"), str) else ""
    if source.get("type") == "url":
        return f"document {source.get('url')}{title}"
    data = str(source.get("data", ""))
    size = byte_size(len(data.encode()) if source.get("type") == "text" else decoded_size(data))
    return f"document {source.get('media_type')} {size}{title}"


def _marker(text: str) -> Markup:
    return el("p", f"[{text}]", class_="marker muted")


def decoded_size(text: str) -> int:
    """How many bytes the base64 ``text`` decodes to (what the part holds, not its base64 length: the padding
    ``=`` and line breaks hold none)."""
    chars = len(text) - sum(text.count(ch) for ch in "\r\n ")
    return chars * 3 // 4 - text.rstrip("\r\n ")[-2:].count("=")


def elide_media(value: Any) -> Any:
    """A copy of request parameters with long base64 payloads (data: URLs, ``source.data``, ``file_data``)
    replaced by ``<N base64 characters>``."""
    if isinstance(value, dict):
        return {k: _elide(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [elide_media(v) for v in value]
    return value


def _elide(key: str, value: Any) -> Any:
    if isinstance(value, str) and len(value) > ELIDE and key in ("url", "data", "file_data"):
        match = _DATA_URL.fullmatch(value)
        if match is not None:
            return f"data:{match.group(1)};base64,<{len(match.group(2)):,} base64 characters>"
        if key == "data" and _BASE64.fullmatch(value):
            return f"<{len(value):,} base64 characters>"
    return elide_media(value)
