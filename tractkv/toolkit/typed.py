"""Tool parameters from real Python types: their JSON Schema, and the conversion of checked arguments.

:func:`function_parameters` turns a function's signature into the ``parameters`` schema of a tool and an
:class:`ArgumentConverter` that turns the model's (already validated) JSON arguments into the declared types:
the handler receives a ``Place``, a dataclass ``Window``, ``Units.C``, a list of models.

Two generators, one result shape:

* **stdlib types** (``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``, ``Literal``, enums,
  dataclasses, TypedDicts with ``Required`` / ``NotRequired`` / ``total=False``, ``Annotated[X, "text"]``,
  ``datetime`` / ``date`` / ``time`` / ``timedelta`` / ``UUID`` (strings with the formats ``date-time`` /
  ``date`` / ``time`` / ``duration`` / ``uuid``; a date-time or time arrives aware, a duration with years or
  months is refused at conversion: they have no fixed length), unions, lists / tuples / sets / dicts of
  those, nested and recursive) go through this module's own generator and converter. Dataclasses and
  TypedDicts become ``$defs`` entries referenced by ``$ref`` (so a recursive type is a reference to itself);
  enums stay inline (``{"type": "string", "enum": [...]}``). A dataclass's ``InitVar`` s are properties
  passed to ``__init__``, its ``init=False`` fields are not; one whose ``__init__`` takes other parameters is
  refused. A ``dict`` keyed by an enum or a ``Literal`` of strings is an object with those keys as optional
  properties and no other (its keys converted to the members); a key rule the schema cannot say (``UUID``,
  ``date``, ``int`` keys) is refused. A whole float (``1.0``) is an integer, as in JSON Schema: an ``int``
  receives ``1``; a union tries each member's exact kind first (``int | float`` keeps ``1.0`` a float).
* **pydantic** is optional and never imported here: when a parameter's type involves a pydantic class (a
  model, a pydantic dataclass, ``Annotated[..., Field(...)]``), detected through
  ``sys.modules.get("pydantic")``, that parameter goes through pydantic: ``TypeAdapter.json_schemas`` makes
  the schemas of all such parameters (one shared ``$defs``; the stdlib generator's names avoid its names) and
  ``TypeAdapter.validate_python`` converts each argument. The other parameters keep the stdlib path, so a
  ``typing.TypedDict`` (which pydantic refuses before Python 3.12) still works beside a model, and a stdlib
  type gives the same schema whether pydantic is loaded or not. pydantic's ``title`` keywords are stripped:
  they repeat the property or class name and cost the model tokens. Its ``propertyNames`` (a dict's key
  rule) becomes the stdlib generator's keyed object, or is refused when it is not a set of strings.

Strict mode (:func:`to_strict`) rewrites a schema into what OpenAI's strict function calling accepts: every
property required (the optional ones nullable), ``additionalProperties: false`` on every object, ``$ref``
never beside other keywords, only the keywords strict mode supports; a type it cannot express (a free-form
``dict``, a fixed-length tuple, a string length bound, a format other than :data:`STRICT_FORMATS`) is refused;
the annotation formats (``binary``, ``password``, ...: never checked) are dropped. A ``null`` the model sends
for an optional parameter (or an optional field of a nested object) is dropped before conversion, so the
default applies.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import inspect
import math
import re
import sys
import types
import typing
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from tractkv.errors import InvalidInput
from tractkv.toolkit.schema import ANNOTATION_FORMATS, FORMATS, parse_date_time, parse_duration

CONTEXT_PARAM = "context"

_SCALARS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _is_scalar(hint: object) -> bool:
    return isinstance(hint, type) and hint in _SCALARS  # (a hint may be unhashable: Annotated[X, {...}])


# stdlib types sent as formatted strings (the exact class: a subclass may not parse the same way)
_FORMATTED: dict[Any, str] = {
    datetime.datetime: "date-time",
    datetime.date: "date",
    datetime.time: "time",
    datetime.timedelta: "duration",
    uuid.UUID: "uuid",
}


def _formatted(hint: object) -> str | None:
    """The ``format`` of a stdlib type sent as a string (``datetime`` -> ``date-time``), else None."""
    return _FORMATTED.get(hint) if isinstance(hint, type) else None


# the ISO 8601 durations a timedelta is made from: isoduration's oddities (``P1e2D``, ``P-1D``, ``P1D2T1H``)
# pass the format check but are refused here, so no part of what the model wrote is silently ignored
_PLAIN_DURATION = re.compile(
    r"[+-]?P(?=\d|T\d)(?:\d+(?:[.,]\d+)?Y)?(?:\d+(?:[.,]\d+)?M)?(?:\d+(?:[.,]\d+)?D)?(?:\d+(?:[.,]\d+)?W)?"
    r"(?:T(?=\d)(?:\d+(?:[.,]\d+)?H)?(?:\d+(?:[.,]\d+)?M)?(?:\d+(?:[.,]\d+)?S)?)?",
    re.ASCII,
)
_SECONDS = {"W": 7 * 86400, "D": 86400, "TH": 3600, "TM": 60, "TS": 1}


def _convert_formatted(value: Any, name: str, where: str, problems: list[str]) -> Any:
    """A string in format ``name`` as its type (``datetime``, ``date``, ``time``, ``timedelta``, ``UUID``).

    A ``date-time`` / ``time`` becomes an aware value (RFC 3339 requires the offset; ``Z`` is UTC, fractions
    beyond microseconds are cut off). A ``duration`` may not have years or months (they have no fixed
    length): the model is told to give days or weeks instead.
    """
    if not isinstance(value, str) or not FORMATS[name](value):
        problems.append(f"{where}: {_show(value)} is not a valid {name}")
        return value
    if name == "date-time":
        return parse_date_time(value)
    if name == "time":
        moment = parse_date_time("1970-01-01T" + value)
        return moment.timetz() if moment is not None else value
    if name == "date":
        return datetime.date.fromisoformat(value)
    if name == "uuid":
        return uuid.UUID(value)
    parsed = parse_duration(value)
    if parsed is None or not _PLAIN_DURATION.fullmatch(value):
        problems.append(
            f"{where}: {_show(value)} is not a plain ISO 8601 duration (e.g. P3D, P1W, PT1H30M, PT0.5S)"
        )
        return value
    amounts = parsed[1]
    if any(amounts.get(unit, 0) != 0 for unit in ("Y", "M")):
        problems.append(
            f"{where}: {_show(value)} has years or months, which have no fixed length: give the duration "
            "in weeks, days, hours, minutes and seconds (e.g. P30D instead of P1M)"
        )
        return value
    try:
        with decimal.localcontext(decimal.Context(prec=60)):
            seconds = sum(
                (amount * _SECONDS[unit] for unit, amount in amounts.items() if unit in _SECONDS),
                decimal.Decimal(0),
            )
            micro = int((seconds * 1_000_000).to_integral_value(decimal.ROUND_HALF_EVEN))
        return datetime.timedelta(microseconds=micro)
    except (OverflowError, decimal.InvalidOperation):
        problems.append(f"{where}: {_show(value)} is longer than a timedelta can hold")
        return value


# --- detecting pydantic without importing it ---------------------------------------------------------------


def _pydantic() -> Any:
    """The pydantic module if something already imported it, else None (never imports it)."""
    return sys.modules.get("pydantic")


class _NeedsPydantic(Exception):
    """Raised by the stdlib generator on a pydantic type: the function goes through pydantic instead."""


def _is_pydantic_class(hint: object) -> bool:
    pyd = _pydantic()
    if pyd is None or not isinstance(hint, type):
        return False
    if issubclass(hint, pyd.BaseModel):
        return True
    return "__pydantic_fields__" in vars(hint) or "__pydantic_validator__" in vars(hint)  # pydantic dataclass


def _is_pydantic_metadata(value: object) -> bool:
    module = type(value).__module__ or ""
    return module.split(".")[0] in ("pydantic", "annotated_types", "pydantic_core")


def _is_typeddict(hint: object) -> bool:
    if typing.is_typeddict(hint):
        return True
    extensions = sys.modules.get("typing_extensions")
    return extensions is not None and bool(extensions.is_typeddict(hint))


def _required_origins() -> list[Any]:
    origins: list[Any] = [typing.Required, typing.NotRequired]
    extensions = sys.modules.get("typing_extensions")
    if extensions is not None:
        origins += [getattr(extensions, "Required", None), getattr(extensions, "NotRequired", None)]
    return origins


def _unwrap_required(hint: Any) -> Any:
    """``Required[X]`` / ``NotRequired[X]`` (typing's or typing_extensions') -> ``X``."""
    origins = _required_origins()
    while typing.get_origin(hint) in origins and typing.get_args(hint):
        hint = typing.get_args(hint)[0]
    return hint


def _typeddict_required(cls: type, hints: Mapping[str, Any]) -> set[str]:
    """The keys a TypedDict requires. ``__required_keys__`` misses ``Required`` / ``NotRequired`` written as
    strings (``from __future__ import annotations`` before Python 3.12), so the resolved hints decide too."""
    required = set(getattr(cls, "__required_keys__", ()))
    origins = _required_origins()
    for key, hint in hints.items():
        origin = typing.get_origin(hint)
        if origin in origins:
            if repr(origin).endswith("NotRequired"):
                required.discard(key)
            else:
                required.add(key)
    return required


def _field_hint(hint: Any) -> Any:
    """A field's type: ``Required[X]`` / ``NotRequired[X]`` / ``InitVar[X]`` -> ``X`` (a bare ``InitVar``: Any)."""
    if hint is dataclasses.InitVar:
        return Any
    if isinstance(hint, dataclasses.InitVar):
        return hint.type
    return _unwrap_required(hint)


