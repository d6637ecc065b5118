"""The session core: read-only mode writes nothing and refuses every write, tokens are counted once per
commit, and the facade's reads and writes all go through one session."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

from tractkv import ReadOnlySession, Tract
from tractkv.cli import cli
from tractkv.engine.session import Session
from tractkv.engine.tokens import MESSAGE_OVERHEAD
from tractkv.store import LmdbStore, Reader, Store, Table


def _snapshot(reader: Reader) -> dict[str, list[tuple[bytes, bytes]]]:
    """Every row of every table (the whole store's state)."""
    return {table.value: list(reader.table_iter(table)) for table in Table}


def _history(t: Tract) -> None:
    t.system("You are terse.")
    t.user("Hello")
    t.assistant("", tool_calls=[{"id": "c1", "name": "lookup", "arguments": {"q": "x"}}])
    t.tool_result("c1", "lookup", "found x")
    t.assistant("Found it.")
    t.branch("side")
    t.user("on the side")
    t.switch("main")


WRITES: list[tuple[str, Callable[[Tract], object]]] = [
    ("commit", lambda t: t.user("more")),
    (
        "edit",
        lambda t: t.commit({"type": "dialogue", "role": "user", "text": "x"}, "edit", edit_target="HEAD~4"),
    ),
    ("annotate", lambda t: t.annotate("HEAD~4", "pinned")),
    ("tool_result", lambda t: t.tool_result("c1", "lookup", "again")),
    ("branch", lambda t: t.branch("new")),
    ("delete_branch", lambda t: t.delete_branch("side", force=True)),
    ("merge", lambda t: t.merge("side")),
    ("reset", lambda t: t.reset("HEAD~1")),
    ("set_tools", lambda t: t.set_tools([])),
    ("gc", lambda t: t.gc(min_age_hours=0)),
    ("compress", lambda t: t.compress(content="summary")),
    ("batch", lambda t: t.batch().__enter__()),
    ("remote_add", lambda t: t.remote_add("origin", "/nowhere")),
]


@pytest.fixture
def store(tmp_path: Any) -> Store:
    s = LmdbStore(str(tmp_path / "s"), durable=False)
    with Tract(s, owns_store=False) as t:
        _history(t)
    return s


@pytest.mark.parametrize(("name", "write"), WRITES, ids=[w[0] for w in WRITES])
def test_read_only_refuses_every_write_and_changes_nothing(
    store: Store, name: str, write: Callable[[Tract], object]
) -> None:
    before = _snapshot(store)
    t = Tract(store, owns_store=False, readonly=True)
    with pytest.raises(ReadOnlySession):
        write(t)
    t.close()
    assert _snapshot(store) == before


def test_read_only_reads_everything_and_writes_nothing(store: Store) -> None:
    before = _snapshot(store)
    with Tract(store, owns_store=False, readonly=True) as reader:
        with Tract(store, owns_store=False) as writer:
            assert reader.compile().to_openai() == writer.compile().to_openai()
            assert [c.commit_id for c in reader.log()] == [c.commit_id for c in writer.log()]
            assert reader.status().message_count == writer.status().message_count
        assert reader.diff("side").entries
        assert reader.reflog()
        assert [b.name for b in reader.list_branches()] == ["main", "side"]
        assert [u.tool_name for u in reader.tool_usages()] == []
        reader.switch("side")  # moves this handle only: the stored HEAD stays
        assert reader.compile().messages[-1].content == "on the side"
        reader.checkout("main~1")
        assert reader.is_detached
    assert _snapshot(store) == before


def test_read_only_session_never_writes_head_for_an_explicit_branch(store: Store) -> None:
    before = _snapshot(store)
    session = Session(store, branch="side", readonly=True)
    assert session.current_branch == "side"
    assert session.compile().messages[-1].content == "on the side"
    session.close()
    assert _snapshot(store) == before


class CountingCounter:
    """A token counter that records each text it counts."""

    name = "counting"

    def __init__(self) -> None:
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        self.texts.append(text)
        return len(text.split())


def test_tokens_are_counted_once_per_commit() -> None:
    counter = CountingCounter()
    with Tract.open(token_counter=counter) as t:
        t.system("be brief")  # the first commit builds the state: replays nothing, counts its text once
        counter.texts.clear()
        info = t.user("one two three")
        assert counter.texts == ["one two three"]
        assert info.token_count == 3 + MESSAGE_OVERHEAD
        counter.texts.clear()
        edited = t.commit(
            {"type": "dialogue", "role": "user", "text": "four five"}, "edit", edit_target="HEAD"
        )
        assert counter.texts == ["four five"]
        assert edited.token_count == 2 + MESSAGE_OVERHEAD
        assert t.compile().token_count == (2 + MESSAGE_OVERHEAD) * 2


def test_cli_read_commands_write_nothing(tmp_path: Any) -> None:
    path = str(tmp_path / "cli")
    with Tract.open(path, durable=False) as t:
        _history(t)
    with LmdbStore(path) as s:
        before = _snapshot(s)
    runner = CliRunner()
    for args in (
        ["log"],
        ["log", "--graph"],
        ["show", "HEAD"],
        ["compile", "--format", "openai"],
        ["status"],
        ["diff", "side"],
        ["reflog"],
        ["usage"],
        ["usage", "--stats"],
        ["export"],
    ):
        result = runner.invoke(cli, ["--store", path, *args])
        assert result.exit_code == 0, (args, result.output)
    with LmdbStore(path) as s:
        assert _snapshot(s) == before


def test_commit_hash_is_a_deprecated_alias_of_commit_id() -> None:
    with Tract.open() as t:
        info = t.user("hi")
        with pytest.warns(DeprecationWarning, match="commit_id"):
            assert info.commit_hash == info.commit_id
        assert "commit_hash" not in info.to_json()
