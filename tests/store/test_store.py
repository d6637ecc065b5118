"""The store contract (memory and LMDB alike), LMDB specifics, fsck, crashes and concurrent processes."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import lmdb
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tractkv import Tract
from tractkv.cli import cli
from tractkv.errors import CorruptObject, RefConflict, StoreClosed, StoreError, StoreFormatError
from tractkv.ids import hash_bytes
from tractkv.model import Blob, Commit, decode, encode, object_id
from tractkv.store import LmdbStore, Store, fsck


def test_objects_are_content_addressed_and_idempotent(store: Store) -> None:
    blob = Blob(data={"text": "hi"})
    batch = store.new_batch()
    oid = batch.put(blob)
    assert batch.put(blob) == oid
    store.apply(batch)
    assert oid == object_id(blob)
    assert store.has(oid)
    assert store.get(oid) == blob
    assert store[oid] == blob
    assert store.get(hash_bytes(b"absent")) is None
    again = store.new_batch()
    again.put(blob)
    store.apply(again)  # storing it twice is a no-op
    assert sum(1 for _ in store.iter_oids()) == 1
    assert store.resolve_prefix(oid[:6]) == [oid]


def test_a_failed_compare_and_swap_writes_nothing(store: Store) -> None:
    blob = Blob(data="first")
    batch = store.new_batch()
    commit = Commit(content=batch.put(blob), created_at=1)
    cid = batch.put(commit)
    batch.set_ref("refs/heads/main", cid, expected=None)
    store.apply(batch)
    stale = store.new_batch()
    other = stale.put(Blob(data="second"))
    stale.set_ref("refs/heads/main", other, expected=None)  # expects absent: it is not
    with pytest.raises(RefConflict):
        store.apply(stale)
    assert not store.has(other)  # the objects of the refused batch are not written either
    assert store.get_ref("refs/heads/main") == cid
    assert dict(store.iter_refs("refs/heads/")) == {"refs/heads/main": cid}


def test_lmdb_store_survives_reopen_and_grows_its_map(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with LmdbStore(path, durable=False, map_size=64 * 1024) as st:
        batch = st.new_batch()
        oids = [batch.put(Blob(data="x" * 2000 + str(i))) for i in range(300)]  # ~600 KB into a 64 KB map
        st.apply(batch)
    with LmdbStore(path, durable=False, create=False) as st:
        assert all(st.has(o) for o in oids)
        assert fsck(st).ok
    closed = LmdbStore(path, durable=False)
    closed.close()
    with pytest.raises(StoreClosed):
        closed.get_ref("HEAD")
    with pytest.raises(StoreError):
        LmdbStore(tmp_path / "missing", create=False)


def test_fsck_finds_a_flipped_byte_and_reads_refuse_it(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with Tract.open(str(path), durable=False) as t:
        t.user("to be corrupted")
        content = t.get_commit("HEAD").content_id
    env = lmdb.open(str(path), max_dbs=32, subdir=True)
    objects = env.open_db(b"objects")
    with env.begin(write=True, db=objects) as txn:
        key = bytes.fromhex(content)  # objects are keyed by their raw 32-byte id
        raw = bytearray(txn.get(key))
        raw[-2] ^= 0x01
        txn.put(key, bytes(raw))
    env.close()
    with LmdbStore(path, durable=False) as st:
        report = fsck(st)
        assert not report.ok
        assert any(p.where == content for p in report.problems)
        with pytest.raises(CorruptObject):
            st.get(content)  # type: ignore[arg-type]
    result = CliRunner().invoke(cli, ["--store", str(path), "fsck"])
    assert result.exit_code == 1


WRITER = textwrap.dedent(
    """
    import sys
    from tractkv import Tract
    from tractkv.errors import ConcurrentUpdate
    t = Tract.open(sys.argv[1], rebase_appends=True)
    for i in range(int(sys.argv[3])):
        for _ in range(1000):  # rebase_appends retries 16 times; a starved writer tries again (bounded)
            try:
                t.user(f"{sys.argv[2]} {i}")
                break
            except ConcurrentUpdate:
                continue
        else:
            sys.exit(f"gave up on {i}")
        print(i, flush=True)
    t.close()
    """
)


@pytest.mark.slow
def test_two_processes_appending_to_one_branch_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    Tract.open(path).close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, path, name, "40"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("p", "q")
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    with Tract.open(path) as t:
        texts = {m.content for m in t.compile().messages}
        assert texts == {f"{n} {i}" for n in "pq" for i in range(40)}
        assert fsck(t.store).ok


def kill_after(path: str, commits: int) -> int:
    """Start a durable writer, SIGKILL it soon after it acknowledged ``commits`` commits (bounded wait);
    returns the last acknowledged commit index."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, path, "w", "100000"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    acknowledged = -1
    while acknowledged < commits and time.monotonic() < deadline:
        acknowledged = int(proc.stdout.readline())
    time.sleep(random.random() * 0.05)  # land the kill at an arbitrary point of a later commit
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    return acknowledged


