"""A model client over the official ``anthropic`` SDK (``client.messages``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tractkv.engine.content import anthropic_params
from tractkv.errors import InvalidInput

from ._sdk import SDKClient, load_sdk, sdk_call
from .folders import AnthropicFolder, as_dict
from .protocol import LLMResponse

if TYPE_CHECKING:
    from tractkv.engine.content import Message

    from .streaming import StreamFolder


class AnthropicClient(SDKClient):
    """Anthropic messages over the official SDK (the ``anthropic`` extra: ``pip install
    'tractkv[anthropic]'``).

    Every call goes through an ``anthropic.Anthropic`` client (``AnthropicBedrock`` / ``AnthropicVertex``
    too), or an ``anthropic.AsyncAnthropic`` one for the async calls: retries, timeouts, base URL and auth
    are the SDK's. Pass your own (``client=``) or the SDK's keyword arguments, as for
    :class:`~tractkv.llm.OpenAIClient`.

    Messages and tools are rendered with :func:`~tractkv.llm.anthropic_params`: system messages become
    ``system``, tool calls ``tool_use`` blocks, tool results ``tool_result`` blocks (consecutive ones in one
    user turn); OpenAI-shaped tools are converted. Other ``params`` are Anthropic's own (``temperature``,
    ``thinking``, ``tool_choice`` in Anthropic's shape...) and go to ``messages.create`` as given. Streaming
    (:meth:`chat_stream`) reads the SDK's ``messages.stream()`` and commits the message it assembles.

    Args:
        model: sent as ``model`` unless a call passes its own.
        client: an SDK client (sync or async, as for OpenAIClient).
        max_tokens: the reply limit the API requires, unless a call passes ``max_tokens``.
        sdk_kwargs: ``anthropic.Anthropic(**sdk_kwargs)`` when no client is given.
    """

    SDK = "anthropic"
    EXTRA = "anthropic"

    def __init__(
        self, model: str, client: object = None, *, max_tokens: int = 1024, **sdk_kwargs: Any
    ) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise InvalidInput("max_tokens must be an int >= 1")
        self.max_tokens = max_tokens
        super().__init__(model, client, sdk_kwargs)
        for made in (self._sync, self._async):
            if made is not None and not hasattr(made, "messages"):
                raise InvalidInput(f"{type(made).__name__} is not an Anthropic SDK client (no .messages)")

    def _make(self, kwargs: Mapping[str, Any], *, asynchronous: bool) -> object:
        anthropic = load_sdk("anthropic", self.EXTRA, "AnthropicClient")
        return anthropic.AsyncAnthropic(**kwargs) if asynchronous else anthropic.Anthropic(**kwargs)

    def _request(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None
    ) -> dict[str, Any]:
        # a session's tools carry its set_tools(cache=) breakpoint (ToolDefinitions.cache); the renderer checks
        # the request's breakpoints (at most 4, no 1h after a 5m) before anything is sent
        cache = getattr(tools, "cache", None)
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            **anthropic_params(messages, tools or (), cache),
        }

    def _send(self, client: Any, body: dict[str, Any]) -> Any:
        return sdk_call(client.messages.create, body)

    def _read(self, reply: Any) -> LLMResponse:
        return LLMResponse.from_anthropic(as_dict(reply))

    def _open(self, client: Any, body: dict[str, Any]) -> Any:
        manager = sdk_call(client.messages.stream, body)
        if self._is_async(client):
            return manager.__aenter__()  # the awaitable of the AsyncMessageStream
        return manager.__enter__()

    def _path(self) -> str:
        return "v1/messages"

    def _folder(self) -> StreamFolder:
        return AnthropicFolder()
