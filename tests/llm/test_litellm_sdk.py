"""A Claude reply through LiteLLM, recorded and sent back through the official Anthropic SDK (loopback only).

``litellm.completion`` calls the loopback recorder as Anthropic (the recorder answers with a Messages body holding
thinking, redacted thinking, text and a tool_use), LiteLLM turns it into its OpenAI-shaped ``ModelResponse``
(``thinking_blocks``, ``reasoning_content``), ``record_response`` commits it, and the compiled context goes back
through ``anthropic.Anthropic().messages.create`` to the recorder: the thinking blocks arrive byte for byte,
first in the turn, as Anthropic requires when thinking is on. LiteLLM is a test dependency, not in the SDK floor
environment (.ci/run), where this file is skipped.
"""

from __future__ import annotations

import json
import os

import anthropic
import pytest

from tractkv import Tract

from .conftest import Recorder, anthropic_message
from .test_record_response_sdk import REDACTED, TEXT, THINKING, TOOL_USE  # the blocks Claude sent

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the price list: loopback only
litellm = pytest.importorskip("litellm")
# litellm's own TypedDicts make pydantic warn (ReadOnly items) when it builds their schemas: not ours
pytestmark = pytest.mark.filterwarnings("ignore:Item.* the `ReadOnly` qualifier:UserWarning")

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def test_a_litellm_claude_reply_with_thinking_goes_back_to_anthropic_byte_for_byte(
    recorder: Recorder, anthropic_sdk: anthropic.Anthropic
) -> None:
    reply = anthropic_message([THINKING, REDACTED, TEXT, TOOL_USE], model="claude-sonnet-4-5")
    recorder.reply(reply)
    recorder.reply(anthropic_message([{"type": "text", "text": "18°C and sunny."}]))
    t = Tract.open()
    t.system("Answer briefly.")
    t.commit({"type": "dialogue", "role": "user", "text": "Weather in Paris?"}, tools=[WEATHER])

    response = litellm.completion(
        model="anthropic/claude-sonnet-4-5",
        messages=t.compile().to_openai(),
        api_base=recorder.url,
        api_key="test",
        thinking={"type": "enabled", "budget_tokens": 1024},
        max_tokens=2048,
    )
    assert type(response).__name__ == "ModelResponse"
    info = t.record_response(response)
    t.tool_result("toolu_01", "get_weather", "18°C, sunny")
    params = t.compile().to_anthropic_params()
    anthropic_sdk.messages.create(
        model="claude-test",
        max_tokens=2048,
        thinking={"type": "enabled", "budget_tokens": 1024},
        **params,
    )

    assert info.content["parts"] == [THINKING, REDACTED, TEXT]
    sent = recorder.requests[1].body["messages"][1]
    assert sent == {"role": "assistant", "content": [THINKING, REDACTED, TEXT, TOOL_USE]}
    raw = json.dumps(recorder.requests[1].body)  # the blocks' bytes as Anthropic sent them
    for block in (THINKING, REDACTED):
        assert json.dumps(block) in raw
    assert recorder.requests[1].body["messages"][2]["content"][0]["tool_use_id"] == "toolu_01"


def test_a_litellm_reply_from_its_own_types_reads_as_its_dump() -> None:
    from litellm.types.utils import ModelResponse

    message = {
        "role": "assistant",
        "content": "Let me check.",
        "thinking_blocks": [THINKING, REDACTED],
        "reasoning_content": THINKING["thinking"],
    }
    response = ModelResponse(
        model="claude-sonnet-4-5",
        choices=[{"finish_reason": "stop", "index": 0, "message": message}],
        usage={"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    )
    a, b = Tract.open(), Tract.open()
    for t in (a, b):
        t.user("Weather in Paris?")
    from_object = a.record_response(response)
    from_dump = b.record_response(response.model_dump())
    assert from_object.content == from_dump.content
    assert from_object.content["parts"] == [THINKING, REDACTED, TEXT]
