"""The model boundary: ``LLMClient.chat(messages, tools=None, **params) -> LLMResponse`` and :func:`call_model`.

Messages are the library's own :class:`~tractkv.engine.content.payload.Message` values (what
:meth:`~tractkv.engine.values.records.CompiledContext.messages` holds); tools are stored tool schemas in OpenAI's or
Anthropic's shape (what :attr:`~tractkv.engine.values.records.CompiledContext.tools` holds). A client renders both
for its provider with :mod:`tractkv.engine.content.render` and turns the provider's reply into one
:class:`LLMResponse`, so code above this layer never sees a provider's wire format.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from tractkv.engine.content import (
    MESSAGE_ROLES,
    Message,
    ToolCall,
    anthropic_container,
    anthropic_reply,
    anthropic_usage,
    gemini_extras,
    gemini_field,
    gemini_reply,
    gemini_usage,
    openai_extras,
    openai_reply,
    openai_usage,
    reply_provider,
    reply_text,
    responses_reply,
    responses_usage,
)
from tractkv.errors import InvalidInput, InvalidResponse, MalformedResponse, ModelCallFailed, TractError

PART_FIELDS = {
    "text": ("text",),
    "thinking": ("thinking", "signature"),
    "redacted_thinking": ("data",),
    "reasoning": ("reasoning",),
    "refusal": ("refusal",),
    "responses_item": ("item",),
    "gemini_thought": ("text",),
    "gemini_call": ("call_id",),
    "gemini_part": ("part",),
    "anthropic_call": ("call_id",),
    "anthropic_block": ("block",),
    "anthropic_container": ("container",),
    "openai_audio": ("id",),
}  # the parts a reply carries (docs/format.md "Content parts"), each with its required fields
OPTIONAL_FIELDS = {
    "text": ("thought_signature", "citations"),
    "anthropic_call": ("caller", "toolset_name"),
    "openai_audio": ("transcript", "expires_at"),
    "gemini_thought": ("thought_signature",),
    "gemini_call": ("thought_signature", "made_id", "extra_content"),
}  # the fields a part may also have (Gemini's signature, ...)
_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "item": dict,
    "block": dict,
    "container": dict,
    "caller": dict,
    "citations": list,
    "expires_at": int,
    "part": dict,
    "extra_content": dict,
    "thought_signature": bytes,
    "made_id": bool,
}  # a field's type when it is not a string


@attrs.frozen(kw_only=True)
class LLMResponse:
    """One model reply, provider-neutral.

    Attributes:
        text: the reply's text: its text parts joined ("" when it only calls tools or refuses).
        tool_calls: the tools it calls, arguments decoded (a dict, never a JSON string; ``{}`` with the
            exact string as ``invalid_arguments`` when the model wrote arguments that are not a JSON object).
        parts: the reply's content in the order the provider sent it, as payload parts: ``{"type": "text",
            "text"}``, ``{"type": "thinking", "thinking", "signature"}``, ``{"type": "redacted_thinking",
            "data"}``, ``{"type": "refusal", "refusal"}``, ``{"type": "responses_item", "item"}`` (an OpenAI
            Responses output item, verbatim), Gemini's parts, Anthropic's ``anthropic_call`` (where a
            ``tool_use`` stood), ``anthropic_block`` (a server tool block) and ``anthropic_container``, a text
            part's ``citations``, OpenAI's ``openai_audio`` (docs/format.md, "Content parts"). Built from
            ``text`` alone, the one text part.
        model: the model that answered, as the provider reports it.
        finish_reason: why the model stopped, in the provider's words (``stop``, ``tool_calls``, ``end_turn``).
        usage: the token counts, normalized (:func:`~tractkv.engine.content.openai_usage`,
            :func:`~tractkv.engine.content.anthropic_usage`): ``input_tokens``, ``output_tokens`` and the
            provider's own fields; None when the provider sent none.
        omitted_blocks: what the reply holds that a message has no place for, kept beside it (in the commit's
            metadata): Anthropic blocks of a type tractkv does not know, and OpenAI message fields
            (``annotations``, ``audio``, ``function_call``, ``reasoning_content``).
        raw: what the provider sent (the decoded JSON body; the scripted item for :class:`ScriptedLLM`).

    Raises:
        InvalidInput: (at construction) ``text`` not a string, ``tool_calls`` not a tuple of ToolCall, a part
            of an unknown type or shape, or ``parts`` whose text parts do not join to ``text``.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    parts: tuple[dict[str, Any], ...] = attrs.field(default=(), hash=False)
    model: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = attrs.field(default=None, eq=False, hash=False)
    omitted_blocks: tuple[dict[str, Any], ...] = attrs.field(default=(), eq=False, hash=False)
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
        if not isinstance(self.parts, tuple):
            raise InvalidInput("LLMResponse.parts must be a tuple of part dicts")
        if not self.parts and self.text:  # built from text alone: its one part (equal to the parsed reply)
            object.__setattr__(self, "parts", ({"type": "text", "text": self.text},))
        for index, part in enumerate(self.parts):
            _check_part(part, index)
        if self.parts and reply_text(self.parts) != self.text:
            raise InvalidInput("LLMResponse.text must be the text parts joined")
        if self.usage is not None and not (
            isinstance(self.usage, dict)
            and all(_is_count(self.usage.get(k)) for k in ("input_tokens", "output_tokens"))
        ):
            raise InvalidInput("LLMResponse.usage must be None or a dict with input_tokens and output_tokens")

    @property
    def refusal(self) -> str | None:
        """The model's refusal (OpenAI's ``refusal``), None when it did not refuse."""
        refusals = [p["refusal"] for p in self.parts if p["type"] == "refusal"]
        return "".join(refusals) if refusals else None

    def assistant_payload(self) -> dict[str, Any]:
        """The reply as dialogue content to commit (what :func:`tractkv.engine.content.payload.normalize` accepts).

        ``{"type": "dialogue", "role": "assistant", "text": ..., "parts": [...], "tool_calls": [{"id", "name",
        "arguments"}, ...]}`` (a call whose arguments were not a JSON object also has ``invalid_arguments``,
        the exact string). ``parts`` (every part, in order) is there only when the reply is more than one
        text: thinking, a refusal, several text blocks, or a text with Gemini's ``thought_signature``;
        ``tool_calls`` only when the reply calls tools.
        Everything is a copy: changing the payload does not change this response.
        """
        payload: dict[str, Any] = {"type": "dialogue", "role": "assistant", "text": self.text}
        if len(self.parts) > 1 or any(set(p) != {"type", "text"} for p in self.parts):  # not one plain text
            payload["parts"] = [dict(p) for p in self.parts]
        if self.tool_calls:
            payload["tool_calls"] = [copy.deepcopy(c.to_payload()) for c in self.tool_calls]
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
        """An assistant message in OpenAI's shape (``content``, ``refusal``, ``tool_calls``) as a response
        (:func:`~tractkv.engine.content.openai_reply` reads it); ``usage`` is taken as normalized.

        Raises:
            MalformedResponse: the message is not a dict, ``content`` is not text, a refusal is not a string,
                a tool call lacks a name or an id, or its arguments are not a JSON object.
        """
        if not isinstance(message, Mapping):
            raise MalformedResponse(
                f"an assistant message must be a JSON object, not {type(message).__name__}"
            )
        parts, calls = openai_reply(message)
        return cls(
            text=reply_text(parts),
            tool_calls=calls,
            parts=parts,
            model=model,
            finish_reason=finish_reason or ("tool_calls" if calls else "stop"),
            usage=usage,
            omitted_blocks=openai_extras(message),
            raw=message if raw is None else raw,
        )

    @classmethod
    def from_openai(cls, body: Mapping[str, Any], *, choice: int = 0) -> LLMResponse:
        """A ``chat.completion`` body (``choices[choice].message``, the first by default) as a response,
        usage normalized.

        Raises:
            MalformedResponse: no such choice, no message, a message :meth:`from_openai_message` rejects, or
                usage without token counts.
        """
        if not isinstance(body, Mapping):
            raise MalformedResponse("a chat completion must be a JSON object")
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices:
            raise MalformedResponse("a chat completion needs a non-empty 'choices' list")
        if choice >= len(choices):
            raise MalformedResponse(
                f"the completion has {len(choices)} choice(s); there is no choice {choice}"
            )
        picked = choices[choice]
        if not isinstance(picked, Mapping) or not isinstance(picked.get("message"), Mapping):
            raise MalformedResponse(f"choices[{choice}] has no 'message' object")
        return cls.from_openai_message(
            picked["message"],
            model=_optional_str(body.get("model")),
            finish_reason=_optional_str(picked.get("finish_reason")),
            usage=openai_usage(body.get("usage")),
            raw=body,
        )

    @classmethod
    def from_anthropic(cls, body: Mapping[str, Any]) -> LLMResponse:
        """An Anthropic ``message`` body (:func:`~tractkv.engine.content.anthropic_reply` reads its blocks):
        text (with its citations), thinking, redacted thinking and server tool blocks as parts in order,
        ``tool_use`` blocks as tool calls (placed among the parts when their order needs it), a block of an
        unknown type in :attr:`omitted_blocks`; the message's ``container`` (code execution's: ``id``,
        ``expires_at``) as a last ``{"type": "anthropic_container", "container"}`` part, so the next request
        can name it; ``stop_reason`` (``pause_turn`` too) as the finish reason; usage normalized.

        Raises:
            MalformedResponse: no ``content`` list, a block of a known type with the wrong shape, or usage
                without token counts.
        """
        if not isinstance(body, Mapping):
            raise MalformedResponse("a message must be a JSON object")
        parts, calls, omitted = anthropic_reply(body.get("content"))
        container = anthropic_container(body.get("container"))
        if container is not None:
            parts = (*parts, container)
        return cls(
            text=reply_text(parts),
            tool_calls=calls,
            parts=parts,
            model=_optional_str(body.get("model")),
            finish_reason=_optional_str(body.get("stop_reason")),
            usage=anthropic_usage(body.get("usage")),
            omitted_blocks=omitted,
            raw=body,
        )

    @classmethod
    def from_responses(cls, body: Mapping[str, Any], *, strict: bool = False) -> LLMResponse:
        """An OpenAI Responses ``Response`` body (:func:`~tractkv.engine.content.responses_reply` reads its
        ``output``): message text and refusals as parts, every other item (reasoning, function_call, built-in
        tool calls) verbatim in its place as a ``responses_item`` part, function calls also as tool calls;
        ``finish_reason`` is the response's ``status``; usage normalized.

        Raises:
            MalformedResponse: no ``output`` list, a malformed item (naming it and the field), with ``strict``
                an unknown item type, usage without token counts, or a failed Response (its ``error`` set).
        """
        if not isinstance(body, Mapping):
            raise MalformedResponse("a Response must be a JSON object")
        if body.get("error") is not None:
            raise MalformedResponse(f"a failed Response (status {body.get('status')!r}): {body['error']!r}")
        parts, calls, omitted = responses_reply(body.get("output"), strict=strict)
        return cls(
            text=reply_text(parts),
            tool_calls=calls,
            parts=parts,
            model=_optional_str(body.get("model")),
            finish_reason=_optional_str(body.get("status")),
            usage=responses_usage(body.get("usage")),
            omitted_blocks=omitted,
            raw=body,
        )

    @classmethod
    def from_gemini(cls, body: Mapping[str, Any], strict: bool = False, *, choice: int = 0) -> LLMResponse:
        """A Gemini ``GenerateContentResponse`` body (snake_case as the SDK dumps it, or camelCase as the REST
        API sends it): candidate ``choice``'s parts read by :func:`~tractkv.engine.content.gemini_reply` (text,
        thoughts, function calls, other parts verbatim, each ``thought_signature`` as bytes on its part);
        ``model`` is ``model_version``, ``finish_reason`` the candidate's; usage from ``usage_metadata``
        (:func:`~tractkv.engine.content.gemini_usage`). A function call Gemini sent without an id gets one made
        from the response and the part's position (``gm_<16 hex>_<index>``, see
        :func:`~tractkv.engine.content.render.gemini.made_call_id`); it is never sent back to Gemini. The
        candidate's ``grounding_metadata``, ``citation_metadata`` and ``url_context_metadata`` are kept in
        :attr:`omitted_blocks` as ``{"type": "gemini_field", "field", "value"}``.

        Raises:
            MalformedResponse: a blocked prompt (``prompt_feedback.block_reason``, no candidates), no such
                candidate, a candidate without content (naming its ``finish_reason``), a malformed part (its
                index and field), with ``strict`` a part of no known kind, or usage without token counts.
        """
        if not isinstance(body, Mapping):
            raise MalformedResponse("a GenerateContentResponse must be a JSON object")
        candidates = gemini_field(body, "candidates") or []
        feedback = gemini_field(body, "prompt_feedback")
        if not candidates and isinstance(feedback, Mapping) and gemini_field(feedback, "block_reason"):
            raise MalformedResponse(f"the prompt was blocked: {gemini_field(feedback, 'block_reason')}")
        if not isinstance(candidates, list):
            raise MalformedResponse("a GenerateContentResponse's candidates must be a list")
        if choice < 0 or choice >= len(candidates):
            raise MalformedResponse(f"the response has {len(candidates)} candidate(s); there is no {choice}")
        candidate = candidates[choice]
        if not isinstance(candidate, Mapping):
            raise MalformedResponse(f"candidates[{choice}] is not an object")
        finish = _optional_str(gemini_field(candidate, "finish_reason"))
        content = gemini_field(candidate, "content")
        if content is None:  # SAFETY, or MAX_TOKENS spent thinking: no parts, as a stream reads it
            content = {"role": "model", "parts": []}
        parts, calls = gemini_reply(
            content, response_id=gemini_field(body, "response_id"), candidate=choice, strict=strict
        )
        if not parts:  # streamed or not: an empty reply cannot be committed, so say why it is empty
            raise MalformedResponse(
                f"candidates[{choice}] has no content (finish_reason {finish}): an empty reply, nothing to commit"
            )
        return cls(
            text=reply_text(parts),
            tool_calls=calls,
            parts=parts,
            model=_optional_str(gemini_field(body, "model_version")),
            finish_reason=finish,
            usage=gemini_usage(gemini_field(body, "usage_metadata")),
            omitted_blocks=gemini_extras(candidate),
            raw=body,
        )

    @classmethod
    def from_provider(cls, response: object, *, choice: int = 0, strict: bool = False) -> LLMResponse:
        """A provider's complete reply, whichever provider: an OpenAI ``ChatCompletion``, an OpenAI Responses
        ``Response``, an Anthropic ``Message`` or a Gemini ``GenerateContentResponse``, as the SDK object
        (anything with ``model_dump()``), its ``model_dump()`` dict or the JSON body as a plain dict. The shape
        says which (:func:`~tractkv.engine.content.reply_provider`). A LiteLLM ``ModelResponse`` is a chat
        completion (its Claude ``thinking_blocks`` kept as signed thinking); a LangChain ``AIMessage`` /
        ``AIMessageChunk`` (or its dump) is read by :func:`tractkv.llm.adapters.langchain_reply`.

        An OpenAI completion may hold several choices (``n > 1``): ``choice`` picks one (the first by
        default); the others are not read; for Gemini it picks the candidate. ``strict`` refuses a Responses
        output item or a Gemini part of an unknown kind (:meth:`from_responses`, :meth:`from_gemini`).
        Streaming chunks and events are refused: record the final ``ChatCompletion`` / ``Message`` the SDK's
        stream helpers assemble.

        Raises:
            InvalidResponse: neither shape (a chunk, an error body, an empty dict, ...), a ``model_dump()``
                that fails or gives no dict, a choice that does not exist, or a reply :meth:`from_openai` /
                :meth:`from_anthropic` rejects.
            InvalidInput: ``choice`` is not a non-negative int, or not 0 for an Anthropic message.
        """
        if isinstance(choice, bool) or not isinstance(choice, int) or choice < 0:
            raise InvalidInput(f"choice must be a non-negative int, not {choice!r}")
        body = _as_body(response)
        provider = reply_provider(body)
        if provider is None and body.get("type") in ("ai", "AIMessageChunk"):
            from tractkv.llm.adapters import langchain_body, langchain_reply  # loaded for such a reply only

            message = langchain_body(body)
            if message is not None:
                if choice:
                    raise InvalidInput("a LangChain AI message has one reply: choice must be 0")
                try:
                    return cls(**langchain_reply(message), raw=body)
                except MalformedResponse as exc:
                    raise InvalidResponse(exc.reason) from None
        try:
            if provider == "openai":
                return cls.from_openai(body, choice=choice)
            if provider == "anthropic":
                if choice:
                    raise InvalidInput("an Anthropic message has one reply: choice must be 0")
                return cls.from_anthropic(body)
            if provider == "responses":
                if choice:
                    raise InvalidInput("a Responses API response has one reply: choice must be 0")
                return cls.from_responses(body, strict=strict)
            if provider == "gemini":
                return cls.from_gemini(body, strict=strict, choice=choice)
        except MalformedResponse as exc:
            raise InvalidResponse(exc.reason) from None
        raise InvalidResponse(_unknown_shape(body))


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
    return checked_reply(client, reply)


