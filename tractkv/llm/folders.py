"""Stream folders: one per API, each turns the SDK's stream events into :class:`StreamDelta` values and, once
the stream has ended, into the whole reply (see :mod:`tractkv.llm.streaming`).

- Chat Completions (:class:`ChatChunkFolder`): ``chat.completion.chunk`` objects folded into a
  ``chat.completion`` (every choice, content, refusal, tool calls with their arguments joined per call index,
  other message fields, logprobs and the last chunk's usage). Complete when every choice has its finish
  reason.
- Responses (:class:`ResponsesFolder`): the reply is the ``Response`` of the ``response.completed`` (or
  ``response.incomplete``) event, as the SDK typed it; ``response.failed`` and ``error`` events are
  :class:`~tractkv.errors.LLMError`.
- Gemini (:class:`GeminiFolder`): the chunks' parts joined into one ``GenerateContentResponse`` (the SDK
  assembles none); complete once the candidate has a ``finish_reason``.
- Anthropic (:class:`AnthropicFolder`): the reply is the message the SDK's ``MessageStream`` assembles
  (``current_message_snapshot``), each tool block's input the JSON its ``input_json_delta`` events carried
  (older SDKs leave a server tool's input empty); complete once ``message_stop`` (or a stop reason) arrived.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tractkv.errors import LLMError, MalformedResponse

from .protocol import LLMResponse
from .streaming import StreamDelta


def as_dict(value: object) -> dict[str, Any]:
    """An SDK object as the JSON the API sent: ``to_dict()`` (the fields the API set, by their wire names)
    where the SDK has it, else pydantic's ``model_dump`` (None values left out); a mapping as it is."""
    if isinstance(value, Mapping):
        return dict(value)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        try:
            out = to_dict(mode="json", warnings=False)
        except TypeError:  # an SDK whose to_dict takes no such arguments
            out = to_dict()
    elif callable(getattr(value, "model_dump", None)):
        out = value.model_dump(mode="json", exclude_none=True)  # type: ignore[attr-defined]
    else:
        raise MalformedResponse(f"the SDK returned {type(value).__name__}, not a reply object")
    if not isinstance(out, dict):
        raise MalformedResponse(f"the SDK's {type(value).__name__} is not an object")
    return out


# the Chat fields whose strings stream in pieces (dotted paths from the message); any other string keeps
# the value that arrived first (a signature or an id repeated by a later delta is not doubled)
CHAT_JOINED = frozenset(
    {"content", "refusal", "reasoning_content", "reasoning", "audio.data", "audio.transcript"}
)


def merge(
    into: dict[str, Any], delta: Mapping[str, Any], joined: frozenset[str] | None = None, _at: str = ""
) -> None:
    """Fold a delta object into what arrived before: strings joined, lists extended, objects merged, other
    values replaced; None never overwrites a value. With ``joined`` (dotted paths), only the strings at those
    paths are joined; another string keeps the first value that arrived."""
    for key, value in delta.items():
        old = into.get(key)
        path = f"{_at}{key}"
        if value is None:
            into.setdefault(key, None)
        elif isinstance(value, str) and isinstance(old, str):
            if joined is None or path in joined:
                into[key] = old + value
        elif isinstance(value, list) and isinstance(old, list):
            old.extend(value)
        elif isinstance(value, Mapping) and isinstance(old, dict):
            merge(old, value, joined, f"{path}.")
        else:
            into[key] = json.loads(json.dumps(value))  # a copy: later deltas extend ours, not the event's


def _reported(body: Mapping[str, Any]) -> LLMError:
    error = body.get("error", body)
    message = error.get("message") if isinstance(error, Mapping) else error
    kind = (error.get("code") or error.get("type")) if isinstance(error, Mapping) else None
    return LLMError(f"the provider reported an error mid-stream ({kind or 'error'}): {message}")


