"""An OpenAI Agents SDK session over a tractkv store: :class:`TractkvSession` (extra ``agents``).

**Layout.** A session is a branch, ``agents/<session_id>`` (encoded by
:func:`tractkv.integrations.branch_component`). ``add_items`` appends one commit per item, all of one call in
one transaction; the item itself (a Responses API input item, JSON) is the commit's metadata under
``"agents"`` (``{"v": 1, "item": {...}}``), so it is hashed into the commit, synced with it and returned
exactly as given. The commit's content is what a tractkv user expects of the item
(:mod:`tractkv.integrations._agents_items`): user messages as dialogue, system / developer messages as
instructions, the items of a model's reply (assistant message, ``function_call``, ``reasoning`` with its
``encrypted_content``, built-in tool items) as **one assistant turn** (its first item appends the message,
each further one is an ``edit`` of it showing the whole turn so far: one message with every call, as a
recorded Responses reply is), ``function_call_output`` as the tool result answering its call. So ``tractkv
log``, ``compile`` in every dialect, ``find_tool_calls`` / ``find_tool_turns``, token counts and the viewer
read a session. ``tools=`` (an ``Agent`` or a list of its tools: :func:`agent_tools`) is the tool set the
calls' commits carry (the tools in force); the run's context, which the SDK passes when every method takes a
``wrapper``, gives each model turn's first commit the request's token usage (``metadata["usage"]``).

**Sessions written before** (every item but user / assistant text a hidden ``reasoning`` note) are read as
they were, not migrated (history is immutable and synced): the same items, the same compiled messages. New
items go on with this mapping; a result whose call was stored as a note stays a note, so compile has no
call to pair it with and repairs nothing.

**Pop, clear.** ``pop_item`` appends: an item with a message of its own gets an ``annotate`` commit setting
its priority to ``skip``; a further item of a turn gets an ``edit`` of the turn giving it back as it was
before that item (metadata ``{"v": 2, "pop": <the item's commit>}``). History stays append-only (a popped
session still pushes and pulls as a fast-forward), and tractkv's own rule applies, so a ``skip`` made any
other way (``tractkv annotate``) hides the items its message shows and a later ``normal`` shows them again.
``clear_session`` deletes the branch through tractkv's own branch delete (:meth:`Tract.delete_branch`,
forced; its reflog keeps the commits until ``gc``; a remote keeps its copy); a session branch that is
checked out (the session's Tract's branch, or the store's HEAD) is refused with
:class:`~tractkv.errors.InvalidInput`: switch first.

**Items.** An item must be a JSON value (:func:`json_problem`: maps with string keys, lists, strings,
booleans, null, finite numbers, integers within -2**63 .. 2**64-1, nesting at most :data:`MAX_DEPTH`), and
its commit at most 16 MiB encoded; anything else is :class:`~tractkv.errors.InvalidInput` and nothing is
written. Items are stored in canonical CBOR, so the **order of a map's keys is not kept** (an item reads back
equal, ``==``, with its keys sorted), and tuples read back as lists.

``get_items`` replays the branch from the root, incrementally from the last tip read. After a merge (the
session went on in two places and was merged, e.g. by ``tractkv pull``) every parent is replayed, with
tractkv's own merge order: the first parent's items, then the other parent's items the first does not have, in
its order, then what follows the merge (:func:`_linearized`); a ``skip`` from either side applies. What
it reads is checked for shape and checked to be JSON values by the same rules as on write, and a pop record
must be an edit of the turn of the item it names (:class:`~tractkv.errors.DecodeError` otherwise), since a
store may come from another machine. It returns
fresh copies, which the caller may edit. The SDK's methods are coroutines: each runs the store work in a
worker thread, serialized by one lock per session object. Two writers of one session (two objects, two
processes) may append at once: when another writer moved the branch first nothing of the call is written and
it is re-made on the new tip (its commits made from that tip's items: a turn item goes on the turn the tip
ends with), at most :data:`MAX_APPEND_ATTEMPTS` times (each call's items stay together and in order; the
calls interleave).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from tractkv.errors import (
    BranchNotFound,
    ConcurrentUpdate,
    ContentError,
    DecodeError,
    InvalidInput,
    TractError,
)
from tractkv.ids import ObjectId, is_object_id
from tractkv.integrations import check_id, check_not_checked_out, missing_extra

try:
    from agents import Agent, FunctionTool
    from agents.handoffs import Handoff, handoff
    from agents.memory.session_settings import SessionSettings, resolve_session_limit
except ImportError as exc:  # the extra is missing (tests/integrations/test_openai_agents.py)
    raise missing_extra("tractkv.integrations.openai_agents", "agents", exc) from exc

from tractkv.engine import open_session
from tractkv.engine.content import MAX_JSON_DEPTH, check_json, content_objects, responses_usage
from tractkv.engine.history import HEADS
from tractkv.engine.session import Session
from tractkv.engine.usage import DEFAULT_RESULT_LIMIT, USAGE_LINK, new_usage_id, truncate
from tractkv.integrations._agents_items import (
    INSTRUCTION,
    RESULT,
    TURN,
    USER,
    instruction,
    item_kind,
    note,
    result_content,
    turn_parts,
    turn_payload,
    user_content,
)
from tractkv.model import Blob, Commit, UsageRecord
from tractkv.store import WriteBatch
from tractkv.tract import Tract

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["PREFIX", "TractkvSession", "agent_tools", "json_problem", "session_branch"]

PREFIX = "agents/"
KEY = "agents"
FORMAT = 1  # an item record: {"v": 1, "item": <the item>}
POP_FORMAT = 2  # a pop of a turn's later item: {"v": 2, "pop": <its commit id>} on an edit of the turn
MAX_APPEND_ATTEMPTS = 16  # add_items re-made on a tip another writer moved, at most this many times
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_DEPTH = MAX_JSON_DEPTH  # nesting of an item's JSON value (what a commit's metadata may hold)


def json_problem(value: Any, *, read: bool = False) -> str | None:
    """Why ``value`` is not a JSON value an item may hold (None when it is), as
    :func:`tractkv.engine.content.payload.check_json` (the one bounded walk of JSON-bound values) finds it: maps with
    string keys, lists, strings, booleans, null, finite numbers, integers within -2**63 .. 2**64-1, nesting
    at most :data:`MAX_DEPTH`, no cycle. Written items may hold tuples (stored as lists); items read back may
    not."""
    try:
        check_json(value, "item", tuples=not read)
    except ContentError as exc:
        return str(exc)
    return None


def _linearized(store: Any, tip: ObjectId) -> list[tuple[ObjectId, Commit]]:
    """Every commit reachable from ``tip``, each once, parents before children, a commit's first parent's
    history before its other parents' (the order compile gives a merge's messages: ours, then theirs' new
    ones). Iterative, so a long history does not hit the recursion limit."""
    out: list[tuple[ObjectId, Commit]] = []
    done: set[ObjectId] = set()
    stack: list[tuple[ObjectId, Commit, int]] = [(tip, store.get_commit(tip), 0)]
    while stack:  # ends: each commit is pushed once (a parent is never its own descendant)
        oid, commit, index = stack.pop()
        if index < len(commit.parents):
            stack.append((oid, commit, index + 1))
            parent = commit.parents[index]
            if parent not in done:  # never on the stack: the stack holds its descendants
                stack.append((parent, store.get_commit(parent), 0))
            continue
        done.add(oid)
        out.append((oid, commit))
    return out


def _copy(value: Any) -> Any:
    """A copy of a checked JSON value sharing no list or map with it."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def session_branch(session_id: str) -> str:
    """The branch holding the items of ``session_id`` (an id longer than
    :data:`~tractkv.integrations.MAX_ID_BYTES` encoded is :class:`~tractkv.errors.InvalidInput`)."""
    return PREFIX + check_id("Agents SDK session id", str(session_id))


