"""tractkv.toolkit.schema against jsonschema (Draft 2020-12, a format checker for exactly the supported formats):
a fixed table of the tricky cases, and a hypothesis differential test over random schemas built from exactly
the supported keywords (nested, with ``$defs`` / ``$ref`` and recursion) and random or schema-derived values.

``TRACTKV_SCHEMA_EXAMPLES`` sets how many examples the differential test runs (the suite's default keeps it
to a few seconds; run it with 50000 to hunt for disagreements).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from jsonschema._utils import equal as jsonschema_equal
from jsonschema.exceptions import ValidationError

from tractkv.toolkit.schema import ANNOTATION_FORMATS, FORMATS, JSON_TYPES, _resolve, _SchemaCheck, validate

# Draft 2020-12's own checker (FormatChecker()'s class-wide table has draft 3's "time", HH:MM:SS), restricted
# to the formats schema.py checks: the annotation formats have no checker in jsonschema at all
DRAFT_CHECKERS = jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers
CHECKER = jsonschema.FormatChecker(formats=())
CHECKER.checkers = {name: DRAFT_CHECKERS[name] for name in FORMATS}
ALL_FORMATS = sorted(FORMATS) + sorted(ANNOTATION_FORMATS)

DIFFERENTIAL = settings(
    max_examples=int(os.environ.get("TRACTKV_SCHEMA_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """jsonschema's ``uniqueItems`` compared pairwise with jsonschema's own JSON equality. Its own check
    sorts the items and compares neighbours only, so it misses ``[[1], [true], [1]]`` (``[1]`` and
    ``[true]`` sort as equal in Python and keep their order): see the last tricky case."""
    if unique and validator.is_type(instance, "array"):
        for i, first in enumerate(instance):
            if any(jsonschema_equal(first, later) for later in instance[i + 1 :]):
                yield ValidationError(f"{instance!r} has non-unique elements")
                return


Reference = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"uniqueItems": _unique_items})


def jsonschema_verdict(value: Any, schema: Any) -> bool:
    return bool(Reference(schema, format_checker=CHECKER).is_valid(value))


def test_jsonschema_misses_some_repeated_arrays_and_the_reference_does_not() -> None:
    repeated = [[1], [True], [1]]  # items 0 and 2 are equal
    assert jsonschema.Draft202012Validator({"uniqueItems": True}).is_valid(
        repeated
    )  # jsonschema 4.26's defect
    assert not jsonschema_verdict(repeated, {"uniqueItems": True})
    assert validate(repeated, {"uniqueItems": True}) == ["$: items 0 and 2 are equal (items must be unique)"]
    assert jsonschema_verdict([[1], [True]], {"uniqueItems": True})


def test_the_reference_checks_every_supported_format_and_no_annotation_format() -> None:
    # date-time / time, duration, uri / uri-reference need the test group's rfc3339-validator, isoduration,
    # rfc3986-validator (jsonschema[format-nongpl]'s): without them jsonschema would skip those formats
    assert set(FORMATS) <= set(DRAFT_CHECKERS)
    assert set(CHECKER.checkers) == set(FORMATS)
    assert not ANNOTATION_FORMATS & set(DRAFT_CHECKERS)  # jsonschema never checks binary, password, ...
    assert not ANNOTATION_FORMATS & set(jsonschema.FormatChecker().checkers)


TREE = {
    "type": "object",
    "properties": {"root": {"$ref": "#/$defs/node"}},
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["value"],
            "additionalProperties": False,
        }
    },
}

TRICKY: list[tuple[str, Any, Any]] = [
    # multipleOf in floating point, as jsonschema divides
    ("float multipleOf 0.1 of 0.3", {"multipleOf": 0.1}, 0.3),
    ("float multipleOf 0.1 of 0.5", {"multipleOf": 0.1}, 0.5),
    ("float multipleOf 0.01 of 0.07", {"multipleOf": 0.01}, 0.07),
    ("float multipleOf 0.5 of 1.5", {"multipleOf": 0.5}, 1.5),
    ("float multipleOf 0.25 of 0.75", {"multipleOf": 0.25}, 0.75),
    ("int multipleOf of a float", {"multipleOf": 2}, 4.0),
    ("int multipleOf of a fraction", {"multipleOf": 2}, 4.5),
    ("integral float divisor", {"multipleOf": 2.0}, 7),
    ("huge quotient", {"multipleOf": 1e-300}, 1e300),
    ("multipleOf ignores strings", {"multipleOf": 3}, "4"),
    # integers and numbers
    ("1.0 is an integer", {"type": "integer"}, 1.0),
    ("1.5 is no integer", {"type": "integer"}, 1.5),
    ("true is no integer", {"type": "integer"}, True),
    ("true is no number", {"type": "number"}, True),
    ("false is no null", {"type": "null"}, False),
    ("a list of types", {"type": ["string", "null"]}, None),
    ("exclusive bounds", {"exclusiveMinimum": 1, "exclusiveMaximum": 2}, 1),
    ("exclusive bounds inside", {"exclusiveMinimum": 1, "exclusiveMaximum": 2}, 1.5),
    ("bounds ignore strings", {"minimum": 3}, "1"),
    # JSON equality
    ("enum: true is not 1", {"enum": [1]}, True),
    ("enum: 1 is not true", {"enum": [True]}, 1),
    ("enum: 1.0 is 1", {"enum": [1]}, 1.0),
    ("enum: 0 is not false", {"enum": [False, "x"]}, 0),
    ("enum of lists", {"enum": [[1, True]]}, [1.0, True]),
    ("enum of lists, true vs 1", {"enum": [[1, True]]}, [True, 1]),
    ("const object", {"const": {"a": [1]}}, {"a": [1.0]}),
    ("const object, bool", {"const": {"a": [1]}}, {"a": [True]}),
    ("const null", {"const": None}, False),
    ("uniqueItems 1 and 1.0", {"uniqueItems": True}, [1, 1.0]),
    ("uniqueItems 1 and true", {"uniqueItems": True}, [1, True]),
    ("uniqueItems 0 and false", {"uniqueItems": True}, [0, False, None]),
    ("uniqueItems objects", {"uniqueItems": True}, [{"a": 1, "b": 2}, {"b": 2, "a": 1.0}]),
    ("uniqueItems nested bools", {"uniqueItems": True}, [[1], [True]]),
    ("uniqueItems false allows repeats", {"uniqueItems": False}, [1, 1]),
    ("uniqueItems repeated arrays apart", {"uniqueItems": True}, [[1], [True], [1]]),
    # strings count code points
    ("astral string minLength", {"minLength": 2}, "😀"),
    ("astral string maxLength", {"maxLength": 1}, "😀"),
    ("combining marks count", {"maxLength": 1}, "é"),
    ("pattern is unanchored", {"pattern": "b"}, "abc"),
    ("pattern anchored", {"pattern": "^b"}, "abc"),
    ("pattern astral", {"pattern": "^.$"}, "😀"),
    ("pattern ignores numbers", {"pattern": "^a"}, 3),
    # formats
    ("date leap day", {"format": "date"}, "2024-02-29"),
    ("date no leap day", {"format": "date"}, "2023-02-29"),
    ("date short", {"format": "date"}, "2024-2-01"),
    ("date with a newline", {"format": "date"}, "2024-02-01\n"),
    ("date in other digits", {"format": "date"}, "\uff12\uff10\uff12\uff14-02-01"),
    ("email", {"format": "email"}, "a@b"),
    ("no email", {"format": "email"}, "ab"),
    ("ipv4", {"format": "ipv4"}, "127.0.0.1"),
    ("ipv4 leading zero", {"format": "ipv4"}, "127.0.0.01"),
    ("ipv6", {"format": "ipv6"}, "::1"),
    ("ipv6 with a zone", {"format": "ipv6"}, "fe80::1%eth0"),
    ("uuid", {"format": "uuid"}, "12345678-1234-1234-1234-123456789abc"),
    ("uuid without hyphens", {"format": "uuid"}, "12345678123456781234567812345678"),
    ("uuid in braces", {"format": "uuid"}, "{12345678-1234-1234-1234-123456789abc}"),
    ("regex", {"format": "regex"}, "^a+$"),
    ("no regex", {"format": "regex"}, "[a-"),
    ("format ignores numbers", {"format": "ipv4"}, 12),
    ("date-time", {"format": "date-time"}, "2024-05-01T12:30:00Z"),
    ("date-time lowercase t and z", {"format": "date-time"}, "2024-05-01t12:30:00z"),
    ("date-time offset", {"format": "date-time"}, "2024-05-01T12:30:00+05:30"),
    ("date-time fraction", {"format": "date-time"}, "2024-05-01T12:30:00.123456789-00:00"),
    ("date-time without an offset", {"format": "date-time"}, "2024-05-01T12:30:00"),
    ("date-time leap second", {"format": "date-time"}, "2016-12-31T23:59:60Z"),
    ("date-time no leap day", {"format": "date-time"}, "2023-02-29T00:00:00Z"),
    ("date-time year 0", {"format": "date-time"}, "0000-01-01T00:00:00Z"),
    ("date-time with a space", {"format": "date-time"}, "2024-05-01 12:30:00Z"),
    ("date-time offset hour 24", {"format": "date-time"}, "2024-05-01T12:30:00+24:00"),
    ("date-time offset without a colon", {"format": "date-time"}, "2024-05-01T12:30:00+0200"),
    ("date-time empty fraction", {"format": "date-time"}, "2024-05-01T12:30:00.Z"),
    ("date-time with a newline", {"format": "date-time"}, "2024-05-01T12:30:00Z\n"),
    ("time", {"format": "time"}, "12:30:00Z"),
    ("time offset and fraction", {"format": "time"}, "23:59:59.5+02:00"),
    ("time lowercase z", {"format": "time"}, "12:30:00z"),
    ("time without an offset", {"format": "time"}, "12:30:00"),
    ("time leap second", {"format": "time"}, "23:59:60Z"),
    ("time hour 24", {"format": "time"}, "24:00:00Z"),
    ("time without seconds", {"format": "time"}, "12:30Z"),
    ("duration week", {"format": "duration"}, "P1W"),
    ("duration zero seconds", {"format": "duration"}, "PT0S"),
    ("duration years and months", {"format": "duration"}, "P1Y2M"),
    ("duration all", {"format": "duration"}, "P1Y2M3DT4H5M6.5S"),
    ("duration negative", {"format": "duration"}, "-P1D"),
    ("duration empty", {"format": "duration"}, "P"),
    ("duration empty time", {"format": "duration"}, "PT"),
    ("duration empty time after days", {"format": "duration"}, "P1DT"),
    ("duration no designator", {"format": "duration"}, "P1"),
    ("duration out of order", {"format": "duration"}, "P1D1Y"),
    ("duration week with days", {"format": "duration"}, "P1D1W"),
    ("duration minutes without T", {"format": "duration"}, "P5M"),
    ("duration lowercase", {"format": "duration"}, "p1d"),
    ("duration comma", {"format": "duration"}, "PT1,5S"),
    ("duration point in time", {"format": "duration"}, "P2024-01-01T00:00:00"),
    ("uri", {"format": "uri"}, "https://example.com/a/b?c=d#e"),
    ("uri ipv6 host and port", {"format": "uri"}, "http://[::1]:8080/"),
    ("uri urn", {"format": "uri"}, "urn:isbn:0451450523"),
    ("uri relative", {"format": "uri"}, "/a/b"),
    ("uri with a space", {"format": "uri"}, "http://a b/"),
    ("uri non-ascii", {"format": "uri"}, "http://exämple.com/"),
    ("uri bad escape", {"format": "uri"}, "http://a/%zz"),
    ("uri bad ipv6", {"format": "uri"}, "http://[::1/"),
    ("uri-reference relative", {"format": "uri-reference"}, "../a?b#c"),
    ("uri-reference empty", {"format": "uri-reference"}, ""),
    ("uri-reference colon first", {"format": "uri-reference"}, ":a"),
    ("binary is an annotation", {"format": "binary"}, "\x00 anything"),
    ("password is an annotation", {"format": "password"}, ""),
    # combinators and boolean schemas
    ("oneOf: two match", {"oneOf": [{"type": "integer"}, {"minimum": 0}]}, 3),
    ("oneOf: one matches", {"oneOf": [{"type": "integer"}, {"minimum": 0}]}, -3),
    ("anyOf: none", {"anyOf": [{"type": "string"}, {"type": "null"}]}, 1),
    ("allOf", {"allOf": [{"minimum": 1}, {"maximum": 0}]}, 1),
    ("not", {"not": {"type": "string"}}, "x"),
    ("false schema", {"properties": {"a": False}}, {"a": 1}),
    ("true schema", {"properties": {"a": True}}, {"a": 1}),
    ("items false", {"prefixItems": [{"type": "integer"}], "items": False}, [1, 2]),
    ("items after prefix", {"prefixItems": [{"type": "integer"}], "items": {"type": "string"}}, [1, "a"]),
    ("prefix longer than the value", {"prefixItems": [{"type": "integer"}, {"type": "string"}]}, [1]),
    (
        "additionalProperties schema",
        {"properties": {"a": {}}, "additionalProperties": {"type": "integer"}},
        {"a": "x", "b": "y"},
    ),
    # references
    ("recursive ref, valid", TREE, {"root": {"value": 1, "children": [{"value": 2, "children": []}]}}),
    ("recursive ref, deep error", TREE, {"root": {"value": 1, "children": [{"value": "2"}]}}),
    ("ref to the root", {"properties": {"next": {"$ref": "#"}}, "type": "object"}, {"next": {"next": 1}}),
    (
        "escaped pointer",
        {
            "$defs": {"a/b": {"type": "integer"}, "c~d": {"type": "string"}},
            "prefixItems": [{"$ref": "#/$defs/a~1b"}, {"$ref": "#/$defs/c~0d"}],
        },
        [1, 2],
    ),
    ("percent-escaped pointer", {"$defs": {"a b": {"type": "integer"}}, "$ref": "#/$defs/a%20b"}, "x"),
    ("definitions", {"definitions": {"n": {"type": "null"}}, "$ref": "#/definitions/n"}, None),
    ("ref with siblings", {"$defs": {"n": {"minimum": 0}}, "$ref": "#/$defs/n", "maximum": 5}, 7),
    (
        "ref into properties",
        {"properties": {"a": {"type": "string"}, "b": {"$ref": "#/properties/a"}}},
        {"b": 1},
    ),
    (
        "annotations",
        {
            "title": "t",
            "description": "d",
            "default": 3,
            "examples": [1],
            "deprecated": True,
            "readOnly": False,
            "writeOnly": False,
            "$comment": "c",
            "type": "integer",
        },
        2,
    ),
    (
        "discriminator",
        {
            "oneOf": [
                {"properties": {"k": {"const": "a"}}, "required": ["k"]},
                {"properties": {"k": {"const": "b"}}, "required": ["k"]},
            ],
            "discriminator": {"propertyName": "k"},
        },
        {"k": "c"},
    ),
]


@pytest.mark.parametrize(("schema", "value"), [(s, v) for _, s, v in TRICKY], ids=[n for n, _, _ in TRICKY])
def test_tricky_cases_agree_with_jsonschema(schema: dict[str, Any], value: Any) -> None:
    errors = validate(value, schema)
    assert (not errors) == jsonschema_verdict(value, schema), errors
    _SchemaCheck(schema, "t").run()  # every schema of the table is one registration accepts


def test_the_table_has_both_verdicts() -> None:
    verdicts = [jsonschema_verdict(v, s) for _, s, v in TRICKY]
    assert 20 < sum(verdicts) < len(verdicts) - 20


# ----- the differential test -----

KEYS = ("a", "b", "c")
NUMBERS = (0, 1, -1, 2, 3, 5, -3, 10, 0.5, 1.0, 2.0, 1.5, -0.5, 0.1, 0.2, 0.3, 0.7, 3.0, 0.25, 1e-3, 4.5)
DIVISORS = (1, 2, 3, 0.5, 0.1, 0.25, 1.5, 0.3, 2.0, 0.01)
PATTERNS = ("^a", "b$", "^[ab]*$", "\\d", "^.{2,}$", "😀", "^$", "a|1", "^(ab)+$", "[^a]")
STRINGS = (
    "2024-02-29",
    "2023-02-29",
    "127.0.0.1",
    "::1",
    "fe80::1%eth0",
    "a@b",
    "12345678-1234-1234-1234-123456789abc",
    "[a-",
    "^a+$",
    "1.2.3.4",
    "😀😀",
    "ab",
    "",
)


@st.composite
def _parts(draw: st.DrawFn, parts: list[tuple[tuple[str, ...], tuple[str, ...]]]) -> str:
    """One string from ``parts`` (each: well-formed choices, malformed ones): every part well-formed half of
    the time, else one or two parts malformed, so both verdicts are common."""
    broken = set(draw(st.lists(st.integers(0, len(parts) - 1), max_size=2))) if draw(st.booleans()) else set()
    out = []
    for index, (good, bad) in enumerate(parts):
        out.append(draw(st.sampled_from(bad if index in broken and bad else good)))
    return "".join(out)


# RFC 3339 times and date-times (leap second, hour 24, lower case, no offset, an offset without colon, an
# empty fraction, a trailing newline, ...)
TIME_PARTS = [
    (("00", "12", "23", "09"), ("24", "9", "1a")),
    ((":",), ("", ".")),
    (("00", "30", "59"), ("60", "5")),
    ((":00", ":59", ":07"), (":60", "", ":5")),
    (("", ".5", ".123456789", ".000"), (".", ",5")),
    (("Z", "z", "+02:00", "-23:59", "-00:00", "+00:30"), ("", "+24:00", "+0200", "+02:60", "+2:00", "ZZ")),
    (("", "", "\n"), (" ", "\n\n", "x")),
]
DATE_PARTS = [
    (("2024", "2023", "1999", "0001", "2000", "1900"), ("0000", "202", "\uff12\uff10\uff12\uff14")),
    (("-01", "-02", "-12", "-04"), ("-13", "-00", "-1")),
    (("-28", "-29", "-30", "-31", "-01"), ("-00", "-32", "-1")),
    (("T", "t"), (" ", "_", "")),
]
time_strings = _parts(TIME_PARTS)
date_time_strings = _parts(DATE_PARTS + TIME_PARTS)
# ISO 8601 durations: a sign, P, designators in or out of order, a T part, numbers in isoduration's forms
duration_strings = _parts(
    [
        (("P", "P", "-P", "+P"), ("", "p", "PP", "--P")),
        (("", "1Y", "0Y", "2.5Y", "1,5Y", "1e2Y"), ("Y", "1y", "1X", "1T")),
        (("", "2M", "0M"), ("M", "2")),
        (("", "3D", "0D", "-1D"), ("D", "3")),
        (("", "1W"), ("W",)),
        (("", "T1H", "T0.5H", "T"), ("TT", "T1")),
        (("", "30M", "0M"), ("M", "1Y")),
        (("", "0S", "1.5S", "1e-3S"), ("S", ".S", "1")),
    ]
) | st.text(alphabet="PTYMWDHS0129.,e-", max_size=7)
# URIs and references: a scheme or none, an authority (user info, a host of each kind, a port), a path,
# a query, a fragment; sometimes a character RFC 3986 does not allow
uri_strings = _parts(
    [
        (("https:", "a+b.c-d:", "urn:", "", "x:"), ("1a:", ":", "a_b:")),
        (("//", ""), ()),
        (("", "u:p@", "%41@"), ("a@b@", "ä@", "%4@")),
        (
            ("example.com", "[::1]", "[v1.x]", "1.2.3.4", "01.2.3.999", "%41", "", "[2001:db8::8:1]"),
            (
                "[::1",
                "[1::2::3]",
                "%4",
                "a b",
                "ä",
                "[v1]",
            ),
        ),
        (("", ":80", ":"), (":x", ":-1")),
        (("/a/b", "a:b", "/", "//", "", "/a@:!$", "/%7E"), ("/%zz", "/ä", "/a b", "/\\")),
        (("", "?a=b/?", "?", "?%20"), ("?[", "?ä", "? ")),
        (("", "#f", "#/?"), ("#a#b", "#^")),
        (("", "", "\n"), ("\n\n", " ")),
    ]
) | st.text(alphabet=":/?#[]@%a1 ä", max_size=6)
FORMAT_STRINGS = {
    "time": time_strings,
    "date-time": date_time_strings,
    "duration": duration_strings,
    "uri": uri_strings,
    "uri-reference": uri_strings,
}
format_strings = st.one_of(*FORMAT_STRINGS.values())

strings = st.text(alphabet="ab1@:.-😀é", max_size=4) | st.sampled_from(STRINGS) | format_strings
numbers = st.sampled_from(NUMBERS) | st.integers(-6, 6)
scalars = st.none() | st.booleans() | numbers | strings


def json_of(depth: int) -> st.SearchStrategy[Any]:
    """JSON values nested at most ``depth`` deep (scalars most of the time)."""
    if depth == 0:
        return scalars
    inner = json_of(depth - 1)
    return scalars | st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)


json_values = json_of(2)
small_values = scalars | st.lists(scalars, max_size=2)

SCALAR_KEYWORDS = (
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "required",
    "minItems",
    "maxItems",
    "uniqueItems",
    "description",
)
NESTED_KEYWORDS = (
    "properties",
    "additionalProperties",
    "items",
    "prefixItems",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
)
DESCENDING = {"properties", "additionalProperties", "items", "prefixItems"}


@st.composite
def schemas(draw: st.DrawFn, depth: int, inplace: tuple[str, ...], refs: tuple[str, ...]) -> Any:
    """A schema over exactly the supported keywords. ``inplace``: the $defs a $ref may name here without
    descending into the value (so no $ref loop stays on one value); ``refs``: those it may name below a
    property or an item (recursion)."""
    kind = draw(st.integers(0, 11))
    if kind == 0:
        return draw(st.booleans())
    if kind == 1 and inplace:
        return {"$ref": "#/$defs/" + draw(st.sampled_from(inplace))}
    schema: dict[str, Any] = {}
    if draw(st.booleans()):
        types = draw(st.lists(st.sampled_from(JSON_TYPES), min_size=1, max_size=2, unique=True))
        schema["type"] = types[0] if len(types) == 1 and draw(st.booleans()) else types
    pool = SCALAR_KEYWORDS + (NESTED_KEYWORDS if depth > 0 else ())
    for keyword in draw(st.lists(st.sampled_from(pool), max_size=3, unique=True)):
        below = refs if keyword in DESCENDING else inplace
        schema[keyword] = draw(keyword_values(keyword, depth - 1, below, refs))
    if inplace and draw(st.integers(0, 5)) == 0:
        schema["$ref"] = "#/$defs/" + draw(st.sampled_from(inplace))
    return schema


def keyword_values(
    keyword: str, depth: int, inplace: tuple[str, ...], refs: tuple[str, ...]
) -> st.SearchStrategy[Any]:
    child = schemas(depth, inplace, refs)
    simple: dict[str, st.SearchStrategy[Any]] = {
        "enum": st.lists(small_values, min_size=1, max_size=4),
        "const": small_values,
        "minimum": numbers,
        "maximum": numbers,
        "exclusiveMinimum": numbers,
        "exclusiveMaximum": numbers,
        "multipleOf": st.sampled_from(DIVISORS),
        "minLength": st.integers(0, 3),
        "maxLength": st.integers(0, 3),
        "minItems": st.integers(0, 3),
        "maxItems": st.integers(0, 3),
        "pattern": st.sampled_from(PATTERNS),
        "format": st.sampled_from(ALL_FORMATS),
        "required": st.lists(st.sampled_from(KEYS), max_size=3, unique=True),
        "uniqueItems": st.booleans(),
        "description": st.just("annotation"),
        "properties": st.dictionaries(st.sampled_from(KEYS), child, max_size=3),
        "additionalProperties": child,
        "items": child,
        "not": child,
        "prefixItems": st.lists(child, min_size=1, max_size=3),
    }
    if keyword in simple:
        return simple[keyword]
    return st.lists(child, min_size=1, max_size=3)  # allOf / anyOf / oneOf


@st.composite
def root_schemas(draw: st.DrawFn) -> dict[str, Any]:
    names = tuple(f"d{i}" for i in range(draw(st.integers(0, 3))))
    # def i may name earlier defs in place and any def below a property or an item
    defs = {name: draw(schemas(2, names[:i], names)) for i, name in enumerate(names)}
    root = draw(schemas(3, names, names))
    if not isinstance(root, dict):
        root = {"allOf": [root]}
    if defs:
        root["$defs"] = defs
    return root


@st.composite
def derived(draw: st.DrawFn, schema: Any, root: dict[str, Any], depth: int = 4) -> Any:
    """A value shaped after ``schema`` (often valid, sometimes not), so both verdicts occur."""
    if not isinstance(schema, dict) or depth == 0 or draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    if "$ref" in schema and draw(st.booleans()):
        return draw(derived(_resolve(root, schema["$ref"]), root, depth - 1))
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    for keyword in ("allOf", "anyOf", "oneOf"):
        if keyword in schema and draw(st.booleans()):
            return draw(derived(draw(st.sampled_from(schema[keyword])), root, depth - 1))
    raw = schema.get("type", draw(st.sampled_from(JSON_TYPES)))
    kind = raw if isinstance(raw, str) else draw(st.sampled_from(raw))
    if kind == "object":
        properties = schema.get("properties", {})
        names = set(schema.get("required", [])) | set(draw(st.lists(st.sampled_from(KEYS), max_size=3)))
        extra = schema.get("additionalProperties", True)
        return {n: draw(derived(properties.get(n, extra), root, depth - 1)) for n in sorted(names)}
    if kind == "array":
        low = schema.get("minItems", 0)
        count = draw(st.integers(low, max(low, schema.get("maxItems", 3))))
        prefix = schema.get("prefixItems", [])
        items = schema.get("items", True)
        return [draw(derived(prefix[i] if i < len(prefix) else items, root, depth - 1)) for i in range(count)]
    if kind == "string":
        return draw(strings)
    if kind in ("integer", "number"):
        divisor = schema.get("multipleOf")
        if divisor is not None and draw(st.booleans()):
            return divisor * draw(st.integers(-4, 4))
        bound = next((schema[k] for k in ("minimum", "maximum", "exclusiveMinimum") if k in schema), None)
        if bound is not None and draw(st.booleans()):
            return bound + draw(st.sampled_from((0, 1, -1, 0.5)))
        return draw(st.integers(-6, 6)) if kind == "integer" else draw(numbers)
    if kind == "boolean":
        return draw(st.booleans())
    return None


@DIFFERENTIAL
@given(st.data())
def test_verdicts_equal_jsonschema(data: st.DataObject) -> None:
    root = data.draw(root_schemas(), label="schema")
    _SchemaCheck(root, "t").run()  # registration accepts every schema built from the supported keywords
    value = data.draw(json_values | derived(root, root), label="value")
    errors = validate(value, root)
    verdict = jsonschema_verdict(value, root)
    event("valid" if verdict else "invalid")
    assert (not errors) == verdict, errors


@DIFFERENTIAL
@given(st.data())
def test_format_verdicts_equal_jsonschema(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(ALL_FORMATS), label="format")
    own = FORMAT_STRINGS.get(name, strings)
    mine = data.draw(st.integers(0, 4)) > 0  # the format's own strings most of the time
    text = data.draw(own if mine else strings | st.text(max_size=8), label="text")
    schema = {"type": "string", "format": name}
    errors = validate(text, schema)
    verdict = jsonschema_verdict(text, schema)
    event(f"{name} {'valid' if verdict else 'invalid'}")
    assert (not errors) == verdict, errors
