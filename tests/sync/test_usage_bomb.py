"""Usage-record bombs (issue 29 item 12): records whose ``children`` repeat an id, or share children between
records, expand exponentially in a reader that walks them as a tree without remembering what it visited.

A nested execution has one parent record (the toolkit writes trees: each execution's record is listed by the
one execution it ran inside), so the validator refuses a record that lists a child twice, a child that another
record lists too, and a tree deeper than ``MAX_USAGE_DEPTH`` or larger than ``MAX_USAGE_TREE``: a write-only
token's push of the issue's shape through a real hub is refused. Every reader (usage trees, stats, export,
the CLI's ``usage``, the viewer's usage and commit pages, fsck) visits each record once, so a store that
already holds such records (written before the rule, here directly, bypassing the validator) stays linear.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tractkv import Tract, toolkit
from tractkv.engine.history import fsck_objects
from tractkv.engine.usage import flatten, load_tree, usage_forest
from tractkv.errors import RejectedObject
from tractkv.ids import ObjectId
from tractkv.model import MAX_USAGE_DEPTH, Blob, Commit, StoredObject, UsageRecord, encode_with_id
from tractkv.store import LmdbStore, MemoryStore, Reader, Store, fsck
from tractkv.sync.http_client import HttpRemote
from tractkv.sync.receive import receive_objects
from tractkv.sync.remote import RefUpdate

from .conftest import ADMIN, EDGE, Hub

START = 1_700_000_000_000_000
BRANCH = "refs/heads/agents/edge-7/bomb"
MAIN = "refs/heads/main"


def record(name: str, children: tuple[ObjectId, ...] = (), step: int = 0) -> UsageRecord:
    return UsageRecord(
        usage_id=name,
        tool_name="fetch",
        status="success",
        started_at=START + step,
        completed_at=START + step + 1,
        children=children,
    )


def repeat_bomb(levels: int, tag: str = "r") -> list[UsageRecord]:
    """The issue's shape: each record lists the one below it twice (2**(levels - 1) paths to the leaf)."""
    out = [record(f"{tag}0")]
    for k in range(1, levels):
        below = encode_with_id(out[-1])[0]
        out.append(record(f"{tag}{k}", (below, below), k))
    return out


def diamond_bomb(levels: int, tag: str = "d") -> list[UsageRecord]:
    """No record lists a child twice, but two records per level list the same two children: still
    2**levels paths from the top record to a leaf."""
    out = [record(f"{tag}a0"), record(f"{tag}b0")]
    for k in range(1, levels):
        below = (encode_with_id(out[-2])[0], encode_with_id(out[-1])[0])
        out += [record(f"{tag}a{k}", below, k), record(f"{tag}b{k}", below, k)]
    top = (encode_with_id(out[-2])[0], encode_with_id(out[-1])[0])
    out.append(record(f"{tag}top", top, levels))
    return out


def chain(depth: int, tag: str = "c") -> list[UsageRecord]:
    """A record nested ``depth`` levels deep (deeper than a recursive reader can go)."""
    out = [record(f"{tag}0")]
    for k in range(1, depth):
        out.append(record(f"{tag}{k}", (encode_with_id(out[-1])[0],), k))
    return out


def linking_commit(
    usages: list[ObjectId], parent: ObjectId | None, step: int, text: str = "run the tools"
) -> list[StoredObject]:
    """A message blob and an append commit linking ``usages`` (what a tool result does)."""
    blob = Blob(data={"type": "dialogue", "role": "user", "text": text})
    commit = Commit(
        operation="append",
        created_at=START + 10_000_000 + step,
        parents=(parent,) if parent else (),
        content=encode_with_id(blob)[0],
        links={"usages": tuple(usages)},
    )
    return [blob, commit]


def pairs(objects: list[StoredObject]) -> list[tuple[ObjectId, bytes]]:
    return [encode_with_id(o) for o in objects]


def write_directly(store: Store, objects: list[StoredObject], ref: str, tip: ObjectId) -> None:
    """Store objects and move a ref without the validator (a store written before the rule)."""
    batch = store.new_batch()
    for obj in objects:
        batch.put(obj)
    batch.set_ref(ref, tip)
    store.apply(batch)


# --- refused on receive (a real hub, a write-only token) ------------------------------------------------------

LEVELS = 24  # 2**23 paths from 24 records of ~130 bytes: more than the 2.6 KB


