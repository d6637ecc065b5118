"""Imports only go downward through the layers docs/ARCHITECTURE.md draws, and tractkv's import graph has no cycle.

Every import counts: module level, lazy imports inside functions, the modules a ``lazy_exports`` table names
(loaded on first access, so counted as lazy imports), and imports under ``if TYPE_CHECKING:`` (an
annotation that needs a higher layer is a dependency on it all the same). A bare ``import tractkv`` or ``from
tractkv import X`` (X not a module) is an import of the package root, the top layer. The one allowance: the
facade (``tractkv/tract.py``) may reach the toolkit, which sits above it, by a lazy import inside a function
body (a one-line delegation such as ``Tract.run``), never at module level or under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import attrs

PACKAGE = Path(__file__).resolve().parent.parent / "tractkv"

# Layer of each top-level unit (module or subpackage) of tractkv. A unit may import its own layer and lower ones;
# "__init__" is the package root (tractkv/__init__.py), which a bare `import tractkv` reaches.
LAYERS = {
    "errors": 0,
    "ids": 0,
    "codec": 0,
    "_version": 0,
    "_lazy": 0,
    "model": 1,
    "store": 2,
    "engine": 3,
    "llm": 4,
    "sync": 4,
    "tract": 5,
    "aio": 7,
    "toolkit": 6,
    "view": 7,
    "integrations": 7,
    "cli": 8,
    "__init__": 9,
    "__main__": 9,
}
# Units with a layer reserved in the architecture but no module yet.
PLANNED: set[str] = set()

# The engine's sub-layers: a module of tractkv.engine may import its own sub-layer and lower ones. Each
# subpackage is a concept with a face (its __init__); the top-level modules above `tools` are operations, each
# a function of a session; "__init__" is the engine's own face (open_session).
ENGINE_LAYERS = {
    "content": 0,
    "values": 1,
    "history": 2,
    "compile": 3,
    "session": 4,
    "usage": 5,
    "tools": 6,
    "budget": 7,
    "calibration": 7,
    "fitting": 7,
    "merging": 7,
    "branches": 7,
    "gc": 7,
    "spawning": 7,
    "__init__": 8,
}
ENGINE_PACKAGES = sorted(p.parent.name for p in (PACKAGE / "engine").glob("*/__init__.py"))

# Import cycles still being taken apart (each a sorted list of the modules of one cycle). The list may only
# shrink: test_no_import_cycle_among_modules fails on a new cycle and on a listed one that is gone.
KNOWN_CYCLES: list[list[str]] = [
    [
        "tractkv.toolkit.builtin",
        "tractkv.toolkit.context",
        "tractkv.toolkit.executor",
        "tractkv.toolkit.export",
        "tractkv.toolkit.loop",
        "tractkv.toolkit.profiles",
        "tractkv.toolkit.rerun",
        "tractkv.tract",
    ],
]


@attrs.frozen(kw_only=True)
class Import:
    """One import statement of a tractkv module, resolved to the tractkv module it loads."""

    source: str  # importing module, dotted below tractkv ("sync.server"; "" is tractkv/__init__.py)
    path: Path
    line: int
    target: str  # imported module, dotted below tractkv ("" is the package root)
    type_checking: bool  # under `if TYPE_CHECKING:`
    in_function: bool  # inside a function body (a lazy import)
    statement: str

    def where(self) -> str:
        """``tractkv/x.py:12: <statement>`` plus how the import is made, for failure messages."""
        how = [flag for flag, on in (("TYPE_CHECKING", self.type_checking), ("lazy", self.in_function)) if on]
        extra = f"  [{', '.join(how)}]" if how else ""
        return f"{self.path.relative_to(PACKAGE.parent)}:{self.line}: {self.statement}{extra}"


def unit(module: str) -> str:
    """The top-level unit a dotted module (below tractkv) belongs to."""
    return module.split(".", maxsplit=1)[0] or "__init__"


def _dotted(module: str) -> str:
    """The full name of a module given below tractkv (``""`` is the package root)."""
    return f"tractkv.{module}" if module else "tractkv"


def _is_module(dotted: str) -> bool:
    if not dotted:
        return True
    where = PACKAGE.joinpath(*dotted.split("."))
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _from_target(base: str, name: str) -> str:
    """What `from tractkv.<base> import <name>` loads: the submodule if `name` is one, else `base` itself."""
    joined = f"{base}.{name}".strip(".")
    return joined if _is_module(joined) else base


def _below_tractkv(dotted: str) -> str | None:
    if dotted == "tractkv":
        return ""
    if dotted.startswith("tractkv."):
        return dotted[len("tractkv.") :]
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return ast.unparse(test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}


def _lazy_target(package: str, path: str) -> str | None:
    """The module a ``lazy_exports`` table names (a leading dot resolves against ``package``, as import does)."""
    level = len(path) - len(path.lstrip("."))
    if not level:
        return _below_tractkv(path)
    anchor = package.split(".") if package else []
    return ".".join([*anchor[: len(anchor) - (level - 1)], path[level:]])


def _imports_of(path: Path, text: str | None = None) -> Iterator[Import]:
    """Every import of a tractkv module in one file (or in ``text``, read as that file), with how it is made."""
    source = _module_name(path)
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text)
    tables = {  # module-level `NAME = {...}`: what a lazy_exports(__name__, NAME) call reads
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
        for target in node.targets
        if isinstance(target, ast.Name)
    }

    def visit(node: ast.AST, type_checking: bool, in_function: bool) -> Iterator[Import]:
        targets: list[str] = []
        lazy_table = False
        if isinstance(node, ast.Import):
            targets = [t for t in (_below_tractkv(a.name) for a in node.names) if t is not None]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".") if package else []
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base: str | None = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = _below_tractkv(node.module or "")
            if base is not None:
                targets = sorted({_from_target(base, a.name) for a in node.names})
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in {"importlib.import_module", "import_module"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            below = _below_tractkv(node.args[0].value)
            targets = [below] if below is not None else []
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in {"_lazy.lazy_exports", "lazy_exports"}
            and len(node.args) > 1
            and isinstance(table := tables.get(ast.unparse(node.args[1]), node.args[1]), ast.Dict)
        ):
            # names that load on first use: each module named in the table (inline, or a module-level dict) is
            # a lazy import
            paths = {
                v.value for v in table.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
            }
            found = (_lazy_target(package, path) for path in sorted(paths))
            targets = sorted({t for t in found if t is not None})
            lazy_table = True
        for target in targets:
            yield Import(
                source=source,
                path=path,
                line=getattr(node, "lineno", 0),
                target=target,
                type_checking=type_checking,
                in_function=in_function or lazy_table,
                statement=ast.unparse(node),
            )
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for guarded in node.body:
                yield from visit(guarded, True, in_function)
            for unguarded in node.orelse:
                yield from visit(unguarded, type_checking, in_function)
            return
        nested = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            yield from visit(child, type_checking, nested)

    yield from visit(tree, False, False)


def all_imports() -> list[Import]:
    """Every import of a tractkv module made anywhere in the package."""
    return [imp for path in sorted(PACKAGE.rglob("*.py")) for imp in _imports_of(path)]


def is_allowed_upward(imp: Import) -> bool:
    """The one upward import allowed: the facade's lazy, in-function delegation to the toolkit."""
    return (
        imp.source == "tract" and unit(imp.target) == "toolkit" and imp.in_function and not imp.type_checking
    )


