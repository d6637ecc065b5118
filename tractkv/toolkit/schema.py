"""A small JSON-Schema subset: enough to check a model's tool arguments against a tool's parameters.

Supported keywords (anything else is ignored, as a validator of a subset must):

* ``type``: a name or a list of names (``["integer", "null"]``); ``nullable: true`` (the OpenAPI spelling)
  also admits ``null``. ``integer`` accepts ints only (never bools, never floats); ``number`` accepts ints
  and finite floats; ``boolean`` only ``True`` / ``False``.
* ``anyOf`` (a list of schemas; the value must match one).
* ``enum`` (compared with JSON equality: ``1`` does not match ``True``), ``const``.
* objects: ``properties``, ``required``, ``additionalProperties`` (``false`` or a schema).
* arrays: ``items`` (one schema for every item), ``minItems``, ``maxItems``.
* ``minimum`` / ``maximum`` for numbers, ``minLength`` / ``maxLength`` for strings.

:func:`validate` returns every problem found as ``"<path>: <what is wrong>"`` (``$`` is the root), so the
model is told all of its mistakes at once.
"""

from __future__ import annotations

import math
from typing import Any

from tractkv.errors import InvalidInput

JSON_TYPES = ("string", "integer", "number", "boolean", "object", "array", "null")


def _is_type(value: object, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and math.isfinite(value)
        )
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
    """Equality as JSON sees it: a bool never equals a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _allowed_types(schema: dict[str, Any]) -> list[str] | None:
    raw = schema.get("type")
    if raw is None:
        return None
    types = [raw] if isinstance(raw, str) else list(raw)
    if schema.get("nullable") is True and "null" not in types:
        types.append("null")
    return types


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """Every way ``value`` breaks ``schema`` (an empty list when it conforms)."""
    errors: list[str] = []
    _validate(value, schema, path, errors)
    return errors


def _validate(value: Any, schema: dict[str, Any], path: str, errors: list[str]) -> None:
    if not isinstance(schema, dict):
        return  # ``true`` / ``{}``-like schemas admit anything
    types = _allowed_types(schema)
    if types is not None and not any(_is_type(value, t) for t in types):
        errors.append(f"{path}: expected {' or '.join(types)}, got {_type_name(value)}")
        return
    if isinstance(schema.get("anyOf"), list):
        branches = [validate(value, option, path) for option in schema["anyOf"]]
        if branches and all(branches):
            errors.append(f"{path}: matches none of the allowed shapes ({'; '.join(branches[0])})")
    if "enum" in schema and not any(_json_equal(value, option) for option in schema["enum"]):
        options = ", ".join(_show(o) for o in schema["enum"])
        errors.append(f"{path}: {_show(value)} is not one of {options}")
    if "const" in schema and not _json_equal(value, schema["const"]):
        errors.append(f"{path}: must be {_show(schema['const'])}")
    if isinstance(value, dict):
        _validate_object(value, schema, path, errors)
    elif isinstance(value, list | tuple):
        _validate_array(value, schema, path, errors)
    elif isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{path}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']} characters")
    elif _is_type(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} is less than the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} is more than the maximum {schema['maximum']}")


def _validate_object(value: dict[str, Any], schema: dict[str, Any], path: str, errors: list[str]) -> None:
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in value:
            errors.append(f"{path}: missing required property {name!r}")
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        child = f"{path}.{key}"
        if key in properties:
            _validate(item, properties[key], child, errors)
        elif extra is False:
            allowed = ", ".join(sorted(properties)) or "none"
            errors.append(f"{path}: unexpected property {key!r} (allowed: {allowed})")
        elif isinstance(extra, dict):
            _validate(item, extra, child, errors)


def _validate_array(
    value: list[Any] | tuple[Any, ...], schema: dict[str, Any], path: str, errors: list[str]
) -> None:
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(f"{path}: fewer than {schema['minItems']} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(f"{path}: more than {schema['maxItems']} items")
    items = schema.get("items")
    if isinstance(items, dict):
        for index, item in enumerate(value):
            _validate(item, items, f"{path}[{index}]", errors)


def _show(value: object) -> str:
    import json

    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def check_parameters_schema(schema: object, tool: str) -> dict[str, Any]:
    """Check that a tool's ``parameters`` is an object schema this module can enforce; return it.

    Raises:
        InvalidInput: not a dict, not ``type: object``, ``properties`` not a map of schemas, ``required``
            naming an undeclared property, or an unknown type name anywhere.
    """
    if not isinstance(schema, dict):
        raise InvalidInput(
            f"tool {tool!r}: parameters must be a JSON Schema object, not {type(schema).__name__}"
        )
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
    _check_types(schema, f"tool {tool!r} parameters")
    return schema


def _check_types(schema: object, where: str) -> None:
    if not isinstance(schema, dict):
        return
    raw = schema.get("type")
    if raw is not None:
        names = [raw] if isinstance(raw, str) else raw
        if not isinstance(names, list) or any(n not in JSON_TYPES for n in names):
            raise InvalidInput(f"{where}: unknown type {raw!r} (known: {', '.join(JSON_TYPES)})")
    for key in ("properties",):
        for name, child in (schema.get(key) or {}).items():
            _check_types(child, f"{where}.{name}")
    if isinstance(schema.get("items"), dict):
        _check_types(schema["items"], f"{where}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        _check_types(schema["additionalProperties"], f"{where}.*")
