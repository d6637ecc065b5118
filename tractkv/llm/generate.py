"""Generation on a session: compile, call the model through :func:`~tractkv.llm.protocol.call_model`, commit
the typed reply; and recording a reply made elsewhere (:func:`record_response`). The one place where a session
meets a model (the facade's generate / chat / summarize / record_response).

A reply is committed the same way on both paths: :meth:`LLMResponse.assistant_payload` as the content, the
normalized usage in the commit's metadata under ``usage`` (so :attr:`CommitInfo.usage` shows it), Anthropic
blocks of unknown types and OpenAI message fields a message has no place for under ``omitted_blocks``, and
the answering model and its finish reason in ``generation_config`` (``model``, ``finish_reason``).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import attrs

from tractkv.engine.compile import marked_tools
from tractkv.engine.content import Message, content_blob, tool_schemas
from tractkv.engine.session import Session, Tip
from tractkv.engine.values import CommitInfo
from tractkv.errors import (
    ConcurrentUpdate,
    InvalidInput,
    MalformedResponse,
    ModelCallFailed,
    TractError,
    UnansweredToolCalls,
)

from .protocol import LLMClient, LLMResponse, call_model
from .streaming import AsyncChatStream, ChatStream, StreamDelta

S = TypeVar("S", ChatStream, AsyncChatStream)
C = TypeVar("C")


@attrs.frozen
class Request:
    """What a generation sends, read from the session when it starts: the tip its reply commits on (or not
    at all), the compiled messages, the tools offered (``given``: passed by the caller rather than the
    context's) and the context's tools cache breakpoint (``set_tools(cache=)``; None for given tools)."""

    tip: Tip
    messages: tuple[Message, ...]
    offered: list[dict[str, Any]]
    given: bool
    tools_cache: str | None = None

    @property
    def tools(self) -> Sequence[dict[str, Any]] | None:
        """The tools the model is sent (None when none): :attr:`offered`, as a
        :class:`~tractkv.engine.compile.compiler.ToolDefinitions` carrying :attr:`tools_cache` when set (the
        Anthropic client puts it on the last tool as ``cache_control``)."""
        if not self.offered:
            return None
        return marked_tools(self.offered, self.tools_cache) if self.tools_cache is not None else self.offered


def prepare(session: Session, tools: list[dict[str, Any]] | None) -> Request:
    """Check the session may take a reply and compile what the model is sent (see :func:`generate`)."""
    tip = session.writable("generate")  # the reply commits on the tip the model saw, or not at all
    ctx = session.compile()
    if ctx.open_calls:  # a tool run in progress: providers refuse a call left unanswered
        raise UnansweredToolCalls(ctx.open_calls)
    # given tools are checked (a misshapen tool is refused before the model is paid for, not at commit) and
    # read as tool_schemas reads them: an MCP tools/list result offers its tools, an SDK object its dump
    offered = [s.schema for s in tool_schemas(tools)] if tools is not None else list(ctx.tools)
    cache = None if tools is not None else ctx.tools_cache
    return Request(
        tip=tip, messages=tuple(ctx.messages), offered=offered, given=tools is not None, tools_cache=cache
    )


@attrs.frozen
class PreparedReply:
    """A generation in two halves, for a caller that calls the model itself (``AsyncTract`` awaits it on its
    event loop): :attr:`request` holds what the model is sent; :meth:`commit` commits its reply as
    :func:`generate` does, on the tip the request was read from (or :class:`ConcurrentUpdate`)."""

    request: Request
    _commit: Callable[[LLMResponse, Mapping[str, Any]], CommitInfo]

    def commit(self, response: LLMResponse, params: Mapping[str, Any]) -> CommitInfo:
        """Commit ``response`` (to this request; ``params`` were the model call's, see :func:`generate`)."""
        return self._commit(response, params)


def prepare_reply(session: Session, tools: list[dict[str, Any]] | None) -> PreparedReply:
    """:func:`prepare`, with the commit of its reply bound to ``session``."""
    request = prepare(session, tools)
    return PreparedReply(request, functools.partial(commit_reply, session, request))


def commit_reply(
    session: Session, request: Request, response: LLMResponse, params: Mapping[str, Any]
) -> CommitInfo:
    """Commit ``response`` to ``request`` (streamed or not, the same commit; see the module doc)."""
    config = reply_config(response, {k: v for k, v in params.items() if v is not None})
    try:
        return session.commit_content(
            content_blob(response.assistant_payload()),
            operation="append",
            metadata=reply_metadata(response, None),
            generation_config=config,
            tools=request.offered if request.given else None,
            toolset=None if request.given else session.head_state().tools,
            action="generate",
            tip=request.tip,
        )
    except ConcurrentUpdate as exc:  # the branch moved while the model answered: keep the paid-for reply
        exc.response = response
        raise


def generate(
    session: Session, model: LLMClient, tools: list[dict[str, Any]] | None, params: Mapping[str, Any]
) -> CommitInfo:
    """Compile HEAD, call ``model`` with the context's tools (or ``tools``), and commit its reply with the tool
    set it was offered, the parameters (plus the answering model's name and finish reason) as
    ``generation_config`` and its usage in the metadata (see the module doc).

    The model is called before anything is staged: a model error raises and commits nothing; tools that are
    not an accepted shape raise :class:`InvalidInput`, and a context ending with tool calls still waiting
    for their results raises :class:`UnansweredToolCalls`, before the model is called.
    """
    request = prepare(session, tools)
    response = call_model(model, request.messages, request.tools, params)
    return commit_reply(session, request, response, params)


class _Generation(Generic[S, C]):
    """What both generation streams hold: the model's stream, how to commit its reply, the commit."""

    def __init__(self, stream: S, commit: Callable[[LLMResponse], C]) -> None:
        self._stream: S = stream
        self._commit = commit
        self.commit: CommitInfo | None = None

    @property
    def response(self) -> LLMResponse | None:
        """The whole reply, once the stream has ended."""
        return self._stream.response

    @property
    def ignored_events(self) -> list[tuple[str, str]]:
        """Events of kinds the reader does not know, ignored as the provider asks (``(event, data)``; not
        committed). Pings are not kept: they carry nothing."""
        return self._stream.ignored_events

    @staticmethod
    def _failed(exc: Exception) -> TractError:
        """Anything but a tractkv error from a model's stream (a user's client), wrapped: one root to catch."""
        return ModelCallFailed(f"model stream failed: {exc!r}")


class GenerationStream(_Generation[ChatStream, CommitInfo]):
    """:func:`generate` streamed (``Tract.generate(stream=True)``): iterate for the reply's
    :class:`~tractkv.llm.streaming.StreamDelta` values as they arrive; when the stream ends complete, the
    whole reply is committed once, exactly as :func:`generate` commits it, and is :attr:`commit`.

    An interrupted stream commits nothing: the consumer stops iterating, the connection breaks off, or the
    provider reports an error (:class:`~tractkv.errors.LLMError`). Use it as a context manager: leaving the
    ``with`` block (``break``, ``return``, an exception) closes the response, so the model stops generating.
    A ``break`` out of a stream held in a variable closes nothing by itself (Python does not tell an iterator
    that the loop was left): the response stays open until :meth:`close` or until the stream is
    garbage-collected. The request is retried as a non-streamed one is, until the reply starts to arrive.
    """

    def __iter__(self) -> GenerationStream:
        return self

    def __next__(self) -> StreamDelta:
        try:
            return next(self._stream)
        except StopIteration:
            if self.commit is None and self._stream.response is not None:
                self.commit = self._commit(self._stream.response)
            raise
        except TractError:
            raise
        except Exception as exc:
            raise self._failed(exc) from exc

    def close(self) -> None:
        """Stop here: drop the connection and commit nothing (unless the reply was committed already)."""
        self._stream.close()

    def __enter__(self) -> GenerationStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncGenerationStream(_Generation[AsyncChatStream, Awaitable[CommitInfo]]):
    """:class:`GenerationStream` for ``async for`` (``await AsyncTract.generate(stream=True)``): the deltas
    as they arrive, then one commit (made by ``commit``, an awaitable: the async handle's worker thread),
    on :attr:`commit`. Interrupted (the consumer stops, an exception, :meth:`aclose`, cancellation, a broken
    connection), it commits nothing. Use ``async with``: leaving the block closes the response; a ``break``
    out of a stream held in a variable leaves it open until :meth:`aclose` or garbage collection."""

    def __aiter__(self) -> AsyncGenerationStream:
        return self

    async def __anext__(self) -> StreamDelta:
        try:
            return await anext(self._stream)
        except StopAsyncIteration:
            if self.commit is None and self._stream.response is not None:
                await self._committed(self._stream.response)
            raise
        except TractError:
            raise
        except Exception as exc:
            raise self._failed(exc) from exc

    async def _committed(self, response: LLMResponse) -> None:
        """Commit the reply. Cancelled meanwhile, the commit (one transaction, on the worker) still lands:
        :attr:`commit` is set when it does, so it never stays None for a reply that was committed."""
        import asyncio  # only the async handle makes this stream

        task = asyncio.ensure_future(self._commit(response))

        def landed(done: asyncio.Future[CommitInfo]) -> None:
            if not done.cancelled() and done.exception() is None:
                self.commit = done.result()

        task.add_done_callback(landed)
        await asyncio.shield(task)

    async def aclose(self) -> None:
        """Stop here: drop the connection and commit nothing (unless the reply was committed already)."""
        await self._stream.aclose()

    async def __aenter__(self) -> AsyncGenerationStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def open_stream(model: object, request: Request, params: Mapping[str, Any], *, asynchronous: bool) -> Any:
    """``model.chat_stream(...)`` (or ``achat_stream``) for ``request``: a
    :class:`~tractkv.llm.streaming.ChatStream` (:class:`~tractkv.llm.streaming.AsyncChatStream`).

    Raises:
        InvalidInput: the client does not stream (it has no such method).
        ModelCallFailed: the method raised a non-tractkv error, or returned something else.
    """
    name = "achat_stream" if asynchronous else "chat_stream"
    method = getattr(model, name, None)
    if not callable(method):
        raise InvalidInput(f"{type(model).__name__} cannot stream (it has no {name} method)")
    try:
        stream = method(request.messages, tools=request.tools, **params)
    except TractError:
        raise
    except Exception as exc:
        raise ModelCallFailed(f"model call failed: {exc!r}") from exc
    wanted = AsyncChatStream if asynchronous else ChatStream
    if not isinstance(stream, wanted):
        raise ModelCallFailed(
            f"{type(model).__name__}.{name} returned {type(stream).__name__}; a streaming client returns a "
            f"tractkv.llm.streaming.{wanted.__name__}"
        )
    return stream


def generate_stream(
    session: Session, model: LLMClient, tools: list[dict[str, Any]] | None, params: Mapping[str, Any]
) -> GenerationStream:
    """:func:`generate`, streamed: the :class:`GenerationStream` of the reply. The context is compiled and
    checked here (the errors :func:`generate` raises before calling the model are raised here); the request
    is sent on the first iteration."""
    request = prepare(session, tools)
    stream = open_stream(model, request, params, asynchronous=False)
    return GenerationStream(stream, lambda response: commit_reply(session, request, response, params))


def record_response(
    session: Session,
    response: object,
    *,
    choice: int = 0,
    message: str | None = None,
    metadata: dict[str, Any] | None = None,
    generation_config: dict[str, Any] | None = None,
    strict: bool = False,
) -> CommitInfo:
    """Commit a provider's reply (see :meth:`tractkv.Tract.record_response`): read by
    :meth:`LLMResponse.from_provider`, committed as :func:`generate` commits one.

    Raises:
        InvalidResponse: ``response`` is not a complete chat completion or message (see from_provider).
        InvalidInput: a bad ``choice``; ``metadata`` with its own ``usage`` or ``omitted_blocks`` key when
            the response supplies one; non-dict metadata or generation_config.
        ContentError: the reply has nothing to commit (no text, parts or tool calls).
    """
    for name, value in (("metadata", metadata), ("generation_config", generation_config)):
        if value is not None and not isinstance(value, dict):
            raise InvalidInput(f"{name} must be a dict, not {type(value).__name__}")
    reply = LLMResponse.from_provider(response, choice=choice, strict=strict)
    return session.commit(
        reply.assistant_payload(),
        "append",
        None,
        message,
        None,
        reply_metadata(reply, metadata),
        reply_config(reply, dict(generation_config or {})),
        None,
    )


def reply_metadata(response: LLMResponse, metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    """``metadata`` plus what the reply says beyond its message: ``usage`` and ``omitted_blocks``.

    Raises:
        InvalidInput: ``metadata`` has a key the reply fills.
    """
    out = dict(metadata or {})
    for key, value in (("usage", response.usage), ("omitted_blocks", list(response.omitted_blocks))):
        if value:
            if key in out:
                raise InvalidInput(f"metadata[{key!r}] is taken by the response's own {key}")
            out[key] = copy.deepcopy(value)
    return out or None


def reply_config(response: LLMResponse, config: dict[str, Any]) -> dict[str, Any]:
    """``config`` plus the answering model (``model``, which wins over a requested one) and its
    ``finish_reason``, when the reply names them."""
    if response.model:
        config["model"] = response.model
    if response.finish_reason:
        config["finish_reason"] = response.finish_reason
    return config


def ask(model: LLMClient, instructions: str, text: str) -> str:
    """One instruction-following call (summaries): a system message, a user message, the reply's text.

    Raises:
        MalformedResponse: the reply calls tools. No tool is offered, so no model answers a summary request
            that way: it is a reply meant for another caller (typically a ``ScriptedLLM`` shared by an agent
            loop and the summarizer, serving the loop's next reply here). Nothing is committed from it.
    """
    messages = [Message(role="system", content=instructions), Message(role="user", content=text)]
    reply = call_model(model, messages, None, {})
    if reply.tool_calls:
        names = ", ".join(c.name for c in reply.tool_calls)
        raise MalformedResponse(
            f"a summary request (no tools offered) got a reply calling tools ({names}): a reply meant for "
            "another caller? A model shared by an agent loop and the summarizer serves them in turn; give "
            "summaries their own model: t.configure_llm(llm, summarizer=...)"
        )
    return reply.text
