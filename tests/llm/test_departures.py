"""What each dialect loses of a history recorded from the others: one test per row of the README's "Departures"
table, on one history holding an Anthropic reply (thinking, redacted thinking, tool_use), an error result with
an image, a Responses reply (reasoning, a built-in web_search_call, a function_call whose arguments are not
JSON), a Chat Completions refusal, a Gemini reply (a signed thought, a signed function_call without an id, an
``executable_code`` part), a named user message with an image (``detail`` low) and an Anthropic server tool."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tractkv import CompiledContext, Tract

from .dialect_rules import check_anthropic, check_chat, check_gemini, check_responses
from .test_dialect_property import PNG

TOOLS = [
    {"name": "f", "input_schema": {"type": "object"}},
    {"type": "web_search_20250305", "name": "web_search"},
]


@pytest.fixture(scope="module")
def ctx() -> Iterator[CompiledContext]:
    with Tract.open() as t:
        t.set_tools(TOOLS)
        t.system("Be brief.")
        t.user(
            ["Look", {"type": "image", "data": PNG, "media_type": "image/png", "detail": "low"}], name="Ann"
        )
        t.record_response(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude",
                "content": [
                    {"type": "thinking", "thinking": "Plan.", "signature": "SIG"},
                    {"type": "redacted_thinking", "data": "REDACTED"},
                    {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"k": 1}},
                ],
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        )
        t.tool_result(
            "toolu_1",
            "f",
            ["chart", {"type": "image", "data": PNG, "media_type": "image/png"}],
            is_error=True,
        )
        t.record_response(
            {
                "id": "resp_1",
                "object": "response",
                "created_at": 1,
                "model": "o4",
                "status": "completed",
                "error": None,
                "output": [
                    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ENC"},
                    {
                        "type": "web_search_call",
                        "id": "ws_1",
                        "status": "completed",
                        "action": {"type": "search"},
                    },
                    {
                        "type": "function_call",
                        "id": "fc_1",
                        "call_id": "call_1",
                        "name": "f",
                        "arguments": '{"k": 1',
                    },
                ],
                "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
            }
        )
        t.tool_result("call_1", "f", "done")
        t.record_response(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": None, "refusal": "No."},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )
        t.user("Now Gemini.")
        signature = base64.b64encode(b"GEMSIG").decode()
        gemini = t.record_response(
            {
                "candidates": [
                    {
                        "content": {
                            "role": "model",
                            "parts": [
                                {"text": "Gemthought", "thought": True, "thoughtSignature": signature},
                                {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": signature},
                                {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
                            ],
                        },
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "responseId": "resp_g",
                "modelVersion": "gemini-3-pro-preview",
            }
        )
        t.tool_result(gemini.content["tool_calls"][0]["id"], "f", "gdone")
        yield t.compile().load()


GEMINI_LOST = ("Gemthought", "GEMSIG", base64.b64encode(b"GEMSIG").decode(), "print(1)")


def _text(params: dict[str, Any]) -> str:
    return json.dumps(params)


def test_chat_departures(ctx: CompiledContext) -> None:
    """Chat: thinking, redacted thinking, reasoning and built-in items left out (built-in items listed by
    ``left_out``); a result's ``is_error`` has no field; its image follows the run in a user message; arguments
    that are not JSON go as the model wrote them; an Anthropic server tool is not offered."""
    params = ctx.to_openai_params()
    check_chat(params)
    sent = _text(params)
    for lost in ("Plan.", "SIG", "REDACTED", "rs_1", "ENC", "ws_1", "is_error", "web_search", *GEMINI_LOST):
        assert lost not in sent, lost
    assert [r.call_id for r in ctx.left_out("openai")] == ["ws_1", "gemini:executable_code"]
    messages = params["messages"]
    assert [m["role"] for m in messages] == [
        "system", "user", "assistant", "tool", "user", "assistant", "tool", "assistant", "user", "assistant", "tool"
    ]  # fmt: skip
    assert messages[1]["name"] == "Ann"
    assert messages[1]["content"][1]["image_url"]["detail"] == "low"
    assert messages[3]["content"] == "chart"
    assert messages[4]["content"][0]["text"] == "Attachments of tool results (toolu_1):"
    assert messages[5]["tool_calls"][0]["function"]["arguments"] == '{"k": 1'  # as the model wrote it
    assert messages[7] == {"role": "assistant", "content": None, "refusal": "No."}
    assert [tool["function"]["name"] for tool in params["tools"]] == ["f"]


def test_anthropic_departures(ctx: CompiledContext) -> None:
    """Anthropic: reasoning and built-in items left out (built-in items listed); an image's ``detail`` has no
    field; a name prefixes the text; a refusal goes as text; arguments that are not JSON go as ``{}`` (listed)."""
    params = ctx.to_anthropic_params()
    thinking = [
        {"type": "thinking", "thinking": "Plan.", "signature": "SIG"},
        {"type": "redacted_thinking", "data": "REDACTED"},
    ]
    check_anthropic(params, thinking=thinking)  # sent back unmodified
    sent = _text(params)
    for lost in ("rs_1", "ENC", "ws_1", '"detail"', "refusal", *GEMINI_LOST):
        assert lost not in sent, lost
    assert [(r.kind, r.call_id) for r in ctx.left_out("anthropic")] == [
        ("dropped_item", "ws_1"),
        ("invalid_arguments", "call_1"),
        ("dropped_item", "gemini:executable_code"),
    ]
    messages = params["messages"]
    assert messages[0]["content"][0] == {"type": "text", "text": "Ann: Look"}
    assert messages[1]["content"][0] == {"type": "thinking", "thinking": "Plan.", "signature": "SIG"}
    assert messages[2]["content"][0]["is_error"] is True
    assert messages[3]["content"][0]["input"] == {}
    assert messages[5] == {"role": "assistant", "content": "No."}
    assert [tool["name"] for tool in params["tools"]] == ["f", "web_search"]


def test_responses_departures(ctx: CompiledContext) -> None:
    """Responses: thinking and redacted thinking left out; a result's ``is_error`` has no field; a name
    prefixes the text; a refusal goes as assistant text; an Anthropic server tool is not offered; reasoning,
    built-in items and the exact arguments go back verbatim."""
    params = ctx.to_responses_params()
    check_responses(params)
    sent = _text(params)
    for lost in ("Plan.", "SIG", "REDACTED", "is_error", "refusal", 'web_search"', *GEMINI_LOST):
        assert lost not in sent, lost
    assert [r.call_id for r in ctx.left_out("responses")] == ["gemini:executable_code"]
    items = params["input"]
    assert items[0]["content"][0] == {"type": "input_text", "text": "Ann: Look"}
    assert items[2]["output"][0] == {"type": "input_text", "text": "chart"}
    assert [item.get("id") for item in items[3:6]] == ["rs_1", "ws_1", "fc_1"]
    assert items[5]["arguments"] == '{"k": 1'
    assert items[7] == {"role": "assistant", "content": "No."}
    assert [tool["name"] for tool in params["tools"]] == ["f"]


def test_gemini_departures(ctx: CompiledContext) -> None:
    """Gemini: thinking, Responses reasoning left out; redacted thinking and built-in items left out and
    listed; an image's ``detail`` has no field; a name prefixes the text; a refusal goes as text; an error
    result is ``{"error": text}``, its image after it in the turn; ids Gemini did not send are not sent back;
    arguments that are not JSON go as ``{}`` (listed); an Anthropic server tool is not offered."""
    params = ctx.to_gemini_params()
    check_gemini(params, signatures=[b"GEMSIG"])
    sent = json.dumps(params, default=repr)
    for lost in (
        "Plan.",
        '"signature"',
        "REDACTED",
        "rs_1",
        "ENC",
        "ws_1",
        "detail",
        "refusal",
        "web_search",
    ):
        assert lost not in sent, lost
    assert [r.call_id for r in ctx.left_out("gemini")] == ["redacted_thinking", "ws_1", "call_1"]
    contents = params["contents"]
    assert contents[0]["parts"][0] == {"text": "Ann: Look"}
    assert contents[2]["parts"][0]["function_response"]["response"] == {"error": "chart"}
    assert [next(iter(part)) for part in contents[2]["parts"]] == ["function_response", "text", "inline_data"]
    assert contents[3]["parts"][0]["function_call"]["args"] == {}
    assert contents[5] == {"role": "model", "parts": [{"text": "No."}]}
    signed_call = contents[7]["parts"][1]
    assert signed_call == {"function_call": {"name": "f", "args": {}}, "thought_signature": b"GEMSIG"}
    assert "id" not in contents[8]["parts"][0]["function_response"]  # a made id is never sent
    assert [d["name"] for tool in params["tools"] for d in tool["function_declarations"]] == ["f"]


def test_responses_reasoning_without_output_left_out() -> None:
    """Responses: a reasoning item with no output after it (a reply cut off while reasoning) is left out and
    listed (the API refuses it alone); see also test_dialect_property.py."""
    with Tract.open() as t:
        t.user("Think.")
        t.record_response(
            {
                "id": "resp_2",
                "object": "response",
                "created_at": 1,
                "model": "o4",
                "status": "incomplete",
                "error": None,
                "output": [{"type": "reasoning", "id": "rs_2", "summary": []}],
            }
        )
        t.user("Go on.")
        ctx = t.compile()
    assert "rs_2" not in _text(ctx.to_responses_params())
    assert [r.call_id for r in ctx.left_out("responses")] == ["rs_2"]


def test_documents_departures() -> None:
    """Chat has no part for a document by URL nor a text document: it gets a text naming the URL and the
    document's text; Anthropic and Responses take both natively (a url / text source, ``input_file`` by URL)."""
    with Tract.open() as t:
        t.user(
            [
                {"type": "document", "url": "https://e.x/a.pdf"},
                {"type": "document", "data": b"plain words", "media_type": "text/plain", "title": "Notes"},
            ]
        )
        ctx = t.compile()
    assert ctx.to_openai_params()["messages"][0]["content"] == [
        {"type": "text", "text": "Document: https://e.x/a.pdf"},
        {"type": "text", "text": "Notes\nplain words"},
    ]
    blocks = ctx.to_anthropic_params()["messages"][0]["content"]
    assert [block["source"]["type"] for block in blocks] == ["url", "text"]
    assert ctx.to_responses_params()["input"][0]["content"] == [
        {"type": "input_file", "file_url": "https://e.x/a.pdf"},
        {"type": "input_text", "text": "Notes\nplain words"},
    ]


