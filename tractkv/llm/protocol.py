"""The model boundary: ``LLMClient.chat(messages, tools=None, **params) -> LLMResponse`` and :func:`call_model`.

Messages are the library's own :class:`~tractkv.engine.content.Message` values (what
:meth:`~tractkv.engine.records.CompiledContext.messages` holds); tools are stored tool schemas in OpenAI's or
Anthropic's shape (what :attr:`~tractkv.engine.records.CompiledContext.tools` holds). A client renders both
for its provider with :mod:`tractkv.engine.render` and turns the provider's reply into one
:class:`LLMResponse`, so code above this layer never sees a provider's wire format.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from tractkv.engine.content import MESSAGE_ROLES, Message, ToolCall
from tractkv.engine.render import anthropic_reply, openai_reply
from tractkv.errors import InvalidInput, MalformedResponse, ModelCallFailed, TractError


@attrs.frozen(kw_only=True)
class LLMResponse:
    """One model reply, provider-neutral.

    Attributes:
        text: the reply's text ("" when it only calls tools).
        tool_calls: the tools it calls, arguments decoded (a dict, never a JSON string).
        model: the model that answered, as the provider reports it.
        finish_reason: why the model stopped, in the provider's words (``stop``, ``tool_calls``, ``end_turn``).
        usage: the provider's token counts, as sent.
        raw: what the provider sent (the decoded JSON body; the scripted item for :class:`ScriptedLLM`).

    Raises:
        InvalidInput: (at construction) ``text`` not a string, or ``tool_calls`` not a tuple of ToolCall.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    model: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = attrs.field(default=None, eq=False, hash=False)
    raw: Any = attrs.field(default=None, eq=False, hash=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise InvalidInput(f"LLMResponse.text must be a string, not {type(self.text).__name__}")
        if not isinstance(self.tool_calls, tuple) or not all(
            isinstance(c, ToolCall) for c in self.tool_calls
        ):
            raise InvalidInput("LLMResponse.tool_calls must be a tuple of ToolCall")
        if self.model is not None and not isinstance(self.model, str):
            raise InvalidInput(f"LLMResponse.model must be a string or None, not {type(self.model).__name__}")

    def assistant_payload(self) -> dict[str, Any]:
        """The reply as dialogue content to commit (what :func:`tractkv.engine.content.normalize` accepts).

        ``{"type": "dialogue", "role": "assistant", "text": ..., "tool_calls": [{"id", "name",
        "arguments"}, ...]}``; ``tool_calls`` is left out when the reply calls no tools. The arguments are
        copies: changing the payload does not change this response.
        """
        payload: dict[str, Any] = {"type": "dialogue", "role": "assistant", "text": self.text}
        if self.tool_calls:
            payload["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": copy.deepcopy(c.arguments)} for c in self.tool_calls
            ]
        return payload

    @classmethod
    def from_openai_message(
        cls,
        message: Mapping[str, Any],
        *,
        model: str | None = None,
        finish_reason: str | None = None,
        usage: dict[str, Any] | None = None,
        raw: Any = None,
    ) -> LLMResponse:
        """An assistant message in OpenAI's shape (``content``, ``tool_calls``) as a response.

        Raises:
            MalformedResponse: the message is not a dict, ``content`` is not text, a tool call lacks a
                name or an id, or its arguments are not a JSON object.
        """
        if not isinstance(message, Mapping):
            raise MalformedResponse(
                f"an assistant message must be a JSON object, not {type(message).__name__}"
            )
        text, calls = openai_reply(message)
        return cls(
            text=text,
            tool_calls=calls,
            model=model,
            finish_reason=finish_reason or ("tool_calls" if calls else "stop"),
            usage=usage,
            raw=message if raw is None else raw,
        )

    @classmethod
    def from_openai(cls, body: Mapping[str, Any]) -> LLMResponse:
        """A ``chat.completion`` body (``choices[0].message``) as a response.

        Raises:
            MalformedResponse: no choices, no message, or a message :meth:`from_openai_message` rejects.
        """
        if not isinstance(body, Mapping):
            raise MalformedResponse("a chat completion must be a JSON object")
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise MalformedResponse("a chat completion needs a non-empty 'choices' list")
        choice = choices[0]
        if not isinstance(choice.get("message"), Mapping):
            raise MalformedResponse("choices[0] has no 'message' object")
        return cls.from_openai_message(
            choice["message"],
            model=_optional_str(body.get("model")),
            finish_reason=_optional_str(choice.get("finish_reason")),
            usage=_optional_dict(body.get("usage")),
            raw=body,
        )

    @classmethod
    def from_anthropic(cls, body: Mapping[str, Any]) -> LLMResponse:
        """An Anthropic ``message`` body: ``text`` blocks joined, ``tool_use`` blocks as tool calls.

        Other block types (thinking, server tools) are left in ``raw``.

        Raises:
            MalformedResponse: no ``content`` list, or a text / tool_use block of the wrong shape.
        """
        if not isinstance(body, Mapping):
            raise MalformedResponse("a message must be a JSON object")
        text, calls = anthropic_reply(body.get("content"))
        return cls(
            text=text,
            tool_calls=calls,
            model=_optional_str(body.get("model")),
            finish_reason=_optional_str(body.get("stop_reason")),
            usage=_optional_dict(body.get("usage")),
            raw=body,
        )


