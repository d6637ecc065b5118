"""Store benchmarks: tractkv's commit, read and import paths against raw LMDB, measured side by side.

Run: ``python benchmarks/bench_store.py [--commits N] [--batched-commits N] [--batch N] [--repeat K]``.
Each case prints one JSON line to stdout; notices go to stderr.

The machine this runs on is shared and noisy (timings move up to 2x between runs), so every figure that
matters is a *ratio* of tractkv to a raw-LMDB baseline measured in the same run. Within a repeat the
sides take turns of one slice each (``SLICE_ITEMS`` commits, tens of milliseconds), in an order that
rotates every turn, so load from other processes falls on all sides alike. ``ratio`` (checked against the
target) is the median over ``--repeat`` repeats of that repeat's ratio, ``*_per_s`` are medians too, and
``ratio_best`` is best rate over best rate, for reference.

The commit cases also run raw LMDB writing exactly tractkv's rows (same tables, keys, bytes and ref
check, encoded ahead of time): ``ratio_to_same_shape`` is tractkv's own cost (Python, encoding, hashing),
and ``same_shape_per_s / baseline_per_s`` the cost of the store layout (two random object keys and a ref
in named tables dirty ~7 pages per transaction where one put dirties ~4).

Cases and targets (see ``TARGETS``):

* ``durable_commit``: one commit (a ~200-character message Blob + a Commit on the previous one, both
  encoded and hashed, ref moved by compare-and-swap) per durable batch, against raw LMDB doing one
  ``sync=True`` put (32-byte key, ~300-byte value) per write transaction. Target >= 0.70.
* ``batched_commit``: the same commits, ``--batch`` per durable batch, against raw LMDB doing one
  ``sync=False`` put per transaction. Target >= 0.60. ``batched_commit_nondurable`` is the same on a
  ``durable=False`` store and ``commit_nondurable`` one commit per non-durable batch (no targets: they show
  the CPU cost of the commit path).
* ``import_time``: median over ``--imports`` fresh interpreters of ``import tractkv``, against
  ``import lmdb, cbor2, blake3, attrs``, with byte code cached as after ``pip install``. Target: tractkv
  <= 60 ms. ``uncached_*_ms`` repeat it with no byte-code cache (``PYTHONDONTWRITEBYTECODE=1``, which
  makes every import compile every module: check your shell before reading import times).
  ``first_use_ms`` (no target; a guard that lazy loading did not just move the cost) is the same kind of
  median for ``import tractkv`` plus a first use: open a new store, append one message, compile, close;
  ``first_use_ratio`` divides it by the same baseline.
* ``read_objects``: random ``snapshot[oid]`` (read + hash check + decode) of stored objects in one snapshot,
  against raw LMDB gets of the same keys in one read transaction. No target.

Durable cases must hit a real disk: the default directory is ``/var/tmp``, which by convention (FHS)
survives reboots and so is disk-backed, while ``/tmp`` is a tmpfs on many distributions (on tmpfs fsync is
free and the durable figures would mean nothing). The file-system type of ``--tmp`` is reported in each
commit case's ``fs`` field and a warning is printed when it is a memory file system. (Checked with
``strace -c``: every durable transaction, tractkv's and the baseline's, makes one ``fdatasync`` plus the
meta-page write on LMDB's O_DSYNC descriptor.)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any

import lmdb

from tractkv.ids import ObjectId, oid_to_raw
from tractkv.model import Blob, Commit, encode_with_id
from tractkv.store import LmdbStore, Table

SEED = 20240611  # fixed: every run builds the same messages, keys and read order
REF = "refs/heads/main"
CREATED_AT = 1_700_000_000_000_000  # microseconds; commit i gets CREATED_AT + i
MAP_SIZE = 1 << 30  # both sides start with the same map, large enough that no run grows it
KEY_LEN = 32  # baseline keys: the size of a raw object id
VALUE_LEN = 300  # baseline values: about a message blob plus its commit
SMOKE_ARGS = [  # tiny sizes for tests/test_benchmarks_smoke.py: the figures mean nothing
    *("--commits", "20", "--batched-commits", "40", "--batch", "10", "--reads", "20"),
    *("--repeat", "1", "--imports", "1", "--uncached-imports", "0"),
]
SLICE_ITEMS = 50  # commits per turn when sides are interleaved (~20 ms durable); reads take 20x as many
MEMORY_FS = {"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"}
TARGETS: dict[str, float | None] = {
    "durable_commit": 0.70,  # ratio to raw LMDB sync=True, one put per transaction
    "batched_commit": 0.60,  # ratio to raw LMDB sync=False, one put per transaction
    "batched_commit_nondurable": None,
    "commit_nondurable": None,
    "import_time": 60.0,  # milliseconds for `import tractkv` (median)
    "read_objects": None,
}
CASES = tuple(TARGETS)
_TEXT = (  # message words; the text of each message is drawn from these with the fixed seed
    "the agent reads a file then calls a tool and writes the summary of what it found in the repository "
    "while the user asks for a shorter answer with tests and a plan for the next step of the refactor"
)
_WORDS = _TEXT.split()


# --- helpers -------------------------------------------------------------------------------------------


def _fs_type(path: Path) -> str:
    """The file-system type holding ``path`` (from /proc/self/mounts; "unknown" elsewhere)."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return "unknown"
    real = os.path.realpath(path)
    best, fs = "", "unknown"
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        mount_point = parts[1].replace("\\040", " ")
        inside = real == mount_point or real.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, fs = mount_point, parts[2]
    return fs


