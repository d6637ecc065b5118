"""Nothing lost on replay (issue 32, items 1 and 2): an Anthropic reply's blocks go back in the order received
(thinking interleaved with tool use), server tool blocks and citations go back as received (a ``pause_turn``
reply continued), ``tool_use.caller`` and the message's ``container`` are kept, and an OpenAI audio reply goes
back by id. Replies are served by the loopback recorder to the official SDKs, recorded from the SDK's object,
and the next request is sent through the SDK again: the request body is compared with what the provider
requires, byte for byte as JSON."""

from __future__ import annotations

import copy
import inspect
import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from tractkv import Tract
from tractkv.errors import ContentError, InvalidResponse, RejectedObject
from tractkv.llm import AnthropicClient

from .conftest import Recorder, anthropic_message, openai_completion
from .dialect_rules import RuleBroken, check_anthropic, check_chat, sdk_anthropic, sdk_chat

WEATHER = {"name": "weather", "description": "Weather in a city", "input_schema": {"type": "object"}}
SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}

# Server tools (web search, code execution with its container) came to the anthropic SDK after the floor the test
# group allows (0.47, the first with thinking): an older SDK cannot type those blocks nor take ``container=``.
# CI's floor tier runs the rest of this file on 0.47; the main tier runs these with the newest SDK.
SDK_HAS_SERVER_TOOLS = hasattr(anthropic.types, "ServerToolUseBlockParam") and "container" in (
    inspect.signature(anthropic.resources.Messages.create).parameters
)
needs_server_tools = pytest.mark.skipif(
    not SDK_HAS_SERVER_TOOLS,
    reason=f"anthropic {anthropic.__version__} predates server tool blocks and container=",
)


def interleaved() -> list[dict[str, Any]]:
    """An interleaved thinking turn as Anthropic sends it: thinking, a call, thinking, text, a call."""
    return [
        {"type": "thinking", "thinking": "Paris first.", "signature": "EqQBCgIYAhIMsig1"},
        {"type": "tool_use", "id": "toolu_01A", "name": "weather", "input": {"city": "Paris"}},
        {"type": "thinking", "thinking": "Oslo next.", "signature": "EqQBCgIYAhIMsig2"},
        {"type": "text", "text": "Checking Oslo too."},
        {"type": "tool_use", "id": "toolu_01B", "name": "weather", "input": {"city": "Oslo"}},
    ]


def message(blocks: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    body = anthropic_message(copy.deepcopy(blocks), model="claude-sonnet-4-5")
    body.update(fields)
    return body


def test_an_interleaved_thinking_turn_goes_back_in_the_order_received(
    recorder: Recorder, anthropic_sdk: anthropic.Anthropic
) -> None:
    recorder.reply(message(interleaved()))
    recorder.reply(message([{"type": "text", "text": "Paris 18°C, Oslo 9°C."}]))
    with Tract.open() as t:
        t.set_tools([WEATHER])
        t.user("Weather in Paris and Oslo?")
        reply = anthropic_sdk.messages.create(model="m", max_tokens=64, **t.compile().to_anthropic_params())
        t.record_response(reply)  # the SDK's Message object
        t.tool_result("toolu_01A", "weather", "18°C")
        t.tool_result("toolu_01B", "weather", "9°C")
        params = t.compile().to_anthropic_params()
        anthropic_sdk.messages.create(model="m", max_tokens=64, **params)
    sent = recorder.requests[1].body
    assert sent["messages"] == [
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": interleaved()},  # as received, block for block
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "18°C"},
                {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "9°C"},
            ],
        },
    ]
    thinking = [b for b in interleaved() if b["type"] == "thinking"]
    check_anthropic(params, thinking=thinking)
    sdk_anthropic(params)


