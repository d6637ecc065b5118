"""Context-engine benchmarks: appends through the Tract facade, compile, memory and reopen, vs raw LMDB.

Run: ``python benchmarks/bench_engine.py [--commits N] [--batched-commits N] [--batch N] [--history N]
[--long-history N] [--sizes 1000,10000,100000] [--appends N] [--repeat K] [--procs K] [--quick] [--tmp DIR]
[--case NAME]``.
Each case prints one JSON line to stdout; notices go to stderr.

The machine is shared and noisy (2 cores; durable timings move 2x and more between runs, and a neighbour's
fsyncs slow ours), so every case also measures a raw-LMDB (or bare-interpreter) baseline in the same run:
the two sides of a repeat run back to back, their order alternating between repeats; rates are the best
of ``--repeat`` runs, fresh-process times the best of ``--procs`` children (their median is reported too).

Every line has ``case``, ``n``, ``unit``, ``value`` (tractkv's figure), ``baseline``, ``ratio``,
``target``, ``target_of`` (``"value"`` or ``"ratio"``: what the target is checked against) and ``ok``, plus
the same figures under the unit-named keys ``bench_store`` uses (``tractkv_per_s`` / ``baseline_per_s``,
``tractkv_ms`` / ``baseline_ms``, ``tractkv_mb`` / ``baseline_mb``). Cases and targets (``TARGETS``):

* ``durable_append``: ``t.user`` / ``t.assistant`` alternating ~200-character messages on
  ``Tract.open(path)`` (durable by default), one commit per transaction. Baseline: the raw pipeline writing
  the same bytes (issue 18): per commit, the blob ``{"t": "blob", "v": 1, "data": <the same payload>}`` and
  the commit ``{"t", "v", "op", "ts", "parents", "content"}`` canonically encoded with cbor2, hashed with
  blake3, and both put in one durable LMDB transaction. Target: ratio >= 0.8. ``same_shape_per_s``: raw
  LMDB writing the rows a Tract commit writes (ref read, blob and commit puts, ref, reflog entry numbered
  from the last one of its ref, read with a cursor) per durable transaction, without encoding (the I/O floor
  of this layout). ``with_refs_per_s`` (both append cases): ``raw_pipeline_with_refs``, the raw pipeline plus
  the rows a transaction of Tract commits must write to keep its documented guarantees (the branch read for
  its compare-and-swap and moved, one reflog entry numbered from the ref's last one: store format 2 keeps no
  counter row); ``ratio_to_with_refs`` is tractkv's rate over it and
  ``with_refs_of_raw`` its rate over the raw pipeline's (the most any layout with a branch and a reflog gets).
  ``ratio_interleaved`` (durable_append): the same two sides as value and baseline, written in rotating
  blocks of ``INTERLEAVE_BLOCK`` commits into stores open side by side (one run each, with a third,
  ``raw_pipeline_with_refs``: ``interleaved_with_refs_of_raw``), so that a neighbour's disk bursts hit all
  alike: on a shared disk the steadier figure. ``median_commit_us``: the median seconds of one commit of
  each of the three there (tractkv, raw, raw with refs; one fsync'd transaction each), and
  ``ratio_median_commit`` / ``with_refs_of_raw_median_commit`` the raw pipeline's median over tractkv's and
  over the raw pipeline with refs' (a median ignores the commits a neighbour's burst stalled).
* ``batched_append``: the same inside ``with t.batch():`` blocks of ``--batch``; baseline: the same raw
  pipeline, ``--batch`` commits per durable transaction. Target: ratio >= 0.5. ``cpu_us_per_commit`` /
  ``raw_cpu_us_per_commit``: CPU time (``time.process_time``) per commit of each side, the least of the
  runs (steadier than wall time on a loaded machine); ``cpu_ratio`` raw over tractkv. ``python_floor_per_s``
  (and ``floor_cpu_us_per_commit``): the least Python work an append needs, with tractkv's own encoders
  and the rows of ``raw_pipeline_with_refs``: per commit the plain-text check, blob and commit bytes
  (``object_bytes``) and their blake3 ids, the token count, one compile-state entry and a result; no
  session, batch overlay, compile-state objects or ``CommitInfo``. ``floor_of_raw``: its rate over the raw
  pipeline's (how fast a Python append can be at all), ``ratio_to_floor``: tractkv's over it.
* ``batched_append_flatness``: one ``--flat-commits`` (100k) build in ``t.batch()`` blocks of ``--batch``,
  durable; value: the rate over the last 10% of the commits, baseline: the rate over the first 10%.
  Target: ratio >= 0.9. ``raw_ratio``: the same for the raw pipeline building the same history in the
  same run (objects keyed by random ids: each batch of a growing store touches more leaves, so LMDB
  itself writes more pages per batch as the history grows). Where the time goes: ``store_write_*_s``, the
  seconds inside the store's write transactions (page writes and fsync) in the first and last 10%,
  ``written_mb_*`` the bytes written to disk then (/proc/self/io), ``python_ratio`` the rate ratio of the
  rest (everything but the store's transactions).
* ``bytes_per_commit``: for each of ``--size-commits`` (10k and 100k), that many commits written ``--batch``
  per ``t.batch()`` block; value: the bytes of the pages the store's tables use per commit after
  ``close()`` (per-table page counts in ``pages``, LMDB's free pages in ``_free``); baseline: the same
  history written one commit per transaction. ``durable=False`` on both sides (fsync does not change
  which pages LMDB uses). Target: ratio <= 1.1. ``file_ratio``: the same for the whole file
  (``Store.size_bytes()``), which also holds the last large batch's copy-on-write pre-images as free pages
  (reused by the next write; bounded by one batch, not by the history: benchmarks/RESULTS.md, "Space and
  large batches").
* ``compile_fresh_process``: a ``--history``-commit branch built once (batched) and closed (which writes a
  compile checkpoint); each of ``--procs`` fresh interpreters imports tractkv, then times ``Tract.open``
  to the end of the first ``compile()`` (then reads the last message: messages are read on first use).
  Baseline: a fresh interpreter opening the same files with raw LMDB and decoding every stored object with
  cbor2 (what reading the whole history costs at least). Target ratio <= 2.5.
  ``compile_fresh_process_replay``: the same with the checkpoints deleted (rows with prefix ``CKPT_PREFIX``
  in ``Table.DERIVED``), so the first compile replays every commit. No target.
* ``compile_after_append``: for each of ``--sizes``, a branch of that many commits (built with
  ``durable=False``) is compiled once, then ``--appends`` times: one append, then ``compile()`` timed
  alone (the previous context stays alive until after the timing: freeing it is the caller's cost).
  Value: median compile ms; baseline: median append ms. Target <= 1 ms.
  ``compile_after_append_flatness``: median at the largest size over the smallest; target <= 2.
* ``peak_rss``: a fresh interpreter that builds and compiles a ``--history``-commit store reports its peak
  RSS, which counts the store's memory-mapped pages it touched. Read from ``VmHWM`` in /proc/self/status:
  ``ru_maxrss`` would report the benchmark process's own peak, which Linux carries across fork + exec
  into the child. Baseline: an interpreter that only imports tractkv. Target <= 60 MB (decimal).
* ``first_commit_after_reopen``: a fresh interpreter opens the ``--history``-commit store and times its
  first append (``value``; ``open_ms`` is reported apart). Baseline: the first durable put of a fresh
  interpreter on a raw LMDB environment. Target <= 150 ms (the leading peer takes ~9 s: ``peer_ms``).
* ``long_history`` (case name for ``--case``) prints three lines on one ``--long-history``-commit branch
  (default 100,000), built once with ``durable=False`` in batches of 1,000 (``build_s``) and closed:
  ``compile_fresh_process_long`` (as ``compile_fresh_process``; target ratio <= 2.5); ``peak_rss_reopen``
  (the peak RSS, VmHWM, of those compile children after open + compile, before close, with its ``anon_mb``
  and ``file_mb`` parts; baseline: an interpreter that imports tractkv and opens the same store with raw LMDB;
  target <= 80 MB; ``rss_after_close_mb`` is the peak at exit, the context dropped before close);
  ``first_commit_after_reopen_long`` (``Tract.open`` plus the first durable append of a fresh interpreter,
  ``open_ms`` and ``commit_ms`` apart; baseline: opening a raw LMDB environment of as many rows plus its
  first durable put; target <= 20 ms).
* ``memory_growth`` (case name for ``--case``): ``peak_rss_growth``, one line per ``--growth-sizes`` (10k, 50k,
  100k): the peak RSS of fresh interpreters opening and compiling a branch of that many commits (baseline:
  import tractkv + a raw LMDB open of the same store), and ``peak_rss_growth_per_commit``: how many bytes
  of peak RSS each commit adds from the smallest size to the largest (``anon_bytes_per_commit``: the
  process's own memory; ``file_bytes_per_commit``: pages of the LMDB map it touched). Target <= 16 bytes a
  commit, i.e. flat: since checkpoint format 4 open + compile reads the checkpoint's record (its view summary)
  and the chunk of the one message the child uses, nothing per commit (it was ~300 bytes a commit with format
  3, which read every chunk; ~520 when a loaded checkpoint made a Slot per message).
  Compile renders no message the caller does not use, so that figure holds no output. What a caller that
  uses every message pays is in ``peak_rss_growth_rendered_per_commit``: fresh interpreters that compile and
  render every message (``list(ctx.messages)``); the output itself (``output_py_*``: the Message objects,
  measured by walking them; ``output_json_*``: ``json.dumps(ctx.to_dicts())``) is inherent, and so are the
  pages of every blob read (baseline ``raw_read_*``: import tractkv, then a raw LMDB read + decode of every
  object). Value: the growth per commit of the rest (peak RSS - raw read - output as objects), the overhead;
  baseline: the output's growth per commit (as objects). No target: reported so the inherent part and the
  overhead are apart.

Durable cases must hit a real disk: the default ``--tmp`` is ``/var/tmp`` (disk-backed by convention; ``/tmp``
is a tmpfs on many systems, where fsync is free). Each line carries the file-system type in ``fs``.
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
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import blake3
import cbor2
import lmdb

from tractkv import Tract
from tractkv.engine.compile import CKPT_PREFIX
from tractkv.engine.content import DEFAULT_COUNTER, MESSAGE_OVERHEAD
from tractkv.ids import hash_bytes
from tractkv.model.objects import object_bytes, trusted_blob, trusted_commit
from tractkv.store import LmdbStore, Table

SEED = 20240612  # fixed: every run builds the same messages and keys
MAP_SIZE = 1 << 30  # raw baselines: large enough that no run grows the map
KEY_LEN = 32  # raw baseline keys: the size of a raw object id
VALUE_LEN = 300  # raw baseline values: about a message blob plus its commit
MESSAGE_CHARS = 200
INTERLEAVE_BLOCK = 20  # durable_append's ratio_interleaved: commits per block, the sides alternating
PEER_REOPEN_MS = 9000.0  # the leading peer's first commit after reopening a 10k history (ANCHORS.md)
MEMORY_FS = {"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"}
TARGETS: dict[str, tuple[float | None, str, str]] = {  # case -> (target, checked against, "min" | "max")
    "durable_append": (0.8, "ratio", "min"),  # of the raw pipeline writing the same bytes
    "batched_append": (0.5, "ratio", "min"),  # of the raw pipeline, same transaction sizes
    "batched_append_flatness": (0.9, "ratio", "min"),  # last 10% of a 100k build over its first 10%
    "bytes_per_commit": (1.1, "ratio", "max"),  # batched store size over one-commit-per-transaction
    "compile_fresh_process": (2.5, "ratio", "max"),  # Tract.open to the end of compile() / raw read + decode
    "compile_fresh_process_replay": (None, "value", "max"),
    "compile_after_append": (1.0, "value", "max"),  # ms per compile() right after an append
    "compile_after_append_flatness": (2.0, "ratio", "max"),  # largest size's median over smallest's
    "peak_rss": (60.0, "value", "max"),  # MB (10**6 bytes)
    "first_commit_after_reopen": (150.0, "value", "max"),  # ms
    "compile_fresh_process_long": (2.5, "ratio", "max"),  # as compile_fresh_process, --long-history commits
    "peak_rss_reopen": (80.0, "value", "max"),  # MB: a fresh process opening and compiling the long history
    "first_commit_after_reopen_long": (20.0, "value", "max"),  # ms: Tract.open + the first append
    "peak_rss_growth": (None, "value", "max"),  # MB at one size (memory_growth)
    # bytes of peak RSS per commit, smallest to largest: flat (issue 18: growth that is not linear; ~300 bytes a
    # commit with checkpoint format 3, 522 before packed slots)
    "peak_rss_growth_per_commit": (16.0, "value", "max"),
    # rendering every message: bytes a commit beyond the output and the blobs read; no bound (information)
    "peak_rss_growth_rendered_per_commit": (None, "value", "max"),
    "gc": (None, "value", "max"),  # ms of gc on --gc-commits (information: reported before/after a change)
}
SMOKE_ARGS = ["--quick"]  # what the benchmark smoke test runs
CASES = (
    "durable_append",
    "batched_append",
    "batched_append_flatness",
    "bytes_per_commit",
    "compile_fresh_process",
    "compile_after_append",
    "peak_rss",
    "first_commit_after_reopen",
    "long_history",
    "memory_growth",
    "gc",
)
UNIT_KEYS = {"per_s": "per_s", "ms": "ms", "MB": "mb", "B": "b"}
_TEXT = (  # message words; each message is drawn from these with the fixed seed
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
    """``count`` distinct ~200-character messages."""
    out = []
    for index in range(count):
        words = [f"#{index}"]
        while sum(len(w) + 1 for w in words) < MESSAGE_CHARS:
            words.append(rng.choice(_WORDS))
        out.append(" ".join(words)[:MESSAGE_CHARS])
    return out


def _append(t: Tract, index: int, text: str) -> None:
    """Message ``index``: user and assistant alternate, as in a conversation."""
    if index % 2 == 0:
        t.user(text)
    else:
        t.assistant(text)


def _open_raw(path: Path, *, sync: bool, max_dbs: int = 0) -> Any:
    # The options LmdbStore uses, so a baseline differs only by doing no tractkv work.
    return lmdb.open(
        str(path),
        map_size=MAP_SIZE,
        sync=sync,
        metasync=sync,
        readahead=False,
        meminit=False,
        max_dbs=max_dbs,
    )


class _Scratch:
    """Fresh directories under one temporary root, removed on exit."""

    def __init__(self, parent: str) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="tractkv-bench-engine-", dir=parent))
        self._count = 0

    def new(self) -> Path:
        self._count += 1
        return self.root / f"run{self._count}"

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _side_by_side(
    runs: Sequence[Callable[[Path], float]], repeat: int, scratch: _Scratch
) -> list[list[float]]:
    """The rate of every run, ``repeat`` times, each in a fresh directory; one list of rates per run."""
    rates: list[list[float]] = [[] for _ in runs]
    for index in range(repeat):
        order = [(index + offset) % len(runs) for offset in range(len(runs))]  # drift hits every side
        for which in order:
            path = scratch.new()
            gc.collect()
            rates[which].append(runs[which](path))
            shutil.rmtree(path, ignore_errors=True)
    return rates


def _ok(case: str, value: float, ratio: float) -> tuple[float | None, str, bool | None]:
    target, against, sense = TARGETS[case]
    if target is None:
        return None, against, None
    checked = value if against == "value" else ratio
    return target, against, checked >= target if sense == "min" else checked <= target


def _line(case: str, n: int, unit: str, value: float, baseline: float, **extra: Any) -> dict[str, Any]:
    """One result line: generic keys, the unit-named keys bench_store uses, then case details."""
    ratio = value / baseline if baseline else float("nan")
    target, against, ok = _ok(case, value, ratio)
    suffix = UNIT_KEYS[unit]
    digits = 1 if unit in ("per_s", "B") else 3
    return {
        "case": case,
        "n": n,
        "value": round(value, digits),
        "unit": unit,
        "baseline": round(baseline, digits),
        "ratio": round(ratio, 4),
        "target": target,
        "target_of": against,
        "ok": ok,
        f"tractkv_{suffix}": round(value, digits),
        f"baseline_{suffix}": round(baseline, digits),
        **extra,
    }


def _run_child(code: str, *args: str) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter (argv = args); it prints one JSON object as its last line."""
    result = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False, timeout=600
    )
    if result.returncode != 0:
        raise RuntimeError(f"benchmark child failed ({result.returncode}):\n{result.stderr}")
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


