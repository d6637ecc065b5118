"""``ToolExecutor``: run tools by name for a model, with checked arguments and recorded usage.

``execute(name, arguments)`` never raises for anything the model or a tool did: an unknown tool, an
argument the tool does not declare (arguments are whitelisted against the schema, never passed through;
only a schema that says ``additionalProperties`` or ``patternProperties`` with a handler taking
``**kwargs``, such as an MCP server's tool, takes others, checked against what the schema says of them),
an argument that breaks the schema, and an exception inside the handler all come back as
``ToolResult(success=False, error=...)``. Each execution, failed or not, publishes ``tool_start`` and then
``tool_complete`` or ``tool_error`` on the executor's :class:`EventBus`, and leaves a usage record
(see :mod:`tractkv.engine.usage.rows` for the pending row -> record lifecycle and crash behaviour).

Nesting: an execution started while a handler runs (``context.execute``, ``context.executor.execute``, a
child agent loop through ``context.run_child``) becomes a child of that handler's usage. The current
execution is tracked in a :mod:`contextvars` variable, so it follows the handler's thread (and asyncio
tasks); from a thread the handler starts, pass ``parent_id=context.usage_id`` explicitly. A child is nested
when it is run by the same executor as its parent (``context.execute``) or records in the same store.

Where usage is recorded: in the store of the conversation that made the call (``conversation=``, which the
agent loop passes: its own tract), else the executor's tract's store; nested executions record where their
parent does. So a supervisor whose managed agent lives in another store keeps its tools' usage (pending rows,
awaiting-link markers, records) in its own store, linked from its own tool results, and writes none in the
managed store. A child conversation in another store (``run_child`` from such a tool) is not linked from the
record (``heads``): a record may only link what its store holds.
"""

from __future__ import annotations

import contextvars
import inspect
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, overload

import attrs

from tractkv.engine.content import check_json
from tractkv.engine.session import Session, WritePolicy
from tractkv.engine.usage import (
    DEFAULT_RESULT_LIMIT,
    PendingUsage,
    abandon,
    begin,
    finish,
    new_usage_id,
    note_head,
    truncate,
)
from tractkv.engine.values import timestamp
from tractkv.errors import ContentError, InvalidInput, TractError
from tractkv.ids import ObjectId, is_object_id
from tractkv.model import UsageRecord

from .context import AgentStep, ToolContext
from .definitions import FORMATS, Handler, ToolDefinition, ToolProfile, ToolResult, context_problem
from .events import EventBus, ToolEvent
from .profiles import profile_tools
from .schema import validate

if TYPE_CHECKING:
    import reprlib

    from tractkv.engine.values import CompiledContext
    from tractkv.llm.protocol import LLMClient
    from tractkv.store import Store
    from tractkv.tract import Tract

_log = logging.getLogger(__name__)


class _Frame:
    """A running execution: where its children report (in memory; the row on disk mirrors it)."""

    def __init__(
        self,
        *,
        usage_id: str,
        store: Store,
        executor: ToolExecutor,
        branch: str | None,
        commit: ObjectId | None,
        step: AgentStep | None,
        llm: LLMClient | None,
        compiled: CompiledContext | None,
    ) -> None:
        self.usage_id = usage_id
        self.store = store  # where its usage is recorded: the store of the conversation that made the call
        self.executor = executor
        self.branch = branch
        self.commit = commit
        self.step = step
        self.llm = llm
        self.compiled = compiled
        self.children: list[tuple[int, ObjectId]] = []
        self.objects: list[UsageRecord] = []
        self.heads: list[ObjectId] = []
        self.lock = threading.Lock()

    def add_child(self, record: UsageRecord, oid: ObjectId, objects: Iterable[UsageRecord]) -> None:
        with self.lock:
            self.children.append((record.started_at, oid))
            self.objects.extend(objects)

    def add_head(self, head: ObjectId) -> None:
        with self.lock:
            if head not in self.heads:
                self.heads.append(head)


_CURRENT: contextvars.ContextVar[_Frame | None] = contextvars.ContextVar("tractkv_tool_frame", default=None)
_RUNNING: dict[str, _Frame] = {}  # usage id -> frame, for explicit parent_id= nesting across threads
_RUNNING_LOCK = threading.Lock()


