"""The heuristic token counter's shortcut (an upper bound on its word count) never changes a count: counts are
shown to users and stored in compile checkpoints. (Its one-text memo is gone: the session counts each commit's
text once, see tests/engine/test_session.py.)"""

from __future__ import annotations

import re
import string

from hypothesis import example, given
from hypothesis import strategies as st

from tractkv.engine.content import HeuristicCounter
from tractkv.engine.content.tokens import _max_wordish

WORDISH = re.compile(r"\w+|[^\w\s]", re.UNICODE)
ALPHABETS = [
    string.printable,
    " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1fa_.",  # every ASCII space, including the ones \s knows and str.split does
    "a.,;!? ",
    "aé日 .\u00a0\u2003",  # non-ASCII words and spaces take the regex path
]


def reference(text: str) -> int:
    """The counter's definition, spelled out without shortcuts."""
    if not text:
        return 0
    by_chars = (len(text) + 3) // 4
    if len(text) > 20_000:
        return by_chars
    return max(by_chars, (len(WORDISH.findall(text)) * 3 + 3) // 4)


texts = st.sampled_from(ALPHABETS).flatmap(lambda alphabet: st.text(alphabet=alphabet, max_size=120))


@given(texts)
@example("")
@example("a")
@example(". . . . . . . .")
@example("x" * 20_001)
@example("#12 the agent reads a file then calls a tool and writes the summary of what it found")
def test_count_matches_the_definition(text: str) -> None:
    counter = HeuristicCounter()
    assert counter.count(text) == reference(text)


@given(st.text(alphabet=string.printable + "\x1c\x1d\x1e\x1f", max_size=200))
def test_ascii_bound_is_an_upper_bound(text: str) -> None:
    assert _max_wordish(text) >= len(WORDISH.findall(text))
