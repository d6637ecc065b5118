"""Generation on a session: compile, call the model through :func:`~tractkv.llm.protocol.call_model`, commit
the typed reply; and recording a reply made elsewhere (:func:`record_response`). The one place where a session
meets a model (the facade's generate / chat / summarize / record_response).

A reply is committed the same way on both paths: :meth:`LLMResponse.assistant_payload` as the content, the
normalized usage in the commit's metadata under ``usage`` (so :attr:`CommitInfo.usage` shows it), Anthropic
blocks and OpenAI message fields a message has no place for under ``omitted_blocks``, and the answering model
and its finish reason in ``generation_config`` (``model``, ``finish_reason``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from tractkv.engine.content import Message, content_blob
from tractkv.engine.records import CommitInfo
from tractkv.engine.session import Session
from tractkv.engine.toolsets import tool_schemas
from tractkv.errors import InvalidInput, MalformedResponse, UnansweredToolCalls

from .protocol import LLMClient, LLMResponse, call_model


def generate(
    session: Session, model: LLMClient, tools: list[dict[str, Any]] | None, params: Mapping[str, Any]
) -> CommitInfo:
    """Compile HEAD, call ``model`` with the context's tools (or ``tools``), and commit its reply with the tool
    set it was offered, the parameters (plus the answering model's name and finish reason) as
    ``generation_config`` and its usage in the metadata (see the module doc).

    The model is called before anything is staged: a model error raises and commits nothing; tools that are
    not an accepted shape raise :class:`InvalidInput`, and a context ending with tool calls still waiting
    for their results raises :class:`UnansweredToolCalls`, before the model is called.
    """
    tip = session.writable("generate")  # the reply commits on the tip the model saw, or not at all
    ctx = session.compile()
    if ctx.open_calls:  # a tool run in progress: providers refuse a call left unanswered
        raise UnansweredToolCalls(ctx.open_calls)
    offered = list(tools) if tools is not None else list(ctx.tools)
    if tools is not None:
        tool_schemas(offered)  # refuse a misshapen tool before the model is paid for, not at commit
    response = call_model(model, ctx.messages, offered or None, params)
    config = reply_config(response, {k: v for k, v in params.items() if v is not None})
    return session.commit_content(
        content_blob(response.assistant_payload()),
        operation="append",
        metadata=reply_metadata(response, None),
        generation_config=config,
        tools=offered if tools is not None else None,
        toolset=None if tools is not None else session.head_state().tools,
        action="generate",
        tip=tip,
    )


def record_response(
    session: Session,
    response: object,
    *,
    choice: int = 0,
    message: str | None = None,
    metadata: dict[str, Any] | None = None,
    generation_config: dict[str, Any] | None = None,
) -> CommitInfo:
    """Commit a provider's reply (see :meth:`tractkv.Tract.record_response`): read by
    :meth:`LLMResponse.from_provider`, committed as :func:`generate` commits one.

    Raises:
        InvalidResponse: ``response`` is not a complete chat completion or message (see from_provider).
        InvalidInput: a bad ``choice``; ``metadata`` with its own ``usage`` or ``omitted_blocks`` key when
            the response supplies one; non-dict metadata or generation_config.
        ContentError: the reply has nothing to commit (no text, parts or tool calls).
    """
    for name, value in (("metadata", metadata), ("generation_config", generation_config)):
        if value is not None and not isinstance(value, dict):
            raise InvalidInput(f"{name} must be a dict, not {type(value).__name__}")
    reply = LLMResponse.from_provider(response, choice=choice)
    return session.commit(
        reply.assistant_payload(),
        "append",
        None,
        message,
        None,
        reply_metadata(reply, metadata),
        reply_config(reply, dict(generation_config or {})),
        None,
    )


def reply_metadata(response: LLMResponse, metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    """``metadata`` plus what the reply says beyond its message: ``usage`` and ``omitted_blocks``.

    Raises:
        InvalidInput: ``metadata`` has a key the reply fills.
    """
    out = dict(metadata or {})
    for key, value in (("usage", response.usage), ("omitted_blocks", list(response.omitted_blocks))):
        if value:
            if key in out:
                raise InvalidInput(f"metadata[{key!r}] is taken by the response's own {key}")
            out[key] = copy.deepcopy(value)
    return out or None


def reply_config(response: LLMResponse, config: dict[str, Any]) -> dict[str, Any]:
    """``config`` plus the answering model (``model``, which wins over a requested one) and its
    ``finish_reason``, when the reply names them."""
    if response.model:
        config["model"] = response.model
    if response.finish_reason:
        config["finish_reason"] = response.finish_reason
    return config


def ask(model: LLMClient, instructions: str, text: str) -> str:
    """One instruction-following call (summaries): a system message, a user message, the reply's text.

    Raises:
        MalformedResponse: the reply calls tools. No tool is offered, so no model answers a summary request
            that way: it is a reply meant for another caller (typically a ``ScriptedLLM`` shared by an agent
            loop and the summarizer, serving the loop's next reply here). Nothing is committed from it.
    """
    messages = [Message(role="system", content=instructions), Message(role="user", content=text)]
    reply = call_model(model, messages, None, {})
    if reply.tool_calls:
        names = ", ".join(c.name for c in reply.tool_calls)
        raise MalformedResponse(
            f"a summary request (no tools offered) got a reply calling tools ({names}): a reply meant for "
            "another caller? A model shared by an agent loop and the summarizer serves them in turn; give "
            "summaries their own model: t.configure_llm(llm, summarizer=...)"
        )
    return reply.text
