"""``record_response`` takes LangChain's ``AIMessage`` / ``AIMessageChunk`` (the object, its ``model_dump()`` or
``messages_to_dict``'s form): content blocks in order, tool calls (invalid ones as their exact string), usage and
response metadata. tractkv imports nothing of LangChain: it reads the shape."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tractkv import InvalidResponse, Tract

messages = pytest.importorskip("langchain_core.messages")
AIMessage, AIMessageChunk = messages.AIMessage, messages.AIMessageChunk

THINKING = {
    "type": "thinking",
    "thinking": "Paris weather: call the tool.",
    "signature": "EqQBCkYIBxgCKkA+sig/==",
}
TOOL_USE = {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}


def claude_ai_message() -> Any:
    """An AIMessage as langchain-anthropic makes it from a thinking + tool_use reply."""
    return AIMessage(
        content=[THINKING, {"type": "text", "text": "Let me check."}, TOOL_USE],
        tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "toolu_01"}],
        usage_metadata={
            "input_tokens": 310,
            "output_tokens": 95,
            "total_tokens": 405,
            "input_token_details": {"cache_read": 2048, "cache_creation": 0},
        },
        response_metadata={"model_name": "claude-sonnet-4-5", "stop_reason": "tool_use", "id": "msg_1"},
        id="run-1",
    )


def recorded(reply: Any) -> Tract:
    t = Tract.open()
    t.user("Weather in Paris?")
    t.record_response(reply)
    return t


@pytest.mark.parametrize(
    "form",
    [lambda m: m, lambda m: m.model_dump(), lambda m: messages.messages_to_dict([m])[0]],
    ids=["object", "model_dump", "messages_to_dict"],
)
def test_an_anthropic_ai_message_keeps_thinking_calls_usage_and_model(form: Any) -> None:
    t = recorded(form(claude_ai_message()))
    info = t.log(1)[0]
    assert info.content == {
        "type": "dialogue",
        "role": "assistant",
        "text": "Let me check.",
        "parts": [THINKING, {"type": "text", "text": "Let me check."}],
        "tool_calls": [{"id": "toolu_01", "name": "get_weather", "arguments": {"city": "Paris"}}],
    }
    assert info.generation_config == {"model": "claude-sonnet-4-5", "finish_reason": "tool_use"}
    assert info.usage == {
        "input_tokens": 310,
        "output_tokens": 95,
        "total_tokens": 405,
        "input_token_details": {"cache_read": 2048, "cache_creation": 0},
        "cache_read_input_tokens": 2048,
        "cache_creation_input_tokens": 0,
    }
    t.tool_result("toolu_01", "get_weather", "18°C")
    turn = t.compile().to_anthropic_params()["messages"][1]["content"]
    assert turn[0] == THINKING
    assert turn[-1] == TOOL_USE


def test_an_openai_ai_message_keeps_invalid_calls_as_written_and_the_refusal() -> None:
    reply = AIMessage(
        content="",
        tool_calls=[{"name": "get_weather", "args": {"city": "Rome"}, "id": "call_1"}],
        invalid_tool_calls=[
            {"name": "get_weather", "args": '{"city": "Par', "id": "call_2", "error": "bad JSON"},
            {"name": None, "args": "{", "id": None, "error": "no name"},
        ],
        additional_kwargs={"refusal": "Not that.", "audio": {"id": "audio_1"}},
        response_metadata={"model_name": "gpt-5", "finish_reason": "tool_calls"},
    )
    t = recorded(reply)
    info = t.log(1)[0]
    assert info.content["tool_calls"] == [
        {"id": "call_1", "name": "get_weather", "arguments": {"city": "Rome"}},
        {"id": "call_2", "name": "get_weather", "arguments": {}, "invalid_arguments": '{"city": "Par'},
    ]
    assert info.content["parts"] == [{"type": "refusal", "refusal": "Not that."}]
    assert info.metadata["omitted_blocks"] == [
        {"type": "langchain_field", "field": "audio", "value": {"id": "audio_1"}},
        {
            "type": "langchain_invalid_tool_call",
            "call": {"type": "invalid_tool_call", "args": "{", "error": "no name"},
        },
    ]
    t.tool_result("call_1", "get_weather", "14°C")
    t.tool_result("call_2", "get_weather", "Error: bad arguments", is_error=True)
    sent = t.compile().to_openai_params()["messages"][1]["tool_calls"]
    assert [c["function"]["arguments"] for c in sent] == ['{"city":"Rome"}', '{"city": "Par']


def test_standard_reasoning_blocks_openai_reasoning_items_and_images() -> None:
    image = {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}
    reasoning_item = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Plan."}],
        "encrypted_content": "ENC",
        "index": 0,
    }
    reply = AIMessage(
        content=[
            {"type": "reasoning", "reasoning": "signed", "extras": {"signature": "SIG"}},
            {"type": "reasoning", "reasoning": "unsigned"},
            reasoning_item,
            {"type": "text", "text": "Here.", "annotations": [{"type": "citation", "url": "https://x.org"}]},
            image,
        ]
    )
    info = recorded(reply).log(1)[0]
    assert info.content["parts"] == [
        {"type": "thinking", "thinking": "signed", "signature": "SIG"},
        {"type": "reasoning", "reasoning": "unsigned"},
        {
            "type": "responses_item",
            "item": {k: v for k, v in reasoning_item.items() if k != "index"},
        },
        {"type": "text", "text": "Here."},
    ]
    kept = info.metadata["omitted_blocks"]
    assert [k["block"]["type"] for k in kept] == ["text", "image"]  # the annotated text, the image


def test_a_chunk_keeps_its_streamed_argument_strings() -> None:
    first = AIMessageChunk(
        content="Checking.",
        tool_call_chunks=[{"name": "get_weather", "args": '{"city": ', "id": "c1", "index": 0}],
    )
    second = AIMessageChunk(
        content="", tool_call_chunks=[{"name": None, "args": '"Paris"}', "id": None, "index": 0}]
    )
    whole = first + second
    assert whole.tool_calls[0]["args"] == {"city": "Paris"}
    info = recorded(whole).log(1)[0]
    assert info.content["tool_calls"] == [{"id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}]
    cut = AIMessageChunk(
        content="",
        tool_call_chunks=[{"name": "get_weather", "args": '{"city": "Par', "id": "c2", "index": 0}],
    )
    assert cut.tool_calls[0]["args"] == {"city": "Par"}  # LangChain's partial-JSON repair of a cut-off stream
    info = recorded(cut).log(1)[0]
    assert info.content["tool_calls"] == [
        {"id": "c2", "name": "get_weather", "arguments": {}, "invalid_arguments": '{"city": "Par'}
    ]


def test_a_plain_dict_in_the_dump_shape_is_read_too() -> None:
    info = recorded({"type": "ai", "content": "Hello."}).log(1)[0]
    assert info.content == {"type": "dialogue", "role": "assistant", "text": "Hello."}


def test_a_reasoning_content_kwarg_is_reasoning_text() -> None:
    reply = AIMessage(content="4", additional_kwargs={"reasoning_content": "2 + 2."})
    info = recorded(reply).log(1)[0]
    assert info.content["parts"] == [
        {"type": "reasoning", "reasoning": "2 + 2."},
        {"type": "text", "text": "4"},
    ]


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (AIMessage(content="x", tool_calls=[{"name": "f", "args": {}, "id": None}]), "has no id"),
        (messages.HumanMessage("hi"), "only an AI message"),
        (AIMessage(content=[{"type": "thinking", "signature": "s"}]), "has no 'thinking' string"),
    ],
)
def test_what_is_not_a_usable_reply_is_refused(reply: Any, error: str) -> None:
    t = Tract.open()
    t.user("hi")
    with pytest.raises(InvalidResponse, match=error):
        t.record_response(reply)
    assert len(t.log()) == 1


def test_tractkv_loads_no_langchain() -> None:
    code = (
        "import sys, tractkv\n"
        "t = tractkv.Tract.open(); t.user('hi')\n"
        "t.record_response({'object': 'chat.completion', 'choices': [{'message': {'content': 'ok'}}]})\n"
        "print(sorted(m for m in sys.modules if m.startswith(('langchain', 'tractkv.llm.adapters'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


WEB_SEARCH_TURN = [
    THINKING,
    {"type": "text", "text": "Searching."},
    {
        "type": "server_tool_use",
        "id": "srvtoolu_01",
        "name": "web_search",
        "input": {"query": "Paris weather"},
        "caller": None,
    },
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_01",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://meteo.fr",
                "title": "Paris",
                "encrypted_content": "E",
            }
        ],
    },
    {
        "type": "text",
        "text": "It is 18°C.",
        "citations": [
            {
                "type": "web_search_result_location",
                "url": "https://meteo.fr",
                "cited_text": "18",
                "encrypted_index": "I",
            }
        ],
    },
    {
        "type": "code_execution_tool_result",
        "tool_use_id": "srvtoolu_02",
        "content": {"type": "x", "stdout": ""},
    },
    TOOL_USE,
    {"type": "text", "text": "Then more."},
]


@pytest.mark.parametrize("stream", [False, True], ids=["message", "streamed_with_index"])
def test_anthropic_server_tool_blocks_and_citations_read_as_the_anthropic_reader_reads_them(
    stream: bool,
) -> None:
    """A paused web-search turn via ChatAnthropic: the same parts (server blocks in place, the tool_use's
    place, citations on the text) as the Anthropic reader gives, nothing in omitted_blocks, replayed as sent."""
    from tractkv.llm import LLMResponse

    direct = LLMResponse.from_provider(
        {
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": WEB_SEARCH_TURN,
            "stop_reason": "pause_turn",
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )
    content = [{**b, "index": i} for i, b in enumerate(WEB_SEARCH_TURN)] if stream else WEB_SEARCH_TURN
    reply = AIMessage(
        content=content,
        tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "toolu_01"}],
        response_metadata={"model_name": "claude-sonnet-4-5", "stop_reason": "pause_turn"},
    )
    via = LLMResponse.from_provider(reply)
    assert via.parts == direct.parts
    assert via.omitted_blocks == ()
    assert [p["type"] for p in via.parts][2:5] == ["anthropic_block", "anthropic_block", "text"]
    t = recorded(reply)
    t.tool_result("toolu_01", "get_weather", "18°C")
    sent = t.compile().to_anthropic_params()["messages"][1]["content"]
    assert sent == [{k: v for k, v in b.items() if v is not None} for b in WEB_SEARCH_TURN]
