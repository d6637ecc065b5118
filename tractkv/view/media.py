"""A rendered message's content blocks as HTML: text, images as thumbnails, markers for documents and the
rest, for both providers' shapes (OpenAI parts, Anthropic blocks, inside tool results too).

**Thumbnails, safely.** An image is shown as ``<img src="data:...">`` only when its media type is PNG, JPEG,
GIF or WebP (never SVG, which is a document that can hold script) and its data is nothing but base64
characters, at most :data:`MAX_THUMBNAIL_BASE64` of them; the data: URL is rebuilt from those two checked
values, never copied from the store, and escaped like every attribute. The page's CSP allows images from
``data:`` and nothing else new (``img-src 'self' data:``); an image by URL is shown as its URL (the CSP
would not load it anyway). Anything else is a marker such as ``[document application/pdf 12 KB]``.

:func:`elide_media` makes the "request as JSON" block readable: long base64 strings are replaced by a
marker (the ``request.json`` route still serves the exact request).
"""

from __future__ import annotations

import re
from typing import Any

from .html import Markup, el, join, pretty_json

THUMBNAIL_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_THUMBNAIL_BASE64 = 4_000_000  # characters (~3 MB of image); larger ones are shown as a marker
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_DATA_URL = re.compile(r"data:([a-z0-9.+/-]+);base64,(.*)", re.DOTALL)
ELIDE = 200  # base64 strings longer than this are elided in the JSON view


def content_blocks(blocks: list[Any]) -> Markup:
    """A list of content blocks (either provider's shape) as HTML."""
    return join([_block(block) for block in blocks])


def _block(block: object) -> Markup:
    if not isinstance(block, dict):
        return el("pre", pretty_json(block), class_="json")
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return el("pre", block["text"], class_="text")
    if kind == "image_url" and isinstance(block.get("image_url"), dict):
        link = block["image_url"].get("url")
        match = _DATA_URL.fullmatch(link) if isinstance(link, str) else None
        if match is not None:
            return image(match.group(1), match.group(2))
        return _marker(f"image {link}")
    if kind == "image" and isinstance(block.get("source"), dict):
        source = block["source"]
        if source.get("type") == "base64":
            return image(str(source.get("media_type")), str(source.get("data", "")))
        return _marker(f"image {source.get('url')}")
    if kind in ("document", "file"):
        return _marker(_document(block))
    if kind == "tool_result":
        inner = block.get("content")
        head = el("span", f"tool_result {block.get('tool_use_id')}", class_="key")
        body = (
            content_blocks(inner) if isinstance(inner, list) else el("pre", str(inner or ""), class_="text")
        )
        return el("div", head, body, class_="block tool-result")
    if kind == "thinking":
        return el("details", el("summary", "thinking"), el("pre", str(block.get("thinking")), class_="text"))
    if kind == "redacted_thinking":
        return _marker("redacted thinking")
    return el("pre", pretty_json(block), class_="json")


def image(media_type: str, data: str) -> Markup:
    """A thumbnail of base64 image data, or a marker when it is not a safe raster image (see above)."""
    size = _size(len(data))
    if (
        media_type in THUMBNAIL_TYPES
        and len(data) <= MAX_THUMBNAIL_BASE64
        and _BASE64.fullmatch(data) is not None
    ):
        return el(
            "figure",
            el("img", src=f"data:{media_type};base64,{data}", alt=f"image {media_type}", class_="thumb"),
            el("figcaption", f"{media_type} {size}", class_="muted"),
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
            f"document {kind} {_size(len(match.group(2)) if match else 0)} {file.get('filename', '')}".strip()
        )
    source = block.get("source") if isinstance(block.get("source"), dict) else {}
    assert isinstance(source, dict)
    title = f" {block['title']}" if isinstance(block.get("title"), str) else ""
    if source.get("type") == "url":
        return f"document {source.get('url')}{title}"
    data = str(source.get("data", ""))
    size = _size(len(data) if source.get("type") == "text" else len(data) * 3 // 4)
    return f"document {source.get('media_type')} {size}{title}"


def _marker(text: str) -> Markup:
    return el("p", f"[{text}]", class_="marker muted")


def _size(base64_chars: int) -> str:
    n = base64_chars * 3 // 4
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{round(n / 1024)} KB"
    return f"{n / (1024 * 1024):.1f} MB"


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
