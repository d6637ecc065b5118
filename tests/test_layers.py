"""Imports only go downward through the layers docs/ARCHITECTURE.md draws, and tractkv's import graph has no cycle.

The layer tables are read from the two machine-read blocks of docs/ARCHITECTURE.md (```layers: the package's
units; ```engine-layers: the engine's sub-layers and the members of each subpackage; the format is described
there), and the blocks are compared with the tree: a module or package the blocks do not name, or one they name
that does not exist, fails ``test_the_layer_blocks_match_the_tree``.

Every import counts: module level, lazy imports inside functions, the modules a ``lazy_exports`` table names
(loaded on first access, so counted as lazy imports), and imports under ``if TYPE_CHECKING:`` (an
annotation that needs a higher layer is a dependency on it all the same). A bare ``import tractkv`` or ``from
tractkv import X`` (X not a module) is an import of the package root, the top layer. There is no allowance:
where a lower layer needs something above it (the facade's deprecated ``Tract.run`` needs the toolkit), the
layer above hands it down (the package root gives the facade a function that finds the toolkit's).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tractkv"
ARCHITECTURE = PACKAGE.parent / "docs" / "ARCHITECTURE.md"


@attrs.frozen(kw_only=True)
class Entry:
    """One entry of a layer block: ``<layer> <unit>[: <member> ...]``."""

    layer: int
    unit: str  # "errors.py" (a module), "engine/" (a package), "content/render/" (a package in a subpackage)
    members: tuple[str, ...] | None  # None: no colon (the block does not list the unit's members)
    line: int  # in the document, for messages

    @property
    def name(self) -> str:
        """The unit as ``unit()`` names it: ``errors``, ``engine``, ``__init__``, ``content/render``."""
        return self.unit.removesuffix(".py").removesuffix("/")


_UNIT = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*/)*(?:[A-Za-z_][A-Za-z0-9_]*(?:\.py|/))")


def parse_layer_block(text: str, name: str) -> list[Entry]:
    """The entries of the one fenced block ```` ```<name> ```` in ``text`` (docs/ARCHITECTURE.md's format).

    Raises:
        ValueError: no such block, two of them, or a line that is not an entry (naming the line).
    """
    lines = text.splitlines()
    starts = [n for n, line in enumerate(lines) if line.strip() == f"```{name}"]
    if len(starts) != 1:
        raise ValueError(f"docs/ARCHITECTURE.md needs exactly one ```{name} block, found {len(starts)}")
    entries: list[Entry] = []
    for number in range(starts[0] + 1, len(lines)):
        raw = lines[number]
        if raw.strip() == "```":
            return entries
        line = raw.split("#", 1)[0].rstrip()
        where = f"```{name} block, line {number + 1}: {raw.strip()!r}"
        if not line.strip():
            continue
        if line[0].isspace():  # more members of the entry above
            last = entries[-1] if entries else None
            if last is None or last.members is None:
                raise ValueError(f"{where}: a continuation line needs an entry with members above it")
            entries[-1] = attrs.evolve(last, members=(*last.members, *line.split()))
            continue
        layer, _, rest = line.partition(" ")
        unit, colon, members = rest.strip().partition(":")
        if not layer.isdigit() or not _UNIT.fullmatch(unit) or (not colon and members.strip()):
            raise ValueError(f"{where}: expected '<layer> <unit>[: <member> ...]'")
        listed = tuple(members.split()) if colon else None
        if listed is not None and not all(_UNIT.fullmatch(m) and "/" not in m[:-1] for m in listed):
            raise ValueError(f"{where}: a member is a module (name.py) or a package (name/) of the unit")
        entries.append(Entry(layer=int(layer), unit=unit, members=listed, line=number + 1))
    raise ValueError(f"the ```{name} block is not closed")


def _children(directory: Path) -> set[str]:
    """The modules (``name.py``) and packages (``name/``) directly in a package directory."""
    return {p.name for p in directory.glob("*.py")} | {
        f"{p.name}/" for p in directory.iterdir() if p.is_dir() and (p / "__init__.py").is_file()
    }


