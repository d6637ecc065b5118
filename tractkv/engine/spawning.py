"""Spawn and collapse: child contexts on their own branches, and their results folded back into the parent.

**Spawn** (:func:`plan_spawn`, :func:`write_spawn`) starts a new branch of the same store with one ``spawn``
commit: no content (it never becomes a message), ``metadata["spawn"]`` = ``{"purpose", "branch", "inherit",
"parent_branch"}`` (the child's and parent's branch names when it was made) and ``links["parent"]`` = the
parent's HEAD commit (absent when the parent had no commit yet). It is an ordinary immutable commit, so the
relation syncs with the child's history. What the child's context starts as depends on ``inherit``:

* ``full``: the spawn commit's parent is the parent's HEAD: the child shares the parent's whole history and
  compiles exactly what the parent compiles.
* ``snapshot``: the spawn commit is a root; each message of the parent's compiled context is appended after it
  (the same content blobs: nothing is stored twice), so the child compiles the same messages with a history of
  its own. Placeholder results compile repaired them with are not copied (the child's compile repairs the
  same calls the same way); priorities (``pinned``) are not copied.
* ``select``: as ``snapshot``, with only the messages ``select(message)`` keeps. The predicate receives each
  compiled :class:`~tractkv.engine.content.payload.Message` except tool results, which go with the call they answer
  (kept when their assistant message is kept), so a selection is always provider-valid.
* ``none``: the spawn commit is a root and the child's context is empty.

The child's tool set: with ``tools=True`` the spawn commit links the parent's tool set (the child's context
offers the parent's tools); otherwise the child starts with none (a ``full`` child whose history has tools
gets an empty tool set linked). The default branch name is ``<parent branch>.spawn/<slug of purpose>``
(``-2``, ``-3``... when taken; ``detached.spawn/...`` from a detached HEAD).

**Collapse** (:func:`plan_collapse`, :func:`commit_collapse`) appends one user message to the parent: the
given text, or a model's summary of the child's compiled context. The commit's ``links["child"]`` names the
child's head, so every transfer (push, fetch, clone, bundle, S3), gc and fsck follow it: the child's whole
history travels and lives with the parent's. In the same transaction the child's branch is deleted (compare-
and-swap from the head that was collapsed: a child that moved on meanwhile is :class:`ConcurrentUpdate`,
nothing written); its history stays reachable through the link, for ``compile(at=<child head>)``, ``log`` and
the viewer. A collapse is refused while the parent's context ends with tool calls waiting for results (a user
message there would cut a tool turn).

**Relations** (:func:`children`, :func:`parent_of`) are read from history only, so a store that received the
branches by sync lists the same ones. A branch's spawn commit is the nearest ``spawn`` commit on its first-
parent chain. The children of branch *B* are (a) the children whose heads *B*'s history links, through a
collapse (``links["child"]``) or through a tool result's usage records (``heads``: a ``run_child`` whose
answer came back as the tool result), state ``collapsed``; (b) the local branches whose spawn commit names
*B* as ``parent_branch`` and that were not collapsed, state ``open``. A ``full`` child's history up to its
spawn commit is its parent's: what that part links is the parent's children, not the child's. Cost: one walk
of *B*'s history plus one first-parent walk per branch (memoized, so shared history is read once), in one read
transaction, reading only the fields the walk needs of each commit (:func:`~tractkv.engine.compile.relations.peek`);
both walks stop at a commit with a sound relation row (a local cache written with compile checkpoints,
:mod:`tractkv.engine.compile.relations`), so they read only the commits made since the last checkpoint.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import attrs

from tractkv.engine.compile import SpawnIndex, history_marks
from tractkv.engine.content import Message, content_blob, put_toolset
from tractkv.engine.history import HEADS, branch_name, branch_ref, check_branch_name, log_ref_move
from tractkv.engine.session import Session, Tip
from tractkv.engine.values import ChildInfo, CommitInfo, ParentInfo, timestamp
from tractkv.errors import BranchExists, InvalidInput, NoLLMConfigured, ObjectNotFound
from tractkv.ids import ObjectId
from tractkv.model import Blob, Commit
from tractkv.store import Reader, WriteBatch

if TYPE_CHECKING:
    from tractkv.engine.compile import CompileState

SPAWN = "spawn"  # the operation of a spawn commit
SPAWN_META = "spawn"  # its metadata key
PARENT_LINK = "parent"  # a spawn commit's link to the parent's HEAD when it was made
CHILD_LINK = "child"  # a collapse commit's link to the child's head
COLLAPSE_META = "collapse"  # a collapse commit's metadata key
USAGES_LINK = "usages"
INHERIT = ("snapshot", "full", "none")
MAX_NAME_TRIES = 1000  # bounded search for a free default branch name
MAX_PURPOSE = 2000  # characters of a purpose

COLLAPSE_INSTRUCTIONS = (
    "This conversation is a sub-agent's work on a task it was given. Report its outcome for the agent that "
    "delegated the task: the answer or result, the facts and decisions it rests on, and anything left open. "
    "Be concise."
)


# --- spawn ---------------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SpawnPlan:
    """What :func:`write_spawn` commits on the child's branch."""

    branch: str
    purpose: str
    inherit: str
    parent_branch: str | None
    parent_head: ObjectId | None
    blobs: tuple[ObjectId, ...]  # message blobs appended after the spawn commit (snapshot, select)
    toolset: ObjectId | None  # the parent's tool set to link (tools=True)
    drop_tools: bool  # link an empty tool set (a full child of a history with tools, tools=False)


