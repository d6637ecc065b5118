"""The 15 built-in tools: a model manages a context (its own, or a managed agent's) through them.

Each tool has a hand-written JSON Schema and a default description (the ``full`` profile); the ``self`` and
``supervisor`` profiles (:mod:`tractkv.toolkit.profiles`) describe the same tools as acting on "your" or on
"the managed agent's" context. Handlers return readable summaries (ids cut to 12 digits, texts to one
line), never reprs.

Tools that would change the context between a tool call and its result (commit, compress, branch, switch,
merge, reset, checkout) check their arguments at once and apply the change through
:meth:`ToolContext.defer`, i.e. right after the current step's tool results when run by the agent loop.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tractkv.engine.content import check_json, content_blob
from tractkv.engine.history import branch_ref, check_branch_name, clip, describe_commit
from tractkv.errors import BranchExists, BranchNotFound, InvalidInput, NoLLMConfigured

from .definitions import Handler, ToolDefinition

if TYPE_CHECKING:
    from .context import ToolContext

AFTER_TURN = "It takes effect right after this turn's tool results are committed."
CLIP = 200  # characters of a message shown per line by compile and diff (full=true shows everything)
LOG_LINE = 100  # characters of a commit's summary shown per line by log and get_commit


def _short(oid: str | None) -> str:
    return oid[:12] if oid else "(none)"


# --- handlers ---------------------------------------------------------------------------------------------


def _commit(
    content: str | dict[str, Any],
    role: str | None = None,
    operation: str = "append",
    edit_target: str | None = None,
    message: str | None = None,
    metadata: dict[str, Any] | None = None,
    *,
    context: ToolContext,
) -> str:
    t = context.tract
    if isinstance(content, str):
        kind = role or "assistant"
        payload: dict[str, Any] = (
            {"type": "instruction", "text": content}
            if kind == "system"
            else {"type": "dialogue", "role": kind, "text": content}
        )
    else:
        if role is not None:
            raise InvalidInput("role applies to text content; a content object names its own role")
        payload = content
    content_blob(payload)  # a malformed payload fails now, not after the turn
    if operation == "edit":
        if edit_target is None:
            raise InvalidInput("operation 'edit' needs edit_target: the message commit it replaces")
        target: str | None = t.get_commit(edit_target).commit_id
    elif edit_target is not None:
        raise InvalidInput("edit_target applies to operation 'edit' only")
    else:
        target = None
    if metadata is not None:
        check_json(metadata, "metadata", binary=True)
    what = f"{payload.get('role') or payload.get('type')} message"

    def act() -> str:
        info = t.commit(payload, operation, target, message, metadata=metadata)
        done = "Edited" if operation == "edit" else "Committed"
        return f"{done} {what} {_short(info.commit_id)} ({info.token_count} tokens)."

    verb = "edited" if operation == "edit" else "committed"
    return context.defer(act, f"The {what} will be {verb}. {AFTER_TURN}")


def _compile(at: str | None = None, full: bool = False, *, context: ToolContext) -> str:
    ctx = context.tract.compile(at=at)
    if not ctx.messages:
        return "The context is empty."
    lines = [
        f"Context at {_short(ctx.head)}: {len(ctx.messages)} messages, {ctx.token_count} tokens, "
        f"{len(ctx.tools)} tools."
    ]
    for index, (msg, commit_id) in enumerate(zip(ctx.messages, ctx.commit_ids, strict=True), 1):
        who = msg.role + (f" ({msg.name})" if msg.name else "")
        text = msg.content if full else clip(msg.content, CLIP)
        if msg.tool_calls:
            calls = ", ".join(
                f"{c.name}({json.dumps(c.arguments, ensure_ascii=False)})" for c in msg.tool_calls
            )
            text = f"{text} [calls {calls if full else clip(calls, CLIP)}]".strip()
        if msg.tool_call_id:
            who += f" for {msg.tool_call_id}" + (" (error)" if msg.is_error else "")
        lines.append(f"[{index}] {_short(commit_id)} {who}: {text}")
    return "\n".join(lines)


def _annotate(target: str, priority: str, reason: str | None = None, *, context: ToolContext) -> str:
    info = context.tract.annotate(target, priority, reason)
    return f"Marked {_short(info.edit_target)} as {priority} (annotation {_short(info.commit_id)})."


def _status(*, context: ToolContext) -> str:
    s = context.tract.status()
    where = f"On branch {s.branch}" if s.branch else "Detached HEAD"
    head = f" at {_short(s.head)}" if s.head else " (no commits yet)"
    text = f"{where}{head}: {s.message_count} messages in context, {s.commit_count} commits, {s.token_count} tokens"
    if s.token_budget:
        used = s.budget_used or 0.0
        text += f" of a {s.token_budget}-token budget ({used:.0%} used)"
    return text + "."


def _log(limit: int = 10, op: str | None = None, *, context: ToolContext) -> str:
    entries = context.tract.log(limit=limit, op_filter=op)
    if not entries:
        return "No commits."
    lines = []
    for info in entries:
        described = describe_commit(info)
        lines.append(
            f"{_short(info.commit_id)} {info.created_at:%Y-%m-%d %H:%M:%S} {described.label}: "
            f"{described.line(LOG_LINE)}"
        )
    return "\n".join(lines)


def _diff(a: str, b: str | None = None, *, context: ToolContext) -> str:
    d = context.tract.diff(a, b)
    if d.is_empty:
        return f"No differences between {_short(d.base)} and {_short(d.target)}."
    lines = [
        f"{len(d.entries)} change(s) from {_short(d.base)} to {_short(d.target)}, tokens {d.token_delta:+d}:"
    ]
    marks = {"added": "+", "removed": "-", "modified": "~"}
    for entry in d.entries:
        msg = entry.after or entry.before
        text = clip(msg.content, CLIP) if msg is not None else ""
        role = msg.role if msg is not None else "?"
        lines.append(f"{marks.get(entry.change, '?')} {_short(entry.commit_id)} {role}: {text}")
    return "\n".join(lines)


def _compress(
    target_tokens: int | None = None,
    from_commit: str | None = None,
    to_commit: str | None = None,
    instructions: str | None = None,
    content: str | None = None,
    *,
    context: ToolContext,
) -> str:
    t = context.tract
    if content is None and t.summarizer is None:
        raise NoLLMConfigured("compress without content")
    for rev in (from_commit, to_commit):
        if rev is not None:
            t.get_commit(rev)  # fail now, not after the turn

    def act() -> str:
        info = t.compress(target_tokens, from_commit, to_commit, instructions, content)
        return (
            f"Compressed into summary {_short(info.commit_id)} ({info.token_count} tokens); {info.message}."
        )

    return context.defer(act, f"The context will be compressed. {AFTER_TURN}")


def _branch(name: str, source: str | None = None, switch: bool = True, *, context: ToolContext) -> str:
    t = context.tract
    check_branch_name(name)
    if t.store.get_ref(branch_ref(name)) is not None:
        raise BranchExists(name)
    if source is not None:
        t.get_commit(source)

    def act() -> str:
        info = t.branch(name, source, switch)
        return f"Created branch {name} at {_short(info.head)}" + (" and switched to it." if switch else ".")

    then = " and switched to" if switch else ""
    return context.defer(act, f"Branch {name} will be created{then}. {AFTER_TURN}")


def _switch(name: str, *, context: ToolContext) -> str:
    t = context.tract
    if t.store.get_ref(branch_ref(name)) is None:
        raise BranchNotFound(name)

    def act() -> str:
        info = t.switch(name)
        return f"Switched to branch {name} at {_short(info.head)}."

    return context.defer(act, f"Will switch to branch {name}. {AFTER_TURN}")


def _merge(source: str, strategy: str = "auto", message: str | None = None, *, context: ToolContext) -> str:
    t = context.tract
    t.get_commit(source)

    def act() -> str:
        result = t.merge(source, strategy=strategy, message=message)
        if result.kind == "up-to-date":
            return f"Already up to date with {source}."
        if result.kind == "fast-forward":
            return f"Fast-forwarded to {_short(result.head)}."
        resolved = (
            f", {result.conflicts_resolved} conflict(s) settled by {strategy}"
            if result.conflicts_resolved
            else ""
        )
        return f"Merged {source} in merge commit {_short(result.head)}{resolved}."

    return context.defer(act, f"{source} will be merged. {AFTER_TURN}")


def _reset(target: str, mode: str = "soft", *, context: ToolContext) -> str:
    t = context.tract
    goal = t.get_commit(target).commit_id

    def act() -> str:
        old = t.head
        t.reset(goal, mode)
        return f"Reset to {_short(goal)} ({mode}); reset to {_short(old)} undoes it."

    return context.defer(act, f"The context will be reset to {_short(goal)} ({mode}). {AFTER_TURN}")


def _checkout(rev: str, *, context: ToolContext) -> str:
    t = context.tract
    goal = t.get_commit(rev).commit_id

    def act() -> str:
        t.checkout(goal)
        return f"HEAD detached at {_short(goal)} (read-only until you switch to a branch)."

    return context.defer(act, f"HEAD will be detached at {_short(goal)}. {AFTER_TURN}")


def _gc(
    min_age_hours: float = 72.0, keep_pinned: bool = True, keep_branches: bool = True, *, context: ToolContext
) -> str:
    r = context.tract.gc(min_age_hours=min_age_hours, keep_pinned=keep_pinned, keep_branches=keep_branches)
    return (
        f"Removed {r.removed_objects} objects ({r.removed_bytes} bytes) and {r.removed_checkpoints} "
        f"checkpoints; kept {r.kept_objects} objects."
    )


def _list_branches(*, context: ToolContext) -> str:
    branches = context.tract.list_branches()
    if not branches:
        return "No branches yet."
    return "\n".join(
        f"{'*' if b.is_current else ' '} {b.name} {_short(b.head)}" + (" (remote)" if b.is_remote else "")
        for b in branches
    )


def _get_commit(rev: str, *, context: ToolContext) -> str:
    info = context.tract.get_commit(rev)
    described = describe_commit(info)
    lines = [
        f"commit {info.commit_id}",
        f"operation: {info.operation}",
        f"summary: {described.line(LOG_LINE)}",
        f"date: {info.created_at:%Y-%m-%d %H:%M:%S} UTC",
    ]
    if info.parent_ids:
        lines.append("parents: " + ", ".join(_short(p) for p in info.parent_ids))
    if info.role:
        lines.append(f"role: {info.role}")
    if info.edit_target:
        lines.append(f"target: {_short(info.edit_target)}")
    if info.reply_to:
        lines.append(f"answers: {_short(info.reply_to)}")
    if info.message:
        lines.append(f"message: {info.message}")
    data = info.content if isinstance(info.content, dict) else {}
    for call in data.get("tool_calls", ()):
        lines.append(
            f"tool call {call['id']}: {call['name']}({json.dumps(call['arguments'], ensure_ascii=False)})"
        )
    lines.append(f"tokens: {info.token_count}")
    lines.append("")
    lines.append(described.text or described.summary)
    return "\n".join(lines)


# --- schemas ----------------------------------------------------------------------------------------------


def _obj(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = False
    return schema


_REV = "A commit id or unique prefix (4+ hex digits), a branch name, or HEAD~N."
_OPT_REV = {"type": ["string", "null"], "description": _REV}

SCHEMAS: dict[str, dict[str, Any]] = {
    "commit": _obj(
        {
            "content": {
                "type": ["string", "object"],
                "description": (
                    "The message: its text, or a content object such as "
                    '{"type": "dialogue", "role": "user", "text": "..."}, {"type": "instruction", "text": "..."} '
                    'or {"type": "artifact", "artifact_type": "code", "text": "..."}.'
                ),
            },
            "role": {
                "type": ["string", "null"],
                "enum": ["assistant", "user", "system", None],
                "description": (
                    "For text content: 'system' adds a standing instruction, 'user' or 'assistant' (the "
                    "default) a dialogue message. A content object names its own role."
                ),
            },
            "operation": {
                "type": "string",
                "enum": ["append", "edit"],
                "default": "append",
                "description": "'append' adds a message; 'edit' replaces the message edit_target names.",
            },
            "edit_target": {**_OPT_REV, "description": f"The message an edit replaces. {_REV}"},
            "message": {
                "type": ["string", "null"],
                "description": "A short note for people reading the history (never shown to the model).",
            },
            "metadata": {
                "type": ["object", "null"],
                "description": "JSON data kept with the commit (never shown to the model).",
            },
        },
        ("content",),
    ),
    "compile": _obj(
        {
            "at": {**_OPT_REV, "description": f"Show the context at this commit instead of HEAD. {_REV}"},
            "full": {
                "type": "boolean",
                "default": False,
                "description": f"Show every message in full instead of its first {CLIP} characters.",
            },
        }
    ),
    "annotate": _obj(
        {
            "target": {"type": "string", "description": f"The message's commit. {_REV}"},
            "priority": {
                "type": "string",
                "enum": ["pinned", "normal", "skip"],
                "description": "'pinned' survives compression, 'skip' hides the message, 'normal' clears both.",
            },
            "reason": {"type": ["string", "null"], "description": "Why (kept in history)."},
        },
        ("target", "priority"),
    ),
    "status": _obj({}),
    "log": _obj(
        {
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 200,
                "default": 10,
                "description": "How many commits to list.",
            },
            "op": {
                "type": ["string", "null"],
                "enum": ["append", "edit", "annotate", "merge", "compress", None],
                "description": "Only commits of this operation.",
            },
        }
    ),
    "diff": _obj(
        {
            "a": {"type": "string", "description": f"The earlier commit. {_REV}"},
            "b": {**_OPT_REV, "description": f"The later commit (default HEAD). {_REV}"},
        },
        ("a",),
    ),
    "compress": _obj(
        {
            "target_tokens": {
                "type": ["integer", "null"],
                "minimum": 1,
                "description": "Aim for a summary of about this many tokens.",
            },
            "from_commit": {**_OPT_REV, "description": "First message to compress (default: the first)."},
            "to_commit": {**_OPT_REV, "description": "Last message to compress (default: the last)."},
            "instructions": {
                "type": ["string", "null"],
                "description": "What the summary must keep (used when a model writes it).",
            },
            "content": {
                "type": ["string", "null"],
                "description": "Your own summary. When omitted, a configured model writes it.",
            },
        }
    ),
    "branch": _obj(
        {
            "name": {
                "type": "string",
                "description": "The new branch's name (letters, digits, '-', '_', '/').",
            },
            "source": {**_OPT_REV, "description": f"Where the branch starts (default HEAD). {_REV}"},
            "switch": {"type": "boolean", "default": True, "description": "Switch to the new branch."},
        },
        ("name",),
    ),
    "switch": _obj({"name": {"type": "string", "description": "An existing branch."}}, ("name",)),
    "merge": _obj(
        {
            "source": {"type": "string", "description": f"The branch or commit to merge in. {_REV}"},
            "strategy": {
                "type": "string",
                "enum": ["auto", "ours", "theirs"],
                "default": "auto",
                "description": "How conflicts are settled: 'auto' refuses and lists them.",
            },
            "message": {"type": ["string", "null"], "description": "The merge commit's note."},
        },
        ("source",),
    ),
    "reset": _obj(
        {
            "target": {"type": "string", "description": f"The commit to move the branch to. {_REV}"},
            "mode": {
                "type": "string",
                "enum": ["soft", "hard"],
                "default": "soft",
                "description": "'soft' keeps abandoned commits recoverable; 'hard' lets gc reclaim them.",
            },
        },
        ("target",),
    ),
    "checkout": _obj({"rev": {"type": "string", "description": f"The commit to inspect. {_REV}"}}, ("rev",)),
    "gc": _obj(
        {
            "min_age_hours": {
                "type": "number",
                "minimum": 0,
                "default": 72.0,
                "description": "Keep anything younger than this many hours.",
            },
            "keep_pinned": {"type": "boolean", "default": True, "description": "Keep pinned messages."},
            "keep_branches": {
                "type": "boolean",
                "default": True,
                "description": (
                    "Keep every local branch. false DELETES every local branch but the current one (a "
                    "reflog entry records each) and reclaims what only they held."
                ),
            },
        }
    ),
    "list_branches": _obj({}),
    "get_commit": _obj({"rev": {"type": "string", "description": f"The commit. {_REV}"}}, ("rev",)),
}

# --- descriptions -----------------------------------------------------------------------------------------

DEFAULT_DESCRIPTIONS: dict[str, str] = {
    "commit": (
        "Append a message to the context as a new commit: a note, a finding, or an instruction worth keeping. "
        "Use it to record something every later turn must see. role 'system' adds a standing instruction, "
        "'user' or 'assistant' a dialogue message; content may also be a content object, and operation "
        f"'edit' replaces the message edit_target names. {AFTER_TURN}"
    ),
    "compile": (
        "Show the compiled context: the exact messages a model call would receive, each with its commit id. "
        "Use it to see what is in the context before annotating, compressing or resetting it; set 'at' to "
        "look at an earlier commit or another branch."
    ),
    "annotate": (
        "Set a message's priority: 'pinned' keeps it verbatim through compression, 'skip' hides it from the "
        "context (history keeps it), 'normal' undoes either. Use it to protect key facts or drop noise "
        "without deleting anything. Get the target's commit id from compile or log."
    ),
    "status": (
        "Report the current branch, HEAD commit, message and token counts and the share of the token budget "
        "in use. Use it to decide whether to compress before the context overflows."
    ),
    "log": (
        "List recent commits, newest first: id, time, operation and a one-line summary, including edits, "
        "annotations and compressions that compile does not show. Use it to find a commit to reset to, diff "
        "against or inspect."
    ),
    "diff": (
        "Compare the contexts of two commits: messages added, removed or modified, and the token change. "
        "Use it to see what a branch, merge, compression or reset changed. b defaults to HEAD."
    ),
    "compress": (
        "Replace a range of messages (default: all) with a summary; pinned messages and instructions stay "
        "verbatim and the originals stay in history. Use it when the context nears its token budget. Without "
        "'content' a model writes the summary, so a model must be configured; pass 'content' to give the "
        f"summary yourself. {AFTER_TURN}"
    ),
    "branch": (
        "Create a branch at HEAD (or at 'source') and, unless switch is false, switch to it. Use it before a "
        "risky or exploratory line of work, so the main line stays clean and you can switch back or merge "
        f"later. {AFTER_TURN}"
    ),
    "switch": (
        "Make another existing branch current: later messages and compiles use it. Use it to return to the "
        f"main line or to continue an exploration. {AFTER_TURN}"
    ),
    "merge": (
        "Merge a branch or commit into the current branch: a fast-forward when possible, else a merge commit "
        "whose context holds both sides' messages. Conflicts (a message changed on both sides) are settled "
        "by strategy: 'auto' refuses and lists them, 'ours' or 'theirs' picks a side. Merging never needs a "
        f"model. {AFTER_TURN}"
    ),
    "reset": (
        "Move the current branch to an earlier (or any) commit: the context becomes that commit's. 'soft' "
        "keeps the abandoned commits recoverable until gc's age limit; 'hard' lets the next gc reclaim them. "
        f"Use it to undo a bad line of work; resetting to the old tip undoes it. {AFTER_TURN}"
    ),
    "checkout": (
        "Detach HEAD at a commit to inspect that point read-only; commits are refused until you switch to a "
        f"branch. Use it to look at an old state without moving any branch. {AFTER_TURN}"
    ),
    "gc": (
        "Delete stored objects nothing references any more (left by hard resets and deleted branches), "
        "keeping anything younger than min_age_hours and, by default, pinned messages. Use it to reclaim "
        "disk space; it never changes what any branch's context holds (keep_branches=false deletes the other "
        "local branches first)."
    ),
    "list_branches": (
        "List the branches with their tip commits, marking the current one. Use it before switch or merge to "
        "see what exists."
    ),
    "get_commit": (
        "Show one commit in full: operation, time, role, note, tool calls and content. Use it to read a "
        "message that compile or log showed cut short."
    ),
}

SELF_DESCRIPTIONS: dict[str, str] = {
    "commit": (
        "Write a message into your own context as a new commit: a note to yourself, a decision, or a fact "
        "you must not lose. Use it when you learn something you will need on later turns; role 'system' "
        f"adds a standing instruction for yourself. {AFTER_TURN}"
    ),
    "compile": (
        "Show your own context exactly as you receive it, each message with its commit id. Use it to find "
        "the id of a message you want to pin, skip or compress from, or to check what you still remember."
    ),
    "annotate": (
        "Pin, skip or un-mark a message in your context. Pin facts and instructions you must never lose to "
        "compression; skip messages that are noise (a failed attempt, a huge irrelevant output) to free "
        "tokens. Get the message's commit id from compile or log first."
    ),
    "status": (
        "Check the size of your context: branch, HEAD, message and token counts and budget use. Call it when "
        "the conversation grows long, to decide whether to compress."
    ),
    "log": (
        "List the recent commits of your context, newest first, with their ids. Use it to find a point to "
        "reset back to, or the id of a message to annotate or inspect."
    ),
    "compress": (
        "Shrink your context: replace a range of messages (default: all) with a summary; pinned messages and "
        "instructions stay. Use it when status shows you near your token budget. Without 'content' a model "
        "writes the summary (one must be configured); with 'content' your own summary is used. "
        f"{AFTER_TURN}"
    ),
    "branch": (
        "Start a branch of your own context to explore an alternative (a risky approach, a hypothesis) "
        f"without disturbing your main line; you can switch back later. {AFTER_TURN}"
    ),
    "switch": (
        "Move your context to another existing branch: you then continue from that branch's messages. Use it "
        f"to abandon an exploration or return to it. {AFTER_TURN}"
    ),
    "reset": (
        "Rewind your context to an earlier commit (find it with log), dropping everything after it from your "
        "view: use it to undo a failed approach and redo that part. 'soft' keeps the abandoned commits "
        f"recoverable. {AFTER_TURN}"
    ),
}

SUPERVISOR_DESCRIPTIONS: dict[str, str] = {
    "commit": (
        "Append a message to the managed agent's context as a new commit: guidance, a correction, or a fact "
        "it needs. Use it to steer the agent; role 'system' adds a standing instruction, 'user' speaks to it "
        "as its user."
    ),
    "compile": (
        "Show the managed agent's context exactly as its model receives it, each message with its commit id. "
        "Use it to review what the agent knows before correcting, annotating or compressing its context."
    ),
    "annotate": (
        "Pin, skip or un-mark a message in the managed agent's context: pin what it must keep through "
        "compression, skip what misleads it or wastes its tokens. Get the commit id from compile or log."
    ),
    "status": (
        "Check the managed agent's context: its branch, HEAD, message and token counts and budget use. Use it "
        "to decide whether the agent needs compression or a reset."
    ),
    "log": (
        "List the managed agent's recent commits, newest first, with ids, operations and summaries. Use it to "
        "audit what the agent did and to find a point to reset it to."
    ),
    "diff": (
        "Compare two points of the managed agent's context (b defaults to its HEAD): messages added, removed "
        "or changed, and the token change. Use it to review what the agent changed since a checkpoint."
    ),
    "compress": (
        "Shrink the managed agent's context by replacing a range of its messages (default: all) with a "
        "summary; its pinned messages and instructions stay. Use it when the agent nears its budget. Without "
        "'content' a model writes the summary (one must be configured); pass 'content' to give your own."
    ),
    "branch": (
        "Create a branch of the managed agent's context (at its HEAD or at 'source') and by default move the "
        "agent onto it: use it before an intervention you may want to undo."
    ),
    "switch": (
        "Move the managed agent to another existing branch of its context; its next turn continues from that "
        "branch's messages."
    ),
    "merge": (
        "Merge one of the managed agent's branches (or a commit) into its current branch; conflicts are "
        "settled by strategy ('auto' refuses and lists them, 'ours' or 'theirs' picks a side). Never needs a "
        "model."
    ),
    "reset": (
        "Rewind the managed agent's context to an earlier commit, dropping later messages from its view: use "
        "it to undo a derailed line of work. 'soft' keeps the abandoned commits recoverable; 'hard' lets gc "
        "reclaim them."
    ),
    "checkout": (
        "Detach the managed agent's HEAD at a commit to inspect that state read-only; it cannot commit until "
        "it is switched back to a branch."
    ),
    "gc": (
        "Reclaim storage in the managed agent's store: delete objects no branch or recent reflog entry keeps "
        "(anything younger than min_age_hours stays). Never changes what a kept branch's context holds; "
        "keep_branches=false deletes its other local branches first."
    ),
    "list_branches": "List the managed agent's branches with their tip commits, marking the one it is on.",
    "get_commit": (
        "Show one commit of the managed agent's history in full: operation, time, role, tool calls and "
        "content. Use it to read a message that compile or log showed cut short."
    ),
}

_HANDLERS: dict[str, Handler] = {
    "commit": _commit,
    "compile": _compile,
    "annotate": _annotate,
    "status": _status,
    "log": _log,
    "diff": _diff,
    "compress": _compress,
    "branch": _branch,
    "switch": _switch,
    "merge": _merge,
    "reset": _reset,
    "checkout": _checkout,
    "gc": _gc,
    "list_branches": _list_branches,
    "get_commit": _get_commit,
}

BUILTIN_NAMES = tuple(_HANDLERS)
"""The built-in tools, in the order they are offered."""

_CACHE: list[ToolDefinition] = []


def builtin_tools() -> list[ToolDefinition]:
    """The 15 built-in tools with their default descriptions (the definitions are immutable and shared)."""
    if not _CACHE:
        _CACHE.extend(
            ToolDefinition(name, DEFAULT_DESCRIPTIONS[name], SCHEMAS[name], _HANDLERS[name])
            for name in BUILTIN_NAMES
        )
    return list(_CACHE)


def get_all_tools(tract: object) -> list[ToolDefinition]:
    """The 15 built-in tools for ``tract``, with their default descriptions (the reference's entry point).

    A tractkv handler reads its tract from the :class:`~tractkv.toolkit.ToolContext` of each call rather than
    closing over one, so the definitions are the same for every tract: run them on ``tract`` with
    ``ToolExecutor(tract, profile="full")`` (or register a selection). ``tract`` is checked, so a wrong
    argument fails here rather than at the first call.

    Raises:
        InvalidInput: ``tract`` is not a Tract.
    """
    from tractkv.tract import Tract  # the facade is below the toolkit (and loaded whenever a Tract exists)

    if not isinstance(tract, Tract):
        raise InvalidInput(f"get_all_tools takes a Tract, not {type(tract).__name__}")
    return builtin_tools()
