"""Export a conversation with its tool-usage history, as JSON or Markdown; text views of usage trees.

The export holds the compiled context (what the model sees, each message with its commit), the usage trees
attached to the tool results that link them, the whole usage history of the branch (including usages whose
messages were compressed away, and running or interrupted ones), and per-tool statistics. It is
deterministic: exporting the same branch twice gives the same text. A message's ``parts`` (images,
documents, thinking) are included as :meth:`~tractkv.Message.to_dict` gives them, with media bytes written as
``{"$bytes": "<base64>"}`` (JSON has no bytes); the Markdown shows them as markers such as
``[image image/png 200 KB]``. ``repairs`` lists what compile changed so tool calls and results pair up,
and a placeholder result compile put in is marked ``"placeholder": true`` (its text says no result exists).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from tractkv.engine.content import part_markers
from tractkv.engine.usage import ToolStats, ToolUsage, UsageNode, flatten, usage_forest, usage_stats
from tractkv.errors import InvalidInput
from tractkv.ids import ObjectId
from tractkv.model import to_jsonable

if TYPE_CHECKING:
    from tractkv.tract import Tract

EXPORT_FORMATS = ("json", "markdown")
EXPORT_VERSION = 1  # the "version" of the JSON export; bump when its shape changes
STATUS_MARKS = {"success": "✓", "error": "✗", "pending": "…", "interrupted": "!"}


def format_usage(usage: ToolUsage) -> str:
    """One line for a usage: mark, tool, status, duration, usage id, commit, and the error if any."""
    duration = f"{usage.duration_ms:.1f} ms" if usage.duration_ms is not None else "-"
    commit = f" commit {usage.commit_id[:12]}" if usage.commit_id else ""
    line = f"{STATUS_MARKS.get(usage.status, '?')} {usage.tool_name} {usage.status} {duration} [{usage.id}]{commit}"
    if usage.rerun_of:
        line += f" re-run of [{usage.rerun_of}]"
    if usage.error:
        line += f": {_one_line(usage.error, 120)}"
    return line


def tree_lines(roots: Iterable[UsageNode], indent: str = "  ") -> list[str]:
    """Indented lines for a usage forest (children under their parent)."""
    return [f"{indent * depth}{format_usage(u)}" for root in roots for depth, u in root.walk()]


def stats_lines(stats: dict[str, ToolStats]) -> list[str]:
    """A text table of per-tool statistics."""
    lines = [
        f"{'tool':<20} {'count':>5} {'ok':>5} {'err':>5} {'int':>5} {'rate':>6} {'p50 ms':>9} {'p95 ms':>9}"
    ]
    for s in stats.values():
        rate = f"{s.success_rate:.0%}" if s.success_rate is not None else "-"
        p50 = f"{s.p50_ms:.1f}" if s.p50_ms is not None else "-"
        p95 = f"{s.p95_ms:.1f}" if s.p95_ms is not None else "-"
        lines.append(
            f"{s.tool_name:<20} {s.count:>5} {s.success:>5} {s.error:>5} {s.interrupted:>5} {rate:>6} {p50:>9} {p95:>9}"
        )
    return lines


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def conversation(tract: Tract, roots: list[UsageNode] | None = None) -> dict[str, Any]:
    """The export as a JSON-safe dict (see the module doc); ``roots``: the usage forest, if computed."""
    compiled = tract.compile()
    if roots is None:
        roots = usage_forest(tract.store, tract.head)
    by_result: dict[ObjectId, list[UsageNode]] = {}
    for root in roots:
        if root.usage.result_commit is not None:
            by_result.setdefault(root.usage.result_commit, []).append(root)
    placeholders = {(r.commit_id, r.call_id) for r in compiled.repairs if r.kind == "placeholder_result"}
    messages = []
    for message, commit_id in zip(compiled.messages, compiled.commit_ids, strict=True):
        entry: dict[str, Any] = {"commit": commit_id, **to_jsonable(message.to_dict())}
        if message.role == "tool" and (commit_id, message.tool_call_id) in placeholders:
            entry["placeholder"] = True  # compile's stand-in for a result history does not hold
        nodes = by_result.get(commit_id)
        if nodes:
            entry["tool_usages"] = [n.to_json() for n in nodes]
        messages.append(entry)
    stats = usage_stats(flatten(roots))
    return {
        "format": "tractkv-conversation",
        "version": EXPORT_VERSION,
        "branch": tract.current_branch,
        "head": tract.head,
        "token_count": compiled.token_count,
        "tools": [dict(t) for t in compiled.tools],
        "messages": messages,
        "repairs": [
            {"kind": r.kind, "commit": r.commit_id, "call_id": r.call_id, "detail": r.detail}
            for r in compiled.repairs
        ],
        "tool_usages": [r.to_json() for r in roots],
        "tool_usage_stats": {name: s.to_json() for name, s in stats.items()},
    }


def export(tract: Tract, format: str = "json") -> str:
    """The conversation at HEAD of ``tract`` with its tool-usage history, as ``"json"`` or ``"markdown"`` text
    (``tractkv.toolkit.export(t, "markdown")``; ``tractkv export``)."""
    if format not in EXPORT_FORMATS:
        raise InvalidInput(f"format must be one of {EXPORT_FORMATS}, not {format!r}")
    roots = usage_forest(tract.store, tract.head)
    data = conversation(tract, roots)
    if format == "json":
        return json.dumps(data, indent=2, ensure_ascii=False)
    return _markdown(data, roots)


export_conversation = export  # the name it had before it replaced Tract.export; both stay


def _fence(text: str) -> str:
    ticks = 3
    while "`" * ticks in text:
        ticks += 1
    fence = "`" * ticks
    return f"{fence}text\n{text}\n{fence}"


def _markdown(data: dict[str, Any], roots: list[UsageNode]) -> str:
    by_result: dict[str, list[UsageNode]] = {}
    for root in roots:
        if root.usage.result_commit is not None:
            by_result.setdefault(root.usage.result_commit, []).append(root)
    where = f"branch {_code(data['branch'])}" if data["branch"] else "a detached HEAD"
    head = _code(data["head"][:12]) if data["head"] else "(no commits)"
    out = [
        f"# Conversation on {where}",
        "",
        f"HEAD {head} · {len(data['messages'])} messages · {data['token_count']} tokens",
        "",
    ]
    for index, message in enumerate(data["messages"], 1):
        title = message["role"]
        if message.get("name"):
            title += f" · {_inline(message['name'])}"
        if message.get("tool_call_id"):
            title += f" · call {_code(message['tool_call_id'])}" + (
                " · error" if message.get("is_error") else ""
            )
        out += [f"## {index}. {title}", "", f"<sub>commit {_code(message['commit'][:12])}</sub>", ""]
        content = message.get("content") or ""
        if content:
            out += [_fence(content), ""]
        markers = _markers(message.get("parts"))
        if markers:
            out += [_inline(markers), ""]
        if message.get("tool_calls"):
            out.append("Tool calls:")
            out += [
                f"- {_code(c['name'])} ({_code(c['id'])}): "
                + _code(
                    c.get("invalid_arguments")
                    or json.dumps(c["arguments"], ensure_ascii=False, sort_keys=True)
                )
                for c in message["tool_calls"]
            ]
            out.append("")
        nodes = by_result.get(message["commit"])
        if nodes:
            out += ["Tool usage:", *[_nest(line) for line in tree_lines(nodes)], ""]
    out += ["## Tool usage history", ""]
    lines = tree_lines(roots)
    out += [_nest(line) for line in lines] if lines else ["No tool usage."]
    out += ["", "## Tool usage statistics", ""]
    stats = data["tool_usage_stats"]
    if stats:
        out += ["| tool | count | success | error | interrupted | success rate | p50 ms | p95 ms |"]
        out += ["|---|---:|---:|---:|---:|---:|---:|---:|"]
        for name, s in stats.items():
            rate = f"{s['success_rate']:.0%}" if s["success_rate"] is not None else "-"
            p50 = f"{s['p50_ms']:.1f}" if s["p50_ms"] is not None else "-"
            p95 = f"{s['p95_ms']:.1f}" if s["p95_ms"] is not None else "-"
            counts = f"{s['count']} | {s['success']} | {s['error']} | {s['interrupted']}"
            out.append(f"| {_inline(name)} | {counts} | {rate} | {p50} | {p95} |")
    else:
        out.append("No tool usage.")
    return "\n".join(out).rstrip() + "\n"


def _markers(parts: object) -> str:
    """Markers for a message's exported parts (their ``{"$bytes"}`` data decoded back for its size)."""
    if not isinstance(parts, list):
        return ""
    decoded = []
    for part in parts:
        data = part.get("data") if isinstance(part, dict) else None
        if isinstance(data, dict) and isinstance(data.get("$bytes"), str):
            decoded.append({**part, "data": base64.b64decode(data["$bytes"])})
        else:
            decoded.append(part)
    return part_markers(decoded)


