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
        _params(x={"if": {"type": "string"}, "then": {"minLength": 1}}),
        "unsupported keyword 'if' at #/properties/x/if",
    ),
    (
        _params(x={"type": "object", "patternProperties": {"^a": {}}}),
        "unsupported keyword 'patternProperties' at #/properties/x/patternProperties",
    ),
    (
        _params(x={"dependentRequired": {"a": ["b"]}}),
        "unsupported keyword 'dependentRequired' at #/properties/x/dependentRequired",
    ),
    (
        {**_params(), "unevaluatedProperties": False},
        "unsupported keyword 'unevaluatedProperties' at #/unevaluatedProperties",
    ),
    (
        _params(x={"type": "array", "items": {"contains": {"const": 1}}}),
        "unsupported keyword 'contains' at #/properties/x/items/contains",
    ),
    (_params(x={"propertyNames": {"pattern": "^a"}}), "unsupported keyword 'propertyNames'"),
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
    (
        _params(x={"type": "string", "format": "hostname"}),  # jsonschema checks it (fqdn); not mirrored here
        'unknown format "hostname" (checked: date, date-time, duration, email',
    ),
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
    with pytest.raises(InvalidInput, match="unsupported keyword 'if'"):
        ToolDefinition("lookup", "Find a key.", RECORDED_ONLY["function"]["parameters"], _handler)
