"""Each piece of write-path work happens once: an object is encoded and hashed once however often its id
and bytes are asked for, and message content is validated once on its way into a blob."""

from __future__ import annotations

import copy
import math
import pickle
from typing import Any

import attrs
import pytest

from tractkv import codec
from tractkv.engine.content import DialogueContent, content_blob, normalize
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
    """Every call of the canonical encoder, recorded."""
    calls: list[object] = []
    real = codec.dumps

    def counting(value: Any) -> bytes:
        calls.append(value)
        return real(value)

    monkeypatch.setattr(codec, "dumps", counting)
    return calls


@pytest.mark.parametrize("template", OBJECTS, ids=lambda o: type(o).__name__)
def test_an_object_is_encoded_and_hashed_once(template: Any, dumps_calls: list[object], store: Store) -> None:
    obj = _fresh(template)
    oid = object_id(obj)
    assert encode(obj) is encode(obj)
    assert encode_with_id(obj) == (oid, encode(obj))
    batch = store.new_batch()
    assert batch.put(obj) == oid  # put returns the id it computed, here the memo
    assert store.new_batch().put(obj) == oid
    assert len(dumps_calls) == 1
    assert hash_bytes(encode(obj)) == oid  # the memo is the real encoding
    assert decode(encode(obj), oid) == obj


@pytest.mark.parametrize("template", OBJECTS, ids=lambda o: type(o).__name__)
def test_the_memo_is_no_part_of_the_value(template: Any) -> None:
    used, unused = _fresh(template), _fresh(template)
    object_id(used)
    assert used == unused
    assert hash(used) == hash(unused)
    assert repr(used) == repr(unused)
    assert [a.name for a in attrs.fields(type(used))] == [a.name for a in attrs.fields(type(unused))]
    restored = pickle.loads(pickle.dumps(used))
    assert restored == used
    assert object_id(restored) == object_id(used)
    assert object_id(copy.copy(used)) == object_id(used)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        used._canonical = (object_id(used), b"")


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
