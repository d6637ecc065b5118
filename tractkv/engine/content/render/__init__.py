"""Provider shapes: the one place that knows how each request dialect spells messages, tools and tool calls.

One module per dialect: ``openai`` (Chat Completions), ``responses`` (OpenAI Responses) and ``anthropic``
(Messages), and ``common``, what their readers share. Requests: compiled
:class:`~tractkv.engine.content.Message` values and stored tool definitions (any shape
:mod:`tractkv.engine.content.toolsets` accepts) rendered for an API (``openai_params``, ``responses_params``,
``anthropic_params``). Replies: an API's assistant message read back as payload parts (text, thinking,
refusal, Responses items) and ``ToolCall`` values (``openai_reply``, ``responses_reply``, ``anthropic_reply``),
its usage normalized (``openai_usage``, ``responses_usage``, ``anthropic_usage``). Code outside the content
package imports these names from :mod:`tractkv.engine.content`.
"""
