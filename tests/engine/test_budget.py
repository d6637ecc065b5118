"""Budgets that act (issue 21): warn, reject, trim and compress at the threshold, inside batches, after reopen,
under two writing processes, after a sync; and ``compile(max_tokens=N)``, the view that fits N tokens.

Limits are derived from measured counts (the same history built without a budget), so "just under", "exactly
at" and "over" are exact whatever the token counter's estimate is.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tractkv import BudgetExceeded, NoLLMConfigured, Tract, codec
from tractkv.cli import cli
from tractkv.engine.budget import BUDGET
from tractkv.engine.history import check_commit, describe_commit
from tractkv.errors import InvalidInput
from tractkv.llm import ScriptedLLM
from tractkv.model import Blob, Commit
from tractkv.store import Store, Table

from .conftest import FakeClock

ROOT = Path(__file__).resolve().parents[2]


def rows(store: Store) -> dict[str, list[tuple[bytes, bytes]]]:
    """Every row of every table: what "nothing was written" compares."""
    return {table.value: list(store.table_iter(table)) for table in Table}


def history(t: Tract, turns: int = 4) -> None:
    t.system("You are terse.")
    for i in range(turns):
        t.user(f"Question {i}: what is {i} plus {i}, in words please?")
        t.assistant(f"{i} plus {i} is {2 * i}.")


LAST = "And now a last question, a little longer than the others were."


def measured(turns: int = 4) -> tuple[int, int]:
    """The context's tokens before and after the last user message, without a budget."""
    with Tract.open(clock=FakeClock()) as t:
        history(t, turns)
        before = t.compile().token_count
        t.user(LAST)
        return before, t.compile().token_count


# --- each action at the threshold ------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["warn", "reject", "trim", "compress"])
@pytest.mark.parametrize("where", ["under", "at", "over"])
def test_each_action_at_the_threshold(tmp_path: Path, action: str, where: str) -> None:
    before, after = measured()
    limit = {"under": after + 1, "at": after, "over": after - 1}[where]
    summarizer = ScriptedLLM(["Ada asked sums."])
    with Tract.open(str(tmp_path / "s"), clock=FakeClock()) as t:
        t.configure_llm(None, summarizer=summarizer)
        history(t)
        # threshold 0.5 of twice the limit: the action runs above floor(0.5 * 2 * limit) = limit
        t.set_budget(2 * limit, action=action, threshold=0.5)
        heard: list[Any] = []
        t.on("budget_exceeded", heard.append)
        head = t.head
        snapshot = rows(t.store)
        if where != "over":
            info = t.user(LAST)
            assert t.head == info.commit_id
            assert t.compile().token_count == after <= limit
            assert heard == []
            assert t.status().budget_overrun is None
            return
        if action == "reject":
            with pytest.raises(BudgetExceeded) as caught:
                t.user(LAST)
            assert (caught.value.token_count, caught.value.limit) == (after, limit)
            assert "nothing was written" in str(caught.value)
            assert rows(t.store) == snapshot
            assert t.head == head
            assert heard == []
            assert t.compile().token_count == before
            return
        info = t.user(LAST)
        overrun = heard[-1]
        assert (overrun.commit_id, overrun.token_count, overrun.limit) == (info.commit_id, after, limit)
        assert overrun.action == action
        assert overrun.max_tokens == 2 * limit
        assert overrun.threshold == 0.5
        assert t.status().budget_overrun == overrun
        ctx = t.compile()
        if action == "warn":
            assert t.head == info.commit_id
            assert ctx.token_count == after > limit
            assert overrun.result_id is None
            return
        assert t.head == overrun.result_id != info.commit_id
        assert ctx.token_count == overrun.token_count_after <= limit
        assert ctx.commit_ids[-1] == info.commit_id  # the new message is never what goes
        assert ctx.messages[0].role == "system"
        top = t.log(limit=2)
        assert [c.operation for c in top] == [action, "append"]
        if action == "trim":
            assert describe_commit(top[0]).summary.startswith("trim 1 message")
        if action == "compress":
            assert any(m.content == "Ada asked sums." for m in ctx.messages)
            assert "Question 0" in summarizer.calls[0].messages[-1].content


