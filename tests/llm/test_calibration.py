"""Token counts calibrated by the provider (engine/calibration.py): status reports the newest reply's reported
input tokens plus its output plus the estimate of what came after, and falls back to the estimate when the
context the reply saw is no longer the start of today's context (an edit, a skip, a compression, a reset, a
merge, another tool set). Replies are the provider-fidelity shapes: recorded bodies, and real calls to the
loopback recorder (plain and streamed, through the clients and the agent loop).
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tractkv import BudgetExceeded, Tract, toolkit
from tractkv.cli import cli
from tractkv.engine import calibration
from tractkv.engine.calibration import calibrated, context_tokens, reported_input, reported_output
from tractkv.engine.content import MESSAGE_OVERHEAD
from tractkv.llm import AnthropicClient, OpenAIClient, ScriptedLLM
from tractkv.store import LmdbStore

from .conftest import Recorder, anthropic_events, anthropic_message, openai_completion, openai_events

OPENAI_USAGE = {
    "prompt_tokens": 1200,
    "completion_tokens": 30,
    "total_tokens": 1230,
    "prompt_tokens_details": {"cached_tokens": 1000},
    "completion_tokens_details": {"reasoning_tokens": 12},
}
ANTHROPIC_USAGE = {
    "input_tokens": 20,
    "output_tokens": 40,
    "cache_creation_input_tokens": 5,
    "cache_read_input_tokens": 900,
}
OPENAI_COUNT = (
    1200 + (30 - 12) + MESSAGE_OVERHEAD
)  # cached tokens are inside prompt_tokens; reasoning is not sent
ANTHROPIC_COUNT = 20 + 900 + 5 + 40 + MESSAGE_OVERHEAD  # Anthropic's input_tokens leaves the cached ones out


def openai_reply(text: str = "Sunny in Paris.", usage: dict[str, Any] | None = None) -> dict[str, Any]:
    body = openai_completion(text, model="gpt-x")
    body["usage"] = copy.deepcopy(usage or OPENAI_USAGE)
    return body


def anthropic_reply(text: str = "Rain in Paris.", usage: dict[str, Any] | None = None) -> dict[str, Any]:
    body = anthropic_message([{"type": "text", "text": text}], model="claude-x")
    body["usage"] = copy.deepcopy(usage or ANTHROPIC_USAGE)
    return body


def opened(path: Path, name: str = "s") -> Tract:
    t = Tract.open(str(path / name), durable=False)
    t.system("You answer weather questions briefly.")
    t.user("What is the weather in Paris today?")
    return t


def edit(t: Tract, target: str, text: str, role: str = "user") -> None:
    t.commit({"type": "dialogue", "role": role, "text": text}, operation="edit", edit_target=target)


def estimate(t: Tract) -> int:
    return t.compile().token_count


def later_tokens(t: Tract, n: int) -> int:
    """The estimated tokens of the last ``n`` messages of the context."""
    ctx = t.compile()
    return ctx.token_count - t.compile(at=ctx.commit_ids[-n - 1]).token_count if n else 0


@pytest.fixture(autouse=True)
def fresh_memo() -> Iterator[None]:
    calibration._memo.clear()
    yield
    calibration._memo.clear()  # a test may have folded with another LIMIT


# --- the reported count -------------------------------------------------------------------------------------


def test_usage_normalized_by_either_provider_gives_its_whole_input() -> None:
    from tractkv.engine.content import anthropic_usage, openai_usage

    openai = openai_usage(OPENAI_USAGE)
    anthropic = anthropic_usage(ANTHROPIC_USAGE)
    assert openai is not None
    assert anthropic is not None
    assert (reported_input(openai), reported_output(openai)) == (1200, 18)
    assert (reported_input(anthropic), reported_output(anthropic)) == (925, 40)
    assert reported_input({"input_tokens": 7, "output_tokens": 1}) == 7  # a scripted reply's plain usage


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_recorded_reply_makes_status_reported_then_later_messages_are_estimated(
    tmp_path: Path, provider: str
) -> None:
    t = opened(tmp_path)
    before = t.status()
    assert (before.count_source, before.token_count, before.reported_by) == ("estimated", estimate(t), None)
    body, expected = (
        (openai_reply(), OPENAI_COUNT) if provider == "openai" else (anthropic_reply(), ANTHROPIC_COUNT)
    )
    reply = t.record_response(body)
    status = t.status()
    assert (status.count_source, status.token_count, status.reported_by) == (
        "reported",
        expected,
        reply.commit_id,
    )
    assert status.estimated_tokens == estimate(t) != status.token_count
    t.user("And tomorrow?")
    t.assistant("Probably rain.")
    status = t.status()
    assert status.count_source == "reported"
    assert status.token_count == expected + later_tokens(t, 2)
    assert status.estimated_tokens == estimate(t)
    assert context_tokens(t._session) == (status.token_count, "reported")
    tokens, source = calibrated(t._session)
    assert (tokens, source) == (status.token_count, "reported")
    t.close()
    again = Tract.open(str(tmp_path / "s"))  # derived from commits: the same after a reopen (no memo)
    calibration._memo.clear()
    assert (again.status().token_count, again.status().count_source) == (status.token_count, "reported")
    again.close()


def test_the_budget_use_follows_the_reported_count(tmp_path: Path) -> None:
    t = opened(tmp_path)
    t.set_budget(10_000)
    t.record_response(openai_reply())
    status = t.status()
    assert status.budget_used == pytest.approx(OPENAI_COUNT / 10_000)


def test_budgets_act_on_the_reported_count_and_a_trim_lands_within_the_limit_by_that_count(
    tmp_path: Path,
) -> None:
    """The provider said the context holds 1,200+ tokens while the local estimate is far smaller: a budget
    acts on the provider's number. A trim plans on estimates against the limit itself (dropping at least the
    oldest message, the count being over), and the count it leaves, taken as ``status`` takes it, is within
    the limit: skipping a message the reply counted ends the reply's anchoring, so it is the estimate. Before,
    the trim planned against the limit less the provider's extra and dropped far more than needed."""
    t = opened(tmp_path)
    for i in range(6):
        t.user(f"Question {i}: what will the weather be in city number {i} tomorrow morning?")
    reply = t.record_response(openai_reply())
    assert t.status().count_source == "reported"
    slack = t.status().token_count - estimate(t)
    assert slack > 1000
    limit = estimate(t) + slack - 50  # over by the provider's count, far under by the estimate
    t.set_budget(limit, action="reject")
    with pytest.raises(BudgetExceeded):
        t.user("And the day after?")
    assert t.head == reply.commit_id  # nothing written
    t.set_budget(limit, action="trim")
    full = t.compile(at=reply.commit_id)
    t.user("And the day after?")
    trim = t.log(limit=1)[0]
    assert trim.operation == "trim"
    status = t.status()
    assert status.count_source == "estimated"  # the trim skipped messages the reply's count included
    assert status.token_count == estimate(t) <= limit
    assert len(t.compile().messages) == len(full.messages)  # one message skipped, one added: no more


