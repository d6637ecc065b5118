"""The ``Reader`` contract: every public read of :class:`tractkv.store.Reader`, run on both stores and through
the three kinds of reader (the store itself, a snapshot, a write batch whose writes are still pending).

A test stages its data with a ``seed`` function; the ``view`` fixture applies it and hands out the store or a
snapshot, or hands out the batch itself unapplied (and applies it afterwards, so the fsck that ends every
test checks what the batch wrote). The hypothesis property at the end drives random put / delete / ref /
row / log batches and checks that all three kinds of reader, on both stores, read back the same thing.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tractkv.errors import CorruptObject, InvalidInput, InvalidObjectId, ObjectNotFound
from tractkv.ids import ObjectId, hash_bytes
from tractkv.model import Blob, Commit, StoredObject, ToolSchema, ToolSet, encode, object_id
from tractkv.store import LmdbStore, MemoryStore, Reader, Store, Table, WriteBatch, fsck
from tractkv.store.base import MAX_KEY_BYTES

Seed = Callable[[WriteBatch], None]
View = Callable[[Seed], AbstractContextManager[Reader]]
ABSENT = hash_bytes(b"never stored")


@pytest.fixture(params=["store", "snapshot", "batch"])
def reader_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def view(store: Store, reader_kind: str) -> View:
    """``with view(seed) as reader``: the seeded data through the reader kind under test."""

    @contextmanager
    def open_view(seed: Seed) -> Iterator[Reader]:
        batch = store.new_batch()
        seed(batch)
        if reader_kind == "batch":
            yield batch
            store.apply(batch)
        else:
            store.apply(batch)
            if reader_kind == "store":
                yield store
            else:
                with store.snapshot() as snapshot:
                    yield snapshot

    return open_view


def blob(n: int) -> Blob:
    return Blob(data={"n": n})


def schema(name: str, version: int = 1) -> ToolSchema:
    return ToolSchema(name=name, schema={"type": "function", "function": {"name": name, "v": version}})


def _sharing_prefix(
    first: Callable[[int], StoredObject], second: Callable[[int], StoredObject]
) -> tuple[Any, Any]:
    """Two distinct objects whose ids share their first 4 hex digits (found by counting up)."""
    seen: dict[str, StoredObject] = {}
    for n in itertools.count():
        mine = second(n)
        match = seen.get(object_id(mine)[:4])
        if match is not None and match != mine:
            return match, mine
        seen[object_id(first(n))[:4]] = first(n)
    raise AssertionError("unreachable")


TWIN_BLOBS = _sharing_prefix(blob, lambda n: blob(-n - 1))
COMMIT_AND_BLOB = _sharing_prefix(lambda n: Commit(created_at=n), lambda n: blob(10**6 + n))


# --- objects: mapping semantics and typed getters ----------------------------------------------------------


def test_mapping_semantics(view: View) -> None:
    item = blob(1)
    with view(lambda b: b.put(item)) as reader:
        oid = object_id(item)
        assert reader[oid] == item
        assert reader.get(oid) == item
        assert oid in reader
        assert reader.has(oid)
        assert reader.get_raw(oid) == encode(item)
        with pytest.raises(ObjectNotFound) as missing:
            reader[ABSENT]
        assert missing.value.oid == ABSENT
        assert reader.get(ABSENT) is None
        assert reader.get_raw(ABSENT) is None
        assert not reader.has(ABSENT)
        assert ABSENT not in reader


@pytest.mark.parametrize("bad", ["", "abc", "x" * 64, "A" * 64, " " + "a" * 63, "a" * 66])
def test_malformed_ids_are_refused_and_never_contained(view: View, bad: str) -> None:
    item = blob(2)
    with view(lambda b: b.put(item)) as reader:
        assert bad not in reader
        assert object_id(item).upper() not in reader  # the id spelled in capitals is not an id
        for read in (reader.get, reader.get_raw, reader.has, reader.__getitem__, reader.get_commit):
            with pytest.raises(InvalidObjectId):
                read(ObjectId(bad))
        assert 42 not in reader
        assert None not in reader


def test_get_commit_and_commit_toolset(view: View) -> None:
    tool = schema("search")
    tools = ToolSet(tools=(object_id(tool),))
    content = blob(3)
    root = Commit(content=object_id(content), created_at=1)
    child = Commit(parents=(object_id(root),), tools=object_id(tools), created_at=2)

    def seed(batch: WriteBatch) -> None:
        for obj in (tool, tools, content, root, child):
            batch.put(obj)

    with view(seed) as reader:
        assert reader.get_commit(object_id(root)) == root
        assert reader.commit_toolset(object_id(root)) is None
        assert reader.commit_toolset(object_id(child)) == object_id(tools)
        for not_a_commit in (content, tool, tools):
            with pytest.raises(InvalidInput, match="not a commit") as wrong:
                reader.get_commit(object_id(not_a_commit))
            assert not isinstance(wrong.value, ObjectNotFound)
            with pytest.raises(InvalidInput, match="not a commit"):
                reader.commit_toolset(object_id(not_a_commit))
        with pytest.raises(ObjectNotFound):
            reader.get_commit(ABSENT)
        with pytest.raises(ObjectNotFound):
            reader.commit_toolset(ABSENT)


def test_iter_oids_and_raw_objects_in_byte_order(view: View) -> None:
    items = [blob(n) for n in range(20)]
    with view(lambda b: [b.put(i) for i in items]) as reader:
        oids = sorted(object_id(i) for i in items)  # hex order is byte order
        assert list(reader.iter_oids()) == oids
        pairs = list(reader.iter_raw_objects())
        assert [oid for oid, _ in pairs] == oids
        assert all(hash_bytes(data) == oid for oid, data in pairs)


def test_a_batch_refuses_corrupt_pending_bytes_and_the_store_refuses_them(store: Store) -> None:
    oid, good = object_id(blob(4)), blob(5)
    batch = store.new_batch()
    batch.put(good)
    batch.put_raw(oid, encode(blob(6)))  # put_raw trusts its caller: here, wrongly
    assert batch.has(oid)
    with pytest.raises(CorruptObject):
        batch.get(oid)
    with pytest.raises(CorruptObject):
        batch[oid]
    with pytest.raises(CorruptObject):
        store.apply(batch)
    assert oid not in store
    assert object_id(good) not in store  # nothing of the batch was written


# --- prefixes ----------------------------------------------------------------------------------------------


def test_resolve_prefix_unique_ambiguous_unknown(view: View) -> None:
    first, second = TWIN_BLOBS
    alone = blob(6)
    stored = [object_id(o) for o in (first, second, alone)]
    with view(lambda b: [b.put(o) for o in (first, second, alone)]) as reader:
        a, b, single = stored
        assert sorted(reader.resolve_prefix(a[:4])) == sorted([a, b])  # ambiguous: both ids
        assert reader.resolve_prefix(a) == [a]
        assert reader.resolve_prefix(single) == [single]
        for length in range(5, 12):  # odd and even lengths alike, past the shared digits
            expected = [o for o in sorted(stored) if o.startswith(a[:length])]
            assert reader.resolve_prefix(a[:length]) == expected
        unknown = next(
            p for p in (f"{n:04x}" for n in range(1 << 16)) if not any(o.startswith(p) for o in stored)
        )
        assert reader.resolve_prefix(unknown) == []
        for bad in ("abc", "ABCD", "wxyz", "a" * 65, ""):
            with pytest.raises(InvalidInput):
                reader.resolve_prefix(bad)


def test_resolve_prefix_by_kind(view: View) -> None:
    commit, other = COMMIT_AND_BLOB
    with view(lambda b: [b.put(o) for o in (commit, other)]) as reader:
        prefix = object_id(commit)[:4]
        assert sorted(reader.resolve_prefix(prefix)) == sorted([object_id(commit), object_id(other)])
        assert reader.resolve_prefix(prefix, kind="commit") == [object_id(commit)]
        assert reader.resolve_prefix(prefix, kind="blob") == [object_id(other)]
        assert reader.resolve_prefix(prefix, kind="toolset") == []


# --- refs --------------------------------------------------------------------------------------------------

REF_NAMES = [
    "refs/heads/main",
    "refs/heads/a",
    "refs/heads/a-b",
    "refs/heads/a/b",
    "refs/heads/Z",
    "refs/heads/é",
    "refs/tags/v1",
    "refs/remotes/origin/main",
]


def test_refs_and_iteration_order(view: View) -> None:
    commit = Commit(created_at=7)

    def seed(batch: WriteBatch) -> None:
        cid = batch.put(commit)
        for name in REF_NAMES:
            batch.set_ref(name, cid)
        batch.set_ref("HEAD", "ref: refs/heads/main")

    with view(seed) as reader:
        cid = object_id(commit)
        assert reader.get_ref("HEAD") == "ref: refs/heads/main"
        assert reader.get_ref("refs/heads/main") == cid
        assert reader.get_ref("refs/heads/absent") is None
        assert reader.get_ref("") is None
        assert reader.get_ref("r" * (MAX_KEY_BYTES + 1)) is None
        everything = list(reader.iter_refs())
        assert [n for n, _ in everything] == sorted([*REF_NAMES, "HEAD"], key=str.encode)
        heads = [n for n, _ in reader.iter_refs("refs/heads/a")]
        assert heads == ["refs/heads/a", "refs/heads/a-b", "refs/heads/a/b"]
        assert dict(reader.iter_refs("refs/tags/")) == {"refs/tags/v1": cid}
        assert list(reader.iter_refs("refs/none/")) == []


# --- indexes -----------------------------------------------------------------------------------------------


def test_tool_versions_names_and_toolset_changes(view: View) -> None:
    search1, search2, search_other = schema("search"), schema("search", 2), schema("search2")
    fetch = schema("fetch")
    first = ToolSet(tools=(object_id(search1), object_id(fetch)))
    second = ToolSet(tools=(object_id(search2),))
    root = Commit(tools=object_id(first), created_at=1)
    same = Commit(parents=(object_id(root),), tools=object_id(first), created_at=2)
    changed = Commit(parents=(object_id(same),), tools=object_id(second), created_at=3)
    bare = Commit(parents=(object_id(changed),), created_at=4)

    def seed(batch: WriteBatch) -> None:
        for obj in (search1, fetch, search_other, search2, first, second):
            batch.put(obj)
        for obj in (bare, changed, same, root):  # children before parents: the index must not care
            batch.put(obj)

    with view(seed) as reader:
        assert reader.tool_versions("search") == [object_id(search1), object_id(search2)]  # oldest first
        assert reader.tool_versions("search2") == [object_id(search_other)]
        assert reader.tool_versions("fetch") == [object_id(fetch)]
        assert reader.tool_versions("sear") == []
        assert reader.tool_names() == ["fetch", "search", "search2"]
        assert sorted(reader.iter_toolset_changes()) == sorted(
            [(object_id(root), object_id(first)), (object_id(changed), object_id(second))]
        )


# --- local tables and logs ---------------------------------------------------------------------------------


def test_table_rows_prefixes_and_reverse(view: View) -> None:
    keys = [b"a", b"ab", b"a\xff", b"a\xff\xff", b"b", b"\xff", b"k" * MAX_KEY_BYTES]

    def seed(batch: WriteBatch) -> None:
        for index, key in enumerate(keys):
            batch.table_put(Table.DERIVED, key, str(index).encode())
        batch.table_put(Table.USAGE, b"empty", b"")

    with view(seed) as reader:
        assert reader.table_get(Table.DERIVED, b"ab") == b"1"
        assert reader.table_get(Table.DERIVED, b"zz") is None
        assert reader.table_get(Table.DERIVED, b"") is None
        assert reader.table_get(Table.DERIVED, b"k" * (MAX_KEY_BYTES + 1)) is None
        assert reader.table_get(Table.USAGE, b"empty") == b""
        assert [k for k, _ in reader.table_iter(Table.DERIVED)] == sorted(keys)
        assert [k for k, _ in reader.table_iter(Table.DERIVED, reverse=True)] == sorted(keys, reverse=True)
        a_keys = [b"a", b"ab", b"a\xff", b"a\xff\xff"]
        assert [k for k, _ in reader.table_iter(Table.DERIVED, b"a")] == a_keys
        assert [k for k, _ in reader.table_iter(Table.DERIVED, b"a", reverse=True)] == a_keys[::-1]
        assert [k for k, _ in reader.table_iter(Table.DERIVED, b"a\xff", reverse=True)] == [
            b"a\xff\xff",
            b"a\xff",
        ]
        assert [k for k, _ in reader.table_iter(Table.DERIVED, b"\xff", reverse=True)] == [b"\xff"]
        assert list(reader.table_iter(Table.REFLOG)) == []


def test_log_entries_in_sequence(view: View) -> None:
    def seed(batch: WriteBatch) -> None:
        for n in range(3):
            batch.append_log(Table.REFLOG, b"refs/heads/a", {"n": n})
            batch.append_log(Table.REFLOG, b"refs/heads/ab", {"other": n})

    with view(seed) as reader:
        entries = list(reader.log_entries(Table.REFLOG, b"refs/heads/a"))
        assert [value for _, value in entries] == [{"n": 0}, {"n": 1}, {"n": 2}]
        seqs = [seq for seq, _ in entries]
        assert seqs == sorted(set(seqs))  # increasing
        assert [v for _, v in reader.log_entries(Table.REFLOG, b"refs/heads/a", reverse=True)] == [
            {"n": 2},
            {"n": 1},
            {"n": 0},
        ]
        assert list(reader.log_entries(Table.REFLOG, b"refs/heads")) == []


# --- what a batch sees -------------------------------------------------------------------------------------


def test_a_batch_reads_its_pending_writes_and_deletes_over_the_store(store: Store) -> None:
    kept, doomed, added = blob(10), blob(11), blob(12)
    tool = schema("old")
    head = Commit(content=object_id(kept), created_at=1)
    setup = store.new_batch()
    for obj in (kept, doomed, tool, head):
        setup.put(obj)
    setup.set_ref("refs/heads/main", object_id(head))
    setup.set_ref("refs/heads/gone", object_id(head))
    setup.table_put(Table.DERIVED, b"row", b"1")
    setup.table_put(Table.DERIVED, b"dropped", b"2")
    store.apply(setup)

    batch = store.new_batch()
    assert batch.put(added) == object_id(added)
    batch.delete_object(object_id(doomed))
    batch.delete_object(object_id(tool))
    batch.set_ref("refs/heads/gone", None)
    batch.set_ref("refs/heads/new", object_id(head), expected=None)
    batch.table_put(Table.DERIVED, b"row", b"changed")
    batch.table_put(Table.DERIVED, b"dropped", None)
    batch.append_log(Table.REFLOG, b"refs/heads/new", {"moved": True})

    assert batch.get(object_id(added)) is added  # staged, not decoded again
    assert object_id(doomed) not in batch
    assert batch.get(object_id(doomed)) is None
    with pytest.raises(ObjectNotFound):
        batch[object_id(doomed)]
    assert object_id(doomed) not in set(batch.iter_oids())
    assert batch.resolve_prefix(object_id(doomed)) == []
    assert object_id(added) in set(batch.iter_oids())
    assert batch.tool_versions("old") == []
    assert batch.tool_names() == []
    assert dict(batch.iter_refs()) == {"refs/heads/main": object_id(head), "refs/heads/new": object_id(head)}
    assert batch.table_get(Table.DERIVED, b"row") == b"changed"
    assert dict(batch.table_iter(Table.DERIVED)) == {b"row": b"changed"}
    assert [v for _, v in batch.log_entries(Table.REFLOG, b"refs/heads/new")] == [{"moved": True}]

    # the store is untouched until the batch is applied, then reads exactly what the batch read
    assert object_id(doomed) in store
    assert object_id(added) not in store
    assert store.get_ref("refs/heads/gone") == object_id(head)
    before_apply = observe(batch)
    store.apply(batch)
    assert observe(store) == before_apply


def test_last_write_wins_inside_a_batch(store: Store) -> None:
    item = blob(13)
    store.put(item)
    batch = store.new_batch()
    batch.delete_object(object_id(item))
    batch.put(item)  # a put after a delete keeps the object
    batch.table_put(Table.DERIVED, b"k", b"1")
    batch.table_put(Table.DERIVED, b"k", None)
    assert object_id(item) in batch
    assert batch.table_get(Table.DERIVED, b"k") is None
    store.apply(batch)
    assert object_id(item) in store
    assert store.table_get(Table.DERIVED, b"k") is None


def test_snapshot_does_not_see_later_batches(store: Store) -> None:
    old, new = blob(14), blob(15)
    head = Commit(content=object_id(old), created_at=1)
    setup = store.new_batch()
    for obj in (old, head):
        setup.put(obj)
    setup.set_ref("refs/heads/main", object_id(head))
    setup.table_put(Table.DERIVED, b"row", b"before")
    store.apply(setup)
    with store.snapshot() as snapshot:
        seen = observe(snapshot)
        later = store.new_batch()
        later.put(new)
        later.set_ref("refs/heads/main", None)
        later.set_ref("refs/heads/other", object_id(head))
        later.table_put(Table.DERIVED, b"row", b"after")
        later.table_put(Table.DERIVED, b"added", b"1")
        later.append_log(Table.REFLOG, b"refs/heads/other", "created")
        store.apply(later)
        assert object_id(new) not in snapshot
        assert object_id(new) in store
        assert snapshot.get_ref("refs/heads/main") == object_id(head)
        assert snapshot.table_get(Table.DERIVED, b"row") == b"before"
        assert observe(snapshot) == seen
    assert observe(store) != seen


@pytest.mark.parametrize(
    "stage",
    [
        lambda b: b.table_put(Table.OBJECTS, b"k", b"v"),
        lambda b: b.table_put(Table.REFS, b"k", b"v"),
        lambda b: b.table_put(Table.COMMIT_TOOLS, b"k", b"v"),
        lambda b: b.table_put(Table.TOOL_VERSIONS, b"k", b"v"),
        lambda b: b.table_put(Table.META, b"seq", b"v"),
        lambda b: b.table_put(Table.META, b"format", b"9"),
        lambda b: b.table_put(Table.DERIVED, b"", b"v"),
        lambda b: b.table_put(Table.DERIVED, b"k" * (MAX_KEY_BYTES + 1), b"v"),
        lambda b: b.set_ref("", None),
        lambda b: b.set_ref("r" * (MAX_KEY_BYTES + 1), None),
        lambda b: b.append_log(Table.REFLOG, b"a\0b", 1),
        lambda b: b.append_log(Table.META, b"a", 1),
        lambda b: b.append_log(Table.REFLOG, b"p" * MAX_KEY_BYTES, 1),
    ],
)
def test_writes_no_store_could_hold_are_refused_when_staged(store: Store, stage: Seed) -> None:
    batch = store.new_batch()
    with pytest.raises(InvalidInput):
        stage(batch)
    assert len(batch) == 0


# --- the property: random batches read back identically everywhere -------------------------------------------


def observe(reader: Reader) -> dict[str, Any]:
    """Everything the public Reader API can say about a store (prefix lookups for every stored id)."""
    oids = list(reader.iter_oids())
    names = reader.tool_names()
    return {
        "objects": [(oid, reader.get_raw(oid), reader.get(oid), oid in reader) for oid in oids],
        "raw": list(reader.iter_raw_objects()),
        "prefixes": {oid[:4]: sorted(reader.resolve_prefix(oid[:4])) for oid in oids},
        "commit_prefixes": {oid[:5]: reader.resolve_prefix(oid[:5], kind="commit") for oid in oids},
        "refs": list(reader.iter_refs()),
        "heads": list(reader.iter_refs("refs/heads/")),
        "ref_values": {name: reader.get_ref(name) for name, _ in reader.iter_refs()},
        "toolset_changes": list(reader.iter_toolset_changes()),
        "tools": {name: reader.tool_versions(name) for name in names},
        "tables": {
            table: (list(reader.table_iter(table)), list(reader.table_iter(table, b"r", reverse=True)))
            for table in (Table.DERIVED, Table.USAGE, Table.META, Table.REFLOG)
        },
        "log": list(reader.log_entries(Table.REFLOG, b"r0")),
    }


class _Model:
    """What the random program has stored so far, to pick valid targets (the store must pass fsck)."""

    def __init__(self) -> None:
        self.objects: dict[ObjectId, StoredObject] = {}
        self.refs: dict[str, ObjectId] = {}

    def commits(self) -> list[ObjectId]:
        return sorted(o for o, obj in self.objects.items() if isinstance(obj, Commit))

    def deletable(self) -> list[ObjectId]:
        linked = {link for obj in self.objects.values() for link in obj.iter_links()}
        return sorted(o for o in self.objects if o not in linked and o not in self.refs.values())


OPS = st.lists(
    st.tuples(
        st.sampled_from(["blob", "commit", "tool", "delete", "ref", "unref", "row", "log"]), st.integers(0, 7)
    ),
    min_size=1,
    max_size=12,
)


def _stage(batch: WriteBatch, model: _Model, op: str, n: int) -> None:
    """Stage one random operation in ``batch`` and in the model (only ever a valid one)."""
    commits = model.commits()
    if op == "blob":
        obj: StoredObject = blob(n)
    elif op == "tool":
        tool = schema(f"t{n % 3}", n)
        batch.put(tool)
        model.objects[object_id(tool)] = tool
        obj = ToolSet(tools=(object_id(tool),))
    elif op == "commit":
        toolsets = sorted(o for o, x in model.objects.items() if isinstance(x, ToolSet))
        parent = (commits[n % len(commits)],) if commits and n % 4 else ()
        tools = toolsets[n % len(toolsets)] if toolsets and n % 3 else None
        obj = Commit(parents=parent, tools=tools, created_at=n + len(model.objects))
    elif op == "delete":
        deletable = model.deletable()
        if deletable:
            oid = deletable[n % len(deletable)]
            batch.delete_object(oid)
            del model.objects[oid]
        return
    elif op == "ref":
        if commits:
            name = f"refs/heads/b{n % 4}"
            batch.set_ref(name, commits[n % len(commits)])
            model.refs[name] = commits[n % len(commits)]
        return
    elif op == "unref":
        name = f"refs/heads/b{n % 4}"
        batch.set_ref(name, None)
        model.refs.pop(name, None)
        return
    elif op == "row":
        batch.table_put(
            Table.DERIVED if n % 2 else Table.USAGE, f"r{n % 5}".encode(), None if n == 7 else bytes([n])
        )
        return
    else:
        batch.append_log(Table.REFLOG, f"r{n % 2}".encode(), {"n": n})
        return
    model.objects[batch.put(obj)] = obj


@given(st.lists(OPS, min_size=1, max_size=5))
@settings(max_examples=40)
def test_random_batches_read_back_identically_through_every_reader(
    program: list[list[tuple[str, int]]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stores: list[Store] = [MemoryStore(), LmdbStore(tmp, durable=False)]
        try:
            models = [_Model() for _ in stores]
            for ops in program:
                observed = []
                for store, model in zip(stores, models, strict=True):
                    batch = store.new_batch()
                    for op, n in ops:
                        _stage(batch, model, op, n)
                    pending = observe(batch)
                    store.apply(batch)
                    applied = observe(store)
                    with store.snapshot() as snapshot:
                        assert observe(snapshot) == applied
                    assert pending == applied  # a batch reads as the store will once it is applied
                    observed.append(applied)
                assert observed[0] == observed[1]  # memory and LMDB agree
            for store in stores:
                report = fsck(store)
                assert report.ok, report.problems
        finally:
            for store in stores:
                store.close()


@pytest.mark.parametrize("kind", ["memory", "lmdb"])
def test_a_snapshot_read_after_its_block_is_a_store_error(kind: str, tmp_path: Path) -> None:
    """An ended snapshot no longer follows writes (memory) or has a transaction (LMDB): reading it is refused
    the same way on both stores, never stale data or a raw lmdb error."""
    from tractkv.errors import StoreError
    from tractkv.model import Blob
    from tractkv.store import LmdbStore, MemoryStore

    store = MemoryStore() if kind == "memory" else LmdbStore(str(tmp_path / "s"), durable=False)
    try:
        oid = store.put(Blob(data={"n": 1}))
        with store.snapshot() as snapshot:
            assert snapshot.get(oid) is not None
        with pytest.raises(StoreError, match="after its with-block"):
            snapshot.get(oid)
        with pytest.raises(StoreError, match="after its with-block"):
            list(snapshot.iter_oids())
    finally:
        store.close()
