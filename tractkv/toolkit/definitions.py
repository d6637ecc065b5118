"""Tool definitions, results, and tools made from plain functions.

A :class:`ToolDefinition` is a name, a description written for the model (when and why to use the tool), a
JSON Schema for its parameters, and a handler. Every handler takes the tool context as a **keyword-only**
parameter named ``context``, which the executor injects::

    @tool
    def search(query: str, limit: int | None = None, *, context: ToolContext) -> str:
        \"\"\"Search the notes for a phrase. Use it before answering questions about earlier work.

        Args:
            query: The phrase to look for.
            limit: At most this many hits (all when omitted).
        \"\"\"

A handler without a keyword-only ``context`` parameter is refused when the definition is made (and the
executor checks again before every call, so a handler is never called with a partial signature). So is a
handler that could not accept a declared parameter, or that needs a parameter the schema does not require.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, overload

import attrs

from tractkv.errors import InvalidInput
from tractkv.model import UsageRecord

from .schema import check_parameters_schema
from .typed import ArgumentConverter, SchemaGenerator, check_strict, function_parameters

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT_PARAM = "context"  # the keyword-only parameter every handler declares for its ToolContext
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI and Anthropic both accept as a tool name
FORMATS = ("openai", "anthropic")

Handler = Callable[..., Any]


def _check_name(_inst: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not TOOL_NAME.match(value):
        raise InvalidInput(f"tool name {value!r} must be 1-64 letters, digits, '_' or '-'")


def _check_description(_inst: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("a tool needs a description telling the model when and why to use it")


@attrs.frozen
class ToolDefinition:
    """A tool the model can call: name, description, JSON Schema parameters, and the handler that runs it.

    Calling the definition calls the handler (so a function decorated with :func:`tool` stays callable).

    Raises:
        InvalidInput: (at construction) a bad name, an empty description, a parameters schema that is not an
            object schema, or a handler whose signature does not fit (see the module doc).
    """

    name: str = attrs.field(validator=_check_name)
    description: str = attrs.field(validator=_check_description)
    parameters: dict[str, Any] = attrs.field(eq=False, hash=False)
    handler: Handler | None = attrs.field(default=None, eq=False, hash=False)
    # OpenAI strict mode: the parameters are in strict form and the OpenAI shape says "strict": true
    strict: bool = attrs.field(default=False, kw_only=True)
    # turns validated JSON arguments into the handler's declared types (from_function makes it)
    converter: ArgumentConverter | None = attrs.field(
        default=None, kw_only=True, eq=False, hash=False, repr=False
    )

    @parameters.validator
    def _check_parameters(self, _attribute: attrs.Attribute[Any], value: object) -> None:
        check_parameters_schema(value, self.name)

    @handler.validator
    def _check_handler(self, _attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None:
            check_handler(value, self.name, self.parameters)

    @strict.validator
    def _check_strict(self, _attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, bool):
            raise InvalidInput(f"tool {self.name!r}: strict must be True or False")
        if value:
            check_strict(self.parameters, self.name)

    def convert_arguments(self, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """(the arguments as the handler's declared types, every problem converting them); arguments must
        have passed the parameters schema first. Without a converter the arguments are passed as they are."""
        if self.converter is None:
            return dict(arguments), []
        return self.converter.convert(arguments)

    def to_openai(self) -> dict[str, Any]:
        """The tool in OpenAI's chat-completions shape."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": _copy(self.parameters),
                **({"strict": True} if self.strict else {}),
            },
        }

    def to_anthropic(self) -> dict[str, Any]:
        """The tool in Anthropic's messages shape."""
        return {"name": self.name, "description": self.description, "input_schema": _copy(self.parameters)}

    def to_format(self, format: str) -> dict[str, Any]:
        """The tool as ``"openai"`` or ``"anthropic"`` expects it."""
        if format == "openai":
            return self.to_openai()
        if format == "anthropic":
            return self.to_anthropic()
        raise InvalidInput(f"format must be one of {FORMATS}, not {format!r}")

    def with_description(self, description: str) -> ToolDefinition:
        """The same tool described differently (profiles and overrides use it)."""
        return attrs.evolve(self, description=description)

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(self.parameters.get("properties", {}))

    @classmethod
    def from_function(
        cls,
        func: Handler,
        *,
        name: str | None = None,
        description: str | None = None,
        strict: bool = False,
    ) -> ToolDefinition:
        """A definition whose schema comes from ``func``'s type hints and Google-style docstring.

        The docstring's text before its first section is the description (unless ``description`` is given);
        its ``Args:`` section describes each parameter. Parameters with a default are optional. Parameters may
        be dataclasses, TypedDicts, enums, ``Literal``, pydantic models and containers of those (see
        :mod:`tractkv.toolkit.typed`): the handler receives its arguments converted to those types. With
        ``strict`` the schema follows OpenAI's strict mode and the tool is marked strict.
        """
        summary, arg_docs = parse_docstring(inspect.getdoc(func) or "")
        tool_name = str(name or getattr(func, "__name__", ""))
        text = description or summary
        if not text:
            raise InvalidInput(f"tool {tool_name!r}: give the function a docstring or pass description=")
        parameters, converter = function_parameters(
            func, _type_hints(func), arg_docs, _qualname(func), strict=strict
        )
        return cls(tool_name, text, parameters, func, strict=strict, converter=converter)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.handler is None:
            raise InvalidInput(f"tool {self.name!r} has no handler")
        return self.handler(*args, **kwargs)


