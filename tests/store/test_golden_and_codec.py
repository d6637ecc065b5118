"""Canonical encoding and identity: golden vectors pin the format; properties pin the rules."""

from __future__ import annotations

import math
from typing import Any

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tractkv import codec
from tractkv.errors import DecodeError, EncodeError
from tractkv.ids import hash_bytes, is_object_id
from tractkv.model import Blob, Commit, ToolSchema, ToolSet, decode, encode, object_id

BLOB = Blob(data={"type": "dialogue", "role": "user", "text": "Hello"})
BLOB2 = Blob(data={"text": "héllo wörld", "n": [1, 1.5, -0.0, None, True], "raw": b"\x00\xff"})
TOOL = ToolSchema(
    name="get_weather",
    schema={"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
)
TOOLSET = ToolSet(tools=(object_id(TOOL),))
COMMIT = Commit(content=object_id(BLOB), tools=object_id(TOOLSET), created_at=1_700_000_000_000_000)
COMMIT2 = Commit(
    parents=(object_id(COMMIT),),
    content=object_id(BLOB2),
    operation="edit",
    edit_target=object_id(COMMIT),
    message="fix",
    metadata={"k": 1},
    generation_config={"temperature": 0.5},
    created_at=1_700_000_000_000_001,
)

# Any change here is a format change: it needs a new OBJECT_FORMAT, never an edit of these ids.
GOLDEN = [
    (BLOB, "202e7c12670e32e67c88472cebc86fc3a9b4c3cb13eda906047bdcd72dbaa69a"),
    (BLOB2, "403dac5dd1d8946199bd9a3cf1cd12309c2f4e5127e960fd007d407bbf861402"),
    (TOOL, "3bc0d18d371946c514926d32a37e8ed0ee8030f9d6f2a54ee6e2e36feec628a9"),
    (TOOLSET, "4bc7ee5509c9840ef107fae1b061f26f3dda2d2574cd1a40ae5c829382c6ffa7"),
    (COMMIT, "cc04c13bb17c8b311d88b4cb66d7b1e13dd41066733c602737c0a465e6580d4f"),
    (COMMIT2, "f684309c174ec0a98141a2b1f51b7ec26df8d7dcd4976af3e1e448bf2bc03336"),
]


@pytest.mark.parametrize(("obj", "oid"), GOLDEN, ids=[type(o).__name__ for o, _ in GOLDEN])
def test_golden_ids(obj: Any, oid: str) -> None:
    assert object_id(obj) == oid
    data = encode(obj)
    assert hash_bytes(data) == oid
    assert decode(data, oid, strict=True) == obj


def test_golden_canonical_cbor_bytes() -> None:
    # keys sorted length-first then bytewise; floats in the shortest exact width; -0.0 kept
    assert codec.dumps({"b": 1, "a": [1.5, -0.0, "x"], "aa": None}).hex() == (
        "a3616183f93e00f980006178616201626161f6"
    )


json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | st.binary(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


def same(a: Any, b: Any) -> bool:
    """Equality that tells -0.0 from 0.0 and 1 from 1.0 (what the encoding distinguishes)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@given(json_like)
def test_allowed_values_round_trip_exactly(value: Any) -> None:
    data = codec.dumps(value)
    assert same(codec.loads_canonical(data), value)


@given(st.dictionaries(st.text(max_size=8), json_like, max_size=6), st.randoms())
def test_map_key_order_never_changes_an_id(value: dict[str, Any], rnd: Any) -> None:
    items = list(value.items())
    rnd.shuffle(items)
    assert object_id(Blob(data=dict(items))) == object_id(Blob(data=value))


def test_distinct_values_that_python_calls_equal_have_distinct_ids() -> None:
    assert object_id(Blob(data=1)) != object_id(Blob(data=1.0))
    assert object_id(Blob(data=0.0)) != object_id(Blob(data=-0.0))
    assert object_id(Blob(data=True)) != object_id(Blob(data=1))
    nfc, nfd = "\u00e9", "e\u0301"  # no Unicode normalization
    assert object_id(Blob(data=nfc)) != object_id(Blob(data=nfd))


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"x": float("nan")}, "x"),
        ({"x": [float("inf")]}, "x[0]"),
        ({"x": {1: "a"}}, "x[1]"),
        ({"x": "\ud800"}, "x"),
        ({"x": 2**64}, "x"),
        ({"x": {1, 2}}, "x"),
    ],
)
def test_disallowed_values_are_refused_naming_the_path(value: Any, where: str) -> None:
    with pytest.raises(EncodeError) as info:
        Blob(data=value)
    assert f"data.{where}" in str(info.value)


def test_nesting_is_bounded() -> None:
    deep: Any = "leaf"
    for _ in range(codec.MAX_DEPTH + 2):
        deep = [deep]
    with pytest.raises(EncodeError, match="nested deeper"):
        codec.check_value(deep)


def test_non_canonical_spellings_and_tags_are_rejected() -> None:
    canonical = encode(BLOB)
    wire = cbor2.loads(canonical)
    reordered = cbor2.dumps(dict(reversed(list(wire.items()))))  # not canonical key order
    assert reordered != canonical
    with pytest.raises(DecodeError, match="canonical"):
        decode(reordered, strict=True)
    with pytest.raises(DecodeError, match="tag"):
        codec.loads(cbor2.dumps(cbor2.CBORTag(40000, 0)))
    # tags cbor2 decodes itself (a date, a bignum spelling of a small int) fail the strict checks instead
    for sneaky in (
        {"t": "blob", "v": 1, "data": cbor2.CBORTag(1, 0)},
        {"t": "blob", "v": 1, "data": cbor2.CBORTag(2, b"\x05")},
    ):
        with pytest.raises(DecodeError):
            decode(cbor2.dumps(sneaky), strict=True)
    with pytest.raises(DecodeError):
        codec.loads_canonical(canonical + b"\x00")  # trailing bytes
    with pytest.raises(DecodeError):
        decode(canonical + b"\x00", strict=True)


def test_unknown_kinds_and_fields_are_refused() -> None:
    with pytest.raises(DecodeError, match="unknown object kind"):
        decode(codec.dumps({"t": "mystery", "v": 1}))
    with pytest.raises(DecodeError, match="unknown blob fields"):
        decode(codec.dumps({"t": "blob", "v": 1, "data": 1, "extra": 2}))


@given(st.binary(max_size=64))
def test_ids_are_64_lowercase_hex(data: bytes) -> None:
    oid = hash_bytes(data)
    assert is_object_id(oid)
    assert oid == oid.lower()
    assert len(oid) == 64


# --- the fast encoders (issue 18): the same bytes as cbor2's canonical mode -----------------------------

wide_ints = st.integers(min_value=-(2**70), max_value=2**70)  # bignums: left to cbor2, same bytes
maps = st.dictionaries(st.text(max_size=8), json_like | wide_ints | st.tuples(json_like), max_size=6)


@given(maps | json_like | st.tuples(json_like, json_like))
def test_dumps_writes_exactly_cbor2s_canonical_bytes(value: Any) -> None:
    assert codec.dumps(value) == cbor2.dumps(value, canonical=True)


@pytest.mark.parametrize(
    "value",
    [
        {"": 0, "a": 23, "b": 24, "c": 255, "d": 256, "e": 65535, "f": 65536, "g": 2**32 - 1, "h": 2**32},
        {"n": -1, "m": -24, "o": -25, "p": -(2**63), "q": 2**64 - 1, "r": -(2**64), "s": 2**64},
        {"t": "x" * 23, "u": "x" * 24, "v": "é" * 200, "w": b"\x00" * 70000, "x": [None, True, False]},
        {"longer key": 1, "k": 2, "é": 3, "ab": {"ba": [], "b": {}}},
    ],
)
def test_dumps_matches_cbor2_at_every_length_boundary(value: dict[str, Any]) -> None:
    assert codec.dumps(value) == cbor2.dumps(value, canonical=True)


def test_dumps_refuses_a_lone_surrogate_as_before() -> None:
    with pytest.raises(EncodeError):
        codec.dumps({"text": "\ud800"})


ids = st.binary(min_size=32, max_size=32).map(bytes.hex)
commits = st.builds(
    Commit,
    parents=st.lists(ids, max_size=3, unique=True).map(tuple),
    content=st.none() | ids,
    tools=st.none() | ids,
    operation=st.sampled_from(["append", "edit", "annotate", "merge", "compress", "é"]),
    edit_target=st.none() | ids,
    reply_to=st.none() | ids,
    message=st.none() | st.text(max_size=30),
    metadata=st.none() | st.dictionaries(st.text(max_size=5), json_like, max_size=3),
    generation_config=st.none() | st.dictionaries(st.text(max_size=5), json_like, max_size=3),
    created_at=st.integers(min_value=-(2**65), max_value=2**65),
    links=st.dictionaries(st.text(max_size=6), st.lists(ids, max_size=2).map(tuple), max_size=3),
)


@given(
    commits | st.builds(Blob, data=json_like | st.dictionaries(st.text(max_size=8), json_like, max_size=6))
)
def test_object_bytes_are_the_generic_encoding_of_the_wire_map(obj: Any) -> None:
    from tractkv.model.objects import generic_object_bytes, object_bytes

    assert object_bytes(obj) == generic_object_bytes(obj)
    assert object_bytes(obj) == cbor2.dumps({**obj.to_wire(), "t": obj.KIND, "v": 1}, canonical=True)


@given(
    parents=st.lists(ids, max_size=1).map(tuple),
    content=ids,
    tools=st.none() | ids,
    created_at=st.integers(min_value=0, max_value=2**53),
)
def test_a_trusted_commit_is_the_commit_the_validating_constructor_makes(
    parents: tuple[str, ...], content: str, tools: str | None, created_at: int
) -> None:
    from tractkv.model.objects import trusted_commit

    fields = {"parents": parents, "content": content, "tools": tools, "created_at": created_at}
    made = trusted_commit(operation="append", **fields)  # type: ignore[arg-type]
    assert made == Commit(**fields)  # type: ignore[arg-type]
    assert object_id(made) == object_id(Commit(**fields))  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["parents", "tools"])
def test_a_trusted_commit_still_checks_the_ids_read_from_rows(field: str) -> None:
    from tractkv.model.objects import trusted_commit

    fields: dict[str, Any] = {"parents": (), "tools": None}
    fields[field] = ("NOT-AN-ID",) if field == "parents" else "NOT-AN-ID"
    with pytest.raises(EncodeError, match="not an object id"):
        trusted_commit(content="a" * 64, operation="append", created_at=1, **fields)


@given(st.sampled_from(["user", "assistant"]), st.text(min_size=1))
def test_a_text_blob_is_written_as_the_generic_encoding(role: str, text: str) -> None:
    """The plain-text append's blob bytes, written from constants, are the blob's canonical bytes."""
    from tractkv.model.objects import generic_object_bytes, text_blob_bytes

    try:
        blob = Blob(data={"type": "dialogue", "role": role, "text": text})
    except EncodeError:  # a lone surrogate: content_objects refuses it before any bytes are written
        return
    assert text_blob_bytes(role, text) == generic_object_bytes(blob)
    assert hash_bytes(text_blob_bytes(role, text)) == object_id(blob)
