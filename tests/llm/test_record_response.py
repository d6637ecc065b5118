"""Reading provider replies (LLMResponse.from_provider, engine/render.py reply functions) and committing them
(Tract.record_response, generate): text, tool calls, refusals, thinking in order, usage normalized.

Replies here are plain dicts and the SDKs' own objects built with ``model_validate`` (no network); the
round trips through the SDKs against the loopback recorder are in test_record_response_sdk.py.
"""

from __future__ import annotations

import copy
from typing import Any

import anthropic.types
import openai.types.chat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tractkv import (
    ContentError,
    InvalidInput,
    InvalidResponse,
    MalformedResponse,
    ToolCall,
    Tract,
)
from tractkv.engine.content import (
    Message,
    anthropic_usage,
    messages_to_anthropic,
    openai_usage,
    reply_provider,
    to_message,
)
from tractkv.engine.content.payload import normalize
from tractkv.llm import LLMResponse, ScriptedLLM

from .conftest import anthropic_message, openai_completion

OPENAI_USAGE = {
    "prompt_tokens": 120,
    "completion_tokens": 30,
    "total_tokens": 150,
    "prompt_tokens_details": {"cached_tokens": 100, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 12, "audio_tokens": None},
}
ANTHROPIC_USAGE = {
    "input_tokens": 20,
    "output_tokens": 40,
    "cache_creation_input_tokens": 5,
    "cache_read_input_tokens": 900,
    "server_tool_use": None,
    "service_tier": "standard",
}
THINKING = {
    "type": "thinking",
    "thinking": "The user wants Paris weather.",
    "signature": "EqQBCgIYAhIM+sig==",
}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"}
TOOL_USE = {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}


def openai_tool_calls() -> list[dict[str, Any]]:
    return [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        },
        {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": ""}},
    ]


def thinking_message() -> dict[str, Any]:
    body = anthropic_message(
        [THINKING, REDACTED, {"type": "text", "text": "Let me check."}, TOOL_USE], model="claude-x"
    )
    body["usage"] = dict(ANTHROPIC_USAGE)
    return body


# --- reading: shape detection, parts, usage -----------------------------------------------------------------