@attrs.frozen
class ToolResult:
    """What one execution produced. Failures are results too (``success=False`` and ``error``), never raised.

    ``usage_id`` names the execution's usage record; ``usage_objects`` are its stored records (the nested
    ones first, its own last), which the agent loop links from the tool_result commit so the usage tree
    travels with the branch. Link them yourself with ``t.tool_result(..., usages=result.usage_objects)``;
    until then (a direct ``executor.execute``) the record is kept and shown from the local ``usage`` table.

    ``parts`` holds a result that is more than text (an MCP tool's images and resources, say): content parts
    as :meth:`~tractkv.Tract.tool_result` takes them (``str``, ``{"type": "text", "text"}``, ``{"type":
    "image" | "document", "data": bytes, "media_type"}``...). ``output`` is then its text, which the usage
    record keeps; the agent loop commits :attr:`content`, the parts themselves. A handler returns them as
    ``ToolResult(name, True, output=text, parts=[...])``.
    """

    tool_name: str
    success: bool
    output: str = ""
    error: str = ""
    usage_id: str | None = attrs.field(default=None, kw_only=True)
    usage_objects: tuple[UsageRecord, ...] = attrs.field(default=(), kw_only=True, eq=False, repr=False)
    parts: tuple[Any, ...] = attrs.field(default=(), kw_only=True, eq=False, repr=False, converter=tuple)

    @property
    def content(self) -> str | list[Any]:
        """What the agent loop commits as the result: the parts of a successful result that has them, else
        :attr:`text`."""
        return list(self.parts) if self.success and self.parts else self.text

    @property
    def text(self) -> str:
        """What the model is shown: the output, or ``Error: ...``."""
        if self.success:
            return self.output or "(no output)"
        return f"Error: {self.error}"

    def __str__(self) -> str:
        return self.text


@attrs.frozen
class ToolConfig:
    """How a profile offers one tool: whether at all, and with which description (None: the default)."""

    enabled: bool = True
    description: str | None = None


def _configs(value: Mapping[str, ToolConfig]) -> dict[str, ToolConfig]:
    return dict(value)


@attrs.frozen
class ToolProfile:
    """A named allow-list of tools, each with an optional description override.

    Tools not named in ``tool_configs`` (or with ``enabled=False``) are left out.
    """

    name: str
    tool_configs: dict[str, ToolConfig] = attrs.field(converter=_configs, hash=False)

    @tool_configs.validator
    def _check_configs(self, _attribute: attrs.Attribute[Any], value: dict[str, ToolConfig]) -> None:
        for tool_name, config in value.items():
            if not isinstance(config, ToolConfig):
                raise InvalidInput(f"profile {self.name!r}: {tool_name!r} must map to a ToolConfig")

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The enabled tools, in configuration order."""
        return tuple(n for n, c in self.tool_configs.items() if c.enabled)

    def filter_tools(self, tools: Iterable[ToolDefinition]) -> list[ToolDefinition]:
        """The enabled tools among ``tools`` (in the given order), with this profile's descriptions."""
        out = []
        for definition in tools:
            config = self.tool_configs.get(definition.name)
            if config is None or not config.enabled:
                continue
            out.append(definition.with_description(config.description) if config.description else definition)
        return out


# --- tools from functions -------------------------------------------------------------------------------


@overload
def tool(func: Handler, /) -> ToolDefinition: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, strict: bool = False
) -> Callable[[Handler], ToolDefinition]: ...


def tool(
    func: Handler | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
) -> ToolDefinition | Callable[[Handler], ToolDefinition]:
    """Make a :class:`ToolDefinition` from a function: ``@tool`` or ``@tool(name=..., description=...,
    strict=...)``."""
    if func is not None:
        return ToolDefinition.from_function(func, name=name, description=description, strict=strict)

    def decorate(inner: Handler) -> ToolDefinition:
        return ToolDefinition.from_function(inner, name=name, description=description, strict=strict)

    return decorate


