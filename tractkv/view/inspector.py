"""What the viewer shows, read from a store: branches, a paged commit graph, a commit with its compiled
context, tool usages and tool versions. Plain data (no HTML, no HTTP); :mod:`tractkv.view.pages` renders it.

Read-only: nothing here writes to the store (compile states come from checkpoints and replay in memory; no
checkpoint is saved), so the viewer can watch a store an agent is writing in another process.
"""

from __future__ import annotations

import difflib
import json
import threading
from collections import OrderedDict
from datetime import datetime
from typing import Any

import attrs

from tractkv.engine import graph
from tractkv.engine.commit_info import commit_info
from tractkv.engine.content import ANNOTATION
from tractkv.engine.lanes import LaneLayout
from tractkv.engine.records import CommitInfo, CompiledContext, timestamp
from tractkv.engine.refs import HEADS, REMOTES
from tractkv.engine.session import Session
from tractkv.engine.state import CompileState
from tractkv.engine.tokens import TokenCounter
from tractkv.engine.usage_rows import USAGE_LINK
from tractkv.engine.usage_stats import ToolStats, usage_stats
from tractkv.engine.usage_tree import STATUSES, UsageNode, flatten, usage_forest
from tractkv.errors import InvalidInput, ObjectNotFound, UnknownRevision
from tractkv.ids import ObjectId, is_object_id
from tractkv.model import Blob, Commit, ToolSchema
from tractkv.store import Reader, Store, Table

PAGE_COMMITS = 100  # commits per graph page
PAGE_GROUPS = 50  # messages (usage groups) per usage page
MAX_PAGE = 1000  # the largest page a request may ask for
SUMMARIES = 4096  # branch-head summaries kept (commit, message and token counts at a commit id)


@attrs.frozen(kw_only=True)
class BranchSummary:
    ref: str  # refs/heads/<name> or refs/remotes/<remote>/<name>
    name: str
    is_remote: bool
    head: ObjectId | None
    commit_count: int
    message_count: int
    token_count: int
    last_activity: datetime | None


@attrs.frozen(kw_only=True)
class GraphRow:
    """One commit of a graph page and the lanes drawn beside it.

    ``top`` lists (from-lane, to-lane) segments from the row's top edge to its middle, ``bottom`` those from
    the middle to the bottom edge; the commit's node sits in lane ``lane``. The lanes are the engine's
    layout (:class:`tractkv.engine.lanes.LaneRow`), the same the CLI's ``log --graph`` draws.
    """

    info: CommitInfo
    lane: int
    top: tuple[tuple[int, int], ...]
    bottom: tuple[tuple[int, int], ...]
    width: int


@attrs.frozen(kw_only=True)
class GraphPage:
    ref: str
    head: ObjectId | None
    rows: tuple[GraphRow, ...]
    start: int
    limit: int
    more: bool


@attrs.frozen(kw_only=True)
class Annotation:
    commit: ObjectId  # the annotate commit
    target: ObjectId
    priority: str
    reason: str | None


@attrs.frozen(kw_only=True)
class CommitView:
    info: CommitInfo
    links: dict[str, tuple[ObjectId, ...]]
    tools: tuple[dict[str, Any], ...]
    context: CompiledContext
    annotations: tuple[Annotation, ...]  # annotations of this commit's message (in the branch's history)
    message_annotations: dict[ObjectId, Annotation]  # message commit -> its annotation, in the context
    usage_count: int
    ref: str | None


@attrs.frozen(kw_only=True)
class UsageGroup:
    """The top-level usages started by one assistant message (``commit`` None: not tied to a commit)."""

    commit: ObjectId | None
    info: CommitInfo | None
    roots: tuple[UsageNode, ...]


@attrs.frozen(kw_only=True)
class UsagePage:
    ref: str
    head: ObjectId | None
    groups: tuple[UsageGroup, ...]
    stats: dict[str, ToolStats]
    tool_names: tuple[str, ...]
    matching: frozenset[str]  # usage ids that match the filter (every shown one when there is no filter)
    filtered: bool  # a tool or status filter is applied
    start: int
    limit: int
    more: bool
    total_groups: int


@attrs.frozen(kw_only=True)
class ToolVersion:
    oid: ObjectId
    schema: dict[str, Any]
    text: str  # the schema as indented JSON with sorted keys (what the diff compares)


