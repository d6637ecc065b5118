"""Search over a branch's history or its compiled context: ``Tract.search``, ``tractkv grep``, the viewer's box.

What is searched, per commit (:func:`fields_of`; one :class:`~tractkv.engine.values.SearchHit` per matching
field): a message's ``text`` (a freeform payload as the compact JSON the model sees), an assistant message's
tool calls (``tool_name``, and ``arguments`` as compact JSON with sorted keys), a tool result's text
(``tool_result``), the raw output behind a summarized or edited result (``original``), an annotation's
``reason``, the commit's ``note`` and its ``metadata`` (compact JSON, sorted keys). A query is a literal
(default) or a Python regular expression (``regex=True``), matched within one field (never across two);
``ignore_case`` folds case. ``role`` keeps hits of that speaker, ``tool`` hits of calls to or results of that
tool, ``after`` hits committed after that revision (git's ``after..tip``), ``limit`` the first N hits; hits
come newest first (the reverse of the causal order: parents before children, a merge's first-parent side
before the side it brought in).

``scope="history"`` searches every commit reachable from the branch (HEAD by default), merged-in branches
included; ``"context"`` only the messages compile sends now, at their shown version (an edit's text under
the id of the message it edited).

**The index** (history scope) lives in the local ``derived`` table, a cache like compile checkpoints: never
synced, rebuilt on demand from objects, verified before it is trusted, checked by ``fsck``
(:func:`check_index`) and dropped by ``gc``. Rows: ``grep:1:<tip>`` (a record: the chunk keys of the tip's
history, in causal order) and ``gchunk:1:<hash>`` (content-addressed: the key is blake3 of the value, so two
tips of one growing branch share every full chunk; the format: :mod:`tractkv.engine.search_chunks`). A chunk
holds the extracted fields of :data:`CHUNK_COMMITS` consecutive commits, boundaries counted from the root,
so the index of a tip is a pure function of the tip: a new tip extends its first parent's record when the
commits in between are not merges (at most :data:`EXTEND_LIMIT`), else it is built from a walk of the whole
history. A writable session saves the record it built (and drops the record it replaced when no ref names
that tip); a read-only one (the viewer, a read-only Tract) keeps it in memory only. Decoded chunks are cached
per process by hash, records by tip id: both names are content addresses, valid in any store.

Matching a literal runs one C-level regex search over each chunk's fields joined by a separator that no
query crosses (a query holding it is matched field by field), so a search costs a pass over the text, not a
Python step per commit; a regular expression is matched field by field (exact ``^`` / ``$`` semantics).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tractkv import codec
from tractkv.engine.content import ANNOTATION, MESSAGE_TYPES, TOOL_ORIGINAL, freeform_text
from tractkv.engine.history import ancestors, parents_first
from tractkv.engine.search_chunks import (
    CHUNK_COMMITS,
    CHUNK_PREFIX,
    FIELDS,
    SEP,
    TIP_PREFIX,
    Chunk,
    Record,
    decode,
    encode,
)
from tractkv.engine.values import SearchHit, timestamp
from tractkv.errors import DecodeError, InvalidInput, TractError
from tractkv.ids import ObjectId, oid_to_raw, raw_to_oid
from tractkv.model import Blob, Commit
from tractkv.store import Reader, Store, Table

if TYPE_CHECKING:
    from tractkv.engine.session import Session
    from tractkv.store.fsck import Problem

EXTEND_LIMIT = 4096  # first-parent commits walked to find an indexed ancestor before a full build
SCOPES = ("history", "context")
SNIPPET_CONTEXT = 60  # characters kept on each side of a match (within its line)
_DEFAULT_ROLES = {"instruction": "system", "reasoning": "assistant"}  # artifact, freeform: user (payload.py)

_CHUNKS: OrderedDict[bytes, Chunk] = OrderedDict()  # chunk key -> decoded chunk (verified), LRU
_TIPS: OrderedDict[ObjectId, tuple[bytes, ...]] = OrderedDict()  # tip -> its chunk keys, LRU
_MAX_CHUNKS = 256
_MAX_TIPS = 64
_PENDING: OrderedDict[bytes, bytes] = OrderedDict()  # chunk key -> bytes built here, not stored (read-only)
_MAX_PENDING = 1024


def _remember(cache: OrderedDict[Any, Any], key: Any, value: Any, limit: int) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > limit:
        cache.popitem(last=False)


def clear_caches() -> None:
    """Forget the process's decoded chunks and records (tests; a gc that removed objects)."""
    _CHUNKS.clear()
    _TIPS.clear()
    _PENDING.clear()


