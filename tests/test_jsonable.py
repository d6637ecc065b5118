"""The one JSON conversion (tractkv.model.to_jsonable) and every to_json(): outputs pinned byte for byte.

EXPECTED was captured from the converters before they were merged into one (issue 30, item 5): CommitInfo,
ToolStats, ToolUsage, UsageNode, ChildInfo, ParentInfo and ToolEvent ``to_json`` and the CLI's ``--json``
conversion of result values (``cli_*``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from tractkv.engine.content import Message, Part, ToolCall
from tractkv.engine.usage import ToolStats, ToolUsage, UsageNode
from tractkv.engine.values import (
    BranchInfo,
    ChildInfo,
    CommitInfo,
    ContextDiff,
    DiffEntry,
    GcResult,
    MergeResult,
    ParentInfo,
    ReflogEntry,
    StatusInfo,
    ToolChange,
)
from tractkv.model import to_jsonable
from tractkv.toolkit.events import ToolEvent

A: Any = "a" * 64
B: Any = "b" * 64
T0 = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
T1 = datetime(2026, 1, 2, 3, 4, 6, tzinfo=UTC)


def cinfo() -> CommitInfo:
    return CommitInfo(
        commit_id=A,
        parent_ids=(B,),
        operation="append",
        content_type="dialogue",
        role="user",
        message="note",
        metadata={"k": [1, (2, 3)], "raw": b"\x00\xff", "n": None},
        token_count=7,
        created_at=T0,
        generation_config={"temperature": 0.5},
        content_id=B,
        content={"text": "hi", "blob": b"xy"},
        usage={"input_tokens": 3},
    )


def usage(i: str = "u1", children: tuple[str, ...] = ()) -> ToolUsage:
    return ToolUsage(
        id=i,
        commit_id=A,
        parent_id=None,
        tool_name="grep",
        arguments={"q": "x", "b": b"z", "t": (1, 2)},
        result="ok",
        status="success",
        error=None,
        started_at=T0,
        completed_at=T1,
        tool_call_id="c1",
        oid=B,
        result_commit=A,
        result_chars=None,
        children=children,
        heads=(A,),
        rerun_of=None,
    )


def _msg() -> Message:
    return Message(
        role="assistant",
        content="hello",
        tool_calls=(ToolCall(id="c", name="f", arguments={"a": 1}),),
        parts=(
            Part(type="text", text="hello"),
            Part(type="image", media_type="image/png", data=b"\x89PNG", media=A),
        ),
    )


def _cases() -> dict[str, Any]:
    return {
        "commit_info": cinfo().to_json(),
        "commit_info_min": CommitInfo(
            commit_id=A,
            parent_ids=(),
            operation="edit",
            content_type=None,
            role=None,
            message=None,
            metadata=None,
            token_count=0,
            created_at=T1,
        ).to_json(),
        "tool_stats": ToolStats(
            tool_name="grep", count=3, success=2, error=1, interrupted=0, pending=0, p50_ms=1.5, p95_ms=None
        ).to_json(),
        "tool_stats_none": ToolStats(
            tool_name="g", count=0, success=0, error=0, interrupted=0, pending=1, p50_ms=None, p95_ms=None
        ).to_json(),
        "tool_usage": usage().to_json(),
        "tool_usage_pending": ToolUsage(
            id="u2",
            commit_id=None,
            parent_id="u1",
            tool_name="t",
            arguments={},
            result=None,
            status="pending",
            error=None,
            started_at=T0,
            completed_at=None,
        ).to_json(),
        "usage_node": UsageNode(
            usage=usage(children=("u2",)), children=(UsageNode(usage=usage("u2")),)
        ).to_json(),
        "child_info": ChildInfo(
            purpose="p",
            branch=None,
            spawned_as="c",
            inherit="full",
            state="collapsed",
            head=A,
            spawn_commit=B,
            parent_commit=None,
            collapsed_by=A,
            collapsed_via="collapse",
            created_at=T0,
        ).to_json(),
        "parent_info": ParentInfo(
            branch="main", commit=None, purpose="p", inherit="none", spawn_commit=B, created_at=T1
        ).to_json(),
        "tool_event": ToolEvent(
            kind="tool_complete",
            usage_id="u",
            parent_id=None,
            commit_id=A,
            tool_name="grep",
            timestamp=T1,
            tool_call_id="c",
            branch="main",
            arguments={"b": b"q", "l": (1,)},
            started_at=T0,
            duration_ms=322.0,
            output="o",
        ).to_json(),
        "tool_event_start": ToolEvent(
            kind="tool_start", usage_id="u", parent_id="p", commit_id=None, tool_name="grep", timestamp=T1
        ).to_json(),
        "cli_status": to_jsonable(
            StatusInfo(
                branch="main",
                head=A,
                detached=False,
                commit_count=2,
                message_count=2,
                token_count=9,
                token_budget=None,
                token_source="estimated",
                upstream="origin/main",
                ahead=1,
                behind=0,
            )
        ),
        "cli_branch": [
            to_jsonable(BranchInfo(name="main", head=A, is_current=True)),
            to_jsonable(BranchInfo(name="x", head=None, is_current=False, is_remote=True)),
        ],
        "cli_merge": to_jsonable(MergeResult(kind="merge", head=A, commit=cinfo(), conflicts_resolved=1)),
        "cli_merge_ff": to_jsonable(MergeResult(kind="fast_forward", head=A, commit=None)),
        "cli_reflog": [
            to_jsonable(
                ReflogEntry(
                    ref="refs/heads/main",
                    old=None,
                    new=A,
                    operation="commit",
                    message="m",
                    created_at=T0,
                    seq=3,
                )
            )
        ],
        "cli_diff": to_jsonable(
            ContextDiff(
                base=A,
                target=B,
                entries=(
                    DiffEntry(
                        change="modified",
                        commit_id=A,
                        before=Message(role="user", content="a"),
                        after=_msg(),
                        index_before=0,
                        index_after=0,
                    ),
                    DiffEntry(
                        change="removed",
                        commit_id=B,
                        before=_msg(),
                        after=None,
                        index_before=1,
                        index_after=None,
                    ),
                ),
                token_delta=-3,
                tools=(
                    ToolChange(change="changed", name="f", before={"name": "f"}, after={"name": "f", "d": 1}),
                ),
            )
        ),
        "cli_gc": to_jsonable(
            GcResult(removed_objects=1, removed_bytes=20, kept_objects=3, removed_checkpoints=0)
        ),
        "cli_commit_info": to_jsonable(cinfo()),
        "cli_message": to_jsonable(_msg()),
        "cli_list": to_jsonable([T0, (1, b"a"), {"d": T1}]),
    }


EXPECTED: dict[str, Any] = {
    "commit_info": {
        "commit_id": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "parent_ids": ["bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"],
        "operation": "append",
        "content_type": "dialogue",
        "role": "user",
        "message": "note",
        "metadata": {"k": [1, [2, 3]], "raw": {"$bytes": "AP8="}, "n": None},
        "token_count": 7,
        "created_at": "2026-01-02T03:04:05.678000+00:00",
        "edit_target": None,
        "reply_to": None,
        "generation_config": {"temperature": 0.5},
        "content_id": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
        "toolset_id": None,
        "content": {"text": "hi", "blob": {"$bytes": "eHk="}},
        "usage": {"input_tokens": 3},
    },
    "commit_info_min": {
        "commit_id": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "parent_ids": [],
        "operation": "edit",
        "content_type": None,
        "role": None,
        "message": None,
        "metadata": None,
        "token_count": 0,
        "created_at": "2026-01-02T03:04:06+00:00",
        "edit_target": None,
        "reply_to": None,
        "generation_config": None,
        "content_id": None,
        "toolset_id": None,
        "content": None,
        "usage": None,
    },
    "tool_stats": {
        "tool_name": "grep",
        "count": 3,
        "success": 2,
        "error": 1,
        "interrupted": 0,
        "pending": 0,
        "p50_ms": 1.5,
        "p95_ms": None,
        "success_rate": 0.6666666666666666,
    },
    "tool_stats_none": {
        "tool_name": "g",
        "count": 0,
        "success": 0,
        "error": 0,
        "interrupted": 0,
        "pending": 1,
        "p50_ms": None,
        "p95_ms": None,
        "success_rate": None,
    },
    "tool_usage": {
        "id": "u1",
        "tool_name": "grep",
        "status": "success",
        "commit_id": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "parent_id": None,
        "tool_call_id": "c1",
        "arguments": {"q": "x", "b": {"$bytes": "eg=="}, "t": [1, 2]},
        "result": "ok",
        "result_chars": None,
        "error": None,
        "started_at": "2026-01-02T03:04:05.678000+00:00",
        "completed_at": "2026-01-02T03:04:06+00:00",
        "duration_ms": 322.0,
        "oid": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
        "result_commit": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "children": [],
        "heads": ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],
        "rerun_of": None,
    },
    "tool_usage_pending": {
        "id": "u2",
        "tool_name": "t",
        "status": "pending",
        "commit_id": None,
        "parent_id": "u1",
        "tool_call_id": None,
        "arguments": {},
        "result": None,
        "result_chars": None,
        "error": None,
        "started_at": "2026-01-02T03:04:05.678000+00:00",
        "completed_at": None,
        "duration_ms": None,
        "oid": None,
        "result_commit": None,
        "children": [],
        "heads": [],
        "rerun_of": None,
    },
    "usage_node": {
        "id": "u1",
        "tool_name": "grep",
        "status": "success",
        "commit_id": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "parent_id": None,
        "tool_call_id": "c1",
        "arguments": {"q": "x", "b": {"$bytes": "eg=="}, "t": [1, 2]},
        "result": "ok",
        "result_chars": None,
        "error": None,
        "started_at": "2026-01-02T03:04:05.678000+00:00",
        "completed_at": "2026-01-02T03:04:06+00:00",
        "duration_ms": 322.0,
        "oid": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
        "result_commit": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "children": [
            {
                "id": "u2",
                "tool_name": "grep",
                "status": "success",
                "commit_id": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                "parent_id": None,
                "tool_call_id": "c1",
                "arguments": {"q": "x", "b": {"$bytes": "eg=="}, "t": [1, 2]},
                "result": "ok",
                "result_chars": None,
                "error": None,
                "started_at": "2026-01-02T03:04:05.678000+00:00",
                "completed_at": "2026-01-02T03:04:06+00:00",
                "duration_ms": 322.0,
                "oid": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
                "result_commit": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                "children": [],
                "heads": ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],
                "rerun_of": None,
            }
        ],
        "heads": ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],
        "rerun_of": None,
    },
    "child_info": {
        "purpose": "p",
        "branch": None,
        "spawned_as": "c",
        "inherit": "full",
        "state": "collapsed",
        "head": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "spawn_commit": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
        "parent_commit": None,
        "collapsed_by": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "collapsed_via": "collapse",
        "created_at": "2026-01-02T03:04:05.678000+00:00",
    },
    "parent_info": {
        "branch": "main",
        "commit": None,
        "purpose": "p",
        "inherit": "none",
        "spawn_commit": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
        "created_at": "2026-01-02T03:04:06+00:00",
    },
    "tool_event": {
        "kind": "tool_complete",
        "usage_id": "u",
        "parent_id": None,
        "commit_id": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "branch": "main",
        "tool_name": "grep",
        "tool_call_id": "c",
        "arguments": {"b": {"$bytes": "cQ=="}, "l": [1]},
        "description": None,
        "rerun_of": None,
        "timestamp": "2026-01-02T03:04:06+00:00",
        "started_at": "2026-01-02T03:04:05.678000+00:00",
        "duration_ms": 322.0,
        "output": "o",
        "error": None,
    },
    "tool_event_start": {
        "kind": "tool_start",
        "usage_id": "u",
        "parent_id": "p",
        "commit_id": None,
        "branch": None,
        "tool_name": "grep",
        "tool_call_id": None,
        "arguments": {},
        "description": None,
        "rerun_of": None,
        "timestamp": "2026-01-02T03:04:06+00:00",
        "started_at": None,
        "duration_ms": None,
        "output": None,
        "error": None,
    },
    "cli_status": {
        "branch": "main",
        "head": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "detached": False,
        "commit_count": 2,
        "message_count": 2,
        "token_count": 9,
        "token_budget": None,
        "token_source": "estimated",
        "upstream": "origin/main",
        "ahead": 1,
        "behind": 0,
        "count_source": "estimated",
        "estimated_tokens": None,
        "reported_by": None,
        "budget_action": None,
        "budget_threshold": None,
        "budget_overrun": None,
        "ref": None,
        "is_remote": False,
        "is_current": False,
        "last_activity": None,
    },
    "cli_branch": [
        {
            "name": "main",
            "head": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "is_current": True,
            "is_remote": False,
        },
        {"name": "x", "head": None, "is_current": False, "is_remote": True},
    ],
    "cli_merge": {
        "kind": "merge",
        "head": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "commit": {
            "commit_id": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "parent_ids": ["bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"],
            "operation": "append",
            "content_type": "dialogue",
            "role": "user",
            "message": "note",
            "metadata": {"k": [1, [2, 3]], "raw": {"$bytes": "AP8="}, "n": None},
            "token_count": 7,
            "created_at": "2026-01-02T03:04:05.678000+00:00",
            "edit_target": None,
            "reply_to": None,
            "generation_config": {"temperature": 0.5},
            "content_id": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
            "toolset_id": None,
            "content": {"text": "hi", "blob": {"$bytes": "eHk="}},
            "usage": {"input_tokens": 3},
        },
        "conflicts_resolved": 1,
        "strategy": "auto",
    },
    "cli_merge_ff": {
        "kind": "fast_forward",
        "head": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "commit": None,
        "conflicts_resolved": 0,
        "strategy": "auto",
    },
    "cli_reflog": [
        {
            "ref": "refs/heads/main",
            "old": None,
            "new": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "operation": "commit",
            "message": "m",
            "created_at": "2026-01-02T03:04:05.678000+00:00",
            "hard": False,
            "seq": 3,
        }
    ],
    "cli_diff": {
        "base": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "target": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
        "entries": [
            {
                "change": "modified",
                "commit_id": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                "before": {"role": "user", "content": "a"},
                "after": {
                    "role": "assistant",
                    "content": "hello",
                    "tool_calls": [{"id": "c", "name": "f", "arguments": {"a": 1}}],
                    "parts": [
                        {"type": "text", "text": "hello"},
                        {"type": "image", "media_type": "image/png", "data": {"$bytes": "iVBORw=="}},
                    ],
                },
                "index_before": 0,
                "index_after": 0,
            },
            {
                "change": "removed",
                "commit_id": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
                "before": {
                    "role": "assistant",
                    "content": "hello",
                    "tool_calls": [{"id": "c", "name": "f", "arguments": {"a": 1}}],
                    "parts": [
                        {"type": "text", "text": "hello"},
                        {"type": "image", "media_type": "image/png", "data": {"$bytes": "iVBORw=="}},
                    ],
                },
                "after": None,
                "index_before": 1,
                "index_after": None,
            },
        ],
        "token_delta": -3,
        "tools": [
            {"change": "changed", "name": "f", "before": {"name": "f"}, "after": {"name": "f", "d": 1}}
        ],
    },
    "cli_gc": {"removed_objects": 1, "removed_bytes": 20, "kept_objects": 3, "removed_checkpoints": 0},
    "cli_commit_info": {
        "commit_id": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "parent_ids": ["bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"],
        "operation": "append",
        "content_type": "dialogue",
        "role": "user",
        "message": "note",
        "metadata": {"k": [1, [2, 3]], "raw": {"$bytes": "AP8="}, "n": None},
        "token_count": 7,
        "created_at": "2026-01-02T03:04:05.678000+00:00",
        "edit_target": None,
        "reply_to": None,
        "generation_config": {"temperature": 0.5},
        "content_id": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
        "toolset_id": None,
        "content": {"text": "hi", "blob": {"$bytes": "eHk="}},
        "usage": {"input_tokens": 3},
    },
    "cli_message": {
        "role": "assistant",
        "content": "hello",
        "tool_calls": [{"id": "c", "name": "f", "arguments": {"a": 1}}],
        "parts": [
            {"type": "text", "text": "hello"},
            {"type": "image", "media_type": "image/png", "data": {"$bytes": "iVBORw=="}},
        ],
    },
    "cli_list": [
        "2026-01-02T03:04:05.678000+00:00",
        [1, {"$bytes": "YQ=="}],
        {"d": "2026-01-02T03:04:06+00:00"},
    ],
}


def _dump(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_outputs_pinned(name: str) -> None:
    assert _dump(_cases()[name]) == _dump(EXPECTED[name])


def test_each_supported_type() -> None:
    assert to_jsonable(b"\x00\xff") == {"$bytes": "AP8="}
    assert to_jsonable(T0) == "2026-01-02T03:04:05.678000+00:00"
    assert to_jsonable((1, (2, b"a"), [T1])) == [1, [2, {"$bytes": "YQ=="}], ["2026-01-02T03:04:06+00:00"]]
    assert to_jsonable({"x": (1,), 2: {"y": b""}}) == {
        "x": [1],
        2: {"y": {"$bytes": ""}},
    }  # keys kept as given
    for scalar in ("s", A, 3, 1.5, True, None):
        assert to_jsonable(scalar) is scalar
    assert to_jsonable(ToolCall(id="c", name="f", arguments={"b": b"1"})) == {
        "id": "c",
        "name": "f",
        "arguments": {"b": {"$bytes": "MQ=="}},
    }  # an attrs value: its fields in order, converted
    assert to_jsonable(Part(type="text", text="t")) == {"type": "text", "text": "t"}  # via its to_dict()
    assert to_jsonable(Message(role="user", content="hi")) == {"role": "user", "content": "hi"}


def test_keys_pick_attributes_and_properties_in_order() -> None:
    stats = ToolStats(
        tool_name="g", count=2, success=1, error=1, interrupted=0, pending=0, p50_ms=None, p95_ms=None
    )
    assert to_jsonable(stats, ["success_rate", "tool_name"]) == {"success_rate": 0.5, "tool_name": "g"}


def test_other_values_are_returned_unchanged() -> None:
    odd = {1, 2}
    assert to_jsonable(odd) is odd  # no error here (as before the merge): json.dumps rejects it
    with pytest.raises(TypeError):
        json.dumps(to_jsonable({"s": odd}))
