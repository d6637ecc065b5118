"""What the model clients share: one official SDK client object (sync or async) that every call goes through,
and the translation of the SDK's exceptions into tractkv's (:func:`mapped`).

A provider's client (:class:`~tractkv.llm.openai_client.OpenAIClient`, ...) says how to make its SDK client
from keyword arguments (:meth:`SDKClient._make`), build a request (:meth:`SDKClient._request`), send it
(:meth:`SDKClient._send`), read the reply (:meth:`SDKClient._read`), open a stream (:meth:`SDKClient._open`)
and fold its events (:meth:`SDKClient._folder`). Retries, timeouts, base URLs, auth and the wire itself are
the SDK's: nothing here touches HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import inspect
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Self

from tractkv.errors import InvalidInput, LLMError, LLMHTTPError, MalformedResponse, MissingExtra, TractError

from .protocol import LLMResponse, as_messages
from .streaming import AsyncChatStream, ChatStream, StreamFolder

if TYPE_CHECKING:
    from types import ModuleType

    from tractkv.engine.content import Message

MAX_DETAIL = 500  # characters of an API error's message kept in LLMHTTPError (bodies can be whole HTML pages)


def load_sdk(module: str, extra: str, feature: str) -> ModuleType:
    """The SDK module, or :class:`~tractkv.errors.MissingExtra` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtra("", extra, module, feature=feature) from exc


def _detail(exc: BaseException) -> str:
    """The API's own error message when its body has one, else the exception's."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, Mapping) else error
        if isinstance(message, str):
            return message[:MAX_DETAIL]
    return str(getattr(exc, "message", None) or exc)[:MAX_DETAIL]


def _kind(exc: BaseException) -> str:
    """The error's type or code as the provider named it (``overloaded_error``, ``server_error``...)."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            for field in ("type", "code"):
                if isinstance(error.get(field), str) and error[field] != "error":
                    return str(error[field])
    return "error"


def _url(exc: BaseException, fallback: str) -> str:
    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    return str(url) if url is not None else fallback


def _attempts(exc: BaseException) -> int:
    """How many requests the SDK made: the retry count it sends on each one (``x-stainless-retry-count``)."""
    response = getattr(exc, "response", None)
    request = getattr(response, "request", None) or getattr(exc, "request", None)
    headers = getattr(request, "headers", None)
    count = headers.get("x-stainless-retry-count") if headers is not None else None
    try:
        return int(count) + 1 if count is not None else 1
    except ValueError:
        return 1


def is_transport_error(exc: BaseException) -> bool:
    """An HTTP library's own failure (httpx, httpx2, httpcore, aiohttp): a connection that broke off."""
    module = type(exc).__module__.split(".", 1)[0]
    return module in ("httpx", "httpx2", "httpcore", "httpcore2", "aiohttp", "h11")


def translated(
    exc: Exception,
    sdk: str,
    where: str,
    hint: Callable[[int], str] | None = None,
    *,
    started: bool = False,
) -> TractError:
    """``exc``, raised by the SDK ``sdk`` (its top module's name) while calling ``where``, as a tractkv error:

    - an error status, once the SDK's retries are spent: :class:`LLMHTTPError` (``.status``, ``.attempts``);
    - an error the provider reported in a stream that had ``started`` (an error event): :class:`LLMError`;
    - a server the SDK could not reach (or a timeout), or a stream that broke off: :class:`LLMError`;
    - a reply the SDK could not decode (not JSON, the wrong shape), or a ``ValueError`` in a stream that had
      ``started``: :class:`MalformedResponse`;
    - any other ``ValueError`` (the SDK refusing the call before sending it, e.g. anthropic's "Streaming is
      required" for a large ``max_tokens``): :class:`InvalidInput` with the SDK's message;
    - parameters the SDK's method does not take (a ``TypeError`` from the call): :class:`InvalidInput`;
    - any other error of the SDK: :class:`LLMError`.
    """
    if isinstance(exc, TractError):
        return exc
    name = type(exc).__name__
    names = {k.__name__ for k in type(exc).__mro__}
    status = getattr(exc, "status_code", None)
    if status is None and sdk == "google":
        status = getattr(exc, "code", None)
    url = _url(exc, where)
    if isinstance(status, int) and status >= 400:
        detail = _detail(exc)
        if hint is not None:
            detail += hint(status)
        return LLMHTTPError(status, url, detail, _attempts(exc))
    if isinstance(status, int) or (started and "APIError" in names and "APIConnectionError" not in names):
        # an error event in a stream answered 200
        return LLMError(f"the provider reported an error mid-stream ({_kind(exc)}): {_detail(exc)}")
    if started and ("APIConnectionError" in names or is_transport_error(exc)):
        return LLMError(f"the stream from {url} broke off: {exc.__cause__ or exc!r}")
    if "APIConnectionError" in names or is_transport_error(exc):  # APITimeoutError too
        cause = exc.__cause__ or exc
        return LLMError(f"cannot reach {url}: {name}: {cause!r}")
    if "APIResponseValidationError" in names or (isinstance(exc, ValueError) and (started or _decoding(exc))):
        return MalformedResponse(f"{name}: {exc}"[:MAX_DETAIL], url)
    if isinstance(exc, ValueError):  # the SDK refused the call before sending it
        return InvalidInput(f"{where} refused the call: {exc}")
    if isinstance(exc, TypeError):
        return InvalidInput(f"{where} refused the call's parameters: {exc}")
    if type(exc).__module__.split(".", 1)[0] == sdk:
        return LLMError(f"{name}: {_detail(exc)}")
    return LLMError(f"{where} failed: {exc!r}")


