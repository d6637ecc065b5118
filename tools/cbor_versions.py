"""Compare cbor2 releases for tractkv's canonical encoding (speed and correctness).

Run it once per interpreter that has the cbor2 version under test installed::

    python tools/cbor_versions.py          # prints one JSON line

The library never imports this file. The result picked the pin in pyproject.toml
(see docs/decisions.md, "Canonical encoding: the cbor2 pin").
"""

from __future__ import annotations

import json
import math
import sys
import time
from importlib.metadata import version

import cbor2


def _sample_commit() -> dict[str, object]:
    return {
        "t": "commit",
        "v": 1,
        "parents": [bytes(range(32))],
        "content": bytes(range(1, 33)),
        "op": "append",
        "message": "user turn 17",
        "meta": {"source": "agent", "turn": 17, "scores": [0.25, 1.5, -0.0], "ok": True},
        "gen": {"model": "m", "temperature": 0.7, "max_tokens": 512},
        "ts": 1_780_000_000_000_000,
    }


def _sample_blob() -> dict[str, object]:
    return {
        "t": "blob",
        "v": 1,
        "data": {
            "type": "dialogue",
            "role": "assistant",
            "text": "lorem ipsum dolor sit amet " * 8,
            "nested": {"z": [1, 2, {"b": 1, "a": 2}], "a": None},
        },
    }


def _checks() -> dict[str, bool]:
    enc = lambda v: cbor2.dumps(v, canonical=True)  # noqa: E731
    return {
        "key_order_independent": enc({"b": 1, "a": 2, "aa": 3}) == enc({"aa": 3, "a": 2, "b": 1}),
        "shortest_float": enc(1.5) == bytes.fromhex("f93e00"),
        "neg_zero_distinct": enc(-0.0) != enc(0.0),
        "nan_collapsed": enc(math.nan) == bytes.fromhex("f97e00"),
        "int_float_distinct": enc(1) != enc(1.0),
        "roundtrip": cbor2.loads(enc(_sample_blob())) == _sample_blob(),
    }


def _has_c_extension() -> bool:
    try:
        import _cbor2  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return cbor2.dumps.__module__ != "cbor2._encoder"
    return True


def _nested_tools() -> dict[str, object]:
    prop = {"type": "string", "description": "the path of the file to read, relative to the root"}
    return {
        "t": "tool",
        "v": 1,
        "schema": {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file",
                "parameters": {
                    "type": "object",
                    "properties": {f"arg{i}": dict(prop) for i in range(12)},
                    "required": [f"arg{i}" for i in range(6)],
                },
            },
        },
    }


def main() -> None:
    objs = [_sample_commit(), _sample_blob(), _nested_tools()]
    n = 20_000
    best = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            for o in objs:
                cbor2.dumps(o, canonical=True)
        best = min(best, time.perf_counter() - t0)
    enc_blob = cbor2.dumps(_sample_blob(), canonical=True)
    best_dec = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            cbor2.loads(enc_blob)
        best_dec = min(best_dec, time.perf_counter() - t0)
    print(
        json.dumps(
            {
                "cbor2": version("cbor2"),
                "c_extension": _has_c_extension(),
                "python": sys.version.split()[0],
                "encode_triples_per_s": round(n / best),
                "decode_blobs_per_s": round(n / best_dec),
                "checks": _checks(),
            }
        )
    )


if __name__ == "__main__":
    main()
