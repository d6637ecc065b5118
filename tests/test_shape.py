"""Size rules for tractkv's own code, with an exception list that may only shrink.

Limits: a module <= 700 lines, a class <= 500 lines, a function or method <= 80 lines (decorators and
docstring included: what a reader has to take in), and <= 8 parameters a caller can pass by keyword (``self``,
``cls``, positional-only parameters, ``*args`` and ``**kwargs`` not counted). ``tests/shape_exceptions.txt``
names what was over a limit when the rules came in (one ``kind name`` per line); the test fails on an excess
that is not listed, and on a listed item that is now within its limit (delete its line: the list only
shrinks). The checker itself is tested on synthetic source, so each rule is shown to fail on a violation.
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
