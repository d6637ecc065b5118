"""The receiver's fast paths (issue 18) accept and refuse exactly what the general ones do.

* :func:`decode_received` reads the two shapes every append writes (a plain-text message blob, a plain append
  commit) from the bytes: for any bytes it returns what ``decode(strict=True)`` returns, or raises what it
  raises (generated objects, every one-byte change of them, and hand-made near misses).
* the tag of a plain-text message blob is the general rule's answer;
* ``Reader.stored`` (one lookup loop for many ids) answers what ``has`` answers;
* a hub and a clone refuse a hostile object with the same answer whichever path decodes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import cbor2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tractkv.store.base as store_base
from tractkv import Tract
from tractkv.engine.history import validate
from tractkv.errors import RejectedObject, TractError
from tractkv.ids import ObjectId, hash_bytes
from tractkv.model import Blob, Commit, StoredObject, decode, encode_with_id, objects
from tractkv.model.objects import decode_received, links_of
from tractkv.store import LmdbStore, MemoryStore, Table
from tractkv.sync import receive
from tractkv.sync.negotiate import objects_for
from tractkv.sync.receive import Receiver, apply_ref_updates, receive_objects, verify
from tractkv.sync.remote import RefUpdate

from .conftest import Hub, InProcessHub

MAIN = "refs/heads/main"
TS = 1_700_000_000_000_000
Pair = tuple[ObjectId, bytes]


def outcome(decoder: Callable[[bytes], StoredObject], data: bytes) -> tuple[Any, ...]:
    """What decoding gives: the object (its type, fields and a blob's key order) or the error and message."""
    try:
        obj = decoder(data)
    except TractError as exc:
        return ("error", type(exc), str(exc))
    fields = attrs.asdict(obj, recurse=False)
    order = list(obj.data) if isinstance(obj, Blob) and isinstance(obj.data, dict) else None
    return ("object", type(obj), fields, order)


def strict(data: bytes, *_limits: object) -> StoredObject:
    return decode(data, strict=True)


def same_as_strict(data: bytes) -> None:
    assert outcome(decode_received, data) == outcome(strict, data)


ids = st.binary(min_size=32, max_size=32).map(lambda raw: ObjectId(raw.hex()))
texts = st.text(max_size=40) | st.sampled_from(["", "x" * 23, "x" * 24, "é" * 200, "x" * 70_000])
blobs = st.builds(
    lambda role, text: Blob(data={"type": "dialogue", "role": role, "text": text}),
    st.sampled_from(["user", "assistant"]),
    texts,
)
commits = st.builds(
    lambda parents, content, tools, ts: Commit(parents=parents, content=content, tools=tools, created_at=ts),
    st.lists(ids, max_size=1).map(tuple),
    ids,
    st.none() | ids,
    st.sampled_from([0, 23, 24, 255, 256, 65_535, 65_536, 2**32 - 1, 2**32, TS, 2**53, 2**64 - 1])
    | st.integers(0, 2**64 - 1),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=blobs | commits, data=st.data())
def test_the_fast_decode_gives_what_the_strict_decode_gives_for_the_shapes_and_every_one_byte_change(
    obj: StoredObject, data: st.DataObject
) -> None:
    _, encoded = encode_with_id(obj)
    assert decode_received(encoded) == obj
    same_as_strict(encoded)
    at = data.draw(st.integers(0, len(encoded) - 1))
    byte = data.draw(st.integers(0, 255))
    changed = encoded[:at] + bytes([byte]) + encoded[at + 1 :]
    same_as_strict(changed)
    same_as_strict(encoded[:at])  # truncated
    same_as_strict(encoded[:at] + bytes([byte]) + encoded[at:])  # a byte inserted
    same_as_strict(encoded + bytes([byte]))  # a byte after the item


def near_misses() -> dict[str, bytes]:
    """Bytes one step away from the fast shapes, each read by the general decoder."""
    blob = {"t": "blob", "v": 1, "data": {"type": "dialogue", "role": "user", "text": "hi"}}
    commit = {"t": "commit", "v": 1, "op": "append", "ts": TS, "content": b"c" * 32, "parents": [b"p" * 32]}

    def with_(base: dict[str, Any], **changes: Any) -> bytes:
        return cbor2.dumps({**base, **changes}, canonical=True)

    def data_with(**changes: Any) -> dict[str, Any]:
        return {**blob["data"], **changes}

    canonical_blob = cbor2.dumps(blob, canonical=True)
    canonical_commit = cbor2.dumps(commit, canonical=True)
    return {
        "blob": canonical_blob,
        "blob-long-length-head": canonical_blob.replace(
            b"\x62hi", b"\x78\x02hi"
        ),  # "hi" with a 1-byte length
        "blob-invalid-utf8": canonical_blob.replace(b"\x62hi", b"\x62\xff\xfe"),
        "blob-empty-text": with_(blob, data=data_with(text="")),
        "blob-role-tool": with_(blob, data=data_with(role="tool")),
        "blob-role-system": with_(blob, data=data_with(role="system")),
        "blob-text-not-str": with_(blob, data=data_with(text=b"hi")),
        "blob-extra-key": with_(blob, data=data_with(name="n")),
        "blob-version-2": with_(blob, v=2),
        "blob-version-true": with_(blob, v=True),
        "commit": canonical_commit,
        "commit-small-ts-8-bytes": with_(commit, ts=5).replace(
            b"bts\x05", b"bts\x1b" + (5).to_bytes(8, "big")
        ),
        "commit-ts-over-range": with_(commit, ts=2**64 - 1),
        "commit-ts-negative": with_(commit, ts=-1),
        "commit-ts-float": with_(commit, ts=1.5),
        "commit-two-parents": with_(commit, parents=[b"p" * 32, b"q" * 32]),
        "commit-no-parents-list": with_(commit, parents=[]),
        "commit-short-id": with_(commit, content=b"c" * 31),
        "commit-op-edit": with_(commit, op="edit"),
        "commit-message-null": with_(commit, message=None),
        "commit-extra-field": with_(commit, zzz=1),
        "commit-count-over": b"\xa7" + canonical_commit[1:],  # 6 entries, the head says 7
        "commit-count-under": b"\xa5" + canonical_commit[1:],
        "commit-trailing-byte": canonical_commit + b"\x00",
        "not-a-map": cbor2.dumps([1, 2]),
        "empty": b"",
    }


@pytest.mark.parametrize("name", sorted(near_misses()))
def test_the_fast_decode_gives_what_the_strict_decode_gives_for_near_misses(name: str) -> None:
    same_as_strict(near_misses()[name])


def test_links_of_reads_a_plain_append_as_a_full_decode_does() -> None:
    for parents in ((), (hash_bytes(b"p"),)):
        for tools in (None, hash_bytes(b"t")):
            commit = Commit(parents=parents, content=hash_bytes(b"c"), tools=tools, created_at=TS)
            assert links_of(encode_with_id(commit)[1]) == list(commit.iter_links())


def test_links_of_refuses_a_plain_looking_commit_whose_map_size_is_wrong() -> None:
    # links_of is what an S3 fetch walks before anything is decoded: a map head claiming more fields than
    # follow is refused by decode, and links_of must not read links out of it either.
    with_parent = Commit(parents=(hash_bytes(b"p"),), content=hash_bytes(b"c"), tools=None, created_at=TS)
    root = Commit(parents=(), content=hash_bytes(b"c"), tools=None, created_at=TS)
    for commit, head in ((with_parent, b"\xa7"), (root, b"\xa6"), (root, b"\xa7")):
        data = head + encode_with_id(commit)[1][1:]
        with pytest.raises(TractError):
            decode(data, strict=True)
        with pytest.raises(TractError):
            links_of(data)


def test_a_timestamp_wider_than_needed_is_not_read_by_the_fast_path() -> None:
    plain = encode_with_id(Commit(parents=(), content=hash_bytes(b"c"), tools=None, created_at=5))[1]
    at = plain.index(b"\x05", 1)  # created_at=5 takes one byte: give it a one-byte argument instead
    wide = plain[:at] + b"\x18\x05" + plain[at + 1 :]
    assert objects._plain_append_fields(plain) is not None
    assert objects._plain_append_fields(wide) is None
    same_as_strict(wide)


def test_a_malformed_id_given_to_the_receiver_is_a_rejected_object(tmp_path: Path) -> None:
    with LmdbStore(str(tmp_path / "s"), durable=False) as store:
        with pytest.raises(RejectedObject, match="malformed object id"):
            receive_objects(store, [(["x"], b"\xa0")])  # type: ignore[list-item]
        assert not list(store.table_iter(Table.OBJECTS))


@settings(max_examples=200, deadline=None)
@given(
    role=st.sampled_from(["user", "assistant", "tool", "system", 3]),
    text=st.none() | st.sampled_from(["", "a", 5, b"x"]) | st.text(max_size=5),
    extra=st.dictionaries(
        st.sampled_from(["name", "parts", "tool_calls", "is_error"]), st.just("x"), max_size=1
    ),
)
def test_the_tag_of_a_plain_text_message_is_the_general_rules_answer(
    role: Any, text: Any, extra: Any
) -> None:
    payload = {"type": "dialogue", "role": role, **extra}
    if text is not None:
        payload["text"] = text
    fast = validate._checked_blob_tag(payload)
    general = validate._general_blob_tag(payload)
    assert (fast, getattr(fast, "media", None), getattr(fast, "declared", None)) == (
        general,
        getattr(general, "media", None),
        getattr(general, "declared", None),
    )


def test_stored_answers_what_has_answers(tmp_path: Path) -> None:
    pairs = [encode_with_id(Blob(data=i)) for i in range(5)]
    absent = hash_bytes(b"absent")
    asked: list[Any] = [
        *(oid for oid, _ in pairs),
        absent,
        pairs[0][0].upper(),  # the same bytes, not an id
        pairs[0][0][:-2],
        pairs[0][0] + "00",
        " " + pairs[0][0][1:],
        "zz" * 32,
        b"x" * 32,
        7,
    ]
    lmdb = LmdbStore(str(tmp_path / "s"), durable=False)
    try:
        for store in (MemoryStore(), lmdb):
            batch = store.new_batch()
            for oid, data in pairs[:3]:
                batch.put_raw(oid, data)
            store.apply(batch)
            expected = {oid for oid, _ in pairs[:3]}
            assert store.stored(asked) == expected
            with store.snapshot() as snap:
                assert snap.stored(asked) == expected
                assert {oid for oid in expected if snap.has(oid)} == expected
                assert snap.get_raw(pairs[0][0]) == pairs[0][1]
                assert snap.get_raw(absent) is None
    finally:
        lmdb.close()


# --- the receiver: stored objects are skipped, at any chunk and batch boundary ---------------------------


def history(n: int = 6) -> Tract:
    t = Tract(MemoryStore(), clock=iter(range(TS, TS + 10**9, 1000)).__next__)
    t.set_tools([{"name": "lookup", "description": "d", "input_schema": {"type": "object"}}])
    for i in range(n):
        (t.user if i % 2 == 0 else t.assistant)(f"message {i}")
    return t


def invalid_commit(t: Tract) -> Pair:
    """A commit today's rules refuse (its content is an empty message), which an older writer could have stored."""
    empty = Blob(data={"type": "dialogue", "role": "user", "text": ""})
    _, blob_data = encode_with_id(empty)
    commit = Commit(parents=(ObjectId(t.head or ""),), content=hash_bytes(blob_data), created_at=TS + 10**8)
    return encode_with_id(commit)


@pytest.mark.parametrize("chunk", [1, 2, 3, 512])
@pytest.mark.parametrize("batch_objects", [1, 2, 3, 4096])
def test_an_object_already_stored_is_skipped_not_checked_again(
    chunk: int, batch_objects: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(receive, "LOOKUP_CHUNK", chunk)
    t = history()
    pairs = list(objects_for(t.store, [ObjectId(t.head or "")], []))
    empty_blob = encode_with_id(Blob(data={"type": "dialogue", "role": "user", "text": ""}))
    bad = invalid_commit(t)
    stream = [*pairs, empty_blob, bad]
    fresh = MemoryStore()
    with pytest.raises(RejectedObject, match="malformed") as info:
        Receiver(fresh, batch_objects=batch_objects).receive(stream)
    assert info.value.oid == bad[0]
    assert fresh.stored([oid for oid, _ in stream]) == {oid for oid, _ in stream[:-1]}

    holder = MemoryStore()  # an older writer stored it: receiving it again is not refused
    batch = holder.new_batch()
    for oid, data in (empty_blob, bad):
        batch.put_raw(oid, data)
    with (
        monkeypatch.context() as older
    ):  # a tractkv from before the store checked links (its parent is absent)
        older.setattr(store_base, "_check_presence", lambda writer, batch: None)
        holder.apply(batch)
    receiver = Receiver(holder, batch_objects=batch_objects)
    stats = receiver.receive(stream)
    assert (stats.objects, stats.new_objects) == (len(stream), len(pairs))
    (result,) = apply_ref_updates(holder, [RefUpdate(MAIN, None, ObjectId(t.head or ""))], received=receiver)
    assert result.ok


def test_a_stream_cut_inside_a_chunk_keeps_what_came_whole_then_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(receive, "LOOKUP_CHUNK", 4)
    t = history()
    pairs = list(objects_for(t.store, [ObjectId(t.head or "")], []))

    class Dropped(TractError):
        pass

    def cut() -> Iterator[Pair]:
        yield from pairs[:6]
        raise Dropped("connection dropped")

    target = MemoryStore()
    with pytest.raises(Dropped):
        receive_objects(target, cut(), batch_objects=4)
    assert target.stored([oid for oid, _ in pairs]) == {oid for oid, _ in pairs[:6]}


# --- end to end: the same answer whichever path decodes --------------------------------------------------


def hostile_pushes(t: Tract) -> dict[str, list[Pair]]:
    """Streams whose last object is refused, each near a fast shape."""
    base = list(objects_for(t.store, [ObjectId(t.head or "")], []))
    near = near_misses()
    out: dict[str, list[Pair]] = {}
    for name in (
        "blob-long-length-head",
        "blob-invalid-utf8",
        "commit-small-ts-8-bytes",
        "commit-count-over",
    ):
        out[name] = [*base, (hash_bytes(near[name]), near[name])]
    empty = encode_with_id(Blob(data={"type": "dialogue", "role": "assistant", "text": ""}))
    out["commit-on-an-empty-message"] = [*base, empty, invalid_commit(t)]
    over = Commit(parents=(ObjectId(t.head or ""),), content=base[-2][0], created_at=2**53)
    out["commit-ts-over-the-rule"] = [*base, encode_with_id(over)]
    out["wrong-hash"] = [*base[:-1], (base[-1][0], base[-1][1] + b"\x00")]
    return out


def general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(receive, "decode_received", strict)


def push_answer(hub: InProcessHub, pairs: list[Pair]) -> tuple[Any, ...]:
    with hub.remote() as remote:
        try:
            remote.push(pairs, [RefUpdate(MAIN, None, pairs[-1][0])])
        except RejectedObject as exc:
            return (exc.status, exc.oid, str(exc), hub.state())
    raise AssertionError("the push was accepted")


@pytest.mark.parametrize("name", sorted(hostile_pushes(history())))
def test_the_hub_refuses_each_near_miss_as_the_general_decoder_does(
    name: str, in_process_hub: Callable[..., InProcessHub], monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = hostile_pushes(history())[name]
    fast = push_answer(in_process_hub(), pairs)
    general_path(monkeypatch)
    assert push_answer(in_process_hub(), pairs) == fast
    assert fast[0] == 422
    assert fast[1] == pairs[-1][0]


def test_verify_names_a_malformed_id_before_a_wrong_hash() -> None:
    _, data = encode_with_id(Blob(data="x"))
    for oid in ("XYZ", hash_bytes(data).upper(), 7):
        with pytest.raises(RejectedObject, match="malformed object id"):
            verify(oid, data)  # type: ignore[arg-type]
    with pytest.raises(RejectedObject, match="do not hash"):
        verify(hash_bytes(b"other"), data)


def test_a_real_hub_takes_a_history_and_refuses_a_near_miss_clone_gets_it_back(
    start_hub: Callable[..., Hub], tmp_path: Path
) -> None:
    from tractkv.sync.http_client import HttpRemote

    t = history(40)
    pairs = list(objects_for(t.store, [ObjectId(t.head or "")], []))
    hub = start_hub()
    with HttpRemote(hub.url) as remote:
        near = near_misses()["commit-small-ts-8-bytes"]
        with pytest.raises(RejectedObject, match="canonical") as info:
            remote.push([*pairs, (hash_bytes(near), near)], [RefUpdate(MAIN, None, hash_bytes(near))])
        assert info.value.status == 422
        assert remote.list_refs() == {}
        assert remote.push(pairs, [RefUpdate(MAIN, None, ObjectId(t.head or ""))]).ok
    clone = Tract.clone(hub.url, str(tmp_path / "clone"), durable=False)
    try:
        assert clone.head == t.head
        assert clone.compile() == t.compile()
    finally:
        clone.close()


def test_fetch_and_clone_refuse_a_near_miss_as_the_general_decoder_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fetch and clone receive through ``receive_objects``: a near miss in what a remote sends stops them with
    the general decoder's answer, keeping what came before it."""
    t = history()
    near = near_misses()["blob-long-length-head"]
    answers = []
    for path in ("fast", "general"):
        if path == "general":
            general_path(monkeypatch)
        target = MemoryStore()
        with pytest.raises(RejectedObject) as info:
            receive_objects(
                target, [*objects_for(t.store, [ObjectId(t.head or "")], []), (hash_bytes(near), near)]
            )
        answers.append((str(info.value), info.value.oid, sum(1 for _ in target.iter_oids())))
    assert answers[0] == answers[1]


PARENT, CONTENT, TOOLS, OTHER = (hash_bytes(bytes([i])) for i in range(4))
MEDIA_MESSAGE = validate.MessageTag("dialogue", (OTHER,), ((OTHER, "image/png"),))


@settings(max_examples=500, deadline=None)
@given(
    op=st.sampled_from(["append"] * 6 + ["edit", "merge", "compress", "bogus"]),
    parents=st.sampled_from([(), (PARENT,), (PARENT,), (PARENT, OTHER), (PARENT, PARENT)]),
    content=st.sampled_from([CONTENT, CONTENT, CONTENT, None, OTHER]),
    tools=st.sampled_from([None, TOOLS, TOOLS, OTHER]),
    target=st.sampled_from([None, None, None, None, PARENT]),
    links=st.sampled_from([{}, {}, {}, {"media": (OTHER,)}, {"usages": (OTHER,)}]),
    ts=st.sampled_from([0, TS, TS, validate.TS_MAX, validate.TS_MAX + 1]),
    parent_tag=st.sampled_from(["commit", "commit", "toolset", None, "invalid:broken"]),
    content_tag=st.sampled_from(
        [
            "dialogue",
            validate.MessageTag("dialogue"),
            "instruction",
            MEDIA_MESSAGE,
            "annotation",
            "blob",
            None,
        ]
    ),
    tools_tag=st.sampled_from(["toolset", "toolset", "tool", "commit", None]),
    other_tag=st.sampled_from(["commit", "usage", "media", None]),
)
def test_the_plain_append_check_passes_only_what_every_rule_passes(
    op: str,
    parents: tuple[ObjectId, ...],
    content: ObjectId | None,
    tools: ObjectId | None,
    target: ObjectId | None,
    links: dict[str, tuple[ObjectId, ...]],
    ts: int,
    parent_tag: Any,
    content_tag: Any,
    tools_tag: Any,
    other_tag: Any,
) -> None:
    commit = Commit(
        operation=op,
        parents=parents,
        content=content,
        tools=tools,
        edit_target=target,
        links=links,
        created_at=ts,
    )
    tag_of = {PARENT: parent_tag, CONTENT: content_tag, TOOLS: tools_tag, OTHER: other_tag}.get

    def answer(check: Callable[[Commit, validate.TagOf], None]) -> tuple[Any, ...]:
        try:
            check(commit, tag_of)
        except validate.ObjectRuleError as exc:
            return (type(exc), str(exc))
        return ("passes",)

    assert answer(validate._check_commit) == answer(validate._commit_rules)
