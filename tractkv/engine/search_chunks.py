"""The search index's chunk format (``gchunk:1:<hash>`` rows of the ``derived`` table; :mod:`tractkv.engine.search`).

A chunk holds the searchable fields of up to :data:`CHUNK_COMMITS` consecutive commits. Logically it is a list
of records ``[raw id, ts, op, role, [[field, tool, text], ...]]`` (:data:`Record`); stored, it is one CBOR map
of columns, so that a load is one decode of a few byte strings and one text, not of thousands of small
values:

==========  ==========================================================================================
key         value
==========  ==========================================================================================
``n``       the number of commits
``ids``     their raw ids, 32 bytes each
``ts``      their timestamps, int64 little-endian
``ops``     the operations met (a table), ``op`` each commit's index in it (uint16 LE)
``roles``   the roles met, ``role`` each commit's index + 1 (0: none; uint16 LE)
``tools``   the tool names met
``f_rec``   per field: its commit's position (uint16 LE, non-decreasing)
``f_kind``  per field: its index in :data:`FIELDS` (one byte)
``f_tool``  per field: its tool's index + 1 in ``tools`` (0: none; uint32 LE)
``f_start`` per field: where its text starts in ``text`` (uint32 LE, non-decreasing, the first 0)
``text``    the fields' texts joined by NUL (``\\x00``): one string a literal search runs over once
==========  ==========================================================================================

The row's key is ``gchunk:1:`` + blake3 of the value, so a load checks its integrity by one hash; the
columns' lengths and table indexes are checked before use (a hostile row cannot make a search fail with
anything but a rebuild); ``fsck`` compares each record with what its commit holds.
"""

from __future__ import annotations

import sys
from array import array
from typing import Any

from tractkv import codec
from tractkv.errors import DecodeError
from tractkv.ids import ObjectId, hash_bytes, raw_to_oid

INDEX_FORMAT = 1
TIP_PREFIX = b"grep:%d:" % INDEX_FORMAT
CHUNK_PREFIX = b"gchunk:%d:" % INDEX_FORMAT
CHUNK_COMMITS = 1024  # commits per chunk
FIELDS = ("text", "tool_name", "arguments", "tool_result", "original", "reason", "note", "metadata")
SEP = "\x00"  # joins a chunk's fields: a literal match never spans it unless the query holds it
_KEYS = (
    "n",
    "ids",
    "ts",
    "ops",
    "op",
    "roles",
    "role",
    "tools",
    "f_rec",
    "f_kind",
    "f_tool",
    "f_start",
    "text",
)

# one commit's record: [raw id, ts, op, role, [[field, tool, text], ...]]
Record = list[Any]


def _pack(code: str, values: Any) -> bytes:
    packed = array(code, values)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def _unpack(code: str, data: object, count: int, what: str) -> array[int]:
    out = array(code)
    if not isinstance(data, bytes) or len(data) != count * out.itemsize:
        raise DecodeError(f"search index chunk: {what} has the wrong length")
    out.frombytes(data)
    if sys.byteorder == "big":
        out.byteswap()
    return out


class Chunk:
    """A verified chunk, its columns unpacked; fields are numbered 0..m-1 in commit order."""

    __slots__ = (
        "_texts", "f_kind", "f_rec", "f_tool", "ids", "n", "op", "ops", "raw", "role", "roles", "starts",
        "text", "tools", "ts",
    )  # fmt: skip

    def __init__(self, value: dict[str, Any], raw: bytes) -> None:
        self.raw = raw
        self.n: int = value["n"]
        self.ids: bytes = value["ids"]
        self.ops: list[str] = value["ops"]
        self.roles: list[str] = value["roles"]
        self.tools: list[str] = value["tools"]
        self.text: str = value["text"]
        self.f_kind: bytes = value["f_kind"]
        m = len(self.f_kind)
        self.ts = _unpack("q", value["ts"], self.n, "ts")
        self.op = _unpack("H", value["op"], self.n, "op")
        self.role = _unpack("H", value["role"], self.n, "role")
        self.f_rec = _unpack("H", value["f_rec"], m, "f_rec")
        self.f_tool = _unpack("I", value["f_tool"], m, "f_tool")
        self.starts = _unpack("I", value["f_start"], m, "f_start")
        self._texts: list[str] | None = None

    def __len__(self) -> int:
        return len(self.f_kind)

    def end(self, index: int) -> int:
        """Where field ``index``'s text ends in :attr:`text`."""
        return self.starts[index + 1] - 1 if index + 1 < len(self.f_kind) else len(self.text)

    def texts(self) -> list[str]:
        """Every field's text (made on first use: a regular expression is matched field by field)."""
        if self._texts is None:
            self._texts = [self.text[self.starts[i] : self.end(i)] for i in range(len(self.f_kind))]
        return self._texts

    def commit(self, record: int) -> ObjectId:
        return raw_to_oid(self.ids[32 * record : 32 * record + 32])

    def role_of(self, record: int) -> str | None:
        index = self.role[record]
        return self.roles[index - 1] if index else None

    def tool_of(self, field: int) -> str | None:
        index = self.f_tool[field]
        return self.tools[index - 1] if index else None

    def records(self) -> list[Record]:
        """The chunk as records (what it was made from)."""
        out: list[Record] = [
            [self.ids[32 * r : 32 * r + 32], self.ts[r], self.ops[self.op[r]], self.role_of(r), []]
            for r in range(self.n)
        ]
        texts = self.texts()
        for i, record in enumerate(self.f_rec):
            out[record][4].append([FIELDS[self.f_kind[i]], self.tool_of(i), texts[i]])
        return out


