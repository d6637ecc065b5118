"""The HTTP hub (``tractkv serve``): one store behind the protocol in :mod:`tractkv.sync.wire`.

Starlette on uvicorn with the pure-Python h11 protocol and the asyncio loop (the ``server`` extra). The
event loop only parses bytes; every LMDB read and write runs in the thread pool. A push is read as a
stream: limits are enforced while bytes arrive (413 before the body is buffered), objects are verified and
committed in batches as they come (so a dropped connection keeps what arrived whole), and ref updates are
applied last, by compare-and-swap, in one transaction each or one for all (``atomic``).

Hostile input gets a JSON answer, never a 5xx: every body is validated (``400 {"error", "message"}``),
unknown routes and methods answer JSON 404 / 405, and a 400 after a fully read body keeps the connection
alive. Every error answer has one shape, ``{"error": <name>, "message": str, "oid": id | null}`` (see
``docs/PROTOCOL.md``); an unexpected exception is logged here with its traceback and answered
``500 {"error": "InternalError"}`` with no detail (:class:`InternalErrors`). ``GET /healthz`` answers 200 at
once, without auth or a store read, for process managers. :func:`serve` adds the limits a hub on a network
needs (each a ``tractkv serve`` option), and the logging (``--log-level``; :class:`AccessLog`):

* ``header_timeout`` (default 10 s): a connection must deliver a complete request head within this many
  seconds of opening (or of the previous response); otherwise it is closed. uvicorn has no such timer.
* ``body_timeout`` (default 30 s): a request body must be complete within this many seconds of its head, in
  total (a client dripping a byte at a time is cut all the same), and may not pause that long either; else
  it counts as a disconnect (``400 BodyTimeout``) and the connection is closed after the answer. Only an
  authorized push gets longer (below): every body read before authentication (``/ui/login``) has this
  deadline, so unauthenticated clients cannot hold the connection cap for longer.
* ``max_connections`` (default 512): a connection over the cap gets ``503 {"error": "Overloaded"}`` and is
  closed; the listen backlog is :data:`BACKLOG`.
* ``push_memory`` (default 256 MiB): each push reading its objects takes a share of
  ``2 * BATCH_BYTES + max_object + max_decoded`` bytes (a batch of objects waiting to be verified, the object
  being received, the decoded objects of a batch not yet committed, and the one object being decoded: each
  received object's decoded size is estimated before it is decoded, :func:`tractkv.codec.decoded_size`,
  and one over ``max_decoded`` = ``decode_limit(max_object)`` (3 * max_object + 1 MiB) is refused
  ``413 ObjectTooLarge``),
  and at most ``push_memory`` // share pushes (at least one) read their objects at once; the others wait,
  reading nothing (TCP back-pressure), so pushes stay under ``push_memory`` decoded as well as read.
* ``push_slots_per_token`` (default half the slots, at least one; ``--push-slots-per-token``): one party
  (a token; on a hub without tokens, a client address) has at most this many pushes reading at once, so
  one party's slow or dripping pushes can never hold every slot (with the default 256 MiB: 3 slots, 1 per
  party). A push over its party's share waits like a push over the memory limit. With a single slot
  (``push_memory`` under two shares) one party can still hold it; behind a proxy, an open hub sees one
  address for every client.
* ``push_wait`` (default 30 s): a push waits at most this long for its share; then it is answered
  ``503 {"error": "Overloaded"}`` with ``Retry-After`` and the connection is closed.
* ``push_timeout`` (default 300 s): a push must deliver its whole body within this many seconds of getting
  its share, in total; then the objects that arrived whole are kept, its ref updates are not applied, and it
  is answered ``400 {"error": "BodyTimeout"}`` (pushing again sends only the rest). So slow or dripping
  pushes hold the shares for at most ``push_timeout`` (plus ``body_timeout`` for the push head). There is
  no minimum delivery rate: a rate floor would cut honest slow links, and the per-party share already keeps
  one party's drips from blocking anyone else (many parties, i.e. many tokens, are the operator's to grant).

``/v1/missing`` never lets a token learn more than it may read: for a token with the ``read`` (or
``admin``) scope it answers from the whole store; for a write-only token, an object counts as present only
when it is reachable from a branch the token may see (its own namespace), so the answer says nothing about
anyone else's objects (the pusher re-sends such objects; the hub stores them once). That answer is computed
from the token's reach alone, never from what the store holds: an id outside it costs the same whether the
hub holds it elsewhere or not (issue 29 item 16: 373 ms against 5.4 ms told them apart). The reach is kept
per scope between requests, keyed by its branch tips (:class:`_ReachCache`: walked again only from tips
that moved, in full when a branch went back or away; bounded in scopes and ids). A
write-only token's push is held to the same line: every link of an object it sends, and every ref value it
sets, must be an object sent in the same push or reachable from its branches; anything else is refused with
one answer, whether or not the hub holds that object (``422`` for a link, ``missing-objects`` for a ref); and
an object it sends that its branches do not reach is received as new (checked, counted in ``new_objects``,
stored once) whether the hub holds it or not.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import socket
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any
from urllib.parse import unquote_plus

import anyio
import attrs
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tractkv._version import __version__
from tractkv.errors import (
    AuthError,
    InvalidInput,
    RejectedObject,
    RequestTooLarge,
    TractError,
    TransferError,
)
from tractkv.ids import ObjectId
from tractkv.model import MAX_OBJECT_BYTES, StoredObject
from tractkv.store import Reader, Store
from tractkv.store.walk import iter_reachable

from .auth import OPEN, Grant, TokenTable
from .frames import MAX_REQUEST_BYTES, StreamDecoder, encode_stream
from .negotiate import iter_candidates
from .receive import DECODED_BATCH_BYTES, Receiver, apply_ref_updates, decode_limit, missing_ids
from .remote import RefResult, RefUpdate
from .wire import (
    HEAD_LENGTH,
    IDS_TYPE,
    MAX_HEAD_BYTES,
    MAX_IDS_BYTES,
    PROTOCOL,
    STREAM_TYPE,
    decode_push_head,
    error_body,
    ids_from_bytes,
    ids_to_bytes,
    parse_fetch_request,
    result_to_json,
)

BATCH_OBJECTS = 8192  # a push is verified and committed (one transaction) this many objects at a time
BATCH_BYTES = DECODED_BATCH_BYTES  # a push's batch: bytes waiting to be verified, and decoded objects held
FIRST_BATCH_OBJECTS = 1024  # the first batch of a push, smaller: the hub starts verifying sooner
DRAIN_BYTES = 64 * 1024 * 1024  # after refusing a push, discard this much of the rest before answering
HEADER_TIMEOUT = 10.0  # seconds for a complete request head (from connect, or from the previous response)
BODY_TIMEOUT = 30.0  # seconds a request body may deliver nothing while the hub waits for it
MAX_CONNECTIONS = 512  # open connections; one more is answered 503 and closed
BACKLOG = 1024  # the listen backlog (connections the kernel queues before the hub accepts them)
PUSH_MEMORY = 256 * 1024 * 1024  # push buffers across all concurrent pushes (see the module docstring)
SLOT_POLL = 0.02  # seconds between tries of a push waiting for a slot
PUSH_WAIT = 30.0  # seconds a push may wait for a slot; then 503 Overloaded
PUSH_TIMEOUT = 300.0  # seconds a push has, from getting its slot, to deliver its whole body
REACH_CACHE_ENTRIES = 32  # write-only scopes whose reach the hub keeps between requests (_ReachCache)
REACH_CACHE_IDS = 1 << 19  # ids kept in all those reaches (524,288: ~85 MB at ~160 bytes an id)
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")  # `--log-level`; info adds the access log

_log = logging.getLogger(__name__)
_access = logging.getLogger("tractkv.access")


class Hub:
    """The request handlers over one store; :func:`create_app` wires them into a Starlette app."""

    def __init__(
        self,
        store: Store,
        *,
        tokens: TokenTable | None = None,
        max_object: int = MAX_OBJECT_BYTES,
        max_request: int = MAX_REQUEST_BYTES,
        push_memory: int = PUSH_MEMORY,
        push_timeout: float = PUSH_TIMEOUT,
        push_wait: float = PUSH_WAIT,
        push_slots_per_token: int | None = None,
    ) -> None:
        self.store = store
        self.tokens = tokens
        self.max_object = max_object
        self.max_request = max_request
        self.push_memory = push_memory
        self.push_timeout = push_timeout
        self.push_wait = push_wait
        self.max_decoded = decode_limit(max_object)
        self.push_share = 2 * BATCH_BYTES + max_object + self.max_decoded
        self.push_slots = max(1, push_memory // self.push_share)
        # One party (a token; on an open hub, a client address) holds at most this many slots at once
        per_party = push_slots_per_token or max(1, self.push_slots // 2)
        self.push_slots_per_token = min(per_party, self.push_slots)
        # Slots held, in all and per party. A lock, not an asyncio primitive: one Hub may serve several
        # event loops (in-process transports). Entries leave the dict at zero: at most push_slots of them.
        self._slots_lock = threading.Lock()
        self._slots_held = 0
        self._slots_by_party: dict[str, int] = {}
        self._reaches = _ReachCache()

    def _take_slot(self, party: str) -> str | None:
        """Take a push slot for ``party``: None when taken, else why not (``"hub"``: every slot is held;
        ``"party"``: this party holds its share)."""
        with self._slots_lock:
            if self._slots_held >= self.push_slots:
                return "hub"
            held = self._slots_by_party.get(party, 0)
            if held >= self.push_slots_per_token:
                return "party"
            self._slots_held += 1
            self._slots_by_party[party] = held + 1
            return None

    def _give_slot(self, party: str) -> None:
        with self._slots_lock:
            self._slots_held -= 1
            left = self._slots_by_party[party] - 1
            if left:
                self._slots_by_party[party] = left
            else:
                del self._slots_by_party[party]

    def grant(self, request: Request) -> Grant:
        if self.tokens is None:
            return OPEN
        return self.tokens.authenticate(request.headers.get("authorization"))

    async def info(self, request: Request) -> Response:
        return JSONResponse({"tractkv": __version__, "protocol": PROTOCOL, "auth": self.tokens is not None})

    async def refs(self, request: Request) -> Response:
        grant = self.grant(request)
        prefix = request.query_params.get("prefix", "refs/heads/")
        if not prefix.startswith(("refs/heads/", "refs/tags/")):
            raise AuthError(403, "only branches (refs/heads/...) and tags (refs/tags/...) are served")

        def read() -> dict[str, str]:
            return {n: v for n, v in self.store.iter_refs(prefix) if grant.may_see(n)}

        limits = {"max_object": self.max_object, "max_request": self.max_request}
        return JSONResponse({"refs": await run_in_threadpool(read), "limits": limits})

    async def missing(self, request: Request) -> Response:
        grant = self.grant(request)
        if not (grant.can_read or grant.can_push):
            raise AuthError(403, "this token may neither read nor push")
        oids = ids_from_bytes(await _read_limited(request, MAX_IDS_BYTES))
        if grant.can_read:
            lacking = await run_in_threadpool(missing_ids, self.store, oids)
        else:
            lacking = await run_in_threadpool(self._missing_for_writer, grant, oids)
        return Response(ids_to_bytes([o for o in oids if o in lacking]), media_type=IDS_TYPE)

    def _missing_for_writer(self, grant: Grant, oids: list[ObjectId]) -> set[ObjectId]:
        """``oids`` not reachable from a branch ``grant`` may see: a write-only token learns nothing about
        objects outside its namespace. Computed from that reach only (never asking whether the store holds an
        id): the reach is found (:class:`_ReachCache`) the same way whatever ids are asked about."""
        reach = self._reaches.reach(self.store, grant)
        return {oid for oid in oids if oid not in reach}

    async def fetch(self, request: Request) -> Response:
        grant = self.grant(request)
        if not grant.can_read:
            raise AuthError(403, "fetching needs the read scope")
        wants, haves = parse_fetch_request(await _read_limited(request, MAX_IDS_BYTES * 3))
        # Streamed while the walk proceeds: the client verifies the first objects while the hub finds the
        # rest. The first chunk is made before answering, so a failure of the negotiation is a JSON error.
        chunks = encode_stream(iter_candidates(self.store, wants, haves))
        first = await run_in_threadpool(next, chunks)
        return StreamingResponse(_prepend(first, chunks), media_type=STREAM_TYPE)

    async def push(self, request: Request) -> Response:
        grant = self.grant(request)
        if not grant.can_push:
            raise AuthError(403, "pushing needs a write:<branch glob> or admin scope")
        _check_declared_length(request, self.max_request)
        body = _Body(request.stream(), self.max_request)
        try:
            (length,) = HEAD_LENGTH.unpack(await body.read_exact(HEAD_LENGTH.size))
            if length > MAX_HEAD_BYTES:
                raise TransferError(f"push head of {length} bytes is over the {MAX_HEAD_BYTES}-byte limit")
            updates, atomic = decode_push_head(await body.read_exact(length))
        except TransferError:
            if await body.drain(DRAIN_BYTES):
                _body_read(request)  # the connection may stay alive
            raise
        forbidden = [u.name for u in updates if not grant.may_write(u.name)]
        if forbidden:
            raise AuthError(403, f"this token may not write {', '.join(forbidden)}")
        # An authorized push: its body may take longer than the generic body deadline (BodyTimeout)
        extend_body_deadline(request.scope, self.push_wait + self.push_timeout + 1.0)
        # Polled (see _take_slot). A party over its share waits like any push, so one token's pushes in a
        # burst queue up rather than fail; but it can never hold the slots another party needs.
        party = grant.who or f"client {request.client.host if request.client else '-'}"
        give_up = time.monotonic() + self.push_wait
        while (busy := self._take_slot(party)) is not None:
            if time.monotonic() >= give_up:
                return _push_busy(busy, self.push_slots, self.push_slots_per_token, self.push_wait)
            await anyio.sleep(SLOT_POLL)
        try:
            body.deadline = time.monotonic() + self.push_timeout
            return await self._receive_push(request, grant, body, updates, atomic)
        finally:
            self._give_slot(party)

    async def _receive_push(
        self, request: Request, grant: Grant, body: _Body, updates: list[RefUpdate], atomic: bool
    ) -> Response:
        decoder = StreamDecoder(max_object=self.max_object, max_request=self.max_request)
        decoder.received = body.consumed
        pending: list[tuple[ObjectId, bytes]] = []
        pending_bytes = 0
        totals = [0, 0, 0]
        scope = None if grant.can_read else _WriterScope(lambda: self._reaches.reach(self.store, grant))
        # One transaction per flush: a flush holds up to BATCH_OBJECTS plus the objects of one more chunk
        receiver = Receiver(
            self.store,
            admit=scope.admit if scope is not None else None,
            held=scope.held if scope is not None else None,
            batch_objects=2 * BATCH_OBJECTS,
            max_decoded=self.max_decoded,
            max_held=BATCH_BYTES,
        )

        def receive(batch: list[tuple[ObjectId, bytes]]) -> None:
            stats = receiver.receive(batch)
            totals[0] += stats.objects
            totals[1] += stats.new_objects
            totals[2] += stats.bytes

        # The first flush comes early, so verifying starts while the pusher is still sending the rest
        threshold = FIRST_BATCH_OBJECTS

        async def flush() -> None:
            nonlocal pending, pending_bytes, threshold
            batch, pending, pending_bytes, threshold = pending, [], 0, BATCH_OBJECTS
            await run_in_threadpool(receive, batch)

        try:
            try:
                async for chunk in body.rest():
                    for pair in decoder.feed(chunk):
                        pending.append(pair)
                        pending_bytes += len(pair[1])
                    if len(pending) >= threshold or pending_bytes >= BATCH_BYTES:
                        await flush()
                decoder.close()
            except TransferError:
                await flush()  # keep every object that arrived whole (each is verified before it is stored)
                raise
        except TransferError:
            # so the client reads our answer instead of a connection reset
            if await body.drain(DRAIN_BYTES):
                _body_read(request)
            raise
        except ClientDisconnect:
            await flush()
            # nobody is listening (or the body timed out); the ref updates are not applied
            return Response(status_code=400, headers={"Connection": "close"})
        except PushTimedOut:
            await flush()  # keep every object that arrived whole; the ref updates are not applied
            message = (
                f"the push did not arrive within {self.push_timeout:g} s (push timeout); the objects that "
                "arrived whole are kept: push again to send the rest"
            )
            body_ = {"error": "BodyTimeout", "message": message, "oid": None}
            return JSONResponse(body_, status_code=400, headers={"Connection": "close"})
        _body_read(request)
        await flush()
        results = await run_in_threadpool(self._apply_updates, grant, scope, updates, atomic, receiver)
        return JSONResponse(
            {
                "results": [result_to_json(r) for r in results],
                "objects": totals[0],
                "new_objects": totals[1],
                "bytes": totals[2],
            }
        )

    def _apply_updates(
        self,
        grant: Grant,
        scope: _WriterScope | None,
        updates: list[RefUpdate],
        atomic: bool,
        receiver: Receiver,
    ) -> list[RefResult]:
        """Apply a push's ref updates; a write-only token's new values must be objects it sent or reaches."""
        refused: dict[str, RefResult] = {}
        if scope is not None:
            for u in updates:
                if u.new is not None and not scope.reaches(u.new):
                    refused[u.name] = RefResult(u.name, False, "missing-objects", f"{u.new} is not here")
        if not refused:
            return apply_ref_updates(
                self.store, updates, atomic=atomic, may_write=grant.may_write, received=receiver
            )
        if atomic:
            other = RefResult("", False, "atomic", "another ref was refused")
            return [refused.get(u.name) or attrs.evolve(other, name=u.name) for u in updates]
        rest = [u for u in updates if u.name not in refused]
        applied = iter(
            apply_ref_updates(self.store, rest, atomic=False, may_write=grant.may_write, received=receiver)
            if rest
            else []
        )
        return [refused[u.name] if u.name in refused else next(applied) for u in updates]


class _WriterScope:
    """What a write-only token's push may refer to: the objects it sent in this push and the objects the
    branches it may see reach (``find_reach``, asked once, on first need). Nothing else, whether the hub holds
    it or not, so a push cannot be used to learn what exists outside the token's namespace."""

    def __init__(self, find_reach: Callable[[], AbstractSet[ObjectId]]) -> None:
        self.find_reach = find_reach
        self.sent: set[ObjectId] = set()
        self._reached: AbstractSet[ObjectId] | None = None

    def reaches(self, oid: ObjectId) -> bool:
        return oid in self.sent or oid in self._reach()

    def held(self, oids: Sequence[ObjectId]) -> set[ObjectId]:
        """The ids the token's branches reach: what its push counts as already here (the receiver's
        ``held``). Asked for the first objects of every push, so the walk never depends on the store."""
        reach = self._reach()
        return {oid for oid in oids if oid in reach}

    def _reach(self) -> AbstractSet[ObjectId]:
        if self._reached is None:
            self._reached = self.find_reach()
        return self._reached

    def admit(self, oid: ObjectId, obj: StoredObject) -> None:
        """Refuse (:class:`RejectedObject`) a verified object that links outside the scope; the receiver calls
        this for each object before storing it, so the objects before a refused one are kept."""
        for link in obj.iter_links():
            if not self.reaches(link):
                reason = f"links to {link}, which this push did not send and your branches do not reach"
                raise RejectedObject(reason, oid)
        self.sent.add(oid)