def _messages(count: int, rng: random.Random) -> list[str]:
    """``count`` distinct ~200-character user messages."""
    out = []
    for index in range(count):
        words = [f"#{index}"]
        while sum(len(w) + 1 for w in words) < 200:
            words.append(rng.choice(_WORDS))
        out.append(" ".join(words)[:200])
    return out


def _open_raw(path: Path, *, sync: bool) -> Any:
    # The same options LmdbStore uses, so the baseline differs only by doing no tractkv work.
    return lmdb.open(
        str(path), map_size=MAP_SIZE, sync=sync, metasync=sync, readahead=False, meminit=False, max_dbs=2
    )


class _Scratch:
    """Fresh directories under one temporary root, removed on exit."""

    def __init__(self, parent: str) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="tractkv-bench-", dir=parent))
        self._count = 0

    def new(self) -> Path:
        self._count += 1
        return self.root / f"run{self._count}"

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


Worker = Generator[int, None, None]
"""One side of a comparison. The first ``next()`` sets up (untimed); each later one does the next slice of
work and returns how many items it did, or 0 once finished (it then waits there to be closed, so the
tear-down in its ``finally`` is never timed)."""


def _interleave(
    makers: Sequence[Callable[[Path], Worker]], repeat: int, scratch: _Scratch
) -> list[list[float]]:
    """Items per second of every side, ``repeat`` times; one list of rates per side.

    The sides run in turns of one slice each (tens of milliseconds) rather than one whole run after
    another, and the order rotates every turn: load from other processes then falls on every side alike,
    which whole-run alternation cannot promise on a shared 2-core machine.
    """
    rates: list[list[float]] = [[] for _ in makers]
    for _ in range(repeat):
        workers: list[Worker] = []
        paths = [scratch.new() for _ in makers]
        try:
            for make, path in zip(makers, paths, strict=True):
                worker = make(path)
                next(worker)
                workers.append(worker)
            gc.collect()
            elapsed = [0.0] * len(workers)
            items = [0] * len(workers)
            live = list(range(len(workers)))
            turn = 0
            while live:
                for offset in range(len(live)):
                    which = live[(turn + offset) % len(live)]
                    start = time.perf_counter()
                    done = next(workers[which])
                    elapsed[which] += time.perf_counter() - start
                    items[which] += done
                    if not done:
                        live.remove(which)
                        break  # the rotation changes length: start the next turn
                turn += 1
            for which, rate_list in enumerate(rates):
                rate_list.append(items[which] / elapsed[which])
        finally:
            for worker in workers:
                worker.close()
            for path in paths:
                shutil.rmtree(path, ignore_errors=True)
    return rates


