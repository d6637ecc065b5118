"""The agent loop: compile -> generate -> execute tool calls -> repeat.

``tractkv.toolkit.run(t, llm, executor=None, max_steps=10)``:

1. **Open calls first.** If HEAD is an assistant message whose tool calls are not all answered (a previous
   run crashed, or you committed the calls yourself), each open call is answered before the model is asked
   again: a call whose execution was interrupted (its pending row's process is gone) gets an error result
   saying so, linked to an ``interrupted`` usage record (the row is then dropped); a call that completed
   but whose result never landed gets its recorded output (it is not run twice); a call never started is
   executed now. A call still running in another live process raises :class:`InvalidInput`.
2. **Each step** compiles the context, calls the model with the executor's tools (committing its reply),
   and stops when the reply calls no tools. Otherwise every call is executed in order (usage tracked), and
   each result is committed through the ``tool_result`` hook pipeline with its usage tree linked
   (``links["usages"]``). A result a hook rejects is replaced by an error result saying it was withheld
   (an API rejects a call without a result); one the hooks leave undecided is approved as they left it
   (the loop cannot wait: the model needs an answer to continue). Context changes the tools deferred
   (commit, switch, reset...) run after all of the step's results are committed; one that then fails is
   reported to the model in a user message named ``tractkv``.
3. The loop ends when the model stops calling tools (``stop_reason="done"``), after ``max_steps`` model
   calls (``"max_steps"``), or when a tool detached HEAD (``"detached"``).

A model error raises (nothing is committed for that call); tool errors never do: they go back to the model
as error results and the loop continues.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from tractkv.engine.tools import PendingToolResult
from tractkv.engine.usage import interrupted_records, iter_pending, load_tree
from tractkv.engine.values import RunResult
from tractkv.errors import ContentError, ContentTooLarge, InvalidInput, NoLLMConfigured, TractError
from tractkv.ids import ObjectId

from .context import AgentStep
from .definitions import ToolDefinition, ToolResult

if TYPE_CHECKING:
    from tractkv.engine.values import CompiledContext
    from tractkv.llm.protocol import LLMClient
    from tractkv.tract import Tract

    from .context import ToolContext
    from .definitions import ToolProfile
    from .executor import ToolExecutor

DEFAULT_MAX_STEPS = 10
WITHHELD = "The tool ran, but a tool_result hook withheld its result."
TOO_LARGE = (
    "The tool ran, but its result ({size:,} bytes encoded) is over the store's limit of {limit:,} bytes and was "
    "not kept. Ask for less (a narrower query, a page, a summary)."
)
INTERRUPTED = (
    "interrupted: the process running this tool ended before the tool finished; it may have had partial "
    "effects"
)


def run(
    tract: Tract,
    llm: LLMClient | None = None,
    executor: object = None,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    **params: Any,
) -> RunResult:
    """Run the agent loop on ``tract`` (see the module doc). ``params`` go to every model call.

    Args:
        tract: where the conversation is committed.
        llm: the model (default: the tract's).
        executor: the tools (default: ``ToolExecutor(tract)``, which offers no tool: the model just
            answers; pass ``ToolExecutor(tract, profile="self")`` for an agent that manages its own context).
        max_steps: the most model calls to make.

    Raises:
        NoLLMConfigured: no model given or configured. InvalidInput: a bad ``max_steps`` or ``executor``,
            or an open call still running elsewhere. Model and store errors propagate.
    """
    from .executor import ToolExecutor

    if executor is not None and not isinstance(executor, ToolExecutor):
        raise InvalidInput(f"executor must be a ToolExecutor, not {type(executor).__name__}")
    tract.check_writable("run")  # before any model call or tool execution

    model: LLMClient | None = llm if llm is not None else tract.llm
    if model is None:
        raise NoLLMConfigured("run")
    if not isinstance(max_steps, int) or max_steps < 1:
        raise InvalidInput("max_steps must be a positive integer")
    if executor is None:
        executor = ToolExecutor(tract, llm=model)  # the executor's own default: no built-in tools
    usage_ids: list[str] = []
    _answer_open_calls(tract, executor, model, usage_ids)
    text = ""
    steps = 0
    while steps < max_steps:
        if tract.is_detached:
            return RunResult(
                text=text, steps=steps, stop_reason="detached", head=tract.head, usage_ids=tuple(usage_ids)
            )
        compiled = tract.compile()
        # read each step: the tools may change during a run (an MCP server's tools/list_changed), and the
        # reply then records the new tool set
        schemas = executor.schemas("openai") or None
        reply = tract.generate(model, tools=schemas, **params)
        steps += 1
        payload = reply.content if isinstance(reply.content, dict) else {}
        text = str(payload.get("text") or "")
        calls = list(payload.get("tool_calls") or ())
        if not calls:
            return RunResult(
                text=text, steps=steps, stop_reason="done", head=tract.head, usage_ids=tuple(usage_ids)
            )
        _run_calls(tract, executor, model, compiled, reply.commit_id, calls, usage_ids)
    stop = "detached" if tract.is_detached else "max_steps"
    return RunResult(text=text, steps=steps, stop_reason=stop, head=tract.head, usage_ids=tuple(usage_ids))


def _run_calls(
    tract: Tract,
    executor: ToolExecutor,
    model: LLMClient,
    compiled: CompiledContext | None,
    commit: ObjectId,
    calls: Iterable[dict[str, Any]],
    usage_ids: list[str],
) -> None:
    step = AgentStep(tract)
    for call in calls:
        result = executor.execute(
            call["name"],
            call.get("invalid_arguments", call.get("arguments") or {}),  # a string: answered with an error
            tool_call_id=call["id"],
            commit=commit,
            compiled=compiled,
            llm=model,
            step=step,
            conversation=tract,
        )
        _commit_result(tract, call["id"], call["name"], result)
        if result.usage_id is not None:
            usage_ids.append(result.usage_id)
    _run_deferred(tract, step, executor.schemas("openai") or None)


def _commit_result(tract: Tract, call_id: str, name: str, result: ToolResult) -> None:
    """Commit a call's result with its usage tree linked (which drops the call's awaiting-link marker).

    A result too large to store (``ContentTooLarge``: nothing was written) is answered by an error result
    saying so, so the model can ask for less and the loop goes on; the usage record keeps the tool's status."""
    try:
        committed = _commit_content(tract, call_id, name, result)
    except ContentTooLarge as too_large:
        notice = TOO_LARGE.format(size=too_large.size, limit=too_large.limit)
        committed = tract.tool_result(
            call_id, name, notice, is_error=True, usages=result.usage_objects, hooks=False
        )
    if isinstance(committed, PendingToolResult):  # no hook decided: commit it as the hooks left it
        committed = committed.approve()
    if committed is None:  # a hook rejected it; the model still needs an answer to its call
        tract.tool_result(call_id, name, WITHHELD, is_error=True, usages=result.usage_objects, hooks=False)


