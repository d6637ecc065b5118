"""Acceptance: content parts (images, documents, tool results with images, thinking blocks, names, a later
system message) go through the official openai and anthropic SDKs exactly as rendered, bytes exact.

The SDKs talk to the loopback recorder; each test asserts the exact JSON body the SDK sent."""

from __future__ import annotations

import base64
import struct
import zlib
from typing import Any

import anthropic
import openai

from tractkv import Tract

from .conftest import Recorder, anthropic_message, openai_completion


def _png(seed: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes([seed, 255 - seed, 7]) * 3 for _ in range(3))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 3, 3, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PNG = _png(1)
SHOT = _png(2)
PDF = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def media_tract() -> Tract:
    """A user turn with an image and a PDF, a call, its result with a screenshot, the model's answer."""
    t = Tract.open()
    t.system("Be brief.")
    t.user(
        [
            "What is in these?",
            {"type": "image", "data": PNG, "media_type": "image/png", "detail": "low"},
            {"type": "document", "data": PDF, "media_type": "application/pdf", "title": "spec.pdf"},
        ]
    )
    t.assistant(tool_calls=[{"id": "call_1", "name": "screenshot", "arguments": {}}])
    t.tool_result(
        "call_1", "screenshot", ["the screen:", {"type": "image", "data": SHOT, "media_type": "image/png"}]
    )
    t.assistant("A square and a page.")
    t.user("Thanks.")
    return t


def test_openai_sdk_sends_parts_and_tool_media(recorder: Recorder, openai_sdk: openai.OpenAI) -> None:
    recorder.reply(openai_completion("ok"))
    with media_tract() as t:
        params = t.compile().to_openai_params()
    openai_sdk.chat.completions.create(model="m", **params)
    messages = recorder.requests[0].body["messages"]
    assert messages == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in these?"},
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:image/png;base64,{b64(PNG)}", "detail": "low"},
                },
                {
                    "type": "file",
                    "file": {"filename": "spec.pdf", "file_data": f"data:application/pdf;base64,{b64(PDF)}"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "content": "the screen:", "tool_call_id": "call_1"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Attachments of tool results (call_1):"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(SHOT)}"}},
            ],
        },
        {"role": "assistant", "content": "A square and a page."},
        {"role": "user", "content": "Thanks."},
    ]
    url = messages[1]["content"][1]["image_url"]["url"]
    assert base64.b64decode(url.split(",", 1)[1]) == PNG  # bytes exact


def test_anthropic_sdk_sends_native_blocks(recorder: Recorder, anthropic_sdk: anthropic.Anthropic) -> None:
    recorder.reply(anthropic_message())
    with media_tract() as t:
        params = t.compile().to_anthropic_params()
    anthropic_sdk.messages.create(model="m", max_tokens=50, **params)
    body = recorder.requests[0].body
    assert body["system"] == "Be brief."
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in these?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}},
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)},
                    "title": "spec.pdf",
                },
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "call_1", "name": "screenshot", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_1",
                    "content": [
                        {"type": "text", "text": "the screen:"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": b64(SHOT)},
                        },
                    ],
                }
            ],
        },
        {"role": "assistant", "content": "A square and a page."},
        {"role": "user", "content": "Thanks."},
    ]
    assert base64.b64decode(body["messages"][2]["content"][0]["content"][1]["source"]["data"]) == SHOT


def test_anthropic_sdk_sends_thinking_back_exactly_and_first(
    recorder: Recorder, anthropic_sdk: anthropic.Anthropic
) -> None:
    thinking: list[dict[str, Any]] = [
        {
            "type": "thinking",
            "thinking": "The user wants the weather.",
            "signature": "EqQBCgIYAhIM1gbcDa9GJwZA==",
        },
        {
            "type": "redacted_thinking",
            "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP",
        },
    ]
    t = Tract.open()
    t.user("Weather in Paris?")
    t.assistant(
        [*thinking, "Let me check."],
        tool_calls=[{"id": "toolu_1", "name": "weather", "arguments": {"city": "Paris"}}],
    )
    t.tool_result("toolu_1", "weather", "18°C")
    recorder.reply(anthropic_message())
    anthropic_sdk.messages.create(model="m", max_tokens=50, **t.compile().to_anthropic_params())
    assert recorder.requests[0].body["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": [
                *thinking,
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18°C"}]},
    ]
    # OpenAI leaves thinking out
    openai_messages = t.compile().to_openai()
    assert openai_messages[1] == {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [
            {
                "id": "toolu_1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
            }
        ],
    }
    t.close()


def test_anthropic_sdk_name_and_later_system(recorder: Recorder, anthropic_sdk: anthropic.Anthropic) -> None:
    with Tract.open() as t:
        t.system("Rules.")
        t.user("Hi, I am Ann.", name="ann")
        t.assistant("Hello Ann.")
        t.system("From now on, answer in French.")
        t.user([{"type": "image", "data": PNG, "media_type": "image/png"}], name="bob")
        recorder.reply(anthropic_message())
        anthropic_sdk.messages.create(model="m", max_tokens=50, **t.compile().to_anthropic_params())
    body = recorder.requests[0].body
    assert body["system"] == "Rules."
    assert body["messages"] == [
        {"role": "user", "content": "ann: Hi, I am Ann."},
        {"role": "assistant", "content": "Hello Ann."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "System: From now on, answer in French."},
                {"type": "text", "text": "bob:"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}},
            ],
        },
    ]


def test_openai_sdk_refusal_and_url_image(recorder: Recorder, openai_sdk: openai.OpenAI) -> None:
    with Tract.open() as t:
        t.user([{"type": "image_url", "image_url": {"url": "https://example.test/cat.png"}}])
        t.assistant([{"type": "refusal", "refusal": "I can't help with that."}])
        t.user("Why?")
        recorder.reply(openai_completion("ok"))
        openai_sdk.chat.completions.create(model="m", **t.compile().to_openai_params())
    assert recorder.requests[0].body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "https://example.test/cat.png"}}],
        },
        {"role": "assistant", "content": None, "refusal": "I can't help with that."},
        {"role": "user", "content": "Why?"},
    ]