def _compare(ours: list[float], theirs: list[float]) -> tuple[float, float, float, float]:
    """(median of ours, median of theirs, median of the per-repeat ratios, best over best)."""
    ratio = statistics.median(o / t for o, t in zip(ours, theirs, strict=True))
    return statistics.median(ours), statistics.median(theirs), ratio, max(ours) / max(theirs)


def _result(
    case: str, n: int, ours: float, theirs: float, ratio: float, best: float, **extra: Any
) -> dict[str, Any]:
    target = TARGETS[case]
    return {
        "case": case,
        "n": n,
        "unit": "per_s",
        "tractkv_per_s": round(ours, 1),
        "baseline_per_s": round(theirs, 1),
        "ratio": round(ratio, 3),
        "ratio_best": round(best, 3),
        "target": target,
        "ok": None if target is None else ratio >= target,
        **extra,
    }


# --- commit cases --------------------------------------------------------------------------------------


def _tractkv_commits(
    messages: Sequence[str], batch_size: int, durable: bool, chunk: int
) -> Callable[[Path], Worker]:
    """One commit per message, ``batch_size`` commits per batch, yielding every ``chunk`` commits."""

    def work(path: Path) -> Worker:
        store = LmdbStore(path, durable=durable, map_size=MAP_SIZE)
        try:
            yield 0
            head: ObjectId | None = None
            done = 0
            for first in range(0, len(messages), batch_size):
                batch = store.new_batch()
                batch_head = head
                for index in range(first, min(first + batch_size, len(messages))):
                    blob_id = batch.put(Blob(data={"role": "user", "content": messages[index]}))
                    commit = Commit(
                        parents=() if head is None else (head,),
                        content=blob_id,
                        created_at=CREATED_AT + index,
                    )
                    head = batch.put(commit)
                    # Several moves of one ref in a batch keep the first expectation (batch_head).
                    batch.set_ref(REF, head, expected=batch_head)
                store.apply(batch)
                done += min(batch_size, len(messages) - first)
                if done >= chunk:
                    yield done
                    done = 0
            if done:
                yield done
            if store.get_ref(REF) != head:
                raise AssertionError("the benchmark's ref did not end on its last commit")
            yield 0
        finally:
            store.close()

    return work


def _raw_puts(items: Sequence[tuple[bytes, bytes]], sync: bool, chunk: int) -> Callable[[Path], Worker]:
    """One put per write transaction, yielding every ``chunk`` puts."""

    def work(path: Path) -> Worker:
        env = _open_raw(path, sync=sync)
        try:
            yield 0
            for first in range(0, len(items), chunk):
                group = items[first : first + chunk]
                for key, value in group:
                    with env.begin(write=True) as txn:
                        txn.put(key, value)
                yield len(group)
            yield 0
        finally:
            env.close()

    return work


EncodedCommit = tuple[bytes, bytes, bytes, bytes, bytes]  # blob key, blob bytes, commit key, bytes, hex id


def _encoded_commits(messages: Sequence[str]) -> list[EncodedCommit]:
    """The keys and bytes tractkv writes for these messages (encoded ahead, outside any timing)."""
    out: list[EncodedCommit] = []
    head: ObjectId | None = None
    for index, text in enumerate(messages):
        blob_id, blob_data = encode_with_id(Blob(data={"role": "user", "content": text}))
        commit = Commit(
            parents=() if head is None else (head,), content=blob_id, created_at=CREATED_AT + index
        )
        head, commit_data = encode_with_id(commit)
        out.append((oid_to_raw(blob_id), blob_data, oid_to_raw(head), commit_data, head.encode()))
    return out


