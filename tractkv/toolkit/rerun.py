"""Re-run a failed tool execution (``tractkv.toolkit.rerun_tool_usage(t, usage_id)``, ``tractkv usage
rerun ID``).

A top-level execution that answered a model's tool call and failed (status ``error`` or ``interrupted``) is
run again with the same tool and arguments, under the same assistant commit and call id. Its new usage record
names the failed one (``rerun_of``), and its result replaces the failed result in the context as an
**edit** of the failed result's commit, which links the new record (``links["usages"]``): the re-run, its
link to the failed run and the failed run itself all stay in the branch's history, so they sync, survive gc
and show in every store that receives the branch. The failed record stays as it was (records are
immutable); queries show both.

A nested execution cannot be re-run on its own (its output went to its parent, not to the conversation):
re-run the top-level execution that contains it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tractkv.engine.usage import RERUNNABLE
from tractkv.errors import InvalidInput

if TYPE_CHECKING:
    from tractkv.engine.usage import ToolUsage
    from tractkv.tract import Tract


def find_usage(usages: list[ToolUsage], usage_id: str, where: str) -> ToolUsage:
    """The execution of ``usages`` whose id is ``usage_id`` or, failing that, the one whose id starts with it
    (as git takes a unique prefix of a commit id).

    Raises:
        InvalidInput: an empty id, none matching, or a prefix more than one id starts with (it names them).
    """
    if not isinstance(usage_id, str) or not usage_id:
        raise InvalidInput("a usage id must be a non-empty string")
    exact = [u for u in usages if u.id == usage_id]
    if exact:
        return exact[0]
    found = {u.id: u for u in usages if u.id.startswith(usage_id)}
    if not found:
        raise InvalidInput(f"no tool execution {usage_id} in the history of {where}")
    if len(found) > 1:
        ids = sorted(found)
        shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        raise InvalidInput(
            f"tool execution id prefix {usage_id!r} is ambiguous: {len(ids)} executions start with it "
            f"({shown}); give more characters"
        )
    return next(iter(found.values()))


def failed_usage(tract: Tract, usage_id: str) -> ToolUsage:
    """The failed top-level execution ``usage_id`` (a full id or a unique prefix) of the history of HEAD,
    checked re-runnable.

    Raises:
        InvalidInput: no such execution in the history of HEAD, an ambiguous prefix, one that did not fail, a
            nested one, or one whose result was never committed.
    """
    usage = find_usage(tract.tool_usages(), usage_id, tract.current_branch or "HEAD")
    usage_id = usage.id
    if usage.status not in RERUNNABLE:
        raise InvalidInput(
            f"tool execution {usage_id} ({usage.tool_name}) has status {usage.status}; only a failed one "
            f"({' or '.join(RERUNNABLE)}) can be re-run"
        )
    if usage.parent_id is not None:
        raise InvalidInput(
            f"tool execution {usage_id} ({usage.tool_name}) ran inside {usage.parent_id}: re-run that one"
        )
    if usage.result_commit is None or usage.tool_call_id is None or usage.commit_id is None:
        raise InvalidInput(
            f"tool execution {usage_id} ({usage.tool_name}) answered no committed tool call: nothing to replace"
        )
    return usage


def rerun_tool_usage(tract: Tract, usage_id: str, executor: object = None) -> ToolUsage:
    """Run a failed execution again and commit its result as an edit of the failed result (see the module doc).

    Args:
        tract: the conversation whose history holds the failed execution (HEAD's branch).
        usage_id: the failed execution's usage id, or a unique prefix of it.
        executor: the executor whose tool runs (default: the ``full`` profile's built-ins on ``tract``); a
            tool of your own needs the executor that registered it.

    Returns:
        The new execution, as queries show it (``rerun_of`` = ``usage_id``, ``result_commit`` = the edit).

    Raises:
        InvalidInput: what :func:`failed_usage` refuses, an executor that has no such tool, or a context in
            which the call can no longer be found (e.g. compressed away). ReadOnlySession: a read-only tract.
    """
    from .executor import ToolExecutor

    tract.check_writable("re-run a tool", branch=True)  # read-only or detached: refused before the tool runs
    usage = failed_usage(tract, usage_id)
    usage_id = usage.id  # the full id (a prefix was given)
    done = [u.id for u in tract.tool_usages() if u.rerun_of == usage_id and u.status == "success"]
    if done:
        raise InvalidInput(
            f"tool execution {usage_id} ({usage.tool_name}) was re-run successfully already ({done[0]}): "
            "running it again would repeat its effects"
        )
    if executor is None:
        executor = ToolExecutor(tract, profile="full")
    elif not isinstance(executor, ToolExecutor):
        raise InvalidInput(f"executor must be a ToolExecutor, not {type(executor).__name__}")
    if executor.get(usage.tool_name) is None:
        raise InvalidInput(
            f"this executor has no tool {usage.tool_name!r}: pass the executor that registered it"
        )
    assert usage.tool_call_id is not None
    assert usage.result_commit is not None
    ctx = tract.compile()
    calls = {  # the call of this execution's own message (call ids are unique per message only)
        c.id: c
        for m, oid in zip(ctx.messages, ctx.commit_ids, strict=True)
        if oid == usage.commit_id
        for c in (m.tool_calls or ())
    }
    if usage.tool_call_id not in calls:  # checked before the tool can have any effect
        raise InvalidInput(
            f"tool call {usage.tool_call_id} of execution {usage_id} is no longer in the context "
            "(compressed, reset or skipped): its result cannot be replaced"
        )
    invalid = calls[usage.tool_call_id].invalid_arguments  # a malformed call fails again, saying why
    result = executor.execute(
        usage.tool_name,
        usage.arguments if invalid is None else invalid,
        tool_call_id=usage.tool_call_id,
        commit=usage.commit_id,
        conversation=tract,
        rerun_of=usage.id,
    )
    # Committed, the link retires the new execution's marker; refused (another handle moved the branch...),
    # the marker stays: the tool ran, and its record is still shown.
    committed = tract.tool_result(
        usage.tool_call_id,
        usage.tool_name,
        result.text,
        edit=usage.result_commit,
        is_error=not result.success,
        usages=result.usage_objects,
    )
    assert committed is not None  # an edit runs no tool_result hooks, so none can withhold it
    (new,) = [u for u in tract.tool_usages() if u.id == result.usage_id]
    return new