def check_purpose(purpose: object) -> str:
    if not isinstance(purpose, str) or not purpose.strip():
        raise InvalidInput("spawn needs a purpose: a non-empty string saying what the child is for")
    if len(purpose) > MAX_PURPOSE:
        raise InvalidInput(f"a purpose is at most {MAX_PURPOSE} characters")
    return purpose


def plan_spawn(
    session: Session,
    purpose: str,
    inherit: str = "snapshot",
    select: Callable[[Message], object] | None = None,
    tools: bool = False,
    branch: str | None = None,
) -> SpawnPlan:
    """Check the arguments and read what the child starts with (see the module doc); nothing is written."""
    session.check_writes("spawn", in_batch=False)
    check_purpose(purpose)
    if inherit not in INHERIT:
        raise InvalidInput(f"inherit must be snapshot, full or none, not {inherit!r}")
    if select is not None and not callable(select):
        raise InvalidInput("select must be a callable taking a compiled message and returning a bool")
    if select is not None and inherit != "snapshot":
        raise InvalidInput("select picks messages of a snapshot: use it with inherit='snapshot'")
    if not isinstance(tools, bool):
        raise InvalidInput("tools must be True or False")
    reader = session.reader()
    store = session.store
    if branch is None:
        branch = _default_name(store, session.current_branch, purpose)
    else:
        check_branch_name(branch)
        if branch_ref(branch) == session.branch_ref:
            raise InvalidInput(
                f"a child cannot be spawned onto the current branch {branch!r}: it needs a new branch"
            )
        if store.get_ref(branch_ref(branch)) is not None:
            raise BranchExists(branch)
    head = session.head_commit(reader)
    state = session.head_state(reader)
    blobs: tuple[ObjectId, ...] = ()
    if inherit == "snapshot" and head is not None:
        blobs = _snapshot_blobs(session, state, select)
    return SpawnPlan(
        branch=branch,
        purpose=purpose,
        inherit=inherit,
        parent_branch=session.current_branch,
        parent_head=head,
        blobs=blobs,
        toolset=state.tools if tools else None,
        drop_tools=not tools and inherit == "full" and state.tools is not None,
    )


