"""Compile checkpoints are verified on load: a damaged or hostile ``derived`` row is ignored (the state is rebuilt
from objects, compile returns exactly what it returned before), fsck reports it and ``fsck --repair`` drops it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import patch_compile

import tractkv.engine.compile.state
from tractkv import HeuristicCounter, Tract, codec
from tractkv.cli import cli
from tractkv.engine.compile import (
    CHUNK_PREFIX,
    CKPT_PREFIX,
    CompileState,
    check_checkpoints,
    drop_checkpoints,
)
from tractkv.engine.compile.checkpoint import _record_check
from tractkv.ids import ObjectId, hash_bytes, oid_to_raw
from tractkv.store import LmdbStore, Table, fsck

TOOL = {"name": "search", "description": "web search", "input_schema": {"type": "object", "properties": {}}}


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 4 slots, so a small history has several chunks (and a partial last one)."""
    patch_compile(monkeypatch, "CHUNK_SLOTS", 4)


def build(path: str) -> None:
    """A history with every kind of change: edits, annotations, tools, a merge and a compression."""
    t = Tract.open(path, durable=False)
    t.system("You are terse.")
    ids = [t.user(f"question {i}").commit_id for i in range(6)]
    t.assistant("answer", generation_config={"temperature": 0.5})
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
    t.switch("main")
    t.user("on main")
    t.merge("side")
    t.compress(content="summary of the start", from_commit=ids[4], to_commit=ids[5])
    t.user("after the summary")
    t.compile()  # the state's view is made again (a compression dropped it): HEAD's record carries its summary
    t.user("after the compile")
    t.close()  # writes the checkpoint of HEAD


def compiled(path: str) -> tuple[Any, ...]:
    """Everything compile, log and status show, from a fresh handle (as a new process would)."""
    with Tract.open(path, durable=False, readonly=True) as t:
        ctx = t.compile()
        return (
            ctx.to_dicts(),
            ctx.token_count,
            ctx.commit_count,
            tuple(ctx.commit_ids),
            tuple(ctx.generation_configs),
            ctx.tools,
            ctx.head,
            [c.commit_id for c in t.log()],
        )


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    path = str(tmp_path / "store")
    build(path)
    return path


def rows(path: str, prefix: bytes) -> dict[bytes, bytes]:
    with LmdbStore(path, durable=False) as store:
        return dict(store.table_iter(Table.DERIVED, prefix))


def put_row(path: str, key: bytes, value: bytes | None) -> None:
    with LmdbStore(path, durable=False) as store:
        batch = store.new_batch()
        batch.table_put(Table.DERIVED, key, value)
        store.apply(batch)


def head_key(path: str) -> bytes:
    with Tract.open(path, durable=False, readonly=True) as t:
        head = t.head
    assert head is not None
    return CKPT_PREFIX + oid_to_raw(head)


COUNTER = HeuristicCounter.name  # the default counter's name: checkpoints of other counters are never loaded


def load(path: str) -> CompileState | None:
    """The checkpoint of HEAD as a load finds it (None: ignored)."""
    key = head_key(path)
    with LmdbStore(path, durable=False) as store:
        return CompileState.load(store, ObjectId(key[len(CKPT_PREFIX) :].hex()), COUNTER)


def resign(key: bytes, record: dict[str, Any]) -> bytes:
    """A hostile record: damaged fields under a checksum recomputed to match."""
    body = {k: v for k, v in record.items() if k != "check"}
    return codec.dumps({**body, "check": _record_check(key, body)})


