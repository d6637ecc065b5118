"""The hub's body timeout cuts a client that stalls while sending its body, never a response that streams
after the body was read (a long fetch, the viewer's event stream listen for a disconnect meanwhile)."""

from __future__ import annotations

from typing import Any

import anyio

from tractkv.sync.server import BodyTimeout

TIMEOUT = 0.2


def _run(app: Any, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drive ``BodyTimeout(app)`` with ``messages`` as the request, then a client that never disconnects."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await anyio.sleep(3600)  # a client still reading the answer: no disconnect
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def main() -> None:
        with anyio.fail_after(10):
            await BodyTimeout(app, timeout=TIMEOUT)({"type": "http"}, receive, send)

    anyio.run(main)
    return sent


async def _streaming_app(scope: Any, receive: Any, send: Any) -> None:
    """Reads the whole body, then streams for 5x the timeout while listening for a disconnect."""
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": []})
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            message = await receive()
            assert message["type"] == "http.disconnect"
            group.cancel_scope.cancel()  # a real disconnect ends the stream

        group.start_soon(watch)
        for _ in range(10):
            await anyio.sleep(TIMEOUT / 2)
            await send({"type": "http.response.body", "body": b"x", "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        group.cancel_scope.cancel()


def test_a_streaming_answer_outlives_the_body_timeout() -> None:
    sent = _run(_streaming_app, [{"type": "http.request", "body": b"{}", "more_body": False}])
    bodies = [m for m in sent if m["type"] == "http.response.body"]
    assert len(bodies) == 11
    assert bodies[-1]["more_body"] is False


def test_a_stalled_body_reads_as_a_disconnect() -> None:
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            seen.append(message["type"])
            if message["type"] == "http.disconnect" or not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 400, "headers": []})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    sent = _run(app, [{"type": "http.request", "body": b"{", "more_body": True}])
    assert seen == ["http.request", "http.disconnect"]
    assert (b"connection", b"close") in sent[0]["headers"]


def test_the_deadline_is_a_total_not_a_per_read_timer() -> None:
    """A body dripping a byte every half timeout never pauses a whole timeout, yet is cut once the total
    passes; a message already waiting when the app first asks late is still delivered."""
    seen: list[str] = []

    async def receive_drip() -> dict[str, Any]:
        await anyio.sleep(TIMEOUT / 2)
        return {"type": "http.request", "body": b"x", "more_body": True}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        for _ in range(20):  # bounded: 20 drips would take 5x the timeout
            message = await receive()
            seen.append(message["type"])
            if message["type"] == "http.disconnect":
                break
        await send({"type": "http.response.start", "status": 400, "headers": []})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def main() -> None:
        with anyio.fail_after(10):
            await BodyTimeout(app, timeout=TIMEOUT)({"type": "http"}, receive_drip, send)

    anyio.run(main)
    assert seen[-1] == "http.disconnect"
    assert 1 <= seen.count("http.request") <= 3  # cut at ~2 drips, not after 20
    assert (b"connection", b"close") in sent[0]["headers"]

    late: list[str] = []

    async def late_app(scope: Any, receive: Any, send: Any) -> None:
        await anyio.sleep(TIMEOUT * 2)  # e.g. a slow page, then a stream that listens for a disconnect
        late.append((await receive())["type"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    _run(late_app, [{"type": "http.request", "body": b"", "more_body": False}])
    assert late == ["http.request"]