@pytest.mark.slow
def test_a_process_killed_mid_commit_leaves_a_consistent_store(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    acknowledged = kill_after(path, 50)
    with Tract.open(path) as t:
        assert fsck(t.store).ok
        count = t.status().commit_count
        assert count >= acknowledged + 1  # every commit reported done survived (durable)
        assert [m.content for m in t.compile().messages] == [f"w {i}" for i in range(count)]
        t.user("resumes")  # and work continues where it stopped


def test_store_cli_init_stats_cat_object(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    runner = CliRunner()
    assert runner.invoke(cli, ["--store", path, "init"]).exit_code == 0
    with Tract.open(path) as t:
        oid = t.user("inspect me").commit_id
    shown = runner.invoke(cli, ["--store", path, "cat-object", oid[:8]])
    assert shown.exit_code == 0
    assert "commit" in shown.output
    stats = runner.invoke(cli, ["--store", path, "stats", "--json"])
    assert stats.exit_code == 0
    assert json.loads(stats.stdout)["kinds"] == {"blob": 1, "commit": 1}
    assert runner.invoke(cli, ["--store", path, "fsck"]).exit_code == 0
    bad = runner.invoke(cli, ["--store", path, "cat-object", "zz"])
    assert bad.exit_code == 1
    assert bad.output.count("\n") == 1


blobs = st.lists(
    st.recursive(
        st.none() | st.integers(-(2**63), 2**63) | st.text(max_size=30) | st.binary(max_size=30),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
        max_leaves=8,
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=30)
@given(blobs)
def test_a_random_batch_reads_back_identical_after_reopen(payloads: list[object]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        objs = [Blob(data=p) for p in payloads]
        with LmdbStore(tmp, durable=False) as st_:
            batch = st_.new_batch()
            for _ in range(2):  # written twice: one copy each
                oids = [batch.put(o) for o in objs]
            st_.apply(batch)
        with LmdbStore(tmp, durable=False, create=False) as st_:
            assert [st_.get(o) for o in oids] == objs
            assert sum(1 for _ in st_.iter_oids()) == len(set(oids))
            assert [decode(encode(o)) for o in objs] == objs


def test_a_store_written_by_a_newer_format_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "s"
    LmdbStore(path, durable=False).close()
    env = lmdb.open(str(path), max_dbs=32, subdir=True)
    meta = env.open_db(b"meta")
    with env.begin(write=True, db=meta) as txn:
        txn.put(b"format", b"99")
    env.close()
    with pytest.raises(StoreFormatError, match="newer"):
        LmdbStore(path, durable=False)
    env = lmdb.open(str(path), max_dbs=32, subdir=True)
    with env.begin(db=env.open_db(b"meta")) as txn:
        assert txn.get(b"format") == b"99"
    env.close()


@pytest.mark.slow
@pytest.mark.parametrize("after", [3, 17, 41])
def test_sigkill_at_varied_moments_never_loses_an_acknowledged_commit(tmp_path: Path, after: int) -> None:
    path = str(tmp_path / "s")
    acknowledged = kill_after(path, after)
    with Tract.open(path) as t:
        assert fsck(t.store).ok
        assert t.status().commit_count >= acknowledged + 1