def _raw_same_shape(
    commits: Sequence[EncodedCommit], batch_size: int, sync: bool, chunk: int
) -> Callable[[Path], Worker]:
    """Raw LMDB doing exactly tractkv's writes (same tables, keys, bytes, ref check and batching).

    Comparing tractkv with this separates tractkv's own cost (Python, encoding, hashing) from the cost of
    the store layout (named tables, two random object keys and a ref per commit).
    """
    ref = REF.encode()

    def work(path: Path) -> Worker:
        env = lmdb.open(
            str(path), map_size=MAP_SIZE, sync=sync, metasync=sync, readahead=False, meminit=False, max_dbs=16
        )
        try:
            with env.begin(write=True) as txn:
                dbs = {t: env.open_db(t.value.encode(), txn=txn, create=True) for t in Table}
            objects, refs = dbs[Table.OBJECTS], dbs[Table.REFS]
            yield 0
            done = 0
            for first in range(0, len(commits), batch_size):
                group = commits[first : first + batch_size]
                with env.begin(write=True) as txn:
                    txn.get(ref, db=refs)  # tractkv's compare-and-swap read
                    for blob_key, blob_data, commit_key, commit_data, _ in group:
                        txn.put(blob_key, blob_data, db=objects, overwrite=False)
                        txn.put(commit_key, commit_data, db=objects, overwrite=False)
                    txn.put(ref, group[-1][4], db=refs)
                done += len(group)
                if done >= chunk:
                    yield done
                    done = 0
            if done:
                yield done
            yield 0
        finally:
            env.close()

    return work


