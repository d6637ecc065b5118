"""MkDocs hooks of the documentation site (mkdocs.yml ``hooks:``); they run at build time, offline.

* ``http-api.md``: the ``<!-- openapi -->`` marker becomes one section per path and method of
  ``docs/openapi.json`` (summary, description, parameters, request body, responses; a shared answer is
  described once, at the end), so the page cannot drift from the document that
  tests/sync/test_protocol_docs.py checks against the routes the hub serves.
* ``changelog.md`` and ``guide.md``: the ``<!-- changelog -->`` / ``<!-- readme -->`` marker becomes the
  repository's ``CHANGELOG.md`` / ``README.md`` (the README without its title), whose links (written relative to
  the repository root, ``docs/versioning.md``) are rewritten relative to docs/.
* every page: a link to a file outside docs/ that the site shows as a page (``../CHANGELOG.md``) is rewritten to
  that page, so the Markdown files keep links that also work when read on disk or in a code host.
"""

from __future__ import annotations

import json
import re
from http import HTTPStatus
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OPENAPI_MARKER = "<!-- openapi -->"
# a marker -> the file from the repository root that replaces it, and whether its first-line title is dropped
INCLUDES = {"<!-- changelog -->": ("CHANGELOG.md", False), "<!-- readme -->": ("README.md", True)}
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
# files outside docs/ that the site shows as a page: their path relative to docs/ -> the page
OUTSIDE_PAGES = {"../CHANGELOG.md": "changelog.md", "../README.md": "guide.md"}
_LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if OPENAPI_MARKER in markdown:
        spec = json.loads((ROOT / "docs" / "openapi.json").read_text(encoding="utf-8"))
        markdown = markdown.replace(OPENAPI_MARKER, openapi_markdown(spec))
    for marker, (name, drop_title) in INCLUDES.items():
        if marker in markdown:
            text = (ROOT / name).read_text(encoding="utf-8")
            if drop_title and text.startswith("# "):
                text = text.split("\n", 1)[1]
            text = _LINK.sub(lambda m: _from_root(m.group(1), m.group(2)), text)
            markdown = markdown.replace(marker, text)
    return _LINK.sub(lambda m: _outside(m.group(1), m.group(2)), markdown)


def _from_root(target: str, anchor: str | None) -> str:
    """A link in CHANGELOG.md (relative to the repository root) made relative to docs/."""
    if "://" not in target and not target.startswith(("/", "#", "mailto:")):
        target = target.removeprefix("docs/") if target.startswith("docs/") else "../" + target
    return f"]({target}{anchor or ''})"


def _outside(target: str, anchor: str | None) -> str:
    return f"]({OUTSIDE_PAGES.get(target, target)}{anchor or ''})"


def openapi_markdown(spec: dict[str, Any]) -> str:
    """One section per path and method of an OpenAPI 3.1 document, in the document's order."""
    out: list[str] = []
    for path, item in spec.get("paths", {}).items():
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            out.append(f"## `{method.upper()} {path}`\n")
            if op.get("summary"):
                out.append(f"**{_inline(op['summary'])}**\n")
            if op.get("description"):
                out.append(op["description"].strip() + "\n")
            params = [*item.get("parameters", []), *op.get("parameters", [])]
            if params:
                out.append("| parameter | in | required | description |\n| --- | --- | --- | --- |")
                for ref in params:
                    p = _resolve(spec, ref)
                    req = "yes" if p.get("required") else "no"
                    desc = _inline(p.get("description", ""))
                    out.append(f"| `{p['name']}` | {p.get('in', '')} | {req} | {desc} |")
                out.append("")
            body = op.get("requestBody")
            if body:
                body = _resolve(spec, body)
                kinds = ", ".join(f"`{k}`" for k in body.get("content", {}))
                desc = _inline(body.get("description", ""))
                out.append(f"Request body ({kinds}){': ' + desc if desc else ''}\n")
            responses = op.get("responses", {})
            if responses:
                out.append("| status | meaning |\n| --- | --- |")
                for status, ref in responses.items():
                    out.append(f"| {status} | {_response_cell(spec, status, ref)} |")
                out.append("")
    shared = spec.get("components", {}).get("responses", {})
    if shared:
        # a shared answer (an error body used by every route) is described once, not in every row
        out.append("## Shared answers\n")
        for name, answer in shared.items():
            out.append(f"### `{name}`\n\n{answer.get('description', '').strip()}\n")
    return "\n".join(out)


def _response_cell(spec: dict[str, Any], status: str, node: dict[str, Any]) -> str:
    ref = node.get("$ref", "")
    if ref.startswith("#/components/responses/"):
        name = ref.rsplit("/", 1)[-1]
        phrase = HTTPStatus(int(status)).phrase if status.isdigit() else status
        return f"{phrase} (body: [`{name}`](#{name.lower()}))"
    return _inline(_resolve(spec, node).get("description", ""))


def _resolve(spec: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """Follows a local ``$ref`` (``#/components/...``)."""
    while isinstance(node, dict) and "$ref" in node:
        found: Any = spec
        for key in node["$ref"].removeprefix("#/").split("/"):
            found = found[key]
        node = found
    return node


def _inline(text: str) -> str:
    """Text for one table cell: on one line, with its pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")