class ChatChunkFolder:
    """``chat.completion.chunk`` objects folded into a ``chat.completion`` (see the module doc)."""

    def __init__(self) -> None:
        self._body: dict[str, Any] = {}
        self._choices: dict[int, dict[str, Any]] = {}
        self._calls: dict[tuple[int, int], dict[str, Any]] = {}
        self._positions: dict[tuple[int, int], int] = {}  # a call's place in its message's tool_calls
        self.ignored: list[tuple[str, str]] = []

    def add(self, event: object) -> list[StreamDelta]:
        chunk = as_dict(event)
        if chunk.get("error") is not None:
            raise _reported(chunk)
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
                    merge(choice, {key: value}, frozenset())
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
            merge(message, {key: value}, CHAT_JOINED)
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
                    merge(call, {field: value}, frozenset())
            for field, value in function.items():
                if field == "name" and value and not call["function"].get("name"):
                    call["function"]["name"] = value
                elif field != "name":
                    merge(call["function"], {field: value}, frozenset({"arguments"}))
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

    def finish(self, source: object) -> LLMResponse:
        if not self._choices:
            raise LLMError("the stream ended before any reply arrived")
        if any(c.get("finish_reason") is None for c in self._choices.values()):
            raise LLMError("the stream ended before the reply was complete (a choice has no finish reason)")
        return LLMResponse.from_openai(self.body())


RESPONSES_DELTAS = {
    "response.output_text.delta": "text",
    "response.refusal.delta": "refusal",
    "response.reasoning_summary_text.delta": "thinking",
    "response.reasoning_text.delta": "thinking",
}


class ResponsesFolder:
    """Responses stream events: deltas from the text, refusal, reasoning and function-call argument events;
    the reply from the ``response.completed`` / ``response.incomplete`` event (see the module doc)."""

    def __init__(self) -> None:
        self._final: dict[str, Any] | None = None
        self._calls: dict[int, int] = {}  # output index of a function_call -> its position among the calls
        self.ignored: list[tuple[str, str]] = []

    def add(self, event: object) -> list[StreamDelta]:
        body = as_dict(event)
        kind = body.get("type")
        index = body.get("output_index")
        index = index if isinstance(index, int) else 0
        if kind in RESPONSES_DELTAS:
            text = body.get("delta")
            return [StreamDelta(type=RESPONSES_DELTAS[kind], text=text, index=index)] if text else []
        if kind == "response.output_item.added":
            item = body.get("item")
            if isinstance(item, Mapping) and item.get("type") == "function_call":
                self._calls[index] = len(self._calls)
                return [
                    StreamDelta(
                        type="tool_call",
                        text=str(item.get("arguments") or ""),
                        index=self._calls[index],
                        id=item.get("call_id"),
                        name=item.get("name"),
                    )
                ]
        elif kind == "response.function_call_arguments.delta" and index in self._calls:
            text = body.get("delta")
            return [StreamDelta(type="tool_call", text=text, index=self._calls[index])] if text else []
        elif kind in ("response.completed", "response.incomplete"):
            response = body.get("response")
            if not isinstance(response, Mapping):
                raise MalformedResponse(f"a {kind} event without its response")
            self._final = dict(response)
        elif kind == "response.failed":
            response = body.get("response")
            error = response.get("error") if isinstance(response, Mapping) else None
            raise LLMError(f"the response failed: {error!r}")
        elif kind == "error":
            raise _reported(body)
        elif not (isinstance(kind, str) and kind.startswith("response.")):
            self.ignored.append((str(kind), json.dumps(body)))
        return []

    def finish(self, source: object) -> LLMResponse:
        if self._final is None:
            raise LLMError("the stream ended before the response was complete (no response.completed)")
        return LLMResponse.from_responses(self._final)


ANTHROPIC_EVENTS = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    }
)
TOOL_INPUT_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})  # input streamed as JSON
ANTHROPIC_DERIVED = frozenset({"text", "thinking", "signature", "input_json", "citation", "compaction"})
"""The events the SDK's MessageStream derives from the raw ones (each follows the raw event it repeats)."""


