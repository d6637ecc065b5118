"""Damage a copy of a store 100 times (seeded): every operation returns exactly the undamaged result, or raises a
tractkv error that fsck also reports. Never a crash, never wrong output.

Damage here: random bit flips in compile checkpoint rows and other ``derived`` rows (records, chunks, their
keys; deleted rows), and random byte flips in stored objects. Damage to the ``derived`` table (a cache) must
never change a result nor raise: a damaged checkpoint is ignored and the state rebuilt from objects. A flipped
object byte surfaces as ``CorruptObject``, which fsck reports. (Truncated data files are tested with the store.)
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb
import pytest
from click.testing import CliRunner
from conftest import patch_compile

from tractkv import Tract, TractError
from tractkv.cli import cli
from tractkv.engine.compile import CHUNK_PREFIX, CKPT_PREFIX, check_checkpoints
from tractkv.store import LmdbStore, Table, fsck

ROUNDS = 100
SEED = 14
TOOL = {"name": "search", "description": "web search", "input_schema": {"type": "object", "properties": {}}}


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 4 slots, so the small store has many chunk rows (and partial last chunks)."""
    patch_compile(monkeypatch, "CHUNK_SLOTS", 4)


def build(path: str) -> None:
    """A store with edits, annotations, tools, a merge, a compression and several checkpoints (every close of
    a handle that committed writes one for its HEAD)."""
    t = Tract.open(path, durable=False)
    t.system("You are terse.")
    ids = [t.user(f"question {i}").commit_id for i in range(6)]
    t.assistant("answer", generation_config={"temperature": 0.5})
    t.close()
    t = Tract.open(path, durable=False)
    t.commit(
        {"type": "dialogue", "role": "user", "text": "question 1, edited"},
        operation="edit",
        edit_target=ids[1],
    )
    t.annotate(ids[2], "skip")
    t.annotate(ids[3], "pinned")
    t.commit({"type": "dialogue", "role": "user", "text": "with tools"}, tools=[TOOL])
    t.branch("side")
    t.user("on the side")
    t.close()
    t = Tract.open(path, durable=False)
    t.switch("main")
    t.user("on main")
    t.merge("side")
    t.compress(content="summary of the start", from_commit=ids[4], to_commit=ids[5])
    t.user("after the summary")
    t.assistant("done")
    t.close()


def _context(t: Tract, at: str | None = None) -> tuple[Any, ...]:
    ctx = t.compile(at)
    return (
        ctx.to_dicts(),
        ctx.token_count,
        ctx.commit_count,
        tuple(ctx.commit_ids),
        tuple(ctx.generation_configs),
        ctx.tools,
        ctx.head,
    )


def op_open(path: str) -> Any:
    """A writing handle: open, compile, close (which may write a checkpoint)."""
    t = Tract.open(path, durable=False)
    try:
        return (t.head, t.current_branch, _context(t))
    finally:
        t.close()


def op_compile(path: str) -> Any:
    with Tract.open(path, durable=False, readonly=True) as t:
        return _context(t)


def op_compile_side(path: str) -> Any:
    with Tract.open(path, durable=False, readonly=True) as t:
        return _context(t, "side")


def op_log(path: str) -> Any:
    with Tract.open(path, durable=False, readonly=True) as t:
        return [(c.commit_id, c.operation, c.token_count, c.parent_ids) for c in t.log()]


def op_status(path: str) -> Any:
    with Tract.open(path, durable=False, readonly=True) as t:
        return t.status()


OPERATIONS: dict[str, Callable[[str], Any]] = {
    "open": op_open,
    "compile": op_compile,
    "compile_side": op_compile_side,
    "log": op_log,
    "status": op_status,
}


def observe(path: str) -> dict[str, tuple[str, Any]]:
    """Each operation's result, or the tractkv error it raised (any other exception fails the test)."""
    results: dict[str, tuple[str, Any]] = {}
    for name, operation in OPERATIONS.items():
        try:
            results[name] = ("ok", operation(path))
        except TractError as exc:
            results[name] = ("error", f"{type(exc).__name__}: {exc}")
    for fmt in ("openai", "anthropic"):
        result = CliRunner().invoke(cli, ["--store", path, "compile", "--json", "--format", fmt])
        if result.exit_code == 0:
            results[f"cli compile {fmt}"] = ("ok", result.output)
        else:
            lines = result.output.strip().splitlines()
            assert result.exit_code == 1, result.output
            assert len(lines) == 1, result.output
            assert lines[0].startswith("Error: "), result.output
            assert "unexpected" not in lines[0], result.output  # a raw exception, wrapped by the CLI
            results[f"cli compile {fmt}"] = ("error", lines[0])
    return results


