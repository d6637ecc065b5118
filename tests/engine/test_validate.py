"""The semantic validator on the local side: the write path checks each commit, computes everything derived
before the transaction (a failure writes nothing), refuses bytes in message payloads; fsck finds what the
validator refuses in a store that holds it anyway."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tractkv import Tract
from tractkv.engine.content import content_blob
from tractkv.engine.history import TS_MAX, ObjectRuleError, Tags, check, fsck_objects
from tractkv.engine.history.validate import tag
from tractkv.errors import ContentError, InvalidInput
from tractkv.model import Blob, Commit, ToolSchema, ToolSet
from tractkv.store import LmdbStore, MemoryStore, Store

from .conftest import START_US, FakeClock


def tract(store: Store | None = None, **kwargs: Any) -> Tract:
    return Tract(store or MemoryStore(), clock=FakeClock(), **kwargs)


def snapshot(t: Tract) -> tuple[dict[str, str], int]:
    return dict(t.store.iter_refs("refs/")), sum(1 for _ in t.store.iter_oids())


@pytest.mark.parametrize(
    "content",
    [
        {"type": "freeform", "payload": b"\x00"},
        {"type": "freeform", "payload": {"deep": [1, {"x": b"\x01"}]}},
    ],
)
def test_bytes_in_a_freeform_payload_are_refused_and_nothing_is_written(content: dict[str, Any]) -> None:
    t = tract()
    t.user("before")
    before = snapshot(t)
    with pytest.raises(ContentError, match="bytes"):
        t.commit(content)
    assert snapshot(t) == before
    t.user("after")  # the branch is not bricked
    assert [m["content"] for m in t.compile().to_dicts()] == ["before", "after"]


def test_bytes_in_tool_call_arguments_are_refused() -> None:
    t = tract()
    with pytest.raises(ContentError, match=r"tool_calls\[0\].arguments.blob"):
        t.assistant("", tool_calls=[{"id": "c", "name": "n", "arguments": {"blob": b"\xff"}}])
    assert t.head is None


class FailingCounter:
    """A token counter that fails on one text: derived work that raises after objects were built."""

    name = "failing"

    def count(self, text: str) -> int:
        if "poison" in text:
            raise RuntimeError("cannot count this")
        return len(text)


def poisoned_batch(t: Tract) -> None:
    with t.batch():
        t.user("two")
        t.user("poison")


@pytest.mark.parametrize("kind", ["memory", "lmdb"])
def test_a_failure_computing_derived_data_writes_nothing(kind: str, tmp_path: Path) -> None:
    """Token counts and the compile state are computed before the transaction: a counter that raises leaves
    the store exactly as it was, and the branch keeps working in this handle and in a fresh one."""
    store: Store = MemoryStore() if kind == "memory" else LmdbStore(str(tmp_path / "s"), durable=False)
    t = tract(store, token_counter=FailingCounter(), owns_store=False)
    t.user("one")
    before = snapshot(t)
    with pytest.raises(RuntimeError, match="cannot count"):
        t.user("poison")
    assert snapshot(t) == before
    with pytest.raises(RuntimeError):
        poisoned_batch(t)
    assert snapshot(t) == before
    t.user("three")
    assert [m["content"] for m in t.compile().to_dicts()] == ["one", "three"]
    tokens = t.compile().token_count
    t.close()
    fresh = tract(store, token_counter=FailingCounter(), owns_store=False)
    assert [m["content"] for m in fresh.compile().to_dicts()] == ["one", "three"]
    assert fresh.compile().token_count == tokens
    fresh.close()
    store.close()


def test_a_merge_commits_with_its_state_computed_through_the_batch() -> None:
    t = tract(token_counter=FailingCounter())
    t.user("base")
    t.branch("side")
    t.user("side")
    t.switch("main")
    t.user("main")
    result = t.merge("side")
    assert result.kind == "merge"
    assert [m["content"] for m in t.compile().to_dicts()] == ["base", "main", "side"]


def test_the_local_write_path_refuses_what_a_receiver_would() -> None:
    t = tract()
    t.user("one")
    before = snapshot(t)
    with pytest.raises(InvalidInput, match=r"content -> .* is a blob, not a"):
        t._session.commit_content(Blob(data={"not": "a message"}), operation="append")
    with pytest.raises(InvalidInput, match="an append commit has no target"):
        t._session.commit_content(
            content_blob({"type": "instruction", "text": "x"}), operation="append", target=t.head
        )
    assert snapshot(t) == before


@pytest.mark.parametrize("now", [-5, TS_MAX + 1])
def test_a_clock_outside_the_timestamp_range_is_refused(now: int) -> None:
    t = Tract(MemoryStore(), clock=lambda: now)
    with pytest.raises(
        InvalidInput, match=r"this clock reads .* outside \[0, 2\*\*53 - 1\]"
    ):  # names the clock
        t.user("hi")
    assert t.head is None


def test_every_payload_the_local_path_stores_is_valid_for_a_receiver() -> None:
    for content in [
        {"type": "instruction", "text": "s"},
        {"type": "dialogue", "role": "user", "text": "hi", "name": "ann"},
        {
            "type": "dialogue",
            "role": "assistant",
            "tool_calls": [{"id": "a", "name": "n", "arguments": "{}"}],
        },
        {"type": "dialogue", "role": "tool", "text": "r", "tool_call_id": "a", "is_error": True},
        {"type": "reasoning", "text": "r"},
        {"type": "artifact", "text": "t"},
        {"type": "freeform", "payload": [1, None, {"a": 2.5}]},
    ]:
        blob = content_blob(content)
        assert tag(blob) == content["type"], content


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({"type": "dialogue", "role": "assistant", "text": "x", "tool_calls": "call"}, "tool_calls"),
        ({"type": "artifact"}, "text"),
        ({"type": "artifact", "text": "t"}, "canonical"),  # content_blob adds artifact_type and role
        ({"type": "freeform", "payload": b"\x00", "role": "user"}, "bytes"),
        ({"type": "annotation", "priority": "urgent"}, "priority"),
        ({"type": "merge", "strategy": "ours", "source": "x", "conflicts": True}, "conflicts"),
        ({"type": "tool_original"}, "missing"),
    ],
)
def test_malformed_typed_blobs_are_tagged_invalid_with_the_reason(data: Any, why: str) -> None:
    found = tag(Blob(data=data))
    assert found.startswith("invalid:")
    assert why in found


def test_a_tool_schema_must_carry_its_name() -> None:
    assert tag(ToolSchema(name="a", schema={"name": "a", "input_schema": {"type": "object"}})) == "tool"
    renamed = ToolSchema(name="a", schema={"name": "b"})
    assert "named 'b'" in tag(renamed)
    with pytest.raises(ObjectRuleError, match="named 'b'"):
        check(renamed, Tags(MemoryStore()))


def test_a_received_tool_schema_is_held_to_what_any_writer_could_store() -> None:
    """Today's shape rules are input policy: a stored or received tool only needs what every release required
    (a dict with a string name, the one the object says), so a store written before the rules stays valid."""
    legacy = {
        "a.b": {"name": "a.b", "input_schema": {"type": "object"}},
        "search docs": {"name": "search docs", "description": "space in the name"},
        "a": {"name": "a", "input_schema": {"type": "string"}},
        "c": {"name": "c", "input_schema": {"type": "object"}, "surprise": 1},
        "get_weather": {"type": "function", "function": {"name": "get_weather", "parameters": {}}},
        "x": {"type": "mystery", "name": "x"},
    }
    for name, schema in legacy.items():
        assert tag(ToolSchema(name=name, schema=schema)) == "tool", name
    for name, schema in {
        "a": {"input_schema": {"type": "object"}},  # no name at all: no writer ever stored that
        "web_search_20250305": {"type": "web_search_20250305"},  # nor a nameless server tool
        "f": {"type": "function", "function": {"name": 3}},
        "g": {"type": "function", "function": {"name": "h"}},  # the name it says is not the object's
    }.items():
        found = tag(ToolSchema(name=name, schema=schema))
        assert found.startswith("invalid:tool"), found


def test_fsck_objects_reports_what_the_validator_refuses() -> None:
    store = MemoryStore()
    blob = store.put(Blob(data={"type": "dialogue", "role": "user", "text": "hi"}))
    bad_parent = store.put(Commit(parents=(blob,), content=blob, created_at=START_US))
    bad_time = store.put(Commit(content=blob, created_at=-(2**63)))
    bad_set = store.put(ToolSet(tools=(blob,)))
    good = store.put(Commit(content=blob, created_at=START_US))
    problems = {p.where: p for p in fsck_objects(store)}
    assert set(problems) == {bad_parent, bad_time, bad_set}
    assert "parents[0]" in problems[bad_parent].detail
    assert "ts" in problems[bad_time].detail
    assert "tools[0]" in problems[bad_set].detail
    assert good not in problems
    assert all(p.kind == "invalid" for p in problems.values())


def test_cli_fsck_reports_an_object_that_breaks_the_semantic_rules(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tractkv.cli import cli
    from tractkv.model import Blob, Commit
    from tractkv.store import LmdbStore

    path = str(tmp_path / "hostile")
    with LmdbStore(path) as store:
        blob_id = store.put(Blob(data={"type": "dialogue", "role": "user", "text": "hi"}))
        bad = store.put(Commit(parents=(blob_id,), content=blob_id, created_at=1))
    result = CliRunner().invoke(cli, ["--store", path, "fsck"])
    assert result.exit_code == 1
    assert f"{bad}" in result.output
    assert "is a blob, not a commit" in result.output


def test_hostile_nesting_in_tool_call_arguments_is_a_content_error() -> None:
    payload = {
        "type": "dialogue",
        "role": "assistant",
        "text": "",
        "tool_calls": [{"id": "c1", "name": "f", "arguments": "[" * 100_000}],
    }
    with pytest.raises(ContentError, match="nested too deeply"):
        content_blob(payload)
