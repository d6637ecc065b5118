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
from collections.abc import Callable
from typing import Any

import attrs

from tractkv.engine import open_session
from tractkv.engine.branches import HeadCounts, head_counts, summaries
from tractkv.engine.compile import CompileState, commit_info, diff_states
from tractkv.engine.content import ANNOTATION, TokenCounter, ToolCall, schema_name
from tractkv.engine.history import (
    HEADS,
    REMOTES,
    LaneLayout,
    first_parent_chain,
    is_ancestor,
    iter_log,
    read_head,
    resolve_revision,
    tag_tips,
)
from tractkv.engine.usage import (
    STATUSES,
    USAGE_LINK,
    ToolStats,
    ToolUsage,
    UsageNode,
    flatten,
    select_trees,
    usage_forest,
    usage_stats,
)
from tractkv.engine.values import ChildInfo, CommitInfo, CompiledContext, ContextDiff, ParentInfo, StatusInfo
from tractkv.errors import InvalidInput, ObjectNotFound, UnknownRevision
from tractkv.ids import ObjectId, is_object_id
from tractkv.model import Blob, Commit, ToolSchema, ToolSet
from tractkv.store import Reader, Store, Table

PAGE_COMMITS = 100  # commits per graph page
PAGE_GROUPS = 50  # messages (usage groups) per usage page
MAX_PAGE = 1000  # the largest page a request may ask for
SUMMARIES = 4096  # branch-head summaries kept (commit, message and token counts at a commit id)
FORCE_CHAIN = 10_000  # first-parent commits per branch searched for where a tool version was in force
FORCE_TIPS = 256  # branch tips whose tool-set runs are kept
SPAWN_TREES = 64  # spawn trees kept (by branch, tip and the refs: a new child or collapse is a new key)
ROW_COMMITS = 4096  # commits of graph pages kept with their CommitInfo (a commit id names immutable data)


@attrs.frozen(kw_only=True)
class GraphRow:
    """One commit of a graph page and the lanes drawn beside it.

    ``top`` lists (from-lane, to-lane) segments from the row's top edge to its middle, ``bottom`` those from
    the middle to the bottom edge; the commit's node sits in lane ``lane``. The lanes are the engine's
    layout (:class:`tractkv.engine.history.lanes.LaneRow`), the same the CLI's ``log --graph`` draws.
    """

    info: CommitInfo
    lane: int
    top: tuple[tuple[int, int], ...]
    bottom: tuple[tuple[int, int], ...]
    width: int
    tips: tuple[str, ...] = ()  # the branches and tags (full refs) at this commit, as `git log --decorate`


@attrs.frozen(kw_only=True)
class GraphPage:
    ref: str
    head: ObjectId | None
    current: str | None  # HEAD's branch ref (None when HEAD is detached)
    rows: tuple[GraphRow, ...]
    start: int
    limit: int
    more: bool
    parent: ParentInfo | None = None  # where this branch was spawned from (tractkv.engine.spawning)
    children: tuple[ChildInfo, ...] = ()  # the children spawned from it, open and collapsed


@attrs.frozen(kw_only=True)
class Annotation:
    commit: ObjectId  # the annotate commit
    target: ObjectId
    priority: str
    reason: str | None


@attrs.frozen(kw_only=True)
class CallView:
    """One tool call of an assistant message and the top-level executions it started."""

    call: ToolCall
    executions: tuple[UsageNode, ...]


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
    calls: tuple[CallView, ...] = ()  # the tool calls this commit's message makes, with their executions
    executions: tuple[UsageNode, ...] = ()  # the executions started by or answered in this commit
    usage_ref: str | None = None  # the branch whose history was searched for them (None: the commit's own)
    spawned: ParentInfo | None = None  # the commit is in a spawned child's history: where it was spawned from
    brought_back_by: ObjectId | None = None  # the commit of the parent branch that collapsed that child


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
    reruns: dict[
        str, tuple[ToolUsage, ...]
    ]  # a failed execution's id -> its re-runs, oldest first (whole history)
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


