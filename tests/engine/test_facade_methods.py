"""The small public methods the layers above the facade use instead of reaching for its session:
``check_writable`` (the toolkit), ``message_content`` (the CLI's edit), ``prepare_reply`` (``AsyncTract``),
``add_policy`` / ``policies`` (the toolkit's open-call guard)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tractkv import (
    ConcurrentUpdate,
    DetachedHead,
    InvalidInput,
    ReadOnlySession,
    StoreClosed,
    Tract,
    UnansweredToolCalls,
)
from tractkv.engine.session import Session, WritePolicy
from tractkv.llm import ScriptedLLM
from tractkv.llm.protocol import call_model


def test_check_writable_raises_what_a_write_would(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    with Tract.open(path) as t:
        first = t.user("hi").commit_id
        t.check_writable("run")
        t.check_writable("run", branch=True)
        t.checkout(first)
        t.check_writable("run")  # detached HEAD still writes usage rows and other branches
        with pytest.raises(DetachedHead):
            t.check_writable("re-run a tool", branch=True)
    with Tract.open(path, readonly=True) as ro, pytest.raises(ReadOnlySession, match="run"):
        ro.check_writable("run")
    with pytest.raises(StoreClosed):  # t was closed by its block
        t.check_writable("run")


def test_message_content_is_what_the_message_shows_now() -> None:
    with Tract.open() as t:
        original = t.user("draft", name="ann").commit_id
        edit = t.commit({"type": "dialogue", "role": "user", "text": "final"}, "edit", original).commit_id
        shown = {"type": "dialogue", "role": "user", "text": "final"}
        assert t.message_content(original) == shown
        assert t.message_content(edit) == shown  # an edit names the message it edits
        assert t.message_content("HEAD~1") == shown


def test_prepare_reply_then_commit_is_generate_in_two_halves() -> None:
    llm = ScriptedLLM(["one", "two"])
    with Tract.open() as t, Tract.open() as u:
        t.user("hi")
        prepared = t.prepare_reply()
        assert [m.content for m in prepared.request.messages] == ["hi"]
        reply = prepared.commit(call_model(llm, prepared.request.messages, None, {}), {"temperature": 0})
        assert t.compile().messages[-1].content == "one"
        assert reply.generation_config is not None
        assert reply.generation_config["temperature"] == 0
        stale = t.prepare_reply()
        t.user("meanwhile")  # the branch moves while the model answers: the reply is refused, nothing lands
        with pytest.raises(ConcurrentUpdate):
            stale.commit(call_model(llm, stale.request.messages, None, {}), {})
        assert [m.content for m in t.compile().messages] == ["hi", "one", "meanwhile"]
        u.assistant("", tool_calls=[{"id": "c1", "name": "f", "arguments": {}}])
        with pytest.raises(UnansweredToolCalls):
            u.prepare_reply()


class _Refuse(WritePolicy[Session]):
    def __init__(self) -> None:
        self.asked: list[str] = []

    def before_write(self, session: Session, action: str) -> None:
        self.asked.append(action)
        if action == "switch":
            raise InvalidInput("no switch now")


def test_add_policy_registers_a_write_policy_with_the_handle() -> None:
    with Tract.open() as t:
        (budget,) = t.policies  # the facade's own: the branch budget
        policy = _Refuse()
        t.add_policy(policy)
        assert t.policies == (budget, policy)
        t.user("hi")
        t.branch("side", switch=False)
        with pytest.raises(InvalidInput, match="no switch now"):
            t.switch("side")
        assert policy.asked == ["commit", "switch"]
        assert t.current_branch == "main"