def _record_fields(cls: type, hints: Mapping[str, Any], where: str) -> tuple[list[str], list[str]]:
    """A dataclass's ``__init__`` fields or a TypedDict's keys, in order, and the required ones among them."""
    if dataclasses.is_dataclass(cls):
        init = _init_fields(cls, hints, where)
        needed = [
            f.name
            for f in init
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        return [f.name for f in init], needed
    required = _typeddict_required(cls, hints)
    return list(hints), [k for k in hints if k in required]


def _init_fields(cls: type, hints: Mapping[str, Any], where: str) -> list[dataclasses.Field[Any]]:
    """The fields a dataclass's ``__init__`` takes, in its order: the ``init`` fields and the ``InitVar`` s
    (which :func:`dataclasses.fields` leaves out; a ``field(init=False)`` is neither in the schema nor passed).

    Raises:
        InvalidInput: ``__init__`` does not take exactly these as keywords (a hand-written ``__init__`` with
            other parameters could never be called with the arguments the schema describes).
    """
    real = {f.name for f in dataclasses.fields(cls)}
    fields: list[dataclasses.Field[Any]] = []
    for field in getattr(cls, "__dataclass_fields__", {}).values():
        if field.name in real:
            if field.init:
                fields.append(field)
        elif field.type is dataclasses.InitVar or isinstance(
            hints.get(field.name, field.type), dataclasses.InitVar
        ):
            fields.append(field)
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return fields
    names = {f.name for f in fields}
    takes = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    any_keyword = any(p.kind is p.VAR_KEYWORD for p in params)
    for param in params:
        if param.kind is param.VAR_POSITIONAL or param.kind is param.VAR_KEYWORD:
            continue
        if param.name not in names and param.default is param.empty:
            raise InvalidInput(
                f"{where}: {cls.__qualname__}.__init__ needs {param.name!r}, which is not one of its fields: "
                "a tool argument could never build it"
            )
    missing = sorted(n for n in names if n not in takes) if not any_keyword else []
    if missing:
        raise InvalidInput(
            f"{where}: {cls.__qualname__}.__init__ does not take its field(s) {', '.join(map(repr, missing))}"
        )
    return fields


def _class_hints(cls: type, where: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:
        raise InvalidInput(f"{where}: cannot resolve the type hints of {cls.__qualname__}: {exc}") from None


def _class_description(cls: type) -> str:
    """A class's own docstring, first paragraph (not a dataclass's generated ``Name(a: int, ...)``)."""
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str) or not doc.strip():
        return ""
    if dataclasses.is_dataclass(cls) and doc.startswith(f"{cls.__name__}("):
        return ""
    text = inspect.cleandoc(doc).split("\n\n", 1)[0]
    return " ".join(line.strip() for line in text.splitlines())


def _is_jsonable(value: object) -> bool:
    if value is None or isinstance(value, bool | int | str):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list | tuple):
        return all(_is_jsonable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_jsonable(v) for k, v in value.items())
    return False


