"""Object ids: blake3-256 of an object's canonical bytes, written as 64 lowercase hex digits.

This is the only module that imports blake3.
"""

from __future__ import annotations

import re
from typing import NewType

from blake3 import blake3

from tractkv.errors import InvalidObjectId

ObjectId = NewType("ObjectId", str)
"""64 lowercase hex digits: the blake3-256 digest of an object's canonical CBOR bytes."""

OID_HEX_LEN = 64  # blake3-256 -> 32 bytes -> 64 hex digits
OID_RAW_LEN = 32  # as stored in LMDB keys and inside encoded objects
_OID_RE = re.compile(r"[0-9a-f]{64}")
_PREFIX_RE = re.compile(r"[0-9a-f]{4,64}")


def hash_bytes(data: bytes) -> ObjectId:
    """Return the object id of exactly these bytes."""
    return blake3(data).hexdigest()  # type: ignore[return-value]  # an ObjectId (NewType: no call)


def is_object_id(text: object) -> bool:
    """True when ``text`` is a full object id (64 lowercase hex digits)."""
    return isinstance(text, str) and _OID_RE.fullmatch(text) is not None


def parse_oid(text: object) -> ObjectId:
    """Validate a full object id.

    Raises:
        InvalidObjectId: ``text`` is not 64 lowercase hex digits.
    """
    if not is_object_id(text):
        raise InvalidObjectId(str(text))
    return ObjectId(str(text))


def is_oid_prefix(text: str) -> bool:
    """True when ``text`` could abbreviate an id (4 to 64 lowercase hex digits)."""
    return _PREFIX_RE.fullmatch(text) is not None


def oid_to_raw(oid: ObjectId) -> bytes:
    """The 32 raw bytes of an id (the form used in keys and inside encoded objects).

    Raises:
        InvalidObjectId: ``oid`` is not 64 lowercase hex digits (an uppercase spelling would otherwise
            find the object and then fail its hash check).
    """
    try:
        raw = bytes.fromhex(oid)
    except (TypeError, ValueError):
        raise InvalidObjectId(str(oid)) from None
    if len(raw) != OID_RAW_LEN or raw.hex() != oid:  # the hex round trip refuses case and spaces
        raise InvalidObjectId(str(oid))
    return raw


def raw_to_oid(raw: bytes) -> ObjectId:
    """The id written as hex from its 32 raw bytes."""
    return ObjectId(raw.hex())
