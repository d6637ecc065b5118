"""Size rules for tractkv's own code, with an exception list that may only shrink.

Limits: a module <= 700 lines, a class <= 500 lines, a function or method <= 80 lines (decorators and
docstring included: what a reader has to take in), and <= 8 parameters a caller can pass by keyword (``self``,
``cls``, positional-only parameters, ``*args`` and ``**kwargs`` not counted). ``tests/shape_exceptions.txt``
names what was over a limit when the rules came in (one ``kind name`` per line); the test fails on an excess
that is not listed, and on a listed item that is now within its limit (delete its line: the list only
shrinks). The checker itself is tested on synthetic source, so each rule is shown to fail on a violation.

The facade rule: each method of ``Tract`` (tractkv/tract.py) has at most 8 statements after its docstring,
``open``, ``clone`` and ``__init__`` exempt (they assemble a handle). Counted: every statement node in the
method's body, nested ones included (an ``if`` holding two statements is 3; ``else``, ``except`` and
``finally`` clauses are not statements themselves, their statements are; a nested ``def`` is 1 plus its
body's), the docstring not; decorators and the signature are not statements. Logic that needs more belongs in
the engine operation the method delegates to (a function of a session). No exception list.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tractkv"
EXCEPTIONS = Path(__file__).resolve().parent / "shape_exceptions.txt"

LIMITS = {"module": 700, "class": 500, "function": 80, "keywords": 8}


@attrs.frozen
class Excess:
    """One thing over its limit: ``kind`` (a key of LIMITS), ``name`` (``path`` or ``path::Qual.name``)."""

    kind: str
    name: str
    size: int

    def key(self) -> str:
        return f"{self.kind} {self.name}"

    def __str__(self) -> str:
        return f"{self.name}: {self.kind} {self.size} > {LIMITS[self.kind]}"


def _keywords(args: ast.arguments) -> int:
    named = [a.arg for a in (*args.args, *args.kwonlyargs)]
    return len([n for n in named if n not in ("self", "cls")])


def excesses(source: str, name: str) -> Iterator[Excess]:
    """Everything in one module's source over a limit (``name``: the module's path, for the messages)."""
    tree = ast.parse(source)
    lines = len(source.splitlines())
    if lines > LIMITS["module"]:
        yield Excess("module", name, lines)

    def visit(node: ast.AST, prefix: str) -> Iterator[Excess]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                qual = f"{prefix}{child.name}"
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                size = (child.end_lineno or child.lineno) - first + 1
                if isinstance(child, ast.ClassDef):
                    if size > LIMITS["class"]:
                        yield Excess("class", f"{name}::{qual}", size)
                else:
                    if size > LIMITS["function"]:
                        yield Excess("function", f"{name}::{qual}", size)
                    if (count := _keywords(child.args)) > LIMITS["keywords"]:
                        yield Excess("keywords", f"{name}::{qual}", count)
                yield from visit(child, f"{qual}.")
            else:
                yield from visit(child, prefix)

    yield from visit(tree, "")


def package_excesses() -> list[Excess]:
    found: list[Excess] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found.extend(excesses(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix()))
    return found


FACADE = PACKAGE / "tract.py"
FACADE_CLASS = "Tract"
FACADE_STATEMENTS = 8
FACADE_EXEMPT = frozenset({"open", "clone", "__init__"})


def statements(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The statements of a function's body after its docstring, nested ones included (see the module doc)."""
    body = function.body
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        body = body[1:]
    return sum(1 for top in body for node in ast.walk(top) if isinstance(node, ast.stmt))


