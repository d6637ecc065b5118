"""JSON Schema (Draft 2020-12) for tool arguments: the keywords tool schemas use, validated exactly as
``jsonschema.Draft202012Validator`` (with a format checker for the formats below) decides, and every other
keyword refused when a tool is registered, so a schema is never silently under-validated.

Supported keywords:

* references: ``$ref`` to a place in the same schema (``#``, ``#/$defs/Name``, ``#/definitions/Name`` or any
  JSON pointer, ``~0`` / ``~1`` and ``%``-escapes decoded), ``$defs`` / ``definitions``; recursion through
  properties or items is fine, a ``$ref`` loop that never descends into the value is refused.
* any value: ``type`` (a name or a list of names; ``1.0`` is an ``integer``, ``true`` never a number),
  ``enum`` / ``const`` (JSON equality: ``1 == 1.0``, ``true != 1``), ``allOf`` / ``anyOf`` / ``oneOf`` /
  ``not``, ``if`` / ``then`` / ``else``, boolean schemas ``true`` / ``false``; ``nullable: true`` (the
  OpenAPI spelling) also admits ``null`` (the one extension; jsonschema ignores it).
* numbers: ``minimum`` / ``maximum`` / ``exclusiveMinimum`` / ``exclusiveMaximum``, ``multipleOf`` (as
  jsonschema computes it: a float divisor divides in floating point, so ``0.3`` is not a multiple of ``0.1``).
* strings: ``minLength`` / ``maxLength`` (in code points), ``pattern``, ``format``: one of :data:`FORMATS`
  (checked as jsonschema does with ``jsonschema[format-nongpl]``), or one of :data:`ANNOTATION_FORMATS`
  (OpenAPI's ``binary``, ``password``, ...: jsonschema never checks them, so neither does this module).
* objects: ``properties``, ``required``, ``additionalProperties`` (a boolean or a schema; the names in no
  ``properties`` and matching no ``patternProperties`` pattern), ``patternProperties``, ``propertyNames``,
  ``dependentRequired``, ``dependentSchemas``, ``unevaluatedProperties`` (with the annotations of
  ``properties`` / ``patternProperties`` / ``additionalProperties`` / ``unevaluatedProperties`` collected
  through ``$ref``, ``allOf``, the valid options of ``anyOf`` / ``oneOf``, ``if`` / ``then`` / ``else`` and
  ``dependentSchemas``, as jsonschema collects them: :meth:`_Validator.evaluated`).
* arrays: ``prefixItems``, ``items`` (the items after the prefix), ``minItems`` / ``maxItems``,
  ``uniqueItems`` (JSON equality), ``contains`` with ``minContains`` / ``maxContains``.
* annotations, accepted and ignored: ``title``, ``description``, ``default``, ``examples``, ``deprecated``,
  ``readOnly``, ``writeOnly``, ``$comment``, ``discriminator`` (as pydantic emits it); ``$schema`` and
  ``$id`` at the root only.

:func:`check_parameters_schema` (run when a tool is registered) refuses any other keyword
(``unevaluatedItems``, ``dependencies``, ``$anchor``, a remote ``$ref``, ...), a regex Python cannot compile
and an unknown format, naming the keyword and where it is (a JSON pointer into the schema). :func:`validate`
returns every problem found as ``"<path>: <what is wrong>"`` (``$`` is the root), so the model is told all of
its mistakes at once. NaN and infinities (not JSON) are no numbers here.

Regexes (``pattern``, the keys of ``patternProperties``, a ``pattern`` inside ``propertyNames``) are Python
``re`` patterns searched unanchored (``re.search``), as jsonschema runs them, not ECMA-262: a pattern Python
cannot compile (ECMA-262's ``\\p{L}``, ``(?<name>...)``, ``\\cA``) is refused at registration, and where the
dialects differ Python's reading holds (``\\d`` and ``\\w`` take non-ASCII digits and letters, ``$`` also
matches before a final newline). Beside ``additionalProperties``, the ``patternProperties`` patterns must also
compile joined by ``|`` (how jsonschema tells the additional names).
"""

from __future__ import annotations

import calendar
import contextlib
import decimal
import functools
import ipaddress
import json
import math
import re
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction
from typing import Any
from urllib.parse import unquote
from uuid import UUID

from tractkv.engine.content import check_json
from tractkv.errors import InvalidInput

JSON_TYPES = ("string", "integer", "number", "boolean", "object", "array", "null")

ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
        "discriminator",
    }
)
ROOT_ONLY = frozenset({"$schema", "$id"})
SUPPORTED = frozenset(
    {
        "$ref",
        "$defs",
        "definitions",
        "type",
        "nullable",
        "enum",
        "const",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "propertyNames",
        "dependentRequired",
        "dependentSchemas",
        "unevaluatedProperties",
        "if",
        "then",
        "else",
        "contains",
        "minContains",
        "maxContains",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "uniqueItems",
    }
)

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)


