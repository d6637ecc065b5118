"""The session core: read-only mode writes nothing and refuses every write, tokens are counted once per
commit, and the facade's reads and writes all go through one session."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

from tractkv import ConcurrentUpdate, ModelCallFailed, ReadOnlySession, Tract, toolkit
from tractkv.cli import cli
from tractkv.engine.content import MESSAGE_OVERHEAD
from tractkv.engine.session import Session
from tractkv.errors import StoreNotFound
from tractkv.llm import LLMResponse
from tractkv.store import LmdbStore, MemoryStore, Reader, Store, Table
from tractkv.toolkit import ToolExecutor


def _snapshot(reader: Reader) -> dict[str, list[tuple[bytes, bytes]]]:
    """Every row of every table (the whole store's state)."""
    return {table.value: list(reader.table_iter(table)) for table in Table}


def _history(t: Tract) -> None:
    t.system("You are terse.")
    t.user("Hello")
    t.assistant("", tool_calls=[{"id": "c1", "name": "lookup", "arguments": {"q": "x"}}])
    t.tool_result("c1", "lookup", "found x")
    t.assistant("Found it.")
    t.branch("side")
    t.user("on the side")
    t.switch("main")


WRITES: list[tuple[str, Callable[[Tract], object]]] = [
    ("commit", lambda t: t.user("more")),
    (
        "edit",
        lambda t: t.commit({"type": "dialogue", "role": "user", "text": "x"}, "edit", edit_target="HEAD~4"),
    ),
    ("annotate", lambda t: t.annotate("HEAD~4", "pinned")),
    ("tool_result", lambda t: t.tool_result("c1", "lookup", "again")),
    ("branch", lambda t: t.branch("new")),
    ("delete_branch", lambda t: t.delete_branch("side", force=True)),
    ("merge", lambda t: t.merge("side")),
    ("reset", lambda t: t.reset("HEAD~1")),
    ("set_tools", lambda t: t.set_tools([])),
    ("gc", lambda t: t.gc(min_age_hours=0)),
    ("compress", lambda t: t.compress(content="summary")),
    ("batch", lambda t: t.batch().__enter__()),
    ("remote_add", lambda t: t.remote_add("origin", "/nowhere")),
    ("remote_remove", lambda t: t.remote_remove("origin")),
    ("fetch", lambda t: t.fetch("origin")),
    ("pull", lambda t: t.pull("origin")),
    ("push", lambda t: t.push("origin")),
    ("generate", lambda t: t.generate(_NeverCalled())),
    ("chat", lambda t: t.chat("hi", _NeverCalled())),
    ("compress_tool_calls", lambda t: t.compress_tool_calls()),
    ("run", lambda t: toolkit.run(t, _NeverCalled())),
    ("tool_executor", ToolExecutor),
]


class _NeverCalled:
    """A model a refused write must never reach."""

    def chat(self, messages: Any, tools: Any = None, **params: Any) -> LLMResponse:
        raise AssertionError("the model was called before the write was refused")


@pytest.fixture
def store(tmp_path: Any) -> Store:
    s = LmdbStore(str(tmp_path / "s"), durable=False)
    with Tract(s, owns_store=False) as t:
        _history(t)
    return s


@pytest.mark.parametrize(("name", "write"), WRITES, ids=[w[0] for w in WRITES])
def test_read_only_refuses_every_write_and_changes_nothing(
    store: Store, name: str, write: Callable[[Tract], object]
) -> None:
    before = _snapshot(store)
    t = Tract(store, owns_store=False, readonly=True, llm=_NeverCalled())
    with pytest.raises(ReadOnlySession):
        write(t)
    t.close()
    assert _snapshot(store) == before


def test_read_only_reads_everything_and_writes_nothing(store: Store) -> None:
    before = _snapshot(store)
    with Tract(store, owns_store=False, readonly=True) as reader:
        with Tract(store, owns_store=False) as writer:
            assert reader.compile().to_openai() == writer.compile().to_openai()
            assert [c.commit_id for c in reader.log()] == [c.commit_id for c in writer.log()]
            assert reader.status().message_count == writer.status().message_count
        assert reader.diff("side").entries
        assert reader.reflog()
        assert [b.name for b in reader.list_branches()] == ["main", "side"]
        assert [u.tool_name for u in reader.tool_usages()] == []
        reader.switch("side")  # moves this handle only: the stored HEAD stays
        assert reader.compile().messages[-1].content == "on the side"
        reader.checkout("main~1")
        assert reader.is_detached
    assert _snapshot(store) == before


def test_read_only_session_never_writes_head_for_an_explicit_branch(store: Store) -> None:
    before = _snapshot(store)
    session = Session(store, branch="side", readonly=True)
    assert session.current_branch == "side"
    assert session.compile().messages[-1].content == "on the side"
    session.close()
    assert _snapshot(store) == before


def test_a_read_only_open_of_a_missing_store_creates_nothing(tmp_path: Any) -> None:
    """Issue 29 item 6: ``Tract.open(missing, readonly=True)`` created the store files."""
    before = sorted(p.name for p in tmp_path.iterdir())
    missing = tmp_path / "missing"
    with pytest.raises(StoreNotFound, match="missing"):
        Tract.open(str(missing), readonly=True)
    with pytest.raises(StoreNotFound):
        Tract.open(str(tmp_path / "deeper" / "still"), readonly=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not missing.exists()


def test_opening_on_a_branch_leaves_the_stored_head(tmp_path: Any) -> None:
    """Issue 29 item 6: ``Tract.open(path, branch=)`` rewrote the store's HEAD, so a later plain open resumed on
    that branch. The handle works on ``branch``; only switch and checkout move the stored HEAD."""
    path = str(tmp_path / "s")
    with Tract.open(path, durable=False) as t:
        _history(t)
    with LmdbStore(path) as s:
        head_before = s.get_ref("HEAD")
    with Tract.open(path, branch="side", durable=False) as side:
        assert side.current_branch == "side"
        side.user("more on the side")
        assert side.compile().messages[-1].content == "more on the side"
    with Tract.open(path, branch="brand-new", durable=False) as new:
        new.user("first on a new branch")
    with LmdbStore(path) as s:
        assert s.get_ref("HEAD") == head_before == "ref: refs/heads/main"
    with Tract.open(path, durable=False) as plain:
        assert plain.current_branch == "main"
        plain.switch("side")  # switch is what moves the stored HEAD
    with Tract.open(path, durable=False) as plain:
        assert plain.current_branch == "side"


def test_a_new_store_opened_on_a_branch_starts_on_it(tmp_path: Any) -> None:
    """A store created by ``Tract.open(path, branch=)`` gets that branch as its first HEAD (git init -b)."""
    path = str(tmp_path / "s")
    with Tract.open(path, branch="work", durable=False) as t:
        t.user("hi")
    with Tract.open(path, durable=False) as t:
        assert t.current_branch == "work"


class CountingCounter:
    """A token counter that records each text it counts."""

    name = "counting"

    def __init__(self) -> None:
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        self.texts.append(text)
        return len(text.split())


def test_tokens_are_counted_once_per_commit() -> None:
    counter = CountingCounter()
    with Tract.open(token_counter=counter) as t:
        t.system("be brief")  # the first commit builds the state: replays nothing, counts its text once
        counter.texts.clear()
        info = t.user("one two three")
        assert counter.texts == ["one two three"]
        assert info.token_count == 3 + MESSAGE_OVERHEAD
        counter.texts.clear()
        edited = t.commit(
            {"type": "dialogue", "role": "user", "text": "four five"}, "edit", edit_target="HEAD"
        )
        assert counter.texts == ["four five"]
        assert edited.token_count == 2 + MESSAGE_OVERHEAD
        assert t.compile().token_count == (2 + MESSAGE_OVERHEAD) * 2


def test_cli_read_commands_write_nothing(tmp_path: Any) -> None:
    path = str(tmp_path / "cli")
    with Tract.open(path, durable=False) as t:
        _history(t)
        for _ in range(3):
            t.user("after the last checkpoint")  # a writing handle would save a checkpoint for these
    with LmdbStore(path) as s:
        s.set_ref("HEAD", None)  # a writing handle records HEAD when the store has none: a read must not
        before = _snapshot(s)
    runner = CliRunner()
    for args in (
        ["log"],
        ["log", "--graph"],
        ["show", "HEAD"],
        ["compile", "--format", "openai"],
        ["status"],
        ["diff", "side"],
        ["reflog"],
        ["usage"],
        ["usage", "--stats"],
        ["export"],
    ):
        result = runner.invoke(cli, ["--store", path, *args])
        assert result.exit_code == 0, (args, result.output)
    with LmdbStore(path) as s:
        assert _snapshot(s) == before


def test_commit_hash_is_a_deprecated_alias_of_commit_id() -> None:
    with Tract.open() as t:
        info = t.user("hi")
        with pytest.warns(DeprecationWarning, match="commit_id"):
            assert info.commit_hash == info.commit_id
        assert "commit_hash" not in info.to_json()


def test_read_only_clone_is_refused_and_leaves_nothing(tmp_path: Any, store: Store) -> None:
    source = str(tmp_path / "source")
    with Tract.open(source, durable=False) as t:
        _history(t)
    target = tmp_path / "clone"
    with pytest.raises(ReadOnlySession):
        Tract.clone(source, str(target), readonly=True)
    assert not target.exists()


# --- an operation commits on the tip it read, or not at all ---------------------------------------------------


class RacingModel:
    """A model that, while it "thinks", lets another handle append to the branch."""

    def __init__(self, other: Tract) -> None:
        self.other = other

    def chat(self, messages: Any, tools: Any = None, **params: Any) -> LLMResponse:
        self.other.user("meanwhile, on another handle")
        return LLMResponse(text="a reply to a context that is gone")


def _two_handles() -> tuple[Tract, Tract, MemoryStore]:
    memory = MemoryStore()
    a = Tract(memory, owns_store=False)
    _history(a)
    b = Tract(memory, owns_store=False)
    b.switch("main")
    return a, b, memory


def _assert_only_b_moved(a: Tract, b: Tract, tip_before: str) -> None:
    log = b.log()
    assert log[0].content["text"] == "meanwhile, on another handle"
    assert log[1].commit_id == tip_before  # B's commit sits on the old tip; nothing of A's landed
    assert a.reflog()[0].message.startswith("meanwhile")


def test_generate_does_not_commit_a_reply_to_a_context_another_handle_changed() -> None:
    a, b, _ = _two_handles()
    tip = a.head
    assert tip is not None
    with pytest.raises(ConcurrentUpdate):
        a.generate(RacingModel(b))
    _assert_only_b_moved(a, b, tip)


def test_compress_does_not_commit_a_summary_of_a_context_another_handle_changed() -> None:
    a, b, _ = _two_handles()
    tip = a.head
    assert tip is not None
    a.configure_llm(RacingModel(b))
    with pytest.raises(ConcurrentUpdate):
        a.compress()
    _assert_only_b_moved(a, b, tip)


def test_a_hook_that_outlasts_a_move_does_not_commit_the_result() -> None:
    a, b, _ = _two_handles()
    a.assistant("", tool_calls=[{"id": "c2", "name": "lookup", "arguments": {}}])
    tip = a.head
    assert tip is not None

    def slow_hook(pending: Any) -> None:
        b.user("meanwhile, on another handle")
        pending.approve()

    a.on("tool_result", slow_hook)
    with pytest.raises(ConcurrentUpdate):
        a.tool_result("c2", "lookup", "late")
    _assert_only_b_moved(a, b, tip)


@pytest.mark.parametrize("fast_forward", [True, False])
def test_merge_does_not_drop_a_commit_made_while_it_was_deciding(
    monkeypatch: pytest.MonkeyPatch, fast_forward: bool
) -> None:
    from tractkv.engine import merging

    a, b, _ = _two_handles()
    if not fast_forward:
        a.user("diverge main")  # side is no longer a descendant: a real merge commit
    tip = a.head
    assert tip is not None
    real = merging.is_ancestor
    calls = []

    def racing_is_ancestor(*args: Any) -> bool:
        if not calls:
            b.user("meanwhile, on another handle")
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(merging, "is_ancestor", racing_is_ancestor)
    with pytest.raises(ConcurrentUpdate):
        a.merge("side")
    monkeypatch.undo()
    _assert_only_b_moved(a, b, tip)


class _Broken:
    def chat(self, messages: Any, tools: Any = None, **params: Any) -> LLMResponse:
        raise RuntimeError("provider down")


def test_a_failing_summarizer_is_model_call_failed_and_commits_nothing() -> None:
    with Tract.open(llm=_Broken()) as t:
        t.assistant("", tool_calls=[{"id": "c1", "name": "grep", "arguments": {}}])
        t.configure_tool_summarization(auto_threshold=1)
        tip = t.head
        with pytest.raises(ModelCallFailed, match="provider down"):
            t.tool_result("c1", "grep", "a long output " * 20)
        assert t.head == tip
        with pytest.raises(ModelCallFailed):
            t.compress()
        assert t.head == tip


def test_rebase_appends_never_re_makes_a_reply_on_a_tip_the_model_did_not_see() -> None:
    a, b, _ = _two_handles()
    a.rebase_appends = True
    tip = a.head
    assert tip is not None
    with pytest.raises(ConcurrentUpdate):
        a.generate(RacingModel(b))
    _assert_only_b_moved(a, b, tip)
    a.user("a plain append still lands, on the tip it reads now")
    assert a.log()[1].content["text"] == "meanwhile, on another handle"


def test_head_in_a_revision_is_the_handles_own_head(store: Store) -> None:
    """A read-only handle that switched branches (the stored HEAD did not move) resolves ``HEAD`` to its own."""
    with Tract(store, owns_store=False, readonly=True) as reader:
        reader.switch("side")
        side_tip = store.get_ref("refs/heads/side")
        assert reader.get_commit("HEAD").commit_id == side_tip
        assert reader.log(rev="HEAD", limit=1)[0].commit_id == side_tip
        assert reader.get_commit("HEAD~1").commit_id == reader.log()[1].commit_id
    assert store.get_ref("HEAD") == "ref: refs/heads/main"
