"""A client for OpenAI-compatible ``/chat/completions`` APIs (OpenAI, vLLM, Ollama, LiteLLM, ...)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tractkv.engine.content import openai_params
from tractkv.errors import InvalidInput

from ._client import HTTPChatClient
from ._http import JSONSession, RetryPolicy
from .protocol import LLMResponse, as_messages
from .streaming import OpenAIStreamReader, StreamReader

if TYPE_CHECKING:
    import httpx

    from tractkv.engine.content import Message

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIClient(HTTPChatClient):
    """Chat completions over HTTP (needs the ``llm`` extra: ``pip install 'tractkv[llm]'``).

    Args:
        model: sent as ``model`` unless a call passes its own.
        base_url: the API root including ``/v1``; default ``$OPENAI_BASE_URL``, else OpenAI's.
        api_key: sent as ``Authorization: Bearer``; default ``$OPENAI_API_KEY``. Without one no
            Authorization header is sent (local servers need none).
        timeout: seconds for each attempt.
        max_retries: retries after a 429, a 5xx or a transport failure (0 disables them).
        backoff: the longest wait before the first retry, doubling with each; a ``Retry-After`` answer wins.
        max_delay: upper bound in seconds of any one wait, ``Retry-After`` included.
        jitter: wait a random time up to the backoff ("full jitter", the default) rather than all of it.
        headers: extra headers sent with every request.
        transport: an ``httpx`` transport, used by every call (tests pass ``httpx.MockTransport``, which
            serves both). The sync calls need an ``httpx.BaseTransport``, the async ones (``achat``,
            ``AsyncTract``) an ``httpx.AsyncBaseTransport``: a call the transport cannot serve raises
            InvalidInput (it never falls back to the network).

    Raises (from :meth:`chat`): LLMHTTPError (error status, ``.status``), MalformedResponse (a body that is
    not a chat completion), LLMError (unreachable), InvalidInput (an item that is not a Message, or a
    ``stream`` parameter: streaming is :meth:`chat_stream`).

    Every call has an async twin over httpx's async client (:meth:`achat`, :meth:`achat_stream`; release it
    with :meth:`aclose`); one client's async calls belong to one event loop.
    """

    PATH = "/chat/completions"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
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
        self.model = model
        base = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        sent = {"accept": "application/json", "user-agent": "tractkv"}
        if key:
            sent["authorization"] = f"Bearer {key}"
        sent.update(headers or {})
        policy = RetryPolicy(max_retries=max_retries, backoff=backoff, max_delay=max_delay, jitter=jitter)
        self._session = JSONSession(base, sent, timeout=timeout, policy=policy, transport=transport)

    def _request(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None
    ) -> dict[str, Any]:
        return {"model": self.model, **openai_params(as_messages(messages), tools or ())}

    def _read(self, body: dict[str, Any]) -> LLMResponse:
        return LLMResponse.from_openai(body)

    def _stream_reader(self) -> StreamReader:
        return OpenAIStreamReader()

    def _stream_extras(self) -> dict[str, Any]:
        return {"stream_options": {"include_usage": True}}  # the usage arrives in a last chunk