def encode(records: list[Record]) -> tuple[bytes, bytes, Chunk]:
    """(the row's key, its value, the chunk) for ``records`` (1 to :data:`CHUNK_COMMITS`; the same records
    always give the same bytes)."""
    ops: dict[str, int] = {}
    roles: dict[str, int] = {}
    tools: dict[str, int] = {}
    f_rec: list[int] = []
    f_kind: list[int] = []
    f_tool: list[int] = []
    texts: list[str] = []
    for position, (_, _, op, role, fields) in enumerate(records):
        ops.setdefault(op, len(ops))
        if role is not None:
            roles.setdefault(role, len(roles) + 1)
        for field, tool, text in fields:
            f_rec.append(position)
            f_kind.append(FIELDS.index(field))
            f_tool.append(0 if tool is None else tools.setdefault(tool, len(tools) + 1))
            texts.append(text)
    starts, position = [], 0
    for text in texts:
        starts.append(position)
        position += len(text) + 1
    value = {
        "n": len(records),
        "ids": b"".join(r[0] for r in records),
        "ts": _pack("q", (r[1] for r in records)),
        "ops": list(ops),
        "op": _pack("H", (ops[r[2]] for r in records)),
        "roles": list(roles),
        "role": _pack("H", (0 if r[3] is None else roles[r[3]] for r in records)),
        "tools": list(tools),
        "f_rec": _pack("H", f_rec),
        "f_kind": bytes(f_kind),
        "f_tool": _pack("I", f_tool),
        "f_start": _pack("I", starts),
        "text": SEP.join(texts),
    }
    raw = codec.dumps_local(value)  # insertion-ordered map of bytes, str, ints and str lists: deterministic
    return CHUNK_PREFIX + bytes.fromhex(hash_bytes(raw)), raw, Chunk(value, raw)


def decode(key: bytes, raw: bytes) -> Chunk:
    """A stored chunk, verified: its key is the hash of its bytes, its columns have their lengths and every
    index is in range (what a search reads cannot fail).

    Raises:
        DecodeError: anything else (the index is rebuilt from objects; fsck reports it)."""
    if bytes.fromhex(hash_bytes(raw)) != key[len(CHUNK_PREFIX) :]:
        raise DecodeError("search index chunk: its bytes do not hash to its key")
    try:
        value = codec.loads(raw)
    except DecodeError as exc:
        raise DecodeError(f"search index chunk: {exc.reason}") from exc
    if not isinstance(value, dict) or tuple(value) != _KEYS:
        raise DecodeError("search index chunk: not the map of columns")
    n, ids = value["n"], value["ids"]
    if (
        not isinstance(n, int)
        or not 0 < n <= CHUNK_COMMITS
        or not isinstance(ids, bytes)
        or len(ids) != 32 * n
    ):
        raise DecodeError("search index chunk: a count of 1-1024 commits and their ids")
    for name in ("ops", "roles", "tools"):
        if not isinstance(value[name], list) or not all(isinstance(x, str) for x in value[name]):
            raise DecodeError(f"search index chunk: {name} is not a list of strings")
    if not isinstance(value["text"], str) or not isinstance(value["f_kind"], bytes):
        raise DecodeError("search index chunk: text or f_kind of the wrong type")
    chunk = Chunk(value, raw)
    m = len(chunk)
    if max(chunk.op) >= len(chunk.ops) or max(chunk.role) > len(chunk.roles):
        raise DecodeError("search index chunk: an operation or role index out of range")
    if m and (
        max(chunk.f_rec) >= n
        or max(chunk.f_kind) >= len(FIELDS)
        or max(chunk.f_tool) > len(chunk.tools)
        or chunk.starts[0] != 0
        or chunk.starts[-1] > len(chunk.text)
        or list(chunk.starts) != sorted(chunk.starts)
        or list(chunk.f_rec) != sorted(chunk.f_rec)
    ):
        raise DecodeError("search index chunk: a field column out of range or out of order")
    return chunk
