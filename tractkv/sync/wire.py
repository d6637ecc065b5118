"""What the HTTP hub and its client say besides object streams: request heads, results, errors.

Endpoints (all under ``/v1/``)::

    GET  info               {"tractkv": version, "protocol": 1, "auth": bool}
    GET  refs?prefix=P      {"refs": {name: id}}            (only the refs the token may see)
    POST missing            body: raw 32-byte ids            -> raw 32-byte ids the hub lacks
    POST fetch              {"wants": [id], "haves": [id]}   -> an object stream (see frames)
                            (a JSON object; ids are 64 lowercase hex digits; "haves" optional)
    POST push               u32 head length + CBOR head + object stream -> {"results", "objects", ...}

The push head is canonical CBOR ``{"u": [[name, old, new, force], ...], "a": atomic}`` (ids as raw 32-byte
strings, ``None`` for absent): it comes before the objects so the hub can refuse a token without the scope
(403) before reading any object. Errors are JSON
``{"error": <exception class>, "message": str, "oid": id | null}`` with the status of the exception.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from tractkv import codec
from tractkv.errors import (
    AuthError,
    DecodeError,
    ObjectTooLarge,
    RejectedObject,
    RemoteUnavailable,
    RequestTooLarge,
    SyncError,
    TransferError,
)
from tractkv.ids import ObjectId, is_object_id

from .remote import RefResult, RefUpdate

PROTOCOL = 1
HEAD_LENGTH = struct.Struct(">I")
MAX_HEAD_BYTES = 1024 * 1024
MAX_IDS_BYTES = 32 * 1024 * 1024  # one million ids per missing() / fetch request
STREAM_TYPE = "application/x-tractkv-stream"
IDS_TYPE = "application/x-tractkv-ids"
_TRANSFER = {cls.__name__: cls for cls in (TransferError, ObjectTooLarge, RequestTooLarge, RejectedObject)}


def encode_push_head(updates: list[RefUpdate], atomic: bool) -> bytes:
    """``u32 length + CBOR {"u": [[name, old, new, force], ...], "a": atomic}`` with raw 32-byte ids
    (about 90 bytes for one update: small next to a one-commit push)."""
    head = codec.dumps(
        {
            "u": [[u.name, _raw(u.old), _raw(u.new), u.force] for u in updates],
            "a": atomic,
        }
    )
    return HEAD_LENGTH.pack(len(head)) + head


def decode_push_head(data: bytes) -> tuple[list[RefUpdate], bool]:
    """Parse a push head; :class:`TransferError` (400) when malformed."""
    try:
        head = codec.loads(data)
        updates = [
            RefUpdate(name=_text(name), old=_oid_or_none(old), new=_oid_or_none(new), force=force is True)
            for name, old, new, force in head["u"]
        ]
        atomic = head.get("a") is True
    except (DecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise TransferError(f"malformed push head: {exc}") from exc
    if not updates:
        raise TransferError("a push names no ref to update")
    return updates, atomic


def parse_fetch_request(
    data: bytes, *, max_ids: int = MAX_IDS_BYTES // 32
) -> tuple[list[ObjectId], list[ObjectId]]:
    """``(wants, haves)`` of a fetch request body; :class:`TransferError` (400) naming what is wrong unless it
    is a JSON object whose ``wants`` (required) and ``haves`` (optional) are lists of object ids, at most
    ``max_ids`` in all, and no other field."""
    try:
        body = json.loads(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise TransferError(f"a fetch request must be JSON ({type(exc).__name__})") from None
    if not isinstance(body, dict):
        raise TransferError(f"a fetch request must be a JSON object, not {_json_type(body)}")
    unknown = sorted(set(body) - {"wants", "haves"})
    if unknown:
        raise TransferError(f"unknown field(s) in a fetch request: {', '.join(map(repr, unknown[:5]))}")
    if "wants" not in body:
        raise TransferError('a fetch request needs "wants" (a list of object ids)')
    wants = _id_list(body["wants"], "wants")
    haves = _id_list(body.get("haves", []), "haves")
    if len(wants) + len(haves) > max_ids:
        raise TransferError(f"a fetch request names more than {max_ids} ids")
    return wants, haves


def _id_list(value: Any, field: str) -> list[ObjectId]:
    if not isinstance(value, list):
        raise TransferError(f'"{field}" must be a list of object ids, not {_json_type(value)}')
    for i, item in enumerate(value):
        if not is_object_id(item):
            shown = repr(item) if isinstance(item, str) and len(item) <= 80 else _json_type(item)
            raise TransferError(f'"{field}"[{i}] is not an object id (64 lowercase hex digits): {shown}')
    return [ObjectId(v) for v in value]


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _raw(oid: ObjectId | None) -> bytes | None:
    return None if oid is None else bytes.fromhex(oid)


def result_to_json(result: RefResult) -> dict[str, Any]:
    return {"name": result.name, "ok": result.ok, "reason": result.reason, "detail": result.detail}


def result_from_json(data: dict[str, Any]) -> RefResult:
    return RefResult(
        name=str(data["name"]),
        ok=bool(data["ok"]),
        reason=data.get("reason"),
        detail=str(data.get("detail", "")),
    )


def error_body(exc: Exception) -> dict[str, Any]:
    return {"error": type(exc).__name__, "message": str(exc), "oid": getattr(exc, "oid", None)}


def error_from_response(status: int, body: Any, what: str) -> SyncError:
    """The exception a hub's error answer stands for."""
    name = body.get("error") if isinstance(body, dict) else None
    message = str(body.get("message", "")) if isinstance(body, dict) else ""
    if status in (401, 403):
        detail = message.split(": ", 1)[-1] if message else f"{what} refused"
        return AuthError(status, detail)
    if isinstance(name, str) and name in _TRANSFER:
        cls = _TRANSFER[name]
        reason = message.removeprefix("transfer rejected: ")
        oid = body.get("oid") if isinstance(body.get("oid"), str) else None
        if oid and reason.endswith(f" (object {oid})"):
            reason = reason[: -len(f" (object {oid})")]
        return cls(reason, oid)
    return RemoteUnavailable(f"the hub answered {status} to {what}: {message or 'no detail'}")


def ids_to_bytes(oids: list[ObjectId] | set[ObjectId]) -> bytes:
    return b"".join(bytes.fromhex(o) for o in oids)


def ids_from_bytes(data: bytes) -> list[ObjectId]:
    if len(data) % 32:
        raise TransferError("an id list must be a multiple of 32 bytes")
    return [ObjectId(data[i : i + 32].hex()) for i in range(0, len(data), 32)]


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("ref names are strings")
    return value


def _oid_or_none(value: Any) -> ObjectId | None:
    if value is None:
        return None
    if not isinstance(value, bytes) or len(value) != 32:
        raise ValueError(f"{value!r} is not a raw 32-byte object id")
    return ObjectId(value.hex())
