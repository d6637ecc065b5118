"""The objects a plain-text append makes without their constructors (issue 18: one of each per commit) are
the values the constructors make: the CommitInfo ``t.user`` returns, its datetime, the compiled Message and
the trusted Commit (which still checks every id it did not make itself). The batch's one reflog entry is
made when it is read or written, and reads the same at every point of the batch."""

from __future__ import annotations

import contextlib
import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner

import tractkv.engine.session as session_module
from tractkv import Tract
from tractkv.cli import cli
from tractkv.engine.content import Message, text_message
from tractkv.engine.values import CommitInfo, timestamp
from tractkv.engine.values.records import _EXACT_MICROS
from tractkv.errors import EncodeError
from tractkv.ids import hash_bytes
from tractkv.model import Commit
from tractkv.model.objects import trusted_commit


def _ticks(start: int) -> Any:
    now = iter(range(start, start + 10**9, 7))
    return lambda: next(now)


def _slow_timestamp(micros: int) -> datetime:
    return datetime.fromtimestamp(micros / 1_000_000, tz=UTC)


def test_a_timestamp_is_the_datetime_fromtimestamp_gives() -> None:
    rng = random.Random(18)
    edges = [0, 1, 499_999, 500_000, 999_999, 10**6, 1_764_169_000_123_457, _EXACT_MICROS - 1]
    edges += [_EXACT_MICROS - 10**6 + k for k in (0, 1, 499_999, 500_000, 999_999)]
    for micros in edges + [rng.randrange(_EXACT_MICROS) for _ in range(20_000)]:
        made, slow = timestamp(micros), _slow_timestamp(micros)
        assert made == slow, micros
        assert made.tzinfo is slow.tzinfo
        assert made.fold == slow.fold
        assert made.isoformat() == slow.isoformat()
    for micros in (-1, -(10**6) - 3, _EXACT_MICROS, _EXACT_MICROS + 7):  # out of the exact range: as before
        assert timestamp(micros) == _slow_timestamp(micros)


@pytest.mark.parametrize("in_batch", [False, True])
def test_t_user_returns_the_commit_info_the_general_path_returns(tmp_path: Path, in_batch: bool) -> None:
    """Every field (those left out of equality too) of the CommitInfo a plain text returns is that of the
    general path's for the same message (made to skip the plain-text path), at any clock value."""
    infos: dict[str, list[CommitInfo]] = {"fast": [], "general": []}
    texts = ["hello", "héllo\nwörld", "x" * 500]
    for name, out in infos.items():
        append = session_module.append_text_fast if name == "fast" else session_module.append_text_general
        for start in (1, 1_764_169_000_123_457, _EXACT_MICROS - 10):
            with Tract.open(str(tmp_path / f"{name}{start}"), clock=_ticks(start)) as t:
                block = t.batch() if in_batch else contextlib.nullcontext()
                with block:
                    out.extend(
                        append(t._session, "user" if i % 2 == 0 else "assistant", text)
                        for i, text in enumerate(texts)
                    )
    for fast, general in zip(infos["fast"], infos["general"], strict=True):
        assert type(fast) is CommitInfo
        assert attrs.asdict(fast, recurse=False) == attrs.asdict(general, recurse=False)
        assert fast == general
        assert hash(fast) == hash(general)
        assert fast.created_at.tzinfo is general.created_at.tzinfo
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            fast.role = "system"  # type: ignore[misc]


def test_a_text_message_is_the_message_the_constructor_makes() -> None:
    for role, text in (("user", "hi"), ("assistant", "a\nb ✓")):
        made, built = text_message(role, text), Message(role=role, content=text)
        assert type(made) is Message
        assert attrs.asdict(made, recurse=False) == attrs.asdict(built, recurse=False)
        assert made == built
        assert hash(made) == hash(built)
        assert made.to_dict() == built.to_dict()


def test_a_trusted_commit_skips_only_the_check_of_the_very_id_it_was_told_it_made() -> None:
    made = hash_bytes(b"a commit")
    commit = trusted_commit(
        parents=(made,), content=made, tools=None, operation="append", created_at=5, made=made
    )
    assert commit == Commit(parents=(made,), content=made, created_at=5)
    bad = "".join(["NOT-AN-", "ID"])
    equal_not_same = "".join(["NOT-AN", "-ID"])
    assert bad == equal_not_same
    assert bad is not equal_not_same
    with pytest.raises(EncodeError, match="not an object id"):  # an equal string is not the id it made
        trusted_commit(
            parents=(bad,), content=made, tools=None, operation="append", created_at=5, made=equal_not_same
        )
    with pytest.raises(EncodeError, match="not an object id"):  # ``made`` never covers the tool set
        trusted_commit(parents=(), content=made, tools=bad, operation="append", created_at=5, made=bad)


def test_the_batch_reflog_entry_reads_the_same_whenever_it_is_read(tmp_path: Path) -> None:
    """The batch's entry is made when the batch is read or written: read after each commit (through the API)
    it names that commit, its count and its summary; the CLI reads the written entry the same."""
    path = tmp_path / "s"
    with Tract.open(str(path)) as t:
        t.user("before")
        with t.batch():
            for index in range(5):
                last = (t.user if index % 2 == 0 else t.assistant)(f"line {index}\nsecond line").commit_id
                entry = t.reflog()[0]
                expected = (
                    f"line {index}" if index == 0 else f"batch of {index + 1} commits, the last: line {index}"
                )
                assert (entry.new, entry.message) == (last, expected)
            t.commit({"type": "dialogue", "role": "user", "text": "general path"})  # a str summary
            last = t.assistant("the end").commit_id
    result = CliRunner().invoke(cli, ["--store", str(path), "reflog", "--json"])
    assert result.exit_code == 0, result.output
    entries = json.loads(result.stdout)
    assert [(e["new"], e["operation"], e["message"]) for e in entries[:1]] == [
        (last, "append", "batch of 7 commits, the last: the end")
    ]
    assert len(entries) == 2