def test_openai_completion_reads_text_tool_calls_and_normalized_usage() -> None:
    body = openai_completion("Checking.", openai_tool_calls(), model="gpt-x")
    body["usage"] = copy.deepcopy(OPENAI_USAGE)

    response = LLMResponse.from_provider(body)

    assert response.parts == ({"type": "text", "text": "Checking."},)
    assert response.tool_calls == (
        ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"}),
        ToolCall(id="call_2", name="get_time", arguments={}),
    )
    assert (response.model, response.finish_reason, response.refusal) == ("gpt-x", "tool_calls", None)
    assert response.usage == {
        **OPENAI_USAGE,
        "completion_tokens_details": {"reasoning_tokens": 12},  # None values left out
        "input_tokens": 120,
        "output_tokens": 30,
        "cache_read_input_tokens": 100,
        "reasoning_tokens": 12,
    }
    assert response.assistant_payload() == {
        "type": "dialogue",
        "role": "assistant",
        "text": "Checking.",  # one text part: no parts field
        "tool_calls": [
            {"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}},
            {"id": "call_2", "name": "get_time", "arguments": {}},
        ],
    }


def test_openai_refusal_is_a_part() -> None:
    body = openai_completion(None)
    body["choices"][0]["message"]["refusal"] = "I can't help with that."

    response = LLMResponse.from_provider(body)

    assert response.text == ""
    assert response.refusal == "I can't help with that."
    assert response.assistant_payload() == {
        "type": "dialogue",
        "role": "assistant",
        "text": "",
        "parts": [{"type": "refusal", "refusal": "I can't help with that."}],
    }


def test_anthropic_message_keeps_thinking_in_order_and_usage_extras() -> None:
    response = LLMResponse.from_provider(thinking_message())

    assert response.parts == (THINKING, REDACTED, {"type": "text", "text": "Let me check."})
    assert response.tool_calls == (ToolCall(id="toolu_01", name="get_weather", arguments={"city": "Paris"}),)
    assert (response.model, response.finish_reason) == ("claude-x", "tool_use")
    assert response.usage == {
        "input_tokens": 20,
        "output_tokens": 40,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 900,
        "service_tier": "standard",
    }
    assert response.assistant_payload() == {
        "type": "dialogue",
        "role": "assistant",
        "text": "Let me check.",
        "parts": [THINKING, REDACTED, {"type": "text", "text": "Let me check."}],
        "tool_calls": [{"id": "toolu_01", "name": "get_weather", "arguments": {"city": "Paris"}}],
    }


def test_sdk_objects_and_their_dumps_read_as_the_plain_bodies() -> None:
    openai_body = openai_completion("Checking.", openai_tool_calls())
    openai_body["usage"] = copy.deepcopy(OPENAI_USAGE)
    openai_body["choices"][0]["message"]["refusal"] = None
    completion = openai.types.chat.ChatCompletion.model_validate(openai_body)
    message = anthropic.types.Message.model_validate(thinking_message())

    for sdk_object, plain in ((completion, openai_body), (message, thinking_message())):
        expected = LLMResponse.from_provider(plain)
        for given_as in (sdk_object, sdk_object.model_dump(), sdk_object.model_dump(mode="json")):
            got = LLMResponse.from_provider(given_as)
            assert got == expected
            assert got.usage == expected.usage
            assert got.assistant_payload() == expected.assistant_payload()


def test_several_choices_record_the_one_asked_for() -> None:
    body = openai_completion("first")
    body["choices"].append(
        {"index": 1, "message": {"role": "assistant", "content": "second"}, "finish_reason": "stop"}
    )

    assert LLMResponse.from_provider(body).text == "first"
    assert LLMResponse.from_provider(body, choice=1).text == "second"
    with pytest.raises(InvalidResponse, match="2 choice"):
        LLMResponse.from_provider(body, choice=2)
    for bad in (-1, True, "1"):
        with pytest.raises(InvalidInput, match="choice"):
            LLMResponse.from_provider(body, choice=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="one reply"):
        LLMResponse.from_provider(anthropic_message(), choice=1)


class _BrokenDump:
    def model_dump(self, **kwargs: Any) -> Any:
        raise RuntimeError("boom")


class _ListDump:
    def model_dump(self) -> Any:  # no mode argument: still called
        return [1, 2]


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        ({}, "empty response"),
        (42, "not int"),
        ("hello", "not str"),
        (None, "not NoneType"),
        ({"object": "chat.completion.chunk", "choices": []}, "streaming chunk"),
        ({"type": "content_block_delta", "index": 0}, "streaming event"),
        ({"type": "message_start", "message": {}}, "streaming event"),
        ({"type": "error", "error": {"type": "overloaded_error"}}, "error response"),
        ({"object": "response", "output": None}, "Responses API object needs an 'output' list"),
        (
            {"object": "response", "status": "failed", "error": {"code": "server_error"}, "output": []},
            "failed",
        ),
        ({"type": "response.output_text.delta", "delta": "h"}, "streaming event"),
        ({"type": "message", "role": "assistant"}, "'content' list"),
        ({"id": "x", "role": "assistant", "content": "hi"}, "neither"),
        ({"object": "chat.completion", "choices": []}, "non-empty 'choices'"),
        ({"object": "chat.completion", "choices": [{"index": 0}]}, "no 'message'"),
        ({"object": "chat.completion", "choices": [{"message": {"content": 3}}]}, "must be text"),
        ({"object": "chat.completion", "choices": [{"message": {"refusal": 3}}]}, "refusal must be a string"),
        (
            {
                "object": "chat.completion",
                "choices": [{"message": {"content": "a"}}],
                "usage": {"total_tokens": 1},
            },
            "no prompt_tokens",
        ),
        (
            {
                "choices": [{"message": {"content": "a"}}],
                "usage": {"prompt_tokens": -1, "completion_tokens": 0},
            },
            "non-negative",
        ),
        ({"type": "message", "content": [{"type": "thinking", "thinking": "x"}]}, "'signature'"),
        ({"type": "message", "content": [{"type": "redacted_thinking"}]}, "'data'"),
        ({"type": "message", "content": [{"type": "text", "text": None}]}, "'text'"),
        ({"type": "message", "content": [{"type": "tool_use", "id": "t"}]}, "'id' and 'name'"),
        ({"type": "message", "content": ["text"]}, "not an object"),
        (
            {"type": "message", "content": [], "usage": {"input_tokens": "3", "output_tokens": 1}},
            "non-negative",
        ),
        ({"type": "message", "content": [], "usage": [1]}, "usage must be an object"),
        (_BrokenDump(), "model_dump\\(\\) failed"),
        (_ListDump(), "returned list"),
    ],
)
def test_what_is_not_a_complete_reply_is_refused(response: object, reason: str) -> None:
    with pytest.raises(InvalidResponse, match=reason) as caught:
        LLMResponse.from_provider(response)
    # Bad input from the caller, and a malformed reply: either handler catches it.
    assert isinstance(caught.value, InvalidInput)
    assert isinstance(caught.value, MalformedResponse)