def test_compress_without_a_model_writes_nothing(tmp_path: Path) -> None:
    _, after = measured()
    with Tract.open(str(tmp_path / "s"), clock=FakeClock()) as t:
        history(t)
        t.set_budget(after - 1, action="compress")
        snapshot = rows(t.store)
        with pytest.raises(NoLLMConfigured, match="compress budget"):
            t.user(LAST)
        assert rows(t.store) == snapshot


def test_a_summary_too_long_or_no_room_writes_nothing(tmp_path: Path) -> None:
    _, after = measured()
    with Tract.open(str(tmp_path / "s"), clock=FakeClock()) as t:
        t.configure_llm(None, summarizer=ScriptedLLM(["word " * 400]))
        history(t)
        t.set_budget(after - 1, action="compress")
        snapshot = rows(t.store)
        with pytest.raises(BudgetExceeded, match="summary"):
            t.user(LAST)
        assert rows(t.store) == snapshot
        t.set_budget(5, action="trim")  # the system message and the new one alone are over it
        snapshot = rows(t.store)
        with pytest.raises(BudgetExceeded, match="trimming"):
            t.user(LAST)
        assert rows(t.store) == snapshot


def test_trim_keeps_pinned_and_system_messages_and_drops_tool_turns_whole(tmp_path: Path) -> None:
    with Tract.open(str(tmp_path / "s"), clock=FakeClock()) as t:
        t.system("You are terse.")
        pinned = t.user("My name is Ada; remember it.")
        t.annotate(pinned.commit_id, "pinned")
        call = t.assistant(tool_calls=[{"id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}}])
        result = t.tool_result("c1", "add", "3")
        assert result is not None
        t.assistant("It is 3.")
        t.set_budget(t.compile().token_count, action="trim")
        t.user("One more question that pushes the context over its budget.")
        ctx = t.compile()
        kept = set(ctx.commit_ids)
        assert pinned.commit_id in kept
        assert ctx.messages[0].role == "system"
        assert call.commit_id not in kept
        assert result.commit_id not in kept
        trim = t.store.get_commit(t.head)
        assert trim.operation == "trim"
        assert set(trim.links["targets"]) >= {call.commit_id, result.commit_id}
        ctx.to_openai_params(strict=True)
        ctx.to_anthropic_params(strict=True)


# --- batches, reopen, old rows, the cost without a budget -----------------------------------------------------------


def test_inside_a_batch_the_budget_checks_the_blocks_end(tmp_path: Path) -> None:
    _, after = measured()
    with Tract.open(str(tmp_path / "s"), clock=FakeClock()) as t:
        history(t)
        t.set_budget(after - 1, action="reject")
        snapshot = rows(t.store)

        def block() -> None:
            with t.batch():
                t.user("short")  # alone within the budget: the block's end decides
                t.user(LAST)

        with pytest.raises(BudgetExceeded):
            block()
        assert rows(t.store) == snapshot  # none of the block
        t.set_budget(after - 1, action="trim")
        heard: list[Any] = []
        t.on("budget_exceeded", heard.append)
        with t.batch():
            t.user(LAST)
            t.assistant("Fine.")
        assert len(heard) == 1  # one check, at the end
        assert [c.operation for c in t.log(limit=3)] == ["trim", "append", "append"]
        assert t.compile().token_count <= after - 1


def test_a_trim_never_drops_a_message_written_in_the_same_batch(tmp_path: Path) -> None:
    """The review's b3: a question and its answer in one ``t.batch()`` block over a trim budget. Every message
    the block added is protected, not only the last: with nothing older to skip, BudgetExceeded and none of
    the block written; with older messages, they are what the trim skips. Before, the trim skipped the
    block's question and left an answer to nothing."""
    question = "What is the capital of France? Please answer in full sentences " * 4
    with Tract.open(str(tmp_path / "s"), clock=FakeClock()) as t:
        t.system("sys")
        t.set_budget(60, action="trim")
        snapshot, head = rows(t.store), t.head

        def block() -> None:
            with t.batch():
                t.user(question)
                t.assistant("Paris.")

        with pytest.raises(BudgetExceeded, match="nothing was written"):
            block()
        assert (rows(t.store), t.head) == (snapshot, head)
        t.set_budget(None)
        older = [t.user(f"Earlier remark {i}, a few words long.").commit_id for i in range(3)]
        t.set_budget(t.compile().token_count + 60, action="trim")
        with t.batch():
            asked = t.user(question)
            answered = t.assistant("Paris.")
        assert t.log(limit=1)[0].operation == "trim"
        ctx = t.compile()
        assert ctx.commit_ids[-2:] == (asked.commit_id, answered.commit_id)
        skipped = set(older) - set(ctx.commit_ids)
        assert skipped
        assert skipped == set(t.store.get_commit(t.head).links["targets"])


def test_status_never_shows_an_overrun_that_no_longer_holds(tmp_path: Path) -> None:
    """The review's w1: the last overrun is shown while it holds; a commit that finds the branch within its
    limit clears it, and so does changing or clearing the budget. A check within the limit writes no row
    when there is no overrun to clear."""
    with Tract.open(str(tmp_path / "s"), clock=FakeClock()) as t:
        t.system("s")
        t.set_budget(30, action="warn")
        long = t.user("long " * 30)
        assert t.status().budget_overrun is not None
        t.annotate(long.commit_id, "skip")  # back within the limit
        assert t.status().budget_overrun is None
        settings = [row for row in rows(t.store)["meta"] if row[0].startswith(b"budget")]
        within = t.user("short")  # within, no overrun to clear: no budget row written
        assert [row for row in rows(t.store)["meta"] if row[0].startswith(b"budget")] == settings
        t.user("long " * 30)
        assert t.status().budget_overrun is not None
        t.set_budget(30, action="warn")  # the same budget again: the overrun still holds
        assert t.status().budget_overrun is not None
        t.set_budget(1000, action="warn")  # raised: the overrun was against another limit
        assert t.status().budget_overrun is None
        t.set_budget(30, action="warn")
        t.user("more " * 5)
        assert t.status().budget_overrun is not None
        t.reset(within.commit_id)  # a ref move back within the limit: checked, the overrun cleared
        assert t.status().budget_overrun is None
        t.user("long " * 30)
        assert t.status().budget_overrun is not None
        t.set_budget(None)
        assert t.status().budget_overrun is None
    store = str(tmp_path / "s")  # the CLI's status says the same
    assert "over" not in cli_run(store, "status").output.replace("overrun", "")
    assert json.loads(cli_run(store, "status", "--json").output)["budget_overrun"] is None


def test_without_a_budget_a_batch_reads_the_setting_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Tract.open(str(tmp_path / "s"), durable=False) as t:
        t.user("before")
        reads: list[bytes] = []
        real = type(t.store)._raw_get

        def counting(self: Any, table: Table, key: bytes) -> bytes | None:
            if table is Table.META and key.startswith(BUDGET):
                reads.append(key)
            return real(self, table, key)

        monkeypatch.setattr(type(t.store), "_raw_get", counting)
        with t.batch():
            for index in range(5):
                t.user(f"message {index}")
        assert reads == [BUDGET + b"refs/heads/main"]
        t.user("one more")
        assert len(reads) == 2  # one per transaction


def test_a_budget_survives_reopen_and_an_old_int_row_reads_as_warn(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    _, after = measured()
    with Tract.open(path, clock=FakeClock()) as t:
        history(t)
        t.set_budget(after - 1, action="trim", threshold=1.0)
    with Tract.open(path, clock=FakeClock()) as t:
        status = t.status()
        assert (status.token_budget, status.budget_action, status.budget_threshold) == (
            after - 1,
            "trim",
            1.0,
        )
        t.user(LAST)
        assert t.log(limit=1)[0].operation == "trim"
        batch = t.store.new_batch()  # a row written before budgets had actions: a bare int
        batch.table_put(Table.META, BUDGET + b"refs/heads/main", codec.dumps(3))
        t.store.apply(batch)
    with Tract.open(path, clock=FakeClock()) as t:
        assert (t.budget(), t.status().budget_action) == (3, "warn")
        info = t.user("over a budget of three")
        assert t.head == info.commit_id
        assert t.status().budget_overrun is not None
        assert t.status().budget_overrun.commit_id == info.commit_id


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    with Tract.open() as t:
        with pytest.raises(InvalidInput, match="action"):
            t.set_budget(10, action="shout")
        with pytest.raises(InvalidInput, match="threshold"):
            t.set_budget(10, threshold=1.5)
        with pytest.raises(InvalidInput, match="threshold"):
            t.set_budget(10, threshold=0)
        with pytest.raises(InvalidInput, match="positive"):
            t.compile(max_tokens=0)


# --- the trim commit is validated as any commit --------------------------------------------------------------


def test_a_trim_commit_must_name_its_targets(tmp_path: Path) -> None:
    with Tract.open() as t:
        first = t.user("hello")
        batch = t.store.new_batch()
        blob = batch.put(Blob(data={"type": "annotation", "priority": "skip"}))
        bare = Commit(parents=(first.commit_id,), content=blob, operation="trim", created_at=1)
        with pytest.raises(InvalidInput, match=r"links\.targets"):
            check_commit(batch, bare)
        stray = Commit(
            parents=(first.commit_id,),
            content=blob,
            operation="annotate",
            edit_target=first.commit_id,
            links={"targets": (first.commit_id,)},
            created_at=1,
        )
        with pytest.raises(InvalidInput, match="only a trim"):
            check_commit(batch, stray)
        good = Commit(
            parents=(first.commit_id,), content=blob, operation="trim", links={"targets": (first.commit_id,)}
        )
        check_commit(batch, good)


# --- two writing processes -----------------------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys
    from tractkv import Tract
    path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Tract.open(path, rebase_appends=True) as t:
        for i in range(count):  # bounded
            t.user(f"{name} says message number {i}, with a few more words to count")
    """
)


def test_two_processes_appending_never_leave_a_tip_over_the_budget(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    with Tract.open(path) as t:
        t.system("Shared log.")
        t.set_budget(120, action="trim")
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    procs = [
        subprocess.Popen([sys.executable, str(script), path, name, "25"], env=env, stderr=subprocess.PIPE)
        for name in ("alpha", "beta")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
    with Tract.open(path) as t:
        tips = [e.new for e in t.reflog("main") if e.new is not None]
        assert len([c for c in t.log() if c.operation == "append"]) == 51  # every message landed
        for tip in tips:  # every tip the branch ever had is within the budget
            assert t.compile(at=tip).token_count <= 120
        assert t.compile().messages[0].role == "system"


# --- after a sync ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["trim", "compress"])
def test_the_receiver_compiles_the_same_trimmed_or_compressed_context(tmp_path: Path, action: str) -> None:
    _, after = measured()
    origin = str(tmp_path / "origin")
    Tract.open(origin).close()
    with Tract.open(str(tmp_path / "a"), clock=FakeClock()) as t:
        t.configure_llm(None, summarizer=ScriptedLLM(["Sums, asked and answered."]))
        history(t)
        t.set_budget(after - 1, action=action)
        t.user(LAST)
        t.assistant("Understood.")
        assert t.log(limit=3)[1].operation == action or t.log(limit=1)[0].operation == action
        t.remote_add("origin", origin)
        t.push()
        sent = t.compile()
    with Tract.clone(origin, str(tmp_path / "b")) as clone:
        got = clone.compile()
        assert list(got.commit_ids) == list(sent.commit_ids)
        assert [m.to_dict() for m in got.messages] == [m.to_dict() for m in sent.messages]
        assert got.token_count == sent.token_count <= after - 1
        assert clone.budget() is None  # the setting stays home; what it did travelled
        assert action in {c.operation for c in clone.log()}


# --- compile(max_tokens=N) ---------------------------------------------------------------------------------------


def test_compile_to_a_limit_writes_nothing_and_lists_what_it_dropped(tmp_path: Path) -> None:
    with Tract.open(str(tmp_path / "s"), clock=FakeClock()) as t:
        t.system("You are terse.")
        pinned = t.user("My name is Ada; remember it.")
        t.annotate(pinned.commit_id, "pinned")
        history(t, 3)
        full = t.compile()
        snapshot = rows(t.store)
        small = t.compile(max_tokens=full.token_count - 1)
        assert rows(t.store) == snapshot
        assert small.token_count <= full.token_count - 1
        assert small.dropped
        assert set(small.dropped).isdisjoint(small.commit_ids)
        assert small.dropped[0] == full.commit_ids[3]  # the oldest unpinned non-system message first
        assert pinned.commit_id in small.commit_ids
        assert [m.role for m in small.messages].count("system") == 2
        assert t.compile(max_tokens=full.token_count).dropped == ()
        with pytest.raises(BudgetExceeded, match="system and pinned") as caught:
            t.compile(max_tokens=10)
        assert caught.value.limit == 10


# --- the CLI, end to end ------------------------------------------------------------------------------------------


def cli_run(store: str, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--store", store, *args], catch_exceptions=False)


def test_cli_budget_actions_status_and_compile_to_a_limit(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    assert cli_run(store, "init").exit_code == 0
    assert cli_run(store, "commit", "--role", "system", "You are terse.").exit_code == 0
    for i in range(4):
        assert (
            cli_run(store, "commit", f"Question {i}: what is {i} plus {i}, in words please?").exit_code == 0
        )
    tokens = json.loads(cli_run(store, "status", "--json").output)["token_count"]
    result = cli_run(store, "budget", str(tokens * 2), "--action", "trim", "--threshold", "0.5")
    assert result.exit_code == 0
    assert result.output == f"{tokens * 2} tokens on main (trim at 50%)\n"
    assert json.loads(cli_run(store, "budget", "--json").output) == {
        "branch": "main",
        "budget": tokens * 2,
        "action": "trim",
        "threshold": 0.5,
    }
    assert cli_run(store, "commit", "One more question, pushing it over.").exit_code == 0
    log = json.loads(cli_run(store, "log", "--json").output)
    assert log[0]["operation"] == "trim"
    status = cli_run(store, "status").output
    assert "(trim at 50%)" in status
    assert "over      " in status
    assert json.loads(cli_run(store, "status", "--json").output)["token_count"] <= tokens
    # reject: one line, exit 1, nothing written
    assert cli_run(store, "budget", "5", "--action", "reject").exit_code == 0
    before = json.loads(cli_run(store, "log", "--json").output)
    refused = CliRunner().invoke(cli, ["--store", store, "commit", "too much"])
    assert refused.exit_code == 1
    assert refused.output.startswith("Error: the commit would take")
    assert json.loads(cli_run(store, "log", "--json").output) == before
    assert cli_run(store, "budget", "--action", "warn").exit_code == 2  # --action goes with N
    # N alone keeps the stored action and threshold (before, it went back to warn at 100%)
    assert cli_run(store, "budget", "7", "--threshold", "0.5").output == "7 tokens on main (reject at 50%)\n"
    assert cli_run(store, "budget", "6").output == "6 tokens on main (reject at 50%)\n"
    assert cli_run(store, "budget", "5", "--action", "trim").output == "5 tokens on main (trim at 50%)\n"
    assert cli_run(store, "budget", "5", "--threshold", "1").output == "5 tokens on main (trim)\n"
    assert cli_run(store, "budget", "--clear").exit_code == 0
    assert cli_run(store, "budget", "5").output == "5 tokens on main (warn)\n"  # none stored: the defaults
    # compile --max-tokens: a view, the dropped commits listed
    view = cli_run(store, "compile", "--max-tokens", "20")
    assert view.exit_code == 0
    data = json.loads(view.stdout)
    assert data["token_count"] <= 20
    assert data["dropped"]
    assert "dropped" in view.stderr
    too_small = CliRunner().invoke(
        cli, ["--store", store, "compile", "--max-tokens", "1", "--format", "openai"]
    )
    assert too_small.exit_code == 1
    assert too_small.output.startswith("Error: ")


def test_a_merge_commit_over_the_budget_is_trimmed_too(tmp_path: Path) -> None:
    with Tract.open(str(tmp_path / "s"), clock=FakeClock()) as t:
        history(t, 2)
        t.branch("side")
        t.user("A question asked on the side branch, with a few words more.")
        t.switch("main")
        t.user("A question asked on main meanwhile, with a few words more too.")
        merged_tokens = t.compile().token_count + t.compile(at="side").token_count
        t.set_budget(t.compile().token_count + 5, action="trim")
        assert merged_tokens > t.compile().token_count + 5
        result = t.merge("side")
        assert result.kind == "merge"
        top = t.log(limit=2)
        assert [c.operation for c in top] == ["trim", "merge"]
        ctx = t.compile()
        assert ctx.token_count <= t.status().token_budget
        assert ctx.messages[0].role == "system"