# --- what a commit contributes ------------------------------------------------------------------------------


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=_bytes_hex)


def _bytes_hex(value: object) -> str:
    return value.hex() if isinstance(value, bytes) else repr(value)


def fields_of(reader: Reader, commit: Commit) -> tuple[str | None, list[list[Any]]]:
    """(role, [[field, tool, text], ...]) of a commit: what search matches (see the module docstring)."""
    out: list[list[Any]] = []
    role: str | None = None
    data: object = None
    if commit.content is not None:
        blob = reader.get(commit.content)
        data = blob.data if isinstance(blob, Blob) else None
    if isinstance(data, dict):
        kind = data.get("type")
        if kind in MESSAGE_TYPES:
            role = str(data.get("role") or _DEFAULT_ROLES.get(str(kind), "user"))
            text = freeform_text(data.get("payload")) if kind == "freeform" else data.get("text")
            tool = str(data["name"]) if role == "tool" and data.get("name") is not None else None
            if isinstance(text, str) and text:
                out.append(["tool_result" if role == "tool" else "text", tool, text])
            for call in data.get("tool_calls") or ():
                if isinstance(call, dict):
                    name = str(call.get("name"))
                    out.append(["tool_name", name, name])
                    out.append(["arguments", name, _json(call.get("arguments"))])
        elif kind == ANNOTATION and isinstance(data.get("reason"), str) and data["reason"]:
            out.append(["reason", None, data["reason"]])
    for original in commit.links.get("original", ()):
        blob = reader.get(original)
        if isinstance(blob, Blob) and isinstance(blob.data, dict) and blob.data.get("type") == TOOL_ORIGINAL:
            text = blob.data.get("text")
            if isinstance(text, str) and text:
                tool = next((f[1] for f in out if f[0] == "tool_result"), None)
                out.append(["original", tool, text])
    # an annotation's reason is its note too: one hit for it
    if commit.message and ["reason", None, commit.message] not in out:
        out.append(["note", None, commit.message])
    if commit.metadata:
        out.append(["metadata", None, _json(commit.metadata)])
    return role, out


def _record(reader: Reader, oid: ObjectId, commit: Commit) -> Record:
    role, fields = fields_of(reader, commit)
    return [oid_to_raw(oid), commit.created_at, commit.operation, role, fields]


# --- the index ------------------------------------------------------------------------------------------------


def _read_chunk(reader: Reader, key: bytes) -> Chunk:
    cached = _CHUNKS.get(key)
    if cached is not None:
        _CHUNKS.move_to_end(key)
        return cached
    raw = _PENDING.get(key) or reader.table_get(Table.DERIVED, key)
    if raw is None:
        raise DecodeError(f"search index chunk {key[len(CHUNK_PREFIX) :].hex()} is missing")
    chunk = decode(key, raw)
    _remember(_CHUNKS, key, chunk, _MAX_CHUNKS)
    return chunk


def _read_tip(reader: Reader, tip: ObjectId) -> tuple[bytes, ...] | None:
    """The chunk keys of a tip's index (memory, else the stored record), or None (never built, or damaged)."""
    cached = _TIPS.get(tip)
    if cached is not None:
        return cached
    raw = reader.table_get(Table.DERIVED, TIP_PREFIX + oid_to_raw(tip))
    if raw is None:
        return None
    try:
        keys = _decode_tip(raw)
        for key in keys:  # verify every chunk before trusting the record
            _read_chunk(reader, key)
    except DecodeError:
        return None  # a damaged index is rebuilt (fsck reports it)
    _remember(_TIPS, tip, keys, _MAX_TIPS)
    return keys