class Inspector:
    """Read-only queries over one store, shared by concurrent requests (compile states are cached)."""

    def __init__(self, store: Store, counter: TokenCounter | None = None) -> None:
        self.store = store
        self.session = Session(
            store, counter=counter, readonly=True
        )  # can never write, not even a checkpoint
        self.counter = self.session.counter
        self._lock = threading.Lock()  # the session's compile cache is not thread-safe
        self._summaries: OrderedDict[ObjectId, tuple[int, int, int, int | None]] = OrderedDict()

    def _compiled(self, oid: ObjectId | None) -> tuple[CompileState, CompiledContext]:
        """The (shared, read-only) compile state at ``oid`` and its context. Under the lock: the compiler's
        cache and a state's lazily rendered view are not thread-safe, and requests run in a thread pool."""
        with self._lock:
            return self.session.compiled_at(oid)

    # --- refs ----------------------------------------------------------------------------------------

    def refs(self) -> dict[str, str]:
        """Every branch and remote-tracking branch: ref name -> head id."""
        out = dict(self.store.iter_refs(HEADS))
        out.update(self.store.iter_refs(REMOTES))
        return out

    def branch_head(self, ref: str) -> ObjectId | None:
        if not ref.startswith((HEADS, REMOTES)) or ref in (HEADS, REMOTES):
            raise InvalidInput(f"{ref!r} is not a branch (refs/heads/...) or remote-tracking branch")
        value = self.store.get_ref(ref)
        if value is None:
            raise UnknownRevision(ref)
        return ObjectId(value) if is_object_id(value) else None

    def branches(self) -> list[BranchSummary]:
        out = []
        for ref, value in self.refs().items():
            head = ObjectId(value) if is_object_id(value) else None
            commits, messages, tokens, last = self._head_summary(head)
            remote = ref.startswith(REMOTES)
            out.append(
                BranchSummary(
                    ref=ref,
                    name=ref[len(REMOTES if remote else HEADS) :],
                    is_remote=remote,
                    head=head,
                    commit_count=commits,
                    message_count=messages,
                    token_count=tokens,
                    last_activity=timestamp(last) if last is not None else None,
                )
            )
        out.sort(key=lambda b: (b.is_remote, b.name))
        return out

    def _head_summary(self, head: ObjectId | None) -> tuple[int, int, int, int | None]:
        """(commits, messages, tokens, created_at) at a commit. A commit id names immutable history, so
        the answer is cached for good (bounded): a hub with many branches compiles each head once."""
        if head is None:
            return 0, 0, 0, None
        with self._lock:
            cached = self._summaries.get(head)
            if cached is not None:
                self._summaries.move_to_end(head)
                return cached
        state, context = self._compiled(head)
        summary = (
            state.commit_count,
            len(context.messages),
            context.token_count,
            self.store.get_commit(head).created_at,
        )
        with self._lock:
            self._summaries[head] = summary
            while len(self._summaries) > SUMMARIES:
                self._summaries.popitem(last=False)
        return summary

    # --- the commit graph ----------------------------------------------------------------------------

    def graph_page(self, ref: str, start: int = 0, limit: int = PAGE_COMMITS) -> GraphPage:
        """Rows ``start`` to ``start + limit`` of the branch's history, newest first (the walk from the tip
        is lazy, so a page costs what it and the pages before it read)."""
        start, limit = _bounds(start, limit)
        head = self.branch_head(ref)
        rows: list[GraphRow] = []
        more = False
        if head is not None:
            layout = LaneLayout()
            with self.store.snapshot() as reader:
                for index, (oid, commit) in enumerate(graph.iter_log(reader, [head])):
                    if index >= start + limit:
                        more = True
                        break
                    if index < start:
                        layout.skip(oid, commit.parents)  # earlier pages move the lanes; no rows built
                        continue
                    row = layout.place(oid, commit.parents)
                    info = commit_info(reader, oid, commit, self.counter)
                    rows.append(
                        GraphRow(info=info, lane=row.lane, top=row.top, bottom=row.bottom, width=row.width)
                    )
        return GraphPage(ref=ref, head=head, rows=tuple(rows), start=start, limit=limit, more=more)

    # --- one commit ----------------------------------------------------------------------------------

    def resolve_commit(self, rev: str) -> ObjectId:
        if is_object_id(rev):
            oid = ObjectId(rev)
        else:
            found = self.store.resolve_prefix(rev, kind="commit")
            if len(found) != 1:
                raise UnknownRevision(rev)
            oid = found[0]
        if not self.store.has(oid):
            raise UnknownRevision(rev)
        return oid

    def commit(self, rev: str, ref: str | None = None) -> CommitView:
        """A commit, the tools in force at it and the context compiled at it. With ``ref`` (a branch that
        contains it), the annotations made on that branch after the commit are found too."""
        oid = self.resolve_commit(rev)
        reader = self.store
        commit = reader.get_commit(oid)
        info = commit_info(reader, oid, commit, self.counter)
        state, context = self._compiled(oid)
        message_annotations = {
            slot.commit: ann
            for slot in state.slots
            if slot.annotation is not None and (ann := self._annotation(reader, slot.annotation)) is not None
        }
        annotations: list[Annotation] = []
        if ref is not None:
            head = self.branch_head(ref)
            if head is not None and graph.is_ancestor(reader, oid, head):
                for cid, c in graph.iter_log(reader, [head]):
                    if cid == oid:
                        break
                    if c.operation == "annotate" and c.edit_target == oid:
                        found = self._annotation(reader, cid)
                        if found is not None:
                            annotations.append(found)
        if oid in message_annotations and all(
            a.commit != message_annotations[oid].commit for a in annotations
        ):
            annotations.append(message_annotations[oid])
        return CommitView(
            info=info,
            links=dict(commit.links),
            tools=context.tools,
            context=context,
            annotations=tuple(annotations),
            message_annotations=message_annotations,
            usage_count=len(commit.links.get(USAGE_LINK, ())),
            ref=ref,
        )

    @staticmethod
    def _annotation(reader: Reader, oid: ObjectId) -> Annotation | None:
        commit = reader.get(oid)
        if not isinstance(commit, Commit) or commit.content is None or commit.edit_target is None:
            return None
        blob = reader.get(commit.content)
        data = blob.data if isinstance(blob, Blob) else None
        if not isinstance(data, dict) or data.get("type") != ANNOTATION:
            return None
        reason = data.get("reason")
        return Annotation(
            commit=oid,
            target=commit.edit_target,
            priority=str(data.get("priority")),
            reason=str(reason) if reason is not None else None,
        )

    # --- tool usages ---------------------------------------------------------------------------------

    def usages(
        self,
        ref: str,
        *,
        tool: str | None = None,
        status: str | None = None,
        commit: str | None = None,
        start: int = 0,
        limit: int = PAGE_GROUPS,
    ) -> UsagePage:
        """The usage trees of a branch grouped by the message that started them, newest message first,
        paged by message. A filter keeps the trees with a matching usage at any depth (``matching`` marks
        which); statistics always cover the whole history."""
        if status is not None and status not in STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
        start, limit = _bounds(start, limit)
        head = self.branch_head(ref)
        commit_id = self.resolve_commit(commit) if commit else None
        with self.store.snapshot() as reader:
            roots = usage_forest(reader, head)
            every = flatten(roots)
            stats = usage_stats(every)

            matching = frozenset(
                u.id
                for u in every
                if (tool is None or u.tool_name == tool) and (status is None or u.status == status)
            )
            kept = [
                r
                for r in roots
                if (commit_id is None or commit_id in (r.usage.commit_id, r.usage.result_commit))
                and any(u.id in matching for _, u in r.walk())
            ]
            groups: dict[ObjectId | None, list[UsageNode]] = {}
            for root in kept:
                groups.setdefault(root.usage.commit_id, []).append(root)
            ordered = list(reversed(groups.items()))  # newest message first
            page = ordered[start : start + limit]
            out = []
            for cid, members in page:
                info = None
                if cid is not None:
                    c = reader.get(cid)
                    if isinstance(c, Commit):
                        info = commit_info(reader, cid, c, self.counter)
                out.append(UsageGroup(commit=cid, info=info, roots=tuple(members)))
        return UsagePage(
            ref=ref,
            head=head,
            groups=tuple(out),
            stats=stats,
            tool_names=tuple(sorted({u.tool_name for u in every})),
            matching=matching,
            filtered=tool is not None or status is not None,
            start=start,
            limit=limit,
            more=start + limit < len(ordered),
            total_groups=len(ordered),
        )

    def usage_fingerprint(self) -> tuple[tuple[bytes, bytes], ...]:
        """The local usage table's rows (running, interrupted and awaiting-link executions): a change here
        is a tool starting or finishing in a process that shares this store."""
        return tuple(self.store.table_iter(Table.USAGE))

    # --- tool definitions ----------------------------------------------------------------------------

    def tool_names(self) -> list[tuple[str, int]]:
        """(name, number of stored versions), by name."""
        return [(name, len(self.store.tool_versions(name))) for name in self.store.tool_names()]

    def tool_versions(self, name: str) -> list[ToolVersion]:
        out = []
        for oid in self.store.tool_versions(name):
            tool = self.store.get(oid)
            if isinstance(tool, ToolSchema):
                schema = dict(tool.schema)
                out.append(ToolVersion(oid=oid, schema=schema, text=_schema_text(schema)))
        if not out:
            raise ObjectNotFound(f"tool {name!r}")
        return out


def tool_diff(old: ToolVersion, new: ToolVersion) -> list[tuple[str, str]]:
    """A line diff of two versions' JSON: (kind, line) with kind ``add``, ``del``, ``hunk`` or ``same``."""
    out = []
    lines = difflib.unified_diff(old.text.splitlines(), new.text.splitlines(), lineterm="", n=3)
    for line in lines:
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")
        out.append((kind, line))
    return out


def _schema_text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False)


def _bounds(start: int, limit: int) -> tuple[int, int]:
    if start < 0 or not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(f"start must be >= 0 and limit between 1 and {MAX_PAGE}")
    return start, limit