def huge_reply(t: Tract, input_tokens: int) -> None:
    """A question and a reply whose usage says the request cost ``input_tokens`` (any writer may record it)."""
    t.user("Hello, what can you do?")
    t.assistant("Many things.", metadata={"usage": {"input_tokens": input_tokens, "output_tokens": 3}})


@pytest.mark.parametrize("action", ["trim", "compress"])
@pytest.mark.parametrize("reported", [600, 10**12])
def test_a_reported_count_far_over_the_estimate_never_blocks_a_trim_or_compress_budget(
    tmp_path: Path, action: str, reported: int
) -> None:
    """A reply reporting far more tokens than the estimate (600 for a context estimated near 100, or 10**12
    from a buggy writer) over a 250-token budget: the next commit is trimmed or compressed and lands, and
    the branch stays writable. Before, the plan's limit (limit less the reported extra) went negative and
    every later commit raised BudgetExceeded."""
    t = opened(tmp_path)
    t.configure_llm(None, summarizer=ScriptedLLM(["Paris weather asked."] * 4))
    for i in range(3):
        t.user(f"Question {i}: what will the weather be in city number {i} tomorrow?")
        t.assistant(f"Sunny in city {i}.")
    huge_reply(t, reported)
    assert t.status().token_count > 250 > estimate(t)
    t.set_budget(250, action=action)
    for text, operation in (("And the day after?", action), ("And next week?", "append")):
        question = t.user(text)  # the branch stays writable: the first is trimmed or compressed, then fits
        assert t.log(limit=1)[0].operation == operation
        status = t.status()
        assert (status.count_source, status.token_count) == ("estimated", estimate(t))
        assert status.token_count <= 250
        assert t.compile().commit_ids[-1] == question.commit_id