def _is_date(text: str) -> bool:
    if not _DATE.fullmatch(text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def _is_ipv6(text: str) -> bool:
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return not address.scope_id  # an address with a zone (``%eth0``) is refused, as jsonschema does


def _is_regex(text: str) -> bool:
    try:
        re.compile(text)
    except (re.error, OverflowError, RecursionError):
        return False
    return True


def _is_uuid(text: str) -> bool:
    try:
        UUID(text)
    except ValueError:
        return False
    return all(text[i] == "-" for i in (8, 13, 18, 23))  # the hyphenated form only


def _is_email(text: str) -> bool:
    return "@" in text


_DATE_TIME = re.compile(
    r"(\d{4})-(0[1-9]|1[0-2])-(\d\d)T([01]\d|2[0-3]):([0-5]\d):([0-5]\d)(?:\.(\d+))?"
    r"(Z|([+-])([01]\d|2[0-3]):([0-5]\d))\n?",
    re.ASCII,
)


def parse_date_time(text: str) -> datetime | None:
    """An RFC 3339 ``date-time`` as an aware datetime (fractions beyond microseconds cut off), or None when
    jsonschema (with ``rfc3339-validator``) would not accept it as one: an offset is required, ``t`` / ``z``
    may be lower case, no leap second (``:60``), any number of fraction digits, no year 0."""
    match = _DATE_TIME.fullmatch(text.upper())
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    if year == 0 or not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    offset = timedelta(0)
    if match.group(8) != "Z":
        offset = timedelta(hours=int(match.group(10)), minutes=int(match.group(11)))
        offset = -offset if match.group(9) == "-" else offset
    micro = int((match.group(7) or "0")[:6].ljust(6, "0"))
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=timezone(offset))


def _is_date_time(text: str) -> bool:
    return parse_date_time(text) is not None


def _is_time(text: str) -> bool:
    """RFC 3339 ``full-time`` (``12:30:00Z``, ``12:30:00.5+02:00``; the offset is required)."""
    return _is_date_time("1970-01-01T" + text)


_DATE_UNITS = ("Y", "M", "D", "W")
_TIME_UNITS = ("H", "M", "S")
_NUMBER_CHARS = frozenset("+-0123456789.,eE")


def parse_duration(text: str) -> tuple[int, dict[str, Decimal]] | None:
    """An ISO 8601 duration as jsonschema checks the ``duration`` format (with ``isoduration``): ``(sign,
    {unit: amount})`` with the units ``Y M D W`` and ``TH TM TS``, or None when it is not one.

    The grammar is isoduration's, quirks included: an optional sign before ``P``; designators in order, each
    after a decimal number (``1.5``, ``1,5``, ``1e2``, ``-1``); ``W`` only after zero amounts; a ``T`` part
    that is not empty; and the whole string ending in a designator (so ``P``, ``PT``, ``P1`` are not durations).
    """
    if len(text) < 2 or not text.endswith(("D", "M", "Y", "W", "H", "S")):
        return None
    sign, body = 1, text
    if body[0] in "+-":
        sign, body = (-1 if body[0] == "-" else 1), body[1:]
    if not body.startswith("P"):
        return None
    body = body[1:]
    amounts: dict[str, Decimal] = {}
    units, number, nonzero = list(_DATE_UNITS), "", False
    context = decimal.Context()
    for index, char in enumerate(body):
        if char == "T":
            if number and number == body[:index]:
                return None  # isoduration reads "P<date>T<time>" as a point in time: never a valid duration
            part = body[index + 1 :]
            if not part:
                return None
            times = _parse_units(part, list(_TIME_UNITS), sign, context, "T")
            return None if times is None else (sign, {**amounts, **times})
        if char.isalpha() and char not in "eE":
            amount = _amount(char, units, number, sign, context)
            if amount is None or (char == "W" and nonzero):
                return None
            nonzero = nonzero or amount != 0
            amounts[char] = amount
            number = ""
        elif char in _NUMBER_CHARS:
            number += "." if char == "," else char
        else:
            return None
    return sign, amounts


def _amount(unit: str, units: list[str], number: str, sign: int, context: decimal.Context) -> Decimal | None:
    """The amount before designator ``unit`` (None: the unit is unknown or out of order, or no number)."""
    if unit not in units:
        return None
    del units[: units.index(unit) + 1]
    try:
        return context.multiply(Decimal(sign), context.create_decimal(number))
    except (decimal.InvalidOperation, decimal.Overflow):
        return None


def _parse_units(
    part: str, units: list[str], sign: int, context: decimal.Context, prefix: str
) -> dict[str, Decimal] | None:
    amounts: dict[str, Decimal] = {}
    number = ""
    for char in part:
        if char.isalpha() and char not in "eE":
            amount = _amount(char, units, number, sign, context)
            if amount is None:
                return None
            amounts[prefix + char] = amount
            number = ""
        elif char in _NUMBER_CHARS:
            number += "." if char == "," else char
        else:
            return None
    return amounts


def _is_duration(text: str) -> bool:
    return parse_duration(text) is not None


