"""Tool sets: tool definitions in every accepted shape, the ordered set a commit links, and the per-branch
setting ``set_tools`` keeps in the local ``meta`` table.

**Accepted shapes** (:func:`read_tool` tells them apart and checks them; :func:`tool_schema` stores one
exactly as given):

* ``openai``: an OpenAI chat tool ``{"type": "function", "function": {"name", "description"?,
  "parameters"?, "strict"?}}``;
* ``responses``: a Responses / Agents flat function tool ``{"type": "function", "name", "description"?,
  "parameters"?, "strict"?}``;
* ``function``: a bare OpenAI function definition ``{"name", "description"?, "parameters", "strict"?}`` (the
  legacy ``functions`` list, the inner object of a chat tool), recognised by ``parameters`` without ``type``;
* ``anthropic``: an Anthropic custom tool ``{"name", "description"?, "input_schema"?, "type"?: "custom",
  ...}`` with the other fields of Anthropic's ``ToolParam`` (``cache_control``, ``strict``,
  ``allowed_callers``, ``defer_loading``, ``eager_input_streaming``, ``input_examples``);
* ``anthropic_server``: an Anthropic server / built-in tool, a versioned ``type`` ending in a date
  (``web_search_20250305``, ``bash_20250124``, ``text_editor_20250728``...) and its ``name`` (the type
  stands in as the name of the few that have none); its other fields are Anthropic's to check;
* ``mcp``: an MCP tool definition ``{"name", "title"?, "description"?, "inputSchema", "outputSchema"?,
  "annotations"?, ...}`` as the protocol sends it (the mcp 1.x SDK's ``Tool.model_dump()`` too), or as the
  mcp 2.x SDK's ``Tool.model_dump()`` gives it, snake_case: ``{"name", "title", "description",
  "input_schema", "output_schema", "annotations", "meta", "execution", "icons"}`` (further MCP fields such as
  ``_meta`` are kept, never sent to a provider).

**Anthropic or MCP?** Both name the parameters ``input_schema`` in snake_case. A definition with
``input_schema`` is MCP's when it carries a key only MCP has (:data:`MCP_ONLY_FIELDS`: ``title``,
``output_schema``, ``annotations``, ``meta``, ``_meta``, ``execution``, ``icons``), even with the value None:
``model_dump()`` always carries them, and Anthropic refuses every one of them. Else it is Anthropic's. A
definition with only ``name``, ``description`` and ``input_schema`` fits both and reads as Anthropic's: the
two render identically, so nothing depends on the choice. A dict holding both ``inputSchema`` and
``input_schema`` is refused (one shape per tool).

**Lists.** :func:`tool_schemas` (``set_tools``, ``commit(tools=)``, ``generate(tools=)``) takes a list of
definitions, an MCP ``tools/list`` result (``{"tools": [...], "nextCursor"?: ...}``; its ``tools`` are the
list) and SDK objects (anything with pydantic's ``model_dump``, such as the mcp SDK's ``Tool`` or
``ListToolsResult``: dumped in their wire form, camelCase, its None fields left out).

Rules every shape shares: the name matches ``^[a-zA-Z0-9_-]{1,64}$`` (OpenAI's and Anthropic's rule for
function tools); a parameters schema (``parameters`` / ``input_schema`` / ``inputSchema``) is a JSON object
schema, ``{"type": "object", ...}``, and an absent one means no parameters; ``description`` is a string;
``strict`` a boolean; an optional field whose value is None is absent (what SDK ``model_dump()`` output and
MCP ``Tool.model_dump()`` carry), and is not rendered; the whole definition is JSON (no bytes). Unknown
top-level fields are refused for the OpenAI and Anthropic shapes (their APIs reject them); one set never holds
two tools of one name (both providers reject that).

These rules are **input** policy (``set_tools``, ``commit(tools=)``, ``generate(tools=)``). A stored tool
only has to be what any earlier writer could store (:func:`legacy_name`: a dict with a string name; the rules
above came later), so a store written before them stays valid, syncs and compiles: :func:`read_stored`
reads any stored definition without raising, as close to what was given as the providers accept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

from tractkv.codec import canonical_keys
from tractkv.engine.content.payload import check_json
from tractkv.engine.content.tokens import TokenCounter
from tractkv.errors import ContentError, InvalidInput
from tractkv.ids import ObjectId
from tractkv.model import KeyOrder, ToolSchema, ToolSet, object_id
from tractkv.store import WriteBatch

ACTIVE_TOOLS = b"tools:"  # meta key prefix: branch ref -> tool set id set_tools() links to later commits
EMPTY_TOOLSET_ID = object_id(ToolSet(tools=()))

OPENAI_CHAT = "openai"
RESPONSES = "responses"
FUNCTION = "function"
ANTHROPIC = "anthropic"
ANTHROPIC_SERVER = "anthropic_server"
MCP = "mcp"
LEGACY = "legacy"  # a stored definition today's input rules refuse (written before them): read_stored only

TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # fullmatch: OpenAI's and Anthropic's function-tool name rule
SERVER_TYPE = re.compile(r"[a-z][a-z0-9_]*_[0-9]{8}")  # fullmatch: Anthropic's versioned server tool types
EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}  # what an absent schema renders as

#: keys an MCP tool definition may carry and an Anthropic tool never does (camelCase and the mcp 2.x SDK's
#: snake_case ``model_dump()`` names): one of them, with ``input_schema``, makes the definition MCP's
MCP_ONLY_FIELDS = frozenset(
    {"title", "output_schema", "outputSchema", "annotations", "meta", "_meta", "execution", "icons"}
)

_OPENAI_TOP = frozenset({"type", "function"})
_OPENAI_FUNCTION = frozenset({"name", "description", "parameters", "strict"})
_RESPONSES = frozenset({"type", "name", "description", "parameters", "strict"})
_ANTHROPIC = frozenset(
    {
        "name",
        "description",
        "input_schema",
        "type",
        "cache_control",
        "strict",
        "allowed_callers",
        "defer_loading",
        "eager_input_streaming",
        "input_examples",
    }
)


@attrs.frozen(kw_only=True)
class ToolSpec:
    """One tool definition read from any accepted shape (see the module docstring).

    ``parameters`` is the JSON object schema of its arguments (None when absent, and for server tools);
    ``strict`` is None unless a boolean was given; ``fields`` is the definition as given, its top-level fields
    whose value is None left out (None means absent). ``legacy`` is None for a definition today's rules accept;
    for a stored one they refuse (see :func:`stored_tool`) it says why, and ``shape`` is :data:`LEGACY`.
    """

    shape: str
    name: str
    description: str | None = None
    parameters: Mapping[str, Any] | None = None
    strict: bool | None = None
    fields: Mapping[str, Any] = attrs.field(factory=dict, eq=False, hash=False)
    legacy: str | None = None


def read_tool(tool: object) -> ToolSpec:
    """Which shape ``tool`` is and what it defines.

    Raises:
        InvalidInput: not a dict, or no accepted shape, a bad name, a parameters schema that is not a JSON
            object schema, a field of the wrong type or one the shape does not have (the message names it).
    """
    if isinstance(tool, ToolSchema):
        tool = tool.schema
    if not isinstance(tool, Mapping):
        raise InvalidInput(f"a tool definition must be a dict, not {type(tool).__name__}")
    mcp_only = not MCP_ONLY_FIELDS.isdisjoint(tool)  # before dropping None: model_dump() carries them all
    tool = _present(tool)
    kind = tool.get("type")
    if kind == "function" and "function" in tool:
        return _openai_chat(tool)
    if kind == "function":
        return _responses(tool)
    if kind is None and ("inputSchema" in tool or (mcp_only and "input_schema" in tool)):
        return _mcp(tool)
    if "parameters" in tool and kind is None and "input_schema" not in tool:
        return _function(tool)
    if kind is None or kind == "custom":
        return _anthropic(tool)
    if isinstance(kind, str) and SERVER_TYPE.fullmatch(kind):
        return _server(tool, kind)
    raise InvalidInput(
        f"tool type {kind!r} is not one tractkv knows: expected 'function' (OpenAI), none or 'custom' "
        "(Anthropic, MCP) or a versioned Anthropic server tool type such as 'web_search_20250305'"
    )


def schema_name(schema: object) -> str:
    """The name of a tool definition in any accepted shape (what the model calls it by), for lookups and
    display. Never raises: for a stored definition the rules refuse (a store written before them) it is
    :func:`legacy_name`, ``"?"`` when there is none."""
    if not isinstance(schema, Mapping | ToolSchema):
        return "?"
    return read_stored(schema).name


def legacy_name(schema: object) -> str | None:
    """The name every tractkv writer has required of a stored tool definition, or None when it has none.

    ``function.name`` for ``{"type": "function", "function": {...}}``, else the top-level ``name``; a
    non-empty string. This is all the validator asks of a received or stored tool (besides the tool object's
    ``name`` matching it): earlier releases stored any dict with such a name, and their stores must stay
    readable and syncable.
    """
    if isinstance(schema, ToolSchema):
        schema = schema.schema
    if not isinstance(schema, Mapping):
        return None
    name = schema.get("name")
    inner = schema.get("function")
    if schema.get("type") == "function" and isinstance(inner, Mapping):
        name = inner.get("name")
    return name if isinstance(name, str) and name else None


def read_stored(schema: object) -> ToolSpec:
    """A stored tool definition read for rendering and counting; never raises for a dict (what every stored
    definition is).

    A definition :func:`read_tool` accepts reads as it does. One today's input rules refuse (stored before
    them: parameters ``{}``, a name with a space, a field no provider knows...) reads as a :data:`LEGACY`
    spec, ``legacy`` saying why the rules refuse it, as close to what was given as a provider accepts:
    ``{"type": "function", "function": {...}}`` reads its function; anything else with a name reads as an
    Anthropic tool / bare function (``input_schema``, else ``inputSchema``, else ``parameters``); a dated
    server ``type`` stays a server tool. Its parameters: a dict without ``type`` becomes an object schema
    (``{}`` -> ``{"type": "object", "properties": {}}``), another dict is kept as it is, anything else means
    none; ``description`` and ``strict`` are kept when they have the right type; other fields are not sent.
    The name is kept as it is even when a provider refuses it (fix: ``set_tools`` with a corrected
    definition).

    Raises:
        InvalidInput: ``schema`` is not a dict (nothing stored is).
    """
    if isinstance(schema, ToolSchema):
        schema = schema.schema
    if not isinstance(schema, Mapping):  # never stored: a ToolSchema's schema is a dict
        raise InvalidInput(f"a tool definition must be a dict, not {type(schema).__name__}")
    try:
        return read_tool(schema)
    except InvalidInput as exc:
        why = str(exc)
    fields = _present(schema)
    name = legacy_name(fields) or "?"
    kind = fields.get("type")
    if isinstance(kind, str) and SERVER_TYPE.fullmatch(kind):
        return ToolSpec(shape=ANTHROPIC_SERVER, name=name if name != "?" else kind, fields=fields, legacy=why)
    inner = fields.get("function")
    source = _present(inner) if kind == "function" and isinstance(inner, Mapping) else fields
    key = next((k for k in ("input_schema", "inputSchema", "parameters") if k in source), "parameters")
    description, strict = source.get("description"), source.get("strict")
    return ToolSpec(
        shape=LEGACY,
        name=name,
        description=description if isinstance(description, str) else None,
        parameters=_legacy_parameters(source.get(key)),
        strict=strict if isinstance(strict, bool) else None,
        fields=fields,
        legacy=why,
    )


def _legacy_parameters(value: object) -> Mapping[str, Any] | None:
    if not isinstance(value, Mapping):
        return None
    if "type" not in value:
        return {**EMPTY_PARAMETERS, **value}
    return value


def tool_schemas(tools: object) -> list[ToolSchema]:
    """The stored schemas of a tools list (validated, before anything is staged): a list of definitions, an
    MCP ``tools/list`` result or SDK objects (see the module docstring, "Lists").

    Raises:
        InvalidInput: not a list (nor a tools/list result), a definition :func:`tool_schema` refuses, or two
            tools of one name.
    """
    tools = _sdk_dump(tools)
    if isinstance(tools, Mapping) and "name" not in tools and isinstance(tools.get("tools"), list | tuple):
        tools = tools["tools"]  # an MCP tools/list result
    if not isinstance(tools, list | tuple):
        raise InvalidInput("tools must be a list of tool definitions (or an MCP tools/list result)")
    schemas = [tool_schema(_sdk_dump(t)) for t in tools]
    seen: set[str] = set()
    for schema in schemas:
        if schema.name in seen:
            raise InvalidInput(f"two tools are named {schema.name!r}: a tool set holds one tool per name")
        seen.add(schema.name)
    return schemas


def _sdk_dump(value: object) -> object:
    """An SDK object (pydantic: the mcp SDK's ``Tool``, ``ListToolsResult``...) as its wire-form dict (by
    alias, JSON values, None fields left out); anything else as it is."""
    if isinstance(value, Mapping | list | tuple | ToolSchema) or not callable(
        getattr(value, "model_dump", None)
    ):
        return value
    try:
        return value.model_dump(by_alias=True, mode="json", exclude_none=True)  # type: ignore[attr-defined]
    except Exception as exc:
        raise InvalidInput(f"cannot read the tool definition {type(value).__name__}: {exc}") from None


def put_toolset(batch: WriteBatch, schemas: list[ToolSchema], cache: str | None = None) -> ObjectId:
    """Stage the schemas and the ordered tool set of their ids (each encoded once), with the key order each
    schema was given in (:func:`key_order`) and the tools' cache breakpoint; returns the set's id."""
    tools = tuple(batch.put(s) for s in schemas)
    orders = tuple(key_order(s.schema) for s in schemas)
    return batch.put(ToolSet(tools=tools, order=orders if any(orders) else (), cache=cache))


# --- key order ----------------------------------------------------------------------------------------------
# A tool's id is its canonical form (sorted keys), so the order a schema was given in is kept beside it, in the
# tool set (ToolSet.order, model.KeyOrder): one entry per map of the schema, numbered in depth-first pre-order
# (a map, then the values of its keys in canonical order; a list's items in order), None when the map's keys
# were given in canonical order, else the keys as given; trailing Nones left out, None when all are.


def key_order(schema: Mapping[str, Any]) -> KeyOrder | None:
    """The key order ``schema`` was given in, relative to its canonical form (None: canonical order)."""
    entries: list[tuple[str, ...] | None] = []
    for given, canonical in _maps(schema):
        entries.append(None if given == canonical else given)
    while entries and entries[-1] is None:
        entries.pop()
    return tuple(entries) or None


def key_maps(schema: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    """The canonical keys of each map of ``schema``, in the numbering :class:`~tractkv.model.KeyOrder` uses."""
    return tuple(canonical for _, canonical in _maps(schema))


def key_order_problem(maps: tuple[tuple[str, ...], ...], order: KeyOrder) -> str | None:
    """Why ``order`` is not a key order of a schema whose maps hold ``maps`` (:func:`key_maps`), or None.

    Each entry names a map the schema has; a listed order holds exactly that map's keys and differs from
    their canonical order (which is written None), so one order has one spelling and one tool set id."""
    if len(order) > len(maps):
        return f"{len(order)} maps ordered, the schema has {len(maps)}"
    for number, keys in enumerate(order):
        if keys is None:
            continue
        if keys == maps[number]:
            return f"map {number} is listed in canonical order (written None)"
        if sorted(keys) != sorted(maps[number]):
            return f"map {number} lists keys {list(keys)}, the schema's are {list(maps[number])}"
    return None


def apply_key_order(schema: Mapping[str, Any], order: KeyOrder | None) -> dict[str, Any]:
    """``schema`` with its maps' keys in ``order`` (:func:`key_order`) and canonical order where it has none.
    Never raises: an entry that does not fit its map (a damaged store; receive refuses one) is ignored."""
    ordered: dict[str, Any] = _ordered(schema, order or (), [0])
    return ordered


def _ordered(value: Any, order: KeyOrder, counter: list[int]) -> Any:
    if isinstance(value, Mapping):
        number = counter[0]
        counter[0] += 1
        canonical = canonical_keys(value)
        keys = order[number] if number < len(order) else None
        values = {key: _ordered(value[key], order, counter) for key in canonical}  # numbering: canonical
        if keys is None or sorted(keys) != sorted(canonical):
            return values
        return {key: values[key] for key in keys}
    if isinstance(value, list | tuple):
        return [_ordered(item, order, counter) for item in value]
    return value


def _maps(schema: Mapping[str, Any]) -> Iterator[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Each map of ``schema`` as (its keys as given, its keys in canonical order), in the numbering of
    :class:`~tractkv.model.KeyOrder` (without recursion)."""
    stack: list[Any] = [schema]
    while stack:
        value = stack.pop()
        if isinstance(value, Mapping):
            given = tuple(value)
            canonical = canonical_keys(given)
            yield given, canonical
            stack.extend(value[key] for key in reversed(canonical))
        elif isinstance(value, list | tuple):
            stack.extend(reversed(value))


