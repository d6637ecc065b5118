"""``import tractkv`` stays light: what it leaves for first use, and that every public name still resolves.

The lazy names (PEP 562 ``__getattr__`` from ``tractkv._lazy.lazy_exports`` in ``tractkv``, ``tractkv.store``
and the engine's faces) must behave as eager ones: ``tractkv.X``, ``from tractkv import X``, ``dir()``, ``from
tractkv import *`` and a strict type checker.
``benchmarks/bench_store.py``'s ``import_time`` case measures the time; this pins the module sets, which do not
depend on the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tractkv

ROOT = Path(__file__).resolve().parent.parent

# Modules `import tractkv` leaves for first use (each loaded by the operation that needs it).
LAZY_MODULES = (
    "tractkv.engine.compile.merge3",  # Conflict, merge_states (a merge)
    "tractkv.engine.values.repairs",  # Repair (built by the first history that needs a repair)
    "tractkv.engine.values.reports",  # StatusInfo, BranchInfo, ContextDiff, ReflogEntry, GcResult, MergeResult, ...
    "tractkv.engine.content.classes",  # InstructionContent, DialogueContent, ... (conveniences)
    "tractkv.engine.tools.hooks",  # PendingToolResult
    "tractkv.engine.branches",  # status, branch, list / delete branches, reflog
    "tractkv.engine.compile.diff",
    "tractkv.store.fsck",  # fsck, FsckReport, Problem
    "tractkv.store.memory",  # MemoryStore
    "tractkv.integrations.mcp",  # MCPConnection (extra mcp)
    "tractkv.integrations.mcp_server",  # `tractkv mcp`, create_server (extra mcp)
    "mcp",  # the MCP SDK: only the MCP integration imports it
    "mcp_types",
    "difflib",
    "json",
    "base64",
    "heapq",
)

LAZY_NAMES = {
    "Conflict": "tractkv.engine.compile.merge3",
    "ArtifactContent": "tractkv.engine.content.classes",
    "BranchInfo": "tractkv.engine.values.reports",
    "BudgetOverrun": "tractkv.engine.values.reports",
    "ChildInfo": "tractkv.engine.values.reports",
    "ContextDiff": "tractkv.engine.values.reports",
    "DialogueContent": "tractkv.engine.content.classes",
    "DiffEntry": "tractkv.engine.values.reports",
    "FreeformContent": "tractkv.engine.content.classes",
    "GcResult": "tractkv.engine.values.reports",
    "InstructionContent": "tractkv.engine.content.classes",
    "MergeResult": "tractkv.engine.values.reports",
    "ParentInfo": "tractkv.engine.values.reports",
    "PendingToolResult": "tractkv.engine.tools.hooks",
    "ReasoningContent": "tractkv.engine.content.classes",
    "ReflogEntry": "tractkv.engine.values.reports",
    "Repair": "tractkv.engine.values.repairs",
    "StatusInfo": "tractkv.engine.values.reports",
}


def _fresh(code: str, *args: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter (this checkout first on the path); it prints one JSON line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_import_tractkv_leaves_these_modules_for_first_use() -> None:
    out = _fresh(
        """
        import json, sys
        before = set(sys.modules)
        import tractkv
        print(json.dumps(sorted(set(sys.modules) - before)))
        """
    )
    added = out
    assert isinstance(added, list)
    assert "tractkv.tract" in added  # the facade itself is imported: what `from tractkv import Tract` needs
    assert sorted(set(LAZY_MODULES) & set(added)) == []


def test_a_first_append_and_compile_do_not_load_them_either(tmp_path: Path) -> None:
    # The common path (open a store, append, compile) must not pay what `import tractkv` no longer pays.
    out = _fresh(
        """
        import json, sys
        before = set(sys.modules)
        from tractkv import Tract
        with Tract.open(sys.argv[1]) as t:
            t.system("Be brief.")
            t.user("hello")
            t.assistant("hi")
            messages = len(t.compile().messages)
        print(json.dumps({"messages": messages, "added": sorted(set(sys.modules) - before)}))
        """,
        str(tmp_path / "store"),
    )
    assert out["messages"] == 3
    added = out["added"]
    assert isinstance(added, list)
    assert sorted(set(LAZY_MODULES) & set(added)) == []


def test_every_name_in_all_resolves_in_a_fresh_interpreter_and_lazy_ones_on_access() -> None:
    out = _fresh(
        """
        import json, sys
        import tractkv
        lazy = json.loads(sys.argv[1])
        early = sorted(m for m in set(lazy.values()) if m in sys.modules)
        missing = [name for name in tractkv.__all__ if getattr(tractkv, name, None) is None]
        same = all(getattr(tractkv, name) is getattr(sys.modules[module], name) for name, module in lazy.items())
        print(json.dumps({"early": early, "missing": missing, "same": same,
                          "dir": sorted(set(tractkv.__all__) - set(dir(tractkv)))}))
        """,
        json.dumps(LAZY_NAMES),
    )
    assert out == {"early": [], "missing": [], "same": True, "dir": []}


def test_star_import_and_from_import_give_the_defining_modules_classes() -> None:
    namespace: dict[str, object] = {}
    exec("from tractkv import *", namespace)
    assert sorted(set(tractkv.__all__) - set(namespace)) == []
    from tractkv import InstructionContent, StatusInfo
    from tractkv.engine.content import classes
    from tractkv.engine.values import reports

    assert StatusInfo is reports.StatusInfo
    assert InstructionContent is classes.InstructionContent
    with pytest.raises(AttributeError, match="NoSuchName"):
        _ = tractkv.NoSuchName  # type: ignore[attr-defined]


@pytest.mark.parametrize("face", ["content", "values", "history", "compile", "usage", "tools"])
def test_each_engine_face_offers_its_names_from_the_defining_modules(face: str) -> None:
    # A face (an engine subpackage's __init__) loads a module on first use of one of its names: each name is
    # the defining module's object, listed in a sorted __all__ and in dir(), and an unknown name is refused.
    import importlib

    package = importlib.import_module(f"tractkv.engine.{face}")
    names = package.__all__
    # sorted as ruff's RUF022 sorts: SCREAMING_CASE, then CamelCase, then the rest
    assert names
    assert names == sorted(names, key=lambda n: (not n.isupper(), not n[:1].isupper(), n))
    for name in names:
        value = getattr(package, name)
        defining = getattr(value, "__module__", None)
        if defining and defining.startswith(f"tractkv.engine.{face}."):
            assert getattr(sys.modules[defining], name) is value
    assert sorted(set(names) - set(dir(package))) == []
    with pytest.raises(AttributeError, match="NoSuchName"):
        _ = package.NoSuchName


@pytest.mark.parametrize("first", ["import tractkv.store.fsck", "from tractkv.store.fsck import Problem", ""])
def test_tractkv_store_fsck_is_the_function_whichever_import_comes_first(first: str) -> None:
    # Loading the submodule tractkv.store.fsck binds it on the package under the function's name; the package
    # keeps the function (as when fsck was imported eagerly), before and after the submodule loads.
    out = _fresh(
        f"""
        import json, sys
        {first}
        import tractkv.store
        from tractkv.store import fsck, FsckReport, MemoryStore
        from tractkv.store.fsck import fsck as direct
        store = MemoryStore()
        report = fsck(store)
        print(json.dumps({{"function": callable(fsck) and fsck is direct and tractkv.store.fsck is direct,
                          "report": isinstance(report, FsckReport) and report.ok}}))
        """
    )
    assert out == {"function": True, "report": True}


@pytest.mark.slow
def test_lazy_names_type_check_for_users(tmp_path: Path) -> None:
    # mypy --strict sees every lazy name with its real type (the TYPE_CHECKING imports), and no others.
    user = tmp_path / "user_code.py"
    user.write_text(
        textwrap.dedent(
            """
            import tractkv
            from tractkv import InstructionContent, StatusInfo, Tract
            from tractkv.engine.values import ContextDiff
            from tractkv.store import FsckReport, MemoryStore, fsck


            def check(t: Tract) -> tuple[StatusInfo, ContextDiff, tractkv.GcResult, FsckReport]:
                t.commit(InstructionContent("Be brief."))
                status: StatusInfo = t.status()
                branches: list[tractkv.BranchInfo] = t.list_branches()
                assert branches
                return status, t.diff("HEAD"), t.gc(), fsck(MemoryStore())


            bad: int = tractkv.StatusInfo  # the real type, not Any: mypy reports this line
            """
        )
    )
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", str(user)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env=env,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, done.stdout + done.stderr
    assert "type[StatusInfo]" in errors[0], errors
    assert '"int"' in errors[0], errors
