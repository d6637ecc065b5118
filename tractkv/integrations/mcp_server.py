"""tractkv's toolkit as an MCP server (extra ``mcp``): ``tractkv mcp`` and :func:`create_server`.

``tractkv --store PATH mcp [--profile self|supervisor|full] [--http HOST:PORT] [--tokens FILE]`` serves the
built-in tools of a profile (:mod:`tractkv.toolkit.profiles`; default ``self``) acting on the store's current
branch, over stdio (the default: an MCP client starts the command) or streamable HTTP at
``http://HOST:PORT/mcp``.

**Tools.** ``tools/list`` gives each tool's name, description and input schema (the profile's, as
``ToolExecutor(t, profile=...)`` offers them), with MCP's hints for the built-in ones (``readOnlyHint`` for
compile, status, log, diff, list_branches, get_commit; ``destructiveHint`` for reset and gc).
``tools/call`` runs the tool through a :class:`~tractkv.toolkit.ToolExecutor` on the store (so the
execution leaves a usage record) and answers its output as text content (content parts as text, image and
embedded-resource content); a failure (an unknown tool, arguments that break the schema, an error in the
tool) is a result with ``isError``, never a protocol error. The tract is used from one worker thread, one
call at a time, in the order they arrive.

**Tokens (HTTP).** As ``tractkv serve``: without ``--tokens`` only a loopback address may be served (no
authentication); with a tokens file (``{"tokens": {"<token>": ["<scope>", ...]}}``, every token at least 16
characters, :class:`~tractkv.sync.auth.TokenTable`) every request needs ``Authorization: Bearer <token>``:
none or an unknown one is answered 401, a token without the ``admin`` scope 403 (an MCP client runs tools
that commit, reset and switch branches of the whole store). On loopback the SDK's DNS-rebinding protection
(``Host`` and ``Origin`` checks) is on.

**stdio** carries the protocol on stdout, so nothing else is printed there; notices go to stderr.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import json
import signal
import threading
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from tractkv.errors import InvalidInput
from tractkv.integrations import missing_extra

try:
    from mcp import Client as _Client  # noqa: F401  (mcp >= 2.0: the SDK this module is written for)
    from mcp import types as mcp_types
    from mcp.server import Server
except ImportError as exc:  # the extra is missing
    raise missing_extra("tractkv.integrations.mcp_server", "mcp", exc) from exc

from tractkv.toolkit import ToolExecutor, ToolResult

if TYPE_CHECKING:
    from tractkv.sync.auth import TokenTable
    from tractkv.tract import Tract

__all__ = ["MCP_PATH", "create_server", "serve_http", "serve_stdio"]

MCP_PATH = "/mcp"  # where streamable HTTP is served
PROFILES = ("self", "supervisor", "full")


class _Worker:
    """The one thread the tract is used from (a Tract belongs to one thread at a time), started at its first
    use. A server of :func:`create_server` owns its worker: the thread ends with the server's last run (its
    lifespan, :meth:`serving`) and a later run starts another."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._runs = 0

    @property
    def pool(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="tractkv-mcp-tools"
                )
            return self._pool

    async def run(self, fn: Callable[[], Any]) -> Any:
        return await asyncio.wrap_future(self.pool.submit(fn))

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    @contextlib.asynccontextmanager
    async def serving(self, _server: Any) -> AsyncIterator[dict[str, Any]]:
        """A server's lifespan: when its last run ends, the thread ends (after the work it was given)."""
        with self._lock:
            self._runs += 1
        try:
            yield {}
        finally:
            with self._lock:
                self._runs -= 1
                pool = self._pool if self._runs == 0 else None
                if pool is not None:
                    self._pool = None
            if pool is not None:
                pool.shutdown(wait=False)  # never blocks the event loop; the idle thread exits at once


