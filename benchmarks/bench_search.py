"""Search benchmark: ``Tract.search`` over a long history against ``git log --grep`` on an equivalent git
repository and a plain scan of the store's raw LMDB values, in the same run.

Run: ``python benchmarks/bench_search.py [--commits N] [--repeat R] [--tmp DIR]``.
Each case prints one JSON line to stdout; notices go to stderr.

The history is ``--commits`` commits (default 100,000): user and assistant messages of ~100 characters
(words drawn from a fixed vocabulary), and every 25th pair a tool turn (an assistant message calling
``lookup`` with JSON arguments, and its result), some with a note. The git repository has one commit per
tractkv commit (``git fast-import``, empty trees), whose message is everything tractkv searches in that
commit: its text, the call's name and arguments, the result, the note. The query is a literal that 0.1% of
the messages hold (``"where did we decide"``); ``hits`` / ``git_hits`` count the matching commits on each
side (they must agree: the same commits match).

Cases (``value`` tractkv's milliseconds, ``baseline`` the other side's; ``ratio`` = value / baseline, so
below 1.0 tractkv is faster; best of ``--repeat`` fresh processes, medians reported too):

* ``search_cold``: a fresh process opens the store, which has no index yet, and searches: the index is built
  from every object and saved (``derived`` rows). Baseline: ``git log --all -F --grep`` in a fresh process.
  ``raw_scan_ms``: a plain scan of every raw LMDB value, decoding each object and testing each message's
  text (no walk, no index): what any search without an index costs at least.
* ``search_first``: a fresh process opens the store (its index saved) and runs one search (``open_ms``: the
  import and the open). Baseline: ``git log --all -F --grep``. Target: <= 1.0x, and <= 200 ms (interactive).
* ``search_repeat``: the same process searching again for another literal (median of ``--repeat``).
  Baseline: ``git log`` for that literal. Target: <= 1.0x.
* ``search_regex``: a fresh process, index saved, a regular expression (``decid(e|ed) \\w+``).
  Baseline: ``git log --all -E --grep``.
* ``search_rss``: the peak RSS (MB, ``VmHWM``) of the fresh process of ``search_first``. Baseline: the peak
  RSS of a fresh process that imports tractkv and opens the store. Target: <= 100 MB.

The first search of a store (``search_cold``) reads and decodes every commit and message once; every later
one, in any process, reads the saved index.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tractkv import Tract  # noqa: E402

SEED = 34
NEEDLE = "where did we decide"
OTHER = "tyres"
REGEX = r"decid(e|ed) \w+"
WORDS = (
    "the", "snow", "plan", "budget", "model", "context", "tool", "weather", "city", "report", "draft", "review",
    "merge", "branch", "commit", "token", "window", "summary", "agent", "result", "error", "retry", "cache",
    "prompt", "user", "assistant", "system", "decide", "later", "maybe", "soon",
)  # fmt: skip
SMOKE_ARGS = ["--commits", "300", "--repeat", "1"]

CHILD = r"""
import json, resource, sys, time


def peak_mb():
    # VmHWM: this program's peak (ru_maxrss would count the forking parent's pages before exec)
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


start = time.perf_counter()
from tractkv import Tract
t = Tract.open(sys.argv[1], readonly=sys.argv[2] == "ro")
opened = time.perf_counter()
hits = t.search(sys.argv[3], regex=sys.argv[4] == "regex") if sys.argv[3] else []
searched = time.perf_counter()
again = []
for query in sys.argv[5:]:
    s = time.perf_counter()
    t.search(query)
    again.append((time.perf_counter() - s) * 1000)
t.close()
print(json.dumps({
    "open_ms": (opened - start) * 1000,
    "search_ms": (searched - opened) * 1000,
    "again_ms": again,
    "hits": len({h.commit_id for h in hits}),
    "rss_mb": peak_mb(),
}))
"""

RAW_SCAN = r"""
import json, sys, time
import lmdb, cbor2
start = time.perf_counter()
env = lmdb.open(sys.argv[1], max_dbs=16, readonly=True, lock=False)
db = env.open_db(b"objects", create=False)
needle, hits = sys.argv[2], 0
with env.begin(db=db) as txn:
    for _, value in txn.cursor():
        obj = cbor2.loads(value)
        data = obj.get("data")
        if obj.get("t") == "blob" and isinstance(data, dict) and needle in (data.get("text") or ""):
            hits += 1
