"""The fast paths of sync (issue 18) keep every check: links-only walks read the same links as a full decode,
each received object is verified once but by every rule, and a ref update's closure check bounded by what
arrived still refuses a closure with a hole."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import cbor2
import pytest

from tractkv import Tract
from tractkv.errors import DecodeError, EncodeError, RejectedObject, UnsupportedFormat
from tractkv.ids import ObjectId, hash_bytes
from tractkv.model import Blob, Commit, ToolSchema, ToolSet, UsageRecord, decode, encode_with_id
from tractkv.model.objects import links_of
from tractkv.store import MemoryStore, Store, fsck
from tractkv.sync.negotiate import candidate_ids, iter_candidates, objects_for
from tractkv.sync.receive import Receiver, apply_ref_updates
from tractkv.sync.remote import RefUpdate

from .conftest import InProcessHub

MAIN = "refs/heads/main"
TS = 1_700_000_000_000_000
Pair = tuple[ObjectId, bytes]


def history() -> Tract:
    """A history using every kind of link a Tract writes: tools, a tool call and its result with a usage
    record, an edit, an annotation, a merge and a compression."""
    t = Tract(MemoryStore(), clock=iter(range(TS, TS + 10**9, 1000)).__next__)
    t.set_tools([{"name": "lookup", "description": "d", "input_schema": {"type": "object"}}])
    t.system("s")
    t.user("hello")
    t.assistant("", tool_calls=[{"id": "c1", "name": "lookup", "arguments": {"q": "x"}}])
    usage = UsageRecord(
        usage_id="u1", tool_name="lookup", status="success", started_at=TS, completed_at=TS + 5
    )
    t.tool_result("c1", "lookup", "found it", usages=[usage])
    t.assistant("first answer")
    t.assistant("second answer", operation="edit", edit_target="HEAD")
    t.annotate("HEAD~1", "pinned", reason="keep")
    t.branch("side")
    t.user("on the side")
    t.switch("main")
    t.user("on main")
    t.merge("side")
    t.compress(content="a summary")
    return t


def test_links_of_reads_the_links_a_full_decode_reads_for_every_kind() -> None:
    t = history()
    extra = [
        UsageRecord(
            usage_id="u2",
            tool_name="lookup",
            status="success",
            started_at=TS,
            commit=ObjectId(t.head or ""),
            children=(hash_bytes(b"child"),),
            heads=(hash_bytes(b"head"),),
        ),
        ToolSet(tools=(hash_bytes(b"a"), hash_bytes(b"b"))),
        ToolSchema(name="n", schema={"name": "n"}),
        Blob(data={"type": "dialogue", "role": "user", "text": "x"}),
        Commit(
            parents=(hash_bytes(b"p1"), hash_bytes(b"p2")),
            content=hash_bytes(b"c"),
            tools=hash_bytes(b"t"),
            operation="edit",
            edit_target=hash_bytes(b"e"),
            reply_to=hash_bytes(b"r"),
            links={"sources": (hash_bytes(b"s1"), hash_bytes(b"s2")), "usages": (hash_bytes(b"u"),)},
        ),
    ]
    pairs = [(oid, data) for oid, data in t.store.iter_raw_objects()] + [encode_with_id(o) for o in extra]
    kinds = set()
    for oid, data in pairs:
        obj = decode(data, oid)
        kinds.add(obj.KIND)
        assert links_of(data) == list(obj.iter_links()), obj
    assert kinds == {"blob", "commit", "tool", "toolset", "usage"}
    assert any(isinstance(decode(d), Commit) and decode(d).links for _, d in pairs)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("wire", "error"),
    [
        ({"t": "commit", "v": 1, "op": "append", "ts": 1, "parents": [b"\x01" * 31]}, DecodeError),
        ({"t": "commit", "v": 1, "op": "append", "ts": 1, "content": "not an id"}, DecodeError),
        ({"t": "toolset", "v": 1, "tools": [7]}, DecodeError),
        ({"t": "mystery", "v": 1}, DecodeError),
        ({"t": "commit", "v": 2, "op": "append", "ts": 1}, UnsupportedFormat),
        ([1, 2], DecodeError),
    ],
)
def test_links_of_raises_what_decode_raises_on_a_shape_it_does_not_know(wire: Any, error: type) -> None:
    data = cbor2.dumps(wire, canonical=True)
    with pytest.raises(error):
        decode(data)
    with pytest.raises(error):
        links_of(data)


# --- one verification, every rule -----------------------------------------------------------------------


def raw(value: Any, *, canonical: bool = True) -> Pair:
    data = cbor2.dumps(value, canonical=canonical)
    return hash_bytes(data), data


def hostile_blobs() -> dict[str, Pair]:
    """Blobs each breaking one rule that only the strict decode checks (the semantic rules never see them)."""
    nested: Any = "x"
    for _ in range(70):
        nested = [nested]
    return {
        # keys out of canonical order: same content, another spelling, another id
        "non-canonical": raw({"v": 1, "t": "blob", "data": {"b": 1, "a": 2}}, canonical=False),
        "int-below-64-bit": raw({"t": "blob", "v": 1, "data": -(2**64)}),
        "nan": raw({"t": "blob", "v": 1, "data": float("nan")}),
        "too-deep": raw({"t": "blob", "v": 1, "data": nested}),
        "unknown-field": raw({"t": "blob", "v": 1, "data": 1, "extra": 2}),
    }


@pytest.mark.parametrize("name", sorted(hostile_blobs()))
def test_the_hub_refuses_each_value_rule_of_the_strict_decode(
    name: str, in_process_hub: Callable[..., InProcessHub]
) -> None:
    oid, data = hostile_blobs()[name]
    if name == "non-canonical":
        assert data != cbor2.dumps(cbor2.loads(data), canonical=True)
    hub = in_process_hub()
    with hub.remote() as remote, pytest.raises(RejectedObject) as info:
        remote.push([(oid, data)], [RefUpdate(MAIN, None, oid)])
    assert info.value.status == 422
    assert info.value.oid == oid
    assert "not a readable tractkv object" in str(info.value)
    assert hub.state() == ({}, 0)


def test_a_wrong_hash_is_refused_once_checked(in_process_hub: Callable[..., InProcessHub]) -> None:
    t = history()
    pairs = list(objects_for(t.store, [ObjectId(t.head or "")], []))
    oid, data = pairs[3]
    hub = in_process_hub()
    with hub.remote() as remote, pytest.raises(RejectedObject, match="do not hash to their id") as info:
        remote.push([*pairs[:3], (oid, data + b"\x00"), *pairs[4:]], [RefUpdate(MAIN, None, t.head)])
    assert info.value.oid == oid
    refs, count = hub.state()
    assert (refs, count) == ({}, 3)  # what arrived whole before it is kept


# --- the closure check bounded by what arrived ----------------------------------------------------------


def delete(store: Store, oid: ObjectId) -> None:
    """What a concurrent gc does to an object no ref reaches yet."""
    batch = store.new_batch()
    batch.delete_object(oid)
    store.apply(batch)


def test_a_ref_does_not_move_when_an_object_that_arrived_is_gone_since() -> None:
    t = history()
    tip = ObjectId(t.head or "")
    pairs = list(objects_for(t.store, [tip], []))
    target = MemoryStore()
    receiver = Receiver(target, batch_objects=4)
    receiver.receive(pairs)
    gone = pairs[len(pairs) // 2][0]
    delete(target, gone)
    (result,) = apply_ref_updates(target, [RefUpdate(MAIN, None, tip)], received=receiver)
    assert (result.ok, result.reason) == (False, "missing-objects")
    assert gone in result.detail
    assert target.get_ref(MAIN) is None


def test_a_ref_does_not_move_when_a_link_outside_the_transfer_is_gone() -> None:
    t = history()
    tip = ObjectId(t.head or "")
    pairs = list(objects_for(t.store, [tip], []))
    target = MemoryStore()
    half = len(pairs) // 2
    Receiver(target).receive(pairs[:half])  # an earlier, interrupted transfer left these
    receiver = Receiver(target)
    stats = receiver.receive(pairs)
    assert (stats.objects, stats.new_objects) == (len(pairs), len(pairs) - half)
    arrived = receiver.arrived
    assert arrived is not None
    assert not any(oid in arrived for oid, _ in pairs[:half])
    (ok,) = apply_ref_updates(target, [RefUpdate("refs/heads/check", None, tip)], received=receiver)
    assert ok.ok
    outside = next(
        link for links in arrived.values() for link in links if link not in arrived
    )  # a link of this transfer's objects to an object that was already here
    delete(target, outside)
    (result,) = apply_ref_updates(target, [RefUpdate(MAIN, None, tip)], received=receiver)
    assert (result.ok, result.reason) == (False, "missing-objects")
    assert outside in result.detail


def test_a_receiver_over_its_memory_bound_walks_the_store_instead() -> None:
    t = history()
    tip = ObjectId(t.head or "")
    pairs = list(objects_for(t.store, [tip], []))
    target = MemoryStore()
    receiver = Receiver(target, batch_objects=2, remember=3)
    receiver.receive(pairs)
    assert receiver.arrived is None
    gone = pairs[1][0]
    delete(target, gone)
    (result,) = apply_ref_updates(target, [RefUpdate(MAIN, None, tip)], received=receiver)
    assert (result.ok, result.reason) == (False, "missing-objects")
    assert gone in result.detail


def test_a_push_of_a_commit_already_stored_walks_the_store(
    in_process_hub: Callable[..., InProcessHub],
) -> None:
    """The hub's closure check for a tip this push did not bring (a new branch at an existing commit)."""
    t = history()
    tip = ObjectId(t.head or "")
    pairs = list(objects_for(t.store, [tip], []))
    hub = in_process_hub()
    with hub.remote() as remote:
        assert remote.push(pairs, [RefUpdate(MAIN, None, tip)]).ok
        assert remote.push([], [RefUpdate("refs/heads/copy", None, tip)]).ok
    assert hub.state()[0] == {MAIN: tip, "refs/heads/copy": tip}
    assert fsck(hub.store).ok