_SECTIONS = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Returns|Return|Raises|Yields|Examples?|Notes?|"
    r"Attributes|See Also|Warnings?):\s*$"
)
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) from a Google-style docstring."""
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    base_indent: int | None = None
    current: str | None = None
    for line in lines:
        header = _SECTIONS.match(line.strip()) if not line.startswith((" ", "\t")) else None
        if header:
            section, base_indent, current = header.group(1), None, None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in ("Args", "Arguments", "Parameters", "Params", "Keyword Args") or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if base_indent is None:
            base_indent = indent
        match = _ARG_LINE.match(line.strip())
        if indent <= base_indent and match:
            current = match.group(1).lstrip("*")
            args[current] = match.group(3).strip()
        elif current is not None:
            args[current] = f"{args[current]} {line.strip()}".strip()
    paragraphs = re.split(r"\n\s*\n", "\n".join(summary).strip())
    description = "\n\n".join(" ".join(ln.strip() for ln in p.splitlines()) for p in paragraphs if p.strip())
    return description, args


def schema_from_function(func: Handler, arg_docs: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The parameters schema of ``func`` (every parameter but the keyword-only ``context``).

    Raises:
        InvalidInput: a parameter without a type hint, a type with no JSON Schema equivalent, ``*args``.
    """
    return function_parameters(func, _type_hints(func), arg_docs or {}, _qualname(func))[0]


def _type_hints(func: Handler) -> dict[str, Any]:
    """Resolved type hints of the parameters; ``context``'s hint is never needed (it may be a string that
    only resolves under TYPE_CHECKING)."""
    try:
        return typing.get_type_hints(func, include_extras=True)
    except Exception:  # an unresolvable hint (often context's): resolve the others one by one below
        pass
    hints: dict[str, Any] = {}
    namespace = dict(getattr(func, "__globals__", {}))
    for name, raw in getattr(func, "__annotations__", {}).items():
        if name in (CONTEXT_PARAM, "return"):
            continue
        annotation = raw
        if isinstance(raw, str):
            try:
                annotation = eval(raw, namespace)  # the function's own annotation, as get_type_hints does
            except Exception as exc:
                raise InvalidInput(f"{_qualname(func)}: cannot resolve the hint of {name!r}: {exc}") from None
        hints[name] = annotation
    return hints


def json_schema_for(hint: Any, where: str = "parameter") -> dict[str, Any]:
    """The JSON Schema of a type hint: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``,
    ``list[X]`` / ``tuple[X, ...]`` / ``set[X]``, ``dict[str, X]``, ``Literal[...]``, enums, unions
    (``int | None`` becomes ``{"type": ["integer", "null"]}``), ``Annotated[X, "description"]``, dataclasses
    and TypedDicts (as ``$ref`` into the ``$defs`` the result then carries).

    Raises:
        InvalidInput: a type with no JSON equivalent (pydantic types: see :func:`schema_from_function`).
    """
    generator = SchemaGenerator()
    try:
        schema = generator.schema(hint, where)
    except Exception as exc:
        if isinstance(exc, InvalidInput):
            raise
        raise InvalidInput(
            f"{where}: a pydantic type needs a whole function (schema_from_function)"
        ) from None
    return {**schema, "$defs": generator.defs} if generator.defs else schema


def _qualname(func: object) -> str:
    return str(getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func))


# --- handler contract -------------------------------------------------------------------------------------


def context_problem(handler: object) -> str | None:
    """Why ``handler`` cannot be called with ``context=`` as a keyword-only argument, or None when it can."""
    if not callable(handler):
        return "the handler is not callable"
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError) as exc:
        return f"its signature cannot be read ({exc})"
    param = signature.parameters.get(CONTEXT_PARAM)
    if param is None or param.kind is not inspect.Parameter.KEYWORD_ONLY:
        return (
            f"{_qualname(handler)} must take the tool context as a keyword-only parameter: "
            f"def {getattr(handler, '__name__', 'handler')}(..., *, context: ToolContext)"
        )
    return None


def check_handler(handler: object, name: str, parameters: Mapping[str, Any]) -> None:
    """Refuse a handler that could not be called with the declared parameters plus ``context=``.

    Raises:
        InvalidInput: no keyword-only ``context``; a declared parameter the handler cannot take by keyword;
            a handler parameter without a default that the schema does not require; a parameter named
            ``context`` in the schema.
    """
    problem = context_problem(handler)
    if problem is not None:
        raise InvalidInput(f"tool {name!r}: {problem}")
    signature = inspect.signature(handler)  # type: ignore[arg-type]
    params = signature.parameters
    declared = parameters.get("properties", {})
    required = set(parameters.get("required", ()))
    if CONTEXT_PARAM in declared:
        raise InvalidInput(
            f"tool {name!r}: 'context' is reserved for the tool context; rename that parameter"
        )
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    for prop in declared:
        param = params.get(prop)
        if param is None and not takes_any:
            raise InvalidInput(f"tool {name!r}: the handler has no parameter {prop!r} the schema declares")
        if param is not None and param.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.VAR_POSITIONAL,
        ):
            raise InvalidInput(f"tool {name!r}: parameter {prop!r} must be passable by keyword")
    for param in params.values():
        if param.name == CONTEXT_PARAM or param.kind in (
            inspect.Parameter.VAR_KEYWORD,
            inspect.Parameter.VAR_POSITIONAL,
        ):
            continue
        if param.default is inspect.Parameter.empty and param.name not in required:
            raise InvalidInput(
                f"tool {name!r}: handler parameter {param.name!r} has no default, so the schema must "
                "declare it as required"
            )


def _copy(value: Any) -> Any:
    import copy

    return copy.deepcopy(value)
