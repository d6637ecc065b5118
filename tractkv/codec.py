"""Canonical CBOR: the one place that turns values into the bytes an id is computed over.

This is the only module that imports cbor2. Encoding uses RFC 8949 core deterministic encoding as cbor2
implements it with ``canonical=True``: map keys sorted (length first, then bytewise), integers and lengths
in their shortest form, floats in the shortest width that round-trips exactly.

What a hashed payload may hold (checked by :func:`check_value` before anything is encoded):

* ``None``, ``bool``;
* ``int`` in the signed/unsigned 64-bit range ``-2**63 .. 2**64 - 1`` (no CBOR bignums: other languages
  could not read them back as plain integers);
* ``float`` when finite. NaN and the infinities are rejected (JSON, which every LLM API speaks, has no
  spelling for them). ``-0.0`` is kept distinct from ``0.0``, and ``1`` (int) and ``1.0`` (float) hash
  differently although Python calls them equal: the value comes back with the type it went in with;
* ``str`` with any Unicode text, exactly as given. No normalization: NFC and NFD spellings of the same
  word are different payloads with different ids. Lone surrogates cannot be encoded and are rejected;
* ``bytes``;
* ``list`` (and ``tuple``, which is written as an array and decodes as a ``list``);
* ``dict`` with ``str`` keys only; the key order of the dict never changes the bytes.

Nothing else (sets, datetimes, Decimals, custom objects) is accepted: each raises :class:`EncodeError`
naming the path of the offending value. Nesting deeper than :data:`MAX_DEPTH` is rejected too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import cbor2

from tractkv.errors import DecodeError, EncodeError, ObjectTooLarge

MAX_DEPTH = 64  # deeper payloads are almost surely a bug (or an attack on the recursive decoder)
INT_MIN = -(2**63)
INT_MAX = 2**64 - 1

CborValue = Any
"""A value :func:`check_value` accepts (JSON-like data plus bytes)."""


def check_value(value: object, path: str = "", depth: int = 0) -> None:
    """Raise :class:`EncodeError` unless ``value`` may be part of a hashed payload (see module doc)."""
    try:
        _check(value, depth)
    except _Rejected as bad:
        where = path
        for step in reversed(bad.steps):
            if step[0] == "key":
                where = f"{where}.{step[1]}" if where else str(step[1])
            elif step[0] == "index":
                where = f"{where}[{step[1]}]"
            else:
                where = f"{where}[{step[1]!r}]"
        raise EncodeError(where, bad.reason) from None


class _Rejected(Exception):
    """Internal: a value was refused; ``steps`` lead from it back up to the root (innermost first)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.steps: list[tuple[str, object]] = []


def _check(value: object, depth: int) -> None:
    # The path to a bad value is assembled only on failure: valid payloads (every object received by
    # sync) pay for no string formatting.
    if depth > MAX_DEPTH:
        raise _Rejected(f"nested deeper than {MAX_DEPTH} levels")
    if value is None or value is True or value is False:
        return
    kind = type(value)
    if kind is str:
        try:
            value.encode("utf-8")  # type: ignore[attr-defined]
        except UnicodeEncodeError as exc:
            raise _Rejected("text holds a lone surrogate (not valid Unicode)") from exc
        return
    if kind is int:
        if not INT_MIN <= value <= INT_MAX:  # type: ignore[operator]
            raise _Rejected("integer outside the 64-bit range -2**63 .. 2**64-1")
        return
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise _Rejected(f"{value!r} is not a finite number (JSON has no spelling for it)")
        return
    if kind is bytes:
        return
    if kind is dict:
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                bad = _Rejected(f"map keys must be str, not {type(key).__name__}")
                bad.steps.append(("badkey", key))
                raise bad
            try:
                _check(item, depth + 1)
            except _Rejected as inner:
                inner.steps.append(("key", key))
                raise
        return
    if kind is list or kind is tuple:
        for index, item in enumerate(value):  # type: ignore[arg-type]
            try:
                _check(item, depth + 1)
            except _Rejected as inner:
                inner.steps.append(("index", index))
                raise
        return
    raise _Rejected(f"type {kind.__name__} is not allowed in a hashed payload")


def dumps(value: CborValue) -> bytes:
    """Canonical CBOR bytes of an already checked value.

    A str-keyed dict of ``None``, bools, 64-bit ints, str, bytes, lists, tuples and such dicts (an object's
    wire map, a message payload) is encoded here, by concatenating each item's bytes, about twice as fast as
    cbor2's canonical mode (which encodes and sorts every map key on every call); anything else (a float, a
    bignum, a lone surrogate, a value that is not a map) goes to cbor2. The bytes are the same either way: a
    property test compares them with cbor2's over generated values (tests/store/test_golden_and_codec.py).
    """
    if type(value) is dict:  # maps: cbor2 sorts their keys on every call; lists and scalars it does fast
        out: list[bytes] = []
        try:
            _encode(value, out)
        except (_Unsupported, UnicodeEncodeError, RecursionError):
            pass
        else:
            return b"".join(out)
    try:
        return bytes(cbor2.dumps(value, canonical=True))
    except (cbor2.CBOREncodeError, TypeError, ValueError, OverflowError) as exc:
        raise EncodeError("", str(exc)) from exc


