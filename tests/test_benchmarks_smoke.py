"""Every benchmark runs at a tiny size and prints well-formed JSON lines, so none of them rots.

Each ``benchmarks/bench_*.py`` has a ``main(argv) -> int`` and its tiny arguments: a module-level
``SMOKE_ARGS`` list in the benchmark itself, or an entry in ``TINY_ARGS`` below. Targets are not asserted
here: timings on a shared machine are not test material (the benchmarks report them).
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

# Tiny arguments of benchmarks that do not declare SMOKE_ARGS themselves.
TINY_ARGS: dict[str, list[str]] = {
    "bench_tools": ["--commits", "10", "--tools", "3", "--repeat", "1"],
    "bench_engine": ["--quick"],
}
# Cases a benchmark must print (checked when listed here).
EXPECTED_CASES: dict[str, set[str]] = {
    "bench_checkpointer": {
        "checkpointer_ms_per_message",
        "checkpointer_ms_per_message_nondurable",
        "checkpointer_bytes",
        "checkpointer_tool_turn_growth",
        "checkpointer_tool_ms_per_turn",
        "checkpointer_tool_bytes",
    },
    "bench_store": {
        "durable_commit",
        "batched_commit",
        "batched_commit_nondurable",
        "commit_nondurable",
        "import_time",
        "read_objects",
    },
    "bench_sync": {"push_full", "clone_full", "push_one", "push_breakdown", "verify_floor"},
    "bench_tools": {"tools_store_size", "tools_commit_rate"},
    "bench_view": {
        "view_branches",
        "view_commit_tip",
        "view_graph_first",
        "view_graph_last",
        "view_usage",
        "spawn_relations",
        "live_event",
    },
}
COMMON_KEYS = {"case", "n", "ratio", "target", "ok"}


def _names() -> list[str]:
    return sorted(path.stem for path in BENCHMARKS.glob("bench_*.py"))


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_smoke_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _smoke_args(name: str, module: ModuleType) -> list[str]:
    declared = getattr(module, "SMOKE_ARGS", None)
    if declared is not None:
        return list(declared)
    assert name in TINY_ARGS, f"{name}: declare SMOKE_ARGS in the benchmark (or add it to TINY_ARGS)"
    return TINY_ARGS[name]


@pytest.mark.parametrize("name", _names())
def test_benchmark_prints_json_lines(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = _load(name)
    assert module.main([*_smoke_args(name, module), "--tmp", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines, "a benchmark must print one JSON line per case"
    cases = set()
    for line in lines:
        result = json.loads(line)
        assert result.keys() >= COMMON_KEYS, line
        if "unit" in result:  # the unit names the figure keys: tractkv_per_s, baseline_ms, ...
            unit = str(result["unit"]).lower()
            assert result.keys() >= {f"tractkv_{unit}", f"baseline_{unit}"}, line
        assert result["ratio"] is None or isinstance(result["ratio"], int | float), line
        assert result["ok"] in (True, False, None), line
        if result["ok"] is not None and isinstance(result["ratio"], float):
            assert not math.isnan(result["ratio"]), line
        cases.add(result["case"])
    if name in EXPECTED_CASES:
        assert cases == EXPECTED_CASES[name]
    assert not any(tmp_path.iterdir()), "a benchmark must remove its scratch directories"
