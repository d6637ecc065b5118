"""The JSON-Schema subset validator."""

from __future__ import annotations

from typing import Any

import pytest

from tractkv.errors import InvalidInput
from tractkv.toolkit.schema import check_parameters_schema, validate

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "count": {"type": ["integer", "null"], "minimum": 0, "maximum": 10},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "mode": {"type": "string", "enum": ["a", "b"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "opt": {"type": "string", "nullable": True},
        "inner": {
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
            "additionalProperties": False,
        },
        "either": {"anyOf": [{"type": "integer"}, {"type": "string", "enum": ["all"]}]},
    },
    "required": ["name"],
    "additionalProperties": False,
}


def test_a_conforming_value_has_no_errors() -> None:
    value = {
        "name": "n",
        "count": None,
        "ratio": 1,
        "flag": False,
        "mode": "b",
        "tags": ["x", "y"],
        "opt": None,
        "inner": {"x": 3},
        "either": "all",
    }
    assert validate(value, SCHEMA) == []
    assert validate({"name": "n", "count": 10, "ratio": 0.5, "either": 2}, SCHEMA) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({}, "$: missing required property 'name'"),
        ({"name": 3}, "$.name: expected string, got integer"),
        ({"name": ""}, "$.name: shorter than 1 characters"),
        ({"name": "n", "count": True}, "$.count: expected integer or null, got boolean"),
        ({"name": "n", "count": 1.5}, "$.count: expected integer or null, got number"),
        ({"name": "n", "count": 11}, "$.count: 11 is more than the maximum 10"),
        ({"name": "n", "count": -1}, "$.count: -1 is less than the minimum 0"),
        ({"name": "n", "ratio": "1"}, "$.ratio: expected number, got string"),
        ({"name": "n", "ratio": float("nan")}, "$.ratio: expected number, got float"),
        ({"name": "n", "flag": 1}, "$.flag: expected boolean, got integer"),
        ({"name": "n", "mode": "c"}, '$.mode: "c" is not one of "a", "b"'),
        ({"name": "n", "tags": ["a", 1]}, "$.tags[1]: expected string, got integer"),
        ({"name": "n", "tags": ["a", "b", "c", "d"]}, "$.tags: more than 3 items"),
        ({"name": "n", "opt": 1}, "$.opt: expected string or null, got integer"),
        ({"name": "n", "inner": {}}, "$.inner: missing required property 'x'"),
        ({"name": "n", "inner": {"x": 1, "y": 2}}, "$.inner: unexpected property 'y' (allowed: x)"),
        ({"name": "n", "extra": 1}, "$: unexpected property 'extra'"),
        ({"name": "n", "either": "some"}, "$.either: matches none of the allowed shapes"),
    ],
)
def test_each_violation_is_reported_with_its_path(value: dict[str, Any], expected: str) -> None:
    errors = validate(value, SCHEMA)
    assert len(errors) == 1, errors
    assert errors[0].startswith(expected)


def test_every_problem_is_reported_at_once() -> None:
    errors = validate({"count": "x", "flag": "y", "zzz": 1}, SCHEMA)
    assert len(errors) == 4
    assert any("missing required property 'name'" in e for e in errors)


def test_enum_uses_json_equality() -> None:
    assert validate(True, {"enum": [1]}) == ["$: true is not one of 1"]
    assert validate(1, {"enum": [True]}) != []
    assert validate(None, {"enum": ["a", None]}) == []


def test_additional_properties_as_a_schema() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert validate({"a": 1, "b": 2}, schema) == []
    assert validate({"a": "x"}, schema) == ["$.a: expected integer, got string"]


def test_pattern_and_format_are_enforced() -> None:
    errors = validate("abc", {"type": "string", "pattern": "^z", "format": "email"})
    assert errors == ["$: \"abc\" does not match the pattern '^z'", '$: "abc" is not a valid email']


@pytest.mark.parametrize(
    "schema",
    [
        [],
        {"type": "array"},
        {"type": "object", "properties": {"a": 1}},
        {"type": "object", "properties": {}, "required": ["a"]},
        {"type": "object", "properties": {"a": {"type": "str"}}},
        {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "int"}}}},
    ],
)
def test_parameter_schemas_that_cannot_be_enforced_are_refused(schema: Any) -> None:
    with pytest.raises(InvalidInput):
        check_parameters_schema(schema, "t")


def test_a_value_nested_deeper_than_python_recurses_is_an_error_not_a_crash() -> None:
    value: Any = []
    for _ in range(5000):
        value = [value]
    errors = validate(value, {"type": "array", "items": {"$ref": "#"}})
    assert errors == ["$: nested too deeply to validate"]


def test_refs_are_followed_recursively() -> None:
    schema = {"type": "array", "items": {"$ref": "#"}, "maxItems": 1}
    assert validate([[[]]], schema) == []
    assert validate([[[], []]], schema) == ["$[0]: more than 1 items"]


def test_nested_unevaluated_properties_cost_grows_polynomially(monkeypatch: pytest.MonkeyPatch) -> None:
    # each level asks what the level below evaluated, and whether the value is valid against it: without
    # remembering both per (value, schema), 16 levels took a minute (2**depth checks)
    from tractkv.toolkit import schema as module

    calls = 0
    check = module._Validator.check

    def counted(self: Any, *args: Any) -> None:
        nonlocal calls
        calls += 1
        assert calls < 25 * 25 * 4, "exponential: each level re-validated the levels below it"
        check(self, *args)

    monkeypatch.setattr(module._Validator, "check", counted)
    nested: dict[str, Any] = {"properties": {"a": {}}}
    for _ in range(25):  # a registered schema nests 64 JSON levels at most: 31 of these
        nested = {"type": "object", "allOf": [nested], "unevaluatedProperties": False}
    check_parameters_schema(nested, "t")
    assert validate({"a": 1}, nested) == []
    assert validate({"a": 1, "b": 2}, nested)[0] == (
        "$: unexpected property 'b' (no 'properties', 'patternProperties' or 'additionalProperties' here or in "
        "a subschema that applies covers it)"
    )