def _json_default(value: object) -> tuple[bool, Any]:
    """(True, the JSON form) of a default a schema can show (an enum member is not shown, as before)."""
    return (
        (True, list(value) if isinstance(value, tuple) else value) if _is_jsonable(value) else (False, None)
    )


# --- the stdlib generator --------------------------------------------------------------------------------


class SchemaGenerator:
    """JSON Schemas of stdlib type hints, with dataclasses and TypedDicts collected in :attr:`defs`."""

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self.defs: dict[str, dict[str, Any]] = {}
        self._names: dict[Any, str] = {}
        self._taken = set(taken)  # $defs names used elsewhere in the same schema (pydantic's)

    def schema(self, hint: Any, where: str) -> dict[str, Any]:
        if hint is Any or hint is object:
            return {}
        if _is_scalar(hint):
            return {"type": _SCALARS[hint]}
        name = _formatted(hint)
        if name is not None:
            return {"type": "string", "format": name}
        if _is_pydantic_class(hint):
            raise _NeedsPydantic
        origin = typing.get_origin(hint)
        args = typing.get_args(hint)
        if origin is typing.Annotated:
            if any(_is_pydantic_metadata(a) for a in args[1:]):
                raise _NeedsPydantic
            inner = self.schema(args[0], where)
            notes = [a for a in args[1:] if isinstance(a, str)]
            return {**inner, "description": " ".join(notes)} if notes else inner
        if origin is Literal:
            return _literal_schema(list(args), where)
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return _literal_schema([m.value for m in hint], where)
        if origin in (typing.Union, types.UnionType):
            return union_schema([self.schema(a, where) for a in args])
        if hint is tuple or origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return {"type": "array", "items": self.schema(args[0], where)}
            if not args:
                return {"type": "array"}
            items = [self.schema(a, where) for a in args]
            return {"type": "array", "prefixItems": items, "minItems": len(items), "maxItems": len(items)}
        if hint in (list, set, frozenset) or origin in (list, set, frozenset, Sequence, typing.Sequence):
            schema: dict[str, Any] = {"type": "array"}
            if args:
                schema["items"] = self.schema(args[0], where)
            if hint in (set, frozenset) or origin in (set, frozenset):
                schema["uniqueItems"] = True
            return schema
        if hint is dict or origin in (dict, Mapping):
            schema = {"type": "object"}
            if len(args) == 2:
                keys = _dict_keys(self.schema(args[0], where), args[0], where)
                value = self.schema(args[1], where) if args[1] is not Any else None
                if keys is not None:
                    return _keyed_object(keys, value if value is not None else {})
                if value is not None:
                    schema["additionalProperties"] = value
            return schema
        if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or _is_typeddict(hint)):
            return {"$ref": f"#/$defs/{self._define(hint, where)}"}
        raise InvalidInput(f"{where}: type {hint!r} has no JSON Schema equivalent")

    def _define(self, cls: type, where: str) -> str:
        if cls in self._names:
            return self._names[cls]
        name = cls.__name__
        taken = set(self._names.values()) | self._taken
        if name in taken:
            name = cls.__qualname__.replace(".", "_").replace("<locals>_", "")
            index = 2
            while name in taken:
                name, index = f"{cls.__name__}_{index}", index + 1
        self._names[cls] = name
        self.defs[name] = {}  # reserved: a recursive reference finds the name while the body is made
        hints = _class_hints(cls, where)
        properties: dict[str, Any] = {}
        required: list[str] = []
        if dataclasses.is_dataclass(cls):
            for field in _init_fields(cls, hints, where):
                prop = self.schema(_field_hint(hints.get(field.name, Any)), f"{where}.{field.name}")
                note = field.metadata.get("description") if field.metadata else None
                if isinstance(note, str) and note:
                    prop = _describe(prop, note)
                if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                    required.append(field.name)
                elif field.default is not dataclasses.MISSING:
                    ok, shown = _json_default(field.default)
                    if ok:
                        prop = {**prop, "default": shown}
                properties[field.name] = prop
        else:
            required_keys = _typeddict_required(cls, hints)
            for key, raw in hints.items():
                properties[key] = self.schema(_unwrap_required(raw), f"{where}.{key}")
                if key in required_keys:
                    required.append(key)
        body: dict[str, Any] = {"type": "object"}
        description = _class_description(cls)
        if description:
            body["description"] = description
        body["properties"] = properties
        if required:
            body["required"] = required
        body["additionalProperties"] = False
        self.defs[name] = body
        return name


