"""Context-engine commands: commit, log, show, compile, diff, annotate, gc (a branch's: :mod:`tractkv.cli.branch_cmds`).

Each command parses, calls one :class:`~tractkv.Tract` method and prints; read commands take ``--json``.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from tractkv.cli.common import (
    CliState,
    complete_revisions,
    echo_json,
    json_option,
    note,
    with_state,
)
from tractkv.engine.content import MESSAGE_ROLES, message_parts_markers, schema_name
from tractkv.engine.history import clip, describe_commit, layout_lanes, short_id
from tractkv.engine.session import backoff, may_retry
from tractkv.engine.values import CommitInfo
from tractkv.errors import BudgetExceeded, ConcurrentUpdate, InvalidInput
from tractkv.model import to_jsonable

if TYPE_CHECKING:
    from tractkv.engine.content import Message
    from tractkv.tract import Tract

CONTENT_TYPES = ("dialogue", "instruction", "reasoning", "artifact", "freeform")
LINE = 72  # characters of a commit's summary shown per log line


def _preview(info: CommitInfo, width: int = LINE) -> str:
    """One line describing a commit: short id, operation and speaker, summary (the engine's description)."""
    described = describe_commit(info)
    text = described.line(width)
    return f"{short_id(info.commit_id)} {described.label}" + (f": {text}" if text else "")


STDIN_CLEANUP = " \t\r\n"  # what `commit -` strips from the end of stdin (unless --verbatim)


def _utf8(data: bytes, source: str) -> str:
    """``data`` decoded as UTF-8, or one line naming the first byte that is not.

    Raises:
        InvalidInput: not valid UTF-8.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"{source} is not valid UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start} "
            "(convert it to UTF-8 first, e.g. with iconv)"
        ) from None


def _read_text(text: str, verbatim: bool) -> str:
    """TEXT, or stdin for ``-``: read as bytes and decoded as strict UTF-8; trailing whitespace (spaces,
    tabs, line breaks) stripped unless ``verbatim``, as ``git commit -F -`` strips trailing blank lines."""
    if text != "-":
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # bytes the shell passed that are not UTF-8 (decoded with surrogateescape)
            try:
                return _utf8(text.encode("utf-8", "surrogateescape"), "TEXT")
            except UnicodeEncodeError:
                pass  # a lone surrogate no byte made: the content check names it
        return text
    body = _utf8(sys.stdin.buffer.read(), "input")
    return body if verbatim else body.rstrip(STDIN_CLEANUP)


def _json_option(value: str, flag: str) -> dict[str, Any]:
    """A JSON object given to ``flag``.

    Raises:
        InvalidInput: not JSON, or not an object.
    """
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{flag} is not valid JSON: {exc.msg} at position {exc.pos}") from exc
    if not isinstance(parsed, dict):
        raise InvalidInput(f"{flag} must be a JSON object")
    return parsed


KIND_ROLES = {  # the roles each content type can carry; the first is its default
    "dialogue": ("user", "assistant", "tool"),
    "instruction": ("system",),
    "reasoning": ("assistant",),
    "artifact": ("user", "assistant"),
    "freeform": ("user", "assistant"),
}


def _role_of(payload: dict[str, Any]) -> str | None:
    """The role of a message's content (None for no content)."""
    kind = payload.get("type")
    if kind not in KIND_ROLES:
        return None
    role = payload.get("role")
    return role if isinstance(role, str) else KIND_ROLES[kind][0]


@click.command("commit")
@click.argument("text", required=False)
@click.option(
    "--role",
    type=click.Choice(MESSAGE_ROLES),
    default=None,
    help="Who speaks (default: user; an --edit keeps the target's role; --tool-call means assistant, "
    "--tool-call-id tool).",
)
@click.option(
    "--type",
    "content_type",
    type=click.Choice(CONTENT_TYPES),
    default=None,
    help="Content type (default: instruction for --role system, else dialogue; an --edit keeps the "
    "target's).",
)
@click.option(
    "--edit",
    "edit_target",
    default=None,
    shell_complete=complete_revisions,
    help="Replace this message (an edit commit); what is not given (role, type, name, tool calls, images and "
    "other non-text parts) is kept.",
)
@click.option("--message", "-m", default=None, help="A note for people; never sent to a model.")
@click.option("--metadata", default=None, help="A JSON object stored with the commit.")
@click.option(
    "--tool-call",
    "tool_calls",
    multiple=True,
    metavar="JSON",
    help='A tool call this assistant message makes (repeatable): {"id", "name", "arguments"}, OpenAI\'s '
    '{"id", "type": "function", "function": {...}} or an Anthropic tool_use block. TEXT may be left out.',
)
@click.option(
    "--tool-call-id",
    default=None,
    help="Commit a tool result (--role tool) answering this call, which must wait for a result on the branch.",
)
@click.option(
    "--name",
    default=None,
    help="A tool result's tool (default: the one the call names); else the speaker's name.",
)
@click.option(
    "--is-error/--no-is-error",
    default=None,
    help="A tool result (--tool-call-id) that reports the tool failed (an edit keeps the target's setting).",
)
@click.option(
    "--verbatim",
    is_flag=True,
    help="With -: keep stdin exactly as read (default: strip trailing spaces, tabs and line breaks).",
)
@json_option
@with_state
def commit(
    st: CliState,
    text: str | None,
    role: str | None,
    content_type: str | None,
    edit_target: str | None,
    message: str | None,
    metadata: str | None,
    tool_calls: tuple[str, ...],
    tool_call_id: str | None,
    name: str | None,
    is_error: bool | None,
    verbatim: bool,
    as_json: bool,
) -> None:
    """Append a message to the current branch (TEXT, or - to read it from stdin); print its id.

    Read from stdin, the text must be UTF-8; its trailing whitespace is stripped (as git does) unless
    --verbatim. A tool result (--tool-call-id) must answer a call that waits for a result on the branch,
    as Tract.tool_result requires. An append that loses a race with another writer is re-made on the new tip;
    an edit is refused instead (run it again). A TEXT that starts with '-' goes after `--`:
    `tractkv commit --tool-call-id c1 -- "-3C, snow"`."""
    meta = _json_option(metadata, "--metadata") if metadata is not None else None
    calls = [_json_option(call, "--tool-call") for call in tool_calls]  # checked before stdin is read
    if text is None:
        if not calls:
            raise click.UsageError("missing TEXT (or - to read it from stdin)")
        text = ""
    if role is not None and calls and role != "assistant":
        raise click.UsageError(f"--tool-call is for assistant messages, not --role {role}")
    if role is not None and tool_call_id is not None and role != "tool":
        raise click.UsageError(f"--tool-call-id is for tool results (--role tool), not --role {role}")
    if verbatim and text != "-":
        raise click.UsageError("--verbatim is for text read from stdin (TEXT -); TEXT itself is kept exactly")
    body = _read_text(text, verbatim)
    t = st.tract()
    # An edit keeps what is not given: the target's role and type, and (same role and type) its name,
    # tool calls, tool call id, artifact type.
    previous: dict[str, Any] = t.message_content(edit_target) if edit_target is not None else {}
    if role is None and (calls or tool_call_id is not None):
        role = "assistant" if calls else "tool"
    role = role or _role_of(previous) or "user"
    kind = content_type
    if kind is None:
        old_kind = previous.get("type")
        if isinstance(old_kind, str) and role in KIND_ROLES.get(old_kind, ()):
            kind = old_kind
        else:
            kind = "instruction" if role == "system" else "dialogue"
    kept = previous if previous.get("type") == kind and _role_of(previous) == role else {}
    if role == "tool" and kind == "dialogue":
        info = _tool_result(t, body, kept, tool_call_id, name, is_error, edit_target, message, meta)
    else:
        if tool_call_id is not None:
            raise click.UsageError("--tool-call-id is for tool results (--role tool)")
        if is_error is not None:
            raise click.UsageError("--is-error is for tool results (--tool-call-id)")
        if calls and kind != "dialogue":
            raise click.UsageError(f"--tool-call is for dialogue messages, not --type {kind}")
        content = _content(kind, role, body, kept, name, calls)
        t.rebase_appends = edit_target is None  # a pure append is re-made on a tip another writer moved
        info = t.commit(
            content,
            operation="edit" if edit_target is not None else "append",
            edit_target=edit_target,
            message=message,
            metadata=meta,
        )
    if as_json:
        echo_json(info.to_json())
    else:
        click.echo(info.commit_id)


def _content(
    kind: str, role: str, body: str, kept: dict[str, Any], name: str | None, calls: list[dict[str, Any]]
) -> dict[str, Any]:
    """The payload ``commit`` stores for a message of ``kind`` spoken by ``role``; ``kept`` is the content
    an edit replaces (same type and role), whose fields the options do not give are kept."""
    if kind == "instruction":
        return {"type": "instruction", "text": body}
    if kind == "reasoning":
        return {"type": "reasoning", "text": body}
    if kind == "dialogue":
        if role == "system":
            raise InvalidInput("--role system is an instruction: drop --type dialogue")
        content: dict[str, Any] = {"type": "dialogue", "role": role, "text": body}
        # an edit keeps the target's parts (images, documents, thinking): Session.commit applies that rule
        if (name or kept.get("name")) is not None:
            content["name"] = name or kept["name"]
        if calls or kept.get("tool_calls"):
            content["tool_calls"] = calls or kept["tool_calls"]  # any shape Tract.assistant takes
        return content
    speaker = role if role in KIND_ROLES[kind] else KIND_ROLES[kind][0]
    if kind == "artifact":
        content = {"type": "artifact", "text": body, "role": speaker}
        if "artifact_type" in kept:
            content["artifact_type"] = kept["artifact_type"]
        return content
    try:
        payload = json.loads(body)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"freeform content must be JSON: {exc.msg} at position {exc.pos}") from exc
    return {"type": "freeform", "payload": payload, "role": speaker}