def facade_excesses(source: str, cls: str = FACADE_CLASS) -> list[tuple[str, int]]:
    """``(method, statements)`` for each method of class ``cls`` over the facade's limit."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            methods = [m for m in node.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)]
            counts = [(m.name, statements(m)) for m in methods if m.name not in FACADE_EXEMPT]
            found.extend((name, count) for name, count in counts if count > FACADE_STATEMENTS)
    return found


def test_facade_methods_are_short_delegations() -> None:
    over = facade_excesses(FACADE.read_text(encoding="utf-8"))
    assert over == [], (
        f"Tract methods over {FACADE_STATEMENTS} statements (move the logic into the engine operation they "
        f"delegate to; see tests/test_shape.py): {over}"
    )


def listed() -> set[str]:
    lines = EXCEPTIONS.read_text(encoding="utf-8").splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def test_nothing_new_is_over_a_limit() -> None:
    new = [str(e) for e in package_excesses() if e.key() not in listed()]
    assert not new, "over a size limit (split it; see tests/test_shape.py):\n" + "\n".join(new)


def test_the_exception_list_only_shrinks() -> None:
    """A listed item now within its limit (or gone) must leave the list, so the list cannot hide a new excess."""
    current = {e.key() for e in package_excesses()}
    stale = sorted(listed() - current)
    assert not stale, "within its limit now: delete from tests/shape_exceptions.txt:\n" + "\n".join(stale)


# --- the checker, on deliberate violations -----------------------------------------------------------------


def _function(lines: int, name: str = "f", params: str = "") -> str:
    body = "".join("    x = 1\n" for _ in range(lines - 1))
    return f"def {name}({params}):\n{body}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("x = 1\n" * 701, [("module", 701)]),
        ("x = 1\n" * 700, []),
        (_function(81), [("function", 81)]),
        (_function(80), []),
        ("@decorator\n" + _function(80), [("function", 81)]),
        ("class C:\n" + "".join(f"    a{i} = {i}\n" for i in range(500)), [("class", 501)]),
        ("class C:\n" + "".join(f"    a{i} = {i}\n" for i in range(499)), []),
        (_function(2, params=", ".join(f"a{i}" for i in range(9))), [("keywords", 9)]),
        (_function(2, params="self, " + ", ".join(f"a{i}" for i in range(8))), []),
        (_function(2, params="a, b, /, *, " + ", ".join(f"k{i}=1" for i in range(7))), []),
        (
            _function(2, params="a, /, *args, " + ", ".join(f"k{i}=1" for i in range(9)) + ", **kw"),
            [("keywords", 9)],
        ),
    ],
    ids=[
        "module-over",
        "module-at",
        "function-over",
        "function-at",
        "decorator-counts",
        "class-over",
        "class-at",
        "keywords-over",
        "self-not-counted",
        "positional-only-not-counted",
        "keyword-only-counted",
    ],
)
def test_the_checker_finds_each_excess(source: str, expected: list[tuple[str, int]]) -> None:
    found = [(e.kind, e.size) for e in excesses(source, "m.py")]
    assert found == expected


def test_a_method_is_named_by_its_class() -> None:
    source = "class C:\n    class D:\n" + "".join(
        f"        {line}\n" for line in _function(81, name="g", params="self").splitlines()
    )
    (excess,) = excesses(source, "m.py")
    assert excess.name == "m.py::C.D.g"
    assert str(excess) == "m.py::C.D.g: function 81 > 80"


def _method(name: str, lines: list[str], docstring: bool = True) -> str:
    doc = ['        """Doc."""'] if docstring else []
    return "\n".join([f"    def {name}(self):", *doc, *(f"        {line}" for line in lines)]) + "\n"


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        (_method("m", ["x = 1"] * 8), []),
        (_method("m", ["x = 1"] * 9), [("m", 9)]),
        (_method("m", ["x = 1"] * 8, docstring=False), []),  # the docstring is not counted, nor its absence
        (_method("m", ["'after the docstring'"] + ["x = 1"] * 8), [("m", 9)]),
        (_method("open", ["x = 1"] * 20), []),
        (_method("clone", ["x = 1"] * 20), []),
        (_method("__init__", ["x = 1"] * 20), []),
        (_method("m", ["if x:", "    y = 1", "    z = 2", "else:", "    w = 3"] + ["x = 1"] * 5), [("m", 9)]),
        (
            _method(
                "m", ["try:", "    y = 1", "except E:", "    raise", "finally:", "    z = 2", "return y"]
            ),
            [],
        ),
        (_method("m", ["def inner():", "    a = 1", "    return a", *["x = 1"] * 6]), [("m", 9)]),
        (_method("m", ["with a:", "    for i in b:", "        c(i)", *["x = 1"] * 6]), [("m", 9)]),
    ],
    ids=[
        "at-limit",
        "over",
        "no-docstring",
        "second-string-counts",
        "open-exempt",
        "clone-exempt",
        "init-exempt",
        "if-else-nested",
        "try-clauses",
        "nested-def",
        "with-for-nested",
    ],
)
def test_the_facade_rule_counts_statements(method: str, expected: list[tuple[str, int]]) -> None:
    assert facade_excesses(f"class Tract:\n{method}") == expected
    assert facade_excesses(f"class Other:\n{method}") == []  # only the facade's class