@runtime_checkable
class LLMClient(Protocol):
    """Anything that answers a chat: the clients in :mod:`tractkv.llm`, :class:`ScriptedLLM`, your own.

    A client of your own may return a plain ``str`` (the reply's text): :func:`call_model`, which every
    tractkv caller goes through, accepts it.
    """

    def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> LLMResponse:
        """Send ``messages`` offering ``tools`` (stored schemas, either provider's shape); ``params`` go to the
        API as given."""
        ...


def call_model(
    client: LLMClient,
    messages: Sequence[Message],
    tools: Sequence[Mapping[str, Any]] | None,
    params: Mapping[str, Any],
) -> LLMResponse:
    """Call ``client.chat(messages, tools=tools, **params)`` and return its reply as an :class:`LLMResponse`.

    A tractkv error from the client propagates as it is; any other exception is wrapped, so callers catch one
    root. A plain ``str`` reply (a hand-written client) becomes ``LLMResponse(text=reply)``.

    Raises:
        ModelCallFailed: the client raised a non-tractkv exception, or returned something that is neither an
            LLMResponse nor a str.
        TractError: whatever tractkv error the client raised (LLMHTTPError, ScriptExhausted, ...).
    """
    try:
        reply: object = client.chat(messages, tools=tools, **params)
    except TractError:
        raise
    except Exception as exc:
        raise ModelCallFailed(f"model call failed: {exc!r}") from exc
    if isinstance(reply, LLMResponse):
        return reply
    if isinstance(reply, str):
        return LLMResponse(text=reply, raw=reply)
    raise ModelCallFailed(
        f"{type(client).__name__}.chat returned {type(reply).__name__}; a model client must return an "
        "LLMResponse (or a str)"
    )


def as_messages(messages: Sequence[Message]) -> tuple[Message, ...]:
    """``messages`` as a tuple, each checked to be a :class:`Message` (what every tractkv client does first).

    Raises:
        InvalidInput: ``messages`` is not a sequence, an item is not a Message (a message dict, say:
            ``CompiledContext.messages`` holds the Messages of a compiled context), a role no provider knows,
            or a tool message without the id of the call it answers.
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise InvalidInput(f"messages must be a sequence of Message, not {type(messages).__name__}")
    for index, item in enumerate(messages):
        if not isinstance(item, Message):
            raise InvalidInput(
                f"messages[{index}] must be a tractkv Message (see CompiledContext.messages), "
                f"not {type(item).__name__}"
            )
        if item.role not in MESSAGE_ROLES:
            raise InvalidInput(
                f"messages[{index}] has role {item.role!r}; a role is one of {', '.join(MESSAGE_ROLES)}"
            )
        if item.role == "tool" and not (isinstance(item.tool_call_id, str) and item.tool_call_id):
            raise InvalidInput(f"messages[{index}] is a tool result without the tool_call_id it answers")
    return tuple(messages)


def _optional_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _optional_dict(value: object) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, Mapping) else None
