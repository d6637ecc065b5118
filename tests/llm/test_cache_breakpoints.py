"""Prompt-cache breakpoints (issue 32, item 4): an annotation (``t.annotate(rev, cache="5m" | "1h")``,
``tractkv annotate --cache``) marks a message or the system prompt, ``set_tools(cache=)`` the tools; the
Anthropic rendering sends ``cache_control`` there, other dialects ignore it, a fifth breakpoint is refused
naming them all, and the marks are history: they sync and are checked on receive."""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import pytest
from click.testing import CliRunner

from tractkv import InvalidInput, Tract
from tractkv.cli import cli
from tractkv.engine.history import validate
from tractkv.engine.history.describe import describe_commit
from tractkv.llm import AnthropicClient
from tractkv.model import Blob, ToolSet
from tractkv.store import LmdbStore
from tractkv.store.fsck import fsck

from .conftest import Recorder, anthropic_message

TOOL = {"name": "lookup", "description": "Look up", "input_schema": {"type": "object", "properties": {}}}
HOUR = {"type": "ephemeral", "ttl": "1h"}
FIVE = {"type": "ephemeral"}


def marked(path: str | None = None) -> Tract:
    t = Tract.open(path, durable=False) if path else Tract.open()
    t.set_tools([TOOL], cache="1h")
    system = t.system("You are a careful analyst.")
    t.system("Answer in English.")
    question = t.user("Summarize the report.")
    t.assistant("It says revenue rose.")
    t.user("And costs?")
    t.annotate(system.commit_id, cache="1h")
    t.annotate(question.commit_id, cache="5m")
    return t


EXPECTED = {
    "model": "m",
    "max_tokens": 10,
    "messages": [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Summarize the report.", "cache_control": FIVE}],
        },
        {"role": "assistant", "content": "It says revenue rose."},
        {"role": "user", "content": "And costs?"},
    ],
    "system": [
        {"type": "text", "text": "You are a careful analyst.", "cache_control": HOUR},
        {"type": "text", "text": "Answer in English."},
    ],
    "tools": [TOOL | {"cache_control": HOUR}],
}


def test_a_cached_system_prompt_message_and_tools_go_out_as_the_sdk_expects(
    recorder: Recorder, anthropic_sdk: anthropic.Anthropic
) -> None:
    recorder.reply(anthropic_message())
    with marked() as t:
        params = t.compile().to_anthropic_params()
        anthropic_sdk.messages.create(model="m", max_tokens=10, **params)
    [request] = recorder.requests
    assert sorted(request.body) == sorted(EXPECTED)
    for key in ("system", "messages", "tools"):  # byte for byte, key order included
        assert json.dumps(request.body[key]) == json.dumps(EXPECTED[key])


def test_other_dialects_ignore_breakpoints() -> None:
    with marked() as t:
        ctx = t.compile()
        plain = Tract.open()
        plain.set_tools([TOOL])
        for text in ("You are a careful analyst.", "Answer in English."):
            plain.system(text)
        plain.user("Summarize the report.")
        plain.assistant("It says revenue rose.")
        plain.user("And costs?")
        other = plain.compile()
        assert ctx.to_openai_params() == other.to_openai_params()
        assert ctx.to_responses_params() == other.to_responses_params()
        assert [m.cache for m in ctx.messages] == ["1h", None, "5m", None, None]
        assert ctx.to_dicts()[0]["cache"] == "1h"


def test_a_message_with_tool_calls_or_thinking_marks_its_last_block_that_may_carry_one() -> None:
    with Tract.open() as t:
        t.user("Weather?")
        call = t.assistant(
            [{"type": "thinking", "thinking": "hmm", "signature": "sig"}, "Checking."],
            tool_calls=[{"id": "c1", "name": "get_weather", "arguments": {}}],
        )
        result = t.tool_result("c1", "get_weather", "sunny")
        t.annotate(call.commit_id, cache="1h")  # 1h before 5m: Anthropic refuses a 1h entry after a 5m one
        t.annotate(result.commit_id, cache="5m")
        messages = t.compile().to_anthropic_params()["messages"]
    assert messages[1]["content"][-1] == {
        "type": "tool_use",
        "id": "c1",
        "name": "get_weather",
        "input": {},
        "cache_control": HOUR,
    }
    assert messages[2]["content"][0]["cache_control"] == FIVE


