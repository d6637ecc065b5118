"""A stored commit as users see it: :class:`~tractkv.engine.values.records.CommitInfo` (role, content, tokens,
usage)."""

from __future__ import annotations

from typing import Any

import attrs

from tractkv.engine.compile.state import count_tokens
from tractkv.engine.content import TokenCounter, content_type
from tractkv.engine.values import CommitInfo, timestamp
from tractkv.ids import ObjectId
from tractkv.model import Blob, Commit
from tractkv.store import Reader


def commit_info(
    reader: Reader,
    oid: ObjectId,
    commit: Commit,
    counter: TokenCounter,
    data: Any = None,
    *,
    tokens: int | None = None,
) -> CommitInfo:
    """A :class:`CommitInfo` for a stored commit (reads its content blob unless ``data`` is given; counts its
    tokens unless ``tokens`` is given, as the session does for a commit its compile state just counted)."""
    if data is None and commit.content is not None:
        blob = reader.get(commit.content)
        data = blob.data if isinstance(blob, Blob) else None
    kind = content_type(data)
    role = None
    count = 0
    if isinstance(data, dict) and kind in ("instruction", "dialogue", "reasoning", "artifact", "freeform"):
        count = tokens if tokens is not None else count_tokens(data, counter, _media_reader(reader))
        role = {"instruction": "system", "reasoning": "assistant"}.get(str(kind), data.get("role"))
    return CommitInfo(
        commit_id=oid,
        parent_ids=commit.parents,
        operation=commit.operation,
        content_type=kind,
        role=role,
        message=commit.message,
        metadata=commit.metadata,
        token_count=count,
        created_at=timestamp(commit.created_at),
        edit_target=commit.edit_target,
        reply_to=commit.reply_to,
        generation_config=commit.generation_config,
        content_id=commit.content,
        toolset_id=commit.tools,
        content=data,
        usage=usage_of(commit.metadata),
    )


def text_commit_info(
    oid: ObjectId, commit: Commit, data: dict[str, Any], role: str, tokens: int
) -> CommitInfo:
    """:func:`commit_info` of a plain-text append the write path just made (``data`` its dialogue payload of
    ``role``, ``tokens`` its count; no message, metadata nor generation config), without looking again. The
    same value ``CommitInfo(...)`` makes (CommitInfo has no validator nor converter), its slots set directly:
    one per append."""
    info = _new(CommitInfo)
    _i_commit_id(info, oid)
    _i_parent_ids(info, commit.parents)
    _i_operation(info, commit.operation)
    _i_content_type(info, "dialogue")
    _i_role(info, role)
    _i_message(info, None)
    _i_metadata(info, None)
    _i_token_count(info, tokens)
    _i_created_at(info, timestamp(commit.created_at))
    _i_edit_target(info, None)
    _i_reply_to(info, None)
    _i_generation_config(info, None)
    _i_content_id(info, commit.content)
    _i_toolset_id(info, commit.tools)
    _i_content(info, data)
    _i_usage(info, None)
    return info


_new = object.__new__
# CommitInfo's slot setters in field order (a field added to CommitInfo fails this unpacking at import;
# tests/engine/test_commit_info.py compares text_commit_info with commit_info field by field).
(
    _i_commit_id,
    _i_parent_ids,
    _i_operation,
    _i_content_type,
    _i_role,
    _i_message,
    _i_metadata,
    _i_token_count,
    _i_created_at,
    _i_edit_target,
    _i_reply_to,
    _i_generation_config,
    _i_content_id,
    _i_toolset_id,
    _i_content,
    _i_usage,
) = (CommitInfo.__dict__[field.name].__set__ for field in attrs.fields(CommitInfo))


def usage_of(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    """The token usage a commit records (``metadata["usage"]``, written by record_response and generate), or
    None when its metadata has no usage dict."""
    usage = metadata.get("usage") if isinstance(metadata, dict) else None
    return usage if isinstance(usage, dict) else None


def _media_reader(reader: Reader) -> Any:
    def load(oid: str) -> bytes | None:
        blob = reader.get(ObjectId(oid))
        return blob.data if isinstance(blob, Blob) and isinstance(blob.data, bytes) else None

    return load