def test_a_strict_decode_leaves_the_model_checks_on_for_everything_else() -> None:
    """A strict decode checks the whole wire once, so the field validators skip that work while it builds the
    object; the objects a caller builds, before and after (also after a decode that failed), are checked."""
    bad = cbor2.dumps(
        {"t": "commit", "v": 1, "op": "append", "ts": 1, "parents": [b"\x01" * 31]}, canonical=True
    )
    good = encode_with_id(Commit(parents=(hash_bytes(b"p"),), operation="append", created_at=1))[1]
    for data in (good, bad):
        with contextlib.suppress(DecodeError):
            decode(data, strict=True)
        with pytest.raises(EncodeError):
            Blob(data=float("nan"))
        with pytest.raises(EncodeError):
            Commit(parents=(ObjectId("not an id"),))
        with pytest.raises(EncodeError):
            Commit(content=ObjectId("ABC"))
        with pytest.raises(EncodeError):
            Commit(message="lone \ud800 surrogate")


def test_the_negotiation_walk_reports_the_sizes_push_checks() -> None:
    t = history()
    tip = ObjectId(t.head or "")
    sizes: dict[ObjectId, int] = {}
    ids = candidate_ids(t.store, [tip], [], sizes=sizes)
    assert sizes == {oid: len(t.store.get_raw(oid) or b"") for oid in ids}
    assert ids == [oid for oid, _ in objects_for(t.store, [tip], [])]