def _dict_keys(key: dict[str, Any], hint: Any, where: str) -> list[str] | None:
    """The allowed keys of a ``dict[K, V]`` whose key schema is ``key``: None for any string (``str``), the
    strings of an enum / ``Literal`` of strings; any other key type is refused (a JSON object's keys are
    strings, and a key rule the schema cannot say would be silently dropped)."""
    rule = {k: v for k, v in key.items() if k != "description"}
    if rule == {"type": "string"}:
        return None
    values = rule.get("enum")
    if rule.get("type") == "string" and isinstance(values, list) and set(rule) == {"type", "enum"}:
        return list(dict.fromkeys(values))
    shown = _hint_name(hint)
    if key.get("type") != "string":
        raise InvalidInput(
            f"{where}: dictionary keys must be strings (JSON object keys): {shown} keys cannot be sent"
        )
    raise InvalidInput(
        f"{where}: dictionary keys of type {shown} cannot be expressed in a tool schema: use str keys, or an "
        "enum / Literal of strings"
    )


def _keyed_object(keys: list[str], value: dict[str, Any]) -> dict[str, Any]:
    """The schema of a dict whose keys are a fixed set of strings: each key an optional property."""
    return {"type": "object", "properties": {k: dict(value) for k in keys}, "additionalProperties": False}


def _describe(schema: dict[str, Any], note: str) -> dict[str, Any]:
    """``schema`` with a description (beside a ``$ref`` too, as JSON Schema 2020-12 and pydantic allow)."""
    return {**schema, "description": note}


def _literal_schema(values: list[Any], where: str) -> dict[str, Any]:
    if not values:
        raise InvalidInput(f"{where}: an enum with no members admits no value (give it at least one member)")
    kinds: list[str] = []
    for value in values:
        kind = _SCALARS.get(type(value))
        if kind is None:
            raise InvalidInput(f"{where}: Literal and enum values must be str, int, float, bool or None")
        if kind not in kinds:
            kinds.append(kind)
    return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": values}


def union_schema(members: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge member schemas into one ``type`` list when each is a plain typed schema and the merge says the
    same as ``anyOf`` (else ``anyOf``): an ``enum`` only when every member has one (or is ``null``), another
    keyword only when no other member admits a value of its types (``str | datetime`` keeps ``anyOf``, or
    ``format`` would refuse plain strings)."""
    merged: dict[str, Any] = {}
    kinds: list[str] = []
    if any("enum" in m for m in members) and any("enum" not in m and m != {"type": "null"} for m in members):
        return {"anyOf": members}
    spans: list[tuple[set[str], bool]] = []  # each member's types (integer within number), constrained?
    for member in members:
        kind = member.get("type")
        if not isinstance(kind, str | list):
            return {"anyOf": members}
        span = set([kind] if isinstance(kind, str) else kind)
        if span & {"integer", "number"}:
            span |= {"integer", "number"}
        constrained = any(k not in ("type", "enum") for k in member)
        if any((constrained or other) and span & seen for seen, other in spans):
            return {"anyOf": members}
        spans.append((span, constrained))
        for name in [kind] if isinstance(kind, str) else kind:
            if name not in kinds:
                kinds.append(name)
        for key, value in member.items():
            if key == "type":
                continue
            if key == "enum" and "enum" in merged:
                merged["enum"] = [*merged["enum"], *value]
            elif key in merged and merged[key] != value:
                return {"anyOf": members}
            else:
                merged[key] = value
    if "enum" in merged and "null" in kinds and None not in merged["enum"]:
        merged["enum"] = [*merged["enum"], None]  # Literal[...] | None admits null
    if "enum" in merged and any(k not in ("string", "integer", "number", "boolean", "null") for k in kinds):
        return {"anyOf": members}  # an enum beside an array or object type would refuse those
    return {"type": kinds[0] if len(kinds) == 1 else kinds, **merged}


# --- the stdlib converter --------------------------------------------------------------------------------


def _is_integral(value: Any) -> bool:
    """An integer in JSON's sense: an int (never a bool) or a float with no fraction (``1.0``)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _match(value: Any, choices: Iterable[Any], exact: bool) -> tuple[bool, Any]:
    """(True, the choice ``value`` stands for) among Literal / enum values: the same type and value, or (not
    ``exact``) a number equal to a numeric choice (JSON equality: ``1.0`` is ``1``; a bool is never a number)."""
    for choice in choices:
        if type(value) is type(choice) and value == choice:
            return True, choice
    if not exact and isinstance(value, int | float) and not isinstance(value, bool):
        for choice in choices:
            if isinstance(choice, int | float) and not isinstance(choice, bool) and value == choice:
                return True, choice
    return False, None


def _fits(value: Any, hint: Any, exact: bool = False) -> bool:
    """Whether a JSON value has the shape of ``hint`` (picks the member of a union to convert with).

    With ``exact`` a number must have the declared kind (``1.0`` is no ``int``): a union tries every member
    exactly first, so ``int | float`` keeps ``1.0`` a float and ``1`` an int."""
    if hint is Any or hint is object:
        return True
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        return _fits(value, args[0], exact)
    if hint is float and isinstance(value, float):
        return math.isfinite(value)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        if exact:
            return isinstance(value, int) and not isinstance(value, bool)
        return _is_integral(value)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    name = _formatted(hint)
    if name is not None:
        return isinstance(value, str) and FORMATS[name](value)
    if origin is Literal:
        return _match(value, args, exact)[0]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _match(value, [m.value for m in hint], exact)[0]
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a, exact) for a in args)
    if hint in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset, Sequence):
        if not isinstance(value, list):
            return False
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            return len(value) == len(args) and all(
                _fits(v, a, exact) for v, a in zip(value, args, strict=True)
            )
        return not args or all(_fits(v, args[0], exact) for v in value)
    if hint is dict or origin in (dict, Mapping):
        return isinstance(value, dict) and (
            len(args) < 2
            or all(_fits(k, args[0], exact) and _fits(v, args[1], exact) for k, v in value.items())
        )
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or _is_typeddict(hint)):
        if not isinstance(value, dict):
            return False
        hints = _class_hints(hint, hint.__qualname__)
        names, needed = _record_fields(hint, hints, hint.__qualname__)
        return (
            value.keys() >= set(needed)
            and value.keys() <= set(names)
            and all(_fits(v, _field_hint(hints.get(k, Any)), exact) for k, v in value.items())
        )
    return True


