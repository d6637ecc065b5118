"""ScriptedLLM: order, dict responses, recorded calls, exhaustion; and it drives Tract.generate."""

from __future__ import annotations

from typing import Any

import pytest

from tractkv import ToolCall, Tract
from tractkv.engine.content import Message
from tractkv.errors import InvalidInput, LLMError, ScriptExhausted, TractError
from tractkv.llm import LLMClient, LLMResponse, ScriptedCall, ScriptedLLM

HELLO = (Message(role="user", content="hi"),)


def test_serves_in_order_and_records_calls() -> None:
    llm = ScriptedLLM(["one", "two"])
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    answer = Message(role="assistant", content="one")

    first = llm.chat(HELLO, tools=tools, temperature=0.1)
    second = llm.chat([*HELLO, answer])

    assert (first.text, second.text) == ("one", "two")
    assert first.finish_reason == "stop"
    assert first.tool_calls == ()
    assert llm.calls == [
        ScriptedCall(messages=HELLO, tools=tools, params={"temperature": 0.1}),
        ScriptedCall(messages=(*HELLO, answer), tools=None, params={}),
    ]
    assert llm.remaining == 0
    assert isinstance(llm, LLMClient)


def test_calls_are_copies() -> None:
    llm = ScriptedLLM(["ok"])
    messages = list(HELLO)
    tools: list[dict[str, Any]] = [{"name": "f", "input_schema": {"type": "object"}}]
    params = {"metadata": {"k": "v"}}
    llm.chat(messages, tools=tools, **params)
    messages.append(Message(role="user", content="more"))
    tools[0]["input_schema"]["type"] = "changed"
    params["metadata"]["k"] = "changed"
    assert llm.calls[0].messages == HELLO
    assert llm.calls[0].tools == [{"name": "f", "input_schema": {"type": "object"}}]
    assert llm.calls[0].params == {"metadata": {"k": "v"}}


@pytest.mark.parametrize(
    "messages",
    [[{"role": "user", "content": "hi"}], [42], "hi", None],
    ids=["message-dict", "item", "string", "none"],
)
def test_messages_that_are_not_messages_are_refused_and_not_recorded(messages: Any) -> None:
    llm = ScriptedLLM(["unused"])
    with pytest.raises(InvalidInput, match="Message"):
        llm.chat(messages)
    assert (llm.calls, llm.remaining) == ([], 1)


@pytest.mark.parametrize("arguments", ['{"city": "Paris"}', {"city": "Paris"}], ids=["json-string", "dict"])
def test_openai_message_dicts(arguments: object) -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}
        ],
    }
    response = ScriptedLLM([message]).chat(HELLO)
    assert response.text == ""
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == (ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"}),)
    assert response.tool_calls[0].arguments == {"city": "Paris"}


def test_flat_tool_calls_text_and_llm_responses() -> None:
    prepared = LLMResponse(text="prepared", model="x")
    llm = ScriptedLLM(
        [
            {
                "content": "Let me look.",
                "tool_calls": [{"id": "c1", "name": "search", "arguments": {"q": "tractkv"}}],
            },
            prepared,
        ],
        model="scripted-model",
    )
    first = llm.chat(HELLO)
    assert first.text == "Let me look."
    assert first.model == "scripted-model"
    assert first.tool_calls == (ToolCall(id="c1", name="search", arguments={"q": "tractkv"}),)
    assert llm.chat(HELLO) is prepared


def test_exhaustion_is_a_clear_error_and_still_recorded() -> None:
    llm = ScriptedLLM(["only"])
    llm.chat(HELLO)
    with pytest.raises(ScriptExhausted, match="all 1 scripted response") as info:
        llm.chat([Message(role="user", content="again")])
    assert isinstance(info.value, LLMError)
    assert isinstance(info.value, TractError)
    assert info.value.served == 1
    assert len(llm.calls) == 2
    assert llm.calls[1].messages == (Message(role="user", content="again"),)

    with pytest.raises(ScriptExhausted):
        ScriptedLLM([]).chat(HELLO)


@pytest.mark.parametrize(
    "bad",
    [
        42,
        None,
        {"role": "user", "content": "not an assistant"},
        {"content": None, "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": 7}}]},
        {"content": None, "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
        {"content": None, "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]},
        {"content": 3},
    ],
)
def test_malformed_scripts_fail_when_given(bad: object) -> None:
    with pytest.raises(InvalidInput, match="scripted response 1"):
        ScriptedLLM(["fine", bad])  # type: ignore[list-item]


def test_scripted_tool_calls_drive_generate() -> None:
    """The script's tool calls and text land in the branch through Tract.generate."""
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    llm = ScriptedLLM(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            "It is sunny in Paris.",
        ]
    )
    with Tract.open(llm=llm) as t:
        t.user("Weather in Paris?", tools=[weather])
        t.generate()
        t.commit({"type": "dialogue", "role": "tool", "tool_call_id": "call_1", "text": "sunny"})
        t.generate(temperature=0)
        ctx = t.compile()

    assert [m.role for m in ctx.messages] == ["user", "assistant", "tool", "assistant"]
    assert ctx.messages[1].tool_calls == (
        ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"}),
    )
    assert ctx.messages[3].content == "It is sunny in Paris."
    assert llm.calls[0].tools == [weather]
    assert llm.calls[1].messages == tuple(ctx.messages[:3])  # the compiled context, as Messages
    assert llm.calls[1].messages[-1] == Message(role="tool", content="sunny", tool_call_id="call_1")
    assert llm.calls[1].params == {"temperature": 0}


def test_generate_refuses_misshapen_tools_before_calling_the_model() -> None:
    """A tool that is no accepted shape is refused before the model is called (nothing paid, nothing written)."""
    llm = ScriptedLLM(["never sent"])
    with Tract.open(llm=llm) as t:
        t.user("hello")
        head = t.head
        with pytest.raises(InvalidInput, match="tool"):
            t.generate(tools=[{"type": "functoin", "name": "x"}])
        assert llm.calls == []
        assert t.head == head
