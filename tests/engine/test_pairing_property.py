"""Random histories built only with the public API always compile into requests the providers accept.

Each example runs a short random sequence of operations (appends of every role, tool calls, results that answer
a call or none, skip / unskip / pin annotations, edits into any kind of message, compress of a range, branches,
switches, merges with conflicts settled by ``ours`` / ``theirs``), and after every operation checks both
renderings against an independent statement of the providers' tool-pairing rules (written here, sharing
nothing with engine/pairing.py), that ``strict=True`` raises exactly when compile made repairs, and at the end
that a fresh handle on the same store compiles the same context.

The one allowance the rules make: the last tool turn of a context (the assistant message with calls and the
results recorded so far) may leave calls open, because it is a tool run in progress.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tractkv import CompiledContext, InvalidInput, MergeConflict, ToolPairingError, Tract

# --- the providers' rules, stated independently ---------------------------------------------------------------


def check_openai(params: dict[str, Any]) -> None:
    """OpenAI chat completions: every assistant message with ``tool_calls`` is followed at once by ``tool``
    messages answering exactly its ids, each once, before any other message (the last turn may be
    incomplete); a ``tool`` message only ever follows such a message or another result of it."""
    messages = params["messages"]
    i = 0
    while i < len(messages):
        message = messages[i]
        assert message["role"] in ("system", "user", "assistant"), f"message {i}: stray {message['role']}"
        if message["role"] == "assistant" and message.get("tool_calls"):
            wanted = [c["id"] for c in message["tool_calls"]]
            assert len(set(wanted)) == len(wanted)
            j = i + 1
            got: list[str] = []
            while j < len(messages) and messages[j]["role"] == "tool":
                got.append(messages[j]["tool_call_id"])
                j += 1
            assert len(set(got)) == len(got), f"message {i}: a call answered twice: {got}"
            if j < len(messages):
                assert sorted(got) == sorted(wanted), f"message {i}: calls {wanted} answered by {got}"
            else:
                assert set(got) <= set(wanted), f"message {i}: trailing turn answers {got}, calls {wanted}"
            i = j
        else:
            assert message.get("content"), f"message {i}: empty content"
            i += 1


def blocks_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    assert isinstance(content, list)
    return content


def check_anthropic(params: dict[str, Any]) -> None:
    """Anthropic messages: user and assistant turns alternate; no empty content or text; every assistant turn
    with ``tool_use`` blocks is followed by a user turn whose first blocks are ``tool_result`` blocks for
    exactly those ids, each once (the last turn may be a tool run in progress); no ``tool_result`` anywhere
    else."""
    messages = params["messages"]
    assert messages, "no messages"
    assert messages[0]["role"] == "user", "the first turn is not a user turn"
    use_ids = [b["id"] for m in messages for b in blocks_of(m) if b["type"] == "tool_use"]
    assert len(set(use_ids)) == len(use_ids), f"tool_use ids repeat: {use_ids}"
    assert all(ANTHROPIC_ID.fullmatch(i) for i in use_ids), f"tool_use ids Anthropic refuses: {use_ids}"
    last = blocks_of(messages[-1])
    if messages[-1]["role"] == "assistant" and last[-1]["type"] == "text":
        assert last[-1]["text"] == last[-1]["text"].rstrip(), "the final assistant turn ends in whitespace"
    for i, message in enumerate(messages):
        assert message["role"] in ("user", "assistant")
        if i:
            assert message["role"] != messages[i - 1]["role"], f"turns {i - 1} and {i} have one role"
        blocks = blocks_of(message)
        assert blocks, f"turn {i} is empty"
        for block in blocks:
            if block["type"] == "text":
                assert block["text"].strip(), f"turn {i}: blank text block"
            if block["type"] == "tool_result" and "content" in block:
                assert block["content"], f"turn {i}: empty tool result content"
    for i, message in enumerate(messages):
        blocks = blocks_of(message)
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        results = [b for b in blocks if b["type"] == "tool_result"]
        if message["role"] == "assistant":
            assert not results
            if not uses or i == len(messages) - 1:
                continue  # no calls, or a trailing call (a tool run in progress)
            following = blocks_of(messages[i + 1])
            lead = []
            for block in following:
                if block["type"] != "tool_result":
                    break
                lead.append(block["tool_use_id"])
            assert len(set(lead)) == len(lead), f"turn {i + 1}: a tool_use answered twice"
            complete = sorted(lead) == sorted(uses)
            in_progress = (
                i + 1 == len(messages) - 1 and len(lead) == len(following) and set(lead) <= set(uses)
            )
            assert complete or in_progress, f"turn {i}: tool_use {uses} answered by {lead}"
        else:
            previous = blocks_of(messages[i - 1]) if i else []
            answered = {b["id"] for b in previous if b["type"] == "tool_use"}
            for position, block in enumerate(blocks):
                if block["type"] == "tool_result":
                    assert all(b["type"] == "tool_result" for b in blocks[:position]), (
                        f"turn {i}: result after text"
                    )
                    assert block["tool_use_id"] in answered, (
                        f"turn {i}: result for no tool_use of turn {i - 1}"
                    )


ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")


def check_context(ctx: CompiledContext) -> None:
    check_openai(ctx.to_openai_params())
    check_anthropic(ctx.to_anthropic_params())
    assert len(ctx.messages) == len(ctx.commit_ids) == len(ctx.generation_configs)
    for render in (ctx.to_openai_params, ctx.to_anthropic_params):
        if ctx.repairs:
            with pytest.raises(ToolPairingError):
                render(strict=True)
        else:
            render(strict=True)


# --- random operation sequences ------------------------------------------------------------------------------

INDEX = st.integers(min_value=0, max_value=63)
OPERATIONS = st.one_of(
    st.tuples(st.just("user")),
    st.tuples(st.just("assistant")),
    st.tuples(st.just("system")),
    st.tuples(st.just("reasoning")),
    # calls with fresh ids; with reused ids (a server numbering calls per turn); with ids of foreign characters
    st.tuples(
        st.just("call"), st.integers(min_value=1, max_value=3), st.sampled_from(["fresh", "reuse", "dots"])
    ),
    st.tuples(st.just("result"), INDEX),  # t.tool_result for a call made earlier (open, answered or closed)
    st.tuples(st.just("raw_result"), INDEX, st.booleans()),  # any tool message, maybe answering no call
    st.tuples(st.just("annotate"), INDEX, st.sampled_from(["skip", "skip", "normal", "pinned"])),
    st.tuples(st.just("edit"), INDEX, st.sampled_from(["user", "assistant", "call", "tool"])),
    st.tuples(st.just("compress"), INDEX, INDEX),
    st.tuples(st.just("branch")),
    st.tuples(st.just("switch"), INDEX),
    st.tuples(st.just("merge"), INDEX, st.sampled_from(["auto", "ours", "theirs"])),
    # a branch and the current one change one message differently, then merge (a conflict, settled)
    st.tuples(st.just("conflict"), INDEX, st.sampled_from(["ours", "theirs"]), st.booleans()),
)


class History:
    """Runs operations on a Tract, remembering the names it needs to pick targets from."""

    def __init__(self, t: Tract) -> None:
        self.t = t
        self.messages: list[str] = []  # message commits made (on any branch)
        self.call_ids: list[str] = []  # every tool call id made
        self.branches = ["main"]
        self.n = 0

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def new_calls(self, count: int, ids: str = "fresh") -> list[dict[str, Any]]:
        made = []
        for index in range(count):
            if ids == "reuse":
                call_id = f"call_{index}"  # the same ids every turn
            elif ids == "dots":
                call_id = self.fresh("functions.f:")
            else:
                call_id = self.fresh("call_")
            made.append({"id": call_id, "name": "f", "arguments": {"k": self.n}})
        self.call_ids.extend(c["id"] for c in made if c["id"] not in self.call_ids)
        return made

    def pick(self, items: list[str], index: int) -> str | None:
        return items[index % len(items)] if items else None

    def change(self, target: str, by_edit: bool, side: str) -> None:
        """Change one message on the current branch: an edit into a tool call (a new one) or a plain text, or a
        priority (skip on one side, pinned on the other)."""
        if by_edit:
            payload: dict[str, Any] = {"type": "dialogue", "role": "assistant", "text": self.fresh(side)}
            if side == "side":
                payload = {"type": "dialogue", "role": "assistant", "tool_calls": self.new_calls(2)}
            self.t.commit(payload, operation="edit", edit_target=target)
        else:
            self.t.annotate(target, "skip" if side == "side" else "pinned")

    def run(self, op: tuple[Any, ...]) -> None:
        t = self.t
        kind = op[0]
        if kind == "user":
            self.messages.append(t.user(self.fresh("u")).commit_id)
        elif kind == "assistant":
            self.messages.append(t.assistant(self.fresh("a")).commit_id)
        elif kind == "system":
            self.messages.append(t.system(self.fresh("s")).commit_id)
        elif kind == "reasoning":
            self.messages.append(t.commit({"type": "reasoning", "text": self.fresh("r")}).commit_id)
        elif kind == "call":
            self.messages.append(t.assistant(tool_calls=self.new_calls(op[1], op[2])).commit_id)
        elif kind == "result":
            call_id = self.pick(self.call_ids, op[1])
            if call_id is not None:
                info = t.tool_result(call_id, "f", self.fresh("result "))
                assert info is not None
                self.messages.append(info.commit_id)
        elif kind == "raw_result":
            known = self.pick(self.call_ids, op[1])
            call_id = known if op[2] and known is not None else self.fresh("ghost_")
            payload = {
                "type": "dialogue",
                "role": "tool",
                "tool_call_id": call_id,
                "text": self.fresh("raw "),
            }
            self.messages.append(t.commit(payload).commit_id)
        elif kind == "annotate":
            target = self.pick(self.messages, op[1])
            if target is not None:
                t.annotate(target, op[2])
        elif kind == "edit":
            target = self.pick(self.messages, op[1])
            if target is not None:
                payload: dict[str, Any] = {"type": "dialogue", "role": op[2], "text": self.fresh("edited ")}
                if op[2] == "call":
                    payload = {"type": "dialogue", "role": "assistant", "tool_calls": self.new_calls(1)}
                elif op[2] == "tool":
                    payload["tool_call_id"] = self.pick(self.call_ids, op[1]) or "ghost"
                t.commit(payload, operation="edit", edit_target=target)
        elif kind == "compress":
            ids = list(t.compile().commit_ids)
            if ids:
                start, end = sorted((op[1] % len(ids), op[2] % len(ids)))
                t.compress(from_commit=ids[start], to_commit=ids[end], content=self.fresh("summary "))
                event("compress")
        elif kind == "branch":
            name = self.fresh("b")
            t.branch(name)
            self.branches.append(name)
        elif kind == "switch":
            name = self.pick(self.branches, op[1])
            assert name is not None
            t.switch(name)
        elif kind == "conflict":
            target = self.pick(self.messages, op[1])
            if target is None:
                return
            here, there = t.current_branch, self.fresh("side")
            assert here is not None
            t.branch(there)
            self.branches.append(there)
            self.change(target, op[3], "side")
            t.switch(here)
            self.change(target, op[3], "here")
            t.merge(there, strategy=op[2])
            event("merge with conflicts")
        else:  # merge
            name = self.pick(self.branches, op[1])
            assert name is not None
            if name != t.current_branch:
                try:
                    t.merge(name, strategy=op[2])
                except MergeConflict:
                    event("merge with conflicts")
                    t.merge(name, strategy="theirs" if op[1] % 2 else "ours")


@settings(
    max_examples=3000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(OPERATIONS, min_size=1, max_size=16))
def test_random_histories_compile_into_valid_requests(operations: list[tuple[Any, ...]]) -> None:
    with Tract.open() as t:
        history = History(t)
        for op in operations:
            refused: InvalidInput | None = None
            try:
                history.run(op)
            except InvalidInput as exc:
                # The operations the API refuses (a target outside this branch's history, a compress range
                # with nothing to replace, a skipped range end): refused with a tractkv error, nothing more.
                refused = exc
            assert not isinstance(refused, ToolPairingError)
            ctx = t.compile()
            check_context(ctx)
            check_context(t.compile(include_reasoning=True))
            if ctx.repairs:
                with pytest.raises(ToolPairingError) as caught:
                    t.compile(strict=True)
                assert caught.value.repairs == ctx.repairs
            else:
                assert t.compile(strict=True) == ctx
        ctx = t.compile()
        for kind in sorted({r.kind for r in ctx.repairs}):
            event(f"ends with a {kind}")
        fresh = Tract(t.store, owns_store=False, branch=t.current_branch)
        try:
            again = fresh.compile()
        finally:
            fresh.close()
        assert again == ctx
        assert again.repairs == ctx.repairs
        assert again.token_count == ctx.token_count
        assert list(again.generation_configs) == list(ctx.generation_configs)
        check_context(again)
