"""The whole tractkv exception tree.

Every error the library raises on purpose derives from :class:`TractError`, so callers (and the CLI) can
catch once. Subclasses carry the data that explains them (``.oid``, ``.ref``, ``.expected``, ``.actual``)
and build their message in ``__init__``.

::

    TractError
    ├── InvalidInput (ValueError)            a caller passed something malformed; nothing changed
    │   ├── InvalidObjectId                  not 64 lowercase hex digits / unknown or ambiguous prefix
    │   ├── EncodeError                      a value a hashed payload may not hold (NaN, non-str key, ...)
    │   ├── InvalidRefName                   a branch or ref name git-style rules reject
    │   ├── ContentError                     malformed message content (unknown type, missing text, role)
    │   │   └── ContentTooLarge              a new object over the size limit (MAX_OBJECT_BYTES): not written
    │   ├── ToolPairingError                 compile(strict=True) met tool calls and results it had to repair
    │   ├── UnansweredToolCalls              a model call on a context ending with calls awaiting results
    │   ├── BudgetExceeded                   a context over its token budget / limit (.token_count, .limit)
    │   ├── BranchExists                     a branch of that name exists already
    │   ├── UnknownRevision                  an id, prefix, branch or HEAD~N that names no commit
    │   └── InvalidResponse (MalformedResponse)  a provider reply record_response cannot read (shape, choice)
    ├── ObjectNotFound (KeyError)            no object with that id in the store
    │   ├── MissingRefTarget                 a ref move to a commit (or what it links) no longer stored (gc)
    │   └── MissingLinkTarget                an object written linking one no longer stored (gc removed it)
    ├── RefNotFound (KeyError)               no such branch / ref
    │   └── BranchNotFound                   no branch of that name
    ├── CorruptObject                        stored bytes do not hash to their id
    ├── DecodeError                          bytes are not a valid tractkv object
    │   └── UnsupportedFormat                object written by a newer tractkv (format version too high)
    ├── RefConflict                          compare-and-swap on a ref lost: expected != actual
    │   └── ConcurrentUpdate                 another handle moved the branch first; nothing was written
    ├── DetachedHead                         the operation needs a branch, HEAD is detached at a commit
    ├── ReadOnlySession                      a write through a read-only session (viewer, CLI reads)
    ├── Unsupported (NotImplementedError)    an operation this adapter or store does not provide
    ├── MergeConflict                        merge(strategy="auto") found conflicts (.conflicts)
    ├── ToolHookError                        a tool_result hook raised a non-tractkv exception (wrapped)
    ├── NoLLMConfigured                      summarize / compress / generate with no model set
    ├── ModelCallFailed                      a model client raised a non-tractkv error (wrapped)
    ├── ToolServerUnavailable                an MCP server could not be started, reached or initialized
    ├── LLMError                             a model call failed (tractkv.llm clients, ScriptedLLM)
    │   ├── LLMHTTPError                     the API answered an error status (.status), retries spent
    │   ├── MalformedResponse                the reply is not JSON of the shape the API documents
    │   └── ScriptExhausted                  a ScriptedLLM was called more often than it has responses
    ├── MissingExtra                         an optional extra is not installed (.extra names it)
    ├── SyncError                            push / pull / fetch / clone / bundle failed; local refs unmoved
    │   ├── RemoteNotFound (KeyError)        no remote of that name
    │   ├── RemoteExists (InvalidInput)      remote_add with a taken name
    │   ├── UnsupportedURL (InvalidInput)    a URL scheme tractkv cannot reach
    │   ├── TransferError                    frame, hash, kind or truncation problem (.status, .oid)
    │   │   ├── ObjectTooLarge               one object over the per-object limit (413)
    │   │   ├── RequestTooLarge              a request over the per-request limit (413)
    │   │   └── RejectedObject               bytes do not hash to the id, or unknown kind (422)
    │   ├── RemoteUnavailable                unreachable, or not speaking the tractkv protocol
    │   │   └── MissingTransportExtra (MissingExtra)  an http(s):// or s3:// remote without its extra
    │   ├── AuthError                        401 / 403 from a hub (.status)
    │   ├── PushRejected                     per-ref results (.results) with the reasons
    │   ├── NotFastForward                   pull --ff-only on diverged histories
    │   └── ConditionalWritesUnsupported     an S3 endpoint that ignores If-Match / If-None-Match
    └── StoreError                           the storage layer failed (I/O, LMDB, closed, fork)
        ├── StoreNotFound                    no store at the path (and the caller did not ask to create one)
        ├── StoreFormatError                 store format version is newer than this tractkv, or unknown
        ├── StoreCorrupt                     the store's files are damaged (truncated, emptied): refused
        └── StoreClosed                      the store was used after close()

A test (``tests/test_public_api.py``) parses this drawing and compares it with the classes below: names
and parents (the tree gives the first parent, parentheses the others). ``tractkv`` exports every class here.

Third-party exceptions are wrapped in the one module that imports the library (``raise StoreError(...)
from exc``); nothing else leaks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar


class TractError(Exception):
    """Root of every error tractkv raises on purpose."""


class InvalidInput(TractError, ValueError):
    """A caller passed a malformed argument or payload. Nothing was changed."""


class InvalidObjectId(InvalidInput):
    """Text that is not an object id (64 lowercase hex digits), or a prefix that is unknown or ambiguous."""

    def __init__(self, text: str, reason: str = "not 64 lowercase hex digits") -> None:
        self.text = text
        super().__init__(f"invalid object id {text!r}: {reason}")


class EncodeError(InvalidInput):
    """A value that hashed payloads may not hold; ``path`` says where it was found."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot encode {path or 'value'}: {reason}")


