"""Names a module exports but loads on first use (PEP 562): the one helper behind every lazy table in tractkv.

``__getattr__, __dir__ = lazy_exports(__name__, {"Name": "module.path", ...})`` at module level: the first access
to ``Name`` imports its module (a leading dot resolves against the module's package, as in ``from .x import``)
and keeps ``Name``, and every other name mapped to that module, as globals, so later lookups never reach
``__getattr__``. An unknown name raises the ``AttributeError`` Python itself raises; ``dir()`` lists the lazy
names beside the loaded ones. Modules keep ``if TYPE_CHECKING:`` imports of the same names (with the call in
the ``else`` branch where they want type checkers to reject unknown names), so a type checker sees the real
types. In the bottom layer, importing nothing but the standard library modules every interpreter has loaded.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

_MISSING = object()


def lazy_exports(
    module_name: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``module_name`` (being imported) for ``exports``:
    public name -> the module that defines it."""
    module = sys.modules[module_name]
    namespace = vars(module)
    package = module.__package__
    table = dict(exports)

    def module_getattr(name: str) -> Any:
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        try:
            loaded = importlib.import_module(where, package)
        except ModuleNotFoundError as exc:
            from importlib.util import resolve_name

            if exc.name == resolve_name(where, package):  # the mapped module itself, not one it imports
                exc.add_note(f"{module_name}.{name} is exported lazily from {where!r}, which does not exist")
            raise
        value = getattr(loaded, name)
        for each, other in table.items():  # the module's other names cost nothing more now: keep them too
            if other == where and each != name and (found := getattr(loaded, each, _MISSING)) is not _MISSING:
                namespace[each] = found
        namespace[name] = value  # later accesses are plain global lookups
        return value

    def module_dir() -> list[str]:
        return sorted(set(namespace) | set(table))

    return module_getattr, module_dir