class _Unsupported(Exception):
    """Internal: a value :func:`_encode` leaves to cbor2."""


def head(major: int, n: int) -> bytes:
    """A CBOR item head: major type ``major`` (already shifted: 0x00, 0x20, ... 0xe0) and argument ``n`` in
    its shortest form (0 <= n < 2**64), as canonical encoding requires."""
    if n < 24:
        return _SMALL_HEADS[major | n]
    if n < 0x100:
        return bytes((major | 24, n))
    if n < 0x10000:
        return bytes((major | 25,)) + n.to_bytes(2, "big")
    if n < 0x100000000:
        return bytes((major | 26,)) + n.to_bytes(4, "big")
    return bytes((major | 27,)) + n.to_bytes(8, "big")


_SMALL_HEADS = [bytes((byte,)) for byte in range(256)]
_MAX_KEY_ORDERS = 4096  # distinct key tuples remembered (payload maps may have any keys: bounded)
_KEY_ORDERS: dict[tuple[str, ...], tuple[tuple[str, bytes], ...]] = {}


def _key_order(keys: tuple[str, ...]) -> tuple[tuple[str, bytes], ...]:
    """A map's keys in canonical order (encoded key length first, then bytewise) with their encodings."""
    encoded = []
    for key in keys:
        if type(key) is not str:
            raise _Unsupported
        raw = key.encode("utf-8")
        encoded.append((head(0x60, len(raw)) + raw, key))
    encoded.sort(key=lambda item: (len(item[0]), item[0]))
    order = tuple((key, raw) for raw, key in encoded)
    if len(_KEY_ORDERS) < _MAX_KEY_ORDERS:
        _KEY_ORDERS[keys] = order
    return order


def canonical_keys(keys: Iterable[str]) -> tuple[str, ...]:
    """Map keys in the order canonical encoding writes them (encoded length first, then bytewise): the order
    of every map decoded from stored bytes, whatever order it was given in."""
    return tuple(sorted(keys, key=_canonical_sort_key))


def _canonical_sort_key(key: str) -> tuple[int, bytes]:
    # an encoded key is its head (longer for a longer text) then its UTF-8 bytes: (length, bytes) sorts alike
    raw = key.encode("utf-8", "surrogatepass")
    return len(raw), raw


def _encode(value: object, out: list[bytes]) -> None:
    kind = type(value)
    if kind is str:
        raw = value.encode("utf-8")  # type: ignore[attr-defined]
        out.append(head(0x60, len(raw)))
        out.append(raw)
    elif kind is dict:
        keys: tuple[str, ...] = tuple(value)  # type: ignore[arg-type]
        order = _KEY_ORDERS.get(keys) or _key_order(keys)
        out.append(head(0xA0, len(keys)))
        for key, raw_key in order:
            out.append(raw_key)
            item = value[key]  # type: ignore[index]
            if type(item) is str:  # the usual map value, inline
                raw = item.encode("utf-8")
                out.append(head(0x60, len(raw)))
                out.append(raw)
            else:
                _encode(item, out)
    elif kind is int:
        if 0 <= value <= INT_MAX:  # type: ignore[operator]
            out.append(head(0x00, value))  # type: ignore[arg-type]
        elif INT_MIN <= value < 0:  # type: ignore[operator]
            out.append(head(0x20, -1 - value))  # type: ignore[operator]
        else:
            raise _Unsupported  # a bignum: cbor2 writes (or refuses) it
    elif kind is bytes:
        out.append(head(0x40, len(value)))  # type: ignore[arg-type]
        out.append(value)  # type: ignore[arg-type]
    elif kind is list or kind is tuple:
        out.append(head(0x80, len(value)))  # type: ignore[arg-type]
        for item in value:  # type: ignore[attr-defined]
            _encode(item, out)
    elif value is None:
        out.append(b"\xf6")
    elif value is True:
        out.append(b"\xf5")
    elif value is False:
        out.append(b"\xf4")
    else:
        raise _Unsupported  # floats (shortest exact width), anything not allowed


def dumps_local(value: CborValue) -> bytes:
    """CBOR bytes of a value for a local row that is never hashed nor compared byte for byte (a reflog entry):
    the same data model as :func:`dumps` without canonical key order, which costs cbor2 about 2x per map.
    :func:`loads` reads it back."""
    try:
        return bytes(cbor2.dumps(value))
    except (cbor2.CBOREncodeError, TypeError, ValueError, OverflowError) as exc:
        raise EncodeError("", str(exc)) from exc


