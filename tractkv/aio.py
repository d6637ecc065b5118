"""Async tractkv: :class:`AsyncTract`, the :class:`~tractkv.Tract` facade's operations as coroutines that
never block the event loop. Not imported by ``import tractkv``: ``from tractkv.aio import AsyncTract``.

**Where the work runs.** LMDB calls block, and a :class:`~tractkv.Tract` (its session: HEAD, compile state,
batches) belongs to one thread at a time. So each AsyncTract owns one worker thread, and every store
operation of that handle runs there, one after another, in the order the coroutines asked: that thread is
how an AsyncTract's reads and writes are serialized (no lock; a queue of one). Model calls do not run there:
``generate`` compiles on the worker, awaits the model on the event loop (``achat`` over the async SDK client
for the SDK clients; a plain ``chat`` client in a thread of its own), then commits on the worker.

**Several handles.** Two AsyncTracts (or an AsyncTract and any Tract, thread or process) on one store are
two handles, each with its HEAD and worker thread; the store serializes their writes (LMDB's one writer
lock) and every branch move is a compare-and-swap, as for any two handles: the loser of a race on one
branch gets :class:`~tractkv.errors.ConcurrentUpdate` with nothing written, or with ``rebase_appends=True`` a
pure append is re-made on the new tip. A reply (``generate``) commits on the tip the model saw or not at all.

**Cancellation.** A store operation is one transaction. Cancelled while it waits its turn, it never runs;
cancelled while it runs, it completes (a thread cannot be interrupted, and the transaction is all or
nothing) and its result is dropped. Either way nothing is half-written, and the handle's next operation
runs after it. ``generate`` cancelled while the model answers commits nothing (the request is cancelled);
``run`` cancelled stops at its next model call (each step already committed stays, as after any failure).
A stream cancelled during its final commit still commits (the transaction runs whole) and its ``.commit``
is set when that commit lands. ``open`` / ``clone`` cancelled while the worker opens the store: the Tract it
makes is closed there, releasing the store.

**A reply that cannot commit.** If another coroutine or handle moves the branch while the model answers
(``gather(at.generate(), at.user(...))``), ``generate`` raises :class:`~tractkv.errors.ConcurrentUpdate`,
as ``Tract.generate`` does, and the reply that was paid for is on the exception: ``exc.response`` (an
:class:`~tractkv.llm.protocol.LLMResponse`; ``await at.record_response(exc.response.raw)`` or a retry).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Concatenate, Literal, ParamSpec, TypeVar, overload

from tractkv.errors import ModelCallFailed, NoLLMConfigured, StoreClosed, TractError
from tractkv.tract import Tract

if TYPE_CHECKING:
    from tractkv.engine.content import Message
    from tractkv.engine.usage import ToolUsage
    from tractkv.engine.values import CommitInfo, RunResult
    from tractkv.ids import ObjectId
    from tractkv.llm.generate import AsyncGenerationStream, PreparedReply
    from tractkv.llm.protocol import LLMClient, LLMResponse

T = TypeVar("T")

P = ParamSpec("P")


def _on_worker(
    method: Callable[Concatenate[Tract, P], T],
) -> Callable[Concatenate[AsyncTract, P], Coroutine[Any, Any, T]]:
    """``method`` of the handle's Tract as a coroutine running on its worker thread."""
    name = method.__name__

    async def call(self: AsyncTract, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(getattr(self._tract, name), *args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``await`` :meth:`Tract.{name} <tractkv.Tract.{name}>` (on the handle's worker thread)."
    return call


class AsyncTract:
    """An async handle on a tractkv store (see the module doc for threads, ordering and cancellation).

    Every :class:`~tractkv.Tract` method that touches the store is a coroutine here, with the same arguments
    and result (``await at.user("hi")``, ``await at.compile()``, ``await at.log()``, ``await at.push()``,
    ...); HEAD is ``await at.head()`` and ``await at.current_branch()``. ``generate`` and ``run`` await the
    model on the event loop. What has no async form (``batch``, hooks' own calls) runs inside
    :meth:`call`: ``await at.call(lambda t: ...)`` runs a function of the underlying Tract on the worker.

    Make one with :meth:`open` (or :meth:`clone`), or wrap a Tract: ``AsyncTract(tract)``, which then belongs
    to the AsyncTract (use it only through :meth:`call`; :meth:`close` closes it).
    """

    def __init__(self, tract: Tract, *, worker: ThreadPoolExecutor | None = None) -> None:
        if not isinstance(tract, Tract):
            from tractkv.errors import InvalidInput

            raise InvalidInput(f"AsyncTract wraps a Tract, not {type(tract).__name__}")
        self._tract = tract
        self._worker = worker or ThreadPoolExecutor(max_workers=1, thread_name_prefix="tractkv-aio")
        self._closed = False

    @classmethod
    async def open(cls, path: str | None = None, **kwargs: Any) -> AsyncTract:
        """:meth:`Tract.open <tractkv.Tract.open>` (same arguments) on a new handle's worker thread."""
        return await cls._made(functools.partial(Tract.open, path, **kwargs))

    @classmethod
    async def clone(cls, url: str, path: str | None, **kwargs: Any) -> AsyncTract:
        """:meth:`Tract.clone <tractkv.Tract.clone>` (same arguments) on a new handle's worker thread."""
        return await cls._made(functools.partial(Tract.clone, url, path, **kwargs))

    @classmethod
    async def _made(cls, make: Callable[[], Tract]) -> AsyncTract:
        worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tractkv-aio")
        made = asyncio.get_running_loop().run_in_executor(worker, make)
        try:
            tract = await asyncio.shield(made)  # cancelled, the open still finishes on the worker...
        except asyncio.CancelledError:
            made.add_done_callback(functools.partial(_discard, worker))  # ...and is closed there
            raise
        except BaseException:
            worker.shutdown(wait=False)
            raise
        return cls(tract, worker=worker)

    async def close(self) -> None:
        """Close the Tract (on the worker, after every operation already asked for) and stop the worker.
        Closing again does nothing (as :meth:`Tract.close <tractkv.Tract.close>`); an operation asked for
        after ``close`` raises :class:`~tractkv.errors.StoreClosed`, as the closed Tract's would."""
        if self._closed:
            return
        future = self._submit(self._tract.close)
        self._closed = True
        try:
            await future
        finally:
            self._worker.shutdown(wait=False)

    async def __aenter__(self) -> AsyncTract:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def tract(self) -> Tract:
        """The underlying Tract. Use it only inside :meth:`call` (on the worker thread): it is not
        thread-safe."""
        return self._tract

    def __repr__(self) -> str:
        return f"Async{self._tract!r}"

    def _submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> asyncio.Future[T]:
        if self._closed:
            raise StoreClosed()
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._worker, functools.partial(fn, *args, **kwargs))

    async def _run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return await self._submit(fn, *args, **kwargs)

    async def call(self, fn: Callable[[Tract], T]) -> T:
        """``fn(tract)`` on the worker thread, in turn with the handle's other operations: for what has no
        async form, such as a batch (``await at.call(lambda t: several_commits_in_one_batch(t))``)."""
        return await self._run(fn, self._tract)

    async def head(self) -> ObjectId | None:
        """:attr:`Tract.head <tractkv.Tract.head>`."""
        return await self._run(lambda: self._tract.head)

    async def current_branch(self) -> str | None:
        """:attr:`Tract.current_branch <tractkv.Tract.current_branch>`."""
        return await self._run(lambda: self._tract.current_branch)

    # --- the store, on the worker thread (same arguments and results as the Tract's) -----------------------

    add_policy = _on_worker(Tract.add_policy)
    annotate = _on_worker(Tract.annotate)
    assistant = _on_worker(Tract.assistant)  # type: ignore[arg-type]  # **kwargs: mypy sees a named self
    blame = _on_worker(Tract.blame)
    branch = _on_worker(Tract.branch)
    branches = _on_worker(Tract.branches)
    budget = _on_worker(Tract.budget)
    check_writable = _on_worker(Tract.check_writable)
    checkout = _on_worker(Tract.checkout)
    cherry_pick = _on_worker(Tract.cherry_pick)
    commit = _on_worker(Tract.commit)
    compile = _on_worker(Tract.compile)
    compress = _on_worker(Tract.compress)
    compress_tool_calls = _on_worker(Tract.compress_tool_calls)
    configure_llm = _on_worker(Tract.configure_llm)
    configure_tool_summarization = _on_worker(Tract.configure_tool_summarization)
    delete_branch = _on_worker(Tract.delete_branch)
    delete_tag = _on_worker(Tract.delete_tag)
    diff = _on_worker(Tract.diff)
    fetch = _on_worker(Tract.fetch)
    find_tool_calls = _on_worker(Tract.find_tool_calls)
    find_tool_results = _on_worker(Tract.find_tool_results)
    find_tool_turns = _on_worker(Tract.find_tool_turns)
    gc = _on_worker(Tract.gc)
    get_commit = _on_worker(Tract.get_commit)
    get_commit_tools = _on_worker(Tract.get_commit_tools)
    get_tools = _on_worker(Tract.get_tools)
    list_branches = _on_worker(Tract.list_branches)
    log = _on_worker(Tract.log)
    merge = _on_worker(Tract.merge)
    message_content = _on_worker(Tract.message_content)
    off = _on_worker(Tract.off)
    on = _on_worker(Tract.on)
    original_of = _on_worker(Tract.original_of)
    pull = _on_worker(Tract.pull)
    push = _on_worker(Tract.push)
    push_tags = _on_worker(Tract.push_tags)
    record_response = _on_worker(Tract.record_response)
    rebase = _on_worker(Tract.rebase)
    reflog = _on_worker(Tract.reflog)
    remote_add = _on_worker(Tract.remote_add)
    remote_remove = _on_worker(Tract.remote_remove)
    remotes = _on_worker(Tract.remotes)
    reset = _on_worker(Tract.reset)
    review_tool_result = _on_worker(Tract.review_tool_result)
    search = _on_worker(Tract.search)
    set_budget = _on_worker(Tract.set_budget)
    set_tools = _on_worker(Tract.set_tools)
    status = _on_worker(Tract.status)
    switch = _on_worker(Tract.switch)
    tag = _on_worker(Tract.tag)
    tags = _on_worker(Tract.tags)
    system = _on_worker(Tract.system)  # type: ignore[arg-type]  # **kwargs: mypy sees a named self
    tool_result = _on_worker(Tract.tool_result)
    tool_usage_stats = _on_worker(Tract.tool_usage_stats)
    tool_usages = _on_worker(Tract.tool_usages)
    tool_versions = _on_worker(Tract.tool_versions)
    usage_tree = _on_worker(Tract.usage_tree)
    user = _on_worker(Tract.user)  # type: ignore[arg-type]  # **kwargs: mypy sees a named self
    children = _on_worker(Tract.children)
    parent = _on_worker(Tract.parent)

    # --- the agent toolkit's functions of a Tract (tractkv.toolkit), on the worker ---------------------------

    async def as_tools(
        self, profile: object = "self", overrides: dict[str, str] | None = None, format: str = "openai"
    ) -> list[dict[str, Any]]:
        """:func:`tractkv.toolkit.as_tools`: a profile's built-in tools as request-ready schemas."""
        from tractkv.toolkit import as_tools

        return as_tools(profile, overrides, format)

    async def export(self, format: str = "json") -> str:
        """``await`` :func:`tractkv.toolkit.export` of the handle's Tract (on its worker thread)."""
        from tractkv.toolkit import export

        return await self._run(export, self._tract, format)

    async def rerun_tool_usage(self, usage_id: str, executor: object = None) -> ToolUsage:
        """``await`` :func:`tractkv.toolkit.rerun_tool_usage` on the handle's Tract (on its worker thread)."""
        from tractkv.toolkit import rerun_tool_usage

        return await self._run(rerun_tool_usage, self._tract, usage_id, executor)

    async def spawn(self, purpose: str, **kwargs: Any) -> AsyncTract:
        """``await`` :meth:`Tract.spawn <tractkv.Tract.spawn>` (same arguments): the child as an AsyncTract
        with a worker thread of its own (a second handle on the same store; close it before this one)."""
        child = await self._run(self._tract.spawn, purpose, **kwargs)
        return AsyncTract(child)

    async def collapse(self, child: AsyncTract | Tract | str, **kwargs: Any) -> CommitInfo:
        """``await`` :meth:`Tract.collapse <tractkv.Tract.collapse>` (same arguments; ``child`` may be the
        AsyncTract :meth:`spawn` returned, once its own operations have finished)."""
        target = child._tract if isinstance(child, AsyncTract) else child
        return await self._run(self._tract.collapse, target, **kwargs)

    # --- the model, on the event loop -----------------------------------------------------------------------

    async def prepare_reply(self, tools: list[dict[str, Any]] | None = None) -> PreparedReply:
        """``await`` :meth:`Tract.prepare_reply <tractkv.Tract.prepare_reply>` (on the worker thread). Its
        ``.commit`` writes: run it on the worker too (``await at.call(lambda t: prepared.commit(response,
        params))``), as :meth:`generate`, which does all of this, does."""
        return await self._run(self._tract.prepare_reply, tools)

    def _model(self, llm: LLMClient | None, action: str) -> LLMClient:
        model = llm if llm is not None else self._tract.llm
        if model is None:
            raise NoLLMConfigured(action)
        return model

    @overload
    async def generate(
        self,
        llm: LLMClient | None = None,
        tools: list[dict[str, Any]] | None = None,
        *,
        stream: Literal[False] = False,
        **params: Any,
    ) -> CommitInfo: ...

    @overload
    async def generate(
        self,
        llm: LLMClient | None = None,
        tools: list[dict[str, Any]] | None = None,
        *,
        stream: Literal[True],
        **params: Any,
    ) -> AsyncGenerationStream: ...

    async def generate(
        self,
        llm: LLMClient | None = None,
        tools: list[dict[str, Any]] | None = None,
        *,
        stream: bool = False,
        **params: Any,
    ) -> CommitInfo | AsyncGenerationStream:
        """:meth:`Tract.generate <tractkv.Tract.generate>`: compile on the worker, ``await`` the model on the
        event loop, commit on the worker (on the tip the model saw, or :class:`ConcurrentUpdate`).

        ``stream=True`` returns an :class:`~tractkv.llm.generate.AsyncGenerationStream`: ``async for`` its
        deltas; the reply commits once when the stream ends complete (then ``.commit``); an interrupted one
        commits nothing. Needs a client with ``achat_stream`` (``OpenAIClient``, ``AnthropicClient``)."""
        from tractkv.llm import generate as gen
        from tractkv.llm.protocol import acall_model

        model = self._model(llm, "generate")
        prepared = await self.prepare_reply(tools)
        request = prepared.request

        async def commit(response: LLMResponse) -> CommitInfo:
            return await self._run(prepared.commit, response, params)

        if stream:
            return gen.AsyncGenerationStream(
                gen.open_stream(model, request, params, asynchronous=True), commit
            )
        return await commit(await acall_model(model, request.messages, request.tools, params))

    async def chat(
        self,
        text: str | list[Any],
        llm: LLMClient | None = None,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> CommitInfo:
        """:meth:`Tract.chat <tractkv.Tract.chat>`: the user message and the reply in one transaction (nothing
        lands if the model fails or the call is cancelled), the model awaited on the event loop."""
        bridge = _Bridge(self._model(llm, "chat"), asyncio.get_running_loop())
        return await bridge.drive(self._run(lambda: self._tract.chat(text, bridge, tools, **params)))

    async def run(
        self, llm: LLMClient | None = None, executor: object = None, max_steps: int = 10, **params: Any
    ) -> RunResult:
        """:func:`tractkv.toolkit.run`, the agent loop: its steps (compile, commit, tool
        execution) run on the worker thread, each model call is awaited on the event loop (``achat``).
        An ``executor`` is a ``ToolExecutor`` of :attr:`tract`. Cancelled, it stops at its next model call
        (raising ``CancelledError`` here); the steps committed before stay."""
        from tractkv.toolkit.loop import run

        bridge = _Bridge(self._model(llm, "run"), asyncio.get_running_loop())
        return await bridge.drive(
            self._run(run, self._tract, bridge, executor, max_steps=max_steps, **params)
        )


def _discard(worker: ThreadPoolExecutor, made: asyncio.Future[Tract]) -> None:
    """The end of an open / clone whose caller was cancelled: the Tract it made is closed on the worker
    (so its store is released), then the worker stops."""
    if not made.cancelled() and made.exception() is None:
        worker.submit(made.result().close)
    worker.shutdown(wait=False)


class _Bridge:
    """A sync model client for code on the worker thread (``Tract.chat``, the agent loop): its ``chat``
    waits for :func:`~tractkv.llm.protocol.acall_model` on the event loop. :meth:`drive` awaits the worker's
    job; cancelled, it cancels the model call in flight and refuses the next (``ModelCallFailed`` on the
    worker, so the job stops as after any model failure), waits for the job to finish, and re-raises."""

    def __init__(self, model: LLMClient, loop: asyncio.AbstractEventLoop) -> None:
        self._model = model
        self._loop = loop
        self._pending: set[Future[LLMResponse]] = set()
        self._cancelled = False

    def chat(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None, **params: Any
    ) -> LLMResponse:
        from tractkv.llm.protocol import acall_model

        if self._cancelled:
            raise ModelCallFailed("the call was cancelled")
        future = asyncio.run_coroutine_threadsafe(
            acall_model(self._model, messages, tools, params), self._loop
        )
        self._pending.add(future)
        try:
            return future.result()
        except TractError:
            raise
        except CancelledError:
            raise ModelCallFailed("the call was cancelled") from None
        finally:
            self._pending.discard(future)

    async def drive(self, job: Coroutine[Any, Any, T]) -> T:
        task = asyncio.ensure_future(job)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            self._cancelled = True
            for future in list(self._pending):
                future.cancel()
            await asyncio.gather(task, return_exceptions=True)  # the worker finishes its step first
            raise


__all__ = ["AsyncTract"]
