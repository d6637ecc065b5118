"""The spawn and collapse relations of a history, read from commits, and the derived rows that summarize them.

:mod:`tractkv.engine.spawning` answers ``children()`` / ``parent()`` from history only. Two walks do the work:

* the **spawn** of a commit: the nearest ``spawn`` commit on its first-parent chain (:meth:`SpawnIndex.of`);
* the **marks** of a history: each commit whose links name a child's head (a collapse's ``child`` link, or a
  tool result's usage records' ``heads``), with those heads and each head's spawn (:func:`history_marks`).
  The walk covers the history of a tip, but does not go below the tip's own spawn commit (``own``: what a
  ``full`` child inherited is its parent's history, not its own).

Both walk the whole history, so on a long branch they are linear in its length. A **relation row** (local,
``derived`` table, key ``rel:<format>:<commit>``) cuts them short: written with each compile checkpoint
(:func:`stage_row`, from :meth:`Compiler.stage <tractkv.engine.compile.compiler.Compiler.stage>`), it records for
its commit *C*:

* ``spawn``: *C*'s spawn (so a first-parent walk stops at *C*);
* ``marks``: the marks of the commits a walk from *C* visits before it reaches a commit with a row of its
  own (``stops``), sorted by commit; ``stops``: those commits (the walk goes on from their rows);
* ``spawns`` and ``cut``: the spawn commits with parents (``full`` spawns) among the visited commits, and
  ``spawn`` when it is one of them. The walk from *C* does not expand ``spawn`` (*C*'s own), so the row
  stands for a walk that cuts at ``own`` exactly when the visited commits expand the same way under both
  cuts: ``(own if own in spawns else None) == cut`` (:meth:`RelationRow.usable`); otherwise the walk reads
  *C*'s commits as if it had no row.

Rows are a cache, hostile until verified (:func:`read_row`): a checksum of key and fields, every field's
type, known link kinds, and every commit they name stored (``spawn`` a spawn commit). A missing, damaged
or unusable row only means walking objects: the answer never changes. ``tractkv fsck`` checks each row
against its commits (:func:`check_rows`: the spawn walked from objects, the marks recomputed, every stop
holding a sound row) and ``fsck --repair`` drops damaged ones; gc drops the rows of removed commits; a
read-only handle never writes one. Rows are local, never synced: a receiver writes its own with its
checkpoints (the first one walks its history once).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import attrs

from tractkv import codec
from tractkv.errors import DecodeError, TractError
from tractkv.ids import OID_RAW_LEN, ObjectId, hash_bytes, oid_to_raw, raw_to_oid
from tractkv.model import OBJECT_FORMAT, Commit, UsageRecord
from tractkv.store import Reader, Table, WriteBatch

if TYPE_CHECKING:
    from tractkv.engine.compile.state import CompileState
    from tractkv.store.fsck import Problem

SPAWN = "spawn"  # the operation of a spawn commit
CHILD_LINK = "child"  # a collapse commit's link to the child's head
USAGES_LINK = "usages"
HOWS = ("collapse", "tool_result")  # how a linked head came back

ROWS_FORMAT = 1  # bump when the row layout changes: old rows are then stale (ignored; gc drops them)
REL_PREFIX = b"rel:%d:" % ROWS_FORMAT
_ROW_FIELDS = frozenset({"spawn", "cut", "spawns", "stops", "marks", "check"})


def is_stale_rel(key: bytes) -> bool:
    """A relation row of another row format (``rel:<n>:``): nothing reads it any more, never damage."""
    if not key.startswith(b"rel:") or key.startswith(REL_PREFIX):
        return False
    number, sep, _ = key[4:].partition(b":")
    return bool(sep) and number.isdigit()


# --- reading commits -----------------------------------------------------------------------------------------


class Peek(NamedTuple):
    """The fields of a commit the relation walks use."""

    operation: str
    parents: tuple[ObjectId, ...]
    links: dict[str, tuple[ObjectId, ...]]
    created_at: int


_WALK_LINKS = (CHILD_LINK, USAGES_LINK)


def _ids(raws: object) -> tuple[ObjectId, ...]:
    if not isinstance(raws, list) or any(type(r) is not bytes or len(r) != OID_RAW_LEN for r in raws):
        raise ValueError("not an id list")
    return tuple(raw_to_oid(r) for r in raws)


def peek(reader: Reader, oid: ObjectId) -> Peek:
    """What the walks need of a stored commit, read from one CBOR decode of its bytes (as the reachability
    walks read links, :func:`tractkv.model.objects.links_of`: every stored object was verified on its way in),
    about 5x cheaper than building the :class:`Commit`. Bytes of another shape, and a missing or non-commit
    object, go through :meth:`Reader.get_commit`, which raises what a full read raises."""
    data = reader.get_raw(oid)
    if data is not None:
        try:
            wire = codec.loads(data)
            kind, version = wire["t"], wire["v"]
            op, ts = wire["op"], wire["ts"]
            if (
                kind == "commit"
                and type(version) is int
                and version == OBJECT_FORMAT
                and type(op) is str
                and type(ts) is int
            ):
                raws = wire.get("parents", [])
                parents = (
                    (raw_to_oid(raws[0]),)  # the common case, one parent, without the generic checks
                    if type(raws) is list and len(raws) == 1 and type(raws[0]) is bytes and len(raws[0]) == 32
                    else _ids(raws)
                )
                links = wire.get("links")
                if not links:
                    return Peek(op, parents, {}, ts)
                return Peek(op, parents, {k: _ids(links[k]) for k in _WALK_LINKS if k in links}, ts)
        except Exception:  # not the shape this library writes: the full read names what is wrong
            pass
    commit = reader.get_commit(oid)
    return Peek(commit.operation, commit.parents, dict(commit.links), commit.created_at)


def linked_heads(reader: Reader, links: dict[str, tuple[ObjectId, ...]]) -> Iterator[tuple[ObjectId, str]]:
    """The child heads a commit's links name: its ``child`` links, then its usage records' ``heads``."""
    for head in links.get(CHILD_LINK, ()):
        yield head, "collapse"
    usages = list(links.get(USAGES_LINK, ()))
    seen: set[ObjectId] = set()
    while usages:  # bounded: each usage record is read once
        uid = usages.pop()
        if uid in seen:
            continue
        seen.add(uid)
        record = reader.get(uid)
        if isinstance(record, UsageRecord):
            for head in record.heads:
                yield head, "tool_result"
            usages.extend(record.children)


class Mark(NamedTuple):
    """A commit whose links name child heads: (head, how it came back, the head's spawn commit) each."""

    commit: ObjectId
    created_at: int
    heads: tuple[tuple[ObjectId, str, ObjectId | None], ...]


# --- rows ----------------------------------------------------------------------------------------------------


@attrs.frozen(slots=True)
class RelationRow:
    """A decoded relation row (see the module doc)."""

    commit: ObjectId
    spawn: ObjectId | None
    cut: ObjectId | None
    spawns: frozenset[ObjectId]
    stops: tuple[ObjectId, ...]
    marks: tuple[Mark, ...]

    def usable(self, own: ObjectId | None) -> bool:
        """True when the row stands for a walk from its commit that does not expand ``own``."""
        return (own if own in self.spawns else None) == self.cut


def row_key(oid: ObjectId) -> bytes:
    return REL_PREFIX + oid_to_raw(oid)


def _row_check(key: bytes, body: dict[str, Any]) -> bytes:
    return bytes.fromhex(hash_bytes(key + codec.dumps(body)))


def _raw(value: ObjectId | None) -> bytes | None:
    return None if value is None else oid_to_raw(value)


def encode_row(row: RelationRow) -> tuple[bytes, bytes]:
    """The row's key and bytes (marks and stops in a canonical order, so the same row is the same bytes)."""
    body: dict[str, Any] = {
        "spawn": _raw(row.spawn),
        "cut": _raw(row.cut),
        "spawns": sorted(oid_to_raw(s) for s in row.spawns),
        "stops": sorted(oid_to_raw(s) for s in row.stops),
        "marks": sorted(
            [oid_to_raw(m.commit), m.created_at, [[oid_to_raw(h), how, _raw(s)] for h, how, s in m.heads]]
            for m in row.marks
        ),
    }
    key = row_key(row.commit)
    body["check"] = _row_check(key, body)
    return key, codec.dumps(body)


def _id(value: object, what: str) -> ObjectId:
    if type(value) is not bytes or len(value) != OID_RAW_LEN:
        raise DecodeError(f"{what} is not a 32-byte id")
    return raw_to_oid(value)


def _opt_id(value: object, what: str) -> ObjectId | None:
    return None if value is None else _id(value, what)


def _id_list(value: object, what: str) -> list[ObjectId]:
    if type(value) is not list:
        raise DecodeError(f"{what} is not a list")
    return [_id(v, what) for v in value]


def read_row(key: bytes, raw: bytes) -> RelationRow:
    """Decode and verify a relation row's bytes: checksum, fields, types (not yet that what it names is stored:
    :meth:`SpawnIndex.row` checks that).

    Raises:
        DecodeError: the row is damaged.
    """
    if not key.startswith(REL_PREFIX) or len(key) != len(REL_PREFIX) + OID_RAW_LEN:
        raise DecodeError("not a relation row key")
    value = codec.loads(raw)
    if type(value) is not dict or set(value) != _ROW_FIELDS:
        raise DecodeError("relation row fields are wrong")
    body = {k: v for k, v in value.items() if k != "check"}
    if value["check"] != _row_check(key, body):
        raise DecodeError("relation row checksum mismatch")
    spawn = _opt_id(body["spawn"], "spawn")
    cut = _opt_id(body["cut"], "cut")
    spawns = frozenset(_id_list(body["spawns"], "spawns"))
    if cut is not None and (cut != spawn or cut not in spawns):
        raise DecodeError("the cut is not the row's own spawn among its spawns")
    stops = tuple(_id_list(body["stops"], "stops"))
    marks_raw = body["marks"]
    if type(marks_raw) is not list:
        raise DecodeError("marks are not a list")
    marks: list[Mark] = []
    for item in marks_raw:
        if type(item) is not list or len(item) != 3 or type(item[1]) is not int or item[1] < 0:
            raise DecodeError("a mark is not [commit, time, heads]")
        if type(item[2]) is not list or not item[2]:
            raise DecodeError("a mark names no heads")
        heads: list[tuple[ObjectId, str, ObjectId | None]] = []
        for head in item[2]:
            if type(head) is not list or len(head) != 3 or head[1] not in HOWS:
                raise DecodeError("a mark's head is not [head, how, spawn]")
            heads.append((_id(head[0], "head"), head[1], _opt_id(head[2], "head spawn")))
        marks.append(Mark(_id(item[0], "mark commit"), item[1], tuple(heads)))
    return RelationRow(
        commit=raw_to_oid(key[len(REL_PREFIX) :]),
        spawn=spawn,
        cut=cut,
        spawns=spawns,
        stops=stops,
        marks=tuple(marks),
    )


# --- walks ---------------------------------------------------------------------------------------------------


class SpawnIndex:
    """The spawn commit of commits' first-parent chains, memoized (shared history is walked once), the commits
    the walks read (each decoded once per index) and the relation rows found (``rows=False``: none used)."""

    def __init__(self, reader: Reader, *, rows: bool = True) -> None:
        self.reader = reader
        self.use_rows = rows
        self.spawn_of: dict[ObjectId, ObjectId | None] = {}
        self.commits: dict[ObjectId, Commit] = {}
        self.peeked: dict[ObjectId, Peek] = {}
        self.rows: dict[ObjectId, RelationRow | None] = {}

    def peek(self, oid: ObjectId) -> Peek:
        got = self.peeked.get(oid)
        if got is None:
            got = self.peeked[oid] = peek(self.reader, oid)
        return got

    def commit(self, oid: ObjectId) -> Commit:
        """The full (verified) read of a commit, kept."""
        got = self.commits.get(oid)
        if got is None:
            got = self.commits[oid] = self.reader.get_commit(oid)
        return got

    def row(self, oid: ObjectId) -> RelationRow | None:
        """The verified relation row of a commit, or None (none, damaged, or naming what is not stored)."""
        if not self.use_rows:
            return None
        if oid in self.rows:
            return self.rows[oid]
        found: RelationRow | None = None
        key = row_key(oid)
        raw = self.reader.table_get(Table.DERIVED, key)
        if raw is not None:
            try:
                found = self._verified(read_row(key, raw))
            except (DecodeError, ValueError):
                found = None  # a cache: never trusted over objects
        self.rows[oid] = found
        return found

    def _verified(self, row: RelationRow) -> RelationRow | None:
        has = self.reader.has
        if row.spawn is not None and (not has(row.spawn) or self.peek(row.spawn).operation != SPAWN):
            return None
        named = [*row.stops, *row.spawns]
        for mark in row.marks:
            named.append(mark.commit)
            named.extend(head for head, _, _ in mark.heads)
        return row if all(has(oid) for oid in named) else None

    def spawn_id(self, tip: ObjectId) -> ObjectId | None:
        """The nearest spawn commit on ``tip``'s first-parent chain (``tip`` itself included), or None."""
        path: list[ObjectId] = []
        result: ObjectId | None = None
        oid: ObjectId | None = tip
        while oid is not None:  # bounded by the chain's length; each commit is read once per index
            if oid in self.spawn_of:
                result = self.spawn_of[oid]
                break
            row = self.row(oid)
            if row is not None:
                result = row.spawn
                break
            got = self.peek(oid)
            path.append(oid)
            if got.operation == SPAWN:
                result = oid
                break
            oid = got.parents[0] if got.parents else None
        for seen in path:
            self.spawn_of[seen] = result
        self.spawn_of[tip] = result
        return result

    def of(self, tip: ObjectId) -> tuple[ObjectId, Commit] | None:
        """:meth:`spawn_id` with the spawn commit read in full."""
        found = self.spawn_id(tip)
        return None if found is None else (found, self.commit(found))

    def mark(self, oid: ObjectId) -> Mark | None:
        """The mark of a commit whose links name child heads (None for any other commit)."""
        got = self.peek(oid)
        if not got.links:
            return None
        heads = tuple((head, how, self.spawn_id(head)) for head, how in linked_heads(self.reader, got.links))
        return Mark(oid, got.created_at, heads) if heads else None


def history_marks(index: SpawnIndex, tip: ObjectId, own: ObjectId | None) -> Iterator[Mark]:
    """The marks of ``tip``'s history, not expanding ``own`` (a mark may come more than once: a commit below
    a row that another path reaches too). Rows that stand for this walk replace the commits they cover."""
    stack = [tip]
    seen: set[ObjectId] = set()
    while stack:  # bounded: each commit (or row) is taken once
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        row = index.row(oid)
        if row is not None and row.usable(own):
            yield from row.marks
            stack.extend(row.stops)
            continue
        mark = index.mark(oid)
        if mark is not None:
            yield mark
        if oid != own:
            stack.extend(index.peek(oid).parents)


def _local_walk(
    index: SpawnIndex, commit: ObjectId, spawn: ObjectId | None, is_stop: Any
) -> tuple[list[Mark], set[ObjectId], list[ObjectId]]:
    """The walk a row of ``commit`` stands for: from ``commit``, not expanding ``spawn``, stopping at commits
    ``is_stop`` accepts (other than ``commit``). Returns the marks, the ``full`` spawns and the stops met."""
    marks: list[Mark] = []
    spawns: set[ObjectId] = set()
    stops: list[ObjectId] = []
    stack = [commit]
    seen: set[ObjectId] = set()
    while stack:  # bounded: each commit is taken once
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        if oid != commit and is_stop(oid):
            stops.append(oid)
            continue
        mark = index.mark(oid)
        if mark is not None:
            marks.append(mark)
        got = index.peek(oid)
        if got.operation == SPAWN and got.parents:
            spawns.add(oid)
        if oid != spawn:
            stack.extend(got.parents)
    return marks, spawns, stops


def build_row(reader: Reader, commit: ObjectId) -> RelationRow:
    """The relation row of ``commit`` (reading the rows below it, so only the commits since them)."""
    index = SpawnIndex(reader)
    spawn = index.spawn_id(commit)

    def is_stop(oid: ObjectId) -> bool:
        row = index.row(oid)
        return row is not None and row.usable(spawn)

    marks, spawns, stops = _local_walk(index, commit, spawn, is_stop)
    return RelationRow(
        commit=commit,
        spawn=spawn,
        cut=spawn if spawn in spawns else None,
        spawns=frozenset(spawns),
        stops=tuple(stops),
        marks=tuple(marks),
    )


def stage_row(batch: WriteBatch, state: CompileState) -> bool:
    """Stage the relation row of the state's commit in ``batch`` (with its checkpoint). When every commit since
    the last row the state knows of is a plain one (:attr:`CompileState.rel_since`), the row is made from that
    row alone; otherwise from a walk of the commits since the rows below. A cache: a history that cannot be
    read now (a missing object) gets no row, and the error is not raised. True when one was staged."""
    commit = state.head
    if commit is None:
        return False
    try:
        index = SpawnIndex(batch)
        if index.row(commit) is not None:
            state.rel_since = (commit,)
            return False  # already there and sound
        row = _row_after(index, commit, state.rel_since) or build_row(batch, commit)
        key, data = encode_row(row)
    except TractError:
        return False
    batch.table_put(Table.DERIVED, key, data)
    state.rel_since = (commit,)
    return True


def _row_after(
    index: SpawnIndex, commit: ObjectId, since: tuple[ObjectId | None] | None
) -> RelationRow | None:
    """The row of ``commit`` when every commit after ``since`` up to it is plain (single parent, no spawn, no
    child link): its walk meets no mark and no spawn, so it is the row below with nothing added (a row below
    with no marks or spawns of its own is skipped, its stops taken). None when that row is not there."""
    if since is None:
        return None
    base = since[0]
    if base is None:  # plain commits from the root: nothing at all
        return RelationRow(commit=commit, spawn=None, cut=None, spawns=frozenset(), stops=(), marks=())
    below = index.row(base)
    if below is None:
        return None
    stops = below.stops if not below.marks and not below.spawns else (base,)
    return RelationRow(commit=commit, spawn=below.spawn, cut=None, spawns=frozenset(), stops=stops, marks=())


# --- fsck ----------------------------------------------------------------------------------------------------


def _checked_walk(
    objects: SpawnIndex, rows: Callable[[ObjectId], RelationRow | None], row: RelationRow
) -> tuple[set[Mark], set[ObjectId], set[ObjectId]]:
    """The walk ``row`` stands for, from objects: from its commit, not expanding its spawn, ending at its
    stops; a commit below with a row (``rows``: those not found damaged) that stands for the walk counts as
    that row's marks, spawns and stops (what a row made from the row below it says), so each row's check reads
    only the commits down to the next row. Returns the marks, spawns and stops met."""
    marks: set[Mark] = set()
    spawns: set[ObjectId] = set()
    met: set[ObjectId] = set()
    stops = set(row.stops)
    stack = [row.commit]
    seen: set[ObjectId] = set()
    while stack:  # bounded: each commit is taken once
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        if oid != row.commit:
            if oid in stops:
                met.add(oid)
                continue
            below = rows(oid)
            if below is not None and below.usable(row.spawn):
                marks.update(below.marks)
                spawns.update(below.spawns)
                stack.extend(below.stops)
                continue
        mark = objects.mark(oid)
        if mark is not None:
            marks.add(mark)
        got = objects.peek(oid)
        if got.operation == SPAWN and got.parents:
            spawns.add(oid)
        if oid != row.spawn:
            stack.extend(got.parents)
    return marks, spawns, met


def _no_row(oid: ObjectId) -> RelationRow | None:
    return None


def check_rows(reader: Reader, keys: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, Problem]]:
    """Verify relation rows against the commits they summarize: each row's spawn walked from objects, its
    walk's marks and spawns recomputed (down to the rows below it), and each stop holding a sound row that
    stands for the walk. A row found damaged is then left out and the others checked again, until none is
    (bounded by the rows): every row left is right by induction on the rows below it. The key and a problem
    per damaged row."""
    from tractkv.store.fsck import Problem  # lazy: the write path never needs fsck

    objects = SpawnIndex(reader, rows=False)  # spawns, marks and commits from objects alone, memoized
    with_rows = SpawnIndex(reader)
    damaged: dict[bytes, Problem] = {}
    bad: set[ObjectId] = set()
    decoded: list[tuple[bytes, RelationRow]] = []
    for key, raw in keys:
        try:
            row = read_row(key, raw)
            if not reader.has(row.commit):
                raise DecodeError("its commit is not stored")
            if with_rows.row(row.commit) is None:
                raise DecodeError("it names an object that is not stored, or a spawn that is not one")
            decoded.append((key, row))
        except (DecodeError, ValueError) as exc:
            where = (
                f"relation row {raw_to_oid(key[len(REL_PREFIX) :])}"
                if len(key) == len(REL_PREFIX) + 32
                else ""
            )
            damaged[key] = Problem("relation", where or repr(key), getattr(exc, "reason", str(exc)))
            if where:
                bad.add(raw_to_oid(key[len(REL_PREFIX) :]))

    def sound(oid: ObjectId) -> RelationRow | None:
        return None if oid in bad else with_rows.row(oid)

    for _ in range(len(decoded) + 1):  # each round finds a damaged row or ends
        found = False
        for key, row in decoded:
            if key in damaged:
                continue
            try:
                if row.spawn != objects.spawn_id(row.commit):
                    raise DecodeError("its spawn is not the nearest spawn commit on the first-parent chain")
                for stop in row.stops:
                    below = sound(stop)
                    if below is None or not below.usable(row.spawn):
                        raise DecodeError(f"stop {stop} has no sound row standing for this walk")
                marks, spawns, met = _checked_walk(objects, sound, row)
                if met != set(row.stops) or spawns != row.spawns or marks != set(row.marks):
                    # A row below made after this one may skip this row's stops (a row after a row with no
                    # marks or spawns takes that row's stops): then the walk from objects alone decides.
                    marks, spawns, met = _checked_walk(objects, _no_row, row)
                if met != set(row.stops):
                    raise DecodeError("its stops are not where its walk ends")
                if spawns != row.spawns or row.cut != (row.spawn if row.spawn in spawns else None):
                    raise DecodeError("its spawns are not those of its commits")
                if marks != set(row.marks) or len(set(row.marks)) != len(row.marks):
                    raise DecodeError("its marks are not those of its commits")
            except (DecodeError, ValueError) as exc:
                detail = getattr(exc, "reason", str(exc))
            except TractError as exc:  # a missing or damaged commit: the object checks report it too
                detail = f"cannot be checked: {exc}"
            else:
                continue
            damaged[key] = Problem("relation", f"relation row {row.commit}", detail)
            bad.add(row.commit)
            found = True
        if not found:
            break
    return sorted(damaged.items())
