"""JSON over HTTP with bounded retries: the only module that imports httpx.

A POST is retried on 429 and 5xx answers and on transport failures (refused connection, timeout), at most
``max_retries`` times. The wait before retry *n* (0-based) is drawn uniformly from ``[0, min(backoff * 2**n,
max_delay)]`` ("full jitter", so clients that failed together do not retry together), or is what the server
asks for in ``Retry-After`` / ``retry-after-ms`` (honoured as given, no jitter), at most ``max_delay`` seconds.
Other statuses fail at once. Every httpx error is wrapped in an :class:`~tractkv.errors.LLMError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import random
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import attrs
import httpx

from tractkv.errors import InvalidInput, LLMError, LLMHTTPError, MalformedResponse

_sleep = time.sleep  # module-level so tests can observe the waits without sleeping
_async_sleep = asyncio.sleep  # the same, on the event loop

MAX_DETAIL = 500  # characters of an error body quoted in LLMHTTPError (bodies can be whole HTML pages)


def is_retryable(status: int) -> bool:
    """429 (rate limited) and 5xx (server trouble, Anthropic's 529 overloaded) are worth another try."""
    return status == 429 or status >= 500


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """How often and how patiently a request is retried. All times in seconds.

    Attributes:
        max_retries: retries after the first attempt (0 disables them).
        backoff: the ceiling of the first wait; it doubles with each retry, up to ``max_delay``.
        max_delay: the upper bound of any one wait, a server's ``Retry-After`` included.
        jitter: wait a uniformly random time up to the ceiling (full jitter); False waits the ceiling itself.
        rng: where the jitter comes from (pass ``random.Random(seed)`` for reproducible waits).
    """

    max_retries: int = 3
    backoff: float = 0.5
    max_delay: float = 30.0
    jitter: bool = True
    rng: random.Random = attrs.field(factory=random.Random, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.max_retries < 0:
            raise InvalidInput("max_retries must be >= 0")
        if self.backoff < 0 or self.max_delay < 0:
            raise InvalidInput("backoff and max_delay must be >= 0 seconds")

    def delay(self, retry: int, headers: Mapping[str, str] | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based): what the server's headers ask for, else a
        jittered exponential backoff; never below 0 nor above ``max_delay``."""
        asked = _retry_after(headers) if headers is not None else None
        if asked is not None:
            return max(0.0, min(asked, self.max_delay))
        ceiling = min(
            self.backoff * 2.0 ** min(retry, 64), self.max_delay
        )  # the exponent bounded: no overflow
        return self.rng.uniform(0.0, ceiling) if self.jitter else ceiling


def _retry_after(headers: Mapping[str, str]) -> float | None:
    milliseconds = headers.get("retry-after-ms")  # OpenAI's finer-grained hint
    if milliseconds is not None:
        try:
            return float(milliseconds) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)  # delta-seconds
    except ValueError:
        pass
    try:  # or an HTTP date
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - datetime.now(UTC)).total_seconds()


def _detail(response: httpx.Response) -> str:
    """The API's error message when it sent one (``{"error": {"message": ...}}``), else the body's start."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:MAX_DETAIL]
    if isinstance(body, dict):
        error = body.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        if isinstance(message, str):
            return message[:MAX_DETAIL]
        if isinstance(error, str):
            return error[:MAX_DETAIL]
    return response.text[:MAX_DETAIL]


def _checked_base_url(base_url: str) -> str:
    """``base_url`` without its trailing slash, refused unless it is an http(s) URL with a host."""
    try:
        parsed = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise InvalidInput(f"invalid base_url {base_url!r}: {exc}") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise InvalidInput(f"invalid base_url {base_url!r}: needs http:// or https:// and a host")
    return base_url.rstrip("/")


@attrs.define
class _Attempts:
    """The retry rule of one request, written once for the sync and async paths: each attempt's outcome
    (a transport failure or an answer) is either a wait before the next attempt, or final."""

    url: str
    policy: RetryPolicy

    @property
    def count(self) -> int:
        return self.policy.max_retries + 1

    def failed(self, attempt: int, exc: httpx.HTTPError) -> float:
        """The wait before retrying after ``exc``; raises LLMError when it is final."""
        if not isinstance(exc, httpx.TransportError):
            raise LLMError(f"request to {self.url} failed: {exc!r}") from exc
        if attempt == self.count - 1:
            raise LLMError(f"cannot reach {self.url} after {self.count} attempt(s): {exc!r}") from exc
        return self.policy.delay(attempt)

    def answered(self, attempt: int, response: httpx.Response) -> float | None:
        """None for a success; the wait before retrying a retryable status; raises LLMHTTPError when the
        error status is final (the body must have been read)."""
        status = response.status_code
        if 200 <= status < 300:
            return None
        if is_retryable(status) and attempt < self.count - 1:
            return self.policy.delay(attempt, response.headers)
        raise LLMHTTPError(status, self.url, _detail(response), attempt + 1)

    def stream_failed(self, exc: httpx.HTTPError) -> LLMError:
        """A failure while a stream's body arrives (never retried: part of the reply was read)."""
        return LLMError(f"the stream from {self.url} broke off: {exc!r}")


def _json_object(response: httpx.Response, url: str) -> dict[str, Any]:
    try:
        decoded = json.loads(response.content)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedResponse(f"body is not JSON ({exc}): {response.text[:200]!r}", url) from None
    if not isinstance(decoded, dict):
        raise MalformedResponse(f"body is JSON {type(decoded).__name__}, not an object", url)
    return decoded


class JSONSession:
    """POSTs JSON to one API and returns the decoded JSON object (or, for a streamed reply, its lines),
    retrying as :class:`RetryPolicy` says.

    Thread-safe (one pooled ``httpx.Client``); the ``a*`` methods use an ``httpx.AsyncClient`` made on first
    use (one event loop per session). :meth:`close` / :meth:`aclose` release their connections. A
    ``transport`` given serves both clients as far as it can (a sync one the sync calls, an async one the
    ``a*`` calls); a call it cannot serve raises InvalidInput, never reaching the network instead.
    """

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        *,
        timeout: float,
        policy: RetryPolicy,
        transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if timeout <= 0:
            raise InvalidInput("timeout must be > 0 seconds")
        self.base_url = _checked_base_url(base_url)
        self.policy = policy
        self._headers = dict(headers)
        self._timeout = timeout
        # one TLS context for both clients: making one reads the CA bundle (~0.1 s), never on the event loop
        self._tls = httpx.create_ssl_context()
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=self._headers,
            timeout=timeout,
            transport=transport if isinstance(transport, httpx.BaseTransport) else None,
            verify=self._tls,
        )
        self._transport = transport
        self._async: httpx.AsyncClient | None = None

    def _served(self, asynchronous: bool) -> None:
        """Refuse a call the given transport cannot serve (rather than send it to the network)."""
        transport = self._transport
        wanted = httpx.AsyncBaseTransport if asynchronous else httpx.BaseTransport
        if transport is not None and not isinstance(transport, wanted):
            kind, other = ("async", "sync") if asynchronous else ("sync", "async")
            raise InvalidInput(
                f"the client's transport ({type(transport).__name__}) is {other}-only and cannot serve an "
                f"{kind} call: give a transport that is a {wanted.__module__}.{wanted.__name__} "
                "(httpx.MockTransport serves both)"
            )

    def close(self) -> None:
        self._client.close()

    async def aclose(self) -> None:
        if self._async is not None:
            await self._async.aclose()
            self._async = None

    async def _async_client(self) -> httpx.AsyncClient:
        """The async client, made on first use in a thread: making it and the first request's imports (httpcore's
        anyio backend) take ~0.1 s, which must not be spent on the event loop."""
        self._served(asynchronous=True)
        if self._async is None:
            client = await asyncio.to_thread(self._new_async_client)
            if self._async is None:
                self._async = client
            else:  # another coroutine made one meanwhile
                await client.aclose()
        return self._async

    def _new_async_client(self) -> httpx.AsyncClient:
        with contextlib.suppress(ImportError):  # a later anyio may lay out its backends differently
            importlib.import_module("anyio._backends._asyncio")  # what httpcore imports on the first request
        transport = self._transport if isinstance(self._transport, httpx.AsyncBaseTransport) else None
        return httpx.AsyncClient(
            base_url=self.base_url,
            headers=self._headers,
            timeout=self._timeout,
            verify=self._tls,
            transport=transport,
        )

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``base_url + path``; the reply's JSON object.

        Raises:
            LLMHTTPError: an error status (429 / 5xx once the retries are spent).
            MalformedResponse: a success status whose body is not a JSON object.
            LLMError: the server could not be reached (after the retries).
        """
        self._served(asynchronous=False)
        attempts = _Attempts(self.base_url + path, self.policy)
        for attempt in range(attempts.count):
            try:
                response = self._client.post(path, json=body)
            except httpx.HTTPError as exc:
                _sleep(attempts.failed(attempt, exc))
                continue
            wait = attempts.answered(attempt, response)
            if wait is None:
                return _json_object(response, attempts.url)
            _sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def apost(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """:meth:`post` on the event loop (httpx's async client; the waits are ``asyncio.sleep``)."""
        attempts = _Attempts(self.base_url + path, self.policy)
        for attempt in range(attempts.count):
            try:
                response = await (await self._async_client()).post(path, json=body)
            except httpx.HTTPError as exc:
                await _async_sleep(attempts.failed(attempt, exc))
                continue
            wait = attempts.answered(attempt, response)
            if wait is None:
                return _json_object(response, attempts.url)
            await _async_sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def stream_lines(self, path: str, body: dict[str, Any]) -> Iterator[str]:
        """POST ``body`` and yield the lines of a streamed (server-sent events) reply as they arrive.

        Opening the stream is retried as :meth:`post` is; once its body arrives, a failure is an
        :class:`LLMError` (nothing is retried). Closing the generator closes the connection.
        """
        self._served(asynchronous=False)
        attempts = _Attempts(self.base_url + path, self.policy)
        for attempt in range(attempts.count):
            request = self._client.build_request("POST", path, json=body)
            try:
                response = self._client.send(request, stream=True)
            except httpx.HTTPError as exc:
                _sleep(attempts.failed(attempt, exc))
                continue
            try:
                if not 200 <= response.status_code < 300:
                    response.read()
                wait = attempts.answered(attempt, response)
                if wait is None:
                    yield from response.iter_lines()
                    return
            except httpx.HTTPError as exc:
                raise attempts.stream_failed(exc) from exc
            finally:
                response.close()
            _sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def astream_lines(self, path: str, body: dict[str, Any]) -> AsyncIterator[str]:
        """:meth:`stream_lines` on the event loop."""
        attempts = _Attempts(self.base_url + path, self.policy)
        client = await self._async_client()
        for attempt in range(attempts.count):
            request = client.build_request("POST", path, json=body)
            try:
                response = await client.send(request, stream=True)
            except httpx.HTTPError as exc:
                await _async_sleep(attempts.failed(attempt, exc))
                continue
            try:
                if not 200 <= response.status_code < 300:
                    await response.aread()
                wait = attempts.answered(attempt, response)
                if wait is None:
                    async for line in response.aiter_lines():
                        yield line
                    return
            except httpx.HTTPError as exc:
                raise attempts.stream_failed(exc) from exc
            finally:
                await response.aclose()
            await _async_sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")