@pytest.mark.parametrize(
    ("shape", "reason"),
    [(repeat_bomb, "lists nested record"), (diamond_bomb, "also listed by record")],
    ids=["repeated", "shared"],
)
def test_a_usage_bomb_pushed_by_a_write_only_token_is_refused(
    start_hub: Callable[..., Hub],
    tokens_file: str,
    shape: Callable[[int], list[UsageRecord]],
    reason: str,
) -> None:
    hub = start_hub("--tokens", tokens_file)
    records = shape(LEVELS)
    sent = pairs(list(records))
    assert sum(len(data) for _, data in sent) >= 2_600  # at least the size
    commit_objects = linking_commit([sent[-1][0]], None, 0)
    tip = encode_with_id(commit_objects[-1])[0]
    started = time.monotonic()
    with HttpRemote(hub.url, token=EDGE) as edge, pytest.raises(RejectedObject) as info:
        edge.push(sent + pairs(commit_objects), [RefUpdate(BRANCH, None, tip)])
    assert time.monotonic() - started < 10
    assert reason in str(info.value)
    with HttpRemote(hub.url, token=ADMIN) as admin:
        assert BRANCH not in admin.list_refs()
        assert admin.missing([tip]) == {tip}  # the commit linking the bomb was not stored


def test_a_bomb_built_over_several_pushes_is_refused(start_hub: Callable[..., Hub], tokens_file: str) -> None:
    """Each push adds one record per level, so no single push lists a child twice or under two records:
    the records already stored are read too, and a record listing a child another record lists is refused
    as soon as a new record nests it."""
    hub = start_hub("--tokens", tokens_file)
    records = diamond_bomb(6)[:-1]  # a0 b0, a1 b1, ...: pushed one record at a time
    tip: ObjectId | None = None
    refused: RejectedObject | None = None
    with HttpRemote(hub.url, token=EDGE) as edge:
        for step, rec in enumerate(records):
            oid, data = encode_with_id(rec)
            commit_objects = linking_commit([oid], tip, step)
            new_tip = encode_with_id(commit_objects[-1])[0]
            try:
                outcome = edge.push([(oid, data), *pairs(commit_objects)], [RefUpdate(BRANCH, tip, new_tip)])
            except RejectedObject as exc:
                refused = exc
                break
            assert outcome.ok
            tip = new_tip
    assert refused is not None
    assert "also listed by record" in str(refused)
    assert step <= 4  # a2 (the first record nesting a record that shares its children) is refused


def test_depth_and_repeats_are_refused_by_every_receiver() -> None:
    """The rules hold for every transport (path, S3 and bundle receive through the same code)."""
    ok = chain(MAX_USAGE_DEPTH)
    store = MemoryStore()
    receive_objects(store, pairs(list(ok)))  # exactly the limit: accepted
    deep = chain(MAX_USAGE_DEPTH + 1, tag="x")
    with pytest.raises(RejectedObject, match=f"deeper than {MAX_USAGE_DEPTH}"):
        receive_objects(MemoryStore(), pairs(list(deep)))
    leaf = encode_with_id(record("leaf"))[0]
    twice = [record("leaf"), record("parent", (leaf, leaf))]
    with pytest.raises(RejectedObject, match=r"lists nested record \w+ twice"):
        receive_objects(MemoryStore(), pairs(twice))


def test_a_tool_result_linking_a_bomb_is_refused_on_the_write_path() -> None:
    from tractkv.errors import InvalidInput

    t = Tract(MemoryStore(), clock=iter(range(START, START + 10**9, 1000)).__next__)
    t.user("hi")
    records = repeat_bomb(8)
    batch = t.store.new_batch()
    for rec in records:
        batch.put(rec)
    t.store.apply(batch)  # stored, unreachable: what a crash could leave
    blob = Blob(data={"type": "dialogue", "role": "user", "text": "more"})
    commit = Commit(
        operation="append",
        created_at=START + 10**8,
        parents=(ObjectId(t.head),),
        content=encode_with_id(blob)[0],
        links={"usages": (encode_with_id(records[-1])[0],)},
    )
    from tractkv.engine.history import check_commit

    batch = t.store.new_batch()
    batch.put(blob)
    with pytest.raises(InvalidInput, match="malformed"):
        check_commit(batch, commit)
    t.close()


# --- readers stay linear on a store that holds bombs ----------------------------------------------------------

