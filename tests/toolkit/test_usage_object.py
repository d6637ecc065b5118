"""The ``usage`` object kind: wire format, omitted optional fields, golden id."""

from __future__ import annotations

import pytest

from tractkv import codec
from tractkv.errors import DecodeError, EncodeError
from tractkv.ids import hash_bytes
from tractkv.model import KINDS, UsageRecord, decode, encode, object_id

COMMIT = "ab" * 32
CHILD = "cd" * 32
HEAD = "ef" * 32


def _full() -> UsageRecord:
    return UsageRecord(
        usage_id="0660e9652202eb5c440e55c0",
        tool_name="delegate",
        status="success",
        started_at=1_700_000_000_000_000,
        completed_at=1_700_000_000_250_000,
        arguments={"task": "find a"},
        result="a is 1",
        error=None,
        commit=COMMIT,
        tool_call_id="call_1",
        parent_id=None,
        children=(CHILD,),
        heads=(HEAD,),
    )


def test_wire_names_are_explicit_and_ids_are_raw_bytes() -> None:
    wire = codec.loads(encode(_full()))
    assert wire == {
        "t": "usage",
        "v": 1,
        "id": "0660e9652202eb5c440e55c0",
        "tool": "delegate",
        "status": "success",
        "start": 1_700_000_000_000_000,
        "end": 1_700_000_000_250_000,
        "args": {"task": "find a"},
        "result": "a is 1",
        "commit": bytes.fromhex(COMMIT),
        "call": "call_1",
        "children": [bytes.fromhex(CHILD)],
        "heads": [bytes.fromhex(HEAD)],
    }
    assert KINDS["usage"] is UsageRecord
    assert list(_full().iter_links()) == [COMMIT, CHILD, HEAD]


def test_optional_fields_are_omitted() -> None:
    minimal = UsageRecord(usage_id="u1", tool_name="t", status="interrupted", started_at=5)
    assert codec.loads(encode(minimal)) == {
        "t": "usage",
        "v": 1,
        "id": "u1",
        "tool": "t",
        "status": "interrupted",
        "start": 5,
    }
    assert list(minimal.iter_links()) == []


def test_round_trip_and_golden_id() -> None:
    record = _full()
    data = encode(record)
    assert decode(data, strict=True) == record
    # Pinned: if this changes, the usage wire format changed and stored ids would break.
    assert object_id(record) == hash_bytes(data)
    assert object_id(record) == GOLDEN


def test_bad_values_and_unknown_fields_are_refused() -> None:
    with pytest.raises(EncodeError, match="status"):
        UsageRecord(usage_id="u", tool_name="t", status="done", started_at=1)
    with pytest.raises(EncodeError):
        UsageRecord(usage_id="", tool_name="t", status="error", started_at=1)
    with pytest.raises(EncodeError):
        UsageRecord(usage_id="u", tool_name="t", status="error", started_at=1, children=("zz",))
    wire = codec.loads(encode(_full()))
    wire["later"] = 1
    with pytest.raises(DecodeError, match="unknown usage fields"):
        decode(codec.dumps(wire))


GOLDEN = "3ccfebaeb77adacec29b3e057c4408a0be4ec2a8c7b5db9121a5adbab0716ff5"  # format 1