print(json.dumps({"ms": (time.perf_counter() - start) * 1000, "hits": hits}))
"""


def _text(rng: random.Random, index: int) -> str:
    words = [rng.choice(WORDS) for _ in range(16)]
    if index % 1000 == 7:
        words[3:3] = NEEDLE.split()
    if index % 997 == 3:
        words.append(OTHER)
    return " ".join(words)


def build(path: Path, git_dir: Path, commits: int) -> None:
    """The tractkv store and the equivalent git repository (one commit each, the same searchable text)."""
    rng = random.Random(SEED)
    messages: list[str] = []
    with Tract.open(str(path), durable=False) as t:
        made = 0
        while made < commits:
            with t.batch():
                for _ in range(min(1000, commits - made)):
                    if made % 50 == 48 and made + 1 < commits:
                        args = {"query": _text(rng, made)[:40], "limit": made % 7}
                        call_id = f"c{made}"
                        t.assistant(tool_calls=[{"id": call_id, "name": "lookup", "arguments": args}])
                        result = _text(rng, made + 1)
                        t.tool_result(call_id, "lookup", result, message="looked up")
                        messages.append("lookup\n" + json.dumps(args, sort_keys=True, separators=(",", ":")))
                        messages.append(f"{result}\nlooked up")
                        made += 2
                        continue
                    text = _text(rng, made)
                    (t.user if made % 2 == 0 else t.assistant)(text)
                    messages.append(text)
                    made += 1
    subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)
    stream = []
    for number, message in enumerate(messages, 1):
        data = message.encode()
        parent = f"from :{number - 1}\n" if number > 1 else ""
        stream.append(
            f"commit refs/heads/main\nmark :{number}\ncommitter b <b@x> {1_700_000_000 + number} +0000\n"
            f"data {len(data)}\n".encode()
            + data
            + f"\n{parent}deleteall\n\n".encode()
        )
    subprocess.run(["git", "fast-import", "--quiet"], input=b"".join(stream), cwd=git_dir, check=True)


def _child(code: str, *args: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, env=env, timeout=900
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _git(git_dir: Path, flag: str, query: str) -> tuple[float, int]:
    start = time.perf_counter()
    out = subprocess.run(
        ["git", "log", "--all", flag, f"--grep={query}", "--format=%H"],
        cwd=git_dir,
        capture_output=True,
        check=True,
    )
    return (time.perf_counter() - start) * 1000, len(out.stdout.split())


def _drop_index(path: Path) -> None:
    from tractkv.store import LmdbStore, Table

    with LmdbStore(str(path)) as store:
        batch = store.new_batch()
        for key, _ in store.table_iter(Table.DERIVED):
            if key.startswith((b"grep:", b"gchunk:")):
                batch.table_put(Table.DERIVED, key, None)
        store.apply(batch)


def _line(
    case: str, n: int, value: float, baseline: float, target: float | None, **extra: Any
) -> dict[str, Any]:
    """One result line; ``target`` bounds the ratio (the RSS case: the value, in MB)."""
    ratio = value / baseline if baseline else float("nan")
    checked = value if case == "search_rss" else ratio
    return {
        "case": case,
        "n": n,
        "unit": "ms" if case != "search_rss" else "mb",
        "value": round(value, 2),
        "baseline": round(baseline, 2),
        "tractkv_" + ("ms" if case != "search_rss" else "mb"): round(value, 2),
        "baseline_" + ("ms" if case != "search_rss" else "mb"): round(baseline, 2),
        "ratio": round(ratio, 4),
        "target": target,
        "ok": None if target is None else checked <= target,
        **extra,
    }


def run(args: argparse.Namespace, scratch: Path) -> list[dict[str, Any]]:
    store, git_dir = scratch / "store", scratch / "git"
    started = time.perf_counter()
    build(store, git_dir, args.commits)
    print(f"built {args.commits} commits in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    n = args.commits
    cold, git_cold, raw = [], [], []
    for _ in range(args.repeat):
        _drop_index(store)
        cold.append(_child(CHILD, str(store), "rw", NEEDLE, "literal"))
        git_cold.append(_git(git_dir, "-F", NEEDLE))
        raw.append(_child(RAW_SCAN, str(store), NEEDLE))
    first, git_first, regex, git_regex, base_rss = [], [], [], [], []
    for _ in range(args.repeat):
        first.append(_child(CHILD, str(store), "ro", NEEDLE, "literal", *[OTHER] * 5))
        git_first.append(_git(git_dir, "-F", NEEDLE))
        regex.append(_child(CHILD, str(store), "ro", REGEX, "regex"))
        git_regex.append(_git(git_dir, "-E", REGEX))
        base_rss.append(_child(CHILD, str(store), "ro", "", "literal")["rss_mb"])
    git_again = [_git(git_dir, "-F", OTHER)[0] for _ in range(args.repeat)]
    hits = {r["hits"] for r in cold + first}
    git_hits = {h for _, h in git_cold + git_first}

    def best(rows: list[dict[str, Any]], key: str = "search_ms") -> float:
        return min(float(r[key]) for r in rows)

    def med(rows: list[dict[str, Any]], key: str = "search_ms") -> float:
        return round(statistics.median(float(r[key]) for r in rows), 2)

    agree = {"hits": sorted(hits), "git_hits": sorted(git_hits), "same_hits": hits == git_hits}
    again = [ms for r in first for ms in r["again_ms"]]
    return [
        _line(
            "search_cold",
            n,
            best(cold),
            min(ms for ms, _ in git_cold),
            None,
            median_ms=med(cold),
            raw_scan_ms=round(min(r["ms"] for r in raw), 2),
            **agree,
        ),
        _line(
            "search_first",
            n,
            best(first),
            min(ms for ms, _ in git_first),
            1.0,
            median_ms=med(first),
            open_ms=round(best(first, "open_ms"), 2),
            interactive=best(first) <= 200,
            **agree,
        ),
        _line(
            "search_repeat", n, statistics.median(again), min(git_again), 1.0, best_ms=round(min(again), 2)
        ),
        _line(
            "search_regex",
            n,
            best(regex),
            min(ms for ms, _ in git_regex),
            None,
            median_ms=med(regex),
            hits=regex[0]["hits"],
            git_hits=git_regex[0][1],
        ),
        _line("search_rss", n, min(r["rss_mb"] for r in first), min(base_rss), 100.0),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--commits", type=int, default=100_000, help="commits in the history (default 100,000)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per case (default 3)")
    parser.add_argument("--tmp", default=tempfile.gettempdir(), help="where the scratch stores go")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="bench-search-", dir=args.tmp))
    try:
        for line in run(args, scratch):
            print(json.dumps(line), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