def _reject_tag(_decoder: object, tag: object) -> object:
    raise DecodeError(f"CBOR tag {getattr(tag, 'tag', tag)} is not allowed")


def loads(data: bytes) -> CborValue:
    """Decode CBOR bytes (never a memoryview: cbor2 6 would read it as an array of ints).

    Raises:
        DecodeError: the bytes are not well-formed CBOR, or use a tag cbor2 does not decode itself.
            This is the fast path for bytes this library wrote (already hash-checked): bytes after the first
            item are ignored, and tags cbor2 decodes itself (dates, bignums, ...) come back as values.
            :func:`loads_canonical` refuses all of those; use it for bytes from outside.
    """
    try:
        return cbor2.loads(bytes(data), tag_hook=_reject_tag)
    except DecodeError:
        raise
    except Exception as exc:  # cbor2 raises several unrelated types for malformed input
        raise DecodeError(f"malformed CBOR: {exc}") from exc


# What :func:`decoded_size` counts per item, calibrated with tracemalloc on CPython 3.12 (cbor2's decode, the
# allowed-value check and the canonical re-encoding a strict decode compares with the bytes): about 100 bytes
# for any item (its object or slot, and the re-encoding's piece), more for text (decoded and re-encoded
# copies), bytes, integers CPython does not cache, maps and lists. An estimate within ~2x, not exact.
_ITEM = 100
_COST_STR = _ITEM + 100  # plus twice the text's UTF-8 length
_COST_BYTES = _ITEM + 40  # plus the bytes
_COST_INT = _ITEM + 70  # an int outside CPython's cached -5..256
_COST_LIST = _ITEM + 50
_COST_MAP = _ITEM + 60


def decoded_size(data: bytes, limit: int) -> int:
    """An upper estimate of the memory a strict decode of ``data`` takes (the Python values it builds plus
    their canonical re-encoding), from one pass over the CBOR item heads: no value is built, so refusing costs
    at most ``limit``'s worth of heads, whatever the bytes claim.

    A CBOR item can be one byte (``0xa0``, an empty map) and decode to ~100 bytes of Python objects, so a
    size limit on the bytes alone does not bound what a decode holds: this is the bound a receiver checks
    first (:func:`tractkv.model.objects.decode_received`).

    Bytes that are malformed (cut short, a reserved head, a tag) end the estimate where the problem starts:
    the decode refuses them there, having built no more than was counted, and says why in its own words.

    Raises:
        ObjectTooLarge: the estimate is over ``limit`` (without an ``oid``: the caller knows it).
        DecodeError: an indefinite-length item (never canonical), whose items the estimate cannot bound
            ahead of a decode that would build them.
    """
    size = len(data)
    pos = 0
    todo = 1  # items still to read
    cost = size  # the re-encoding, joined
    while todo:
        if pos >= size:
            break  # cut short: the decode says so
        initial = data[pos]
        major = initial >> 5
        info = initial & 0x1F
        pos += 1
        todo -= 1
        if info < 24:
            arg = info
        elif info == 24:
            arg = data[pos] if pos < size else 0
            pos += 1
        elif info < 28:
            width = 1 << (info - 24)
            arg = int.from_bytes(data[pos : pos + width], "big")
            pos += width
        elif info == 31 and 2 <= major <= 5:
            raise DecodeError("bytes are not in canonical form")
        else:
            break  # a reserved head or a stray break: malformed, the decode says so
        if major == 3:
            pos += arg
            cost += _COST_STR + 2 * arg
        elif major == 5:
            todo += 2 * arg
            cost += _COST_MAP
        elif major == 4:
            todo += arg
            cost += _COST_LIST
        elif major == 2:
            pos += arg
            cost += _COST_BYTES + arg
        elif major == 7:
            cost += _ITEM
        elif major == 6:
            break  # no tag is allowed: the decode refuses it
        else:  # 0, 1: integers
            cost += _ITEM if arg <= 4 or (major == 0 and arg <= 256) else _COST_INT
        if cost > limit:
            raise ObjectTooLarge(f"decoding it would take more than {limit} bytes of memory (estimated)")
    return cost


def loads_canonical(data: bytes) -> CborValue:
    """Decode and insist the bytes are the canonical encoding of an allowed value.

    Used where bytes come from outside (sync, fsck): a peer could otherwise send a non-canonical
    spelling of an object, which hashes to a different id for the same content.

    Raises:
        DecodeError: malformed, not an allowed value, or not canonical.
    """
    value = loads(data)
    try:
        check_value(value)
    except EncodeError as exc:
        raise DecodeError(f"not an allowed value: {exc}") from exc
    if dumps(value) != bytes(data):
        raise DecodeError("bytes are not in canonical form")
    return value