def _default_name(store: Reader, parent: str | None, purpose: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", purpose.lower()).strip("-")[:40].strip("-") or "child"
    base = f"{parent or 'detached'}.spawn/{slug}"
    for n in range(1, MAX_NAME_TRIES + 1):
        name = base if n == 1 else f"{base}-{n}"
        if store.get_ref(branch_ref(name)) is None:
            return check_branch_name(name)
    raise InvalidInput(
        f"no free branch name for this child ({base}-N taken up to {MAX_NAME_TRIES}); pass branch="
    )


def _snapshot_blobs(
    session: Session, state: CompileState, select: Callable[[Message], object] | None
) -> tuple[ObjectId, ...]:
    """The content blobs of the compiled messages (those ``select`` keeps), in context order."""
    view = state.render(session.reader())
    out: list[ObjectId] = []
    kept_calls: set[str] = set()
    for message, commit in view.originals():
        if message.role == "tool":
            if select is not None and str(message.tool_call_id) not in kept_calls:
                continue
        elif select is not None and not select(message):
            continue
        for call in message.tool_calls or ():
            kept_calls.add(call.id)
        out.append(state.slots[state.index[commit]].blob)
    return tuple(out)


def write_spawn(child: Session, plan: SpawnPlan) -> ObjectId:
    """Commit the spawn commit (and a snapshot's messages) on the child's branch, in one transaction; returns
    the spawn commit's id. ``child`` is a session on ``plan.branch``."""
    record: dict[str, Any] = {"purpose": plan.purpose, "branch": plan.branch, "inherit": plan.inherit}
    if plan.parent_branch is not None:
        record["parent_branch"] = plan.parent_branch
    links = {PARENT_LINK: (plan.parent_head,)} if plan.parent_head is not None else {}
    start = plan.parent_head if plan.inherit == "full" else None
    with child.batch():
        reader = child.reader()
        start_commit = reader.get_commit(start) if start is not None else None

        def build(batch: WriteBatch, _parent: ObjectId | None, _pc: Commit | None) -> Commit:
            toolset = plan.toolset
            if plan.drop_tools:
                toolset = put_toolset(batch, [])
            return Commit(
                parents=(start,) if start is not None else (),
                content=None,
                tools=toolset,
                operation=SPAWN,
                message=f"spawn: {_clip(plan.purpose)}",
                metadata={SPAWN_META: record},
                created_at=child.now(start_commit),
                links=links,
            )

        oid, _ = child.commit_with(
            build,
            SPAWN,
            f"spawn {_clip(plan.purpose)}",
            tip=Tip(branch_ref(plan.branch), None),
            action="spawn",
        )
        for blob_id in plan.blobs:
            blob = reader.get(blob_id)
            if not isinstance(blob, Blob) or not isinstance(blob.data, dict):
                raise ObjectNotFound(blob_id)
            child.commit_content(content_blob(blob.data), operation="append", action="spawn")
    return oid


def _clip(text: str, width: int = 60) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


# --- relations -----------------------------------------------------------------------------------------------


def spawn_record(commit: Commit) -> dict[str, Any]:
    data = (commit.metadata or {}).get(SPAWN_META)
    return dict(data) if isinstance(data, dict) else {}


def parent_of(session: Session) -> ParentInfo | None:
    """The spawn relation of this session's HEAD (None when its history has no spawn commit)."""
    with _reading(session) as reader:
        return parent_at(reader, session.head_commit(reader))


@contextmanager
def _reading(session: Session) -> Iterator[Reader]:
    """What a relation walk reads: the open batch, or one read transaction of the store (many reads)."""
    reader = session.reader()
    if reader is not session.store:
        yield reader
        return
    with session.store.snapshot() as snapshot:
        yield snapshot


def parent_at(reader: Reader, head: ObjectId | None, index: SpawnIndex | None = None) -> ParentInfo | None:
    """The spawn relation of a history: its nearest spawn commit on the first-parent chain, or None."""
    if head is None:
        return None
    found = (index or SpawnIndex(reader)).of(head)
    if found is None:
        return None
    oid, commit = found
    record = spawn_record(commit)
    parent = commit.links.get(PARENT_LINK, ())
    return ParentInfo(
        branch=_opt_str(record.get("parent_branch")),
        commit=parent[0] if parent else None,
        purpose=str(record.get("purpose", "")),
        inherit=str(record.get("inherit", "")),
        spawn_commit=oid,
        created_at=timestamp(commit.created_at),
    )


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def children(session: Session) -> list[ChildInfo]:
    """The children spawned from this session's branch (see the module doc), oldest spawn first."""
    with _reading(session) as reader:
        return children_of(reader, session.head_commit(reader), session.current_branch)


def spawn_tree(
    reader: Reader, tip: ObjectId | None, name: str | None
) -> tuple[ParentInfo | None, list[ChildInfo]]:
    """:func:`parent_at` and :func:`children_of` of one history, reading each commit once."""
    index = SpawnIndex(reader)
    return parent_at(reader, tip, index), children_of(reader, tip, name, index)


def children_of(
    reader: Reader, tip: ObjectId | None, name: str | None, index: SpawnIndex | None = None
) -> list[ChildInfo]:
    """The children of the history at ``tip``: those it collapsed, and (when ``name`` is a local branch
    name) the open ones whose spawn commit names ``name`` as their parent branch; oldest spawn first."""
    index = index or SpawnIndex(reader)
    own = index.spawn_id(tip) if tip is not None else None
    # spawn -> (collapse time, collapse commit, head, how): the latest collapse of each child wins (by time, then
    # commit id; within one commit the first head linked), whatever order the history is read in
    collapsed: dict[ObjectId, tuple[int, ObjectId, ObjectId, str]] = {}
    for mark in history_marks(index, tip, own) if tip is not None else ():
        for head, how, spawn in mark.heads:
            if spawn is None or spawn == own:
                continue
            known = collapsed.get(spawn)
            if known is None or (known[0], known[1]) < (mark.created_at, mark.commit):
                collapsed[spawn] = (mark.created_at, mark.commit, head, how)
    out: dict[ObjectId, ChildInfo] = {}
    for spawn_id, (_, by, head, how) in collapsed.items():
        commit = index.commit(spawn_id)
        out[spawn_id] = _child(spawn_id, commit, head, None, by, how)
    if name is not None:
        for ref, value in reader.iter_refs(HEADS):
            child_branch = branch_name(ref)
            if child_branch is None or child_branch == name:
                continue
            found = index.of(ObjectId(value))
            if found is None or found[0] == own:
                continue
            spawn_id, commit = found
            if spawn_record(commit).get("parent_branch") != name:
                continue
            existing = out.get(spawn_id)
            if existing is not None and existing.branch == existing.spawned_as:
                continue  # another branch off the child: the child is the branch it was spawned on
            if existing is not None:
                out[spawn_id] = attrs.evolve(existing, branch=child_branch, head=ObjectId(value))
            else:
                out[spawn_id] = _child(spawn_id, commit, ObjectId(value), child_branch, None, None)
    return sorted(out.values(), key=lambda c: (c.created_at, c.spawn_commit))


def _child(
    spawn_id: ObjectId,
    commit: Commit,
    head: ObjectId,
    branch: str | None,
    collapsed_by: ObjectId | None,
    how: str | None,
) -> ChildInfo:
    record = spawn_record(commit)
    parent = commit.links.get(PARENT_LINK, ())
    return ChildInfo(
        purpose=str(record.get("purpose", "")),
        branch=branch,
        spawned_as=str(record.get("branch", "")),
        inherit=str(record.get("inherit", "")),
        state="collapsed" if collapsed_by is not None else "open",
        head=head,
        spawn_commit=spawn_id,
        parent_commit=parent[0] if parent else None,
        collapsed_by=collapsed_by,
        collapsed_via=how,
        created_at=timestamp(commit.created_at),
    )


# --- collapse ------------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CollapsePlan:
    """What a collapse links and removes: the child's head and branch, and its context as text."""

    tip: Tip
    child_ref: str
    child_head: ObjectId
    purpose: str
    text: str


def plan_collapse(parent: Session, child_branch: str) -> CollapsePlan:
    """Check that ``child_branch`` is a child spawned from the parent's branch and can be collapsed now."""
    parent.check_writes("collapse", in_batch=False)
    tip = parent.writable("collapse")
    reader = parent.reader()
    ref = branch_ref(check_branch_name(child_branch))
    if ref == tip.ref:
        raise InvalidInput("a branch cannot collapse into itself")
    value = reader.get_ref(ref)
    if value is None:
        raise InvalidInput(f"no branch {child_branch!r}: collapse takes a spawned child's branch")
    head = ObjectId(value)
    found = SpawnIndex(reader).of(head)
    parent_name = parent.current_branch
    if found is None or spawn_record(found[1]).get("parent_branch") != parent_name:
        raise InvalidInput(f"branch {child_branch!r} is not a child spawned from {parent.where()}")
    context = parent.compile()
    if context.open_calls:
        raise InvalidInput(
            "the parent's context ends with tool calls waiting for results; commit them before collapsing"
        )
    _, child_context = parent.compiled_at(head)
    text = "\n".join(f"{m.role}: {m.content}" for m in child_context.messages)
    return CollapsePlan(
        tip=tip,
        child_ref=ref,
        child_head=head,
        purpose=str(spawn_record(found[1]).get("purpose", "")),
        text=text,
    )


def commit_collapse(parent: Session, plan: CollapsePlan, content: str) -> CommitInfo:
    """Append ``content`` as a user message linking the child's head, and delete the child's branch, in one
    transaction (see the module doc)."""
    from tractkv.engine.budget import drop_budget

    name = branch_name(plan.child_ref) or plan.child_ref

    def stage(batch: WriteBatch) -> dict[str, tuple[ObjectId, ...]]:
        batch.set_ref(plan.child_ref, None, expected=plan.child_head)
        drop_budget(batch, plan.child_ref)
        log_ref_move(
            batch,
            plan.child_ref,
            plan.child_head,
            None,
            "collapse",
            f"collapsed into {parent.where()}",
            now_us=parent.clock(),
        )
        return {}

    parent.render_live()  # the deleted branch's blobs stay reachable, but keep the live views whole
    return parent.commit_content(
        content_blob({"type": "dialogue", "role": "user", "text": content}),
        operation="append",
        message=f"collapse {name}: {_clip(plan.purpose)}",
        metadata={COLLAPSE_META: {"branch": name, "purpose": plan.purpose}},
        links={CHILD_LINK: (plan.child_head,)},
        stage=stage,
        action="collapse",
        tip=plan.tip,
    )


def detach(session: Session, head: ObjectId) -> None:
    """Leave a child's handle detached at the head that was collapsed (its branch is gone): it still reads,
    and writing raises :class:`~tractkv.errors.DetachedHead`. The store's HEAD is not touched."""
    session._forget_state()
    session.branch_ref, session.detached = None, head


def collapse(
    parent: Session,
    child: Session | str,
    content: str | None,
    instructions: str | None,
    summarize: Callable[[str, str], str] | None,
) -> CommitInfo:
    """Fold a spawned child (a session on its branch, or the branch's name) back into the parent's branch:
    :func:`plan_collapse`, then ``content`` (else ``summarize(child's text, instructions)``) committed by
    :func:`commit_collapse`; a child session given is left :func:`detach`-ed at the head collapsed.

    Raises:
        InvalidInput: a child session on another store or already detached, both ``content`` and
            ``instructions``, empty content; what :func:`plan_collapse` refuses. NoLLMConfigured: no
            ``content`` and no ``summarize`` (nothing written).
    """
    name = _collapsed_branch(parent, child)
    if content is not None and instructions is not None:
        raise InvalidInput("instructions guide a model's summary: pass content or instructions, not both")
    if content is not None and (not isinstance(content, str) or not content.strip()):
        raise InvalidInput("collapse content must be a non-empty string")
    plan = plan_collapse(parent, name)
    if content is None:
        if summarize is None:
            raise NoLLMConfigured("collapse without content")
        content = summarize(plan.text, instructions or COLLAPSE_INSTRUCTIONS)
    info = commit_collapse(parent, plan, content)
    if isinstance(child, Session):
        detach(child, plan.child_head)
    return info


def _collapsed_branch(parent: Session, child: Session | str) -> str:
    if isinstance(child, str):
        return child
    if child.store is not parent.store:
        raise InvalidInput("collapse takes a child spawned on this store")
    if child.current_branch is None:
        raise InvalidInput("that child handle is detached (collapsed already?)")
    return child.current_branch