@pytest.mark.parametrize("action", ["trim", "compress"])
def test_a_received_reply_with_a_huge_count_leaves_the_receivers_budget_working(
    tmp_path: Path, action: str
) -> None:
    """The review's h1: a reply with usage ``input_tokens`` 10**12 reaches another store by a path clone;
    the receiver's trim or compress budget acts on it and its next commit lands within the limit."""
    source = opened(tmp_path, "a")
    huge_reply(source, 10**12)
    source.close()
    clone = Tract.clone(str(tmp_path / "a"), str(tmp_path / "b"))
    try:
        assert clone.status().token_count > 10**12
        clone.configure_llm(None, summarizer=ScriptedLLM(["Weather chat."]))
        clone.set_budget(8000, action=action)
        question = clone.user("A normal question")
        assert clone.log(limit=1)[0].operation == action
        status = clone.status()
        assert (status.count_source, status.token_count) == ("estimated", estimate(clone))
        assert clone.compile().commit_ids[-1] == question.commit_id
    finally:
        clone.close()


def test_a_trim_that_leaves_the_reported_count_over_writes_nothing(tmp_path: Path) -> None:
    """When every message the reply counted is pinned (the reply is kept whole with its pinned tool result),
    a trim can only skip messages after it, which leaves the count anchored at the reply and over the limit:
    BudgetExceeded, nothing written (the count after the action is taken as status takes it)."""
    t = opened(tmp_path)
    t.annotate(t.compile().commit_ids[1], "pinned")
    call = {"id": "c1", "name": "forecast", "arguments": {"city": "Paris"}}
    usage = {"input_tokens": 5000, "output_tokens": 3}
    t.assistant(tool_calls=[call], metadata={"usage": usage})
    result = t.tool_result("c1", "forecast", "Sunny, 24 degrees.")
    t.annotate(result.commit_id, "pinned")  # a message after the reply: the count stays reported
    t.user("A later remark, not pinned.")
    assert t.status().count_source == "reported"
    t.set_budget(1000, action="trim")
    head = t.head
    with pytest.raises(BudgetExceeded, match="the trim left the context") as caught:
        t.user("A new question.")
    assert caught.value.token_count > caught.value.limit == 1000
    assert t.head == head


def test_a_newer_reply_takes_over(tmp_path: Path) -> None:
    t = opened(tmp_path)
    t.record_response(openai_reply())
    t.user("And in Rome?")
    second = t.record_response(anthropic_reply("Sunny in Rome."))
    assert (t.status().token_count, t.status().reported_by) == (ANTHROPIC_COUNT, second.commit_id)


# --- what invalidates it ------------------------------------------------------------------------------------