def _commit_content(tract: Tract, call_id: str, name: str, result: ToolResult) -> Any:
    """Commit the result's content: its parts when it has them (a part the store refuses, a bad image say,
    makes it its text instead, with a note), else its text."""
    content = result.content
    try:
        return tract.tool_result(
            call_id, name, content, is_error=not result.success, usages=result.usage_objects
        )
    except ContentTooLarge:
        raise
    except ContentError as exc:
        if isinstance(content, str):
            raise
        text = f"{result.text}\n[the result's parts could not be kept: {exc}]"
        return tract.tool_result(call_id, name, text, is_error=False, usages=result.usage_objects)


def _run_deferred(tract: Tract, step: AgentStep, tools: list[dict[str, Any]] | None) -> None:
    """Apply the step's deferred context changes; one that fails is told to the model in a note carrying
    ``tools`` (the executor's: the tools in force stay those the model was given)."""
    for tool_name, action in step.take():
        try:
            action()
        except Exception as exc:
            detail = str(exc) if isinstance(exc, TractError) else f"{type(exc).__name__}: {exc}"
            note = f"[{tool_name} could not be applied after the tool results: {detail}]"
            if not tract.is_detached:
                tract.user(note, name="tractkv", tools=tools)


def _answer_open_calls(tract: Tract, executor: ToolExecutor, model: LLMClient, usage_ids: list[str]) -> None:
    """Answer the unanswered tool calls of the assistant message at HEAD (see the module doc, step 1)."""
    if tract.is_detached or tract.head is None:
        return
    compiled = tract.compile()
    messages = compiled.messages
    answered: set[str] = set()
    index = len(messages) - 1
    while index >= 0 and messages[index].role == "tool":
        answered.add(str(messages[index].tool_call_id))
        index -= 1
    if index < 0 or messages[index].role != "assistant" or not messages[index].tool_calls:
        return
    commit = compiled.commit_ids[index]
    open_calls = [c for c in messages[index].tool_calls if c.id not in answered]
    if not open_calls:
        return
    store = tract.store
    rows = {(r.commit, r.tool_call_id): r for r in iter_pending(store) if r.parent_id is None}
    step = AgentStep(tract)
    for call in open_calls:
        row = rows.get((commit, call.id))
        if row is not None and row.record is not None:  # it ran; the process died before its result landed
            records = load_tree(store, row.record)
            done = records[-1] if records else None
            result = ToolResult(
                call.name,
                done is not None and done.status == "success",
                output=row.output or "",
                error=(done.error if done is not None else None) or "the tool's usage record was lost",
                usage_id=row.usage_id,
                usage_objects=tuple(records),
            )
            _commit_result(tract, call.id, call.name, result)
            usage_ids.append(row.usage_id)
            continue
        if row is not None and row.owner_alive():
            raise InvalidInput(
                f"tool call {call.id} ({call.name}) is still running in process {row.pid} on {row.host}; "
                "wait for it to finish"
            )
        if row is not None:
            records = interrupted_records(store, row)
            result = ToolResult(
                call.name, False, error=INTERRUPTED, usage_id=row.usage_id, usage_objects=tuple(records)
            )
            _commit_result(tract, call.id, call.name, result)  # retires the rows of the records it links
        else:
            result = executor.execute(
                call.name,
                call.arguments if call.invalid_arguments is None else call.invalid_arguments,
                tool_call_id=call.id,
                commit=commit,
                compiled=compiled,
                llm=model,
                step=step,
                conversation=tract,
            )
            _commit_result(tract, call.id, call.name, result)
        if result.usage_id is not None:
            usage_ids.append(result.usage_id)
    _run_deferred(tract, step, executor.schemas("openai") or None)


