"""An Agents SDK session as real commits (issue 33, item 1): each item is the commit a tractkv user expects
(messages as dialogue, a model's reply items as one assistant turn with its tool calls, reasoning and
provider items, function_call_output as the tool result answering its call), so compile in every dialect,
the tool queries, ``tractkv log`` and the viewer read a session branch; ``get_items`` still returns each item
as given; a session written by the code before (a bundle it made) reads as it did and goes on."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.models.openai_provider import OpenAIProvider
from click.testing import CliRunner
from llm.conftest import openai_completion, output_message, response_body
from starlette.testclient import TestClient

from tractkv import Tract
from tractkv.cli import cli
from tractkv.errors import DecodeError, InvalidInput
from tractkv.integrations.openai_agents import TractkvSession, session_branch
from tractkv.store import LmdbStore, fsck
from tractkv.view.app import create_app

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"  # nothing leaves the machine

HERE = Path(__file__).resolve().parent
DIALECTS = ("openai", "responses", "anthropic", "gemini")
PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def _params(ctx: Any, dialect: str) -> Any:
    return getattr(ctx, f"to_{dialect}_params")()


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return {"Paris": "sunny", "Rome": "rain"}[city]


def _run_agent(store: str, recorder: Any, *, responses: bool) -> Any:
    provider = OpenAIProvider(api_key="test", base_url=f"{recorder.url}/v1", use_responses=responses)
    config = RunConfig(model_provider=provider, tracing_disabled=True)
    agent = Agent(name="helper", instructions="Be brief.", model="gpt-test", tools=[weather])
    session = TractkvSession("trip", store, tools=agent)  # the agent's tools: the tools in force
    try:
        result = Runner.run_sync(agent, "Weather in Paris and Rome?", session=session, run_config=config)
        items = asyncio.run(session.get_items())
    finally:
        session.close()
    return result.final_output, items


def _calls_reply(responses: bool) -> Any:
    args = [('{"city": "Paris"}', "c1"), ('{"city": "Rome"}', "c2")]
    if not responses:
        calls = [
            {"id": cid, "type": "function", "function": {"name": "weather", "arguments": a}}
            for a, cid in args
        ]
        return openai_completion(None, calls)
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Look both up."}],
        "encrypted_content": "gAAAAB-opaque",
    }
    calls = [
        {"type": "function_call", "id": f"fc_{cid}", "call_id": cid, "name": "weather", "arguments": a}
        for a, cid in args
    ]
    return response_body([reasoning, *calls])


@pytest.mark.parametrize("responses", [True, False], ids=["responses", "chat"])
def test_a_runner_with_function_tools_leaves_real_tool_turns(
    tmp_path: Path, recorder: Any, responses: bool
) -> None:
    store = str(tmp_path / "s")
    recorder.reply(_calls_reply(responses))
    final = "Sunny in Paris, rain in Rome."
    recorder.reply(response_body([output_message(final)]) if responses else openai_completion(final))
    output, items = _run_agent(store, recorder, responses=responses)
    assert output == final
    kinds = [item.get("type", "message") for item in items]
    assert kinds.count("function_call") == 2
    assert kinds.count("function_call_output") == 2
    assert ("reasoning" in kinds) is responses
    with Tract.open(store, branch=session_branch("trip")) as t:
        ctx = t.compile()
        assert ctx.repairs == ()
        assert [
            (m.role, m.content, [c.name for c in m.tool_calls], m.tool_call_id) for m in ctx.messages
        ] == [
            ("user", "Weather in Paris and Rome?", [], None),
            ("assistant", "", ["weather", "weather"], None),  # both calls, one turn
            ("tool", "sunny", [], "c1"),
            ("tool", "rain", [], "c2"),
            ("assistant", final, [], None),
        ]
        calls = [c.id for c in ctx.messages[1].tool_calls]
        assert calls == ["c1", "c2"] if responses else len(set(calls)) == 2
        openai = _params(ctx, "openai")["messages"]
        assert [m.get("tool_call_id") for m in openai if m["role"] == "tool"] == calls
        anthropic = _params(ctx, "anthropic")["messages"]
        assert [b["tool_use_id"] for b in anthropic[2]["content"]] == calls  # the results survive
        assert [b["content"] for b in anthropic[2]["content"]] == ["sunny", "rain"]
        gemini = _params(ctx, "gemini")["contents"]
        assert [p["function_response"]["response"] for p in gemini[2]["parts"]] == [
            {"output": "sunny"},
            {"output": "rain"},
        ]
        sent = _params(ctx, "responses")["input"]
        if responses:  # the reply's items go back verbatim, reasoning (encrypted_content) ahead of the calls
            assert _json(sent[1:5]) == _json(items[1:5])
            assert sent[1]["encrypted_content"] == "gAAAAB-opaque"
        assert [i["output"] for i in sent if i.get("type") == "function_call_output"] == ["sunny", "rain"]
        for dialect in DIALECTS:
            assert t.compile().left_out(dialect) == ()
        turns = t.find_tool_turns()
        assert len(turns) == 1
        assert turns[0].tool_names == ("weather", "weather")
        assert [r.content["text"] for r in turns[0].results] == ["sunny", "rain"]
        assert [c.commit_id for c in t.find_tool_calls("weather")] == [turns[0].call.commit_id]
        assert [r.content["name"] for r in t.find_tool_results("weather")] == ["weather", "weather"]
        assert ctx.token_count > 0
        assert [tool["name"] for tool in ctx.tools] == ["weather"]  # the agent's tools are in force
        assert [tool["function"]["name"] for tool in _params(ctx, "openai")["tools"]] == ["weather"]
        # every execution is a usage record, linked from its result: tool_usages and the stats read them
        usages = t.tool_usages()
        assert [(u.tool_name, u.status, u.tool_call_id, u.arguments, u.result) for u in usages] == [
            ("weather", "success", calls[0], {"city": "Paris"}, "sunny"),
            ("weather", "success", calls[1], {"city": "Rome"}, "rain"),
        ]
        assert t.tool_usage_stats()["weather"].count == 2
        # each model turn's first commit carries the request's token usage the SDK reported
        assert [(c.role, c.usage["input_tokens"], c.usage["output_tokens"]) for c in t.log() if c.usage] == [
            ("assistant", 10, 2),
            ("assistant", 10, 2),
        ]
        assert all(c.token_count > 0 for c in t.log())
        # the turn's latest edit: the assistant message with both calls (its first commit holds its first item)
        call_commit = next(c.commit_id for c in t.log() if len(c.content.get("tool_calls", ())) == 2)
        assert fsck(t.store).ok
    log = CliRunner().invoke(cli, ["--store", store, "log", session_branch("trip")])
    assert log.exit_code == 0, log.output
    assert "[calls weather, weather]" in log.output
    assert "append tool: [result of weather] sunny" in log.output
    with LmdbStore(store) as st:
        app, _ = create_app(st, sync=False)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            ref = "refs/heads/" + session_branch("trip")
            page = client.get(f"/ui/commit/{call_commit}", params={"ref": ref})
            assert page.status_code == 200
            assert "weather" in page.text
            assert '"city"' in page.text.replace("&#34;", '"').replace("&quot;", '"')
            results = [client.get(f"/ui/commit/{r.commit_id}", params={"ref": ref}) for r in turns[0].results]
            assert all(r.status_code == 200 for r in results)
            usage = client.get("/ui/usage", params={"ref": ref})  # the tool usage page lists both runs
            assert usage.status_code == 200
            assert usage.text.count(">weather<") >= 2, usage.text
            assert "sunny" in results[0].text
            assert "rain" in results[1].text
    if responses:  # the SDK's second request sent the session's items back: tractkv gave them as stored
        second = recorder.bodies[-1]["input"]
        assert _json(second[1:5]) == _json(items[1:5])


ITEMS: list[dict[str, Any]] = [
    {"role": "developer", "content": "Answer in French."},
    {"role": "system", "content": [{"type": "input_text", "text": "Be brief."}]},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": PNG, "detail": "low"},
        ],
    },
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ENC=="},
    {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "c1",
        "name": "lookup",
        "arguments": '{"q": "pixel"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "a pixel"}]},
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "Un pixel.", "annotations": []},
            {"type": "refusal", "refusal": "No more."},
        ],
    },
    {"type": "computer_call_output", "call_id": "cc_1", "output": {"type": "computer_screenshot"}},
    # another provider's reply through the SDK (LiteLLM): its reasoning a note, the placeholder id left out
    {"type": "reasoning", "id": "__fake_id__", "summary": [], "provider_data": {"model": "claude"}},
    {
        "type": "function_call",
        "id": "__fake_id__",
        "call_id": "c9",
        "name": "lookup",
        "arguments": "{}",
        "provider_data": {"model": "claude"},
    },
    {"type": "function_call_output", "call_id": "nowhere", "output": "orphan"},
    {"no": "shape"},
]


def test_each_item_becomes_the_commit_a_user_expects(tmp_path: Path) -> None:
    with TractkvSession("s", str(tmp_path / "s")) as session:
        asyncio.run(session.add_items(ITEMS))
        got = asyncio.run(session.get_items())
    assert _json(got) == _json(ITEMS)  # each item exactly as given (keys sorted: canonical CBOR)
    with Tract.open(str(tmp_path / "s"), branch=session_branch("s")) as t:
        log = list(reversed(t.log()))
        assert [(c.operation, c.content_type, c.role) for c in log] == [
            ("append", "instruction", "system"),  # developer
            ("append", "instruction", "system"),
            ("append", "dialogue", "user"),
            ("append", "dialogue", "assistant"),  # the turn: reasoning, then each further item an edit
            ("edit", "dialogue", "assistant"),
            ("edit", "dialogue", "assistant"),
            ("append", "dialogue", "tool"),
            ("append", "dialogue", "assistant"),  # a new turn after the result
            ("edit", "dialogue", "assistant"),  # computer_call_output: a provider item of the turn
            ("append", "reasoning", "assistant"),  # another provider's reasoning: a note
            ("append", "dialogue", "assistant"),  # its call: a turn of its own
            ("append", "reasoning", "assistant"),  # a result whose call is no call of the session: a note
            ("append", "reasoning", "assistant"),  # no known shape: a note, as before
        ]
        assert all(c.edit_target == log[3].commit_id for c in log[4:6])
        assert log[6].reply_to == log[3].commit_id
        assert log[6].content["name"] == "lookup"
        ctx = t.compile()
        assert [m.role for m in ctx.messages] == [
            "system",
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "assistant",  # c9: a tool run in progress at the end of the context
        ]
        call = {"type": "function_call", "call_id": "c9", "name": "lookup", "arguments": "{}"}
        assert ctx.messages[6].parts[0].item == call
        user = ctx.messages[2]
        assert [p.type for p in user.parts] == ["text", "image"]
        assert user.parts[1].detail == "low"
        turn = ctx.messages[3]
        assert [p.item["type"] for p in turn.parts if p.item] == [
            "reasoning",
            "web_search_call",
            "function_call",
        ]
        assert turn.parts[0].item["encrypted_content"] == "ENC=="
        assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [("c1", "lookup", {"q": "pixel"})]
        assert ctx.messages[4].content == "a pixel"
        assert ctx.messages[4].tool_call_id == "c1"
        assert ctx.messages[5].content == "Un pixel."
        assert [p.type for p in ctx.messages[5].parts] == [
            "text",
            "refusal",
            "responses_item",
        ]
        assert ctx.repairs == ()
        sent = _params(ctx, "responses")["input"]
        assert _json(sent[1:4]) == _json(ITEMS[3:6])  # reasoning, web search, call: verbatim, in order
        assert [r.call_id for r in ctx.left_out("anthropic")] == [
            "ws_1",
            "computer_call_output",
        ]  # provider items
        anthropic = _params(ctx, "anthropic")["messages"]
        assert anthropic[2]["content"][0]["tool_use_id"] == "c1"


def test_pop_inside_a_turn_gives_the_turn_back_as_it_was(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    user = {"role": "user", "content": "go"}
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    call2 = {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"}
    with TractkvSession("s", a) as session:
        asyncio.run(session.add_items([user, reasoning, call]))
    Tract.clone(a, b).close()
    with TractkvSession("s", b) as session:
        assert asyncio.run(session.pop_item()) == call
        assert asyncio.run(session.get_items()) == [user, reasoning]
        with Tract.open(b, branch=session_branch("s")) as t:
            turn = t.compile().messages[-1]
            assert turn.tool_calls == ()
            assert [p.item["type"] for p in turn.parts if p.item] == ["reasoning"]
        asyncio.run(
            session.add_items([call2])
        )  # the turn goes on (another add_items) without the popped call
        assert asyncio.run(session.get_items()) == [user, reasoning, call2]
        with Tract.open(b, branch=session_branch("s")) as t:
            turn = t.compile().messages[-1]
            assert [c.id for c in turn.tool_calls] == ["c2"]
            assert [p.item["type"] for p in turn.parts if p.item] == ["reasoning", "function_call"]
        assert asyncio.run(session.pop_item()) == call2
        assert asyncio.run(session.pop_item()) == reasoning  # the turn's first item: a skip
        assert asyncio.run(session.get_items()) == [user]
        with Tract.open(b, branch=session_branch("s")) as t:
            assert [m.role for m in t.compile().messages] == ["user"]
            assert t.push("origin", session_branch("s")).ok  # still a fast-forward
    with TractkvSession("s", b) as session:  # a fresh handle reads the same
        assert asyncio.run(session.get_items()) == [user]
    with TractkvSession("s", a) as session:  # the pushed pops apply on the other side
        assert asyncio.run(session.get_items()) == [user]


def test_a_skip_of_a_turn_hides_every_item_it_shows(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    items = [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
    ]
    with TractkvSession("s", store) as session:
        asyncio.run(session.add_items(items))
        with Tract.open(store, branch=session_branch("s")) as t:
            t.annotate(t.log()[0].commit_id, "skip")  # the turn's latest edit: tractkv skips the message
            assert [m.role for m in t.compile().messages] == ["user"]
            assert asyncio.run(session.get_items()) == items[:1]
            t.annotate(t.log()[1].commit_id, "normal")
            assert asyncio.run(session.get_items()) == items


def test_a_session_written_by_the_code_before_reads_as_it_did_and_goes_on(tmp_path: Path) -> None:
    """``data/agents_session_v1.tkvbundle``: a session the code before this mapping wrote (user messages,
    reasoning, calls, a result, an assistant message, a pop; made with ``git archive`` of that tree). Read
    as it was (no migration: history is immutable and synced): the same items, the same compiled messages
    (calls, results and reasoning were hidden notes); new items go on it with the new mapping, and a result
    of a call stored as a note stays a note (so compile repairs nothing)."""
    bundle = tmp_path / "old.tkvbundle"
    shutil.copy(HERE / "data" / "agents_session_v1.tkvbundle", bundle)
    store = str(tmp_path / "s")
    Tract.clone(str(bundle), store).close()
    with TractkvSession("old", store) as session:
        items = asyncio.run(session.get_items())
        assert [i.get("type", "message") for i in items] == [
            "message",
            "reasoning",
            "function_call",
            "function_call_output",
            "message",
            "message",
            "function_call",
        ]
        assert items[1]["encrypted_content"] == "ENC1"
        assert items[-1]["call_id"] == "c2"
        with Tract.open(store, branch=session_branch("old")) as t:
            before = [(m.role, m.content) for m in t.compile().messages]
            assert before == [
                ("user", "weather in Paris?"),
                ("assistant", "Sunny in Paris."),
                ("user", "and Rome?"),
            ]
        asyncio.run(
            session.add_items(
                [
                    {"type": "function_call_output", "call_id": "c2", "output": "rain"},
                    {"type": "function_call", "call_id": "c3", "name": "weather", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "c3", "output": "hail"},
                ]
            )
        )
        assert len(asyncio.run(session.get_items())) == 10
        with Tract.open(store, branch=session_branch("old")) as t:
            ctx = t.compile()
            assert [(m.role, m.content) for m in ctx.messages] == [
                *before,
                ("assistant", ""),
                ("tool", "hail"),
            ]
            assert ctx.repairs == ()
            assert [turn.tool_names for turn in t.find_tool_turns()] == [("weather",)]
        assert asyncio.run(session.pop_item())["output"] == "hail"
        assert asyncio.run(session.pop_item())["call_id"] == "c3"
        assert asyncio.run(session.pop_item())["output"] == "rain"
        assert asyncio.run(session.get_items()) == items
        assert asyncio.run(session.pop_item()) == items[-1]  # an item the old code wrote: a skip, as before
        assert asyncio.run(session.get_items()) == items[:-1]
    with Tract.open(store) as t:
        t.branch("elsewhere")  # the clone stood on the session's branch: a checked-out one is kept
    with TractkvSession("old", store) as session:
        asyncio.run(session.clear_session())
        assert asyncio.run(session.get_items()) == []


def test_what_a_message_cannot_hold_still_shows_what_it_can(tmp_path: Path) -> None:
    """An empty function output is a result all the same (``(no output)``, as the toolkit says), so its call
    is answered; a user message with an image that is not what it says shows its text; an empty message
    has nothing to show (a note)."""
    items = [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "see"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
            ],
        },
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{"},
        {"type": "function_call_output", "call_id": "c", "output": ""},
        {"role": "assistant", "content": ""},
    ]
    with TractkvSession("s", str(tmp_path / "s")) as session:
        asyncio.run(session.add_items(items))
        assert asyncio.run(session.get_items()) == items
    with Tract.open(str(tmp_path / "s"), branch=session_branch("s")) as t:
        ctx = t.compile()
        assert [(m.role, m.content) for m in ctx.messages] == [
            ("user", "see"),
            ("assistant", ""),
            ("tool", "(no output)"),
        ]
        assert ctx.messages[1].tool_calls[0].arguments == {}  # not JSON: the exact string stays in the item
        assert _params(ctx, "responses")["input"][1]["arguments"] == "{"
        assert ctx.repairs == ()
        assert t.log()[0].content_type == "reasoning"


def test_tools_in_force_and_refusals(tmp_path: Path) -> None:
    tool = {"type": "function", "name": "f", "description": "F.", "parameters": {"type": "object"}}
    with pytest.raises(InvalidInput, match="tools must be an Agent or a list"):
        TractkvSession("s", str(tmp_path / "s"), tools="f")
    assert not (tmp_path / "s").exists()  # refused before the store was opened
    with TractkvSession("s", str(tmp_path / "s"), tools=[tool]) as session:
        asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
        session.tools = None  # later calls keep the branch's tool set
        asyncio.run(session.add_items([{"role": "user", "content": "again"}]))
    with Tract.open(str(tmp_path / "s"), branch=session_branch("s")) as t:
        assert [x["name"] for x in t.compile().tools] == ["f"]
        # what another machine's store may hold: a pop record that names no item of the turn it edits
        t.commit(
            {"type": "dialogue", "role": "user", "text": "x"}, metadata={"agents": {"v": 2, "pop": "ab" * 32}}
        )
        with TractkvSession("s", t) as session, pytest.raises(DecodeError, match="not an Agents SDK pop"):
            asyncio.run(session.get_items())