def _hint_name(hint: Any) -> str:
    if _is_scalar(hint):
        return "null" if hint is type(None) else str(_SCALARS[hint])
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _show(value: Any) -> str:
    import json

    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def convert_value(value: Any, hint: Any, where: str, problems: list[str]) -> Any:
    """``value`` (JSON) as ``hint``; each way it does not fit is appended to ``problems``.

    The schema check comes first, so these checks are a second line (a value that slipped past it never
    reaches a handler as the wrong type): a scalar of the wrong kind, a missing or unknown field, an enum
    value the enum lacks, a dataclass whose ``__post_init__`` refuses the value.
    """
    if hint is Any or hint is object:
        return value
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        return convert_value(value, args[0], where, problems)
    if origin in (typing.Union, types.UnionType):
        for exact in (True, False):  # a member the value has exactly the kind of first: int | float keeps 1.0
            for member in args:
                if _fits(value, member, exact):
                    return convert_value(value, member, where, problems)
        shapes = " or ".join(_hint_name(a) for a in args)
        problems.append(f"{where}: {_show(value)} is none of {shapes}")
        return value
    name = _formatted(hint)
    if name is not None:
        return _convert_formatted(value, name, where, problems)
    if _is_scalar(hint) or origin is Literal or (isinstance(hint, type) and issubclass(hint, enum.Enum)):
        if not _fits(value, hint):
            problems.append(f"{where}: {_show(value)} is not a valid {_hint_name(hint)}")
            return value
        if hint is float:
            return float(value)
        if hint is int:
            return int(value)  # 1.0 is an integer in JSON Schema: the handler gets the int 1
        if origin is Literal:
            return _match(value, args, False)[1]
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return hint(_match(value, [m.value for m in hint], False)[1])
        return value
    if hint in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset, Sequence):
        if not isinstance(value, list):
            problems.append(f"{where}: expected an array, got {_show(value)}")
            return value
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                problems.append(f"{where}: expected {len(args)} items, got {len(value)}")
                return value
            return tuple(
                convert_value(v, a, f"{where}[{i}]", problems)
                for i, (v, a) in enumerate(zip(value, args, strict=True))
            )
        item = args[0] if args else Any
        items = [convert_value(v, item, f"{where}[{i}]", problems) for i, v in enumerate(value)]
        kind: Any = list
        if hint is tuple or origin is tuple:
            kind = tuple
        elif hint is frozenset or origin is frozenset:
            kind = frozenset
        elif hint is set or origin is set:
            kind = set
        try:
            return kind(items)
        except TypeError as exc:  # unhashable items for a set
            problems.append(f"{where}: {exc}")
            return value
    if hint is dict or origin in (dict, Mapping):
        if not isinstance(value, dict):
            problems.append(f"{where}: expected an object, got {_show(value)}")
            return value
        key = args[0] if len(args) == 2 else Any
        item = args[1] if len(args) == 2 else Any
        # an enum / Literal key arrives as what it stands for (Color.RED, not "red"); a key outside it is refused
        out: dict[Any, Any] = {}
        for k, v in value.items():
            out[convert_value(k, key, f"{where} (key)", problems)] = convert_value(
                v, item, f"{where}.{k}", problems
            )
        return out
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or _is_typeddict(hint)):
        return _convert_record(value, hint, where, problems)
    return value


def _convert_record(value: Any, cls: type, where: str, problems: list[str]) -> Any:
    """A JSON object as a dataclass instance or a TypedDict (a dict)."""
    if not isinstance(value, dict):
        problems.append(f"{where}: expected an object ({cls.__name__}), got {_show(value)}")
        return value
    hints = _class_hints(cls, where)
    names, needed = _record_fields(cls, hints, where)
    before = len(problems)
    for name in needed:
        if name not in value:
            problems.append(f"{where}: missing required property {name!r}")
    for key in value:
        if key not in names:
            problems.append(f"{where}: unexpected property {key!r} (allowed: {', '.join(names) or 'none'})")
    converted = {
        k: convert_value(v, _field_hint(hints.get(k, Any)), f"{where}.{k}", problems)
        for k, v in value.items()
        if k in names
    }
    if len(problems) > before or not dataclasses.is_dataclass(cls):
        return converted
    try:
        return cls(**converted)
    except Exception as exc:  # __post_init__ refusing a value the schema allowed
        problems.append(f"{where}: {cls.__name__} refused it: {type(exc).__name__}: {exc}")
        return value


# --- the function's parameters ---------------------------------------------------------------------------


