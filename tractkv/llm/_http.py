"""JSON over HTTP with bounded retries: the only module that imports httpx.

A POST is retried on 429 and 5xx answers and on transport failures (refused connection, timeout), at most
``max_retries`` times. The wait before retry *n* (0-based) is drawn uniformly from ``[0, min(backoff * 2**n,
max_delay)]`` ("full jitter", so clients that failed together do not retry together), or is what the server
asks for in ``Retry-After`` / ``retry-after-ms`` (honoured as given, no jitter), at most ``max_delay`` seconds.
Other statuses fail at once. Every httpx error is wrapped in an :class:`~tractkv.errors.LLMError`.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import attrs
import httpx

from tractkv.errors import InvalidInput, LLMError, LLMHTTPError, MalformedResponse

_sleep = time.sleep  # module-level so tests can observe the waits without sleeping

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


class JSONSession:
    """POSTs JSON to one API and returns the decoded JSON object, retrying as :class:`RetryPolicy` says.

    Thread-safe (one pooled ``httpx.Client``); :meth:`close` releases its connections.
    """

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        *,
        timeout: float,
        policy: RetryPolicy,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if timeout <= 0:
            raise InvalidInput("timeout must be > 0 seconds")
        try:
            parsed = httpx.URL(base_url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise InvalidInput(f"invalid base_url {base_url!r}: {exc}") from exc
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise InvalidInput(f"invalid base_url {base_url!r}: needs http:// or https:// and a host")
        self.base_url = base_url.rstrip("/")
        self.policy = policy
        self._client = httpx.Client(
            base_url=self.base_url, headers=dict(headers), timeout=timeout, transport=transport
        )

    def close(self) -> None:
        self._client.close()

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``base_url + path``; the reply's JSON object.

        Raises:
            LLMHTTPError: an error status (429 / 5xx once the retries are spent).
            MalformedResponse: a success status whose body is not a JSON object.
            LLMError: the server could not be reached (after the retries).
        """
        url = self.base_url + path
        attempts = self.policy.max_retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                response = self._client.post(path, json=body)
            except httpx.TransportError as exc:
                if last:
                    raise LLMError(f"cannot reach {url} after {attempts} attempt(s): {exc!r}") from exc
                _sleep(self.policy.delay(attempt))
                continue
            except httpx.HTTPError as exc:
                raise LLMError(f"request to {url} failed: {exc!r}") from exc
            status = response.status_code
            if is_retryable(status) and not last:
                _sleep(self.policy.delay(attempt, response.headers))
                continue
            if not 200 <= status < 300:
                raise LLMHTTPError(status, url, _detail(response), attempt + 1)
            try:
                decoded = json.loads(response.content)
            except (ValueError, UnicodeDecodeError) as exc:
                raise MalformedResponse(f"body is not JSON ({exc}): {response.text[:200]!r}", url) from None
            if not isinstance(decoded, dict):
                raise MalformedResponse(f"body is JSON {type(decoded).__name__}, not an object", url)
            return decoded
        raise AssertionError("unreachable: the last attempt returns or raises")
