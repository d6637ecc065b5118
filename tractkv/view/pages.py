"""The viewer's pages: data from :mod:`tractkv.view.inspector` rendered as HTML with :mod:`tractkv.view.html`.

Every function returns :class:`~tractkv.view.html.Markup` built only with ``el``/``join``, so any text from the
store is escaped. A page's ``body`` is also what a live refresh fetches (``?fragment=1``).
"""

from __future__ import annotations

import functools
import json
from datetime import datetime
from typing import Any, cast
from urllib.parse import urlencode

from tractkv.engine.content import Message, ToolCall, read_stored, schema_name
from tractkv.engine.history import describe_commit
from tractkv.engine.usage import RERUNNABLE, STATUSES, ToolStats, ToolUsage, UsageNode
from tractkv.engine.values import CommitInfo, DiffEntry, StatusInfo
from tractkv.ids import ObjectId

from .html import Markup, Template, el, join, pretty_json
from .inspector import (
    CallView,
    CommitView,
    DiffView,
    ForceRange,
    GraphPage,
    GraphRow,
    ToolVersion,
    UsagePage,
    text_diff,
    tool_diff,
)
from .media import MediaIndex, content_blocks, elide_media, media_index

LANE = 14  # px between graph lanes
ROW = 28  # px per graph row (the CSS gives rows this height)
PREVIEW = 140  # characters of a message shown in one graph row
SHOWN_RESULT = 1_000  # characters of a usage result shown before "show all"
SHOWN_ARGS = 4_000
CONTEXT_PAGE = 200  # messages of a compiled context per commit page
DIFF_SHOWN = 500  # changed messages shown on a diff page (the counts cover them all)

FORMATS = ("openai", "anthropic")


def url(path: str, **params: Any) -> str:
    """``path?query`` with the params that are not None (values quoted)."""
    query = urlencode({k: v for k, v in params.items() if v is not None and v != ""})
    return f"{path}?{query}" if query else path


def short(oid: str | None) -> str:
    return oid[:12] if oid else "-"


def when(moment: datetime | None) -> Markup:
    if moment is None:
        return el("span", "-", class_="muted")
    text = moment.strftime("%Y-%m-%d %H:%M:%S UTC")
    return el("time", text, datetime=moment.isoformat())


def commit_link(oid: str | None, ref: str | None = None) -> Markup:
    if oid is None:
        return el("span", "-", class_="muted")
    return el("a", short(oid), href=url(f"/ui/commit/{oid}", ref=ref), class_="oid", title=oid)


def nav(ref: str | None = None, *, sign_out: bool = False) -> Markup:
    items = [
        el("a", "Branches", href="/ui/"),
        el("a", "Tools", href="/ui/tools"),
        el("a", "Compare", href="/ui/diff"),
    ]
    if ref is not None:
        items += [
            el("span", branch_name(ref), class_="ref", title=ref),
            el("a", "Graph", href=url("/ui/log", ref=ref)),
            el("a", "Tool usage", href=url("/ui/usage", ref=ref)),
            el("a", "Search", href=url("/ui/search", ref=ref)),
        ]
    if sign_out:
        items.append(el("form", el("button", "Sign out", type="submit"), method="post", action="/ui/logout"))
    return el("nav", items)


def preview(info: CommitInfo) -> str:
    """One line describing a commit (:func:`tractkv.engine.history.describe.describe_commit`, as the CLI and the
    built-in tools describe it), cut to ``PREVIEW`` characters."""
    return describe_commit(info).line(PREVIEW)


def branch_name(ref: str) -> str:
    """A branch ref as people name it: ``main`` for refs/heads/main, ``origin/main`` for a tracking one."""
    return ref.removeprefix("refs/heads/").removeprefix("refs/remotes/")


def ref_badges(refs: tuple[str, ...], current: str | None) -> Markup:
    """Branch and tag labels, as ``git log --decorate`` shows them: ``HEAD → main`` for HEAD's branch,
    ``tag: v1`` for a tag."""
    out = []
    for ref in refs:
        if ref.startswith("refs/tags/"):
            out.append(
                el("span", "tag: ", ref.removeprefix("refs/tags/"), class_="badge tip kind-tag", title=ref)
            )
        elif ref == current:
            out.append(el("span", "HEAD → ", branch_name(ref), class_="badge tip head", title=ref))
        else:
            kind = "remote" if ref.startswith("refs/remotes/") else "local"
            out.append(el("span", branch_name(ref), class_=f"badge tip kind-{kind}", title=ref))
    return join(out)


def status_badge(status: str) -> Markup:
    return el("span", status, class_=f"badge status-{_css(status)}")


