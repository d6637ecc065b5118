"""A tool call whose arguments are not a JSON object (invalid or cut-off JSON, an array, NaN) is recorded, kept
as the exact string (``invalid_arguments``, hashed with the message), sent back byte for byte to OpenAI's
dialects, sent as ``{}`` with a named repair to Anthropic and Gemini, verified on receive as on write, and
answered by the agent loop with an error result (the tool does not run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from tractkv import Tract, toolkit
from tractkv.engine.content import content_blob
from tractkv.engine.history import validate
from tractkv.errors import ContentError, InvalidResponse
from tractkv.llm import LLMResponse, ScriptedLLM
from tractkv.model import Blob
from tractkv.store import LmdbStore
from tractkv.toolkit import ToolContext, ToolExecutor, tool

from .conftest import Recorder, openai_completion, response_body

CUT_OFF = '{"city": "Par'
WRITTEN = [
    CUT_OFF,
    "[1, 2]",
    '{"x": NaN}',
    "42",
    '{"a": 1} trailing',
    "{'single': 'quotes'}",
    '{"n": 1e999}',
    "[" * 10**5,  # hostile nesting: kept as the string it is, never decoded (it was refused before)
]


def chat_call(arguments: str, call_id: str = "call_1", name: str = "get_weather") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def recorded(arguments: str) -> Tract:
    t = Tract.open()
    t.user("Weather in Paris?")
    t.record_response(openai_completion(None, [chat_call(arguments), chat_call('{"city":"Rome"}', "call_2")]))
    return t


@pytest.mark.parametrize("written", WRITTEN, ids=[w[:20] for w in WRITTEN])
def test_a_chat_call_with_arguments_that_are_not_an_object_is_recorded_exactly(written: str) -> None:
    t = recorded(written)
    calls = t.log(1)[0].content["tool_calls"]
    assert calls[0] == {"id": "call_1", "name": "get_weather", "arguments": {}, "invalid_arguments": written}
    assert calls[1] == {"id": "call_2", "name": "get_weather", "arguments": {"city": "Rome"}}
    message = t.compile().messages[-1]
    assert message.tool_calls[0].invalid_arguments == written
    assert message.tool_calls[1].invalid_arguments is None


def test_the_reader_keeps_the_string_and_refuses_what_is_no_call() -> None:
    reply = LLMResponse.from_provider(openai_completion(None, [chat_call(CUT_OFF)]))
    assert reply.tool_calls[0].arguments == {}
    assert reply.tool_calls[0].invalid_arguments == CUT_OFF
    assert reply.assistant_payload()["tool_calls"][0]["invalid_arguments"] == CUT_OFF
    no_id = {"type": "function", "function": {"name": "f", "arguments": CUT_OFF}}
    with pytest.raises(InvalidResponse, match="has no id"):
        LLMResponse.from_provider(openai_completion(None, [no_id]))
    blank = LLMResponse.from_provider(openai_completion(None, [chat_call("  ")]))
    assert (blank.tool_calls[0].arguments, blank.tool_calls[0].invalid_arguments) == ({}, None)


@pytest.mark.parametrize("written", [CUT_OFF, '{"x": NaN}', "[1, 2]"])
def test_chat_and_responses_get_the_string_back_byte_for_byte(
    written: str, recorder: Recorder, openai_sdk: openai.OpenAI
) -> None:
    t = recorded(written)
    t.tool_result("call_1", "get_weather", "Error: bad arguments", is_error=True)
    t.tool_result("call_2", "get_weather", "14°C")
    recorder.reply(openai_completion("ok"))
    recorder.reply(response_body())
    ctx = t.compile()
    openai_sdk.chat.completions.create(model="m", **ctx.to_openai_params())
    openai_sdk.responses.create(model="m", **ctx.to_responses_params())

    chat, responses = recorder.requests
    sent = chat.body["messages"][1]["tool_calls"]
    assert [c["function"]["arguments"] for c in sent] == [written, '{"city":"Rome"}']
    calls = [i for i in responses.body["input"] if i.get("type") == "function_call"]
    assert [c["arguments"] for c in calls] == [written, '{"city": "Rome"}']
    assert ctx.left_out("openai") == ctx.left_out("responses") == ()


def test_anthropic_and_gemini_get_an_empty_object_and_a_named_repair() -> None:
    t = recorded(CUT_OFF)
    t.tool_result("call_1", "get_weather", "Error: bad arguments", is_error=True)
    t.tool_result("call_2", "get_weather", "14°C")
    ctx = t.compile()
    blocks = ctx.to_anthropic_params()["messages"][1]["content"]
    assert [b["input"] for b in blocks] == [{}, {"city": "Rome"}]
    parts = ctx.to_gemini_params()["contents"][1]["parts"]
    assert [p["function_call"]["args"] for p in parts] == [{}, {"city": "Rome"}]
    for dialect in ("anthropic", "gemini"):
        (repair,) = ctx.left_out(dialect)
        assert (repair.kind, repair.call_id, repair.commit_id) == (
            "invalid_arguments",
            "call_1",
            ctx.commit_ids[1],
        )
        assert CUT_OFF in repair.detail
        assert "sent as {}" in repair.detail
    assert not ctx.repairs  # the pairing itself is whole


def test_a_responses_function_call_with_invalid_arguments_goes_to_chat_as_written() -> None:
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_9",
        "name": "get_weather",
        "arguments": CUT_OFF,
        "status": "completed",
    }
    t = Tract.open()
    t.user("Weather?")
    t.record_response(response_body([item]))
    t.tool_result("call_9", "get_weather", "Error", is_error=True)
    ctx = t.compile()
    assert ctx.messages[1].tool_calls[0].invalid_arguments == CUT_OFF
    assert ctx.to_openai_params()["messages"][1]["tool_calls"][0]["function"]["arguments"] == CUT_OFF
    assert ctx.to_responses_params()["input"][1]["arguments"] == CUT_OFF


def test_the_stored_form_is_hashed_and_has_one_spelling() -> None:
    payload = recorded(CUT_OFF).log(1)[0].content
    assert validate.tag(Blob(data=payload)) == "dialogue"
    other = json.loads(json.dumps(payload))
    other["tool_calls"][0]["invalid_arguments"] = '{"city": "Pa'
    assert content_blob(other) != content_blob(payload)  # the string is part of the message's identity
    bad = {
        "a JSON object": '{"city": "Paris"}',
        "blank": " ",
        "not a string": 7,
    }
    for why, value in bad.items():
        forged = json.loads(json.dumps(payload))
        forged["tool_calls"][0]["invalid_arguments"] = value
        assert validate.tag(Blob(data=forged)).startswith(validate.INVALID), why
        with pytest.raises(ContentError, match="invalid_arguments"):
            Tract.open().assistant("", tool_calls=forged["tool_calls"])
    forged = json.loads(json.dumps(payload))
    forged["tool_calls"][0]["arguments"] = {"city": "Paris"}
    assert validate.tag(Blob(data=forged)).startswith(validate.INVALID)
    forged["tool_calls"][0]["arguments"] = {}
    forged["tool_calls"][0]["invalid_arguments"] = None
    assert validate.tag(Blob(data=forged)).startswith(validate.INVALID)  # not the canonical form


def test_hand_written_calls_stay_strict_and_the_stored_form_is_accepted() -> None:
    t = Tract.open()
    t.user("go")
    with pytest.raises(ContentError, match=r"not valid JSON.*invalid_arguments"):
        t.assistant("", tool_calls=[chat_call(CUT_OFF)])
    info = t.assistant(
        "", tool_calls=[{"id": "c1", "name": "get_weather", "arguments": {}, "invalid_arguments": CUT_OFF}]
    )
    assert info.content["tool_calls"][0]["invalid_arguments"] == CUT_OFF


def test_a_store_with_such_a_call_syncs_and_compiles_the_same(tmp_path: Path) -> None:
    with Tract.open(str(tmp_path / "a"), durable=False) as a:
        a.user("Weather in Paris?")
        a.record_response(openai_completion(None, [chat_call(CUT_OFF)]))
        want = a.compile().to_openai_params()
        LmdbStore(str(tmp_path / "hub"), durable=False).close()
        a.remote_add("origin", str(tmp_path / "hub"))
        assert a.push().ok
    with Tract.clone(str(tmp_path / "hub"), str(tmp_path / "b"), durable=False) as b:
        assert b.compile().to_openai_params() == want


@tool
def get_weather(city: str, *, context: ToolContext) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    ran.append(city)
    return "14°C"


ran: list[str] = []


def test_the_agent_loop_answers_such_a_call_with_an_error_result() -> None:
    ran.clear()
    t = Tract.open()
    t.user("Weather in Paris?")
    llm = ScriptedLLM(
        [
            {"role": "assistant", "content": None, "tool_calls": [chat_call(CUT_OFF)]},
            {"role": "assistant", "content": None, "tool_calls": [chat_call('{"city": "Paris"}', "call_2")]},
            "14°C in Paris.",
        ]
    )
    result = toolkit.run(t, llm, ToolExecutor(t, profile=None, tools=[get_weather]))
    assert (result.text, result.stop_reason) == ("14°C in Paris.", "done")
    assert ran == ["Paris"]  # the malformed call did not run the tool
    error = t.compile().messages[2]
    assert (error.role, error.tool_call_id, error.is_error) == ("tool", "call_1", True)
    assert "not a JSON object" in error.content
    assert CUT_OFF in error.content
    failed = t.tool_usages()[0]
    assert (failed.status, failed.tool_call_id) == ("error", "call_1")
    # the model saw its own string and the error on its next call
    assert llm.calls[1].messages[1].tool_calls[0].invalid_arguments == CUT_OFF
    # re-running the failed execution fails again for the same reason, not for a made-up argument
    executor = ToolExecutor(t, profile=None, tools=[get_weather])
    rerun = toolkit.rerun_tool_usage(t, failed.id, executor)
    assert (rerun.status, rerun.rerun_of) == ("error", failed.id)
    assert "not a JSON object" in str(rerun.error)
    assert ran == ["Paris"]


OLD_PAYLOAD = {  # what a Responses reply with cut-off arguments stored before invalid_arguments existed
    "type": "dialogue",
    "role": "assistant",
    "text": "",
    "parts": [
        {
            "type": "responses_item",
            "item": {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_9",
                "name": "get_weather",
                "arguments": CUT_OFF,
                "status": "completed",
            },
        }
    ],
    "tool_calls": [{"id": "call_9", "name": "get_weather", "arguments": {}}],
}
OLD_ID = "e422260578e8a2c0585cdb7fc72b05ffde52745f438a3714c779ad9bf3f6d95a"  # written by the tree before


def test_a_call_stored_before_keeps_its_id_and_its_rendering() -> None:
    from tractkv.model import object_id

    assert object_id(content_blob(OLD_PAYLOAD)) == OLD_ID
    t = Tract.open()
    t.user("Weather?")
    assert t.commit(OLD_PAYLOAD).content == OLD_PAYLOAD
    t.tool_result("call_9", "get_weather", "Error", is_error=True)
    ctx = t.compile()
    assert ctx.to_openai_params()["messages"][1]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert ctx.to_responses_params()["input"][1]["arguments"] == CUT_OFF  # the item, verbatim
    assert ctx.left_out("anthropic") == ()


def test_json_output_shows_the_string() -> None:
    from tractkv.engine.content import ToolCall
    from tractkv.model import to_jsonable

    call = ToolCall(id="c", name="f", arguments={}, invalid_arguments=CUT_OFF)
    assert to_jsonable(call) == {"id": "c", "name": "f", "arguments": {}, "invalid_arguments": CUT_OFF}
    assert to_jsonable(ToolCall(id="c", name="f")) == {"id": "c", "name": "f", "arguments": {}}


def test_people_see_the_string_in_the_cli_the_export_and_the_viewer(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tractkv.cli import cli
    from tractkv.view.pages import _call_text

    store = str(tmp_path / "s")
    with Tract.open(store, durable=False) as t:
        t.user("Weather in Paris?")
        t.record_response(openai_completion(None, [chat_call(CUT_OFF)]))
        call = t.compile().messages[-1].tool_calls[0]
    runner = CliRunner()
    shown = runner.invoke(cli, ["--store", store, "compile", "--format", "text"])
    assert f"-> get_weather({CUT_OFF}) id=call_1" in shown.output
    exported = runner.invoke(cli, ["--store", store, "export", "--format", "markdown"])
    assert CUT_OFF in exported.output
    assert _call_text(call) == f"call get_weather (call_1):\n{CUT_OFF}"
