"""Streamed replies: the SDK's stream events in, :class:`StreamDelta` values out as they arrive, and at the end
the same :class:`~tractkv.llm.protocol.LLMResponse` the non-streamed call of that reply gives.

A :class:`ChatStream` (:class:`AsyncChatStream` for ``async for``) opens the SDK's stream on its first
iteration and hands each event to a folder (:mod:`tractkv.llm.folders`, one per API), which says what deltas
it carries and, once the stream has ended, what the whole reply is: the final object the SDK assembles where
it offers one (a Responses ``response.completed`` event's ``Response``, an Anthropic ``MessageStream``'s
final message), else the chunks folded back into the body the API sends without streaming (a
``chat.completion``). That body is read by the same reader as a non-streamed reply, so a streamed reply
commits exactly what the non-streamed one does.

A stream that ends before the provider said the reply is complete, an error the provider reports in the
stream, or a connection that breaks off raises :class:`~tractkv.errors.LLMError`: there is no reply, and
nothing is committed from it. An SDK's exceptions are raised as tractkv's (``LLMError``, ``LLMHTTPError``,
``MalformedResponse``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

import attrs

from tractkv.errors import LLMError

from .protocol import LLMResponse

DELTA_TYPES = ("text", "thinking", "refusal", "tool_call")

_END = object()


@attrs.frozen(kw_only=True)
class StreamDelta:
    """One piece of a reply, as it arrives.

    Attributes:
        type: ``text``, ``thinking``, ``refusal`` or ``tool_call``.
        text: the new text (for ``tool_call``: the next fragment of the call's arguments, JSON text).
        index: for ``tool_call``, which call of the reply (0, 1, ...); for the others, where the text belongs:
            the OpenAI choice, the Responses output item, the Anthropic content block or the Gemini part.
        id, name: for ``tool_call``, the call's id and tool name (on the call's first delta; None after).
    """

    type: str
    text: str = ""
    index: int = 0
    id: str | None = None
    name: str | None = None


class StreamFolder(Protocol):
    """Folds one API's stream events into deltas, then into the whole reply."""

    ignored: list[tuple[str, str]]

    def add(self, event: object) -> list[StreamDelta]:
        """The deltas ``event`` carries (raises LLMError for an error the provider reports)."""
        ...

    def finish(self, source: object) -> LLMResponse:
        """The whole reply once the stream ended (``source``: the SDK's stream object); LLMError when the
        stream ended before the reply was complete."""
        ...


Mapper = Callable[[bool], AbstractContextManager[Any]]
"""Raises an SDK's exceptions as tractkv's (its argument: whether the stream had started)."""


def _unmapped(started: bool) -> AbstractContextManager[Any]:
    return contextlib.nullcontext()


class _Folding:
    """What the sync and async streams share: deltas waiting to be handed out, then the reply."""

    def __init__(self, folder: StreamFolder, mapped: Mapper) -> None:
        self._folder = folder
        self._mapped = mapped
        self._pending: deque[StreamDelta] = deque()
        self._events: Any = None
        self._closed = False
        self._failed: Exception | None = None  # what a failed iteration raised; raised again, never resent
        self.response: LLMResponse | None = None

    @property
    def ignored_events(self) -> list[tuple[str, str]]:
        """``(event type, JSON)`` of the events the folder does not know (a provider's newer event kinds):
        ignored, and kept here; they are not part of the reply nor committed."""
        return list(self._folder.ignored)

    def _take(self, event: object) -> None:
        """One event of the stream (``_END``: it ended)."""
        if event is _END:
            with self._mapped(True):
                self.response = self._folder.finish(self._events)
        else:
            self._pending.extend(self._folder.add(event))

    def _refuse_closed(self) -> None:
        if self._closed:
            raise LLMError("the stream was closed before the reply was complete")


class ChatStream(_Folding):
    """A reply as it streams: iterate for :class:`StreamDelta` values; once the iteration ends,
    :attr:`response` is the whole reply. :meth:`close` (or leaving a ``with`` block) closes the SDK's stream
    (its HTTP response), so the provider stops generating.

    Args:
        opener: opens the SDK's stream (sends the request); called on the first iteration.
        folder: reads its events.
        mapped: a context manager raising the SDK's exceptions as tractkv's (none by default: a client of
            your own raises what it raises, and ``Tract.generate`` wraps it as ModelCallFailed).
    """

    def __init__(self, opener: Callable[[], Any], folder: StreamFolder, mapped: Mapper = _unmapped) -> None:
        super().__init__(folder, mapped)
        self._opener = opener

    def __iter__(self) -> ChatStream:
        return self

    def __next__(self) -> StreamDelta:
        """The next delta. Once an iteration failed (the opening or the stream), each further one raises the
        same error again: the request is never sent a second time."""
        if self._failed is not None:
            raise self._failed
        try:
            return self._next()
        except StopIteration:
            raise
        except Exception as exc:
            self._failed = exc
            raise

    def _next(self) -> StreamDelta:
        while not self._pending:
            if self.response is not None:
                raise StopIteration
            self._refuse_closed()
            if self._events is None:
                with self._mapped(False):
                    self._events = self._opener()
            with self._mapped(True):
                event = next(self._events, _END)
            self._take(event)
        return self._pending.popleft()

    def close(self) -> None:
        if self._events is not None and not self._closed:
            close = getattr(self._events, "close", None)
            if callable(close):
                with self._mapped(True):
                    close()
        self._closed = True

    def __del__(self) -> None:
        """A stream dropped unfinished closes its response, whatever the SDK does with its own."""
        if self._events is not None and not self._closed and self.response is None:
            with contextlib.suppress(Exception):
                self._events.close()

    def __enter__(self) -> ChatStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncChatStream(_Folding):
    """:class:`ChatStream` for ``async for``; :meth:`aclose` closes the SDK's stream.

    Args:
        opener: a coroutine function opening the SDK's stream: ``(events, asynchronous)``, where a sync
            stream (a sync SDK client's) is read in worker threads, never on the event loop.
        folder, mapped: as for :class:`ChatStream`.
    """

    def __init__(
        self,
        opener: Callable[[], Awaitable[tuple[Any, bool]]],
        folder: StreamFolder,
        mapped: Mapper = _unmapped,
    ) -> None:
        super().__init__(folder, mapped)
        self._opener = opener
        self._asynchronous = True

    def __aiter__(self) -> AsyncChatStream:
        return self

    async def __anext__(self) -> StreamDelta:
        """As :meth:`ChatStream.__next__`: a failed stream raises its error again and sends nothing."""
        if self._failed is not None:
            raise self._failed
        try:
            return await self._anext()
        except StopAsyncIteration:
            raise
        except Exception as exc:
            self._failed = exc
            raise

    async def _anext(self) -> StreamDelta:
        while not self._pending:
            if self.response is not None:
                raise StopAsyncIteration
            self._refuse_closed()
            if self._events is None:
                with self._mapped(False):
                    self._events, self._asynchronous = await self._opener()
            with self._mapped(True):
                if self._asynchronous:
                    event = await anext(self._events, _END)
                else:
                    event = await asyncio.to_thread(next, self._events, _END)
            self._take(event)
        return self._pending.popleft()

    async def aclose(self) -> None:
        if self._events is not None and not self._closed:
            events = self._events
            close = getattr(events, "aclose", None) or getattr(events, "close", None)
            if callable(close):
                with self._mapped(True):
                    if self._asynchronous:
                        result = close()
                        if inspect.isawaitable(result):
                            await result
                    else:
                        await asyncio.to_thread(close)
        self._closed = True

    async def __aenter__(self) -> AsyncChatStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