def test_thinking_across_requests_of_one_turn_keeps_each_reply_in_order(
    recorder: Recorder, anthropic_sdk: anthropic.Anthropic
) -> None:
    """Multi-step tool use: each reply (thinking, then a call; thinking after the result, then a call again)
    is its own assistant turn between the results, each sent back as received."""
    first = [
        {"type": "thinking", "thinking": "Look it up.", "signature": "sigA"},
        {"type": "text", "text": "One moment."},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Rome"}},
    ]
    second = [
        {"type": "thinking", "thinking": "Rome is warm; check Bern.", "signature": "sigB"},
        {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Bern"}},
        {"type": "thinking", "thinking": "And Vienna.", "signature": "sigC"},
        {"type": "tool_use", "id": "toolu_3", "name": "weather", "input": {"city": "Vienna"}},
    ]
    with Tract.open() as t:
        t.set_tools([WEATHER])
        t.user("Rome?")
        plain = t.record_response(message(first))
        assert all(p["type"] != "anthropic_call" for p in plain.content["parts"])  # stored as before
        t.tool_result("toolu_1", "weather", "25°C")
        t.record_response(message(second))
        t.tool_result("toolu_2", "weather", "12°C")
        t.tool_result("toolu_3", "weather", "14°C")
        params = t.compile().to_anthropic_params()
    recorder.reply(message([{"type": "text", "text": "Done."}]))
    anthropic_sdk.messages.create(model="m", max_tokens=64, **params)
    turns = recorder.requests[0].body["messages"]
    assert turns[1] == {"role": "assistant", "content": first}
    assert turns[3] == {"role": "assistant", "content": second}
    check_anthropic(params, thinking=[b for b in first + second if b["type"] == "thinking"])


def search_turn() -> list[dict[str, Any]]:
    """A web search turn Anthropic paused (``pause_turn``), as its API sends it."""
    result = {
        "type": "web_search_result",
        "url": "https://www.met.no/oslo",
        "title": "Oslo forecast",
        "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y2M",
        "page_age": "November 28, 2026",
    }
    citation = {
        "type": "web_search_result_location",
        "url": "https://www.met.no/oslo",
        "title": "Oslo forecast",
        "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lM2M1LTQ1NjUtYjBmNC0xZmM2OWQ5NDcxMTcSDMkB",
        "cited_text": "Oslo: 9°C, light rain in the afternoon.",
    }
    return [
        {"type": "text", "text": "I'll search for the forecast."},
        {
            "type": "server_tool_use",
            "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
            "name": "web_search",
            "input": {"query": "Oslo weather today"},
        },
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
            "content": [result],
        },
        {"type": "text", "text": "Oslo has 9°C and light rain.", "citations": [citation]},
        {
            "type": "server_tool_use",
            "id": "srvtoolu_01XSsB6mDqAbL4Kn7dE2Ug9q",
            "name": "web_search",
            "input": {"query": "Bergen weather today"},
        },
    ]


@needs_server_tools
def test_a_paused_web_search_turn_is_sent_back_as_received_and_continued(
    recorder: Recorder, anthropic_sdk: anthropic.Anthropic
) -> None:
    usage = {"input_tokens": 6039, "output_tokens": 931, "server_tool_use": {"web_search_requests": 1}}
    paused = message(search_turn(), stop_reason="pause_turn", usage=usage)
    rest = [
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_01XSsB6mDqAbL4Kn7dE2Ug9q",
            "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
        },
        {"type": "text", "text": "Bergen I could not check."},
    ]
    recorder.reply(paused)
    recorder.reply(message(rest))
    recorder.reply(message([{"type": "text", "text": "You're welcome."}]))
    client = AnthropicClient("m", anthropic_sdk)
    with Tract.open() as t:
        t.set_tools([SEARCH])
        t.user("Weather in Oslo and Bergen?")
        first = t.generate(client)
        assert first.generation_config is not None
        assert first.generation_config["finish_reason"] == "pause_turn"
        assert [p["type"] for p in first.content["parts"]] == [
            "text",
            "anthropic_block",
            "anthropic_block",
            "text",
            "anthropic_block",
        ]
        paused_params = t.compile().to_anthropic_params()
        t.generate(client)  # continues the paused turn: the request ends with it, as received
        t.user("Thanks!")
        t.generate(client)
        ctx = t.compile()
    continued = recorder.requests[1].body
    assert continued["messages"] == [
        {"role": "user", "content": "Weather in Oslo and Bergen?"},
        {"role": "assistant", "content": search_turn()},
    ]
    assert continued["tools"] == [SEARCH]
    check_anthropic(paused_params)
    sdk_anthropic(paused_params)
    # the continuation joins the paused reply in one assistant turn, as Anthropic built it
    last = recorder.requests[2].body["messages"]
    assert last[1] == {"role": "assistant", "content": search_turn() + rest}
    assert last[2] == {"role": "user", "content": "Thanks!"}
    # other dialects: the text goes, the server blocks and citations are left out, each listed
    left = [(r.call_id, r.detail) for r in ctx.left_out("openai")]
    assert [name for name, _ in left] == [
        "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
        "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
        "citations",
        "srvtoolu_01XSsB6mDqAbL4Kn7dE2Ug9q",
        "srvtoolu_01XSsB6mDqAbL4Kn7dE2Ug9q",
    ]
    assert "web_search_tool_result" in left[1][1]
    chat = ctx.to_openai_params()
    assert chat["messages"][1:4] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll search for the forecast."},
                {"type": "text", "text": "Oslo has 9°C and light rain."},
            ],
        },
        {"role": "assistant", "content": "Bergen I could not check."},
        {"role": "user", "content": "Thanks!"},
    ]
    assert "srvtoolu" not in json.dumps(chat)
    assert "encrypted_index" not in json.dumps(chat)
    check_chat(chat)
    assert ctx.left_out("anthropic") == ()