def _tool_result(
    t: Tract,
    body: str,
    previous: dict[str, Any],
    tool_call_id: str | None,
    name: str | None,
    is_error: bool | None,
    edit_target: str | None,
    message: str | None,
    meta: dict[str, Any] | None,
) -> CommitInfo:
    """Commit a tool result through :meth:`Tract.tool_result` (the rules the library applies: the call is
    on the branch, names that tool and, for a new result, still waits for one). A new result that lost a
    race with another writer is made again on the new tip, where those rules are checked again."""
    call_id = tool_call_id or previous.get("tool_call_id")
    if not isinstance(call_id, str):
        raise click.UsageError("a tool result needs --tool-call-id ID (the call it answers)")
    attempts, first_loss = 0, 0.0
    while True:
        try:
            info = t.tool_result(
                call_id,
                name or previous.get("name"),
                body,
                edit=edit_target,
                is_error=bool(previous.get("is_error")) if is_error is None else is_error,
                message=message,
                metadata=meta,
                hooks=False,
            )
        except ConcurrentUpdate:
            attempts += 1
            first_loss = first_loss or time.monotonic()
            if edit_target is not None or not may_retry(attempts, first_loss):
                raise
            backoff(attempts)
            continue
        assert isinstance(info, CommitInfo)  # hooks=False: committed as given
        return info


