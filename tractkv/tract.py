"""The :class:`Tract` facade: one handle on a store, positioned on a branch (or detached at a commit).

Lifecycle and delegation only. The handle's HEAD, compile state, batches and write path are a
:class:`~tractkv.engine.session.Session`; merge and compress are :mod:`tractkv.engine.merging`; tool results,
hooks and summarization are :mod:`tractkv.engine.tools.results`; tool-usage queries are
``tractkv.engine.usage_*``; sync is :mod:`tractkv.sync.transfer` and :mod:`tractkv.sync.remotes`; the model
is reached through :func:`tractkv.llm.protocol.call_model`. The agent toolkit sits above this module and is
never imported here: its functions take a Tract (``tractkv.toolkit.run``, ``as_tools``, ``export``,
``rerun_tool_usage``); the deprecated methods of those names reach them through :func:`provide_toolkit`.

Concurrency: several handles (threads or processes) may use one store, each with its own HEAD. Every ref
move is a compare-and-swap, so two handles appending to one branch never lose a commit: the loser gets
:class:`~tractkv.errors.ConcurrentUpdate` (nothing written), or, with ``rebase_appends=True``, a pure append
is re-made on top of the new tip.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from tractkv.engine import open_session
from tractkv.engine.content import TokenCounter
from tractkv.engine.history import branch_ref
from tractkv.engine.session import Session, WritePolicy, append_text
from tractkv.engine.values import CommitInfo, CompiledContext
from tractkv.errors import InvalidInput, NoLLMConfigured, ReadOnlySession, UnknownRevision, Unsupported
from tractkv.ids import ObjectId, is_object_id
from tractkv.model import UsageRecord
from tractkv.store import Store, open_store

_NO_CONTENT: Any = (
    object()
)  # tool_result's content when none is given (a function_call_output item has its own)

if TYPE_CHECKING:  # engine modules a few methods need are imported on first use: `import tractkv` stays light
    from tractkv.engine.budget import BudgetPolicy
    from tractkv.engine.compile import CompileState
    from tractkv.engine.tools import PendingToolResult, ToolResults, ToolTurn
    from tractkv.engine.usage import ToolStats, ToolUsage, UsageNode
    from tractkv.engine.values import (
        BlameEntry,
        BranchInfo,
        ChildInfo,
        ContextDiff,
        GcResult,
        MergeResult,
        ParentInfo,
        PickResult,
        ReflogEntry,
        RunResult,
        SearchHit,
        StatusInfo,
        TagInfo,
    )
    from tractkv.llm.generate import GenerationStream, PreparedReply
    from tractkv.llm.protocol import LLMClient
    from tractkv.store import WriteBatch
    from tractkv.sync.remote import PushOutcome
    from tractkv.sync.transfer import FetchResult

COMPRESS_INSTRUCTIONS = (
    "Summarize this conversation so far for the assistant who will continue it. Keep decisions, facts, "
    "open questions and commitments; be concise."
)


class Tract:
    """A handle on a tractkv store: commit, compile, branch, merge, reset, inspect, sync.

    Use :meth:`open` to make one. A Tract is a context manager; closing it writes a compile checkpoint so the
    next process compiles without replaying history.
    """

    def __init__(
        self,
        store: Store,
        *,
        token_counter: TokenCounter | None = None,
        token_budget: int | None = None,
        rebase_appends: bool = False,
        clock: Callable[[], int] | None = None,
        branch: str | None = None,
        owns_store: bool = True,
        llm: LLMClient | None = None,
        readonly: bool = False,
    ) -> None:
        if isinstance(store, (str, bytes, os.PathLike)):
            raise InvalidInput(f"Tract() takes a store object, not the path {store!r}: use Tract.open(path)")
        _check_llm(llm)  # before the session records HEAD
        self._store = store
        self._owns_store = owns_store
        self._session: Session = open_session(
            store,
            counter=token_counter,
            clock=clock,
            branch=branch,
            rebase_appends=rebase_appends,
            readonly=readonly,
            policies=(_Budget(self),),
        )
        self._llm: LLMClient | None = llm
        self._summarizer: LLMClient | None = None
        self._tool_results: ToolResults | None = None
        if token_budget is not None:
            _set_budget_instead(self, token_budget)

    @property
    def _results(self) -> ToolResults:
        """The tool-result pipeline (hooks, summarization settings), made on first use."""
        if self._tool_results is None:
            from tractkv.engine.tools import ToolResults

            self._tool_results = ToolResults(self._session, self._ask_model)
        return self._tool_results

    # --- opening and closing -----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | None = None,
        *,
        branch: str | None = None,
        durable: bool = True,
        token_counter: TokenCounter | None = None,
        token_budget: int | None = None,
        rebase_appends: bool = False,
        create: bool = True,
        clock: Callable[[], int] | None = None,
        llm: LLMClient | None = None,
        readonly: bool = False,
    ) -> Tract:
        """Open (or create) a store at ``path``; an in-memory store when ``path`` is None.

        Args:
            path: the store directory.
            branch: work on this branch (created when the first commit lands) instead of the one HEAD names;
                the store's HEAD stays as it is (only :meth:`switch` and :meth:`checkout` move it), except that a
                new store starts with this branch as its HEAD.
            durable: fsync every commit (default); False is faster and survives process crashes, not OS ones.
            token_counter: counts tokens (default: an offline heuristic).
            token_budget: deprecated (removed in 0.2.0): calls :meth:`set_budget` (the branch's stored budget,
                keeping a stored action and threshold) with a :class:`DeprecationWarning`; call :meth:`set_budget`.
            rebase_appends: re-make a pure append on a branch another handle moved, instead of raising.
            create: create the store when absent (never with ``readonly``: a missing store then raises
                :class:`~tractkv.errors.StoreNotFound` and nothing is created).
            clock: returns the time in µs since the epoch (tests pass a fake one).
            llm: the model summarize, compress and generate use (see :meth:`configure_llm`).
            readonly: refuse every write (:class:`~tractkv.errors.ReadOnlySession`); HEAD and compile
                checkpoints are never written, so reading changes nothing in the store.
        """
        if path is None:
            store = open_store(None)
        else:  # a read-only open leaves an older store's format as it is (it writes nothing)
            store = open_store(path, durable=durable, create=create and not readonly, migrate=not readonly)
        try:
            return cls(
                store,
                token_counter=token_counter,
                token_budget=token_budget,
                rebase_appends=rebase_appends,
                clock=clock,
                branch=branch,
                llm=llm,
                readonly=readonly,
            )
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        """Write a compile checkpoint for HEAD if useful, and release the store."""
        if self._session.closed:
            return
        try:
            self._session.close()
        finally:
            if self._owns_store:
                self._store.close()

    def __enter__(self) -> Tract:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def store(self) -> Store:
        """The underlying store."""
        return self._store

    @property
    def token_counter(self) -> TokenCounter:
        return self._session.counter

    @property
    def rebase_appends(self) -> bool:
        return self._session.rebase_appends

    @rebase_appends.setter
    def rebase_appends(self, value: bool) -> None:
        self._session.rebase_appends = value

    def __repr__(self) -> str:
        where = self._store.path or "memory"
        s = self._session
        return f"Tract({where!r}, {s.current_branch if s.branch_ref else f'detached {s.detached}'})"

    # --- HEAD ---------------------------------------------------------------------------------------------

    @property
    def current_branch(self) -> str | None:
        """The branch name this handle is on, or None when detached."""
        return self._session.current_branch

    @property
    def head(self) -> ObjectId | None:
        """The commit this handle's HEAD points at (None on a branch with no commits yet)."""
        return self._session.head

    @property
    def is_detached(self) -> bool:
        return self._session.branch_ref is None

    @property
    def policies(self) -> tuple[WritePolicy[Any], ...]:
        """The write policies this handle's writes consult, in order (the branch budget first)."""
        return self._session.policies

    def add_policy(self, policy: WritePolicy[Any]) -> None:
        """Register a write policy (:class:`~tractkv.engine.session.WritePolicy`: ``before_write`` may refuse a
        write, ``check`` sees what it stages, ``landed`` what it wrote), consulted from this handle's next
        write on, after those registered before it (the agent toolkit registers its open-call guard so)."""
        self._session.add_policy(policy)

    def check_writable(self, action: str, *, branch: bool = False) -> None:
        """Raise now what a write named ``action`` would raise when it starts, before work that should not
        run in vain (a tool, a model call): :class:`ReadOnlySession`, :class:`StoreClosed`; with ``branch=True``
        also what refuses a commit on HEAD (:class:`DetachedHead`, a write refused during an agent step)."""
        if branch:
            self._session.writable(action)
        else:
            self._session.check_writes(action)

    # --- writing ------------------------------------------------------------------------------------------

    @contextmanager
    def batch(self) -> Iterator[Tract]:
        """Stage every commit made inside the block; write them in one transaction at its end (nothing if it
        raises). Reads inside see the staged commits; nested blocks join the outer one. A commit refused inside
        the block (an error the block catches) unstages everything it staged: the block goes on with the
        commits before and after it, and nothing of the refused one is written.

        The tool setting (:meth:`set_tools`) is read once, at the block's first commit, and linked to every
        commit of the block: ``set_tools`` is refused inside it, and another handle's ``set_tools`` made while
        the block is open is not seen by its later commits (it applies from the first commit after it).

        The block moves the branch once, so the reflog has one entry for it (from the tip before the block to
        its last commit; ``main@{1}`` is the tip before the block), as git logs one move per operation.

        While the outermost block runs, Python's cyclic garbage collector runs less often (its first threshold
        raised to 50,000 young objects; restored when the block ends, even on error)."""
        with self._session.batch():
            yield self

    def commit(
        self,
        content: Any,
        operation: str = "append",
        edit_target: str | None = None,
        message: str | None = None,
        reply_to: str | None = None,
        metadata: dict[str, Any] | None = None,
        generation_config: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> CommitInfo:
        """Append a message (``operation="append"``) or replace one (``"edit"`` with ``edit_target``).

        Args:
            content: a payload dict (``{"type": "dialogue", "role": "user", "text": ...}``) or a content object.
            operation: ``append`` or ``edit``.
            edit_target: the message commit (or a revision naming it) an edit replaces.
            message: a note for people (never sent to a model).
            reply_to: the commit this one answers.
            metadata: JSON-like data kept with the commit.
            generation_config: the model parameters that produced this content.
            tools: tool schemas available for this commit (stored once each, as an ordered set).

        Raises:
            DetachedHead: HEAD is a read-only checkout.
            ContentError: malformed content. InvalidInput: a bad operation or target.
            ConcurrentUpdate: another handle moved the branch (see the module doc).
        """
        return self._session.commit(
            content, operation, edit_target, message, reply_to, metadata, generation_config, tools
        )

    def system(self, text: str, *, cache: str | None = None, **kwargs: Any) -> CommitInfo:
        """Append a system instruction. ``cache="5m" | "1h"`` (here and on :meth:`user` / :meth:`assistant`)
        also puts a prompt-cache breakpoint on it: the message and an :meth:`annotate` commit, in one batch."""
        if cache is not None:
            return self._cached(cache, lambda: self.system(text, **kwargs))
        return self.commit({"type": "instruction", "text": text}, **kwargs)

    def _cached(self, cache: str, append: Callable[[], CommitInfo]) -> CommitInfo:
        """``append()`` and a cache-breakpoint annotation of what it appended, in one transaction; returns
        the message's commit."""
        from tractkv.engine.content import CACHE_TTLS

        if cache not in CACHE_TTLS:  # before anything is staged
            raise InvalidInput(f"cache must be one of {CACHE_TTLS}, not {cache!r}")
        with self.batch():
            info = append()
            self.annotate(info.commit_id, cache=cache)
        return info

    def user(
        self, text: str | list[Any], *, name: str | None = None, cache: str | None = None, **kwargs: Any
    ) -> CommitInfo:
        """Append a user message: a string, or a list of content parts (str, ``{"type": "text", "text"}``,
        ``{"type": "image" | "document", "data": bytes, "media_type"}``, ``{"type": "image", "url"}``, or
        OpenAI / Anthropic native parts; see :mod:`tractkv.engine.content.payload`). Media bytes are stored once
        each, however many messages use them."""
        if cache is not None:
            return self._cached(cache, lambda: self.user(text, name=name, **kwargs))
        if type(text) is str and name is None and not kwargs:
            return append_text(self._session, "user", text)  # plain text: the same commit, fewer steps
        payload: dict[str, Any] = _dialogue("user", text)
        if name is not None:
            payload["name"] = name
        return self.commit(payload, **kwargs)

    def assistant(
        self,
        text: str | list[Any] = "",
        *,
        tool_calls: list[Any] | None = None,
        cache: str | None = None,
        **kwargs: Any,
    ) -> CommitInfo:
        """Append an assistant message (a string, or a list of parts: text, ``thinking``,
        ``redacted_thinking``, ``refusal``), optionally with tool calls: ``{"id", "name", "arguments"}``,
        OpenAI's ``{"id", "type": "function", "function": {"name", "arguments"}}`` (arguments a JSON string),
        or Anthropic ``{"type": "tool_use", "id", "name", "input"}`` blocks; stored in the first form."""
        if cache is not None:
            return self._cached(cache, lambda: self.assistant(text, tool_calls=tool_calls, **kwargs))
        if type(text) is str and not tool_calls and not kwargs:
            return append_text(self._session, "assistant", text)  # plain text: the same commit, fewer steps
        payload: dict[str, Any] = _dialogue("assistant", text)
        if tool_calls:
            payload["tool_calls"] = list(tool_calls)
        return self.commit(payload, **kwargs)

    def record_response(
        self,
        response: Any,
        *,
        choice: int = 0,
        message: str | None = None,
        metadata: dict[str, Any] | None = None,
        generation_config: dict[str, Any] | None = None,
        strict: bool = False,
    ) -> CommitInfo:
        """Commit a provider's reply as the assistant message, losing nothing a context needs.

        ``response`` is an OpenAI ``ChatCompletion``, an OpenAI Responses ``Response``, an Anthropic
        ``Message`` or a Gemini ``GenerateContentResponse``: the SDK object, its ``model_dump()`` or the JSON
        body as a dict (the shape says which; Gemini's REST camelCase or the SDK's snake_case); also a LiteLLM
        ``ModelResponse`` (a Claude reply's ``thinking_blocks`` kept as signed thinking, ``reasoning_content``
        alone as unsigned ``reasoning``) and a LangChain ``AIMessage`` / ``AIMessageChunk`` (read by shape).
        A tool call whose arguments are not a JSON object is kept with the exact string
        (``invalid_arguments``).
        A Response's reasoning, function_call and built-in tool items are kept verbatim in their place
        (``responses_item`` parts: :meth:`CompiledContext.to_responses_params` sends them back); ``strict``
        refuses an output item (or Gemini part) of a type tractkv does not know. Gemini: thoughts, function
        calls (an id made from the response and the part's position when Gemini sends none: ``gm_<16 hex>_<i>``,
        docs/format.md) and each part's ``thought_signature``, kept as bytes on its part and sent back on it by
        :meth:`CompiledContext.to_gemini_params`; a chat completion tool call's ``extra_content`` (Gemini's
        OpenAI-compatible endpoint) goes back on that call. Committed: the text, tool calls,
        OpenAI's ``refusal``, Anthropic ``thinking`` (with its ``signature``) and ``redacted_thinking``
        blocks in their original order (as the message's ``parts``); the usage, normalized (``input_tokens``,
        ``output_tokens`` and the provider's own counts), in ``metadata["usage"]`` (:attr:`CommitInfo.usage`);
        the model id and finish reason in ``generation_config``. An OpenAI completion with several choices
        records ``choice`` (the first by default) and nothing of the others. Streaming chunks and events are
        refused: record the final object the SDK's stream helper assembles.

        Raises:
            InvalidResponse: not a complete chat completion or message (a chunk, an error body, an empty or
                malformed reply, a choice that does not exist).
            InvalidInput: a bad ``choice``, ``metadata`` or ``generation_config``. ContentError: a reply with
                nothing in it. DetachedHead, ConcurrentUpdate: as :meth:`commit`.
        """
        from tractkv.llm.generate import record_response  # tractkv.llm loads on first use

        return record_response(
            self._session,
            response,
            choice=choice,
            message=message,
            metadata=metadata,
            generation_config=generation_config,
            strict=strict,
        )

    def annotate(
        self, target: str, priority: str | None = None, reason: str | None = None, *, cache: str | None = None
    ) -> CommitInfo:
        """Set a message's priority with a commit: ``pinned`` (kept through compression), ``normal``, ``skip``;
        and / or its prompt-cache breakpoint, ``cache="5m" | "1h"`` (``"off"`` removes it), which the
        Anthropic rendering sends as ``cache_control`` on the message's last block (the system prompt as text
        blocks; other dialects ignore it; at most 4 per request, see :meth:`set_tools` for the tools'). What is
        not given is kept from the message's latest annotation.
        With ``rebase_appends``, re-made on a tip another handle moved, as an append is, while the message is
        still in the branch's history there (else :class:`InvalidInput`, nothing written)."""
        return self._session.annotate(target, priority, reason, cache)

    # --- reading ------------------------------------------------------------------------------------------

    def compile(
        self,
        at: str | None = None,
        *,
        include_reasoning: bool = False,
        strict: bool = False,
        max_tokens: int | None = None,
    ) -> CompiledContext:
        """The context at HEAD (or at any revision): messages, tools, token count, provenance.

        Tool calls and results always pair up as providers require: where history does not, compile repairs
        it (a placeholder result, an orphan result left out) and lists each repair on ``.repairs``
        (:mod:`tractkv.engine.compile.pairing`); ``strict=True`` raises :class:`~tractkv.errors.ToolPairingError`
        instead.

        ``max_tokens=N`` returns a view that fits N tokens and writes nothing: system and pinned messages
        kept, the oldest others dropped first, tool turns dropped whole (:mod:`tractkv.engine.compile.window`); the
        commits left out are listed on ``.dropped``. :class:`~tractkv.errors.BudgetExceeded` when the system
        and pinned messages (with the tool definitions) alone are over N."""
        if max_tokens is not None:
            from tractkv.engine.fitting import compile_within

            return compile_within(
                self._session, at, max_tokens, include_reasoning=include_reasoning, strict=strict
            )
        return self._session.compile(at, include_reasoning=include_reasoning, strict=strict)

    def get_commit(self, rev: str) -> CommitInfo:
        """A commit by id, unique prefix, branch or ``HEAD~N``."""
        return self._session.get_commit(rev)

    def message_content(self, rev: str) -> dict[str, Any]:
        """The content a message shows now at HEAD (its latest edit's, else its own), for a revision naming
        the message or an edit of it: what an edit of that message starts from.

        Raises:
            InvalidInput: ``rev`` names no message in the context at HEAD."""
        return self._session.message_content(rev)

    def log(
        self, limit: int | None = None, op_filter: str | None = None, *, rev: str | None = None
    ) -> list[CommitInfo]:
        """Commits reachable from HEAD (or ``rev``), newest first; edits and their originals both appear."""
        return self._session.log(limit, op_filter, rev=rev)

    def diff(self, a: str, b: str | None = None) -> ContextDiff:
        """Changes between the compiled contexts of ``a`` and ``b`` (default HEAD): messages added, removed and
        modified (``entries``), and tools added, removed or given another schema (``tools``)."""
        return self._session.diff(a, b)

    def search(
        self,
        query: str,
        /,
        *,
        regex: bool = False,
        ignore_case: bool = False,
        role: str | None = None,
        tool: str | None = None,
        scope: str = "history",
        branch: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[SearchHit]:
        """Find ``query`` (a literal, or a regular expression with ``regex=True``) in message text, tool calls
        (name, arguments), tool results, notes and metadata: one :class:`~tractkv.SearchHit` per matching
        field (commit, role, tool, field, the snippet with the match's span), newest first.

        ``scope="history"`` (default) searches every commit reachable from ``branch`` (a revision; default
        HEAD), through an index kept in the local ``derived`` table (built on first use, extended as the
        branch grows); ``"context"`` the messages compile sends now. ``role`` / ``tool`` keep hits of that
        speaker / tool, ``after`` those committed after that revision, ``limit`` the first N
        (:mod:`tractkv.engine.search`).

        Raises:
            InvalidInput: an empty pattern, a bad regular expression, an unknown scope, a negative limit.
            UnknownRevision: ``branch`` or ``after`` names no commit."""
        from tractkv.engine.search import search  # lazy: keeps `import tractkv` light

        return search(
            self._session,
            query,
            regex=regex,
            ignore_case=ignore_case,
            role=role,
            tool=tool,
            scope=scope,
            branch=branch,
            after=after,
            limit=limit,
        )

    def blame(self, rev: str | None = None) -> list[BlameEntry]:
        """For each message of the context at ``rev`` (default HEAD), in order: the commit that wrote it, the
        commit whose content is shown, and the edits, annotations and compression that shaped it
        (:class:`~tractkv.BlameEntry`, :mod:`tractkv.engine.blame`)."""
        from tractkv.engine.blame import blame  # lazy: keeps `import tractkv` light

        return blame(self._session, rev)

    def status(self) -> StatusInfo:
        """Branch, HEAD, commit / message / token counts, budget use, ahead / behind its upstream. The budget
        is the branch's stored one (:meth:`set_budget`). The token count is the provider's reported one where
        a recorded reply's usage holds (``count_source``: ``"reported"`` or ``"estimated"``;
        :mod:`tractkv.engine.calibration`)."""
        from tractkv.engine import branches  # lazy: keeps `import tractkv` light

        return branches.status(self._session)

    def set_budget(
        self, max_tokens: int | None, *, action: str = "warn", threshold: float = 1.0
    ) -> int | None:
        """Store a token budget for the current branch (None clears it) and what a commit that takes the
        compiled context over ``threshold * max_tokens`` does: ``warn`` (written, recorded, the
        ``budget_exceeded`` event, shown by :meth:`status`), ``reject`` (:class:`~tractkv.errors.BudgetExceeded`,
        nothing written), ``trim`` (a commit skipping the oldest unpinned messages lands with it) or
        ``compress`` (the oldest unpinned messages are summarized by the summarizer, :meth:`configure_llm`).
        A local setting, never synced; what ``trim`` and ``compress`` commit syncs like any commit (see
        :mod:`tractkv.engine.budget`).

        Raises:
            InvalidInput: a budget that is not a positive int, an unknown action, a threshold outside (0, 1].
            DetachedHead: HEAD is detached."""
        from tractkv.engine.budget import set_budget

        return set_budget(self._session, max_tokens, action, threshold)

    def budget(self) -> int | None:
        """The current branch's stored token budget (None: none stored, or HEAD detached)."""
        from tractkv.engine.budget import stored_budget

        return stored_budget(self._session.reader(), self._session.branch_ref)

    # --- branches, merge, reset, reflog, gc ---------------------------------------------------------------

    def branch(self, name: str, source: str | None = None, switch: bool = True) -> BranchInfo:
        """Create a branch at ``source`` (default HEAD) and, by default, switch to it."""
        from tractkv.engine import branches  # lazy: keeps `import tractkv` light
        from tractkv.engine.values import BranchInfo

        start = branches.create_branch(self._session, name, source)
        if switch:
            self.switch(name)
        return BranchInfo(name=name, head=start, is_current=switch)

    def switch(self, name: str) -> BranchInfo:
        """Make ``name`` this handle's branch (and the store's HEAD for the next open)."""
        return self._session.switch(name)

    def checkout(self, rev: str) -> ObjectId:
        """Detach HEAD at a commit: compile and inspect it; committing there is an error."""
        return self._session.checkout(rev)

    def list_branches(self, *, remotes: bool = True) -> list[BranchInfo]:
        """Local branches (and remote-tracking ones as ``<remote>/<branch>``), sorted by name."""
        from tractkv.engine import branches  # lazy: keeps `import tractkv` light

        return branches.list_branches(self._session, remotes=remotes)

    def branches(self) -> list[StatusInfo]:
        """Every branch's summary, each as :meth:`status` gives HEAD's: local branches by name (this handle's
        own, even unborn), then remote-tracking ones (``tractkv branch -v``; the viewer's branch list)."""
        from tractkv.engine.branches import summaries  # lazy: keeps `import tractkv` light

        return summaries(self._session, current=self._session.branch_ref)

    def delete_branch(self, name: str, *, force: bool = False) -> ObjectId:
        """Delete a branch (not the current one; without ``force``, only one another branch contains)."""
        from tractkv.engine import branches  # lazy: keeps `import tractkv` light

        return branches.delete_branch(self._session, name, force=force)

    def merge(self, source: str, strategy: str = "auto", message: str | None = None) -> MergeResult:
        """Merge a branch or commit: a fast-forward, else a merge commit (:mod:`tractkv.engine.merging`);
        ``auto`` raises :class:`MergeConflict` listing every conflict, ``ours`` / ``theirs`` settle them."""
        from tractkv.engine.merging import merge

        return merge(self._session, source, strategy, message)

    def tag(
        self, name: str, rev: str | None = None, message: str | None = None, *, force: bool = False
    ) -> TagInfo:
        """Tag ``rev`` (default HEAD) as ``name``: annotated (a tag object with ``message`` and the tagger's
        time) when ``message`` is given, else lightweight. A taken name is refused unless ``force``; a name
        that is a branch too is refused (see :mod:`tractkv.engine.tags`)."""
        from tractkv.engine.tags import create_tag  # lazy: keeps `import tractkv` light

        return create_tag(self._session, name, rev, message, force=force)

    def tags(self) -> list[TagInfo]:
        """Every tag, by name (the commit each names, and an annotated tag's message and time)."""
        from tractkv.engine.tags import list_tags  # lazy: keeps `import tractkv` light

        return list_tags(self._session)

    def delete_tag(self, name: str) -> TagInfo:
        """Delete a tag; returns what it named."""
        from tractkv.engine.tags import delete_tag  # lazy: keeps `import tractkv` light

        return delete_tag(self._session, name)

    def cherry_pick(self, rev: str, strategy: str = "auto") -> PickResult:
        """Re-apply one commit's change (a message, an edit, an annotation, a compress; an assistant turn's
        tool calls with their results, whole) on this branch, recording the original in the new commit's
        metadata (``picked_from``). A change the branch also made differently is a conflict:
        :class:`MergeConflict` with ``auto``, settled by ``ours`` (the branch's) or ``theirs`` (the picked
        one's); see :mod:`tractkv.engine.picking`."""
        from tractkv.engine.picking import cherry_pick  # lazy: keeps `import tractkv` light

        return cherry_pick(self._session, rev, strategy)

    def rebase(self, onto: str, strategy: str = "auto") -> PickResult:
        """Replay this branch's own commits (those since its merge base with ``onto``, merges left out) on
        ``onto``'s tip, in one transaction: a conflict writes nothing (``auto``) or is settled by ``ours``
        (``onto``'s version, as in git) or ``theirs`` (the replayed commit's); see
        :mod:`tractkv.engine.picking`."""
        from tractkv.engine.picking import rebase  # lazy: keeps `import tractkv` light

        return rebase(self._session, onto, strategy)

    def reset(self, target: str, mode: str = "soft") -> ObjectId:
        """Move the current branch to ``target``; ``soft`` keeps the abandoned commits from gc until they age,
        ``hard`` does not. Until gc runs, ``reset(old_tip)`` (see :meth:`reflog`) undoes it. The branch's
        budget checks the move as a commit's (:mod:`tractkv.engine.budget`); returns ``target``'s id."""
        return self._session.reset(target, mode)

    def reflog(self, branch: str | None = None, limit: int | None = None) -> list[ReflogEntry]:
        """Moves of a branch (default: the current one), newest first. :class:`BranchNotFound` for a name
        that never was a branch here (a deleted branch keeps its reflog until gc)."""
        from tractkv.engine import branches  # lazy: keeps `import tractkv` light

        return branches.reflog(self._session, branch, limit)

    def gc(
        self, min_age_hours: float = 72.0, keep_pinned: bool = True, keep_branches: bool = True
    ) -> GcResult:
        """Remove objects no ref, young reflog entry, young commit, pin or running tool execution keeps
        (see :mod:`tractkv.engine.gc`)."""
        from tractkv.engine.gc import collect_for

        return collect_for(self._session, min_age_hours, keep_pinned, keep_branches)

    # --- sync (tractkv.sync, loaded on first use) --------------------------------------------------------

    def remote_add(self, name: str, url: str, *, token_env: str | None = None) -> str | None:
        """Remember a remote: a store path or ``file://`` URL, ``http://host:port`` (a ``tractkv serve`` hub),
        ``s3://bucket/prefix`` or a bundle file. ``token_env`` names the environment variable holding the
        hub's bearer token (default ``TRACTKV_TOKEN``); tokens are never stored. A relative path is recorded
        absolute (resolved against the current directory now); a malformed URL (``http://`` with no host, a
        bad port) is :class:`~tractkv.errors.UnsupportedURL` now, not at the first fetch. Returns a note for people,
        or None: an S3 endpoint that ignores conditional writes is added (fetch works) with a note saying
        pushes to it will be refused.
        """
        from tractkv.sync import remotes

        self._session.check_writes("remote_add", in_batch=False)
        return remotes.add_remote(self._store, name, url, token_env=token_env)

    def remotes(self) -> dict[str, str]:
        """Configured remotes: name -> URL."""
        from tractkv.sync import remotes

        return remotes.list_remotes(self._store)

    def remote_remove(self, name: str) -> None:
        """Forget a remote and its remote-tracking branches (the objects stay until gc)."""
        from tractkv.sync import remotes

        self._session.check_writes("remote_remove", in_batch=False)
        remotes.remove_remote(self._store, name)

    def fetch(
        self,
        remote: str = "origin",
        *,
        progress: Callable[[int], None] | None = None,
        max_object: int | None = None,
        prune: bool = False,
        force_tags: bool = False,
    ) -> FetchResult:
        """Receive the remote's branches as ``<remote>/<branch>`` tracking branches; local branches stay.
        A tracking branch the remote no longer shows (deleted, or hidden from a narrower token) stays unless
        ``prune`` (git's ``fetch --prune``). ``max_object`` raises (or lowers) the largest object taken
        (default: the one size limit, 16 MiB); one over it is :class:`ObjectTooLarge` and no ref moves. The
        remote's tags arrive as local tags; one that differs from the local tag of its name is left (listed in
        ``tags_refused``) unless ``force_tags``."""
        from tractkv.sync import remotes, transfer

        self._session.check_writes("fetch", in_batch=False)
        if max_object is not None:
            transfer.check_max_object(max_object)
        with remotes.open_named(self._store, remote) as conn:
            return transfer.fetch_from(
                self._store,
                conn,
                remote,
                progress=progress,
                max_object=max_object,
                prune=prune,
                force_tags=force_tags,
            )

    def pull(
        self,
        remote: str = "origin",
        branch: str | None = None,
        ff_only: bool = False,
        *,
        strategy: str = "auto",
        progress: Callable[[int], None] | None = None,
        max_object: int | None = None,
        prune: bool = False,
    ) -> MergeResult:
        """Fetch (``max_object`` and ``prune`` as for :meth:`fetch`), then merge ``<remote>/<branch>`` (default:
        this branch's name) into this branch (see :func:`tractkv.sync.transfer.merge_tracking`; ``NotFastForward`` with
        ``ff_only`` on diverged histories). The branch's budget checks the fast-forward or merge commit; a
        refusal keeps what the fetch received (objects, the tracking branch) and moves nothing else."""
        from tractkv.sync import transfer

        self.fetch(remote, progress=progress, max_object=max_object, prune=prune)
        return transfer.merge_tracking(self._session, remote, branch, ff_only=ff_only, strategy=strategy)

    def push(
        self,
        remote: str = "origin",
        branch: str | None = None,
        force: bool = False,
        expect: str | None = None,
        *,
        progress: Callable[[int], None] | None = None,
    ) -> PushOutcome:
        """Send a branch (default: the current one); the remote's ref moves by compare-and-swap from the value it
        advertised, or from ``expect`` (force-with-lease with ``force``). Without ``force`` only a fast-forward
        is sent. Raises :class:`PushRejected` (``.results`` says why) when the remote refuses."""
        from tractkv.sync import remotes, transfer

        self._session.check_writes("push", in_batch=False)
        ref = branch_ref(branch) if branch is not None else self._session.writable("push").ref
        lease: object = ...
        if expect is not None:
            lease = ObjectId(expect) if is_object_id(expect) else self._session.resolve(expect)
        with remotes.open_named(self._store, remote) as conn:
            return transfer.push_to(
                self._store, conn, remote, ref, force=force, expect=lease, progress=progress
            )

    def push_tags(
        self, remote: str = "origin", *, force: bool = False, progress: Callable[[int], None] | None = None
    ) -> PushOutcome:
        """Send every tag the remote lacks (``push --tags``), in one push; a tag the remote holds at another
        value is refused (:class:`PushRejected`, reason ``already-exists``) unless ``force``."""
        from tractkv.sync import remotes, transfer

        self._session.check_writes("push", in_batch=False)
        with remotes.open_named(self._store, remote) as conn:
            return transfer.push_tags_to(self._store, conn, force=force, progress=progress)

    @classmethod
    def clone(
        cls,
        url: str,
        path: str | None,
        *,
        branch: str | None = None,
        remote: str = "origin",
        token_env: str | None = None,
        durable: bool = True,
        progress: Callable[[int], None] | None = None,
        max_object: int | None = None,
        **kwargs: Any,
    ) -> Tract:
        """A new store at ``path`` (None: in memory) with every branch of the remote at ``url``; HEAD on
        ``branch``, else ``main``, else the first (see :func:`tractkv.sync.transfer.clone_into`);
        ``max_object`` as for :meth:`fetch` (an object over it leaves no store behind)."""
        from tractkv.sync import transfer

        if max_object is not None:
            transfer.check_max_object(max_object)
        if kwargs.get("readonly"):  # before anything is created
            raise ReadOnlySession("clone")

        with transfer.cloning_into(path):  # a clone that fails leaves no store behind
            t = cls.open(path, durable=durable, **kwargs)
            try:
                transfer.clone_into(
                    t._session,
                    url,
                    remote,
                    token_env=token_env,
                    branch=branch,
                    progress=progress,
                    max_object=max_object,
                )
            except BaseException:
                t.close()
                raise
        return t

    # --- tools in context ---------------------------------------------------------------------------------

    def set_tools(
        self, tools: list[dict[str, Any]] | None, *, cache: str | None = None
    ) -> list[dict[str, Any]]:
        """Link these tool schemas to every later commit on this branch (a stored per-branch setting) until
        changed; after ``set_tools(None)`` the next commit records an empty tool set. ``cache="5m" | "1h"``
        records a prompt-cache breakpoint after the tools in the tool set (the Anthropic rendering puts
        ``cache_control`` on the last tool; other dialects ignore it). Each schema keeps the key order given."""
        from tractkv.engine.tools import set_tools

        return set_tools(self._session, tools, cache)

    def get_tools(self) -> list[dict[str, Any]]:
        """The tools set_tools() configured for this branch, or else the tools in force at HEAD."""
        from tractkv.engine.tools import get_tools

        return get_tools(self._session)

    def get_commit_tools(self, rev: str) -> list[dict[str, Any]]:
        """The exact tool schemas, in order, that were in force at a commit (latest tool set wins)."""
        session = self._session
        return [dict(t) for t in session.tools_of(session.state_at(rev).tools)]

    def tool_versions(self, name: str) -> list[dict[str, Any]]:
        """Every stored version of a tool (same name, different schema), oldest first."""
        return self._session.tool_versions(name)

    # --- model, hooks, tool results -------------------------------------------------------------------------

    def configure_llm(self, llm: LLMClient | None, *, summarizer: LLMClient | None = None) -> None:
        """Set the model used by generate, chat and the agent loop, and the one that writes summaries
        (``summarize``, ``compress``, tool-result summarization; default: ``llm``). Each is an
        :class:`~tractkv.llm.LLMClient` (``chat(messages, tools=None, **params) -> LLMResponse``; messages are
        :class:`Message` values). Give summaries their own model when it is a ``ScriptedLLM``: one script
        serves its replies in order, whoever asks."""
        _check_llm(llm)
        _check_llm(summarizer)
        self._llm = llm
        self._summarizer = summarizer

    @property
    def llm(self) -> LLMClient | None:
        return self._llm

    @property
    def summarizer(self) -> LLMClient | None:
        """The model that writes summaries: the one given as ``summarizer``, else :attr:`llm`."""
        return self._summarizer if self._summarizer is not None else self._llm

    def _budget_summary(self, text: str, target_tokens: int) -> str:
        """The summary a ``compress`` budget commits (:mod:`tractkv.engine.budget`)."""
        if self.summarizer is None:
            raise NoLLMConfigured(
                "a compress budget (nothing was written; configure a model, or use action trim)"
            )
        return self._results.summarize(None, text, COMPRESS_INSTRUCTIONS, target_tokens)

    def _budget_event(self, overrun: object) -> None:
        if self._tool_results is not None:  # no handler registered yet: nobody to tell
            self._tool_results.hooks.notify("budget_exceeded", overrun)

    def _ask_model(self, instructions: str, text: str) -> str:
        model = self.summarizer
        if model is None:
            raise NoLLMConfigured("summarize")
        from tractkv.llm.generate import ask  # tractkv.llm loads on the first model call

        return ask(model, instructions, text)

    def on(self, event: str, handler: Callable[[Any], object]) -> None:
        """Register a hook handler for ``event`` (``"tool_result"``, ``"budget_exceeded"``), or for every event
        (``"*"``; handlers of the event itself win over ``"*"`` ones). A ``tool_result`` handler receives a
        :class:`~tractkv.engine.tools.hooks.PendingToolResult` to approve, edit, summarize or reject (see
        :mod:`tractkv.engine.tools.hooks`); a ``budget_exceeded`` handler a
        :class:`~tractkv.engine.values.records.BudgetOverrun` once the commit that went over the branch's budget
        landed (:meth:`set_budget`). Handlers are per handle, in registration order.

        Raises:
            InvalidInput: an unknown event, or a handler that is not callable."""
        self._results.hooks.on(event, handler)

    def off(self, event: str, handler: Callable[[Any], object] | None = None) -> None:
        """Remove a hook handler (all of the event's handlers when ``handler`` is None)."""
        self._results.hooks.off(event, handler)

    def review_tool_result(self, name: str, content: str, *, label: str = "") -> str | None:
        """Run the ``tool_result`` hooks (or the configured summarization) on a result that is not
        committed, such as a nested tool call's (``context.execute``): the text to use, or None when a hook
        rejected it. Nothing is committed (see :meth:`ToolResults.review
        <tractkv.engine.tools.results.ToolResults.review>`)."""
        if not isinstance(name, str) or not name or not isinstance(content, str):
            raise InvalidInput("review_tool_result takes a tool name and the result's text")
        return self._results.review(name, content, label=label)

    def configure_tool_summarization(
        self,
        instructions: dict[str, str] | None = None,
        auto_threshold: int | None = None,
        default_instructions: str | None = None,
    ) -> None:
        """Summarize new tool results automatically (settings per handle; each call replaces the previous ones,
        and no arguments turns it off).

        Without a ``tool_result`` hook: a result of a tool listed in ``instructions`` (name -> instructions)
        is **always** summarized with its instructions; a result of another tool is summarized with
        ``default_instructions`` (else built-in ones) when it has more than ``auto_threshold`` tokens; the
        rest are committed as they are. A registered hook decides instead (the instructions then guide
        ``pending.summarize()`` and :meth:`compress_tool_calls`). A summarized result's raw text stays
        recoverable (:meth:`original_of`); its metadata says ``triggered_by`` and ``summarized_from``.
        Needs a model (:meth:`configure_llm`) once a result is summarized.

        Raises:
            InvalidInput: malformed settings (nothing changed)."""
        self._results.configure(instructions, auto_threshold, default_instructions)

    def tool_result(
        self,
        tool_call_id: str | Any,
        name: str | None = None,
        content: Any = _NO_CONTENT,
        *,
        edit: str | None = None,
        is_error: bool = False,
        message: str | None = None,
        metadata: dict[str, Any] | None = None,
        usages: Sequence[UsageRecord] = (),
        hooks: bool = True,
    ) -> CommitInfo | PendingToolResult | None:
        """Commit the result of a tool call, answering the message that made it (see
        :mod:`tractkv.engine.tools.results`), and return the commit. ``tool_result`` hooks (:meth:`on`) decide
        first: rejected, None is returned; left undecided, the :class:`~tractkv.engine.tools.hooks.PendingToolResult`
        is returned, to be approved later. Without hooks, :meth:`configure_tool_summarization` may summarize
        it. ``edit=<result commit>`` replaces an earlier result (no hooks run: the caller decided; given text
        or JSON, the result's images and documents stay, as in any edit that gives no parts of its own);
        ``hooks=False`` commits it as given. ``name`` None means the tool the call names (a given name must
        be that one). The raw text stays recoverable (:meth:`original_of`); ``usages``
        (the call's usage records) are stored and linked in the same commit. The result carries the tools the
        call was made with (the call commit's tool set, else the context's), not the branch's :meth:`set_tools`.

        ``tool_call_id`` may instead be an OpenAI Responses ``function_call_output`` item (dict or SDK object),
        with no ``content``: its ``call_id`` and ``output`` (a string, or ``input_text`` / ``input_image`` /
        ``input_file`` parts) are the result's.

        ``content`` is a string, a JSON value (stored as its JSON text, keys sorted) or a list of content parts
        (text, images, documents, as :meth:`user` takes). A list is parts only when it holds a dict and every
        item parses as a part (a ``str`` or a valid part dict); any other list is a JSON result, so search
        hits such as ``[{"type": "document", "id": 3, "title": "Q3"}]`` stay JSON.

        Raises:
            ContentError: content that is neither (e.g. a list holding bytes whose parts are malformed: the
                part's error).
            InvalidInput: no call ``tool_call_id`` of tool ``name`` in the context, or (without ``edit``)
                one that no longer waits for a result: answered already, closed by a later message, or
                skipped (compile would leave the result out of every request)."""
        if not isinstance(tool_call_id, str):  # a Responses function_call_output item
            from tractkv.engine.content import responses_result  # the renderer loads on first use

            if content is not _NO_CONTENT:
                raise InvalidInput("a function_call_output item carries its output: pass no content")
            tool_call_id, content = responses_result(tool_call_id)
        elif content is _NO_CONTENT:
            raise InvalidInput("tool_result needs the result's content")
        return self._results.commit_result(
            tool_call_id,
            name,
            content,
            edit=edit,
            is_error=is_error,
            message=message,
            metadata=metadata,
            usages=usages,
            hooks=hooks,
        )

    def original_of(self, rev: str) -> str:
        """The raw tool result behind a result commit: the text the tool returned, for the result itself, a
        hook's or summary's version of it, or an edit of it (``tool_result(edit=)``, compress_tool_calls).

        Raises:
            InvalidInput: ``rev`` is no tool result nor an edit of one."""
        return self._results.original_of(rev)

    def find_tool_results(
        self, name: str | None = None, after: str | None = None, *, scope: str = "history"
    ) -> list[CommitInfo]:
        """The tool results on this branch, oldest first: those of tool ``name`` (its ``content["name"]``),
        committed after ``after`` (a revision in HEAD's history: git's ``after..HEAD``).

        ``scope="history"`` (the default, as in the reference: results stay findable after :meth:`compress`)
        walks every commit reachable from HEAD, merged-in branches included, in causal order; ``"context"``
        lists only what compile sends now. Either way each result appears once, at its latest version (an
        edit's content) under the id of the commit that first recorded it, so :meth:`original_of` gives its
        raw text (see :mod:`tractkv.engine.tools.queries`). A history walk reads every commit in range: O(history).

        Raises:
            InvalidInput: ``scope`` is neither; ``after`` is not in the history of HEAD.
            UnknownRevision: ``after`` names no commit.
        """
        return self._results.find_results(name, after, scope)

    def find_tool_calls(
        self, name: str | None = None, after: str | None = None, *, scope: str = "history"
    ) -> list[CommitInfo]:
        """The assistant messages on this branch that call tools (one of them ``name``), oldest first; ``after``
        and ``scope`` as in :meth:`find_tool_results`."""
        return self._results.find_calls(name, after, scope)

    def find_tool_turns(
        self, name: str | None = None, after: str | None = None, *, scope: str = "history"
    ) -> list[ToolTurn]:
        """Each tool-calling assistant message (one calling ``name``, made after ``after``) with the results
        answering its calls (paired by the call it replied to, else by call id), oldest first; ``scope`` as in
        :meth:`find_tool_results`. In history a call may have several results (a result and a later orphan
        raw commit); in context, only those compile sends."""
        return self._results.find_turns(name, after, scope)

    def compress_tool_calls(
        self,
        name: str | None = None,
        commits: list[str] | None = None,
        *,
        instructions: str | None = None,
        target_tokens: int | None = None,
    ) -> list[CommitInfo]:
        """Summarize the tool results in the current context (of one tool, or the given result commits) in
        place, as edits that keep call ids and names, and return the edits. Each summary follows
        ``instructions``, else the tool's (:meth:`configure_tool_summarization`), else the default ones; the
        originals stay recoverable (:meth:`original_of`); each edit's metadata says
        ``triggered_by="compress_tool_calls"`` and ``summarized_from``. Needs a model (:meth:`configure_llm`).

        Raises:
            NoLLMConfigured, ModelCallFailed: the edits made before the failure stay committed.
            InvalidInput: a commit that is not a message of the context; empty instructions."""
        return self._results.compress_calls(name, commits, instructions, target_tokens)

    # --- generation and compression -------------------------------------------------------------------------

    @overload
    def generate(
        self,
        llm: LLMClient | None = None,
        tools: list[dict[str, Any]] | None = None,
        *,
        stream: Literal[False] = False,
        **params: Any,
    ) -> CommitInfo: ...

    @overload
    def generate(
        self,
        llm: LLMClient | None = None,
        tools: list[dict[str, Any]] | None = None,
        *,
        stream: Literal[True],
        **params: Any,
    ) -> GenerationStream: ...

    def generate(
        self,
        llm: LLMClient | None = None,
        tools: list[dict[str, Any]] | None = None,
        *,
        stream: bool = False,
        **params: Any,
    ) -> CommitInfo | GenerationStream:
        """Compile, call the model with the context's tools (or ``tools``), commit its reply with that tool set
        (:func:`tractkv.llm.generate.generate`): ``params`` plus the answering ``model`` and its
        ``finish_reason`` as ``generation_config``, the normalized usage in the metadata
        (:attr:`CommitInfo.usage`), thinking and refusals as parts. A model error commits nothing; a context
        ending with calls awaiting results raises :class:`UnansweredToolCalls` before the model is called.

        ``stream=True`` returns a :class:`~tractkv.llm.generate.GenerationStream` instead: iterate it for
        the text, thinking and tool-call deltas as they arrive; the whole reply is committed once, when the
        stream ends complete (the same commit as without streaming, then on its ``.commit``); an interrupted
        stream commits nothing. Needs a client that streams (``OpenAIClient``, ``AnthropicClient``)."""
        model = llm if llm is not None else self._llm
        if model is None:
            raise NoLLMConfigured("generate")
        if stream:
            from tractkv.llm.generate import generate_stream

            return generate_stream(self._session, model, tools, params)
        from tractkv.llm.generate import generate

        return generate(self._session, model, tools, params)

    def prepare_reply(self, tools: list[dict[str, Any]] | None = None) -> PreparedReply:
        """The first half of :meth:`generate`, for a caller that calls the model itself (``AsyncTract`` awaits
        it on an event loop): checks HEAD may take a reply and compiles what the model is sent
        (``.request.messages``, ``.request.tools``); ``.commit(response, params)`` then commits the reply as
        :meth:`generate` does, on the tip read here (:class:`ConcurrentUpdate` if the branch moved).

        Raises:
            UnansweredToolCalls, InvalidInput, ReadOnlySession, DetachedHead: as :meth:`generate`, before any
                model call."""
        from tractkv.llm.generate import prepare_reply

        return prepare_reply(self._session, tools)

    def chat(
        self,
        text: str | list[Any],
        llm: LLMClient | None = None,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> CommitInfo:
        """Commit a user message and the model's reply in one transaction (nothing lands if the model fails).

        ``tools``, when given, are linked to both commits (the user message and the reply, as the reference
        does) and offered to the model; otherwise both carry the tools in force (:meth:`set_tools`). Returns
        the reply's commit.

        Raises:
            NoLLMConfigured, ModelCallFailed, UnansweredToolCalls: as :meth:`generate` (nothing committed).
            ContentError, InvalidInput: a malformed message or tool schema (nothing committed).
        """
        if params.pop("stream", False):
            raise InvalidInput("chat does not stream: commit the user message, then generate(stream=True)")
        with self.batch():
            self.user(text, tools=tools)
            return self.generate(llm, tools, stream=False, **params)

    def compress(
        self,
        target_tokens: int | None = None,
        from_commit: str | None = None,
        to_commit: str | None = None,
        instructions: str | None = None,
        content: str | None = None,
    ) -> CommitInfo:
        """Replace the messages from ``from_commit`` to ``to_commit`` (default: all) by a summary (the model's, or
        ``content``); pinned messages, instructions and cut tool turns stay (:mod:`tractkv.engine.merging`)."""
        from tractkv.engine.merging import commit_compress, plan_compress

        plan = plan_compress(self._session, from_commit, to_commit)
        if content is None:
            content = self._results.summarize(
                None, plan.text, instructions or COMPRESS_INSTRUCTIONS, target_tokens
            )
        return commit_compress(self._session, plan, content)

    # --- spawn and collapse (tractkv.engine.spawning) --------------------------------------------------------

    def spawn(
        self,
        purpose: str,
        *,
        inherit: str = "snapshot",
        select: Callable[[Any], object] | None = None,
        tools: bool = False,
        branch: str | None = None,
    ) -> Tract:
        """A child context on a new branch of this store, recorded in a ``spawn`` commit (purpose, this branch
        and HEAD) that syncs with its history; this handle's HEAD and the store's HEAD do not move.

        ``inherit``: ``snapshot`` (the child starts with this context's compiled messages, on a history of its
        own), ``full`` (it continues this history), ``none`` (it starts empty). ``select(message)`` keeps the
        snapshot's messages it returns true for (tool results go with their call). ``tools=True`` gives the
        child this context's tool set. ``branch`` defaults to ``<this branch>.spawn/<purpose slug>``
        (numbered when taken). The child is a :class:`Tract` on the same store (close it, or use it as a
        context manager, before this one); its model is this one's. See :mod:`tractkv.engine.spawning`.

        Raises:
            InvalidInput: a bad argument. BranchExists: ``branch`` exists. ReadOnlySession: read-only.
        """
        from tractkv.engine import spawning

        plan = spawning.plan_spawn(self._session, purpose, inherit, select, tools, branch)
        child = self._handle_on(plan.branch)
        try:
            spawning.write_spawn(child._session, plan)
        except BaseException:
            child.close()
            raise
        return child

    def _handle_on(self, branch: str) -> Tract:
        """Another handle on this store, on ``branch``, with this one's settings and models (opening it leaves
        the store's HEAD as it is)."""
        child = type(self)(
            self._store,
            owns_store=False,
            branch=branch,
            token_counter=self.token_counter,
            clock=self._session.clock,
            rebase_appends=self.rebase_appends,
            llm=self._llm,
        )
        child._summarizer = self._summarizer
        return child

    def collapse(
        self, child: Tract | str, *, content: str | None = None, instructions: str | None = None
    ) -> CommitInfo:
        """Fold a spawned child (its handle, or its branch name) back into this branch as one user message:
        ``content``, else the summarizer's summary of the child's context (guided by ``instructions``). The
        commit links the child's head (``links["child"]``: its history syncs and is kept with this branch) and,
        in the same transaction, the child's branch is deleted; a child handle given is left detached at that
        head (it still compiles; writing raises DetachedHead).

        Raises:
            NoLLMConfigured: no ``content`` and no model (nothing written). InvalidInput: not a child spawned
                from this branch, both ``content`` and ``instructions``, or this context ends with tool calls
                awaiting results. ConcurrentUpdate: this branch or the child's moved meanwhile.
        """
        from tractkv.engine import spawning

        if not isinstance(child, Tract | str):
            raise InvalidInput(f"collapse takes a child Tract or its branch name, not {type(child).__name__}")
        target = child._session if isinstance(child, Tract) else child
        return spawning.collapse(self._session, target, content, instructions, self._summary_writer())

    def _summary_writer(self) -> Callable[[str, str], str] | None:
        """``write(text, instructions)``: the summarizer's summary of ``text`` (None: no model configured)."""
        if self.summarizer is None:
            return None
        return lambda text, instructions: self._results.summarize(None, text, instructions, None)

    def children(self) -> list[ChildInfo]:
        """The children spawned from this branch, open and collapsed, oldest first (read from history, so
        a store that received the branches lists the same; see :mod:`tractkv.engine.spawning`)."""
        from tractkv.engine import spawning

        return spawning.children(self._session)

    def parent(self) -> ParentInfo | None:
        """Where this branch was spawned from (parent branch, commit, purpose), or None when it was not."""
        from tractkv.engine import spawning

        return spawning.parent_of(self._session)

    # --- tool usage -----------------------------------------------------------------------------------------

    def tool_usages(
        self,
        commit: str | None = None,
        name: str | None = None,
        status: str | None = None,
        *,
        rev: str | None = None,
    ) -> list[ToolUsage]:
        """Tool executions in the history of HEAD (or ``rev``), nested ones included, plus running and
        interrupted ones. ``commit`` keeps those started by that assistant commit or answered in that tool
        result commit; ``name`` those of one tool; ``status`` one of pending, success, error, interrupted.
        """
        from tractkv.engine.usage import history_usages

        return history_usages(self._session, rev, commit=commit, name=name, status=status)

    def usage_tree(self, commit: str | None = None, *, rev: str | None = None) -> list[UsageNode]:
        """The usage trees of one message (an assistant commit or its tool result) or of the whole history
        of HEAD (or ``rev``)."""
        from tractkv.engine.usage import history_trees

        return history_trees(self._session, rev, commit=commit)

    def tool_usage_stats(self, *, rev: str | None = None) -> dict[str, ToolStats]:
        """Per tool: count, successes, errors, success rate, p50 / p95 duration (history of HEAD or ``rev``)."""
        from tractkv.engine.usage import history_stats

        return history_stats(self._session, rev)

    # --- deprecated: the agent toolkit's functions (tractkv.toolkit), which this layer does not import -------

    def rerun_tool_usage(self, usage_id: str, executor: object = None) -> ToolUsage:
        """Deprecated (removed in 0.2.0): ``tractkv.toolkit.rerun_tool_usage(t, usage_id,
        executor)``, which this calls (warning once per process)."""
        return cast("ToolUsage", _toolkit("rerun_tool_usage")(self, usage_id, executor))

    def as_tools(
        self, profile: object = "self", overrides: dict[str, str] | None = None, format: str = "openai"
    ) -> list[dict[str, Any]]:
        """Deprecated (removed in 0.2.0): ``tractkv.toolkit.as_tools(profile, overrides, format)``,
        which this calls (warning once per process)."""
        return cast("list[dict[str, Any]]", _toolkit("as_tools")(profile, overrides, format))

    def export(self, format: str = "json") -> str:
        """Deprecated (removed in 0.2.0): ``tractkv.toolkit.export(t, format)``, which this calls
        (warning once per process)."""
        return cast(str, _toolkit("export")(self, format))

    def run(
        self, llm: LLMClient | None = None, executor: object = None, max_steps: int = 10, **params: Any
    ) -> RunResult:
        """Deprecated (removed in 0.2.0): ``tractkv.toolkit.run(t, llm, executor,
        max_steps=...)``, which this calls (warning once per process)."""
        return cast("RunResult", _toolkit("run")(self, llm, executor, max_steps=max_steps, **params))


# The deprecated Tract methods above call the agent toolkit, which sits above this module: it is never imported
# here. A layer above hands this module the way to it instead (the package root does, on `import tractkv`,
# with a function that imports tractkv.toolkit on first use): see `provide_toolkit`.
_toolkit_finder: list[Callable[[str], Callable[..., Any]]] = []  # the one given, once given
_warned: set[str] = set()  # the deprecated methods called so far in this process (each warns once)


def provide_toolkit(finder: Callable[[str], Callable[..., Any]]) -> None:
    """Set how the deprecated methods find a toolkit function by name (``finder("run")``); called once by
    the package root, the layer that may import the toolkit."""
    _toolkit_finder[:] = [finder]


def _toolkit(name: str) -> Callable[..., Any]:
    """The toolkit function a deprecated ``Tract.<name>`` calls, warning the first time each is used."""
    if name not in _warned:
        _warned.add(name)
        first = "" if name == "as_tools" else "t, "
        warnings.warn(
            f"Tract.{name} is deprecated and will be removed in 0.2.0: call tractkv.toolkit.{name}({first}...)",
            DeprecationWarning,
            stacklevel=3,
        )
    if not _toolkit_finder:  # only while the package root is still importing
        raise Unsupported(f"Tract.{name}", f"the toolkit is not provided yet: call tractkv.toolkit.{name}")
    return _toolkit_finder[0](name)


def _set_budget_instead(tract: Tract, max_tokens: int) -> None:
    """``Tract(token_budget=N)``, deprecated: :meth:`Tract.set_budget` of ``N``, keeping the stored action and
    threshold (there is one budget, the branch's stored one)."""
    import warnings

    from tractkv.engine.budget import read_budget

    warnings.warn(
        "Tract.open(token_budget=N) is deprecated and will be removed in 0.2.0: it now calls set_budget(N) "
        "(the branch's stored budget, keeping its action and threshold); call set_budget instead",
        DeprecationWarning,
        stacklevel=4,
    )
    stored = read_budget(tract.store, tract._session.branch_ref)
    if stored is None:
        tract.set_budget(max_tokens)
    else:
        tract.set_budget(max_tokens, action=stored.action, threshold=stored.threshold)


class _Budget(WritePolicy[Session]):
    """The handle's branch budget: :class:`tractkv.engine.budget.BudgetPolicy` with the handle's summarizer and
    ``budget_exceeded`` listener, made when it first checks a transaction (a handle that only reads never loads
    the budget module: a fresh compile pays no more than it did when the session imported it lazily)."""

    def __init__(self, tract: Tract) -> None:
        self._tract = tract
        self._policy: BudgetPolicy | None = None

    def _budget(self) -> BudgetPolicy:
        if self._policy is None:
            from tractkv.engine.budget import BudgetPolicy

            self._policy = BudgetPolicy(self._tract._budget_summary, self._tract._budget_event)
        return self._policy

    def check(
        self,
        session: Session,
        batch: WriteBatch,
        ref: str,
        state: CompileState | None,
        *,
        moved: str | None,
        peer: bool,
    ) -> object | None:
        return self._budget().check(session, batch, ref, state, moved=moved, peer=peer)

    def landed(self, session: Session, outcome: object) -> None:
        self._budget().landed(session, outcome)


def _check_llm(llm: object) -> None:
    if llm is not None and not callable(getattr(llm, "chat", None)):
        raise InvalidInput("an LLM client needs a chat(messages, tools=None, **params) method")


__all__ = ["Tract", "UnknownRevision"]


def _dialogue(role: str, text: object) -> dict[str, Any]:
    """A dialogue payload from a string or a list of content parts (validated by the commit)."""
    if isinstance(text, list | tuple):
        return {"type": "dialogue", "role": role, "parts": list(text)}
    return {"type": "dialogue", "role": role, "text": text}
