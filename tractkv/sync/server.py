"""The HTTP hub (``tractkv serve``): one store behind the protocol in :mod:`tractkv.sync.wire`.

Starlette on uvicorn with the pure-Python h11 protocol and the asyncio loop (the ``server`` extra). The
event loop only parses bytes; every LMDB read and write runs in the thread pool. A push is read as a
stream: limits are enforced while bytes arrive (413 before the body is buffered), objects are verified and
committed in batches as they come (so a dropped connection keeps what arrived whole), and ref updates are
applied last, by compare-and-swap, in one transaction each or one for all (``atomic``).
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tractkv._version import __version__
from tractkv.errors import AuthError, InvalidInput, RequestTooLarge, TractError, TransferError
from tractkv.ids import ObjectId
from tractkv.store import Store

from .auth import OPEN, Grant, TokenTable
from .frames import MAX_OBJECT_BYTES, MAX_REQUEST_BYTES, StreamDecoder, encode_stream
from .negotiate import candidate_ids, raw_objects
from .receive import apply_ref_updates, missing_ids, receive_objects
from .wire import (
    HEAD_LENGTH,
    IDS_TYPE,
    MAX_HEAD_BYTES,
    MAX_IDS_BYTES,
    PROTOCOL,
    STREAM_TYPE,
    decode_push_head,
    error_body,
    ids_from_bytes,
    ids_to_bytes,
    result_to_json,
)

BATCH_OBJECTS = 4096
BATCH_BYTES = 8 * 1024 * 1024
DRAIN_BYTES = 64 * 1024 * 1024  # after refusing a push, discard this much of the rest before answering


class Hub:
    """The request handlers over one store; :func:`create_app` wires them into a Starlette app."""

    def __init__(
        self,
        store: Store,
        *,
        tokens: TokenTable | None = None,
        max_object: int = MAX_OBJECT_BYTES,
        max_request: int = MAX_REQUEST_BYTES,
    ) -> None:
        self.store = store
        self.tokens = tokens
        self.max_object = max_object
        self.max_request = max_request

    def grant(self, request: Request) -> Grant:
        if self.tokens is None:
            return OPEN
        return self.tokens.authenticate(request.headers.get("authorization"))

    async def info(self, request: Request) -> Response:
        return JSONResponse({"tractkv": __version__, "protocol": PROTOCOL, "auth": self.tokens is not None})

    async def refs(self, request: Request) -> Response:
        grant = self.grant(request)
        prefix = request.query_params.get("prefix", "refs/heads/")
        if not prefix.startswith("refs/heads/"):
            raise AuthError(403, "only branches (refs/heads/...) are served")

        def read() -> dict[str, str]:
            return {n: v for n, v in self.store.iter_refs(prefix) if grant.may_see(n)}

        limits = {"max_object": self.max_object, "max_request": self.max_request}
        return JSONResponse({"refs": await run_in_threadpool(read), "limits": limits})

    async def missing(self, request: Request) -> Response:
        grant = self.grant(request)
        if not (grant.can_read or grant.can_push):
            raise AuthError(403, "this token may neither read nor push")
        oids = ids_from_bytes(await _read_limited(request, MAX_IDS_BYTES))
        lacking = await run_in_threadpool(missing_ids, self.store, oids)
        return Response(ids_to_bytes([o for o in oids if o in lacking]), media_type=IDS_TYPE)

    async def fetch(self, request: Request) -> Response:
        grant = self.grant(request)
        if not grant.can_read:
            raise AuthError(403, "fetching needs the read scope")
        try:
            body = json.loads(await _read_limited(request, MAX_IDS_BYTES * 3))
            wants = [ObjectId(w) for w in body["wants"] if isinstance(w, str)]
            haves = [ObjectId(h) for h in body.get("haves", []) if isinstance(h, str)]
        except (ValueError, KeyError, TypeError) as exc:
            raise TransferError(f"malformed fetch request: {exc}") from exc
        ids = await run_in_threadpool(candidate_ids, self.store, wants, haves)
        return StreamingResponse(encode_stream(raw_objects(self.store, ids)), media_type=STREAM_TYPE)

    async def push(self, request: Request) -> Response:
        grant = self.grant(request)
        if not grant.can_push:
            raise AuthError(403, "pushing needs a write:<branch glob> or admin scope")
        body = _Body(request.stream(), self.max_request)
        (length,) = HEAD_LENGTH.unpack(await body.read_exact(HEAD_LENGTH.size))
        if length > MAX_HEAD_BYTES:
            raise TransferError(f"push head of {length} bytes is over the {MAX_HEAD_BYTES}-byte limit")
        updates, atomic = decode_push_head(await body.read_exact(length))
        forbidden = [u.name for u in updates if not grant.may_write(u.name)]
        if forbidden:
            raise AuthError(403, f"this token may not write {', '.join(forbidden)}")
        decoder = StreamDecoder(max_object=self.max_object, max_request=self.max_request)
        decoder.received = body.consumed
        pending: list[tuple[ObjectId, bytes]] = []
        pending_bytes = 0
        totals = [0, 0, 0]

        async def flush() -> None:
            nonlocal pending, pending_bytes
            batch, pending, pending_bytes = pending, [], 0
            stats = await run_in_threadpool(receive_objects, self.store, batch)
            totals[0] += stats.objects
            totals[1] += stats.new_objects
            totals[2] += stats.bytes

        try:
            try:
                async for chunk in body.rest():
                    for pair in decoder.feed(chunk):
                        pending.append(pair)
                        pending_bytes += len(pair[1])
                    if len(pending) >= BATCH_OBJECTS or pending_bytes >= BATCH_BYTES:
                        await flush()
                decoder.close()
            except TransferError:
                await flush()  # keep every object that arrived whole (each is verified before it is stored)
                raise
        except TransferError:
            await body.drain(DRAIN_BYTES)  # so the client reads our answer instead of a connection reset
            raise
        except ClientDisconnect:
            await flush()
            return Response(status_code=400)  # nobody is listening; the ref updates are not applied
        await flush()
        results = await run_in_threadpool(
            lambda: apply_ref_updates(self.store, updates, atomic=atomic, may_write=grant.may_write)
        )
        return JSONResponse(
            {
                "results": [result_to_json(r) for r in results],
                "objects": totals[0],
                "new_objects": totals[1],
                "bytes": totals[2],
            }
        )


class _Body:
    """A request body read incrementally, with a byte limit checked as it arrives."""

    def __init__(self, stream: AsyncIterator[bytes], limit: int) -> None:
        self._stream = stream
        self._buf = b""
        self._limit = limit
        self.consumed = 0

    async def read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = await self._next()
            if chunk is None:
                raise TransferError("request body ended early")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        self.consumed += n
        return out

    async def rest(self) -> AsyncIterator[bytes]:
        if self._buf:
            yield self._buf
            self._buf = b""
        while (chunk := await self._next()) is not None:
            yield chunk

    async def drain(self, limit: int) -> None:
        """Read and discard up to ``limit`` more bytes (never buffered); stop quietly at the end or a disconnect."""
        dropped = 0
        try:
            async for chunk in self._stream:
                dropped += len(chunk)
                if dropped > limit:
                    return
        except ClientDisconnect:
            return

    async def _next(self) -> bytes | None:
        try:
            chunk = await self._stream.__anext__()
        except StopAsyncIteration:
            return None
        if self.consumed + len(self._buf) + len(chunk) > self._limit:
            raise RequestTooLarge(f"request is over the {self._limit}-byte limit")
        return chunk


async def _read_limited(request: Request, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge(f"request is over the {limit}-byte limit")
        parts.append(chunk)
    return b"".join(parts)


def _error_response(request: Request, exc: Exception) -> Response:
    if isinstance(exc, (AuthError, TransferError)):
        status = exc.status
    elif isinstance(exc, InvalidInput):
        status = 400
    else:
        status = 500
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    # An early answer (413 / 403 mid-upload) must close the connection: the rest of the body is unread.
    headers = {**(headers or {}), "Connection": "close"}
    return JSONResponse(error_body(exc), status_code=status, headers=headers)


def hub_routes(hub: Hub) -> list[Route]:
    """The sync protocol's routes (under ``/v1/``)."""
    return [
        Route("/v1/info", hub.info, methods=["GET"]),
        Route("/v1/refs", hub.refs, methods=["GET"]),
        Route("/v1/missing", hub.missing, methods=["POST"]),
        Route("/v1/fetch", hub.fetch, methods=["POST"]),
        Route("/v1/push", hub.push, methods=["POST"]),
    ]