@click.command("log")
@click.argument("rev", required=False, shell_complete=complete_revisions)
@click.option("--limit", "-n", type=click.IntRange(min=0), default=None, help="At most this many commits.")
@click.option("--op", "op_filter", default=None, help="Only commits of this operation (append, edit, ...).")
@click.option("--graph", is_flag=True, help="Draw the commit graph (merges and forks) beside the log.")
@click.option(
    "--oneline", is_flag=True, help="One line per commit: short id, operation and summary (the text default)."
)
@json_option
@with_state
def log(
    st: CliState,
    rev: str | None,
    limit: int | None,
    op_filter: str | None,
    graph: bool,
    oneline: bool,
    as_json: bool,
) -> None:
    """Commits reachable from HEAD (or REV), newest first, one line each (--oneline, as git's)."""
    if oneline and as_json:
        raise click.UsageError("--oneline is a text format: drop it or --json")
    if graph and op_filter is not None:
        raise click.UsageError("--graph draws every commit's edges: it cannot be combined with --op")
    t = st.tract(readonly=True)
    infos = t.log(limit=limit, op_filter=op_filter, rev=rev)
    tagged: dict[str, list[str]] = {}
    for each in t.tags() if infos else ():
        tagged.setdefault(each.commit, []).append(each.name)
    if as_json:
        echo_json([_tagged_json(i.to_json(), tagged.get(i.commit_id)) for i in infos])
        return
    if not infos:
        note("no commits")
        return
    if graph:
        for line in graph_lines(infos, tagged):
            click.echo(line)
    else:
        for info in infos:
            click.echo(_preview(info) + _decoration(tagged.get(info.commit_id)))


