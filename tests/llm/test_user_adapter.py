"""A model client of your own over an official SDK needs only tractkv's public names (issue 31: a 7-line
adapter over the ``openai`` SDK had to import a private renderer): the renderers of each API and
``LLMResponse.from_provider`` are exported from ``tractkv.llm``. Each adapter below commits what tractkv's own
client commits for the same reply, and this module imports nothing but public names (checked on its source)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any

import anthropic
import openai
from google import genai

from tractkv import Tract
from tractkv.llm import (
    AnthropicClient,
    GeminiClient,
    LLMResponse,
    OpenAIClient,
    anthropic_params,
    gemini_params,
    openai_params,
    responses_params,
)

from .conftest import Recorder, anthropic_message, openai_completion, response_body


class MyResponses:
    """The issue's adapter, over ``client.responses``."""

    def __init__(self, client: openai.OpenAI, model: str) -> None:
        self.client, self.model = client, model

    def chat(self, messages: Any, tools: Any = None, **params: Any) -> LLMResponse:
        reply = self.client.responses.create(
            model=self.model, **responses_params(messages, tools or ()), **params
        )
        return LLMResponse.from_provider(reply)


class MyChat(MyResponses):
    def chat(self, messages: Any, tools: Any = None, **params: Any) -> LLMResponse:
        body = openai_params(messages, tools or ())
        return LLMResponse.from_provider(
            self.client.chat.completions.create(model=self.model, **body, **params)
        )


class MyAnthropic:
    def __init__(self, client: anthropic.Anthropic, model: str) -> None:
        self.client, self.model = client, model

    def chat(self, messages: Any, tools: Any = None, **params: Any) -> LLMResponse:
        body = anthropic_params(messages, tools or ())
        reply = self.client.messages.create(model=self.model, max_tokens=1024, **body, **params)
        return LLMResponse.from_provider(reply)


class MyGemini:
    def __init__(self, client: genai.Client, model: str) -> None:
        self.client, self.model = client, model

    def chat(self, messages: Any, tools: Any = None, **params: Any) -> LLMResponse:
        body = gemini_params(messages, tools or ())
        contents = body.pop("contents")
        reply = self.client.models.generate_content(
            model=self.model, contents=contents, config={**body, **params}
        )
        return LLMResponse.from_provider(reply)


def _conversation() -> Tract:
    t = Tract.open(clock=iter(range(1_700_000_000_000_000, 1_800_000_000_000_000, 1000)).__next__)
    t.system("Be brief.")
    t.user("Weather in Oslo?")
    return t


def test_each_adapter_commits_what_the_client_commits(recorder: Recorder) -> None:
    oa = openai.OpenAI(base_url=f"{recorder.url}/v1", api_key="k", max_retries=0)
    an = anthropic.Anthropic(base_url=recorder.url, api_key="k", max_retries=0)
    gm = genai.Client(api_key="k", http_options={"base_url": recorder.url})
    signed = {"text": "ok", "thoughtSignature": "c2lnbmVk"}
    gemini_reply = {"candidates": [{"content": {"role": "model", "parts": [signed]}, "finishReason": "STOP"}]}
    cases = [
        (MyResponses(oa, "m"), OpenAIClient("m", oa), response_body(model="m")),
        (MyChat(oa, "m"), OpenAIClient("m", oa, api="chat"), openai_completion("ok")),
        (MyAnthropic(an, "m"), AnthropicClient("m", an), anthropic_message()),
        (MyGemini(gm, "m"), GeminiClient("m", gm), gemini_reply | {"modelVersion": "m", "responseId": "r1"}),
    ]
    for adapter, client, body in cases:
        recorder.reply(body)
        recorder.reply(body)
        theirs = _conversation().generate(adapter)
        ours = _conversation().generate(client)
        assert theirs.commit_id == ours.commit_id
        assert theirs.usage == ours.usage
        assert recorder.bodies[-1] == recorder.bodies[-2]  # the same request went out
    oa.close()
    an.close()
    gm.close()


def test_the_adapters_use_only_public_names() -> None:
    tree = ast.parse(Path(__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tractkv"):
            module = importlib.import_module(node.module or "")
            assert not any(part.startswith("_") for part in (node.module or "").split("."))
            for alias in node.names:
                assert alias.name in module.__all__, f"{node.module}.{alias.name} is not public"
            assert node.module in ("tractkv", "tractkv.llm")  # the package faces, not the engine