def _build_history(path: Path, count: int, batch: int, *, durable: bool = True) -> None:
    """A branch of ``count`` alternating messages, ``batch`` per transaction; closing writes a checkpoint."""
    texts = _messages(count, random.Random(f"{SEED}:history"))
    with Tract.open(str(path), durable=durable) as t:
        for first in range(0, count, batch):
            with t.batch():
                for index in range(first, min(first + batch, count)):
                    _append(t, index, texts[index])


def _delete_checkpoints(path: Path) -> int:
    """Remove every compile checkpoint row (chunks stay: without a checkpoint naming them they are unused)."""
    store = LmdbStore(path)
    try:
        keys = [key for key, _ in store.table_iter(Table.DERIVED, CKPT_PREFIX)]
        batch = store.new_batch()
        for key in keys:
            batch.table_put(Table.DERIVED, key, None)
        if keys:
            store.apply(batch)
    finally:
        store.close()
    return len(keys)


# --- appends -------------------------------------------------------------------------------------------


def _tract_appends(
    texts: Sequence[str], batch: int, cpu: list[float] | None = None
) -> Callable[[Path], float]:
    """Commits per second of a Tract appending ``texts`` (``batch`` per ``t.batch()`` block; 1 = none);
    ``cpu`` gets each run's CPU µs per commit (``time.process_time``)."""

    def run(path: Path) -> float:
        t = Tract.open(str(path))  # durable=True: the default under test
        try:
            start, cpu_start = time.perf_counter(), time.process_time()
            if batch <= 1:
                for index, text in enumerate(texts):
                    _append(t, index, text)
            else:
                for first in range(0, len(texts), batch):
                    with t.batch():
                        for index in range(first, min(first + batch, len(texts))):
                            _append(t, index, texts[index])
            elapsed = time.perf_counter() - start
            if cpu is not None:
                cpu.append((time.process_time() - cpu_start) * 1e6 / len(texts))
            if t.compile().commit_count != len(texts):
                raise AssertionError("the benchmark's branch does not hold every commit")
        finally:
            t.close()
        return len(texts) / elapsed

    return run