def _commit_case(
    case: str, count: int, batch_size: int, durable: bool, baseline_sync: bool, args: argparse.Namespace
) -> dict[str, Any]:
    rng = random.Random(f"{SEED}:{case}")
    messages = _messages(count, rng)
    items = [(rng.randbytes(KEY_LEN), rng.randbytes(VALUE_LEN)) for _ in range(count)]
    encoded = _encoded_commits(messages)
    # A slice: whole batches, at least SLICE_ITEMS commits (tens of milliseconds of work per turn).
    chunk = max(1, -(-SLICE_ITEMS // batch_size)) * batch_size
    scratch = _Scratch(args.tmp)
    try:
        warm = min(count, 2 * chunk)
        _interleave(
            [
                _tractkv_commits(messages[:warm], batch_size, durable, chunk),
                _raw_puts(items[:warm], baseline_sync, chunk),
                _raw_same_shape(encoded[:warm], batch_size, durable, chunk),
            ],
            1,
            scratch,
        )
        rates = _interleave(
            [
                _tractkv_commits(messages, batch_size, durable, chunk),
                _raw_puts(items, baseline_sync, chunk),
                _raw_same_shape(encoded, batch_size, durable, chunk),
            ],
            args.repeat,
            scratch,
        )
        fs = _fs_type(scratch.root)
    finally:
        scratch.close()
    ours, theirs, ratio, best = _compare(rates[0], rates[1])
    _, shape, shape_ratio, _ = _compare(rates[0], rates[2])
    return _result(
        case,
        count,
        ours,
        theirs,
        ratio,
        best,
        # Raw LMDB writing tractkv's exact rows (durable like the store): ratio_to_same_shape is
        # tractkv's own cost, same_shape_per_s / baseline_per_s the cost of the layout.
        same_shape_per_s=round(shape, 1),
        ratio_to_same_shape=round(shape_ratio, 3),
        batch=batch_size,
        durable=durable,
        baseline_sync=baseline_sync,
        repeat=args.repeat,
        fs=fs,
    )


# --- reads ---------------------------------------------------------------------------------------------


def _read_case(args: argparse.Namespace) -> dict[str, Any]:
    count = max(2, args.reads)
    rng = random.Random(f"{SEED}:read_objects")
    scratch = _Scratch(args.tmp)
    store_path, raw_path = scratch.root / "store", scratch.root / "raw"
    store = LmdbStore(store_path, durable=False, map_size=MAP_SIZE)
    env = _open_raw(raw_path, sync=False)
    try:
        head: ObjectId | None = None
        with store.batch() as batch:
            for index, text in enumerate(_messages(count // 2, rng)):
                blob_id = batch.put(Blob(data={"role": "user", "content": text}))
                head = batch.put(
                    Commit(
                        parents=() if head is None else (head,),
                        content=blob_id,
                        created_at=CREATED_AT + index,
                    )
                )
            batch.set_ref(REF, head)
        with store.snapshot() as snap:
            rows = list(snap.iter_raw_objects())
        with env.begin(write=True) as txn:
            for oid, data in rows:
                txn.put(oid_to_raw(oid), data)  # the very same keys and bytes on both sides
        order = [oid for oid, _ in rows]
        rng.shuffle(order)
        raw_order = [oid_to_raw(oid) for oid in order]

        def ours(_path: Path) -> Worker:
            with store.snapshot() as snap:
                yield 0
                for first in range(0, len(order), SLICE_ITEMS * 20):
                    group = order[first : first + SLICE_ITEMS * 20]
                    for oid in group:
                        snap[oid]
                    yield len(group)
                yield 0

        def theirs(_path: Path) -> Worker:
            with env.begin() as txn:
                yield 0
                for first in range(0, len(raw_order), SLICE_ITEMS * 20):
                    group = raw_order[first : first + SLICE_ITEMS * 20]
                    for key in group:
                        if txn.get(key) is None:
                            raise AssertionError("baseline key missing")
                    yield len(group)
                yield 0

        _interleave([ours, theirs], 1, scratch)  # warm-up: page cache and code paths
        rates = _interleave([ours, theirs], args.repeat, scratch)
        median_ours, median_theirs, ratio, best = _compare(rates[0], rates[1])
    finally:
        env.close()
        store.close()
        scratch.close()
    return _result("read_objects", len(order), median_ours, median_theirs, ratio, best, repeat=args.repeat)


# --- import time ---------------------------------------------------------------------------------------

_IMPORT_PROBE = (
    "import time\nstart = time.perf_counter()\nimport {modules}\nprint(time.perf_counter() - start)\n"
)
# import tractkv, then the common path: open a new store (its path is argv[1]), append, compile
_FIRST_USE_PROBE = (
    "import sys, time\nstart = time.perf_counter()\nimport tractkv\n"
    "with tractkv.Tract.open(sys.argv[1]) as t:\n    t.user('hello')\n    t.compile()\n"
    "print(time.perf_counter() - start)\n"
)
FIRST_USE = "first use"  # the side of _import_medians that runs _FIRST_USE_PROBE


_DROPPED_ENV = ("PYTHONPROFILEIMPORTTIME", "PYTHONDEVMODE", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")


def _import_seconds(modules: str, cwd: str, pycache: Path, *, write_bytecode: bool) -> float:
    """Seconds one fresh interpreter spends importing ``modules`` (timed inside it); ``FIRST_USE``: importing
    tractkv and a first append and compile in a new store under ``cwd``."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    # Byte code goes to a scratch prefix (never into the checkout). With write_bytecode the warm-up run
    # compiles every module once, as pip does at install time, and later runs load the cache: what users
    # see. Without it, every run compiles from source (what a PYTHONDONTWRITEBYTECODE=1 shell sees).
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    if not write_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    if modules == FIRST_USE:
        store = tempfile.mkdtemp(prefix="tractkv-bench-first-use-", dir=cwd)
        command = [sys.executable, "-c", _FIRST_USE_PROBE, os.path.join(store, "store")]
    else:
        store, command = None, [sys.executable, "-c", _IMPORT_PROBE.format(modules=modules)]
    try:
        result = subprocess.run(
            command,
            cwd=cwd,  # not the checkout: the installed package is what users import
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        if store is not None:
            shutil.rmtree(store, ignore_errors=True)
    return float(result.stdout.strip().splitlines()[-1])


def _import_medians(
    runs: int, cwd: str, pycache: Path, *, write_bytecode: bool, first_use: bool = False
) -> list[list[float]]:
    """Import seconds of tractkv and of its dependencies (and with ``first_use``, of tractkv's first use),
    ``runs`` fresh interpreters each, in an order that rotates every run."""
    sides = ["tractkv", "lmdb, cbor2, blake3, attrs", *([FIRST_USE] if first_use else [])]
    if write_bytecode:
        for modules in sides:  # warm-up: compile into the byte-code cache (and fill the OS file cache)
            _import_seconds(modules, cwd, pycache, write_bytecode=True)
    times: list[list[float]] = [[] for _ in sides]
    for index in range(runs):
        for step in range(len(sides)):
            which = (index + step) % len(sides)
            times[which].append(_import_seconds(sides[which], cwd, pycache, write_bytecode=write_bytecode))
    return times


def _import_case(args: argparse.Namespace) -> dict[str, Any]:
    runs = max(1, args.imports)
    scratch = _Scratch(args.tmp)
    try:
        ours, theirs, first_use = _import_medians(
            runs, args.tmp, scratch.new(), write_bytecode=True, first_use=True
        )
        cold_ours, cold_theirs = _import_medians(
            args.uncached_imports, args.tmp, scratch.new(), write_bytecode=False
        )
    finally:
        scratch.close()
    ours_ms, theirs_ms = statistics.median(ours) * 1000, statistics.median(theirs) * 1000
    target = TARGETS["import_time"]
    assert target is not None
    return {
        "case": "import_time",
        "n": runs,
        "unit": "ms",
        "tractkv_ms": round(ours_ms, 1),
        "baseline_ms": round(theirs_ms, 1),
        "tractkv_min_ms": round(min(ours) * 1000, 1),
        "baseline_min_ms": round(min(theirs) * 1000, 1),
        "ratio": round(ours_ms / theirs_ms, 3),  # a time ratio: lower is better
        "target": target,
        "ok": ours_ms <= target,
        "first_use_ms": round(statistics.median(first_use) * 1000, 1),
        "first_use_ratio": round(statistics.median(first_use) / statistics.median(theirs), 3),
        # No byte-code cache at all (every module compiled from source on each import): for reference.
        "uncached_tractkv_ms": round(statistics.median(cold_ours) * 1000, 1) if cold_ours else None,
        "uncached_baseline_ms": round(statistics.median(cold_theirs) * 1000, 1) if cold_theirs else None,
    }


# --- entry point ---------------------------------------------------------------------------------------


def _default_tmp() -> str:
    # /var/tmp is disk-backed by convention; /tmp may be a tmpfs where fsync costs nothing (see module doc).
    return "/var/tmp" if os.path.isdir("/var/tmp") else tempfile.gettempdir()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--commits", type=int, default=3000, help="commits in durable_commit (default 3000)")
    parser.add_argument(
        "--batched-commits", type=int, default=20000, help="commits in the batched cases (default 20000)"
    )
    parser.add_argument("--batch", type=int, default=1000, help="commits per batch (default 1000)")
    parser.add_argument(
        "--reads", type=int, default=20000, help="objects read in read_objects (default 20000)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed repeats, median kept (default 5)")
    parser.add_argument("--imports", type=int, default=11, help="fresh interpreters per side (default 11)")
    parser.add_argument(
        "--uncached-imports",
        type=int,
        default=3,
        help="the same without byte-code cache (default 3; 0: skip)",
    )
    parser.add_argument("--tmp", default=_default_tmp(), help="directory for scratch stores (disk-backed)")
    parser.add_argument("--case", action="append", choices=CASES, help="run only this case (repeatable)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a case misses its target")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the selected cases, printing one JSON line per case; 0, or 1 with ``--check`` and a miss."""
    args = _parser().parse_args(argv)
    args.repeat = max(1, args.repeat)
    fs = _fs_type(Path(args.tmp))
    print(f"bench_store: scratch in {args.tmp} ({fs})", file=sys.stderr)
    if fs in MEMORY_FS:
        print(
            f"bench_store: WARNING {args.tmp} is {fs}: fsync is free there, durable figures mean nothing",
            file=sys.stderr,
        )
    runners: dict[str, Callable[[], dict[str, Any]]] = {
        "durable_commit": lambda: _commit_case("durable_commit", args.commits, 1, True, True, args),
        "batched_commit": lambda: _commit_case(
            "batched_commit", args.batched_commits, args.batch, True, False, args
        ),
        "batched_commit_nondurable": lambda: _commit_case(
            "batched_commit_nondurable", args.batched_commits, args.batch, False, False, args
        ),
        "commit_nondurable": lambda: _commit_case("commit_nondurable", args.commits, 1, False, False, args),
        "import_time": lambda: _import_case(args),
        "read_objects": lambda: _read_case(args),
    }
    missed = False
    for case in args.case or CASES:
        result = runners[case]()
        missed = missed or result["ok"] is False
        print(json.dumps(result), flush=True)
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