def test_an_edit_before_the_reply_falls_back_and_one_after_does_not(tmp_path: Path) -> None:
    t = opened(tmp_path)
    question = t.compile().commit_ids[1]
    t.record_response(openai_reply())
    later = t.user("And tomorrow?")
    edit(t, later.commit_id, "And the day after tomorrow, in the evening?")
    status = t.status()
    assert status.count_source == "reported"
    assert status.token_count == OPENAI_COUNT + later_tokens(t, 1)  # the edited later message, estimated
    edit(t, question, "What is the weather in Rome?")
    status = t.status()
    assert (status.count_source, status.token_count) == ("estimated", estimate(t))
    t.record_response(anthropic_reply())  # the next reply anchors the count again
    assert (t.status().count_source, t.status().token_count) == ("reported", ANTHROPIC_COUNT)


def test_editing_the_reply_itself_falls_back(tmp_path: Path) -> None:
    t = opened(tmp_path)
    reply = t.record_response(openai_reply())
    edit(t, reply.commit_id, "Sunny, 25 degrees.", "assistant")
    assert t.status().count_source == "estimated"


def test_a_skip_before_the_reply_falls_back_and_one_after_is_estimated_away(tmp_path: Path) -> None:
    t = opened(tmp_path)
    t.record_response(openai_reply())
    later = t.user("Thanks, that is all I wanted to know about the weather today.")
    t.annotate(later.commit_id, "skip")
    assert (t.status().count_source, t.status().token_count) == ("reported", OPENAI_COUNT)  # skipped: gone
    t.annotate(t.compile().commit_ids[1], "skip")
    assert (t.status().count_source, t.status().token_count) == ("estimated", estimate(t))


def test_a_compression_before_the_reply_falls_back(tmp_path: Path) -> None:
    t = opened(tmp_path)
    first = t.compile().commit_ids[1]
    t.record_response(openai_reply())
    t.compress(content="They asked about Paris.", from_commit=first, to_commit=first)
    assert (t.status().count_source, t.status().token_count) == ("estimated", estimate(t))


def test_a_compression_after_the_reply_keeps_it(tmp_path: Path) -> None:
    t = opened(tmp_path)
    t.record_response(openai_reply())
    a = t.user("A long question about the weather in Rome, Madrid and Lisbon next week, day by day.")
    b = t.assistant("A long answer: sunny, sunny, rain, rain, sunny, cloudy and sunny again.")
    t.compress(content="Rome etc.: mixed.", from_commit=a.commit_id, to_commit=b.commit_id)
    status = t.status()
    assert status.count_source == "reported"
    assert status.token_count == OPENAI_COUNT + later_tokens(t, 1)  # the summary, estimated


def test_a_reset_to_before_the_reply_falls_back_and_back_to_it_reports(tmp_path: Path) -> None:
    t = opened(tmp_path)
    before = t.head
    reply = t.record_response(openai_reply())
    t.user("And tomorrow?")
    t.reset(str(before))
    assert (t.status().count_source, t.status().token_count) == ("estimated", estimate(t))
    t.reset(reply.commit_id)
    assert (t.status().count_source, t.status().token_count) == ("reported", OPENAI_COUNT)


def test_a_merge_after_the_reply_falls_back(tmp_path: Path) -> None:
    t = opened(tmp_path)
    t.record_response(openai_reply())
    t.branch("side")
    t.user("A side question.")
    t.switch("main")
    t.user("A main question.")
    result = t.merge("side")
    assert result.kind == "merge"
    assert (t.status().count_source, t.status().token_count) == ("estimated", estimate(t))


def test_another_tool_set_falls_back_and_the_same_one_again_reports(tmp_path: Path) -> None:
    weather = {
        "type": "function",
        "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}},
    }
    t = opened(tmp_path)
    t.set_tools([weather])
    t.user("Use your tool if you like.")
    t.record_response(openai_reply())
    reported = t.status()
    assert reported.count_source == "reported"
    # the provider counted the tool schemas: the estimate adds them itself, the reported count does not
    assert reported.token_count == OPENAI_COUNT
    t.set_tools(None)
    t.user("No tools now.")
    assert t.status().count_source == "estimated"
    t.set_tools([weather])
    t.user("The tool again.")
    assert t.status().count_source == "reported"