def block_problems(entries: list[Entry], root: Path, *, members: bool) -> list[str]:
    """Where a layer block and the package at ``root`` disagree (empty: they match).

    The block's top-level entries must be exactly the modules and packages in ``root`` (``__init__.py``
    included). With ``members``, every package below ``root`` needs an entry (``outer/inner/`` for a package in
    a subpackage, on its parent's layer) listing exactly its modules and packages (``__init__.py`` left out).
    """
    problems: list[str] = []
    seen: dict[str, Entry] = {}
    for entry in entries:
        if entry.unit in seen:
            problems.append(
                f"line {entry.line}: {entry.unit} is named twice (also line {seen[entry.unit].line})"
            )
        seen[entry.unit] = entry
    top = {unit for unit in seen if "/" not in unit.removesuffix("/")}
    exists = _children(root)
    problems += [f"{root.name}/{u} exists but the block does not name it" for u in sorted(exists - top)]
    problems += [f"line {seen[u].line}: {root.name}/{u} does not exist" for u in sorted(top - exists)]
    if not members:
        return problems
    packages = {
        f"{p.parent.relative_to(root).as_posix()}/"
        for p in root.rglob("__init__.py")
        if p.parent != root and "__pycache__" not in p.parts
    }
    for package in sorted(packages):
        entry = seen.get(package)
        if entry is None:
            problems.append(f"{root.name}/{package} exists but the block has no entry for it")
            continue
        listed = set(entry.members or ())
        actual = _children(root / package) - {"__init__.py"}
        problems += [
            f"{root.name}/{package}{m} exists but line {entry.line} does not list it"
            for m in sorted(actual - listed)
        ]
        problems += [
            f"line {entry.line}: {root.name}/{package}{m} does not exist" for m in sorted(listed - actual)
        ]
        parent = seen.get(package.split("/")[0] + "/")
        if "/" in package.removesuffix("/") and parent is not None and parent.layer != entry.layer:
            problems.append(
                f"line {entry.line}: {package} must be on its subpackage's layer ({parent.layer})"
            )
    problems += [
        f"line {seen[u].line}: {root.name}/{u} does not exist" for u in sorted(set(seen) - top - packages)
    ]
    problems += [
        f"line {seen[u].line}: a module has no members to list"
        for u in sorted(top)
        if u.endswith(".py") and seen[u].members is not None
    ]
    return problems


def layer_table(name: str) -> dict[str, int]:
    """``unit -> layer`` for the top-level entries of docs/ARCHITECTURE.md's ```<name> block."""
    entries = parse_layer_block(ARCHITECTURE.read_text(encoding="utf-8"), name)
    return {e.name: e.layer for e in entries if "/" not in e.name}


# Layer of each top-level unit (module or subpackage) of tractkv, from docs/ARCHITECTURE.md. A unit may import its
# own layer and lower ones; "__init__" is the package root (tractkv/__init__.py), which a bare `import tractkv`
# reaches.
LAYERS = layer_table("layers")
# Units with a layer reserved in the architecture but no module yet.
PLANNED: set[str] = set()

# The engine's sub-layers, from the same document: a module of tractkv.engine may import its own sub-layer and
# lower ones. Each subpackage is a concept with a face (its __init__); the top-level modules above `tools` are
# operations, each a function of a session; "__init__" is the engine's own face (open_session).
ENGINE_LAYERS = layer_table("engine-layers")
ENGINE_PACKAGES = sorted(p.parent.name for p in (PACKAGE / "engine").glob("*/__init__.py"))


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


def test_the_layer_blocks_match_the_tree() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    problems = block_problems(parse_layer_block(text, "layers"), PACKAGE, members=False)
    problems += block_problems(parse_layer_block(text, "engine-layers"), PACKAGE / "engine", members=True)
    report = "\n".join(problems)
    assert problems == [], f"docs/ARCHITECTURE.md's layer blocks and the tree disagree:\n{report}"


SAMPLE_BLOCK = """
```engine-layers
0 content/: payload.py render/   # comment
0 content/render/: openai.py
1 session.py
2 ops/: a.py
   b.py
3 __init__.py
```
"""


def _sample_tree(root: Path) -> None:
    for path in (
        "__init__.py",
        "session.py",
        "content/__init__.py",
        "content/payload.py",
        "content/render/__init__.py",
        "content/render/openai.py",
        "ops/__init__.py",
        "ops/a.py",
        "ops/b.py",
    ):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("", encoding="utf-8")


