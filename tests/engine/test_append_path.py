"""The append path does each piece of work once, and a store's size does not depend on how commits were
batched (issue 18).

* A commit on a stored parent does not read and decode the parent again to derive its ``commit_tools`` row
  (the session hands the batch the parent it holds).
* Inside ``batch()``, the ``set_tools`` setting and the tool set's tag are read once per batch, not once per
  commit; a tool set the setting names is still checked (the trust rules hold for what comes from disk).
* After a large batch the store commits a tiny transaction, so the next batch reuses the pages the first one
  freed (LMDB hands a page freed by transaction N out again from N + 2 on).
* Reflog entries are written without canonical key order (never hashed); entries of either encoding read back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import tractkv.engine.session as session_module
import tractkv.store.base as store_base
from tractkv import Tract, codec
from tractkv.cli import cli
from tractkv.engine.compile import CompileState
from tractkv.engine.content import ACTIVE_TOOLS
from tractkv.errors import ContentError, InvalidInput
from tractkv.ids import oid_to_raw
from tractkv.model import Blob
from tractkv.store import Table
from tractkv.store.lmdb import LmdbStore

TOOLS = [
    {
        "type": "function",
        "function": {"name": f"tool_{i}", "parameters": {"type": "object", "properties": {}}},
    }
    for i in range(3)
]


def _cli(store: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--store", str(store), *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_commit_on_a_stored_parent_with_tools_decodes_no_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Tract.open(str(tmp_path / "s"), durable=False) as t:
        t.set_tools(TOOLS)
        t.user("first")
        decoded: list[bytes] = []
        real = store_base.decode

        def counting(data: bytes, *args: Any, **kwargs: Any) -> Any:
            decoded.append(data)
            return real(data, *args, **kwargs)

        monkeypatch.setattr(store_base, "decode", counting)
        info = t.assistant("second")
        t.user("third")
        assert decoded == []  # before: the parent commit, once per commit, to compare tool sets
        assert info.toolset_id is not None
    # the index still says where the tool set came in (one row: the first commit), as before
    with LmdbStore(tmp_path / "s", durable=False) as store:
        assert store.table_count(Table.COMMIT_TOOLS) == 1


def test_a_batch_reads_the_tool_setting_and_the_tool_set_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Tract.open(str(tmp_path / "s"), durable=False) as t:
        t.set_tools(TOOLS)
        setting = t.store.table_get(Table.META, ACTIVE_TOOLS + b"refs/heads/main")
        assert setting is not None
        toolset_key = oid_to_raw(setting.decode())
        t.user("before the batch")  # the tool set is linked (and trusted) from here on in this session
        t._session._stored_toolsets.clear()  # a fresh session's view: nothing trusted yet
        reads: list[tuple[Table, bytes]] = []
        real = type(t.store)._raw_get

        def counting(self: Any, table: Table, key: bytes) -> bytes | None:
            reads.append((table, key))
            return real(self, table, key)

        monkeypatch.setattr(type(t.store), "_raw_get", counting)
        with t.batch():
            for index in range(5):
                t.user(f"message {index}")
        setting_reads = [r for r in reads if r == (Table.META, ACTIVE_TOOLS + b"refs/heads/main")]
        toolset_reads = [r for r in reads if r == (Table.OBJECTS, toolset_key)]
        assert len(setting_reads) == 1  # before: 5
        assert len(toolset_reads) == 1  # before: 5 (each commit's check read and decoded the tool set)
        assert t.compile().commit_count == 6
        assert len(t.compile().tools) == 3


@pytest.mark.parametrize("in_batch", [False, True])
def test_a_setting_naming_no_tool_set_is_still_refused(tmp_path: Path, in_batch: bool) -> None:
    with Tract.open(str(tmp_path / "s"), durable=False) as t:
        t.user("hello")
        blob = t.store.put(Blob(data="not a tool set"))
        batch = t.store.new_batch()
        batch.table_put(Table.META, ACTIVE_TOOLS + b"refs/heads/main", blob.encode())  # as a damaged disk
        t.store.apply(batch)
        head = t._session.head

        def commit() -> None:
            if in_batch:
                with t.batch():
                    t.user("linked to a blob")
            else:
                t.user("linked to a blob")

        with pytest.raises(InvalidInput, match="tools"):
            commit()
        assert t._session.head == head


def _build(path: Path, count: int, per: int) -> None:
    with Tract.open(str(path), durable=False) as t:
        for first in range(0, count, per):
            with t.batch():
                for index in range(first, min(first + per, count)):
                    text = f"message {index}: " + "the agent reads a file and writes a summary " * 4
                    (t.user if index % 2 == 0 else t.assistant)(text)


@pytest.mark.slow
def test_a_history_written_in_large_batches_does_not_take_much_more_space(tmp_path: Path) -> None:
    # 5,000 commits, 1,000 per batch, against one commit per transaction: 1.66x the size before (each batch
    # touches most leaves of the objects table, and its freed copies could not be reused by the next batch),
    # about 1.3x now (the rest is the batch's own copy-on-write pages: see benchmarks/RESULTS.md, "Space and
    # large batches").
    _build(tmp_path / "batched", 5000, 1000)
    _build(tmp_path / "single", 5000, 1)
    batched = json.loads(_cli(tmp_path / "batched", "stats", "--json"))
    single = json.loads(_cli(tmp_path / "single", "stats", "--json"))
    assert batched["objects"] == single["objects"] == 10000
    assert batched["size_bytes"] < 1.5 * single["size_bytes"], (batched["size_bytes"], single["size_bytes"])


def test_reflog_entries_of_either_encoding_read_back(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with Tract.open(str(path), durable=False) as t:
        first = t.user("one").commit_id
        second = t.user("two").commit_id
        # an entry as releases before issue 18 wrote it (canonical CBOR), after the two new ones
        entry = {"old": second, "new": first, "op": "reset --soft", "msg": "old-style entry", "ts": 1}
        batch = t.store.new_batch()
        batch.table_put(Table.REFLOG, b"refs/heads/main\0" + (10**6).to_bytes(8, "big"), codec.dumps(entry))
        t.store.apply(batch)
    with LmdbStore(path, durable=False) as store:
        raw = [v for _, v in store.table_iter(Table.REFLOG)]
    assert codec.dumps(codec.loads(raw[0])) != raw[0]  # a new entry: not in canonical key order
    entries = json.loads(_cli(path, "reflog", "--json"))
    assert [e["message"] for e in entries][:3] == ["old-style entry", "two", "one"]
    assert entries[0]["old"] == second
    assert entries[0]["new"] == first


def test_dumps_local_reads_back_as_the_same_value() -> None:
    value = {"zz": 1, "a": [True, None, "text", b"\x00\x01"], "m": {"b": 2, "a": -3}}
    data = codec.dumps_local(value)
    assert codec.loads(data) == value
    assert data != codec.dumps(value)  # insertion order kept: no sort


def _ticks() -> Any:
    now = iter(range(1_700_000_000_000_000, 1_800_000_000_000_000, 7))
    return lambda: next(now)


def test_plain_text_messages_get_the_ids_the_general_path_gives(tmp_path: Path) -> None:
    """t.user / t.assistant with plain text build their blob and commit without re-checking what they made;
    the same messages through the general path (an extra ``name: None`` sends them there) are the same
    objects, compile the same and count the same tokens."""
    texts = ["hello", "héllo wörld ✓", "x" * 300, "a\nb\tc"]
    with (
        Tract.open(str(tmp_path / "fast"), clock=_ticks()) as fast,
        Tract.open(str(tmp_path / "general"), clock=_ticks()) as general,
    ):
        for index, text in enumerate(texts):
            role = "user" if index % 2 == 0 else "assistant"
            a = (fast.user if role == "user" else fast.assistant)(text)
            b = general.commit({"type": "dialogue", "role": role, "text": text, "name": None})
            assert (a.commit_id, a.content_id, a.token_count, a.content) == (
                b.commit_id,
                b.content_id,
                b.token_count,
                b.content,
            )
        assert fast.compile().to_dicts() == general.compile().to_dicts()
    shown = [_cli(tmp_path / name, "compile", "--json") for name in ("fast", "general")]
    assert shown[0] == shown[1]


def test_plain_text_with_a_lone_surrogate_is_refused_as_before(tmp_path: Path) -> None:
    with Tract.open(str(tmp_path / "s"), durable=False) as t:
        with pytest.raises(ContentError, match="surrogate") as fast:
            t.user("bad \ud800")
        with pytest.raises(ContentError, match="surrogate") as general:
            t.commit({"type": "dialogue", "role": "user", "text": "bad \ud800", "name": None})
        assert str(fast.value) == str(general.value)
        assert t._session.head is None


def test_a_batch_logs_one_move_per_branch(tmp_path: Path) -> None:
    """A batch moves its branch once (one compare-and-swap from the tip it started from): the reflog has one
    entry for it, from that tip to the last commit, and ``main@{1}`` is the tip before the batch."""
    path = tmp_path / "s"
    with Tract.open(str(path)) as t:
        before = t.user("before").commit_id
        with t.batch():
            t.user("one")
            second = t.assistant("two").commit_id
            inside = t.reflog()  # reads inside the batch see the entry as it will be written
            assert (inside[0].old, inside[0].new, inside[0].message) == (
                before,
                second,
                "batch of 2 commits, the last: two",
            )
            last = t.user("three").commit_id
        with t.batch():
            single = t.assistant("alone").commit_id
    entries = json.loads(_cli(path, "reflog", "--json"))
    assert [(e["old"], e["new"], e["operation"], e["message"]) for e in entries] == [
        (last, single, "append", "alone"),
        (before, last, "append", "batch of 3 commits, the last: three"),
        (None, before, "append", "before"),
    ]
    assert json.loads(_cli(path, "show", "main@{1}", "--json"))["commit_id"] == last
    assert json.loads(_cli(path, "show", "main@{2}", "--json"))["commit_id"] == before
    assert len(json.loads(_cli(path, "log", "--json"))) == 5  # every commit is in history


def test_plain_text_appends_in_a_batch_make_what_the_general_path_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside batch(), with a tool set in force: the plain-text path (no re-check of the commit it built, the
    compile state updated by ``apply_text``) returns the CommitInfo, writes the objects and builds the compile
    state (in this process and from the store in a fresh handle) that the general path does (the same calls
    with the plain-text test made to fail: check_commit, ``CompileState.apply``, ``commit_info``)."""
    texts = [f"message {i}: " + "words and more words " * (i % 5) for i in range(40)]
    infos: dict[str, list[Any]] = {"fast": [], "general": []}
    taken: dict[str, int] = {"fast": 0, "general": 0}
    real_apply_text = CompileState.apply_text

    def counting(self: CompileState, *args: Any) -> Any:
        taken[name] += 1  # the store being written
        return real_apply_text(self, *args)

    monkeypatch.setattr(CompileState, "apply_text", counting)
    for name, out in infos.items():
        append = session_module.append_text_fast if name == "fast" else session_module.append_text_general
        with Tract.open(str(tmp_path / name), clock=_ticks(), durable=False) as t:
            t.set_tools(TOOLS)
            with t.batch():
                for index, text in enumerate(texts):
                    info = append(t._session, "user" if index % 2 == 0 else "assistant", text)
                    out.append(info)
                mid = t.compile().to_dicts()  # reads inside the batch see the staged commits
            out.append((mid, t.compile().to_dicts(), t.compile().token_count))
        with Tract.open(str(tmp_path / name)) as fresh:
            out.append((fresh.compile().to_dicts(), fresh.compile().token_count))
    assert taken == {"fast": len(texts), "general": 0}
    for fast, general in zip(infos["fast"], infos["general"], strict=True):
        if isinstance(fast, tuple):
            assert fast == general
        else:
            assert fast.to_json() == general.to_json()
            assert (fast.content, fast.usage, fast.metadata) == (general.content, None, None)
    assert infos["fast"][0].toolset_id is not None