def test_reply_provider_reads_the_shape() -> None:
    assert reply_provider(openai_completion()) == "openai"
    assert reply_provider({"choices": []}) == "openai"  # compatible servers may leave out "object"
    assert reply_provider(anthropic_message()) == "anthropic"
    assert reply_provider({"object": "chat.completion.chunk", "choices": []}) is None
    assert reply_provider({"type": "message"}) is None


def test_usage_keeps_only_json_values() -> None:
    usage = {
        "input_tokens": 1,
        "output_tokens": 2,
        "nested": {"a": [1, None, 2.5, float("nan"), object()], "b": None},
        "bad": float("inf"),
        3: "non-str key",
    }
    assert anthropic_usage(usage) == {"input_tokens": 1, "output_tokens": 2, "nested": {"a": [1, 2.5]}}
    assert openai_usage(None) is None
    assert anthropic_usage(None) is None
    assert openai_usage({"input_tokens": 4, "output_tokens": 5}) == {"input_tokens": 4, "output_tokens": 5}


def test_llm_response_parts_are_checked() -> None:
    assert LLMResponse(text="hi").parts == ({"type": "text", "text": "hi"},)
    assert LLMResponse(text="hi") == LLMResponse(text="hi", parts=({"type": "text", "text": "hi"},))
    with pytest.raises(InvalidInput, match="joined"):
        LLMResponse(text="other", parts=({"type": "text", "text": "hi"},))
    for bad in ({"type": "image", "url": "x"}, {"type": "thinking", "thinking": "x"}, "text"):
        with pytest.raises(InvalidInput, match="parts\\[0\\]"):
            LLMResponse(parts=(bad,))  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="strings"):
        LLMResponse(parts=({"type": "refusal", "refusal": 3},))
    with pytest.raises(InvalidInput, match="usage"):
        LLMResponse(text="x", usage={"prompt_tokens": 3})


# Anthropic content blocks as a provider might send them: text (possibly empty), thinking, redacted thinking,
# tool use; the property: parts keep every non-tool block's order and value, tool calls keep theirs.
_text = st.text(max_size=12)
_block = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _text),
    st.builds(lambda t, s: {"type": "thinking", "thinking": t, "signature": s}, _text, _text),
    st.builds(lambda d: {"type": "redacted_thinking", "data": d}, _text),
    st.builds(
        lambda n, a: {"type": "tool_use", "name": n or "f", "input": a}, _text, st.dictionaries(_text, _text)
    ),
)


_THOUGHT = ("thinking", "redacted_thinking")


