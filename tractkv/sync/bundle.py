"""Bundle files: a branch's objects and refs in one file, for air-gapped transfer.

Format: ``BUNDLE_MAGIC``, a 4-byte big-endian length, a canonical CBOR map ``{"refs": {name: hex id}}``,
then an object stream (:mod:`tractkv.sync.frames`) holding the closure of every ref, links before the
objects that name them. A bundle is a read-only remote: fetch and clone read it, and every object is
verified on the way in like any other transfer.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence

from tractkv import codec
from tractkv.errors import ObjectTooLarge, SyncError, TransferError
from tractkv.ids import ObjectId, is_object_id
from tractkv.model import MAX_OBJECT_BYTES, kind_of
from tractkv.store import Reader

from .frames import UNLIMITED, decode_stream, encode_stream
from .negotiate import objects_for
from .remote import PushOutcome, RefUpdate, Remote

BUNDLE_MAGIC = b"TKVBUNDLE1\n"
_LEN = struct.Struct(">I")
SUFFIX = ".tkvbundle"


def is_bundle(path: str) -> bool:
    """True when ``path`` is a file that starts with the bundle magic."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(BUNDLE_MAGIC)) == BUNDLE_MAGIC
    except OSError:
        return False


def write_bundle(
    reader: Reader, path: str, refs: dict[str, ObjectId], *, max_object: int = MAX_OBJECT_BYTES
) -> int:
    """Write the closure of ``refs`` to ``path`` (atomically: a temp file renamed). Returns the object count.

    Raises:
        ObjectTooLarge: an object is over ``max_object`` (default: the size limit a default unbundle reads);
            nothing is written at ``path``.
    """
    if not refs:
        raise SyncError("a bundle needs at least one branch")
    header = codec.dumps({"refs": dict(refs)})
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".bundle-", dir=directory)
    count = 0

    def counted() -> Iterator[tuple[ObjectId, bytes]]:
        nonlocal count
        for oid, data in objects_for(reader, list(refs.values()), []):
            if len(data) > max_object:
                raise ObjectTooLarge(
                    f"a {kind_of(data)} of {len(data):,} bytes is over the {max_object:,}-byte limit on one object "
                    f"{'a default unbundle reads' if max_object == MAX_OBJECT_BYTES else 'given'}: no bundle "
                    "was written",
                    oid,
                )
            count += 1
            yield oid, data

    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(BUNDLE_MAGIC + _LEN.pack(len(header)) + header)
            for chunk in encode_stream(counted()):
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return count


class BundleRemote(Remote):
    """A bundle file as a read-only remote."""

    def __init__(self, path: str, *, max_object: int = MAX_OBJECT_BYTES) -> None:
        self.url = path
        self.max_object = self.max_receive = max_object
        try:
            self._fh = open(path, "rb")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise SyncError(f"cannot read bundle {path}: {exc.strerror}") from exc
        magic = self._fh.read(len(BUNDLE_MAGIC))
        if magic != BUNDLE_MAGIC:
            self._fh.close()
            raise TransferError(f"{path} is not a tractkv bundle")
        raw_len = self._fh.read(_LEN.size)
        (length,) = _LEN.unpack(raw_len) if len(raw_len) == _LEN.size else (-1,)
        header = self._fh.read(length) if length >= 0 else b""
        try:
            data = codec.loads(header)
            refs = data["refs"] if isinstance(data, dict) else None
        except Exception as exc:
            self._fh.close()
            raise TransferError(f"{path}: unreadable bundle header") from exc
        if not isinstance(refs, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and is_object_id(v) for k, v in refs.items()
        ):
            self._fh.close()
            raise TransferError(f"{path}: malformed bundle header")
        self._refs = {k: ObjectId(v) for k, v in refs.items()}
        self._body = self._fh.tell()

    def list_refs(self, prefix: str = "refs/heads/") -> dict[str, ObjectId]:
        return {k: v for k, v in self._refs.items() if k.startswith(prefix)}

    def missing(self, oids: Sequence[ObjectId]) -> set[ObjectId]:
        raise SyncError("a bundle is read-only: create a new one with `tractkv bundle create`")

    def push(
        self, objects: Iterable[tuple[ObjectId, bytes]], updates: Sequence[RefUpdate], *, atomic: bool = False
    ) -> PushOutcome:
        raise SyncError("a bundle is read-only: create a new one with `tractkv bundle create`")

    def fetch(
        self,
        wants: Sequence[ObjectId],
        haves: Sequence[ObjectId],
        known: Callable[[ObjectId], bool] | None = None,
    ) -> Iterator[tuple[ObjectId, bytes]]:
        """Every object in the bundle (the receiver skips those it has)."""
        self._fh.seek(self._body)

        def chunks() -> Iterator[bytes]:
            while block := self._fh.read(1 << 16):
                yield block

        def objects() -> Iterator[tuple[ObjectId, bytes]]:
            # A local file the reader chose: its size bounds the read, so only the per-object limit applies.
            try:
                yield from decode_stream(chunks(), max_object=self.max_receive, max_request=UNLIMITED)
            except ObjectTooLarge as exc:
                raise ObjectTooLarge(
                    f"{exc.reason}: this bundle was written under a raised limit; read it with "
                    "`bundle unbundle --max-object-bytes N`",
                    exc.oid,
                ) from None

        return objects()

    def close(self) -> None:
        self._fh.close()