def _decode_tip(raw: bytes) -> tuple[bytes, ...]:
    value = codec.loads(raw)
    if not isinstance(value, dict) or not isinstance(value.get("chunks"), list):
        raise DecodeError("search index record: not {chunks: [...]}")
    keys = value["chunks"]
    if not keys or not all(
        isinstance(k, bytes) and k.startswith(CHUNK_PREFIX) and len(k) == len(CHUNK_PREFIX) + 32 for k in keys
    ):
        raise DecodeError("search index record: chunk keys of the wrong shape")
    return tuple(keys)


def _extension(reader: Reader, tip: ObjectId) -> tuple[ObjectId, list[tuple[ObjectId, Commit]]] | None:
    """(an indexed first-parent ancestor, the commits after it oldest first) when no merge lies between."""
    walked: list[tuple[ObjectId, Commit]] = []
    oid = tip
    while len(walked) <= EXTEND_LIMIT:
        commit = reader.get_commit(oid)
        if len(commit.parents) != 1:
            return None
        walked.append((oid, commit))
        oid = commit.parents[0]
        if _read_tip(reader, oid) is not None:
            walked.reverse()
            return oid, walked
    return None


def history_of(reader: Reader, tip: ObjectId) -> list[tuple[ObjectId, Commit]]:
    """Every commit reachable from ``tip`` with its object, parents first (a first parent's side first)."""
    commits: dict[ObjectId, Commit] = {}
    stack = [tip]
    while stack:
        oid = stack.pop()
        if oid in commits:
            continue
        commit = commits[oid] = reader.get_commit(oid)
        stack.extend(p for p in commit.parents if p not in commits)
    order = parents_first(tip, lambda o: commits[o].parents, commits)
    return [(oid, commits[oid]) for oid in order]


def index_for(session: Session, tip: ObjectId) -> tuple[bytes, ...]:
    """The chunk keys of ``tip``'s index: read, extended from an indexed ancestor, or built; a writable
    session outside a batch saves what it built."""
    reader = session.reader()
    writable = not session.readonly and reader is session.store  # read-only, or inside a batch: memory only
    keys = _read_tip(reader, tip)
    if keys is not None:
        if writable and reader.table_get(Table.DERIVED, TIP_PREFIX + oid_to_raw(tip)) is None:
            # known to this process (another store with the same history): store it here too
            _save(session.store, tip, keys, {}, None)
        return keys
    found = _extension(reader, tip)
    if found is not None:
        base, new = found
        base_keys = _read_tip(reader, base) or ()
        last = _read_chunk(reader, base_keys[-1]).records() if base_keys else []
        keep = list(base_keys[:-1]) if len(last) < CHUNK_COMMITS else list(base_keys)
        records = (last if len(last) < CHUNK_COMMITS else []) + [_record(reader, o, c) for o, c in new]
    else:
        base, keep = None, []
        records = [_record(reader, o, c) for o, c in history_of(reader, tip)]
    rows: dict[bytes, bytes] = {}
    for start in range(0, len(records), CHUNK_COMMITS):
        key, raw, chunk = encode(records[start : start + CHUNK_COMMITS])
        rows[key] = raw
        keep.append(key)
        _remember(_CHUNKS, key, chunk, _MAX_CHUNKS)
    keys = tuple(keep)
    _remember(_TIPS, tip, keys, _MAX_TIPS)
    if writable:
        _save(session.store, tip, keys, rows, base)
    else:
        _keep_pending(rows)
    return keys


def _keep_pending(rows: dict[bytes, bytes]) -> None:
    """Keep chunks this process built and could not store (a chunk evicted from the LRU is read from here)."""
    for key, raw in rows.items():
        _remember(_PENDING, key, raw, _MAX_PENDING)


def _used_elsewhere(store: Store, key: bytes, dropped: ObjectId) -> bool:
    """Whether a stored record other than ``dropped``'s names chunk ``key``."""
    skip = TIP_PREFIX + oid_to_raw(dropped)
    for name, raw in store.table_iter(Table.DERIVED, TIP_PREFIX):
        if name != skip:
            try:
                if key in _decode_tip(raw):
                    return True
            except DecodeError:
                continue
    return False