def test_a_trailing_paused_turn_ending_in_whitespace_is_stripped_as_anthropic_requires() -> None:
    blocks = search_turn()[:4]
    blocks[-1] = {**blocks[-1], "text": "Oslo has 9°C and light rain.\n"}
    with Tract.open() as t:
        t.user("Oslo?")
        t.record_response(message(blocks, stop_reason="pause_turn"))
        params = t.compile().to_anthropic_params()
    sent = params["messages"][-1]["content"]
    assert sent[-1]["text"] == "Oslo has 9°C and light rain."
    assert sent[-1]["citations"] == blocks[-1]["citations"]
    check_anthropic(params)


def code_turn() -> list[dict[str, Any]]:
    """Code execution that calls a client tool from the code (programmatic tool calling: ``caller``)."""
    return [
        {
            "type": "server_tool_use",
            "id": "srvtoolu_01Code",
            "name": "code_execution",
            "input": {"code": "import tools\nprint(tools.weather(city='Oslo'))"},
        },
        {
            "type": "code_execution_tool_result",
            "tool_use_id": "srvtoolu_01Code",
            "content": {
                "type": "code_execution_result",
                "stdout": "",
                "stderr": "",
                "return_code": 0,
                "content": [],
            },
        },
        {
            "type": "tool_use",
            "id": "toolu_01Prog",
            "name": "weather",
            "input": {"city": "Oslo"},
            "caller": {"type": "code_execution_20250825", "tool_id": "srvtoolu_01Code"},
        },
    ]


@needs_server_tools
def test_caller_and_container_are_kept_and_sent_back(
    recorder: Recorder, anthropic_sdk: anthropic.Anthropic
) -> None:
    container = {"id": "container_011CZBvuS5ZDtgnVy7d4eWqn", "expires_at": "2026-11-28T15:04:05Z"}
    recorder.reply(message(code_turn(), container=container, stop_reason="tool_use"))
    recorder.reply(message([{"type": "text", "text": "9°C."}]))
    recorder.reply(message([{"type": "text", "text": "Bye."}]))
    client = AnthropicClient("m", anthropic_sdk)
    with Tract.open() as t:
        t.set_tools([WEATHER, {"type": "code_execution_20250825", "name": "code_execution"}])
        t.user("Oslo?")
        info = t.generate(client)
        assert info.content["parts"][-1] == {"type": "anthropic_container", "container": container}
        t.tool_result("toolu_01Prog", "weather", "9°C")
        params = t.compile().to_anthropic_params()
        t.generate(client)
        t.user("Thanks")
        later = t.compile().to_anthropic_params()
        t.generate(client)
    assert params["container"] == container["id"]
    body = recorder.requests[1].body
    assert body["container"] == container["id"]  # the SDK's container parameter
    assert body["messages"][1] == {"role": "assistant", "content": code_turn()}  # caller included
    assert "container" not in later  # the latest assistant turn recorded none
    assert "container" not in recorder.requests[2].body
    check_anthropic(params)
    sdk_anthropic(params)


def test_an_openai_audio_reply_goes_back_by_id(recorder: Recorder, openai_sdk: openai.OpenAI) -> None:
    audio = {
        "id": "audio_abc123",
        "data": "UklGRiQAAABXQVZF",
        "expires_at": 1_764_342_000,
        "transcript": "Hi!",
    }
    reply = openai_completion(None)
    reply["choices"][0]["message"]["audio"] = audio
    recorder.reply(reply)
    recorder.reply(openai_completion("Sure."))
    with Tract.open() as t:
        t.user("Say hi.")
        recorded = openai_sdk.chat.completions.create(
            model="gpt-4o-audio-preview", messages=t.compile().to_openai()
        )
        info = t.record_response(recorded)
        assert info.content["parts"] == [
            {"type": "openai_audio", "id": "audio_abc123", "transcript": "Hi!", "expires_at": 1_764_342_000}
        ]
        t.user("Again?")
        ctx = t.compile()
        params = ctx.to_openai_params()
        openai_sdk.chat.completions.create(model="gpt-4o-audio-preview", **params)
    assert recorder.requests[1].body["messages"] == [
        {"role": "user", "content": "Say hi."},
        {"role": "assistant", "audio": {"id": "audio_abc123"}},
        {"role": "user", "content": "Again?"},
    ]
    check_chat(params)
    sdk_chat(params)
    assert [(r.call_id, r.kind) for r in ctx.left_out("anthropic")] == [("audio_abc123", "dropped_item")]
    assert ctx.left_out("openai") == ()


