"""Retries are the SDK's: each client's calls, sync and async, against a real server on 127.0.0.1 answering
429 / 5xx before a 200. The SDK client's ``max_retries`` bounds the attempts, the server's ``retry-after-ms`` /
``Retry-After`` sets the waits (measured between the requests' arrivals), and once the retries are spent the
last answer is an :class:`~tractkv.errors.LLMHTTPError` with the attempts the SDK made."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from tractkv.engine.content import Message
from tractkv.errors import LLMHTTPError
from tractkv.llm import AnthropicClient, OpenAIClient

from .conftest import Recorder, anthropic_message, openai_completion, response_body

HELLO = [Message(role="user", content="hi")]

CLIENTS: dict[str, tuple[Callable[[Recorder, int], Any], Callable[[], dict[str, Any]]]] = {
    "chat": (
        lambda r, n: OpenAIClient("m", api="chat", base_url=f"{r.url}/v1", api_key="k", max_retries=n),
        openai_completion,
    ),
    "responses": (
        lambda r, n: OpenAIClient("m", base_url=f"{r.url}/v1", api_key="k", max_retries=n),
        response_body,
    ),
    "anthropic": (
        lambda r, n: AnthropicClient("m", base_url=r.url, api_key="k", max_retries=n),
        anthropic_message,
    ),
}


def _script(recorder: Recorder, ok: dict[str, Any]) -> list[float]:
    """Three failures, each asking for a wait, then a success; the waits asked for (seconds)."""
    recorder.reply({"error": {"message": "slow down"}}, status=429, headers={"retry-after-ms": "300"})
    recorder.reply(status=503, headers={"Retry-After": "0.2"})  # seconds
    recorder.reply(status=500, headers={"retry-after-ms": "100", "Retry-After": "9"})  # ms wins
    recorder.reply(ok)
    return [0.3, 0.2, 0.1]


def _gaps(recorder: Recorder) -> list[float]:
    times = [r.received for r in recorder.requests]
    return [b - a for a, b in itertools.pairwise(times)]


def _waited(gaps: list[float], asked: list[float]) -> bool:
    """Each gap is at least the wait asked for, and not the SDK's own backoff instead (its first is >= 0.375 s)."""
    return all(want <= gap < want + 0.35 for gap, want in zip(gaps, asked, strict=True))


@pytest.mark.parametrize("provider", sorted(CLIENTS))
def test_sync_retries_wait_as_the_server_asks(recorder: Recorder, provider: str) -> None:
    make, ok = CLIENTS[provider]
    asked = _script(recorder, ok())
    with make(recorder, 3) as client:
        assert client.chat(HELLO).text == "ok"
    assert len(recorder.requests) == 4
    assert recorder.bodies[0] == recorder.bodies[3]
    assert [r.headers["x-stainless-retry-count"] for r in recorder.requests] == ["0", "1", "2", "3"]
    assert _waited(_gaps(recorder), asked), _gaps(recorder)


@pytest.mark.parametrize("provider", sorted(CLIENTS))
def test_async_retries_wait_as_the_server_asks(recorder: Recorder, provider: str) -> None:
    make, ok = CLIENTS[provider]
    asked = _script(recorder, ok())

    async def main() -> str:
        client = make(recorder, 3)
        try:
            return str((await client.achat(HELLO)).text)
        finally:
            await client.aclose()
            client.close()

    assert asyncio.run(main()) == "ok"
    assert len(recorder.requests) == 4
    assert recorder.requests[0].headers["x-stainless-async"] != "false"  # the SDK's async client
    assert _waited(_gaps(recorder), asked), _gaps(recorder)


@pytest.mark.parametrize("provider", sorted(CLIENTS))
def test_the_last_retryable_answer_is_the_error(recorder: Recorder, provider: str) -> None:
    make, _ = CLIENTS[provider]
    for _ in range(7):
        recorder.reply({"error": {"message": "still busy"}}, status=503, headers={"retry-after-ms": "1"})
    client = make(recorder, 4)
    with client, pytest.raises(LLMHTTPError, match="still busy") as info:
        client.chat(HELLO)
    assert (info.value.status, info.value.attempts) == (503, 5)
    assert len(recorder.requests) == 5