def _save(
    store: Store, tip: ObjectId, keys: tuple[bytes, ...], rows: dict[bytes, bytes], base: ObjectId | None
) -> None:
    """Store a tip's record and its new chunks in one transaction; drop the record it extends when no ref
    names that tip any more (and that record's last chunk when nothing else uses it)."""
    batch = store.new_batch()
    for key in keys:  # the new chunks, and any this process knew from another store with the same history
        if store.table_get(Table.DERIVED, key) is None:
            raw = rows.get(key) or _PENDING.get(key) or _read_chunk(store, key).raw
            batch.table_put(Table.DERIVED, key, raw)
    batch.table_put(Table.DERIVED, TIP_PREFIX + oid_to_raw(tip), codec.dumps_local({"chunks": list(keys)}))
    if base is not None and base not in {
        ObjectId(v) for _, v in store.iter_refs() if not v.startswith("ref:")
    }:
        old = _read_tip(store, base) or ()
        batch.table_put(Table.DERIVED, TIP_PREFIX + oid_to_raw(base), None)
        _TIPS.pop(base, None)
        if old and old[-1] not in keys and not _used_elsewhere(store, old[-1], base):
            batch.table_put(Table.DERIVED, old[-1], None)
    try:
        store.apply(batch)
    except TractError:  # a cache: a store that cannot take it now (full disk, read-only) is searched anyway
        _keep_pending(rows)


# --- matching -------------------------------------------------------------------------------------------------


def compile_query(query: str, *, regex: bool = False, ignore_case: bool = False) -> re.Pattern[str]:
    """The pattern a query searches for.

    Raises:
        InvalidInput: an empty query, or ``regex`` and not a valid regular expression (named, with where)."""
    if not isinstance(query, str) or not query:
        raise InvalidInput("search: the pattern is empty")
    flags = re.IGNORECASE if ignore_case else 0
    try:
        return re.compile(query if regex else re.escape(query), flags)
    except re.error as exc:
        where = f" at position {exc.pos}" if exc.pos is not None else ""
        raise InvalidInput(f"search: invalid regular expression {query!r}: {exc.msg}{where}") from None
    except (RecursionError, OverflowError):
        raise InvalidInput(f"search: regular expression {query!r} is too complex") from None


def _matches(chunk: Chunk, pattern: re.Pattern[str], literal: bool) -> Iterator[tuple[int, re.Match[str]]]:
    """(field, match) of each field of a chunk the pattern matches (its first match), in order."""
    if literal and SEP not in pattern.pattern:
        joined, starts = chunk.text, chunk.starts
        position = 0
        while True:
            found = pattern.search(joined, position)
            if found is None:
                return
            index = bisect_right(starts, found.start()) - 1
            start = starts[index]
            text = joined[start : chunk.end(index)]
            match = pattern.search(text, found.start() - start)
            if match is not None:  # always: the literal holds no separator, so it lies within one field
                yield index, match
            position = chunk.end(index) + 1
    for index, text in enumerate(chunk.texts()):
        match = pattern.search(text)
        if match is not None:
            yield index, match


def snippet(text: str, found: re.Match[str]) -> tuple[str, int, int]:
    """(the match's line, cut to :data:`SNIPPET_CONTEXT` characters either side, and the match's span in it)."""
    line_start = text.rfind("\n", 0, found.start()) + 1
    line_end = text.find("\n", found.end())
    line_end = len(text) if line_end < 0 else line_end
    low = max(line_start, found.start() - SNIPPET_CONTEXT)
    end = min(found.end(), found.start() + 4 * SNIPPET_CONTEXT)  # a very long match is cut too
    high = max(end, min(line_end, end + SNIPPET_CONTEXT))
    return text[low:high], found.start() - low, end - low


def _hit(chunk: Chunk, index: int, found: re.Match[str]) -> SearchHit:
    text, start, end = snippet(found.string, found)
    record = chunk.f_rec[index]
    return SearchHit(
        commit_id=chunk.commit(record),
        operation=chunk.ops[chunk.op[record]],
        role=chunk.role_of(record),
        tool=chunk.tool_of(index),
        field=FIELDS[chunk.f_kind[index]],
        snippet=text,
        start=start,
        end=end,
        offset=found.start(),
        created_at=timestamp(chunk.ts[record]),
    )