def _nest(line: str) -> str:
    """A tree line (two spaces per level) as a nested Markdown list item."""
    depth = (len(line) - len(line.lstrip(" "))) // 2
    return f"{'  ' * depth}- {_inline(line.lstrip(' '))}"


# Text from a conversation (a model's or a tool's words, a name, an error) is data, never Markdown: a message
# body goes in a fenced block (shown exactly, whatever it holds: no markup, link or image can come out of it,
# and an unclosed fence inside cannot swallow what follows), and one-line text in a heading, list item or table
# cell has every character that could start markup (emphasis, code, links, images, HTML, entities, tables,
# headings, strike-through) backslash-escaped, which CommonMark shows as the character itself.
_PUNCTUATION = re.compile(r"([\\`*_\[\]<>!|&#~])")


def _inline(text: str) -> str:
    """One line of conversation text as literal Markdown: no markup, no line break that would end it (a ``|``
    is escaped too, so it cannot split a table cell)."""
    return _PUNCTUATION.sub(r"\\\1", " ".join(text.split()))


def _code(text: str) -> str:
    """An inline code span that holds ``text`` literally, whatever backticks it contains (CommonMark: a
    longer fence than any run inside; a space pads a span that starts or ends with a backtick)."""
    flat = " ".join(text.split())
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"
