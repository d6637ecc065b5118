"""A hypothesis state machine drives a Tract and checks compile against an independent model.

The model is written from the semantics documented in ``tractkv/engine/compile/state.py`` (never from engine
internals): every commit maps to the list of message slots it compiles to; appends add a slot, edits replace
a slot's content in place, annotations set its priority, and a merge is a three-way merge of the slot lists
of the merge base, ours and theirs. After every step, ``compile()`` of the working handle and of a freshly
opened second handle on the same store must match the model, on every branch.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import attrs
import hypothesis.strategies as st
import pytest
from conftest import compile_bindings
from hypothesis import event, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import tractkv.engine.compile.compiler
import tractkv.engine.compile.state
import tractkv.engine.session.core
from tractkv import HeuristicCounter, MergeConflict, Tract
from tractkv.store import MemoryStore, fsck

from .conftest import FakeClock

KINDS = ("user", "assistant", "system", "reasoning")
PRIORITIES = ("normal", "pinned", "skip")
BRANCHES = ("main", "b1", "b2", "agents/a17/main")
COUNTER = HeuristicCounter()
# Small checkpoint settings so checkpoints are written, chunked and loaded within a few steps.
SMALL_CHECKPOINTS = [
    (tractkv.engine.compile.compiler, "CHECKPOINT_EVERY", 3),
    (tractkv.engine.session.core, "CHECKPOINT_EVERY", 3),
    *((module, name, 2) for module, name in compile_bindings("CHUNK_SLOTS")),
]
TEXTS = st.sampled_from(["hi", "hello there", "ok", "let me think about it", "42", "done."])


@attrs.frozen
class Slot:
    """One message as the model sees it: the commit that added it and what it shows now."""

    msg: str  # the message commit
    source: str  # the commit whose content is shown (the message itself or its latest edit)
    kind: str
    text: str
    priority: str = "normal"

    def key(self) -> tuple[str, str, str]:
        """What a merge compares: content and priority."""
        return (self.kind, self.text, self.priority)


def payload(kind: str, text: str) -> dict[str, Any]:
    if kind == "system":
        return {"type": "instruction", "text": text}
    if kind == "reasoning":
        return {"type": "reasoning", "text": text}
    return {"type": "dialogue", "role": kind, "text": text}


def render(slots: tuple[Slot, ...]) -> list[dict[str, Any]]:
    """What compile shows: every slot not skipped and not reasoning, in order."""
    out = []
    for slot in slots:
        if slot.priority == "skip" or slot.kind == "reasoning":
            continue
        out.append({"role": "system" if slot.kind == "system" else slot.kind, "content": slot.text})
    return out


def visible_commits(slots: tuple[Slot, ...]) -> tuple[str, ...]:
    return tuple(s.msg for s in slots if s.priority != "skip" and s.kind != "reasoning")


def tokens(slots: tuple[Slot, ...]) -> int:
    return sum(COUNTER.count(d["content"]) + 4 for d in render(slots))


class Model:
    """Commits, their parents and compiled slots; branches and the current one."""

    def __init__(self) -> None:
        self.parents: dict[str, tuple[str, ...]] = {}
        self.order: dict[str, int] = {}  # creation order (the fake clock makes it the timestamp order)
        self.states: dict[str, tuple[Slot, ...]] = {}
        self.branches: dict[str, str] = {}
        self.current = "main"

    @property
    def head(self) -> str | None:
        return self.branches.get(self.current)

    def slots(self, commit: str | None) -> tuple[Slot, ...]:
        return () if commit is None else self.states[commit]

    def add(self, oid: str, parents: tuple[str, ...], slots: tuple[Slot, ...]) -> None:
        assert oid not in self.parents, "a new commit got an existing id"
        self.parents[oid] = parents
        self.order[oid] = len(self.order)
        self.states[oid] = slots
        self.branches[self.current] = oid

    def ancestors(self, oid: str) -> set[str]:
        seen: set[str] = set()
        stack = [oid]
        while stack:
            current = stack.pop()
            if current not in seen:
                seen.add(current)
                stack.extend(self.parents[current])
        return seen

    def merge_base(self, a: str, b: str) -> str | None:
        """The newest common ancestor that is not an ancestor of another common ancestor."""
        common = self.ancestors(a) & self.ancestors(b)
        best = [c for c in common if not any(c != d and c in self.ancestors(d) for d in common)]
        return max(best, key=self.order.__getitem__) if best else None

    def merge(self, ours: str, theirs: str, strategy: str) -> tuple[tuple[Slot, ...], int]:
        """Three-way merge (the documented rules): the merged slots and the number of conflicts."""
        base = {s.msg: s for s in self.slots(self.merge_base(ours, theirs))}
        merged = list(self.states[ours])
        where = {s.msg: i for i, s in enumerate(merged)}
        conflicts = 0
        for their in self.states[theirs]:
            if their.msg not in where:  # new on theirs: after ours', in theirs' order
                where[their.msg] = len(merged)
                merged.append(their)
                continue
            our = merged[where[their.msg]]
            if our.key() == their.key():
                continue
            base_key = base[their.msg].key() if their.msg in base else None
            ours_changed, theirs_changed = our.key() != base_key, their.key() != base_key
            if ours_changed and theirs_changed:
                conflicts += 1
                take_theirs = strategy == "theirs"
            else:
                take_theirs = theirs_changed
            if take_theirs:
                merged[where[their.msg]] = their
        return tuple(merged), conflicts


class TractMachine(RuleBasedStateMachine):
    """Drives one Tract; subclasses pick the store."""

    lmdb = False

    def __init__(self) -> None:
        super().__init__()
        self.saved = [(module, name, getattr(module, name)) for module, name, _ in SMALL_CHECKPOINTS]
        for module, name, value in SMALL_CHECKPOINTS:
            setattr(module, name, value)
        self.clock = FakeClock()
        self.model = Model()
        self.tmp: str | None = None
        if self.lmdb:
            self.tmp = tempfile.mkdtemp(prefix="tractkv-sm-")
            self.path: str | None = f"{self.tmp}/store"
            self.memory: MemoryStore | None = None
        else:
            self.path = None
            self.memory = MemoryStore()
        self.t = self.open()

    def open(self) -> Tract:
        if self.memory is not None:
            return Tract(self.memory, owns_store=False, clock=self.clock)
        return Tract.open(self.path, durable=False, clock=self.clock)

    def teardown(self) -> None:
        event(f"commits {len(self.model.order) // 10 * 10}+")
        for module, name, value in self.saved:
            setattr(module, name, value)
        self.t.close()
        store = self.memory
        if self.path is not None:
            from tractkv.store import LmdbStore

            store = LmdbStore(self.path, durable=False)
        assert store is not None
        report = fsck(store)
        store.close()
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
        assert report.ok, report.problems

    def footprint(self) -> tuple[Any, ...]:
        return (
            self.t.head,
            self.t.store.count_objects(),
            dict(self.t.store.iter_refs()),
            len(self.t.reflog()),
        )

    # --- rules ----------------------------------------------------------------------------------------

    @initialize(
        kind=st.sampled_from(KINDS), text=TEXTS, branches=st.lists(st.sampled_from(BRANCHES[1:]), unique=True)
    )
    def start(self, kind: str, text: str, branches: list[str]) -> None:
        """Often start with a message and branches at it, so that merges have something to do."""
        self.append(kind, text)
        for name in branches:
            self.create_branch(name, switch=False)

    @rule(kind=st.sampled_from(KINDS), text=TEXTS)
    def append(self, kind: str, text: str) -> None:
        head = self.model.head
        info = self.t.commit(payload(kind, text))
        assert info.parent_ids == ((head,) if head else ())
        oid = info.commit_id
        self.model.add(oid, info.parent_ids, (*self.model.slots(head), Slot(oid, oid, kind, text)))

    @rule(texts=st.lists(TEXTS, min_size=1, max_size=3))
    def append_in_batch(self, texts: list[str]) -> None:
        with self.t.batch():
            for text in texts:
                self.append("user", text)
            assert self.t.compile().to_dicts() == render(self.model.slots(self.model.head))

    @precondition(lambda self: bool(self.model.slots(self.model.head)))
    @rule(data=st.data(), kind=st.sampled_from(KINDS), text=TEXTS)
    def edit(self, data: st.DataObject, kind: str, text: str) -> None:
        slots = list(self.model.slots(self.model.head))
        position = data.draw(st.integers(0, len(slots) - 1), label="position")
        slot = slots[position]
        target = data.draw(st.sampled_from([slot.msg, slot.source]), label="target")
        info = self.t.commit(payload(kind, text), operation="edit", edit_target=target)
        assert info.edit_target == slot.msg
        slots[position] = attrs.evolve(slot, source=info.commit_id, kind=kind, text=text)
        self.model.add(info.commit_id, info.parent_ids, tuple(slots))

    @precondition(lambda self: bool(self.model.slots(self.model.head)))
    @rule(data=st.data(), priority=st.sampled_from(PRIORITIES))
    def annotate(self, data: st.DataObject, priority: str) -> None:
        slots = list(self.model.slots(self.model.head))
        position = data.draw(st.integers(0, len(slots) - 1), label="position")
        slot = slots[position]
        target = data.draw(st.sampled_from([slot.msg, slot.source]), label="target")
        info = self.t.annotate(target, priority)
        slots[position] = attrs.evolve(slot, priority=priority)
        self.model.add(info.commit_id, info.parent_ids, tuple(slots))

    @precondition(lambda self: self.model.head is not None)
    @rule(name=st.sampled_from(BRANCHES), switch=st.booleans())
    def create_branch(self, name: str, switch: bool) -> None:
        if name in self.model.branches or name == self.model.current:
            return
        head = self.model.head
        assert head is not None
        info = self.t.branch(name, switch=switch)
        assert info.head == head
        self.model.branches[name] = head
        if switch:
            self.model.current = name

    @rule(data=st.data())
    def switch(self, data: st.DataObject) -> None:
        names = sorted(self.model.branches)
        if not names:
            return
        name = data.draw(st.sampled_from(names), label="branch")
        self.t.switch(name)
        self.model.current = name

    @rule(data=st.data(), strategy=st.sampled_from(["auto", "ours", "theirs"]))
    def merge(self, data: st.DataObject, strategy: str) -> None:
        others = sorted(set(self.model.branches) - {self.model.current})
        if not others:
            return
        source = data.draw(st.sampled_from(others), label="source")
        theirs = self.model.branches[source]
        head = self.model.head
        if head is not None and theirs in self.model.ancestors(head):
            event("merge up-to-date")
            assert self.t.merge(source, strategy=strategy).kind == "up-to-date"
            return
        if head is None or head in self.model.ancestors(theirs):
            event("merge ff")
            assert self.t.merge(source, strategy=strategy).kind == "fast-forward"
            self.model.branches[self.model.current] = theirs
            return
        slots, conflicts = self.model.merge(head, theirs, strategy)
        event(f"merge {strategy} conflicts={min(conflicts, 2)}")
        if conflicts and strategy == "auto":
            before = self.footprint()
            with pytest.raises(MergeConflict) as info:
                self.t.merge(source, strategy=strategy)
            assert len(info.value.conflicts) == conflicts
            assert self.footprint() == before
            return
        result = self.t.merge(source, strategy=strategy)
        assert result.kind == "merge"
        assert result.conflicts_resolved == conflicts
        assert result.head is not None
        self.model.add(result.head, (head, theirs), slots)

    @precondition(lambda self: self.model.head is not None)
    @rule(data=st.data(), mode=st.sampled_from(["soft", "hard"]))
    def reset(self, data: st.DataObject, mode: str) -> None:
        head = self.model.head
        assert head is not None
        candidates = sorted(self.model.ancestors(head), key=self.model.order.__getitem__)
        target = data.draw(st.sampled_from(candidates), label="target")
        assert self.t.reset(target, mode=mode) == target
        self.model.branches[self.model.current] = target

    @precondition(lambda self: bool(self.model.branches))
    @rule(data=st.data())
    def checkout_and_back(self, data: st.DataObject) -> None:
        known = sorted(set().union(*(self.model.ancestors(tip) for tip in self.model.branches.values())))
        target = data.draw(st.sampled_from(known), label="commit")
        self.t.checkout(target)
        assert self.t.is_detached
        expected = self.model.slots(target)
        assert self.t.compile().to_dicts() == render(expected)
        assert self.t.compile(at=target).commit_ids == visible_commits(expected)
        self.t.switch(self.model.current)

    @precondition(lambda self: self.model.head is not None)
    @rule()
    def gc(self) -> None:
        self.t.gc(min_age_hours=0)
        report = fsck(self.t.store)
        assert report.ok, report.problems
        live = set().union(*(self.model.ancestors(tip) for tip in self.model.branches.values()))
        for oid in live:
            assert self.t.store.has(oid)  # type: ignore[arg-type]

    @precondition(lambda self: self.path is not None)
    @rule()
    def reopen(self) -> None:
        self.t.close()
        self.t = self.open()
        assert self.t.current_branch == self.model.current

    # --- the invariant ---------------------------------------------------------------------------------

    @invariant()
    def compile_matches_model(self) -> None:
        model = self.model
        expected = model.slots(model.head)
        ctx = self.t.compile()
        assert ctx.to_dicts() == render(expected)
        assert ctx.commit_ids == visible_commits(expected)
        assert ctx.token_count == tokens(expected)
        assert ctx.commit_count == (len(model.ancestors(model.head)) if model.head else 0)
        assert self.t.head == model.head
        assert self.t.current_branch == model.current
        with_reasoning = [m.content for m in self.t.compile(include_reasoning=True).messages]
        assert with_reasoning == [s.text for s in expected if s.priority != "skip"]
        fresh = self.open()
        try:
            assert fresh.current_branch == model.current
            assert fresh.compile().to_dicts() == render(expected)
            for name, tip in model.branches.items():
                other = fresh.compile(at=name)
                assert other.to_dicts() == render(model.slots(tip)), name
                assert other.commit_ids == visible_commits(model.slots(tip))
                assert other.commit_count == len(model.ancestors(tip))
        finally:
            fresh.close()


class MemoryMachine(TractMachine):
    lmdb = False


class LmdbMachine(TractMachine):
    lmdb = True


# Examples come from the hypothesis profile (tests/conftest.py); each runs up to 50 steps.
TestMemoryStore = MemoryMachine.TestCase
TestMemoryStore.settings = settings(stateful_step_count=50, deadline=None)
TestLmdbStore = LmdbMachine.TestCase
TestLmdbStore.settings = settings(stateful_step_count=50, deadline=None)