class ArgumentConverter:
    """Turns a tool call's validated JSON arguments into the handler's declared types.

    ``convert(arguments)`` returns ``(converted, problems)``; when ``problems`` is not empty the handler must
    not run (each problem is ``"<path>: <what is wrong>"``, as :func:`tractkv.toolkit.schema.validate` says it).
    """

    def __init__(
        self,
        hints: Mapping[str, Any],
        *,
        adapters: Mapping[str, Any] | None = None,
        loose: dict[str, Any] | None = None,
    ) -> None:
        self.hints = dict(hints)
        self.adapters = dict(adapters or {})  # parameter -> pydantic TypeAdapter (the pydantic path)
        self.loose = loose  # the schema before strict mode: says which nulls stand for "not given"

    def convert(
        self, arguments: Mapping[str, Any], path: str = "arguments"
    ) -> tuple[dict[str, Any], list[str]]:
        args = dict(arguments)
        if self.loose is not None:
            args = drop_strict_nulls(args, self.loose, self.loose.get("$defs", {}))
        problems: list[str] = []
        out: dict[str, Any] = {}
        for name, value in args.items():
            where = f"{path}.{name}"
            adapter = self.adapters.get(name)
            if adapter is not None:
                out[name] = _pydantic_convert(adapter, value, where, problems)
            elif name in self.hints:
                out[name] = convert_value(value, self.hints[name], where, problems)
            else:
                out[name] = value
        return out, problems


def _pydantic_convert(adapter: Any, value: Any, where: str, problems: list[str]) -> Any:
    pyd = _pydantic()
    try:
        return adapter.validate_python(value)
    except Exception as exc:
        if pyd is not None and isinstance(exc, pyd.ValidationError):
            for error in exc.errors(include_url=False):
                loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.get("loc", ()))
                problems.append(f"{where}{loc}: {error.get('msg', 'invalid')}")
        else:
            problems.append(f"{where}: {type(exc).__name__}: {exc}")
        return value


def function_parameters(
    func: Callable[..., Any],
    hints: Mapping[str, Any],
    docs: Mapping[str, str],
    where: str,
    *,
    strict: bool = False,
) -> tuple[dict[str, Any], ArgumentConverter]:
    """(the ``parameters`` schema, its converter) of ``func`` (every parameter but ``context``).

    Raises:
        InvalidInput: a parameter without a type hint, ``*args``, a type with no JSON Schema equivalent (or,
            with ``strict``, none OpenAI's strict mode can express).
    """
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"cannot read the signature of {func!r}: {exc}") from None
    params: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        if param.name == CONTEXT_PARAM or param.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            raise InvalidInput(f"{where}: *{param.name} cannot be a tool parameter; name each one")
        if param.name not in hints:
            raise InvalidInput(f"{where}: parameter {param.name!r} needs a type hint")
        params.append(param)
    param_hints = {p.name: hints[p.name] for p in params}
    # a parameter whose type involves a pydantic class goes through pydantic; the others through the stdlib
    # generator (so a stdlib type gives one schema whether or not pydantic is loaded, and a typing.TypedDict,
    # which pydantic refuses before Python 3.12, still works beside a model)
    by_pydantic: dict[str, Any] = {}
    for param in params:
        try:
            SchemaGenerator().schema(param_hints[param.name], f"{where}.{param.name}")
        except _NeedsPydantic:
            by_pydantic[param.name] = param_hints[param.name]
    schemas: dict[str, dict[str, Any]] = {}
    defs: dict[str, Any] = {}
    adapters: dict[str, Any] = {}
    if by_pydantic:
        schemas, defs, adapters = _pydantic_schemas(by_pydantic, where)
    generator = SchemaGenerator(taken=defs)
    for param in params:
        if param.name not in by_pydantic:
            schemas[param.name] = generator.schema(param_hints[param.name], f"{where}.{param.name}")
    defs = {**defs, **generator.defs}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in params:
        schema = schemas[param.name]
        if docs.get(param.name):
            schema = _describe(schema, docs[param.name])
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        else:
            ok, shown = _json_default(param.default)
            if ok:
                schema = {**schema, "default": shown}
        properties[param.name] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    if defs:
        out["$defs"] = defs
    converter = ArgumentConverter(param_hints, adapters=adapters)
    if strict:
        converter.loose = out
        out = to_strict(out, where)
    return out, converter


