"""Token counts calibrated by the provider: the context's size as the provider reported it, where it can be.

tractkv estimates a context's tokens locally (:mod:`tractkv.engine.content.tokens`). A provider's reply reports how
many input tokens the request cost, counting what the estimate cannot see (its tokenizer, tool schemas as it
renders them, per-request framing). That usage is part of the assistant commit (``metadata["usage"]``, put
there by ``generate``, ``record_response``, streaming and the agent loop), so the calibrated count is derived
from commits only: a store that receives the branch by sync reports the same count.

**The rule.** Let *R* be the newest commit on HEAD's first-parent chain whose metadata carries a usage with
``input_tokens`` and ``output_tokens`` (a *reply*). The count is ``reported`` when

* no commit after *R* is a merge, and at most :data:`LIMIT` commits come after it;
* no commit after *R* edits, annotates (skip, pin or unskip alike) or compresses *R* or a message before it
  (an edit, annotation or compression of messages that came after *R* is fine);
* the tool set in force at HEAD is the one *R* linked (what the request offered: ``generate`` links it); an
  empty tool set and none are the same;
* *R*'s message is still in the compiled context, as an assistant message.

Then the count is *R*'s reported input (:func:`reported_input`) plus its output (:func:`reported_output`)
plus :data:`~tractkv.engine.content.tokens.MESSAGE_OVERHEAD` (the reply becomes one more message of the next
request) plus the estimated tokens of every message after *R* in the compiled context (placeholder results
included). Otherwise (no reply, or one of the conditions fails) the count is the local ``estimated`` one:
the messages' estimate plus the tool schemas' (what ``compile`` reports). Only the newest reply is
considered: an older reply never takes over from a newer one that no longer holds.

**Cost.** The facts per commit (the reply it rests on, how many commits came after it, the commits after it)
are folded along the first-parent chain and memoized by commit id (a commit id names one history, so the
memo holds in every store): after an append the walk is one step. A HEAD not memoized whose last
:data:`LIMIT` + 1 messages hold no assistant message needs no walk (no reply can hold there). Then the
messages after *R* are summed from the end of the compiled view: at most :data:`LIMIT` commits' worth, none
before *R*. Nothing here changes what compile returns or the checkpoint format.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

import attrs

from tractkv.engine.compile import placeholder_tokens
from tractkv.engine.content import MESSAGE_OVERHEAD, MESSAGE_ROLES, TokenCounter
from tractkv.errors import ObjectNotFound, TractError
from tractkv.ids import ObjectId
from tractkv.model import Commit
from tractkv.store import Reader, Store

if TYPE_CHECKING:
    from tractkv.engine.compile import CompileState, View
    from tractkv.engine.session import Session

ESTIMATED = "estimated"  # the local estimate (messages + tool schemas)
REPORTED = "reported"  # anchored at a provider's reported input tokens
LIMIT = 512  # commits after the reply beyond which the count falls back to the estimate
MEMO = 8192  # commits whose fold is kept (each a few small objects)


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _usage_of(commit: Commit) -> Mapping[str, Any] | None:
    """The usage a reply commit carries (an append with content whose metadata has counted ``usage``)."""
    if commit.operation != "append" or commit.content is None or not commit.metadata:
        return None
    usage = commit.metadata.get("usage")
    if not isinstance(usage, Mapping):
        return None
    if not (_is_count(usage.get("input_tokens")) and _is_count(usage.get("output_tokens"))):
        return None
    return usage


def _openai_shaped(usage: Mapping[str, Any]) -> bool:
    """OpenAI's ``input_tokens`` (``prompt_tokens``) already counts the cached tokens; Anthropic's does not."""
    return "prompt_tokens" in usage or "input_tokens_details" in usage


def reported_input(usage: Mapping[str, Any]) -> int:
    """The whole input a request cost, from a normalized usage (:func:`~tractkv.engine.content.openai_usage`,
    :func:`~tractkv.engine.content.anthropic_usage`): OpenAI's ``input_tokens`` (its ``prompt_tokens``, cached
    tokens included); otherwise (Anthropic's shape) ``input_tokens`` plus ``cache_read_input_tokens`` plus
    ``cache_creation_input_tokens`` (Anthropic counts the cached and cache-written input apart)."""
    total = int(usage["input_tokens"])
    if not _openai_shaped(usage):
        for name in ("cache_read_input_tokens", "cache_creation_input_tokens"):
            value = usage.get(name)
            if _is_count(value):
                total += value
    return total


def reported_output(usage: Mapping[str, Any]) -> int:
    """The reply's own tokens as the next request sends them: ``output_tokens``, less OpenAI's hidden
    ``reasoning_tokens`` (reasoning that never becomes part of the message)."""
    output = int(usage["output_tokens"])
    reasoning = usage.get("reasoning_tokens")
    if _openai_shaped(usage) and _is_count(reasoning):
        output = max(0, output - reasoning)
    return output


@attrs.frozen(kw_only=True)
class TokenCount:
    """A context's token count and where it comes from.

    Attributes:
        tokens: the count (``reported`` when it could be anchored, else the estimate).
        source: ``"reported"`` (anchored at a provider's reported input tokens) or ``"estimated"``.
        estimated: the local estimate, always (messages plus tool schemas, what ``compile`` reports).
        reported_by: the reply commit whose usage anchors a ``reported`` count (None when estimated).
        reported_input: that reply's input tokens as the provider counted them (None when estimated).
    """

    tokens: int
    source: str
    estimated: int
    reported_by: ObjectId | None = None
    reported_input: int | None = None

    def __iter__(self) -> Any:
        """``tokens, source = count``."""
        return iter((self.tokens, self.source))


class _After:
    """A commit after the reply, linked to the one before it (a shared tail: O(1) to extend)."""

    __slots__ = ("oid", "prev")

    def __init__(self, oid: ObjectId, prev: _After | None) -> None:
        self.oid, self.prev = oid, prev

    def holds(self, oid: ObjectId) -> bool:
        node: _After | None = self
        while node is not None:
            if node.oid == oid:
                return True
            node = node.prev
        return False


@attrs.frozen
class _Fold:
    """What the rule knows at one commit: the reply it rests on (None: the estimate), the reply's counts and
    linked tool set, and the commits after it (``after``, ``count`` of them)."""

    reply: ObjectId | None
    reported: int = 0
    output: int = 0
    tools: ObjectId | None = None
    after: _After | None = None
    count: int = 0


_NONE = _Fold(None)
_memo: OrderedDict[ObjectId, _Fold] = OrderedDict()
_lock = threading.Lock()


def _step(before: _Fold, oid: ObjectId, commit: Commit) -> _Fold:
    """The fold at ``oid`` from the fold at its first parent."""
    if len(commit.parents) > 1:
        return _NONE
    usage = _usage_of(commit)
    if usage is not None:
        return _Fold(oid, reported_input(usage), reported_output(usage), commit.tools)
    if before.reply is None or before.count >= LIMIT:
        return _NONE
    touched: tuple[ObjectId, ...] = ()
    if commit.operation in ("edit", "annotate") and commit.edit_target is not None and commit.content:
        touched = (commit.edit_target,)
    elif commit.operation == "compress":
        touched = tuple(commit.links.get("sources", ()))
    elif commit.operation == "trim":  # a budget's trim skips several messages at once
        touched = tuple(commit.links.get("targets", ()))
    after = before.after
    if any(after is None or not after.holds(target) for target in touched):
        return _NONE  # it changes the reply or a message the provider counted
    return attrs.evolve(before, after=_After(oid, after), count=before.count + 1)


def _fold_at(reader: Reader, head: ObjectId, first: Commit | None = None) -> _Fold:
    """The fold at ``head`` (``first``: its commit, when already read): walk the first-parent chain back to a
    memoized commit, a reply, a merge, the root or :data:`LIMIT` + 1 commits, then fold forward (memoizing
    each commit)."""
    with _lock:
        hit = _memo.get(head)
        if hit is not None:
            _memo.move_to_end(head)
            return hit
    if isinstance(reader, Store):  # many reads: one read transaction
        with reader.snapshot() as snapshot:
            return _walk(snapshot, head, first)
    return _walk(reader, head, first)


def _walk(reader: Reader, head: ObjectId, first: Commit | None = None) -> _Fold:
    chain: list[tuple[ObjectId, Commit]] = []
    base = _NONE
    oid: ObjectId | None = head
    while oid is not None:
        with _lock:
            hit = _memo.get(oid)
        if hit is not None:
            base = hit
            break
        if len(chain) > LIMIT:
            break  # no reply within LIMIT + 1 commits: the estimate, whatever came before
        commit = first if first is not None and oid == head else reader.get_commit(oid)
        chain.append((oid, commit))
        if len(commit.parents) != 1 or _usage_of(commit) is not None:
            break
        oid = commit.parents[0]
    fold = base
    folded: list[tuple[ObjectId, _Fold]] = []
    for oid, commit in reversed(chain):
        fold = _step(fold, oid, commit)
        folded.append((oid, fold))
    with _lock:
        for oid, item in folded:
            _memo[oid] = item
        while len(_memo) > MEMO:
            _memo.popitem(last=False)
    return fold


def _role(code: int) -> str:
    """The role packed in a slot's ``code`` (as :attr:`~tractkv.engine.compile.state.Slot.role` reads it)."""
    return MESSAGE_ROLES[code >> 2 & 3]


def _assistant_in_tail(view: View, most: int) -> bool:
    """Whether one of the view's last ``most`` messages is an assistant message (a reply that holds is)."""
    last = len(view) - 1
    for position in range(last, max(-1, last - most), -1):
        shape = view.shape_at(position)  # None: a placeholder result
        if shape is not None and _role(shape[0]) == "assistant":
            return True
    return False


def _tokens_after(view: View, reply: ObjectId, counter: TokenCounter, most: int) -> int | None:
    """The estimated tokens of the view's messages after ``reply``'s (None when it is not among the last
    ``most`` positions, or not an assistant message: then it does not anchor the count)."""
    total = 0
    placeholder: int | None = None
    last = len(view) - 1
    for position in range(last, max(-1, last - most), -1):
        shape = view.shape_at(position)  # read off the slot: nothing rendered
        if shape is None:  # a placeholder result
            if placeholder is None:
                placeholder = placeholder_tokens(counter)
            total += placeholder
            continue
        code, commit, tokens = shape
        if commit == reply:
            return total if _role(code) == "assistant" else None
        total += tokens
    return None


def calibrated(
    session: Session,
    state: CompileState | None = None,
    *,
    reader: Reader | None = None,
    head: Commit | None = None,
) -> TokenCount:
    """The token count of ``state`` (default: the session's HEAD state) with its source (see the module doc).

    ``state`` may be any compile state of the session's store, or one being built in a batch (pass the
    batch as ``reader`` so staged commits are read). ``head``: the state's head commit, when the caller has
    read it (it is not read again).
    """
    reader = reader if reader is not None else session.reader()
    if state is None:
        state = session.head_state(reader)
    view = state.render(reader)
    estimated = view.total_tokens(session.counter) + _tool_tokens(session, reader, state.tools)
    fallback = TokenCount(tokens=estimated, source=ESTIMATED, estimated=estimated)
    if state.head is None:
        return fallback
    with _lock:
        known = state.head in _memo
    if not known and not _assistant_in_tail(view, LIMIT + 1 + len(view.placeholders)):
        return fallback  # no reply can hold (it would be an assistant message among these): no walk
    try:
        fold = _fold_at(reader, state.head, head)
        if fold.reply is None or not _same_tools(session, reader, fold.tools, state.tools):
            return fallback
    except TractError:  # a commit or tool set not readable here: the estimate (a count is never an error)
        return fallback
    most = fold.count + 1 + len(view.placeholders)
    after = _tokens_after(view, fold.reply, session.counter, most)
    if after is None:
        return fallback
    tokens = fold.reported + fold.output + MESSAGE_OVERHEAD + after
    return TokenCount(
        tokens=tokens,
        source=REPORTED,
        estimated=estimated,
        reported_by=fold.reply,
        reported_input=fold.reported,
    )


def context_tokens(
    session: Session, state: CompileState | None = None, *, reader: Reader | None = None
) -> tuple[int, str]:
    """``(tokens, source)`` of ``state`` (default HEAD's): :func:`calibrated` as a pair."""
    count = calibrated(session, state, reader=reader)
    return count.tokens, count.source


def _tools(session: Session, reader: Reader, toolset: ObjectId | None) -> tuple[dict[str, Any], ...]:
    """A tool set's schemas: the session's cache, else read through ``reader`` (a batch may hold it)."""
    try:
        return session.tools_of(toolset)
    except ObjectNotFound:
        from tractkv.engine.compile import load_tools

        return load_tools(reader, toolset)


def _tool_tokens(session: Session, reader: Reader, toolset: ObjectId | None) -> int:
    """:meth:`Session.tool_tokens_of`, for a tool set the store may not hold yet (staged in ``reader``)."""
    try:
        return session.tool_tokens_of(toolset)
    except ObjectNotFound:
        from tractkv.engine.content import tool_tokens

        return tool_tokens(_tools(session, reader, toolset), session.counter)


def _same_tools(session: Session, reader: Reader, linked: ObjectId | None, now: ObjectId | None) -> bool:
    if linked == now:
        return True
    return not _tools(session, reader, linked) and not _tools(session, reader, now)
