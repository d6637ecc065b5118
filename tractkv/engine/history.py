"""History views: commit info, diffs between compiled contexts, reflog entries."""

from __future__ import annotations

import difflib
import time
from collections.abc import Iterator
from typing import Any

from tractkv.ids import ObjectId, is_object_id
from tractkv.model import Blob, Commit
from tractkv.store import Reader, Table, WriteBatch

from .content import content_type
from .results import CommitInfo, ContextDiff, DiffEntry, ReflogEntry, timestamp
from .state import CompileState, count_tokens
from .tokens import TokenCounter


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
        count = tokens if tokens is not None else count_tokens(data, counter)
        role = {"instruction": "system", "reasoning": "assistant"}.get(str(kind), data.get("role"))
    return CommitInfo(
        commit_hash=oid,
        parent_hashes=commit.parents,
        operation=commit.operation,
        content_type=kind,
        role=role,
        message=commit.message,
        metadata=commit.metadata,
        token_count=count,
        created_at=timestamp(commit.created_at),
        edit_target=commit.edit_target,
        response_to=commit.response_to,
        generation_config=commit.generation_config,
        content_hash=commit.content,
        tools_hash=commit.tools,
        content=data,
    )


def diff_states(reader: Reader, a: CompileState, b: CompileState) -> ContextDiff:
    """Message-level changes from the compiled context of ``a`` to that of ``b``."""
    view_a, view_b = a.render(reader), b.render(reader)
    matcher = difflib.SequenceMatcher(a=view_a.commits, b=view_b.commits, autojunk=False)
    entries: list[DiffEntry] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for offset in range(i2 - i1):
                before, after = view_a.messages[i1 + offset], view_b.messages[j1 + offset]
                if before != after:
                    entries.append(
                        DiffEntry(
                            change="modified",
                            commit_hash=view_a.commits[i1 + offset],
                            before=before,
                            after=after,
                            index_before=i1 + offset,
                            index_after=j1 + offset,
                        )
                    )
            continue
        for i in range(i1, i2):
            entries.append(
                DiffEntry(
                    change="removed",
                    commit_hash=view_a.commits[i],
                    before=view_a.messages[i],
                    after=None,
                    index_before=i,
                    index_after=None,
                )
            )
        for j in range(j1, j2):
            entries.append(
                DiffEntry(
                    change="added",
                    commit_hash=view_b.commits[j],
                    before=None,
                    after=view_b.messages[j],
                    index_before=None,
                    index_after=j,
                )
            )
    return ContextDiff(
        base=a.head, target=b.head, entries=tuple(entries), token_delta=view_b.tokens - view_a.tokens
    )


def log_ref_move(
    batch: WriteBatch,
    ref: str,
    old: ObjectId | None,
    new: ObjectId | None,
    operation: str,
    message: str,
    *,
    hard: bool = False,
    now_us: int | None = None,
) -> None:
    """Stage a reflog entry for a ref move (local history, never synced).

    ``now_us`` stamps it (µs since the epoch; default: the wall clock). A Tract passes its own clock, the one
    that stamps commits and that gc ages both by: an entry stamped by another clock would be aged wrongly.
    """
    entry: dict[str, Any] = {
        "old": old,
        "new": new,
        "op": operation,
        "msg": message,
        "ts": time.time_ns() // 1000 if now_us is None else now_us,
    }
    if hard:
        entry["hard"] = True
    batch.append_log(Table.REFLOG, ref.encode(), entry)


def iter_reflog(reader: Reader, ref: str) -> Iterator[ReflogEntry]:
    """A ref's reflog, newest first."""
    for seq, entry in reader.log_entries(Table.REFLOG, ref.encode(), reverse=True):
        yield _entry(ref, seq, entry)


def iter_all_reflogs(reader: Reader) -> Iterator[ReflogEntry]:
    """Every reflog entry of every ref (for gc)."""
    from tractkv import codec

    for key, value in reader.table_iter(Table.REFLOG):
        ref = key[:-9].decode()  # key = ref NUL seq(8 bytes)
        seq = int.from_bytes(key[-8:], "big")
        yield _entry(ref, seq, codec.loads(value))


def _entry(ref: str, seq: int, entry: dict[str, Any]) -> ReflogEntry:
    old, new = entry.get("old"), entry.get("new")
    return ReflogEntry(
        ref=ref,
        old=old if is_object_id(old) else None,
        new=new if is_object_id(new) else None,
        operation=str(entry.get("op", "")),
        message=str(entry.get("msg", "")),
        created_at=timestamp(int(entry.get("ts", 0))),
        hard=bool(entry.get("hard", False)),
        seq=seq,
    )