def _uri_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """RFC 3986 ``URI`` and ``URI-reference`` (ASCII only; an IRI is no URI), as ``rfc3986-validator``
    reads them: a ``dec-octet`` may have leading zeros."""
    hexdig = "[0-9A-Fa-f]"
    pct = f"%{hexdig}{hexdig}"
    unreserved_sub = r"a-zA-Z0-9\-._~!$&'()*+,;="
    pchar = f"(?:[{unreserved_sub}:@]|{pct})"
    octet = r"(?:25[0-5]|2[0-4]\d|[01]?\d\d?)"
    ipv4 = rf"{octet}(?:\.{octet}){{3}}"
    h16 = f"{hexdig}{{1,4}}"
    ls32 = f"(?:{h16}:{h16}|{ipv4})"
    ipv6 = "|".join(
        [
            f"(?:{h16}:){{6}}{ls32}",
            f"::(?:{h16}:){{5}}{ls32}",
            f"(?:{h16})?::(?:{h16}:){{4}}{ls32}",
            f"(?:(?:{h16}:){{0,1}}{h16})?::(?:{h16}:){{3}}{ls32}",
            f"(?:(?:{h16}:){{0,2}}{h16})?::(?:{h16}:){{2}}{ls32}",
            f"(?:(?:{h16}:){{0,3}}{h16})?::{h16}:{ls32}",
            f"(?:(?:{h16}:){{0,4}}{h16})?::{ls32}",
            f"(?:(?:{h16}:){{0,5}}{h16})?::{h16}",
            f"(?:(?:{h16}:){{0,6}}{h16})?::",
        ]
    )
    ip_literal = rf"\[(?:{ipv6}|v{hexdig}+\.[{unreserved_sub}:]+)\]"
    authority = (
        f"(?:(?:[{unreserved_sub}:]|{pct})*@)?(?:{ip_literal}|(?:[{unreserved_sub}]|{pct})*)(?::\\d*)?"
    )
    tail = f"(?:\\?(?:{pchar}|[/?])*)?(?:#(?:{pchar}|[/?])*)?"
    absolute = f"/(?:{pchar}+(?:/{pchar}*)*)?"
    hier = f"(?://{authority}(?:/{pchar}*)*|{absolute}|{pchar}+(?:/{pchar}*)*|)"
    uri = f"[a-zA-Z][a-zA-Z0-9+.\\-]*:{hier}{tail}"
    noscheme = f"(?:[{unreserved_sub}@]|{pct})+(?:/{pchar}*)*"
    relative = f"(?://{authority}(?:/{pchar}*)*|{absolute}|{noscheme}|){tail}"
    return re.compile(f"{uri}\\n?", re.ASCII), re.compile(f"(?:{uri}|{relative})\\n?", re.ASCII)


_URI, _URI_REFERENCE = _uri_patterns()


def _is_uri(text: str) -> bool:
    return _URI.fullmatch(text) is not None


def _is_uri_reference(text: str) -> bool:
    return _URI_REFERENCE.fullmatch(text) is not None


# fqdn's "preferred name syntax" (RFC 1035 / 3696), as jsonschema checks ``hostname`` with it: matched (not
# searched) case-insensitively on the lower-cased name, so ``$`` also matches before a final newline and ``\d``
# takes any Unicode digit, as there
_HOSTNAME = re.compile(r"^((?![-])[-A-Z\d]{1,63}(?<!-)[.])*(?!-)[-A-Z\d]{1,63}(?<!-)[.]?$", re.IGNORECASE)


def _is_hostname(text: str) -> bool:
    """A ``hostname`` as jsonschema checks it with ``fqdn`` (``FQDN(text, min_labels=1).is_valid``; the empty
    string is none): labels of 1-63 letters, digits and inner hyphens, dot-separated, an optional final dot,
    at most 253 characters besides it."""
    if not text:
        return False
    name = text.lower()
    length = len(name) - 1 if name.endswith(".") else len(name)
    return length <= 253 and _HOSTNAME.match(name) is not None  # a match has a label: min_labels=1 holds


FORMATS: dict[str, Callable[[str], bool]] = {
    "date": _is_date,
    "date-time": _is_date_time,
    "duration": _is_duration,
    "email": _is_email,
    "hostname": _is_hostname,
    "idn-email": _is_email,
    "ipv4": _is_ipv4,
    "ipv6": _is_ipv6,
    "regex": _is_regex,
    "time": _is_time,
    "uri": _is_uri,
    "uri-reference": _is_uri_reference,
    "uuid": _is_uuid,
}
"""The formats asserted, each checked as jsonschema's ``FormatChecker`` does (``date-time`` / ``time``,
``duration``, ``hostname`` and ``uri`` / ``uri-reference`` as with the packages of ``jsonschema[format-nongpl]``:
``rfc3339-validator``, ``isoduration``, ``fqdn``, ``rfc3986-validator``), by this module's own code."""

_FORMAT_HINTS = {
    "date-time": "RFC 3339 with an offset, e.g. 2024-05-01T12:30:00Z or 2024-05-01T12:30:00+02:00",
    "time": "RFC 3339 with an offset, e.g. 12:30:00Z or 12:30:00.5+02:00",
    "duration": "ISO 8601, e.g. P3D, P1W, PT1H30M, PT0.5S",
    "uri": "an absolute URI with a scheme, e.g. https://example.com/path",
    "hostname": "labels of letters, digits and inner hyphens, e.g. api.example.com",
}