@attrs.frozen(kw_only=True)
class ForceRange:
    """A stretch of a branch's first-parent line where one version of a tool was in the tools in force."""

    version: int  # 1-based, as the tool page numbers versions
    ref: str
    first: ObjectId  # the oldest commit of the stretch
    last: ObjectId  # the newest
    commits: int
    at_tip: bool  # still in force at the branch's tip


@attrs.frozen(kw_only=True)
class ToolChange:
    """A tool that differs between two commits' tools in force (by name)."""

    name: str
    change: str  # added, removed, modified
    lines: tuple[tuple[str, str], ...]  # the schema's line diff (:func:`text_diff`)


@attrs.frozen(kw_only=True)
class DiffView:
    """Two commits and what changed from the first to the second: messages and tools."""

    a: CommitInfo
    b: CommitInfo
    context: ContextDiff  # the library's message-level diff (:func:`tractkv.engine.compile.diff.diff_states`)
    tools: tuple[ToolChange, ...]
    same_tools: int  # tools in force at both, unchanged


@attrs.frozen(kw_only=True)
class _Run:
    toolset: ObjectId | None
    first: ObjectId
    last: ObjectId
    commits: int


class Inspector:
    """Read-only queries over one store, shared by concurrent requests (compile states are cached)."""

    def __init__(self, store: Store, counter: TokenCounter | None = None) -> None:
        self.store = store
        # read-only: never writes, not even a checkpoint
        self.session = open_session(store, counter=counter, readonly=True)
        self.counter = self.session.counter
        self._lock = threading.Lock()  # the session's compile cache is not thread-safe
        self._summaries: OrderedDict[ObjectId | None, HeadCounts] = OrderedDict()
        self._runs: OrderedDict[ObjectId, tuple[tuple[_Run, ...], bool]] = OrderedDict()
        self._spawn_trees: OrderedDict[Any, tuple[ParentInfo | None, tuple[ChildInfo, ...]]] = OrderedDict()
        # graph pages: commit id -> (the commit, its CommitInfo once a row showed it); a live page refreshed
        # after one new commit reads that commit alone
        self._row_commits: OrderedDict[ObjectId, tuple[Commit, CommitInfo | None]] = OrderedDict()

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

    def current_branch(self) -> str | None:
        """HEAD's branch ref (the store's HEAD, as the CLI reads it), or None when HEAD is detached."""
        return read_head(self.store)[0]

    def branches(self) -> list[StatusInfo]:
        """Every branch's summary, as ``tractkv branch -v`` and ``Tract.branches()`` give it
        (:func:`tractkv.engine.branches.summaries`; no unborn branch), its counts kept by head."""
        return summaries(self.session, current=self.current_branch(), unborn=False, counts=self._head_counts)

    def _head_counts(self, head: ObjectId | None) -> HeadCounts:
        """:func:`~tractkv.engine.branches.head_counts` at a commit. A commit id names immutable history, so the
        answer is cached for good (bounded): a hub with many branches compiles each head once."""
        with self._lock:
            cached = self._summaries.get(head)
            if cached is not None:
                self._summaries.move_to_end(head)
                return cached
        state, _ = self._compiled(head)
        with self._lock:  # reads the state's view, which is not thread-safe
            counts = head_counts(self.session, self.store, state)
            self._summaries[head] = counts
            while len(self._summaries) > SUMMARIES:
                self._summaries.popitem(last=False)
        return counts

    # --- the commit graph ----------------------------------------------------------------------------

    def graph_page(self, ref: str, start: int = 0, limit: int = PAGE_COMMITS) -> GraphPage:
        """Rows ``start`` to ``start + limit`` of the branch's history, newest first (the walk from the tip
        is lazy, so a page costs what it and the pages before it read)."""
        start, limit = _bounds(start, limit)
        head = self.branch_head(ref)
        rows: list[GraphRow] = []
        more = False
        tips: dict[str, list[str]] = {}
        for name, value in (*self.refs().items(), *tag_tips(self.store)):  # as `git log --decorate` shows
            tips.setdefault(value, []).append(name)
        current = self.current_branch()
        if head is not None:
            layout = LaneLayout()
            with self.store.snapshot() as reader:
                get = self._cached_commits(reader)
                for index, (oid, commit) in enumerate(iter_log(reader, [head], get)):
                    if index >= start + limit:
                        more = True
                        break
                    if index < start:
                        layout.skip(oid, commit.parents)  # earlier pages move the lanes; no rows built
                        continue
                    row = layout.place(oid, commit.parents)
                    named = sorted(tips.get(oid, ()), key=lambda r: (r != current, r.startswith(REMOTES), r))
                    rows.append(
                        GraphRow(
                            info=self._row_info(reader, oid, commit),
                            lane=row.lane,
                            top=row.top,
                            bottom=row.bottom,
                            width=row.width,
                            tips=tuple(named),
                        )
                    )
        parent, children = self.spawn_tree(ref, head)
        return GraphPage(
            ref=ref,
            head=head,
            current=current,
            rows=tuple(rows),
            start=start,
            limit=limit,
            more=more,
            parent=parent,
            children=children,
        )

    def _cached_commits(self, reader: Reader) -> Callable[[ObjectId], Commit]:
        """A commit reader for a graph walk that keeps what it read (bounded, least recently used first)."""
        cache, lock = self._row_commits, self._lock

        def get(oid: ObjectId) -> Commit:
            with lock:
                hit = cache.get(oid)
                if hit is not None:
                    cache.move_to_end(oid)
                    return hit[0]
            commit = reader.get_commit(oid)
            with lock:
                cache.setdefault(oid, (commit, None))
                while len(cache) > ROW_COMMITS:
                    cache.popitem(last=False)
            return commit

        return get

    def _row_info(self, reader: Reader, oid: ObjectId, commit: Commit) -> CommitInfo:
        """A graph row's :class:`CommitInfo` (kept with the commit: it derives from immutable objects only)."""
        with self._lock:
            hit = self._row_commits.get(oid)
            if hit is not None and hit[1] is not None:
                return hit[1]
        info = commit_info(reader, oid, commit, self.counter)
        with self._lock:
            if oid in self._row_commits:
                self._row_commits[oid] = (commit, info)
        return info

    def spawn_tree(self, ref: str, head: ObjectId | None) -> tuple[ParentInfo | None, tuple[ChildInfo, ...]]:
        """Where a branch was spawned from and its children (open: local branches; collapsed: linked from its
        history). One walk of the history per (branch, tip, refs), cached (bounded)."""
        from tractkv.engine.spawning import spawn_tree

        key = (ref, head, tuple(sorted(self.store.iter_refs(HEADS))))
        with self._lock:
            cached = self._spawn_trees.get(key)
        if cached is not None:
            return cached
        name = ref[len(HEADS) :] if ref.startswith(HEADS) else None  # a tracking branch: collapsed only
        with self.store.snapshot() as reader:
            parent, kids = spawn_tree(reader, head, name)
            found = (parent, tuple(kids))
        with self._lock:
            self._spawn_trees[key] = found
            while len(self._spawn_trees) > SPAWN_TREES:
                self._spawn_trees.popitem(last=False)
        return found

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
            if head is not None and is_ancestor(reader, oid, head):
                for cid, c in iter_log(reader, [head]):
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
        calls: tuple[ToolCall, ...] = ()
        if oid in context.commit_ids:  # the commit's own message (an edit shows under its target)
            calls = context.messages[context.commit_ids.index(oid)].tool_calls
        usage_ref: str | None = ref
        trees: list[UsageNode] = []
        if calls or commit.links.get(USAGE_LINK):  # only these start or answer executions: one history walk
            usage_ref, trees = self._executions(oid, ref)
        return CommitView(
            info=info,
            links=dict(commit.links),
            tools=context.tools,
            context=context,
            annotations=tuple(annotations),
            message_annotations=message_annotations,
            usage_count=len(commit.links.get(USAGE_LINK, ())),
            ref=ref,
            calls=tuple(
                CallView(
                    call=c,
                    executions=tuple(
                        t for t in trees if t.usage.commit_id == oid and t.usage.tool_call_id == c.id
                    ),
                )
                for c in calls
            ),
            executions=tuple(trees),
            usage_ref=usage_ref,
            **self._child_of(oid),
        )

    def _child_of(self, oid: ObjectId) -> dict[str, Any]:
        """Whether ``oid`` is in a spawned child's history: its spawn relation (the nearest spawn commit on
        its first-parent chain) and, when the parent branch has collapsed the child, the commit that did."""
        from tractkv.engine.spawning import parent_at

        with self.store.snapshot() as reader:
            spawned = parent_at(reader, oid)
        if spawned is None:
            return {}
        back = None
        parent_ref = HEADS + spawned.branch if spawned.branch else None
        if parent_ref is not None and self.store.get_ref(parent_ref) is not None:
            _, kids = self.spawn_tree(parent_ref, self.branch_head(parent_ref))
            back = next((c.collapsed_by for c in kids if c.spawn_commit == spawned.spawn_commit), None)
        return {"spawned": spawned, "brought_back_by": back}

    def _executions(self, oid: ObjectId, ref: str | None) -> tuple[str | None, list[UsageNode]]:
        """The usage trees started by (an assistant commit's calls) or answered in (a tool result) ``oid``,
        found in the history of ``ref`` (default: HEAD's branch) when it contains the commit, else in the
        commit's own history; and the branch searched (None: the commit's own history)."""
        search = ref if ref is not None else self.current_branch()
        with self.store.snapshot() as reader:
            tip = None
            if search is not None and reader.get_ref(search) is not None:
                head = self.branch_head(search)
                if head is not None and is_ancestor(reader, oid, head):
                    tip = head
            if tip is None:
                search, tip = None, oid
            return search, select_trees(usage_forest(reader, tip), oid)

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
        reruns: dict[str, list[ToolUsage]] = {}  # "" gathers the executions that re-ran nothing
        for u in every:  # in history order: a re-run comes after what it re-ran
            reruns.setdefault(u.rerun_of or "", []).append(u)
        return UsagePage(
            ref=ref,
            head=head,
            groups=tuple(out),
            stats=stats,
            tool_names=tuple(sorted({u.tool_name for u in every})),
            matching=matching,
            reruns={k: tuple(v) for k, v in reruns.items() if k},
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

    def tool_in_force(self, versions: list[ToolVersion]) -> tuple[list[ForceRange], bool]:
        """Where each version (of one tool, as :meth:`tool_versions` lists them) was in the tools in force:
        the stretches of every branch's first-parent line, oldest first by version then branch. Also whether
        some branch is longer than the ``FORCE_CHAIN`` commits searched (then only its newest are)."""
        number = {v.oid: i for i, v in enumerate(versions, start=1)}
        out: list[ForceRange] = []
        cut = False
        toolsets: dict[ObjectId | None, frozenset[ObjectId]] = {None: frozenset()}
        for ref, value in self.refs().items():
            if not is_object_id(value):
                continue
            runs, clipped = self._toolset_runs(ObjectId(value))
            cut = cut or clipped
            open_: dict[ObjectId, ForceRange] = {}  # version id -> its stretch reaching the previous run
            for run in runs:
                if run.toolset is not None and run.toolset not in toolsets:
                    found = self.store.get(run.toolset)
                    toolsets[run.toolset] = (
                        frozenset(found.tools) if isinstance(found, ToolSet) else frozenset()
                    )
                present = toolsets[run.toolset] & number.keys()
                for oid in list(open_):
                    if oid not in present:
                        out.append(open_.pop(oid))
                for oid in present:
                    before = open_.get(oid)
                    open_[oid] = ForceRange(
                        version=number[oid],
                        ref=ref,
                        first=before.first if before else run.first,
                        last=run.last,
                        commits=(before.commits if before else 0) + run.commits,
                        at_tip=False,
                    )
            out += [attrs.evolve(r, at_tip=True) for r in open_.values()]
        out.sort(key=lambda r: (r.version, r.ref.startswith(REMOTES), r.ref))
        return out, cut

    def _toolset_runs(self, tip: ObjectId) -> tuple[tuple[_Run, ...], bool]:
        """The tool set in force along the first-parent line to ``tip`` (at most ``FORCE_CHAIN`` commits,
        oldest first) as runs of commits sharing one; and whether the line was longer. A commit with one
        parent takes its own tool set, else its parent's (:mod:`tractkv.engine.compile.state`); a merge's, and the
        first searched commit's when the line was cut, come from the compile state. Cached by tip."""
        with self._lock:
            cached = self._runs.get(tip)
            if cached is not None:
                self._runs.move_to_end(tip)
                return cached
        chain: list[tuple[ObjectId, Commit]] = []
        with self.store.snapshot() as reader:
            for oid, commit in first_parent_chain(reader, tip):
                if len(chain) == FORCE_CHAIN:
                    break
                chain.append((oid, commit))
        clipped = bool(chain) and bool(chain[-1][1].parents)
        runs: list[_Run] = []
        current: ObjectId | None = None
        for index, (oid, commit) in enumerate(reversed(chain)):
            if len(commit.parents) > 1 or (index == 0 and clipped):
                current = self._compiled(oid)[0].tools
            elif commit.tools is not None:
                current = commit.tools
            if runs and runs[-1].toolset == current:
                runs[-1] = attrs.evolve(runs[-1], last=oid, commits=runs[-1].commits + 1)
            else:
                runs.append(_Run(toolset=current, first=oid, last=oid, commits=1))
        result = (tuple(runs), clipped)
        with self._lock:
            self._runs[tip] = result
            while len(self._runs) > FORCE_TIPS:
                self._runs.popitem(last=False)
        return result

    # --- the difference between two commits ----------------------------------------------------------

    def resolve_revision(self, rev: str) -> ObjectId:
        """A revision as the CLI takes it (an id or prefix, a branch, ``HEAD``, ``main~2``...) as a commit id;
        ``HEAD`` is the store's."""
        return resolve_revision(self.store, rev)

    def diff(self, a: str, b: str) -> DiffView:
        """What changed from revision ``a`` to ``b``: the messages of their compiled contexts (the library's
        diff, as ``tractkv diff`` shows it) and the tools in force, by name."""
        oid_a, oid_b = self.resolve_revision(a), self.resolve_revision(b)
        with self._lock:  # a state's rendered view is built lazily, and requests share the states
            session = self.session
            # a copy: compiling ``b`` may extend the cached state of its ancestor ``a`` in place
            state_a = session.compiler.state_at(session.reader(), oid_a).copy()
            state_b = session.compiler.state_at(session.reader(), oid_b)
            changes = diff_states(self.store, state_a, state_b, self.counter)
            tools_a, tools_b = session.tools_of(state_a.tools), session.tools_of(state_b.tools)
        before = {schema_name(t): t for t in tools_a}
        after = {schema_name(t): t for t in tools_b}
        tools: list[ToolChange] = []
        for name in [*before, *(n for n in after if n not in before)]:
            old, new = before.get(name), after.get(name)
            if old == new:
                continue
            change = "added" if old is None else "removed" if new is None else "modified"
            lines = text_diff(_schema_text(old) if old else "", _schema_text(new) if new else "")
            tools.append(ToolChange(name=name, change=change, lines=tuple(lines)))
        info_a = commit_info(self.store, oid_a, self.store.get_commit(oid_a), self.counter)
        info_b = commit_info(self.store, oid_b, self.store.get_commit(oid_b), self.counter)
        same = sum(1 for name, tool in after.items() if before.get(name) == tool)
        return DiffView(a=info_a, b=info_b, context=changes, tools=tuple(tools), same_tools=same)


def tool_diff(old: ToolVersion, new: ToolVersion) -> list[tuple[str, str]]:
    """A line diff of two versions' JSON (:func:`text_diff`)."""
    return text_diff(old.text, new.text)


def text_diff(old: str, new: str) -> list[tuple[str, str]]:
    """A unified line diff: (kind, line) with kind ``add``, ``del``, ``hunk`` or ``same``."""
    out = []
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3)
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