def test_a_fifth_breakpoint_is_refused_naming_them_all() -> None:
    with marked() as t:
        t.annotate(t.log()[2].commit_id, cache="5m")  # "And costs?" (the log: annotate, annotate, user, ...)
        assert len(t.compile().to_anthropic_params()["system"]) == 2  # four still fit
        extra = t.assistant("Costs fell.")
        t.annotate(extra.commit_id, cache="5m")
        with pytest.raises(InvalidInput) as info:
            t.compile().to_anthropic_params()
        text = str(info.value)
        assert "at most 4 cache breakpoints; this context has 5" in text
        assert text.count(" message ") == 3
        assert "system prompt 0" in text
        assert "the tools (set_tools(cache='1h'))" in text
        assert extra.commit_id[:12] in text
        t.annotate(extra.commit_id, cache="off")  # removing one makes it fit again
        assert t.compile().to_anthropic_params()
        assert t.compile().to_openai_params()  # never refused for other dialects


def test_generate_through_the_anthropic_client_sends_the_tools_breakpoint(recorder: Recorder) -> None:
    recorder.reply(anthropic_message())
    sdk = anthropic.Anthropic(base_url=recorder.url, api_key="x", max_retries=0)
    with marked() as t, AnthropicClient("m", client=sdk, max_tokens=10) as client:
        t.generate(client)
        assert t.log()[0].content["role"] == "assistant"
    [request] = recorder.requests
    for key in ("system", "messages", "tools"):  # as compile().to_anthropic_params() renders them
        assert json.dumps(request.body[key]) == json.dumps(EXPECTED[key])


def test_generate_through_the_anthropic_client_refuses_a_fifth_breakpoint(recorder: Recorder) -> None:
    recorder.reply(anthropic_message())
    sdk = anthropic.Anthropic(base_url=recorder.url, api_key="x", max_retries=0)
    with marked() as t, AnthropicClient("m", client=sdk, max_tokens=10) as client:
        t.annotate(t.log()[2].commit_id, cache="5m")
        extra = t.assistant("Costs fell.")
        t.user("And margins?")
        t.annotate(extra.commit_id, cache="5m")
        head = t.head
        with pytest.raises(InvalidInput, match="at most 4 cache breakpoints; this request has 5"):
            t.generate(client)
        assert t.head == head  # nothing committed
    assert recorder.requests == []  # nothing sent


def test_priority_and_cache_are_kept_independently() -> None:
    with Tract.open() as t:
        note = t.user("Keep this.")
        t.annotate(note.commit_id, "pinned")
        t.annotate(note.commit_id, cache="5m")
        assert t.log()[0].content == {"type": "annotation", "priority": "pinned", "cache": "5m"}
        t.annotate(note.commit_id, "normal", reason="done")
        assert t.log()[0].content == {
            "type": "annotation",
            "priority": "normal",
            "cache": "5m",
            "reason": "done",
        }
        t.annotate(note.commit_id, "skip")
        assert t.compile().messages == ()
        t.annotate(note.commit_id, "normal")
        assert t.compile().messages[0].cache == "5m"
        t.annotate(note.commit_id, cache="off")
        assert t.compile().messages[0].cache is None
        with pytest.raises(InvalidInput, match="cache must be one of"):
            t.annotate(note.commit_id, cache="10m")
        with pytest.raises(InvalidInput, match="a priority or a cache"):
            t.annotate(note.commit_id)
        with pytest.raises(InvalidInput, match="needs tools"):
            t.set_tools(None, cache="5m")


