"""A Griffe extension for the API reference (mkdocs.yml): the docstrings' reST roles as Markdown code.

tractkv's docstrings name other objects as Sphinx does (``:class:`~tractkv.errors.MissingExtra```), which
Markdown would show as a stray ``:class:`` before the code span. This rewrites each role to the code span a
reader expects: the last component when the target starts with ``~``, the whole target otherwise.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|mod|func|meth|attr|exc|data|obj|const|ref):`(~?)([^`]+)`")


def plain_roles(text: str) -> str:
    def code(m: re.Match[str]) -> str:
        target = m.group(2)
        return f"`{target.rsplit('.', 1)[-1]}`" if m.group(1) else f"`{target}`"

    return _ROLE.sub(code, text)


class RolesExtension(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **_: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain_roles(obj.docstring.value)
