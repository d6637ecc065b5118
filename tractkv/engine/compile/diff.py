"""Diff between two compiled contexts (what ``tractkv diff`` and ``Tract.diff`` show): the messages added,
removed and modified, and the tool set's changes (tools added, removed, or given another schema, by name:
:func:`tool_changes`)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from tractkv.engine.compile.compiler import load_tools
from tractkv.engine.compile.state import CompileState
from tractkv.engine.content import TokenCounter, schema_name
from tractkv.engine.values import ContextDiff, DiffEntry, ToolChange
from tractkv.store import Reader


def tool_changes(
    before: Iterable[Mapping[str, Any]], after: Iterable[Mapping[str, Any]]
) -> tuple[ToolChange, ...]:
    """The changes from one list of tool schemas to another, by tool name: ``removed`` and ``changed`` in the
    order of ``before``, then ``added`` in the order of ``after``. A schema given in another key order is the
    same schema (identity is the canonical form, as for stored tools); a reordering of the tools alone is no
    change."""
    old = {schema_name(s): dict(s) for s in before}
    new = {schema_name(s): dict(s) for s in after}
    out: list[ToolChange] = []
    for name, schema in old.items():
        if name not in new:
            out.append(ToolChange(change="removed", name=name, before=schema, after=None))
        elif new[name] != schema:  # dict equality ignores key order
            out.append(ToolChange(change="changed", name=name, before=schema, after=new[name]))
    out.extend(
        ToolChange(change="added", name=name, before=None, after=schema)
        for name, schema in new.items()
        if name not in old
    )
    return tuple(out)


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
        tools=()
        if a.tools == b.tools
        else tool_changes(load_tools(reader, a.tools), load_tools(reader, b.tools)),
    )
