"""Tool schemas at registration (unsupported keywords refused, with the keyword and where it is) and end to
end: a model's bad arguments against a schema with $defs / $ref / pattern / format / multipleOf / oneOf are
all reported to it at once and never reach the handler (agent loop, then ``tractkv usage``); tool schemas
only recorded (set_tools, commit(tools=)) keep any keyword."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tractkv import Tract, toolkit
from tractkv.cli import cli
from tractkv.errors import InvalidInput
from tractkv.llm import ScriptedLLM
from tractkv.toolkit import ToolContext, ToolDefinition, ToolExecutor

from .conftest import FakeClock, call


def _params(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def _handler(*, context: ToolContext, **kwargs: Any) -> str:
    return "ok"


REFUSED = [
    (
        _params(x={"type": "array", "unevaluatedItems": False}),
        "unsupported keyword 'unevaluatedItems' at #/properties/x/unevaluatedItems",
    ),
    (
        _params(
            x={"dependencies": {"a": ["b"]}}
        ),  # draft 7's spelling of dependentRequired / dependentSchemas
        "unsupported keyword 'dependencies' at #/properties/x/dependencies",
    ),
    (_params(x={"$dynamicRef": "#meta"}), "unsupported keyword '$dynamicRef' at #/properties/x/$dynamicRef"),
    (
        _params(x={"type": "object", "patternProperties": {"[a-": {}}}),
        "invalid regex '[a-' at #/properties/x/patternProperties/[a-",
    ),
    (
        _params(x={"propertyNames": {"pattern": "\\p{L}"}}),
        "invalid regex '\\\\p{L}' at #/properties/x/propertyNames/pattern",
    ),
    (  # jsonschema would join them as "^a|(?i)b": a global flag not at the start
        _params(x={"patternProperties": {"^a": {}, "(?i)b": {}}, "additionalProperties": False}),
        "the patterns joined by '|' (as additionalProperties is checked) are no regex (global flags not at the "
        "start of the expression at position 3) at #/properties/x/patternProperties",
    ),
    (
        _params(x={"dependentRequired": {"a": "b"}}),
        "'dependentRequired' must map names to lists of distinct property names at "
        "#/properties/x/dependentRequired",
    ),
    (_params(x={"dependentRequired": {"a": ["b", "b"]}}), "'dependentRequired' must map names to lists"),
    (_params(x={"dependentSchemas": {"a": 3}}), "a schema must be an object or a boolean, not 3"),
    (_params(x={"contains": {}, "minContains": -1}), "'minContains' must be a non-negative integer"),
    (_params(x={"maxContains": 1.5}), "'maxContains' must be a non-negative integer"),
    (_params(x={"propertyNames": [{"type": "string"}]}), "'propertyNames' must be one schema"),
    (_params(x={"if": "x"}), 'a schema must be an object or a boolean, not "x" at #/properties/x/if'),
    (
        {**_params(), "dependentSchemas": {"a": {"$ref": "#"}}},
        "a '$ref' loop that never descends into the value",
    ),
    ({**_params(), "if": True, "else": {"allOf": [{"$ref": "#"}]}}, "a '$ref' loop"),
    (
        _params(x={"type": "string", "format": "idn-hostname"}),  # jsonschema checks it (idna); not mirrored
        'unknown format "idn-hostname" (checked: date, date-time, duration, email',
    ),
    (
        _params(x={"$ref": "https://example.com/place.json"}),
        "unsupported or unresolvable '$ref' 'https://example.com/place.json'",
    ),
    (
        _params(x={"$ref": "#/$defs/Missing"}),
        "'$ref' '#/$defs/Missing': nothing at '$defs' at #/properties/x/$ref",
    ),
    (_params(x={"$ref": "#place"}), "anchors are not supported"),
    (_params(x={"type": "string", "pattern": "[a-"}), "invalid regex '[a-'"),
    (_params(x={"type": "string", "pattern": "\\p{L}"}), "invalid regex"),
    (_params(x={"type": "string", "format": "zip-code"}), 'unknown format "zip-code"'),
    (_params(x={"type": "string", "format": "emial"}), "accepted unchecked: binary, byte, double"),  # a typo
    (
        _params(x={"$id": "https://example.com/x", "type": "string"}),
        "'$id' is supported at the root only at #/properties/x/$id",
    ),
    (_params(x={"type": "array", "items": [{"type": "string"}]}), "'items' must be one schema"),
    (_params(x={"multipleOf": 0}), "'multipleOf' must be more than 0"),
    (_params(x={"minLength": -1}), "'minLength' must be a non-negative integer"),
    (_params(x={"anyOf": []}), "'anyOf' must be a non-empty list of schemas"),
    (_params(x={"type": "str"}), 'unknown type "str"'),
    (_params(x={"not": 3}), "a schema must be an object or a boolean, not 3 at #/properties/x/not"),
    (
        {
            **_params(x={"$ref": "#/$defs/a"}),
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
        },
        "a '$ref' loop that never descends into the value",
    ),
    ({**_params(x={"$ref": "#"}), "allOf": [{"$ref": "#"}]}, "a '$ref' loop"),
    (_params(**{"a/b": {"$anchor": "here"}}), "unsupported keyword '$anchor' at #/properties/a~1b/$anchor"),
]


@pytest.mark.parametrize(("schema", "message"), REFUSED, ids=[m.split(" at ")[0][:40] for _, m in REFUSED])
def test_schemas_with_what_cannot_be_validated_are_refused_at_registration(
    schema: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInput) as info:
        ToolDefinition("t", "A tool.", schema, _handler)
    problem, _, pointer = message.partition(" at #")
    assert problem in str(info.value)
    assert str(info.value).startswith(
        f"tool 't' parameters at #{pointer}" if pointer else "tool 't' parameters at #"
    )


PLACE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "book_args",
    "type": "object",
    "$defs": {
        "Place": {
            "title": "Place",
            "description": "A city and its country code.",
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 1, "title": "City"},
                "country": {"type": "string", "pattern": "^[A-Z]{2}$", "examples": ["NO"]},
            },
            "required": ["city", "country"],
            "additionalProperties": False,
        },
        "Window": {
            "type": "object",
            "properties": {
                "start": {"type": "string", "format": "date"},
                "nights": {"type": "integer", "minimum": 1},
            },
            "required": ["start", "nights"],
        },
    },
    "properties": {
        "place": {"$ref": "#/$defs/Place", "description": "Where."},
        "window": {"$ref": "#/$defs/Window"},
        "budget": {"type": "number", "multipleOf": 0.5, "exclusiveMinimum": 0, "default": 100},
        "units": {"enum": ["C", "F"], "default": "C"},
        "contact": {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"kind": {"const": "email"}, "to": {"type": "string", "format": "email"}},
                    "required": ["kind", "to"],
                },
                {
                    "type": "object",
                    "properties": {"kind": {"const": "ip"}, "to": {"type": "string", "format": "ipv4"}},
                    "required": ["kind", "to"],
                },
            ],
            "discriminator": {"propertyName": "kind"},
        },
        "tags": {
            "type": "array",
            "prefixItems": [{"const": "trip"}],
            "items": {"type": "string"},
            "uniqueItems": True,
            "maxItems": 3,
        },
    },
    "required": ["place", "window"],
}

GOOD = {
    "place": {"city": "Oslo", "country": "NO"},
    "window": {"start": "2024-02-29", "nights": 2},
    "budget": 150.5,
    "units": "C",
    "contact": {"kind": "email", "to": "a@b.no"},
    "tags": ["trip", "ski"],
}
BAD = {
    "place": {"city": "", "country": "Norway", "zip": "0150"},
    "window": {"start": "2023-02-29", "nights": 0},
    "budget": 150.25,
    "units": "K",
    "contact": {"kind": "ip", "to": "a@b.no"},
    "tags": ["trip", "ski", "ski"],
}
BAD_PROBLEMS = [
    "arguments.place.city: shorter than 1 characters",
    "arguments.place.country: \"Norway\" does not match the pattern '^[A-Z]{2}$'",
    "arguments.place: unexpected property 'zip' (allowed: city, country)",
    'arguments.window.start: "2023-02-29" is not a valid date',
    "arguments.window.nights: 0 is less than the minimum 1",
    "arguments.budget: 150.25 is not a multiple of 0.5",
    'arguments.units: "K" is not one of "C", "F"',
    "arguments.contact: matches none of the allowed shapes",
    "arguments.tags: items 1 and 2 are equal",
]


def test_bad_arguments_are_all_reported_to_the_model_and_never_reach_the_handler(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    def book(*, context: ToolContext, **arguments: Any) -> str:
        seen.append(arguments)
        return "booked"

    path = str(tmp_path / "store")
    with Tract.open(path, clock=FakeClock()) as t:
        t.user("Book Oslo.")
        executor = ToolExecutor(t, profile=None)
        executor.register(ToolDefinition("book", "Book a stay.", PLACE_SCHEMA, book))
        llm = ScriptedLLM([call("c1", "book", BAD), call("c2", "book", GOOD), "Booked."])
        result = toolkit.run(t, llm, executor)
        assert (result.text, result.steps) == ("Booked.", 3)
        assert seen == [GOOD]  # the bad call never ran
        error = t.compile().messages[2]
        assert error.is_error
        for problem in BAD_PROBLEMS:
            assert problem in error.content
        assert error.content.count("; arguments.") == len(BAD_PROBLEMS) - 1  # nothing else, nothing twice
        # what the model was told on its next call
        assert any(m.content == error.content for m in llm.calls[1].messages)

    code = CliRunner().invoke(cli, ["--store", path, "usage", "--json"])
    assert code.exit_code == 0, code.stderr
    failed, ok = json.loads(code.stdout)
    assert (failed["tool_name"], failed["status"], ok["status"]) == ("book", "error", "success")
    assert "is not a multiple of 0.5" in failed["error"]


@pytest.mark.parametrize(
    "name", ["date-time", "time", "duration", "uri", "uri-reference", "binary", "password"]
)
def test_the_formats_pydantic_emits_register(name: str) -> None:
    ToolDefinition("t", "A tool.", _params(x={"type": "string", "format": name}), _handler)


def test_annotation_formats_check_nothing_and_checked_formats_report_an_example(tract: Tract) -> None:
    schema = _params(
        data={"type": "string", "format": "binary"},
        secret={"type": "string", "format": "password", "writeOnly": True},
        when={"type": "string", "format": "date-time"},
        wait={"type": "string", "format": "duration"},
        link={"type": "string", "format": "uri"},
    )
    seen: list[dict[str, Any]] = []

    def handler(*, context: ToolContext, **kwargs: Any) -> str:
        seen.append(kwargs)
        return "ok"

    ex = ToolExecutor(tract)
    ex.register(ToolDefinition("t", "A tool.", schema, handler))
    good = {
        "data": "\x00 any text",
        "secret": "",
        "when": "2024-05-01t12:30:00z",
        "wait": "P1W",
        "link": "a:b",
    }
    assert ex.execute("t", good).success
    bad = ex.execute("t", {**good, "when": "2024-05-01T12:30:00", "wait": "P1", "link": "/relative"})
    assert not bad.success
    assert (
        'arguments.when: "2024-05-01T12:30:00" is not a valid date-time (RFC 3339 with an offset' in bad.error
    )
    assert 'arguments.wait: "P1" is not a valid duration (ISO 8601, e.g. P3D' in bad.error
    assert 'arguments.link: "/relative" is not a valid uri (an absolute URI' in bad.error
    assert seen == [good]


def test_the_same_schema_agrees_with_jsonschema() -> None:
    import jsonschema

    from tractkv.toolkit.schema import FORMATS, validate

    checker = jsonschema.FormatChecker(formats=sorted(FORMATS))
    jsonschema_errors = list(
        jsonschema.Draft202012Validator(PLACE_SCHEMA, format_checker=checker).iter_errors(BAD)
    )
    assert validate(GOOD, PLACE_SCHEMA) == []
    assert len(validate(BAD, PLACE_SCHEMA)) == len(BAD_PROBLEMS) == len(jsonschema_errors)


RECORDED_ONLY = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Find a key.",
        "parameters": {
            "type": "object",
            "properties": {"key": {"type": "string", "if": {"minLength": 3}, "then": {"pattern": "^k"}}},
            "patternProperties": {"^x-": {"type": "string"}},
            "dependentRequired": {"key": ["scope"]},
            "unevaluatedProperties": False,
            "$dynamicAnchor": "meta",
        },
    },
}


def test_tool_schemas_only_recorded_keep_any_keyword(tract: Tract) -> None:
    tract.set_tools([RECORDED_ONLY])
    tract.user("hi")
    assert tract.get_commit_tools("HEAD") == [RECORDED_ONLY]
    other = {**RECORDED_ONLY, "function": {**RECORDED_ONLY["function"], "name": "other"}}
    tract.user("again", tools=[other])
    assert tract.get_commit_tools("HEAD") == [other]
    with pytest.raises(InvalidInput, match="unsupported keyword '\\$dynamicAnchor'"):
        ToolDefinition("lookup", "Find a key.", RECORDED_ONLY["function"]["parameters"], _handler)


# The keywords registration refused before issue 33: zod 4's records (propertyNames), header maps
# (patternProperties), conditions, contains, dependencies, unevaluatedProperties and hostname, in one tool
NEWER = _params(
    scores={
        "type": "object",
        "propertyNames": {"type": "string", "pattern": "^[a-z]+$"},
        "additionalProperties": {"type": "number"},
    },
    headers={
        "type": "object",
        "patternProperties": {"^x-": {"type": "string"}},
        "additionalProperties": False,
    },
    target={
        "type": "object",
        "properties": {"kind": {"enum": ["host", "ip"]}, "value": {"type": "string"}},
        "required": ["kind", "value"],
        "if": {"properties": {"kind": {"const": "host"}}},
        "then": {"properties": {"value": {"format": "hostname"}}},
        "else": {"properties": {"value": {"format": "ipv4"}}},
    },
    steps={"type": "array", "contains": {"const": "deploy"}, "maxContains": 1},
    auth={
        "type": "object",
        "properties": {"user": {"type": "string"}, "password": {"type": "string"}},
        "dependentRequired": {"user": ["password"]},
    },
    options={
        "type": "object",
        "allOf": [{"properties": {"verbose": {"type": "boolean"}}}],
        "dependentSchemas": {"dry": {"properties": {"dry": {"const": True}}}},
        "unevaluatedProperties": False,
    },
)
NEWER_GOOD = {
    "scores": {"alice": 1, "bob": 2.5},
    "headers": {"x-trace": "1"},
    "target": {"kind": "host", "value": "api.example.com"},
    "steps": ["build", "deploy"],
    "auth": {"user": "u", "password": "p"},
    "options": {"verbose": True, "dry": True},
}
NEWER_BAD = {
    "scores": {"alice": 1, "Bob": 2, "carol": "x"},
    "headers": {"x-trace": 1, "accept": "*/*"},
    "target": {"kind": "ip", "value": "api.example.com"},
    "steps": ["deploy", "test", "deploy"],
    "auth": {"user": "u"},
    "options": {"verbose": True, "dry": False, "color": "red"},
}
NEWER_PROBLEMS = [
    "the name of arguments.scores.Bob: \"Bob\" does not match the pattern '^[a-z]+$'",
    "arguments.scores.carol: expected number, got string",
    "arguments.headers.x-trace: expected string, got integer",
    "arguments.headers: unexpected property 'accept' (allowed: none, or a name matching '^x-')",
    'arguments.target.value: "api.example.com" is not a valid ipv4 (applies because it does not match the '
    "schema's 'if')",
    "arguments.steps: more than 1 items match the 'contains' schema",
    "arguments.auth: missing property 'password' (required when 'user' is present)",
    "arguments.options.dry: must be true (applies because property 'dry' is present)",
    "arguments.options: unexpected property 'color' (no 'properties', 'patternProperties' or "
    "'additionalProperties' here or in a subschema that applies covers it)",
]


def test_the_keywords_once_refused_register_and_are_enforced(tract: Tract) -> None:
    import jsonschema

    seen: list[dict[str, Any]] = []

    def deploy(*, context: ToolContext, **arguments: Any) -> str:
        seen.append(arguments)
        return "deployed"

    ex = ToolExecutor(tract, profile=None)
    ex.register(ToolDefinition("deploy", "Deploy.", NEWER, deploy))
    assert ex.execute("deploy", NEWER_GOOD).success
    bad = ex.execute("deploy", NEWER_BAD)
    assert not bad.success
    assert sorted(bad.error.removeprefix("invalid arguments: ").split("; ")) == sorted(NEWER_PROBLEMS)
    assert seen == [NEWER_GOOD]  # the bad call never ran
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    assert jsonschema.Draft202012Validator(NEWER, format_checker=checker).is_valid(NEWER_GOOD)
    jsonschema_errors = list(
        jsonschema.Draft202012Validator(NEWER, format_checker=checker).iter_errors(NEWER_BAD)
    )
    assert len(jsonschema_errors) == len(NEWER_PROBLEMS)  # one problem each, as jsonschema finds them
    assert [u.status for u in tract.tool_usages()] == ["success", "error"]