class _ReachCache:
    """What the branches of each write-only scope reach, kept between requests, so a confined token's
    ``/v1/missing`` and pushes do not walk its whole namespace every time (issue 29: ~0.4 s a request at 20k
    commits). An entry is keyed by the grant's scopes and remembers the branch tips it was computed from; every
    use reads the scope's current tips in a snapshot (so a ref another process or request moved is never
    missed) and then:

    * tips unchanged: the cached reach, no walk;
    * tips moved: walk from the new tips, stopping at the cached reach. When every old tip is still reached
      (it is a new tip, or the walk ran into it), the old reach lies inside the new one, and the new reach is
      the old one plus what the walk found: exactly what the new tips reach. A branch moved forward or a new
      branch costs only the objects it added;
    * otherwise (a branch deleted, or reset back to an older commit): the old reach may hold objects no branch
      reaches any more, so it is dropped and the reach walked again in full. A reach only ever equals what the
      scope's current branches reach, never a union with what they used to.

    Every answer depends on the scope's own branches only (which tips, which objects they reach), never on
    what else the store holds. Bounded: at most :data:`REACH_CACHE_ENTRIES` scopes and
    :data:`REACH_CACHE_IDS` ids in all (least recently used dropped first; a reach larger than the whole
    bound is not kept, and is walked on each use as before). Sets once published are never changed (an
    extension builds a new one), so threads share them without a lock."""

    def __init__(self, entries: int = REACH_CACHE_ENTRIES, ids: int = REACH_CACHE_IDS) -> None:
        self.max_entries = entries
        self.max_ids = ids
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, ...], tuple[frozenset[ObjectId], frozenset[ObjectId]]] = (
            OrderedDict()
        )
        self._ids = 0

    def reach(self, store: Store, grant: Grant) -> AbstractSet[ObjectId]:
        key = grant.scopes
        with store.snapshot() as snap:
            tips = frozenset(_visible_tips(snap, grant))
            with self._lock:
                cached = self._entries.get(key)
                if cached is not None:
                    self._entries.move_to_end(key)
            if cached is not None and cached[0] == tips:
                return cached[1]
            reach = _extend_reach(snap, cached, tips) if cached is not None else None
            if reach is None:
                reach = frozenset(iter_reachable(snap, tips))
                _log.debug("confined reach: walked %d objects from %d tips (all)", len(reach), len(tips))
        self._keep(key, tips, reach)
        return reach

    def _keep(self, key: tuple[str, ...], tips: frozenset[ObjectId], reach: frozenset[ObjectId]) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._ids -= len(old[1])
            if len(reach) > self.max_ids:
                return
            self._entries[key] = (tips, reach)
            self._ids += len(reach)
            while self._ids > self.max_ids or len(self._entries) > self.max_entries:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._ids -= len(dropped)