def _cycles(edges: dict[str, dict[str, list[Import]]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, {}):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return sorted(found)


def _describe(cycle: list[str], edges: dict[str, dict[str, list[Import]]]) -> list[str]:
    members = set(cycle)
    return [
        f"{source} -> {target}: {imp.where()}"
        for source in cycle
        for target in sorted(set(edges[source]) & members)
        for imp in edges[source][target]
    ]


def test_every_module_has_a_layer() -> None:
    tops = {unit(_module_name(path)) for path in PACKAGE.rglob("*.py")}
    assert sorted(tops - set(LAYERS)) == [], "give each new top-level module or subpackage a layer"
    assert sorted(set(LAYERS) - tops - PLANNED) == [], "a unit with a layer no longer exists"


def test_imports_only_go_downward() -> None:
    upward = [
        f"{imp.where()}  ->  {unit(imp.target)} (layer {LAYERS[unit(imp.target)]}) "
        f"from {unit(imp.source)} (layer {LAYERS[unit(imp.source)]})"
        for imp in all_imports()
        if LAYERS[unit(imp.target)] > LAYERS[unit(imp.source)] and not is_allowed_upward(imp)
    ]
    assert upward == [], "upward imports:\n" + "\n".join(upward)


def test_no_import_cycle_between_top_level_units() -> None:
    edges: dict[str, dict[str, list[Import]]] = defaultdict(lambda: defaultdict(list))
    for imp in all_imports():
        source, target = unit(imp.source), unit(imp.target)
        if source != target and not is_allowed_upward(imp):
            edges[source][target].append(imp)
    cycles = _cycles(edges)
    report = [f"cycle {' <-> '.join(c)}:\n  " + "\n  ".join(_describe(c, edges)) for c in cycles]
    assert cycles == [], "\n".join(report)


def module_cycles(imports: list[Import]) -> tuple[list[list[str]], dict[str, dict[str, list[Import]]]]:
    """The import cycles among modules (a package's __init__ is the package's node), every kind of import
    counted: module level, lazy (in a function, or a lazy_exports table) and TYPE_CHECKING."""
    edges: dict[str, dict[str, list[Import]]] = defaultdict(lambda: defaultdict(list))
    for imp in imports:
        if imp.source != imp.target:
            edges[_dotted(imp.source)][_dotted(imp.target)].append(imp)
    return _cycles(edges), edges


def test_no_import_cycle_among_modules() -> None:
    # A cycle through lazy or TYPE_CHECKING imports cannot break import order, but it still ties two modules
    # into one concept: none is allowed beyond the shrinking KNOWN_CYCLES.
    cycles, edges = module_cycles(all_imports())
    new = [c for c in cycles if c not in KNOWN_CYCLES]
    report = [f"cycle {' <-> '.join(c)}:\n  " + "\n  ".join(_describe(c, edges)) for c in new]
    assert new == [], "\n".join(report)
    gone = [c for c in KNOWN_CYCLES if c not in cycles]
    assert gone == [], f"these cycles are gone: remove them from KNOWN_CYCLES: {gone}"


def engine_unit(module: str) -> str | None:
    """The engine sub-layer unit of a dotted module below tractkv (None outside the engine)."""
    parts = module.split(".")
    if parts[0] != "engine":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def engine_violations(imports: list[Import]) -> list[str]:
    """Engine imports that go up a sub-layer, and imports that reach into an engine subpackage past its face."""
    found = []
    for imp in imports:
        target = engine_unit(imp.target)
        if target is None:
            continue
        source = engine_unit(imp.source)
        if source is not None and ENGINE_LAYERS[target] > ENGINE_LAYERS[source]:
            found.append(f"{imp.where()}  ->  engine.{target} above engine.{source}")
        inside = source == target
        if target in ENGINE_PACKAGES and not inside and imp.target != f"engine.{target}":
            found.append(f"{imp.where()}  ->  {_dotted(imp.target)}: import the face tractkv.engine.{target}")
    return found


def test_every_engine_unit_has_a_sub_layer() -> None:
    units = {engine_unit(_module_name(p)) for p in (PACKAGE / "engine").rglob("*.py")}
    assert sorted(u for u in units if u not in ENGINE_LAYERS) == [], "give each new engine unit a sub-layer"
    assert sorted(set(ENGINE_LAYERS) - units) == [], "an engine unit with a sub-layer no longer exists"


def test_engine_imports_go_down_its_sub_layers_and_through_faces() -> None:
    found = engine_violations(all_imports())
    assert found == [], "\n".join(found)


def test_the_engine_rules_catch_violations() -> None:
    # The rules above fail on a deliberate violation: a compile module importing the session (up a sub-layer),
    # gc importing a compile submodule past its face, and a two-module cycle.
    up = Import(
        source="engine.compile.state",
        path=PACKAGE / "engine" / "compile" / "state.py",
        line=1,
        target="engine.session",
        type_checking=True,
        in_function=False,
        statement="from tractkv.engine.session import Session",
    )
    past = attrs.evolve(
        up,
        source="engine.gc",
        path=PACKAGE / "engine" / "gc.py",
        target="engine.compile.state",
        statement="from tractkv.engine.compile.state import CompileState",
    )
    back = attrs.evolve(up, source="engine.session", target="engine.compile.state", type_checking=False)
    assert len(engine_violations([up, past])) == 2
    cycles, _ = module_cycles([up, back])
    assert cycles == [["tractkv.engine.compile.state", "tractkv.engine.session"]]


SCANNER_SAMPLE = """
from __future__ import annotations
import importlib
import json
from typing import TYPE_CHECKING
import tractkv
import tractkv.store.memory
from tractkv import Tract, codec
from tractkv.errors import SyncError
from . import auth
from .frames import encode_stream
from ..engine.history import graph
if TYPE_CHECKING:
    from tractkv.toolkit.loop import RunResult
else:
    from tractkv.model import Blob
def push() -> None:
    from tractkv.view import app
    importlib.import_module("tractkv.cli")
__getattr__, __dir__ = _lazy.lazy_exports(__name__, {"A": "tractkv.sync.server", "B": "..toolkit.loop", "C": "json"})
_TABLE = {"D": ".frames"}
__getattr__, __dir__ = _lazy.lazy_exports(__name__, _TABLE)
"""


def test_the_import_scanner_sees_every_kind_of_import() -> None:
    # The tests above are only as good as the scanner: read a sample as if it were tractkv/sync/http_client.py.
    found = {
        (imp.line, imp.target, imp.type_checking, imp.in_function)
        for imp in _imports_of(PACKAGE / "sync" / "http_client.py", SCANNER_SAMPLE)
    }
    assert found == {
        (6, "", False, False),  # bare `import tractkv`: the package root
        (7, "store.memory", False, False),
        (8, "", False, False),  # Tract is defined by the root...
        (8, "codec", False, False),  # ...codec is a module
        (9, "errors", False, False),
        (10, "sync.auth", False, False),
        (11, "sync.frames", False, False),
        (12, "engine.history.graph", False, False),
        (14, "toolkit.loop", True, False),
        (16, "model", False, False),  # the else branch of TYPE_CHECKING runs
        (18, "view.app", False, True),
        (19, "cli", False, True),
        (20, "sync.server", False, True),  # a lazy_exports table: loaded on first use, as a lazy import is
        (20, "toolkit.loop", False, True),
        (22, "sync.frames", False, True),  # the table a module-level name holds
    }
    assert unit("") == "__init__"
    assert unit("sync.http_client") == "sync"
    assert _module_name(PACKAGE / "__init__.py") == ""
    assert _module_name(PACKAGE / "store" / "__init__.py") == "store"