class AnthropicFolder:
    """Anthropic Messages events, as the SDK's ``MessageStream`` yields them (see the module doc)."""

    def __init__(self) -> None:
        self._started = False
        self._stopped = False
        self._calls: dict[int, int] = {}  # block index -> its position among the tool calls
        self._json: dict[int, str] = {}  # block index -> the input JSON its deltas carried
        self.ignored: list[tuple[str, str]] = []

    def add(self, event: object) -> list[StreamDelta]:
        body = as_dict(event)
        kind = body.get("type")
        if kind == "error":
            raise _reported(body)
        if kind not in ANTHROPIC_EVENTS:
            if kind not in ANTHROPIC_DERIVED and kind != "ping":
                self.ignored.append((str(kind), json.dumps(body)))
            return []
        if kind == "message_start":
            self._started = True
        elif kind == "message_stop":
            self._stopped = True
        elif kind == "message_delta":
            delta = body.get("delta")
            self._stopped = self._stopped or bool(isinstance(delta, Mapping) and delta.get("stop_reason"))
        elif kind == "content_block_start":
            return self._start(body)
        elif kind == "content_block_delta":
            return self._delta(body)
        return []

    def _start(self, body: Mapping[str, Any]) -> list[StreamDelta]:
        index = body.get("index")
        block = body.get("content_block")
        if not isinstance(index, int) or not isinstance(block, Mapping):
            raise MalformedResponse("content_block_start without an index and a content block")
        if block.get("type") == "tool_use":
            self._calls[index] = len(self._calls)
            return [
                StreamDelta(
                    type="tool_call", index=self._calls[index], id=block.get("id"), name=block.get("name")
                )
            ]
        text = block.get("text") or block.get("thinking")
        if block.get("type") in ("text", "thinking") and isinstance(text, str) and text:
            return [StreamDelta(type=str(block["type"]), text=text, index=index)]
        return []

    def _delta(self, body: Mapping[str, Any]) -> list[StreamDelta]:
        index = body.get("index")
        delta = body.get("delta")
        if not isinstance(index, int) or not isinstance(delta, Mapping):
            raise MalformedResponse("content_block_delta without an index and a delta")
        kind = delta.get("type")
        if kind == "input_json_delta":
            piece = str(delta.get("partial_json") or "")
            self._json[index] = self._json.get(index, "") + piece
            if index in self._calls and piece:
                return [StreamDelta(type="tool_call", text=piece, index=self._calls[index])]
            return []
        for field in ("text", "thinking"):
            if kind == f"{field}_delta" and isinstance(delta.get(field), str) and delta[field]:
                return [StreamDelta(type=field, text=delta[field], index=index)]
        return []

    def finish(self, source: object) -> LLMResponse:
        if not self._started:
            raise LLMError("the stream ended before any reply arrived")
        if not self._stopped:
            raise LLMError("the stream ended before the reply was complete (no message_stop, no stop reason)")
        snapshot = getattr(source, "current_message_snapshot", None)
        if snapshot is None:
            raise MalformedResponse("the SDK's stream assembled no message")
        message = as_dict(snapshot)
        blocks = message.get("content")
        for index, text in self._json.items():
            block = blocks[index] if isinstance(blocks, list) and index < len(blocks) else None
            if isinstance(block, dict) and block.get("type") in TOOL_INPUT_BLOCKS and text:
                try:
                    block["input"] = json.loads(text)
                except ValueError:
                    raise MalformedResponse(
                        f"block {index}'s streamed input is not JSON: {text[:200]!r}"
                    ) from None
        return LLMResponse.from_anthropic(message)


_TEXT_FIELDS = frozenset({"text", "thought", "thought_signature"})


