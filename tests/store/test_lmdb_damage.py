"""A truncated, emptied or missing data file (issue 14, item 5).

LMDB maps ``data.mdb`` and reads pages by address, so a page past the end of a truncated file is a SIGBUS
that kills the process, not an error. Each damaged store is used in a child process, so a SIGBUS shows as
a signal exit (a negative return code) instead of killing pytest; every operation must raise a clean
:class:`~tractkv.errors.StoreCorrupt`, and the CLI must print one ``Error:`` line and exit 1.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import lmdb
import pytest

from tractkv import Tract
from tractkv.errors import StoreCorrupt, StoreError
from tractkv.model import Blob
from tractkv.store import LmdbStore
from tractkv.store.fsck import fsck
from tractkv.store.lmdb import DATA_FILE, STORE_MARKER, check_data_file

# Every operation a damaged store must refuse, each on its own fresh open.
OPERATIONS = textwrap.dedent(
    """
    import json, sys
    from tractkv import Tract
    from tractkv.errors import TractError
    from tractkv.store import LmdbStore
    from tractkv.store.fsck import fsck

    path = sys.argv[1]

    def log():
        with Tract.open(path, readonly=True, create=False) as t:
            return [c.message for c in t.log()]

    def compile_():
        with Tract.open(path, readonly=True, create=False) as t:
            return t.compile().messages

    def fsck_():
        with LmdbStore(path, create=False) as st:
            return fsck(st).ok

    def objects():
        with LmdbStore(path, create=False) as st:
            return sum(len(raw) for _, raw in st.iter_raw_objects())

    def write():
        with Tract.open(path) as t:
            return t.user("after the damage").commit_id

    results = {}
    for name, op in [("log", log), ("compile", compile_), ("fsck", fsck_), ("objects", objects),
                     ("write", write)]:
        try:
            results[name] = "ok: " + repr(op())[:200]
        except TractError as exc:
            results[name] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(results))
    """
)


def _child(path: Path) -> dict[str, str]:
    run = subprocess.run(
        [sys.executable, "-c", OPERATIONS, str(path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, f"child died (signal {-run.returncode})" if run.returncode < 0 else run.stderr
    results: dict[str, str] = json.loads(run.stdout)
    return results


def _cli(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tractkv", "--store", str(path), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with a few commits whose last transaction wrote a large object at the end of the file."""
    path = tmp_path_factory.mktemp("template") / "s"
    with Tract.open(str(path), durable=False) as t:
        t.system("be brief")
        for i in range(40):
            t.user(f"question {i} " + "x" * 300)
            t.assistant(f"answer {i} " + "y" * 300)
    with LmdbStore(path, durable=False) as st:
        # ~300 KB in contiguous overflow pages: no free run is that long, so they are the file's last pages
        st.put(Blob(data="z" * 300_000))
    return path


