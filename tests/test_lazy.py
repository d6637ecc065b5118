"""``tractkv._lazy.lazy_exports``: the one helper behind every name a tractkv module loads on first use.

Each test builds a throwaway package on disk (so the import system, not a stub, loads the modules) whose
``__init__`` exports names lazily from its submodules, and checks what a plain eager import would give.
"""

from __future__ import annotations

import importlib
import sys
import types
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

INIT = """
from tractkv import _lazy

EAGER = "here from the start"
__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    {
        "Thing": ".target",
        "Other": ".target",
        "Gone": ".nowhere",
        "Broken": ".broken",
        "Absent": ".target",
        "Path": "pathlib",
    },
)
"""


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    name = f"lazy_sample_{uuid.uuid4().hex[:12]}"
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text(INIT, encoding="utf-8")
    (root / "target.py").write_text("Thing = object()\nOther = [1, 2]\n", encoding="utf-8")
    (root / "broken.py").write_text("import no_such_dependency_of_a_lazy_test\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module(name)
    for loaded in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[loaded]


def test_first_access_imports_the_module_and_keeps_its_names_as_globals(package: types.ModuleType) -> None:
    target = f"{package.__name__}.target"
    assert target not in sys.modules  # nothing loads at import
    assert "Thing" not in vars(package)
    thing = package.Thing
    assert target in sys.modules
    assert thing is sys.modules[target].Thing
    # kept as globals, the module's other name too: later lookups never reach __getattr__
    assert vars(package)["Thing"] is thing
    assert vars(package)["Other"] is sys.modules[target].Other
    assert "Absent" not in vars(package)  # a sibling the module lacks is skipped, not an error
    namespace: dict[str, object] = {}
    exec(f"from {package.__name__} import Thing, Other", namespace)
    assert namespace["Thing"] is thing
    assert package.Path is Path  # an absolute module path


def test_an_unknown_name_raises_the_attribute_error_python_raises(package: types.ModuleType) -> None:
    with pytest.raises(AttributeError) as lazy:
        _ = package.NoSuchName
    with pytest.raises(AttributeError) as plain:
        _ = types.ModuleType(package.__name__).NoSuchName
    assert str(lazy.value) == str(plain.value) == f"module {package.__name__!r} has no attribute 'NoSuchName'"
    assert not hasattr(package, "NoSuchName")
    with pytest.raises(ImportError, match="cannot import name 'NoSuchName'"):
        exec(f"from {package.__name__} import NoSuchName", {})


def test_a_name_its_module_lacks_raises_attribute_error(package: types.ModuleType) -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Absent'"):
        _ = package.Absent


def test_dir_lists_the_lazy_names_without_loading_them(package: types.ModuleType) -> None:
    listed = dir(package)
    assert {"Thing", "Other", "Gone", "Path", "EAGER", "__getattr__"} <= set(listed)
    assert listed == sorted(listed)
    assert f"{package.__name__}.target" not in sys.modules
    _ = package.Thing
    assert dir(package).count("Thing") == 1


def test_a_name_mapped_to_a_missing_module_fails_clearly_and_is_not_kept(package: types.ModuleType) -> None:
    with pytest.raises(ModuleNotFoundError) as failed:
        _ = package.Gone
    assert failed.value.name == f"{package.__name__}.nowhere"
    notes = getattr(failed.value, "__notes__", [])
    assert notes == [f"{package.__name__}.Gone is exported lazily from '.nowhere', which does not exist"]
    assert "Gone" not in vars(package)
    with pytest.raises(ModuleNotFoundError):  # not an AttributeError: hasattr does not hide the mistake
        hasattr(package, "Gone")


def test_a_mapped_module_failing_its_own_imports_raises_that_error_untouched(
    package: types.ModuleType,
) -> None:
    with pytest.raises(ModuleNotFoundError) as failed:
        _ = package.Broken
    assert failed.value.name == "no_such_dependency_of_a_lazy_test"
    assert getattr(failed.value, "__notes__", []) == []
