"""A remote that is a ``tractkv serve`` hub, reached over HTTP with httpx (the ``server`` extra).

The bearer token comes from the caller (remote config / environment), never from the URL: a URL with
credentials in it is refused, and no message ever repeats a token. ``requests`` / ``bytes_up`` /
``bytes_down`` count what crossed the wire (bodies), for the benchmarks and for curious users.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from tractkv._version import __version__
from tractkv.errors import AuthError, ObjectTooLarge, RemoteUnavailable, RequestTooLarge, UnsupportedURL
from tractkv.ids import ObjectId, is_object_id

from .frames import UNLIMITED, decode_stream, encode_stream
from .remote import PushOutcome, RefUpdate, Remote
from .wire import (
    IDS_TYPE,
    STREAM_TYPE,
    encode_push_head,
    error_from_response,
    ids_from_bytes,
    ids_to_bytes,
    result_from_json,
)


def redact(url: str) -> str:
    """``url`` without any user:password part."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


class HttpRemote(Remote):
    """A hub at ``http(s)://host:port[/prefix]``; endpoints live under ``<url>/v1/``.

    Args:
        url: The hub's address (no credentials in it).
        token: Bearer token sent with every request.
        timeout: Seconds to wait on a read or write (10 s to connect).
        token_env: The environment variable the token is read from (messages name it when the hub refuses).
        transport: How requests travel (default: TCP with ``TCP_NODELAY``). Any synchronous
            ``httpx.BaseTransport`` works; the tests pass one that runs the hub's ASGI app in process
            (``tests/sync/asgi_transport.py``), because ``httpx.ASGITransport`` is async-only and Starlette's
            ``TestClient`` transport reads a whole request body before the app sees it, so it could neither
            stream a push nor cut one midway.

    Raises:
        UnsupportedURL: The URL has credentials in it or no host.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float = 120.0,
        transport: httpx.BaseTransport | None = None,
        token_env: str | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None:
            raise UnsupportedURL(
                redact(url),
                "put the token in $TRACTKV_TOKEN, or in another variable named with token_env= (--token-env)",
            )
        if not parts.hostname:
            raise UnsupportedURL(url, "no host")
        self.url = url
        self._has_token = bool(token)
        self._token_env = token_env or "TRACTKV_TOKEN"
        self._base = url.rstrip("/") + "/v1/"
        headers = {"User-Agent": f"tractkv/{__version__}"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if transport is None:
            # TCP_NODELAY: httpcore writes a request's head and body separately; with Nagle's algorithm on,
            # the body waits for the server's delayed ACK and every request costs ~40 ms more.
            transport = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        self._client = httpx.Client(
            headers=headers, timeout=httpx.Timeout(timeout, connect=10.0), transport=transport
        )
        self.requests = 0
        self.bytes_up = 0
        self.bytes_down = 0
        self.limits: dict[str, int] = {}  # the hub's size limits, as its ref list announced them

    # --- plumbing -------------------------------------------------------------------------------------------

    def _check(self, response: httpx.Response, what: str) -> None:
        if response.status_code == 200:
            return
        try:
            body: Any = json.loads(response.read())
        except ValueError:
            body = None
        if response.status_code == 404 and body is None:
            raise RemoteUnavailable(f"{self.url} is not a tractkv hub (404 on {what})")
        error = error_from_response(response.status_code, body, what)
        if isinstance(error, AuthError) and error.status == 401:
            raise self._unauthenticated(error.detail)
        raise error

    def _unauthenticated(self, detail: str) -> AuthError:
        """A 401 in the terms of the client: which variable to set (a hub's wording names HTTP headers)."""
        variable = f"${self._token_env}"
        if self._has_token:
            return AuthError(
                401, f"{self.url} does not accept the token in {variable} ({detail}): set the right one there"
            )
        if self._token_env == "TRACTKV_TOKEN":
            where = f"{variable} (or in another variable named with token_env=, --token-env)"
        else:
            where = f"{variable} (this remote's token_env) or $TRACTKV_TOKEN"
        return AuthError(401, f"{self.url} needs a token: put it in {where}")

    def _call(self, method: str, path: str, what: str, **kwargs: Any) -> httpx.Response:
        self.requests += 1
        try:
            response = self._client.request(method, self._base + path, **kwargs)
        except httpx.HTTPError as exc:
            raise RemoteUnavailable(f"cannot reach {self.url}: {exc}") from exc
        self.bytes_down += len(response.content)
        self._check(response, what)
        return response

    # --- Remote ---------------------------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        data = self._call("GET", "info", "info").json()
        assert isinstance(data, dict)
        return data

    def list_refs(self, prefix: str = "refs/heads/") -> dict[str, ObjectId]:
        data = self._call("GET", "refs", "list refs", params={"prefix": prefix}).json()
        refs = data.get("refs") if isinstance(data, dict) else None
        if not isinstance(refs, dict):
            raise RemoteUnavailable(f"{self.url} sent a malformed ref list")
        limits = data.get("limits")
        if isinstance(limits, dict):
            self.limits = {k: v for k, v in limits.items() if isinstance(v, int)}
            self.max_object = self.limits.get("max_object", self.max_object)
            self.max_request = self.limits.get("max_request", self.max_request)
        return {str(k): ObjectId(v) for k, v in refs.items() if isinstance(v, str) and is_object_id(v)}

    def missing(self, oids: Sequence[ObjectId]) -> set[ObjectId]:
        body = ids_to_bytes(list(oids))
        self.bytes_up += len(body)
        response = self._call("POST", "missing", "missing", content=body, headers={"Content-Type": IDS_TYPE})
        return set(ids_from_bytes(response.content))

    def push(
        self,
        objects: Iterable[tuple[ObjectId, bytes]],
        updates: Sequence[RefUpdate],
        *,
        atomic: bool = False,
    ) -> PushOutcome:
        sent = [0, 0]
        max_object = self.limits.get("max_object")
        max_request = self.limits.get("max_request")

        def body() -> Iterator[bytes]:
            # Refuse locally what the hub announced it would refuse: a clear error, not a reset connection.
            head = encode_push_head(list(updates), atomic)
            self.bytes_up += len(head)
            total = len(head)
            yield head

            def counted() -> Iterator[tuple[ObjectId, bytes]]:
                for oid, data in objects:
                    if max_object is not None and len(data) > max_object:
                        raise ObjectTooLarge(
                            f"object of {len(data)} bytes is over the hub's {max_object}-byte limit", oid
                        )
                    sent[0] += 1
                    sent[1] += len(data)
                    yield oid, data

            for chunk in encode_stream(counted()):
                total += len(chunk)
                if max_request is not None and total > max_request:
                    raise RequestTooLarge(
                        f"push is over the hub's {max_request}-byte request limit: push fewer commits at a time"
                    )
                self.bytes_up += len(chunk)
                yield chunk

        self.requests += 1
        try:
            response = self._client.post(
                self._base + "push", content=body(), headers={"Content-Type": STREAM_TYPE}
            )
        except httpx.HTTPError as exc:
            raise RemoteUnavailable(
                f"push to {self.url} broke off after {sent[0]} object(s): {exc} "
                "(objects that arrived are kept; pushing again sends the rest)"
            ) from exc
        self.bytes_down += len(response.content)
        self._check(response, "push")
        data = response.json()
        return PushOutcome(
            results=tuple(result_from_json(r) for r in data["results"]),
            objects_sent=sent[0],
            bytes_sent=sent[1],
        )

    def fetch(
        self,
        wants: Sequence[ObjectId],
        haves: Sequence[ObjectId],
        known: Callable[[ObjectId], bool] | None = None,
    ) -> Iterator[tuple[ObjectId, bytes]]:
        request = json.dumps({"wants": list(wants), "haves": list(haves)}).encode()
        self.bytes_up += len(request)
        self.requests += 1
        try:
            with self._client.stream(
                "POST", self._base + "fetch", content=request, headers={"Content-Type": "application/json"}
            ) as response:
                self._check(response, "fetch")
                # What we asked for: only the per-object limit applies (the hub's request limit is for pushes).
                yield from decode_stream(
                    self._counting(response.iter_bytes()), max_object=self.max_receive, max_request=UNLIMITED
                )
        except httpx.HTTPError as exc:
            raise RemoteUnavailable(f"fetch from {self.url} broke off: {exc}") from exc

    def _counting(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            self.bytes_down += len(chunk)
            yield chunk

    def close(self) -> None:
        self._client.close()