ERROR_HANDLERS: dict[Any, Callable[[Request, Exception], Response]] = {TractError: _error_response}


def create_app(
    store: Store,
    *,
    tokens: TokenTable | None = None,
    max_object: int = MAX_OBJECT_BYTES,
    max_request: int = MAX_REQUEST_BYTES,
) -> Starlette:
    """A Starlette app serving ``store`` (which the caller opens and closes): the sync protocol only. The
    ``tractkv serve`` command adds the web viewer beside it (:func:`tractkv.view.app.create_app`)."""
    hub = Hub(store, tokens=tokens, max_object=max_object, max_request=max_request)
    return Starlette(routes=hub_routes(hub), exception_handlers=ERROR_HANDLERS)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (port 0 picks a free one; read it back from ``getsockname``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit TCP_NODELAY (Linux). Without it, a response written as head + body
    # waits for the client's delayed ACK: ~40 ms per request on a kept-alive connection.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve(
    app: Starlette,
    sock: socket.socket,
    *,
    on_exit: Callable[[], None] | None = None,
    log_level: str = "warning",
) -> None:
    """Serve ``app`` on ``sock`` until interrupted: SIGINT or SIGTERM finish the requests in flight and
    return normally. ``on_exit`` runs as soon as the signal arrives (it ends long-lived responses, such as
    the viewer's event streams, which the graceful shutdown would otherwise wait for)."""
    import signal

    import uvicorn

    config = uvicorn.Config(
        app,
        http="h11",
        loop="asyncio",
        lifespan="off",
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=5,  # a safety net: on_exit should have ended every long response already
    )

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if on_exit is not None:
                on_exit()
            super().handle_exit(sig, frame)

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # uvicorn shuts down gracefully on either signal, then re-raises it with the previous handler in place
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        _Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