def _tagged_json(entry: dict[str, Any], tags: list[str] | None) -> dict[str, Any]:
    """A log entry's JSON, with ``tags`` (the names of the tags at it) when it has any."""
    if tags:
        entry["tags"] = tags
    return entry


def _decoration(tags: list[str] | None) -> str:
    """`` (tag: v1, tag: v2)`` after a tagged commit's line, as ``git log --decorate`` shows tags."""
    return f" ({', '.join(f'tag: {name}' for name in tags)})" if tags else ""


def graph_lines(infos: list[CommitInfo], tagged: dict[str, list[str]] | None = None) -> list[str]:
    """An ASCII graph like ``git log --graph --oneline`` of the engine's lane layout.

    ``infos`` are commits newest first, as :meth:`~tractkv.Tract.log` returns them. Lane ``i`` is drawn in
    text column ``2 * i``: ``*`` is a commit, ``|`` a lane going straight down; ``\\`` (in column
    ``2 * i + 1``) moves a line one lane right on its way down, ``/`` one lane left. A line that must move
    several lanes (a merge's parent lane, or a child's lane ending in its parent) moves one lane per text line,
    so it may cross lanes on its way. A commit drawn right under an unrelated root (several tips) gets a line
    of its own lanes first, so the two do not look connected. The drawing ends with the last commit's line:
    a cut history (``--limit``) draws no edges towards commits it does not show. ``tagged`` names the tags
    at each commit (shown as ``(tag: v1)``).
    """
    out: list[str] = []
    last = 0
    rows = layout_lanes((info.commit_id, info.parent_ids) for info in infos)
    root_lane: int | None = None  # the lane of the previous commit when it has no parent
    for info, row in zip(infos, rows, strict=True):
        if row.lane == root_lane and all(a != row.lane for a, _ in row.top):
            # a commit right under a root, unrelated to it: a gap, so they do not look connected
            gap = [" "] * (2 * row.width)
            for a, _ in row.top:
                gap[2 * a] = "|"
            out.append("".join(gap).rstrip())
        out += _moves(row.top)  # children's lanes ending in this commit
        cells = [" "] * (2 * row.node_width)
        for _, b in row.top:
            cells[2 * b] = "|"
        for a, _ in row.bottom:
            cells[2 * a] = "|"
        cells[2 * row.lane] = "*"
        out.append("".join(cells) + _preview(info) + _decoration((tagged or {}).get(info.commit_id)))
        last = len(out)
        out += _moves(row.bottom)  # a merge's edges to its other parents
        root_lane = None if info.parent_ids else row.lane
    return out[:last]  # edges below the last commit shown (a --limit) lead to nothing drawn: end there


def _moves(segments: tuple[tuple[int, int], ...]) -> list[str]:
    """Text lines carrying every segment from its start lane to its end lane, one lane per line (none when
    no segment changes lane); segments that do not change lane are drawn straight beside them."""
    at = [a for a, _ in segments]
    lines = []
    for _ in range(max((abs(b - a) for a, b in segments), default=0)):
        cells = [" "] * (2 * (max([*at, *(b for _, b in segments)]) + 1))
        for index, (_, goal) in enumerate(segments):
            here = at[index]
            if here == goal:
                cells[2 * here] = "|"
            elif goal > here:
                cells[2 * here + 1] = "\\"
                at[index] = here + 1
            else:
                cells[2 * here - 1] = "/"
                at[index] = here - 1
        lines.append("".join(cells).rstrip())
    return lines


@click.command("show")
@click.argument("rev", default="HEAD", shell_complete=complete_revisions)
@json_option
@with_state
def show(st: CliState, rev: str, as_json: bool) -> None:
    """One commit: its fields and content."""
    info = st.tract(readonly=True).get_commit(rev)
    if as_json:
        echo_json(info.to_json())
        return
    click.echo(f"commit     {info.commit_id}")
    for parent in info.parent_ids:
        click.echo(f"parent     {parent}")
    click.echo(f"operation  {info.operation}")
    click.echo(f"summary    {describe_commit(info).line(LINE)}")
    if info.edit_target:
        click.echo(f"target     {info.edit_target}")
    if info.reply_to:
        click.echo(f"reply-to   {info.reply_to}")
    click.echo(f"date       {info.created_at.isoformat()}")
    click.echo(f"tokens     {info.token_count}")
    if info.toolset_id:
        click.echo(f"tools      {info.toolset_id}")
    if info.message:
        click.echo(f"message    {info.message}")
    if info.metadata:
        click.echo(f"metadata   {json.dumps(to_jsonable(info.metadata), ensure_ascii=False)}")
    if info.content is not None:
        click.echo("")
        click.echo(json.dumps(to_jsonable(info.content), indent=2, ensure_ascii=False))