class _Hits:
    """A walk's ``stop`` set that notes which of its ids the walk ran into."""

    def __init__(self, known: AbstractSet[ObjectId]) -> None:
        self.known = known
        self.hit: set[ObjectId] = set()

    def __contains__(self, oid: object) -> bool:
        if oid in self.known:
            self.hit.add(oid)  # type: ignore[arg-type]  # an ObjectId: known holds nothing else
            return True
        return False


def _extend_reach(
    reader: Reader, cached: tuple[frozenset[ObjectId], frozenset[ObjectId]], tips: frozenset[ObjectId]
) -> frozenset[ObjectId] | None:
    """What ``tips`` reach, from the reach of the old tips, walking only what lies outside it; None when an
    old tip is not reached from ``tips`` (the reach may have shrunk: the caller walks it all again)."""
    old_tips, old_reach = cached
    stop = _Hits(old_reach)
    added = list(iter_reachable(reader, tips, stop=stop))
    if not old_tips - tips <= stop.hit:
        return None
    _log.debug("confined reach: walked %d objects from %d tips (extended)", len(added), len(tips))
    return old_reach.union(added) if added else old_reach


def _prepend(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def _visible_tips(reader: Reader, grant: Grant) -> list[ObjectId]:
    return [
        ObjectId(v)
        for prefix in ("refs/heads/", "refs/tags/")
        for n, v in reader.iter_refs(prefix)
        if grant.may_see(n)
    ]


class PushTimedOut(Exception):
    """Internal: a push body was not complete by its deadline (:attr:`Hub.push_timeout`)."""


def _push_busy(why: str, slots: int, per_token: int, waited: float) -> Response:
    if why == "party":
        held = f"your token (or address) holds its share of the push slots ({per_token} of {slots})"
    else:
        held = f"the hub is receiving {slots} push(es) at once, its limit,"
    message = f"{held} and none ended within {waited:g} s; retry later"
    body = {"error": "Overloaded", "message": message, "oid": None}
    headers = {"Retry-After": "5", "Connection": "close"}  # the push body is unread
    return JSONResponse(body, status_code=503, headers=headers)


class _Body:
    """A request body read incrementally, with a byte limit checked as it arrives and, once ``deadline`` (a
    ``time.monotonic()`` value) is set, a total deadline: a read after it, or one still waiting at it,
    raises :class:`PushTimedOut`, however steadily the bytes drip."""

    def __init__(self, stream: AsyncIterator[bytes], limit: int) -> None:
        self._stream = stream
        self._buf = b""
        self._limit = limit
        self.consumed = 0
        self.deadline: float | None = None

    async def read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = await self._next()
            if chunk is None:
                raise TransferError("request body ended early")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        self.consumed += n
        return out

    async def rest(self) -> AsyncIterator[bytes]:
        if self._buf:
            yield self._buf
            self._buf = b""
        while (chunk := await self._next()) is not None:
            yield chunk

    async def drain(self, limit: int) -> bool:
        """Read and discard up to ``limit`` more bytes (never buffered); stop quietly at the end or a
        disconnect. True when the body was read to its end."""
        dropped = 0
        try:
            while (chunk := await self._anext()) is not None:
                dropped += len(chunk)
                if dropped > limit:
                    return False
        except (ClientDisconnect, PushTimedOut):
            return False
        return True

    async def _anext(self) -> bytes | None:
        if self.deadline is None:
            try:
                return await self._stream.__anext__()
            except StopAsyncIteration:
                return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise PushTimedOut
        with anyio.move_on_after(left):
            try:
                return await self._stream.__anext__()
            except StopAsyncIteration:
                return None
        raise PushTimedOut

    async def _next(self) -> bytes | None:
        chunk = await self._anext()
        if chunk is None:
            return None
        if self.consumed + len(self._buf) + len(chunk) > self._limit:
            raise RequestTooLarge(f"request is over the {self._limit}-byte limit")
        return chunk


def _check_declared_length(request: Request, limit: int) -> None:
    """Refuse at once (413, before reading a byte) a body whose declared Content-Length is over ``limit``."""
    declared = request.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise RequestTooLarge(
            f"request of {int(declared)} bytes (Content-Length) is over the {limit}-byte limit"
        )


async def _read_limited(request: Request, limit: int) -> bytes:
    _check_declared_length(request, limit)
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge(f"request is over the {limit}-byte limit")
        parts.append(chunk)
    _body_read(request)
    return b"".join(parts)


def _body_read(request: Request) -> None:
    """Note that the whole request body was read: an error answer may keep the connection alive."""
    request.scope.setdefault("extensions", {})["tractkv.body_read"] = True


def _body_unread(request: Request) -> bool:
    """Bytes of this request's body may still be on the wire (so an error answer must close)."""
    if request.scope.get("extensions", {}).get("tractkv.body_read"):
        return False
    headers = request.headers
    length = headers.get("content-length")
    return "transfer-encoding" in headers or (length is not None and length.strip() not in ("", "0"))


def _error_response(request: Request, exc: Exception) -> Response:
    if isinstance(exc, (AuthError, TransferError)):
        status = exc.status
    elif isinstance(exc, InvalidInput):
        status = 400
    else:
        status = 500
    if status >= 500:
        _log.error("%s %s failed", request.method, loggable_target(request.scope), exc_info=exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    if _body_unread(request):
        # An early answer (413 / 403 mid-upload) closes the connection: the rest of the body is unread.
        headers["Connection"] = "close"
    return JSONResponse(error_body(exc), status_code=status, headers=headers)


_HTTP_ERRORS = {404: "NotFound", 405: "MethodNotAllowed"}


def _http_error_response(request: Request, exc: Exception) -> Response:
    """Routing errors (no such route, method not allowed) as JSON, like every other hub error."""
    assert isinstance(exc, HTTPException)
    name = _HTTP_ERRORS.get(exc.status_code, "HTTPError")
    message = f"{request.method} {request.url.path}: {exc.detail}"
    headers = dict(exc.headers or {})
    if _body_unread(request):
        headers["Connection"] = "close"
    body = {"error": name, "message": message, "oid": None}
    return JSONResponse(body, status_code=exc.status_code, headers=headers)


def _disconnected(request: Request, exc: Exception) -> Response:
    """The client went away (nobody is listening) or its body timed out before the request was read: a JSON
    400 that closes the connection."""
    why = request.scope.get("extensions", {}).get(BODY_TIMED_OUT)
    if why is not None:
        body = {"error": "BodyTimeout", "message": str(why), "oid": None}
    else:
        body = {
            "error": "ClientDisconnect",
            "message": "the client went away before its request was read",
            "oid": None,
        }
    return JSONResponse(body, status_code=400, headers={"Connection": "close"})


INTERNAL_ERROR = {"error": "InternalError", "message": "internal error (the server logged it)", "oid": None}


def internal_error_response(scope: Scope) -> Response:
    """The answer to an unexpected exception: 500 with no detail (the traceback is in the server's log)."""
    return JSONResponse(INTERNAL_ERROR, status_code=500, headers={"Connection": "close"})


class InternalErrors:
    """ASGI middleware: an exception no handler turned into an answer is logged with its traceback (logger
    ``tractkv.sync.server``) and answered by ``respond`` (default :func:`internal_error_response`), never
    with the exception's text. A response already under way cannot change: the connection is closed. The
    exception is kept in ``scope["extensions"]["tractkv.internal_error"]`` (in-process tests raise it)."""

    def __init__(self, app: ASGIApp, respond: Callable[[Scope], Response] = internal_error_response) -> None:
        self.app = app
        self.respond = respond

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watching_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watching_send)
        except Exception as exc:
            _log.exception("%s %s failed", scope.get("method"), loggable_target(scope))
            scope.setdefault("extensions", {})["tractkv.internal_error"] = exc
            if not started:
                await self.respond(scope)(scope, receive, send)


async def healthz(request: Request) -> Response:
    """``GET /healthz``: 200 while the process serves requests. No auth, no store read: cheap enough for a
    process manager to poll every second."""
    return JSONResponse({"status": "ok", "tractkv": __version__, "protocol": PROTOCOL})


def health_routes() -> list[Route]:
    """``/healthz`` (every app ``tractkv serve`` and ``tractkv view`` run has it)."""
    return [Route("/healthz", healthz, methods=["GET"])]


def hub_routes(hub: Hub) -> list[Route]:
    """The sync protocol's routes (under ``/v1/``)."""
    return [
        Route("/v1/info", hub.info, methods=["GET"]),
        Route("/v1/refs", hub.refs, methods=["GET"]),
        Route("/v1/missing", hub.missing, methods=["POST"]),
        Route("/v1/fetch", hub.fetch, methods=["POST"]),
        Route("/v1/push", hub.push, methods=["POST"]),
    ]


ERROR_HANDLERS: dict[Any, Callable[[Request, Exception], Response]] = {
    TractError: _error_response,
    HTTPException: _http_error_response,
    ClientDisconnect: _disconnected,
}


def create_app(
    store: Store,
    *,
    tokens: TokenTable | None = None,
    max_object: int = MAX_OBJECT_BYTES,
    max_request: int = MAX_REQUEST_BYTES,
    push_memory: int = PUSH_MEMORY,
    push_timeout: float = PUSH_TIMEOUT,
    push_wait: float = PUSH_WAIT,
    push_slots_per_token: int | None = None,
) -> Starlette:
    """A Starlette app serving ``store`` (which the caller opens and closes): the sync protocol only. The
    ``tractkv serve`` command adds the web viewer beside it (:func:`tractkv.view.app.create_app`)."""
    hub = Hub(
        store,
        tokens=tokens,
        max_object=max_object,
        max_request=max_request,
        push_memory=push_memory,
        push_timeout=push_timeout,
        push_wait=push_wait,
        push_slots_per_token=push_slots_per_token,
    )
    return Starlette(
        routes=health_routes() + hub_routes(hub),
        exception_handlers=ERROR_HANDLERS,
        middleware=[Middleware(InternalErrors)],
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int, *, backlog: int = BACKLOG) -> socket.socket:
    """A listening socket (port 0 picks a free one; read it back from ``getsockname``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit TCP_NODELAY (Linux). Without it, a response written as head + body
    # waits for the client's delayed ACK: ~40 ms per request on a kept-alive connection.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


#: The scope extension BodyTimeout sets (to the answer's message) when a request body timed out.
BODY_TIMED_OUT = "tractkv.body_timed_out"
#: The scope extension holding a request's body deadline (a :class:`_Deadline`; see :func:`extend_body_deadline`).
BODY_DEADLINE = "tractkv.body_deadline"


@attrs.define
class _Deadline:
    at: float  # anyio.current_time() by which the body must be complete


def extend_body_deadline(scope: Scope, seconds: float) -> None:
    """Give this request's body ``seconds`` from now (never less than it had): for a handler that has
    authorized a request whose body may rightly take longer (a push). No-op without :class:`BodyTimeout`."""
    deadline = scope.get("extensions", {}).get(BODY_DEADLINE)
    if isinstance(deadline, _Deadline):
        deadline.at = max(deadline.at, anyio.current_time() + seconds)


class BodyTimeout:
    """ASGI middleware: a request body must be complete within ``timeout`` seconds of the request head, in
    total, and may not deliver nothing for ``timeout`` seconds; otherwise the wait reads as a disconnect
    (``http.disconnect``) and the answer closes the connection. A total, not a per-read timer: a client
    dripping one byte at a time is cut at the same time as one that sends nothing. A handler that has
    authorized a longer body extends the total (:func:`extend_body_deadline`; the pause limit stays). Only
    the body counts: afterwards ``receive()`` is how a streaming response listens for a real disconnect (a
    long fetch, the viewer's event stream), which must not be cut after ``timeout``."""

    def __init__(self, app: ASGIApp, timeout: float = BODY_TIMEOUT) -> None:
        self.app = app
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        expired = False
        body_done = False
        start = anyio.current_time()
        deadline = _Deadline(start + self.timeout)
        scope.setdefault("extensions", {})[BODY_DEADLINE] = deadline

        async def timed_receive() -> Message:
            nonlocal expired, body_done
            if expired:
                return {"type": "http.disconnect"}
            if body_done:
                return await receive()  # waiting for a disconnect while the answer streams: no timer
            wait = min(self.timeout, deadline.at - anyio.current_time())
            message: Message | None = None
            # Past the deadline a message already waiting is still taken (a bodiless request whose app first
            # listens late, for a disconnect); one the client has yet to send is not.
            with anyio.move_on_after(max(wait, 0.0)):
                message = await receive()
            if message is None:
                expired = True
                if wait < self.timeout:
                    total = deadline.at - start
                    why = f"the request body was not complete within {total:.3g} s (body timeout)"
                else:
                    why = f"the request body sent nothing for {self.timeout:g} s (body timeout)"
                scope.setdefault("extensions", {})[BODY_TIMED_OUT] = why
                return {"type": "http.disconnect"}
            if message["type"] == "http.request" and not message.get("more_body", False):
                body_done = True
            return message

        async def closing_send(message: Message) -> None:
            if expired and message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
                message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        await self.app(scope, timed_receive, closing_send)


#: Query parameters whose values an access log line never shows (matched as substrings of the name).
SECRET_PARAMS = (
    "token",
    "secret",
    "password",
    "passwd",
    "key",
    "auth",
    "sig",
    "credential",
    "session",
    "code",
)


def loggable_target(scope: Scope) -> str:
    """The request's path and query as a log shows them: undecoded (so no newline can be forged into a log
    line), anything unprintable escaped, and the value of any query parameter whose name looks like a secret
    replaced by ``REDACTED``. Headers, cookies and bodies (where tokens travel) are never part of it."""
    raw = scope.get("raw_path") or scope.get("path", "").encode("utf-8", "surrogateescape")
    path = _printable(raw)
    query = scope.get("query_string") or b""
    if not query:
        return path
    parts = []
    for part in query.split(b"&"):
        name, eq, _ = part.partition(b"=")
        lowered = unquote_plus(name.decode("latin-1")).lower()
        secret = bool(eq) and any(word in lowered for word in SECRET_PARAMS)
        parts.append(_printable(name) + "=REDACTED" if secret else _printable(part))
    return path + "?" + "&".join(parts)


def _printable(raw: bytes) -> str:
    text = raw.decode("ascii", "backslashreplace")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


class AccessLog:
    """ASGI middleware: one line per request on the ``tractkv.access`` logger at INFO: client address,
    method, path and query (:func:`loggable_target`: secrets in the query redacted), status (``-`` when no
    answer was sent) and duration until the answer was complete. Costs nothing when INFO is off."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _access.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: list[int] = []

        async def noting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, noting_send)
        finally:
            client = scope.get("client")
            _access.info(
                "%s %s %s %s %.1fms",
                client[0] if client else "-",
                scope.get("method", "-"),
                loggable_target(scope),
                status[0] if status else "-",
                (time.perf_counter() - started) * 1000,
            )


class _Formatter(logging.Formatter):
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))  # UTC


def configure_logging(level: str) -> None:
    """Send the ``tractkv`` loggers (errors, the access log at INFO) to stderr at ``level``, one line each:
    ``2026-01-31T12:00:00Z INFO tractkv.access 127.0.0.1 GET /v1/info 200 0.8ms``. Idempotent."""
    if level not in LOG_LEVELS:
        raise InvalidInput(f"log level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
    logger = logging.getLogger("tractkv")
    for handler in list(logger.handlers):
        if getattr(handler, "_tractkv", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler._tractkv = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False


_OVERLOADED = json.dumps(
    {"error": "Overloaded", "message": "the hub has too many open connections; retry later", "oid": None}
).encode()


async def _overloaded(scope: Scope, receive: Receive, send: Send) -> None:
    """The answer on a connection over the cap: 503 JSON, then the connection closes."""
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(_OVERLOADED)).encode()),
        (b"connection", b"close"),
        (b"retry-after", b"1"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": _OVERLOADED, "more_body": False})


def _protocol_class(header_timeout: float, max_connections: int) -> type[Any]:
    """uvicorn's h11 protocol with a request-head timeout and a connection cap (uvicorn has neither)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HubProtocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _head_cycle: object = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                self.app = AccessLog(_overloaded)  # every request on this connection: 503, then close
            self._arm_head_timer()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._head_timer is not None and self.cycle is not self._head_cycle:
                self._cancel_head_timer()  # a request head arrived

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

        def _arm_head_timer(self) -> None:
            self._cancel_head_timer()
            self._head_cycle = self.cycle
            self._head_timer = self.loop.call_later(header_timeout, self._head_expired)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_expired(self) -> None:
            self._head_timer = None
            waiting = self.cycle is self._head_cycle and (self.cycle is None or self.cycle.response_complete)
            if waiting and not self.transport.is_closing():
                self.transport.close()

    return HubProtocol


def serve(
    app: ASGIApp,
    sock: socket.socket,
    *,
    on_exit: Callable[[], None] | None = None,
    log_level: str = "warning",
    header_timeout: float = HEADER_TIMEOUT,
    body_timeout: float = BODY_TIMEOUT,
    max_connections: int = MAX_CONNECTIONS,
) -> None:
    """Serve ``app`` on ``sock`` until interrupted: SIGINT or SIGTERM finish the requests in flight and
    return normally. ``on_exit`` runs as soon as the signal arrives (it ends long-lived responses, such as
    the viewer's event streams, which the graceful shutdown would otherwise wait for). The limits are
    described in the module docstring. ``log_level`` (one of :data:`LOG_LEVELS`) is for tractkv's own log
    on stderr (:func:`configure_logging`): ``info`` adds one access line per request (:class:`AccessLog`).
    uvicorn's own log stays at ``warning`` or above (its start-up lines repeat what the CLI prints),
    except at ``debug``."""
    import signal

    import uvicorn

    configure_logging(log_level)
    config = uvicorn.Config(
        AccessLog(BodyTimeout(app, body_timeout)),
        http=_protocol_class(header_timeout, max_connections),
        loop="asyncio",
        lifespan="off",
        log_level="warning" if log_level == "info" else log_level,
        access_log=False,
        timeout_graceful_shutdown=5,  # a safety net: on_exit should have ended every long response already
    )

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if on_exit is not None:
                on_exit()
            super().handle_exit(sig, frame)

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # uvicorn shuts down gracefully on either signal, then re-raises it with the previous handler in place
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        _Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