def _payloads(texts: Sequence[str]) -> list[dict[str, Any]]:
    """The message payloads a Tract stores for ``texts`` appended with :func:`_append`."""
    return [
        {"type": "dialogue", "role": "user" if index % 2 == 0 else "assistant", "text": text}
        for index, text in enumerate(texts)
    ]


class _RawPipeline:
    """The raw pipeline's environment and chain (see :func:`_raw_pipeline`), one write transaction a call."""

    def __init__(self, path: Path, *, refs: bool) -> None:
        self.env = _open_raw(path, sync=True, max_dbs=16)
        with self.env.begin(write=True) as txn:
            self.objects = self.env.open_db(Table.OBJECTS.value.encode(), txn=txn, create=True)
            self.ref_db, self.reflog_db = (
                self.env.open_db(t.value.encode(), txn=txn, create=True) for t in (Table.REFS, Table.REFLOG)
            )
        self.refs = refs
        self.parent: bytes | None = None

    def transaction(self, payloads: Sequence[dict[str, Any]]) -> None:
        """Write ``payloads`` as a chain of commits in one durable transaction."""
        parent = self.parent
        with self.env.begin(write=True, db=self.objects) as txn:
            old = txn.get(_REF, db=self.ref_db) if self.refs else None
            for payload in payloads:
                blob = cbor2.dumps({"t": "blob", "v": 1, "data": payload}, canonical=True)
                blob_id = blake3.blake3(blob).digest()
                wire: dict[str, Any] = {
                    "t": "commit",
                    "v": 1,
                    "op": "append",
                    "ts": time.time_ns() // 1000,
                    "content": blob_id,
                }
                if parent is not None:
                    wire["parents"] = [parent]
                commit = cbor2.dumps(wire, canonical=True)
                parent = blake3.blake3(commit).digest()
                txn.put(blob_id, blob, overwrite=False)
                txn.put(parent, commit, overwrite=False)
            if self.refs and parent is not None:
                entry = {"old": old, "new": parent.hex(), "op": "append", "msg": "", "ts": wire["ts"]}
                txn.put(_REF, parent.hex().encode(), db=self.ref_db)
                seq = _next_seq(txn, self.reflog_db)
                txn.put(_REF + b"\0" + seq.to_bytes(8, "big"), cbor2.dumps(entry), db=self.reflog_db)
        self.parent = parent

    def close(self) -> None:
        self.env.close()


def _raw_pipeline(
    texts: Sequence[str],
    batch: int,
    ends: list[float] | None = None,
    *,
    refs: bool = False,
    cpu: list[float] | None = None,
) -> Callable[[Path], float]:
    """Commits per second of the raw pipeline writing the bytes a Tract append writes (see the module doc):
    per commit a blob and a commit, canonical CBOR (cbor2), blake3 ids, both put in the objects table;
    ``batch`` commits per durable write transaction (``ends`` gets the time each transaction ended).

    ``refs``: also the rows a transaction of Tract commits must write to keep its documented guarantees
    (``raw_pipeline_with_refs``): the branch read for its compare-and-swap and moved, one reflog entry (CBOR,
    as ``log_ref_move`` writes it) numbered from the ref's last entry (a cursor read, as the store does)."""
    payloads = _payloads(texts)

    def run(path: Path) -> float:
        raw = _RawPipeline(path, refs=refs)
        try:
            start, cpu_start = time.perf_counter(), time.process_time()
            for first in range(0, len(payloads), batch):
                raw.transaction(payloads[first : first + batch])
                if ends is not None:
                    ends.append(time.perf_counter() - start)
            elapsed = time.perf_counter() - start
            if cpu is not None:
                cpu.append((time.process_time() - cpu_start) * 1e6 / len(payloads))
        finally:
            raw.close()
        return len(payloads) / elapsed

    return run


def _python_floor(
    texts: Sequence[str], batch: int, cpu: list[float] | None = None
) -> Callable[[Path], float]:
    """Commits per second of the least Python work a Tract append needs, written with tractkv's own encoders
    (``python_floor``, see the module doc): per commit the payload checked as ``content_objects`` checks plain
    text, its blob and commit encoded (``object_bytes``) and hashed, the token count, one compile-state entry
    and a result; per ``batch`` commits one durable transaction writing the objects and the rows of
    ``raw_pipeline_with_refs`` (branch read and moved, one reflog entry numbered from the ref's last)."""

    def run(path: Path) -> float:
        raw = _RawPipeline(path, refs=True)
        counter, parent = DEFAULT_COUNTER, None
        state: list[tuple[str, str, int, str]] = []
        results = []
        try:
            start, cpu_start = time.perf_counter(), time.process_time()
            for first in range(0, len(texts), batch):
                staged: dict[str, bytes] = {}
                for index in range(first, min(first + batch, len(texts))):
                    text, role = texts[index], "user" if index % 2 == 0 else "assistant"
                    if type(text) is not str or not text:
                        raise AssertionError("plain text only")
                    text.encode("utf-8")  # what content_objects checks (no lone surrogate)
                    data = object_bytes(trusted_blob({"type": "dialogue", "role": role, "text": text}))
                    blob_id = hash_bytes(data)
                    staged[blob_id] = data
                    commit = trusted_commit(
                        parents=(parent,) if parent is not None else (),
                        content=blob_id,
                        tools=None,
                        operation="append",
                        created_at=time.time_ns() // 1000,
                    )
                    data = object_bytes(commit)
                    parent = hash_bytes(data)
                    staged[parent] = data
                    tokens = counter.count(text) + MESSAGE_OVERHEAD
                    state.append((parent, blob_id, tokens, role))
                    results.append((parent, commit, tokens))
                with raw.env.begin(write=True, db=raw.objects) as txn:
                    old = txn.get(_REF, db=raw.ref_db)
                    for oid, value in staged.items():
                        txn.put(bytes.fromhex(oid), value, overwrite=False)
                    assert parent is not None
                    entry = {
                        "old": old,
                        "new": parent,
                        "op": "append",
                        "msg": "",
                        "ts": time.time_ns() // 1000,
                    }
                    txn.put(_REF, parent.encode(), db=raw.ref_db)
                    seq = _next_seq(txn, raw.reflog_db)
                    txn.put(_REF + b"\0" + seq.to_bytes(8, "big"), cbor2.dumps(entry), db=raw.reflog_db)
            elapsed = time.perf_counter() - start
            if cpu is not None:
                cpu.append((time.process_time() - cpu_start) * 1e6 / len(texts))
        finally:
            raw.close()
        return len(texts) / elapsed

    return run


def _interleaved_durable(texts: Sequence[str], block: int, scratch: _Scratch) -> list[list[float]]:
    """Seconds of each commit of durable Tract appends, of the raw pipeline and of the raw pipeline with refs
    (one commit per transaction each), written in rotating blocks of ``block`` commits into three stores open
    side by side, so a neighbour's burst of disk work slows every side alike (the whole-run sides of
    ``_side_by_side`` each see their own seconds of a shared disk)."""
    payloads = _payloads(texts)
    t = Tract.open(str(scratch.new()))
    raw = _RawPipeline(scratch.new(), refs=False)
    with_refs = _RawPipeline(scratch.new(), refs=True)
    spent: list[list[float]] = [[], [], []]
    clock = time.perf_counter
    try:

        def ours(first: int) -> None:
            for index in range(first, min(first + block, len(texts))):
                start = clock()
                _append(t, index, texts[index])
                spent[0].append(clock() - start)

        def theirs(first: int) -> None:
            for payload in payloads[first : first + block]:
                start = clock()
                raw.transaction([payload])
                spent[1].append(clock() - start)

        def theirs_with_refs(first: int) -> None:
            for payload in payloads[first : first + block]:
                start = clock()
                with_refs.transaction([payload])
                spent[2].append(clock() - start)

        sides = [ours, theirs, theirs_with_refs]
        for number, first in enumerate(range(0, len(texts), block)):
            for offset in range(len(sides)):
                sides[(number + offset) % len(sides)](first)
    finally:
        t.close()
        raw.close()
        with_refs.close()
    return spent