def _damaged(template: Path, tmp_path: Path, cut: str) -> Path:
    path = tmp_path / "s"
    shutil.copytree(template, path)
    data = path / DATA_FILE
    size = data.stat().st_size
    new_size = {"0": 0, "4k": 4096, "8k": 8192, "half": size // 2, "size-4k": size - 4096}[cut]
    os.truncate(data, new_size)
    return path


def test_the_template_is_healthy(template: Path, tmp_path: Path) -> None:
    path = tmp_path / "s"
    shutil.copytree(template, path)
    results = _child(path)
    assert all(r.startswith("ok") for r in results.values()), results
    assert results["fsck"] == "ok: True"
    assert (path / STORE_MARKER).exists()


@pytest.mark.parametrize("cut", ["0", "4k", "8k", "half", "size-4k"])
def test_a_truncated_data_file_is_refused_never_mapped(template: Path, tmp_path: Path, cut: str) -> None:
    path = _damaged(template, tmp_path, cut)
    size_before = (path / DATA_FILE).stat().st_size
    results = _child(path)
    for name, result in results.items():
        assert result.startswith("StoreCorrupt: "), (name, result)
        assert "is damaged" in result
    assert (path / DATA_FILE).stat().st_size == size_before  # refused before LMDB could "repair" it
    for args in (["log"], ["fsck"], ["compile"], ["commit", "hello"]):
        run = _cli(path, *args)
        assert run.returncode == 1, (args, run.returncode, run.stderr)
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1, (args, run.stderr)
        assert lines[0].startswith("Error: store "), (args, run.stderr)
        assert "is damaged" in lines[0]


def test_a_missing_data_file_is_damage_once_the_store_existed(template: Path, tmp_path: Path) -> None:
    path = tmp_path / "s"
    shutil.copytree(template, path)
    (path / DATA_FILE).unlink()
    with pytest.raises(StoreCorrupt, match="missing"):
        LmdbStore(path, create=False)
    with pytest.raises(StoreCorrupt, match="missing"):
        LmdbStore(path)  # not silently recreated empty either
    assert not (path / DATA_FILE).exists()
    run = _cli(path, "log")
    assert run.returncode == 1, run.stderr
    assert run.stderr.startswith("Error: store "), run.stderr


def test_new_and_unmarked_stores_still_open(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    with LmdbStore(fresh) as st:
        assert fsck(st).ok
    assert (fresh / STORE_MARKER).exists()
    # a store made before the marker existed gets one on its next open, and is checked from then on
    (fresh / STORE_MARKER).unlink()
    LmdbStore(fresh).close()
    assert (fresh / STORE_MARKER).exists()
    # an empty data file with no marker is a store being created, not damage
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / DATA_FILE).write_bytes(b"")
    with LmdbStore(empty) as st:
        assert st.count_objects() == 0


def test_garbage_instead_of_an_lmdb_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    path.mkdir()
    (path / DATA_FILE).write_bytes(os.urandom(3 * 4096))
    with pytest.raises(StoreCorrupt, match="meta page"):
        LmdbStore(path)
    with pytest.raises(StoreError):
        check_data_file(str(path))


def test_a_file_short_only_by_free_pages_is_not_damage(tmp_path: Path) -> None:
    """LMDB does not write a page it allocated and freed in the same transaction, so a healthy file may
    end before its last page: the check must accept that (the missing pages are all on the free list),
    and must still refuse the same file cut by one more page that is in use."""
    path = tmp_path / "raw"
    env = lmdb.open(str(path), map_size=1 << 28, max_dbs=4, sync=False)
    dbs = [env.open_db(b"t%d" % i) for i in range(4)]
    rnd = random.Random(1)
    short = 0
    try:
        for _ in range(1500):
            with env.begin(write=True) as txn:
                for _ in range(rnd.randint(1, 60)):
                    value = rnd.randbytes(rnd.choice([10, 100, 1000, 5000]))
                    txn.put(rnd.randbytes(rnd.choice([8, 32])), value, db=rnd.choice(dbs))
                for db in dbs:  # deletes free pages, some of them allocated in this very transaction
                    cursor = txn.cursor(db=db)
                    if rnd.random() < 0.5 and cursor.first():
                        for _ in range(rnd.randint(1, 80)):
                            if not cursor.delete():
                                break
            need = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
            if (path / DATA_FILE).stat().st_size < need:
                short += 1
                check_data_file(str(path))  # healthy: must not raise
    finally:
        env.close()
    assert short > 0  # the workload does produce such files (88 of 3,000 commits in one measured run)
    size = (path / DATA_FILE).stat().st_size
    os.truncate(path / DATA_FILE, size // 2)
    with pytest.raises(StoreCorrupt, match=r"truncated|past the end"):
        check_data_file(str(path))


CHURN = textwrap.dedent(
    """
    import random, sys, time
    import lmdb
    env = lmdb.open(sys.argv[1], map_size=1 << 28, max_dbs=4, sync=False)
    dbs = [env.open_db(b"t%d" % i) for i in range(4)]
    rnd = random.Random(2)
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        with env.begin(write=True) as txn:
            for _ in range(rnd.randint(1, 60)):
                value = rnd.randbytes(rnd.choice([10, 100, 1000, 5000]))
                txn.put(rnd.randbytes(rnd.choice([8, 32])), value, db=rnd.choice(dbs))
            for db in dbs:
                cursor = txn.cursor(db=db)
                if rnd.random() < 0.5 and cursor.first():
                    for _ in range(rnd.randint(1, 80)):
                        if not cursor.delete():
                            break
    env.close()
    """
)


def test_the_check_never_refuses_a_healthy_file_a_writer_is_changing(tmp_path: Path) -> None:
    """Checks racing a writer that allocates, frees and reuses pages (files short by free pages come and
    go, the free list is rewritten under the reader) never call the healthy file damaged."""
    path = tmp_path / "raw"
    lmdb.open(str(path), max_dbs=4).close()
    writer = subprocess.Popen([sys.executable, "-c", CHURN, str(path)], stderr=subprocess.PIPE, text=True)
    checks = 0
    try:
        while writer.poll() is None and checks < 200_000:
            check_data_file(str(path))
            checks += 1
    finally:
        _, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    assert checks > 100
