"""What an Agents SDK session item shows as in tractkv: the content of its commit (issue 33, item 1). Internal
to :mod:`tractkv.integrations.openai_agents` (not API: no ``__all__``, see docs/versioning.md).

An item is a Responses API input item (JSON). Its commit's content is what a tractkv user expects of it:

* a ``user`` message: a ``dialogue`` user message, its ``input_text`` / ``input_image`` / ``input_file`` parts
  as text, image and document parts (the shapes ``t.tool_result`` takes from a ``function_call_output``);
  a ``system`` or ``developer`` message: an ``instruction``;
* the items a model's reply is made of (an assistant ``message``, ``function_call``, ``reasoning`` and every
  other item type: ``web_search_call``, ``file_search_call``, ``computer_call``, ...) are one **assistant
  turn**: a run of them is one ``dialogue`` assistant message, as a Responses reply recorded by
  ``record_response`` is (text and refusal parts; every other item verbatim as a ``responses_item`` part, in
  order, as the SDK sends it to the Responses API: its placeholder id ``__fake_id__`` and ``provider_data``
  left out, another provider's reasoning a note; a ``function_call`` also one of the message's tool calls, so
  compile pairs its result and every dialect sends it). The run's first item appends the message; each
  further item is an ``edit`` of it giving the whole turn so far, so compile, the tool queries and every
  renderer see one turn (parallel calls in one assistant message, a reasoning item ahead of the call it
  preceded, ``encrypted_content`` kept);
* a ``function_call_output``: a ``dialogue`` tool message answering its call (``tool_call_id``, the call's
  tool ``name``, ``reply_to`` the turn's commit), its output text (``(no output)`` for an empty one), or its
  parts.

What cannot be shown so (an item of no known shape, an empty message, a result whose call is no tool call
of this session's turns, e.g. a call stored by a version before this mapping) is a ``reasoning`` note naming
the item's type, hidden from compile, as every item was before; a user message whose parts the payload
rules refuse (an image that is not what it says) shows its text.
"""

from __future__ import annotations

import json
from typing import Any

from tractkv.engine.content import content_objects, responses_result
from tractkv.errors import ContentError, InvalidInput
from tractkv.model import Blob

USER, INSTRUCTION, TURN, RESULT, OTHER = "user", "instruction", "turn", "result", "other"
FAKE_ID = "__fake_id__"  # the SDK's placeholder id of an item from a provider that gives none
NO_OUTPUT = "(no output)"  # what an empty function_call_output shows (a tool message is never empty)


def item_kind(item: dict[str, Any]) -> str:
    """Which commit ``item`` makes: :data:`USER`, :data:`INSTRUCTION`, :data:`TURN` (a part of an assistant
    turn), :data:`RESULT` (a function_call_output) or :data:`OTHER` (a note)."""
    kind, role = item.get("type"), item.get("role")
    if kind in (None, "message"):
        if role == "user":
            return USER
        if role in ("system", "developer"):
            return INSTRUCTION
        return TURN if role == "assistant" else OTHER
    if kind == "function_call_output":
        return RESULT
    return TURN if isinstance(kind, str) and kind else OTHER


def note(item: dict[str, Any]) -> tuple[Blob, tuple[Blob, ...]]:
    """The hidden ``reasoning`` note an item that has no other form is shown as."""
    role = item.get("role")
    kind = item.get("type") or (f"{role} message" if isinstance(role, str) else "item")
    if not isinstance(kind, str):
        kind = "item"
    return content_objects({"type": "reasoning", "text": f"Agents SDK {kind}"})