def tool_schema(tool: Any) -> ToolSchema:
    """The stored schema of a tool definition in any accepted shape, exactly as given (named by
    :func:`schema_name`).

    Raises:
        InvalidInput: what :func:`read_tool` refuses, or a definition that is not JSON (bytes, ...).
        ContentError: a value the store cannot hold.
    """
    if isinstance(tool, ToolSchema):
        return tool
    spec = read_tool(tool)  # reads the few fields that name the shape, never walks the schema
    try:
        check_json(
            tool, "definition"
        )  # the one bounded walk: a cycle or a shared part expanding past a limit too
    except ContentError as exc:
        raise ContentError(f"tool {spec.name!r}: the definition must be JSON ({exc})") from None
    try:
        return ToolSchema(name=spec.name, schema=tool)
    except InvalidInput as exc:
        raise ContentError(f"tool {spec.name!r}: {exc}") from exc


TOOL_OVERHEAD = 7  # tokens framing each tool definition (the OpenAI cookbook's func_init for gpt-4o)
TOOLS_OVERHEAD = 12  # tokens closing a request's tool list, once (the cookbook's func_end)


def tool_tokens(schemas: Iterable[Mapping[str, Any]], counter: TokenCounter) -> int:
    """An estimate of the tokens a request's tool definitions cost: for each tool, ``counter`` over the compact
    JSON (sorted keys, no spaces) of what the model reads of it, plus :data:`TOOL_OVERHEAD`; plus
    :data:`TOOLS_OVERHEAD` once when there is any tool (0 when there is none).

    What the model reads of a function tool (every shape but Anthropic's server tools) is its name,
    description and parameters schema, ``{"name", "description", "parameters"}`` as rendered, the same for both
    providers. An Anthropic server tool counts its definition as given, an underestimate: Anthropic adds the
    tool's own fixed prompt, which it documents per tool. The figures come from OpenAI's cookbook "How to count
    tokens with tiktoken" (``num_tokens_for_tools``: 7 tokens open each function, 12 close the list); that
    notebook counts a TypeScript-like rendering where this counts JSON, which is a little longer, so the
    estimate leans high. Anthropic's own tool-use system prompt (a few hundred tokens per request with tools,
    per its pricing page) is not included. A stored definition today's rules refuse (a store written before
    them) counts as :func:`read_stored` reads it, so compiling such a store still works.
    """
    import json  # lazy: keeps `import tractkv` light

    total = 0
    for schema in schemas:
        spec = read_stored(schema)
        if spec.shape == ANTHROPIC_SERVER:
            shown: Mapping[str, Any] = spec.fields
        else:
            shown = {"name": spec.name, "parameters": spec.parameters or EMPTY_PARAMETERS}
            if spec.description is not None:
                shown = {**shown, "description": spec.description}
        text = json.dumps(shown, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
        total += counter.count(text) + TOOL_OVERHEAD
    return total + TOOLS_OVERHEAD if total else 0


# --- the shapes ---------------------------------------------------------------------------------------------


def _openai_chat(tool: Mapping[str, Any]) -> ToolSpec:
    _known(tool, _OPENAI_TOP, "an OpenAI chat tool")
    function = tool["function"]
    if not isinstance(function, Mapping):
        raise InvalidInput("an OpenAI chat tool's 'function' must be a dict")
    function = _present(function)
    name = _name(function.get("name"), "function.name")
    _known(function, _OPENAI_FUNCTION, f"OpenAI tool {name!r}: function")
    return _function_spec(OPENAI_CHAT, name, function, "parameters", tool)


def _responses(tool: Mapping[str, Any]) -> ToolSpec:
    name = _name(tool.get("name"), "name (or function.name)")
    _known(tool, _RESPONSES, f"Responses function tool {name!r}:")
    return _function_spec(RESPONSES, name, tool, "parameters", tool)


def _function(tool: Mapping[str, Any]) -> ToolSpec:
    name = _name(tool.get("name"), "name")
    _known(tool, _OPENAI_FUNCTION, f"OpenAI function {name!r}:")
    return _function_spec(FUNCTION, name, tool, "parameters", tool)


def _anthropic(tool: Mapping[str, Any]) -> ToolSpec:
    name = _name(tool.get("name"), "name")
    _known(tool, _ANTHROPIC, f"Anthropic tool {name!r}:")
    return _function_spec(ANTHROPIC, name, tool, "input_schema", tool)


def _function_spec(
    shape: str, name: str, source: Mapping[str, Any], schema_key: str, fields: Mapping[str, Any]
) -> ToolSpec:
    """The spec of a function-like tool whose keys were checked: description, parameters (under
    ``schema_key``) and strict read from ``source`` (the tool, or an OpenAI chat tool's ``function``)."""
    return ToolSpec(
        shape=shape,
        name=name,
        description=_description(source, name),
        parameters=_parameters(source, schema_key, name),
        strict=_strict(source, name),
        fields=fields,
    )


def _server(tool: Mapping[str, Any], kind: str) -> ToolSpec:
    # Anthropic requires the name of a server tool too (web_search, bash, str_replace_based_edit_tool...)
    name = _name(tool.get("name"), f"name (of the {kind} server tool)")
    return ToolSpec(shape=ANTHROPIC_SERVER, name=name, fields=tool)


def _mcp(tool: Mapping[str, Any]) -> ToolSpec:
    """An MCP tool, camelCase (the protocol, mcp 1.x dumps) or snake_case (mcp 2.x ``model_dump()``)."""
    name = _name(tool.get("name"), "name")
    camel = "inputSchema" in tool
    schema_key, output_key = ("inputSchema", "outputSchema") if camel else ("input_schema", "output_schema")
    other = ("input_schema", "output_schema") if camel else ("inputSchema", "outputSchema")
    mixed = sorted(k for k in (*other, "parameters", "function") if k in tool)
    if mixed:
        raise InvalidInput(f"MCP tool {name!r} ({schema_key}) also has {mixed}: one shape per tool")
    for key in ("title", "description"):
        if key in tool and not isinstance(tool[key], str):
            raise InvalidInput(f"MCP tool {name!r}: {key} must be a string")
    for key in ("annotations", "meta", "_meta", "execution"):
        if key in tool and not isinstance(tool[key], Mapping):
            raise InvalidInput(f"MCP tool {name!r}: {key} must be a dict")
    if "icons" in tool and not isinstance(tool["icons"], list):
        raise InvalidInput(f"MCP tool {name!r}: icons must be a list")
    if output_key in tool:
        _parameters(tool, output_key, name)
    parameters = _parameters(tool, schema_key, name)
    return ToolSpec(
        shape=MCP, name=name, description=tool.get("description"), parameters=parameters, fields=tool
    )


# --- the shared rules ---------------------------------------------------------------------------------------


def _name(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"a tool definition needs a name ({where}, a non-empty string)")
    if not TOOL_NAME.fullmatch(value):
        raise InvalidInput(
            f"tool name {value!r} must be 1-64 letters, digits, '_' or '-' (the providers' rule)"
        )
    return value


def _known(fields: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    unknown = sorted(str(k) for k in fields if k not in allowed)
    if unknown:
        raise InvalidInput(
            f"{what} has unknown fields {unknown} (the provider refuses them; allowed: {sorted(allowed)})"
        )


def _description(fields: Mapping[str, Any], name: str) -> str | None:
    value = fields.get("description")
    if value is not None and not isinstance(value, str):
        raise InvalidInput(f"tool {name!r}: description must be a string")
    return value


def _parameters(fields: Mapping[str, Any], key: str, name: str) -> Mapping[str, Any] | None:
    value = fields.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping) or value.get("type") != "object":
        raise InvalidInput(f"tool {name!r}: {key} must be a JSON object schema ({{'type': 'object', ...}})")
    return value


def _strict(fields: Mapping[str, Any], name: str) -> bool | None:
    value = fields.get("strict")
    if value is not None and not isinstance(value, bool):
        raise InvalidInput(f"tool {name!r}: strict must be a boolean")
    return value


def _present(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` without the ones whose value is None: every optional field of every shape treats None as
    absent (SDK ``model_dump()`` output carries ``description: None``, MCP's ``title: None``...)."""
    return {key: value for key, value in fields.items() if value is not None}