class InvalidRefName(InvalidInput):
    """A branch or ref name that the naming rules reject."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        super().__init__(f"invalid ref name {name!r}: {reason}")


class ObjectNotFound(TractError, KeyError):
    """No object with this id is in the store."""

    def __init__(self, oid: str) -> None:
        self.oid = oid
        super().__init__(oid)

    def __str__(self) -> str:  # KeyError would quote the message
        return f"object not found: {self.oid}"


class MissingRefTarget(ObjectNotFound):
    """A ref move whose new target, or an object the target links directly, is not stored (a reflog entry or
    id whose commit gc removed). Checked in the move's own write transaction; nothing was written."""

    def __init__(self, ref: str, target: str, oid: str) -> None:
        self.ref = ref
        self.target = target
        super().__init__(oid)

    def __str__(self) -> str:
        what = "it is" if self.oid == self.target else f"it links {self.oid}, which is"
        return f"cannot move {self.ref} to {self.target}: {what} not in the store (removed by gc?); nothing moved"


class MissingLinkTarget(ObjectNotFound):
    """An object about to be written links one the store no longer holds (gc removed it after the writer
    checked it, e.g. between a transfer's check and its write). Checked in the writing transaction; nothing
    was written: write again (a push sends the object again once the receiver reports it missing)."""

    def __init__(self, source: str, oid: str) -> None:
        self.source = source
        super().__init__(oid)

    def __str__(self) -> str:
        return (
            f"refusing to write {self.source}: it links {self.oid}, which is not in the store (removed by gc "
            "meanwhile?); nothing was written"
        )