@click.command("compile")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["openai", "responses", "anthropic", "gemini", "json", "text"]),
    default="json",
    show_default=True,
    help="openai / responses / anthropic / gemini: the request parameters (messages, input items or contents "
    "+ tools) for that API (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages, Gemini "
    "generateContent; bytes as base64); json: the neutral "
    'messages (media bytes as {"$bytes": "<base64>"}); text: for people, parts as markers.',
)
@click.option(
    "--at",
    "at",
    default=None,
    shell_complete=complete_revisions,
    help="Compile this revision instead of HEAD.",
)
@click.option("--include-reasoning", is_flag=True, help="Include reasoning traces as assistant messages.")
@click.option(
    "--strict", is_flag=True, help="Fail instead of repairing tool calls and results that do not pair up."
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Fit N tokens: keep system and pinned messages, drop the oldest others (tool turns whole); "
    "the dropped commits are listed (nothing is written).",
)
@json_option
@with_state
def compile_cmd(
    st: CliState,
    fmt: str,
    at: str | None,
    include_reasoning: bool,
    strict: bool,
    max_tokens: int | None,
    as_json: bool,
) -> None:
    """The context a model call needs, from HEAD (or --at REV). Each repair compile made so that tool calls
    and results pair up is printed to stderr as 'repaired: ...'; --strict fails instead. Every format but
    text prints JSON, so --json keeps --format openai / responses / anthropic / gemini / json as they are
    (that format's JSON) and only changes text to json. What a provider format leaves out
    (:meth:`CompiledContext.left_out`: an OpenAI Responses built-in tool item, a Gemini part another dialect
    has no form for; for responses, a reasoning item with no output after it) is printed to stderr as
    'left out: ...'."""
    try:
        ctx = st.tract(readonly=True).compile(
            at=at, include_reasoning=include_reasoning, strict=strict, max_tokens=max_tokens
        )
    except BudgetExceeded as exc:  # the library names its argument (max_tokens=N): name the flag
        raise BudgetExceeded(
            exc.token_count,
            exc.limit,
            f"the system and pinned messages and tool definitions alone take {exc.token_count} tokens, over "
            f"--max-tokens {max_tokens}: unpin messages (`tractkv annotate REV normal`) or raise --max-tokens",
        ) from None
    for repair in ctx.repairs:
        note(f"repaired: {repair.detail}")
    if ctx.dropped:
        note(f"dropped {len(ctx.dropped)} messages to fit {max_tokens} tokens: {' '.join(ctx.dropped)}")
    if as_json and fmt == "text":  # openai, anthropic and json are JSON already: --json keeps them
        fmt = "json"
    if fmt in ("openai", "responses", "anthropic", "gemini"):
        for left in ctx.left_out(fmt):
            note(f"left out: {left.detail}")
    if fmt == "openai":
        echo_json(ctx.to_openai_params())
    elif fmt == "responses":
        echo_json(ctx.to_responses_params())
    elif fmt == "anthropic":
        echo_json(ctx.to_anthropic_params())
    elif fmt == "gemini":
        from tractkv.engine.content import gemini_json  # signatures and media as base64 text

        echo_json(gemini_json(ctx.to_gemini_params()))
    elif fmt == "json":
        echo_json(
            {
                "head": ctx.head,
                "messages": to_jsonable(ctx.to_dicts()),  # media bytes as {"$bytes": "<base64>"}
                "tools": to_jsonable(list(ctx.tools)),
                "token_count": ctx.token_count,
                "commit_count": ctx.commit_count,
                "commit_ids": list(ctx.commit_ids),
                "token_source": ctx.token_source,
                "repairs": [
                    {"kind": r.kind, "commit": r.commit_id, "call_id": r.call_id, "detail": r.detail}
                    for r in ctx.repairs
                ],
                "open_calls": list(ctx.open_calls),
                "dropped": list(ctx.dropped),
            }
        )
    else:
        for message, oid in zip(ctx.messages, ctx.commit_ids, strict=True):
            click.echo(f"[{message.role}] ({short_id(oid)})")
            markers = message_parts_markers(message)  # images, documents, thinking, refusal
            text = (
                f"{message.content} {markers}" if message.content and markers else message.content or markers
            )
            click.echo(text)
            for call in message.tool_calls:
                args = call.invalid_arguments or json.dumps(call.arguments, ensure_ascii=False)
                click.echo(f"  -> {call.name}({args}) id={call.id}")
            click.echo("")
        names = [schema_name(t) for t in ctx.tools]
        note(
            f"{len(ctx.messages)} messages, {ctx.token_count} tokens" + (f", tools: {names}" if names else "")
        )