def test_what_a_reply_kept_beside_its_message_is_sent_by_no_dialect() -> None:
    """OpenAI annotations live in ``metadata["omitted_blocks"]``: kept with the commit, sent by no dialect.
    Anthropic server tool blocks and citations are parts: sent back to Anthropic only, listed by
    ``left_out`` for the others (the cited text still goes)."""
    cited = {
        "type": "text",
        "text": "Oslo is cold.",
        "citations": [{"type": "web_search_result_location", "url": "https://e.x/CITED", "cited_text": "c"}],
    }
    server = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}
    annotated = {
        "type": "url_citation",
        "url": "https://e.x/ANNOTATED",
        "title": "A",
        "start_index": 0,
        "end_index": 1,
    }
    with Tract.open() as t:
        t.user("Weather?")
        info = t.record_response(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude",
                "content": [server, cited],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        )
        assert info.metadata is None or "omitted_blocks" not in info.metadata
        assert [p["type"] for p in info.content["parts"]] == ["anthropic_block", "text"]
        t.user("Sure?")
        content = [{"type": "output_text", "text": "Yes.", "annotations": [annotated]}]
        message = {
            "type": "message",
            "id": "m",
            "role": "assistant",
            "status": "completed",
            "content": content,
        }
        t.record_response(
            {
                "id": "r",
                "object": "response",
                "created_at": 1,
                "model": "o4",
                "status": "completed",
                "output": [message],
            }
        )
        ctx = t.compile()
    for params in (ctx.to_openai_params(), ctx.to_responses_params(), ctx.to_gemini_params()):
        sent = _text(params)
        assert "Oslo is cold." in sent
        assert "Yes." in sent
        for lost in ("CITED", "ANNOTATED", "srvtoolu_1"):
            assert lost not in sent, lost
    for dialect in ("openai", "responses", "gemini"):
        assert [(r.kind, r.call_id) for r in ctx.left_out(dialect)] == [
            ("dropped_item", "srvtoolu_1"),
            ("dropped_item", "citations"),
        ]
    sent = _text(ctx.to_anthropic_params())
    assert "CITED" in sent
    assert "srvtoolu_1" in sent
    assert "ANNOTATED" not in sent
    assert ctx.left_out("anthropic") == ()


