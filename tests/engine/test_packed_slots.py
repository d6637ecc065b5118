"""A compile state loaded from a checkpoint keeps its slots packed (issue 18: open + compile memory must not
hold a Python object per message): compile, appends and the tool-result lookup read them as they are; edits,
annotations and merges unpack them; every result equals a replay of the objects."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import patch_compile

from tractkv import Tract, codec
from tractkv.cli import cli
from tractkv.engine.compile import CHUNK_PREFIX, Slot, check_checkpoints
from tractkv.engine.compile.slots import SlotTable, _slot_row
from tractkv.errors import DecodeError
from tractkv.ids import hash_bytes
from tractkv.store import LmdbStore, Table

ROOT = Path(__file__).resolve().parents[2]


def build(path: str, n: int) -> list[str]:
    """``n`` alternating messages, one tool call answered in the middle; closing writes the checkpoint."""
    ids = []
    with Tract.open(path, durable=False) as t, t.batch():
        for i in range(n):
            if i == n // 2:
                t.assistant(tool_calls=[{"id": "call_mid", "name": "search", "arguments": {"q": "x"}}])
                t.tool_result("call_mid", None, "found it")
            ids.append((t.user if i % 2 == 0 else t.assistant)(f"message {i}").commit_id)
    return ids


def drop_checkpoints(path: str) -> None:
    with LmdbStore(path, durable=False) as store:
        batch = store.new_batch()
        for key, _ in store.table_iter(Table.DERIVED):
            batch.table_put(Table.DERIVED, key, None)
        store.apply(batch)


def shown(path: str) -> tuple[Any, ...]:
    with Tract.open(path, durable=False, readonly=True) as t:
        ctx = t.compile()
        return (
            ctx.to_dicts(),
            ctx.token_count,
            ctx.commit_count,
            tuple(ctx.commit_ids),
            tuple(ctx.generation_configs),
            ctx.repairs,
            ctx.open_calls,
        )


def replay_of(path: str, tmp_path: Path) -> tuple[Any, ...]:
    """What ``path`` compiles to from its objects alone (a copy with every checkpoint dropped)."""
    copy = tmp_path / f"replay{len(list(tmp_path.glob('replay*')))}"
    copy.mkdir()
    for name in ("data.mdb", "tractkv-store"):
        (copy / name).write_bytes((Path(path) / name).read_bytes())
    drop_checkpoints(str(copy))
    return shown(str(copy))


def slot_objects() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Slot)


def test_open_and_compile_make_no_slot_per_message(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    n = 2500  # three chunks of the default 1,024 slots
    build(path, n)
    before = slot_objects()
    with Tract.open(path, durable=False) as t:
        ctx = t.compile()
        assert len(ctx.messages) == n + 2
        assert ctx.messages[-1].content == f"message {n - 1}"
        assert slot_objects() - before < 50  # was one per message (2,500)
        t.user("one more")  # an append keeps them packed
        assert t.compile().messages[-1].content == "one more"
        assert slot_objects() - before < 50
    assert shown(path) == replay_of(path, tmp_path)


def test_a_fresh_process_compile_grows_by_a_packed_slot_per_message(tmp_path: Path) -> None:
    """Through the CLI's interpreter: the memory a compiled checkpoint of 20k messages holds (tracemalloc)
    stays under 120 bytes a message (a Slot and its two ids took ~250)."""
    path = str(tmp_path / "s")
    n = 20_000
    build(path, n)
    code = (
        "import json, sys, tracemalloc\n"
        "from tractkv import Tract\n"
        "t = Tract.open(sys.argv[1], readonly=True)\n"
        "tracemalloc.start()\n"
        "ctx = t.compile()\n"
        "assert len(ctx.messages) == int(sys.argv[2]) + 2\n"
        "print(json.dumps(tracemalloc.get_traced_memory()))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code, path, str(n)], capture_output=True, text=True, env=env, check=True
    )
    held, _peak = json.loads(out.stdout.strip().splitlines()[-1])
    assert held / n < 120, held / n


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    patch_compile(monkeypatch, "CHUNK_SLOTS", 4)


@pytest.mark.usefixtures("small_chunks")
def test_edits_annotations_and_tools_after_reopening_match_a_replay(tmp_path: Path) -> None:
    """Each change reaches a packed slot: an edit and an annotation of messages from the checkpoint unpack
    it, a tool result finds its call in it; the next checkpoint is sound and compiles as a replay does."""
    path = str(tmp_path / "s")
    ids = build(path, 30)
    runner = CliRunner()
    for args in (
        ["compile", "--format", "json"],
        ["commit", "message 3, edited", "--edit", ids[3]],
        ["annotate", ids[5], "skip"],
        ["annotate", ids[7], "pinned"],
        ["commit", "--tool-call", '{"id": "call_new", "name": "search", "arguments": {}}'],
        ["commit", "a result", "--role", "tool", "--tool-call-id", "call_new"],
        ["commit", "after"],
    ):
        result = runner.invoke(cli, ["--store", path, *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
    assert shown(path) == replay_of(path, tmp_path)
    with Tract.open(path, durable=False) as t:  # packed again: a tool result looks its call up in the slots
        t.compile()
        t.assistant(tool_calls=[{"id": "call_late", "name": "search", "arguments": {}}])
        for i in range(6):
            t.user(f"late {i}")
    with LmdbStore(path, durable=False) as store:
        assert check_checkpoints(store).ok
    assert shown(path) == replay_of(path, tmp_path)


def test_a_tool_result_finds_its_call_in_the_packed_slots(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    build(path, 1500)
    with Tract.open(path, durable=False) as t:
        t.assistant(tool_calls=[{"id": "call_last", "name": "lookup", "arguments": {}}])
    before = slot_objects()
    with Tract.open(path, durable=False) as t:  # the call is in the checkpoint's packed slots now
        assert t.compile().open_calls
        t.tool_result("call_last", None, "the answer")
        ctx = t.compile()
        assert not ctx.open_calls
        assert ctx.to_dicts()[-1]["content"] == "the answer"
        assert slot_objects() - before < 50  # found without unpacking every slot
    assert shown(path) == replay_of(path, tmp_path)


def test_slot_table_finds_a_repeated_commit_among_colliding_ids() -> None:
    """The bitmap check: ids sharing their first 32 bits are compared in full (distinct: fine; equal: refused),
    in the same chunk or across chunks, as a commit or as an edit's source."""

    def table(ids: list[bytes], sources: dict[int, bytes] | None = None) -> SlotTable:
        out = SlotTable()
        for start in range(0, len(ids), 4):
            slots = []
            for offset, commit in enumerate(ids[start : start + 4]):
                slot = Slot(commit, bytes(32), "dialogue", 1)
                source = (sources or {}).get(start + offset)
                if source is not None:
                    slot = slot.evolve(raw_source=source)
                slots.append(slot)
            raw = codec.dumps([_slot_row(s) for s in slots])
            out.add_chunk(CHUNK_PREFIX + bytes.fromhex(hash_bytes(raw)), raw)
        return out

    same_start = [b"\x01\x02\x03\x04" + bytes([i]) * 28 for i in range(10)]
    randoms = [os.urandom(32) for _ in range(3000)]
    table(same_start + randoms).check_unique()  # collide in the bitmap, differ in full
    with pytest.raises(DecodeError, match="two slots"):
        table([*randoms, randoms[5]]).check_unique()  # in another chunk
    with pytest.raises(DecodeError, match="two slots"):
        table([*same_start, same_start[0]]).check_unique()
    with pytest.raises(DecodeError, match="two slots"):
        table(randoms, sources={7: randoms[2000]}).check_unique()  # an edit's source repeats a commit
    table(randoms, sources={7: os.urandom(32)}).check_unique()
    assert len(table(randoms)) == len(randoms)
