"""A checkpoint save encodes only what changed since the last one (issue 18: batched appends).

A growing branch saves a checkpoint at the end of each large batch. Its full chunks are named again unread
(their eligible-slot counts kept, not counted again), and its last, partial chunk is extended: the rows
encoded by the previous save are kept and only the slots appended since are encoded. The bytes written
are the ones a save from scratch writes (``codec.dumps`` of every row): a chunk's key is the hash of its
bytes, so any difference would show as a different key, and ``fsck`` checks each chunk against a replay.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import patch_compile
from hypothesis import given, settings
from hypothesis import strategies as st

import tractkv.engine.compile.state as state_module
from tractkv import Tract, codec
from tractkv.cli import cli
from tractkv.engine.compile import CHUNK_PREFIX, CKPT_PREFIX, Compiler, Slot, check_checkpoints
from tractkv.engine.compile.checkpoint import read_record
from tractkv.engine.compile.slots import _rows_bytes, _slot_row
from tractkv.engine.content import DEFAULT_COUNTER
from tractkv.ids import hash_bytes, oid_to_raw
from tractkv.store import LmdbStore, Table

raw_ids = st.binary(min_size=32, max_size=32)
slots = st.builds(
    Slot,
    raw_ids,
    raw_ids,
    st.sampled_from(["dialogue", "tool_result", "reasoning", "summary"]),
    st.integers(min_value=0, max_value=2**40),
    raw_source=st.none() | raw_ids,
    priority=st.integers(min_value=0, max_value=2),
    gen=st.none() | st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4), max_size=2),
    annotation=st.none() | raw_ids.map(bytes.hex),
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    calls=st.none() | st.text(min_size=1, max_size=8) | st.tuples(st.text(max_size=8)),
)


@given(st.lists(slots, max_size=12))
@settings(max_examples=200, deadline=None)
def test_rows_are_encoded_as_the_generic_encoding_encodes_them(items: list[Slot]) -> None:
    assert codec.head(0x80, len(items)) + _rows_bytes(items) == codec.dumps([_slot_row(s) for s in items])


def _expected_chunks(store: LmdbStore, head: str) -> list[bytes]:
    """The chunks a save from scratch writes for the state at ``head`` (replayed from objects)."""
    state = Compiler(DEFAULT_COUNTER).state_at(store, head)  # type: ignore[arg-type]
    every = state.slots
    size = state_module.CHUNK_SLOTS
    return [codec.dumps([_slot_row(s) for s in every[i : i + size]]) for i in range(0, len(every), size)]


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    patch_compile(monkeypatch, "CHUNK_SLOTS", 16)


@pytest.mark.usefixtures("small_chunks")
def test_batched_saves_write_the_chunks_a_save_from_scratch_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches that each end inside a chunk, an annotation and an edit of a message in a saved (partial,
    then full) chunk: every checkpoint's chunks are the bytes of a full encoding of the state's slots, and
    the rows encoded over all saves are about one per message (each save encoded its whole last chunk)."""
    encoded: list[int] = []
    real = state_module._rows_bytes

    def counting(items: list[Slot]) -> bytes:
        encoded.append(len(items))
        return real(items)

    monkeypatch.setattr(state_module, "_rows_bytes", counting)
    monkeypatch.setattr("tractkv.engine.session.core.CHECKPOINT_EVERY", 1)  # a checkpoint with every batch
    path = str(tmp_path / "s")
    heads: list[str] = []
    with Tract.open(path, durable=False) as t:
        first = None
        for batch, size in enumerate([5, 9, 7, 13, 3, 20]):
            with t.batch():
                for i in range(size):
                    info = (t.user if i % 2 == 0 else t.assistant)(f"batch {batch} message {i}")
                    first = first or info.commit_id
            heads.append(t.head)  # type: ignore[arg-type]
        appended = sum(encoded)
        assert appended == 57, (
            encoded
        )  # 57 messages, each encoded once (re-encoding each last chunk whole: 88)
        with t.batch():  # a message of the first (full) chunk changes: that chunk is encoded anew
            t.annotate(first, "pinned")  # type: ignore[arg-type]
            t.user("after the annotation")
        heads.append(t.head)  # type: ignore[arg-type]
        with t.batch():
            t.commit(
                {"type": "dialogue", "role": "user", "text": "edited"}, operation="edit", edit_target=first
            )
        heads.append(t.head)  # type: ignore[arg-type]
    with LmdbStore(path, durable=False) as store:
        for head in heads:
            key = CKPT_PREFIX + oid_to_raw(head)  # type: ignore[arg-type]
            raw = store.table_get(Table.DERIVED, key)
            assert raw is not None, head
            record = read_record(key, raw)
            stored = [store.table_get(Table.DERIVED, chunk) for chunk in record.chunks]
            expected = _expected_chunks(store, head)
            assert stored == expected
            assert list(record.chunks) == [CHUNK_PREFIX + bytes.fromhex(hash_bytes(d)) for d in expected]
        assert check_checkpoints(store).ok
    result = CliRunner().invoke(cli, ["--store", path, "fsck"])
    assert result.exit_code == 0, result.output


def test_a_saved_state_after_large_batches_compiles_as_a_replay(tmp_path: Path) -> None:
    """End to end at the real chunk size: three batches of 1,000 (the last chunk extended twice, then
    full); a fresh process compiles the checkpoint to what a replay of the objects gives (CLI)."""
    path = str(tmp_path / "s")
    with Tract.open(path, durable=False) as t:
        for batch in range(3):
            with t.batch():
                for i in range(1000):
                    (t.user if i % 2 == 0 else t.assistant)(f"{batch}/{i}: " + "word " * (i % 7))
    runner = CliRunner()
    shown = runner.invoke(cli, ["--store", path, "compile", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    with LmdbStore(path, durable=False) as store:
        assert check_checkpoints(store).ok
        batch = store.new_batch()
        for key, _ in store.table_iter(Table.DERIVED):
            batch.table_put(Table.DERIVED, key, None)
        store.apply(batch)
    replayed = runner.invoke(cli, ["--store", path, "compile", "--format", "json"])
    assert replayed.exit_code == 0, replayed.output
    assert shown.stdout == replayed.stdout
    assert len(shown.stdout) > 3000
