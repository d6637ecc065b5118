"""Usage records travel with the branch: copying what a ref reaches gives an identical usage tree; gc keeps
them; fsck checks their links."""

from __future__ import annotations

from pathlib import Path

from tractkv import Tract, toolkit
from tractkv.ids import ObjectId
from tractkv.llm import ScriptedLLM
from tractkv.model import Blob, UsageRecord, decode, object_id
from tractkv.store import LmdbStore, MemoryStore, Store, fsck
from tractkv.toolkit import ToolExecutor

from .conftest import FakeClock, call
from .test_loop import delegate, explode, lookup


def copy_branch(source: Store, target: Store, ref: str) -> int:
    """What a sync does: every object the ref reaches (following iter_links), then the ref itself."""
    tip = source.get_ref(ref)
    assert tip is not None
    batch = target.new_batch()
    stack, seen = [ObjectId(tip)], set()
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        data = source.get_raw(oid)
        assert data is not None, oid
        obj = decode(data, oid, strict=True)
        batch.put_raw(oid, data, obj)
        stack.extend(obj.iter_links())
    batch.set_ref(ref, tip)
    batch.set_ref("HEAD", f"ref: {ref}")
    target.apply(batch)
    return len(seen)


def _agent_history(t: Tract) -> None:
    t.system("You coordinate.")
    t.user("What are a and b?")
    llm = ScriptedLLM(
        [
            call("c1", "delegate", {"task": "find a"}),
            call("k1", "lookup", {"key": "a"}),
            "a=1",
            call("c2", "explode", {"x": 1}),
            call("c3", "lookup", {"key": "b"}),
            "a=1, b=2",
        ]
    )
    toolkit.run(t, llm, ToolExecutor(t, profile=None, tools=[delegate, lookup, explode]))


def test_usage_tree_is_identical_after_copying_the_branch(tmp_path: Path) -> None:
    with Tract.open(str(tmp_path / "a"), clock=FakeClock()) as source:
        _agent_history(source)
        expected = [tree.to_json() for tree in source.usage_tree()]
        expected_context = source.compile().to_dicts()
        copied = copy_branch(source.store, MemoryStore(), "refs/heads/main")  # a dry run
        with LmdbStore(tmp_path / "b") as target:
            assert copy_branch(source.store, target, "refs/heads/main") == copied
            with Tract(target, owns_store=False) as replica:
                assert [tree.to_json() for tree in replica.usage_tree()] == expected
                assert replica.compile().to_dicts() == expected_context
                assert replica.tool_usage_stats() == source.tool_usage_stats()
                assert toolkit.export(replica, "markdown") == toolkit.export(source, "markdown")
                # the delegated conversation came along through the record's heads link
                (head,) = replica.usage_tree()[0].usage.heads
                child_log = replica.log(rev=head)
                assert [c.operation for c in child_log[-1:]] == ["spawn"]  # a spawned child (run_child)
                assert child_log[-2].role == "system"
                # and the tool result that carried its answer counts as its collapse on the replica too
                (child,) = replica.children()
                assert (child.state, child.collapsed_via, child.head) == ("collapsed", "tool_result", head)
            report = fsck(target)
            assert report.ok, report.problems
            assert report.kinds["usage"] == 4  # delegate + its lookup, explode, lookup
    assert [t["tool_name"] for t in expected] == ["delegate", "explode", "lookup"]
    assert [c["tool_name"] for c in expected[0]["children"]] == ["lookup"]


def test_gc_keeps_linked_usage_records_and_fsck_checks_their_links() -> None:
    clock = FakeClock()
    with Tract.open(clock=clock) as t:
        _agent_history(t)
        before = [tree.to_json() for tree in t.usage_tree()]
        direct = ToolExecutor(t, profile=None, tools=[lookup]).execute("lookup", {"key": "a"})  # never linked
        after = [tree.to_json() for tree in t.usage_tree()]
        assert after[:-1] == before
        assert after[-1]["id"] == direct.usage_id
        doomed = t.store.put(Blob(data="nothing links this"))
        clock.advance_ms(1000 * 3600 * 100)
        result = t.gc(min_age_hours=1)
        assert result.removed_objects >= 1
        assert t.store.get(doomed) is None
        # a direct execution is kept (its marker row holds it) and shown as before gc, not reclaimed
        assert t.store.get(object_id(direct.usage_objects[0])) == direct.usage_objects[0]
        assert [tree.to_json() for tree in t.usage_tree()] == after
        report = fsck(t.store)
        assert report.ok, report.problems
        # a usage record linking a blob as its child is reported
        bad = UsageRecord(
            usage_id="x", tool_name="t", status="success", started_at=1, children=(t.store.put(Blob(data=1)),)
        )
        t.store.put(bad)
        problems = fsck(t.store).problems
        assert [p.kind for p in problems] == ["wrong-kind"]
        assert "children[0]" in problems[0].detail
        assert "not a usage" in problems[0].detail
