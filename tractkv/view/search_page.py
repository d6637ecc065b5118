"""The viewer's search page, ``/ui/search?q=...&ref=...``: a form and the hits of
:func:`tractkv.engine.search.search`, server-rendered (every value escaped by :func:`~tractkv.view.html.el`;
the match is a ``<mark>`` around escaped text).

The page searches through its own read-only session (:class:`Searcher`): the index it builds is kept in this
process (a read-only handle writes nothing); a store whose index ``tractkv grep`` or a writing handle saved
is read from its ``derived`` table.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from tractkv.engine import open_session

from .html import Markup, el, join
from .pages import commit_link, when

if TYPE_CHECKING:
    from tractkv.engine.values import SearchHit
    from tractkv.store import Store

SHOWN = 200  # hits shown on one page
ROLES = ("system", "user", "assistant", "tool")


class Searcher:
    """Searches one store for the viewer: a read-only session of its own, one search at a time."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._session = open_session(store, readonly=True)
        self._lock = threading.Lock()  # a session is not thread-safe; requests run in a thread pool

    def search(self, ref: str, query: str, options: dict[str, str]) -> list[SearchHit]:
        """Hits for the page's ``options`` (``regex``, ``i``, ``role``, ``tool``, ``scope``: query values).

        Raises:
            InvalidInput: an empty or bad pattern, an unknown scope. UnknownRevision: ``ref``."""
        from tractkv.engine.search import search  # lazy: loads the index module on the first search

        with self._lock:
            return search(
                self._session,
                query,
                regex=options.get("regex") == "1",
                ignore_case=options.get("i") == "1",
                role=options.get("role") or None,
                tool=options.get("tool") or None,
                scope=options.get("scope") or "history",
                branch=ref,
                limit=SHOWN + 1,
            )


def search_form(ref: str, query: str, options: dict[str, str]) -> Markup:
    def checkbox(name: str, label: str) -> Markup:
        box = el("input", type="checkbox", name=name, value="1", checked=options.get(name) == "1" or None)
        return el("label", box, " ", label)

    def select(name: str, label: str, choices: tuple[str, ...], blank: str | None) -> Markup:
        items = [el("option", blank, value="")] if blank is not None else []
        items += [el("option", c, value=c, selected=options.get(name) == c or None) for c in choices]
        return el("label", label, " ", el("select", items, name=name))

    return el(
        "form",
        el("input", type="hidden", name="ref", value=ref),
        el(
            "input",
            type="search",
            name="q",
            value=query,
            placeholder="text, tool name, argument...",
            required=True,
        ),
        checkbox("i", "ignore case"),
        checkbox("regex", "regular expression"),
        select("role", "role", ROLES, "any"),
        el("label", "tool ", el("input", type="text", name="tool", value=options.get("tool", ""), size="12")),
        select("scope", "in", ("history", "context"), None),
        el("button", "Search", type="submit"),
        method="get",
        action="/ui/search",
        class_="filters search-form",
    )


def _hit(hit: SearchHit, ref: str) -> Markup:
    text = hit.snippet
    where = hit.field if hit.tool is None else f"{hit.field} ({hit.tool})"
    return el(
        "li",
        el(
            "div",
            commit_link(hit.commit_id, ref),
            " ",
            el("span", hit.role or hit.operation, class_="badge"),
            " ",
            el("span", where, class_="muted field"),
            " ",
            when(hit.created_at),
            class_="hit-head",
        ),
        el(
            "pre", text[: hit.start], el("mark", text[hit.start : hit.end]), text[hit.end :], class_="snippet"
        ),
        class_="search-hit",
    )


def search_body(
    ref: str, query: str, options: dict[str, str], hits: list[SearchHit] | None, error: str | None
) -> Markup:
    """The form, then an error (a bad pattern), or the hits (at most :data:`SHOWN`), or nothing yet."""
    parts = [
        el("h1", "Search"),
        el(
            "p",
            "Message text, tool calls (name and arguments), tool results, notes and metadata of the branch's "
            "history, newest first; or only what compile sends now.",
            class_="muted",
        ),
        search_form(ref, query, options),
    ]
    if error is not None:
        parts.append(el("p", error, class_="error search-error", role="alert"))
    elif hits is not None:
        more = len(hits) > SHOWN
        count = f"the first {SHOWN:,} hits" if more else f"{len(hits):,} hit{'s' * (len(hits) != 1)}"
        parts.append(el("h2", count.capitalize() if more else count, class_="hit-count"))
        parts.append(el("ol", [_hit(h, ref) for h in hits[:SHOWN]], class_="search-hits"))
    return join(parts)
