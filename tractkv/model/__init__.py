"""Immutable values: stored objects (content-addressed) and their wire format."""

from tractkv.model.objects import (
    KINDS,
    OBJECT_FORMAT,
    USAGE_STATUSES,
    Blob,
    Commit,
    StoredObject,
    ToolSchema,
    ToolSet,
    UsageRecord,
    decode,
    describe,
    encode,
    encode_with_id,
    kind_of,
    object_id,
    to_jsonable,
)

__all__ = [
    "KINDS",
    "OBJECT_FORMAT",
    "USAGE_STATUSES",
    "Blob",
    "Commit",
    "StoredObject",
    "ToolSchema",
    "ToolSet",
    "UsageRecord",
    "decode",
    "describe",
    "encode",
    "encode_with_id",
    "kind_of",
    "object_id",
    "to_jsonable",
]
