"""Tools from real Python types: schemas, converted arguments, OpenAI strict mode (toolkit/typed.py)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import subprocess
import sys
import textwrap
import uuid
from typing import Annotated, Any, Literal, NotRequired, Required, TypedDict

import pydantic
import pytest
from pydantic import AnyUrl, BaseModel, Field, SecretStr, field_validator

from tractkv import Tract, toolkit
from tractkv.errors import InvalidInput
from tractkv.llm import ScriptedLLM
from tractkv.toolkit import ToolContext, ToolDefinition, ToolExecutor, tool
from tractkv.toolkit.typed import to_strict

from .conftest import call

# --- the types (module level, so their string annotations resolve) ----------------------------------------


class Units(enum.Enum):
    C = "c"
    F = "f"


@dataclasses.dataclass
class Window:
    """A time window in hours."""

    start: int
    end: int = 24
    label: str = dataclasses.field(default="", metadata={"description": "Shown to the user."})
    tags: list[str] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError("end before start")


@dataclasses.dataclass
class Tree:
    name: str
    children: list[Tree] = dataclasses.field(default_factory=list)


class Options(TypedDict, total=False):
    verbose: bool
    depth: Required[int]


class Filter(TypedDict):
    field: str
    value: NotRequired[str | int]


class Place(BaseModel):
    """A place on Earth."""

    name: str = Field(description="The city.")
    lat: float = Field(ge=-90, le=90)
    units: Units = Units.C

    @field_validator("name")
    @classmethod
    def no_atlantis(cls, value: str) -> str:
        if value == "Atlantis":
            raise ValueError("Atlantis is not a place")
        return value


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


def _params(func: Any, **kwargs: Any) -> dict[str, Any]:
    return ToolDefinition.from_function(func, **kwargs).parameters


# --- schemas: stdlib types --------------------------------------------------------------------------------

WINDOW_DEF = {
    "type": "object",
    "description": "A time window in hours.",
    "properties": {
        "start": {"type": "integer"},
        "end": {"type": "integer", "default": 24},
        "label": {"type": "string", "description": "Shown to the user.", "default": ""},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["start"],
    "additionalProperties": False,
}


def test_a_dataclass_parameter_becomes_a_def_with_field_metadata_and_defaults() -> None:
    def plan(window: Window, *, context: ToolContext) -> str:
        """Plan a window.

        Args:
            window: When to run.
        """
        return ""

    assert _params(plan) == {
        "type": "object",
        "properties": {"window": {"$ref": "#/$defs/Window", "description": "When to run."}},
        "required": ["window"],
        "additionalProperties": False,
        "$defs": {"Window": WINDOW_DEF},
    }


def test_a_recursive_dataclass_refers_to_itself() -> None:
    def walk(tree: Tree, *, context: ToolContext) -> str:
        """Walk a tree."""
        return ""

    assert _params(walk)["$defs"] == {
        "Tree": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
            },
            "required": ["name"],
            "additionalProperties": False,
        }
    }


def test_typeddicts_with_total_false_required_and_not_required() -> None:
    def search(options: Options, filters: list[Filter], *, context: ToolContext) -> str:
        """Search."""
        return ""

    params = _params(search)
    assert params["properties"] == {
        "options": {"$ref": "#/$defs/Options"},
        "filters": {"type": "array", "items": {"$ref": "#/$defs/Filter"}},
    }
    assert params["$defs"] == {
        "Options": {
            "type": "object",
            "properties": {"verbose": {"type": "boolean"}, "depth": {"type": "integer"}},
            "required": ["depth"],
            "additionalProperties": False,
        },
        "Filter": {
            "type": "object",
            "properties": {"field": {"type": "string"}, "value": {"type": ["string", "integer"]}},
            "required": ["field"],
            "additionalProperties": False,
        },
    }


def test_enums_literals_annotated_optional_unions_and_containers() -> None:
    def many(
        units: Units,
        mode: Literal["fast", "slow"],
        count: Annotated[int, "How many results."],
        pair: tuple[int, str],
        labels: set[str],
        by_name: dict[str, Window],
        either: Window | Tree,
        maybe: Units | None = None,
        nested: list[dict[str, list[Window]]] | None = None,
        *,
        context: ToolContext,
    ) -> str:
        """Many kinds."""
        return ""

    params = _params(many)
    assert params["properties"] == {
        "units": {"type": "string", "enum": ["c", "f"]},
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "count": {"type": "integer", "description": "How many results."},
        "pair": {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "minItems": 2,
            "maxItems": 2,
        },
        "labels": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "by_name": {"type": "object", "additionalProperties": {"$ref": "#/$defs/Window"}},
        "either": {"anyOf": [{"$ref": "#/$defs/Window"}, {"$ref": "#/$defs/Tree"}]},
        "maybe": {"type": ["string", "null"], "enum": ["c", "f", None], "default": None},
        "nested": {
            "type": ["array", "null"],
            "items": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"$ref": "#/$defs/Window"}},
            },
            "default": None,
        },
    }
    assert params["required"] == ["units", "mode", "count", "pair", "labels", "by_name", "either"]
    assert sorted(params["$defs"]) == ["Tree", "Window"]


def test_types_without_a_json_equivalent_are_refused() -> None:
    def bad(when: complex, *, context: ToolContext) -> str:
        """Bad."""
        return ""

    def bad_keys(table: dict[int, str], *, context: ToolContext) -> str:
        """Bad keys."""
        return ""

    with pytest.raises(InvalidInput, match="no JSON Schema equivalent"):
        tool(bad)
    with pytest.raises(InvalidInput, match="keys must be strings"):
        tool(bad_keys)


class Nothing(enum.Enum):
    """An enum with no members: no value can be given for it."""


def test_an_enum_without_members_is_refused_with_a_plain_message() -> None:
    def pick(choice: Nothing, *, context: ToolContext) -> str:
        """Pick."""
        return ""

    def keyed(table: dict[Nothing, int], *, context: ToolContext) -> str:
        """Keyed."""
        return ""

    for func in (pick, keyed):
        with pytest.raises(InvalidInput, match=r"enum with no members admits no value"):
            tool(func)


# --- schemas: pydantic -------------------------------------------------------------------------------------


def test_pydantic_models_fields_and_discriminated_unions_use_pydantic_without_titles() -> None:
    def weather(
        place: Place,
        stops: list[Place],
        pet: Annotated[Cat | Dog, Field(discriminator="kind")],
        days: Annotated[int, Field(ge=1, le=7, description="Days ahead.")] = 3,
        *,
        context: ToolContext,
    ) -> str:
        """Weather for a place.

        Args:
            place: Where.
        """
        return ""

    params = _params(weather)
    assert params["properties"] == {
        "place": {"$ref": "#/$defs/Place", "description": "Where."},
        "stops": {"type": "array", "items": {"$ref": "#/$defs/Place"}},
        "pet": {
            "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
            "discriminator": {
                "propertyName": "kind",
                "mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"},
            },
        },
        "days": {"type": "integer", "minimum": 1, "maximum": 7, "description": "Days ahead.", "default": 3},
    }
    assert params["required"] == ["place", "stops", "pet"]
    assert params["$defs"]["Place"] == {
        "description": "A place on Earth.",
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The city."},
            "lat": {"type": "number", "minimum": -90, "maximum": 90},
            "units": {"$ref": "#/$defs/Units", "default": "c"},
        },
        "required": ["name", "lat"],
    }
    assert params["$defs"]["Units"] == {"type": "string", "enum": ["c", "f"]}
    assert "title" not in json.dumps(params)


# --- conversion --------------------------------------------------------------------------------------------


def _recording(tract: Tract, func: Any, **register: Any) -> tuple[ToolExecutor, list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []
    ex = ToolExecutor(tract)

    def handler(*, context: ToolContext, **kwargs: Any) -> str:
        calls.append(kwargs)
        return "ok"

    # the real function gives the schema and the types; the recorder stands in as its handler
    definition = ToolDefinition.from_function(func, **register)
    ex.register(attrs_evolve(definition, handler=handler))
    return ex, calls


def attrs_evolve(definition: ToolDefinition, **changes: Any) -> ToolDefinition:
    import attrs

    return attrs.evolve(definition, **changes)


def plan(
    window: Window,
    units: Units,
    tree: Tree,
    options: Options,
    places: list[Place],
    pair: tuple[int, str] = (0, ""),
    labels: frozenset[str] = frozenset(),
    ratio: float = 1.0,
    pet: Cat | Dog | None = None,
    *,
    context: ToolContext,
) -> str:
    """Plan something."""
    return ""


GOOD = {
    "window": {"start": 1, "tags": ["a"]},
    "units": "f",
    "tree": {"name": "root", "children": [{"name": "leaf"}]},
    "options": {"depth": 2},
    "places": [{"name": "Oslo", "lat": 59.9}, {"name": "Lima", "lat": -12, "units": "f"}],
    "pair": [3, "x"],
    "labels": ["a", "b"],
    "ratio": 2,
    "pet": {"kind": "dog", "good": True},
}


def test_the_handler_receives_its_arguments_converted_to_the_declared_types(tract: Tract) -> None:
    ex, calls = _recording(tract, plan)
    result = ex.execute("plan", GOOD)
    assert result.success, result.error
    (got,) = calls
    assert got["window"] == Window(start=1, end=24, label="", tags=["a"])
    assert got["units"] is Units.F
    assert got["tree"] == Tree("root", [Tree("leaf")])
    assert got["options"] == {"depth": 2}
    assert got["places"] == [Place(name="Oslo", lat=59.9), Place(name="Lima", lat=-12.0, units=Units.F)]
    assert got["pair"] == (3, "x")
    assert got["labels"] == frozenset({"a", "b"})
    assert got["ratio"] == 2.0
    assert isinstance(got["ratio"], float)
    assert got["pet"] == Dog(kind="dog", good=True)
    # the usage record keeps the JSON the model sent
    assert result.usage_objects[-1].arguments == GOOD


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"units": "k"}, "arguments.units"),
        ({"window": {"start": "1"}}, "arguments.window.start"),
        ({"window": {"start": 5, "end": 1}}, "end before start"),  # __post_init__
        ({"window": {"end": 3}}, "'start'"),
        ({"tree": {"name": "r", "children": [{"name": 1}]}}, "arguments.tree.children[0].name"),
        ({"places": [{"name": "Atlantis", "lat": 0}]}, "Atlantis is not a place"),  # a pydantic validator
        ({"places": [{"name": "Oslo", "lat": 91}]}, "arguments.places[0].lat"),
        ({"pet": {"kind": "cow"}}, "arguments.pet"),
        ({"pair": [1, 2]}, "arguments.pair[1]"),
    ],
)
def test_bad_arguments_never_reach_the_handler(tract: Tract, change: dict[str, Any], expected: str) -> None:
    ex, calls = _recording(tract, plan)
    result = ex.execute("plan", {**GOOD, **change})
    assert not result.success
    assert expected in result.error
    assert calls == []
    assert result.usage_objects[-1].status == "error"


def test_every_problem_is_reported_at_once(tract: Tract) -> None:
    ex, calls = _recording(tract, plan)
    bad = {**GOOD, "units": "k", "places": [{"name": "Atlantis", "lat": 0}], "window": {"start": 5, "end": 1}}
    result = ex.execute("plan", bad)
    assert not result.success
    assert calls == []
    for part in ("arguments.units", "Atlantis is not a place", "end before start"):
        assert part in result.error


def test_a_converter_that_raises_is_an_error_result(tract: Tract) -> None:
    class Boom:
        def convert(self, arguments: Any) -> Any:
            raise RuntimeError("converter bug")

    ex, calls = _recording(tract, plan)
    definition = ex.get("plan")
    assert definition is not None
    ex.register(attrs_evolve(definition, converter=Boom()), replace=True)
    result = ex.execute("plan", GOOD)
    assert (result.success, calls) == (False, [])
    assert "converter bug" in result.error


def test_the_agent_loop_reports_bad_arguments_and_the_model_retries(tract: Tract) -> None:
    seen: list[tuple[Place, Units]] = []
    ex = ToolExecutor(tract)

    @ex.register
    def forecast(place: Place, units: Units = Units.C, *, context: ToolContext) -> str:
        """The forecast for a place.

        Args:
            place: Where.
            units: Temperature units.
        """
        seen.append((place, units))
        return f"{place.name}: 20 degrees {units.name}"

    tract.user("Weather in Oslo?")
    llm = ScriptedLLM(
        [
            call("c1", "forecast", {"place": {"name": "Oslo", "lat": 600}, "units": "kelvin"}),
            call("c2", "forecast", {"place": {"name": "Oslo", "lat": 59.9}, "units": "f"}),
            "Oslo: 20 degrees.",
        ]
    )
    result = toolkit.run(tract, llm, ex, max_steps=5)
    assert (result.text, result.steps) == ("Oslo: 20 degrees.", 3)
    assert seen == [(Place(name="Oslo", lat=59.9), Units.F)]
    messages = tract.compile().messages
    first, second = messages[2], messages[4]
    assert first.is_error
    assert "arguments.place" in first.content
    assert "arguments.units" in first.content
    assert (second.is_error, second.content) == (False, "Oslo: 20 degrees F")
    assert [u.status for u in tract.tool_usages()] == ["error", "success"]
    # the model was offered the pydantic-made schema
    (offered,) = llm.calls[0].tools or []
    assert offered["function"]["parameters"]["properties"]["place"] == {
        "$ref": "#/$defs/Place",
        "description": "Where.",
    }


# --- OpenAI strict mode ------------------------------------------------------------------------------------


def lookup(
    key: str,
    window: Window | None = None,
    mode: Literal["a", "b"] = "a",
    limit: int | None = None,
    *,
    context: ToolContext,
) -> str:
    """Look a key up."""
    return ""


def test_strict_schema_shape_and_the_strict_flag() -> None:
    definition = ToolDefinition.from_function(lookup, strict=True)
    window = {
        "type": "object",
        "description": "A time window in hours.",
        "properties": {
            "start": {"type": "integer"},
            "end": {"type": ["integer", "null"]},
            "label": {"type": ["string", "null"], "description": "Shown to the user."},
            "tags": {"type": ["array", "null"], "items": {"type": "string"}},
        },
        "required": ["start", "end", "label", "tags"],
        "additionalProperties": False,
    }
    assert definition.parameters == {
        "type": "object",
        "properties": {
            "key": {"type": "string"},
            "window": {"anyOf": [{"$ref": "#/$defs/Window"}, {"type": "null"}]},
            "mode": {"type": ["string", "null"], "enum": ["a", "b", None]},
            "limit": {"type": ["integer", "null"]},
        },
        "required": ["key", "window", "mode", "limit"],
        "additionalProperties": False,
        "$defs": {"Window": window},
    }
    openai = definition.to_openai()
    assert openai["function"]["strict"] is True
    assert "strict" not in definition.to_anthropic()
    assert "strict" not in ToolDefinition.from_function(lookup).to_openai()["function"]


def test_strict_pydantic_schema_inlines_refs_beside_keywords_and_turns_discriminated_oneof_into_anyof() -> (
    None
):
    def pets(
        place: Place, pet: Annotated[Cat | Dog, Field(discriminator="kind")], *, context: ToolContext
    ) -> str:
        """Pets.

        Args:
            place: Where.
        """
        return ""

    params = _params(pets, strict=True)
    assert params["properties"]["place"] == {
        "description": "Where.",
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The city."},
            "lat": {"type": "number", "minimum": -90, "maximum": 90},
            "units": {"anyOf": [{"$ref": "#/$defs/Units"}, {"type": "null"}]},  # it has a default
        },
        "required": ["name", "lat", "units"],
        "additionalProperties": False,
    }
    assert params["properties"]["pet"] == {"anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]}
    assert params["$defs"]["Cat"] == {
        "type": "object",
        "properties": {"kind": {"const": "cat", "type": "string"}, "lives": {"type": "integer"}},
        "required": ["kind", "lives"],
        "additionalProperties": False,
    }
    assert params["$defs"]["Place"]["properties"] == params["properties"]["place"]["properties"]


def free_form(table: dict[str, int], *, context: ToolContext) -> str:
    """Free form."""
    return ""


def fixed_pair(pair: tuple[int, str], *, context: ToolContext) -> str:
    """A pair."""
    return ""


def anything(value: Any, *, context: ToolContext) -> str:
    """Anything."""
    return ""


def short(text: Annotated[str, Field(min_length=2)], *, context: ToolContext) -> str:
    """Short."""
    return ""


@pytest.mark.parametrize(
    ("func", "message"),
    [
        (free_form, "free-form keys"),
        (fixed_pair, "prefixItems"),
        (anything, "needs a type"),
        (short, "minLength"),
    ],
)
def test_types_strict_mode_cannot_express_are_refused(func: Any, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        ToolDefinition.from_function(func, strict=True)
    ToolDefinition.from_function(func)  # fine without strict


def test_a_hand_written_strict_definition_must_already_be_strict() -> None:
    def handler(a: str | None = None, *, context: ToolContext) -> str:
        return ""

    loose = {"type": "object", "properties": {"a": {"type": "string"}}}
    with pytest.raises(InvalidInput, match="strict form"):
        ToolDefinition("t", "A tool.", loose, handler, strict=True)
    strict = to_strict(loose, "t")
    assert strict == {
        "type": "object",
        "properties": {"a": {"type": ["string", "null"]}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert (
        ToolDefinition("t", "A tool.", strict, handler, strict=True).to_openai()["function"]["strict"] is True
    )


def test_in_strict_mode_a_null_for_an_optional_parameter_becomes_its_default(tract: Tract) -> None:
    got: list[tuple[Any, ...]] = []
    ex = ToolExecutor(tract)

    @ex.register(strict=True)
    def find(
        key: str,
        window: Window | None = None,
        mode: Literal["a", "b"] = "a",
        limit: int | None = 5,
        *,
        context: ToolContext,
    ) -> str:
        """Find a key."""
        got.append((key, window, mode, limit))
        return "ok"

    assert ex.schemas()[0]["function"]["strict"] is True
    args = {
        "key": "k",
        "window": {"start": 1, "end": None, "label": None, "tags": None},
        "mode": None,
        "limit": None,
    }
    assert ex.execute("find", args).success
    # mode's null stands for "not given"; limit admits null itself, so its null stays
    assert got == [("k", Window(start=1), "a", None)]
    assert ex.execute("find", {"key": "k", "window": None, "mode": "b", "limit": 2}).success
    assert got[-1] == ("k", None, "b", 2)


# --- pydantic stays optional --------------------------------------------------------------------------------


def _run_python(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_import_tractkv_and_registering_stdlib_types_do_not_import_pydantic() -> None:
    out = _run_python(
        """
        import sys, dataclasses, enum
        import tractkv
        from tractkv import Tract
        from tractkv.toolkit import ToolExecutor
        assert "pydantic" not in sys.modules, "import tractkv"

        class Units(enum.Enum):
            C = "c"

        @dataclasses.dataclass
        class Window:
            start: int

        t = Tract.open()
        ex = ToolExecutor(t)

        @ex.register(strict=True)
        def plan(window: Window, units: Units, *, context) -> str:
            '''Plan.'''
            return f"{window.start} {units.name}"

        print(ex.execute("plan", {"window": {"start": 3}, "units": "c"}).output)
        print("pydantic" in sys.modules)
        t.close()
        """
    )
    assert out.split() == ["3", "C", "False"]


def test_without_pydantic_stdlib_typed_tools_register_and_run() -> None:
    out = _run_python(
        """
        import sys
        sys.modules["pydantic"] = None  # importing pydantic now fails, as if it were not installed
        import dataclasses, enum, json
        from typing import Literal, TypedDict, NotRequired
        from tractkv import Tract, toolkit
        from tractkv.llm import ScriptedLLM
        from tractkv.toolkit import ToolExecutor

        class Units(enum.Enum):
            C = "c"
            F = "f"

        @dataclasses.dataclass
        class Window:
            start: int
            end: int = 24

        class Opts(TypedDict):
            depth: int
            note: NotRequired[str]

        t = Tract.open()
        ex = ToolExecutor(t)
        seen = []

        @ex.register
        def plan(window: Window, units: Units, opts: Opts, mode: Literal["a", "b"] = "a", *, context) -> str:
            '''Plan.'''
            seen.append((window, units, opts, mode))
            return "planned"

        def call(i, args):
            fn = {"name": "plan", "arguments": json.dumps(args)}
            return {"role": "assistant", "content": None, "tool_calls": [{"id": i, "type": "function", "function": fn}]}

        t.user("plan it")
        llm = ScriptedLLM([
            call("c1", {"window": {"start": "x"}, "units": "k", "opts": {"depth": 1}}),
            call("c2", {"window": {"start": 1}, "units": "f", "opts": {"depth": 1}, "mode": "b"}),
            "done",
        ])
        print(toolkit.run(t, llm, ex, max_steps=5).text)
        print(seen == [(Window(1, 24), Units.F, {"depth": 1}, "b")])
        print(t.compile().messages[2].is_error)
        print(sorted(ex.schemas()[0]["function"]["parameters"]["$defs"]))
        t.close()
        """
    )
    assert out.splitlines() == ["done", "True", "True", "['Opts', 'Window']"]


def test_pydantic_is_really_installed_here() -> None:
    # the pydantic tests above are not vacuous: the dev venv has pydantic 2
    assert pydantic.VERSION.startswith("2.")


def test_in_strict_mode_a_null_inside_a_model_becomes_the_fields_default(tract: Tract) -> None:
    got: list[Place] = []
    ex = ToolExecutor(tract)

    @ex.register(strict=True)
    def visit(place: Place, *, context: ToolContext) -> str:
        """Visit a place."""
        got.append(place)
        return "ok"

    result = ex.execute("visit", {"place": {"name": "Oslo", "lat": 59.9, "units": None}})
    assert result.success, result.error
    assert got == [Place(name="Oslo", lat=59.9, units=Units.C)]


def test_in_strict_mode_a_set_drops_unique_items_and_collapses_duplicates(tract: Tract) -> None:
    got: list[set[str]] = []
    ex = ToolExecutor(tract)

    @ex.register(strict=True)
    def tag(labels: set[str], *, context: ToolContext) -> str:
        """Tag."""
        got.append(labels)
        return "ok"

    assert ex.schemas()[0]["function"]["parameters"]["properties"]["labels"] == {
        "type": "array",
        "items": {"type": "string"},
    }
    assert ex.execute("tag", {"labels": ["a", "b", "a"]}).success
    assert got == [{"a", "b"}]


def test_a_model_beside_a_typing_typeddict_and_a_dataclass_both_work(tract: Tract) -> None:
    got: list[tuple[Any, ...]] = []
    ex = ToolExecutor(tract)

    @ex.register
    def mixed(
        place: Place, options: Options, window: Annotated[Window, {"unhashable": []}], *, context: ToolContext
    ) -> str:
        """Mixed: pydantic for the model, the stdlib path for the rest (pydantic refuses typing.TypedDict on 3.11)."""
        got.append((place, options, window))
        return "ok"

    params = ex.schemas()[0]["function"]["parameters"]
    assert params["properties"]["options"] == {"$ref": "#/$defs/Options"}
    assert sorted(params["$defs"]) == ["Options", "Place", "Units", "Window"]
    result = ex.execute(
        "mixed", {"place": {"name": "Oslo", "lat": 1}, "options": {"depth": 1}, "window": {"start": 2}}
    )
    assert result.success, result.error
    assert got == [(Place(name="Oslo", lat=1.0), {"depth": 1}, Window(start=2))]


# --- dates, times, durations, UUIDs, URLs ------------------------------------------------------------------


@dataclasses.dataclass
class Meeting:
    start: dt.datetime
    length: dt.timedelta
    room: uuid.UUID | None = None


class Booking(TypedDict):
    on: dt.date
    at: NotRequired[dt.time]


def schedule(
    when: dt.datetime,
    day: dt.date,
    at: dt.time,
    wait: dt.timedelta,
    ref: uuid.UUID,
    meeting: Meeting,
    bookings: list[Booking],
    note: str | dt.datetime = "",
    later: dt.datetime | None = None,
    *,
    context: ToolContext,
) -> str:
    """Schedule something."""
    return ""


UTC = dt.UTC
PLUS2 = dt.timezone(dt.timedelta(hours=2))
REF = "12345678-1234-5678-1234-567812345678"
WHEN_GOOD = {
    "when": "2024-05-01t12:30:00.1234567z",
    "day": "2024-02-29",
    "at": "23:59:59.5+02:00",
    "wait": "P9DT3H4M5.5S",
    "ref": REF,
    "meeting": {"start": "2024-05-01T09:00:00-00:30", "length": "PT45M", "room": REF},
    "bookings": [{"on": "2024-05-02"}, {"on": "2024-05-03", "at": "08:00:00Z"}],
    "note": "2024-05-01T12:30:00Z",
    "later": None,
}


def test_dates_times_durations_and_uuids_become_formatted_strings() -> None:
    params = _params(schedule)
    props = params["properties"]
    assert props["when"] == {"type": "string", "format": "date-time"}
    assert props["day"] == {"type": "string", "format": "date"}
    assert props["at"] == {"type": "string", "format": "time"}
    assert props["wait"] == {"type": "string", "format": "duration"}
    assert props["ref"] == {"type": "string", "format": "uuid"}
    assert props["meeting"] == {"$ref": "#/$defs/Meeting"}
    assert props["bookings"] == {"type": "array", "items": {"$ref": "#/$defs/Booking"}}
    # a plain string beside a date-time stays a plain string (a merged "format" would refuse it)
    assert props["note"] == {
        "anyOf": [{"type": "string"}, {"type": "string", "format": "date-time"}],
        "default": "",
    }
    assert props["later"] == {"type": ["string", "null"], "format": "date-time", "default": None}
    assert params["$defs"]["Meeting"]["properties"] == {
        "start": {"type": "string", "format": "date-time"},
        "length": {"type": "string", "format": "duration"},
        "room": {"type": ["string", "null"], "format": "uuid", "default": None},
    }
    assert params["$defs"]["Booking"] == {
        "type": "object",
        "properties": {
            "on": {"type": "string", "format": "date"},
            "at": {"type": "string", "format": "time"},
        },
        "required": ["on"],
        "additionalProperties": False,
    }


def test_dates_times_durations_and_uuids_reach_the_handler_converted(tract: Tract) -> None:
    ex, calls = _recording(tract, schedule)
    result = ex.execute("schedule", WHEN_GOOD)
    assert result.success, result.error
    (got,) = calls
    assert got["when"] == dt.datetime(
        2024, 5, 1, 12, 30, 0, 123456, tzinfo=UTC
    )  # fraction cut at microseconds
    assert type(got["day"]) is dt.date
    assert got["day"] == dt.date(2024, 2, 29)
    assert got["at"] == dt.time(23, 59, 59, 500000, tzinfo=PLUS2)
    assert got["wait"] == dt.timedelta(days=9, hours=3, minutes=4, seconds=5.5)
    assert got["ref"] == uuid.UUID(REF)
    start = dt.datetime(2024, 5, 1, 9, 0, tzinfo=dt.timezone(-dt.timedelta(minutes=30)))
    assert got["meeting"] == Meeting(start=start, length=dt.timedelta(minutes=45), room=uuid.UUID(REF))
    assert got["bookings"] == [
        {"on": dt.date(2024, 5, 2)},
        {"on": dt.date(2024, 5, 3), "at": dt.time(8, 0, tzinfo=UTC)},
    ]
    assert got["note"] == "2024-05-01T12:30:00Z"  # str comes first in the union
    assert got["later"] is None
    assert result.usage_objects[-1].arguments == WHEN_GOOD  # the record keeps the JSON the model sent


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"when": "2024-05-01T12:30:00"}, 'arguments.when: "2024-05-01T12:30:00" is not a valid date-time'),
        ({"when": "2024-05-01 12:30:00Z"}, "arguments.when"),
        ({"when": "2016-12-31T23:59:60Z"}, "arguments.when"),  # a leap second: jsonschema refuses it too
        ({"day": "2023-02-29"}, "arguments.day"),
        ({"at": "12:30:00"}, 'arguments.at: "12:30:00" is not a valid time (RFC 3339 with an offset'),
        ({"wait": "P1M"}, 'arguments.wait: "P1M" has years or months, which have no fixed length'),
        ({"wait": "P1Y2DT1H"}, "has years or months"),
        ({"wait": "PT"}, "arguments.wait"),
        (
            {"wait": "P1e2D"},
            'arguments.wait: "P1e2D" is not a plain ISO 8601 duration',
        ),  # jsonschema accepts it
        ({"wait": "P99999999999D"}, "longer than a timedelta can hold"),
        ({"wait": 3600}, "arguments.wait"),
        ({"ref": "1234567812345678123456781234567g"}, "arguments.ref"),
        ({"meeting": {"start": "yesterday", "length": "PT1H"}}, "arguments.meeting.start"),
        ({"meeting": {"start": "2024-05-01T09:00:00Z", "length": "P2M"}}, "arguments.meeting.length"),
        ({"bookings": [{"on": "2024-05-02", "at": "8am"}]}, "arguments.bookings[0].at"),
    ],
)
def test_bad_dates_times_durations_and_uuids_never_reach_the_handler(
    tract: Tract, change: dict[str, Any], expected: str
) -> None:
    ex, calls = _recording(tract, schedule)
    result = ex.execute("schedule", {**WHEN_GOOD, **change})
    assert not result.success
    assert expected in result.error
    assert calls == []


def test_zero_years_and_months_and_a_negative_duration_convert(tract: Tract) -> None:
    ex, calls = _recording(tract, schedule)
    assert ex.execute("schedule", {**WHEN_GOOD, "wait": "P0Y0M3D"}).success
    assert ex.execute("schedule", {**WHEN_GOOD, "wait": "-PT1,5H"}).success
    assert ex.execute("schedule", {**WHEN_GOOD, "wait": "PT0S"}).success
    assert [c["wait"] for c in calls] == [dt.timedelta(days=3), -dt.timedelta(minutes=90), dt.timedelta(0)]


class Event(BaseModel):
    """An event."""

    starts: dt.datetime
    doors: dt.time
    runs: dt.timedelta
    poster: bytes
    page: AnyUrl
    code: SecretStr
    day: dt.date
    ref: uuid.UUID


EVENT = {
    "starts": "2024-05-01T19:30:00+02:00",
    "doors": "19:00:00Z",
    "runs": "PT2H30M",
    "poster": "PNG...",
    "page": "https://example.com/show?id=1",
    "code": "s3cret",
    "day": "2024-05-01",
    "ref": REF,
}


def test_a_pydantic_model_with_dates_bytes_urls_and_secrets_registers_runs_and_converts(tract: Tract) -> None:
    seen: list[Event] = []
    ex = ToolExecutor(tract)

    @ex.register
    def announce(event: Event, *, context: ToolContext) -> str:
        """Announce an event."""
        seen.append(event)
        return "announced"

    (offered,) = ex.schemas()
    props = offered["function"]["parameters"]["$defs"]["Event"]["properties"]
    assert props == {
        "starts": {"type": "string", "format": "date-time"},
        "doors": {"type": "string", "format": "time"},
        "runs": {"type": "string", "format": "duration"},
        "poster": {"type": "string", "format": "binary"},
        "page": {"type": "string", "format": "uri", "minLength": 1},
        "code": {"type": "string", "format": "password", "writeOnly": True},
        "day": {"type": "string", "format": "date"},
        "ref": {"type": "string", "format": "uuid"},
    }
    result = ex.execute("announce", {"event": EVENT})
    assert result.success, result.error
    (event,) = seen
    assert event.starts == dt.datetime(2024, 5, 1, 17, 30, tzinfo=UTC)
    assert event.doors.hour == 19
    assert event.runs == dt.timedelta(hours=2, minutes=30)
    assert event.poster == b"PNG..."
    assert str(event.page) == "https://example.com/show?id=1"
    assert event.code.get_secret_value() == "s3cret"
    assert (event.day, event.ref) == (dt.date(2024, 5, 1), uuid.UUID(REF))
    bad = ex.execute(
        "announce",
        {
            "event": {
                **EVENT,
                "starts": "2024-05-01T19:30:00",
                "runs": "an hour",
                "page": "/show",
                "doors": "7pm",
            }
        },
    )
    assert not bad.success
    for path in ("starts", "runs", "page", "doors"):
        assert f"arguments.event.{path}:" in bad.error
    assert len(seen) == 1


class Upload(BaseModel):
    data: bytes
    key: SecretStr
    on: dt.date


class Link(BaseModel):
    page: AnyUrl


def test_strict_mode_keeps_openais_formats_and_drops_annotation_formats() -> None:
    params = _params(schedule, strict=True)
    props = params["properties"]
    assert props["when"] == {"type": "string", "format": "date-time"}
    assert props["at"] == {"type": "string", "format": "time"}
    assert props["wait"] == {"type": "string", "format": "duration"}
    assert props["ref"] == {"type": "string", "format": "uuid"}
    assert props["later"] == {"type": ["string", "null"], "format": "date-time"}
    assert params["$defs"]["Booking"]["properties"]["at"] == {"type": ["string", "null"], "format": "time"}

    def upload(item: Upload, *, context: ToolContext) -> str:
        """Upload."""
        return ""

    strict = _params(upload, strict=True)["$defs"]["Upload"]["properties"]
    assert strict == {
        "data": {"type": "string"},
        "key": {"type": "string"},
        "on": {"type": "string", "format": "date"},
    }

    def follow(link: Link, *, context: ToolContext) -> str:
        """Follow."""
        return ""

    with pytest.raises(InvalidInput, match="strict mode does not support format 'uri'"):
        ToolDefinition.from_function(follow, strict=True)
    ToolDefinition.from_function(follow)  # fine without strict


def test_in_strict_mode_dates_convert_and_a_null_for_an_optional_one_is_its_default(tract: Tract) -> None:
    ex, calls = _recording(tract, schedule, strict=True)
    arguments = {
        **WHEN_GOOD,
        "meeting": {**WHEN_GOOD["meeting"], "room": None},
        "bookings": [{"on": "2024-05-02", "at": None}],  # strict: every property sent, null for "not given"
    }
    result = ex.execute("schedule", arguments)
    assert result.success, result.error
    assert calls[0]["meeting"].room is None
    assert calls[0]["bookings"] == [{"on": dt.date(2024, 5, 2)}]
    assert calls[0]["when"].tzinfo == UTC


def test_the_agent_loop_tells_the_model_a_date_time_needs_an_offset(tract: Tract) -> None:
    seen: list[dt.datetime] = []
    ex = ToolExecutor(tract)

    @ex.register
    def remind(at: dt.datetime, every: dt.timedelta | None = None, *, context: ToolContext) -> str:
        """Set a reminder."""
        seen.append(at)
        return f"at {at.isoformat()}"

    tract.user("Remind me at noon")
    llm = ScriptedLLM(
        [
            call("c1", "remind", {"at": "2024-05-01T12:00:00", "every": "P1M"}),
            call("c2", "remind", {"at": "2024-05-01T12:00:00Z", "every": "P30D"}),
            "Done.",
        ]
    )
    result = toolkit.run(tract, llm, ex, max_steps=5)
    assert (result.text, seen) == ("Done.", [dt.datetime(2024, 5, 1, 12, tzinfo=UTC)])
    messages = tract.compile().messages
    assert messages[2].is_error
    for part in ("arguments.at", "with an offset", "arguments.every", "no fixed length"):
        assert part in messages[2].content
    assert messages[4].content == "at 2024-05-01T12:00:00+00:00"


def open_file(
    mode: Literal["auto"] | str, size: int | Literal["max"] = "max", *, context: ToolContext
) -> str:
    """Open a file."""
    return ""


def test_a_union_never_puts_one_members_enum_on_the_others(tract: Tract) -> None:
    props = _params(open_file)["properties"]
    assert props["mode"] == {"anyOf": [{"type": "string", "enum": ["auto"]}, {"type": "string"}]}
    ex, calls = _recording(tract, open_file)
    # the merged schema used to put enum ["auto"] on every string
    assert ex.execute("open_file", {"mode": "custom", "size": 3}).success
    assert calls == [{"mode": "custom", "size": 3}]


# --- dict keys from an enum or a Literal (review 21, must-fix 2) -------------------------------------------

KEYED = {
    "type": "object",
    "properties": {"c": {"type": "integer"}, "f": {"type": "integer"}},
    "additionalProperties": False,
}
LITERAL_KEYED = {
    "type": "object",
    "properties": {"low": {"type": "number"}, "high": {"type": "number"}},
    "additionalProperties": False,
}


def paint(
    counts: dict[Units, int], weights: dict[Literal["low", "high"], float], *, context: ToolContext
) -> str:
    """Keyed counts."""
    return ""


class Keyed(BaseModel):
    counts: dict[Units, int]
    weights: dict[Literal["low", "high"], float] = {}


def paint_model(keyed: Keyed, *, context: ToolContext) -> str:
    """Keyed counts in a model."""
    return ""


def test_a_dict_keyed_by_an_enum_or_literal_allows_exactly_its_keys_and_converts_them(tract: Tract) -> None:
    import jsonschema

    params = _params(paint)
    assert params["properties"] == {"counts": KEYED, "weights": LITERAL_KEYED}
    assert not jsonschema.Draft202012Validator(params).is_valid({"counts": {"k": 1}, "weights": {}})
    ex, calls = _recording(tract, paint)
    assert ex.execute("paint", {"counts": {"f": 2}, "weights": {"low": 1}}).success
    assert calls == [{"counts": {Units.F: 2}, "weights": {"low": 1.0}}]
    bad = ex.execute("paint", {"counts": {"k": 1}, "weights": {"zzz": 1.0}})
    assert not bad.success
    assert "arguments.counts: unexpected property 'k'" in bad.error
    assert "arguments.weights: unexpected property 'zzz'" in bad.error
    assert len(calls) == 1


def test_pydantic_dict_keys_become_the_same_properties_as_the_stdlib_path(tract: Tract) -> None:
    params = _params(paint_model)
    body = params["$defs"]["Keyed"]
    assert body["properties"]["counts"] == KEYED
    assert body["properties"]["weights"] == {**LITERAL_KEYED, "default": {}}
    assert "Units" not in params["$defs"]  # only used as keys: no dangling definition
    ex, calls = _recording(tract, paint_model)
    assert ex.execute("paint_model", {"keyed": {"counts": {"c": 1.0}}}).success
    assert calls == [{"keyed": Keyed(counts={Units.C: 1})}]
    bad = ex.execute("paint_model", {"keyed": {"counts": {"k": 1}}})
    assert (bad.success, len(calls)) == (False, 1)
    assert "arguments.keyed.counts: unexpected property 'k'" in bad.error


class UuidKeyed(BaseModel):
    table: dict[uuid.UUID, int]


def uuid_keys(table: dict[uuid.UUID, int], *, context: ToolContext) -> str:
    """Bad keys."""
    return ""


def date_keys(table: dict[dt.date, int], *, context: ToolContext) -> str:
    """Bad keys."""
    return ""


def number_literal_keys(table: dict[Literal[1, 2], int], *, context: ToolContext) -> str:
    """Bad keys."""
    return ""


def model_uuid_keys(n: int, model: UuidKeyed, *, context: ToolContext) -> str:
    """Bad keys in a model."""
    return ""


@pytest.mark.parametrize(
    ("func", "message"),
    [
        (uuid_keys, r"uuid_keys\.table: dictionary keys of type UUID cannot be expressed"),
        (date_keys, r"date_keys\.table: dictionary keys of type date cannot be expressed"),
        (number_literal_keys, r"number_literal_keys\.table: dictionary keys must be strings"),
        (model_uuid_keys, r"model_uuid_keys\.model \(\$defs\.UuidKeyed\): dictionary keys limited by"),
    ],
)
def test_a_dict_key_rule_the_schema_cannot_say_is_refused_naming_the_parameter(
    func: Any, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        tool(func)


def test_in_strict_mode_every_key_is_required_and_nullable_and_a_null_drops_it(tract: Tract) -> None:
    params = _params(paint, strict=True)
    counts = params["properties"]["counts"]
    assert counts["required"] == ["c", "f"]
    assert counts["properties"]["c"] == {"type": ["integer", "null"]}
    ex, calls = _recording(tract, paint, strict=True)
    assert ex.execute("paint", {"counts": {"c": None, "f": 3}, "weights": {"low": None, "high": 0.5}}).success
    assert calls == [{"counts": {Units.F: 3}, "weights": {"high": 0.5}}]
    model = _params(paint_model, strict=True)["$defs"]["Keyed"]["properties"]["counts"]
    assert model == counts
    ex, calls = _recording(tract, paint_model, strict=True)
    assert ex.execute("paint_model", {"keyed": {"counts": {"c": 1, "f": None}, "weights": None}}).success
    assert calls == [{"keyed": Keyed(counts={Units.C: 1})}]


# --- integral floats are integers (review 21, should-fix 1) ------------------------------------------------


def integers(
    n: int,
    many: list[int],
    maybe: int | None,
    either: int | str | Window,
    exact: int | float,
    one: Literal[1, 2],
    *,
    context: ToolContext,
) -> str:
    """Integers."""
    return ""


INTEGERS = {"n": 3, "many": [1, 2], "maybe": None, "either": "x", "exact": 1, "one": 2}


@pytest.mark.parametrize(
    ("name", "sent", "received"),
    [
        ("n", 3.0, 3),
        ("many", [1.0, 2], [1, 2]),
        ("maybe", 2.0, 2),
        ("either", 1.0, 1),
        ("either", {"start": 2.0}, Window(start=2)),
        ("exact", 1.0, 1.0),  # a float member takes a float exactly: int | float keeps it a float
        ("exact", 1, 1),
        ("one", 1.0, 1),
    ],
)
def test_an_integral_float_arrives_as_an_int(tract: Tract, name: str, sent: Any, received: Any) -> None:
    ex, calls = _recording(tract, integers)
    result = ex.execute("integers", {**INTEGERS, name: sent})
    assert result.success, result.error
    assert calls[0][name] == received
    assert type(calls[0][name]) is type(received)
    if isinstance(received, list):
        assert [type(v) for v in calls[0][name]] == [int, int]


@pytest.mark.parametrize(
    ("name", "sent"), [("n", 1.5), ("n", True), ("many", [2.5]), ("maybe", False), ("one", 1.5)]
)
def test_a_fraction_or_a_bool_is_still_no_int(tract: Tract, name: str, sent: Any) -> None:
    ex, calls = _recording(tract, integers)
    result = ex.execute("integers", {**INTEGERS, name: sent})
    assert (result.success, calls) == (False, [])
    assert f"arguments.{name}" in result.error


# --- dataclass InitVars and init=False fields (review 21, should-fix 2) ------------------------------------


@dataclasses.dataclass
class Scaled:
    a: int
    scale: dataclasses.InitVar[int]
    offset: dataclasses.InitVar[int] = 0
    total: int = dataclasses.field(init=False)

    def __post_init__(self, scale: int, offset: int) -> None:
        self.total = self.a * scale + offset


@dataclasses.dataclass(init=False)
class Hand:
    """A dataclass whose own __init__ takes what no field names."""

    x: int

    def __init__(self, y: int) -> None:
        self.x = y


def scaled(value: Scaled, *, context: ToolContext) -> str:
    """Scaled."""
    return str(value.total)


def handmade(value: Hand, *, context: ToolContext) -> str:
    """Hand."""
    return ""


def test_a_dataclass_initvar_is_a_parameter_passed_to_init_and_init_false_is_neither(tract: Tract) -> None:
    body = _params(scaled)["$defs"]["Scaled"]
    assert body["properties"] == {
        "a": {"type": "integer"},
        "scale": {"type": "integer"},
        "offset": {"type": "integer", "default": 0},
    }
    assert body["required"] == ["a", "scale"]
    ex = ToolExecutor(tract)
    ex.register(scaled)
    assert ex.execute("scaled", {"value": {"a": 2, "scale": 3}}).output == "6"
    assert ex.execute("scaled", {"value": {"a": 2, "scale": 3, "offset": 1}}).output == "7"
    missing = ex.execute("scaled", {"value": {"a": 2}})
    assert not missing.success
    assert "'scale'" in missing.error
    total = ex.execute("scaled", {"value": {"a": 2, "scale": 3, "total": 9}})
    assert not total.success
    assert "'total'" in total.error


def test_a_dataclass_whose_init_takes_other_parameters_is_refused_at_registration() -> None:
    with pytest.raises(InvalidInput, match=r"handmade\.value: Hand\.__init__ needs 'y'"):
        tool(handmade)


def test_the_agent_loop_refuses_a_key_outside_the_enum_and_converts_keys_and_integral_floats(
    tract: Tract,
) -> None:
    seen: list[dict[Units, int]] = []
    ex = ToolExecutor(tract)

    @ex.register
    def tally(counts: dict[Units, int], *, context: ToolContext) -> str:
        """Tally readings per unit."""
        seen.append(counts)
        return ", ".join(f"{unit.name}={n}" for unit, n in counts.items())

    tract.user("Tally them.")
    llm = ScriptedLLM(
        [
            call("c1", "tally", {"counts": {"kelvin": 1}}),
            call("c2", "tally", {"counts": {"f": 2.0}}),
            "Done.",
        ]
    )
    result = toolkit.run(tract, llm, ex, max_steps=5)
    assert (result.text, result.steps) == ("Done.", 3)
    assert seen == [{Units.F: 2}]
    assert type(seen[0][Units.F]) is int
    messages = tract.compile().messages
    assert messages[2].is_error
    assert "arguments.counts: unexpected property 'kelvin'" in messages[2].content
    assert (messages[4].is_error, messages[4].content) == (False, "F=2")
    (offered,) = llm.calls[0].tools or []
    assert offered["function"]["parameters"]["properties"]["counts"] == KEYED
