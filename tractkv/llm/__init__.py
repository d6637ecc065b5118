"""Model clients: the :class:`LLMClient` protocol and :func:`call_model` (the one way tractkv calls a model),
HTTP clients for OpenAI-compatible and Anthropic APIs, and :class:`ScriptedLLM` for tests.

The HTTP clients need the ``llm`` extra (httpx) and load on first use: ``import tractkv`` and ``from
tractkv.llm import ScriptedLLM`` work without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tractkv import _lazy
from tractkv.errors import LLMError, LLMHTTPError, MalformedResponse, ScriptExhausted

from .protocol import LLMClient, LLMResponse, call_model
from .scripted import ScriptedCall, ScriptedLLM
from .streaming import StreamDelta

if TYPE_CHECKING:
    from .anthropic_client import AnthropicClient
    from .openai_client import OpenAIClient

# the HTTP clients (and httpx) load only when asked for
__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    {
        "AnthropicClient": "tractkv.llm.anthropic_client",
        "OpenAIClient": "tractkv.llm.openai_client",
    },
)


__all__ = [
    "AnthropicClient",
    "LLMClient",
    "LLMError",
    "LLMHTTPError",
    "LLMResponse",
    "MalformedResponse",
    "OpenAIClient",
    "ScriptExhausted",
    "ScriptedCall",
    "ScriptedLLM",
    "StreamDelta",
    "call_model",
]