CHILD_BRANCH_PREFIX = "tractkv-child/"  # temporary branches of child agent loops (deleted when they end)
PURPOSE_CHARS = 200  # of the prompt, as the spawned child's purpose


def run_child(
    context: ToolContext,
    prompt: str,
    *,
    llm: LLMClient | None,
    tools: Iterable[str | ToolDefinition],
    profile: str | ToolProfile | None,
    system: str | None,
    max_steps: int,
    branch: str | None,
    params: dict[str, Any],
) -> RunResult:
    """A child agent loop for :meth:`ToolContext.run_child` (see there).

    The child is a spawned child of the parent's branch (``Tract.spawn(prompt, inherit="none")``: its spawn
    commit records the parent and the prompt as its purpose). Its answer returns as this call's tool result,
    whose usage record links the child's head (``heads``): that tool result is the child's collapse, so
    ``parent.children()`` lists it as collapsed ``via="tool_result"`` and its history syncs and lives with
    the parent's. No collapse message is added (it would repeat the tool result)."""
    from tractkv.engine.history import branch_ref

    from .executor import ToolExecutor, record_head

    if not isinstance(prompt, str) or not prompt.strip():
        raise InvalidInput("run_child needs a non-empty prompt")
    if llm is None:
        raise NoLLMConfigured("run_child")
    parent = context.tract
    store = parent.store
    name = branch or f"{CHILD_BRANCH_PREFIX}{context.usage_id}"
    if store.get_ref(branch_ref(name)) is not None:
        raise InvalidInput(f"branch {name!r} exists already; pick a new branch for the child")
    purpose = prompt.strip()[:PURPOSE_CHARS]
    child = parent.spawn(purpose, inherit="none", branch=name)  # HEAD and the parent's branch stay
    child.configure_llm(llm)
    try:
        executor = ToolExecutor(
            child,
            profile=profile,
            llm=llm,
            events=context.executor.events,
            result_limit=context.executor.result_limit,
        )
        for item in tools:
            if isinstance(item, str):
                definition = context.executor.get(item)
                if definition is None:
                    raise InvalidInput(f"run_child: the parent executor has no tool {item!r}")
                executor.register(definition, replace=True)
            else:
                executor.register(item, replace=True)
        if system:
            child.system(system)
        child.user(prompt)
        result = run(child, llm, executor, max_steps=max_steps, **params)
    finally:
        head = child.head
        child.close()
        if head is not None:
            record_head(context.usage_id, head)  # the usage record links the child's conversation
        if branch is None and store.get_ref(branch_ref(name)) is not None:
            parent.delete_branch(name, force=True)
    return result