class TractkvSession:
    """The Agents SDK ``Session`` protocol on the branch ``agents/<session_id>`` of ``store`` (a path, opened
    or created, and closed by :meth:`close`; or an open :class:`~tractkv.Tract`, whose HEAD is never moved)."""

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        store: str | Tract,
        *,
        session_settings: SessionSettings | None = None,
        durable: bool = True,
        tools: Any = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise InvalidInput("session_id must be a non-empty string")
        self.session_id = session_id
        self.session_settings = session_settings
        self.tools = tools  # an Agent, or a list of its tools: the tool set of what add_items writes
        agent_tools(tools)  # checked now: refused before the store is opened
        self.ref = HEADS + session_branch(session_id)
        self._owns = not isinstance(store, Tract)
        self.tract = Tract.open(str(store), durable=durable) if not isinstance(store, Tract) else store
        self._lock = threading.Lock()
        self._writer: Session | None = None
        self._tip: ObjectId | None = None
        self._items: dict[ObjectId, Any] = {}  # item commit -> item, in order
        self._target: dict[ObjectId, ObjectId] = {}  # item commit -> the message commit showing it
        self._content: dict[ObjectId, ObjectId] = {}  # message commit -> its content blob now
        self._hidden: set[ObjectId] = set()  # message commits a skip annotation hides
        self._popped: set[ObjectId] = set()  # items of a turn a pop took out of it
        self._visible: list[tuple[ObjectId, Any]] | None = []  # the items shown, None: to be made again
        # the run's SDK Usage and how many of its requests are written (after this add_items lands)
        self._usage: tuple[Any, int] = (None, 0)
        self._usage_after = self._usage

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            if self._owns:
                self.tract.close()

    def __enter__(self) -> TractkvSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- reading ------------------------------------------------------------------------------------------

    def _refresh(self) -> list[tuple[ObjectId, Any]]:
        """The visible items, oldest first, brought up to date with the branch."""
        store = self.tract.store
        value = store.get_ref(self.ref)
        tip = ObjectId(value) if value is not None else None
        if tip != self._tip:
            chain: list[tuple[ObjectId, Commit]] = []
            cursor = tip
            while cursor is not None and cursor != self._tip:  # ends: ids are hashes, history has no cycle
                commit = store.get_commit(cursor)
                if len(commit.parents) > 1 and tip is not None:  # a merge: replay every side, from scratch
                    chain, cursor = _linearized(store, tip), None
                    break
                chain.append((cursor, commit))
                cursor = commit.parents[0] if commit.parents else None
            else:
                chain.reverse()
            if cursor is None:  # not a descendant of what we read, or a merge: from scratch
                self._forget()
            for oid, commit in chain:
                self._take(oid, commit)
            self._tip = tip
        if self._visible is None:  # a skip, unskip or pop since: the list is made again
            self._visible = [
                (oid, item)
                for oid, item in self._items.items()
                if oid not in self._popped and self._target[oid] not in self._hidden
            ]
        return self._visible  # the callers only read it

    def _forget(self) -> None:
        self._items, self._target, self._content = {}, {}, {}
        self._hidden, self._popped = set(), set()
        self._visible = []

    def _take(self, oid: ObjectId, commit: Commit) -> None:
        target = commit.edit_target
        message = self._target.get(target) if target is not None else None  # the item's message commit
        if commit.operation == "annotate" and message is not None and commit.content is not None:
            blob = self.tract.store.get(commit.content)
            priority = (
                blob.data.get("priority") if isinstance(blob, Blob) and isinstance(blob.data, dict) else None
            )
            if priority == "skip":  # the message is hidden: every item it shows
                self._hidden.add(message)
            elif priority in ("normal", "pinned"):
                self._hidden.discard(message)
            self._visible = None
            return
        edit = False
        if commit.operation == "edit" and message is not None and commit.content is not None:
            edit = True
            self._content[message] = commit.content  # the turn as it stands (an item, a pop, any edit)
        meta = commit.metadata
        record = meta.get(KEY) if isinstance(meta, dict) else None
        if record is None:
            return  # not an item (a commit made some other way on the branch)
        where = f"commit {oid} on {session_branch(self.session_id)}"
        if isinstance(record, dict) and record.get("v") == POP_FORMAT:
            popped = record.get("pop")
            item_oid = ObjectId(popped) if isinstance(popped, str) and is_object_id(popped) else None
            if not edit or item_oid is None or self._target.get(item_oid) != message:
                raise DecodeError(f"{where}: not an Agents SDK pop of an item of its turn", oid)
            self._popped.add(item_oid)
            self._visible = None
            return
        if not (
            isinstance(record, dict) and record.get("v") == FORMAT and isinstance(record.get("item"), dict)
        ):
            raise DecodeError(f"{where}: not an Agents SDK item", oid)
        problem = json_problem(record["item"], read=True)  # a store may come from another machine
        if problem is not None:
            raise DecodeError(f"{where}: an Agents SDK item that is not a JSON value: {problem}", oid)
        fresh = oid not in self._items  # (a commit read again after a failed read is not shown twice)
        self._items[oid] = record["item"]
        if edit and message is not None:
            self._target[oid] = message  # a further item of an assistant turn: an edit of its message
        else:
            self._target[oid] = oid
            if commit.content is not None:
                self._content[oid] = commit.content
        if fresh and self._visible is not None and self._target[oid] not in self._hidden:
            self._visible.append((oid, record["item"]))

    def _get(self, limit: int | None) -> list[Any]:
        limit = resolve_session_limit(limit, self.session_settings)
        with self._lock:
            items = [_copy(item) for _oid, item in self._refresh()]  # the caller may edit them
        if limit is None or limit < 0:
            return items
        return items[-limit:] if limit else []

    # --- writing ------------------------------------------------------------------------------------------

    def _session(self) -> Session:
        if self._writer is None:
            branch = self.ref[len(HEADS) :]  # a session on a branch leaves the store's HEAD as it is
            # with the default policy: the branch budget checks its commits, as a Tract's
            self._writer = open_session(self.tract.store, counter=self.tract.token_counter, branch=branch)
        return self._writer

    def _add(self, items: list[Any], wrapper: Any = None) -> None:
        if not items:
            return
        tools = agent_tools(self.tools)
        for item in items:
            if not isinstance(item, dict):
                raise InvalidInput(f"an Agents SDK item is a dict, not {type(item).__name__}")
            problem = json_problem(item)
            if problem is not None:
                raise InvalidInput(f"an Agents SDK item that is not a JSON value: {problem}")
        with self._lock:
            attempts = 0
            while True:  # ends: at most MAX_APPEND_ATTEMPTS tries
                visible = self._refresh()
                session = self._session()
                try:
                    with session.batch():
                        turn = self._turn_now(visible)
                        usages = self._turn_usages(wrapper, items, turn is not None)
                        made: dict[str, _Call] = {}
                        for index, item in enumerate(items):
                            extra: dict[str, Any] = {"tools": tools} if index == 0 and tools else {}
                            if turn is None and item_kind(item) == TURN and usages:
                                usage = usages.pop(0)
                                if usage is not None:
                                    extra["usage"] = usage
                            turn = self._commit_item(session, item, turn, made, visible, extra)
                    self._usage = self._usage_after
                    return
                except ConcurrentUpdate:
                    # another writer (a second session object, another process) appended first: nothing of
                    # this call was written; the items are remade on the new tip (a turn may go on there)
                    attempts += 1
                    if attempts >= MAX_APPEND_ATTEMPTS:
                        raise
                    time.sleep(random.uniform(0, 0.002 * attempts))

    def _commit_item(
        self,
        session: Session,
        item: dict[str, Any],
        turn: tuple[ObjectId, dict[str, Any]] | None,
        made: dict[str, _Call],
        visible: list[tuple[ObjectId, Any]],
        extra: dict[str, Any],
    ) -> tuple[ObjectId, dict[str, Any]] | None:
        """Commit one item (its content: :mod:`tractkv.integrations._agents_items`); the assistant turn a
        next item continues (None when this item ends it). ``made``: the calls this add_items made;
        ``extra``: the tool set this commit gives (``tools``), a turn's token usage (``usage``)."""
        kind = item_kind(item)
        metadata: dict[str, Any] = {KEY: {"v": FORMAT, "item": item}}
        if "usage" in extra:
            metadata["usage"] = extra["usage"]
        tools = extra.get("tools")
        if kind == TURN:
            try:
                parts, calls = turn_parts(item)
                blob, media = content_objects(turn_payload(turn[1] if turn else None, parts, calls))
            except (ContentError, InvalidInput):
                blob, media = note(item)  # the turn ends: the item is a note, as before
                session.commit_content(blob, operation="append", metadata=metadata, tools=tools)
                return None
            info = session.commit_content(
                blob,
                operation="edit" if turn else "append",
                target=turn[0] if turn else None,
                metadata=metadata,
                tools=tools,
                media=media,
            )
            message = turn[0] if turn else info.commit_id
            for call in calls:
                made[call["id"]] = _Call(message, call["name"], call["arguments"], _us(info.created_at))
            return message, blob.data
        reply_to: ObjectId | None = None
        record: UsageRecord | None = None
        try:
            if kind == RESULT:
                answered = made.get(str(item.get("call_id"))) or self._call_of(visible, item.get("call_id"))
                if answered is None:
                    raise ContentError("its call is no tool call of this session's turns")
                reply_to = answered.message
                blob, media = result_content(item, answered.name)
                record = _execution(answered, str(item.get("call_id")), blob, session.clock())
            elif kind == USER:
                blob, media = user_content(item)
            elif kind == INSTRUCTION:
                blob, media = instruction(item)
            else:
                blob, media = note(item)
        except (ContentError, InvalidInput):
            blob, media = note(item)
            reply_to, record = None, None

        def stage(batch: WriteBatch) -> dict[str, tuple[ObjectId, ...]]:
            return {USAGE_LINK: (batch.put(record),)} if record is not None else {}

        session.commit_content(
            blob,
            operation="append",
            reply_to=reply_to,
            metadata=metadata,
            tools=tools,
            media=media,
            stage=stage if record is not None else None,
        )
        return None

    def _turn_usages(self, wrapper: Any, items: list[Any], going_on: bool) -> list[dict[str, Any] | None]:
        """The token usage of each model turn ``items`` begins, in order: the run's requests not written
        yet (``wrapper.usage.request_usage_entries``), the latest ones to the latest turns (a turn may have
        none). Sets ``_usage_after`` to what is written once the call lands."""
        usage = getattr(wrapper, "usage", None)
        entries = getattr(usage, "request_usage_entries", None)
        self._usage_after = self._usage
        if not isinstance(entries, list):
            return []
        seen = self._usage[1] if self._usage[0] is usage and self._usage[1] <= len(entries) else 0
        fresh = [u for u in map(_request_usage, entries[seen:]) if u is not None]
        self._usage_after = (usage, len(entries))
        turns, previous = 0, TURN if going_on else None
        for item in items:
            kind = item_kind(item)
            turns += kind == TURN and previous != TURN
            previous = kind
        latest = fresh[len(fresh) - min(turns, len(fresh)) :]
        return [None] * (turns - len(latest)) + latest

    def _payload(self, message: ObjectId) -> dict[str, Any] | None:
        """The content a message commit shows now (its latest edit's), None when it is not a stored map."""
        content = self._content.get(message)
        blob = self.tract.store.get(content) if content is not None else None
        return blob.data if isinstance(blob, Blob) and isinstance(blob.data, dict) else None

    def _turn_now(self, visible: list[tuple[ObjectId, Any]]) -> tuple[ObjectId, dict[str, Any]] | None:
        """The assistant turn a next turn item goes on: the last visible item's message, when that item is
        part of an assistant turn shown as one (not a note: a session written before, or refused content)."""
        if not visible or item_kind(visible[-1][1]) != TURN:
            return None
        message = self._target[visible[-1][0]]
        data = self._payload(message)
        if data is None or data.get("type") != "dialogue" or data.get("role") != "assistant":
            return None
        return message, data

    def _call_of(self, visible: list[tuple[ObjectId, Any]], call_id: object) -> _Call | None:
        """The visible function_call ``call_id`` (its turn's commit, tool name, arguments, when it was
        stored), when its turn shows it as a tool call (None otherwise: a call stored as a note answers as a
        note)."""
        for oid, item in reversed(visible):
            if item.get("type") == "function_call" and item.get("call_id") == call_id:
                message = self._target[oid]
                data = self._payload(message) or {}
                for call in data.get("tool_calls", ()) if data.get("role") == "assistant" else ():
                    if isinstance(call, dict) and call.get("id") == call_id:
                        arguments = call.get("arguments")
                        started = self.tract.store.get_commit(oid).created_at
                        return _Call(message, str(call.get("name")), arguments, started)
                return None
        return None

    def _pop(self) -> Any:
        with self._lock:
            visible = self._refresh()
            if not visible:
                return None
            oid, item = visible[-1]
            message = self._target[oid]
            if message == oid:  # an item with a message of its own: hidden (a skip, tractkv's own rule)
                self._session().annotate(oid, "skip", "Agents SDK pop_item")
            else:  # a further item of an assistant turn: the turn goes back to what it was before it
                before = next((o for o, _i in reversed(visible[:-1]) if self._target[o] == message), message)
                content = self.tract.store.get_commit(before).content
                blob = self.tract.store.get(content) if content is not None else None
                if not isinstance(blob, Blob) or not isinstance(blob.data, dict):
                    raise DecodeError(f"commit {before}: an Agents SDK turn with no content", before)
                self._session().commit_content(
                    content_objects(blob.data)[0],
                    operation="edit",
                    target=message,
                    message="Agents SDK pop_item",
                    metadata={KEY: {"v": POP_FORMAT, "pop": str(oid)}},
                )
            self._refresh()
            return _copy(item)  # the caller may edit it

    def _clear(self) -> None:
        with self._lock:
            name = session_branch(self.session_id)
            check_not_checked_out(self.tract, [name], f"Agents SDK session {self.session_id!r}")
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            with contextlib.suppress(BranchNotFound):  # never written, or deleted by another handle
                self.tract.delete_branch(name, force=True)
            self._tip = None
            self._forget()

    # --- the SDK's protocol -------------------------------------------------------------------------------

    # ``wrapper``: the run's context, which the SDK passes a session whose four methods take it (its usage
    # gives each model turn its token counts); None when called directly.

    async def get_items(self, limit: int | None = None, wrapper: Any = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; with ``limit`` (or ``session_settings.limit``) the latest ones."""
        return await asyncio.to_thread(self._get, limit)

    async def add_items(self, items: list[TResponseInputItem], wrapper: Any = None) -> None:
        """Append ``items`` (one commit each, one transaction for the call)."""
        await asyncio.to_thread(self._add, list(items), wrapper)

    async def pop_item(self, wrapper: Any = None) -> TResponseInputItem | None:
        """Take the latest item out (history stays append-only: see the module doc); None when empty."""
        return await asyncio.to_thread(self._pop)

    async def clear_session(self, wrapper: Any = None) -> None:
        """Delete the session's branch."""
        await asyncio.to_thread(self._clear)


def _request_usage(entry: Any) -> dict[str, Any] | None:
    """One request's usage (the SDK's ``RequestUsage``) normalized as a Responses reply's is (None when it is
    not one: a session keeps going without counts rather than failing a run)."""

    def details(value: Any) -> Any:
        return value.model_dump() if callable(getattr(value, "model_dump", None)) else value

    try:
        return responses_usage(
            {
                "input_tokens": entry.input_tokens,
                "output_tokens": entry.output_tokens,
                "total_tokens": entry.total_tokens,
                "input_tokens_details": details(entry.input_tokens_details),
                "output_tokens_details": details(entry.output_tokens_details),
            }
        )
    except (AttributeError, TractError):
        return None


def agent_tools(tools: Any) -> list[dict[str, Any]] | None:
    """The tool set of an Agents SDK ``Agent`` (its function tools, then its handoffs, as the model is offered
    them: Responses flat function tools), or of a list of ``FunctionTool``, ``Handoff``, ``Agent`` (a handoff
    to it) and tool definitions in any shape ``set_tools`` takes; None for None. A hosted tool
    (``WebSearchTool``, ...) has no function schema: left out (its calls are provider items of the turn).

    Raises:
        InvalidInput: neither an Agent nor a list."""
    if tools is None:
        return None
    if isinstance(tools, Agent):
        given: list[Any] = [*tools.tools, *tools.handoffs]
    elif isinstance(tools, list | tuple):
        given = list(tools)
    else:
        raise InvalidInput(f"tools must be an Agent or a list of tools, not {type(tools).__name__}")
    out: list[dict[str, Any]] = []
    for given_tool in given:
        tool = handoff(given_tool) if isinstance(given_tool, Agent) else given_tool
        if isinstance(tool, FunctionTool):
            out.append(
                _function(tool.name, tool.description, tool.params_json_schema, tool.strict_json_schema)
            )
        elif isinstance(tool, Handoff):
            out.append(
                _function(
                    tool.tool_name, tool.tool_description, tool.input_json_schema, tool.strict_json_schema
                )
            )
        elif isinstance(tool, dict):
            out.append(tool)
    return out


def _function(name: str, description: str, parameters: Any, strict: bool) -> dict[str, Any]:
    return {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": parameters,
        "strict": strict,
    }


class _Call(NamedTuple):
    """A tool call of a turn, as a result answering it needs it."""

    message: ObjectId  # the turn's commit (the result's reply_to, its usage record's commit)
    name: str
    arguments: Any
    started: int  # µs since the epoch: when the call was stored


def _us(when: datetime) -> int:
    return (when - EPOCH) // timedelta(microseconds=1)


def _execution(call: _Call, call_id: str, blob: Blob, now_us: int) -> UsageRecord:
    """The usage record of the execution a function_call_output reports: the call's tool, arguments and
    result (cut to the toolkit's limit), ``start`` when the call was stored and ``end`` when its result was
    (the SDK ran the tool between the two: its own timing is not in the items), status ``success`` (an
    output is all the SDK stores: a tool's error reaches the model as its output text)."""
    data = blob.data if isinstance(blob.data, dict) else {}
    text = data.get("text") or "".join(
        p.get("text", "") for p in data.get("parts", ()) if isinstance(p, dict) and p.get("type") == "text"
    )
    result, full = truncate(str(text), DEFAULT_RESULT_LIMIT)
    return UsageRecord(
        usage_id=new_usage_id(call.started),
        tool_name=call.name,
        status="success",
        started_at=call.started,
        completed_at=max(call.started, now_us),
        arguments=call.arguments if isinstance(call.arguments, dict) and call.arguments else None,
        result=result,
        result_chars=full,
        commit=call.message,
        tool_call_id=call_id,
    )
