"""A recording HTTP server on loopback: records each request, answers with scripted replies.

Every test gets its own server (port 0 on 127.0.0.1, serving from a thread) and stops it in teardown. A
request that arrives when no reply is scripted gets 418, so a test that sends more than it expects fails
loudly instead of hanging or reaching a real API.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anthropic
import attrs
import openai
import pytest


@attrs.frozen(kw_only=True)
class Recorded:
    """One request as the server saw it (header names lowercased)."""

    method: str
    path: str
    headers: dict[str, str] = attrs.field(hash=False)
    body: Any = attrs.field(hash=False)  # the decoded JSON, or the raw text when it is not JSON
    received: float = attrs.field(factory=time.monotonic, hash=False, eq=False)  # when it arrived


@attrs.frozen(kw_only=True)
class Reply:
    status: int = 200
    body: bytes = b"{}"
    headers: tuple[tuple[str, str], ...] = ()
    chunks: tuple[bytes, ...] | None = None  # a streamed reply: sent chunked, one chunk at a time
    pause: float = 0.0  # seconds between two chunks
    drop: bool = False  # close the connection after the chunks, without the chunked body's end
    delay: float = 0.0  # seconds before answering


class Recorder:
    """The test's handle on the server: script replies with :meth:`reply`, read :attr:`requests`."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reply(
        self,
        body: Any = None,
        *,
        status: int = 200,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
    ) -> None:
        """Queue one reply: ``body`` as JSON, or ``raw`` bytes as they are (malformed bodies), sent after
        ``delay`` seconds."""
        data = raw if raw is not None else json.dumps(body if body is not None else {}).encode()
        with self._lock:
            self._replies.append(
                Reply(status=status, body=data, headers=tuple((headers or {}).items()), delay=delay)
            )

    def stream(
        self, events: list[bytes], *, pause: float = 0.0, drop_after: int | None = None, status: int = 200
    ) -> None:
        """Queue a streamed reply (``text/event-stream``, chunked, one event per chunk, ``pause`` seconds
        apart); ``drop_after=n`` closes the connection after n events, mid-body."""
        chunks = tuple(events if drop_after is None else events[:drop_after])
        with self._lock:
            self._replies.append(
                Reply(status=status, chunks=chunks, pause=pause, drop=drop_after is not None)
            )

    def _next(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._replies:
                return self._replies.popleft()
        return Reply(status=418, body=b'{"error": {"message": "no reply scripted for this request"}}')

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]


def _handler(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' pooled clients expect

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = recorder._next(Recorded(method=self.command, path=self.path, headers=headers, body=body))
            time.sleep(reply.delay)
            if reply.chunks is not None:
                self._stream(reply)
                return
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)

        def _stream(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for index, chunk in enumerate(reply.chunks or ()):
                if index and reply.pause:
                    time.sleep(reply.pause)
                try:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                except OSError:  # the client went away (it stopped reading)
                    self.close_connection = True
                    return
            if reply.drop:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(b"0\r\n\r\n")

        def do_POST(self) -> None:
            self._serve()

        def do_GET(self) -> None:
            self._serve()

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

    return Handler


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(rec))
    server.daemon_threads = True
    rec.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


RETRY_NOW = {"retry-after-ms": "1"}  # an error reply's header: the SDKs retry after 1 ms, not their backoff


