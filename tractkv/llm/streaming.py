"""Streamed replies: server-sent events in, :class:`StreamDelta` values out as they arrive, and at the end
the same :class:`~tractkv.llm.protocol.LLMResponse` the non-streamed call of that reply gives.

Each provider's event stream is folded back into the body the API would have sent without streaming (an
OpenAI ``chat.completion``, an Anthropic ``message``), and that body is read by
:meth:`LLMResponse.from_openai` / :meth:`LLMResponse.from_anthropic`, the one reader of replies: so a
streamed reply commits exactly what the non-streamed one does, and nothing the stream carries is dropped
(fields a reader does not know are folded in as they come: strings joined, lists extended, objects merged).

Pings, comments and events of kinds not known here are ignored wherever they come (Anthropic: "pings may
come at any time, and unknown event types should be handled gracefully"); an unknown event's name and data
are kept on the stream's ``ignored_events`` (not committed: no reader knows what they mean). The
``text/event-stream`` framing is read as the spec says (``\r\n`` or ``\n`` line ends, multi-line data
joined, an event with no data line not dispatched), and chunks a server runs together without their blank
lines are still read one by one.

A stream that ends before the provider said it is complete (no ``[DONE]`` nor a finish reason; no
``message_stop`` nor a stop reason), an ``error`` event, or a connection that breaks off raises
:class:`~tractkv.errors.LLMError`: there is no reply, and nothing is committed from it.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, Protocol

import attrs

from tractkv.errors import LLMError, MalformedResponse

from .protocol import LLMResponse

DELTA_TYPES = ("text", "thinking", "refusal", "tool_call")


@attrs.frozen(kw_only=True)
class StreamDelta:
    """One piece of a reply, as it arrives.

    Attributes:
        type: ``text``, ``thinking``, ``refusal`` or ``tool_call``.
        text: the new text (for ``tool_call``: the next fragment of the call's arguments, JSON text).
        index: for ``tool_call``, which call of the reply (0, 1, ...); for the others, the OpenAI choice or
            the Anthropic content block the text belongs to.
        id, name: for ``tool_call``, the call's id and tool name (on the call's first delta; None after).
    """

    type: str
    text: str = ""
    index: int = 0
    id: str | None = None
    name: str | None = None


class StreamReader(Protocol):
    """Folds one provider's events into deltas, then into the whole reply."""

    def add(self, event: str, data: str) -> list[StreamDelta]: ...

    def finish(self) -> LLMResponse: ...


