"""Tool-schema dedup: N commits each carrying the same 20 tool schemas, against the same history without tools.

Targets (tools issue): store size <= 1.1x the history without tools; commit rate >= 90% of the rate without
tools (the leading peer: 6x the size, 3x slower), in each mode (issue 18): ``nondurable`` (one commit per
transaction, no fsync: the CPU cost), ``durable`` (one commit per durable transaction, the default of
``Tract.open``) and ``batched`` (durable, ``--batch`` commits per ``t.batch()`` block). Prints one JSON line
per case (``tools_commit_rate`` once per mode, its ``mode`` key saying which). ``cpu_ratio``: the same ratio
of CPU time (``time.process_time``, the least of the runs of each side): steadier than wall time on a shared
machine, where one fsync per 1,000-commit batch moves a batched run's wall time by 10-30%.

    python benchmarks/bench_tools.py [--commits 1000] [--tools 20] [--repeat 3] [--modes nondurable,durable,batched]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

from tractkv import Tract
from tractkv.store import Table


def make_tools(count: int) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": f"Does thing {i}: reads the workspace and reports what it found, with care.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "a path relative to the workspace root"},
                        "limit": {"type": "integer", "description": "at most this many results"},
                    },
                    "required": ["path"],
                },
            },
        }
        for i in range(count)
    ]


MODES = {"nondurable": (False, 1), "durable": (True, 1), "batched": (True, 0)}  # (durable, batch; 0: --batch)


def build(
    path: str, commits: int, tools: list[dict[str, Any]] | None, durable: bool, batch: int = 1
) -> tuple[float, int, int, float]:
    """Seconds to make ``commits`` commits (``batch`` per ``t.batch()`` block; 1: none), bytes on disk,
    commit_tools index rows, CPU seconds of those commits."""
    t = Tract.open(path, durable=durable)
    if tools is not None:
        t.set_tools(tools)
    text = "lorem ipsum dolor sit amet, consectetur adipiscing elit " * 3

    def one(i: int) -> None:
        if i % 2:
            t.assistant(f"answer {i}: {text}")
        else:
            t.user(f"question {i}: {text}")

    start, cpu_start = time.perf_counter(), time.process_time()
    if batch <= 1:
        for i in range(commits):
            one(i)
    else:
        for first in range(0, commits, batch):
            with t.batch():
                for i in range(first, min(first + batch, commits)):
                    one(i)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    size = t.store.size_bytes()
    rows = t.store.table_count(Table.COMMIT_TOOLS)
    t.close()
    return elapsed, size, rows, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--tools", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--modes",
        default="nondurable,durable,batched",
        help="rate cases to run, comma-separated: nondurable, durable, batched (default: all three)",
    )
    parser.add_argument("--batch", type=int, default=1000, help="commits per t.batch() block in batched mode")
    parser.add_argument("--tmp", default=None, help="directory for the stores (default: a temporary one)")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"unknown modes {unknown}; choose from {sorted(MODES)}")
    root = tempfile.mkdtemp(prefix="tractkv-bench-tools-", dir=args.tmp)
    tools = make_tools(args.tools)
    try:
        size_printed = False
        for mode in modes:
            durable, batch = MODES[mode]
            batch = batch or args.batch
            best_plain = best_tools = cpu_plain = cpu_tools = float("inf")
            size_plain = size_tools = rows = 0
            for run in range(args.repeat):  # alternate the two so drift on a noisy machine hits both alike
                sides = [("plain", None), ("tools", tools)]
                for name, given in sides if run % 2 == 0 else reversed(sides):
                    result = build(
                        os.path.join(root, f"{mode}-{name}{run}"), args.commits, given, durable, batch
                    )
                    if given is None:
                        best_plain, size_plain = min(best_plain, result[0]), result[1]
                        cpu_plain = min(cpu_plain, result[3])
                    else:
                        best_tools, size_tools, rows = min(best_tools, result[0]), result[1], result[2]
                        cpu_tools = min(cpu_tools, result[3])
            if not size_printed and batch == 1:  # the store-size case: one commit per transaction
                size_printed = True
                size_ratio = size_tools / size_plain
                print(
                    json.dumps(
                        {
                            "case": "tools_store_size",
                            "n": args.commits,
                            "tools": args.tools,
                            "tractkv_bytes": size_tools,
                            "baseline_bytes": size_plain,
                            "ratio": round(size_ratio, 3),
                            "commit_tools_rows": rows,
                            "target": 1.1,
                            "ok": size_ratio <= 1.1,
                        }
                    )
                )
            rate_ratio = best_plain / best_tools
            print(
                json.dumps(
                    {
                        "case": "tools_commit_rate",
                        "mode": mode,
                        "n": args.commits,
                        "durable": durable,
                        "batch": batch,
                        "tractkv_per_s": round(args.commits / best_tools),
                        "baseline_per_s": round(args.commits / best_plain),
                        "ratio": round(rate_ratio, 3),
                        "cpu_ratio": round(cpu_plain / cpu_tools, 3),
                        "target": 0.9,
                        "ok": rate_ratio >= 0.9,
                    }
                ),
                flush=True,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
