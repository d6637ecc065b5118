"""Imports only go downward through the layers docs/ARCHITECTURE.md draws (lazy imports inside functions
included; imports under ``if TYPE_CHECKING:`` are for annotations only and are exempt)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tractkv"

# Layer of each top-level module or package of tractkv; a module may import its own layer and lower ones.
LAYERS = {
    "errors": 0,
    "ids": 0,
    "codec": 0,
    "model": 1,
    "store": 2,
    "engine": 3,
    "toolkit": 4,
    "llm": 4,
    "sync": 4,
    "view": 5,
    "tract": 6,
    "cli": 7,
    "__init__": 8,
    "__main__": 8,
}


def _top(module: str) -> str:
    return module.split(".", maxsplit=1)[0]


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, top-level tractkv module) of every import in a file outside TYPE_CHECKING blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    relative_base = path.relative_to(PACKAGE).parent.parts
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                skipped.update(id(n) for n in ast.walk(inner))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name[len("tractkv.") :]) for a in node.names if a.name.startswith("tractkv.")
            ]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = relative_base[: len(relative_base) - (node.level - 1)]
                target = ".".join((*base, node.module or "")).strip(".")
                if not target:  # `from . import x` at the package root
                    found += [(node.lineno, a.name) for a in node.names]
                    continue
                found.append((node.lineno, target))
            elif node.module == "tractkv":
                found += [(node.lineno, a.name) for a in node.names]
            elif node.module and node.module.startswith("tractkv."):
                found.append((node.lineno, node.module[len("tractkv.") :]))
    return found


def test_every_module_has_a_layer() -> None:
    tops = {p.stem if p.parent == PACKAGE else p.relative_to(PACKAGE).parts[0] for p in PACKAGE.rglob("*.py")}
    assert tops == set(LAYERS)


def test_imports_only_go_downward() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        own = LAYERS[rel.parts[0] if len(rel.parts) > 1 else path.stem]
        for line, target in _imports(path):
            layer = LAYERS.get(_top(target))
            if layer is not None and layer > own:
                upward.append(f"{rel}:{line} imports {target}")
    assert upward == []
