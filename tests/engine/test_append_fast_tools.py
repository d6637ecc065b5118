"""Plain-text appends that link the session's tool set take the fast path too (issue 18: tools, batched), and
make what the general path makes.

Inside a batch the tool setting is read and decoded once, and the id it names is checked once: the commits
after the first carry that very string, which ``trusted_commit`` does not check again (``made_tools``: the tool
set of the commit this session made last). Ids, CommitInfo and every row of every table are the same as the
general path writes, for any interleaving of set_tools, batches and single commits (property test); what comes
from disk (a damaged setting) is still refused.
"""

from __future__ import annotations

import gc
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import tractkv.engine.session as session_module
import tractkv.engine.session.fastpath as fastpath_module
from tractkv import Tract
from tractkv.cli import cli
from tractkv.engine.content import ACTIVE_TOOLS
from tractkv.errors import EncodeError, InvalidInput
from tractkv.ids import hash_bytes
from tractkv.model.objects import trusted_commit
from tractkv.store import Table

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": f"does thing {i}",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for i in range(4)
]


def _ticks() -> Any:
    now = iter(range(1_700_000_000_000_000, 1_800_000_000_000_000, 7))
    return lambda: next(now)


# One step: ("say", role, text) a plain-text append; ("tools", k) set_tools(the first k tools; 0: clear);
# ("batch", n) the next n "say" steps in one batch; ("explicit", k) a commit carrying tools= (general path).
steps = st.lists(
    st.one_of(
        st.tuples(st.just("say"), st.sampled_from(["user", "assistant"]), st.text(min_size=1, max_size=30)),
        st.tuples(st.just("tools"), st.integers(min_value=0, max_value=4)),
        st.tuples(st.just("batch"), st.integers(min_value=1, max_value=6)),
        st.tuples(st.just("explicit"), st.integers(min_value=1, max_value=4)),
    ),
    min_size=1,
    max_size=14,
)


def _say(t: Tract, role: str, text: str) -> Any:
    return (t.user if role == "user" else t.assistant)(text)


def _run(path: str, plan: list[tuple[Any, ...]], append: Any) -> list[Any]:
    """``plan`` on a new store at ``path``, every plain-text append made by ``append`` (a path, by name)."""
    out: list[Any] = []
    with Tract.open(path, clock=_ticks(), durable=False) as t:
        for step in plan:
            kind = step[0]
            if kind == "say":
                out.append(append(t._session, step[1], step[2]).to_json())
            elif kind == "tools":
                t.set_tools(TOOLS[: step[1]] if step[1] else None)
            elif kind == "explicit":
                info = t.commit({"type": "dialogue", "role": "user", "text": "x"}, tools=TOOLS[: step[1]])
                out.append(info.to_json())
            else:
                with t.batch():
                    for index in range(step[1]):
                        role = "user" if index % 2 else "assistant"
                        out.append(append(t._session, role, f"in batch {index}").to_json())
                    out.append(t.compile().to_dicts())
        ctx = t.compile()
        out.append((ctx.to_dicts(), ctx.token_count, ctx.tools))
    return out


def _rows(path: str) -> dict[str, list[tuple[bytes, bytes]]]:
    with Tract.open(path, durable=False, readonly=True) as t:
        return {table.value: list(t.store.table_iter(table)) for table in Table}


@given(steps)
@settings(max_examples=25, deadline=None)
def test_fast_and_general_paths_make_the_same_ids_and_rows_with_tool_sets(
    plan: list[tuple[Any, ...]],
) -> None:
    """The two plain-text append paths, run by name on the same random history (single commits, batches,
    tool settings, commits of the general kind between them): the same ids, CommitInfo, compiled contexts
    (inside and after batches) and every row of every table."""
    with tempfile.TemporaryDirectory() as root:
        fast = _run(f"{root}/fast", plan, session_module.append_text_fast)
        general = _run(f"{root}/general", plan, session_module.append_text_general)
        assert fast == general
        assert _rows(f"{root}/fast") == _rows(f"{root}/general")  # objects, refs, commit_tools, reflog, ...