class RefNotFound(TractError, KeyError):
    """No branch or ref of this name."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        super().__init__(ref)

    def __str__(self) -> str:
        return f"ref not found: {self.ref}"


class CorruptObject(TractError):
    """Stored bytes do not hash to the id they are stored under."""

    def __init__(self, oid: str, actual: str) -> None:
        self.oid = oid
        self.actual = actual
        super().__init__(f"corrupt object {oid}: its bytes hash to {actual}")


class DecodeError(TractError):
    """Bytes that are not a valid tractkv object (bad CBOR, unknown kind or field, wrong shape)."""

    def __init__(self, reason: str, oid: str | None = None) -> None:
        self.oid = oid
        self.reason = reason
        where = f" {oid}" if oid else ""
        super().__init__(f"cannot decode object{where}: {reason}")


class UnsupportedFormat(DecodeError):
    """An object written in a format version newer than this tractkv understands."""

    def __init__(self, kind: str, version: int, supported: int, oid: str | None = None) -> None:
        self.kind = kind
        self.version = version
        self.supported = supported
        super().__init__(
            f"{kind} format version {version} is newer than this tractkv supports ({supported}); "
            "upgrade tractkv",
            oid,
        )


class RefConflict(TractError):
    """A compare-and-swap on a ref found another value than expected. Nothing was written."""

    def __init__(self, ref: str, expected: str | None, actual: str | None, detail: str = "") -> None:
        self.ref = ref
        self.expected = expected
        self.actual = actual
        extra = f": {detail}" if detail else ""
        super().__init__(
            f"ref {ref} moved: expected {expected or '(absent)'}, found {actual or '(absent)'}{extra}"
        )


class StoreError(TractError):
    """The storage layer failed: I/O, LMDB, a closed store, a store used across fork()."""


class StoreNotFound(StoreError):
    """No tractkv store at ``.path``, and the caller did not ask to create one. Nothing was created."""

    def __init__(self, path: str, hint: str = "") -> None:
        self.path = path
        super().__init__(f"no tractkv store at {path}{hint}")


class StoreFormatError(StoreError):
    """The store's format version is newer than this tractkv, unknown, or cannot be migrated."""


class StoreCorrupt(StoreError):
    """The store's files are damaged (a truncated or emptied data file); it is refused before it is read."""


class StoreClosed(StoreError):
    """The store was used after it was closed."""

    def __init__(self) -> None:
        super().__init__("store is closed")


# --- engine ---------------------------------------------------------------------------------------------


class ContentError(InvalidInput):
    """Malformed message content (unknown type, missing text, wrong role...)."""


class ContentTooLarge(ContentError):
    """A new object (a message, a tool result, a media file...) whose encoded bytes are over the one size
    limit (``tractkv.model.MAX_OBJECT_BYTES``, 16 MiB): no default store, hub or bundle could carry it, so it
    is refused when written. Nothing was written. ``.kind``, ``.size`` and ``.limit`` say what and how much."""

    def __init__(self, kind: str, size: int, limit: int) -> None:
        self.kind = kind
        self.size = size
        self.limit = limit
        super().__init__(
            f"{_article(kind)} {kind} of {size:,} bytes ({_mib(size)}) is over the {limit:,}-byte ({_mib(limit)}) "
            "limit on one object that every store, hub and bundle reads: nothing was written "
            "(split it, or store a reference to it instead)"
        )


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


class ToolPairingError(InvalidInput):
    """``compile(strict=True)`` (or ``to_*_params(strict=True)``) met a history whose tool calls and results
    do not pair up, which a non-strict compile repairs. ``.repairs`` lists every repair; the message names the
    first."""

    def __init__(self, repairs: Sequence[Any]) -> None:
        self.repairs = tuple(repairs)
        more = f" (and {len(self.repairs) - 1} more)" if len(self.repairs) > 1 else ""
        super().__init__(
            f"tool calls and results do not pair up: {self.repairs[0]}{more}; "
            "compile without strict (strict=True, --strict) to get the repaired request"
        )


class UnansweredToolCalls(InvalidInput):
    """A model call on a context that ends with tool calls still waiting for their results (a tool run in
    progress): providers refuse such a request. ``.call_ids`` names the calls."""

    def __init__(self, call_ids: Sequence[str]) -> None:
        self.call_ids = tuple(call_ids)
        super().__init__(
            f"the context ends with tool calls waiting for results ({', '.join(self.call_ids)}): commit their "
            "results (tool_result) before calling the model"
        )