def create_server(executor: ToolExecutor, *, name: str = "tractkv") -> Server[Any]:
    """An SDK server (``mcp.server.Server``) offering ``executor``'s tools; calls run ``executor.execute``
    on one worker thread of its own, one at a time (use the executor's tract from no other thread meanwhile);
    the thread ends when the server's run ends (the next run starts another).
    Connect it in-process (``mcp.Client(server)``) or run it with the SDK's transports."""
    if not isinstance(executor, ToolExecutor):
        raise InvalidInput(f"create_server() takes a ToolExecutor, not {type(executor).__name__}")
    return _server(executor, name, _Worker(), owned=True)


def _server(executor: ToolExecutor, name: str, runner: _Worker, *, owned: bool = False) -> Server[Any]:
    """The server; ``owned``: its runs own ``runner`` (its thread ends with the last), else the caller does."""

    async def list_tools(_ctx: Any, _params: Any) -> mcp_types.ListToolsResult:
        definitions = await runner.run(executor.definitions)
        return mcp_types.ListToolsResult(
            tools=[
                mcp_types.Tool(
                    name=d.name,
                    description=d.description,
                    input_schema=dict(d.parameters),
                    annotations=_annotations(d.name, executor),
                )
                for d in definitions
            ]
        )

    async def call_tool(_ctx: Any, params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
        arguments = dict(params.arguments or {})
        result = await runner.run(lambda: executor.execute(params.name, arguments))
        try:
            return _mcp_result(result)
        except Exception as exc:  # a part that cannot be MCP content: an error result, not a protocol error
            text = f"tool {params.name!r} returned a result that cannot be sent over MCP: {exc!r}"
            return mcp_types.CallToolResult(content=[mcp_types.TextContent(text=text)], is_error=True)

    extra: dict[str, Any] = {"lifespan": runner.serving} if owned else {}
    return Server(
        name,
        version=_version(),
        instructions="Tools acting on a tractkv store: a versioned, branchable LLM context.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        **extra,
    )


READ_ONLY = frozenset({"compile", "status", "log", "diff", "list_branches", "get_commit"})
DESTRUCTIVE = frozenset({"reset", "gc"})  # a branch moved back (the reflog keeps it), objects deleted


def _annotations(name: str, executor: ToolExecutor) -> mcp_types.ToolAnnotations | None:
    """MCP's hints for a built-in tool (a client may, say, run read-only tools without asking); none for
    the executor's other tools, whose effects tractkv cannot know."""
    from tractkv.toolkit.builtin import builtin_tools

    builtin = next((t for t in builtin_tools() if t.name == name), None)
    definition = executor.get(name)
    if builtin is None or definition is None or definition.handler is not builtin.handler:
        return None
    return mcp_types.ToolAnnotations(read_only_hint=name in READ_ONLY, destructive_hint=name in DESTRUCTIVE)


def _mcp_result(result: ToolResult) -> mcp_types.CallToolResult:
    if not result.success:
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(text=result.error)], is_error=True)
    blocks: list[Any] = []
    for index, part in enumerate(result.parts or (result.output,)):
        blocks.append(_block(part, index))
    return mcp_types.CallToolResult(content=blocks or [mcp_types.TextContent(text="")])


def _block(part: Any, index: int) -> Any:
    """One content part of a tool's result as MCP content."""
    if isinstance(part, str):
        return mcp_types.TextContent(text=part)
    kind = part.get("type") if isinstance(part, dict) else None
    data = part.get("data") if isinstance(part, dict) else None
    if kind == "text":
        return mcp_types.TextContent(text=str(part.get("text", "")))
    if kind == "image" and isinstance(data, bytes):
        return mcp_types.ImageContent(data=base64.b64encode(data).decode(), mime_type=str(part["media_type"]))
    if kind == "document" and isinstance(data, bytes):
        resource = mcp_types.BlobResourceContents(
            uri=str(part.get("title") or f"tractkv:result/part-{index}"),
            mime_type=str(part["media_type"]),
            blob=base64.b64encode(data).decode(),
        )
        return mcp_types.EmbeddedResource(resource=resource)
    return mcp_types.TextContent(text=json.dumps(part, ensure_ascii=False, sort_keys=True, default=repr))