@settings(max_examples=300, deadline=None)
@given(st.lists(_block, max_size=8))
def test_anthropic_blocks_keep_their_order(blocks: list[dict[str, Any]]) -> None:
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            block["id"] = f"toolu_{index}"
    response = LLMResponse.from_provider(anthropic_message(copy.deepcopy(blocks)))

    expected = [b for b in blocks if b["type"] != "tool_use" and not (b["type"] == "text" and not b["text"])]
    parts = list(response.parts)
    assert [p for p in parts if p["type"] != "anthropic_call"] == expected
    placed = [p["call_id"] for p in parts if p["type"] == "anthropic_call"]
    assert placed in ([], [b["id"] for b in blocks if b["type"] == "tool_use"])
    assert response.text == "".join(b["text"] for b in blocks if b["type"] == "text")
    assert [c.to_payload() for c in response.tool_calls] == [
        {"id": b["id"], "name": b["name"], "arguments": b["input"]} for b in blocks if b["type"] == "tool_use"
    ]
    payload = response.assistant_payload()
    assert payload["text"] == response.text
    more_than_one_text = len(parts) > 1 or any(p["type"] != "text" for p in parts)
    assert ("parts" in payload) == more_than_one_text
    assert payload.get("parts", parts) == parts
    # replayed to Anthropic, the blocks come back in the order received (blank text is never sent; a final
    # assistant turn loses its trailing whitespace, as the API requires). Anthropic sends thinking first or
    # after a tool call (interleaved thinking), never right after text: a reply of text then thinking with
    # no call between is rendered thinking first, as every message stored before block order was kept
    kinds = [b["type"] for b in blocks]
    if any(k in _THOUGHT and i and kinds[i - 1] == "text" for i, k in enumerate(kinds)):
        return
    sent = [b for b in blocks if not (b["type"] == "text" and not b["text"].strip())]
    if sent and sent[-1]["type"] == "text":
        sent[-1] = {**sent[-1], "text": sent[-1]["text"].rstrip()}
    if not payload["text"] and "parts" not in payload and "tool_calls" not in payload:
        return  # nothing to commit
    message = to_message(normalize(payload))
    turns = messages_to_anthropic([Message(role="user", content="q"), message])["messages"][1:]
    content = turns[0]["content"] if turns else []
    assert (content if isinstance(content, list) else [{"type": "text", "text": content}]) == sent


# --- committing: record_response and generate ------------------------------------------------------------


def test_record_response_commits_text_tool_calls_usage_and_model() -> None:
    body = openai_completion("Checking.", openai_tool_calls(), model="gpt-x")
    body["usage"] = copy.deepcopy(OPENAI_USAGE)
    t = Tract.open()
    t.user("Weather in Paris?")

    info = t.record_response(openai.types.chat.ChatCompletion.model_validate(body))

    assert info.role == "assistant"
    assert info.content == LLMResponse.from_provider(body).assistant_payload()
    assert info.usage is not None
    assert (info.usage["input_tokens"], info.usage["output_tokens"]) == (120, 30)
    assert info.usage["cache_read_input_tokens"] == 100
    assert info.generation_config == {"model": "gpt-x", "finish_reason": "tool_calls"}
    # Read back: the same usage from the stored commit, in get_commit, log and to_json.
    stored = t.get_commit(info.commit_id)
    assert stored.usage == info.usage == stored.metadata["usage"]  # type: ignore[index]
    assert t.log(limit=1)[0].usage == info.usage
    assert stored.to_json()["usage"] == info.usage
    [_, message] = t.compile().messages
    assert [c.name for c in message.tool_calls] == ["get_weather", "get_time"]