class GeminiFolder:
    """``generate_content_stream`` chunks (``GenerateContentResponse`` objects) joined into the response the
    API gives without streaming: the first candidate's parts in order, a text part run on into the one before
    it when both are text of one kind (thought or not) and at most one carries a ``thought_signature`` (kept
    on the joined part), every other part (function calls, whole in one chunk) as it came; the candidate's
    other fields, ``usage_metadata``, ``model_version`` and ``response_id`` as the last chunk gave them.
    Complete once the candidate has a ``finish_reason``."""

    def __init__(self) -> None:
        self._body: dict[str, Any] = {}
        self._candidate: dict[str, Any] = {}
        self._role = "model"
        self._parts: list[dict[str, Any]] = []
        self._calls = 0
        self.ignored: list[tuple[str, str]] = []

    def add(self, event: object) -> list[StreamDelta]:
        chunk = event if isinstance(event, Mapping) else sdk_dump(event)
        self._body.update({k: v for k, v in chunk.items() if k not in ("candidates", "sdk_http_response")})
        candidates = chunk.get("candidates") or []
        if not isinstance(candidates, list) or not candidates:
            return []
        candidate = candidates[0]
        if not isinstance(candidate, Mapping):
            raise MalformedResponse("a chunk's candidate is not an object")
        self._candidate.update({k: v for k, v in candidate.items() if k != "content"})
        content = candidate.get("content")
        if not isinstance(content, Mapping):
            return []
        self._role = str(content.get("role") or self._role)
        deltas: list[StreamDelta] = []
        for part in content.get("parts") or ():
            if not isinstance(part, Mapping):
                raise MalformedResponse("a chunk's part is not an object")
            deltas.extend(self._part(dict(part)))
        return deltas

    def _part(self, part: dict[str, Any]) -> list[StreamDelta]:
        if isinstance(part.get("text"), str) and set(part) <= _TEXT_FIELDS:
            thought = part.get("thought") is True
            last = self._parts[-1] if self._parts else None
            if (
                last is not None
                and isinstance(last.get("text"), str)
                and set(last) <= _TEXT_FIELDS
                and (last.get("thought") is True) == thought
                and not ("thought_signature" in last and "thought_signature" in part)
            ):
                last["text"] += part["text"]
                if "thought_signature" in part:
                    last["thought_signature"] = part["thought_signature"]
            else:
                self._parts.append(part)
            kind = "thinking" if thought else "text"
            return (
                [StreamDelta(type=kind, text=part["text"], index=len(self._parts) - 1)]
                if part["text"]
                else []
            )
        self._parts.append(part)
        call = part.get("function_call")
        if isinstance(call, Mapping):
            position, self._calls = self._calls, self._calls + 1
            return [
                StreamDelta(
                    type="tool_call",
                    text=json.dumps(call.get("args") or {}, default=str),
                    index=position,
                    id=call.get("id") if isinstance(call.get("id"), str) else None,
                    name=call.get("name") if isinstance(call.get("name"), str) else None,
                )
            ]
        return []

    def body(self) -> dict[str, Any]:
        """The ``GenerateContentResponse`` the chunks make up."""
        candidate = {**self._candidate, "content": {"role": self._role, "parts": self._parts}}
        return {**self._body, "candidates": [candidate]}

    def finish(self, source: object) -> LLMResponse:
        if not self._candidate and not self._parts:
            if self._body.get("prompt_feedback"):  # a blocked prompt: the reader says why
                return LLMResponse.from_gemini({**self._body, "candidates": []})
            raise LLMError("the stream ended before any reply arrived")
        if self._candidate.get("finish_reason") is None:
            raise LLMError("the stream ended before the reply was complete (no finish_reason)")
        return LLMResponse.from_gemini(self.body())


def sdk_dump(value: object) -> dict[str, Any]:
    """A google-genai object as a dict (python mode: a signature stays bytes), None values left out."""
    dump = getattr(value, "model_dump", None)
    if not callable(dump):
        raise MalformedResponse(f"the SDK returned {type(value).__name__}, not a response chunk")
    out = dump(exclude_none=True)
    if not isinstance(out, dict):
        raise MalformedResponse(f"the SDK's {type(value).__name__} is not an object")
    return out