def text_of(content: object) -> str | None:
    """A message item's text: its string content, or its text parts joined (None when it has none)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "".join(texts) if texts else None
    return None


def user_content(item: dict[str, Any]) -> tuple[Blob, tuple[Blob, ...]]:
    """A user message item as a dialogue message: its parts when it has more than text, else (or when a
    part is one the payload rules refuse: an image that is not what it says, an audio part) its text.

    Raises:
        ContentError: a message with no text to show (the caller notes the item instead)."""
    content = item.get("content")
    if isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") != "input_text" for p in content
    ):  # the input parts a function_call_output's output list may hold, read the same way
        try:
            _call, parts = responses_result(
                {"type": "function_call_output", "call_id": "user", "output": content}
            )
            return content_objects({"type": "dialogue", "role": "user", "parts": parts})
        except (ContentError, InvalidInput):
            pass  # the text alone
    text = text_of(content)
    if not text:
        raise ContentError("a user message item with no text")
    return content_objects({"type": "dialogue", "role": "user", "text": text})


def instruction(item: dict[str, Any]) -> tuple[Blob, tuple[Blob, ...]]:
    """A system or developer message item as an instruction."""
    text = text_of(item.get("content"))
    if not text:
        raise ContentError("a system message item with no text")
    return content_objects({"type": "instruction", "text": text})


def turn_parts(item: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The parts and tool calls an assistant-turn item adds to its turn's message.

    Raises:
        ContentError: a message item whose content is neither a string nor a list of parts; a function_call
            without a string call_id, name or arguments."""
    if item.get("type", "message") == "message":
        content = item.get("content")
        if isinstance(content, str):
            return ([{"type": "text", "text": content}] if content else []), []
        if not isinstance(content, list):
            raise ContentError("an assistant message item needs a content string or list")
        parts: list[dict[str, Any]] = []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind in ("output_text", "input_text", "text") and isinstance(block.get("text"), str):
                if block["text"]:
                    parts.append({"type": "text", "text": block["text"]})
            elif kind == "refusal" and isinstance(block.get("refusal"), str):
                parts.append({"type": "refusal", "refusal": block["refusal"]})
            else:
                raise ContentError(f"an assistant message part of type {kind!r}")
        return parts, []
    # as the SDK sends items to the Responses API: its placeholder id and other providers' data left out
    kept = {k: v for k, v in item.items() if v is not None and k != "provider_data"}
    if kept.get("id") == FAKE_ID:
        del kept["id"]
    if kept.get("type") == "reasoning" and item.get("provider_data"):
        raise ContentError(
            "another provider's reasoning (provider_data): the Responses API takes only its own"
        )
    part = {"type": "responses_item", "item": kept}
    if kept.get("type") != "function_call":
        return [part], []
    for field in ("call_id", "name", "arguments"):
        if not isinstance(kept.get(field), str) or (field != "arguments" and not kept[field]):
            raise ContentError(f"a function_call item needs a string {field}")
    try:
        arguments = json.loads(kept["arguments"]) if kept["arguments"].strip() else {}
    except (ValueError, RecursionError):
        arguments = {}  # the exact string stays in the item, which the Responses dialect sends back
    call = {
        "id": kept["call_id"],
        "name": kept["name"],
        "arguments": arguments if isinstance(arguments, dict) else {},
    }
    return [part], [call]


def turn_payload(
    before: dict[str, Any] | None, parts: list[dict[str, Any]], calls: list[dict[str, Any]]
) -> dict[str, Any]:
    """The assistant turn's message payload with an item's ``parts`` and ``calls`` added to ``before`` (the
    turn so far, a stored dialogue payload; None for a new turn)."""
    had: list[dict[str, Any]] = []
    had_calls: list[dict[str, Any]] = []
    if before is not None:
        had = [dict(p) for p in before.get("parts", ())]
        if not had and before.get("text"):
            had = [{"type": "text", "text": before["text"]}]
        had_calls = [dict(c) for c in before.get("tool_calls", ())]
    all_parts, all_calls = had + parts, had_calls + calls
    text = "".join(p["text"] for p in all_parts if p["type"] == "text")
    payload: dict[str, Any] = {"type": "dialogue", "role": "assistant", "text": text}
    if len(all_parts) > 1 or any(p["type"] != "text" for p in all_parts):
        payload["parts"] = all_parts
    if all_calls:
        payload["tool_calls"] = all_calls
    return payload


def result_content(item: dict[str, Any], name: str) -> tuple[Blob, tuple[Blob, ...]]:
    """A function_call_output item as the tool message answering its call (the call's tool ``name``).

    Raises:
        ContentError, InvalidInput: an output that is neither a string nor a list of input parts, a part
            the payload rules refuse."""
    call_id, output = responses_result(item)
    payload: dict[str, Any] = {"type": "dialogue", "role": "tool", "tool_call_id": call_id, "name": name}
    if isinstance(output, str) or not output:
        payload["text"] = output or NO_OUTPUT  # a tool message is never empty (the toolkit's words)
    else:
        payload["parts"] = output
    return content_objects(payload)
