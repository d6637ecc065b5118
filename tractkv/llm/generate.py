"""Generation on a session: compile, call the model through :func:`~tractkv.llm.protocol.call_model`, commit
the typed reply. The one place where a session meets a model (the facade's generate / chat / summarize).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tractkv.engine.content import Message, content_blob
from tractkv.engine.records import CommitInfo
from tractkv.engine.session import Session

from .protocol import LLMClient, call_model


def generate(
    session: Session, model: LLMClient, tools: list[dict[str, Any]] | None, params: Mapping[str, Any]
) -> CommitInfo:
    """Compile HEAD, call ``model`` with the context's tools (or ``tools``), and commit its reply with the tool
    set it was offered and the parameters (plus the answering model's name) as ``generation_config``.

    The model is called before anything is staged: a model error raises and commits nothing.
    """
    tip = session.writable("generate")  # the reply commits on the tip the model saw, or not at all
    ctx = session.compile()
    offered = list(tools) if tools is not None else list(ctx.tools)
    response = call_model(model, ctx.messages, offered or None, params)
    config = {k: v for k, v in params.items() if v is not None}
    if response.model:
        config["model"] = response.model
    return session.commit_content(
        content_blob(response.assistant_payload()),
        operation="append",
        generation_config=config,
        tools=offered if tools is not None else None,
        toolset=None if tools is not None else session.head_state().tools,
        action="generate",
        tip=tip,
    )


def ask(model: LLMClient, instructions: str, text: str) -> str:
    """One instruction-following call (summaries): a system message, a user message, the reply's text."""
    messages = [Message(role="system", content=instructions), Message(role="user", content=text)]
    return call_model(model, messages, None, {}).text
