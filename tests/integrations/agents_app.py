"""An Agents SDK agent on a TractkvSession, for the integration tests (run in a fresh interpreter).

``python agents_app.py STORE SESSION_ID BASE_URL TEXT`` runs the agent once on TEXT against the OpenAI-shaped
server at BASE_URL (the tests' recording server on 127.0.0.1) and prints ``{"output", "items"}`` (the
session's item count after the run) as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"  # nothing leaves the machine

from agents import Agent, RunConfig, Runner
from agents.models.openai_provider import OpenAIProvider

from tractkv.integrations.openai_agents import TractkvSession


def run(store: Any, session_id: str, base_url: str, text: str) -> dict[str, Any]:
    provider = OpenAIProvider(api_key="test", base_url=base_url, use_responses=False)
    config = RunConfig(model_provider=provider, tracing_disabled=True)
    agent = Agent(name="helper", instructions="Be brief.", model="gpt-test")
    session = TractkvSession(session_id, store)
    try:
        result = Runner.run_sync(agent, text, session=session, run_config=config)
        items = asyncio.run(session.get_items())
    finally:
        session.close()
    return {"output": result.final_output, "items": len(items)}


if __name__ == "__main__":
    store, session_id, base_url, text = sys.argv[1:]
    print(json.dumps(run(store, session_id, base_url, text)))