def fsck_problems(path: str) -> list[str]:
    with LmdbStore(path, durable=False) as store:
        report = fsck(store)
        checkpoints = check_checkpoints(store)
    return [str(p) for p in (*report.problems, *checkpoints.problems)]


def flip(data: bytes, rng: random.Random) -> bytes:
    """Flip 1-3 random bits (at least one byte changes)."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    if bytes(out) == data:
        out[0] ^= 0x01
    return bytes(out)


def damage_derived(path: str, rng: random.Random) -> str:
    """One random kind of damage to the derived table, through the store API."""
    with LmdbStore(path, durable=False) as store:
        derived = dict(store.table_iter(Table.DERIVED))
        records = sorted(k for k in derived if k.startswith(CKPT_PREFIX))
        chunks = sorted(k for k in derived if k.startswith(CHUNK_PREFIX))
        how = rng.choice(["record", "record", "chunk", "chunk", "any", "delete", "move"])
        pool = {"record": records, "chunk": chunks}.get(how, sorted(derived))
        key = rng.choice(pool)
        batch = store.new_batch()
        if how == "delete":
            batch.table_put(Table.DERIVED, key, None)
        elif how == "move":
            batch.table_put(Table.DERIVED, key, None)
            batch.table_put(Table.DERIVED, flip(key, rng), derived[key])
        else:
            batch.table_put(Table.DERIVED, key, flip(derived[key], rng))
        store.apply(batch)
    return f"derived {how} {key!r}"


def damage_object(path: str, rng: random.Random) -> str:
    """A random bit flip in one stored object's bytes, written with LMDB directly (no API writes bad bytes)."""
    env = lmdb.open(path, max_dbs=16, subdir=True)
    try:
        db = env.open_db(b"objects", create=False)
        with env.begin(write=True, db=db) as txn:
            keys = sorted(bytes(k) for k in txn.cursor().iternext(keys=True, values=False))
            key = rng.choice(keys)
            raw = txn.get(key)
            assert raw is not None
            txn.put(key, flip(bytes(raw), rng))
    finally:
        env.close()
    return f"object {key.hex()}"


def test_damaged_copies_give_the_undamaged_result_or_an_error_fsck_reports(tmp_path: Path) -> None:
    base = str(tmp_path / "base")
    build(base)
    assert fsck_problems(base) == []
    expected = observe(base)
    assert all(status == "ok" for status, _ in expected.values()), expected
    rng = random.Random(SEED)
    deadline = time.monotonic() + 300  # bounded in time as well as count (a round takes ~0.1 s)
    errors = derived_rounds = 0
    for number in range(ROUNDS):
        assert time.monotonic() < deadline, f"round {number}: too slow"
        copy = str(tmp_path / f"copy{number}")
        shutil.copytree(base, copy)
        derived = rng.random() < 0.75
        what = damage_derived(copy, rng) if derived else damage_object(copy, rng)
        results = observe(copy)
        for name, (status, value) in results.items():
            if status == "ok":
                assert value == expected[name][1], f"round {number} ({what}): {name} returned a wrong result"
            else:
                assert not derived, f"round {number} ({what}): {name} raised {value}"
        if any(status == "error" for status, _ in results.values()):
            errors += 1
            assert fsck_problems(copy), f"round {number} ({what}): an operation failed, fsck says ok"
        if derived:
            derived_rounds += 1
            # whatever fsck found in the cache, --repair leaves a clean store with the same results
            result = CliRunner().invoke(cli, ["--store", copy, "fsck", "--repair"])
            assert result.exit_code == 0, f"round {number} ({what}): {result.output}"
            assert fsck_problems(copy) == []
            assert observe(copy) == expected
        shutil.rmtree(copy)
    assert derived_rounds > 50  # the mix really exercised both kinds of damage
    assert ROUNDS - derived_rounds > 10