def test_record_response_anthropic_text_and_tool_use() -> None:
    t = Tract.open()
    t.user("Weather in Paris?")
    body = anthropic_message([{"type": "text", "text": "Checking."}, TOOL_USE], model="claude-x")

    info = t.record_response(anthropic.types.Message.model_validate(body))

    assert info.content == {
        "type": "dialogue",
        "role": "assistant",
        "text": "Checking.",
        "tool_calls": [{"id": "toolu_01", "name": "get_weather", "arguments": {"city": "Paris"}}],
    }
    assert info.usage == {"input_tokens": 10, "output_tokens": 2}
    assert info.generation_config == {"model": "claude-x", "finish_reason": "tool_use"}


def test_record_response_merges_caller_metadata_and_config() -> None:
    t = Tract.open()
    t.user("hi")
    info = t.record_response(
        openai_completion("hello", model="gpt-x"),
        message="from my own loop",
        metadata={"trace": "abc"},
        generation_config={"temperature": 0.3, "model": "gpt-requested"},
    )
    assert info.message == "from my own loop"
    assert info.metadata == {"trace": "abc", "usage": info.usage}
    assert info.generation_config == {"temperature": 0.3, "model": "gpt-x", "finish_reason": "stop"}

    head = t.head
    with pytest.raises(InvalidInput, match="usage"):
        t.record_response(openai_completion("x"), metadata={"usage": 1})
    with pytest.raises(InvalidInput, match="metadata must be a dict"):
        t.record_response(openai_completion("x"), metadata=[1])  # type: ignore[arg-type]
    with pytest.raises(InvalidResponse):
        t.record_response({"object": "chat.completion.chunk", "choices": []})
    with pytest.raises(ContentError, match="empty assistant"):
        t.record_response(openai_completion(None))  # no text, no refusal, no tool calls
    assert t.head == head  # nothing half-written


def test_record_response_without_usage_has_none() -> None:
    body = openai_completion("hello")
    del body["usage"]
    t = Tract.open()
    info = t.record_response(body)
    assert info.usage is None
    assert info.metadata is None
    assert t.user("next").usage is None


def test_record_response_keeps_server_tool_blocks_as_parts_and_unknown_blocks_in_metadata() -> None:
    server_use = {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "x"},
    }
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [], "extra": None}
    t = Tract.open()
    t.user("search")
    future = {"type": "hologram", "data": "x"}  # a block type tractkv does not know: kept beside the message
    blocks = [server_use, result, {"type": "text", "text": "Found it."}, future]
    info = t.record_response(anthropic_message(blocks))
    assert info.content["text"] == "Found it."
    assert info.content["parts"] == [
        {"type": "anthropic_block", "block": server_use},
        {"type": "anthropic_block", "block": {k: v for k, v in result.items() if v is not None}},
        {"type": "text", "text": "Found it."},
    ]
    assert info.metadata is not None
    assert info.metadata["omitted_blocks"] == [future]


def test_generate_records_usage_and_finish_reason() -> None:
    body = openai_completion("Hello!", model="gpt-x")
    body["usage"] = copy.deepcopy(OPENAI_USAGE)
    t = Tract.open()
    t.user("hi")

    info = t.generate(ScriptedLLM([body]), temperature=0.1)

    assert info.content == {"type": "dialogue", "role": "assistant", "text": "Hello!"}
    assert info.usage == LLMResponse.from_provider(body).usage
    assert info.usage is not None
    assert info.usage["input_tokens"] == 120
    assert info.generation_config == {"temperature": 0.1, "model": "gpt-x", "finish_reason": "stop"}
    # A plain scripted string has no usage: none is recorded.
    plain = t.generate(ScriptedLLM(["again"]))
    assert plain.usage is None
    assert plain.metadata is None


def test_scripted_llm_refuses_a_malformed_provider_reply() -> None:
    with pytest.raises(InvalidInput, match=r"scripted response 0: .*signature"):
        ScriptedLLM([{"type": "message", "content": [{"type": "thinking", "thinking": "x"}]}])


# --- t.assistant(tool_calls=...) in every provider's form ------------------------------------------------