def test_a_reply_in_the_order_anthropic_renders_is_stored_as_before() -> None:
    """Placement parts only where the order needs them: a reply in today's order keeps today's payload (and
    id); a call with a caller is placed."""
    blocks = [
        {"type": "thinking", "thinking": "t", "signature": "s"},
        {"type": "text", "text": "Calling."},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}},
    ]
    with Tract.open() as t:
        t.user("?")
        info = t.record_response(message(blocks))
        assert info.content["parts"] == blocks[:2]
        t.tool_result("toolu_1", "weather", "ok")
        caller = copy.deepcopy(blocks)
        caller[2] = {**caller[2], "id": "toolu_2", "caller": {"type": "direct"}}
        placed = t.record_response(message(caller))
        assert placed.content["parts"][2] == {
            "type": "anthropic_call",
            "call_id": "toolu_2",
            "caller": {"type": "direct"},
        }


# --- the trust boundary: written and received alike -----------------------------------------------------------


BAD_PARTS = [
    (
        {"type": "anthropic_block", "block": {"type": "server_tool_use", "name": "web_search", "input": {}}},
        "id",
    ),
    (
        {"type": "anthropic_block", "block": {"type": "tool_use", "id": "x", "name": "f", "input": {}}},
        "server tool",
    ),
    ({"type": "anthropic_block", "block": {"type": "web_search_tool_result", "content": []}}, "tool_use_id"),
    ({"type": "anthropic_call", "call_id": "nope"}, "not one of the message's tool_calls"),
    ({"type": "anthropic_call", "call_id": "c1", "caller": "direct"}, "caller"),
    ({"type": "anthropic_container", "container": {"expires_at": "x"}}, "string id"),
    ({"type": "openai_audio", "id": ""}, "audio's string id"),
    ({"type": "text", "text": "x", "citations": []}, "citations"),
]


@pytest.mark.parametrize(("part", "words"), BAD_PARTS)
def test_a_malformed_provider_part_is_refused_on_write_and_by_the_validator(
    part: dict[str, Any], words: str
) -> None:
    from tractkv.engine.history.validate import tag
    from tractkv.model import Blob

    call = [{"id": "c1", "name": "f", "arguments": {}}]
    with Tract.open() as t, pytest.raises(ContentError, match=words):
        t.assistant(["ok", part], tool_calls=call)
    payload = {
        "type": "dialogue",
        "role": "assistant",
        "text": "ok",
        "parts": [{"type": "text", "text": "ok"}, part],
        "tool_calls": call,
    }
    assert words in tag(Blob(data=payload))


def test_an_edit_keeps_the_order_and_a_call_it_adds_goes_last() -> None:
    with Tract.open() as t:
        t.user("Weather?")
        info = t.record_response(message(interleaved()))
        calls = [
            *info.content["tool_calls"],
            {"id": "toolu_01C", "name": "weather", "arguments": {"city": "Rome"}},
        ]
        t.commit(
            {"type": "dialogue", "role": "assistant", "text": "Checking all three.", "tool_calls": calls},
            operation="edit",
            edit_target=info.commit_id,
        )
        for call in ("toolu_01A", "toolu_01B", "toolu_01C"):
            t.tool_result(call, "weather", "ok")
        sent = t.compile().to_anthropic_params()["messages"][1]["content"]
    edited = [*interleaved()[:3], {"type": "text", "text": "Checking all three."}, interleaved()[4]]
    assert sent == [
        *edited,
        {"type": "tool_use", "id": "toolu_01C", "name": "weather", "input": {"city": "Rome"}},
    ]
    with Tract.open() as t, pytest.raises(ContentError, match="placed twice"):
        t.assistant(
            [{"type": "anthropic_call", "call_id": "c1"}, {"type": "anthropic_call", "call_id": "c1"}],
            tool_calls=[{"id": "c1", "name": "f", "arguments": {}}],
        )


def test_citations_belong_to_assistant_text() -> None:
    with Tract.open() as t, pytest.raises(ContentError, match="assistant message only"):
        t.user([{"type": "text", "text": "x", "citations": [{"type": "char_location"}]}])


