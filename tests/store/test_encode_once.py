"""Each piece of write-path work happens once: the write path encodes and hashes each object it stores once
(ids come from ``batch.put``), and message content is validated once on its way into a blob."""

from __future__ import annotations

import math
from typing import Any

import attrs
import pytest

from tractkv import Tract, codec
from tractkv.engine.content import DialogueContent, content_blob
from tractkv.engine.content.payload import normalize
from tractkv.errors import ContentError, EncodeError
from tractkv.ids import hash_bytes
from tractkv.model import (
    Blob,
    Commit,
    ToolSchema,
    ToolSet,
    UsageRecord,
    decode,
    encode,
    encode_with_id,
    object_id,
    objects,
)
from tractkv.store import Store

OBJECTS = [
    Blob(data={"text": "hi", "n": [1, 2.5]}),
    Commit(created_at=1, metadata={"k": "v"}),
    ToolSchema(name="search", schema={"type": "function", "function": {"name": "search"}}),
    ToolSet(tools=()),
    UsageRecord(usage_id="u1", tool_name="search", status="success", started_at=1),
]


def _fresh(obj: Any) -> Any:
    """An equal object that has not been encoded yet (built again from its fields)."""
    return type(obj)(**{a.name: getattr(obj, a.name) for a in attrs.fields(type(obj))})


@pytest.fixture
def dumps_calls(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every object encoding (``object_bytes``, which ``encode_with_id`` calls once per object), recorded as
    the object's wire map (what the tests below read its kind from)."""
    calls: list[object] = []
    real = objects.object_bytes

    def counting(obj: Any) -> bytes:
        calls.append({**obj.to_wire(), "t": obj.KIND, "v": 1})
        return real(obj)

    monkeypatch.setattr(objects, "object_bytes", counting)
    return calls


@pytest.mark.parametrize("template", OBJECTS, ids=lambda o: type(o).__name__)
def test_put_returns_the_id_of_the_one_encoding_it_makes(
    template: Any, dumps_calls: list[object], store: Store
) -> None:
    obj = _fresh(template)
    batch = store.new_batch()
    oid = batch.put(obj)
    assert len(dumps_calls) == 1
    assert oid == object_id(obj)
    assert encode_with_id(obj) == (oid, encode(obj))
    assert hash_bytes(encode(obj)) == oid
    assert decode(encode(obj), oid) == obj


def _object_dumps(calls: list[object]) -> list[str]:
    """The kinds of the objects encoded (reflog entries and rows are encoded too; they are not objects)."""
    return [c["t"] for c in calls if isinstance(c, dict) and "t" in c and "v" in c]


def test_a_commit_with_tools_encodes_each_object_once(dumps_calls: list[object]) -> None:
    tools = [
        {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in ("a", "b")
    ]
    with Tract.open() as t:
        dumps_calls.clear()
        t.user("hi", tools=tools)
        assert sorted(_object_dumps(dumps_calls)) == ["blob", "commit", "tool", "tool", "toolset"]
        dumps_calls.clear()
        t.set_tools(tools)
        assert sorted(_object_dumps(dumps_calls)) == ["tool", "tool", "toolset"]


def test_a_summarized_tool_result_with_usages_encodes_each_object_once(dumps_calls: list[object]) -> None:
    with Tract.open() as t:
        t.assistant("", tool_calls=[{"id": "c1", "name": "grep", "arguments": {}}])
        t.on("tool_result", lambda pending: (pending.edit_result("short"), pending.approve()))
        child = UsageRecord(usage_id="u2", tool_name="read", status="success", started_at=2)
        child_id = object_id(child)
        parent = UsageRecord(
            usage_id="u1", tool_name="grep", status="success", started_at=1, children=(child_id,)
        )
        dumps_calls.clear()
        info = t.tool_result("c1", "grep", "a long raw output", usages=[parent, child])
        assert info is not None
        assert sorted(_object_dumps(dumps_calls)) == ["blob", "blob", "commit", "usage", "usage"]
        commit = t.store.get_commit(info.commit_id)
        assert commit.links["usages"] == (object_id(parent),)  # the top-level record only
        assert t.original_of(info.commit_id) == "a long raw output"


def test_evolve_gives_a_new_id() -> None:
    commit = Commit(created_at=1)
    first = object_id(commit)
    later = attrs.evolve(commit, created_at=2)
    assert object_id(later) != first
    assert object_id(later) == object_id(Commit(created_at=2))


# --- content validated once ------------------------------------------------------------------------------


@pytest.fixture
def check_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The path of every top-level payload check."""
    calls: list[str] = []
    real = codec.check_value

    def counting(value: object, path: str = "", depth: int = 0) -> None:
        calls.append(path)
        real(value, path, depth)

    monkeypatch.setattr(codec, "check_value", counting)
    return calls


def test_content_blob_checks_the_payload_once(check_calls: list[str]) -> None:
    content = {
        "type": "dialogue",
        "role": "assistant",
        "text": "calling",
        "tool_calls": [{"id": "c1", "name": "search", "arguments": {"q": "x", "n": [1, 2]}}],
    }
    blob = content_blob(content)
    assert check_calls == ["data"]
    assert isinstance(blob, Blob)
    assert blob.data == normalize(content)
    assert blob == Blob(data=normalize(content))
    assert content_blob(DialogueContent(role="user", text="hi")).data == {
        "type": "dialogue",
        "role": "user",
        "text": "hi",
    }


@pytest.mark.parametrize(
    ("payload", "where", "bad"),
    [
        (math.nan, "payload", math.nan),
        ({"x": [1, {2, 3}]}, "payload.x[1]", {2, 3}),
        ({"deep": {"k": math.inf}}, "payload.deep.k", math.inf),
    ],
)
def test_content_errors_name_the_place_inside_the_payload(payload: object, where: str, bad: object) -> None:
    with pytest.raises(EncodeError) as direct:
        codec.check_value(bad, where)
    with pytest.raises(ContentError) as refused:
        content_blob({"type": "freeform", "payload": payload})
    assert str(refused.value) == str(direct.value)  # as when normalize checked the dict itself
    with pytest.raises(ContentError) as again:
        normalize({"type": "freeform", "payload": payload})
    assert str(again.value) == str(direct.value)


def test_content_shape_errors_come_before_value_errors() -> None:
    with pytest.raises(ContentError, match="unknown fields"):
        content_blob({"type": "freeform", "payload": math.nan, "extra": 1})
    with pytest.raises(ContentError, match="lone surrogate"):
        content_blob({"type": "instruction", "text": "\ud800"})