def test_the_block_checker_sees_every_kind_of_drift(tmp_path: Path) -> None:
    # The test above is only as good as the checker: a sample block and tree that match, then one drift each.
    root = tmp_path / "engine"
    _sample_tree(root)
    entries = parse_layer_block(SAMPLE_BLOCK, "engine-layers")
    assert [(e.layer, e.unit, e.members) for e in entries] == [
        (0, "content/", ("payload.py", "render/")),
        (0, "content/render/", ("openai.py",)),
        (1, "session.py", None),
        (2, "ops/", ("a.py", "b.py")),
        (3, "__init__.py", None),
    ]
    assert block_problems(entries, root, members=True) == []

    def drift(text: str = SAMPLE_BLOCK, *, add: str = "", remove: str = "") -> list[str]:
        if add:
            (root / add).parent.mkdir(parents=True, exist_ok=True)
            (root / add).write_text("", encoding="utf-8")
        if remove:
            (root / remove).unlink()
        try:
            return block_problems(parse_layer_block(text, "engine-layers"), root, members=True)
        finally:
            if add:
                (root / add).unlink()
            if remove:
                (root / remove).write_text("", encoding="utf-8")

    assert drift(add="gc.py") == ["engine/gc.py exists but the block does not name it"]
    assert drift(add="content/extra.py") == ["engine/content/extra.py exists but line 3 does not list it"]
    assert drift(add="ops/deep/__init__.py") == [
        "engine/ops/deep/ exists but line 6 does not list it",
        "engine/ops/deep/ exists but the block has no entry for it",
    ]
    assert drift(remove="ops/b.py") == ["line 6: engine/ops/b.py does not exist"]
    assert drift(SAMPLE_BLOCK.replace("1 session.py", "1 session.py\n1 window.py")) == [
        "line 6: engine/window.py does not exist"
    ]
    assert drift(SAMPLE_BLOCK.replace("0 content/render/", "1 content/render/")) == [
        "line 4: content/render/ must be on its subpackage's layer (0)"
    ]


def test_a_malformed_block_line_is_refused() -> None:
    for bad in ("x session.py", "1 session", "1 session.py payload.py", "1 ops/: a/b.py", "   a.py"):
        with pytest.raises(ValueError, match="block, line 3"):
            parse_layer_block(f"\n```layers\n{bad}\n```\n", "layers")
    with pytest.raises(ValueError, match="exactly one"):
        parse_layer_block("no block here", "layers")


def test_imports_only_go_downward() -> None:
    upward = [
        f"{imp.where()}  ->  {unit(imp.target)} (layer {LAYERS[unit(imp.target)]}) "
        f"from {unit(imp.source)} (layer {LAYERS[unit(imp.source)]})"
        for imp in all_imports()
        if LAYERS[unit(imp.target)] > LAYERS[unit(imp.source)]
    ]
    assert upward == [], "upward imports:\n" + "\n".join(upward)


def test_no_import_cycle_between_top_level_units() -> None:
    edges: dict[str, dict[str, list[Import]]] = defaultdict(lambda: defaultdict(list))
    for imp in all_imports():
        source, target = unit(imp.source), unit(imp.target)
        if source != target:
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
    # into one concept: none is allowed, and there is no allowance list.
    cycles, edges = module_cycles(all_imports())
    report = [f"cycle {' <-> '.join(c)}:\n  " + "\n  ".join(_describe(c, edges)) for c in cycles]
    assert cycles == [], "\n".join(report)


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


# --- sessions: the facade's is its own; code outside the engine opens one only through the engine's face -----

SESSION_ATTRIBUTES = frozenset({"session", "_session"})


@attrs.frozen
class SessionUse:
    path: str  # relative to the repository ("tractkv/aio.py")
    function: str  # the enclosing qualified name ("" at module level)
    line: int
    what: str  # "reach" (another object's .session / ._session) or "construct" (Session(...))
    code: str


