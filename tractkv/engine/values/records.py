"""Values the engine returns: commit info, compiled contexts, status, diffs, reflog, gc reports.

What every append and compile returns is defined here; the values of the less frequent operations
(:class:`StatusInfo`, :class:`BranchInfo`, :class:`ContextDiff`, :class:`ReflogEntry`, :class:`GcResult`, ...)
are defined in :mod:`tractkv.engine.values.reports`.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

import attrs

from tractkv.engine.content import Message
from tractkv.errors import InvalidInput, ToolPairingError
from tractkv.ids import ObjectId

if TYPE_CHECKING:
    from tractkv.engine.values.params import AnthropicParams, OpenAIChatParams, ResponsesParams
    from tractkv.engine.values.repairs import Repair

T = TypeVar("T")


class FrozenPrefix(Sequence[T]):
    """A read-only view of the first ``n`` items of an append-only list: O(1) to make, however long.

    compile() hands these out instead of tuple copies, so compiling after an append costs the same at 1k
    and 100k messages. Sound because the engine only ever appends to the lists it shares (View.add) and
    replaces a view wholesale otherwise. Compares equal to any sequence of equal items (tuples and lists
    included); slicing returns a tuple.

    With ``resolve``, item *i* is ``resolve(i)`` instead of ``items[i]`` (a compiled view renders a message on
    first use, :meth:`tractkv.engine.compile.state.View.message`).
    """

    __slots__ = ("_items", "_n", "_resolve")

    def __init__(
        self, items: list[T], n: int | None = None, resolve: Callable[[int], T] | None = None
    ) -> None:
        self._items = items
        self._n = len(items) if n is None else n
        self._resolve = resolve

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...
    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        resolve = self._resolve
        if isinstance(index, slice):
            if resolve is not None:
                return tuple(resolve(i) for i in range(self._n)[index])
            return (
                tuple(self._items[: self._n][index])
                if self._n != len(self._items)
                else tuple(self._items[index])
            )
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("index out of range")
        return self._items[index] if resolve is None else resolve(index)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle (and so ``copy.deepcopy``) the items, rendered now: a lazy sequence pickles as a tuple (its
        ``resolve`` reads a store, which cannot be pickled), a plain one as a FrozenPrefix of its n items."""
        if self._resolve is not None:
            return (tuple, (tuple(self),))
        return (FrozenPrefix, (list(itertools.islice(self._items, self._n)),))

    def __iter__(self) -> Iterator[T]:
        if self._resolve is not None:
            return map(self._resolve, range(self._n))
        return itertools.islice(self._items, self._n)

    def __reversed__(self) -> Iterator[T]:
        get = self._resolve or self._items.__getitem__
        return (get(i) for i in range(self._n - 1, -1, -1))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenPrefix | tuple | list):
            return len(other) == self._n and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