def test_a_malformed_server_block_in_a_reply_is_an_invalid_response() -> None:
    with Tract.open() as t:
        t.user("?")
        for bad in (
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": "q"},
            {"type": "web_fetch_tool_result", "content": {}},
        ):
            with pytest.raises(InvalidResponse, match="content\\[0\\]"):
                t.record_response(message([bad]))
        with pytest.raises(InvalidResponse, match="container"):
            t.record_response(message([{"type": "text", "text": "x"}], container={"expires_at": "x"}))
        assert len(t.log()) == 1


def _hostile_commit(t: Tract, part: dict[str, Any]) -> None:
    """Commit a message holding ``part`` as an older or hostile writer could: objects written raw."""
    from tractkv.ids import ObjectId
    from tractkv.model import Blob, Commit, encode_with_id

    payload = {
        "type": "dialogue",
        "role": "assistant",
        "text": "ok",
        "parts": [{"type": "text", "text": "ok"}, part],
    }
    blob_id, blob_data = encode_with_id(Blob(data=payload))
    head = ObjectId(t.head or "")
    commit_id, commit_data = encode_with_id(
        Commit(parents=(head,), content=blob_id, created_at=1_800_000_000_000_000)
    )
    store = t.store
    batch = store.new_batch()
    batch.put_raw(blob_id, blob_data)
    batch.put_raw(commit_id, commit_data)
    batch.set_ref("refs/heads/main", commit_id)
    store.apply(batch)


MALFORMED_BLOCK = {"type": "anthropic_block", "block": {"type": "server_tool_use", "id": "srvtoolu_1"}}


@pytest.mark.parametrize("via", ["path", "bundle"])
def test_a_push_or_bundle_with_a_malformed_provider_block_is_refused(tmp_path: Path, via: str) -> None:
    from tractkv.sync.bundle import write_bundle

    with Tract.open(str(tmp_path / "a"), durable=False) as a:
        a.user("Search?")
        a.record_response(message(search_turn()[:3]))  # a well-formed server block passes
        a.remote_add("origin", str(tmp_path / "b"))
        Tract.open(str(tmp_path / "b"), durable=False).close()
        assert a.push().ok
        _hostile_commit(a, MALFORMED_BLOCK)
        if via == "path":
            with pytest.raises(RejectedObject, match="server_tool_use block needs"):
                a.push()
        else:
            write_bundle(
                a.store,
                str(tmp_path / "x.tkvbundle"),
                {"refs/heads/main": a.store.get_ref("refs/heads/main")},
            )
    with Tract.open(str(tmp_path / "b"), durable=False) as b:
        if via == "bundle":
            b.remote_add("usb", str(tmp_path / "x.tkvbundle"))
            with pytest.raises(RejectedObject, match="server_tool_use block needs"):
                b.fetch("usb")
        assert len(b.log()) == 2  # nothing of the refused objects landed
        assert not any(x.is_remote for x in b.list_branches())


def test_the_rules_catch_what_the_renderer_must_not_do() -> None:
    """The rules the property test checks find a server result with no use before it, and an assistant turn
    holding thinking that does not start with it."""
    blocks = search_turn()
    orphan = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": blocks[2:]}]}
    with pytest.raises(RuleBroken, match="answers no server tool use"):
        check_anthropic(orphan)
    late = {"role": "assistant", "content": [{"type": "text", "text": "a"}, *interleaved()]}
    with pytest.raises(RuleBroken, match="starts with its thinking"):
        check_anthropic({"messages": [{"role": "user", "content": "q"}, late]}, open_tail=True)


def test_the_chat_rules_take_an_audio_reply_by_id_only() -> None:
    base = [{"role": "user", "content": "hi"}]
    check_chat({"messages": [*base, {"role": "assistant", "audio": {"id": "audio_1"}}]})
    with pytest.raises(RuleBroken, match="audio is"):
        check_chat({"messages": [*base, {"role": "assistant", "audio": {"id": "audio_1", "data": "UklG"}}]})
    with pytest.raises(RuleBroken, match="needs content"):
        check_chat({"messages": [*base, {"role": "assistant"}]})


def test_a_named_ordered_reply_keeps_its_thinking_first() -> None:
    with Tract.open() as t:
        t.user("Weather?")
        info = t.record_response(message([b for b in interleaved() if b["type"] != "text"]))
        t.commit({**info.content, "name": "scout"}, operation="edit", edit_target=info.commit_id)
        t.tool_result("toolu_01A", "weather", "18°C")
        t.tool_result("toolu_01B", "weather", "9°C")
        params = t.compile().to_anthropic_params()
    sent = params["messages"][1]["content"]
    assert [b["type"] for b in sent] == ["thinking", "text", "tool_use", "thinking", "tool_use"]
    assert sent[1] == {"type": "text", "text": "scout:"}
    check_anthropic(params)