def test_assistant_accepts_openai_nested_and_anthropic_tool_use_forms() -> None:
    flat = [
        {"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}},
        {"id": "call_2", "name": "get_time", "arguments": {}},
        {"id": "toolu_01", "name": "get_weather", "arguments": {"city": "Paris"}},
    ]
    completion = openai.types.chat.ChatCompletion.model_validate(openai_completion(None, openai_tool_calls()))
    sdk_calls = completion.choices[0].message.tool_calls
    block = anthropic.types.Message.model_validate(anthropic_message([TOOL_USE])).content[0]
    assert sdk_calls is not None

    for calls in (
        [*openai_tool_calls(), TOOL_USE],  # dicts
        [*sdk_calls, block],  # SDK objects
        [ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"}), *flat[1:]],
        flat,
    ):
        t = Tract.open()
        info = t.assistant("", tool_calls=list(calls))
        assert info.content["tool_calls"] == flat  # stored in one form


@pytest.mark.parametrize(
    ("call", "error"),
    [
        ({"id": "c", "type": "custom", "custom": {"name": "x", "input": "y"}}, "type 'custom'"),
        ({"id": "c", "type": "custom", "function": {"name": "x"}}, "only function calls"),
        ({"id": "c", "type": "function", "function": "x"}, "function must be a dict"),
        ({"id": "c", "type": "function", "function": {"name": "x", "arguments": "[1]"}}, "JSON object"),
        ({"id": "c", "type": "function", "function": {"name": "x", "arguments": "{"}}, "not valid JSON"),
        ({"id": "c", "type": "function", "function": {"name": "x", "strict": True}}, "unknown keys"),
        ({"id": "c", "function": {"name": "x"}, "index": 0}, "unknown keys"),
        ({"type": "function", "function": {"name": "x"}}, "non-empty string id"),
        ({"id": "c", "type": "function", "function": {"arguments": "{}"}}, "non-empty string name"),
        ({"type": "tool_use", "id": "t", "name": "x", "input": [1]}, "JSON object"),
        ({"type": "tool_use", "id": "t", "input": {}}, "non-empty string name"),
        ({"id": "c", "name": "x", "arguments": {}, "extra": 1}, "unknown keys"),
        ("call", "must be a dict"),
        (_BrokenDump(), "model_dump\\(\\) failed"),
    ],
)
def test_assistant_refuses_malformed_tool_calls(call: object, error: str) -> None:
    t = Tract.open()
    with pytest.raises(ContentError, match=error):
        t.assistant("", tool_calls=[call])
    assert t.head is None


def test_assistant_refuses_duplicate_ids_across_forms() -> None:
    t = Tract.open()
    with pytest.raises(ContentError, match="duplicate id"):
        t.assistant("", tool_calls=[openai_tool_calls()[0], {"id": "call_1", "name": "x", "arguments": {}}])


def test_what_a_message_cannot_hold_is_kept_beside_it() -> None:
    """OpenAI annotations / audio and Anthropic citations are kept in metadata["omitted_blocks"], not lost."""
    citation = {"type": "url_citation", "url_citation": {"url": "https://example.org", "title": "Ex"}}
    completion = {
        "object": "chat.completion",
        "model": "gpt",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "See example.org", "annotations": [citation]},
            }
        ],
    }
    cited = {
        "type": "text",
        "text": "Paris is the capital.",
        "citations": [{"type": "char_location", "cited_text": "Paris", "document_index": 0}],
    }
    message = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [cited],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    with Tract.open() as t:
        t.user("sources?")
        openai_info = t.record_response(completion)
        t.user("and?")
        anthropic_info = t.record_response(message)
    assert openai_info.content["text"] == "See example.org"
    assert openai_info.metadata["omitted_blocks"] == [
        {"type": "openai_field", "field": "annotations", "value": [citation]}
    ]
    assert anthropic_info.content["text"] == "Paris is the capital."
    assert anthropic_info.metadata is None or "omitted_blocks" not in anthropic_info.metadata
    assert anthropic_info.content["parts"] == [cited]  # the citations stay on their text part
