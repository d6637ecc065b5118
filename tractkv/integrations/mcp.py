"""MCP servers' tools in a :class:`~tractkv.toolkit.ToolExecutor` (extra ``mcp``, the official ``mcp`` SDK).

::

    from tractkv.integrations.mcp import MCPConnection
    from tractkv.toolkit import ToolExecutor, run

    with MCPConnection(["python", "server.py"]) as server:      # stdio: the server runs as a subprocess
        executor = ToolExecutor(t)
        server.register(executor)                               # its tools, kept in step with the server
        run(t, llm, executor)

**Servers.** ``server`` is a command (a list: the program and its arguments; ``env=`` and ``cwd=`` apply)
run as a subprocess over stdio, an ``http://`` or ``https://`` URL (streamable HTTP; ``headers=`` are sent
with every request, e.g. ``{"Authorization": "Bearer ..."}``), the SDK's ``StdioServerParameters``, or an
SDK server object (``mcp.server.Server``, ``MCPServer``) connected in-process.

**The bridge.** Tool handlers are synchronous; the SDK's client session lives in one asyncio task. A
connection owns one event-loop thread (``tractkv-mcp-<n>``, a daemon) whose main task holds the SDK client
(and so the subprocess or HTTP session) for the connection's life; a call is a coroutine submitted to that
loop (``asyncio.run_coroutine_threadsafe``) and waited for at most ``timeout`` seconds (then it is
cancelled and the call returns an error result). Connecting waits at most ``connect_timeout`` seconds; a
server that cannot be started or reached raises :class:`~tractkv.errors.ToolServerUnavailable` with
nothing left running. :meth:`MCPConnection.close` (or leaving the ``with`` block) ends the session, stops
the subprocess (the SDK terminates it, then kills it) and joins the thread, at most ``close_timeout``
seconds; the executors it registered in drop its tools at their next use. A connection the program forgets
is closed at interpreter exit.

**Tools.** Each tool the server lists becomes a :class:`~tractkv.toolkit.ToolDefinition`: its name (with
``prefix=``; characters a provider refuses become ``_``, a name over 64 characters is shortened with a hash),
description (else its title, else a sentence naming the server), and input schema, which tractkv validates
arguments against before the call. A tool tractkv cannot offer (a schema its validator cannot enforce, a
parameter named ``context``, two tools whose names map to one) is left out and listed in
:attr:`MCPConnection.skipped` with the reason. Every execution through the executor leaves a usage record,
as for any tool.

**Results** keep the server's content as content parts (:attr:`~tractkv.toolkit.ToolResult.parts`), which
the agent loop commits as the tool result (never a Python repr): text as text; an image (PNG, JPEG, GIF,
WebP) as an image part every dialect renders; an embedded resource as a document (text: ``text/plain``, its
URI as the title; a PDF or image blob as such); audio, other media types and resource links as a line of
text saying what was there. No content but ``structuredContent``: its JSON as text. ``isError`` makes an
error result (its text is the error); so do a protocol error, a timeout and a lost connection.

**Tool list changes.** When the server announces ``notifications/tools/list_changed`` (on a 2026-07-28
connection, through a ``subscriptions/listen`` stream the connection opens), the connection lists the tools
again, and every executor it registered in picks the new list up the next time it lists its tools or runs
one (:meth:`~tractkv.toolkit.ToolExecutor.add_refresher`), in its own thread: the agent loop reads the tools
at every step, so the model's next reply records the new tool set (a new tool-set version on the branch).
A change announced during a call (before its result) is applied before that call returns.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import binascii
import concurrent.futures
import contextlib
import hashlib
import itertools
import json
import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tractkv.errors import InvalidInput, ToolServerUnavailable
from tractkv.integrations import missing_extra

try:
    import anyio
    import anyio.lowlevel
    import mcp
    from mcp import Client as _Client  # noqa: F401  (mcp >= 2.0: the SDK this module is written for)
    from mcp import types as mcp_types
except ImportError as exc:  # the extra is missing, or an mcp 1.x is installed
    raise missing_extra("tractkv.integrations.mcp", "mcp", exc) from exc

from tractkv.engine.content import sniff
from tractkv.toolkit import ToolDefinition, ToolResult

if TYPE_CHECKING:
    from tractkv.toolkit import ToolContext, ToolExecutor

__all__ = ["MCPConnection", "result_from_mcp"]

_log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 60.0  # seconds a tool call may take
CONNECT_TIMEOUT = 30.0  # seconds to start the server and complete the handshake
CLOSE_TIMEOUT = 10.0  # seconds to end the session and stop the subprocess
MAX_LIST_PAGES = 100  # tools/list pages read at most (a server whose cursor never ends cannot hang a refresh)
IMAGE_TYPES = ("image/gif", "image/jpeg", "image/png", "image/webp")
_NAME = re.compile(r"[^A-Za-z0-9_-]")
_COUNTER = itertools.count(1)


class MCPConnection:
    """A connection to one MCP server, owning an event-loop thread (see the module doc).

    Args:
        server: a command (list of str), an http(s) URL, ``StdioServerParameters`` or an SDK server object.
        env: environment variables for a command (over the SDK's safe default environment).
        cwd: the working directory of a command.
        headers: HTTP headers for a URL (``Authorization`` ...).
        timeout: seconds a tool call may take (default 60).
        connect_timeout: seconds to start and connect (default 30).
        close_timeout: seconds to shut down (default 10).
        mode: the SDK's protocol negotiation (``"auto"``, the default; ``"legacy"``: the initialize
            handshake; or a protocol version).

    Raises:
        ToolServerUnavailable: the server could not be started, reached or initialized in time.
        InvalidInput: a ``server`` of no accepted kind, a bad timeout.
    """

    def __init__(
        self,
        server: object,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
        close_timeout: float = CLOSE_TIMEOUT,
        mode: str = "auto",
    ) -> None:
        for what, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise InvalidInput(f"{what} must be a positive number of seconds")
        self._target = _target(server, env, cwd)
        self._headers = dict(headers or {})
        self._mode = mode
        self.timeout = float(timeout)
        self.close_timeout = float(close_timeout)
        self.name = _describe_server(server)
        self._lock = threading.Lock()
        self._listing: tuple[Any, ...] = ()  # the server's tools (SDK Tool objects), newest listing
        self._version = 0  # bumped by every listing that differs from the one before
        self._closed = False
        self._lost: str | None = None  # why the session ended on its own (the server went away)
        self.skipped: dict[str, str] = {}
        self._warned: set[tuple[str, str]] = set()
        self._client: Any = None
        self._stale = False
        self._refresh_lock: asyncio.Lock | None = None
        self._task_group: Any = None
        self._stop: asyncio.Event | None = None
        # the main task's cancel scope: cancelling it (anyio) still lets the SDK stop the server process
        self._scope: Any = None
        self._connected = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"tractkv-mcp-{next(_COUNTER)}", daemon=True
        )
        self._thread.start()
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._main = asyncio.run_coroutine_threadsafe(self._serve(ready), self._loop)
        try:
            ready.result(timeout=connect_timeout)
        except BaseException as exc:
            self.close()  # whatever happened, nothing stays running
            if isinstance(exc, concurrent.futures.TimeoutError):
                raise ToolServerUnavailable(self.name, f"no answer within {connect_timeout:g} s") from None
            if isinstance(exc, ToolServerUnavailable | InvalidInput) or not isinstance(exc, Exception):
                raise  # tractkv's own errors, and KeyboardInterrupt / SystemExit, as they are
            raise ToolServerUnavailable(self.name, _reason(exc)) from exc
        _OPEN.add(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._listing)} tools"
        return f"MCPConnection({self.name!r}, {state})"

    def __enter__(self) -> MCPConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the session (runs on the connection's loop) ---------------------------------------------------

    async def _serve(self, ready: concurrent.futures.Future[None]) -> None:
        """The main task: holds the SDK client for the connection's life. It ends when :meth:`close` sets
        ``_stop`` (or, while connecting or stuck, cancels ``_scope``: an anyio cancellation, under which the
        SDK still stops the server process; a plain ``Task.cancel`` could leave it running)."""
        self._stop = asyncio.Event()
        self._refresh_lock = asyncio.Lock()
        if self._closed:  # closed before this task first ran
            ready.set_exception(ToolServerUnavailable(self.name, "the connection is closed"))
            return
        try:
            with anyio.CancelScope() as self._scope:
                async with self._open_client() as client, anyio.create_task_group() as group:
                    self._client, self._task_group = client, group
                    await self._relist()
                    if _modern(client):
                        group.start_soon(self._listen, client)
                    self._connected = True
                    ready.set_result(None)
                    await self._stop.wait()
                    group.cancel_scope.cancel()
            if not ready.done():
                ready.set_exception(ToolServerUnavailable(self.name, "connecting was given up"))
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            elif not self._closed:
                self._lost = _reason(exc)
                _log.warning("MCP server %s: the session ended: %s", self.name, self._lost)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._client = None
            if ready.done() and not self._closed and self._lost is None:
                self._lost = "the session ended"

    def _open_client(self) -> Any:
        kwargs: dict[str, Any] = {"mode": self._mode, "message_handler": self._on_message}
        target = self._target
        if isinstance(target, str) and self._headers:
            import httpx2  # the SDK's own HTTP client (an mcp dependency)
            from mcp.client.streamable_http import streamable_http_client

            http = httpx2.AsyncClient(headers=self._headers, timeout=httpx2.Timeout(30.0, read=300.0))
            return _Closing(mcp.Client(streamable_http_client(target, http_client=http), **kwargs), http)
        if isinstance(target, mcp.StdioServerParameters):  # as a transport: Client takes it so since mcp 2.0
            return mcp.Client(mcp.stdio_client(target), **kwargs)
        return mcp.Client(target, **kwargs)

    async def _on_message(self, message: object) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._stale = True  # set before anything awaits: a call finishing now waits for the new list
            if self._task_group is not None:
                self._task_group.start_soon(self._refresh_if_stale)
        elif isinstance(message, Exception):
            _log.debug("MCP server %s: transport error %s", self.name, _reason(message))
        await anyio.lowlevel.checkpoint()

    async def _listen(self, client: Any) -> None:
        """Keep a ``subscriptions/listen`` stream open (2026-07-28 connections): its events reach
        :meth:`_on_message` like a handshake-era notification."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    pass
        except Exception as exc:  # an older server, a dropped stream: changes are then seen at the next call
            _log.debug("MCP server %s: no tools/list_changed stream: %s", self.name, _reason(exc))

    async def _refresh_if_stale(self) -> None:
        assert self._refresh_lock is not None
        async with self._refresh_lock:
            if self._stale:
                try:
                    await self._relist()
                except Exception as exc:
                    _log.warning("MCP server %s: listing its tools again failed: %s", self.name, _reason(exc))

    async def _relist(self) -> None:
        self._stale = False
        client = self._client
        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await _list_page(client, cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        with self._lock:
            if tuple(tools) != self._listing:
                self._listing = tuple(tools)
                self._version += 1

    async def _call(self, name: str, arguments: dict[str, Any], timeout: float) -> Any:
        client = self._client
        if client is None:
            raise ToolServerUnavailable(self.name, self._lost or "not connected")
        result = await client.call_tool(name, arguments, read_timeout_seconds=timeout)
        for _ in range(3):  # let a tools/list_changed that arrived with the result be handled
            await anyio.lowlevel.checkpoint()
        await self._refresh_if_stale()
        return result

    # --- the caller's side --------------------------------------------------------------------------------

    def _submit(self, coro: Any, timeout: float) -> Any:
        if self._closed:
            coro.close()
            raise ToolServerUnavailable(self.name, "the connection is closed")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolServerUnavailable(self.name, f"no answer within {timeout:g} s") from None

    @property
    def closed(self) -> bool:
        """Was :meth:`close` called? (The executors then drop the server's tools at their next use.)"""
        return self._closed

    @property
    def version(self) -> int:
        """How many listings changed the tools: 1 once connected (0 for a server that lists none), then one
        more for each change (an announced ``tools/list_changed``, or :meth:`refresh`, that changed them)."""
        with self._lock:
            return self._version

    def tools(self) -> list[dict[str, Any]]:
        """The server's tools as the protocol lists them (camelCase, None fields left out): what
        :meth:`~tractkv.Tract.set_tools` takes."""
        with self._lock:
            listing = self._listing
        return [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in listing]

    def refresh(self) -> list[dict[str, Any]]:
        """List the server's tools again now (the connection also does on every announced change).

        Raises:
            ToolServerUnavailable: the connection is closed or lost, the server did not answer in time, or
                listing its tools failed.
        """

        async def relist() -> None:
            if self._client is None:
                raise ToolServerUnavailable(self.name, self._lost or "not connected")
            assert self._refresh_lock is not None
            async with self._refresh_lock:
                try:
                    await self._relist()
                except Exception as exc:
                    raise ToolServerUnavailable(
                        self.name, f"listing its tools failed: {_reason(exc)}"
                    ) from exc

        self._submit(relist(), self.timeout)
        return self.tools()

    def call(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> ToolResult:
        """Call the server's tool ``name`` (its own name, not a prefixed one) and return its result; every
        failure is an error result, never raised. No usage is recorded: run it through an executor for
        that (:meth:`register`)."""
        wait = float(timeout) if timeout is not None else self.timeout
        try:
            result = self._submit(self._call(name, dict(arguments or {}), wait), wait + 5.0)
        except Exception as exc:
            return ToolResult(name, False, error=f"MCP server {self.name}: {_reason(exc)}")
        return result_from_mcp(name, result)

    def definitions(self, *, prefix: str = "") -> list[ToolDefinition]:
        """The server's tools as tool definitions (see the module doc); the ones that cannot be offered are
        left out and named in :attr:`skipped`."""
        with self._lock:
            listing = self._listing
        definitions, skipped = _definitions(self, listing, prefix)
        self.skipped = skipped
        return definitions

    def register(self, executor: ToolExecutor, *, prefix: str = "", replace: bool = False) -> list[str]:
        """Register the server's tools in ``executor`` and keep them in step with the server (see the module
        doc, "Tool list changes"); returns the names registered.

        Raises:
            InvalidInput: a tool's name is taken in the executor by another tool (unless ``replace``).
        """
        if not isinstance(prefix, str) or (prefix and not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", prefix)):
            raise InvalidInput("prefix must be up to 32 letters, digits, '_' or '-'")
        binding = _Binding(self, executor, prefix)
        taken = [d.name for d in self.definitions(prefix=prefix) if executor.get(d.name) is not None]
        if taken and not replace:
            raise InvalidInput(f"the executor has tools named {taken} already (pass replace=True)")
        binding.apply()
        executor.add_refresher(binding.apply)
        return sorted(binding.names)

    def close(self) -> None:
        """End the session, stop the server process and the thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        self._loop.call_soon_threadsafe(self._end, False)
        try:
            self._main.result(timeout=self.close_timeout)
        except concurrent.futures.TimeoutError:
            _log.warning("MCP server %s did not shut down in %g s; cancelling", self.name, self.close_timeout)
            self._loop.call_soon_threadsafe(self._end, True)
            try:  # the SDK's own shutdown is bounded (stdin closed, 2 s, terminate, 2 s, kill)
                self._main.result(timeout=self.close_timeout)
            except concurrent.futures.TimeoutError:
                self._main.cancel()
                with contextlib.suppress(BaseException):
                    self._main.result(timeout=self.close_timeout)
            except BaseException:
                pass
        except BaseException:  # the session had failed already (reported when it did)
            pass
        with contextlib.suppress(BaseException):  # calls still waiting end as cancelled, not abandoned
            asyncio.run_coroutine_threadsafe(_cancel_rest(), self._loop).result(timeout=self.close_timeout)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=self.close_timeout)
        if not self._thread.is_alive():
            self._loop.close()

    def _end(self, force: bool) -> None:
        """(On the loop) end the main task: gracefully once connected, else (or ``force``) by cancelling."""
        if self._stop is not None:
            self._stop.set()
        if (force or not self._connected) and self._scope is not None:
            self._scope.cancel()


async def _cancel_rest() -> None:
    """Cancel every other task on this loop and wait for them."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class _Closing:
    """An SDK client whose HTTP client is closed with it (the SDK leaves a given one open)."""

    def __init__(self, client: Any, http: Any) -> None:
        self._client, self._http = client, http

    async def __aenter__(self) -> Any:
        try:
            return await self._client.__aenter__()
        except BaseException:
            await self._http.aclose()
            raise

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self._client.__aexit__(*exc)
        finally:
            await self._http.aclose()


class _Binding:
    """The server's tools in one executor: applied in the executor's thread whenever the listing changed."""

    def __init__(self, connection: MCPConnection, executor: ToolExecutor, prefix: str) -> None:
        self.connection = connection
        self.executor = executor
        self.prefix = prefix
        self.applied = -1
        self.names: dict[str, ToolDefinition] = {}

    def apply(self) -> None:
        connection = self.connection
        closed = connection.closed
        version = -2 if closed else connection.version  # a closed connection's tools leave the executor
        if version == self.applied:
            return
        wanted = {} if closed else {d.name: d for d in connection.definitions(prefix=self.prefix)}
        for name in [n for n in self.names if n not in wanted]:
            if self.executor.get(name) is self.names.pop(name):
                self.executor.unregister(name)
        for name, definition in wanted.items():
            current = self.executor.get(name)
            if current is not None and current is not self.names.get(name) and self.applied >= 0:
                connection.skipped[name] = "the executor has another tool of this name"
                continue
            self.executor.register(definition, replace=True)
            self.names[name] = definition
        self.applied = version


# --- tools and results ------------------------------------------------------------------------------------


def _definitions(
    connection: MCPConnection, listing: Iterable[Any], prefix: str
) -> tuple[list[ToolDefinition], dict[str, str]]:
    out: dict[str, ToolDefinition] = {}
    skipped: dict[str, str] = {}
    for tool in listing:
        name = _model_name(prefix + tool.name)
        if name in out:
            skipped[tool.name] = f"its name becomes {name!r}, as another tool's does"
            continue
        description = (
            tool.description or tool.title or f"The tool {tool.name} of the MCP server {connection.name}."
        )
        try:
            out[name] = ToolDefinition(
                name, description, dict(tool.input_schema), _handler(connection, tool.name)
            )
        except InvalidInput as exc:
            skipped[tool.name] = str(exc)
    for name, why in skipped.items():
        if (name, why) not in connection._warned:  # once per tool and reason, not at every listing
            connection._warned.add((name, why))
            _log.warning("MCP server %s: tool %r is not offered: %s", connection.name, name, why)
    return list(out.values()), skipped


def _handler(connection: MCPConnection, tool_name: str) -> Any:
    def call_mcp_tool(*, context: ToolContext, **arguments: Any) -> ToolResult:
        return connection.call(tool_name, arguments)

    call_mcp_tool.__qualname__ = call_mcp_tool.__name__ = f"mcp_{_model_name(tool_name)}"
    return call_mcp_tool


def _model_name(name: str) -> str:
    """A name providers accept: other characters become ``_``; over 64 characters, cut with a hash."""
    clean = _NAME.sub("_", name) or "_"
    if len(clean) <= 64:
        return clean
    return f"{clean[:55]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def result_from_mcp(tool_name: str, result: Any) -> ToolResult:
    """An MCP ``CallToolResult`` (SDK object or its dict) as a :class:`~tractkv.toolkit.ToolResult`: content
    as parts, ``isError`` as an error result (see the module doc, "Results")."""
    if isinstance(result, Mapping):
        try:
            result = mcp_types.CallToolResult.model_validate(result)
        except ValueError as exc:  # pydantic's ValidationError
            raise InvalidInput(f"not an MCP CallToolResult for tool {tool_name!r}: {exc}") from exc
    parts: list[Any] = []
    texts: list[str] = []
    for block in result.content:
        part, text = _part(block)
        if part is not None:
            parts.append(part)
        texts.append(text)
    if not result.content and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, sort_keys=True)
        parts.append({"type": "text", "text": text})
        texts.append(text)
    output = "\n".join(texts)
    if result.is_error:
        return ToolResult(tool_name, False, error=output or "the tool reported an error")
    only_text = all(isinstance(p, dict) and p.get("type") == "text" for p in parts)
    return ToolResult(tool_name, True, output=output, parts=() if only_text else parts)


def _part(block: Any) -> tuple[dict[str, Any] | None, str]:
    """(the content part of one MCP content block, or None; its text for the usage record)."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return {"type": "text", "text": block.text}, block.text
    if kind in ("image", "audio"):
        return _media(kind, block.data, block.mime_type, None)
    if kind == "resource":
        resource = block.resource
        mime = resource.mime_type
        if getattr(resource, "text", None) is not None:
            data = resource.text.encode()
            part = {"type": "document", "data": data, "media_type": "text/plain", "title": resource.uri}
            return part, f"[resource {resource.uri} ({mime or 'text'})]\n{resource.text}"
        return _media("resource", resource.blob, mime or "application/octet-stream", resource.uri)
    if kind == "resource_link":
        what = ", ".join(x for x in (block.name, block.mime_type) if x)
        text = f"[resource link: {block.uri}{f' ({what})' if what else ''}]"
        return {"type": "text", "text": text}, text
    text = f"[MCP content of type {kind!r}: not kept]"
    return {"type": "text", "text": text}, text


def _media(kind: str, b64: str, mime: str, uri: str | None) -> tuple[dict[str, Any], str]:
    """An image or PDF as its part; anything else (audio, another media type, bytes that are not what the
    media type says) as a line of text naming it."""
    label = f"{kind} {uri} " if uri else f"{kind} "
    try:
        data = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        text = f"[{label}({mime}): its data is not base64, not kept]"
        return {"type": "text", "text": text}, text
    size = f"{len(data):,} bytes"
    if mime in IMAGE_TYPES and mime in sniff(data):
        part: dict[str, Any] = {"type": "image", "data": data, "media_type": mime}
        return part, f"[{label}({mime}, {size})]"
    if mime == "application/pdf" and mime in sniff(data):
        part = {"type": "document", "data": data, "media_type": mime, **({"title": uri} if uri else {})}
        return part, f"[{label}({mime}, {size})]"
    text = f"[{label}({mime}, {size}): not kept, tractkv keeps PNG, JPEG, GIF and WebP images and PDFs]"
    return {"type": "text", "text": text}, text


# --- servers ------------------------------------------------------------------------------------------------


def _target(server: object, env: Mapping[str, str] | None, cwd: str | None) -> Any:
    """What ``mcp.Client`` takes for ``server``."""
    if isinstance(server, str):
        if not server.startswith(("http://", "https://")):
            raise InvalidInput(
                "an MCP server given as a string must be an http(s):// URL; give a command as a list"
            )
        return server
    if isinstance(server, Sequence) and not isinstance(server, bytes | bytearray):
        if not server or not all(isinstance(a, str) and a for a in server):
            raise InvalidInput("an MCP server command must be a non-empty list of strings")
        return mcp.StdioServerParameters(
            command=server[0], args=list(server[1:]), env=dict(env or {}) or None, cwd=cwd
        )
    if isinstance(server, mcp.StdioServerParameters) or _is_sdk_server(server):
        return server
    raise InvalidInput(
        f"an MCP server is a command (list), an http(s) URL, StdioServerParameters or an SDK server, not "
        f"{type(server).__name__}"
    )


def _is_sdk_server(server: object) -> bool:
    from mcp.server import Server
    from mcp.server.mcpserver import MCPServer

    return isinstance(server, Server | MCPServer)


def _describe_server(server: object) -> str:
    if isinstance(server, str):
        return server
    if isinstance(server, Sequence) and not isinstance(server, bytes | bytearray):
        return _short_command([str(a) for a in server])
    if isinstance(server, mcp.StdioServerParameters):
        return _short_command([server.command, *server.args])
    return str(getattr(server, "name", None) or type(server).__name__)


async def _list_page(client: Any, cursor: str | None) -> Any:
    """One tools/list page from the server itself, never the SDK's response cache (mcp >= 2.1 has one)."""
    try:
        return await client.list_tools(cursor=cursor, cache_mode="refresh")
    except TypeError:  # mcp 2.0: no cache, no cache_mode (refused before anything is sent)
        return await client.list_tools(cursor=cursor)


def _short_command(argv: list[str]) -> str:
    """A command as messages name it: paths by their last component (``python server.py``)."""
    return " ".join(os.path.basename(a) if "/" in a else a for a in argv)


def _modern(client: Any) -> bool:
    """Is the session on a protocol whose change notifications come through ``subscriptions/listen``?"""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    capability = getattr(client.server_capabilities, "tools", None)
    return client.protocol_version in MODERN_PROTOCOL_VERSIONS and bool(
        getattr(capability, "list_changed", False)
    )


def _reason(exc: BaseException) -> str:
    """One line for an exception (an exception group: its first leaf)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_OPEN: set[MCPConnection] = set()  # open connections, closed at interpreter exit


@atexit.register
def _close_all() -> None:
    for connection in list(_OPEN):
        connection.close()
