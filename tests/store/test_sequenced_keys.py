"""Store format 2: sequenced keys (reflog entries, tool versions) numbered from their own prefix's last key,
no counter row; a durable commit is one transaction writing only its own rows; format 1 stores migrate."""

from __future__ import annotations

import json
from pathlib import Path

import lmdb
from click.testing import CliRunner

from tractkv import Tract
from tractkv.cli import cli
from tractkv.engine.compile import CHECKPOINT_EVERY
from tractkv.model import ToolSchema
from tractkv.store import STORE_FORMAT, LmdbStore, Store, Table, fsck
from tractkv.store.base import SEQ

MAIN = b"refs/heads/main\0"


def _tool(version: int) -> ToolSchema:
    return ToolSchema(
        name="search", schema={"type": "function", "function": {"name": "search", "v": version}}
    )


def ok(store: str, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--store", store, *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def numbers(store: Store, table: Table, prefix: bytes) -> list[int]:
    return [SEQ.unpack(key[len(prefix) :])[0] for key, _ in store.table_iter(table, prefix)]


def test_each_prefix_is_numbered_from_its_own_last_key_and_a_batch_predicts_the_numbers(store: Store) -> None:
    batch = store.new_batch()
    for n in range(3):
        batch.append_log(Table.REFLOG, b"refs/heads/main", {"n": n})
        batch.append_log(Table.REFLOG, b"refs/heads/b", {"n": n})
    batch.put(_tool(1))
    store.apply(batch)
    assert numbers(store, Table.REFLOG, MAIN) == [1, 2, 3]
    assert numbers(store, Table.REFLOG, b"refs/heads/b\0") == [1, 2, 3]
    assert numbers(store, Table.TOOL_VERSIONS, b"search\0") == [1]
    assert store.table_get(Table.META, b"seq") is None  # no counter row

    # gc dropping the newest entry of a prefix in the batch that logs: the next number follows what is left
    batch = store.new_batch()
    batch.table_put(Table.REFLOG, MAIN + SEQ.pack(3), None)
    batch.append_log(Table.REFLOG, b"refs/heads/main", {"n": "after"})
    batch.append_log(Table.REFLOG, b"refs/heads/b", {"n": "after"})
    batch.put(_tool(2))
    predicted = [list(batch.table_iter(t, p)) for t, p in _SEEN]
    store.apply(batch)
    assert [list(store.table_iter(t, p)) for t, p in _SEEN] == predicted
    assert numbers(store, Table.REFLOG, MAIN) == [1, 2, 3]
    assert [v for _, v in store.log_entries(Table.REFLOG, b"refs/heads/main")][-1] == {"n": "after"}
    assert numbers(store, Table.REFLOG, b"refs/heads/b\0") == [1, 2, 3, 4]
    assert numbers(store, Table.TOOL_VERSIONS, b"search\0") == [1, 2]

    # a later batch after that delete (the memory store caches each prefix's highest number)
    batch = store.new_batch()
    batch.append_log(Table.REFLOG, b"refs/heads/main", {"n": "later"})
    store.apply(batch)
    assert numbers(store, Table.REFLOG, MAIN) == [1, 2, 3, 4]


_SEEN = [(Table.REFLOG, MAIN), (Table.REFLOG, b"refs/heads/b\0"), (Table.TOOL_VERSIONS, b"search\0")]


def _as_format_1(path: str) -> dict[bytes, bytes]:
    """Rewrite a closed store as format 1 left it: one counter numbering every reflog entry in the order they
    were written (refs interleaved), the counter row in ``meta``, format 1. Returns the reflog rows."""
    env = lmdb.open(path, max_dbs=32, subdir=True)
    reflog, meta = env.open_db(b"reflog"), env.open_db(b"meta")
    with env.begin(write=True) as txn:
        rows = list(txn.cursor(db=reflog))
        by_time = sorted(rows, key=lambda row: (json.dumps(str(row[1])), row[0]))  # any one global order
        for key, _ in rows:
            txn.delete(key, db=reflog)
        global_rows = {}
        for number, (key, value) in enumerate(by_time, start=1):
            global_rows[key[:-8] + SEQ.pack(number)] = value
            txn.put(key[:-8] + SEQ.pack(number), value, db=reflog)
        txn.put(b"seq", SEQ.pack(len(rows) + 5), db=meta)  # a counter ahead of every key, as gc leaves it
        txn.put(b"format", b"1", db=meta)
    env.close()
    return global_rows


def test_a_format_1_store_is_migrated_on_open_and_its_reflog_keeps_order_and_entries(tmp_path: Path) -> None:
    path = str(tmp_path / "s.tkv")
    ok(path, "init")
    for text in ("one", "two", "three"):
        ok(path, "commit", text)
    ok(path, "switch", "-c", "side")
    ok(path, "commit", "on side")
    ok(path, "switch", "main")
    old_rows = _as_format_1(path)
    before = json.loads(ok(path, "reflog", "main", "--json"))

    assert (
        json.loads(ok(path, "stats", "--json"))["format"] == STORE_FORMAT == 4
    )  # migrated: 1 -> 2 -> 3 -> 4
    new = ok(path, "commit", "four").strip()
    after = json.loads(ok(path, "reflog", "main", "--json"))
    assert after[0]["new"] == new
    assert after[0]["operation"] == "append"
    assert after[1:] == before  # every old entry kept, with its number
    seqs = [entry["seq"] for entry in after]
    assert seqs == sorted(seqs, reverse=True)
    assert len(set(seqs)) == len(seqs)
    assert seqs[0] == max(e["seq"] for e in before) + 1  # numbered from main's last key
    ok(path, "reset", "main@{1}")  # the positional reflog revision still means the tip before the last move
    assert json.loads(ok(path, "log", "--json"))[0]["commit_id"] == before[0]["new"]

    env = lmdb.open(path, max_dbs=32, subdir=True)
    with env.begin() as txn:
        assert txn.get(b"seq", db=env.open_db(b"meta", txn=txn)) is None  # the counter row is gone
        assert txn.get(b"format", db=env.open_db(b"meta", txn=txn)) == b"4"
        reflog = env.open_db(b"reflog", txn=txn)
        assert all(txn.get(key, db=reflog) == value for key, value in old_rows.items())
    env.close()
    with LmdbStore(path, create=False) as st:
        assert fsck(st).ok


def test_a_durable_commit_is_one_transaction_even_when_it_saves_the_checkpoint(tmp_path: Path) -> None:
    """Every durable append commits exactly one LMDB transaction (the periodic checkpoint lands in the
    commit's own), and writes no row besides its objects, its branch and its reflog entry (and the
    checkpoint's derived rows when due)."""
    with Tract.open(str(tmp_path / "s")) as t:
        t.user("first")
        env = t.store._shared().env  # type: ignore[attr-defined]
        meta_before = list(t.store.table_iter(Table.META))
        derived_before = t.store.table_count(Table.DERIVED)
        start = env.info()["last_txnid"]
        for n in range(CHECKPOINT_EVERY + 10):
            t.assistant(f"reply {n}") if n % 2 else t.user(f"question {n}")
        assert env.info()["last_txnid"] - start == CHECKPOINT_EVERY + 10
        assert t.store.table_count(Table.DERIVED) > derived_before  # the checkpoint was saved, in a commit
        assert list(t.store.table_iter(Table.META)) == meta_before  # no counter (or other meta) row
        assert numbers(t.store, Table.REFLOG, MAIN) == list(range(1, CHECKPOINT_EVERY + 12))


def _meta(path: str) -> dict[bytes, bytes]:
    env = lmdb.open(path, max_dbs=32, subdir=True)
    with env.begin() as txn:
        rows = dict(txn.cursor(db=env.open_db(b"meta", txn=txn)))
    env.close()
    return rows


def test_a_read_only_open_reads_a_format_1_store_as_it_is_and_writes_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "s.tkv")
    ok(path, "init")
    for text in ("one", "two"):
        ok(path, "commit", text)
    _as_format_1(path)
    before = _meta(path)
    assert before[b"format"] == b"1"
    assert b"seq" in before

    with Tract.open(path, readonly=True, create=False) as t:
        assert [m.content for m in t.compile().messages] == ["one", "two"]
        assert len(t.log()) == 2
    assert json.loads(ok(path, "log", "--json"))[0]["content"]["text"] == "two"  # a read command
    ok(path, "compile")
    assert _meta(path) == before  # still format 1, counter row and all: nothing was written

    ok(path, "commit", "three")  # the first writing open migrates it
    after = _meta(path)
    assert after[b"format"] == b"4"
    assert b"seq" not in after
    with Tract.open(path, readonly=True, create=False) as t:
        assert [m.content for m in t.compile().messages] == ["one", "two", "three"]
