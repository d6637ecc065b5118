"""The write kernel (issue 30, item 3): one write function for every commit, and write policies passed in.

* Every commit a session writes, whatever made it (a plain or general append, an edit, an annotation, each
  commit of a batch, a merge commit, a compress, a spawn and a collapse, a tool result, a budget's trim or
  compress commit on a commit, at a batch's end or on a reset), is staged by ``Session.stage_commit``: the
  test records every commit a batch stages and every commit that function staged, and compares them.
* What the session consults when it writes (the budget, the toolkit's guard) is a :class:`WritePolicy` given at
  construction or registered with ``add_policy``, never an attribute set from above: its ``before_write`` sees
  every commit (each commit of a batch too) and every HEAD move, its ``check`` runs once per transaction (a
  batch's end: once), its ``landed`` after the transaction landed, and a refusal writes nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tractkv import Tract
from tractkv.engine.session import Session, WritePolicy
from tractkv.errors import InvalidInput
from tractkv.llm import ScriptedLLM
from tractkv.model import Commit
from tractkv.store import Table
from tractkv.store.base import WriteBatch

from .test_budget import FakeClock


@pytest.fixture
def spied(monkeypatch: pytest.MonkeyPatch) -> tuple[set[str], set[str]]:
    """(commits any batch staged, commits ``Session.stage_commit`` staged), recorded while the test runs."""
    put: set[str] = set()
    kernel: set[str] = set()
    real_put, real_stage = WriteBatch.put, Session.stage_commit

    def counting_put(self: WriteBatch, obj: Any) -> Any:
        oid = real_put(self, obj)
        if isinstance(obj, Commit):
            put.add(oid)
        return oid

    def counting_stage(self: Session, *args: Any, **kwargs: Any) -> Any:
        oid, state = real_stage(self, *args, **kwargs)
        kernel.add(oid)
        return oid, state

    monkeypatch.setattr(WriteBatch, "put", counting_put)
    monkeypatch.setattr(Session, "stage_commit", counting_stage)
    return put, kernel


def _stored_commits(t: Tract) -> set[str]:
    return {
        oid.hex()
        for oid, raw in t.store.table_iter(Table.OBJECTS)
        if isinstance(t.store.get(oid.hex()), Commit)  # type: ignore[arg-type]
    }


def test_every_commit_goes_through_the_one_write_function(
    tmp_path: Path, spied: tuple[set[str], set[str]]
) -> None:
    put, kernel = spied
    summaries = ScriptedLLM(["a summary"] * 10)
    with Tract.open(str(tmp_path / "s"), clock=FakeClock(), durable=False) as t:
        t.configure_llm(None, summarizer=summaries)
        t.system("Be brief.")
        first = t.user("hello")  # the plain-text fast path, one transaction
        t.assistant("hi")
        with t.batch():  # the fast path's later commits of a batch, and general ones between them
            for i in range(5):
                t.user(f"in batch {i}")
            t.annotate(first.commit_id, "pinned")
            t.commit({"type": "dialogue", "role": "user", "text": "general"}, message="a note")
            t.assistant("after")
        t.commit({"type": "dialogue", "role": "user", "text": "edited"}, operation="edit", edit_target="HEAD")
        t.assistant("", tool_calls=[{"id": "c1", "name": "look", "arguments": {}}])
        t.tool_result("c1", "look", "found it")
        t.branch("side")
        t.user("on side")
        t.switch("main")
        t.user("on main")
        t.merge("side")  # a merge commit
        t.compress(content="compressed")
        child = t.spawn("look something up")
        child.user("child work")
        ops = {info.operation for info in child.log()}  # the spawn commit
        t.collapse(child, content="child said")
        ops |= {info.operation for info in t.log()}
        stored = _stored_commits(t)
    with Tract.open(str(tmp_path / "b"), clock=FakeClock(), durable=False) as t:
        t.configure_llm(None, summarizer=ScriptedLLM(["short"] * 5))
        for i in range(6):
            t.user(f"message number {i} " * 5)
        size = t.compile().token_count
        t.set_budget(size, action="trim")  # a budget's trim commit: on a commit ...
        t.user("x " * 30)
        with t.batch():  # ... at a batch's end ...
            t.user("y " * 30)
        t.set_budget(None)
        grown = t.user("z " * 60).commit_id
        t.reset("HEAD~1")
        t.set_budget(t.compile().token_count, action="trim")
        t.reset(grown)  # ... and on a move
        t.set_budget(t.compile().token_count, action="compress")  # a budget's compress commit
        t.user("w " * 30)
        budget_ops = [info.operation for info in t.log()]
        stored |= _stored_commits(t)
    assert budget_ops.count("trim") == 3
    assert "compress" in budget_ops
    assert {"append", "edit", "annotate", "merge", "compress", "spawn"} <= ops
    assert put <= kernel, f"commits staged outside Session.stage_commit: {sorted(put - kernel)}"
    assert stored <= kernel | put
    assert len(kernel) >= 20


class Recorder(WritePolicy[Session]):
    """A policy that records what it is asked, and refuses ``refuse`` actions."""

    def __init__(self, refuse: str = "") -> None:
        self.asked: list[str] = []
        self.checked: list[tuple[str, str | None]] = []
        self.heard: list[object] = []
        self.refuse = refuse

    def before_write(self, session: Session, action: str) -> None:
        self.asked.append(action)
        if action == self.refuse:
            raise InvalidInput(f"no {action} now")

    def check(
        self,
        session: Session,
        batch: WriteBatch,
        ref: str,
        state: Any,
        *,
        moved: str | None,
        peer: bool,
    ) -> object | None:
        self.checked.append((ref, moved))
        return ("checked", len(batch.objects))

    def landed(self, session: Session, outcome: object) -> None:
        self.heard.append(outcome)


def test_a_registered_policy_sees_every_write_and_each_transaction_once(tmp_path: Path) -> None:
    policy = Recorder()
    with Tract.open(str(tmp_path / "s"), durable=False) as t:
        t._session.add_policy(policy)  # the one way to register one after construction
        assert t._session.policies[-1] is policy
        t.user("one")
        with t.batch():
            t.user("two")
            t.assistant("three")  # the fast path's one-step commit asks too
            t.commit({"type": "dialogue", "role": "user", "text": "four"}, message="general")
        t.branch("side", switch=False)
        t.switch("side")
        t.checkout("main")
        t.switch("main")
        t.reset("HEAD~1")
        assert [c.operation for c in t.log()][:1] == ["append"]
    assert policy.asked == ["commit"] * 4 + ["switch", "checkout", "switch", "reset"]
    main = "refs/heads/main"
    side = ("refs/heads/side", "creating the branch")
    assert policy.checked == [(main, None), (main, None), side, (main, "the reset")]  # the batch: once
    assert [outcome[0] for outcome in policy.heard] == ["checked"] * 4  # type: ignore[index]


@pytest.mark.parametrize("in_batch", [False, True])
def test_a_policy_that_refuses_writes_nothing(tmp_path: Path, in_batch: bool) -> None:
    with Tract.open(str(tmp_path / "s"), durable=False) as t:
        t.user("one")
        with t.batch():
            t.user("two")  # the next commit of a batch would take the fast path's one step
            t._session.add_policy(Recorder(refuse="commit"))
            with pytest.raises(InvalidInput, match="no commit now"):
                t.user("three")
            with pytest.raises(InvalidInput, match="no commit now"):
                t.commit({"type": "dialogue", "role": "user", "text": "four"}, message="general")
        assert [c.content["text"] for c in t.log()] == ["two", "one"]  # type: ignore[index]
        rows = {table: list(t.store.table_iter(table)) for table in Table}
        with pytest.raises(InvalidInput, match="no commit now"):
            t.user("five")
        assert {table: list(t.store.table_iter(table)) for table in Table} == rows


def test_the_session_has_no_callback_attributes_set_from_above(tmp_path: Path) -> None:
    with Tract.open(str(tmp_path / "s"), durable=False) as t:
        for name in ("write_guard", "budget_summarizer", "budget_listener", "_text_slot"):
            assert not hasattr(t._session, name), name
        (budget,) = t._session.policies  # the facade's one policy: the branch budget
        assert not hasattr(budget, "before_write") or type(budget).before_write is WritePolicy.before_write


def test_opening_a_tract_and_compiling_does_not_load_the_budget(tmp_path: Path) -> None:
    """The facade's budget policy loads the budget module when it first checks a write: a fresh process that
    opens a store and compiles pays nothing more than before the policy existed."""
    path = str(tmp_path / "s")
    with Tract.open(path) as t:
        t.user("hello")
    code = (
        "import sys; from tractkv import Tract\n"
        "with Tract.open(sys.argv[1]) as t:\n"
        "    t.compile()\n"
        "print('tractkv.engine.budget' in sys.modules)"
    )
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", code, path], capture_output=True, text=True, check=True, env=env
    )
    assert done.stdout.strip() == "False"


def test_the_engine_face_opens_a_session_with_its_default_policies(tmp_path: Path) -> None:
    from tractkv.engine import open_session
    from tractkv.engine.budget import BudgetPolicy
    from tractkv.store import open_store

    with open_store(str(tmp_path / "s"), durable=False) as store:
        session = open_session(store)
        assert [type(p) for p in session.policies] == [BudgetPolicy]
        mine = Recorder()
        assert open_session(store, policies=(mine,)).policies == (mine,)
