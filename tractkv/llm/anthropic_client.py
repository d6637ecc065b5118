"""A client for Anthropic's ``/v1/messages`` API."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tractkv.engine.content import anthropic_params
from tractkv.errors import InvalidInput

from ._client import HTTPChatClient
from ._http import JSONSession, RetryPolicy
from .protocol import LLMResponse, as_messages
from .streaming import AnthropicStreamReader, StreamReader

if TYPE_CHECKING:
    import httpx

    from tractkv.engine.content import Message

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"  # the anthropic-version header: the request/response format this client speaks


class AnthropicClient(HTTPChatClient):
    """Anthropic messages over HTTP (needs the ``llm`` extra: ``pip install 'tractkv[llm]'``).

    Messages (:class:`~tractkv.engine.content.payload.Message`) and tools are rendered with
    :func:`tractkv.engine.content.anthropic_params`: system messages become ``system``, tool calls ``tool_use``
    blocks, tool results ``tool_result`` blocks (consecutive ones in one user turn); OpenAI-shaped tools are
    converted. Other ``params`` are Anthropic's own (``temperature``, ``stop_sequences``,
    ``tool_choice`` in Anthropic's shape...) and sent as given. Streaming is :meth:`chat_stream`; every call
    has an async twin over httpx's async client (:meth:`achat`, :meth:`achat_stream`, :meth:`aclose`).

    Args:
        model: sent as ``model`` unless a call passes its own.
        base_url: the API root without ``/v1`` (as in the official SDK); default ``$ANTHROPIC_BASE_URL``,
            else Anthropic's.
        api_key: sent as ``x-api-key``; default ``$ANTHROPIC_API_KEY``.
        max_tokens: the reply limit the API requires, unless a call passes ``max_tokens``.
        timeout, max_retries, backoff, max_delay, jitter, headers, transport: as for :class:`OpenAIClient`.
    """

    PATH = "/v1/messages"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 1024,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        *,
        max_delay: float = 30.0,
        jitter: bool = True,
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise InvalidInput("model must be a non-empty string")
        if max_tokens < 1:
            raise InvalidInput("max_tokens must be >= 1")
        self.model = model
        self.max_tokens = max_tokens
        base = base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        sent = {"accept": "application/json", "user-agent": "tractkv", "anthropic-version": API_VERSION}
        if key:
            sent["x-api-key"] = key
        sent.update(headers or {})
        policy = RetryPolicy(max_retries=max_retries, backoff=backoff, max_delay=max_delay, jitter=jitter)
        self._session = JSONSession(base, sent, timeout=timeout, policy=policy, transport=transport)

    def _request(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens}
        body.update(anthropic_params(as_messages(messages), tools or ()))
        return body

    def _read(self, body: dict[str, Any]) -> LLMResponse:
        return LLMResponse.from_anthropic(body)

    def _stream_reader(self) -> StreamReader:
        return AnthropicStreamReader()