def test_usage_on_a_message_that_is_not_an_assistant_reply_anchors_nothing(tmp_path: Path) -> None:
    t = opened(tmp_path)
    usage = {"input_tokens": 5000, "output_tokens": 10}
    t.commit({"type": "dialogue", "role": "user", "text": "More?"}, metadata={"usage": usage})
    assert (t.status().count_source, t.status().token_count) == ("estimated", estimate(t))
    calibration._memo.clear()  # the walk (no memo) and the no-assistant shortcut agree
    assert t.status().count_source == "estimated"
    t.assistant("Yes.")
    assert t.status().count_source == "estimated"


def test_a_reply_too_far_back_falls_back_the_same_with_or_without_the_memo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(calibration, "LIMIT", 3)
    t = opened(tmp_path)
    t.record_response(openai_reply())
    seen = []
    for i in range(5):
        t.user(f"message {i}")
        walked = t.status().count_source
        calibration._memo.clear()
        assert t.status().count_source == walked  # a fresh walk agrees with the incremental fold
        seen.append(walked)
    assert seen == ["reported"] * 3 + ["estimated"] * 2


def test_random_histories_give_the_same_count_incrementally_and_from_a_fresh_walk(tmp_path: Path) -> None:
    rng = random.Random(21)
    t = opened(tmp_path)
    messages = list(t.compile().commit_ids)
    sources = set()
    for step in range(80):
        move = rng.choice(["user", "user", "reply", "reply", "edit", "skip", "pin"])
        if move == "user":
            messages.append(t.user(f"question {step} " * rng.randint(1, 6)).commit_id)
        elif move == "reply":
            usage = {"prompt_tokens": rng.randint(10, 5000), "completion_tokens": rng.randint(1, 50)}
            messages.append(t.record_response(openai_reply(f"answer {step}", usage)).commit_id)
        else:
            target = rng.choice(messages[1:])
            if move == "edit":
                edit(t, target, f"edited {step}")
            else:
                t.annotate(target, "skip" if move == "skip" else "normal")
        incremental = t.status()
        calibration._memo.clear()
        fresh = t.status()
        sources.add(fresh.count_source)
        assert (incremental.token_count, incremental.count_source, incremental.reported_by) == (
            fresh.token_count,
            fresh.count_source,
            fresh.reported_by,
        )
    assert sources == {"reported", "estimated"}


def test_after_an_append_one_commit_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tractkv.store import Reader

    t = opened(tmp_path)
    t.record_response(openai_reply())
    for i in range(300):
        t.user(f"message {i}")
    t.status()
    reads: list[str] = []
    original = Reader.get_commit

    def counted(self: Reader, oid: Any) -> Any:
        reads.append(oid)
        return original(self, oid)

    monkeypatch.setattr(Reader, "get_commit", counted)
    t.user("one more")
    reads.clear()
    assert t.status().count_source == "reported"
    assert len(reads) <= 1  # the new commit only: the rest is memoized by commit id


# --- generate, streaming, the agent loop, sync -----------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
def test_generate_plain_and_streamed_reports_the_providers_count(
    recorder: Recorder, tmp_path: Path, provider: str, stream: bool
) -> None:
    body, expected = (
        (openai_reply(), OPENAI_COUNT) if provider == "openai" else (anthropic_reply(), ANTHROPIC_COUNT)
    )
    if stream:
        recorder.stream(openai_events(body) if provider == "openai" else anthropic_events(body))
    else:
        recorder.reply(body)
    client = (
        OpenAIClient("gpt-x", base_url=recorder.url, api_key="k", max_retries=0)
        if provider == "openai"
        else AnthropicClient("claude-x", base_url=recorder.url, api_key="k", max_retries=0)
    )
    t = opened(tmp_path)
    if stream:
        with t.generate(client, stream=True) as deltas:
            for _ in deltas:
                pass
    else:
        t.generate(client)
    status = t.status()
    assert (status.count_source, status.token_count) == ("reported", expected)


