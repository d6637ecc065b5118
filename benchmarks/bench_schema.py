"""Tool-argument validation: microseconds per ``tractkv.toolkit.schema.validate`` call, against jsonschema's
``Draft202012Validator`` (built once, with the format checker; the test group installs it, tractkv never
depends on it) on the same schema and arguments.

Cases: ``schema_validate_core`` (a booking tool: ``$defs`` / ``$ref``, ``pattern``, ``format``,
``multipleOf``, ``oneOf``, ``prefixItems``, ``uniqueItems``; the keywords validated before issue 33) and
``schema_validate_applicators`` (``propertyNames``, ``patternProperties``, ``if`` / ``then`` / ``else``,
``contains``, ``dependentRequired``, ``dependentSchemas``, ``unevaluatedProperties``, ``hostname``), each
for arguments that conform (``valid``) and for arguments breaking every rule (``invalid``: tractkv lists
every problem, the baseline too, with ``iter_errors``). The time is the least of ``--repeat`` runs of ``--n``
calls. Target: no slower than jsonschema (``ratio`` = tractkv / jsonschema <= 1).

    python benchmarks/bench_schema.py [--n 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from tractkv.toolkit.schema import validate

SMOKE_ARGS = ["--n", "5", "--repeat", "1"]

CORE: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "Place": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 1},
                "country": {"type": "string", "pattern": "^[A-Z]{2}$"},
            },
            "required": ["city", "country"],
            "additionalProperties": False,
        },
    },
    "properties": {
        "place": {"$ref": "#/$defs/Place"},
        "start": {"type": "string", "format": "date"},
        "nights": {"type": "integer", "minimum": 1},
        "budget": {"type": "number", "multipleOf": 0.5, "exclusiveMinimum": 0},
        "units": {"enum": ["C", "F"]},
        "contact": {
            "oneOf": [
                {
                    "properties": {"kind": {"const": "email"}, "to": {"format": "email"}},
                    "required": ["kind", "to"],
                },
                {
                    "properties": {"kind": {"const": "ip"}, "to": {"format": "ipv4"}},
                    "required": ["kind", "to"],
                },
            ]
        },
        "tags": {
            "type": "array",
            "prefixItems": [{"const": "trip"}],
            "items": {"type": "string"},
            "uniqueItems": True,
        },
    },
    "required": ["place", "start", "nights"],
}
CORE_VALID = {
    "place": {"city": "Oslo", "country": "NO"},
    "start": "2024-02-29",
    "nights": 2,
    "budget": 150.5,
    "units": "C",
    "contact": {"kind": "email", "to": "a@b.no"},
    "tags": ["trip", "ski", "sauna"],
}
CORE_INVALID = {
    "place": {"city": "", "country": "Norway", "zip": "0150"},
    "start": "2023-02-29",
    "nights": 0,
    "budget": 150.25,
    "units": "K",
    "contact": {"kind": "ip", "to": "a@b.no"},
    "tags": ["trip", "ski", "ski"],
}

APPLICATORS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "scores": {
            "type": "object",
            "propertyNames": {"type": "string", "pattern": "^[a-z]+$"},
            "additionalProperties": {"type": "number"},
        },
        "headers": {
            "type": "object",
            "patternProperties": {"^x-": {"type": "string"}},
            "additionalProperties": False,
        },
        "target": {
            "type": "object",
            "properties": {"kind": {"enum": ["host", "ip"]}, "value": {"type": "string"}},
            "required": ["kind", "value"],
            "if": {"properties": {"kind": {"const": "host"}}},
            "then": {"properties": {"value": {"format": "hostname"}}},
            "else": {"properties": {"value": {"format": "ipv4"}}},
        },
        "steps": {"type": "array", "contains": {"const": "deploy"}, "maxContains": 1},
        "auth": {
            "type": "object",
            "properties": {"user": {"type": "string"}, "password": {"type": "string"}},
            "dependentRequired": {"user": ["password"]},
        },
        "options": {
            "type": "object",
            "allOf": [{"properties": {"verbose": {"type": "boolean"}}}],
            "anyOf": [
                {"properties": {"level": {"type": "integer"}}},
                {"properties": {"level": {"type": "string"}}},
            ],
            "dependentSchemas": {"dry": {"properties": {"dry": {"const": True}}}},
            "unevaluatedProperties": False,
        },
    },
}
APPLICATORS_VALID = {
    "scores": {"alice": 1, "bob": 2.5, "carol": 3},
    "headers": {"x-trace": "1", "x-user": "u"},
    "target": {"kind": "host", "value": "api.example.com"},
    "steps": ["build", "test", "deploy"],
    "auth": {"user": "u", "password": "p"},
    "options": {"verbose": True, "level": 2, "dry": True},
}
APPLICATORS_INVALID = {
    "scores": {"alice": 1, "Bob": 2, "carol": "x"},
    "headers": {"x-trace": 1, "accept": "*/*"},
    "target": {"kind": "ip", "value": "api.example.com"},
    "steps": ["deploy", "test", "deploy"],
    "auth": {"user": "u"},
    "options": {"verbose": True, "dry": False, "color": "red"},
}

CASES = {
    "schema_validate_core": (CORE, CORE_VALID, CORE_INVALID),
    "schema_validate_applicators": (APPLICATORS, APPLICATORS_VALID, APPLICATORS_INVALID),
}


def best_us(call: Callable[[], object], n: int, repeat: int) -> float:
    """Microseconds per call: the least of ``repeat`` runs of ``n`` calls."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(n):
            call()
        best = min(best, time.perf_counter() - start)
    return best / n * 1e6


def baseline(schema: dict[str, Any]) -> Callable[[Any], object] | None:
    """jsonschema's validator for ``schema`` (every error, as tractkv lists them), or None without it."""
    try:
        import jsonschema
    except ImportError:
        return None
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    return lambda value: list(validator.iter_errors(value))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    parser.add_argument("--tmp", default=None)  # unused: nothing is written (the smoke test passes it)
    args = parser.parse_args(argv)
    for case in args.case or list(CASES):
        schema, good, bad = CASES[case]
        other = baseline(schema)
        for kind, value in (("valid", good), ("invalid", bad)):
            ours = best_us(lambda v=value, s=schema: validate(v, s, "arguments"), args.n, args.repeat)
            theirs = (
                best_us(lambda v=value, o=other: o(v), args.n, args.repeat) if other is not None else None
            )
            ratio = round(ours / theirs, 3) if theirs else None
            row = {
                "case": case,
                "arguments": kind,
                "n": args.n,
                "unit": "us",
                "tractkv_us": round(ours, 2),
                "baseline_us": round(theirs, 2) if theirs is not None else None,
                "baseline": "jsonschema Draft202012Validator" if other is not None else None,
                "ratio": ratio,
                "target": "<= 1.0 (no slower than jsonschema)",
                "ok": ratio <= 1.0 if ratio is not None else None,
            }
            print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
