"""A model client over the official ``openai`` SDK: the Responses API (``client.responses``) or Chat
Completions (``client.chat.completions``), on OpenAI, Azure OpenAI or any OpenAI-compatible server."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from tractkv.engine.content import openai_params, responses_params
from tractkv.errors import InvalidInput

from ._sdk import SDKClient, load_sdk, sdk_call
from .folders import ChatChunkFolder, ResponsesFolder, as_dict
from .protocol import LLMResponse

if TYPE_CHECKING:
    from tractkv.engine.content import Message

    from .streaming import StreamFolder

APIS = ("responses", "chat")


class OpenAIClient(SDKClient):
    """OpenAI over its official SDK (the ``openai`` extra: ``pip install 'tractkv[openai]'``).

    Every call goes through an ``openai.OpenAI`` (or ``AzureOpenAI``) client, or an ``openai.AsyncOpenAI``
    one for the async calls, so its retries (``max_retries``, with the SDK's backoff and ``Retry-After``),
    timeouts, base URL, auth and HTTP client are the SDK's. Pass your own (``client=``), or the SDK's keyword
    arguments (``api_key``, ``base_url``, ``max_retries``, ``timeout``, ``default_headers``, ``http_client``,
    ...), from which the client makes a sync SDK client at once and an async one on the first async call; it
    closes those (:meth:`close`, :meth:`aclose`), never one you passed.

    Args:
        model: sent as ``model`` unless a call passes its own.
        client: an SDK client. A sync one serves the async calls too (each in a worker thread); an async one
            serves only the async calls (``AsyncTract``, :meth:`achat`, :meth:`achat_stream`).
        api: ``"responses"`` (the default: ``client.responses.create``, the context rendered by
            :func:`~tractkv.llm.responses_params`, reasoning items sent back in place) or ``"chat"``
            (``client.chat.completions.create`` with :func:`~tractkv.llm.openai_params`: for servers that
            speak only Chat Completions). docs/decisions.md says why Responses is the default.
        sdk_kwargs: ``openai.OpenAI(**sdk_kwargs)`` when no client is given.

    Other ``params`` of a call go to the SDK's method as given (None values dropped): ``temperature``,
    ``reasoning``, ``store``, ``include``, ``max_output_tokens`` (``max_tokens`` for Chat Completions),
    ``extra_body`` for fields the SDK does not know... A parameter the SDK's method does not take is not
    refused here: it is moved into the request's ``extra_body`` and sent as a body field, so the API is the
    one to accept it or answer with an error status (LLMHTTPError).

    Raises (from :meth:`chat`): LLMHTTPError (an error status once the SDK's retries are spent: ``.status``,
    ``.attempts``), MalformedResponse (a reply that is not of the API's shape), LLMError (unreachable, a
    timeout), InvalidInput (an item that is not a Message, a ``stream`` parameter: streaming is
    :meth:`chat_stream`, a call the SDK refuses before sending it).
    """

    SDK = "openai"
    EXTRA = "openai"

    def __init__(
        self,
        model: str,
        client: object = None,
        *,
        api: Literal["responses", "chat"] = "responses",
        **sdk_kwargs: Any,
    ) -> None:
        if api not in APIS:
            raise InvalidInput(f"api must be 'responses' or 'chat', not {api!r}")
        self.api = api
        super().__init__(model, client, sdk_kwargs)
        for made in (self._sync, self._async):
            if made is not None and not hasattr(made, "chat" if api == "chat" else "responses"):
                raise InvalidInput(f"{type(made).__name__} is not an OpenAI SDK client (no .{api})")

    def __repr__(self) -> str:
        return f"OpenAIClient(model={self.model!r}, api={self.api!r}, base_url={self.base_url!r})"

    def _make(self, kwargs: Mapping[str, Any], *, asynchronous: bool) -> object:
        openai = load_sdk("openai", self.EXTRA, "OpenAIClient")
        return openai.AsyncOpenAI(**kwargs) if asynchronous else openai.OpenAI(**kwargs)

    def _request(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None
    ) -> dict[str, Any]:
        render = responses_params if self.api == "responses" else openai_params
        return {"model": self.model, **render(messages, tools or ())}

    def _send(self, client: Any, body: dict[str, Any]) -> Any:
        if self.api == "responses":
            return sdk_call(client.responses.create, body)
        return sdk_call(client.chat.completions.create, body)

    def _read(self, reply: Any) -> LLMResponse:
        body = as_dict(reply)
        if self.api == "responses":
            return LLMResponse.from_responses(body)
        return LLMResponse.from_openai(body)

    def _open(self, client: Any, body: dict[str, Any]) -> Any:
        return self._send(client, {**body, "stream": True})

    def _folder(self) -> StreamFolder:
        return ResponsesFolder() if self.api == "responses" else ChatChunkFolder()

    def _stream_extras(self) -> dict[str, Any]:
        if self.api == "chat":
            return {"stream_options": {"include_usage": True}}  # the usage arrives in a last chunk
        return {}

    def _path(self) -> str:
        return "responses" if self.api == "responses" else "chat/completions"

    def _warm(self) -> None:
        if self.api != "responses":
            return
        # openai builds the lookup table of a union of types on its first use: ~1 s for the Responses stream
        # events, on the event loop if not here (best effort: a later SDK may lay this out differently)
        with contextlib.suppress(Exception):
            from openai._models import construct_type
            from openai.types.responses import Response, ResponseStreamEvent

            construct_type(type_=ResponseStreamEvent, value={"type": "response.created"})
            construct_type(type_=Response, value={"output": [{"type": "message"}]})

    def _hint(self, status: int) -> str:
        if status == 404 and self.api == "responses":
            return " (a server that speaks only Chat Completions? OpenAIClient(..., api='chat'))"
        return ""