async def acall_model(
    client: LLMClient,
    messages: Sequence[Message],
    tools: Sequence[Mapping[str, Any]] | None,
    params: Mapping[str, Any],
) -> LLMResponse:
    """:func:`call_model` on an event loop: ``await client.achat(...)`` when the client has it (the SDK
    clients, over the async SDK client), else ``client.chat(...)`` in a worker thread, so the loop never
    waits on a model. Raises as :func:`call_model` does; cancelling it cancels the request."""
    import asyncio  # loaded by async callers only

    achat = getattr(client, "achat", None)
    try:
        if callable(achat):
            reply: object = await achat(messages, tools=tools, **params)
        else:
            reply = await asyncio.to_thread(functools.partial(client.chat, messages, tools=tools, **params))
    except TractError:
        raise
    except Exception as exc:
        raise ModelCallFailed(f"model call failed: {exc!r}") from exc
    return checked_reply(client, reply)


def checked_reply(client: object, reply: object) -> LLMResponse:
    """What a client returned, as an :class:`LLMResponse` (see :func:`call_model`)."""
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


def _check_part(part: object, index: int) -> None:
    """An :attr:`LLMResponse.parts` item: one of :data:`PART_FIELDS` with its fields (and optional ones)."""
    kind = str(part.get("type")) if isinstance(part, dict) else ""
    fields = PART_FIELDS.get(kind)
    if (
        not isinstance(part, dict)
        or fields is None
        or not {"type", *fields} <= set(part) <= {"type", *fields, *OPTIONAL_FIELDS.get(kind, ())}
    ):
        raise InvalidInput(
            f"LLMResponse.parts[{index}] must be one of "
            + ", ".join(f"{{type: {k}, {', '.join(v)}}}" for k, v in PART_FIELDS.items())
        )
    for field, value in part.items():
        wanted = _FIELD_TYPES.get(field, str)
        if field != "type" and not isinstance(value, wanted):
            raise InvalidInput(
                f"LLMResponse.parts[{index}] fields must be strings (an item a dict): {field} is not "
                f"{getattr(wanted, '__name__', wanted)}"
            )


