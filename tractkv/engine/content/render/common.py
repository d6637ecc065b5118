"""What every dialect's reader shares: tool-call argument checks, reply text, JSON-safe values, usage counts."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from tractkv import codec
from tractkv.engine.content.toolsets import EMPTY_PARAMETERS, ToolSpec
from tractkv.errors import MalformedResponse

MAX_ARGUMENT_DEPTH = codec.MAX_DEPTH - 2


"""How deeply a reply's tool-call arguments may nest: what a stored payload can hold around them (the
payload and its ``tool_calls`` list take two of :data:`tractkv.codec.MAX_DEPTH`'s levels)."""


_INT_RANGE = (-(2**63), codec.INT_MAX)  # the integers a stored payload can hold


def check_arguments(arguments: Mapping[str, Any], where: str) -> None:
    """Refuse tool-call arguments a store could not hold, before anything is copied or committed: nesting
    deeper than :data:`MAX_ARGUMENT_DEPTH`, NaN or infinite floats, integers outside 64 bits, non-string
    keys, values that are not JSON.

    Raises:
        MalformedResponse: naming the first such value.
    """
    stack: list[tuple[object, str, int]] = [(arguments, where, 1)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, Mapping | list | tuple):
            if depth > MAX_ARGUMENT_DEPTH:
                raise MalformedResponse(f"{where}: nested more than {MAX_ARGUMENT_DEPTH} levels deep")
            if isinstance(value, Mapping):
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise MalformedResponse(f"{path} has a key that is not a string: {key!r}")
                    stack.append((item, f"{path}.{key}", depth + 1))
            else:
                stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))
        elif isinstance(value, bool) or value is None or isinstance(value, str):
            continue
        elif isinstance(value, int):
            if not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
                raise MalformedResponse(f"{path} is an integer beyond 64 bits")
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise MalformedResponse(f"{path} is {value}, which is not a JSON value")
        else:
            raise MalformedResponse(f"{path} is a {type(value).__name__}, not a JSON value")


def function_fields(
    spec: ToolSpec, schema_key: str, *, strict: Literal["given", "always", "never"]
) -> dict[str, Any]:
    """A stored function tool's fields as every dialect spells them, in this order: ``name``,
    ``description`` (when given), the parameters schema under ``schema_key`` (``parameters``,
    ``input_schema``, ``parameters_json_schema``; an empty object schema when the tool has none; a copy), and
    ``strict``: when given as a boolean (``"given"``), always, None when not given (``"always"``: the
    Responses API's nullable field), or never (``"never"``: a dialect with no such field). The one place the
    renderers turn a :class:`~tractkv.engine.content.toolsets.ToolSpec` into a function tool."""
    out: dict[str, Any] = {"name": spec.name}
    if spec.description is not None:
        out["description"] = spec.description
    out[schema_key] = dict(spec.parameters) if spec.parameters is not None else dict(EMPTY_PARAMETERS)
    if strict == "always" or (strict == "given" and spec.strict is not None):
        out["strict"] = spec.strict
    return out


def reply_provider(body: Mapping[str, Any]) -> str | None:
    """Which provider's reply ``body`` is: ``"openai"`` for a chat completion (``object: "chat.completion"``
    or a ``choices`` list), ``"anthropic"`` for a message (``type: "message"`` with a ``content`` list),
    ``"responses"`` for an OpenAI Responses ``Response`` (``object: "response"`` with an ``output`` list),
    ``"gemini"`` for a Gemini ``GenerateContentResponse`` (a ``candidates`` list, or a ``prompt_feedback`` /
    ``usage_metadata``, either spelling, and no ``object`` / ``type``), None for anything else (a streaming
    chunk or event, an error body)."""
    if body.get("object") == "chat.completion" or (
        "object" not in body and isinstance(body.get("choices"), list)
    ):
        return "openai"
    if body.get("type") == "message" and isinstance(body.get("content"), list):
        return "anthropic"
    if body.get("object") == "response" and isinstance(body.get("output"), list):
        return "responses"
    if not {"object", "type", "choices"} & set(body) and (
        isinstance(body.get("candidates"), list)
        or any(
            key in body for key in ("prompt_feedback", "promptFeedback", "usage_metadata", "usageMetadata")
        )
    ):
        return "gemini"
    return None


def reply_text(parts: Sequence[Mapping[str, Any]]) -> str:
    """The text of a reply's parts: its ``text`` parts joined (what a payload's ``text`` holds)."""
    return "".join(str(p["text"]) for p in parts if p.get("type") == "text")


def _string_field(block: Mapping[str, Any], field: str, where: str) -> str:
    value = block.get(field)
    if not isinstance(value, str):
        raise MalformedResponse(f"{where} {block.get('type')} block has no {field!r} string")
    return value


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _count(usage: Mapping[str, Any], names: tuple[str, ...]) -> int:
    for name in names:
        value = usage.get(name)
        if value is not None:
            if not _is_count(value):
                raise MalformedResponse(f"usage.{name} must be a non-negative integer, not {value!r}")
            return int(value)
    raise MalformedResponse(f"usage has no {' or '.join(names)} count")


def normalized_usage(
    usage: object,
    inputs: tuple[str, ...],
    outputs: tuple[str, ...],
    details: tuple[tuple[str, str, str], ...] = (),
) -> dict[str, Any] | None:
    """A reply's ``usage`` as every dialect's reader keeps it (None when there is none): the provider's own
    fields (JSON values), ``input_tokens`` / ``output_tokens`` read from the first of ``inputs`` / ``outputs``
    present, and for each ``(details, field, name)`` the count ``usage[details][field]`` as ``name`` when
    reported and not already set.

    Raises:
        MalformedResponse: usage that is not an object, or without non-negative integer token counts.
    """
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        raise MalformedResponse(f"usage must be an object, not {type(usage).__name__}")
    out = json_values(usage)
    out["input_tokens"] = _count(usage, inputs)
    out["output_tokens"] = _count(usage, outputs)
    for where, field, name in details:
        value = out[where].get(field) if isinstance(out.get(where), dict) else None
        if _is_count(value) and name not in out:
            out[name] = value
    return out


def json_values(value: Mapping[str, Any], depth: int = 8) -> dict[str, Any]:
    """A copy of ``value`` holding only JSON values (str keys; str, int, finite float, bool, lists, objects),
    None values and anything else left out, nesting cut at ``depth`` (a provider's usage and blocks are
    shallow; this keeps hostile input from reaching the store's encoder)."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        kept = _json_value(item, depth)
        if isinstance(key, str) and kept is not _DROP:
            out[key] = kept
    return out


_DROP = object()


def _json_value(value: object, depth: int) -> Any:
    if isinstance(value, str | bool | int) or (isinstance(value, float) and math.isfinite(value)):
        return value
    if depth <= 0:
        return _DROP
    if isinstance(value, Mapping):
        return json_values(value, depth - 1)
    if isinstance(value, list | tuple):
        items = (_json_value(v, depth - 1) for v in value)
        return [v for v in items if v is not _DROP]
    return _DROP