def timestamp(micros: int) -> datetime:
    """A commit timestamp (µs since the epoch) as an aware UTC datetime."""
    if 0 <= micros < _EXACT_MICROS:  # the same datetime, by exact integer arithmetic (one per append)
        return _EPOCH + timedelta(0, 0, micros)
    return datetime.fromtimestamp(micros / 1_000_000, tz=UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Below 2**32 seconds (the year 2106) ``micros / 1e6`` is within a quarter of a µs of the exact time, so
# ``fromtimestamp`` (which rounds to the nearest µs) gives exactly ``micros``: the epoch plus a timedelta is the
# same value (tests/engine/test_commit_info.py checks the two agree at the bounds and in between).
_EXACT_MICROS = 2**32 * 1_000_000


@attrs.frozen(kw_only=True)
class CommitInfo:
    """A commit as users see it.

    Attributes:
        commit_id: the commit's id. parent_ids: its parents (two for a merge).
        operation: append, edit, annotate, merge or compress. content_type / role: of its content.
        message: a note for people. metadata: JSON-like data kept with the commit.
        token_count: tokens its content costs in a context (0 for bookkeeping commits).
        created_at: when it was made (UTC). edit_target: the message an edit or annotation acts on.
        reply_to: the commit it answers (a tool result answers the call). generation_config: model parameters.
        content_id / toolset_id: the ids of its content blob and tool set. content: the content's data.
        usage: the provider's token usage for a recorded or generated reply (``input_tokens``,
            ``output_tokens`` and the provider's own counts), read from ``metadata["usage"]``; else None.
    """

    commit_id: ObjectId
    parent_ids: tuple[ObjectId, ...]
    operation: str
    content_type: str | None
    role: str | None
    message: str | None
    metadata: dict[str, Any] | None = attrs.field(eq=False, hash=False)
    token_count: int
    created_at: datetime
    edit_target: ObjectId | None = None
    reply_to: ObjectId | None = None
    generation_config: dict[str, Any] | None = attrs.field(default=None, eq=False, hash=False)
    content_id: ObjectId | None = None
    toolset_id: ObjectId | None = None
    content: Any = attrs.field(default=None, eq=False, hash=False)
    usage: dict[str, Any] | None = attrs.field(default=None, eq=False, hash=False)

    @property
    def commit_hash(self) -> ObjectId:
        """Deprecated alias of :attr:`commit_id` (removed in 0.2.0)."""
        import warnings

        warnings.warn(
            "CommitInfo.commit_hash is deprecated and will be removed in 0.2.0: use commit_id",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.commit_id

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (timestamps as ISO 8601)."""
        from tractkv.model import to_jsonable

        return dict(to_jsonable(self))


@attrs.frozen(kw_only=True)
class CompiledContext:
    """The exact context a model call needs, compiled from one commit.

    ``messages``, ``commit_ids`` and ``generation_configs`` are aligned: message *i* was added by commit
    ``commit_ids[i]`` (edits keep the original commit's position and hash; a placeholder result takes the
    commit of the message that made its call, and a ``None`` config). ``repairs`` lists what compile changed
    so that every tool call is answered before the next message and every result answers an open call
    (:mod:`tractkv.engine.compile.pairing`); empty for a well-formed history. ``open_calls`` names the calls of the
    last tool turn still waiting for results (a tool run in progress; such a context is not sent to a model:
    ``generate`` raises :class:`~tractkv.errors.UnansweredToolCalls`). ``dropped`` lists the message commits
    ``compile(max_tokens=N)`` left out to fit N tokens (:mod:`tractkv.engine.compile.window`); empty otherwise.

    A context compiled from a checkpoint reads each message's blob from the store on first use of
    ``messages``. Its session renders what is left before it closes, gcs, hard-resets or deletes a branch; a
    ``gc`` run by another process can still remove a blob not read yet (then reading that message raises
    :class:`~tractkv.errors.ObjectNotFound`). :meth:`load` reads every message now.
    """

    messages: Sequence[Message]
    token_count: int
    commit_count: int
    commit_ids: Sequence[ObjectId]
    generation_configs: Sequence[dict[str, Any] | None] = attrs.field(eq=False, hash=False)
    token_source: str
    head: ObjectId | None = None
    tools: tuple[dict[str, Any], ...] = attrs.field(default=(), eq=False, hash=False)
    tools_cache: str | None = None  # the tool set's prompt-cache breakpoint (set_tools(cache=)): Anthropic's
    repairs: tuple[Repair, ...] = ()
    open_calls: tuple[str, ...] = ()
    dropped: tuple[ObjectId, ...] = ()

    def __len__(self) -> int:
        return len(self.messages)

    def load(self) -> CompiledContext:
        """Read every message now (a context compiled from a checkpoint reads them on first use) and return
        this context: later reads need no store (another process's gc cannot take them away)."""
        for _ in self.messages:
            pass
        return self

    def check_pairing(self) -> None:
        """Raise when compile had to repair the pairing of tool calls and results.

        Raises:
            ToolPairingError: ``repairs`` is not empty (the error names the first).
        """
        if self.repairs:
            raise ToolPairingError(self.repairs)

    def left_out(self, dialect: str) -> tuple[Repair, ...]:
        """What rendering for ``dialect`` (``"openai"``, ``"responses"``, ``"anthropic"`` or ``"gemini"``)
        leaves out of this context, one ``dropped_item`` repair each, ``commit_id`` its message's commit:

        * an OpenAI Responses provider item (a built-in tool call such as ``web_search_call``: only the
          Responses dialect can send it back), for every dialect but ``"responses"``; ``call_id`` the item's
          ``id`` (else its type);
        * for ``"responses"``, a reasoning item with no output after it in its message (a reply cut off while
          reasoning, or its output edited away), which the API refuses alone; ``call_id`` its ``id``;
        * a Gemini part kept verbatim (``executable_code``, ``inline_data`` a model made, ...), for every
          dialect but ``"gemini"``; ``call_id`` its fields, e.g. ``gemini:executable_code``;
        * an Anthropic ``redacted_thinking`` block, for ``"gemini"`` (Gemini has no form for another model's
          encrypted reasoning); ``call_id`` ``redacted_thinking``;
        * an Anthropic server tool block (``server_tool_use``, ``web_search_tool_result``, ...), for every
          dialect but ``"anthropic"``; ``call_id`` its ``id`` or ``tool_use_id``;
        * the ``citations`` of an Anthropic text block (its text is sent), for every dialect but
          ``"anthropic"``; ``call_id`` ``citations``;
        * an OpenAI audio reply (``openai_audio``), for every dialect but ``"openai"``; ``call_id`` its id.
        * for ``"anthropic"`` and ``"gemini"``, whose tool calls need an object, each tool call recorded with
          ``invalid_arguments`` (arguments the model wrote that are not a JSON object): it is sent with ``{}``,
          one ``invalid_arguments`` repair naming the call (``call_id`` its id). OpenAI's dialects send the
          exact string and list nothing.

        Reasoning the dialect cannot read (Anthropic thinking, Responses reasoning, Gemini thoughts and
        signatures elsewhere) is left out without a repair, function calls go as tool calls (a ``tool_use``
        block's place and ``caller`` only matter to Anthropic), and a recorded ``container`` is request
        state, not content, so none is listed.

        Raises:
            InvalidInput: an unknown dialect.
        """
        if dialect not in ("openai", "anthropic", "responses", "gemini"):
            raise InvalidInput(
                f"dialect must be 'openai', 'responses', 'anthropic' or 'gemini', not {dialect!r}"
            )
        from tractkv.engine.values.repairs import Repair  # loads with the first repair, as compile's

        repairs: list[Repair] = []
        for message, commit_id in zip(self.messages, self.commit_ids, strict=True):
            for part in message.parts:
                name, what = _left_out_part(part, dialect)
                if name:
                    detail = f"{what} has no {dialect} form: left out"
                    repairs.append(
                        Repair(kind="dropped_item", commit_id=commit_id, call_id=name, detail=detail)
                    )
            if dialect in ("anthropic", "gemini"):
                repairs.extend(_invalid_arguments(message, commit_id, dialect))
            if dialect == "responses" and message.parts:
                from tractkv.engine.content import unsent_reasoning

                for item in unsent_reasoning(message):
                    name = str(item.get("id"))
                    detail = (
                        f"the Responses item {name} (reasoning) has no output after it in its message "
                        "(the API refuses it alone): left out"
                    )
                    repairs.append(
                        Repair(kind="dropped_item", commit_id=commit_id, call_id=name, detail=detail)
                    )
        return tuple(repairs)

    def to_dicts(self) -> list[dict[str, Any]]:
        """Provider-neutral dicts (``role``, ``content`` and any extras), fresh copies."""
        return [m.to_dict() for m in self.messages]

    def to_openai(self) -> list[dict[str, Any]]:
        """Messages for OpenAI's chat completions API."""
        from tractkv.engine.content import messages_to_openai

        return messages_to_openai(self.messages)

    def to_anthropic(self) -> dict[str, Any]:
        """``{"system": ..., "messages": [...]}`` for Anthropic's messages API."""
        from tractkv.engine.content import messages_to_anthropic

        return messages_to_anthropic(self.messages)

    def to_openai_params(self, strict: bool = False) -> OpenAIChatParams:
        """``{"messages": [...], "tools": [...]}`` for ``client.chat.completions.create(**params)``.

        ``tools`` is omitted when the context has none; tool schemas stored in Anthropic's shape are converted.

        Raises:
            ToolPairingError: ``strict`` and compile made repairs (see :meth:`check_pairing`).
        """
        from tractkv.engine.content import openai_params

        if strict:
            self.check_pairing()

        return cast("OpenAIChatParams", openai_params(self.messages, copy.deepcopy(list(self.tools))))

    def to_responses_input(self) -> list[dict[str, Any]]:
        """Input items for OpenAI's Responses API (``client.responses.create(input=...)``): every message,
        system messages included, as :meth:`to_responses_params` renders them after its ``instructions``."""
        from tractkv.engine.content import messages_to_responses

        instructions, items = messages_to_responses(self.messages)
        return ([{"role": "system", "content": instructions}] if instructions is not None else []) + items

    def to_responses_params(self, strict: bool = False) -> ResponsesParams:
        """``{"input": [...], "instructions": ..., "tools": [...]}`` for ``client.responses.create(**params,
        model=...)``: the leading system messages as ``instructions``, reasoning and other Responses items sent
        back verbatim in their place, tools as flat function tools (``strict`` kept).

        ``instructions`` is omitted when the context starts with no system message and ``tools`` when there
        are none.

        Raises:
            ToolPairingError: ``strict`` and compile made repairs (see :meth:`check_pairing`).
        """
        from tractkv.engine.content import responses_params

        if strict:
            self.check_pairing()

        return cast("ResponsesParams", responses_params(self.messages, copy.deepcopy(list(self.tools))))

    def to_gemini_contents(self) -> list[dict[str, Any]]:
        """Gemini ``contents`` (``client.models.generate_content(contents=...)``): the ``contents`` of
        :meth:`to_gemini_params`, without the system instruction (Gemini has no system role in ``contents``:
        the leading system messages are its ``system_instruction``)."""
        from tractkv.engine.content import messages_to_gemini

        return messages_to_gemini(self.messages)[1]

    def to_gemini_params(self, strict: bool = False) -> dict[str, Any]:
        """``{"contents": [...], "system_instruction": ..., "tools": [{"function_declarations": [...]}]}``, the
        Gemini ``generateContent`` request (snake_case names, which the SDK's types and the REST API take):
        roles ``user`` / ``model``, each part's ``thought_signature`` sent back on it byte for byte, a run of
        tool results as one user turn of ``function_response`` parts, images and PDFs as ``inline_data``,
        tools as function declarations with ``parameters_json_schema``. Bytes (signatures, media) are bytes,
        as the SDK's types take them (``gemini_json`` in :mod:`tractkv.engine.content` makes a JSON body).

        With the SDK: ``params = ctx.to_gemini_params(); client.models.generate_content(model=...,
        contents=params.pop("contents"), config=params)``. ``system_instruction`` is omitted when the context
        starts with no system message and ``tools`` when there are none.

        Raises:
            ToolPairingError: ``strict`` and compile made repairs (see :meth:`check_pairing`).
        """
        from tractkv.engine.content import gemini_params

        if strict:
            self.check_pairing()

        return gemini_params(self.messages, copy.deepcopy(list(self.tools)))

    def to_anthropic_params(self, strict: bool = False) -> AnthropicParams:
        """``{"system": ..., "messages": [...], "tools": [...]}`` for ``client.messages.create(**params)``.

        ``system`` is omitted when empty and ``tools`` when there are none; OpenAI-shaped tools are converted.

        Raises:
            ToolPairingError: ``strict`` and compile made repairs (see :meth:`check_pairing`).
            InvalidInput: cache breakpoints Anthropic refuses: more than
                :data:`~tractkv.engine.content.render.anthropic.MAX_CACHE_BREAKPOINTS`, or a ``1h`` one after
                a ``5m`` one (tools, then system, then messages); the message names them.
        """
        from tractkv.engine.content import check_cache_breakpoints, render_anthropic_params

        if strict:
            self.check_pairing()

        params = render_anthropic_params(self.messages, copy.deepcopy(list(self.tools)), self.tools_cache)
        self._check_breakpoints(params)  # the count, naming the commits; then the renderer's checks
        check_cache_breakpoints(params)
        return cast("AnthropicParams", params)

    def _check_breakpoints(self, params: dict[str, Any]) -> None:
        """Refuse a request with more cache breakpoints than Anthropic takes, naming each (commits included)."""
        from tractkv.engine.content import MAX_CACHE_BREAKPOINTS

        system = params.get("system")
        blocks = [*(system if isinstance(system, list) else ()), *params.get("tools", ())]
        for turn in params["messages"]:
            blocks.extend(turn["content"] if isinstance(turn["content"], list) else ())
        count = sum(1 for block in blocks if "cache_control" in block)
        if count <= MAX_CACHE_BREAKPOINTS:
            return
        named = [
            f"{'system prompt' if m.role == 'system' else f'{m.role} message'} {i} "
            f"({self.commit_ids[i][:12]}, {m.cache})"
            for i, m in enumerate(self.messages)
            if m.cache is not None
        ]
        named.extend(
            f"tool {t.get('name')!r} (its own cache_control)"
            for t in params.get("tools", ())[: -1 if self.tools_cache else None]
            if "cache_control" in t
        )
        if self.tools_cache is not None:
            named.append(f"the tools (set_tools(cache={self.tools_cache!r}))")
        raise InvalidInput(
            f"Anthropic takes at most {MAX_CACHE_BREAKPOINTS} cache breakpoints; this context has {count}: "
            f"{'; '.join(named)} (remove some with annotate(rev, cache='off') / --cache off)"
        )


def _invalid_arguments(message: Message, commit_id: ObjectId, dialect: str) -> list[Repair]:
    """One ``invalid_arguments`` repair per tool call of ``message`` whose arguments are not a JSON object
    (sent to ``dialect`` as ``{}``)."""
    from tractkv.engine.values.repairs import Repair

    out = []
    for call in message.tool_calls:
        if call.invalid_arguments is not None:
            shown = (
                call.invalid_arguments
                if len(call.invalid_arguments) <= 80
                else call.invalid_arguments[:77] + "..."
            )
            detail = (
                f"tool call {call.id} ({call.name}): its arguments are not a JSON object ({shown!r}); "
                f"{dialect} needs one: sent as {{}}"
            )
            out.append(Repair(kind="invalid_arguments", commit_id=commit_id, call_id=call.id, detail=detail))
    return out


def _left_out_part(part: Any, dialect: str) -> tuple[str, str]:
    """``(name, what)`` of a part ``dialect`` has no form for (see :meth:`CompiledContext.left_out`),
    ``("", "")`` for a part it renders or leaves out silently."""
    if part.type == "responses_item" and dialect != "responses" and part.item is not None:
        kind = part.item.get("type")
        if kind not in ("reasoning", "function_call"):
            name = str(part.item.get("id") or kind)
            return name, f"the Responses item {name} ({kind})"
    if part.type == "gemini_part" and dialect != "gemini" and part.item is not None:
        fields = " ".join(sorted(k for k in part.item if k != "thought_signature")) or "part"
        return f"gemini:{fields}", f"the Gemini part {fields}"
    if part.type == "redacted_thinking" and dialect == "gemini":
        return "redacted_thinking", "an Anthropic redacted_thinking block"
    if part.type == "openai_audio" and dialect != "openai" and part.item is not None:
        name = str(part.item.get("id"))
        return name, f"the OpenAI audio reply {name}"
    if dialect == "anthropic":
        return "", ""
    if part.type == "anthropic_block" and part.item is not None:
        kind = str(part.item.get("type"))
        name = str(part.item.get("id") or part.item.get("tool_use_id") or kind)
        return name, f"the Anthropic server tool block {name} ({kind})"
    if part.type == "text" and part.citations is not None:
        return "citations", "a text block's citations (its text is sent)"
    return "", ""