class SSEDecoder:
    """Server-sent events from lines (the ``text/event-stream`` format): :meth:`feed` one line at a time
    (its ``\n``, ``\r\n`` or ``\r`` ending stripped); a blank line ends an event, returned as ``(event name,
    data)``, the data lines joined with ``\n``. As the spec says: ``:`` lines are comments, an event with no
    ``data:`` line is not dispatched, fields other than ``event`` and ``data`` are ignored."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> tuple[str, str] | None:
        line = line.rstrip("\r\n")
        if not line:
            if not self._data:  # no data line (an ``event:`` alone too): not dispatched, per the spec
                self._event = ""
                return None
            event, data = self._event, "\n".join(self._data)
            self._event, self._data = "", []
            return event, data
        if line.startswith(":"):  # a comment (keep-alive)
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        return None

    def end(self) -> tuple[str, str] | None:
        """The last event when the stream ends without its blank line."""
        return self.feed("")


def merge(into: dict[str, Any], delta: Mapping[str, Any]) -> None:
    """Fold a delta object into what arrived before: strings joined, lists extended, objects merged, other
    values replaced; None never overwrites a value."""
    for key, value in delta.items():
        old = into.get(key)
        if value is None:
            into.setdefault(key, None)
        elif isinstance(value, str) and isinstance(old, str):
            into[key] = old + value
        elif isinstance(value, list) and isinstance(old, list):
            old.extend(value)
        elif isinstance(value, Mapping) and isinstance(old, dict):
            merge(old, value)
        else:
            into[key] = json.loads(json.dumps(value))  # a copy: later deltas extend ours, not the event's


def _decoded(data: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError:
        raise MalformedResponse(f"a stream event is not JSON: {data[:200]!r}") from None
    if not isinstance(value, dict):
        raise MalformedResponse(f"a stream event is JSON {type(value).__name__}, not an object")
    return value


def _stream_error(body: Mapping[str, Any]) -> LLMError:
    error = body.get("error")
    message = error.get("message") if isinstance(error, Mapping) else error
    kind = error.get("type") if isinstance(error, Mapping) else None
    return LLMError(f"the provider reported an error mid-stream ({kind or 'error'}): {message}")


class OpenAIStreamReader:
    """``chat.completion.chunk`` events folded into a ``chat.completion``: every choice, content, refusal,
    tool calls (arguments joined per call index), other message fields, logprobs and the final usage."""

    def __init__(self) -> None:
        self._body: dict[str, Any] = {}
        self._choices: dict[int, dict[str, Any]] = {}
        self._calls: dict[tuple[int, int], dict[str, Any]] = {}
        self._positions: dict[tuple[int, int], int] = {}  # a call's place in its message's tool_calls
        self._done = False
        self.ignored: list[tuple[str, str]] = []

    def add(self, event: str, data: str) -> list[StreamDelta]:
        if data.strip() == "[DONE]":
            self._done = True
            return []
        chunk = _decoded(data)
        if "error" in chunk:
            raise _stream_error(chunk)
        for key, value in chunk.items():
            if key == "usage" and value is None:
                continue
            if key not in ("choices", "object"):
                self._body[key] = value
        deltas: list[StreamDelta] = []
        for raw in chunk.get("choices") or ():
            if not isinstance(raw, Mapping) or not isinstance(raw.get("index", 0), int):
                raise MalformedResponse("a chunk's choice must be an object with an integer index")
            index = raw.get("index", 0)
            choice = self._choices.setdefault(index, {"index": index, "message": {}, "finish_reason": None})
            for key, value in raw.items():
                if key == "delta" and isinstance(value, Mapping):
                    deltas.extend(self._delta(index, choice["message"], value))
                elif key not in ("index", "delta"):
                    merge(choice, {key: value})
        return deltas

    def _delta(self, index: int, message: dict[str, Any], delta: Mapping[str, Any]) -> list[StreamDelta]:
        out: list[StreamDelta] = []
        for key, value in delta.items():
            if key == "tool_calls" and isinstance(value, list):
                out.extend(self._tool_calls(index, message, value))
                continue
            if key == "role":
                message[key] = value
                continue
            merge(message, {key: value})
            if key in ("content", "refusal") and isinstance(value, str) and value:
                out.append(
                    StreamDelta(type="text" if key == "content" else "refusal", text=value, index=index)
                )
        return out

    def _tool_calls(self, index: int, message: dict[str, Any], calls: list[Any]) -> list[StreamDelta]:
        out = []
        for piece in calls:
            if not isinstance(piece, Mapping) or not isinstance(piece.get("index"), int):
                raise MalformedResponse("a tool call delta needs an integer index")
            key = (index, piece["index"])
            call = self._calls.get(key)
            raw_function = piece.get("function")
            function: Mapping[str, Any] = raw_function if isinstance(raw_function, Mapping) else {}
            first = call is None
            if call is None:
                call = self._calls[key] = {"function": {"arguments": ""}}
                calls_so_far = message.setdefault("tool_calls", [])
                self._positions[key] = len(calls_so_far)
                calls_so_far.append(call)
            for field, value in piece.items():
                if field in ("id", "type") and value and not call.get(field):
                    call[field] = value
                elif field not in ("index", "function", "id", "type"):
                    merge(call, {field: value})
            for field, value in function.items():
                if field == "name" and value and not call["function"].get("name"):
                    call["function"]["name"] = value
                elif field != "name":
                    merge(call["function"], {field: value})
            fragment = function.get("arguments")
            if first or fragment:
                out.append(
                    StreamDelta(
                        type="tool_call",
                        text=fragment if isinstance(fragment, str) else "",
                        index=self._positions[key],
                        id=call.get("id") if first else None,
                        name=call["function"].get("name") if first else None,
                    )
                )
        return out

    def body(self) -> dict[str, Any]:
        """The ``chat.completion`` the chunks make up."""
        choices = [self._choices[i] for i in sorted(self._choices)]
        for choice in choices:
            choice["message"].setdefault("role", "assistant")
            choice["message"].setdefault("content", None)
        return {**self._body, "object": "chat.completion", "choices": choices}

    def finish(self) -> LLMResponse:
        if not self._choices:
            raise LLMError("the stream ended before any reply arrived")
        if not self._done and any(c.get("finish_reason") is None for c in self._choices.values()):
            raise LLMError("the stream ended before the reply was complete (no finish reason, no [DONE])")
        return LLMResponse.from_openai(self.body())


TOOL_INPUT_BLOCKS = ("tool_use", "server_tool_use", "mcp_tool_use")  # blocks whose input streams as JSON
ANTHROPIC_EVENTS = (
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
)  # the events read; ``ping`` and kinds not known here are ignored wherever they come (Anthropic's rule)


class AnthropicStreamReader:
    """Messages API events folded into a ``message``: every content block (text, thinking and its signature,
    tool use with its input JSON, server tool blocks, citations, blocks of kinds not known here), the stop
    reason and the usage (``message_start``'s, updated by ``message_delta``'s)."""

    def __init__(self) -> None:
        self._message: dict[str, Any] | None = None
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, str] = {}
        self._calls: dict[int, int] = {}  # block index -> its position among the tool calls
        self._stopped = False
        self.ignored: list[tuple[str, str]] = []  # events of kinds not known here, as they came

    def add(self, event: str, data: str) -> list[StreamDelta]:
        body = _decoded(data)
        kind = body.get("type", event)
        if kind == "error":
            raise _stream_error(body)
        if kind not in ANTHROPIC_EVENTS:  # at any time, before message_start too, as Anthropic says
            if kind != "ping":  # a ping carries nothing; another kind is kept, not read
                self.ignored.append((event, data))
            return []
        if kind == "message_start":
            if not isinstance(body.get("message"), Mapping):
                raise MalformedResponse("message_start without a message")
            self._message = json.loads(json.dumps(body["message"]))
            return []
        message = self._started(kind)
        if kind == "content_block_start":
            return self._start(body)
        if kind == "content_block_delta":
            return self._delta(body)
        if kind == "content_block_stop":
            self._stop(_block_index(body))
        elif kind == "message_delta":
            if isinstance(body.get("delta"), Mapping):
                message.update(body["delta"])
            if isinstance(body.get("usage"), Mapping):
                usage = message.setdefault("usage", {})
                usage.update({k: v for k, v in body["usage"].items() if v is not None})
        elif kind == "message_stop":
            self._stopped = True
        return []

    def _started(self, kind: str) -> dict[str, Any]:
        if self._message is None:
            raise MalformedResponse(f"a stream event ({kind}) before message_start")
        return self._message

    def _start(self, body: Mapping[str, Any]) -> list[StreamDelta]:
        index = _block_index(body)
        block = body.get("content_block")
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise MalformedResponse("content_block_start without a content block")
        self._blocks[index] = json.loads(json.dumps(block))
        if block["type"] in TOOL_INPUT_BLOCKS:
            self._json[index] = ""
        if block["type"] == "tool_use":
            self._calls[index] = len(self._calls)
            return [
                StreamDelta(
                    type="tool_call", index=self._calls[index], id=block.get("id"), name=block.get("name")
                )
            ]
        text = block.get("text") or block.get("thinking")
        if block["type"] in ("text", "thinking") and isinstance(text, str) and text:
            return [StreamDelta(type=block["type"], text=text, index=index)]
        return []

    def _delta(self, body: Mapping[str, Any]) -> list[StreamDelta]:
        index = _block_index(body)
        block = self._blocks.get(index)
        delta = body.get("delta")
        if block is None or not isinstance(delta, Mapping):
            raise MalformedResponse(f"content_block_delta for block {index}, which did not start")
        kind = delta.get("type")
        if kind == "input_json_delta":
            piece = str(delta.get("partial_json") or "")
            self._json[index] = self._json.get(index, "") + piece
            if index in self._calls:
                return [StreamDelta(type="tool_call", text=piece, index=self._calls[index])]
            return []
        if kind == "citations_delta":
            block.setdefault("citations", []).append(json.loads(json.dumps(delta.get("citation"))))
            return []
        merge(block, {k: v for k, v in delta.items() if k != "type"})  # text, thinking, signature, others
        for field in ("text", "thinking"):
            if isinstance(delta.get(field), str) and delta[field]:
                return [StreamDelta(type=field, text=delta[field], index=index)]
        return []

    def _stop(self, index: int) -> None:
        if index in self._json and index in self._blocks:
            text = self._json.pop(index)
            if text:
                try:
                    self._blocks[index]["input"] = json.loads(text)
                except ValueError:
                    raise MalformedResponse(
                        f"block {index}'s streamed input is not JSON: {text[:200]!r}"
                    ) from None

    def body(self) -> dict[str, Any]:
        """The ``message`` the events make up."""
        for index in list(self._json):
            self._stop(index)
        message = dict(self._message or {})
        message["content"] = [self._blocks[i] for i in sorted(self._blocks)]
        return message

    def finish(self) -> LLMResponse:
        if self._message is None:
            raise LLMError("the stream ended before any reply arrived")
        if not self._stopped and self._message.get("stop_reason") is None:
            raise LLMError("the stream ended before the reply was complete (no message_stop, no stop reason)")
        return LLMResponse.from_anthropic(self.body())


def _block_index(body: Mapping[str, Any]) -> int:
    index = body.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        raise MalformedResponse(f"a {body.get('type')} event needs an integer index")
    return index


def _pieces(data: str) -> list[str]:
    """An event's data, or the events a server ran together: several data lines are one event (joined with
    ``\n``, as one JSON value spread over lines is); only when the whole is not JSON but each line is a JSON
    value (or ``[DONE]``), they are read as one event each (chunks sent without their blank lines)."""
    if "\n" not in data:
        return [data]
    try:
        json.loads(data)
    except ValueError:
        lines = [line for line in data.split("\n") if line.strip()]
        if all(line.strip() == "[DONE]" or _is_json(line) for line in lines):
            return lines
    return [data]


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


class _Folding:
    """What the sync and async streams share: decoded events waiting to be handed out, then the reply."""

    def __init__(self, reader: StreamReader) -> None:
        self._reader = reader
        self._decoder = SSEDecoder()
        self._pending: deque[StreamDelta] = deque()
        self.response: LLMResponse | None = None

    @property
    def ignored_events(self) -> list[tuple[str, str]]:
        """``(event name, data)`` of the events the reader does not know (Anthropic's future event kinds):
        ignored, as the provider says, and kept here; they are not part of the reply nor committed."""
        return list(getattr(self._reader, "ignored", ()))

    def _feed(self, line: str | None) -> None:
        """One line of the stream (None: it ended)."""
        event = self._decoder.feed(line) if line is not None else self._decoder.end()
        if event is not None:
            name, data = event
            for piece in _pieces(data):
                self._pending.extend(self._reader.add(name, piece))
        if line is None:
            self.response = self._reader.finish()


class ChatStream(_Folding):
    """A reply as it streams: iterate for :class:`StreamDelta` values; once the iteration ends,
    :attr:`response` is the whole reply. :meth:`close` (or leaving a ``with`` block) drops the connection."""

    def __init__(self, lines: Iterator[str], reader: StreamReader) -> None:
        super().__init__(reader)
        self._lines = lines

    def __iter__(self) -> ChatStream:
        return self

    def __next__(self) -> StreamDelta:
        while not self._pending:
            if self.response is not None:
                raise StopIteration
            self._feed(next(self._lines, None))
        return self._pending.popleft()

    def close(self) -> None:
        close = getattr(self._lines, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> ChatStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncChatStream(_Folding):
    """:class:`ChatStream` for ``async for``; :meth:`aclose` drops the connection."""

    def __init__(self, lines: AsyncIterator[str], reader: StreamReader) -> None:
        super().__init__(reader)
        self._lines = lines

    def __aiter__(self) -> AsyncChatStream:
        return self

    async def __anext__(self) -> StreamDelta:
        while not self._pending:
            if self.response is not None:
                raise StopAsyncIteration
            self._feed(await anext(self._lines, None))
        return self._pending.popleft()

    async def aclose(self) -> None:
        aclose = getattr(self._lines, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> AsyncChatStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
