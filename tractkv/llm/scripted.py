"""``ScriptedLLM``: a model that replies from a script, for tests of code that calls a model."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from tractkv.engine.content import Message, reply_provider
from tractkv.errors import InvalidInput, InvalidResponse, MalformedResponse, ScriptExhausted

from .protocol import LLMResponse, as_messages


@attrs.frozen(kw_only=True)
class ScriptedCall:
    """One request a :class:`ScriptedLLM` received.

    Attributes:
        messages: the messages it was sent (immutable :class:`Message` values).
        tools: deep copies of the tool schemas offered (None when none were), so later changes by the caller
            don't show.
        params: a deep copy of the call's other keyword arguments.
    """

    messages: tuple[Message, ...]
    tools: list[dict[str, Any]] | None
    params: dict[str, Any]


class ScriptedLLM:
    """Serves scripted replies in order and records every request in :attr:`calls`.

    Each response is a string (the assistant's text), an OpenAI-shaped assistant message dict
    (``{"role": "assistant", "content": None, "tool_calls": [{"id", "type": "function", "function":
    {"name", "arguments"}}]}``, arguments as a JSON string or a dict; flat ``{"id", "name", "arguments"}``
    calls work too), a whole provider reply (an OpenAI chat completion or an Anthropic message dict, read by
    :meth:`LLMResponse.from_provider`: thinking, refusals and usage included), or an :class:`LLMResponse`. The
    script is checked when it is given, so a typo fails the test at its source. Thread-safe: concurrent calls
    take replies in the order they arrive.

    Replies are served in order, whoever asks: one script shared by an agent loop and the tract's summarizer
    (``compress``, tool-result summarization) would hand the summarizer the loop's next reply. Give summaries
    their own script (``t.configure_llm(agent_llm, summarizer=ScriptedLLM([...]))``, or ``llm=`` to
    ``toolkit.run(t)``). A summary request refuses a reply that calls tools (``MalformedResponse``, nothing committed),
    so the usual mix-up, the summarizer taking the loop's next tool call, is loud.

    >>> from tractkv.engine.content.payload import Message
    >>> llm = ScriptedLLM(["Hello!"])
    >>> llm.chat([Message(role="user", content="hi")]).text
    'Hello!'
    >>> llm.calls[0].messages
    (Message(role='user', content='hi', name=None, tool_calls=(), tool_call_id=None, is_error=False),)

    Raises:
        InvalidInput: (at construction) a response of another type or a malformed message dict; (from
            :meth:`chat`) a message that is not a :class:`Message`, and then nothing is recorded.
        ScriptExhausted: (from :meth:`chat`) every response was served already; the call is still recorded.
    """

    def __init__(
        self, responses: Iterable[str | dict[str, Any] | LLMResponse], *, model: str | None = None
    ) -> None:
        self.model = model
        self._responses = tuple(self._parse(item, index) for index, item in enumerate(responses))
        self._served = 0
        self._lock = threading.Lock()
        self.calls: list[ScriptedCall] = []

    def _parse(self, item: object, index: int) -> LLMResponse:
        if isinstance(item, LLMResponse):
            return item
        if isinstance(item, str):
            return LLMResponse(text=item, model=self.model, finish_reason="stop", raw=item)
        if isinstance(item, dict) and reply_provider(item) is not None:
            try:
                return LLMResponse.from_provider(copy.deepcopy(item))
            except InvalidResponse as exc:
                raise InvalidInput(f"scripted response {index}: {exc.reason}") from None
        if isinstance(item, dict):
            if item.get("role", "assistant") != "assistant":
                raise InvalidInput(f"scripted response {index} must be an assistant message")
            try:
                return LLMResponse.from_openai_message(copy.deepcopy(item), model=self.model)
            except MalformedResponse as exc:
                raise InvalidInput(f"scripted response {index}: {exc.reason}") from None
        raise InvalidInput(
            f"scripted response {index} must be a string, an assistant message dict or an LLMResponse, "
            f"not {type(item).__name__}"
        )

    @property
    def responses(self) -> tuple[LLMResponse, ...]:
        """The whole script, parsed."""
        return self._responses

    @property
    def remaining(self) -> int:
        """How many responses are left to serve."""
        return len(self._responses) - self._served

    def __repr__(self) -> str:
        return f"ScriptedLLM(served={self._served}, remaining={self.remaining})"

    def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> LLMResponse:
        """Record the request and return the next scripted response."""
        call = ScriptedCall(
            messages=as_messages(messages),
            tools=[copy.deepcopy(dict(t)) for t in tools] if tools is not None else None,
            params=copy.deepcopy(params),
        )
        with self._lock:
            self.calls.append(call)
            if self._served >= len(self._responses):
                raise ScriptExhausted(self._served)
            response = self._responses[self._served]
            self._served += 1
        return response
