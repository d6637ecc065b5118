"""What the two HTTP clients share: one API endpoint reached through a :class:`~tractkv.llm._http.JSONSession`,
each call in four forms (:meth:`chat`, :meth:`achat`, :meth:`chat_stream`, :meth:`achat_stream`) built from
the same request body and read by the same reply reader. A provider's client says how to build the body
(:meth:`_request`), read a reply (:meth:`_read`) and fold its event stream (:meth:`_stream_reader`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

from tractkv.errors import InvalidInput, MalformedResponse

from .protocol import LLMResponse
from .streaming import AsyncChatStream, ChatStream, StreamReader

if TYPE_CHECKING:
    from tractkv.engine.content import Message

    from ._http import JSONSession


class HTTPChatClient:
    """The calls of an HTTP model client (see the module doc); a subclass sets ``PATH`` and makes
    ``model`` and ``_session`` in its ``__init__``."""

    PATH: str
    model: str
    _session: JSONSession

    def _request(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None
    ) -> dict[str, Any]:
        """The provider's request body for ``messages`` and ``tools``, before the call's params."""
        raise NotImplementedError

    def _read(self, body: dict[str, Any]) -> LLMResponse:
        """The provider's reply body as a response."""
        raise NotImplementedError

    def _stream_reader(self) -> StreamReader:
        raise NotImplementedError

    def _stream_extras(self) -> dict[str, Any]:
        """Request fields a streamed call adds besides ``stream: true``, unless the call passes them (a None
        value, for a server that refuses one: not sent at all)."""
        return {}

    @property
    def base_url(self) -> str:
        return self._session.base_url

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        """Release pooled connections."""
        self._session.close()

    async def aclose(self) -> None:
        """Release the async client's pooled connections (the ``a*`` methods')."""
        await self._session.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _body(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        params: Mapping[str, Any],
    ) -> dict[str, Any]:
        if "stream" in params:
            raise InvalidInput(
                "streaming is chat_stream (or Tract.generate(stream=True)), not chat(stream=...)"
            )
        body = self._request(messages, tools)
        body.update({k: v for k, v in params.items() if v is not None})
        return body

    def _stream_body(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        params: Mapping[str, Any],
    ) -> dict[str, Any]:
        extras = {} if set(params) & set(self._stream_extras()) else self._stream_extras()  # a call's own win
        return {**extras, **self._body(messages, tools, params), "stream": True}

    def _reply(self, body: dict[str, Any]) -> LLMResponse:
        try:
            return self._read(body)
        except MalformedResponse as exc:
            raise MalformedResponse(exc.reason, self.base_url + self.PATH) from None

    def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> LLMResponse:
        """One exchange: ``messages`` and ``tools`` rendered for the provider (either provider's tool shape
        is accepted); ``params`` go to the API as given (None values dropped)."""
        return self._reply(self._session.post(self.PATH, self._body(messages, tools, params)))

    async def achat(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> LLMResponse:
        """:meth:`chat` over httpx's async client."""
        return self._reply(await self._session.apost(self.PATH, self._body(messages, tools, params)))

    def chat_stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> ChatStream:
        """:meth:`chat`, streamed (``stream: true``): iterate the :class:`~tractkv.llm.streaming.ChatStream`
        for deltas; once it ends, its ``response`` is the reply :meth:`chat` would have returned. The request
        is sent on the first iteration."""
        lines = self._session.stream_lines(self.PATH, self._stream_body(messages, tools, params))
        return ChatStream(lines, self._stream_reader())

    def achat_stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> AsyncChatStream:
        """:meth:`chat_stream` for ``async for``."""
        lines = self._session.astream_lines(self.PATH, self._stream_body(messages, tools, params))
        return AsyncChatStream(lines, self._stream_reader())
