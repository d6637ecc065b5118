"""Retries of both HTTP clients against a real server on 127.0.0.1 answering 429 / 503 before a 200: the
number of attempts and every wait exactly (the sleep and the jitter's rng injected), sync and async.

The waits: full jitter (uniform in ``[0, min(backoff * 2**n, max_delay)]``) without a hint, the server's
``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms`` as given, all at most ``max_delay``."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import attrs
import pytest

from tractkv.engine.content import Message
from tractkv.errors import LLMHTTPError
from tractkv.llm import AnthropicClient, OpenAIClient
from tractkv.llm import _http as llm_http

from .conftest import Recorder, anthropic_message, openai_completion

HELLO = [Message(role="user", content="hi")]
SEED = 20
BACKOFF = 0.5
MAX_DELAY = 30.0


def _openai(recorder: Recorder) -> OpenAIClient:
    return OpenAIClient(
        "m", base_url=f"{recorder.url}/v1", api_key="k", max_retries=6, backoff=BACKOFF, max_delay=MAX_DELAY
    )


def _anthropic(recorder: Recorder) -> AnthropicClient:
    return AnthropicClient(
        "m", base_url=recorder.url, api_key="k", max_retries=6, backoff=BACKOFF, max_delay=MAX_DELAY
    )


CLIENTS: dict[str, tuple[Callable[[Recorder], Any], Callable[[], dict[str, Any]]]] = {
    "openai": (_openai, openai_completion),
    "anthropic": (_anthropic, anthropic_message),
}


def _script(recorder: Recorder, ok: dict[str, Any]) -> list[float]:
    """Six failures then a success; the waits the client must take, drawn from the same seeded rng."""
    past = format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
    future = format_datetime(datetime.now(UTC) + timedelta(days=1), usegmt=True)
    recorder.reply({"error": {"message": "slow down"}}, status=429)  # no hint: jittered backoff, retry 0
    recorder.reply(status=503, headers={"Retry-After": "2"})  # seconds, as given
    recorder.reply(status=429, headers={"Retry-After": past})  # an HTTP date gone by: at once
    recorder.reply(status=503, headers={"Retry-After": future})  # an HTTP date a day away: max_delay
    recorder.reply(status=429, headers={"retry-after-ms": "250", "Retry-After": "9"})  # ms wins
    recorder.reply({"error": {"message": "busy"}}, status=503)  # no hint: jittered backoff, retry 5
    recorder.reply(ok)
    rng = random.Random(SEED)
    first = rng.uniform(0.0, BACKOFF)
    last = rng.uniform(0.0, min(BACKOFF * 2**5, MAX_DELAY))
    return [first, 2.0, 0.0, MAX_DELAY, 0.25, last]


def _seeded(client: Any) -> None:
    """The jitter's rng, made reproducible (what ``RetryPolicy(rng=random.Random(seed))`` is for)."""
    client._session.policy = attrs.evolve(client._session.policy, rng=random.Random(SEED))


@pytest.mark.parametrize("provider", sorted(CLIENTS))
def test_sync_waits_are_exact(recorder: Recorder, sleeps: list[float], provider: str) -> None:
    make, ok = CLIENTS[provider]
    expected = _script(recorder, ok())
    with make(recorder) as client:
        _seeded(client)
        assert client.chat(HELLO).text == "ok"
    assert len(recorder.requests) == 7
    assert recorder.bodies[0] == recorder.bodies[6]
    assert sleeps == expected
    assert 0 < expected[0] < BACKOFF
    assert 0 < expected[-1] < BACKOFF * 2**5


@pytest.mark.parametrize("provider", sorted(CLIENTS))
def test_async_waits_are_exact(recorder: Recorder, monkeypatch: pytest.MonkeyPatch, provider: str) -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(llm_http, "_async_sleep", record)
    make, ok = CLIENTS[provider]
    expected = _script(recorder, ok())

    async def main() -> str:
        client = make(recorder)
        _seeded(client)
        try:
            return str((await client.achat(HELLO)).text)
        finally:
            await client.aclose()
            client.close()

    assert asyncio.run(main()) == "ok"
    assert len(recorder.requests) == 7
    assert waits == expected


@pytest.mark.parametrize("provider", sorted(CLIENTS))
def test_the_last_retryable_answer_is_the_error(
    recorder: Recorder, sleeps: list[float], provider: str
) -> None:
    make, _ = CLIENTS[provider]
    for _ in range(7):
        recorder.reply({"error": {"message": "still busy"}}, status=503)
    client = make(recorder)
    _seeded(client)
    with client, pytest.raises(LLMHTTPError) as info:
        client.chat(HELLO)
    assert (info.value.status, info.value.attempts) == (503, 7)
    rng = random.Random(SEED)
    assert sleeps == [rng.uniform(0.0, min(BACKOFF * 2**n, MAX_DELAY)) for n in range(6)]
    assert len(recorder.requests) == 7