def current_usage_id() -> str | None:
    """The usage id of the tool execution running in this context, or None."""
    frame = _CURRENT.get()
    return frame.usage_id if frame is not None else None


def record_head(usage_id: str, head: ObjectId) -> None:
    """Note that a running execution left a conversation ending at ``head`` (its record will link it)."""
    with _RUNNING_LOCK:
        frame = _RUNNING.get(usage_id)
    if frame is None:
        raise InvalidInput(f"tool execution {usage_id} is not running")
    if not frame.store.has(head):
        return  # a conversation in another store: the record could not link it (see the module doc)
    frame.add_head(head)
    note_head(frame.store, usage_id, head)


def _clean(text: str) -> str:
    """Text safe to store: lone surrogates (which no encoder accepts) become U+FFFD."""
    return text.encode("utf-8", "replace").decode("utf-8") if not text.isascii() else text


def _as_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    try:
        return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


def _describe(exc: BaseException) -> str:
    """A tractkv error's message as is (they are written for people); others with their type."""
    if isinstance(exc, TractError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class ToolExecutor:
    """Runs the tools you register, plus the built-in tools of a profile if you name one, on a tract.

    No built-in tool is offered unless you ask for it: ``ToolExecutor(t)`` runs only the tools you give it
    (``tools=`` or :meth:`register`), so a model never gets tools that reset, compress or rewrite its context
    by default. ``ToolExecutor(t, profile="self")`` adds the 9 context tools of an agent managing its own
    context; ``"supervisor"`` or ``"full"`` all 15. The agent loop without an executor
    (``toolkit.run(t, llm)``) uses ``ToolExecutor(t)`` too: the same default everywhere.

    Args:
        tract: the tract the tools act on (and whose store keeps the usage records).
        profile: which built-in tools to offer (``"self"``, ``"supervisor"``, ``"full"``, a
            :class:`ToolProfile`), or None (the default) for none.
        overrides: ``{tool name: description}`` replacing the profile's descriptions.
        tools: further tools (definitions or functions, see :meth:`register`).
        llm: the model handlers see as ``context.llm`` (default: the run's, else the tract's).
        events: the bus to publish on (default: a new one, :attr:`events`).
        result_limit: characters of a result kept in its usage record (the tool_result commit keeps all).
        clock: returns the time in µs since the epoch (default: the system clock).
    """

    def __init__(
        self,
        tract: Tract,
        *,
        profile: str | ToolProfile | None = None,
        overrides: Mapping[str, str] | None = None,
        tools: Iterable[ToolDefinition | Handler] = (),
        llm: LLMClient | None = None,
        events: EventBus | None = None,
        result_limit: int = DEFAULT_RESULT_LIMIT,
        clock: Callable[[], int] | None = None,
    ) -> None:
        if not isinstance(result_limit, int) or result_limit < 1:
            raise InvalidInput("result_limit must be a positive number of characters")
        tract.check_writable("execute tools")  # executions write usage rows: not on a read-only tract
        self.tract = tract
        self.llm = llm
        self.events = events if events is not None else EventBus()
        self.result_limit = result_limit
        self._clock = clock or (lambda: time.time_ns() // 1000)
        self._tools: dict[str, ToolDefinition] = {t.name: t for t in profile_tools(profile, overrides)}
        self._refreshers: list[Callable[[], None]] = []
        for item in tools:
            self.register(item)

    def __repr__(self) -> str:
        return f"ToolExecutor({self.tract!r}, tools={list(self._tools)})"

    @property
    def store(self) -> Store:
        return self.tract.store

    # --- the tools ----------------------------------------------------------------------------------------

    @overload
    def register(
        self,
        tool: ToolDefinition | Handler,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        replace: bool = False,
        strict: bool | None = None,
    ) -> ToolDefinition: ...

    @overload
    def register(
        self,
        tool: None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        replace: bool = False,
        strict: bool | None = None,
    ) -> Callable[[Handler], ToolDefinition]: ...

    def register(
        self,
        tool: ToolDefinition | Handler | None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        replace: bool = False,
        strict: bool | None = None,
    ) -> ToolDefinition | Callable[[Handler], ToolDefinition]:
        """Add a tool: a :class:`ToolDefinition`, a function decorated with :func:`tool`, or a plain function
        (its schema then comes from its type hints and Google-style docstring). Usable as a decorator:
        ``@executor.register`` or ``@executor.register(name=..., description=..., strict=...)``.

        Parameters typed with dataclasses, TypedDicts, enums, ``Literal``, pydantic models (and containers of
        those) arrive converted to those types. ``strict=True`` makes the schema follow OpenAI's strict mode
        (see :mod:`tractkv.toolkit.typed`); for a :class:`ToolDefinition` it marks the tool strict, which its
        parameters must then already allow.

        Raises:
            InvalidInput: a definition without a handler, a handler without a keyword-only ``context``
                parameter (or otherwise unfit, see :func:`check_handler`), a name already taken (unless
                ``replace``), or (``strict``) a type strict mode cannot express.
        """
        if tool is None:

            def decorate(func: Handler) -> ToolDefinition:
                return self._add(
                    ToolDefinition.from_function(
                        func, name=name, description=description, strict=bool(strict)
                    ),
                    replace,
                )

            return decorate
        if isinstance(tool, ToolDefinition):
            definition = tool
            if name is not None or description is not None or strict is not None:
                definition = attrs.evolve(
                    tool,
                    name=name or tool.name,
                    description=description or tool.description,
                    strict=tool.strict if strict is None else strict,
                )
        elif callable(tool):
            definition = ToolDefinition.from_function(
                tool, name=name, description=description, strict=bool(strict)
            )
        else:
            raise InvalidInput(f"register() takes a ToolDefinition or a function, not {type(tool).__name__}")
        return self._add(definition, replace)

    def _add(self, definition: ToolDefinition, replace: bool) -> ToolDefinition:
        if definition.handler is None:
            raise InvalidInput(f"tool {definition.name!r} has no handler to run")
        problem = context_problem(definition.handler)
        if problem is not None:  # ToolDefinition checks this too; a subclass or evolve() might not have
            raise InvalidInput(f"tool {definition.name!r}: {problem}")
        if definition.name in self._tools and not replace:
            raise InvalidInput(f"a tool named {definition.name!r} is registered already (pass replace=True)")
        self._tools[definition.name] = definition
        return definition

    def add_refresher(self, refresh: Callable[[], None]) -> None:
        """Call ``refresh()`` before this executor lists its tools (:meth:`schemas`, :meth:`definitions`,
        :meth:`available_tools`) and before each :meth:`execute`, in the thread that asks: a source of tools
        that change while it is used (an MCP server announcing ``tools/list_changed``, see
        :mod:`tractkv.integrations.mcp`) registers and unregisters them there. A refresher that raises is
        logged and skipped."""
        if not callable(refresh):
            raise InvalidInput("add_refresher() takes a function of no arguments")
        self._refreshers.append(refresh)

    def _refresh(self) -> None:
        for refresh in tuple(self._refreshers):
            try:
                refresh()
            except Exception:
                _log.exception("a tool refresher of %r raised", self)

    def unregister(self, name: str) -> None:
        """Remove a tool (built-in or registered)."""
        if self._tools.pop(name, None) is None:
            raise InvalidInput(f"no tool named {name!r}")

    def get(self, name: str) -> ToolDefinition | None:
        """The definition of a tool, or None."""
        return self._tools.get(name)

    def available_tools(self) -> list[str]:
        """The names of the tools this executor runs: the profile's built-ins first, then registered ones in
        registration order (as the reference; :meth:`definitions` gives the definitions)."""
        self._refresh()
        return list(self._tools)

    def definitions(self) -> list[ToolDefinition]:
        """The definitions of the tools this executor runs, in :meth:`available_tools` order."""
        self._refresh()
        return list(self._tools.values())

    @property
    def tool_names(self) -> list[str]:
        """Same as :meth:`available_tools`."""
        return list(self._tools)

    def schemas(self, format: str = "openai") -> list[dict[str, Any]]:
        """The tools' schemas for a request (``"openai"`` or ``"anthropic"``)."""
        if format not in FORMATS:
            raise InvalidInput(f"format must be one of {FORMATS}, not {format!r}")
        self._refresh()
        return [t.to_format(format) for t in self._tools.values()]

    # --- running ------------------------------------------------------------------------------------------

    def _now(self) -> int:
        return int(self._clock())

    def _check_call(
        self, name: str, arguments: object
    ) -> tuple[ToolDefinition | None, str | None, dict[str, Any] | None]:
        """(the tool, what is wrong with the call or None, the arguments in the handler's declared types)."""
        definition = self._tools.get(name) if isinstance(name, str) else None
        if definition is None:
            known = ", ".join(self._tools) or "none"
            return None, f"unknown tool {name!r}; available tools: {known}", None
        if isinstance(arguments, str):  # a call recorded with the model's malformed arguments string
            shown = arguments if len(arguments) <= 200 else arguments[:197] + "..."
            return definition, f"arguments are not a JSON object (invalid or cut-off JSON): {shown!r}", None
        if not isinstance(arguments, dict):
            return definition, f"arguments must be a JSON object, not {type(arguments).__name__}", None
        declared = definition.parameters.get("properties", {})
        undeclared = [] if _open_schema(definition) else sorted(k for k in arguments if k not in declared)
        if undeclared:
            takes = ", ".join(declared) or "no arguments"
            return (
                definition,
                f"undeclared argument(s) {', '.join(map(repr, undeclared))}; {name} takes: {takes}",
                None,
            )
        problems = validate(arguments, definition.parameters, "arguments")
        converted, conversion = self._convert(definition, arguments, bool(problems))
        problems += conversion
        if problems:
            return definition, "invalid arguments: " + "; ".join(problems), None
        try:
            check_json(arguments, "arguments")
        except ContentError as exc:
            return definition, f"arguments hold a value that cannot be recorded: {exc}", None
        return definition, None, converted

    def _convert(
        self, definition: ToolDefinition, arguments: dict[str, Any], invalid: bool
    ) -> tuple[dict[str, Any], list[str]]:
        """(the arguments in the handler's declared types, the problems converting them). When the schema check
        failed, the parameters it found no fault in are still converted, so a validator's objection is reported
        with the schema's in the same result."""
        if invalid:
            schema = definition.parameters
            properties, defs = schema.get("properties", {}), schema.get("$defs")
            arguments = {
                k: v
                for k, v in arguments.items()
                if k in properties
                and not validate(v, {**properties[k], "$defs": defs} if defs else properties[k], "arguments")
            }
        try:
            converted, problems = definition.convert_arguments(arguments)
        except Exception as exc:  # a converter's own failure: reported, the handler not called
            _log.debug("converting the arguments of %s raised", definition.name, exc_info=True)
            return arguments, [f"arguments: cannot convert them: {_clean(_describe(exc))}"]
        return converted, problems

    def _parent(self, parent_id: str | None, store: Store) -> tuple[_Frame | None, str | None]:
        if parent_id is None:
            frame = _CURRENT.get()
        else:
            with _RUNNING_LOCK:
                frame = _RUNNING.get(parent_id)
            if frame is None:
                return (
                    None,
                    f"parent usage {parent_id} is not running (a ToolContext is only valid during its call)",
                )
        if frame is not None and frame.store is not store and frame.executor is not self:
            return None, None  # another store cannot link this record: run it as a top-level execution
        return frame, None

    def execute(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        tool_call_id: str | None = None,
        commit: ObjectId | None = None,
        compiled: CompiledContext | None = None,
        parent_id: str | None = None,
        llm: LLMClient | None = None,
        step: AgentStep | None = None,
        conversation: Tract | None = None,
        rerun_of: str | None = None,
    ) -> ToolResult:
        """Run a tool and record its usage; every failure is returned as a result, never raised.

        Args:
            name: the tool.
            arguments: its arguments (a JSON object); only declared parameters are accepted. A string (the
                ``invalid_arguments`` of a call whose arguments were not a JSON object, which the agent loop
                passes) is answered with an error result quoting it; the tool does not run.
            tool_call_id: the model's id for the call (recorded).
            commit: the assistant commit that made the call (default: the enclosing execution's).
            compiled: the context the model saw (handed to the handler as ``context.compiled``).
            parent_id: nest under this running execution (default: the one running in this context).
            llm: the model handlers see (default: the enclosing execution's, the executor's, the tract's).
            step: the agent step, for deferred context changes (the agent loop passes it).
            conversation: the tract whose message made the call (the agent loop passes its own): its store
                keeps the usage and its branch is in the events (default: the parent's, else the executor's
                tract).
            rerun_of: the usage id of the failed execution this one re-runs (recorded; see :meth:`rerun`).

        Raises:
            InvalidInput: only for a caller's mistake in the keywords (a ``tool_call_id`` that is not a
                non-empty string, a ``commit`` that is not an object id); never for the tool or its arguments.
        """
        if tool_call_id is not None and (not isinstance(tool_call_id, str) or not tool_call_id):
            raise InvalidInput("tool_call_id must be a non-empty string or None")
        if commit is not None and not is_object_id(commit):
            raise InvalidInput(f"commit must be an object id, not {commit!r}")
        self._refresh()  # a tool source's announced changes apply before the call is checked
        started = self._now()
        usage_id = new_usage_id(started)
        owner = conversation if conversation is not None else self.tract
        parent, parent_problem = self._parent(parent_id, owner.store)
        store, branch = (
            (parent.store, parent.branch) if parent is not None else (owner.store, owner.current_branch)
        )
        if parent is not None:
            commit = commit if commit is not None else parent.commit
            step = step if step is not None else parent.step
            compiled = compiled if compiled is not None else parent.compiled
            llm = llm if llm is not None else parent.llm
        if llm is None:
            llm = self.llm if self.llm is not None else getattr(self.tract, "llm", None)
        args = (
            dict(arguments) if isinstance(arguments, Mapping) else arguments if arguments is not None else {}
        )
        definition, problem, call_args = self._check_call(name, args)
        problem = problem or parent_problem
        tool_name = _clean(name) if isinstance(name, str) and name else "(unnamed)"
        parent_usage = parent.usage_id if parent is not None else None
        if rerun_of is not None and (not isinstance(rerun_of, str) or not rerun_of):
            problem = problem or "rerun_of must be a usage id"
            rerun_of = None
        started_event = ToolEvent(
            kind="tool_start",
            usage_id=usage_id,
            parent_id=parent_usage,
            commit_id=commit,
            tool_name=tool_name,
            timestamp=timestamp(started),
            tool_call_id=tool_call_id,
            branch=branch,
            arguments=_recordable(args) or {},
            description=_summary(definition.description) if definition is not None else None,
            rerun_of=rerun_of,
        )
        self.events.publish(started_event)
        if problem is not None or definition is None or definition.handler is None or call_args is None:
            record = UsageRecord(
                usage_id=usage_id,
                tool_name=tool_name,
                status="error",
                started_at=started,
                completed_at=max(self._now(), started),
                arguments=_recordable(args),
                error=_clean(problem or "tool has no handler"),
                commit=commit,
                tool_call_id=tool_call_id,
                parent_id=parent_usage,
                rerun_of=rerun_of,
            )
            return self._complete(record, parent, (), store, started_event, had_row=False, output="")
        assert isinstance(args, dict)
        pending = PendingUsage.start(
            usage_id=usage_id,
            tool_name=tool_name,
            arguments=args,
            started_at=started,
            commit=commit,
            tool_call_id=tool_call_id,
            parent_id=parent_usage,
        )
        try:
            begin(store, pending)  # on disk before the handler can have any effect
        except Exception as exc:
            error = f"not run: its usage could not be recorded ({_describe(exc)})"
            self.events.publish(_finished(started_event, "tool_error", self._now(), error=error))
            return ToolResult(tool_name, False, error=error, usage_id=usage_id)
        frame = _Frame(
            usage_id=usage_id,
            store=store,
            executor=self,
            branch=branch,
            commit=commit,
            step=step,
            llm=llm,
            compiled=compiled,
        )
        with _RUNNING_LOCK:
            _RUNNING[usage_id] = frame
        token = _CURRENT.set(frame)
        try:
            output, success, error_text, parts = self._call(
                definition, call_args, frame, parent_usage, tool_call_id, tool_name
            )
        except BaseException:
            # KeyboardInterrupt, SystemExit...: the process may go on, so do not leave a row that looks like
            # it is still running; it shows as interrupted (and the loop answers it that way) at once.
            abandon(store, usage_id)
            raise
        finally:
            _CURRENT.reset(token)
            with _RUNNING_LOCK:
                _RUNNING.pop(usage_id, None)
        with frame.lock:
            children = tuple(oid for _, oid in sorted(frame.children, key=lambda c: c[0]))
            nested = tuple(frame.objects)
            heads = tuple(frame.heads)
        result_text, full_chars = truncate(output, self.result_limit) if success else (None, None)
        record = UsageRecord(
            usage_id=usage_id,
            tool_name=tool_name,
            status="success" if success else "error",
            started_at=started,
            completed_at=max(self._now(), started),
            arguments=args or None,
            result=result_text,
            result_chars=full_chars,
            error=None if success else truncate(error_text, self.result_limit)[0],
            commit=commit,
            tool_call_id=tool_call_id,
            parent_id=parent_usage,
            children=children,
            heads=heads,
            rerun_of=rerun_of,
        )
        result = self._complete(
            record, parent, nested, store, started_event, had_row=True, output=output, parts=parts
        )
        if parent is not None and result.success:
            return self._review_nested(result)
        return result

    def _review_nested(self, result: ToolResult) -> ToolResult:
        """A nested call's successful result, as the tract's ``tool_result`` hooks (or its configured
        summarization) make it: the calling handler gets what a top-level result would have become. The
        usage record keeps the raw output; a rejection or a failing hook becomes an error result."""
        try:
            text = self.tract.review_tool_result(result.tool_name, result.output, label=result.usage_id or "")
        except Exception as exc:
            _log.debug("result hooks of nested %s raised", result.tool_name, exc_info=True)
            error = f"the tool ran, but the tool_result hooks failed on its result: {_clean(_describe(exc))}"
            return attrs.evolve(result, success=False, output="", error=error)
        if text is None:
            return attrs.evolve(result, success=False, output="", error=WITHHELD_NESTED, parts=())
        return attrs.evolve(result, output=text, parts=()) if text != result.output else result

    def _call(
        self,
        definition: ToolDefinition,
        args: dict[str, Any],
        frame: _Frame,
        parent_usage: str | None,
        tool_call_id: str | None,
        tool_name: str,
    ) -> tuple[str, bool, str, tuple[Any, ...]]:
        """Run the handler: (output, success, error, content parts)."""
        handler = definition.handler
        problem = context_problem(handler)
        if problem is not None:
            return "", False, f"not run: {problem}", ()
        assert handler is not None
        context = ToolContext(
            tract=self.tract,
            compiled=frame.compiled,
            llm=frame.llm,
            executor=self,
            events=self.events,
            usage_id=frame.usage_id,
            parent_id=parent_usage,
            commit_id=frame.commit,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            step=frame.step,
        )
        guarded = frame.step is not None and frame.step.tract is self.tract and frame.commit is not None
        guard = _open_calls(self.tract) if guarded else None
        if guard is not None:
            guard.open(tool_name)
        try:
            value = handler(**args, context=context)
        except Exception as exc:
            _log.debug("tool %s raised", tool_name, exc_info=True)
            return "", False, _clean(_describe(exc)), ()
        finally:
            if guard is not None:
                guard.close(tool_name)
        if isinstance(value, ToolResult):
            error = _clean(value.error or "the tool reported a failure")
            return _clean(value.output), value.success, error, value.parts if value.success else ()
        return _clean(_as_text(value)), True, "", ()

    def _complete(
        self,
        record: UsageRecord,
        parent: _Frame | None,
        nested: tuple[UsageRecord, ...],
        store: Store,
        started_event: ToolEvent,
        *,
        had_row: bool,
        output: str,
        parts: tuple[Any, ...] = (),
    ) -> ToolResult:
        oid: ObjectId | None = None
        # a top-level answer to a call keeps an awaiting-link marker with the full output (see engine/usage_rows)
        awaits_link = (
            record.parent_id is None and record.tool_call_id is not None and record.commit is not None
        )
        try:
            oid = finish(store, record, had_row=had_row, output=output if awaits_link else None)
        except Exception:  # the row (if any) stays: the usage shows as pending, then interrupted
            _log.exception("could not store the usage record of %s (%s)", record.tool_name, record.usage_id)
        success = record.status == "success"
        self.events.publish(
            _finished(
                started_event,
                "tool_complete" if success else "tool_error",
                record.completed_at or self._now(),
                output=record.result if success else None,
                error=record.error,
            )
        )
        objects = (*nested, record) if oid is not None else ()
        if parent is not None and oid is not None:
            parent.add_child(record, oid, objects)
        return ToolResult(
            record.tool_name,
            success,
            output=output if success else "",
            error="" if success else (record.error or ""),
            usage_id=record.usage_id,
            usage_objects=objects,
            parts=parts if success else (),
        )


def _open_schema(definition: ToolDefinition) -> bool:
    """Does the tool take arguments its schema does not name? Only when the schema says so explicitly
    (``additionalProperties`` true or a schema, or ``patternProperties``) and the handler takes ``**kwargs``
    (an MCP server's tool, say): the validator then checks them as the schema says."""
    schema = definition.parameters
    says = schema.get("additionalProperties", False) is not False or "patternProperties" in schema
    if not says or definition.handler is None:
        return False
    try:
        parameters = inspect.signature(definition.handler).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _summary(description: str) -> str:
    """The first line of a tool's description (what events carry as ``description``)."""
    return description.strip().split("\n", 1)[0]


def _finished(
    started: ToolEvent, kind: str, at_us: int, *, output: str | None = None, error: str | None = None
) -> ToolEvent:
    """The completion event of an execution: its start event's payload, the time and the outcome."""
    at = timestamp(max(at_us, 0))
    duration = max((at - started.timestamp).total_seconds() * 1000, 0.0)
    return attrs.evolve(
        started,
        kind=kind,
        timestamp=at,
        started_at=started.timestamp,
        duration_ms=duration,
        output=output,
        error=error,
    )


WITHHELD_NESTED = "The tool ran, but a tool_result hook withheld its result."

# What a handler may do directly while its call is open: these add no message, so the call's result still
# follows it (an annotation, a tool set change).
_ALLOWED_WHILE_OPEN = frozenset({"annotate"})


class OpenCallGuard(WritePolicy[Session]):
    """The session write policy that refuses context changes while a tool call waits for its result: a
    handler's direct commit, switch, reset... would land between the assistant's tool call and its result.
    Registered on a session once (:func:`_open_calls`); the executor opens and closes calls on it around
    each handler it runs for a step of that session."""

    def __init__(self) -> None:
        self._open: list[str] = []  # the tool names whose calls wait for their results, innermost last

    def open(self, tool_name: str) -> None:
        self._open.append(tool_name)

    def close(self, tool_name: str) -> None:
        self._open.remove(tool_name)

    def before_write(self, session: Session, action: str) -> None:
        if not self._open or action in _ALLOWED_WHILE_OPEN:
            return
        raise InvalidInput(
            f"tool {self._open[-1]!r} tried to {action} while its tool call waits for its result: the change "
            "would land between the assistant's tool call and its result, which providers reject. Apply it "
            "with context.defer(action, note): it runs right after this step's tool results are committed"
        )


def _open_calls(tract: Tract) -> OpenCallGuard:
    """The tract's :class:`OpenCallGuard`, registered on first use (one per handle, so one per session)."""
    for policy in tract.policies:
        if isinstance(policy, OpenCallGuard):
            return policy
    guard = OpenCallGuard()
    tract.add_policy(guard)
    return guard


def _recordable(args: object) -> dict[str, Any] | None:
    """Arguments as a usage record can hold them (a value it cannot encode is shown as text)."""
    if not isinstance(args, dict) or not args:
        return None if isinstance(args, dict) or args is None else {"(arguments)": _clean(repr(args))}
    try:
        check_json(args, "arguments")  # bounded: a cycle or a value expanding past any object is refused
        return args
    except ContentError:
        shown = _bounded_repr()
        return {str(k): _clean(shown.repr(v)) for k, v in args.items()}


def _bounded_repr() -> reprlib.Repr:
    """A repr of bounded size and time (3 levels, 50 items each), for arguments that are not JSON: a plain
    repr of a value sharing one list 40 levels deep would never end."""
    import reprlib  # lazy: only for arguments that cannot be recorded as they are

    shown = reprlib.Repr()
    shown.maxlevel = 3
    shown.maxdict = shown.maxlist = shown.maxtuple = shown.maxset = shown.maxfrozenset = 50
    shown.maxdeque = shown.maxarray = 50
    shown.maxstring = shown.maxother = 1000
    shown.maxlong = 100
    return shown