READER_LEVELS = 16  # a reader that expands the tree shows 2**15 executions for 16 records
DEEP = 3_000  # deeper than Python's recursion limit


class CountingReader:
    """A reader that counts the objects read (every other call passes through)."""

    def __init__(self, reader: Reader) -> None:
        self._reader = reader
        self.reads = 0

    def get(self, oid: ObjectId) -> Any:
        self.reads += 1
        return self._reader.get(oid)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


@pytest.fixture
def bomb_store(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A store on disk whose main branch links a repeat bomb, a diamond bomb and a 3,000-deep chain, each
    from its own commit, written without the validator."""
    path = tmp_path / "bombs"
    with LmdbStore(str(path), durable=False) as store:
        tip: ObjectId | None = None
        objects: list[StoredObject] = []
        tops = {}
        for step, records in enumerate(
            (repeat_bomb(READER_LEVELS), diamond_bomb(READER_LEVELS), chain(DEEP))
        ):
            objects += records
            top = encode_with_id(records[-1])[0]
            tops[records[-1].usage_id] = top
            linked = linking_commit([top], tip, step, text=f"run {step}")
            objects += linked
            tip = encode_with_id(linked[-1])[0]
        assert tip is not None
        write_directly(store, objects, MAIN, tip)
    records_count = READER_LEVELS + (2 * READER_LEVELS + 1) + DEEP
    return path, {"tip": tip, "tops": tops, "records": records_count}


def test_the_usage_forest_reads_each_record_once(bomb_store: tuple[Path, dict[str, Any]]) -> None:
    path, info = bomb_store
    with LmdbStore(str(path), durable=False) as store, store.snapshot() as snap:
        reader = CountingReader(snap)
        started = time.monotonic()
        roots = usage_forest(reader, info["tip"])  # type: ignore[arg-type]
        shown = flatten(roots)
        elapsed = time.monotonic() - started
        assert [r.usage.id for r in roots] == [f"r{READER_LEVELS - 1}", "dtop", f"c{DEEP - 1}"]
        ids = [u.id for u in shown]
        assert len(ids) == len(set(ids))  # each record once
        # the bombs are shown whole (each record once); the chain down to the depth readers show
        assert len(ids) == READER_LEVELS + 2 * READER_LEVELS + 1 + MAX_USAGE_DEPTH + 1
        assert reader.reads <= 2 * info["records"] + 10  # linear in the records (commits: a few reads)
        assert elapsed < 5
        assert max(depth for root in roots for depth, _ in root.walk()) == MAX_USAGE_DEPTH
        json.dumps([r.to_json() for r in roots])  # nested JSON of bounded depth
        tree = load_tree(snap, info["tops"]["dtop"])
        assert len(tree) == 2 * READER_LEVELS + 1
        assert tree[-1].usage_id == "dtop"


def test_the_api_cli_viewer_and_fsck_stay_linear(bomb_store: tuple[Path, dict[str, Any]]) -> None:
    path, info = bomb_store
    started = time.monotonic()
    with Tract.open(str(path), readonly=True) as t:
        usages = t.tool_usages()
        assert len(usages) == len({u.id for u in usages}) < info["records"]
        stats = t.tool_usage_stats()
        assert stats["fetch"].count == len(usages)
        assert len(toolkit.export(t, "json")) < 10_000_000
    assert time.monotonic() - started < 10

    for args in (["usage"], ["usage", "--stats"], ["usage", "--json"], ["usage", "--status", "success"]):
        out = subprocess.run(
            [sys.executable, "-m", "tractkv", "--store", str(path), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == len(usages)

    from tractkv.view.app import create_app

    with LmdbStore(str(path), durable=False) as store:
        app, _ = create_app(store, sync=False)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            for url in (f"/ui/usage?ref={MAIN}", f"/ui/commit/{info['tip']}?ref={MAIN}"):
                began = time.monotonic()
                response = client.get(url)
                assert response.status_code == 200, response.text[:500]
                assert time.monotonic() - began < 10
                assert len(response.content) < 20_000_000

        began = time.monotonic()
        report = fsck(store)
        problems = fsck_objects(store)
        assert time.monotonic() - began < 20
    assert report.ok  # the store is whole: every link resolves
    reasons = " ".join(p.detail for p in problems)
    assert "lists nested record" in reasons  # the repeat bomb
    assert "also listed by record" in reasons  # the diamond
    assert f"deeper than {MAX_USAGE_DEPTH}" in reasons  # the chain
