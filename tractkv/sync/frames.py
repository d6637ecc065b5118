"""The object stream: how objects travel between stores.

A stream is ``MAGIC`` followed by frames; each frame is one type byte, a 4-byte big-endian payload length,
and the payload::

    b"O"  object   32-byte raw id + canonical object bytes (the receiver rehashes and compares)
    b"E"  end      8-byte big-endian count of object frames sent; nothing may follow

A stream without its end frame was cut short: the receiver keeps the objects that arrived whole (they were
verified one by one) and reports the truncation. Writers coalesce frames into chunks of about
``CHUNK_BYTES`` so a transport sends few large writes (one chunk per object made an HTTP push ~20x slower).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

from tractkv.errors import ObjectTooLarge, RequestTooLarge, TransferError
from tractkv.ids import ObjectId, oid_to_raw, raw_to_oid
from tractkv.model import MAX_OBJECT_BYTES

MAGIC = b"TKVSTREAM1\n"
HEADER = struct.Struct(">cI")
COUNT = struct.Struct(">Q")
OBJECT = b"O"
END = b"E"
CHUNK_BYTES = 64 * 1024
OID_BYTES = 32

#: Defaults a receiver enforces while streaming (a hub may configure its own): the one object size limit
#: (:data:`tractkv.model.MAX_OBJECT_BYTES`, what a store writes) and a hub's limit on one push request.
MAX_REQUEST_BYTES = 1024 * 1024 * 1024
UNLIMITED = 1 << 62  # max_request for streams the reader asked for (a fetch's answer, a bundle file)


def encode_stream(
    objects: Iterable[tuple[ObjectId, bytes]], chunk_bytes: int = CHUNK_BYTES
) -> Iterator[bytes]:
    """Yield the stream for ``objects`` as chunks of about ``chunk_bytes`` (the last may be shorter)."""
    parts: list[bytes] = [MAGIC]
    size = len(MAGIC)
    count = 0
    for oid, data in objects:
        parts.append(HEADER.pack(OBJECT, OID_BYTES + len(data)))
        parts.append(oid_to_raw(oid))
        parts.append(data)
        size += HEADER.size + OID_BYTES + len(data)
        count += 1
        if size >= chunk_bytes:
            yield b"".join(parts)
            parts = []
            size = 0
    parts.append(HEADER.pack(END, COUNT.size))
    parts.append(COUNT.pack(count))
    yield b"".join(parts)


class StreamDecoder:
    """Incremental parser: feed chunks of any size, take the ``(oid, data)`` pairs that completed.

    Limits are enforced as bytes arrive, before a frame is buffered whole: a frame header announcing an
    object over ``max_object`` raises :class:`ObjectTooLarge` at once, and more than ``max_request`` bytes in
    all raises :class:`RequestTooLarge`. The ids are *not* verified here (see :mod:`tractkv.sync.receive`).
    """

    def __init__(self, *, max_object: int = MAX_OBJECT_BYTES, max_request: int = MAX_REQUEST_BYTES) -> None:
        self.max_object = max_object
        self.max_request = max_request
        self.received = 0
        self.objects = 0
        self.finished = False
        self._buf = bytearray()
        self._magic_seen = False

    def feed(self, chunk: bytes) -> list[tuple[ObjectId, bytes]]:
        """Add bytes; return the objects whose frames are now complete."""
        self.received += len(chunk)
        if self.received > self.max_request:
            raise RequestTooLarge(f"request is over the {self.max_request}-byte limit")
        if self.finished and chunk:
            raise TransferError("bytes after the end frame")
        self._buf += chunk
        out: list[tuple[ObjectId, bytes]] = []
        buf = self._buf
        pos = 0
        if not self._magic_seen:
            if len(buf) < len(MAGIC):
                if not MAGIC.startswith(bytes(buf)):
                    raise TransferError("not a tractkv object stream (bad magic)")
                return out
            if bytes(buf[: len(MAGIC)]) != MAGIC:
                raise TransferError("not a tractkv object stream (bad magic)")
            self._magic_seen = True
            pos = len(MAGIC)
        with memoryview(buf) as view:  # released before ``del buf[:pos]`` below (a resize needs no views)
            pos = self._frames(buf, view, pos, out)
        del buf[:pos]
        return out

    def _frames(self, buf: bytearray, view: memoryview, pos: int, out: list[tuple[ObjectId, bytes]]) -> int:
        """Parse the complete frames of ``buf`` from ``pos`` into ``out``; return where the first incomplete
        one starts. Each object's id and bytes are copied once, out of ``view``."""
        size = len(buf)
        while size - pos >= HEADER.size:
            ftype, length = HEADER.unpack_from(buf, pos)
            if ftype == OBJECT:
                if length < OID_BYTES:
                    raise TransferError(f"object frame of {length} bytes is shorter than an id")
                if length - OID_BYTES > self.max_object:
                    oid_text = None
                    if len(buf) - pos >= HEADER.size + OID_BYTES:
                        oid_text = raw_to_oid(bytes(buf[pos + HEADER.size : pos + HEADER.size + OID_BYTES]))
                    raise ObjectTooLarge(
                        f"object of {length - OID_BYTES} bytes is over the {self.max_object}-byte limit",
                        oid_text,
                    )
            elif ftype == END:
                if length != COUNT.size:
                    raise TransferError("malformed end frame")
            else:
                raise TransferError(f"unknown frame type {ftype!r}")
            start = pos + HEADER.size
            end = start + length
            if size < end:
                break
            pos = end
            if ftype == OBJECT:
                out.append(
                    (ObjectId(view[start : start + OID_BYTES].hex()), bytes(view[start + OID_BYTES : end]))
                )
                self.objects += 1
            else:
                (announced,) = COUNT.unpack_from(buf, start)
                if announced != self.objects:
                    raise TransferError(f"end frame counts {announced} objects, {self.objects} arrived")
                self.finished = True
                if pos != size:
                    raise TransferError("bytes after the end frame")
        return pos

    def close(self) -> None:
        """Call when the input ended: raises :class:`TransferError` if the stream was cut short."""
        if not self.finished:
            raise TransferError(
                f"stream cut short after {self.objects} object(s) ({self.received} bytes): no end frame"
            )


def decode_stream(
    chunks: Iterable[bytes], *, max_object: int = MAX_OBJECT_BYTES, max_request: int = MAX_REQUEST_BYTES
) -> Iterator[tuple[ObjectId, bytes]]:
    """Parse a whole stream lazily; raises at the point of the first problem (objects before it are yielded)."""
    decoder = StreamDecoder(max_object=max_object, max_request=max_request)
    for chunk in chunks:
        yield from decoder.feed(chunk)
    decoder.close()