class BudgetExceeded(InvalidInput):
    """A context that does not fit its token limit: a commit a ``reject`` budget refused (nothing of it was
    written), a ``compress`` or ``trim`` budget that could not bring the context under its limit (nothing
    written), or ``compile(max_tokens=N)`` whose system and pinned messages (and tool definitions) alone are
    over N. ``.token_count`` and ``.limit`` say how much (see :mod:`tractkv.engine.budget`)."""

    def __init__(self, token_count: int, limit: int, detail: str) -> None:
        self.token_count = token_count
        self.limit = limit
        super().__init__(detail)


class DetachedHead(TractError):
    """The operation needs a branch, but HEAD is detached (a read-only checkout of a commit)."""

    def __init__(self, oid: str, action: str = "commit") -> None:
        self.oid = oid
        super().__init__(
            f"cannot {action}: HEAD is detached at {oid[:12]} (read-only); switch to a branch first"
        )


class ReadOnlySession(TractError):
    """A write through a read-only session (the viewer's, the CLI's read commands'). Nothing was written."""

    def __init__(self, action: str = "write") -> None:
        self.action = action
        super().__init__(f"cannot {action}: this session is read-only")


class Unsupported(TractError, NotImplementedError):
    """An operation an adapter does not provide (a LangGraph saver's ``prune``, ...). Nothing was changed."""

    def __init__(self, operation: str, why: str) -> None:
        self.operation = operation
        super().__init__(f"{operation} is not supported: {why}")


class BranchExists(InvalidInput):
    """A branch of that name exists already."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"branch {name!r} exists already")


class BranchNotFound(RefNotFound):
    """No branch of that name (``where``: whose branches were looked at, e.g. "the remote", and ``known``: the
    names there are, for the message)."""

    def __init__(self, name: str, *, where: str | None = None, known: Sequence[str] | None = None) -> None:
        super().__init__(name)
        self.where = where
        self.known = list(known) if known is not None else None

    def __str__(self) -> str:
        text = (
            f"{self.where} has no branch named {self.ref!r}"
            if self.where
            else f"no branch named {self.ref!r}"
        )
        if self.known is not None:
            text += f" (its branches: {', '.join(self.known)})" if self.known else " (it has no branches)"
        return text


class UnknownRevision(InvalidInput):
    """A revision (id, prefix, branch, ``HEAD~N``) that names no commit."""

    def __init__(self, rev: str, reason: str = "names no commit") -> None:
        self.rev = rev
        super().__init__(f"unknown revision {rev!r}: {reason}")


class ConcurrentUpdate(RefConflict):
    """Another handle (or process) moved the branch since this one last read it. Nothing was written.

    Raised by ``generate`` after the model answered, it carries that reply on ``.response`` (an
    ``LLMResponse``; None otherwise): what was paid for is not lost (``record_response(exc.response.raw)``
    commits it on the new tip)."""

    response: Any = None


class MergeConflict(TractError):
    """``merge(strategy="auto")`` found conflicts; ``.conflicts`` lists each with how to resolve it."""

    def __init__(self, conflicts: list[Any], *, ours: str = "ours", theirs: str = "theirs") -> None:
        self.conflicts = conflicts
        self.ours = ours
        self.theirs = theirs
        lines = "; ".join(c.describe(ours, theirs) if hasattr(c, "describe") else str(c) for c in conflicts)
        into = f" merging {theirs} into {ours}" if (ours, theirs) != ("ours", "theirs") else ""
        super().__init__(
            f"{len(conflicts)} merge conflict(s){into}: {lines}. Settle them with strategy='ours' or 'theirs' "
            "(--strategy ours|theirs), or edit one side first; nothing was changed."
        )


# --- tools ----------------------------------------------------------------------------------------------


class ToolHookError(TractError):
    """A tool_result hook raised a non-tractkv exception (wrapped). Nothing was committed, unless the handler
    had approved the result before raising (the message then names the commit)."""


class NoLLMConfigured(TractError):
    """A model-backed operation (summarize, compress without content, generate) ran with no model set."""

    def __init__(self, action: str) -> None:
        super().__init__(f"{action} needs a model: call t.configure_llm(llm) or Tract.open(..., llm=llm)")


class ModelCallFailed(TractError):
    """A model client raised something that is not a tractkv error (wrapped so callers catch one root)."""


class ToolServerUnavailable(TractError):
    """An MCP server (:mod:`tractkv.integrations.mcp`) could not be started, reached or initialized in time,
    or its connection is closed. ``.server`` names it, ``.reason`` says what happened. Nothing was left
    running."""

    def __init__(self, server: str, reason: str) -> None:
        self.server = server
        self.reason = reason
        super().__init__(f"MCP server {server}: {reason}")


# --- llm (tractkv.llm) ----------------------------------------------------------------------------------


class LLMError(TractError):
    """A model call failed: the API could not be reached, answered an error, or sent something unreadable."""


class LLMHTTPError(LLMError):
    """The API answered with an error status (after retries, for 429 and 5xx)."""

    def __init__(self, status: int, url: str, detail: str = "", attempts: int = 1) -> None:
        self.status = status
        self.url = url
        self.detail = detail
        self.attempts = attempts
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        extra = f": {detail}" if detail else ""
        super().__init__(f"HTTP {status} from {url}{tries}{extra}")


class MalformedResponse(LLMError):
    """The API's reply is not valid JSON, or not of the shape its documentation gives."""

    def __init__(self, reason: str, url: str | None = None) -> None:
        self.reason = reason
        self.url = url
        where = f" from {url}" if url else ""
        super().__init__(f"malformed model response{where}: {reason}")


