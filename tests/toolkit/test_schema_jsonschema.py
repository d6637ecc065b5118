"""tractkv.toolkit.schema against jsonschema (Draft 2020-12, a format checker for exactly the supported formats):
a fixed table of the tricky cases, and hypothesis differential tests over random schemas built from exactly
the supported keywords (nested, with ``$defs`` / ``$ref`` and recursion) and random or schema-derived values:
one over every keyword, one focused on the applicators over objects and arrays (``patternProperties``,
``propertyNames``, ``if``, ``contains``, the dependencies, ``unevaluatedProperties``).

``TRACTKV_SCHEMA_EXAMPLES`` sets how many examples the differential test runs (the suite's default keeps it
to a few seconds; run it with 50000 to hunt for disagreements).
"""

from __future__ import annotations

import copy
import os
import re
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
    # date-time / time, duration, hostname, uri / uri-reference need the test group's rfc3339-validator,
    # isoduration, fqdn, rfc3986-validator (jsonschema[format-nongpl]'s): without them jsonschema would skip
    # those formats
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

COND = {
    "if": {"properties": {"kind": {"const": "a"}}},
    "then": {"required": ["x"]},
    "else": {"required": ["y"]},
}
UNEVALUATED_ANY = {
    "anyOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"b": {}}}],
    "unevaluatedProperties": False,
}
UNEVALUATED_IF = {
    "if": {"properties": {"a": {"const": 1}}},
    "then": {"properties": {"b": {}}},
    "unevaluatedProperties": False,
}
UNEVALUATED_REF = {
    "$defs": {"base": {"properties": {"a": {}}}},
    "$ref": "#/$defs/base",
    "unevaluatedProperties": False,
}
UNEVALUATED_DEPENDENT = {
    "dependentSchemas": {"a": {"properties": {"b": {}}}},
    "properties": {"a": {}},
    "unevaluatedProperties": False,
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
    ("hostname", {"format": "hostname"}, "api.example.com"),
    ("hostname one label", {"format": "hostname"}, "localhost"),
    ("hostname final dot", {"format": "hostname"}, "example.com."),
    ("hostname upper case", {"format": "hostname"}, "EXAMPLE.COM"),
    ("hostname empty", {"format": "hostname"}, ""),
    ("hostname leading hyphen", {"format": "hostname"}, "-a.com"),
    ("hostname trailing hyphen", {"format": "hostname"}, "a-.com"),
    ("hostname underscore", {"format": "hostname"}, "a_b.com"),
    ("hostname empty label", {"format": "hostname"}, "a..com"),
    ("hostname 63-character label", {"format": "hostname"}, "a" * 63 + ".com"),
    ("hostname 64-character label", {"format": "hostname"}, "a" * 64 + ".com"),
    ("hostname 253 characters", {"format": "hostname"}, ".".join(["a" * 63] * 3 + ["a" * 61])),
    ("hostname 254 characters", {"format": "hostname"}, ".".join(["a" * 63] * 3 + ["a" * 62])),
    ("hostname non-ascii", {"format": "hostname"}, "bücher.de"),
    ("hostname with a newline", {"format": "hostname"}, "example.com\n"),  # fqdn's "$"
    ("hostname non-ascii digits", {"format": "hostname"}, "\u0661\u0662.com"),  # fqdn's "\d"
    ("hostname ignores numbers", {"format": "hostname"}, 3),
    # names of properties
    ("propertyNames pattern", {"propertyNames": {"pattern": "^[a-z]+$"}}, {"ab": 1, "Ab": 2}),
    ("propertyNames all match", {"propertyNames": {"pattern": "^[a-z]+$", "maxLength": 2}}, {"ab": 1}),
    ("propertyNames false, empty object", {"propertyNames": False}, {}),
    ("propertyNames false", {"propertyNames": False}, {"a": 1}),
    ("propertyNames ignores arrays", {"propertyNames": False}, ["a"]),
    (
        "zod 4 record",
        {
            "type": "object",
            "propertyNames": {"type": "string", "pattern": "^[a-z]+$"},
            "additionalProperties": {"type": "number"},
        },
        {"ab": 1, "cd": "x"},
    ),
    ("patternProperties", {"patternProperties": {"^a": {"type": "integer"}}}, {"ab": "x"}),
    ("patternProperties no match", {"patternProperties": {"^a": {"type": "integer"}}}, {"b": "x"}),
    ("patternProperties unanchored", {"patternProperties": {"b": {"type": "integer"}}}, {"abc": "x"}),
    (
        "patternProperties and properties both apply",
        {"properties": {"ab": {"minimum": 5}}, "patternProperties": {"^a": {"maximum": 3}}},
        {"ab": 4},
    ),
    (
        "patternProperties then additionalProperties",
        {"patternProperties": {"^a": {}}, "additionalProperties": False},
        {"ab": 1, "b": 2},
    ),
    (
        "patternProperties cover every name",
        {"patternProperties": {"^a": {}, "^b": {}}, "additionalProperties": False},
        {"ab": 1, "b": 2},
    ),
    # jsonschema joins the patterns with "|" to tell additional names: "" alone joins to "", which it skips
    ("empty pattern alone", {"patternProperties": {"": {}}, "additionalProperties": False}, {"x": 1}),
    (
        "empty pattern and another",
        {"patternProperties": {"": {}, "q": {}}, "additionalProperties": False},
        {"x": 1},
    ),
    ("dependentRequired", {"dependentRequired": {"a": ["b"]}}, {"a": 1}),
    ("dependentRequired met", {"dependentRequired": {"a": ["b"]}}, {"a": 1, "b": 2}),
    ("dependentRequired absent", {"dependentRequired": {"a": ["b"]}}, {"b": 1}),
    ("dependentSchemas", {"dependentSchemas": {"a": {"required": ["c"]}}}, {"a": 1}),
    ("dependentSchemas absent", {"dependentSchemas": {"a": {"required": ["c"]}}}, {"c": 1}),
    # conditions
    ("if then", COND, {"kind": "a", "y": 1}),
    ("if else", COND, {"kind": "b", "y": 1}),
    ("if then met", COND, {"kind": "a", "x": 1}),
    ("then without if", {"then": False}, 1),
    ("else without if", {"else": False}, 1),
    ("if false", {"if": False, "else": {"type": "integer"}}, "x"),
    # contains
    ("contains none", {"contains": {"type": "integer"}}, ["a"]),
    ("contains empty", {"contains": {"type": "integer"}}, []),
    ("contains one", {"contains": {"type": "integer"}}, ["a", 1]),
    ("contains 1.0", {"contains": {"type": "integer"}}, [1.0]),
    ("minContains 0", {"contains": {"type": "integer"}, "minContains": 0}, []),
    ("maxContains", {"contains": {"type": "integer"}, "maxContains": 1}, [1, 2]),
    ("minContains 2", {"contains": {"type": "integer"}, "minContains": 2}, [1, "a"]),
    (
        "minContains 0 maxContains 0",
        {"contains": {"type": "integer"}, "minContains": 0, "maxContains": 0},
        [1],
    ),
    ("minContains without contains", {"minContains": 2}, []),
    ("contains ignores strings", {"contains": False}, "x"),
    # unevaluatedProperties, with the annotations of the subschemas that apply
    ("unevaluated", {"properties": {"a": {}}, "unevaluatedProperties": False}, {"a": 1, "b": 1}),
    (
        "unevaluated through allOf",
        {"allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": False},
        {"a": 1},
    ),
    ("unevaluated: an invalid anyOf option", UNEVALUATED_ANY, {"a": 1, "b": 1}),
    ("unevaluated: both anyOf options", UNEVALUATED_ANY, {"a": "x", "b": 1}),
    ("unevaluated through if and then", UNEVALUATED_IF, {"a": 1, "b": 2}),
    ("unevaluated: if fails", UNEVALUATED_IF, {"a": 2, "b": 2}),
    (
        "unevaluated through else",
        {"if": {"required": ["z"]}, "else": {"properties": {"a": {}}}, "unevaluatedProperties": False},
        {"a": 1},
    ),
    ("unevaluated through $ref", UNEVALUATED_REF, {"a": 1}),
    ("unevaluated through $ref, one more", UNEVALUATED_REF, {"a": 1, "b": 1}),
    ("unevaluated through dependentSchemas", UNEVALUATED_DEPENDENT, {"a": 1, "b": 2}),
    ("unevaluated: dependentSchemas absent", UNEVALUATED_DEPENDENT, {"b": 2}),
    (
        "unevaluated: not annotates nothing",
        {"not": {"not": {"properties": {"a": {}}}}, "unevaluatedProperties": False},
        {"a": 1},
    ),
    (
        "unevaluated: nested unevaluated",
        {"allOf": [{"unevaluatedProperties": True}], "unevaluatedProperties": False},
        {"a": 1},
    ),
    (
        "unevaluated schema",
        {"properties": {"a": {}}, "unevaluatedProperties": {"type": "integer"}},
        {"a": "x", "b": "y"},
    ),
    (
        "unevaluated schema met",
        {"properties": {"a": {}}, "unevaluatedProperties": {"type": "integer"}},
        {"a": "x", "b": 1},
    ),
    (
        "unevaluated after additionalProperties",
        {"additionalProperties": {"type": "integer"}, "unevaluatedProperties": False},
        {"x": 1},
    ),
    (
        "unevaluated after patternProperties",
        {"patternProperties": {"^a": {}}, "unevaluatedProperties": False},
        {"ab": 1},
    ),
    (
        "unevaluated in a property",
        {"properties": {"o": {"properties": {"a": {}}, "unevaluatedProperties": False}}},
        {"o": {"a": 1, "b": 2}},
    ),
    ("unevaluated ignores arrays", {"unevaluatedProperties": False}, [1]),
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
# host names: labels of letters, digits, hyphens (not at an edge), 63 at most, a final dot, 253 characters
# at most; upper case, an underscore, non-ASCII letters and digits, a trailing newline
hostname_strings = (
    _parts(
        [
            (
                ("example", "a", "x-1", "A1", "xn--bcher-kva", "a" * 63, "1"),
                ("-a", "a-", "a_b", "a" * 64, "", "é"),
            ),
            (("", ".com", ".co.uk", ".EXAMPLE", ".a-b"), (".", "..com", ".-x", ". x")),
            (
                ("", "", ".", "\n"),
                ("\n\n", " ", ".."),
            ),
        ]
    )
    | st.sampled_from(
        (
            ".".join(["a" * 63] * 4),  # 255 characters
            ".".join(["a" * 63] * 3 + ["a" * 61]),  # 253
            ".".join(["a" * 63] * 3 + ["a" * 61]) + ".",  # 253 and a final dot
            ".".join(["a" * 63] * 3 + ["a" * 62]),  # 254
            "\u0661\u0662.com",  # Arabic-Indic digits: Python's \d
            "\u017f.com",  # long s: case-insensitively an "s"
            "\u212a.com",  # Kelvin sign: lower-cased to "k"
            "\u0130.com",  # dotted capital I: lower-cased to two characters
            "",
        )
    )
    | st.text(alphabet="ab-._1Aé\n", max_size=6)
)
FORMAT_STRINGS = {
    "hostname": hostname_strings,
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
    "minContains",
    "maxContains",
    "dependentRequired",
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
    "patternProperties",
    "propertyNames",
    "if",
    "then",
    "else",
    "contains",
    "dependentSchemas",
    "unevaluatedProperties",
)
# the keywords applying their schemas below the value (to a property, a name or an item): a $ref there may
# recurse; the others apply in place, where a $ref may only name an earlier def
DESCENDING = {
    *("properties", "additionalProperties", "items", "prefixItems", "patternProperties", "propertyNames"),
    *("contains", "unevaluatedProperties"),
}
# names of properties: the keys the values use, and patterns over them ("" matches every name, and is
# jsonschema's quirk beside additionalProperties: joined alone it is the empty regex, which it skips)
KEY_PATTERNS = ("^a", "b$", "^[ab]*$", "a|c", "[^a]", "", "^.$", "^(?:b|c)")


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
        "minContains": st.integers(0, 3),
        "maxContains": st.integers(0, 3),
        "dependentRequired": st.dictionaries(
            st.sampled_from(KEYS), st.lists(st.sampled_from(KEYS), max_size=2, unique=True), max_size=2
        ),
        "patternProperties": st.dictionaries(st.sampled_from(KEY_PATTERNS), child, min_size=1, max_size=3),
        "propertyNames": child,
        "if": child,
        "then": child,
        "else": child,
        "contains": child,
        "dependentSchemas": st.dictionaries(st.sampled_from(KEYS), child, min_size=1, max_size=2),
        "unevaluatedProperties": child,
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
    for keyword in ("if", "then", "else"):
        if keyword in schema and draw(st.integers(0, 3)) == 0:
            return draw(derived(schema[keyword], root, depth - 1))
    raw = schema.get("type", draw(st.sampled_from(JSON_TYPES)))
    kind = raw if isinstance(raw, str) else draw(st.sampled_from(raw))
    if kind == "object":
        properties = schema.get("properties", {})
        names = set(schema.get("required", [])) | set(draw(st.lists(st.sampled_from(KEYS), max_size=3)))
        extra = schema.get("additionalProperties", schema.get("unevaluatedProperties", True))
        patterns = schema.get("patternProperties", {})
        out = {}
        for name in sorted(names):
            matching = [option for pattern, option in patterns.items() if re.search(pattern, name)]
            shape = properties.get(name, draw(st.sampled_from(matching)) if matching else extra)
            out[name] = draw(derived(shape, root, depth - 1))
        return out
    if kind == "array":
        low = schema.get("minItems", 0)
        count = draw(st.integers(low, max(low, schema.get("maxItems", 3))))
        prefix = schema.get("prefixItems", [])
        items = schema.get("items", True)
        out_items = [
            draw(derived(prefix[i] if i < len(prefix) else items, root, depth - 1)) for i in range(count)
        ]
        if "contains" in schema and draw(st.booleans()):  # a few items shaped after contains
            out_items += [
                draw(derived(schema["contains"], root, depth - 1)) for _ in range(draw(st.integers(0, 2)))
            ]
        return out_items
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


# ----- the applicators over objects and arrays, and unevaluatedProperties, on their own -----
# Shallow schemas mostly of the keywords that apply schemas to an object's names and properties or an array's
# items, over values made of a few keys and scalars, so each keyword's decision (often the one that tips the
# verdict) is exercised: the broad test above rarely gets a value that is valid apart from one of them.

FOCUS_SCALARS = (0, 1, 2, -1, 1.5, "a", "ab", "b", "", None, True, "a.b", "-a", "a\n", "A")
FOCUS_LEAVES = (
    *(True, True, {}, {}, {}),  # most leaves admit anything: a value is then often valid but for one keyword
    False,
    {"type": "integer"},
    {"type": "string"},
    {"type": "object"},
    {"minimum": 1},
    {"const": 1},
    {"maxLength": 1},
    {"pattern": "^a"},
    {"format": "hostname"},
    {"required": ["a"]},
    {"required": ["b"]},
    {"properties": {"a": {"type": "integer"}}},
    {"properties": {"b": True}},
    {"patternProperties": {"^c": {}}},
    {"additionalProperties": {"type": "integer"}},
)
FOCUS_KEYWORDS = (
    *("properties", "patternProperties", "additionalProperties", "propertyNames", "required"),
    *("dependentRequired", "dependentSchemas", "unevaluatedProperties", "if", "then", "else"),
    *("allOf", "anyOf", "oneOf", "not", "contains", "minContains", "maxContains", "items", "prefixItems"),
)
focus_scalars = st.sampled_from(FOCUS_SCALARS)
focus_items = focus_scalars | st.dictionaries(st.sampled_from(KEYS), focus_scalars, max_size=2)
# objects most of the time (most of the focus keywords apply to objects), with a few names from KEYS
focus_values = st.one_of(
    st.dictionaries(
        st.sampled_from(KEYS), focus_items | st.lists(focus_scalars, max_size=2), min_size=1, max_size=3
    ),
    st.dictionaries(st.sampled_from(KEYS), focus_scalars, max_size=3),
    st.lists(focus_items, max_size=4),
    focus_scalars,
)


NEW_KEYWORDS = (
    *("patternProperties", "propertyNames", "dependentRequired", "dependentSchemas", "unevaluatedProperties"),
    *("if", "contains"),
)


@st.composite
def focused(
    draw: st.DrawFn, depth: int, inplace: tuple[str, ...], refs: tuple[str, ...], first: str | None = None
) -> Any:
    """A schema of the focus keywords (leaves from ``FOCUS_LEAVES``), with ``first`` among them when given;
    ``inplace`` / ``refs`` as in :func:`schemas`."""
    if first is None and (depth == 0 or draw(st.integers(0, 4)) == 0):
        if inplace and draw(st.integers(0, 4)) == 0:
            return {"$ref": "#/$defs/" + draw(st.sampled_from(inplace))}
        return copy.deepcopy(draw(st.sampled_from(FOCUS_LEAVES)))  # the root may get $defs added
    schema: dict[str, Any] = {}
    if draw(st.integers(0, 3)) == 0:
        schema["type"] = draw(st.sampled_from(("object", "array")))
    keywords = draw(st.lists(st.sampled_from(FOCUS_KEYWORDS), min_size=1, max_size=3, unique=True))
    if first is not None:
        keywords = [first, *(k for k in keywords if k != first)]
        keywords += {"if": ["then", "else"], "contains": ["minContains", "maxContains"]}.get(first, [])
        if first == "patternProperties":  # which names are additional: jsonschema's joined patterns
            keywords.append("additionalProperties")
        if first == "unevaluatedProperties":  # what the subschemas applying in place evaluated
            keywords.append(draw(st.sampled_from(("allOf", "anyOf", "oneOf", "if", "dependentSchemas"))))
    for keyword in dict.fromkeys(keywords):
        below = refs if keyword in DESCENDING else inplace
        child = focused(depth - 1, below, refs)
        if keyword == "properties":
            schema[keyword] = draw(st.dictionaries(st.sampled_from(KEYS), child, max_size=2))
        elif keyword == "patternProperties":
            schema[keyword] = draw(
                st.dictionaries(st.sampled_from(KEY_PATTERNS), child, min_size=1, max_size=2)
            )
        elif keyword == "dependentSchemas":
            schema[keyword] = draw(st.dictionaries(st.sampled_from(KEYS), child, min_size=1, max_size=2))
        elif keyword in ("allOf", "anyOf", "oneOf", "prefixItems"):
            schema[keyword] = draw(st.lists(child, min_size=1, max_size=3))
        elif keyword == "dependentRequired":
            needs = st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True)
            schema[keyword] = draw(st.dictionaries(st.sampled_from(KEYS), needs, min_size=1, max_size=2))
        elif keyword in ("required", "minContains", "maxContains"):
            schema[keyword] = draw(keyword_values(keyword, 0, (), ()))
        elif keyword in ("additionalProperties", "unevaluatedProperties") and draw(st.booleans()):
            schema[keyword] = False  # the strict form, where one name too many tips the verdict
        else:
            schema[keyword] = draw(child)
    if inplace and draw(st.integers(0, 4)) == 0:
        schema["$ref"] = "#/$defs/" + draw(st.sampled_from(inplace))
    return schema


@st.composite
def focused_roots(draw: st.DrawFn) -> dict[str, Any]:
    names = tuple(f"d{i}" for i in range(draw(st.integers(0, 2))))
    defs = {name: draw(focused(2, names[:i], names)) for i, name in enumerate(names)}
    root = draw(focused(3, names, names, draw(st.sampled_from(NEW_KEYWORDS))))
    root = root if isinstance(root, dict) and "$ref" not in root else {"allOf": [root]}
    if defs:
        root["$defs"] = defs
    return root


@DIFFERENTIAL
@given(st.data())
def test_applicator_verdicts_equal_jsonschema(data: st.DataObject) -> None:
    root = data.draw(focused_roots(), label="schema")
    _SchemaCheck(root, "t").run()
    value = data.draw(focus_values, label="value")
    errors = validate(value, root)
    verdict = jsonschema_verdict(value, root)
    event("valid" if verdict else "invalid")
    assert (not errors) == verdict, errors