def _optional_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _as_body(response: object) -> Mapping[str, Any]:
    """``response`` as a JSON-like mapping: an SDK object through ``model_dump()`` (JSON mode when the
    object's ``model_dump`` takes ``mode``), a mapping as it is."""
    if not isinstance(response, Mapping) and callable(getattr(response, "model_dump", None)):
        dump = response.model_dump  # type: ignore[attr-defined]
        try:
            try:
                body = dump(mode="json")
            except TypeError:  # a model_dump() without pydantic's mode argument
                body = dump()
        except Exception as exc:  # a user's object: whatever its model_dump raises is reported, not leaked
            raise InvalidResponse(f"{type(response).__name__}.model_dump() failed: {exc!r}") from exc
        if not isinstance(body, Mapping):
            raise InvalidResponse(f"{type(response).__name__}.model_dump() returned {type(body).__name__}")
        return body
    if not isinstance(response, Mapping):
        raise InvalidResponse(
            "expected an OpenAI ChatCompletion or Response, an Anthropic Message or a Gemini "
            "GenerateContentResponse (SDK object or dict), "
            f"not {type(response).__name__}"
        )
    if not response:
        raise InvalidResponse("an empty response")
    return response


def _unknown_shape(body: Mapping[str, Any]) -> str:
    """Why ``body`` is neither a chat completion nor a message, as helpfully as its shape allows."""
    kind = body.get("object") if isinstance(body.get("object"), str) else body.get("type")
    if kind == "chat.completion.chunk":
        return "a streaming chunk: record the whole ChatCompletion (the SDK's stream.get_final_completion())"
    if isinstance(kind, str) and (kind.startswith(("message_", "content_block_")) or kind == "ping"):
        return f"a streaming event ({kind}): record the whole Message (the SDK's stream.get_final_message())"
    if kind == "error" or body.get("error") is not None:  # a Response carries "error": null
        return "an error response, not a reply"
    if isinstance(kind, str) and kind.startswith("response."):
        return (
            f"a streaming event ({kind}): record the whole Response (the SDK's stream.get_final_response())"
        )
    if kind == "response":
        return "a Responses API object needs an 'output' list"
    if isinstance(kind, str) and "additional_kwargs" in body and "content" in body:
        return f"a LangChain {kind} message: only an AI message (AIMessage, AIMessageChunk) is a reply"
    if body.get("type") == "message":
        return "an Anthropic message needs a 'content' list of blocks"
    return (
        "neither an OpenAI chat completion ('choices', object 'chat.completion'), a Responses API response, an "
        "Anthropic message (type 'message' with 'content') nor a Gemini response ('candidates'); keys: "
        f"{sorted(str(k) for k in body)[:10]}"
    )