def _version() -> str:
    from tractkv._version import __version__

    return __version__


@contextlib.contextmanager
def _opened(store_path: str, profile: str) -> Any:
    """(worker, server) over the store at ``store_path``: its Tract is opened, used and closed on the worker."""
    if profile not in PROFILES:
        raise InvalidInput(f"unknown tool profile {profile!r}; known: {', '.join(PROFILES)}")
    worker = _Worker()
    try:
        tract: Tract = worker.pool.submit(_open_tract, store_path).result()
        try:
            executor = worker.pool.submit(ToolExecutor, tract, profile=profile).result()
            yield _server(executor, "tractkv", worker)
        finally:
            worker.pool.submit(tract.close).result()
    finally:
        worker.close()


def _open_tract(store_path: str) -> Tract:
    from tractkv.store import LmdbStore
    from tractkv.tract import Tract

    return Tract(LmdbStore(store_path, create=False), owns_store=True)


def serve_stdio(store_path: str, profile: str = "self") -> None:
    """Serve the profile's tools on the store over stdin / stdout until the client closes them."""
    import anyio
    from mcp.server.stdio import stdio_server

    with _opened(store_path, profile) as server:

        async def main() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(main)


def http_app(server: Server[Any], host: str, tokens: TokenTable | None) -> Any:
    """The streamable-HTTP ASGI app of ``server`` at :data:`MCP_PATH`, behind the token check."""
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    return app if tokens is None else _TokenGate(app, tokens)


class _TokenGate:
    """ASGI middleware: every HTTP request needs a bearer token with the ``admin`` scope (see the module doc);
    only HTTP and lifespan scopes pass (a websocket is closed unaccepted, any other type refused)."""

    def __init__(self, app: Any, tokens: TokenTable) -> None:
        self.app, self.tokens = app, tokens

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":  # not served: closed before it is accepted (a 403 to the client)
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] not in ("http", "lifespan"):
            raise ValueError(f"the MCP server does not serve ASGI {scope['type']!r} connections")
        if scope["type"] == "http":
            from tractkv.errors import AuthError

            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            try:
                grant = self.tokens.authenticate(headers.get("authorization"))
                if "admin" not in grant.scopes:
                    raise AuthError(
                        403, "an MCP client runs tools that change the store: the admin scope is needed"
                    )
            except AuthError as exc:
                await _deny(send, exc.status, str(exc))
                return
        await self.app(scope, receive, send)


async def _deny(send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def serve_http(
    store_path: str,
    profile: str,
    host: str,
    port: int,
    tokens: TokenTable | None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the profile's tools over streamable HTTP at ``http://host:port/mcp`` until SIGINT / SIGTERM.

    Raises:
        InvalidInput: a host that is not loopback without ``tokens``.
    """
    import uvicorn

    from tractkv.sync import server as hub

    if tokens is None and not hub.is_loopback(host):
        raise InvalidInput(f"refusing to serve {host} without --tokens: only loopback may be unauthenticated")
    with _opened(store_path, profile) as server:
        sock = hub.bind(host, port)
        url = f"http://{host if ':' not in host else f'[{host}]'}:{sock.getsockname()[1]}{MCP_PATH}"
        if on_ready is not None:
            on_ready(url)
        config = uvicorn.Config(http_app(server, host, tokens), lifespan="on", log_level="warning")

        def interrupt(signum: int, frame: object) -> None:
            raise KeyboardInterrupt

        # uvicorn shuts down gracefully on SIGINT or SIGTERM, then re-raises the signal: both end it normally
        # (signal handlers can only be installed on the main thread: elsewhere the caller's are left alone)
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, interrupt) if main else None
        try:
            uvicorn.Server(config).run(sockets=[sock])
        except KeyboardInterrupt:
            pass
        finally:
            if main:
                signal.signal(signal.SIGTERM, previous)
