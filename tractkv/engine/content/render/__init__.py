"""Provider shapes: the one place that knows how each request dialect spells messages, tools and tool calls.

One module per dialect: ``openai`` (Chat Completions), ``responses`` (OpenAI Responses), ``anthropic``
(Messages) and ``gemini`` (Gemini ``generateContent``), and ``common``, what their readers share. Requests:
compiled :class:`~tractkv.engine.content.Message` values and stored tool definitions (any shape
:mod:`tractkv.engine.content.toolsets` accepts) rendered for an API (``openai_params``, ``responses_params``,
``anthropic_params``, ``gemini_params``). Replies: an API's assistant message read back as payload parts
(text, thinking, refusal, Responses items, Gemini thoughts and calls) and ``ToolCall`` values
(``openai_reply``, ``responses_reply``, ``anthropic_reply``, ``gemini_reply``), its usage normalized
(``openai_usage``, ``responses_usage``, ``anthropic_usage``, ``gemini_usage``). Code outside the content
package imports these names from :mod:`tractkv.engine.content`.
"""