def openai_completion(
    content: str | None = "ok", tool_calls: list[dict[str, Any]] | None = None, *, model: str = "m"
) -> dict[str, Any]:
    """A chat.completion body as OpenAI sends it."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }


def anthropic_message(blocks: list[dict[str, Any]] | None = None, *, model: str = "m") -> dict[str, Any]:
    """A message body as Anthropic sends it."""
    content = blocks if blocks is not None else [{"type": "text", "text": "ok"}]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }


def sse(event: str | None, data: Any) -> bytes:
    """One server-sent event (``data`` as JSON unless it is a str)."""
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "").encode() + f"data: {text}\n\n".encode()


def openai_events(body: dict[str, Any], *, pieces: int = 3) -> list[bytes]:
    """The chunks OpenAI streams for the chat.completion ``body`` (one choice): role, content and each tool
    call's arguments cut in ``pieces``, the finish reason, the usage chunk, ``[DONE]``."""
    head = {k: body[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice = body["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choices = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        return sse(None, head | {"choices": choices, "usage": None})

    out = [chunk({"role": "assistant", "content": "" if message.get("content") is not None else None})]
    for field, value in message.items():  # strings in pieces (content, refusal, reasoning...), the rest whole
        if field in ("role", "tool_calls") or value is None:
            continue
        for piece in _cut(value, pieces) if isinstance(value, str) else [value]:
            out.append(chunk({field: piece}))
    for index, call in enumerate(message.get("tool_calls") or ()):
        start = {"index": index, "id": call["id"], "type": "function"}
        out.append(
            chunk({"tool_calls": [start | {"function": {"name": call["function"]["name"], "arguments": ""}}]})
        )
        for piece in _cut(call["function"]["arguments"], pieces):
            out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    out.append(chunk({}, choice["finish_reason"]))
    out.append(sse(None, head | {"choices": [], "usage": body["usage"]}))
    out.append(sse(None, "[DONE]"))
    return out


def anthropic_events(body: dict[str, Any], *, pieces: int = 3) -> list[bytes]:
    """The events Anthropic streams for the message ``body``: text, thinking (and its signature) and tool
    input cut in ``pieces``; other blocks whole in their content_block_start."""
    start = dict(body) | {"content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = dict(body["usage"]) | {"output_tokens": 1}
    out = [sse("message_start", {"type": "message_start", "message": start}), sse("ping", {"type": "ping"})]
    for index, block in enumerate(body["content"]):
        kind = block["type"]
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            first = {"type": "text", "text": ""} | ({"citations": []} if "citations" in block else {})
            deltas = [{"type": "text_delta", "text": p} for p in _cut(block["text"], pieces)]
            deltas += [{"type": "citations_delta", "citation": c} for c in block.get("citations") or ()]
        elif kind == "thinking":
            first = {"type": "thinking", "thinking": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _cut(block["thinking"], pieces)]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind in ("tool_use", "server_tool_use"):
            first = {k: v for k, v in block.items() if k != "input"} | {"input": {}}
            text = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _cut(text, pieces)]
        else:
            first = block
        out.append(
            sse(
                "content_block_start", {"type": "content_block_start", "index": index, "content_block": first}
            )
        )
        for delta in deltas:
            out.append(
                sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            )
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    final = {"type": "message_delta", "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None}}
    out.append(sse("message_delta", final | {"usage": {"output_tokens": body["usage"]["output_tokens"]}}))
    out.append(sse("message_stop", {"type": "message_stop"}))
    return out


def responses_events(body: dict[str, Any], *, pieces: int = 3) -> list[bytes]:
    """The events the Responses API streams for the Response ``body``: created, each output item added (a
    function call with empty arguments), its text / refusal / reasoning summary / arguments in ``pieces``
    deltas, done; then ``response.completed`` (``response.incomplete`` for an incomplete one) with ``body``."""
    seq = iter(range(10_000))

    def event(kind: str, **fields: Any) -> bytes:
        return sse(kind, {"type": kind, "sequence_number": next(seq), **fields})

    progress = dict(body) | {"status": "in_progress", "output": [], "usage": None}
    out = [event("response.created", response=progress)]
    for index, item in enumerate(body["output"]):
        at = {"output_index": index, "item_id": item.get("id", "")}
        if item["type"] == "function_call":
            out.append(event("response.output_item.added", output_index=index, item=item | {"arguments": ""}))
            for piece in _cut(item["arguments"], pieces):
                out.append(event("response.function_call_arguments.delta", **at, delta=piece))
        elif item["type"] == "message":
            out.append(event("response.output_item.added", output_index=index, item=item | {"content": []}))
            for c, part in enumerate(item["content"]):
                kind, field = (
                    ("output_text", "text") if part["type"] == "output_text" else ("refusal", "refusal")
                )
                for piece in _cut(part[field], pieces):
                    out.append(event(f"response.{kind}.delta", **at, content_index=c, delta=piece))
        elif item["type"] == "reasoning":
            out.append(event("response.output_item.added", output_index=index, item=item | {"summary": []}))
            for s, part in enumerate(item.get("summary") or ()):
                for piece in _cut(part["text"], pieces):
                    out.append(
                        event("response.reasoning_summary_text.delta", **at, summary_index=s, delta=piece)
                    )
        else:
            out.append(event("response.output_item.added", output_index=index, item=item))
        out.append(event("response.output_item.done", output_index=index, item=item))
    final = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
    out.append(event(final, response=body))
    return out


def _cut(text: str, pieces: int) -> list[str]:
    """``text`` in about ``pieces`` consecutive pieces (none for empty text)."""
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


def response_body(
    output: list[dict[str, Any]] | None = None, *, model: str = "m", **extra: Any
) -> dict[str, Any]:
    """A Responses ``Response`` body as the API sends it (``error`` null, as every real one); by default one
    message saying "ok"."""
    items = output if output is not None else [output_message("ok")]
    body = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1_700_000_000,
        "model": model,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "metadata": {},
        "output": items,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 2,
            "total_tokens": 12,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    return body | extra


def output_message(text: str, *, refusal: bool = False) -> dict[str, Any]:
    """A Responses ``message`` output item with one ``output_text`` (or ``refusal``) part."""
    part = (
        {"type": "refusal", "refusal": text}
        if refusal
        else {"type": "output_text", "text": text, "annotations": []}
    )
    return {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [part]}


# --- the official SDKs, pointed at the recorder (the acceptance tests) ---------------------------------


@pytest.fixture
def openai_sdk(recorder: Recorder) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=f"{recorder.url}/v1", api_key="test", max_retries=0)
    yield client
    client.close()


@pytest.fixture
def anthropic_sdk(recorder: Recorder) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(base_url=recorder.url, api_key="test", max_retries=0)
    yield client
    client.close()