def test_the_agent_loop_reports_the_last_replys_count(tmp_path: Path) -> None:
    from tractkv.llm import LLMResponse

    t = opened(tmp_path)
    llm = ScriptedLLM([LLMResponse(text="Sunny.", usage={"input_tokens": 321, "output_tokens": 4})])
    toolkit.run(t, llm)
    assert (t.status().count_source, t.status().token_count) == ("reported", 321 + 4 + MESSAGE_OVERHEAD)


def test_a_clone_over_a_path_remote_reports_the_same(tmp_path: Path) -> None:
    t = opened(tmp_path, "a")
    t.record_response(anthropic_reply())
    t.user("And tomorrow?")
    sent = t.status()
    assert sent.count_source == "reported"
    LmdbStore(str(tmp_path / "hub"), durable=False).close()
    t.remote_add("origin", str(tmp_path / "hub"))
    assert t.push().ok
    calibration._memo.clear()
    b = Tract.clone(str(tmp_path / "hub"), str(tmp_path / "b"), durable=False)
    try:
        got = b.status()
        assert (got.token_count, got.count_source, got.reported_by) == (
            sent.token_count,
            "reported",
            sent.reported_by,
        )
    finally:
        b.close()
        t.close()


# --- the CLI ------------------------------------------------------------------------------------------------


def test_cli_status_text_and_json_say_reported_or_estimated(tmp_path: Path) -> None:
    t = opened(tmp_path)
    store = str(tmp_path / "s")
    estimated = estimate(t)
    t.close()

    def status(*args: str) -> str:
        result = CliRunner().invoke(cli, ["--store", store, "status", *args])
        assert result.exit_code == 0, result.output
        return result.output

    assert f"tokens    {estimated} (estimated, heuristic-2)" in status()
    assert json.loads(status("--json"))["count_source"] == "estimated"
    with Tract.open(store) as t:
        reply = t.record_response(openai_reply())
        t.set_budget(10_000)
        after = estimate(t)
    text = status()
    assert (
        f"tokens    {OPENAI_COUNT} (reported by {reply.commit_id[:12]}; estimated {after}, heuristic-2), "
        f"{OPENAI_COUNT / 10_000:.0%} of a 10000-token budget"
    ) in text
    data = json.loads(status("--json"))
    assert (data["token_count"], data["count_source"], data["estimated_tokens"], data["reported_by"]) == (
        OPENAI_COUNT,
        "reported",
        after,
        reply.commit_id,
    )
    assert data["budget_used"] == pytest.approx(OPENAI_COUNT / 10_000)


def test_a_state_being_built_in_a_batch_is_counted_through_the_batch(tmp_path: Path) -> None:
    """What a budget check on the commit being written calls: the state with the staged commit applied, read
    through the batch (the staged commit and its new tool set are not in the store yet)."""
    from tractkv.engine.content import content_blob, put_toolset, tool_schemas, tool_tokens
    from tractkv.model import Commit

    weather = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}
    t = opened(tmp_path)
    t.record_response(openai_reply())
    session, parent = t._session, t.head
    assert parent is not None
    for tools in (None, [weather]):
        batch = session.store.new_batch()
        blob = content_blob({"type": "dialogue", "role": "user", "text": "And tomorrow?"})
        toolset = put_toolset(batch, tool_schemas(tools)) if tools else session.head_state().tools
        commit = Commit(
            parents=(parent,), content=batch.put(blob), tools=toolset, operation="append", created_at=1
        )
        oid = batch.put(commit)
        state = session.compiler.state_at(batch, parent).copy()
        state.apply(batch, oid, commit, session.counter)
        count = calibrated(session, state, reader=batch)
        view = state.render(batch)
        if tools is None:
            assert count.source == "reported"
            assert count.tokens == OPENAI_COUNT + view.total_tokens(session.counter) - estimate(t)
        else:  # a new tool set, staged: the estimate, its tools counted from the batch
            assert count.source == "estimated"
            assert count.tokens == view.total_tokens(session.counter) + tool_tokens(tools, session.counter)
