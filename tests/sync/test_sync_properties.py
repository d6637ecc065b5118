"""Property: after push / fetch / pull between two stores with random histories, both sides hold identical
refs and reachable objects, compile identically, and fsck stays clean."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tractkv import Tract
from tractkv.ids import ObjectId
from tractkv.store import LmdbStore, fsck
from tractkv.store.walk import iter_reachable

from .conftest import Clock

TOOLS = [
    {"name": "search", "description": "Search.", "parameters": {"type": "object", "properties": {}}},
    {"name": "read", "description": "Read a file.", "parameters": {"type": "object", "properties": {}}},
]

op = st.one_of(
    st.tuples(st.just("user"), st.text(min_size=1, max_size=20)),
    st.tuples(st.just("assistant"), st.text(min_size=1, max_size=20)),
    st.tuples(st.just("tools"), st.integers(0, 2)),
    st.tuples(st.just("branch"), st.sampled_from(["main", "side", "topic/x"])),
)


def play(t: Tract, ops: list[tuple[str, Any]]) -> None:
    for kind, arg in ops:
        if kind == "user":
            t.user(arg)
        elif kind == "assistant":
            t.assistant(arg)
        elif kind == "tools":
            t.set_tools(TOOLS[:arg] or None)
        elif t.head is not None:
            if any(b.name == arg for b in t.list_branches(remotes=False)):
                t.switch(arg)
            else:
                t.branch(arg)


def reachable(t: Tract, tips: list[str]) -> set[ObjectId]:
    return set(iter_reachable(t.store, [ObjectId(x) for x in tips]))


def compiled(t: Tract, rev: str) -> tuple[Any, Any]:
    ctx = t.compile(at=rev)
    return ctx.to_openai(), ctx.tools


@settings(max_examples=25)
@given(
    base=st.lists(op, min_size=1, max_size=6),
    ours=st.lists(op, max_size=8),
    theirs=st.lists(op, max_size=8),
)
def test_two_stores_converge_through_a_hub(
    base: list[tuple[str, Any]], ours: list[tuple[str, Any]], theirs: list[tuple[str, Any]]
) -> None:
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        LmdbStore(str(root / "hub"), durable=False).close()
        a = Tract.open(str(root / "a"), durable=False, clock=clock)
        b = Tract.open(str(root / "b"), durable=False, clock=clock)
        try:
            a.user("start")
            play(a, base)
            a.remote_add("origin", str(root / "hub"))
            b.remote_add("origin", str(root / "hub"))
            for br in a.list_branches(remotes=False):
                a.push(branch=br.name)
            b.fetch()
            b.switch("main")
            b.pull(branch="main")
            play(a, ours)
            play(b, theirs)
            # a publishes every branch; b receives them all
            for br in a.list_branches(remotes=False):
                a.push(branch=br.name, force=True)
            b.fetch()
            a_tips = {br.name: br.head for br in a.list_branches(remotes=False) if br.head}
            b_tracking = {br.name[len("origin/") :]: br.head for br in b.list_branches() if br.is_remote}
            assert b_tracking == a_tips
            tips = [str(x) for x in a_tips.values()]
            assert reachable(a, tips) == reachable(b, tips)
            for name in a_tips:
                assert compiled(b, f"origin/{name}") == compiled(a, name)
            # b merges a's main into its own and publishes; a pulls and both compile the same
            b.switch("main")
            b.pull(branch="main", strategy="ours")
            b.push(branch="main")
            a.switch("main")
            a.pull(branch="main")
            assert a.head == b.head
            assert compiled(a, "main") == compiled(b, "main")
            assert a.tool_usages() == b.tool_usages()
            assert fsck(a.store).ok
            assert fsck(b.store).ok
        finally:
            a.close()
            b.close()
