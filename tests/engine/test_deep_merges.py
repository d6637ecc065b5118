"""Merges nested hundreds deep (each merging in the previous merge) compile: the replay that would recurse
past Python's limit computes the merged-in states iteratively instead, with the same result."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tractkv import Tract
from tractkv.engine.compile import Compiler, merge_payload
from tractkv.engine.content import DEFAULT_COUNTER
from tractkv.ids import ObjectId
from tractkv.model import Blob, Commit
from tractkv.store import LmdbStore, Store

START_US = 1_700_000_000_000_000


def nested_merges(store: Store, depth: int) -> ObjectId:
    """``M_k = merge(R_k, M_{k-1})``: each merge's second parent is the previous merge; returns the tip."""
    batch = store.new_batch()
    ts = START_US
    tip: ObjectId | None = None
    for k in range(depth):
        ts += 10
        root = batch.put(
            Commit(
                content=batch.put(Blob(data={"type": "dialogue", "role": "user", "text": f"r{k}"})),
                created_at=ts,
            )
        )
        if tip is None:
            tip = root
            continue
        ts += 10
        merge = Blob(data=merge_payload("auto", f"m{k}", 0))
        tip = batch.put(
            Commit(parents=(root, tip), content=batch.put(merge), operation="merge", created_at=ts)
        )
    assert tip is not None
    batch.set_ref("refs/heads/main", tip)
    store.apply(batch)
    return tip


@pytest.mark.slow  # ~15 s: each of the 500 merges walks its ancestry once
def test_hundreds_of_nested_merges_compile(tmp_path: Path) -> None:
    path = str(tmp_path / "deep")
    with LmdbStore(path, durable=False) as store:
        nested_merges(store, 500)
    with Tract.open(path, durable=False) as t:
        messages = t.compile().messages
        assert len(messages) == 500
        assert {m.content for m in messages} == {f"r{k}" for k in range(500)}


def test_the_iterative_replay_compiles_what_the_recursive_one_does(tmp_path: Path) -> None:
    with LmdbStore(str(tmp_path / "s"), durable=False) as store:
        tip = nested_merges(store, 60)
        expected = Compiler(DEFAULT_COUNTER).state_at(store, tip).render(store)
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(250)  # too shallow for 60 nested merges replayed recursively
        try:
            deep = Compiler(DEFAULT_COUNTER).state_at(store, tip).render(store)
        finally:
            sys.setrecursionlimit(limit)
        assert [deep.message(i) for i in range(len(deep.messages))] == [
            expected.message(i) for i in range(len(expected.messages))
        ]
        assert deep.commit_ids() == expected.commit_ids()
        assert deep.tokens == expected.tokens