_REF = b"refs/heads/main"
_REF_END = _REF + b"\1"  # the first key after every ``_REF NUL seq``


def _next_seq(txn: Any, reflog: Any) -> int:
    """The number of ``_REF``'s next reflog entry: one more than its last one's (a cursor, as the store)."""
    with txn.cursor(db=reflog) as cursor:
        found = cursor.prev() if cursor.set_range(_REF_END) else cursor.last()
        key = cursor.key() if found else b""
    return int.from_bytes(key[-8:], "big") + 1 if key.startswith(_REF + b"\0") else 1


def _raw_same_shape(count: int, rng: random.Random) -> Callable[[Path], float]:
    """Raw LMDB writing the rows of one Tract commit per durable transaction (see the module doc)."""
    ref = b"refs/heads/main"
    rows = [
        (rng.randbytes(KEY_LEN), rng.randbytes(250), rng.randbytes(KEY_LEN), rng.randbytes(180))
        for _ in range(count)
    ]

    def run(path: Path) -> float:
        env = _open_raw(path, sync=True, max_dbs=16)
        try:
            with env.begin(write=True) as txn:
                dbs = {t: env.open_db(t.value.encode(), txn=txn, create=True) for t in Table}
            objects, refs, reflog = dbs[Table.OBJECTS], dbs[Table.REFS], dbs[Table.REFLOG]
            start = time.perf_counter()
            for blob_key, blob, commit_key, commit in rows:
                with env.begin(write=True) as txn:
                    txn.get(ref, db=refs)  # the compare-and-swap read
                    txn.put(blob_key, blob, db=objects, overwrite=False)
                    txn.put(commit_key, commit[:80], db=objects, overwrite=False)
                    txn.put(ref, commit_key.hex().encode(), db=refs)
                    seq = _next_seq(txn, reflog)
                    txn.put(ref + b"\0" + seq.to_bytes(8, "big"), commit, db=reflog)
            elapsed = time.perf_counter() - start
        finally:
            env.close()
        return count / elapsed

    return run