def call_arguments(arguments: Any) -> Markup:
    """Tool-call arguments as indented JSON (a JSON string, as OpenAI sends them, is decoded first; text that
    is not JSON is shown as it is)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return el("pre", arguments, class_="json arguments")
    return _clip(pretty_json(arguments), SHOWN_ARGS, "json arguments")


def _clip(text: str, limit: int, name: str) -> Markup:
    """``text`` in a <pre>, cut at ``limit`` with the rest behind a <details> (still escaped)."""
    if len(text) <= limit:
        return el("pre", text, class_=name)
    return join(
        el("pre", text[:limit] + "…", class_=name),
        el(
            "details",
            el("summary", f"show all {len(text):,} characters"),
            el("pre", text, class_=name),
            class_="more",
        ),
    )


# --- branches --------------------------------------------------------------------------------------------


def branches_body(branches: list[StatusInfo], detached: str | None = None) -> Markup:
    """The branches table (the engine's branch summaries, :func:`tractkv.engine.branches.summaries`);
    ``detached``: the commit HEAD is detached at (no branch is current then)."""
    marker = (
        el("p", "HEAD detached at ", commit_link(detached), class_="detached-head")
        if detached is not None
        else None
    )
    if not branches:
        return join(el("h1", "Branches"), marker, el("p", "This store has no branches yet.", class_="empty"))
    rows = [
        el(
            "tr",
            el(
                "td",
                el("a", b.branch, href=url("/ui/log", ref=b.ref), class_="branch"),
                " ",
                el("span", "HEAD", class_="badge head", title="the current branch (HEAD)")
                if b.is_current
                else None,
            ),
            el("td", el("span", _kind(b), class_=f"badge kind-{_kind(b)}")),
            el("td", commit_link(b.head, b.ref)),
            el("td", f"{b.commit_count:,}", class_="num"),
            el("td", f"{b.message_count:,}", class_="num"),
            el("td", f"{b.token_count:,}", class_="num tokens"),
            el("td", _count_badge(b)),
            el("td", _budget_cell(b), class_="num budget"),
            el("td", when(b.last_activity)),
            el("td", el("a", "tool usage", href=url("/ui/usage", ref=b.ref))),
            data_ref=b.ref,
            class_="current" if b.is_current else None,
            aria_current="true" if b.is_current else None,
        )
        for b in branches
    ]
    head = el(
        "tr",
        [
            el("th", h)
            for h in (
                "Branch",
                "",
                "Head",
                "Commits",
                "Messages",
                "Tokens",
                "Count",
                "Budget",
                "Last activity",
                "",
            )
        ],
    )
    return join(
        el("h1", "Branches"), marker, el("table", el("thead", head), el("tbody", rows), class_="branches")
    )


def _count_badge(b: StatusInfo) -> Markup:
    """``reported`` (a provider's usage anchors the count) or ``estimated``, the other figure in its title."""
    title = (
        f"the provider's reported input of the newest reply plus estimates since; local estimate "
        f"{b.estimated_tokens or 0:,}"
        if b.count_source == "reported"
        else "the local estimate (no reply's usage applies)"
    )
    return el("span", b.count_source, class_=f"badge count-{_css(b.count_source)}", title=title)


BUDGET_ACTIONS = {
    "warn": "a commit over the budget is kept and reported",
    "reject": "a commit over the budget is refused",
    "trim": "a commit over the budget makes a trim commit that skips the oldest messages",
    "compress": "a commit over the budget makes a compress commit summarizing the oldest messages",
}


def _budget_cell(b: StatusInfo) -> Markup | str:
    """``used / max (percent)``, marked when over, then the budget's action (and the threshold it runs at
    when below the whole budget); empty without a budget."""
    if b.token_budget is None or b.budget_used is None:
        return ""
    over = b.budget_used > 1
    action = b.budget_action or "warn"
    threshold = 1.0 if b.budget_threshold is None else b.budget_threshold
    at = f" at {threshold:.0%}" if threshold < 1 else ""
    return join(
        el(
            "span",
            f"{b.token_count:,} / {b.token_budget:,} ({b.budget_used:.0%})",
            class_="budget-over" if over else "budget-ok",
            title="over the branch's token budget" if over else "within the branch's token budget",
        ),
        " ",
        el(
            "span",
            action + at,
            class_=f"badge budget-action action-{_css(action)}",
            title=BUDGET_ACTIONS.get(action, action) + (f", from {threshold:.0%} of it" if at else ""),
        ),
    )


def _kind(b: StatusInfo) -> str:
    return "remote" if b.is_remote else "local"


# --- the commit graph ------------------------------------------------------------------------------------


# A graph page repeats one row shape a hundred times: filled from templates (html.Template: every value
# escaped) rather than ~17 el() calls a row, the cost of the page's HTML falls about fivefold.
_TIME = Template('<time datetime="{}">{}</time>')
_NO_TIME = Markup('<span class="muted">-</span>')
_GRAPH_ROW = Template(
    '<tr data-commit="{}" data-kind="{}" class="commit-row"><td class="graph-cell">{}</td>'
    '<td><a href="{}" class="oid" title="{}">{}</a></td><td><span class="badge op-{}">{}</span></td>'
    '<td class="role">{}</td><td class="content"><div class="line">{}<a href="{}" class="preview">{}</a></div></td>'
    '<td class="num tokens">{}</td><td class="time">{}</td></tr>'
)


def lanes_svg(row: GraphRow) -> Markup:
    width = row.width * LANE
    mid = ROW // 2
    half = LANE // 2
    # Only ints and the operation's CSS name (letters, digits, "-") go in: nothing here needs escaping.
    lines = [
        f'<line x1="{half + a * LANE}" y1="0" x2="{half + b * LANE}" y2="{mid}" class="edge lane-{a % 6}" />'
        for a, b in row.top
    ]
    lines += [
        f'<line x1="{half + a * LANE}" y1="{mid}" x2="{half + b * LANE}" y2="{ROW}" class="edge lane-{b % 6}" />'
        for a, b in row.bottom
    ]
    op = row.info.operation
    cx = half + row.lane * LANE
    if op == "edit":
        node = f'<path d="M{cx} {mid - 6}L{cx + 6} {mid}L{cx} {mid + 6}L{cx - 6} {mid}Z" class="node" />'
    elif op == "compress":
        node = f'<rect x="{cx - 5}" y="{mid - 5}" width="10" height="10" class="node" />'
    else:
        node = f'<circle cx="{cx}" cy="{mid}" r="{6 if op == "merge" else 4.5}" class="node" />'
    return Markup(
        f'<svg width="{width}" height="{ROW}" viewBox="0 0 {width} {ROW}" class="lanes" aria-hidden="true">'
        f'{"".join(lines)}<g class="op-{_css(op)}">{node}</g></svg>'  # _css keeps letters, digits and "-"
    )


@functools.lru_cache(maxsize=256)
def _css(name: str) -> str:
    """A name as a CSS class part: letters and digits kept, anything else ``-`` (so it needs no escaping)."""
    return "".join(ch if ch.isalnum() else "-" for ch in name)


def _time(moment: datetime | None) -> Markup:
    """:func:`when` from a template (the same HTML)."""
    if moment is None:
        return _NO_TIME
    return _TIME(moment.isoformat(), moment.strftime("%Y-%m-%d %H:%M:%S UTC"))


ROW_PARTS = 4096  # commits whose description and time a graph row keeps (a live page redraws the same rows)
_row_parts: dict[tuple[str, int], tuple[str, str, str, Markup]] = {}


def _described(info: CommitInfo) -> tuple[str, str, str, Markup]:
    """(kind, role, one-line description, time) of a graph row's commit: derived from the commit alone, so
    kept by id (and token count: the counter's); the cache is emptied when full (bounded, thread-safe)."""
    key = (info.commit_id, info.token_count)
    got = _row_parts.get(key)
    if got is None:
        described = describe_commit(info)
        got = (described.kind, described.role or "", described.line(PREVIEW), _time(info.created_at))
        if len(_row_parts) >= ROW_PARTS:
            _row_parts.clear()
        _row_parts[key] = got
    return got


def graph_row(row: GraphRow, ref_query: str, current: str | None) -> Markup:
    """One commit of the graph: lanes, id, operation, role, its one-line description with the branches whose
    tip it is, tokens, time. ``ref_query``: the links' query (``url("", ref=...)``, made once a page)."""
    info = row.info
    kind, role, line, moment = _described(info)
    oid = info.commit_id
    href = f"/ui/commit/{oid}{ref_query}"  # escaped as an attribute by the template
    return _GRAPH_ROW(
        oid,
        kind,
        lanes_svg(row),
        href,
        oid,
        short(oid),
        _css(info.operation),
        info.operation,
        role,
        Markup('<span class="tips">') + ref_badges(row.tips, current) + Markup("</span>") if row.tips else "",
        href,
        line,
        f"{info.token_count:,}" if info.token_count else "",
        moment,
    )


def graph_body(page: GraphPage) -> Markup:
    title = el("h1", "History of ", el("span", branch_name(page.ref), class_="ref", title=page.ref))
    if page.head is None:
        return join(title, el("p", "This branch has no commits yet.", class_="empty"))
    query = url("", ref=page.ref)
    rows = Markup("".join([graph_row(row, query, page.current) for row in page.rows]))
    table = el(
        "table",
        el(
            "thead",
            el(
                "tr",
                [
                    el("th", h, class_=c)
                    for h, c in (
                        ("", None),
                        ("Commit", None),
                        ("Operation", None),
                        ("Role", None),
                        ("Content", None),
                        ("Tokens", "tokens"),
                        ("Time", "time"),
                    )
                ],
            ),
        ),
        el("tbody", rows),
        class_="graph",
    )
    return join(
        title,
        spawn_tree(page),
        _pager("/ui/log", page.start, page.limit, len(page.rows), page.more, "commits", ref=page.ref),
        table,
    )


def spawn_tree(page: GraphPage) -> Markup:
    """The branch's place in the spawn tree: where it was spawned from, and its children (open ones link to
    their branch's history, collapsed ones to their last commit and to the commit that brought them back)."""
    if page.parent is None and not page.children:
        return Markup("")
    parts = []
    parent = page.parent
    if parent is not None:
        from_branch = (
            el("a", parent.branch, href=url("/ui/log", ref=f"refs/heads/{parent.branch}"), class_="ref")
            if parent.branch
            else el("span", "a detached HEAD", class_="muted")
        )
        at = (
            el("a", short(parent.commit), href=url(f"/ui/commit/{parent.commit}"), class_="oid")
            if parent.commit
            else el("span", "an empty branch", class_="muted")
        )
        parts.append(
            el(
                "p",
                "Spawned from ",
                from_branch,
                " at ",
                at,
                f" ({parent.inherit}) for: ",
                el("span", parent.purpose, class_="purpose"),
                class_="spawn-parent",
            )
        )
    rows = []
    for child in page.children:
        if child.branch is not None:
            history = el(
                "a", child.branch, href=url("/ui/log", ref=f"refs/heads/{child.branch}"), class_="ref"
            )
        else:
            history = el(
                "a", f"history at {short(child.head)}", href=url(f"/ui/commit/{child.head}"), class_="oid"
            )
        back = (
            el("a", short(child.collapsed_by), href=url(f"/ui/commit/{child.collapsed_by}"), class_="oid")
            if child.collapsed_by
            else ""
        )
        rows.append(
            el(
                "tr",
                el("td", el("span", child.state, class_=f"badge spawn-{_css(child.state)}")),
                el("td", child.purpose, class_="purpose"),
                el("td", history),
                el("td", child.inherit),
                el("td", back, f" via {child.collapsed_via}" if child.collapsed_via else ""),
                el("td", when(child.created_at)),
                class_="child-row",
                data_state=child.state,
            )
        )
    if rows:
        head = el(
            "tr",
            [el("th", h) for h in ("State", "Purpose", "History", "Inherit", "Brought back by", "Spawned")],
        )
        parts.append(el("h2", f"Children ({len(rows)})"))
        parts.append(el("table", el("thead", head), el("tbody", rows), class_="children"))
    return el("section", parts, class_="spawn-tree")


def _pager(path: str, start: int, limit: int, shown: int, more: bool, what: str, **params: Any) -> Markup:
    """Newer / older links around ``shown`` items from ``start`` (nothing when everything fits one page)."""
    if not (more or start):
        return Markup("")
    links = []
    if start > 0:
        newer = url(path, start=max(0, start - limit), limit=limit, **params)
        links.append(el("a", "« Newer", href=newer, rel="prev"))
    label = f"{what} {start + 1:,} to {start + shown:,}" if shown else f"no {what} from {start + 1:,} on"
    links.append(el("span", label, class_="muted"))
    if more:
        links.append(
            el("a", "Older »", href=url(path, start=start + limit, limit=limit, **params), rel="next")
        )
    return el("div", links, class_="pager")


# --- one commit ------------------------------------------------------------------------------------------


COMMIT_LINKS = {"child": "Collapsed child", "parent": "Spawned from"}  # links naming commits (spawning)


def _child_banner(view: CommitView) -> Markup | None:
    """ "Child of <parent branch>" above a commit of a spawned child's history (the child's branch may be gone:
    a collapsed child is reached only through links), with its purpose and the commit that brought it back."""
    spawned = view.spawned
    if spawned is None:
        return None
    parent = (
        el("a", spawned.branch, href=url("/ui/log", ref=f"refs/heads/{spawned.branch}"), class_="ref")
        if spawned.branch
        else el("span", "a detached HEAD", class_="muted")
    )
    back = (
        join(" · brought back by ", commit_link(view.brought_back_by, None))
        if view.brought_back_by is not None
        else None
    )
    return el(
        "p",
        "Child of ",
        parent,
        " for: ",
        el("span", spawned.purpose, class_="purpose"),
        f" ({spawned.inherit}, spawned in ",
        commit_link(spawned.spawn_commit, None),
        ")",
        back,
        class_="child-banner",
        data_state="collapsed" if view.brought_back_by is not None else "spawned",
    )


def commit_body(view: CommitView, fmt: str, first: int | None = None) -> Markup:
    info = view.info
    facts: list[tuple[str, Any]] = [
        ("Commit", el("code", info.commit_id)),
        ("Operation", el("span", info.operation, class_=f"badge op-{_css(info.operation)}")),
        ("Summary", el("span", preview(info), class_="summary")),
        ("Created", when(info.created_at)),
        ("Parents", join([commit_link(p, view.ref) for p in info.parent_ids]) or "none (root)"),
        ("Compare", _compare_links(info, view.ref)),
    ]
    if info.role:
        facts.append(("Role", info.role))
    if info.content_type:
        facts.append(("Content type", info.content_type))
    if info.token_count:
        facts.append(("Tokens", f"{info.token_count:,}"))
    if info.edit_target:
        facts.append(("Target", commit_link(info.edit_target, view.ref)))
    if info.reply_to:
        facts.append(("Answers", commit_link(info.reply_to, view.ref)))
    if info.message:
        facts.append(("Note", info.message))
    for name, ids in sorted(view.links.items()):
        if name in COMMIT_LINKS:  # a collapsed child's head, a spawned child's parent: commits to open
            facts.append((COMMIT_LINKS[name], join(commit_link(i, None) for i in ids)))
            continue
        facts.append((f"Links: {name}", join(el("code", short(i), title=i, class_="oid") for i in ids)))
    if view.usage_count and view.ref:
        facts.append(
            (
                "Tool usage",
                el(
                    "a",
                    f"{view.usage_count} recorded execution(s)",
                    href=url("/ui/usage", ref=view.ref, commit=info.commit_id),
                ),
            )
        )
    sections = [
        el("h1", "Commit ", el("code", short(info.commit_id))),
        _child_banner(view),
        el("dl", [join(el("dt", k), el("dd", v)) for k, v in facts], class_="facts"),
        el("h2", "Content"),
        _clip(pretty_json(info.content), 20_000, "json content")
        if info.content is not None
        else el("p", "No content (bookkeeping commit).", class_="muted"),
    ]
    if view.calls:
        sections += [
            el("h2", f"Tool calls ({len(view.calls)})"),
            join(_call_card(c, view) for c in view.calls),
        ]
    by_calls = {id(n) for c in view.calls for n in c.executions}
    answered = [n for n in view.executions if id(n) not in by_calls]
    if answered:
        sections += [
            el("h2", "Tool executions answered here" if info.reply_to else "Tool executions"),
            executions_list(answered, view.usage_ref, info.commit_id),
        ]
    if info.metadata:
        sections += [el("h2", "Metadata"), el("pre", pretty_json(info.metadata), class_="json")]
    if info.generation_config:
        sections += [
            el("h2", "Generation config"),
            el("pre", pretty_json(info.generation_config), class_="json"),
        ]
    sections.append(el("h2", "Annotations"))
    if view.annotations:
        sections.append(
            el(
                "ul",
                [
                    el(
                        "li",
                        el("span", a.priority, class_=f"badge priority-{_css(a.priority)}"),
                        " ",
                        a.reason or "",
                        " ",
                        commit_link(a.commit, view.ref),
                    )
                    for a in view.annotations
                ],
                class_="annotations",
            )
        )
    else:
        sections.append(el("p", "None.", class_="muted"))
    sections += [el("h2", f"Tools in force ({len(view.tools)})"), tools_list(view.tools)]
    sections.append(context_section(view, fmt, first))
    return join(sections)


def _compare_links(info: CommitInfo, ref: str | None) -> Markup:
    links = []
    for i, parent in enumerate(info.parent_ids, start=1):
        label = "diff with parent" if len(info.parent_ids) == 1 else f"diff with parent {i}"
        links.append(
            el("a", label, href=url("/ui/diff", a=parent, b=info.commit_id, ref=ref), class_="diff-link")
        )
    links.append(el("a", "compare with…", href=url("/ui/diff", b=info.commit_id, ref=ref)))
    return join(links)


def _call_card(view: CallView, commit: CommitView) -> Markup:
    call = view.call
    if view.executions:
        runs = executions_list(view.executions, commit.usage_ref, commit.info.commit_id)
    else:
        where = f"on {branch_name(commit.usage_ref)}" if commit.usage_ref else "in this commit's history"
        runs = el("p", f"No recorded execution {where}.", class_="muted")
    return el(
        "article",
        el(
            "header",
            el("a", call.name, href=url("/ui/tool", name=call.name), class_="tool-name"),
            el("code", call.id, class_="call-id", title="tool call id"),
        ),
        el("div", el("span", "arguments", class_="key"), call_arguments(_shown_arguments(call))),
        el("div", el("span", "executions", class_="key"), runs),
        id=f"call-{call.id}",
        class_="call",
    )


def executions_list(nodes: list[UsageNode] | tuple[UsageNode, ...], ref: str | None, commit: str) -> Markup:
    """Top-level executions as one line each, linked to their place on the usage page."""
    items = []
    for node in nodes:
        u = node.usage
        href = url("/ui/usage", ref=ref, commit=commit) + f"#u-{u.id}"
        items.append(
            el(
                "li",
                status_badge(u.status),
                el("a", "execution of ", el("span", u.tool_name, class_="tool-name"), href=href),
                el("span", "" if u.duration_ms is None else f"{u.duration_ms:,.1f} ms", class_="muted"),
                el("span", f"{len(node.children)} nested", class_="muted") if node.children else None,
                join("answered in ", commit_link(u.result_commit, ref)) if u.result_commit else None,
                data_usage=u.id,
            )
        )
    return el("ul", items, class_="executions")


def tools_list(tools: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> Markup:
    if not tools:
        return el("p", "No tools.", class_="muted")
    items = []
    for tool in tools:
        name, description = _tool_title(tool)
        items.append(
            el(
                "details",
                el(
                    "summary",
                    el("a", name, href=url("/ui/tool", name=name), class_="tool-name"),
                    " ",
                    el("span", description, class_="muted"),
                ),
                el("pre", pretty_json(tool), class_="json"),
                class_="tool",
            )
        )
    return el("div", items, class_="tools")


def _tool_title(tool: dict[str, Any]) -> tuple[str, str]:
    spec = read_stored(tool)  # any stored definition, a store written before today's tool rules too
    description = spec.description or str(spec.fields.get("title") or "")
    if len(description) > 120:
        description = description[:119] + "…"
    return schema_name(tool), description


def request_params(view: CommitView, fmt: str) -> dict[str, Any]:
    """The request parameters the compiled context makes for ``fmt`` (``openai`` or ``anthropic``)."""
    ctx = view.context
    params = ctx.to_openai_params() if fmt == "openai" else ctx.to_anthropic_params()
    return cast("dict[str, Any]", params)  # read as the JSON it is (the SDKs' types are for callers)


def context_section(view: CommitView, fmt: str, first: int | None = None) -> Markup:
    """The request as the model receives it, one card per message, ``CONTEXT_PAGE`` messages at a time
    (by default the last ones: the end of a context is what the commit added)."""
    ctx = view.context
    base = f"/ui/commit/{view.info.commit_id}"
    tabs = el(
        "div",
        [
            el(
                "a",
                label,
                href=url(base, ref=view.ref, fmt=name) + "#context",
                class_="tab active" if name == fmt else "tab",
                data_fmt=name,
            )
            for name, label in (("openai", "OpenAI"), ("anthropic", "Anthropic"))
        ],
        class_="tabs",
        role="tablist",
    )
    params = request_params(view, fmt)
    messages = params.get("messages", [])
    total = len(messages)
    if first is None:
        first = max(0, total - CONTEXT_PAGE)
    first = max(0, min(first, max(0, total - 1)))
    shown = messages[first : first + CONTEXT_PAGE]
    cards: list[Markup] = []
    if fmt == "anthropic" and "system" in params and first == 0:
        system = {"role": "system", "content": params["system"]}
        cards.append(_message_card(system, None, view, "system", {}))
    aligned = fmt == "openai" and total == len(ctx.commit_ids)
    media = media_index(ctx.messages)  # thumbnails load from /ui/media/<id>, never inline
    for i, message in enumerate(shown, start=first):
        commit = ctx.commit_ids[i] if aligned else None
        cards.append(_message_card(message, commit, view, str(message.get("role", "?")), media))
    pager = None
    if total > CONTEXT_PAGE:
        links = []
        if first > 0:
            back = max(0, first - CONTEXT_PAGE)
            links.append(
                el("a", "« Earlier", href=url(base, ref=view.ref, fmt=fmt, **{"from": back}) + "#context")
            )
        links.append(
            el("span", f"messages {first + 1:,} to {first + len(shown):,} of {total:,}", class_="muted")
        )
        if first + len(shown) < total:
            ahead = first + CONTEXT_PAGE
            links.append(
                el("a", "Later »", href=url(base, ref=view.ref, fmt=fmt, **{"from": ahead}) + "#context")
            )
        pager = el("div", links, class_="pager")
    tools = params.get("tools", [])
    json_url = url(f"{base}/request.json", fmt=fmt)
    raw = (
        el(
            "details",
            el("summary", "Request parameters as JSON"),
            el("pre", pretty_json(elide_media(params)), class_="json raw-params"),
            class_="raw",
        )
        if total <= CONTEXT_PAGE
        else None
    )
    return el(
        "section",
        el("h2", "Compiled context at this commit"),
        el(
            "p",
            f"{len(ctx.messages):,} message(s), {ctx.token_count:,} tokens ({ctx.token_source}), "
            f"{len(ctx.tools)} tool(s); exactly what ",
            el("code", "client.chat.completions.create" if fmt == "openai" else "client.messages.create"),
            " receives (",
            el("a", "as JSON", href=json_url, class_="request-json"),
            ").",
            class_="muted",
        ),
        tabs,
        pager,
        el("div", cards or el("p", "No messages.", class_="muted"), class_="messages", data_format=fmt),
        pager,
        el("h3", f"Tools sent ({len(tools)})"),
        tools_list(tools),
        raw,
        id="context",
    )


def _message_card(
    message: dict[str, Any], commit: ObjectId | None, view: CommitView, role: str, media: MediaIndex
) -> Markup:
    annotation = view.message_annotations.get(commit) if commit else None
    header = [el("span", role, class_="role")]
    if commit:
        header.append(commit_link(commit, view.ref))
    if annotation is not None:
        header.append(el("span", annotation.priority, class_=f"badge priority-{_css(annotation.priority)}"))
    body = []
    for key, value in message.items():
        if key == "role" or (key == "content" and value is None and "tool_calls" in message):
            continue  # an assistant message that only calls tools: its calls say it all
        if key == "content" and isinstance(value, str):
            body.append(el("pre", value, class_="text"))
        elif key == "content" and isinstance(value, list):  # parts / blocks: text, thumbnails, markers
            body.append(el("div", content_blocks(value, media), class_="blocks"))
        elif key == "tool_calls" and isinstance(value, list):
            body.append(el("div", [_context_call(c) for c in value], class_="calls"))
        else:
            body.append(
                el("div", el("span", key, class_="key"), el("pre", pretty_json(value), class_="json"))
            )
    current = " current" if commit == view.info.commit_id else ""
    return el(
        "article",
        el("header", header),
        body,
        class_=f"message role-{_css(role)}{current}",
        data_commit=commit,
    )


def _context_call(call: Any) -> Markup:
    """One call of a request's ``tool_calls`` (OpenAI's shape): its name and id, the arguments as JSON."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return el("pre", pretty_json(call), class_="json")
    return el(
        "div",
        el(
            "div",
            el("span", "call ", class_="key"),
            el("span", str(function.get("name")), class_="tool-name"),
            " ",
            el("code", str(call.get("id")), class_="call-id"),
        ),
        call_arguments(function.get("arguments")),
        class_="context-call",
    )


# --- tool usages -----------------------------------------------------------------------------------------


def usage_body(page: UsagePage, tool: str | None, status: str | None, commit: str | None) -> Markup:
    title = el("h1", "Tool usage on ", el("span", branch_name(page.ref), class_="ref", title=page.ref))
    filters = el(
        "form",
        el("input", type="hidden", name="ref", value=page.ref),
        el("input", type="hidden", name="commit", value=commit) if commit else None,
        el(
            "label",
            "Tool ",
            el(
                "select",
                el("option", "any", value=""),
                [el("option", n, value=n, selected=n == tool) for n in page.tool_names],
                name="tool",
                class_="auto-submit",
            ),
        ),
        el(
            "label",
            "Status ",
            el(
                "select",
                el("option", "any", value=""),
                [el("option", s, value=s, selected=s == status) for s in STATUSES],
                name="status",
                class_="auto-submit",
            ),
        ),
        el("button", "Filter", type="submit"),
        el("a", "clear", href=url("/ui/usage", ref=page.ref)) if tool or status or commit else None,
        method="get",
        action="/ui/usage",
        class_="filters",
    )
    parts = [title, el("h2", "Per tool"), stats_table(page.stats), el("h2", "Executions by message"), filters]
    if commit:
        parts.append(el("p", "Only the message ", commit_link(commit, page.ref), ".", class_="muted"))
    if not page.groups:
        parts.append(el("p", "No tool executions match.", class_="empty"))
        return join(parts)
    params = {"ref": page.ref, "tool": tool, "status": status, "commit": commit}
    parts.append(
        _pager("/ui/usage", page.start, page.limit, len(page.groups), page.more, "messages", **params)
    )
    for group in page.groups:
        if group.info is not None:
            head = join(
                "Message ",
                commit_link(group.commit, page.ref),
                " ",
                el("span", preview(group.info), class_="muted"),
            )
        else:
            head = join("Not started by a message")
        parts.append(
            el(
                "section",
                el("h3", head),
                el("div", [usage_node(n, page, depth=0) for n in group.roots], class_="usage-tree"),
                class_="usage-group",
                data_commit=group.commit,
            )
        )
    return join(parts)


def stats_table(stats: dict[str, ToolStats]) -> Markup:
    if not stats:
        return el("p", "No tool has run on this branch.", class_="muted")

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:,.1f} ms"

    rows = [
        el(
            "tr",
            el("td", el("a", s.tool_name, href=url("/ui/tool", name=s.tool_name))),
            el("td", f"{s.count:,}", class_="num"),
            el("td", f"{s.success:,}", class_="num"),
            el("td", f"{s.error:,}", class_="num error" if s.error else "num"),
            el("td", f"{s.interrupted:,}", class_="num error" if s.interrupted else "num"),
            el("td", f"{s.pending:,}", class_="num"),
            el("td", "-" if s.success_rate is None else f"{s.success_rate:.0%}", class_="num"),
            el("td", ms(s.p50_ms), class_="num"),
            el("td", ms(s.p95_ms), class_="num"),
            data_tool=s.tool_name,
        )
        for s in stats.values()
    ]
    head = ("Tool", "Count", "Success", "Error", "Interrupted", "Running", "Success rate", "p50", "p95")
    return el(
        "table",
        el("thead", el("tr", [el("th", h) for h in head])),
        el("tbody", rows),
        class_="stats",
    )


def usage_node(node: UsageNode, page: UsagePage, depth: int) -> Markup:
    u = node.usage
    duration = "" if u.duration_ms is None else f"{u.duration_ms:,.1f} ms"
    classes = f"usage status-{u.status}" + (" match" if u.id in page.matching else " context")
    failed = sum(d > 0 and x.status in ("error", "interrupted") for d, x in node.walk())
    summary = el(
        "summary",
        el("span", u.tool_name, class_="tool-name"),
        el("span", u.status, class_=f"badge status-{u.status}"),
        el("span", duration, class_="duration"),
        el("span", f"{len(node.children)} nested", class_="nested-count") if node.children else None,
        el("span", f"{failed} failed inside", class_="badge failed-inside") if failed else None,
    )
    detail: list[Markup] = [
        el("div", el("span", "started ", class_="key"), when(u.started_at), class_="fact"),
    ]
    detail.append(
        el("div", el("span", "arguments", class_="key"), _clip(pretty_json(u.arguments), SHOWN_ARGS, "json"))
    )
    if u.error:
        detail.append(el("div", el("span", "error", class_="key"), el("pre", u.error, class_="error-text")))
    if u.result is not None:
        note = f" (cut at record time: {u.result_chars:,} characters in all)" if u.truncated else ""
        detail.append(
            el("div", el("span", "result" + note, class_="key"), _clip(u.result, SHOWN_RESULT, "text result"))
        )
    refs, reruns = _usage_refs(u, page), page.reruns.get(u.id, ())
    if refs:
        detail.append(el("div", [el("span", r) for r in refs], class_="fact refs"))
    if (
        u.status in RERUNNABLE
        and u.parent_id is None
        and u.result_commit is not None
        and not any(r.status == "success" for r in reruns)  # `usage rerun` refuses a second successful one
    ):
        # The viewer never writes (see docs/decisions.md, Viewer): it shows the command that re-runs it.
        detail.append(
            el(
                "div",
                el("span", "re-run (on this branch) ", class_="key"),
                el("code", f"tractkv usage rerun {u.id}", class_="rerun-command"),
                class_="fact rerun",
            )
        )
    children = (
        el("div", [usage_node(c, page, depth + 1) for c in node.children], class_="children")
        if node.children
        else None
    )
    # Errors start expanded; with a filter, so does every group holding a match (so the match shows).
    return el(
        "details",
        summary,
        el("div", detail, class_="usage-detail"),
        children,
        id=f"u-{u.id}",
        class_=classes,
        data_depth=depth,
        open=u.status == "error"
        or (page.filtered and any(d and x.id in page.matching for d, x in node.walk()))
        or None,
    )


def _usage_refs(u: ToolUsage, page: UsagePage) -> list[Markup]:
    """What an execution links to: the call that started it, the commit it answered in, the child
    conversations it ran, the execution it re-ran and the re-runs of it."""
    refs: list[Markup] = []
    if u.commit_id:
        target = url(f"/ui/commit/{u.commit_id}", ref=page.ref) + (
            f"#call-{u.tool_call_id}" if u.tool_call_id else ""
        )
        refs.append(
            join(
                "started by ",
                join("call ", el("code", u.tool_call_id), " in ") if u.tool_call_id else None,
                el("a", short(u.commit_id), href=target, class_="oid started-by", title=u.commit_id),
            )
        )
    if u.result_commit:
        refs.append(join("answered in ", commit_link(u.result_commit, page.ref)))
    if u.heads:
        refs.append(join("child conversation ", join(commit_link(h, page.ref) for h in u.heads)))
    if u.rerun_of:
        refs.append(join("re-run of ", el("a", u.rerun_of, href=_usage_href(u.rerun_of, u.commit_id, page))))
    reruns = page.reruns.get(u.id, ())
    if reruns:
        refs.append(
            join(
                "re-run as ",
                join(
                    join(
                        el("a", r.id, href=_usage_href(r.id, r.commit_id, page), class_="rerun-link"),
                        " ",
                        status_badge(r.status),
                    )
                    for r in reruns
                ),
            )
        )
    return refs


def _usage_href(usage_id: str, commit: str | None, page: UsagePage) -> str:
    """A link to execution ``usage_id``: its anchor when this page shows it, else the usage page of the
    message that started it (which does), at its anchor."""
    if any(x.id == usage_id for g in page.groups for root in g.roots for _, x in root.walk()):
        return f"#u-{usage_id}"
    return url("/ui/usage", ref=page.ref, commit=commit) + f"#u-{usage_id}"


# --- tool definitions ------------------------------------------------------------------------------------


def tools_index_body(names: list[tuple[str, int]]) -> Markup:
    if not names:
        return join(el("h1", "Tools"), el("p", "No tool schema is stored.", class_="empty"))
    rows = [
        el("tr", el("td", el("a", n, href=url("/ui/tool", name=n))), el("td", f"{count}", class_="num"))
        for n, count in names
    ]
    return join(
        el("h1", "Tools"),
        el("table", el("thead", el("tr", el("th", "Tool"), el("th", "Versions"))), el("tbody", rows)),
    )


def tool_body(
    name: str, versions: list[ToolVersion], a: int, b: int, ranges: list[ForceRange], cut: bool = False
) -> Markup:
    items = []
    for i, v in enumerate(versions, start=1):
        items.append(
            el(
                "details",
                el("summary", f"version {i} ", el("code", short(v.oid), title=v.oid, class_="oid")),
                el("pre", v.text, class_="json"),
                class_="tool-version",
                id=f"v{i}",
            )
        )
    parts = [
        el("h1", "Tool ", el("code", name)),
        el("h2", f"Versions ({len(versions)})"),
        join(items),
        el("h2", "Where each version was in force"),
        in_force_table(ranges, cut),
    ]
    if len(versions) > 1:
        choose = el(
            "form",
            el("input", type="hidden", name="name", value=name),
            el("label", "Compare ", _version_select("a", len(versions), a)),
            el("label", " with ", _version_select("b", len(versions), b)),
            el("button", "Diff", type="submit"),
            method="get",
            action="/ui/tool",
            class_="filters",
        )
        lines = tool_diff(versions[a - 1], versions[b - 1])
        diff = _diff_lines(lines) if lines else el("p", "The two versions are identical.", class_="muted")
        parts += [el("h2", f"Diff: version {a} → version {b}"), choose, diff]
    return join(parts)


def in_force_table(ranges: list[ForceRange], cut: bool) -> Markup:
    """Per version, the stretches of each branch's first-parent line whose tools in force held it."""
    note = el(
        "p",
        "Along each branch's first-parent line (merged-in commits count under the merge), oldest to newest.",
        " Only the newest commits of long branches were searched." if cut else None,
        class_="muted",
    )
    if not ranges:
        return join(note, el("p", "No version of this tool is in force on any branch.", class_="empty"))
    rows = [
        el(
            "tr",
            el("td", el("a", f"v{r.version}", href=f"#v{r.version}")),
            el("td", el("a", branch_name(r.ref), href=url("/ui/log", ref=r.ref), class_="branch")),
            el("td", commit_link(r.first, r.ref)),
            el(
                "td",
                commit_link(r.last, r.ref),
                " ",
                el("span", "tip", class_="badge kind-local") if r.at_tip else None,
            ),
            el("td", f"{r.commits:,}", class_="num"),
            data_version=r.version,
            data_ref=r.ref,
        )
        for r in ranges
    ]
    head = el(
        "tr",
        [el("th", h) for h in ("Version", "Branch", "First commit", "Last commit")],
        el("th", "Commits", class_="num"),
    )
    return join(note, el("table", el("thead", head), el("tbody", rows), class_="in-force"))


def _version_select(field: str, count: int, chosen: int) -> Markup:
    return el(
        "select",
        [el("option", f"v{i}", value=i, selected=i == chosen) for i in range(1, count + 1)],
        name=field,
    )


# --- the difference between two commits -----------------------------------------------------------------

CHANGE_SIGN = {"added": "+", "removed": "-", "modified": "~"}


def diff_form(a: str, b: str, ref: str | None, invalid: str | None = None) -> Markup:
    """The Compare form, filled in; ``invalid`` ("a" or "b") marks the field the error is about."""

    def field(name: str, value: str, example: str) -> Markup:
        bad = name == invalid
        return el(
            "input",
            type="text",
            name=name,
            value=value,
            placeholder=example,
            required=True,
            class_="invalid" if bad else None,
            aria_invalid="true" if bad else None,
            autofocus=bad or None,
        )

    return el(
        "form",
        el("input", type="hidden", name="ref", value=ref) if ref else None,
        el("label", "From ", field("a", a, "e.g. main~3")),
        el("label", "to ", field("b", b, "e.g. main")),
        el("button", "Compare", type="submit"),
        method="get",
        action="/ui/diff",
        class_="filters diff-form",
    )


def diff_intro(
    a: str, b: str, ref: str | None, error: str | None = None, invalid: str | None = None
) -> Markup:
    """The Compare page's heading and form, filled in; ``error``: what was wrong with what the form was given
    (shown above it), ``invalid``: the field ("a" or "b") it is about."""
    return join(
        el("h1", "Compare two commits"),
        el(
            "p",
            "Any revision: a commit id or prefix, a branch, HEAD, main~2, explore^2.",
            class_="muted",
        ),
        el("p", error, class_="error-text form-error", role="alert") if error else None,
        diff_form(a, b, ref, invalid),
    )


def diff_body(view: DiffView | None, a: str, b: str, ref: str | None) -> Markup:
    """Two commits' difference: the messages of their compiled contexts and their tools in force."""
    parts = [diff_intro(a, b, ref)]
    if view is None:
        return join(parts)
    changes = view.context
    parts.append(
        el(
            "dl",
            el("dt", "From"),
            el("dd", commit_link(view.a.commit_id, ref), el("span", preview(view.a), class_="muted")),
            el("dt", "To"),
            el("dd", commit_link(view.b.commit_id, ref), el("span", preview(view.b), class_="muted")),
            el("dt", "Tokens"),
            el("dd", f"{changes.token_delta:+,}"),
            class_="facts",
        )
    )
    counts = {k: sum(e.change == k for e in changes.entries) for k in CHANGE_SIGN}
    summary = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "no change"
    parts.append(el("h2", f"Messages ({summary})"))
    if changes.entries:
        shown = changes.entries[:DIFF_SHOWN]
        parts.append(el("div", [_diff_entry(e, ref) for e in shown], class_="diff-entries"))
        if len(shown) < len(changes.entries):
            parts.append(
                el(
                    "p",
                    f"The first {len(shown):,} of {len(changes.entries):,} changes; compare closer commits "
                    "for the rest.",
                    class_="muted more-changes",
                )
            )
    else:
        parts.append(el("p", "The two compiled contexts have the same messages.", class_="muted"))
    tool_summary = ", ".join(
        f"{sum(t.change == k for t in view.tools)} {k}"
        for k in CHANGE_SIGN
        if any(t.change == k for t in view.tools)
    )
    if not view.tools and not view.same_tools:
        parts.append(el("h2", "Tools (no tools)"))
        parts.append(el("p", "Neither commit has tools in force.", class_="muted"))
    else:
        parts.append(el("h2", f"Tools ({tool_summary or 'no change'}; {view.same_tools} unchanged)"))
    if not view.tools and view.same_tools:
        parts.append(el("p", "The same tools are in force at both.", class_="muted"))
    for change in view.tools:
        parts.append(
            el(
                "section",
                el(
                    "h3",
                    el(
                        "span",
                        CHANGE_SIGN[change.change] + " " + change.change,
                        class_=f"badge change-{change.change}",
                    ),
                    " ",
                    el("a", change.name, href=url("/ui/tool", name=change.name), class_="tool-name"),
                ),
                _diff_lines(change.lines),
                class_="tool-change",
                data_tool=change.name,
                data_change=change.change,
            )
        )
    return join(parts)


def _diff_entry(entry: DiffEntry, ref: str | None) -> Markup:
    message = entry.after if entry.after is not None else entry.before
    assert message is not None
    where = (
        f"#{entry.index_before + 1} → #{entry.index_after + 1}"
        if entry.index_before is not None and entry.index_after is not None
        else f"#{(entry.index_after if entry.index_after is not None else entry.index_before or 0) + 1}"
    )
    if entry.before is not None and entry.after is not None:
        body = _diff_lines(text_diff(message_text(entry.before), message_text(entry.after)))
    else:
        body = el("pre", message_text(message), class_="text")
    return el(
        "article",
        el(
            "header",
            el("span", CHANGE_SIGN[entry.change] + " " + entry.change, class_=f"badge change-{entry.change}"),
            el("span", message.role, class_="role"),
            commit_link(entry.commit_id, ref),
            el("span", f"message {where}", class_="muted"),
        ),
        body,
        class_=f"message diff-entry change-{entry.change} role-{_css(message.role)}",
        data_commit=entry.commit_id,
        data_change=entry.change,
    )


def message_text(message: Message) -> str:
    """A compiled message as text for the diff: its text, then each tool call with indented JSON arguments."""
    lines = [message.content] if message.content else []
    if message.tool_call_id:
        lines.append(f"(answers call {message.tool_call_id}{', an error' if message.is_error else ''})")
    for call in message.tool_calls:
        lines.append(_call_text(call))
    for part in message.parts:
        if part.type != "text":
            lines.append(f"[{part.type}{' ' + part.media_type if part.media_type else ''}]")
    return "\n".join(lines)


def _call_text(call: ToolCall) -> str:
    shown = call.invalid_arguments if call.invalid_arguments is not None else pretty_json(call.arguments)
    return f"call {call.name} ({call.id}):\n{shown}"


def _shown_arguments(call: ToolCall) -> Any:
    """A call's arguments as the model wrote them when they were not a JSON object (the exact string), else
    the object."""
    return call.invalid_arguments if call.invalid_arguments is not None else call.arguments


def _diff_lines(lines: list[tuple[str, str]] | tuple[tuple[str, str], ...]) -> Markup:
    if not lines:
        return el("p", "No difference in text.", class_="muted")
    return el("pre", [el("span", line + "\n", class_=f"diff-{kind}") for kind, line in lines], class_="diff")


# --- errors and login ------------------------------------------------------------------------------------


def error_body(status: int, message: str) -> Markup:
    return join(
        el("h1", f"{status}"),
        el("p", message, class_="error-text"),
        el("p", el("a", "Branches", href="/ui/")),
    )


def login_body(message: str | None = None) -> Markup:
    return join(
        el("h1", "Sign in"),
        el("p", message, class_="error-text") if message else None,
        el("p", "This hub needs a token with the read scope.", class_="muted"),
        el(
            "form",
            el(
                "label",
                "Token ",
                el("input", type="password", name="token", autocomplete="off", required=True),
            ),
            el("button", "Sign in", type="submit"),
            method="post",
            action="/ui/login",
            class_="filters",
        ),
    )
