"""Model clients: the :class:`LLMClient` protocol and :func:`call_model` (the one way tractkv calls a model),
clients over the official SDKs (:class:`OpenAIClient`, :class:`AnthropicClient`, :class:`GeminiClient`),
:class:`ScriptedLLM` for tests, and what a client of your own needs: the renderers of a context for each API
(:func:`openai_params`, :func:`responses_params`, :func:`anthropic_params`, :func:`gemini_params`) and the reader
of any provider's reply (:meth:`LLMResponse.from_provider`).

The SDK clients need their extra (``openai``, ``anthropic``, ``gemini``) and load on first use: ``import
tractkv`` and ``from tractkv.llm import ScriptedLLM`` load no SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tractkv import _lazy
from tractkv.engine.content import anthropic_params, gemini_params, openai_params, responses_params
from tractkv.errors import LLMError, LLMHTTPError, MalformedResponse, ScriptExhausted

from .protocol import LLMClient, LLMResponse, call_model
from .scripted import ScriptedCall, ScriptedLLM
from .streaming import StreamDelta

if TYPE_CHECKING:
    from .anthropic_client import AnthropicClient
    from .gemini_client import GeminiClient
    from .openai_client import OpenAIClient

# the SDK clients (and their SDKs) load only when asked for
__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    {
        "AnthropicClient": "tractkv.llm.anthropic_client",
        "GeminiClient": "tractkv.llm.gemini_client",
        "OpenAIClient": "tractkv.llm.openai_client",
    },
)


__all__ = [
    "AnthropicClient",
    "GeminiClient",
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
    "anthropic_params",
    "call_model",
    "gemini_params",
    "openai_params",
    "responses_params",
]
