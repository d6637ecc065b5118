"""benchmarks/bench_engine.py at its ``--quick`` size: every case prints one well-formed JSON line.

Targets are not asserted (timings on a shared machine are not test material); this only keeps the benchmark
from rotting: its cases, its line format, and that it cleans up after itself.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_engine.py"
KEYS = {"case", "n", "value", "unit", "baseline", "ratio", "target", "target_of", "ok"}
CASES = {
    "batched_append_flatness",
    "bytes_per_commit",
    "durable_append",
    "batched_append",
    "compile_fresh_process",
    "compile_fresh_process_replay",
    "compile_after_append",
    "compile_after_append_flatness",
    "peak_rss",
    "first_commit_after_reopen",
    "compile_fresh_process_long",
    "peak_rss_reopen",
    "first_commit_after_reopen_long",
    "peak_rss_growth",
    "peak_rss_growth_per_commit",
    "peak_rss_growth_rendered_per_commit",
    "gc",
}


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_bench_engine_smoke", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # starts a dozen fresh interpreters
def test_quick_run_prints_one_json_line_per_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = _load()
    assert module.main([*module.SMOKE_ARGS, "--tmp", str(tmp_path)]) == 0
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["case"] for r in results} == CASES
    for result in results:
        assert result.keys() >= KEYS, result
        unit = result["unit"].lower()
        assert result[f"tractkv_{unit}"] == result["value"], result
        assert result[f"baseline_{unit}"] == result["baseline"], result
        assert result["value"] > 0, result
        assert result["baseline"] > 0, result
        assert not math.isnan(result["ratio"]), result
        assert result["target_of"] in ("value", "ratio"), result
        assert result["ok"] in (True, False, None), result
        assert (result["ok"] is None) == (result["target"] is None), result
    sizes = sorted(r["n"] for r in results if r["case"] == "compile_after_append")
    assert len(sizes) >= 2, "one compile_after_append line per size"
    (flatness,) = [r for r in results if r["case"] == "compile_after_append_flatness"]
    assert (flatness["n"], flatness["baseline_n"]) == (sizes[-1], sizes[0])
    assert not any(tmp_path.iterdir()), "the benchmark must remove its scratch directories"


def test_targets_cover_every_case() -> None:
    module = _load()
    assert set(module.TARGETS) == CASES
    assert set(module.CASES) - {"long_history", "memory_growth"} <= CASES  # those print several