ANNOTATION_FORMATS = frozenset({"binary", "byte", "password", "int32", "int64", "float", "double"})
"""OpenAPI's formats (pydantic emits ``binary`` for ``bytes``, ``password`` for ``SecretStr``): jsonschema
checks none of them, so they are accepted as annotations and not checked. Any other format name (a typo such
as ``emial``, or one jsonschema checks with a package this module does not mirror, such as ``idn-hostname``)
is refused at registration."""


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@functools.lru_cache(maxsize=256)
def _joined(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """The ``patternProperties`` patterns joined by ``|``, as jsonschema tells additional properties with them
    (None when that is the empty string: jsonschema then counts every name not in ``properties`` as
    additional, even with a ``""`` pattern)."""
    joined = "|".join(patterns)
    return re.compile(joined) if joined else None


def _is_number(value: object) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _is_type(value: object, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        if isinstance(value, float):
            return math.isfinite(value) and value.is_integer()
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return _is_number(value)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list | tuple)
    if name == "null":
        return value is None
    return False


def _type_name(value: object) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _is_type(value, name):
            return name
    return type(value).__name__


def _json_equal(a: object, b: object) -> bool:
    """Equality as JSON sees it: a bool never equals a number, ``1`` equals ``1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, list | tuple | dict) or isinstance(b, list | tuple | dict):
        return False
    return a == b


def _json_key(value: object) -> object:
    """A hashable key equal for two values exactly when they are JSON-equal (for ``uniqueItems``)."""
    if isinstance(value, bool) or value is None:
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", value)  # 1 and 1.0 are equal and hash alike
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list | tuple):
        return ("a", tuple(_json_key(item) for item in value))
    if isinstance(value, dict):
        return ("o", frozenset((k, _json_key(v)) for k, v in value.items()))
    return ("?", id(value))


def _multiple_of(value: int | float, divisor: int | float) -> bool:
    """jsonschema's rule: a float divisor divides in floating point (exactly only when that overflows)."""
    if isinstance(divisor, float):
        try:
            quotient = value / divisor
            return int(quotient) == quotient
        except OverflowError:
            return (Fraction(value) / Fraction(divisor)).denominator == 1
    return value % divisor == 0


def _allowed_types(schema: dict[str, Any]) -> list[str] | None:
    raw = schema.get("type")
    if raw is None:
        return None
    types = [raw] if isinstance(raw, str) else list(raw)
    if schema.get("nullable") is True and "null" not in types:
        types.append("null")
    return types


class _Unresolvable(Exception):
    pass


def _resolve(root: object, ref: str) -> object:
    """The part of ``root`` a local ``$ref`` points at."""
    if not ref.startswith("#"):
        raise _Unresolvable("only references within the schema ('#...') are supported")
    pointer = unquote(ref[1:])
    if pointer == "":
        return root
    if not pointer.startswith("/"):
        raise _Unresolvable("anchors are not supported, only JSON pointers ('#/$defs/Name')")
    node = root
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif (
            isinstance(node, list)
            and token.isdigit()
            and (token == "0" or not token.startswith("0"))
            and int(token) < len(node)
        ):
            node = node[int(token)]
        else:
            raise _Unresolvable(f"nothing at {token!r}")
    return node


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """Every way ``value`` breaks ``schema`` (an empty list when it conforms)."""
    errors: list[str] = []
    try:
        _Validator(schema).check(value, schema, path, errors)
    except RecursionError:
        errors.append(f"{path}: nested too deeply to validate")
    return errors


_OBJECT_APPLICATORS = frozenset(
    {"propertyNames", "dependentRequired", "dependentSchemas", "unevaluatedProperties"}
)


class _Validator:
    """One validation against one root schema (the root is where ``$ref`` s are resolved)."""

    def __init__(self, root: object) -> None:
        self.root = root
        self._refs: dict[str, object] = {}
        # verdicts and evaluated names by (id(value), id(schema)): every value and schema lives as long as the
        # call. Without them unevaluatedProperties at each level of nested allOf would cost 2**depth.
        self._valid: dict[tuple[int, int], bool] = {}
        self._evaluated: dict[tuple[int, int], set[str]] = {}

    def errors(self, value: Any, schema: object, path: str) -> list[str]:
        found: list[str] = []
        self.check(value, schema, path, found)
        return found

    def resolve(self, ref: str) -> object:
        if ref not in self._refs:
            self._refs[ref] = _resolve(self.root, ref)
        return self._refs[ref]

    def check(self, value: Any, schema: object, path: str, errors: list[str]) -> None:
        if schema is False:
            errors.append(f"{path}: no value is allowed here")
            return
        if not isinstance(schema, dict):
            return  # ``true`` admits anything
        ref = schema.get("$ref")
        if isinstance(ref, str):
            try:
                target = self.resolve(ref)
            except _Unresolvable as exc:
                errors.append(f"{path}: cannot resolve $ref {ref!r} ({exc})")
            else:
                self.check(value, target, path, errors)
        types = _allowed_types(schema)
        if types is not None and not any(_is_type(value, t) for t in types):
            errors.append(f"{path}: expected {' or '.join(types)}, got {_type_name(value)}")
            return
        if "enum" in schema and not any(_json_equal(value, option) for option in schema["enum"]):
            options = ", ".join(_show(o) for o in schema["enum"])
            errors.append(f"{path}: {_show(value)} is not one of {options}")
        if "const" in schema and not _json_equal(value, schema["const"]):
            errors.append(f"{path}: must be {_show(schema['const'])}")
        self._combinators(value, schema, path, errors)
        if isinstance(value, dict):
            self._object(value, schema, path, errors)
        elif isinstance(value, list | tuple):
            self._array(value, schema, path, errors)
        elif isinstance(value, str):
            _string(value, schema, path, errors)
        elif _is_number(value):
            _number(value, schema, path, errors)

    def _combinators(self, value: Any, schema: dict[str, Any], path: str, errors: list[str]) -> None:
        for option in schema.get("allOf") or ():
            self.check(value, option, path, errors)
        if isinstance(schema.get("anyOf"), list) and schema["anyOf"]:
            first: list[str] | None = None
            for option in schema["anyOf"]:
                found = self.errors(value, option, path)
                if not found:
                    break
                first = found if first is None else first
            else:
                errors.append(f"{path}: matches none of the allowed shapes ({'; '.join(first or ())})")
        if isinstance(schema.get("oneOf"), list) and schema["oneOf"]:
            results = [self.errors(value, option, path) for option in schema["oneOf"]]
            matching = [i for i, found in enumerate(results) if not found]
            if not matching:
                errors.append(f"{path}: matches none of the allowed shapes ({'; '.join(results[0])})")
            elif len(matching) > 1:
                which = ", ".join(map(str, matching))
                errors.append(f"{path}: matches more than one of the exclusive shapes (oneOf {which})")
        if "not" in schema and not self.errors(value, schema["not"], path):
            errors.append(f"{path}: matches a shape it must not match")
        if "if" in schema:
            if self.valid(value, schema["if"]):
                if "then" in schema:
                    self._because(value, schema["then"], path, errors, "it matches the schema's 'if'")
            elif "else" in schema:
                self._because(value, schema["else"], path, errors, "it does not match the schema's 'if'")

    def _because(self, value: Any, schema: object, path: str, errors: list[str], reason: str) -> None:
        """The problems of ``value`` against a conditional schema, each saying why that schema applies."""
        errors.extend(f"{problem} (applies because {reason})" for problem in self.errors(value, schema, path))

    def valid(self, value: Any, schema: object) -> bool:
        key = (id(value), id(schema))
        if key not in self._valid:
            self._valid[key] = not self.errors(value, schema, "$")
        return self._valid[key]

    def _object(self, value: dict[str, Any], schema: dict[str, Any], path: str, errors: list[str]) -> None:
        properties = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if name not in value:
                errors.append(f"{path}: missing required property {name!r}")
        patterns = schema.get("patternProperties") or {}
        extra = schema.get("additionalProperties", True)
        # additional: in no ``properties`` and matching no pattern, which jsonschema tests with the patterns
        # joined by "|" (one search; the registration checked that they compile so)
        joined = _joined(tuple(patterns)) if patterns and extra is not True else None
        for key, item in value.items():
            child = f"{path}.{key}"
            if key in properties:
                self.check(item, properties[key], child, errors)
            if patterns:
                for pattern, option in patterns.items():
                    if _regex(pattern).search(key):
                        self.check(item, option, child, errors)
            if extra is True or key in properties or (joined is not None and joined.search(key)):
                continue
            if extra is False:
                allowed = ", ".join(sorted(properties)) or "none"
                matching = f", or a name matching {' or '.join(map(repr, patterns))}" if patterns else ""
                errors.append(f"{path}: unexpected property {key!r} (allowed: {allowed}{matching})")
            else:
                self.check(item, extra, child, errors)
        if not _OBJECT_APPLICATORS.isdisjoint(schema):
            self._object_applicators(value, schema, path, errors)

    def _object_applicators(
        self, value: dict[str, Any], schema: dict[str, Any], path: str, errors: list[str]
    ) -> None:
        """``propertyNames``, ``dependentRequired``, ``dependentSchemas``, ``unevaluatedProperties``."""
        if "propertyNames" in schema:
            for key in value:
                self.check(key, schema["propertyNames"], f"the name of {path}.{key}", errors)
        for name, needed in (schema.get("dependentRequired") or {}).items():
            if name in value:
                for other in needed:
                    if other not in value:
                        errors.append(
                            f"{path}: missing property {other!r} (required when {name!r} is present)"
                        )
        for name, option in (schema.get("dependentSchemas") or {}).items():
            if name in value:
                self._because(value, option, path, errors, f"property {name!r} is present")
        if "unevaluatedProperties" in schema:
            self._unevaluated(value, schema, path, errors)

    def _unevaluated(
        self, value: dict[str, Any], schema: dict[str, Any], path: str, errors: list[str]
    ) -> None:
        """``unevaluatedProperties``: the properties no keyword here or in a subschema that applies evaluated
        (see :meth:`evaluated`) must match it."""
        rest = schema["unevaluatedProperties"]
        evaluated = self.evaluated(value, schema)
        for key, item in value.items():
            if key in evaluated:
                continue
            if rest is False:
                errors.append(
                    f"{path}: unexpected property {key!r} (no 'properties', 'patternProperties' or "
                    "'additionalProperties' here or in a subschema that applies covers it)"
                )
            else:
                self.check(item, rest, f"{path}.{key}", errors)

    def evaluated(self, value: dict[str, Any], schema: object) -> set[str]:
        """The names of ``value``'s properties that ``schema`` evaluates, exactly as jsonschema finds them
        for ``unevaluatedProperties`` (``find_evaluated_property_keys_by_schema``): those named by
        ``properties``, valid against ``additionalProperties`` / ``unevaluatedProperties`` or matching a
        ``patternProperties`` pattern, and the ones evaluated by the schemas applying in place: a ``$ref``'s
        target, the ``dependentSchemas`` of present properties, each ``allOf`` / ``anyOf`` / ``oneOf`` option
        the value is valid against, ``if`` and ``then`` when ``if`` holds, else ``else``."""
        if not isinstance(schema, dict):
            return set()
        memo = (id(value), id(schema))
        if memo in self._evaluated:
            return self._evaluated[memo]
        keys = self._evaluated[memo] = set()  # a cycle back here (refused at registration) adds nothing
        ref = schema.get("$ref")
        if isinstance(ref, str):
            with contextlib.suppress(_Unresolvable):  # reported by check()
                keys |= self.evaluated(value, self.resolve(ref))
        properties = schema.get("properties")
        if isinstance(properties, dict):
            keys.update(key for key in properties if key in value)
        for keyword in ("additionalProperties", "unevaluatedProperties"):
            if keyword in schema:
                option = schema[keyword]
                keys.update(k for k, v in value.items() if k not in keys and self.valid(v, option))
        for pattern in schema.get("patternProperties") or ():
            keys.update(key for key in value if _regex(pattern).search(key))
        for name, option in (schema.get("dependentSchemas") or {}).items():
            if name in value:
                keys |= self.evaluated(value, option)
        for keyword in ("allOf", "oneOf", "anyOf"):
            for option in schema.get(keyword) or ():
                if self.valid(value, option):
                    keys |= self.evaluated(value, option)
        if "if" in schema:
            if self.valid(value, schema["if"]):
                keys |= self.evaluated(value, schema["if"])
                if "then" in schema:
                    keys |= self.evaluated(value, schema["then"])
            elif "else" in schema:
                keys |= self.evaluated(value, schema["else"])
        return keys

    def _array(
        self, value: list[Any] | tuple[Any, ...], schema: dict[str, Any], path: str, errors: list[str]
    ) -> None:
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
        prefix = schema.get("prefixItems") or ()
        for index, (item, option) in enumerate(zip(value, prefix, strict=False)):
            self.check(item, option, f"{path}[{index}]", errors)
        if "items" in schema:
            items = schema["items"]
            if items is False and len(value) > len(prefix):
                errors.append(f"{path}: at most {len(prefix)} items are allowed")
            elif items is not True:
                for index in range(len(prefix), len(value)):
                    self.check(value[index], items, f"{path}[{index}]", errors)
        if "contains" in schema:
            self._contains(value, schema, path, errors)
        if schema.get("uniqueItems") is True:
            seen: dict[object, int] = {}
            for index, item in enumerate(value):
                earlier = seen.setdefault(_json_key(item), index)
                if earlier != index:
                    errors.append(f"{path}: items {earlier} and {index} are equal (items must be unique)")
                    break

    def _contains(
        self, value: list[Any] | tuple[Any, ...], schema: dict[str, Any], path: str, errors: list[str]
    ) -> None:
        """``contains`` with ``minContains`` (default 1) and ``maxContains``."""
        low, high = schema.get("minContains", 1), schema.get("maxContains", len(value))
        matches = 0
        for item in value:
            if self.valid(item, schema["contains"]):
                matches += 1
                if matches > high:
                    errors.append(f"{path}: more than {high} items match the 'contains' schema")
                    return
        if matches < low:
            if not matches:
                errors.append(f"{path}: no item matches the 'contains' schema")
            else:
                errors.append(f"{path}: {matches} items match the 'contains' schema, fewer than {low}")


def _string(value: str, schema: dict[str, Any], path: str, errors: list[str]) -> None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(f"{path}: shorter than {schema['minLength']} characters")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(f"{path}: longer than {schema['maxLength']} characters")
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and not _regex(pattern).search(value):
        errors.append(f"{path}: {_show(value)} does not match the pattern {pattern!r}")
    name = schema.get("format")
    check = FORMATS.get(name) if isinstance(name, str) else None
    if check is not None and not check(value):
        hint = _FORMAT_HINTS.get(str(name))
        errors.append(f"{path}: {_show(value)} is not a valid {name}{f' ({hint})' if hint else ''}")


def _number(value: int | float, schema: dict[str, Any], path: str, errors: list[str]) -> None:
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{path}: {value} is less than the minimum {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        errors.append(f"{path}: {value} is more than the maximum {schema['maximum']}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        errors.append(f"{path}: {value} is not more than {schema['exclusiveMinimum']}")
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        errors.append(f"{path}: {value} is not less than {schema['exclusiveMaximum']}")
    if "multipleOf" in schema and not _multiple_of(value, schema["multipleOf"]):
        errors.append(f"{path}: {value} is not a multiple of {schema['multipleOf']}")


def _show(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def check_parameters_schema(schema: object, tool: str) -> dict[str, Any]:
    """Check that a tool's ``parameters`` is an object schema this module can enforce; return it.

    Raises:
        InvalidInput: not a dict, not ``type: object``, ``properties`` not a map of schemas, ``required``
            naming an undeclared property, or anywhere in it: a keyword not supported (see the module doc),
            a keyword's value of the wrong shape, an unknown type name or format, a regex Python cannot
            compile, a ``$ref`` that is remote or points at nothing, a ``$ref`` loop that never descends
            into the value. The message names the keyword and where it is (a JSON pointer).
    """
    if not isinstance(schema, dict):
        raise InvalidInput(
            f"tool {tool!r}: parameters must be a JSON Schema object, not {type(schema).__name__}"
        )
    check_json(schema, f"tool {tool!r} parameters")  # a cycle or a shared part blowing up: refused at once
    if schema.get("type") != "object":
        raise InvalidInput(f"tool {tool!r}: parameters must have type 'object'")
    properties = schema.get("properties", {})
    if not isinstance(properties, dict) or not all(isinstance(p, dict) for p in properties.values()):
        raise InvalidInput(f"tool {tool!r}: properties must map each parameter name to a schema")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise InvalidInput(f"tool {tool!r}: required must be a list of parameter names")
    undeclared = [r for r in required if r not in properties]
    if undeclared:
        raise InvalidInput(f"tool {tool!r}: required names undeclared parameters {undeclared}")
    _SchemaCheck(schema, f"tool {tool!r} parameters").run()
    return schema


def _pointer(parent: str, *tokens: str | int) -> str:
    escaped = (str(t).replace("~", "~0").replace("/", "~1") for t in tokens)
    return "/".join((parent, *escaped))


class _SchemaCheck:
    """Walks a whole schema once: every keyword supported and well-formed, every ``$ref`` resolvable, no
    ``$ref`` loop that stays on one value."""

    def __init__(self, root: dict[str, Any], where: str) -> None:
        self.root = root
        self.where = where
        self.nodes: dict[int, tuple[str, dict[str, Any]]] = {}  # id -> (pointer, schema)

    def fail(self, pointer: str, problem: str) -> InvalidInput:
        return InvalidInput(f"{self.where} at {pointer}: {problem}")

    def run(self) -> None:
        self.schema(self.root, "#")
        self.loops()

    def schema(self, node: object, pointer: str) -> None:
        if isinstance(node, bool):
            return
        if not isinstance(node, dict):
            raise self.fail(pointer, f"a schema must be an object or a boolean, not {_show(node)}")
        if id(node) in self.nodes:
            return
        self.nodes[id(node)] = (pointer, node)
        for key, value in node.items():
            here = _pointer(pointer, key)
            if key in ANNOTATIONS:
                continue
            if key in ROOT_ONLY:
                if node is not self.root:
                    raise self.fail(here, f"{key!r} is supported at the root only")
                if not isinstance(value, str):
                    raise self.fail(here, f"{key!r} must be a string")
                continue
            if key not in SUPPORTED:
                raise self.fail(
                    here,
                    f"unsupported keyword {key!r} (arguments could not be validated as it says; the "
                    "supported keywords are listed in the README's toolkit section)",
                )
            self.keyword(key, value, here)
        self.joined(node, pointer)

    def keyword(self, key: str, value: Any, here: str) -> None:
        if key == "$ref":
            if not isinstance(value, str):
                raise self.fail(here, "'$ref' must be a string")
            try:
                target = _resolve(self.root, value)
            except _Unresolvable as exc:
                raise self.fail(here, f"unsupported or unresolvable '$ref' {value!r}: {exc}") from None
            if not isinstance(target, dict | bool):
                raise self.fail(here, f"'$ref' {value!r} does not point at a schema")
        elif key in ("$defs", "definitions", "properties", "dependentSchemas", "patternProperties"):
            if not isinstance(value, dict):
                raise self.fail(here, f"{key!r} must map names to schemas")
            for name, child in value.items():
                if key == "patternProperties":
                    self.regex(name, _pointer(here, name))
                self.schema(child, _pointer(here, name))
        elif key == "dependentRequired":
            if not isinstance(value, dict) or not all(
                isinstance(names, list)
                and all(isinstance(n, str) for n in names)
                and len(set(names)) == len(names)
                for names in value.values()
            ):
                raise self.fail(
                    here, "'dependentRequired' must map names to lists of distinct property names"
                )
        elif key == "type":
            names = [value] if isinstance(value, str) else value
            if (
                not isinstance(names, list)
                or not names
                or any(n not in JSON_TYPES for n in names)
                or len(set(names)) != len(names)
            ):
                raise self.fail(here, f"unknown type {_show(value)} (known: {', '.join(JSON_TYPES)})")
        elif key in {"nullable", "uniqueItems"}:
            if not isinstance(value, bool):
                raise self.fail(here, f"{key!r} must be true or false")
        elif key == "enum":
            if not isinstance(value, list):
                raise self.fail(here, "'enum' must be a list of values")
        elif key in ("allOf", "anyOf", "oneOf", "prefixItems"):
            if not isinstance(value, list) or not value:
                raise self.fail(here, f"{key!r} must be a non-empty list of schemas")
            for index, child in enumerate(value):
                self.schema(child, _pointer(here, index))
        elif key in (
            *("not", "additionalProperties", "items", "propertyNames", "unevaluatedProperties"),
            *("if", "then", "else", "contains"),
        ):
            if isinstance(value, list):
                raise self.fail(here, f"{key!r} must be one schema (a list is 'prefixItems' in 2020-12)")
            self.schema(value, here)
        elif key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
            if not _is_number(value):
                raise self.fail(here, f"{key!r} must be a number")
            if key == "multipleOf" and value <= 0:
                raise self.fail(here, "'multipleOf' must be more than 0")
        elif key in ("minLength", "maxLength", "minItems", "maxItems", "minContains", "maxContains"):
            if not _is_type(value, "integer") or value < 0:
                raise self.fail(here, f"{key!r} must be a non-negative integer")
        elif key == "pattern":
            if not isinstance(value, str):
                raise self.fail(here, "'pattern' must be a string")
            self.regex(value, here)
        elif key == "format":
            if value not in FORMATS and value not in ANNOTATION_FORMATS:
                raise self.fail(
                    here,
                    f"unknown format {_show(value)} (checked: {', '.join(sorted(FORMATS))}; accepted "
                    f"unchecked: {', '.join(sorted(ANNOTATION_FORMATS))})",
                )
        elif key == "required" and (
            not isinstance(value, list)
            or not all(isinstance(r, str) for r in value)
            or len(set(value)) != len(value)
        ):
            raise self.fail(here, "'required' must be a list of distinct property names")
        # "const" takes any value

    def regex(self, pattern: str, here: str) -> None:
        try:
            _regex(pattern)
        except (re.error, OverflowError, RecursionError) as exc:
            raise self.fail(here, f"invalid regex {pattern!r} ({exc})") from None

    def joined(self, node: dict[str, Any], pointer: str) -> None:
        """``patternProperties`` beside ``additionalProperties``: jsonschema tells additional names with the
        patterns joined by ``|``, which must compile as one regex too (a global flag such as ``(?i)`` after
        the first pattern, or a group name used twice, does not)."""
        patterns = node.get("patternProperties")
        if "additionalProperties" not in node or not isinstance(patterns, dict):
            return
        try:
            _joined(tuple(patterns))
        except (re.error, OverflowError, RecursionError) as exc:
            raise self.fail(
                _pointer(pointer, "patternProperties"),
                f"the patterns joined by '|' (as additionalProperties is checked) are no regex ({exc})",
            ) from None

    def loops(self) -> None:
        """Refuse a cycle of the keywords applying a schema to the value itself (``$ref``, ``allOf`` /
        ``anyOf`` / ``oneOf``, ``not``, ``if`` / ``then`` / ``else``, ``dependentSchemas``) that never moves
        into a property, a name or an item: validating with it would never end."""
        state: dict[int, int] = {}  # id -> 1 on the current path, 2 done

        def edges(node: dict[str, Any]) -> list[object]:
            out: list[object] = []
            if isinstance(node.get("$ref"), str):
                out.append(_resolve(self.root, node["$ref"]))
            for key in ("allOf", "anyOf", "oneOf"):
                out.extend(node.get(key) or ())
            out.extend(node[key] for key in ("not", "if", "then", "else") if key in node)
            out.extend((node.get("dependentSchemas") or {}).values())
            return [n for n in out if isinstance(n, dict)]

        for start in list(self.nodes):
            if state.get(start):
                continue
            stack: list[tuple[dict[str, Any], list[object]]] = []
            first = self.nodes[start][1]
            state[start] = 1
            stack.append((first, edges(first)))
            while stack:  # bounded: each node enters the stack once
                node, pending = stack[-1]
                if not pending:
                    state[id(node)] = 2
                    stack.pop()
                    continue
                child = pending.pop()
                assert isinstance(child, dict)
                mark = state.get(id(child))
                if mark == 1:
                    pointer = self.nodes.get(id(child), ("#", child))[0]
                    raise self.fail(pointer, "a '$ref' loop that never descends into the value")
                if mark is None:
                    state[id(child)] = 1
                    stack.append((child, edges(child)))