def _session_uses(path: Path, text: str | None = None) -> Iterator[SessionUse]:
    """Outside the engine and the facade: each ``.session`` / ``._session`` read on anything but ``self`` or
    an imported module (an object's own session attribute is its business; another object's, a Tract's above
    all, is not), and
    each call of tractkv's ``Session`` class (by a name imported from a tractkv module, or as an attribute of
    an imported tractkv module)."""
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text)
    session_names: set[str] = set()  # local names of tractkv's Session class
    module_names: set[str] = set()  # local names of imported tractkv modules
    imported = {  # every name an import binds: `boto3.session` is a module's attribute, no object's session
        a.asname or a.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for a in node.names
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tractkv") and not node.level:
            session_names |= {a.asname or a.name for a in node.names if a.name == "Session"}
            module_names |= {a.asname or a.name for a in node.names if a.name != "Session"}
        elif isinstance(node, ast.ImportFrom) and node.level:
            session_names |= {a.asname or a.name for a in node.names if a.name == "Session"}
        elif isinstance(node, ast.Import):
            module_names |= {
                a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] == "tractkv"
            }
    where = path.relative_to(PACKAGE.parent).as_posix()

    def visit(node: ast.AST, qual: str) -> Iterator[SessionUse]:
        for child in ast.iter_child_nodes(node):
            inner = qual
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                inner = f"{qual}.{child.name}".lstrip(".")
            if (
                isinstance(child, ast.Attribute)
                and child.attr in SESSION_ATTRIBUTES
                and not (isinstance(child.value, ast.Name) and child.value.id in {"self", *imported})
            ):
                yield SessionUse(where, qual, child.lineno, "reach", ast.unparse(child))
            if (  # getattr(t, "session"), hasattr(...), setattr(...): the same reach by name
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Name)
                and child.func.id in {"getattr", "hasattr", "setattr"}
                and len(child.args) > 1
                and isinstance(child.args[1], ast.Constant)
                and child.args[1].value in SESSION_ATTRIBUTES
                and not (isinstance(child.args[0], ast.Name) and child.args[0].id == "self")
            ):
                yield SessionUse(where, qual, child.lineno, "reach", ast.unparse(child))
            if isinstance(child, ast.Call):
                func = child.func
                root = func
                while isinstance(root, ast.Attribute):
                    root = root.value
                by_name = isinstance(func, ast.Name) and func.id in session_names
                by_module = (
                    isinstance(func, ast.Attribute)
                    and func.attr == "Session"
                    and isinstance(root, ast.Name)
                    and root.id in module_names
                )
                if by_name or by_module:
                    yield SessionUse(where, qual, child.lineno, "construct", ast.unparse(func))
            yield from visit(child, inner)

    yield from visit(tree, "")


def _outside_the_engine() -> list[Path]:
    engine, facade = PACKAGE / "engine", PACKAGE / "tract.py"
    return [p for p in sorted(PACKAGE.rglob("*.py")) if engine not in p.parents and p != facade]


def test_no_code_outside_the_engine_reaches_for_a_session() -> None:
    # The facade's session is private; a layer above drives a Tract through its public methods, and a layer
    # below it (sync, llm) takes the session as an argument the facade passes
    uses = [u for path in _outside_the_engine() for u in _session_uses(path) if u.what == "reach"]
    found = [f"{u.path}:{u.line} ({u.function}): {u.code}" for u in uses]
    assert found == [], (
        "a session reached from outside the engine (add a Tract method, or pass the session):\n"
        + "\n".join(found)
    )


def test_sessions_are_opened_through_the_engine_face() -> None:
    made = [
        f"{u.path}:{u.line} ({u.function}): {u.code}(...)"
        for path in [*_outside_the_engine(), PACKAGE / "tract.py"]
        for u in _session_uses(path)
        if u.what == "construct"
    ]
    assert made == [], "construct sessions with tractkv.engine.open_session(store, ...):\n" + "\n".join(made)


SESSION_SAMPLE = """
import boto3
import tractkv.engine.session as sessions
from tractkv.engine.session import Session
from tractkv.engine.session import Session as S
from tractkv import engine
def f(t, self_like):
    t.session.head
    t._session.compile()
    self_like.tract._session
    self.session.head
    self._session()
    Session(store)
    S(store)
    sessions.Session(store)
    engine.session.Session(store)
    boto3.session.Session()
    engine.open_session(store)
class C:
    def g(self):
        return getattr(self, "x").session
    def h(self, t):
        return getattr(t, "session", None), getattr(self, "_session"), hasattr(t, "_session")
"""


def test_the_session_scan_sees_each_reach_and_construction() -> None:
    # the two tests above are only as good as this scan: read a sample as if it were tractkv/toolkit/loop.py
    found = [
        (u.line, u.what, u.function, u.code)
        for u in _session_uses(PACKAGE / "toolkit" / "loop.py", SESSION_SAMPLE)
    ]
    assert found == [
        (8, "reach", "f", "t.session"),
        (9, "reach", "f", "t._session"),
        (10, "reach", "f", "self_like.tract._session"),
        (13, "construct", "f", "Session"),
        (14, "construct", "f", "S"),
        (15, "construct", "f", "sessions.Session"),
        (16, "construct", "f", "engine.session.Session"),  # engine.session: a module's attribute, no reach
        (21, "reach", "C.g", "getattr(self, 'x').session"),
        (23, "reach", "C.h", "getattr(t, 'session', None)"),
        (23, "reach", "C.h", "hasattr(t, '_session')"),
    ]
