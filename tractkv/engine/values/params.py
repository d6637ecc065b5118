"""The request parameters :class:`~tractkv.engine.values.records.CompiledContext` renders, as TypedDicts over
the official SDKs' own parameter types, so ``mypy --strict`` checks a call such as
``client.chat.completions.create(model=..., **ctx.to_openai_params())`` key by key and item by item.

The SDK types are imported for the type checker only (``if TYPE_CHECKING``): nothing here loads an SDK at run
time, and this module itself loads only when a program imports one of its names. A type checker without the
SDK installed sees those items as ``Any``.
"""

from typing import TYPE_CHECKING, Required, TypedDict

if TYPE_CHECKING:
    from anthropic.types import MessageParam, TextBlockParam, ToolUnionParam
    from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolUnionParam
    from openai.types.responses import ResponseInputParam, ToolParam


class OpenAIChatParams(TypedDict, total=False):
    """:meth:`~tractkv.engine.values.records.CompiledContext.to_openai_params`: keyword arguments of
    ``client.chat.completions.create`` (``tools`` only when the context has tools)."""

    messages: Required[list["ChatCompletionMessageParam"]]
    tools: list["ChatCompletionToolUnionParam"]


class ResponsesParams(TypedDict, total=False):
    """:meth:`~tractkv.engine.values.records.CompiledContext.to_responses_params`: keyword arguments of
    ``client.responses.create`` (``instructions`` only when the context starts with a system message, ``tools``
    only when it has tools)."""

    input: Required["ResponseInputParam"]
    instructions: str
    tools: list["ToolParam"]


class AnthropicParams(TypedDict, total=False):
    """:meth:`~tractkv.engine.values.records.CompiledContext.to_anthropic_params`: keyword arguments of
    ``client.messages.create`` (``system`` only when the context has a system prompt, ``tools`` only when it
    has tools; ``model`` and ``max_tokens`` are the caller's)."""

    messages: Required[list["MessageParam"]]
    system: str | list["TextBlockParam"]
    tools: list["ToolUnionParam"]