class InvalidResponse(InvalidInput, MalformedResponse):
    """What :meth:`~tractkv.Tract.record_response` was given is not a complete OpenAI chat completion or
    Anthropic message of the documented shape (a streaming chunk, an error body, an empty dict, a choice
    that does not exist, a malformed block). Bad input from the caller, and a malformed model response."""


class ScriptExhausted(LLMError):
    """A :class:`~tractkv.llm.ScriptedLLM` was called after serving all its scripted responses."""

    def __init__(self, served: int) -> None:
        self.served = served
        super().__init__(
            f"ScriptedLLM has no response left: all {served} scripted response(s) were served; "
            "script one more response per expected model call"
        )


# --- sync (tractkv.sync) --------------------------------------------------------------------------------


class MissingExtra(TractError):
    """A transport or an integration needs an optional dependency that is not installed: ``.extra`` names the
    extra to install (``server`` for http(s):// hubs, ``s3`` for s3:// buckets, ``langgraph`` and ``agents``
    for :mod:`tractkv.integrations`), ``.module`` the module that was missing. ``feature`` replaces the
    "<scheme> remotes" subject of the message (an integration is no remote)."""

    def __init__(
        self, scheme: str, extra: str, module: str | None = None, *, feature: str | None = None
    ) -> None:
        self.scheme = scheme
        self.extra = extra
        self.module = module
        missing = f" (no module named {module!r})" if module else ""
        subject = f"{feature} needs" if feature else f"{scheme} remotes need"
        super().__init__(f"{subject} the {extra} extra: pip install 'tractkv[{extra}]'{missing}")


class SyncError(TractError):
    """A push / pull / fetch / clone / bundle operation failed. The local refs did not move."""


class RemoteNotFound(SyncError, KeyError):
    """No remote of that name is configured."""

    def __init__(self, name: str, known: Sequence[str] | None = None) -> None:
        self.name = name
        self.known = tuple(known) if known is not None else None
        if self.known is None:
            hint = f": add it with remote_add() (`tractkv remote add {name} URL`)"
        elif self.known:
            hint = f" (the remotes are: {', '.join(self.known)})"
        else:
            hint = " (there are no remotes)"
        super().__init__(f"no remote named {name!r}{hint}")

    def __str__(self) -> str:
        return str(self.args[0])