def test_sound_checkpoints_load_and_check_clean(store_path: str) -> None:
    key = head_key(store_path)
    assert key in rows(store_path, CKPT_PREFIX)
    record = codec.loads(rows(store_path, CKPT_PREFIX)[key])
    assert isinstance(record, dict)
    assert len(record["chunks"]) > 2
    with LmdbStore(store_path, durable=False) as store:
        assert record["counter"] == COUNTER
        state = CompileState.load(store, ObjectId(key[len(CKPT_PREFIX) :].hex()), COUNTER)
        assert state is not None  # the checkpoint is used, not rebuilt
        report = check_checkpoints(store)
    assert report.ok
    assert report.problems == ()
    assert report.records >= 1
    assert report.chunks >= 3


def damaged_chunks() -> list[tuple[str, Callable[[list[Any]], None]]]:
    def priority(rows: list[Any]) -> None:
        rows[-1][3] = (rows[-1][3] + 2) % 3  # normal -> skip: the message would vanish from compile

    def tokens(rows: list[Any]) -> None:
        rows[0][2] += 1

    def kind(rows: list[Any]) -> None:
        rows[0][1] = ["dialogue"]

    def short_row(rows: list[Any]) -> None:
        del rows[0][1:]

    return [("priority", priority), ("tokens", tokens), ("kind", kind), ("short_row", short_row)]


@pytest.mark.parametrize(("name", "damage"), damaged_chunks())
def test_damaged_chunk_is_ignored_reported_and_dropped(
    store_path: str, name: str, damage: Callable[[list[Any]], None]
) -> None:
    expected = compiled(store_path)
    chunks = rows(store_path, CHUNK_PREFIX)
    for key, raw in chunks.items():
        data = codec.loads(raw)
        assert isinstance(data, list)
        damage(data)
        put_row(store_path, key, codec.dumps(data))  # the same key: the bytes no longer hash to it
    assert load(store_path) is None
    assert compiled(store_path) == expected
    with LmdbStore(store_path, durable=False) as store:
        report = check_checkpoints(store)
        assert not report.ok
        assert set(chunks) <= set(report.damaged)
        assert any("hash" in p.detail for p in report.problems)
        assert drop_checkpoints(store, report.damaged) == len(report.damaged)
        assert check_checkpoints(store).ok
        assert fsck(store).ok
    assert compiled(store_path) == expected