def search(
    session: Session,
    query: str,
    /,
    *,
    regex: bool = False,
    ignore_case: bool = False,
    role: str | None = None,
    tool: str | None = None,
    scope: str = "history",
    branch: str | None = None,
    after: str | None = None,
    limit: int | None = None,
) -> list[SearchHit]:
    """The fields matching ``query`` in the history (or compiled context) of ``branch`` (a revision; default
    HEAD), newest first (see the module docstring).

    Raises:
        InvalidInput: an empty query or a bad regular expression, an unknown scope, a negative limit.
        UnknownRevision: ``branch`` or ``after`` names no commit."""
    pattern = compile_query(query, regex=regex, ignore_case=ignore_case)
    if scope not in SCOPES:
        raise InvalidInput(f"search: scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise InvalidInput("search: limit must be >= 0")
    reader = session.reader()
    tip = session.resolve(branch, reader) if branch is not None else session.head_commit(reader)
    stop = ancestors(reader, session.resolve(after, reader)) if after is not None else set()
    if tip is None or limit == 0:
        return []
    chunks = _history_chunks(session, tip) if scope == "history" else _context_chunks(session, tip)
    out: list[SearchHit] = []
    for chunk in reversed(chunks):
        found: list[tuple[int, SearchHit]] = []
        for index, match in _matches(chunk, pattern, not regex):
            record = chunk.f_rec[index]
            if role is not None and chunk.role_of(record) != role:
                continue
            if tool is not None and chunk.tool_of(index) != tool:
                continue
            if stop and chunk.commit(record) in stop:
                continue
            found.append((-record, _hit(chunk, index, match)))
        found.sort(key=lambda item: item[0])  # newest commit first; a commit's fields in their order (stable)
        out.extend(hit for _, hit in found)
        if limit is not None and len(out) >= limit:
            return out[:limit]
    return out


def _history_chunks(session: Session, tip: ObjectId) -> list[Chunk]:
    reader = session.reader()
    try:
        return [_read_chunk(reader, key) for key in index_for(session, tip)]
    except DecodeError:  # a chunk this process knew is gone from memory and the store: build the index again
        _TIPS.pop(tip, None)
        return [_read_chunk(reader, key) for key in index_for(session, tip)]


def _context_chunks(session: Session, tip: ObjectId) -> list[Chunk]:
    """The compiled context at ``tip`` as chunks: each message as compile shows it (an edit's text) under
    the id of the commit that wrote it, with that commit's note and metadata; placeholder results (they
    carry the id of the call's message, already listed) are left out."""
    reader = session.reader()
    _, ctx = session.compiled_at(tip)
    records: list[Record] = []
    seen: set[ObjectId] = set()
    for oid, message in zip(ctx.commit_ids, ctx.messages, strict=True):
        if oid in seen:
            continue
        seen.add(oid)
        commit = reader.get_commit(oid)
        fields: list[list[Any]] = []
        tool = message.name if message.role == "tool" else None
        if message.content:
            fields.append(["tool_result" if message.role == "tool" else "text", tool, message.content])
        for call in message.tool_calls:
            fields.append(["tool_name", call.name, call.name])
            fields.append(["arguments", call.name, _json(call.arguments)])
        fields.extend(f for f in fields_of(reader, commit)[1] if f[0] in ("note", "metadata"))
        records.append([oid_to_raw(oid), commit.created_at, commit.operation, message.role, fields])
    return [encode(records[i : i + CHUNK_COMMITS])[2] for i in range(0, len(records), CHUNK_COMMITS)]


# --- fsck and gc ----------------------------------------------------------------------------------------------


def is_index_key(key: bytes) -> bool:
    """A row of the search index (this format or another: an older format's rows are stale, gc drops them)."""
    return key.startswith((b"grep:", b"gchunk:"))


def check_index(reader: Reader) -> tuple[list[Problem], list[bytes], int]:
    """fsck of the search index: (problems, the damaged keys, rows checked). A chunk must hash to its key,
    decode to records of the right shape naming stored commits, and hold exactly what :func:`fields_of`
    extracts from them; a record must name its tip (stored) and chunks that are present and sound, the last
    one ending at the tip. Rows of another index format are stale, not damage."""
    from tractkv.store.fsck import Problem  # lazy: the write path never needs fsck

    problems: list[Problem] = []
    damaged: list[bytes] = []
    sound: dict[bytes, Chunk] = {}
    records: list[tuple[bytes, bytes]] = []
    checked = 0

    def damage(key: bytes, detail: str) -> None:
        problems.append(Problem("search index", _describe(key), detail))
        damaged.append(key)

    for key, raw in reader.table_iter(Table.DERIVED, b"g"):
        if not is_index_key(key) or not key.startswith((TIP_PREFIX, CHUNK_PREFIX)):
            continue  # another format's rows: stale (gc drops them)
        checked += 1
        if key.startswith(TIP_PREFIX):
            records.append((key, raw))
            continue
        try:
            sound[key] = _check_chunk(reader, key, raw)
        except DecodeError as exc:
            damage(key, exc.reason)
    for key, raw in records:
        try:
            _check_tip(reader, key, raw, sound)
        except DecodeError as exc:
            damage(key, exc.reason)
    return problems, damaged, checked


def _describe(key: bytes) -> str:
    if key.startswith(TIP_PREFIX) and len(key) == len(TIP_PREFIX) + 32:
        return f"search record {raw_to_oid(key[len(TIP_PREFIX) :])}"
    if key.startswith(CHUNK_PREFIX) and len(key) == len(CHUNK_PREFIX) + 32:
        return f"search chunk {key[len(CHUNK_PREFIX) :].hex()}"
    return f"search row {key!r}"


def _check_chunk(reader: Reader, key: bytes, raw: bytes) -> Chunk:
    if len(key) != len(CHUNK_PREFIX) + 32:
        raise DecodeError("not a chunk key")
    chunk = decode(key, raw)
    for record in chunk.records():
        oid = raw_to_oid(record[0])
        commit = reader.get(oid)
        if not isinstance(commit, Commit):
            raise DecodeError(f"names {oid}, which is not a stored commit")
        if record != _record(reader, oid, commit):
            raise DecodeError(f"its entry of {oid} is not what that commit holds")
    return chunk


def _check_tip(reader: Reader, key: bytes, raw: bytes, sound: dict[bytes, Chunk]) -> None:
    if len(key) != len(TIP_PREFIX) + 32:
        raise DecodeError("not a record key")
    tip = raw_to_oid(key[len(TIP_PREFIX) :])
    if not isinstance(reader.get(tip), Commit):
        raise DecodeError(f"its tip {tip} is not a stored commit")
    keys = _decode_tip(raw)
    for number, chunk_key in enumerate(keys):
        chunk = sound.get(chunk_key)
        if chunk is None:
            raise DecodeError(f"chunk {number} ({_describe(chunk_key)}) is missing or damaged")
        if number < len(keys) - 1 and chunk.n != CHUNK_COMMITS:
            raise DecodeError(f"chunk {number} holds {chunk.n} commits, not {CHUNK_COMMITS}")
    last = sound[keys[-1]]
    if last.commit(last.n - 1) != tip:
        raise DecodeError("its last chunk does not end at its tip")


def drop_index_rows(reader: Reader, batch: Any, deleted: set[ObjectId]) -> None:
    """Stage gc's removal of index rows: records of tips this gc deletes or the store lacks, chunks no kept
    record names, rows of another index format."""
    used: set[bytes] = set()
    for key, raw in reader.table_iter(Table.DERIVED, TIP_PREFIX):
        tip = raw_to_oid(key[len(TIP_PREFIX) :]) if len(key) == len(TIP_PREFIX) + 32 else None
        try:
            keys = _decode_tip(raw) if tip is not None and tip not in deleted and reader.has(tip) else None
        except DecodeError:
            keys = None
        if keys is None:
            batch.table_put(Table.DERIVED, key, None)
        else:
            used.update(keys)
    for key, _ in reader.table_iter(Table.DERIVED, b"g"):
        if is_index_key(key) and not key.startswith(TIP_PREFIX) and key not in used:
            batch.table_put(Table.DERIVED, key, None)
    clear_caches()