def _append_case(case: str, count: int, batch: int, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(f"{SEED}:{case}")
    texts = _messages(count, rng)

    cpus: list[list[float]] = [[], [], []]  # CPU µs per commit: tractkv, raw pipeline, python floor

    def sides(size: int, cpu: list[list[float]]) -> list[Callable[[Path], float]]:
        out = [
            _tract_appends(texts[:size], batch, cpu[0]),
            _raw_pipeline(texts[:size], batch, cpu=cpu[1]),
            _raw_pipeline(texts[:size], batch, refs=True),
        ]
        if batch <= 1:
            out.append(_raw_same_shape(size, random.Random(f"{SEED}:{case}:shape")))
        else:
            out.append(_python_floor(texts[:size], batch, cpu[2]))
        return out

    runs = sides(count, cpus)
    scratch = _Scratch(args.tmp)
    try:
        warm_cpu: list[list[float]] = [[], [], []]
        for run in sides(min(count, 100), warm_cpu):  # warm-up: code paths, page cache, file-system metadata
            run(scratch.new())
        rates = _side_by_side(runs, args.repeat, scratch)
        interleaved = _interleaved_durable(texts, INTERLEAVE_BLOCK, scratch) if batch <= 1 else None
        fs = _fs_type(scratch.root)
    finally:
        scratch.close()
    ours, theirs = max(rates[0]), max(rates[1])
    paired = statistics.median(o / t for o, t in zip(rates[0], rates[1], strict=True))
    with_refs = max(rates[2])
    extra: dict[str, Any] = {
        "with_refs_per_s": round(with_refs, 1),
        "ratio_to_with_refs": round(ours / with_refs, 4),
        "with_refs_of_raw": round(with_refs / theirs, 4),
    }
    if len(rates) > 3 and batch <= 1:
        extra["same_shape_per_s"] = round(max(rates[3]), 1)
        extra["ratio_to_same_shape"] = round(ours / max(rates[3]), 4)
    elif len(rates) > 3:
        floor = max(rates[3])
        extra["python_floor_per_s"] = round(floor, 1)
        extra["floor_of_raw"] = round(floor / theirs, 4)
        extra["ratio_to_floor"] = round(ours / floor, 4)
        cpu_ours, cpu_raw, cpu_floor = (min(c) for c in cpus)  # the least each side needed
        extra["cpu_us_per_commit"] = round(cpu_ours, 1)
        extra["raw_cpu_us_per_commit"] = round(cpu_raw, 1)
        extra["floor_cpu_us_per_commit"] = round(cpu_floor, 1)
        extra["cpu_ratio"] = round(cpu_raw / cpu_ours, 4)
    if interleaved is not None:
        rate = [len(times) / sum(times) for times in interleaved]
        median = [statistics.median(times) for times in interleaved]
        extra["interleaved_per_s"] = round(rate[0], 1)
        extra["interleaved_baseline_per_s"] = round(rate[1], 1)
        extra["ratio_interleaved"] = round(rate[0] / rate[1], 4)
        extra["interleaved_with_refs_of_raw"] = round(rate[2] / rate[1], 4)
        extra["median_commit_us"] = [round(m * 1e6) for m in median]  # tractkv, raw, raw with refs
        extra["ratio_median_commit"] = round(median[1] / median[0], 4)
        extra["with_refs_of_raw_median_commit"] = round(median[1] / median[2], 4)
    return _line(
        case,
        count,
        "per_s",
        ours,
        theirs,
        ratio_paired_median=round(paired, 4),
        **extra,
        batch=batch,
        repeat=args.repeat,
        runs_per_s=[round(r) for r in rates[0]],
        baseline_runs_per_s=[round(r) for r in rates[1]],
        fs=fs,
    )


def _first_last(ends: Sequence[float], batches: int) -> tuple[float, float]:
    """Seconds of the first and of the last ``batches`` transactions, from their end times (since start)."""
    last_start = ends[-batches - 1] if len(ends) > batches else 0.0
    return ends[batches - 1], ends[-1] - last_start


def _flatness_case(args: argparse.Namespace) -> dict[str, Any]:
    """The rate of the last 10% of a long batched build against its first 10% (see the module doc); the raw
    pipeline building the same history in the same run shows what LMDB alone does (``raw_ratio``)."""
    count, batch = args.flat_commits, args.batch
    texts = _messages(count, random.Random(f"{SEED}:flatness"))
    batches = max(1, count // 10 // batch)
    ends: list[float] = []
    raw_ends: list[float] = []
    writes: list[float] = []  # per batch: seconds inside LmdbStore's write transactions (commit + fsync)
    written: list[int] = []  # per batch: bytes this process wrote to disk (/proc/self/io)
    scratch = _Scratch(args.tmp)
    real_write = LmdbStore._write
    spent = [0.0]

    def timed_write(self: LmdbStore, body: Any) -> Any:
        begun = time.perf_counter()
        try:
            return real_write(self, body)
        finally:
            spent[0] += time.perf_counter() - begun

    LmdbStore._write = timed_write  # type: ignore[method-assign]
    try:
        path = scratch.new()
        with Tract.open(str(path)) as t:
            start = time.perf_counter()
            for first in range(0, count, batch):
                spent[0], before = 0.0, _written_bytes()
                with t.batch():
                    for index in range(first, min(first + batch, count)):
                        _append(t, index, texts[index])
                ends.append(time.perf_counter() - start)
                writes.append(spent[0])
                written.append(_written_bytes() - before)
            if t.compile().commit_count != count:
                raise AssertionError("the benchmark's branch does not hold every commit")
        LmdbStore._write = real_write  # type: ignore[method-assign]
        shutil.rmtree(path, ignore_errors=True)
        _raw_pipeline(texts, batch, raw_ends)(scratch.new())
        fs = _fs_type(scratch.root)
    finally:
        LmdbStore._write = real_write  # type: ignore[method-assign]
        scratch.close()
    first_s, last_s = _first_last(ends, batches)
    raw_first, raw_last = _first_last(raw_ends, batches)
    done = batches * batch
    write_first, write_last = sum(writes[:batches]), sum(writes[-batches:])
    return _line(
        "batched_append_flatness",
        count,
        "per_s",
        done / last_s,
        done / first_s,
        total_per_s=round(count / ends[-1], 1),
        raw_first_per_s=round(done / raw_first, 1),
        raw_last_per_s=round(done / raw_last, 1),
        raw_ratio=round(raw_first / raw_last, 4),
        # where the time goes: the store's write transactions (page writes + fsync) against everything else
        store_write_first_s=round(write_first, 3),
        store_write_last_s=round(write_last, 3),
        python_ratio=round((first_s - write_first) / (last_s - write_last), 4),
        written_mb_first=round(sum(written[:batches]) / 1e6, 1),
        written_mb_last=round(sum(written[-batches:]) / 1e6, 1),
        batch=batch,
        fs=fs,
    )


def _written_bytes() -> int:
    """Bytes this process caused to be written to storage so far (/proc/self/io; 0 where there is none)."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _page_use(path: Path) -> dict[str, int]:
    """Pages of a closed store: per table (branch + leaf + overflow), the file's (``last_pgno + 1``), and the
    rest (``_free``): LMDB's free list and its own record of it, pages a later transaction reuses."""
    env = lmdb.open(str(path), max_dbs=16, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            names = [bytes(key) for key in txn.cursor().iternext(values=False)]
        pages: dict[str, int] = {}
        for name in names:
            db = env.open_db(name, create=False)
            with env.begin() as txn:
                stat = txn.stat(db)
            pages[name.decode()] = stat["branch_pages"] + stat["leaf_pages"] + stat["overflow_pages"]
        main = env.stat()
        file_pages = int(env.info()["last_pgno"]) + 1
        tables = sum(pages.values()) + main["branch_pages"] + main["leaf_pages"] + 2  # + the meta pages
        pages["_file"] = file_pages
        pages["_free"] = file_pages - tables
        pages["_psize"] = int(main["psize"])
    finally:
        env.close()
    return pages


def _bytes_per_commit_case(args: argparse.Namespace, count: int) -> dict[str, Any]:
    """Store bytes per commit, written in batches against one commit per transaction (module doc)."""
    batch = args.batch
    texts = _messages(count, random.Random(f"{SEED}:size"))
    sizes: dict[int, int] = {}
    files: dict[int, int] = {}
    pages: dict[int, dict[str, int]] = {}
    scratch = _Scratch(args.tmp)
    try:
        for per in (batch, 1):
            path = scratch.new()
            with Tract.open(str(path), durable=False) as t:
                for first in range(0, count, per):
                    if per == 1:
                        _append(t, first, texts[first])
                        continue
                    with t.batch():
                        for index in range(first, min(first + per, count)):
                            _append(t, index, texts[index])
            with Tract.open(str(path), durable=False) as t:
                sizes[per] = t.store.size_bytes()
                if t.compile().commit_count != count:
                    raise AssertionError("the benchmark's branch does not hold every commit")
            files[per] = (path / "data.mdb").stat().st_size
            pages[per] = _page_use(path)
    finally:
        scratch.close()
    psize = pages[1]["_psize"]
    used = {per: (p["_file"] - p["_free"]) * psize for per, p in pages.items()}
    return _line(
        "bytes_per_commit",
        count,
        "B",
        used[batch] / count,
        used[1] / count,
        # the whole file (Store.size_bytes(), free pages included): the last large batch's copy-on-write
        # pre-images stay free pages at the end, reused by the next write (benchmarks/RESULTS.md, "Space and
        # large batches")
        file_bytes_per_commit=round(sizes[batch] / count, 1),
        baseline_file_bytes_per_commit=round(sizes[1] / count, 1),
        file_ratio=round(sizes[batch] / sizes[1], 4),
        pages={k: v for k, v in pages[batch].items() if v and k != "_psize"},
        baseline_pages={k: v for k, v in pages[1].items() if v and k != "_psize"},
        store_mb=round(sizes[batch] / 1e6, 2),
        baseline_store_mb=round(sizes[1] / 1e6, 2),
        file_mb=round(files[batch] / 1e6, 2),
        baseline_file_mb=round(files[1] / 1e6, 2),
        batch=batch,
    )


# --- compile in a fresh process ------------------------------------------------------------------------

_PEAK_RSS_FN = textwrap.dedent(
    """
    import resource


    def peak_kib():
        # VmHWM is this process's own peak RSS. ru_maxrss is not: Linux carries the peak of the memory
        # image a process replaced at exec (the forking parent's) into it, so a child of a big parent
        # reports the parent's peak.
        try:
            with open("/proc/self/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


    def rss_parts():
        # RssAnon (the process's own memory) and RssFile (mapped file pages: the store's LMDB map among them)
        parts = {"RssAnon": 0, "RssFile": 0}
        try:
            with open("/proc/self/status") as status:
                for line in status:
                    key = line.split(":")[0]
                    if key in parts:
                        parts[key] = int(line.split()[1])
        except OSError:
            pass
        return parts
    """
)

_COMPILE_CHILD = _PEAK_RSS_FN + textwrap.dedent(
    """
    import json, sys, time
    from tractkv import Tract
    start = time.perf_counter()
    t = Tract.open(sys.argv[1])
    opened = time.perf_counter()
    ctx = t.compile()
    done = time.perf_counter()
    messages = len(ctx.messages)
    assert ctx.messages[-1].content  # a message is read (messages not used yet are read on first use)
    rss = peak_kib()  # open + compile
    parts = rss_parts()
    del ctx  # done with it (a context still alive when its Tract closes has its other messages read then)
    t.close()
    print(json.dumps({"ms": (done - start) * 1000, "open_ms": (opened - start) * 1000,
                      "messages": messages, "rss_kib": rss, "rss_after_close_kib": peak_kib(),
                      "anon_kib": parts["RssAnon"], "file_kib": parts["RssFile"]}))
    """
)

_RAW_READ_CHILD = textwrap.dedent(
    """
    import json, sys, time
    import cbor2, lmdb
    start = time.perf_counter()
    env = lmdb.open(sys.argv[1], readonly=True, lock=False, max_dbs=16, readahead=False)
    objects = env.open_db(b"objects", create=False)
    count = 0
    with env.begin(db=objects) as txn:
        for _, value in txn.cursor():
            cbor2.loads(value)
            count += 1
    done = time.perf_counter()
    print(json.dumps({"ms": (done - start) * 1000, "objects": count}))
    """
)


def _children(code: str, path: Path, procs: int) -> list[dict[str, Any]]:
    return [_run_child(code, str(path)) for _ in range(procs)]


def _compile_and_raw_read(path: Path, procs: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``procs`` fresh-process compiles of ``path`` and as many raw reads + decodes, after one warm-up of each
    (page cache, byte code), the two sides alternating so drift hits both alike."""
    _run_child(_COMPILE_CHILD, str(path))
    _run_child(_RAW_READ_CHILD, str(path))
    ours: list[dict[str, Any]] = []
    raw: list[dict[str, Any]] = []
    for index in range(procs):
        pair = [(_COMPILE_CHILD, ours), (_RAW_READ_CHILD, raw)]
        for code, out in pair if index % 2 == 0 else reversed(pair):
            out.append(_run_child(code, str(path)))
    return ours, raw


def _fresh_compile_cases(args: argparse.Namespace) -> list[dict[str, Any]]:
    scratch = _Scratch(args.tmp)
    try:
        path = scratch.new()
        _build_history(path, args.history, args.batch)
        ours, raw = _compile_and_raw_read(path, args.procs)
        deleted = _delete_checkpoints(path)
        replay: list[dict[str, Any]] = []
        for _ in range(args.procs):
            _delete_checkpoints(path)  # in case a child saved one
            replay.append(_run_child(_COMPILE_CHILD, str(path)))
        fs = _fs_type(scratch.root)
    finally:
        scratch.close()
    for result in ours + replay:
        if result["messages"] != args.history:
            raise AssertionError(f"compiled {result['messages']} messages, expected {args.history}")
    baseline = min(r["ms"] for r in raw)
    lines = []
    for case, runs in (("compile_fresh_process", ours), ("compile_fresh_process_replay", replay)):
        best = min(runs, key=lambda r: r["ms"])
        lines.append(
            _line(
                case,
                args.history,
                "ms",
                best["ms"],
                baseline,
                median_ms=round(statistics.median(r["ms"] for r in runs), 3),
                baseline_median_ms=round(statistics.median(r["ms"] for r in raw), 3),
                open_ms=round(best["open_ms"], 3),
                rss_mb=round(max(r["rss_kib"] for r in runs) * 1024 / 1e6, 1),
                procs=args.procs,
                checkpoints_deleted=deleted if case.endswith("replay") else 0,
                fs=fs,
            )
        )
    return lines


# --- compile right after an append ---------------------------------------------------------------------


def _compile_after_append_cases(args: argparse.Namespace) -> list[dict[str, Any]]:
    scratch = _Scratch(args.tmp)
    lines = []
    medians: dict[int, float] = {}
    try:
        texts = _messages(args.appends, random.Random(f"{SEED}:after-append"))
        for size in args.sizes:
            path = scratch.new()
            _build_history(path, size, args.batch, durable=False)  # durable=False: only CPU matters here
            compile_ms: list[float] = []
            append_ms: list[float] = []
            with Tract.open(str(path), durable=False) as t:
                if t.compile().commit_count != size:
                    raise AssertionError("the history is not the size asked for")
                contexts = []  # kept: freeing the previous context is not compile's cost
                for index, text in enumerate(texts):
                    start = time.perf_counter()
                    _append(t, size + index, text)
                    appended = time.perf_counter()
                    contexts.append(t.compile())
                    done = time.perf_counter()
                    append_ms.append((appended - start) * 1000)
                    compile_ms.append((done - appended) * 1000)
                    if len(contexts) > 1:
                        contexts.pop(0)
                if len(contexts[-1].messages) != size + len(texts):
                    raise AssertionError("compile missed an append")
            shutil.rmtree(path, ignore_errors=True)
            median = statistics.median(compile_ms)
            medians[size] = median
            ordered = sorted(compile_ms)
            lines.append(
                _line(
                    "compile_after_append",
                    size,
                    "ms",
                    median,
                    statistics.median(append_ms),
                    p90_ms=round(ordered[int(0.9 * (len(ordered) - 1))], 4),
                    max_ms=round(ordered[-1], 4),
                    appends=len(texts),
                )
            )
    finally:
        scratch.close()
    small, large = min(medians), max(medians)
    lines.append(
        _line(
            "compile_after_append_flatness",
            large,
            "ms",
            medians[large],
            medians[small],
            baseline_n=small,
        )
    )
    return lines


# --- peak memory ---------------------------------------------------------------------------------------

_RSS_BUILD_CHILD = _PEAK_RSS_FN + textwrap.dedent(
    """
    import json, sys
    from tractkv import Tract
    texts, batch = json.loads(sys.stdin.read()), int(sys.argv[2])
    with Tract.open(sys.argv[1]) as t:
        for first in range(0, len(texts), batch):
            with t.batch():
                for index in range(first, min(first + batch, len(texts))):
                    (t.user if index % 2 == 0 else t.assistant)(texts[index])
        messages = len(t.compile().messages)
    print(json.dumps({"rss_kib": peak_kib(), "messages": messages}))
    """
)
_RSS_IMPORT_CHILD = _PEAK_RSS_FN + textwrap.dedent(
    """
    import json
    import tractkv
    print(json.dumps({"rss_kib": peak_kib()}))
    """
)


def _peak_rss_case(args: argparse.Namespace) -> dict[str, Any]:
    texts = _messages(args.history, random.Random(f"{SEED}:history"))
    scratch = _Scratch(args.tmp)
    try:
        path = scratch.new()
        result = subprocess.run(
            [sys.executable, "-c", _RSS_BUILD_CHILD, str(path), str(args.batch)],
            input=json.dumps(texts),
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        if result.returncode != 0:
            raise RuntimeError(f"benchmark child failed:\n{result.stderr}")
        built = json.loads(result.stdout.strip().splitlines()[-1])
        store_mb = sum(f.stat().st_size for f in path.iterdir()) / 1e6
    finally:
        scratch.close()
    if built["messages"] != args.history:
        raise AssertionError("the RSS child did not build the whole history")
    baseline = min(_run_child(_RSS_IMPORT_CHILD)["rss_kib"] for _ in range(max(1, min(3, args.procs))))
    ours_mb, base_mb = built["rss_kib"] * 1024 / 1e6, baseline * 1024 / 1e6
    return _line(
        "peak_rss",
        args.history,
        "MB",
        ours_mb,
        base_mb,
        delta_mb=round(ours_mb - base_mb, 1),
        store_file_mb=round(store_mb, 1),
    )


# --- first commit after reopening ----------------------------------------------------------------------

_REOPEN_CHILD = textwrap.dedent(
    """
    import json, sys, time
    from tractkv import Tract
    start = time.perf_counter()
    t = Tract.open(sys.argv[1])
    opened = time.perf_counter()
    t.user("one more question after the restart: where were we with the refactor and its tests?")
    done = time.perf_counter()
    count = t.compile().commit_count
    t.close()
    print(json.dumps({"ms": (done - opened) * 1000, "open_ms": (opened - start) * 1000, "commits": count}))
    """
)
_RAW_REOPEN_CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    import lmdb
    start = time.perf_counter()
    env = lmdb.open(sys.argv[1], map_size=1 << 30, sync=True, metasync=True, readahead=False, meminit=False)
    opened = time.perf_counter()
    with env.begin(write=True) as txn:
        txn.put(os.urandom(32), os.urandom(300))
    done = time.perf_counter()
    env.close()
    print(json.dumps({"ms": (done - opened) * 1000, "open_ms": (opened - start) * 1000}))
    """
)


def _reopen_case(args: argparse.Namespace) -> dict[str, Any]:
    scratch = _Scratch(args.tmp)
    try:
        path, raw_path = scratch.new(), scratch.new()
        _build_history(path, args.history, args.batch)
        env = _open_raw(raw_path, sync=True)
        with env.begin(write=True) as txn:
            rng = random.Random(f"{SEED}:raw-reopen")
            for _ in range(args.history * 2):  # as many rows as the history's objects
                txn.put(rng.randbytes(KEY_LEN), rng.randbytes(VALUE_LEN // 2))
        env.close()
        ours: list[dict[str, Any]] = []
        raw: list[dict[str, Any]] = []
        for index in range(args.procs):
            pair = [(_REOPEN_CHILD, path, ours), (_RAW_REOPEN_CHILD, raw_path, raw)]
            for code, where, out in pair if index % 2 == 0 else reversed(pair):
                out.append(_run_child(code, str(where)))
        fs = _fs_type(scratch.root)
    finally:
        scratch.close()
    for index, result in enumerate(ours):
        if result["commits"] != args.history + index + 1:
            raise AssertionError("the reopened branch did not grow by one commit")
    best = min(ours, key=lambda r: r["ms"])
    return _line(
        "first_commit_after_reopen",
        args.history,
        "ms",
        best["ms"],
        min(r["ms"] for r in raw),
        median_ms=round(statistics.median(r["ms"] for r in ours), 3),
        open_ms=round(best["open_ms"], 3),
        peer_ms=PEER_REOPEN_MS,
        procs=args.procs,
        fs=fs,
    )


# --- gc ----------------------------------------------------------------------------------------------------


def _gc_case(args: argparse.Namespace) -> dict[str, Any]:
    """gc on a history of ``--gc-commits`` whose last 10% a hard reset abandoned (so gc removes their commits
    and blobs): each timed run on a fresh copy of the store, ``Tract.open`` excluded. Value: the best gc ms;
    baseline: a raw LMDB read of every object row of the same store (the scan gc cannot avoid)."""
    scratch = _Scratch(args.tmp)
    try:
        path = scratch.new()
        _build_history(path, args.gc_commits, args.batch, durable=False)
        with Tract.open(str(path)) as t:
            t.reset(f"HEAD~{max(1, args.gc_commits // 10)}", mode="hard")
        ours: list[float] = []
        raw: list[float] = []
        removed = 0
        for _ in range(args.repeat):
            copy = scratch.new()
            shutil.copytree(path, copy, dirs_exist_ok=True)
            with Tract.open(str(copy)) as t:
                gc.collect()
                start = time.perf_counter()
                removed = t.gc(min_age_hours=0).removed_objects
                ours.append((time.perf_counter() - start) * 1000)
            shutil.rmtree(copy, ignore_errors=True)
            env = _open_raw(path, sync=False, max_dbs=16)
            start = time.perf_counter()
            with env.begin() as txn:
                rows = sum(1 for _ in txn.cursor(db=env.open_db(b"objects", txn=txn)))
            raw.append((time.perf_counter() - start) * 1000)
            env.close()
        fs = _fs_type(scratch.root)
    finally:
        scratch.close()
    return _line(
        "gc",
        args.gc_commits,
        "ms",
        min(ours),
        min(raw),
        median_ms=round(statistics.median(ours), 3),
        objects=rows,
        removed_objects=removed,
        repeat=args.repeat,
        fs=fs,
    )


# --- a long history: compile, memory and the first commit after reopening --------------------------------


def _raw_env_like(path: Path, rows: int) -> None:
    """A raw LMDB environment holding ``rows`` rows of about an object's size (the raw reopen baseline)."""
    env = _open_raw(path, sync=False)
    rng = random.Random(f"{SEED}:raw-reopen")
    try:
        for first in range(0, rows, 10_000):
            with env.begin(write=True) as txn:
                for _ in range(first, min(first + 10_000, rows)):
                    txn.put(rng.randbytes(KEY_LEN), rng.randbytes(VALUE_LEN // 2))
        env.sync(True)
    finally:
        env.close()


def _long_history_cases(args: argparse.Namespace) -> list[dict[str, Any]]:
    """``compile_fresh_process_long``, ``peak_rss_reopen`` and ``first_commit_after_reopen_long`` on one
    ``--long-history``-commit branch, built once with ``durable=False`` in batches of 1,000 (the cases read
    it; building durably would only cost time) and closed (which writes its checkpoint)."""
    scratch = _Scratch(args.tmp)
    try:
        path, raw_path = scratch.new(), scratch.new()
        started = time.perf_counter()
        _build_history(path, args.long_history, 1000, durable=False)
        build_s = time.perf_counter() - started
        _raw_env_like(raw_path, args.long_history * 2)  # as many rows as the history's objects
        ours, raw = _compile_and_raw_read(path, args.procs)
        # baseline: import tractkv + a raw LMDB open of the same store (what any reader of it pays)
        imported = [
            _run_child(_RSS_OPEN_CHILD, str(path))["rss_kib"] for _ in range(max(1, min(3, args.procs)))
        ]
        reopen: list[dict[str, Any]] = []
        raw_reopen: list[dict[str, Any]] = []
        for index in range(args.procs):
            pairs = [(_REOPEN_CHILD, path, reopen), (_RAW_REOPEN_CHILD, raw_path, raw_reopen)]
            for code, where, out in pairs if index % 2 == 0 else reversed(pairs):
                out.append(_run_child(code, str(where)))
        store_mb = sum(f.stat().st_size for f in path.iterdir()) / 1e6
        fs = _fs_type(scratch.root)
    finally:
        scratch.close()
    n = args.long_history
    for result in ours:
        if result["messages"] != n:
            raise AssertionError(f"compiled {result['messages']} messages, expected {n}")
    for index, result in enumerate(reopen):
        if result["commits"] != n + index + 1:
            raise AssertionError("the reopened branch did not grow by one commit")
    best = min(ours, key=lambda r: r["ms"])
    baseline_ms = min(r["ms"] for r in raw)
    rss_mb = max(r["rss_kib"] for r in ours) * 1024 / 1e6
    import_mb = min(imported) * 1024 / 1e6
    first = min(reopen, key=lambda r: r["ms"] + r["open_ms"])
    return [
        _line(
            "compile_fresh_process_long",
            n,
            "ms",
            best["ms"],
            baseline_ms,
            median_ms=round(statistics.median(r["ms"] for r in ours), 3),
            baseline_median_ms=round(statistics.median(r["ms"] for r in raw), 3),
            open_ms=round(best["open_ms"], 3),
            procs=args.procs,
            build_s=round(build_s, 1),
            fs=fs,
        ),
        _line(
            "peak_rss_reopen",
            n,
            "MB",
            rss_mb,
            import_mb,
            delta_mb=round(rss_mb - import_mb, 1),
            bytes_per_commit=round((rss_mb - import_mb) * 1e6 / n),
            anon_mb=round(min(r["anon_kib"] for r in ours) * 1024 / 1e6, 1),
            file_mb=round(min(r["file_kib"] for r in ours) * 1024 / 1e6, 1),
            rss_after_close_mb=round(max(r["rss_after_close_kib"] for r in ours) * 1024 / 1e6, 1),
            store_file_mb=round(store_mb, 1),
        ),
        _line(
            "first_commit_after_reopen_long",
            n,
            "ms",
            first["ms"] + first["open_ms"],
            min(r["ms"] + r["open_ms"] for r in raw_reopen),
            commit_ms=round(first["ms"], 3),
            open_ms=round(first["open_ms"], 3),
            median_ms=round(statistics.median(r["ms"] + r["open_ms"] for r in reopen), 3),
            procs=args.procs,
            fs=fs,
        ),
    ]


# --- memory against history length ------------------------------------------------------------------

_RSS_OPEN_CHILD = _PEAK_RSS_FN + textwrap.dedent(
    """
    import json, sys
    import lmdb
    import tractkv
    env = lmdb.open(sys.argv[1], max_dbs=16, readonly=True, lock=False, readahead=False)
    refs = env.open_db(b"refs", create=False)
    with env.begin(db=refs) as txn:
        head = txn.get(b"HEAD")
    env.close()
    parts = rss_parts()
    print(json.dumps({"rss_kib": peak_kib(), "anon_kib": parts["RssAnon"], "file_kib": parts["RssFile"]}))
    """
)


_RENDER_ALL_CHILD = _PEAK_RSS_FN + textwrap.dedent(
    """
    import json, sys, time
    from tractkv import Tract


    def deep_size(root):
        # the bytes of the objects reachable from root, each counted once (what the output holds)
        seen, stack, total = set(), [root], 0
        while stack:
            obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            total += sys.getsizeof(obj)
            if isinstance(obj, dict):
                stack.extend(obj.keys())
                stack.extend(obj.values())
            elif isinstance(obj, (list, tuple, set, frozenset)):
                stack.extend(obj)
            elif not isinstance(obj, (str, bytes, int, float, bool, type(None))):
                for cls in type(obj).__mro__:
                    for name in getattr(cls, "__slots__", ()):
                        if hasattr(obj, name) and name != "__weakref__":
                            stack.append(getattr(obj, name))
                if hasattr(obj, "__dict__"):
                    stack.append(obj.__dict__)
        return total


    start = time.perf_counter()
    t = Tract.open(sys.argv[1])
    ctx = t.compile()
    messages = list(ctx.messages)  # every message rendered
    done = time.perf_counter()
    rss = peak_kib()
    parts = rss_parts()
    output_py = deep_size(messages)
    output_json = len(json.dumps(ctx.to_dicts()))
    count = len(messages)
    del ctx, messages
    t.close()
    print(json.dumps({"ms": (done - start) * 1000, "messages": count, "rss_kib": rss,
                      "anon_kib": parts["RssAnon"], "file_kib": parts["RssFile"],
                      "output_py_bytes": output_py, "output_json_bytes": output_json}))
    """
)

_RAW_READ_RSS_CHILD = _PEAK_RSS_FN + textwrap.dedent(
    """
    import json, sys
    import cbor2, lmdb
    import tractkv
    env = lmdb.open(sys.argv[1], readonly=True, lock=False, max_dbs=16, readahead=False)
    objects = env.open_db(b"objects", create=False)
    with env.begin(db=objects) as txn:
        for _, value in txn.cursor():
            cbor2.loads(value)
    env.close()
    parts = rss_parts()
    print(json.dumps({"rss_kib": peak_kib(), "anon_kib": parts["RssAnon"], "file_kib": parts["RssFile"]}))
    """
)


def _drop_cached(path: Path) -> bool:
    """Write ``path`` back and drop its pages from the page cache (this file's only; False where the OS
    cannot): the next process maps only the pages it reads, not the cached neighbours the kernel maps
    around each fault."""
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True


def _memory_growth_cases(args: argparse.Namespace) -> list[dict[str, Any]]:
    """``peak_rss_growth``: for each of ``--growth-sizes``, a branch of that many commits (built with
    ``durable=False`` in batches of 1,000 and closed: it has a checkpoint) opened and compiled by fresh
    interpreters (the ``compile_fresh_process`` child); value: the best peak RSS (VmHWM) in MB; baseline: a
    fresh interpreter that imports tractkv, opens the same store with raw LMDB and reads one ref.
    ``peak_rss_growth_per_commit``: the growth of both from the smallest size to the largest, in bytes per
    commit (value: tractkv's; baseline: the raw open's), with the anonymous (``anon_``: the process's own
    objects) and file-backed (``file_``: the LMDB map's pages the process touched) parts of it. ``cold_*``:
    one more child after the store's pages were dropped from the page cache (:func:`_drop_cached`), which
    then maps only what it reads (with a hot cache the kernel maps cached pages around each fault too)."""
    sizes = args.growth_sizes
    procs = max(1, min(3, args.procs))
    ours: dict[int, dict[str, Any]] = {}
    base: dict[int, dict[str, Any]] = {}
    cold: dict[int, dict[str, Any]] = {}
    rendered: dict[int, dict[str, Any]] = {}
    raw_read: dict[int, dict[str, Any]] = {}
    scratch = _Scratch(args.tmp)
    try:
        for size in sizes:
            path = scratch.new()
            _build_history(path, size, 1000, durable=False)
            runs: list[dict[str, Any]] = []
            raw: list[dict[str, Any]] = []
            for index in range(procs):
                pair = [(_COMPILE_CHILD, runs), (_RSS_OPEN_CHILD, raw)]
                for code, out in pair if index % 2 == 0 else reversed(pair):
                    out.append(_run_child(code, str(path)))
            for result in runs:
                if result["messages"] != size:
                    raise AssertionError(f"compiled {result['messages']} messages, expected {size}")
            ours[size] = min(runs, key=lambda r: r["rss_kib"])
            base[size] = min(raw, key=lambda r: r["rss_kib"])
            every = [_run_child(_RENDER_ALL_CHILD, str(path)) for _ in range(procs)]
            if any(r["messages"] != size for r in every):
                raise AssertionError(f"rendered {every[0]['messages']} messages, expected {size}")
            rendered[size] = min(every, key=lambda r: r["rss_kib"])
            raw_read[size] = min(
                (_run_child(_RAW_READ_RSS_CHILD, str(path)) for _ in range(procs)), key=lambda r: r["rss_kib"]
            )
            if _drop_cached(path / "data.mdb"):  # once more, the store's pages no longer in the page cache
                cold[size] = _run_child(_COMPILE_CHILD, str(path))
            shutil.rmtree(path, ignore_errors=True)
    finally:
        scratch.close()
    lines = []
    for size in sizes:
        mine, theirs = ours[size], base[size]
        lines.append(
            _line(
                "peak_rss_growth",
                size,
                "MB",
                mine["rss_kib"] * 1024 / 1e6,
                theirs["rss_kib"] * 1024 / 1e6,
                bytes_per_commit=round((mine["rss_kib"] - theirs["rss_kib"]) * 1024 / size),
                anon_mb=round(mine["anon_kib"] * 1024 / 1e6, 1),
                file_mb=round(mine["file_kib"] * 1024 / 1e6, 1),
                baseline_anon_mb=round(theirs["anon_kib"] * 1024 / 1e6, 1),
                baseline_file_mb=round(theirs["file_kib"] * 1024 / 1e6, 1),
                **(
                    {
                        "cold_mb": round(cold[size]["rss_kib"] * 1024 / 1e6, 1),
                        "cold_file_mb": round(cold[size]["file_kib"] * 1024 / 1e6, 1),
                    }
                    if size in cold
                    else {}
                ),
                rendered_mb=round(rendered[size]["rss_kib"] * 1024 / 1e6, 1),
                rendered_ms=round(rendered[size]["ms"], 1),
                raw_read_mb=round(raw_read[size]["rss_kib"] * 1024 / 1e6, 1),
                output_py_mb=round(rendered[size]["output_py_bytes"] / 1e6, 1),
                output_json_mb=round(rendered[size]["output_json_bytes"] / 1e6, 1),
                rendered_overhead_mb=round(_overhead(rendered[size], raw_read[size]) / 1e6, 1),
                procs=procs,
            )
        )
    small, large = sizes[0], sizes[-1]
    span = max(1, large - small)

    def per_commit(results: dict[int, dict[str, Any]], key: str) -> float:
        return (results[large][key] - results[small][key]) * 1024 / span

    def output_per_commit(key: str) -> float:
        return (rendered[large][key] - rendered[small][key]) / span

    overhead = (
        _overhead(rendered[large], raw_read[large]) - _overhead(rendered[small], raw_read[small])
    ) / span

    lines.append(
        _line(
            "peak_rss_growth_per_commit",
            large,
            "B",
            max(per_commit(ours, "rss_kib"), 0.1),
            max(per_commit(base, "rss_kib"), 0.1),
            baseline_n=small,
            anon_bytes_per_commit=round(per_commit(ours, "anon_kib"), 1),
            file_bytes_per_commit=round(per_commit(ours, "file_kib"), 1),
            **(
                {
                    "cold_bytes_per_commit": round(per_commit(cold, "rss_kib"), 1),
                    "cold_file_bytes_per_commit": round(per_commit(cold, "file_kib"), 1),
                }
                if small in cold and large in cold
                else {}
            ),
        )
    )
    lines.append(
        _line(
            "peak_rss_growth_rendered_per_commit",
            large,
            "B",
            max(overhead, 0.1),
            max(output_per_commit("output_py_bytes"), 0.1),
            baseline_n=small,
            rendered_bytes_per_commit=round(per_commit(rendered, "rss_kib"), 1),
            rendered_anon_bytes_per_commit=round(per_commit(rendered, "anon_kib"), 1),
            raw_read_bytes_per_commit=round(per_commit(raw_read, "rss_kib"), 1),
            output_json_bytes_per_commit=round(output_per_commit("output_json_bytes"), 1),
        )
    )
    return lines


def _overhead(rendered: dict[str, Any], raw_read: dict[str, Any]) -> float:
    """Bytes of a render-everything child's peak RSS beyond the raw read of the same store and its output."""
    return float((rendered["rss_kib"] - raw_read["rss_kib"]) * 1024 - rendered["output_py_bytes"])


# --- entry point ---------------------------------------------------------------------------------------


def _default_tmp() -> str:
    # /var/tmp is disk-backed by convention; /tmp may be a tmpfs where fsync costs nothing (see module doc).
    return "/var/tmp" if os.path.isdir("/var/tmp") else tempfile.gettempdir()


def _sizes(text: str) -> list[int]:
    sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError("sizes are positive integers separated by commas")
    return sizes


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--commits", type=int, default=2000, help="commits in durable_append (default 2000)")
    parser.add_argument(
        "--batched-commits", type=int, default=20000, help="commits in batched_append (default 20000)"
    )
    parser.add_argument(
        "--flat-commits", type=int, default=100000, help="commits in batched_append_flatness (default 100000)"
    )
    parser.add_argument(
        "--size-commits",
        type=_sizes,
        default=[10000, 100000],
        help="bytes_per_commit sizes, one line each (10000,100000)",
    )
    parser.add_argument("--batch", type=int, default=1000, help="commits per batch (default 1000)")
    parser.add_argument(
        "--gc-commits", type=int, default=100000, help="commits of the gc case's history (default 100000)"
    )
    parser.add_argument(
        "--growth-sizes",
        type=_sizes,
        default=[10000, 50000, 100000],
        help="memory_growth history sizes, fresh processes each (10000,50000,100000)",
    )
    parser.add_argument(
        "--history", type=int, default=10000, help="commits of the reopened/compiled history (default 10000)"
    )
    parser.add_argument(
        "--long-history",
        type=int,
        default=100000,
        help="commits of the long history (compile / memory / reopen cases; default 100000)",
    )
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=[1000, 10000, 100000],
        help="compile_after_append sizes (1000,10000,100000)",
    )
    parser.add_argument("--appends", type=int, default=200, help="appends per size in compile_after_append")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per side, best kept (default 3)")
    parser.add_argument("--procs", type=int, default=5, help="fresh interpreters per side (default 5)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test); figures mean nothing")
    parser.add_argument("--tmp", default=_default_tmp(), help="directory for scratch stores (disk-backed)")
    parser.add_argument("--case", action="append", choices=CASES, help="run only this case (repeatable)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a case misses its target")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the selected cases, printing one JSON line per result; 0, or 1 with ``--check`` and a miss."""
    args = _parser().parse_args(argv)
    if args.quick:
        args.commits, args.batched_commits, args.batch, args.history = 20, 60, 20, 60
        args.flat_commits, args.size_commits = 200, [60]
        args.long_history = 120
        args.gc_commits = 60
        args.growth_sizes = [30, 90]
        args.sizes, args.appends, args.repeat, args.procs = [20, 60], 5, 1, 1
    args.repeat, args.procs = max(1, args.repeat), max(1, args.procs)
    fs = _fs_type(Path(args.tmp))
    print(f"bench_engine: scratch in {args.tmp} ({fs})", file=sys.stderr)
    if fs in MEMORY_FS:
        print(
            f"bench_engine: WARNING {args.tmp} is {fs}: fsync is free, durable figures mean nothing",
            file=sys.stderr,
        )
    runners: dict[str, Callable[[], list[dict[str, Any]]]] = {
        "durable_append": lambda: [_append_case("durable_append", args.commits, 1, args)],
        "batched_append": lambda: [_append_case("batched_append", args.batched_commits, args.batch, args)],
        "batched_append_flatness": lambda: [_flatness_case(args)],
        "bytes_per_commit": lambda: [_bytes_per_commit_case(args, n) for n in args.size_commits],
        "compile_fresh_process": lambda: _fresh_compile_cases(args),
        "compile_after_append": lambda: _compile_after_append_cases(args),
        "peak_rss": lambda: [_peak_rss_case(args)],
        "first_commit_after_reopen": lambda: [_reopen_case(args)],
        "long_history": lambda: _long_history_cases(args),
        "memory_growth": lambda: _memory_growth_cases(args),
        "gc": lambda: [_gc_case(args)],
    }
    missed = False
    for case in args.case or CASES:
        for result in runners[case]():
            missed = missed or result["ok"] is False
            print(json.dumps(result), flush=True)
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