def test_flipped_bit_in_a_chunk_changes_nothing(store_path: str) -> None:
    expected = compiled(store_path)
    for key, raw in rows(store_path, CHUNK_PREFIX).items():
        for position in (0, len(raw) // 2, len(raw) - 1):
            flipped = bytearray(raw)
            flipped[position] ^= 0x04
            put_row(store_path, key, bytes(flipped))
            assert compiled(store_path) == expected
        put_row(store_path, key, raw)
    assert check_checkpoints_ok(store_path)


def check_checkpoints_ok(path: str) -> bool:
    with LmdbStore(path, durable=False) as store:
        return check_checkpoints(store).ok


def damaged_records() -> list[tuple[str, Callable[[bytes, dict[str, Any]], bytes]]]:
    def commits(key: bytes, record: dict[str, Any]) -> bytes:
        return codec.dumps({**record, "commits": record["commits"] + 1})  # checksum now wrong

    def missing_key(key: bytes, record: dict[str, Any]) -> bytes:
        return codec.dumps({k: v for k, v in record.items() if k != "tools"})

    def no_checksum(key: bytes, record: dict[str, Any]) -> bytes:
        return codec.dumps({k: v for k, v in record.items() if k != "check"})

    def not_a_map(key: bytes, record: dict[str, Any]) -> bytes:
        return codec.dumps([1, 2, 3])

    def garbage(key: bytes, record: dict[str, Any]) -> bytes:
        return b"\xff\x00garbage"

    def hostile_tools(key: bytes, record: dict[str, Any]) -> bytes:
        return resign(key, {**record, "tools": bytes(32)})  # a tool set that is not stored

    def hostile_count(key: bytes, record: dict[str, Any]) -> bytes:
        return resign(key, {**record, "n": record["n"] - 1})

    def hostile_type(key: bytes, record: dict[str, Any]) -> bytes:
        return resign(key, {**record, "commits": True})

    def hostile_chunk_key(key: bytes, record: dict[str, Any]) -> bytes:
        return resign(key, {**record, "chunks": [*record["chunks"][:-1], b"chunk:1:short"]})

    return [
        ("commits", commits),
        ("missing_key", missing_key),
        ("no_checksum", no_checksum),
        ("not_a_map", not_a_map),
        ("garbage", garbage),
        ("hostile_tools", hostile_tools),
        ("hostile_count", hostile_count),
        ("hostile_type", hostile_type),
        ("hostile_chunk_key", hostile_chunk_key),
    ]


@pytest.mark.parametrize(("name", "damage"), damaged_records())
def test_damaged_record_is_ignored_reported_and_dropped(
    store_path: str, name: str, damage: Callable[[bytes, dict[str, Any]], bytes]
) -> None:
    expected = compiled(store_path)
    key = head_key(store_path)
    record = codec.loads(rows(store_path, CKPT_PREFIX)[key])
    assert isinstance(record, dict)
    put_row(store_path, key, damage(key, record))
    assert load(store_path) is None
    assert compiled(store_path) == expected
    with LmdbStore(store_path, durable=False) as store:
        report = check_checkpoints(store)
        assert report.damaged == (key,)
        assert report.problems[0].kind == "checkpoint"
        assert report.problems[0].where.endswith(key[-32:].hex())
        if name == "no_checksum":
            assert (
                report.problems[0].detail
                == "checkpoint record without a checksum (written before they had one)"
            )
        drop_checkpoints(store, report.damaged)
        assert check_checkpoints(store).ok
    assert compiled(store_path) == expected


def test_record_moved_to_another_commit_is_refused(store_path: str) -> None:
    """The checksum covers the key: a record copied under another commit's key (or a flipped key) is refused."""
    key = head_key(store_path)
    with Tract.open(store_path, durable=False, readonly=True) as t:
        parent = t.log()[1].commit_id
    other = CKPT_PREFIX + oid_to_raw(parent)
    put_row(store_path, other, rows(store_path, CKPT_PREFIX)[key])
    with LmdbStore(store_path, durable=False) as store:
        assert CompileState.load(store, parent, COUNTER) is None
        assert check_checkpoints(store).damaged == (other,)


def test_unknown_rows_and_missing_chunks_are_reported(store_path: str) -> None:
    chunk_key = next(iter(rows(store_path, CHUNK_PREFIX)))
    put_row(store_path, chunk_key, None)
    put_row(store_path, b"ckpt:stray", b"x")  # no format number: not a checkpoint row of any format
    with LmdbStore(store_path, durable=False) as store:
        report = check_checkpoints(store)
    assert b"ckpt:stray" in report.damaged
    assert head_key(store_path) in report.damaged
    assert any("missing" in p.detail for p in report.problems)


def test_saving_rewrites_a_damaged_chunk(store_path: str) -> None:
    """A chunk row whose bytes were damaged is rewritten by the next checkpoint that needs it, not reused."""
    expected = compiled(store_path)
    chunks = rows(store_path, CHUNK_PREFIX)
    for key in chunks:
        put_row(store_path, key, b"\x80damaged")
    t = Tract.open(store_path, durable=False)
    assert t.compile().to_dicts() == expected[0]
    t.user("one more")
    t.close()  # saves the new HEAD's checkpoint: every chunk but the last is one of the damaged ones
    assert load(store_path) is not None
    record = codec.loads(rows(store_path, CKPT_PREFIX)[head_key(store_path)])
    assert isinstance(record, dict)
    shared = set(record["chunks"]) & set(chunks)
    assert len(shared) == len(record["chunks"]) - 1
    now = rows(store_path, CHUNK_PREFIX)
    assert all(now[key] == chunks[key] for key in shared)


def test_cli_fsck_reports_and_repair_drops(store_path: str) -> None:
    expected = compiled(store_path)
    chunk_key = next(iter(rows(store_path, CHUNK_PREFIX)))
    put_row(store_path, chunk_key, b"\x80damaged")
    runner = CliRunner()
    result = runner.invoke(cli, ["--store", store_path, "fsck"])
    assert result.exit_code == 1, result.output
    assert (
        f"checkpoint: chunk {chunk_key[len(CHUNK_PREFIX) :].hex()}: chunk bytes do not hash" in result.output
    )
    result = runner.invoke(cli, ["--store", store_path, "fsck", "--json"])
    assert result.exit_code == 1
    assert '"ok": false' in result.output
    result = runner.invoke(cli, ["--store", store_path, "fsck", "--repair"])
    assert result.exit_code == 0, result.output
    assert f"dropped chunk {chunk_key[len(CHUNK_PREFIX) :].hex()}" in result.output
    assert "dropped 2 damaged checkpoint row(s)" in result.output  # the chunk and the record naming it
    result = runner.invoke(cli, ["--store", store_path, "fsck"])
    assert result.exit_code == 0, result.output
    assert compiled(store_path) == expected


def test_chunk_keys_are_content_hashes(store_path: str) -> None:
    for key, raw in rows(store_path, CHUNK_PREFIX).items():
        assert key == CHUNK_PREFIX + bytes.fromhex(hash_bytes(raw))


def test_rows_of_an_older_checkpoint_format_are_stale_not_damage(tmp_path: Path) -> None:
    """A store written before the record checksum (format 1) is not reported damaged; gc drops the old rows."""
    from tractkv.engine.compile import check_checkpoints
    from tractkv.store import LmdbStore, Table

    path = str(tmp_path / "old")
    with Tract.open(path, durable=False) as t:
        for i in range(5):
            t.user(f"m{i}")
    with LmdbStore(path) as store:
        batch = store.new_batch()
        batch.table_put(Table.DERIVED, b"ckpt:1:" + bytes(32), b"\xa0")  # what format 1 left behind
        batch.table_put(Table.DERIVED, b"chunk:1:" + bytes(32), b"\x80")
        store.apply(batch)
        report = check_checkpoints(store)
        assert report.ok
        assert report.stale == 2
    with Tract.open(path, durable=False) as t:
        assert [m.content for m in t.compile().messages] == [f"m{i}" for i in range(5)]
        t.gc(min_age_hours=0)
    with LmdbStore(path) as store:
        assert not [k for k, _ in store.table_iter(Table.DERIVED) if k.startswith((b"ckpt:1:", b"chunk:1:"))]
        assert check_checkpoints(store).stale == 0


def test_a_merge_that_keeps_a_message_the_other_side_compressed_is_not_damage(tmp_path: Path) -> None:
    """Main pins P, a side branch compresses it away, the merge keeps P: a healthy store, fsck clean."""
    from tractkv.engine.compile import check_checkpoints

    path = str(tmp_path / "s")
    with Tract.open(path, durable=False) as t:
        t.system("sys")
        kept = t.user("P")
        t.user("Q")
        t.branch("side")
        t.compress(content="summary")
        t.switch("main")
        t.annotate(kept.commit_id, "pinned")
        t.merge("side", strategy="theirs")
    with Tract.open(path, durable=False) as t:
        assert [m.content for m in t.compile().messages] == ["sys", "P", "summary"]
        assert check_checkpoints(t.store).ok


# --- lazy loads: a reopened store appends without reading the checkpoint's chunks --------------------------


def replayed(path: str) -> tuple[Any, ...]:
    """What :func:`compiled` shows with every checkpoint dropped first (a replay of the objects)."""
    for key in rows(path, b""):
        put_row(path, key, None)
    return compiled(path)


def test_an_append_after_reopening_reads_no_chunk(store_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first commit on a reopened store loads the checkpoint's record only; compile reads the chunks."""
    read: list[bytes] = []
    real = tractkv.engine.compile.slots._chunk_rows  # every chunk read decodes through it

    def counting(key: bytes, raw: bytes) -> list[Any]:
        read.append(key)
        return real(key, raw)

    patch_compile(monkeypatch, "_chunk_rows", counting)
    with Tract.open(store_path, durable=False) as t:
        info = t.user("one more question")
        assert info.token_count > 0
        assert read == []
        ctx = t.compile()  # format 4: the record's view summary stands for the chunks until a message is used
        assert read == []
        assert ctx.messages[-1].content == "one more question"
        assert read == []
        assert ctx.to_dicts()[-1] == {"role": "user", "content": "one more question"}
        assert len(read) >= 3
    got = compiled(store_path)
    assert got == replayed(store_path)


def damage_every_chunk(path: str) -> None:
    for key in rows(path, CHUNK_PREFIX):
        put_row(path, key, b"\x80damaged")


@pytest.mark.parametrize("compile_first", [True, False])
def test_a_lazily_loaded_checkpoint_found_damaged_is_rebuilt(store_path: str, compile_first: bool) -> None:
    """Chunks damaged under a lazily loaded checkpoint: the append goes through, compile rebuilds the state from
    objects (the appended message kept after it); closing without a compile saves a checkpoint naming the damaged
    chunks unread, and the next load refuses it and rebuilds."""
    damage_every_chunk(store_path)
    with Tract.open(store_path, durable=False) as t:
        t.user("one more question")
        t.assistant("and its answer")
        if compile_first:
            assert t.compile().to_dicts()[-2:] == [
                {"role": "user", "content": "one more question"},
                {"role": "assistant", "content": "and its answer"},
            ]
    got = compiled(store_path)
    assert got == replayed(store_path)
    assert got[0][-1] == {"role": "assistant", "content": "and its answer"}


def test_cli_commit_and_compile_on_a_checkpoint_with_damaged_chunks(store_path: str) -> None:
    damage_every_chunk(store_path)
    runner = CliRunner()
    result = runner.invoke(cli, ["--store", store_path, "commit", "one more question"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["--store", store_path, "compile", "--json"])
    assert result.exit_code == 0, result.output
    assert "one more question" in result.output
    assert "summary of the start" in result.output
    expected = replayed(store_path)
    assert expected[0][-1] == {"role": "user", "content": "one more question"}


def test_a_context_compiled_from_a_checkpoint_outlives_its_tract(store_path: str) -> None:
    """Messages of a context compiled from a checkpoint are read on first use; closing the Tract reads the rest,
    so the context stays whole after it."""
    expected = compiled(store_path)
    with Tract.open(store_path, durable=False) as t:
        ctx = t.compile()
        first = ctx.messages[0]
    assert ctx.messages[0] is first
    assert ctx.to_dicts() == expected[0]
    assert list(reversed(ctx.messages)) == list(ctx.messages)[::-1]
    assert ctx.messages[1:3] == tuple(list(ctx.messages)[1:3])


def rewrite_chunks(path: str, damage: Callable[[list[Any]], None]) -> None:
    """Hostile chunks: every chunk's rows damaged, stored under the hash of their new bytes, and HEAD's record
    re-signed to name them (so only the row checks can catch it)."""
    key = head_key(path)
    record = codec.loads(rows(path, CKPT_PREFIX)[key])
    assert isinstance(record, dict)
    chunks = rows(path, CHUNK_PREFIX)
    new_keys = []
    for chunk_key in record["chunks"]:
        data = codec.loads(chunks[chunk_key])
        assert isinstance(data, list)
        damage(data)
        raw = codec.dumps(data)
        new_key = CHUNK_PREFIX + bytes.fromhex(hash_bytes(raw))
        put_row(path, new_key, raw)
        new_keys.append(new_key)
    put_row(path, key, resign(key, {**record, "chunks": new_keys}))


def hostile_shapes() -> list[tuple[str, Callable[[list[Any]], None]]]:
    def role(rows: list[Any]) -> None:
        rows[0][5] = "moderator"

    def tool_without_call_id(rows: list[Any]) -> None:
        rows[0][5], rows[0][6] = "tool", None

    def calls_on_a_user_message(rows: list[Any]) -> None:
        rows[0][5], rows[0][6] = "user", ["call_1"]

    def calls_not_strings(rows: list[Any]) -> None:
        rows[0][5], rows[0][6] = "assistant", [1]

    first: list[bytes] = []

    def commit_repeated_in_another_chunk(rows: list[Any]) -> None:
        if first:
            rows[0][0] = first[0]
        else:
            first.append(rows[-1][0])

    return [
        ("commit_repeated_in_another_chunk", commit_repeated_in_another_chunk),
        ("role", role),
        ("tool_without_call_id", tool_without_call_id),
        ("calls_on_a_user_message", calls_on_a_user_message),
        ("calls_not_strings", calls_not_strings),
    ]


@pytest.mark.parametrize(("name", "damage"), hostile_shapes())
def test_hostile_message_shapes_in_a_chunk_are_refused(
    store_path: str, name: str, damage: Callable[[list[Any]], None]
) -> None:
    """A chunk whose key matches its bytes but whose rows claim another role or tool-call shape (what the view
    is rebuilt from without reading blobs) is refused on load, reported by fsck, and compile is unchanged."""
    expected = compiled(store_path)
    rewrite_chunks(store_path, damage)
    assert load(store_path) is None
    assert not check_checkpoints_ok(store_path)
    assert compiled(store_path) == expected
    with Tract.open(store_path, durable=False) as t:  # a lazy load: refused when the slots are read
        t.user("one more question")
        assert t.compile().to_dicts()[:-1] == expected[0]


def test_a_rendered_state_is_freed_without_the_cycle_collector(store_path: str) -> None:
    """A view renders messages through the state's caches, not the state: no reference cycle keeps a dropped
    state (one slot per message) alive until the next collection."""
    import gc

    key = head_key(store_path)
    with LmdbStore(store_path, durable=False) as store:
        gc.collect()
        gc.disable()
        try:
            state = CompileState.load(store, ObjectId(key[len(CKPT_PREFIX) :].hex()), COUNTER)
            assert state is not None
            view = state.render(store)
            assert view.lazy
            copy = state.copy()
            assert copy.render(store).message(0) == view.message(0)
            del state, view, copy
            assert gc.collect() == 0  # nothing was left for the collector: no cycle
        finally:
            gc.enable()


# --- format 4: the record's view summary (compile reads no chunk until a message is used) ------------------


CALL = {"name": "f", "arguments": {}}


def orphan(call_id: str, text: str) -> dict[str, Any]:
    """A tool result committed as content (``tool_result`` refuses one that answers no call)."""
    return {"type": "dialogue", "role": "tool", "text": text, "tool_call_id": call_id, "name": "f"}


def build_tool_turns(path: str) -> None:
    """A history whose default view has every kind of entry a summary records: skipped and reasoning messages
    (not in the view), placeholder results, dropped orphan results, and a call still open at the end."""
    with Tract.open(path, durable=False) as t:
        t.system("sys")
        skipped = t.user("to skip")
        t.annotate(skipped.commit_id, "skip")
        t.compile()  # the view is made again after the annotation, then kept by the appends below
        for i in range(3):
            t.user(f"q{i}")
            t.commit({"type": "reasoning", "text": f"think {i}"})
            t.assistant("calling", tool_calls=[{"id": f"c{i}a", **CALL}, {"id": f"c{i}b", **CALL}])
            t.tool_result(
                f"c{i}a", "f", "ok"
            )  # c{i}b stays unanswered: a placeholder before the next message
            t.commit(orphan("nope", "orphan"))  # answers no call: dropped
        t.user("last")
        t.assistant(tool_calls=[{"id": "end", **CALL}])  # open at the end


def full_context(path: str) -> tuple[Any, ...]:
    """:func:`compiled` plus the pairing pass's repairs and open calls."""
    with Tract.open(path, durable=False, readonly=True) as t:
        ctx = t.compile()
        return (*compiled(path), ctx.repairs, ctx.open_calls)


@pytest.fixture
def tools_path(tmp_path: Path) -> str:
    path = str(tmp_path / "tools")
    build_tool_turns(path)
    return path


def head_record(path: str) -> dict[str, Any]:
    record = codec.loads(rows(path, CKPT_PREFIX)[head_key(path)])
    assert isinstance(record, dict)
    return record


@pytest.mark.parametrize("builder", [build, build_tool_turns])
def test_a_view_summary_compiles_as_a_replay_and_reads_no_chunk(
    tmp_path: Path, builder: Callable[[str], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "store")
    builder(path)
    summary = head_record(path)["view"]
    assert summary is not None
    assert len(summary["counts"]) > 2
    expected = full_context(path)
    read: list[bytes] = []
    real = tractkv.engine.compile.slots._chunk_rows

    def counting(key: bytes, raw: bytes) -> list[Any]:
        read.append(key)
        return real(key, raw)

    patch_compile(monkeypatch, "_chunk_rows", counting)
    with Tract.open(path, durable=False, readonly=True) as t:
        ctx = t.compile()
        assert read == []
        assert len(ctx.messages) == len(expected[0])
        assert ctx.token_count == expected[1]
        assert ctx.repairs == expected[-2]
        assert ctx.open_calls == expected[-1]
        assert read == []
        assert ctx.messages[-1].to_dict() == expected[0][-1]
        assert len(read) == 1  # the last message's chunk only
    monkeypatch.undo()
    assert expected == (*replayed(path), expected[-2], expected[-1])  # the same as a replay of the objects
    assert check_checkpoints_ok(path)


def test_appends_after_a_summary_load_compile_as_a_replay(tools_path: str) -> None:
    """Appends extend the view a summary made (the pass continues from its recorded state: the open call gets
    its result), and the next checkpoint's summary describes the longer view."""
    with Tract.open(tools_path, durable=False) as t:
        t.tool_result("end", "f", "done")
        t.commit(orphan("end", "twice"))  # dropped: answered already
        t.user("after")
        assert [m.content for m in t.compile().messages[-2:]] == ["done", "after"]
    got = full_context(tools_path)
    assert head_record(tools_path)["view"] is not None
    assert check_checkpoints_ok(tools_path)
    assert got == (*replayed(tools_path), got[-2], got[-1])
    assert got[0][-2:] == [
        {"role": "tool", "content": "done", "name": "f", "tool_call_id": "end"},
        {"role": "user", "content": "after"},
    ]


def hostile_summaries() -> list[tuple[str, Callable[[dict[str, Any]], None], bool]]:
    """Re-signed records whose summary disagrees with their chunks; True: a compile notices it (the record is
    refused, or a chunk read against it fails and the state is rebuilt), False: only fsck can tell."""

    def length(view: dict[str, Any]) -> None:
        view["length"] += 1

    def counts(view: dict[str, Any]) -> None:
        view["counts"][1] -= 1
        view["counts"][2] += 1

    def dropped_user_message(view: dict[str, Any]) -> None:
        view["dropped"][0] += 1  # the next user message's rank instead of the orphan result's

    def not_a_map(view: dict[str, Any]) -> None:
        view.clear()

    def tokens(view: dict[str, Any]) -> None:
        view["tokens"] += 1

    def repair_detail(view: dict[str, Any]) -> None:
        view["repairs"][0][3] = "something else"

    return [
        ("length", length, True),
        ("counts", counts, True),
        ("dropped_user_message", dropped_user_message, True),
        ("not_a_map", not_a_map, True),
        ("tokens", tokens, False),
        ("repair_detail", repair_detail, False),
    ]


@pytest.mark.parametrize(("name", "damage", "noticed"), hostile_summaries())
def test_a_hostile_view_summary_is_refused_reported_and_dropped(
    tools_path: str, name: str, damage: Callable[[dict[str, Any]], None], noticed: bool
) -> None:
    expected = full_context(tools_path)
    key = head_key(tools_path)
    record = head_record(tools_path)
    damage(record["view"])
    put_row(tools_path, key, resign(key, record))
    if noticed:
        assert full_context(tools_path) == expected
    runner = CliRunner()
    result = runner.invoke(cli, ["--store", tools_path, "fsck"])
    assert result.exit_code == 1, result.output
    assert f"checkpoint {key[len(CKPT_PREFIX) :].hex()}" in result.output
    result = runner.invoke(cli, ["--store", tools_path, "fsck", "--repair"])
    assert result.exit_code == 0, result.output
    assert runner.invoke(cli, ["--store", tools_path, "fsck"]).exit_code == 0
    assert full_context(tools_path) == expected


def test_cli_compile_on_a_summary_whose_chunk_is_damaged(tools_path: str) -> None:
    """The summary stands for the chunks until a message is used; a damaged chunk found then rebuilds the
    state from objects, so `tractkv compile` prints what a replay prints."""
    runner = CliRunner()
    before = runner.invoke(cli, ["--store", tools_path, "compile", "--json"])
    assert before.exit_code == 0, before.output
    record = head_record(tools_path)
    put_row(tools_path, record["chunks"][1], b"\x80damaged")
    result = runner.invoke(cli, ["--store", tools_path, "compile", "--json"])
    assert result.exit_code == 0, result.output
    assert result.output == before.output


def test_rows_of_checkpoint_format_3_are_ignored_and_rebuilt(tools_path: str) -> None:
    """A store written by the release before the view summary (format 3): its rows are stale (never read as
    format 4: even under a format-4 key a format-3 record is refused), compile replays the objects, a writing
    handle saves a format-4 checkpoint, and gc drops the old rows."""
    expected = full_context(tools_path)
    old: dict[bytes, bytes] = {}
    for key, raw in rows(tools_path, b"").items():
        if key.startswith(CKPT_PREFIX):
            value = codec.loads(raw)
            assert isinstance(value, dict)
            del value["view"], value["check"]
            old_key = b"ckpt:3:" + key[len(CKPT_PREFIX) :]
            old[old_key] = codec.dumps({**value, "check": _record_check(old_key, value)})
            put_row(tools_path, key, codec.dumps({**value, "check": _record_check(key, value)}))
        else:
            old[b"chunk:3:" + key[len(CHUNK_PREFIX) :]] = raw
    assert load(tools_path) is None  # a format-3 record under a format-4 key: refused
    assert not check_checkpoints_ok(tools_path)
    for key in rows(tools_path, b""):
        put_row(tools_path, key, None)
    for key, raw in old.items():
        put_row(tools_path, key, raw)
    assert load(tools_path) is None
    with LmdbStore(tools_path, durable=False) as store:
        report = check_checkpoints(store)
        assert report.ok
        assert report.stale == len(old)
    result = CliRunner().invoke(cli, ["--store", tools_path, "fsck"])
    assert result.exit_code == 0, result.output  # stale rows are not damage
    assert full_context(tools_path) == expected
    with Tract.open(tools_path, durable=False) as t:
        t.compile()
        t.user("more")
        t.gc(min_age_hours=0)
    assert head_record(tools_path)["view"] is not None
    assert not [k for k in rows(tools_path, b"") if k.startswith((b"ckpt:3:", b"chunk:3:"))]
    assert check_checkpoints_ok(tools_path)
