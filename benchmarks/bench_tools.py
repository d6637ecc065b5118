"""Tool-schema dedup: N commits each carrying the same 20 tool schemas, against the same history without tools.

Targets (tools issue): store size <= 1.1x the history without tools; commit rate >= 90% of the rate without
tools (the leading peer: 6x the size, 3x slower). Prints one JSON line per case.

    python benchmarks/bench_tools.py [--commits 1000] [--tools 20] [--repeat 3] [--durable]
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


def build(
    path: str, commits: int, tools: list[dict[str, Any]] | None, durable: bool
) -> tuple[float, int, int]:
    """Seconds to make ``commits`` commits, bytes on disk, commit_tools index rows."""
    t = Tract.open(path, durable=durable)
    if tools is not None:
        t.set_tools(tools)
    text = "lorem ipsum dolor sit amet, consectetur adipiscing elit " * 3
    start = time.perf_counter()
    for i in range(commits):
        if i % 2:
            t.assistant(f"answer {i}: {text}")
        else:
            t.user(f"question {i}: {text}")
    elapsed = time.perf_counter() - start
    size = t.store.size_bytes()
    rows = t.store.table_count(Table.COMMIT_TOOLS)
    t.close()
    return elapsed, size, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--tools", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--durable", action="store_true", help="fsync every commit (default: not, to show CPU cost)"
    )
    parser.add_argument("--tmp", default=None, help="directory for the stores (default: a temporary one)")
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="tractkv-bench-tools-", dir=args.tmp)
    tools = make_tools(args.tools)
    try:
        best_plain = best_tools = float("inf")
        size_plain = size_tools = rows = 0
        for run in range(args.repeat):  # alternate the two so drift on a noisy machine hits both alike
            plain = build(os.path.join(root, f"plain{run}"), args.commits, None, args.durable)
            with_tools = build(os.path.join(root, f"tools{run}"), args.commits, tools, args.durable)
            best_plain, size_plain = min(best_plain, plain[0]), plain[1]
            best_tools, size_tools, rows = min(best_tools, with_tools[0]), with_tools[1], with_tools[2]
        size_ratio = size_tools / size_plain
        rate_ratio = best_plain / best_tools
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
        print(
            json.dumps(
                {
                    "case": "tools_commit_rate",
                    "n": args.commits,
                    "durable": args.durable,
                    "tractkv_per_s": round(args.commits / best_tools),
                    "baseline_per_s": round(args.commits / best_plain),
                    "ratio": round(rate_ratio, 3),
                    "target": 0.9,
                    "ok": rate_ratio >= 0.9,
                }
            )
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
