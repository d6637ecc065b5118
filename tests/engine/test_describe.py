"""describe_commit: one description per commit kind (messages, tool calls and results, edits, compress,
annotations, merges, content this release cannot read)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tractkv.engine.history import clip, describe_commit, short_id
from tractkv.engine.history.describe import CommitDescription
from tractkv.engine.values import CommitInfo
from tractkv.ids import ObjectId

ME, PARENT, OTHER, TARGET = (ObjectId(ch * 64) for ch in "abcd")
ROLE_OF = {"instruction": "system", "reasoning": "assistant"}


def info(
    content: Any,
    operation: str = "append",
    *,
    parents: tuple[ObjectId, ...] = (PARENT,),
    edit_target: ObjectId | None = None,
    reply_to: ObjectId | None = None,
    message: str | None = None,
) -> CommitInfo:
    kind = content.get("type") if isinstance(content, dict) else None
    role = None
    if kind in ("instruction", "dialogue", "reasoning", "artifact", "freeform"):
        role = ROLE_OF.get(kind, content.get("role"))
    return CommitInfo(
        commit_id=ME,
        parent_ids=parents,
        operation=operation,
        content_type=kind,
        role=role,
        message=message,
        metadata=None,
        token_count=3,
        created_at=datetime(2024, 1, 1, tzinfo=UTC),
        edit_target=edit_target,
        reply_to=reply_to,
        content=content,
    )


def fields(d: CommitDescription) -> tuple[str, str, str | None, str]:
    return d.kind, d.label, d.role, d.summary


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ({"type": "instruction", "text": "Be brief."}, ("message", "append system", "system", "Be brief.")),
        (
            {"type": "dialogue", "role": "user", "text": "Hello\n  there"},
            ("message", "append user", "user", "Hello there"),
        ),
        ({"type": "reasoning", "text": "hmm"}, ("message", "append assistant", "assistant", "hmm")),
        (
            {"type": "artifact", "text": "def f(): ...", "artifact_type": "code", "role": "user"},
            ("message", "append user", "user", "def f(): ..."),
        ),
        (  # freeform: the compact, sorted JSON the model receives
            {"type": "freeform", "payload": {"b": 1, "a": [1, 2]}, "role": "user"},
            ("message", "append user", "user", '{"a":[1,2],"b":1}'),
        ),
    ],
)
def test_messages_are_described_by_their_text(content: dict[str, Any], expected: tuple[Any, ...]) -> None:
    described = describe_commit(info(content))
    assert fields(described) == expected
    assert described.targets == ()
    assert described.commit_id == ME
    assert described.operation == "append"


def test_a_message_keeps_its_line_breaks_in_text_and_loses_them_in_summary() -> None:
    described = describe_commit(info({"type": "dialogue", "role": "user", "text": "one\ntwo"}))
    assert described.text == "one\ntwo"
    assert described.summary == "one two"


def test_an_assistant_message_with_tool_calls_names_them_after_its_text() -> None:
    calls = [
        {"id": "c1", "name": "search", "arguments": {"q": "x"}},
        {"id": "c2", "name": "lookup", "arguments": {}},
    ]
    with_text = describe_commit(
        info({"type": "dialogue", "role": "assistant", "text": "Let me look.", "tool_calls": calls})
    )
    assert fields(with_text) == (
        "tool_call",
        "append assistant",
        "assistant",
        "Let me look. [calls search, lookup]",
    )
    assert with_text.tool_calls == ("search", "lookup")
    bare = describe_commit(info({"type": "dialogue", "role": "assistant", "text": "", "tool_calls": calls}))
    assert bare.summary == "calls search, lookup"
    assert bare.text == ""


def test_a_tool_result_names_its_tool_and_the_call_it_answers() -> None:
    result = {"type": "dialogue", "role": "tool", "text": "3 notes", "tool_call_id": "c1", "name": "search"}
    described = describe_commit(info(result, reply_to=OTHER))
    assert fields(described) == ("tool_result", "append tool", "tool", "[result of search] 3 notes")
    assert described.tool_name == "search"
    assert described.targets == (OTHER,)
    assert not described.is_error
    failed = describe_commit(info({**result, "is_error": True, "text": "boom"}, reply_to=OTHER))
    assert failed.summary == "[error from search] boom"
    assert failed.is_error


def test_an_edit_is_described_by_its_new_text_and_targets_the_message() -> None:
    content = {"type": "dialogue", "role": "user", "text": "better wording"}
    described = describe_commit(info(content, "edit", edit_target=TARGET))
    assert fields(described) == ("message", "edit user", "user", "better wording")
    assert described.targets == (TARGET,)
    # a summarized tool result is an edit of the result: still a tool result
    result = {"type": "dialogue", "role": "tool", "text": "short", "tool_call_id": "c1", "name": "search"}
    edited = describe_commit(info(result, "edit", edit_target=TARGET, reply_to=OTHER))
    assert fields(edited) == ("tool_result", "edit tool", "tool", "[result of search] short")
    assert edited.targets == (TARGET, OTHER)


def test_a_compress_commit_is_its_summary() -> None:
    content = {"type": "dialogue", "role": "user", "text": "Summary: LMDB researched."}
    described = describe_commit(info(content, "compress", message="compress 4 messages"))
    assert fields(described) == ("summary", "compress user", "user", "Summary: LMDB researched.")


def test_an_annotation_names_the_priority_the_target_and_the_reason() -> None:
    content = {"type": "annotation", "priority": "pinned", "reason": "keep\nthis"}
    described = describe_commit(info(content, "annotate", edit_target=TARGET, message="keep\nthis"))
    assert fields(described) == ("annotation", "annotate", None, f"pinned {TARGET[:12]} (keep this)")
    assert described.targets == (TARGET,)
    assert described.text == described.summary
    plain = describe_commit(info({"type": "annotation", "priority": "skip"}, "annotate", edit_target=TARGET))
    assert plain.summary == f"skip {TARGET[:12]}"


def test_a_merge_names_its_source_strategy_and_settled_conflicts() -> None:
    content = {"type": "merge", "strategy": "theirs", "source": "explore", "conflicts": 2}
    described = describe_commit(info(content, "merge", parents=(PARENT, OTHER), message="Merge explore"))
    assert fields(described) == ("merge", "merge", None, "explore (theirs, 2 conflicts settled)")
    assert described.targets == (OTHER,)  # the merged-in commit
    clean = {"type": "merge", "strategy": "auto", "source": "explore", "conflicts": 0}
    assert describe_commit(info(clean, "merge", parents=(PARENT, OTHER))).summary == "explore (auto)"
    one = {**content, "conflicts": 1}
    assert describe_commit(info(one, "merge")).summary == "explore (theirs, 1 conflict settled)"


@pytest.mark.parametrize("content", [None, {"type": "from-a-newer-release", "x": 1}, "not a dict"])
def test_content_this_release_cannot_read_falls_back_to_the_note(content: Any) -> None:
    described = describe_commit(info(content, "append", message="a note"))
    assert fields(described) == ("other", "append", None, "a note")
    assert fields(describe_commit(info(content, "append"))) == ("other", "append", None, "append")


def test_line_cuts_the_summary_and_helpers_agree() -> None:
    described = describe_commit(info({"type": "dialogue", "role": "user", "text": "x" * 50}))
    assert described.line(10) == "x" * 9 + "…"
    assert described.line(50) == "x" * 50
    assert clip("a \n b", 10) == "a b"
    assert short_id(ME) == ME[:12]
    assert short_id(None) == "-"