def _pydantic_schemas(
    hints: Mapping[str, Any], where: str
) -> tuple[dict[str, dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Schemas, shared ``$defs`` and TypeAdapters of every parameter, made by pydantic."""
    pyd = _pydantic()
    assert pyd is not None  # only reached after a pydantic class was seen
    adapters: dict[str, Any] = {}
    try:
        for name, hint in hints.items():
            adapters[name] = pyd.TypeAdapter(hint)
        keyed, top = pyd.TypeAdapter.json_schemas(
            [(name, "validation", adapter) for name, adapter in adapters.items()],
            ref_template="#/$defs/{model}",
        )
    except Exception as exc:  # pydantic's own refusal (an unsupported type, a bad Field)
        raise InvalidInput(
            f"{where}: pydantic cannot make a JSON Schema: {type(exc).__name__}: {exc}"
        ) from None
    raw_defs = top.get("$defs") or {}
    schemas = {
        name: _keys_as_properties(strip_titles(keyed[(name, "validation")]), raw_defs, f"{where}.{name}")
        for name in hints
    }
    raw = {name: keyed[(name, "validation")] for name in hints}
    defs: dict[str, Any] = {}
    for k, v in raw_defs.items():
        users = [n for n in hints if k in _used_defs({n: raw[n]}, raw_defs)]  # named in an error
        defs[k] = _keys_as_properties(
            strip_titles(v), raw_defs, f"{', '.join(f'{where}.{n}' for n in users) or where} ($defs.{k})"
        )
    return schemas, _used_defs(schemas, defs), adapters


def _keys_as_properties(schema: Any, defs: Mapping[str, Any], where: str) -> Any:
    """``schema`` with pydantic's ``propertyNames`` (a ``dict[Color, V]``'s key rule) said as the stdlib
    generator says it, so a stdlib and a pydantic type give one schema, which strict mode can express: each
    allowed key an optional property, no other key. A key rule that is not a set of strings (``dict[UUID,
    V]``: a format) is refused, never dropped."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SUBSCHEMA:
            out[key] = _keys_as_properties(value, defs, where)
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [_keys_as_properties(v, defs, where) for v in value]
        elif key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _keys_as_properties(v, defs, where) for k, v in value.items()}
        else:
            out[key] = value
    if "propertyNames" not in out:
        return out
    rule = _resolve(out.pop("propertyNames"), defs)
    rule = (
        {k: v for k, v in rule.items() if k not in ("description", "title")}
        if isinstance(rule, dict)
        else rule
    )
    if isinstance(rule, dict) and set(rule) in ({"const"}, {"const", "type"}):
        keys: Any = [rule["const"]]
    else:
        keys = rule.get("enum") if isinstance(rule, dict) and set(rule) <= {"enum", "type"} else None
    if (
        not isinstance(keys, list)
        or not all(isinstance(k, str) for k in keys)
        or rule.get("type", "string") != "string"
        or "properties" in out
    ):
        raise InvalidInput(
            f"{where}: dictionary keys limited by {_show(rule)} cannot be expressed in a tool schema: use str "
            "keys, or an enum / Literal of strings"
        )
    extra = out.pop("additionalProperties", True)
    value_schema = {} if extra is True else extra
    keyed = _keyed_object(list(dict.fromkeys(keys)), value_schema) if extra is not False else {}
    return {**out, **keyed, "type": "object"} if keyed else {**out, "additionalProperties": False}