@click.command("diff")
@click.argument("a", shell_complete=complete_revisions)
@click.argument("b", required=False, shell_complete=complete_revisions)
@json_option
@with_state
def diff(st: CliState, a: str, b: str | None, as_json: bool) -> None:
    """Changes between the compiled contexts of A and B (default HEAD): messages + added, - removed,
    ~ edited (its old text on a - line, its new text on a + line); then tools added, removed or given another
    schema."""
    result = st.tract(readonly=True).diff(a, b)
    if as_json:
        echo_json(to_jsonable(result))
        return
    if result.is_empty:
        note("no differences")
    sign = {"added": "+", "removed": "-", "modified": "~"}
    for e in result.entries:
        if e.change == "modified" and e.before is not None and e.after is not None:
            # both sides of an edit, as a unified diff's - / + lines
            click.echo(f"~ {short_id(e.commit_id)}")
            click.echo(f"  - {_diff_side(e.before)}")
            click.echo(f"  + {_diff_side(e.after)}")
            continue
        msg = e.after if e.after is not None else e.before
        click.echo(f"{sign.get(e.change, '?')} {short_id(e.commit_id)} {_diff_side(msg) if msg else ''}")
    for tool in result.tools:  # the tool set's changes, by name
        keys = f" ({', '.join(tool.changed_keys)})" if tool.changed_keys else ""
        click.echo(f"{sign.get(tool.change, '~')} tool {tool.name}{keys}")
    note(f"token delta {result.token_delta:+d}")


def _diff_side(message: Message) -> str:
    """A message as one ``diff`` line: ``[role] text`` (clipped), its parts as markers."""
    markers = message_parts_markers(message)
    text = " ".join(x for x in (message.content, markers) if x)
    return f"[{message.role}] {clip(text, 72)}"


@click.command("annotate")
@click.argument("rev", shell_complete=complete_revisions)
@click.argument("priority", type=click.Choice(["pinned", "normal", "skip"]), required=False)
@click.option("--reason", default=None, help="Why (kept in history).")
@click.option(
    "--cache",
    type=click.Choice(["5m", "1h", "off"]),
    default=None,
    help="A prompt-cache breakpoint on the message (Anthropic's cache_control; off removes it).",
)
@with_state
def annotate(st: CliState, rev: str, priority: str | None, reason: str | None, cache: str | None) -> None:
    """Mark a message pinned (survives compression), normal, or skip (left out of compile), and / or put a
    prompt-cache breakpoint on it (--cache); what is not given is kept."""
    if priority is None and cache is None:
        raise click.UsageError("give a priority (pinned, normal, skip) or --cache")
    t = st.tract()
    t.rebase_appends = True  # as an append: re-made on a tip another writer moved (its target still there)
    info = t.annotate(rev, priority, reason=reason, cache=cache)
    click.echo(info.commit_id)


@click.command("gc")
@click.option(
    "--min-age-hours",
    type=click.FloatRange(min=0),
    default=72.0,
    show_default=True,
    help="Keep unreferenced commits and reflog entries younger than this.",
)
@click.option("--keep-pinned/--no-keep-pinned", default=True, show_default=True)
@json_option
@with_state
def gc(st: CliState, min_age_hours: float, keep_pinned: bool, as_json: bool) -> None:
    """Delete objects nothing reaches (refs, young reflog entries, young commits, pins); fsck stays clean."""
    result = st.tract().gc(min_age_hours=min_age_hours, keep_pinned=keep_pinned)
    if as_json:
        echo_json(to_jsonable(result))
        return
    click.echo(
        f"removed {result.removed_objects} objects ({result.removed_bytes} bytes), "
        f"kept {result.kept_objects}, dropped {result.removed_checkpoints} checkpoints"
    )


COMMANDS = (commit, log, show, compile_cmd, diff, annotate, gc)