class RemoteExists(SyncError, InvalidInput):
    """``remote_add`` with a name that is already configured."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"a remote named {name!r} exists already (remove it first)")


class UnsupportedURL(SyncError, InvalidInput):
    """A remote URL of a scheme tractkv cannot reach (or a malformed one)."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        super().__init__(f"cannot use remote URL {url!r}: {reason}")


class TransferError(SyncError):
    """Objects in transit were rejected: bad frame, bad hash, unknown kind, too large, truncated stream.

    ``.status`` is the HTTP status a hub answers with (400 malformed, 413 too large, 422 rejected object).
    ``.oid`` names the object at fault when there is one.
    """

    status = 400

    def __init__(self, reason: str, oid: str | None = None) -> None:
        self.reason = reason
        self.oid = oid
        where = f" (object {oid})" if oid else ""
        super().__init__(f"transfer rejected: {reason}{where}")


class ObjectTooLarge(TransferError):
    """One object is over the receiver's per-object limit."""

    status = 413


class RequestTooLarge(TransferError):
    """The whole request body is over the receiver's per-request limit (stopped while streaming)."""

    status = 413


class RejectedObject(TransferError):
    """An object's bytes do not hash to its id, or are not a tractkv object this version can read."""

    status = 422


class RemoteUnavailable(SyncError):
    """The remote could not be reached, or answered something that is not the tractkv protocol."""


class MissingTransportExtra(RemoteUnavailable, MissingExtra):
    """An http(s):// or s3:// remote whose transport's extra (``server`` / ``s3``) is not installed: a
    :class:`MissingExtra` that is also a :class:`RemoteUnavailable`, so code handling an unreachable remote
    handles it too."""


class AuthError(SyncError):
    """The remote refused the credentials: ``.status`` 401 (none or unknown token) or 403 (scope too narrow)."""

    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        self.detail = detail
        what = "authentication required" if status == 401 else "forbidden"
        super().__init__(f"{what}: {detail}")


class PushRejected(SyncError):
    """A push moved no ref (or, non-atomic, not every ref): ``.results`` holds each ref's outcome. The message
    gives each refused ref's reason, detail and what to do."""

    HINTS: ClassVar[dict[str, str]] = {
        "non-fast-forward": "pull first, then push again (or overwrite it: force=True, --force)",
        "stale": "fetch to see where it is now, then push again",
        "missing-objects": "push again to send them",
        "forbidden": "use a token whose scopes may write this branch",
        "over-budget": "trim or compress the branch's context, then push again",
    }

    def __init__(self, results: list[Any]) -> None:
        self.results = results
        failed = [r for r in results if not getattr(r, "ok", False)]
        lines = []
        for r in failed:
            name = r.name.removeprefix("refs/heads/")
            detail = f": {r.detail}" if getattr(r, "detail", "") else ""
            hint = self.HINTS.get(r.reason)
            lines.append(f"{name} ({r.reason}){detail}" + (f"; {hint}" if hint else ""))
        super().__init__(f"push rejected: {'; '.join(lines)}")


class NotFastForward(SyncError):
    """``pull(ff_only=True)`` on diverged histories (merge, or pull without ff_only)."""

    def __init__(self, branch: str, remote_ref: str) -> None:
        self.branch = branch
        self.remote_ref = remote_ref
        super().__init__(
            f"{branch!r} and {remote_ref!r} have diverged: not a fast-forward "
            "(pull without ff_only=True, --ff-only, to merge, or reset onto the remote branch)"
        )


class ConditionalWritesUnsupported(SyncError):
    """The S3 endpoint ignores If-None-Match / If-Match, so concurrent pushes could silently lose data."""