def test_a_pushed_and_cloned_store_renders_the_same_breakpoints(tmp_path: Path) -> None:
    with marked(str(tmp_path / "a")) as a:
        want = a.compile().to_anthropic_params()
        LmdbStore(str(tmp_path / "hub"), durable=False).close()
        a.remote_add("origin", str(tmp_path / "hub"))
        assert a.push().ok
    with Tract.clone(str(tmp_path / "hub"), str(tmp_path / "b"), durable=False) as b:
        assert json.dumps(b.compile().to_anthropic_params()) == json.dumps(want)
    with LmdbStore(str(tmp_path / "b"), durable=False, create=False) as st:
        assert fsck(st).ok


def test_receive_checks_a_breakpoints_lifetime() -> None:
    ok = validate.tag(Blob(data={"type": "annotation", "priority": "normal", "cache": "1h"}))
    assert ok == "annotation"
    bad = validate.tag(Blob(data={"type": "annotation", "priority": "normal", "cache": "2h"}))
    assert bad.startswith(validate.INVALID)
    assert "cache must be one of" in bad
    with pytest.raises(validate.ObjectRuleError, match="cache must be one of"):
        validate.check(ToolSet(tools=(), cache="2h"), lambda _oid: None)


def test_the_cli_annotates_a_breakpoint_and_compile_names_a_fifth(tmp_path: Path) -> None:
    store = str(tmp_path / "s.tkv")
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(cli, ["--store", store, *args])
        assert result.exit_code == code, result.output
        return result.output

    run("init")
    ids = [run("commit", "--role", role, text).strip() for role, text in (("user", "a"), ("assistant", "b"))]
    ids += [run("commit", "--role", role, text).strip() for role, text in (("user", "c"), ("assistant", "d"))]
    ids.append(run("commit", "--role", "user", "e").strip())
    run("annotate", ids[0], "--cache", "1h")
    params = json.loads(run("compile", "--format", "anthropic"))
    assert params["messages"][0]["content"][0]["cache_control"] == HOUR
    run("annotate", ids[0], "pinned")  # keeps the breakpoint
    assert json.loads(run("compile", "--format", "anthropic")) == params
    for rev in ids[1:]:
        run("annotate", rev, "--cache", "5m")
    out = run("compile", "--format", "anthropic", code=1)
    assert "at most 4 cache breakpoints" in out
    assert "usage" in run("annotate", ids[0], code=2).lower()  # neither a priority nor --cache


def test_a_merge_carries_a_breakpoint_set_on_one_side_and_conflicts_on_two() -> None:
    from tractkv.errors import MergeConflict

    with Tract.open() as t:
        note = t.user("Long document.")
        t.assistant("Read it.")
        t.branch("side")  # and switch to it
        t.annotate(note.commit_id, cache="1h")
        t.user("On side.")
        t.switch("main")
        t.user("On main.")
        t.merge("side")  # only theirs set it: taken, as a priority would be
        assert t.compile().messages[0].cache == "1h"
        t.branch("other")
        t.annotate(note.commit_id, cache="5m")
        t.switch("main")
        t.annotate(note.commit_id, cache="off")
        with pytest.raises(MergeConflict, match="cache"):
            t.merge("other")
        t.merge("other", strategy="theirs")
        assert t.compile().messages[0].cache == "5m"


def test_a_breakpoint_given_with_the_message_is_one_transaction() -> None:
    with Tract.open() as t:
        system = t.system("Rules.", cache="1h")
        user = t.user("Question", cache="5m")
        reply = t.assistant("Answer", cache="5m")
        assert [m.cache for m in t.compile().messages] == ["1h", "5m", "5m"]
        assert [c.operation for c in t.log()] == ["annotate", "append"] * 3
        assert [e.new for e in t.reflog()][:3] == [
            t.log()[0].commit_id,
            t.log()[2].commit_id,
            t.log()[4].commit_id,
        ]
        assert {system.operation, user.operation, reply.operation} == {"append"}  # the message's commit
        assert describe_commit(t.log()[0]).summary == f"normal {reply.commit_id[:12]} cache 5m"  # log, viewer
        before = t.log()
        with pytest.raises(InvalidInput, match="cache must be one of"):
            t.user("x", cache="1d")
        assert t.log() == before  # nothing written
