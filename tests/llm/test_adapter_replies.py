"""Replies that came through another framework: a LiteLLM ``ModelResponse`` (OpenAI chat shaped, with Claude's
``thinking_blocks`` and ``reasoning_content``) and LangChain's ``AIMessage`` / ``AIMessageChunk``.

The LiteLLM replies here are the ``model_dump()`` shape LiteLLM documents and a duck-typed object with that
``model_dump``; test_litellm_sdk.py records real ``litellm.completion`` replies and sends them back through the
Anthropic SDK.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tractkv import InvalidResponse, Tract
from tractkv.engine.content.payload import part_markers
from tractkv.llm import LLMResponse

THINKING = {
    "type": "thinking",
    "thinking": "Paris weather: call the tool.",
    "signature": "EqQBCkYIBxgCKkA+sig/==",
}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT+data=="}
CALL = {
    "index": 3,  # LiteLLM's position of the tool_use block
    "id": "toolu_01",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}


def litellm_dump(message: dict[str, Any], *, finish: str = "tool_calls") -> dict[str, Any]:
    """A LiteLLM ``ModelResponse.model_dump()`` of a Claude reply (the shape litellm 1.110 gives)."""
    return {
        "id": "chatcmpl-49cd29eb",
        "created": 1_795_873_015,
        "model": "claude-sonnet-4-5",
        "object": "chat.completion",
        "system_fingerprint": None,
        "choices": [{"finish_reason": finish, "index": 0, "message": message}],
        "usage": {
            "completion_tokens": 95,
            "prompt_tokens": 310,
            "total_tokens": 405,
            "completion_tokens_details": {"reasoning_tokens": 7, "text_tokens": 88},
            "prompt_tokens_details": {"cached_tokens": 0, "cache_creation_tokens": 0},
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def claude_message(blocks: list[dict[str, Any]], *, calls: bool = True) -> dict[str, Any]:
    return {
        "content": "Let me check.",
        "role": "assistant",
        "tool_calls": [CALL] if calls else None,
        "function_call": None,
        "reasoning_content": "".join(str(b.get("thinking", "")) for b in blocks),
        "thinking_blocks": blocks,
        "provider_specific_fields": {"citations": None, "thinking_blocks": blocks},
    }


class Dumped:
    """A duck-typed reply object: anything with ``model_dump()`` is read through it."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return copy.deepcopy(self.body)


@pytest.mark.parametrize("wrap", [dict, Dumped], ids=["dump", "object"])
def test_litellm_thinking_blocks_are_kept_as_signed_thinking(wrap: Any) -> None:
    t = Tract.open()
    t.user("Weather in Paris?")
    info = t.record_response(wrap(litellm_dump(claude_message([THINKING, REDACTED]))))
    assert info.content["parts"] == [THINKING, REDACTED, {"type": "text", "text": "Let me check."}]
    assert info.content["tool_calls"] == [
        {"id": "toolu_01", "name": "get_weather", "arguments": {"city": "Paris"}}
    ]
    assert "omitted_blocks" not in (
        info.metadata or {}
    )  # reasoning_content is the blocks' text: no copy kept
    assert info.generation_config == {"model": "claude-sonnet-4-5", "finish_reason": "tool_calls"}
    assert (info.usage or {})["input_tokens"] == 310
    t.tool_result("toolu_01", "get_weather", "18°C")
    turn = t.compile().to_anthropic_params()["messages"][1]
    assert turn["content"][:2] == [THINKING, REDACTED]
    assert turn["content"][3]["type"] == "tool_use"
    # Chat and Responses get no thinking, as for a reply recorded from Anthropic itself
    assert "Paris weather" not in str(t.compile().to_openai_params())


def test_reasoning_content_alone_is_reasoning_text_never_sent_as_thinking() -> None:
    message = {"role": "assistant", "content": "It is 4.", "reasoning_content": "2 + 2: add them."}
    t = Tract.open()
    t.user("2 + 2?")
    info = t.record_response(litellm_dump(message, finish="stop"))
    assert info.content["parts"] == [
        {"type": "reasoning", "reasoning": "2 + 2: add them."},
        {"type": "text", "text": "It is 4."},
    ]
    assert "omitted_blocks" not in (info.metadata or {})
    ctx = t.compile()
    assert ctx.to_anthropic_params()["messages"][1] == {"role": "assistant", "content": "It is 4."}
    assert ctx.to_openai_params()["messages"][1] == {"role": "assistant", "content": "It is 4."}
    assert ctx.to_responses_params()["input"][1] == {"role": "assistant", "content": "It is 4."}
    assert ctx.to_gemini_params()["contents"][1] == {"role": "model", "parts": [{"text": "It is 4."}]}
    assert all(ctx.left_out(d) == () for d in ("openai", "responses", "anthropic", "gemini"))
    assert ctx.messages[1].parts[0].to_dict() == {"type": "reasoning", "reasoning": "2 + 2: add them."}
    assert part_markers(info.content["parts"]) == "[reasoning 16 chars]"


def test_reasoning_content_that_is_not_the_blocks_text_is_kept_beside_the_message() -> None:
    message = claude_message([THINKING])
    message["reasoning_content"] = "something else"
    info = Tract.open().record_response(litellm_dump(message))
    assert info.content["parts"][0] == THINKING
    assert info.metadata == {
        "usage": info.usage,
        "omitted_blocks": [{"type": "openai_field", "field": "reasoning_content", "value": "something else"}],
    }


def test_an_unsigned_thinking_block_is_reasoning() -> None:
    blocks = [{"type": "thinking", "thinking": "Gemini thought, no signature", "signature": None}]
    reply = LLMResponse.from_provider(litellm_dump(claude_message(blocks, calls=False), finish="stop"))
    assert reply.parts[0] == {"type": "reasoning", "reasoning": "Gemini thought, no signature"}


@pytest.mark.parametrize(
    ("blocks", "error"),
    [
        ("not a list", "thinking_blocks must be a list"),
        ([{"type": "thinking", "signature": "s"}], r"thinking_blocks\[0\] thinking block has no 'thinking'"),
        ([{"type": "redacted_thinking"}], r"thinking_blocks\[0\] redacted_thinking block has no 'data'"),
        ([{"type": "thinking", "thinking": "x", "signature": 5}], "signature that is not a string"),
        ([{"type": "text", "text": "x"}], "not a thinking or redacted_thinking block"),
    ],
)
def test_malformed_thinking_blocks_are_refused(blocks: Any, error: str) -> None:
    message = claude_message([], calls=False)
    message["thinking_blocks"] = blocks
    with pytest.raises(InvalidResponse, match=error):
        Tract.open().record_response(litellm_dump(message, finish="stop"))
