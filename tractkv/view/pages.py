"""The viewer's pages: data from :mod:`tractkv.view.inspector` rendered as HTML with :mod:`tractkv.view.html`.

Every function returns :class:`~tractkv.view.html.Markup` built only with ``el``/``join``, so any text from the
store is escaped. A page's ``body`` is also what a live refresh fetches (``?fragment=1``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from tractkv.engine.describe import describe_commit
from tractkv.engine.records import CommitInfo
from tractkv.engine.toolsets import read_stored, schema_name
from tractkv.engine.usage_stats import ToolStats
from tractkv.engine.usage_tree import RERUNNABLE, STATUSES, UsageNode
from tractkv.ids import ObjectId

from .html import Markup, el, join, pretty_json
from .inspector import (
    BranchSummary,
    CommitView,
    GraphPage,
    GraphRow,
    ToolVersion,
    UsagePage,
    tool_diff,
)
from .media import MediaIndex, content_blocks, elide_media, media_index

LANE = 14  # px between graph lanes
ROW = 28  # px per graph row (the CSS gives rows this height)
PREVIEW = 140  # characters of a message shown in one graph row
SHOWN_RESULT = 1_000  # characters of a usage result shown before "show all"
SHOWN_ARGS = 4_000
CONTEXT_PAGE = 200  # messages of a compiled context per commit page

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
    items = [el("a", "Branches", href="/ui/"), el("a", "Tools", href="/ui/tools")]
    if ref is not None:
        items += [
            el("span", ref.removeprefix("refs/heads/").removeprefix("refs/remotes/"), class_="ref"),
            el("a", "Graph", href=url("/ui/log", ref=ref)),
            el("a", "Tool usage", href=url("/ui/usage", ref=ref)),
        ]
    if sign_out:
        items.append(el("form", el("button", "Sign out", type="submit"), method="post", action="/ui/logout"))
    return el("nav", items)


def preview(info: CommitInfo) -> str:
    """One line describing a commit (:func:`tractkv.engine.describe.describe_commit`, as the CLI and the
    built-in tools describe it), cut to ``PREVIEW`` characters."""
    return describe_commit(info).line(PREVIEW)


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


def branches_body(branches: list[BranchSummary]) -> Markup:
    if not branches:
        return join(el("h1", "Branches"), el("p", "This store has no branches yet.", class_="empty"))
    rows = [
        el(
            "tr",
            el("td", el("a", b.name, href=url("/ui/log", ref=b.ref), class_="branch")),
            el("td", el("span", _kind(b), class_=f"badge kind-{_kind(b)}")),
            el("td", commit_link(b.head, b.ref)),
            el("td", f"{b.commit_count:,}", class_="num"),
            el("td", f"{b.message_count:,}", class_="num"),
            el("td", f"{b.token_count:,}", class_="num"),
            el("td", when(b.last_activity)),
            el("td", el("a", "tool usage", href=url("/ui/usage", ref=b.ref))),
            data_ref=b.ref,
        )
        for b in branches
    ]
    head = el(
        "tr",
        [el("th", h) for h in ("Branch", "", "Head", "Commits", "Messages", "Tokens", "Last activity", "")],
    )
    return join(el("h1", "Branches"), el("table", el("thead", head), el("tbody", rows), class_="branches"))


def _kind(b: BranchSummary) -> str:
    return "remote" if b.is_remote else "local"


# --- the commit graph ------------------------------------------------------------------------------------


def lanes_svg(row: GraphRow) -> Markup:
    width = row.width * LANE
    mid = ROW // 2

    def x(lane: int) -> int:
        return LANE // 2 + lane * LANE

    lines = [el("line", x1=x(a), y1=0, x2=x(b), y2=mid, class_=f"edge lane-{a % 6}") for a, b in row.top] + [
        el("line", x1=x(a), y1=mid, x2=x(b), y2=ROW, class_=f"edge lane-{b % 6}") for a, b in row.bottom
    ]
    op = row.info.operation
    cx = x(row.lane)
    if op == "edit":
        node = el("path", d=f"M{cx} {mid - 6}L{cx + 6} {mid}L{cx} {mid + 6}L{cx - 6} {mid}Z", class_="node")
    elif op == "compress":
        node = el("rect", x=cx - 5, y=mid - 5, width=10, height=10, class_="node")
    else:
        node = el("circle", cx=cx, cy=mid, r=6 if op == "merge" else 4.5, class_="node")
    return el(
        "svg",
        lines,
        el("g", node, class_=f"op-{_css(op)}"),
        width=width,
        height=ROW,
        viewBox=f"0 0 {width} {ROW}",
        class_="lanes",
        aria_hidden="true",
    )


def _css(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in name)


def graph_body(page: GraphPage) -> Markup:
    title = el("h1", "History of ", el("span", page.ref, class_="ref"))
    if page.head is None:
        return join(title, el("p", "This branch has no commits yet.", class_="empty"))
    rows = []
    for row in page.rows:
        info = row.info
        described = describe_commit(info)
        href = url(f"/ui/commit/{info.commit_id}", ref=page.ref)
        rows.append(
            el(
                "tr",
                el("td", lanes_svg(row), class_="graph-cell"),
                el("td", el("a", short(info.commit_id), href=href, class_="oid", title=info.commit_id)),
                el("td", el("span", info.operation, class_=f"badge op-{_css(info.operation)}")),
                el("td", described.role or "", class_="role"),
                el("td", el("a", described.line(PREVIEW), href=href, class_="preview")),
                el("td", f"{info.token_count:,}" if info.token_count else "", class_="num"),
                el("td", when(info.created_at)),
                data_commit=info.commit_id,
                data_kind=described.kind,
                class_="commit-row",
            )
        )
    table = el(
        "table",
        el(
            "thead",
            el("tr", [el("th", h) for h in ("", "Commit", "Operation", "Role", "Content", "Tokens", "Time")]),
        ),
        el("tbody", rows),
        class_="graph",
    )
    return join(
        title,
        _pager("/ui/log", page.start, page.limit, len(page.rows), page.more, "commits", ref=page.ref),
        table,
    )


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


def commit_body(view: CommitView, fmt: str, first: int | None = None) -> Markup:
    info = view.info
    facts: list[tuple[str, Any]] = [
        ("Commit", el("code", info.commit_id)),
        ("Operation", el("span", info.operation, class_=f"badge op-{_css(info.operation)}")),
        ("Summary", el("span", preview(info), class_="summary")),
        ("Created", when(info.created_at)),
        ("Parents", join([commit_link(p, view.ref) for p in info.parent_ids]) or "none (root)"),
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
        el("dl", [join(el("dt", k), el("dd", v)) for k, v in facts], class_="facts"),
        el("h2", "Content"),
        _clip(pretty_json(info.content), 20_000, "json content")
        if info.content is not None
        else el("p", "No content (bookkeeping commit).", class_="muted"),
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
    return ctx.to_openai_params() if fmt == "openai" else ctx.to_anthropic_params()


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
        if key == "role":
            continue
        if key == "content" and isinstance(value, str):
            body.append(el("pre", value, class_="text"))
        elif key == "content" and isinstance(value, list):  # parts / blocks: text, thumbnails, markers
            body.append(el("div", content_blocks(value, media), class_="blocks"))
        else:
            body.append(
                el("div", el("span", key, class_="key"), el("pre", pretty_json(value), class_="json"))
            )
    current = " current" if commit == view.info.commit_id else ""
    return el("article", el("header", header), body, class_=f"message role-{_css(role)}{current}")


# --- tool usages -----------------------------------------------------------------------------------------


def usage_body(page: UsagePage, tool: str | None, status: str | None, commit: str | None) -> Markup:
    title = el("h1", "Tool usage on ", el("span", page.ref, class_="ref"))
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
    refs = []
    if u.result_commit:
        refs.append(join("answered in ", commit_link(u.result_commit, page.ref)))
    if u.heads:
        refs.append(join("child conversation ", join(commit_link(h, page.ref) for h in u.heads)))
    if u.rerun_of:
        refs.append(join("re-run of ", el("a", u.rerun_of, href=f"#u-{u.rerun_of}")))
    if refs:
        detail.append(el("div", refs, class_="fact"))
    if u.status in RERUNNABLE and u.parent_id is None and u.result_commit is not None:
        # The viewer never writes (see docs/ARCHITECTURE.md, Viewer): it shows the command that re-runs it.
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


def tool_body(name: str, versions: list[ToolVersion], a: int, b: int) -> Markup:
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
    parts = [el("h1", "Tool ", el("code", name)), el("h2", f"Versions ({len(versions)})"), join(items)]
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
        diff = (
            el("pre", [el("span", line + "\n", class_=f"diff-{kind}") for kind, line in lines], class_="diff")
            if lines
            else el("p", "The two versions are identical.", class_="muted")
        )
        parts += [el("h2", f"Diff: version {a} → version {b}"), choose, diff]
    return join(parts)


def _version_select(field: str, count: int, chosen: int) -> Markup:
    return el(
        "select",
        [el("option", f"v{i}", value=i, selected=i == chosen) for i in range(1, count + 1)],
        name=field,
    )


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