def test_the_hub_streams_what_the_negotiation_offers_while_it_walks(
    in_process_hub: Callable[..., InProcessHub],
) -> None:
    t = history()
    tip = ObjectId(t.head or "")
    base = ObjectId(t.get_commit("HEAD~3").commit_id)
    store = t.store
    assert list(iter_candidates(store, [tip], [base])) == list(objects_for(store, [tip], [base]))
    assert list(iter_candidates(store, [tip], [])) == list(objects_for(store, [tip], []))
    hub = in_process_hub()
    with hub.remote() as remote:
        assert remote.push(list(objects_for(store, [tip], [])), [RefUpdate(MAIN, None, tip)]).ok
        fetched = list(remote.fetch([tip], [base]))
    assert fetched == list(objects_for(store, [tip], [base]))


def test_a_receiver_that_does_not_track_links_checks_the_closure_in_the_store() -> None:
    """A fetch's receiver records no links (no ref update is checked with it); given one anyway, the check
    walks the stored closure and still finds a hole."""
    t = history()
    tip = ObjectId(t.head or "")
    pairs = list(objects_for(t.store, [tip], []))
    target = MemoryStore()
    receiver = Receiver(target, track_links=False)
    receiver.receive(pairs)
    assert receiver.arrived is None
    gone = pairs[2][0]
    delete(target, gone)
    (result,) = apply_ref_updates(target, [RefUpdate(MAIN, None, tip)], received=receiver)
    assert (result.ok, result.reason) == (False, "missing-objects")
    assert gone in result.detail
