"""Message-level diff between two compiled contexts (what ``tractkv diff`` and ``Tract.diff`` show)."""

from __future__ import annotations

import difflib

from tractkv.engine.compile.state import CompileState
from tractkv.engine.content import TokenCounter
from tractkv.engine.values import ContextDiff, DiffEntry
from tractkv.store import Reader


def diff_states(reader: Reader, a: CompileState, b: CompileState, counter: TokenCounter) -> ContextDiff:
    """Message-level changes from the compiled context of ``a`` to that of ``b`` (placeholder results
    included: they are part of what compile returns)."""
    view_a, view_b = a.render(reader), b.render(reader)
    commits_a, commits_b = view_a.commit_ids(), view_b.commit_ids()
    matcher = difflib.SequenceMatcher(a=commits_a, b=commits_b, autojunk=False)
    entries: list[DiffEntry] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for offset in range(i2 - i1):
                before, after = view_a.message(i1 + offset), view_b.message(j1 + offset)
                if before != after:
                    entries.append(
                        DiffEntry(
                            change="modified",
                            commit_id=commits_a[i1 + offset],
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
                    commit_id=commits_a[i],
                    before=view_a.message(i),
                    after=None,
                    index_before=i,
                    index_after=None,
                )
            )
        for j in range(j1, j2):
            entries.append(
                DiffEntry(
                    change="added",
                    commit_id=commits_b[j],
                    before=None,
                    after=view_b.message(j),
                    index_before=None,
                    index_after=j,
                )
            )
    return ContextDiff(
        base=a.head,
        target=b.head,
        entries=tuple(entries),
        token_delta=view_b.total_tokens(counter) - view_a.total_tokens(counter),
    )
