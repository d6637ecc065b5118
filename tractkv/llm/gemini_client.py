"""A model client over Google's official ``google-genai`` SDK (``client.models.generate_content``), for the
Gemini API and Vertex AI."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tractkv.engine.content import gemini_params
from tractkv.errors import InvalidInput

from ._sdk import SDKClient, load_sdk
from .folders import GeminiFolder, sdk_dump
from .protocol import LLMResponse

if TYPE_CHECKING:
    from tractkv.engine.content import Message

    from .streaming import StreamFolder


class GeminiClient(SDKClient):
    """Gemini over its official SDK (the ``gemini`` extra: ``pip install 'tractkv[gemini]'``).

    Every call goes through a ``google.genai.Client`` (its ``aio`` side for the async calls): retries
    (``http_options=HttpOptions(retry_options=...)``), timeouts, base URL, Vertex AI and auth are the SDK's.
    Pass your own (``client=``) or the SDK's keyword arguments (``api_key``, ``vertexai``, ``project``,
    ``location``, ``http_options``...), as for :class:`~tractkv.llm.OpenAIClient`.

    The context is rendered by :func:`~tractkv.llm.gemini_params` (``contents``, ``system_instruction``,
    ``tools`` as ``function_declarations``; each ``thought_signature`` sent back on its part); a call's other
    ``params`` are ``GenerateContentConfig`` fields (``temperature``, ``thinking_config``, ``tool_config``,
    ``max_output_tokens``...), merged into the call's ``config``. Streaming (:meth:`chat_stream`) reads
    ``generate_content_stream``: its chunks' parts are joined into the one response the API gives without
    streaming (texts of one kind run together, each signature kept on its part).

    Args:
        model: sent as ``model`` unless a call passes its own.
        client: a ``google.genai.Client``.
        sdk_kwargs: ``google.genai.Client(**sdk_kwargs)`` when no client is given.
    """

    SDK = "google"
    EXTRA = "gemini"

    def __init__(self, model: str, client: object = None, **sdk_kwargs: Any) -> None:
        super().__init__(model, client, sdk_kwargs)
        if not hasattr(self._sync, "models") or not hasattr(self._sync, "aio"):
            raise InvalidInput(f"{type(self._sync).__name__} is not a google.genai Client (no .models, .aio)")

    def _make(self, kwargs: Mapping[str, Any], *, asynchronous: bool) -> object:
        genai = load_sdk("google.genai", self.EXTRA, "GeminiClient")
        return genai.Client(**kwargs)

    def _is_async(self, client: object) -> bool:
        return False  # one genai.Client: its .aio side serves the async calls

    async def _async_client(self) -> Any | None:
        return self._sync.aio  # type: ignore[attr-defined]

    @property
    def base_url(self) -> str:
        api = getattr(self._sync, "_api_client", None)  # the SDK keeps its resolved options there
        options = getattr(api, "_http_options", None)
        return str(getattr(options, "base_url", None) or "")

    def _path(self) -> str:
        return f"models/{self.model}:generateContent"

    def _request(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None
    ) -> dict[str, Any]:
        return {"model": self.model, **gemini_params(messages, tools or ())}

    def _arguments(self, body: dict[str, Any]) -> dict[str, Any]:
        """``generate_content``'s arguments: ``model``, ``contents`` and everything else as its ``config``."""
        config = {k: v for k, v in body.items() if k not in ("model", "contents", "config")}
        given = body.get("config") or {}
        if hasattr(given, "model_dump"):  # a GenerateContentConfig: its unset (None) fields must not win
            given = given.model_dump(exclude_none=True)
        config.update(given)
        genai = load_sdk("google.genai", self.EXTRA, "GeminiClient")
        try:
            checked = genai.types.GenerateContentConfig.model_validate(config)
        except ValueError as exc:  # pydantic's ValidationError: a field the config does not have
            raise InvalidInput(f"GeminiClient: not a GenerateContentConfig: {exc}") from None
        calling = getattr(checked.tool_config, "function_calling_config", None)
        if getattr(calling, "stream_function_call_arguments", None):
            raise InvalidInput(
                "GeminiClient: stream_function_call_arguments is not supported (a streamed reply is folded "
                "from whole function calls, not partial_args)"
            )
        return {"model": body["model"], "contents": body["contents"], "config": checked}

    def _send(self, client: Any, body: dict[str, Any]) -> Any:
        return client.models.generate_content(**self._arguments(body))

    def _read(self, reply: Any) -> LLMResponse:
        body = reply if isinstance(reply, Mapping) else sdk_dump(reply)
        return LLMResponse.from_gemini(body)

    def _open(self, client: Any, body: dict[str, Any]) -> Any:
        return client.models.generate_content_stream(**self._arguments(body))

    def _folder(self) -> StreamFolder:
        return GeminiFolder()

    def close(self) -> None:
        for made in self._made:
            close = getattr(made, "close", None)  # google-genai before 1.29 has none
            if callable(close):
                close()

    async def aclose(self) -> None:
        for made in self._made:
            aclose = getattr(getattr(made, "aio", None), "aclose", None)
            if callable(aclose):
                await aclose()
