"""The object stream: round trips under any chunking, coalescing, and every way a stream can be wrong."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tractkv.errors import ObjectTooLarge, RequestTooLarge, TransferError
from tractkv.ids import ObjectId, hash_bytes
from tractkv.sync.frames import CHUNK_BYTES, MAGIC, StreamDecoder, decode_stream, encode_stream


def objs(*payloads: bytes) -> list[tuple[ObjectId, bytes]]:
    return [(hash_bytes(p), p) for p in payloads]


def rechunk(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, last = [], 0
    for p in points:
        out.append(data[last:p])
        last = p
    out.append(data[last:])
    return out


@given(st.lists(st.binary(max_size=300), max_size=30), st.lists(st.integers(min_value=0), max_size=20))
def test_any_chunking_decodes_to_the_same_objects(payloads: list[bytes], cuts: list[int]) -> None:
    pairs = objs(*payloads)
    data = b"".join(encode_stream(pairs))
    assert list(decode_stream(rechunk(data, cuts))) == pairs


def test_small_objects_are_coalesced_into_large_chunks() -> None:
    pairs = objs(*(f"object {i}".encode() * 10 for i in range(5000)))
    chunks = list(encode_stream(pairs))
    assert len(chunks) < 20
    assert all(len(c) >= CHUNK_BYTES for c in chunks[:-1])


def test_a_stream_without_its_end_frame_is_cut_short_after_yielding_whole_objects() -> None:
    pairs = objs(b"one", b"two", b"three")
    data = b"".join(encode_stream(pairs))
    decoder = StreamDecoder()
    got = decoder.feed(data[: data.index(b"three") + 2])
    assert got == pairs[:2]
    with pytest.raises(TransferError, match="cut short after 2"):
        decoder.close()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: b"NOTASTREAM\n" + d[len(MAGIC) :], "bad magic"),
        (lambda d: d[: len(MAGIC)] + b"Z" + d[len(MAGIC) + 1 :], "unknown frame type"),
        (lambda d: d + b"x", "after the end frame"),
        (lambda d: d[:-1] + bytes([d[-1] + 1]), "end frame counts"),
    ],
)
def test_malformed_streams_are_refused(mutate: object, message: str) -> None:
    data = b"".join(encode_stream(objs(b"a", b"b")))
    with pytest.raises(TransferError, match=message):
        list(decode_stream([mutate(data)]))  # type: ignore[operator]


def test_an_oversize_object_is_refused_from_its_header_before_its_body_arrives() -> None:
    big = b"x" * 10_000
    data = b"".join(encode_stream(objs(big)))
    decoder = StreamDecoder(max_object=1000)
    with pytest.raises(ObjectTooLarge) as info:
        decoder.feed(data[: len(MAGIC) + 5 + 32])  # header and id only
    assert info.value.oid == hash_bytes(big)
    assert info.value.status == 413


def test_the_request_limit_counts_bytes_as_they_arrive() -> None:
    data = b"".join(encode_stream(objs(*(bytes([i]) * 100 for i in range(50)))))
    decoder = StreamDecoder(max_request=1000)
    for i in range(0, 1000, 100):
        decoder.feed(data[i : i + 100])
    with pytest.raises(RequestTooLarge):
        decoder.feed(data[1000:1001])  # the first byte over the limit