def _decoding(exc: BaseException) -> bool:
    """Whether ``exc`` is an error reading a reply (JSON or pydantic validation), not a refusal up front."""
    return isinstance(exc, (json.JSONDecodeError, UnicodeError)) or any(
        k.__name__ == "ValidationError" and k.__module__.startswith("pydantic") for k in type(exc).__mro__
    )


@functools.cache
def _accepted(method: Callable[..., Any]) -> frozenset[str] | None:
    """The keyword arguments ``method`` takes (None: any, it has ``**kwargs``)."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(p.name for p in parameters)


def sdk_call(method: Callable[..., Any], body: Mapping[str, Any]) -> Any:
    """``method(**body)``, with the fields of ``body`` the SDK's method has no argument for sent in its
    ``extra_body`` (so a call's params reach the API as given, even those an SDK release does not type; an
    ``extra_body`` of the call's own is kept, its keys winning)."""
    accepted = _accepted(getattr(method, "__func__", method))
    if accepted is None or accepted.issuperset(body):
        return method(**body)
    known = {k: v for k, v in body.items() if k in accepted}
    extra = {k: v for k, v in body.items() if k not in accepted}
    if "extra_body" in accepted:
        known["extra_body"] = {**extra, **(body.get("extra_body") or {})}
        return method(**known)
    return method(**body)  # the SDK's own TypeError names what it refused


class SDKClient:
    """The calls of a model client over an official SDK (see the module doc): :meth:`chat`, :meth:`achat`,
    :meth:`chat_stream`, :meth:`achat_stream`. A subclass sets ``SDK`` (the top module's name), ``EXTRA`` and
    the hooks."""

    SDK: ClassVar[str]
    EXTRA: ClassVar[str]
    model: str

    def __init__(self, model: str, client: object, sdk_kwargs: Mapping[str, Any]) -> None:
        if not isinstance(model, str) or not model:
            raise InvalidInput("model must be a non-empty string")
        if client is not None and sdk_kwargs:
            raise InvalidInput(
                f"{type(self).__name__} got a client and the keyword arguments {sorted(sdk_kwargs)}: "
                "configure the SDK client you pass (or pass no client)"
            )
        self.model = model
        self._kwargs = dict(sdk_kwargs)
        self._made: list[object] = []  # the SDK clients this object made (and closes)
        self._sync: object | None = None
        self._async: object | None = None
        self._warmed = False
        if client is None:
            self._sync = self._own(asynchronous=False)
        elif self._is_async(client):
            self._async = client
        else:
            self._sync = client
        self.client = client if client is not None else self._sync

    # --- the hooks of a provider --------------------------------------------------------------------

    def _make(self, kwargs: Mapping[str, Any], *, asynchronous: bool) -> object:
        """A new SDK client from ``kwargs``."""
        raise NotImplementedError

    def _is_async(self, client: object) -> bool:
        """Whether ``client`` is an async SDK client (``AsyncOpenAI``, ``AsyncAnthropic``...: its ``close`` is
        a coroutine function)."""
        return inspect.iscoroutinefunction(getattr(type(client), "close", None))

    def _request(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None
    ) -> dict[str, Any]:
        """The SDK method's keyword arguments for ``messages`` and ``tools``, before the call's params."""
        raise NotImplementedError

    def _send(self, client: Any, body: dict[str, Any]) -> Any:
        """Call the SDK (an awaitable when ``client`` is async)."""
        raise NotImplementedError

    def _read(self, reply: Any) -> LLMResponse:
        """The SDK's reply as a response."""
        raise NotImplementedError

    def _open(self, client: Any, body: dict[str, Any]) -> Any:
        """Open a stream: the SDK's event iterator (an awaitable of one when ``client`` is async)."""
        raise NotImplementedError

    def _folder(self) -> StreamFolder:
        raise NotImplementedError

    def _stream_extras(self) -> dict[str, Any]:
        """Arguments a streamed call adds, unless the call passes them (a None value: not sent at all)."""
        return {}

    def _path(self) -> str:
        """The endpoint's path under the base URL (for messages)."""
        return ""

    def _warm(self) -> None:
        """Work the SDK does once per process on its first reply (building its types' validators): run in a
        worker thread before the first async call, so it does not hold up the event loop."""

    def _hint(self, status: int) -> str:
        """What to add to an error status's message (say, a likely cause)."""
        return ""

    # --- shared -------------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return str(getattr(self._sync or self._async, "base_url", ""))

    @property
    def endpoint(self) -> str:
        """The URL the calls go to (``base_url`` and the API's path)."""
        return self.base_url.rstrip("/") + "/" + self._path()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def _own(self, *, asynchronous: bool) -> object:
        try:
            made = self._make(self._kwargs, asynchronous=asynchronous)
        except TractError:
            raise
        except Exception as exc:  # a missing key, an unknown keyword: the SDK refused its settings
            raise InvalidInput(f"{type(self).__name__} could not make its {self.SDK} client: {exc}") from exc
        self._made.append(made)
        return made

    def _sync_client(self) -> Any:
        if self._sync is None:
            raise InvalidInput(
                f"{type(self).__name__} wraps an async SDK client ({type(self._async).__name__}): its calls "
                "are the async ones (AsyncTract, achat, achat_stream); give a sync client for Tract"
            )
        return self._sync

    async def _async_client(self) -> Any | None:
        """The async SDK client, made on first use (in a thread: making one reads the CA bundle, which must
        not hold up the event loop) when this client made its own; None when only a sync one was given."""
        if not self._warmed:
            await asyncio.to_thread(self._warm)
            self._warmed = True
        if self._async is None and not self._made:
            return None
        if self._async is None:
            made = await asyncio.to_thread(self._own, asynchronous=True)
            if self._async is None:
                self._async = made
        return self._async

    @contextlib.contextmanager
    def _mapped(self, started: bool = False) -> Iterator[None]:
        """Raise the SDK's exceptions as tractkv's (:func:`translated`; ``started``: in a stream that had
        started)."""
        try:
            yield
        except Exception as exc:
            where = self.endpoint
            error = translated(exc, self.SDK, where, self._hint, started=started)
            if error is exc:
                raise
            raise error from exc

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
        body = self._request(as_messages(messages), tools)
        body.update({k: v for k, v in params.items() if v is not None})
        return body

    def _stream_body(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        params: Mapping[str, Any],
    ) -> dict[str, Any]:
        extras = {} if set(params) & set(self._stream_extras()) else self._stream_extras()  # a call's own win
        return {**extras, **self._body(messages, tools, params)}

    def _reply(self, reply: Any) -> LLMResponse:
        try:
            return self._read(reply)
        except MalformedResponse as exc:
            raise MalformedResponse(exc.reason, exc.url or self.endpoint) from None

    def chat(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None, **params: Any
    ) -> LLMResponse:
        """One exchange: ``messages`` and ``tools`` rendered for the provider (either provider's tool shape
        is accepted); ``params`` go to the SDK's method as given (None values dropped)."""
        body = self._body(messages, tools, params)
        client = self._sync_client()
        with self._mapped():
            reply = self._send(client, body)
        return self._reply(reply)

    async def achat(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None, **params: Any
    ) -> LLMResponse:
        """:meth:`chat` on the event loop: awaited on the async SDK client, or the sync one's call in a
        worker thread when only a sync client was given."""
        body = self._body(messages, tools, params)
        client = await self._async_client()
        with self._mapped():
            if client is None:
                reply = await asyncio.to_thread(self._send, self._sync_client(), body)
            else:
                reply = await self._send(client, body)
        return self._reply(reply)

    def chat_stream(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None, **params: Any
    ) -> ChatStream:
        """:meth:`chat`, streamed: iterate the :class:`~tractkv.llm.streaming.ChatStream` for deltas; once
        it ends, its ``response`` is the reply :meth:`chat` would have returned. The request is sent on the
        first iteration."""
        body = self._stream_body(messages, tools, params)
        client = self._sync_client()
        return ChatStream(functools.partial(self._open, client, body), self._folder(), self._mapped)

    def achat_stream(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None, **params: Any
    ) -> AsyncChatStream:
        """:meth:`chat_stream` for ``async for`` (over the async SDK client, or the sync one's stream read
        in worker threads)."""
        body = self._stream_body(messages, tools, params)

        async def opened() -> tuple[Any, bool]:
            client = await self._async_client()
            if client is None:
                return await asyncio.to_thread(self._open, self._sync_client(), body), False
            return await self._open(client, body), True

        return AsyncChatStream(opened, self._folder(), self._mapped)

    def close(self) -> None:
        """Close the SDK clients this object made (a client you passed is yours to close)."""
        for made in self._made:
            if not self._is_async(made):
                made.close()  # type: ignore[attr-defined]

    async def aclose(self) -> None:
        """Close the async SDK client this object made, if it made one."""
        for made in self._made:
            if self._is_async(made):
                await made.close()  # type: ignore[attr-defined]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """:meth:`aclose` (the async SDK client made on first use), then :meth:`close` (a sync one made)."""
        await self.aclose()
        self.close()
