"""The model-client interface: ``chat(messages, tools=None, **params) -> LLMResponse``.

Messages are dicts in the shape :meth:`CompiledContext.to_openai` produces (``role``, ``content``, assistant
``tool_calls`` as ``{"id", "type": "function", "function": {"name", "arguments"}}``, ``role: "tool"`` results
with ``tool_call_id``); the neutral shape of :meth:`CompiledContext.to_dicts` (flat ``{"id", "name",
"arguments"}`` tool calls) is accepted too. Tools are schemas in OpenAI's shape (Anthropic's is converted).
Every client turns its provider's reply into one :class:`LLMResponse`, so code above this layer never sees a
provider's wire format.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

import attrs

from tractkv.engine.content import ToolCall
from tractkv.errors import MalformedResponse


@attrs.frozen(kw_only=True)
class LLMResponse:
    """One model reply, provider-neutral.

    ``tool_calls`` carry decoded arguments (a dict, never a JSON string). ``raw`` is what the provider sent
    (the decoded JSON body), for anything this class does not lift out.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    model: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = attrs.field(default=None, eq=False, hash=False)
    raw: Any = attrs.field(default=None, eq=False, hash=False, repr=False)

    @classmethod
    def from_openai_message(
        cls,
        message: dict[str, Any],
        *,
        model: str | None = None,
        finish_reason: str | None = None,
        usage: dict[str, Any] | None = None,
        raw: Any = None,
    ) -> LLMResponse:
        """An assistant message in OpenAI's shape (``content``, ``tool_calls``) as a response.

        Raises:
            MalformedResponse: the message is not a dict, ``content`` is not text, a tool call lacks a
                name or its arguments are not a JSON object.
        """
        if not isinstance(message, dict):
            raise MalformedResponse(
                f"an assistant message must be a JSON object, not {type(message).__name__}"
            )
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise MalformedResponse("tool_calls must be a list")
        finish = finish_reason or ("tool_calls" if calls else "stop")
        return cls(
            text=_content_text(message.get("content")),
            tool_calls=tuple(_tool_call(call, index) for index, call in enumerate(calls)),
            model=model,
            finish_reason=finish,
            usage=usage,
            raw=message if raw is None else raw,
        )

    @classmethod
    def from_openai(cls, body: dict[str, Any]) -> LLMResponse:
        """A ``chat.completion`` body (``choices[0].message``) as a response.

        Raises:
            MalformedResponse: no choices, no message, or a message :meth:`from_openai_message` rejects.
        """
        if not isinstance(body, dict):
            raise MalformedResponse("a chat completion must be a JSON object")
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise MalformedResponse("a chat completion needs a non-empty 'choices' list")
        choice = choices[0]
        if not isinstance(choice.get("message"), dict):
            raise MalformedResponse("choices[0] has no 'message' object")
        return cls.from_openai_message(
            choice["message"],
            model=_optional_str(body.get("model")),
            finish_reason=_optional_str(choice.get("finish_reason")),
            usage=body.get("usage") if isinstance(body.get("usage"), dict) else None,
            raw=body,
        )

    @classmethod
    def from_anthropic(cls, body: dict[str, Any]) -> LLMResponse:
        """An Anthropic ``message`` body: ``text`` blocks joined, ``tool_use`` blocks as tool calls.

        Other block types (thinking, server tools) are left in ``raw``.

        Raises:
            MalformedResponse: no ``content`` list, or a text / tool_use block of the wrong shape.
        """
        if not isinstance(body, dict):
            raise MalformedResponse("a message must be a JSON object")
        blocks = body.get("content")
        if not isinstance(blocks, list):
            raise MalformedResponse("a message needs a 'content' list of blocks")
        texts: list[str] = []
        calls: list[ToolCall] = []
        for index, block in enumerate(blocks):
            if not isinstance(block, dict):
                raise MalformedResponse(f"content[{index}] is not an object")
            if block.get("type") == "text":
                if not isinstance(block.get("text"), str):
                    raise MalformedResponse(f"content[{index}] text block has no 'text' string")
                texts.append(block["text"])
            elif block.get("type") == "tool_use":
                call_id, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
                if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                    raise MalformedResponse(f"content[{index}] tool_use block needs string 'id' and 'name'")
                if not isinstance(arguments, dict):
                    raise MalformedResponse(f"content[{index}] tool_use 'input' must be an object")
                calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
        return cls(
            text="".join(texts),
            tool_calls=tuple(calls),
            model=_optional_str(body.get("model")),
            finish_reason=_optional_str(body.get("stop_reason")),
            usage=body.get("usage") if isinstance(body.get("usage"), dict) else None,
            raw=body,
        )


@runtime_checkable
class LLMClient(Protocol):
    """Anything that answers a chat: the clients in :mod:`tractkv.llm`, :class:`ScriptedLLM`, your own."""

    def chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **params: Any
    ) -> LLMResponse:
        """Send ``messages`` (OpenAI / neutral shape) offering ``tools``; ``params`` go to the API as given."""
        ...


def _optional_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _content_text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    # Some OpenAI-compatible servers answer with content parts; only text parts carry text.
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        return "".join(str(p.get("text", "")) for p in content if p.get("type") in ("text", "output_text"))
    raise MalformedResponse(f"message content must be text, not {type(content).__name__}")


def _tool_call(call: object, index: int) -> ToolCall:
    """One tool call, OpenAI-shaped (``function: {name, arguments}``) or flat (``{id, name, arguments}``)."""
    if isinstance(call, ToolCall):
        return call
    if not isinstance(call, dict):
        raise MalformedResponse(f"tool_calls[{index}] is not an object")
    function: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else call
    name, arguments = function.get("name"), function.get("arguments")
    if not isinstance(name, str) or not name:
        raise MalformedResponse(f"tool_calls[{index}] has no function name")
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        arguments = {}
    elif isinstance(arguments, str):  # OpenAI sends arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise MalformedResponse(f"tool_calls[{index}] ({name}) arguments are not JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise MalformedResponse(f"tool_calls[{index}] ({name}) arguments must be a JSON object")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise MalformedResponse(f"tool_calls[{index}] ({name}) has no id")
    return ToolCall(id=call_id, name=name, arguments=arguments)
