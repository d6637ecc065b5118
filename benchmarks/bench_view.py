"""Viewer benchmarks: page latency on a long session against the library calls that compute the same data,
and how long a change takes to reach a browser's event stream.

Run: ``python benchmarks/bench_view.py [--commits N] [--tool-turns K] [--repeat R] [--samples S] [--tmp DIR]``.
Each case prints one JSON line to stdout; notices go to stderr.

The session is ``--commits`` messages (default 10,000, alternating user / assistant, ~100 characters) plus
``--tool-turns`` agent turns (default 200) whose tool runs two nested tools, one of which fails. Pages are
requested in process through Starlette's test client (no network: this measures the viewer, not HTTP).

Cases (``ratio`` = baseline time / page time, so 1.0 means the page costs no more than the query behind it;
medians over ``--repeat``):

* ``view_branches``: ``/ui/`` from a fresh viewer (compile states loaded from checkpoints) vs a fresh
  ``Tract.open(...).status()``. Target: ratio >= 0.5 (rendering at most doubles the cost). ``empty_page_ms``:
  an empty page (``/favicon.ico``, 204, no store read) fetched the same way (fresh store, app and test client):
  the fixed cost of the harness and the app; ``ratio_beyond_fixed`` = baseline / (page - empty page).
* ``view_graph_first`` / ``view_graph_last``: the newest and the oldest page of 100 commits vs
  ``Tract.log(limit=100)`` / the whole ``Tract.log()`` (an old page walks the history before it).
  Target: ratio >= 0.5. ``empty_page_ms``: ``/favicon.ico`` through the same client (the in-process HTTP
  round trip and one worker-thread hop, as a page makes).
* ``view_commit_tip``: the tip's commit page (the whole context compiled, its last 200 messages rendered)
  from a fresh viewer vs a fresh ``compile(at=tip).to_openai_params()``. Target: ratio >= 0.5.
* ``view_usage``: ``/ui/usage`` (stats + the newest 50 message groups) vs ``tool_usages()`` +
  ``tool_usage_stats()``. Target: ratio >= 0.5.
* ``spawn_relations``: ``children()`` + ``parent()`` of the benchmark's branch (a collapsed child near the root,
  an open one at the tip) from a fresh read-only handle, against the same walks reading every commit
  (relation rows ignored: what they cost before rows). Target: ratio >= 10 (the rows bound the walk by the
  commits since the last checkpoint, not by the history).
* ``live_event``: a real ``tractkv view`` process on 127.0.0.1; a client holds ``/ui/events`` open; the time
  from a commit landing (in this process) to its ``change`` event arriving, ``--samples`` times. Baseline:
  the poll interval. Target: p95 <= 0.5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from tractkv import Tract, toolkit  # noqa: E402
from tractkv.ids import ObjectId  # noqa: E402
from tractkv.llm import ScriptedLLM  # noqa: E402
from tractkv.store import LmdbStore  # noqa: E402
from tractkv.toolkit import ToolContext, ToolExecutor, tool  # noqa: E402
from tractkv.view.app import POLL_INTERVAL, create_app  # noqa: E402

SMOKE_ARGS = ["--commits", "60", "--tool-turns", "3", "--repeat", "1", "--samples", "2"]
PAGE_RATIO = 0.5
LIVE_P95_S = 0.5


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


@tool
def probe(key: str, *, context: ToolContext) -> str:
    """Probe a key (fails on odd keys)."""
    if int(key) % 2:
        raise ValueError(f"odd key {key}")
    return f"value of {key}"


@tool
def survey(n: int, *, context: ToolContext) -> str:
    """Probe two keys."""
    return "; ".join(context.execute("probe", {"key": str(k)}).output for k in (n, n + 1))


def build(path: Path, commits: int, tool_turns: int) -> None:
    with Tract.open(str(path), durable=False) as t:
        t.system("A long session for the viewer benchmark.")
        with t.spawn("an early sub-task", inherit="none") as child:
            child.user("the sub-task's work")
        t.collapse("main.spawn/an-early-sub-task", content="the sub-task's answer")
        per_turn = max(1, commits // max(1, tool_turns + 1))
        ex = ToolExecutor(t, profile=None, tools=[survey, probe])
        made = 0
        turn = 0
        while made < commits:
            with t.batch():
                for _ in range(min(per_turn, commits - made)):
                    if made % 2 == 0:
                        t.user(f"question {made}: " + "how does the store keep this message? " * 2)
                    else:
                        t.assistant(f"answer {made}: " + "it hashes it and keeps it in LMDB. " * 2)
                    made += 1
            if turn < tool_turns:
                call = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"call-{turn}",
                            "type": "function",
                            "function": {"name": "survey", "arguments": json.dumps({"n": turn})},
                        }
                    ],
                }
                toolkit.run(t, ScriptedLLM([call, "surveyed"]), ex)
                turn += 1
        with t.spawn("a late sub-task", inherit="full") as child:
            child.user("still open")


def timed(func: Callable[[], Any]) -> float:
    start = time.perf_counter()
    func()
    return (time.perf_counter() - start) * 1000


def median_ms(repeat: int, func: Callable[[], Any]) -> float:
    return statistics.median(timed(func) for _ in range(repeat))


def page_case(case: str, n: int, page_ms: float, baseline_ms: float, **extra: Any) -> None:
    ratio = baseline_ms / page_ms if page_ms else None
    emit(
        case=case,
        n=n,
        unit="ms",
        tractkv_ms=round(page_ms, 2),
        baseline_ms=round(baseline_ms, 2),
        ratio=round(ratio, 3) if ratio is not None else None,
        target=f"ratio >= {PAGE_RATIO}",
        ok=ratio is not None and ratio >= PAGE_RATIO,
        **extra,
    )


def run_pages(path: Path, commits: int, repeat: int) -> None:
    with Tract.open(str(path)) as t:
        tip = t.head
        total = len(t.log())

    def fresh_client() -> tuple[TestClient, LmdbStore]:
        st = LmdbStore(path)
        app, _ = create_app(st, sync=False)
        return TestClient(app, base_url="http://127.0.0.1"), st

    def cold_page(url: str, status: int = 200) -> Callable[[], None]:
        def fetch() -> None:
            client, st = fresh_client()
            try:
                response = client.get(url)
                assert response.status_code == status, response.text[:200]
            finally:
                client.close()
                st.close()

        return fetch

    def cold_tract(work: Callable[[Tract], Any]) -> Callable[[], None]:
        def call() -> None:
            with Tract.open(str(path)) as t:
                work(t)

        return call

    branches_ms = median_ms(repeat, cold_page("/ui/"))
    status_ms = median_ms(repeat, cold_tract(lambda t: t.status()))
    empty_ms = median_ms(repeat, cold_page("/favicon.ico", 204))
    page_case(
        "view_branches",
        total,
        branches_ms,
        status_ms,
        empty_page_ms=round(empty_ms, 2),
        ratio_beyond_fixed=round(status_ms / (branches_ms - empty_ms), 3) if branches_ms > empty_ms else None,
    )
    page_case(
        "view_commit_tip",
        total,
        median_ms(repeat, cold_page(f"/ui/commit/{tip}")),
        median_ms(repeat, cold_tract(lambda t: t.compile(at=tip).to_openai_params())),
    )
    client, st = fresh_client()
    with Tract.open(str(path)) as t:
        client.get("/ui/log")  # warm both sides the same way: one read of the history first
        t.log(limit=100)
        page_case(
            "view_graph_first",
            total,
            median_ms(repeat, lambda: client.get("/ui/log")),
            median_ms(repeat, lambda: t.log(limit=100)),
            empty_page_ms=round(median_ms(repeat, lambda: client.get("/favicon.ico")), 2),
        )
        last = max(0, total - 100)
        page_case(
            "view_graph_last",
            total,
            median_ms(repeat, lambda: client.get(f"/ui/log?start={last}")),
            median_ms(repeat, t.log),
        )
        usages = len(t.tool_usages())
        page_case(
            "view_usage",
            total,
            median_ms(repeat, lambda: client.get("/ui/usage")),
            median_ms(repeat, lambda: (t.tool_usages(), t.tool_usage_stats())),
            usages=usages,
        )
    client.close()
    st.close()
    run_relations(path, total, repeat)


def run_relations(path: Path, total: int, repeat: int) -> None:
    from tractkv.engine.compile import SpawnIndex
    from tractkv.engine.spawning import children_of, parent_at

    def relations(rows: bool) -> Callable[[], None]:
        def call() -> None:
            st = LmdbStore(path)
            try:
                with st.snapshot() as reader:
                    tip = reader.get_ref("refs/heads/main")
                    assert tip is not None
                    index = SpawnIndex(reader, rows=rows)
                    parent_at(reader, ObjectId(tip), index)
                    kids = children_of(reader, ObjectId(tip), "main", index)
                    assert [k.state for k in kids] == ["collapsed", "open"], kids
            finally:
                st.close()

        return call

    with_rows = median_ms(repeat, relations(True))
    walked = median_ms(max(1, repeat // 2), relations(False))
    ratio = walked / with_rows if with_rows else None
    emit(
        case="spawn_relations",
        n=total,
        unit="ms",
        tractkv_ms=round(with_rows, 2),
        baseline_ms=round(walked, 2),
        ratio=round(ratio, 1) if ratio is not None else None,
        target="ratio >= 10 (the walk of every commit / the walk with relation rows)",
        ok=ratio is not None and ratio >= 10,
    )


def run_live(path: Path, samples: int) -> None:
    cmd = [sys.executable, "-m", "tractkv", "--store", str(path), "view", "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        arrived: list[float] = []
        ready = threading.Event()
        done = threading.Event()
        got = threading.Condition()

        def listen() -> None:
            with httpx.Client(timeout=30) as client, client.stream("GET", url + "events") as response:
                for line in response.iter_lines():
                    if line.startswith("retry:"):
                        ready.set()
                    if line.startswith("event: change"):
                        with got:
                            arrived.append(time.perf_counter())
                            got.notify_all()
                    if done.is_set():
                        return

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        assert ready.wait(30), "the event stream did not open"
        time.sleep(POLL_INTERVAL * 2)  # the feed's first look at the store
        latencies = []
        with Tract.open(str(path), durable=False) as t:
            for i in range(samples):
                seen = len(arrived)
                t.user(f"live sample {i}")
                landed = time.perf_counter()
                with got:
                    assert got.wait_for(lambda s=seen: len(arrived) > s, timeout=30), "no event arrived"  # type: ignore[misc]
                    latencies.append(arrived[seen] - landed)
                time.sleep(POLL_INTERVAL * 1.5)  # let each sample start at a random phase of the poll
        done.set()
        latencies.sort()
        p95 = latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))]
        emit(
            case="live_event",
            n=samples,
            unit="ms",
            tractkv_ms=round(p95 * 1000, 1),
            baseline_ms=round(POLL_INTERVAL * 1000, 1),
            p50_ms=round(statistics.median(latencies) * 1000, 1),
            ratio=round(POLL_INTERVAL / p95, 3),
            target=f"p95 <= {LIVE_P95_S * 1000:.0f} ms",
            ok=p95 <= LIVE_P95_S,
        )
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--tool-turns", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--tmp", default=os.environ.get("TMPDIR", "/tmp"))
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="bench-view-", dir=args.tmp))
    try:
        path = scratch / "session"
        note(f"building {args.commits} commits + {args.tool_turns} tool turns")
        build(path, args.commits, args.tool_turns)
        run_pages(path, args.commits, args.repeat)
        run_live(path, args.samples)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
