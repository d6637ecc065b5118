"""A synchronous httpx transport that runs an ASGI app (the hub) in this process, streaming both ways.

Why this and not what httpx or Starlette ship:

* ``httpx.ASGITransport`` is async-only, and :class:`~tractkv.sync.http_client.HttpRemote` is synchronous.
* Starlette's ``TestClient`` transport reads the whole request body before the app sees any of it: a push
  would reach the hub as one buffer (its streaming limits and batched commits untested), and a client whose
  body breaks off midway would raise inside the app instead of reaching it as a disconnect.

Here the app runs on an event loop in a thread of its own (an anyio blocking portal, one per transport).
:meth:`AsgiTransport.handle_request`, in the caller's thread, feeds the request body to the app chunk by
chunk through a small bounded queue (so the app reads it as it is produced, with back-pressure, as over a
socket), then returns a response whose body is read from a second queue as the app sends it. The response
queue is unbounded, so an app that answers before reading the whole body can never deadlock the caller
(a test-sized response is small).

When the body's iterator raises (the client "dies" midway), the app receives ``http.disconnect``; the
transport waits until the app has finished with the request (the hub has committed what arrived, so a test
can inspect the hub at once) and re-raises the same exception, as httpx does with a real socket. A hub
that fails with a 500 has its exception raised here (also one the app answered itself and kept in
``scope["extensions"]["tractkv.internal_error"]``), so a bug is never mistaken for a refusal.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from concurrent.futures import Future
from contextlib import ExitStack
from typing import Any

import anyio
import anyio.from_thread
import httpx

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

REQUEST_QUEUE = 4  # request chunks in flight between the caller and the app (back-pressure, like a socket)
_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError)


class _Exchange:
    """One request in flight: the app's two queues and what the caller and the app know of each other.

    Created and used on the portal's event loop only (the caller's thread reaches it through the portal).
    """

    def __init__(self) -> None:
        self.body_tx, self.body_rx = anyio.create_memory_object_stream[Message](REQUEST_QUEUE)
        self.out_tx, self.out_rx = anyio.create_memory_object_stream[Message](math.inf)
        self.client_done = anyio.Event()  # the caller closed the response (read or abandoned)
        self.body_complete = False
        self.error: Exception | None = None

    async def receive(self) -> Message:
        if not self.body_complete:
            try:
                message = await self.body_rx.receive()
            except anyio.EndOfStream:
                message = {"type": "http.disconnect"}
            if message["type"] == "http.disconnect" or not message.get("more_body", False):
                self.body_complete = True
            return message
        # ASGI: after the body, receive() waits until the client goes (StreamingResponse listens for it)
        await self.client_done.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if self.client_done.is_set():
            return  # like a server whose client has gone: the rest of the response is dropped
        await self.out_tx.send(message)

    async def run(self, app: App, scope: MutableMapping[str, Any]) -> None:
        try:
            await app(scope, self.receive, self.send)
        except (
            Exception
        ) as exc:  # kept for the caller (a hub bug must fail the test, not look like a refusal)
            self.error = exc
        finally:
            self.body_rx.close()  # a caller still sending the body learns that the app stopped reading
            self.out_tx.close()  # the response reader sees the end


class _ResponseBody(httpx.SyncByteStream):
    """The response body as the app sends it; closing it tells the app the client has gone."""

    def __init__(
        self, portal: anyio.from_thread.BlockingPortal, exchange: _Exchange, task: Future[None]
    ) -> None:
        self._portal = portal
        self._exchange = exchange
        self._task = task

    def __iter__(self) -> Iterator[bytes]:
        while True:
            try:
                message = self._portal.call(self._exchange.out_rx.receive)
            except anyio.EndOfStream:
                return
            if message["type"] != "http.response.body":
                continue
            if body := message.get("body", b""):
                yield bytes(body)
            if not message.get("more_body", False):
                return

    def close(self) -> None:
        self._portal.call(self._exchange.client_done.set)
        self._task.result()  # the app has finished with the request


class AsgiTransport(httpx.BaseTransport):
    """``httpx.Client(transport=AsgiTransport(app))`` talks to ``app`` in process: no socket, no thread per
    request (one event-loop thread per transport, closed by :meth:`close`)."""

    def __init__(self, app: App) -> None:
        self._app = app
        self._stack = ExitStack()
        self._portal = self._stack.enter_context(anyio.from_thread.start_blocking_portal())

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        portal = self._portal
        url = request.url
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},  # what uvicorn announces
            "http_version": "1.1",
            "method": request.method,
            "scheme": url.scheme,
            "path": url.path,
            "raw_path": url.raw_path.split(b"?", 1)[0],
            "query_string": url.query,
            "root_path": "",
            "headers": [(name.lower(), value) for name, value in request.headers.raw],
            "client": ("127.0.0.1", 1),
            "server": (url.host, url.port or (443 if url.scheme == "https" else 80)),
        }
        exchange = portal.call(_Exchange)
        task = portal.start_task_soon(exchange.run, self._app, scope)
        assert isinstance(request.stream, httpx.SyncByteStream)
        try:
            for chunk in request.stream:
                if chunk and not self._offer(
                    exchange, {"type": "http.request", "body": chunk, "more_body": True}
                ):
                    break  # the app answered without reading the rest (a refusal)
            else:
                self._offer(exchange, {"type": "http.request", "body": b"", "more_body": False})
        except BaseException:
            self._offer(exchange, {"type": "http.disconnect"})
            portal.call(exchange.client_done.set)
            task.result()
            raise
        while True:
            try:
                message = portal.call(exchange.out_rx.receive)
            except anyio.EndOfStream:
                task.result()
                raise exchange.error or httpx.RemoteProtocolError(
                    "the app ended without a response"
                ) from None
            if message["type"] == "http.response.start":
                break
        status = int(message["status"])
        if status == 500:
            portal.call(exchange.client_done.set)
            task.result()
            if exchange.error is not None:
                raise exchange.error
            caught = scope.get("extensions", {}).get("tractkv.internal_error")
            if caught is not None:  # answered 500 by the app's InternalErrors: still a bug
                raise caught
        return httpx.Response(
            status,
            headers=[(bytes(k), bytes(v)) for k, v in message.get("headers", [])],
            stream=_ResponseBody(portal, exchange, task),
            request=request,
        )

    def _offer(self, exchange: _Exchange, message: Message) -> bool:
        """Hand ``message`` to the app (waiting while its queue is full); False once the app stopped reading."""
        try:
            self._portal.call(exchange.body_tx.send, message)
        except _GONE:
            return False
        return True

    def close(self) -> None:
        self._stack.close()