def test_later_system_message_and_foreign_ids_departures() -> None:
    """A system message after the first turn: Chat and Responses keep it a system message in place;
    Anthropic and Gemini have no system role there and send it as user text ``System: ...``. A call id outside
    ``[a-zA-Z0-9_-]`` is rewritten for Anthropic only, with its result."""
    with Tract.open() as t:
        t.user("hi")
        t.assistant(tool_calls=[{"id": "functions.f:0", "name": "f", "arguments": {}}])
        t.tool_result("functions.f:0", "f", "ok")
        t.system("Later rule.")
        ctx = t.compile()
    chat = ctx.to_openai_params()["messages"]
    assert chat[-1] == {"role": "system", "content": "Later rule."}
    assert chat[1]["tool_calls"][0]["id"] == chat[2]["tool_call_id"] == "functions.f:0"
    assert ctx.to_responses_params()["input"][-1] == {"role": "system", "content": "Later rule."}
    anthropic = ctx.to_anthropic_params()["messages"]
    assert anthropic[-1]["content"][-1] == {"type": "text", "text": "System: Later rule."}
    assert anthropic[1]["content"][0]["id"] == anthropic[2]["content"][0]["tool_use_id"] == "functions_f_0"
    gemini = ctx.to_gemini_params()["contents"]
    assert gemini[-1]["parts"][-1] == {"text": "System: Later rule."}