def test_a_batch_checks_the_tool_setting_once_and_links_it_to_every_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tool set id read from the setting is checked by the first commit of the batch only; every commit
    links it, and the CLI shows it in force."""
    checked: list[str] = []
    real = fastpath_module.trusted_commit

    def counting(**fields: Any) -> Any:
        if fields["tools"] is not None and fields["tools"] is not fields.get("made_tools"):
            checked.append(fields["tools"])
        return real(**fields)

    monkeypatch.setattr(fastpath_module, "trusted_commit", counting)
    path = str(tmp_path / "s")
    with Tract.open(path, durable=False) as t:
        t.set_tools(TOOLS)
        with t.batch():
            infos = [_say(t, "user", f"m{i}") for i in range(20)]
    assert len(checked) == 1  # was 20: each commit matched the id against the id pattern again
    assert len({info.toolset_id for info in infos}) == 1
    assert infos[0].toolset_id is not None
    shown = CliRunner().invoke(cli, ["--store", path, "compile", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert "tool_3" in shown.output


def test_a_damaged_setting_is_still_refused_in_a_batch(tmp_path: Path) -> None:
    """A setting that is not an object id (as a damaged disk would hold) is refused by the batch's first
    commit; nothing is written."""
    with Tract.open(str(tmp_path / "s"), durable=False) as t:
        head = t.user("hello").commit_id
        batch = t.store.new_batch()
        batch.table_put(Table.META, ACTIVE_TOOLS + b"refs/heads/main", b"not-an-object-id")
        t.store.apply(batch)

        def two() -> None:
            with t.batch():
                t.user("one")
                t.user("two")

        with pytest.raises((EncodeError, InvalidInput)):
            two()
        assert t._session.head == head


def test_made_tools_skips_only_the_check_of_that_very_string() -> None:
    made = hash_bytes(b"a tool set")
    bad = "".join(["NOT-AN-", "ID"])
    equal_not_same = "".join(["NOT-AN", "-ID"])
    assert bad == equal_not_same
    assert bad is not equal_not_same
    ok = trusted_commit(
        parents=(), content=made, tools=made, operation="append", created_at=5, made_tools=made
    )
    assert ok.tools == made
    with pytest.raises(EncodeError, match="not an object id"):
        trusted_commit(
            parents=(), content=made, tools=bad, operation="append", created_at=5, made_tools=equal_not_same
        )


def test_a_batch_makes_the_collector_run_less_often_and_restores_it(tmp_path: Path) -> None:
    """Inside batch() the cyclic collector's first threshold is raised (it stays on); it is restored at the
    block's end, also when the block raises, and left alone when collection is off."""
    before = gc.get_threshold()
    with Tract.open(str(tmp_path / "s"), durable=False) as t:
        with t.batch():
            assert gc.isenabled()
            assert gc.get_threshold()[0] == session_module.BATCH_GC_THRESHOLD
            t.user("inside")
            with t.batch():  # nested: joins the outer block
                assert gc.get_threshold()[0] == session_module.BATCH_GC_THRESHOLD
        assert gc.get_threshold() == before

        def failing() -> None:
            with t.batch():
                t.user("not written")
                raise RuntimeError("boom")

        with pytest.raises(RuntimeError):
            failing()
        assert gc.get_threshold() == before
        assert t.compile().commit_count == 1
        gc.set_threshold(0, before[1], before[2])
        try:
            with t.batch():
                assert gc.get_threshold()[0] == 0  # collection off: left off
                t.user("two")
            assert gc.get_threshold()[0] == 0
        finally:
            gc.set_threshold(*before)


def test_a_batch_takes_the_one_step_path_after_its_first_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every plain-text commit of a batch after its first is made in one step (``_append_in_batch``), with
    a tool set in force too, after a commit of another kind (an annotation: it moved the branch in the
    batch's one reflog entry too) and under a write policy's guard (which it consults for each commit); the
    first commit of a batch goes the general way. The CLI reads every commit and the context."""
    taken: list[bool] = []
    real = fastpath_module._append_in_batch

    def counting(*args: Any) -> Any:
        made = real(*args)
        taken.append(made is not None)
        return made

    class Guard(session_module.WritePolicy[Any]):
        def __init__(self) -> None:
            self.asked: list[str] = []

        def before_write(self, session: Any, action: str) -> None:
            self.asked.append(action)

    monkeypatch.setattr(fastpath_module, "_append_in_batch", counting)
    guard = Guard()
    path = str(tmp_path / "s")
    with Tract.open(path, durable=False, clock=_ticks()) as t:
        t.set_tools(TOOLS[:2])
        with t.batch():
            first = t.user("first").commit_id
            for i in range(5):
                _say(t, "assistant", f"reply {i}")
            t.annotate(first, "pinned")
            t.user("after the annotation")
            t.user("and one more")
            t._session.add_policy(guard)
            t.user("guarded")
            t.user("guarded too")
    assert taken == [False] + [True] * 9
    assert guard.asked == ["commit", "commit"]
    runner = CliRunner()
    log = runner.invoke(cli, ["--store", path, "log", "--json"])
    assert log.exit_code == 0, log.output
    assert log.output.count('"commit_id"') == 11
    shown = runner.invoke(cli, ["--store", path, "compile", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert "guarded" in shown.output
    assert "tool_1" in shown.output
