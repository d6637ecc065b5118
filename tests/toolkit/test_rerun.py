"""Re-running a failed execution (issue 16, item 6) and the payload of usage events (seed 003)."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from tractkv import DetachedHead, InvalidInput, Tract, toolkit
from tractkv.cli import cli
from tractkv.llm import ScriptedLLM
from tractkv.model import UsageRecord, decode, encode, object_id
from tractkv.store import MemoryStore, Table, fsck
from tractkv.toolkit import ToolContext, ToolEvent, ToolExecutor, tool

from .conftest import FakeClock, call
from .test_loop import explode
from .test_sync import copy_branch


def _flaky_agent(tract: Tract) -> tuple[ToolExecutor, list[str]]:
    attempts: list[str] = []

    @tool
    def fetch(url: str, *, context: ToolContext) -> str:
        """Fetch a page.

        Args:
            url: the page.
        """
        attempts.append(url)
        if len(attempts) == 1:
            raise ConnectionError("timed out")
        return f"page {url}"

    ex = ToolExecutor(tract, profile=None, tools=[fetch])
    tract.user("read it")
    toolkit.run(tract, ScriptedLLM([call("c1", "fetch", {"url": "a.example"}), "it failed"]), ex)
    return ex, attempts


def test_a_failed_execution_is_rerun_and_linked_to_the_failed_one(tract: Tract) -> None:
    ex, attempts = _flaky_agent(tract)
    (failed,) = tract.tool_usages(status="error")
    assert failed.error == "ConnectionError: timed out"
    new = toolkit.rerun_tool_usage(tract, failed.id, ex)
    assert attempts == ["a.example", "a.example"]
    assert (new.status, new.rerun_of, new.result, new.tool_call_id) == (
        "success",
        failed.id,
        "page a.example",
        failed.tool_call_id,
    )
    assert new.commit_id == failed.commit_id  # the same assistant message made the call
    # the new result replaces the failed one in the context (an edit); both executions stay in history
    tool_message = next(m for m in tract.compile().messages if m.role == "tool")
    assert tool_message.content == "page a.example"
    assert [(u.status, u.rerun_of) for u in tract.tool_usages()] == [("error", None), ("success", failed.id)]
    assert new.result_commit is not None
    assert tract.log(limit=1)[0].commit_id == new.result_commit
    assert list(tract.store.table_iter(Table.USAGE)) == []
    assert tract.tool_usage_stats()["fetch"].count == 2


def test_only_failed_top_level_executions_answering_a_call_can_be_rerun(tract: Tract) -> None:
    ex, _ = _flaky_agent(tract)
    (failed,) = tract.tool_usages(status="error")
    with pytest.raises(InvalidInput, match="no tool 'fetch'"):
        toolkit.rerun_tool_usage(tract, failed.id)  # the default executor has only the built-ins
    new = toolkit.rerun_tool_usage(tract, failed.id, ex)
    with pytest.raises(InvalidInput, match="has status success"):
        toolkit.rerun_tool_usage(tract, new.id, ex)
    with pytest.raises(InvalidInput, match="no tool execution nope"):
        toolkit.rerun_tool_usage(tract, "nope", ex)
    lone = ex.execute("fetch", {"url": "b.example"})  # answered no committed call
    assert lone.success


def test_a_nested_failure_points_at_its_top_level_execution(tract: Tract) -> None:
    @tool
    def broken(*, context: ToolContext) -> str:
        """Always fails."""
        raise RuntimeError("no")

    @tool
    def outer(*, context: ToolContext) -> str:
        """Runs broken."""
        return context.execute("broken").text

    ex = ToolExecutor(tract, profile=None, tools=[broken, outer])
    tract.user("go")
    toolkit.run(tract, ScriptedLLM([call("c1", "outer"), "done"]), ex)
    (inner,) = tract.tool_usages(name="broken")
    with pytest.raises(InvalidInput, match="ran inside"):
        toolkit.rerun_tool_usage(tract, inner.id, ex)


def test_a_rerun_syncs_with_the_branch(tract: Tract) -> None:
    ex, _ = _flaky_agent(tract)
    (failed,) = tract.tool_usages(status="error")
    toolkit.rerun_tool_usage(tract, failed.id, ex)
    target = MemoryStore()
    copy_branch(tract.store, target, "refs/heads/main")
    with Tract(target) as copy:
        assert [u.to_json() for u in copy.tool_usages()] == [u.to_json() for u in tract.tool_usages()]
        assert copy.tool_usages()[1].rerun_of == failed.id
        assert fsck(target).ok


def test_a_usage_record_without_rerun_keeps_its_id() -> None:
    record = UsageRecord(usage_id="u1", tool_name="t", status="error", started_at=1, completed_at=2)
    assert "rerun" not in record.to_wire()
    again = attrs.evolve(record, rerun_of="u0")
    assert again.to_wire()["rerun"] == "u0"
    assert decode(encode(again)) == again
    assert object_id(again) != object_id(record)


def test_events_carry_the_reference_payload(tract: Tract, clock: FakeClock) -> None:
    seen: list[ToolEvent] = []

    @tool
    def search(query: str, *, context: ToolContext) -> str:
        """Search the web.

        More text the model sees.

        Args:
            query: what to look for.
        """
        clock.advance_ms(40)
        return "hits"

    @tool
    def research(topic: str, *, context: ToolContext) -> str:
        """Research a topic with sub-searches.

        Args:
            topic: the topic.
        """
        return context.execute("search", {"query": topic}).output

    ex = ToolExecutor(tract, profile=None, tools=[search, research], clock=clock)
    ex.events.subscribe("*", seen.append)
    tract.user("go")
    toolkit.run(tract, ScriptedLLM([call("c1", "research", {"topic": "py"}), "done"]), ex)
    start, inner_start, inner_done, done = seen
    assert [e.kind for e in seen] == ["tool_start", "tool_start", "tool_complete", "tool_complete"]
    assert (start.tool_name, start.arguments, start.branch, start.description) == (
        "research",
        {"topic": "py"},
        "main",
        "Research a topic with sub-searches.",
    )
    assert start.commit_id is not None
    assert start.tool_call_id == "c1"
    assert start.parent_id is None
    assert (start.started_at, start.duration_ms) == (None, None)
    assert inner_start.parent_id == start.usage_id
    assert inner_start.commit_id == start.commit_id
    assert (inner_start.arguments, inner_start.description) == ({"query": "py"}, "Search the web.")
    assert inner_done.usage_id == inner_start.usage_id
    assert inner_done.started_at == inner_start.timestamp
    assert inner_done.duration_ms is not None
    assert inner_done.duration_ms >= 40
    assert inner_done.arguments == {"query": "py"}
    assert done.output == "hits"
    payload = done.to_json()
    assert payload["branch"] == "main"
    assert payload["arguments"] == {"topic": "py"}
    assert payload["duration_ms"] == done.duration_ms


def test_an_error_event_carries_the_arguments_and_the_error(tract: Tract) -> None:
    ex = ToolExecutor(tract, profile=None)
    seen: list[ToolEvent] = []
    ex.events.on("tool_error", seen.append)
    ex.execute("missing", {"x": 1})
    (event,) = seen
    assert event.arguments == {"x": 1}
    assert event.description is None
    assert "unknown tool" in (event.error or "")
    assert event.duration_ms is not None


@tool(name="explode")
def _explode_fixed(x: int, *, context: ToolContext) -> str:
    """Fixed now."""
    return f"handled {x}"


def cli_executor(t: Tract) -> ToolExecutor:
    """The ``--executor`` factory the CLI test names: the fixed ``explode``."""
    return ToolExecutor(t, profile=None, tools=[_explode_fixed])


def test_cli_usage_rerun(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    with Tract.open(path) as t:
        t.user("go")
        toolkit.run(
            t,
            ScriptedLLM([call("c2", "explode", {"x": 2}), "failed"]),
            ToolExecutor(t, profile=None, tools=[explode]),
        )
        (failed,) = t.tool_usages()
    runner = CliRunner()
    plain = runner.invoke(cli, ["--store", path, "usage", "rerun", failed.id])
    assert plain.exit_code != 0
    assert "no tool 'explode'" in plain.stderr
    bad = runner.invoke(cli, ["--store", path, "usage", "rerun", failed.id, "--executor", "nope"])
    assert bad.exit_code != 0
    assert "MODULE:NAME" in bad.stderr
    done = runner.invoke(
        cli,
        ["--store", path, "usage", "rerun", failed.id, "--executor", f"{__name__}:cli_executor", "--json"],
    )
    assert done.exit_code == 0, done.stderr
    new = json.loads(done.stdout)
    assert (new["status"], new["rerun_of"], new["result"]) == ("success", failed.id, "handled 2")
    tree = runner.invoke(cli, ["--store", path, "usage"])
    assert f"re-run of [{failed.id}]" in tree.stdout
    assert runner.invoke(cli, ["--store", path, "usage", "--stats"]).exit_code == 0


def test_a_failure_whose_result_never_landed_cannot_be_rerun(tract: Tract) -> None:
    @tool
    def broken(*, context: ToolContext) -> str:
        """Always fails."""
        raise RuntimeError("no")

    ex = ToolExecutor(tract, profile=None, tools=[broken])
    tract.user("go")
    reply = tract.assistant("", tool_calls=[{"id": "c1", "name": "broken", "arguments": {}}])
    done = ex.execute("broken", {}, tool_call_id="c1", commit=reply.commit_id)  # the loop crashed here
    assert done.usage_id is not None
    with pytest.raises(InvalidInput, match="answered no committed tool call"):
        toolkit.rerun_tool_usage(tract, done.usage_id, ex)


def test_a_rerun_happens_once_and_never_on_a_detached_head(tract: Tract) -> None:
    """A failed execution re-run successfully is not run again (its effects would repeat); on a detached HEAD
    the re-run is refused before the tool runs, leaving no usage row behind."""
    ex, attempts = _flaky_agent(tract)
    (failed,) = tract.tool_usages(status="error")
    tract.checkout("HEAD")
    with pytest.raises(DetachedHead):
        toolkit.rerun_tool_usage(tract, failed.id, ex)
    assert attempts == ["a.example"]  # the tool did not run
    assert list(tract.store.table_iter(Table.USAGE)) == []
    tract.switch("main")
    toolkit.rerun_tool_usage(tract, failed.id, ex)
    with pytest.raises(InvalidInput, match="re-run successfully already"):
        toolkit.rerun_tool_usage(tract, failed.id, ex)
    assert attempts == ["a.example", "a.example"]


def unique_prefix(usage_id: str, path: str) -> str:
    """The shortest prefix of ``usage_id`` that no other stored usage id starts with (ids share their leading
    time digits, and every re-run stores a usage of its own)."""
    with Tract.open(path, readonly=True) as t:
        others = [u.id for u in t.tool_usages() if u.id != usage_id]
    return next(
        usage_id[:n]
        for n in range(1, len(usage_id) + 1)
        if not any(o.startswith(usage_id[:n]) for o in others)
    )


def test_cli_usage_rerun_takes_a_unique_id_prefix(tmp_path: Path) -> None:
    """`usage rerun` takes a unique prefix of an id, as git takes one of a commit id; an ambiguous one is refused
    naming the ids it matches, a prefix of none says so (issue 34, item 5)."""
    path = str(tmp_path / "store")
    with Tract.open(path) as t:
        t.user("go")
        toolkit.run(
            t,
            ScriptedLLM([call("c2", "explode", {"x": 2}), call("c3", "explode", {"x": 3}), "failed"]),
            ToolExecutor(t, profile=None, tools=[explode]),
        )
        first, second = t.tool_usages()
    shared = next(first.id[:i] for i in range(len(first.id), -1, -1) if second.id.startswith(first.id[:i]))
    assert shared  # ids start with the start time: two runs a moment apart share its leading digits
    runner = CliRunner()
    factory = ["--executor", f"{__name__}:cli_executor"]
    ambiguous = runner.invoke(cli, ["--store", path, "usage", "rerun", shared, *factory])
    assert ambiguous.exit_code == 1
    assert "ambiguous" in ambiguous.stderr
    assert first.id in ambiguous.stderr
    assert second.id in ambiguous.stderr
    none = runner.invoke(cli, ["--store", path, "usage", "rerun", "zz", *factory])
    assert none.exit_code == 1
    assert "no tool execution zz" in none.stderr
    prefix = unique_prefix(second.id, path)
    assert len(prefix) < len(second.id)
    done = runner.invoke(cli, ["--store", path, "usage", "rerun", prefix, *factory, "--json"])
    assert done.exit_code == 0, done.stderr
    new = json.loads(done.stdout)
    assert (new["status"], new["rerun_of"], new["result"]) == ("success", second.id, "handled 3")
    # the re-run made a usage of its own, so the prefix is taken again among every id now stored
    text = runner.invoke(cli, ["--store", path, "usage", "rerun", unique_prefix(first.id, path), *factory])
    assert text.exit_code == 0, text.stderr
    assert f"re-ran {first.id} as " in text.stderr
    again = runner.invoke(cli, ["--store", path, "usage", "rerun", unique_prefix(second.id, path), *factory])
    assert again.exit_code == 1
    assert "re-run successfully already" in again.stderr
