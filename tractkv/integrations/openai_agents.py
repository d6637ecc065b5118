"""An OpenAI Agents SDK session over a tractkv store: :class:`TractkvSession` (extra ``agents``).

**Layout.** A session is a branch, ``agents/<session_id>`` (encoded by
:func:`tractkv.integrations.branch_component`). ``add_items`` appends one commit per item, all of one call in
one transaction; the item itself (a Responses API input item, JSON) is the commit's metadata under
``"agents"`` (``{"v": 1, "item": {...}}``), so it is hashed into the commit, synced with it and returned
exactly as given. The commit's content is what tractkv shows for it: a ``dialogue`` message for a user or
assistant message item with text (so ``tractkv log``, ``compile`` and the viewer show the conversation),
else a ``reasoning`` note naming the item's type (hidden from ``compile``). ``pop_item`` appends an
``annotate`` commit setting the last item's priority to ``skip``: history stays append-only (a popped
session still pushes and pulls as a fast-forward), and tractkv's own rule applies, so a ``skip`` made any
other way (``tractkv annotate``) hides an item too and a later ``normal`` shows it again. ``clear_session``
deletes the branch through tractkv's own branch delete (:meth:`Tract.delete_branch`, forced; its reflog keeps
the commits until ``gc``; a remote keeps its copy); a session branch that is checked out (the session's
Tract's branch, or the store's HEAD) is refused with :class:`~tractkv.errors.InvalidInput`: switch first.

**Items.** An item must be a JSON value (:func:`json_problem`: maps with string keys, lists, strings,
booleans, null, finite numbers, integers within -2**63 .. 2**64-1, nesting at most :data:`MAX_DEPTH`), and
its commit at most 16 MiB encoded; anything else is :class:`~tractkv.errors.InvalidInput` and nothing is
written. Items are stored in canonical CBOR, so the **order of a map's keys is not kept** (an item reads back
equal, ``==``, with its keys sorted), and tuples read back as lists.

``get_items`` replays the branch from the root, incrementally from the last tip read. After a merge (the
session went on in two places and was merged, e.g. by ``tractkv pull``) every parent is replayed, with
tractkv's own merge order: the first parent's items, then the other parent's items the first does not have, in
its order, then what follows the merge (:func:`_linearized`); a ``skip`` from either side applies. What
it reads is checked for shape and checked to be JSON values by the same rules as on write
(:class:`~tractkv.errors.DecodeError` otherwise), since a store may come from another machine. It returns
fresh copies, which the caller may edit. The SDK's methods are coroutines: each runs the store work in a
worker thread, serialized by one lock per session object. Two writers of one session (two objects, two
processes) may append at once: ``add_items`` is a pure append, so when another writer moved the branch first
nothing of the call is written and it is re-made on the new tip, at most :data:`MAX_APPEND_ATTEMPTS` times
(each call's items stay together and in order; the calls interleave).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from typing import TYPE_CHECKING, Any

from tractkv.errors import BranchNotFound, ConcurrentUpdate, ContentError, DecodeError, InvalidInput
from tractkv.ids import ObjectId
from tractkv.integrations import check_id, check_not_checked_out, missing_extra

try:
    import agents  # noqa: F401  (the extra: the protocol this module implements)
    from agents.memory.session_settings import SessionSettings, resolve_session_limit
except ImportError as exc:  # the extra is missing (tests/integrations/test_openai_agents.py)
    raise missing_extra("tractkv.integrations.openai_agents", "agents", exc) from exc

from tractkv.engine import open_session
from tractkv.engine.content import MAX_JSON_DEPTH, check_json, content_objects
from tractkv.engine.history import HEADS
from tractkv.engine.session import Session
from tractkv.model import Blob, Commit
from tractkv.tract import Tract

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["PREFIX", "TractkvSession", "json_problem", "session_branch"]

PREFIX = "agents/"
KEY = "agents"
FORMAT = 1
MAX_APPEND_ATTEMPTS = 16  # add_items re-made on a tip another writer moved, at most this many times
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


def _text_of(item: dict[str, Any]) -> str | None:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "".join(texts) if texts else None
    return None


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
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise InvalidInput("session_id must be a non-empty string")
        self.session_id = session_id
        self.session_settings = session_settings
        self.ref = HEADS + session_branch(session_id)
        self._owns = not isinstance(store, Tract)
        self.tract = Tract.open(str(store), durable=durable) if not isinstance(store, Tract) else store
        self._lock = threading.Lock()
        self._writer: Session | None = None
        self._tip: ObjectId | None = None
        self._items: dict[ObjectId, Any] = {}  # item commit -> item, in order
        self._hidden: set[ObjectId] = set()

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
                self._items, self._hidden = {}, set()
            for oid, commit in chain:
                self._take(oid, commit)
            self._tip = tip
        return [(oid, item) for oid, item in self._items.items() if oid not in self._hidden]

    def _take(self, oid: ObjectId, commit: Commit) -> None:
        if (
            commit.operation == "annotate"
            and commit.edit_target in self._items
            and commit.content is not None
        ):
            blob = self.tract.store.get(commit.content)
            priority = (
                blob.data.get("priority") if isinstance(blob, Blob) and isinstance(blob.data, dict) else None
            )
            if priority == "skip":
                self._hidden.add(commit.edit_target)
            elif priority in ("normal", "pinned"):
                self._hidden.discard(commit.edit_target)
            return
        meta = commit.metadata
        record = meta.get(KEY) if isinstance(meta, dict) else None
        if record is None:
            return  # not an item (a commit made some other way on the branch)
        if not (
            isinstance(record, dict) and record.get("v") == FORMAT and isinstance(record.get("item"), dict)
        ):
            raise DecodeError(
                f"commit {oid} on {session_branch(self.session_id)}: not an Agents SDK item", oid
            )
        problem = json_problem(record["item"], read=True)  # a store may come from another machine
        if problem is not None:
            raise DecodeError(
                f"commit {oid} on {session_branch(self.session_id)}: an Agents SDK item that is not a JSON "
                f"value: {problem}",
                oid,
            )
        self._items[oid] = record["item"]

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

    def _add(self, items: list[Any]) -> None:
        if not items:
            return
        for item in items:
            if not isinstance(item, dict):
                raise InvalidInput(f"an Agents SDK item is a dict, not {type(item).__name__}")
            problem = json_problem(item)
            if problem is not None:
                raise InvalidInput(f"an Agents SDK item that is not a JSON value: {problem}")
        with self._lock:
            attempts = 0
            while True:  # ends: at most MAX_APPEND_ATTEMPTS tries
                self._refresh()
                session = self._session()
                try:
                    with session.batch():
                        for item in items:
                            session.commit_content(
                                _content(item),
                                operation="append",
                                metadata={KEY: {"v": FORMAT, "item": item}},
                            )
                    return
                except ConcurrentUpdate:
                    # another writer (a second session object, another process) appended first: nothing of
                    # this call was written; the items are pure appends, so they are re-made on the new tip
                    attempts += 1
                    if attempts >= MAX_APPEND_ATTEMPTS:
                        raise
                    time.sleep(random.uniform(0, 0.002 * attempts))

    def _pop(self) -> Any:
        with self._lock:
            visible = self._refresh()
            if not visible:
                return None
            oid, item = visible[-1]
            self._session().annotate(oid, "skip", "Agents SDK pop_item")
            self._refresh()
            return item

    def _clear(self) -> None:
        with self._lock:
            name = session_branch(self.session_id)
            check_not_checked_out(self.tract, [name], f"Agents SDK session {self.session_id!r}")
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            with contextlib.suppress(BranchNotFound):  # never written, or deleted by another handle
                self.tract.delete_branch(name, force=True)
            self._tip, self._items, self._hidden = None, {}, set()

    # --- the SDK's protocol -------------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; with ``limit`` (or ``session_settings.limit``) the latest ones."""
        return await asyncio.to_thread(self._get, limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` (one commit each, one transaction for the call)."""
        await asyncio.to_thread(self._add, list(items))

    async def pop_item(self) -> TResponseInputItem | None:
        """Hide and return the latest item (an annotate commit: history stays append-only); None when empty."""
        return await asyncio.to_thread(self._pop)

    async def clear_session(self) -> None:
        """Delete the session's branch."""
        await asyncio.to_thread(self._clear)


def _content(item: dict[str, Any]) -> Blob:
    role, text = item.get("role"), _text_of(item)
    if role in ("user", "assistant") and text and item.get("type", "message") == "message":
        try:
            return content_objects({"type": "dialogue", "role": role, "text": text})[0]
        except ContentError:
            pass
    kind = item.get("type") or (f"{role} message" if isinstance(role, str) else "item")
    return content_objects({"type": "reasoning", "text": f"Agents SDK {kind}"})[0]