def _used_defs(schemas: Mapping[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """The ``defs`` the schemas still reach through ``$ref`` (an enum used only as dict keys is inlined)."""
    seen: set[str] = set()
    todo: list[Any] = list(schemas.values())
    while todo:  # bounded: each definition is queued once
        node = todo.pop()
        if isinstance(node, list):
            todo.extend(node)
        elif isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = ref.rsplit("/", 1)[-1]
                if name not in seen and name in defs:
                    seen.add(name)
                    todo.append(defs[name])
            todo.extend(v for k, v in node.items() if k != "$ref")
    return {k: v for k, v in defs.items() if k in seen}


# --- walking schemas -------------------------------------------------------------------------------------

_SUBSCHEMA = ("items", "additionalProperties", "not", "contains", "if", "then", "else")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")


def strip_titles(schema: Any) -> Any:
    """``schema`` without its ``title`` keywords (a property named ``title`` stays)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in _SUBSCHEMA:
            out[key] = strip_titles(value)
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [strip_titles(v) for v in value]
        elif key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: strip_titles(v) for k, v in value.items()}
        else:
            out[key] = value
    return out


def _resolve(schema: dict[str, Any], defs: Mapping[str, Any]) -> dict[str, Any]:
    seen = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 64:
        ref = schema["$ref"]
        target = defs.get(ref.rsplit("/", 1)[-1]) if ref.startswith("#/$defs/") else None
        if not isinstance(target, dict):
            return schema
        schema, seen = target, seen + 1
    return schema


def admits_null(schema: Any, defs: Mapping[str, Any], depth: int = 0) -> bool:
    """Whether ``null`` can satisfy ``schema`` as far as its type keywords say (``{}`` admits it)."""
    if not isinstance(schema, dict) or depth > 32:
        return schema is not False
    schema = _resolve(schema, defs)
    kind = schema.get("type")
    if kind is not None and "null" not in ([kind] if isinstance(kind, str) else kind):
        return False
    if "enum" in schema and None not in schema["enum"]:
        return False
    if "const" in schema and schema["const"] is not None:
        return False
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and not any(
            admits_null(s, defs, depth + 1) for s in schema[key]
        ):
            return False
    return all(admits_null(s, defs, depth + 1) for s in schema.get("allOf") or ())


def drop_strict_nulls(value: Any, schema: Any, defs: Mapping[str, Any], depth: int = 0) -> Any:
    """``value`` without the ``null`` s that strict mode made the model send for optional properties which do
    not themselves admit null (read from the schema before strict mode), so their defaults apply."""
    if not isinstance(schema, dict) or depth > 64:
        return value
    schema = _resolve(schema, defs)
    for key in ("allOf",):
        for part in schema.get(key) or ():
            value = drop_strict_nulls(value, part, defs, depth + 1)
    if isinstance(value, dict):
        branches = [s for k in ("anyOf", "oneOf") for s in schema.get(k) or ()]
        for branch in branches:
            target = _resolve(branch, defs) if isinstance(branch, dict) else {}
            if isinstance(target.get("properties"), dict) and value.keys() <= target["properties"].keys():
                return drop_strict_nulls(value, target, defs, depth + 1)
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = set(schema.get("required") or ())
        extra = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = properties.get(key, extra if isinstance(extra, dict) else None)
            if item is None and key in properties and key not in required and not admits_null(sub, defs):
                continue
            out[key] = drop_strict_nulls(item, sub, defs, depth + 1)
        return out
    if isinstance(value, list):
        branches = [s for k in ("anyOf", "oneOf") for s in schema.get(k) or ()]
        for branch in branches:
            target = _resolve(branch, defs) if isinstance(branch, dict) else {}
            if target.get("type") == "array":
                return drop_strict_nulls(value, target, defs, depth + 1)
        items = schema.get("items")
        return [drop_strict_nulls(v, items, defs, depth + 1) for v in value]
    return value


# --- OpenAI strict mode ----------------------------------------------------------------------------------

# What OpenAI's strict mode accepts (its "Supported schemas"): the structural keywords below, and the value
# keywords of STRICT_BOUNDS; annotations it ignores or refuses (default, examples, discriminator, ...) are
# dropped; anything else cannot be expressed and is refused.
STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
STRICT_BOUNDS = frozenset(
    {
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)
_STRICT_KEEP = frozenset({"type", "enum", "const", "description", "title"}) | STRICT_BOUNDS
# uniqueItems is dropped too: only a set parameter makes it, and converting to a set collapses duplicates
_STRICT_DROP = frozenset(
    {
        "default",
        "examples",
        "discriminator",
        "$schema",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "uniqueItems",
    }
)
_STRICT_HANDLED = frozenset(
    {"properties", "required", "additionalProperties", "items", "anyOf", "oneOf", "allOf", "$ref", "$defs"}
)


def to_strict(schema: dict[str, Any], where: str) -> dict[str, Any]:
    """``schema`` (a tool's parameters) rewritten for OpenAI's strict mode (see the module doc).

    Raises:
        InvalidInput: a part strict mode cannot express, named with its path.
    """
    defs = schema.get("$defs") or {}
    out = _strict(schema, defs, where, root=True)
    if defs:
        out["$defs"] = {name: _strict(body, defs, f"{where} ($defs.{name})") for name, body in defs.items()}
    return out


def _strict(node: Any, defs: Mapping[str, Any], where: str, *, root: bool = False) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise InvalidInput(f"{where}: strict mode needs a schema object here, not {node!r}")
    if "$ref" in node and len([k for k in node if k not in _STRICT_DROP]) > 1:
        # strict mode takes no keyword beside $ref: inline the definition once (its own refs stay refs)
        target = _resolve({"$ref": node["$ref"]}, defs)
        if target is node or "$ref" in target:
            raise InvalidInput(f"{where}: unresolvable $ref {node['$ref']!r}")
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _strict(merged, defs, where)
    if "allOf" in node:
        parts = node["allOf"]
        if isinstance(parts, list) and len(parts) == 1 and isinstance(parts[0], dict):
            return _strict({**parts[0], **{k: v for k, v in node.items() if k != "allOf"}}, defs, where)
        raise InvalidInput(f"{where}: strict mode does not support allOf")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _STRICT_DROP or (key == "$defs" and root):
            continue
        if key == "oneOf" and "discriminator" not in node:
            raise InvalidInput(f"{where}: strict mode does not support oneOf (only anyOf)")
        if key == "format" and value in ANNOTATION_FORMATS:
            continue  # an annotation (binary, password, ...): nothing is checked, so nothing is lost
        if key == "format" and value not in STRICT_FORMATS:
            raise InvalidInput(
                f"{where}: strict mode does not support format {value!r} "
                f"(only {', '.join(sorted(STRICT_FORMATS))})"
            )
        if key in _STRICT_KEEP or key == "$ref":
            out[key] = value
        elif key in ("anyOf", "oneOf"):
            # a discriminated union's branches exclude each other, so anyOf says the same as its oneOf
            out["anyOf"] = [_strict(b, defs, f"{where} ({key} {i})") for i, b in enumerate(value)]
        elif key == "items":
            out[key] = _strict(value, defs, f"{where}[]")
        elif key not in _STRICT_HANDLED:
            raise InvalidInput(f"{where}: strict mode does not support {key!r}")
    if root and "anyOf" in out:
        raise InvalidInput(f"{where}: strict mode needs an object at the root, not anyOf")
    is_object = node.get("type") == "object" or "properties" in node
    if is_object:
        extra = node.get("additionalProperties", "properties" not in node)
        if extra is not False:
            raise InvalidInput(
                f"{where}: strict mode cannot express an object with free-form keys (a dict): "
                "give it named fields (a dataclass, TypedDict or model)"
            )
        properties = node.get("properties") or {}
        required = set(node.get("required") or ())
        props: dict[str, Any] = {}
        for name, prop in properties.items():
            strict_prop = _strict(prop, defs, f"{where}.{name}")
            if name not in required and not admits_null(prop, defs):
                strict_prop = _nullable(strict_prop)
            props[name] = strict_prop
        out["properties"] = props
        out["required"] = list(properties)
        out["additionalProperties"] = False
    elif (
        "type" not in out
        and "anyOf" not in out
        and "$ref" not in out
        and "enum" not in out
        and "const" not in out
    ):
        raise InvalidInput(
            f"{where}: strict mode needs a type here (Any / an untyped value cannot be expressed)"
        )
    return out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also admits null (how strict mode spells an optional property)."""
    if "$ref" in schema or "const" in schema:
        return {"anyOf": [schema, {"type": "null"}]}
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    out = dict(schema)
    kind = out.get("type")
    if isinstance(kind, str):
        out["type"] = [kind, "null"]
    elif isinstance(kind, list):
        out["type"] = [*kind, "null"]
    if "enum" in out and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out


def check_strict(schema: dict[str, Any], tool: str) -> None:
    """Refuse a hand-written parameters schema marked strict that is not already in strict form.

    Raises:
        InvalidInput: the schema would change under :func:`to_strict` (or cannot be made strict at all).
    """
    if to_strict(schema, f"tool {tool!r} parameters") != schema:
        raise InvalidInput(
            f"tool {tool!r}: a strict tool's parameters must be in OpenAI strict form: every property "
            "required (optional ones nullable), additionalProperties false on every object, only the keywords "
            "strict mode supports (ToolDefinition.from_function(..., strict=True) makes such a schema)"
        )
