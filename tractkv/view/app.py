"""The web viewer's HTTP side: routes under ``/ui/``, sign-in, the live change feed, and the app that
``tractkv serve`` (sync protocol + viewer) and ``tractkv view`` (viewer only) run.

Auth is the hub's: without a tokens file everything is open (loopback only, as for sync); with one, a page
needs a token with the ``read`` scope, sent as ``Authorization: Bearer`` or, for a browser, signed in once at
``/ui/login`` (an ``HttpOnly``, ``SameSite=Strict`` cookie holding the token).

Live updates: ``/ui/events`` is a server-sent event stream. One poll loop per app (running only while a
browser listens) reads the store's branches and its usage table every ``poll_interval`` seconds and sends
``change`` events naming the branches that moved and whether tool executions started or finished. The store
is the event source, not the in-process :class:`~tractkv.toolkit.events.EventBus`, because the agent writing
the store usually runs in another process (or pushes from another machine); a tool's pending row is written
before its handler runs, so a tool start shows while it runs.

Errors: pages answer an HTML error page; the JSON endpoints (``/ui/commit/<rev>/request.json``, and every
route outside ``/ui/``) answer the hub's JSON error shape (``docs/PROTOCOL.md``), for routing errors and
unexpected exceptions too.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from tractkv.engine.content import raster_type
from tractkv.engine.history import HEADS, read_head, resolve_revision
from tractkv.errors import AuthError, InvalidInput, ObjectNotFound, RefNotFound, TractError, UnknownRevision
from tractkv.ids import ObjectId, is_object_id
from tractkv.model import MAX_OBJECT_BYTES, Blob
from tractkv.store import Store
from tractkv.sync.auth import OPEN, Grant, TokenTable
from tractkv.sync.frames import MAX_REQUEST_BYTES
from tractkv.sync.server import (
    ERROR_HANDLERS,
    PUSH_TIMEOUT,
    PUSH_WAIT,
    Hub,
    InternalErrors,
    health_routes,
    hub_routes,
    internal_error_response,
)
from tractkv.sync.wire import error_body

from . import pages, search_page
from .html import Markup, page
from .inspector import PAGE_COMMITS, PAGE_GROUPS, Inspector

_log = logging.getLogger(__name__)

COOKIE = "tractkv_token"
POLL_INTERVAL = 0.25  # seconds between two looks at the store while a browser listens
KEEPALIVE = 15.0  # seconds of silence after which an event stream sends a comment
QUEUE_EVENTS = 64  # changes buffered per listener; a slower one gets one "resync" instead
MAX_FORM_BYTES = 4096

SECURITY_HEADERS = {
    # No inline script or style anywhere, so even a markup bug cannot run text from the store.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
STATIC = {"app.css": "text/css; charset=utf-8", "app.js": "text/javascript; charset=utf-8"}

PageResult = tuple[str, Markup, str | None, bool]  # title, body, the branch it is about, live
Snapshot = tuple[dict[str, str], tuple[tuple[bytes, bytes], ...]]


class ChangeFeed:
    """Watches a store for moved branches and tool-usage changes, for every live page at once."""

    def __init__(self, inspector: Inspector, interval: float = POLL_INTERVAL) -> None:
        self.inspector = inspector
        self.interval = interval
        self._listeners: set[asyncio.Queue[dict[str, Any] | None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last: Snapshot | None = None
        self._starting = asyncio.Lock()
        self.closed = False

    def version(self) -> str:
        """A short digest of what the feed watches, now (a page records it; see :meth:`subscribe`)."""
        return _fingerprint(self._snapshot())

    async def subscribe(self, since: str | None = None) -> asyncio.Queue[dict[str, Any] | None]:
        """A queue of changes from now on. With ``since`` (the :meth:`version` a page was rendered at) a
        change made between rendering and subscribing is not lost: the queue starts with a resync."""
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=QUEUE_EVENTS)
        if self.closed:
            queue.put_nowait(None)
            return queue
        async with self._starting:
            if self._task is None or self._task.done():
                self._last = await run_in_threadpool(self._snapshot)  # the baseline changes are found against
                self._loop = asyncio.get_running_loop()
                self._listeners.add(queue)
                self._task = asyncio.create_task(self._run())
            else:
                self._listeners.add(queue)
        if since is not None and since != await run_in_threadpool(self.version):
            _put_latest(queue, {"resync": True})
        return queue

    def unsubscribe(self, queue: asyncio.Queue[dict[str, Any] | None]) -> None:
        self._listeners.discard(queue)

    def close(self) -> None:
        """End every stream (thread- and signal-safe: the work is scheduled on the feed's loop)."""
        self.closed = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._close_listeners)

    def _close_listeners(self) -> None:
        for queue in list(self._listeners):
            _put_latest(queue, None)
        self._listeners.clear()

    def _snapshot(self) -> Snapshot:
        return self.inspector.refs(), self.inspector.usage_fingerprint()

    async def _run(self) -> None:
        while self._listeners and not self.closed:
            await asyncio.sleep(self.interval)
            now = await run_in_threadpool(self._snapshot)
            change = _changes(self._last, now) if self._last is not None else {"resync": True}
            self._last = now
            if change:
                for queue in list(self._listeners):
                    _put_latest(queue, change)


def _fingerprint(snapshot: Snapshot) -> str:
    digest = hashlib.sha256()
    for name, value in sorted(snapshot[0].items()):
        digest.update(b"r\0%s\0%s\0" % (name.encode(), value.encode()))
    for key, row in snapshot[1]:
        digest.update(b"u\0%d:%s%d:%s" % (len(key), key, len(row), row))
    return digest.hexdigest()[:24]


def _put_latest(queue: asyncio.Queue[dict[str, Any] | None], item: dict[str, Any] | None) -> None:
    """Queue ``item``; a full queue (a listener that stopped reading) is replaced by one resync."""
    try:
        queue.put_nowait(item)
    except asyncio.QueueFull:
        while not queue.empty():
            queue.get_nowait()
        queue.put_nowait({"resync": True} if item is not None else None)


def _changes(old: Snapshot, new: Snapshot) -> dict[str, Any]:
    refs = {r: new[0].get(r) for r in sorted(old[0].keys() | new[0].keys()) if old[0].get(r) != new[0].get(r)}
    out: dict[str, Any] = {}
    if refs:
        out["refs"] = refs
    if old[1] != new[1]:
        out["usage"] = True
    return out


class _FormRefused(Exception):
    """A page's form given something refused: the page (``body``, the form filled in with the message) is
    answered with the error's status instead of a bare error page."""

    def __init__(self, error: TractError, title: str, body: Markup, ref: str | None) -> None:
        super().__init__(str(error))
        self.error, self.title, self.body, self.ref = error, title, body, ref


class Viewer:
    """The viewer's request handlers over one store."""

    def __init__(
        self, store: Store, *, tokens: TokenTable | None = None, poll_interval: float = POLL_INTERVAL
    ):
        self.store = store
        self.tokens = tokens
        self.inspector = Inspector(store)
        self.searcher = search_page.Searcher(store)
        self.feed = ChangeFeed(self.inspector, poll_interval)
        self._static = _static_files()

    def grant(self, request: Request) -> Grant:
        if self.tokens is None:
            return OPEN
        header = request.headers.get("authorization")
        if not header and request.cookies.get(COOKIE):
            header = f"Bearer {request.cookies[COOKIE]}"
        grant = self.tokens.authenticate(header)
        if not grant.can_read:
            raise AuthError(403, "the viewer needs a token with the read scope")
        return grant

    def routes(self) -> list[Route]:
        return [
            Route("/", lambda request: RedirectResponse("/ui/", status_code=302), methods=["GET"]),
            Route("/ui", lambda request: RedirectResponse("/ui/", status_code=302), methods=["GET"]),
            Route("/favicon.ico", lambda request: Response(status_code=204), methods=["GET"]),
            Route("/ui/", self._page(self.branches), methods=["GET"]),
            Route("/ui/log", self._page(self.log), methods=["GET"]),
            # any revision, slashes included (refs/heads/x); the JSON route first, as the page's matches it too
            Route("/ui/commit/{rev:path}/request.json", self.request_json, methods=["GET"]),
            Route("/ui/commit/{rev:path}", self._page(self.commit), methods=["GET"]),
            Route("/ui/media/{oid}", self.media, methods=["GET"]),
            Route("/ui/usage", self._page(self.usage), methods=["GET"]),
            Route("/ui/tools", self._page(self.tools), methods=["GET"]),
            Route("/ui/tool", self._page(self.tool), methods=["GET"]),
            Route("/ui/diff", self._page(self.diff), methods=["GET"]),
            Route("/ui/search", self._page(self.search), methods=["GET"]),
            Route("/ui/events", self.events, methods=["GET"]),
            Route("/ui/static/{name}", self.static, methods=["GET"]),
            Route("/ui/login", self.login_form, methods=["GET"]),
            Route("/ui/login", self.login, methods=["POST"]),
            Route("/ui/logout", self.logout, methods=["POST"]),
        ]

    # --- pages ---------------------------------------------------------------------------------------

    def _page(self, handler: Callable[[Request], PageResult]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                self.grant(request)
                fragment = request.query_params.get("fragment") == "1"
                version, (title, body, ref, live) = await run_in_threadpool(
                    self._versioned, handler, request, fragment
                )
            except _FormRefused as refused:  # a form shown again with what was wrong (the Compare form)
                status, _ = _classify(refused.error)
                nav = pages.nav(refused.ref, sign_out=self.tokens is not None)
                return _html(page(refused.title, refused.body, nav=nav), status=status)
            except TractError as exc:
                return self._error(request, exc)
            except Exception as exc:  # content no check caught: an error page, the traceback in the log
                _log.exception("viewer page %s failed", request.url.path)
                return self._error(request, TractError(f"{type(exc).__name__}: {exc}"))
            if fragment:
                return _html(body)
            nav = pages.nav(ref, sign_out=self.tokens is not None)
            if not live:
                return _html(page(title, body, nav=nav))
            query = request.url.query
            live_url = request.url.path + "?" + (query + "&" if query else "") + "fragment=1"
            return _html(page(title, body, nav=nav, live=live_url, live_ref=ref, live_version=version))

        return endpoint

    def _versioned(
        self, handler: Callable[[Request], PageResult], request: Request, fragment: bool
    ) -> tuple[str | None, PageResult]:
        """The feed's version, then the page's data (in one worker thread: one hop, not two). The version is
        read first: a change in between shows on the page and also resyncs it."""
        version = None if fragment else self.feed.version()
        return version, handler(request)

    def _error(self, request: Request, exc: TractError) -> Response:
        status, exc = _classify(exc)
        if status == 401:
            body = pages.login_body(
                "Sign in to view this hub." if request.cookies.get(COOKIE) is None else str(exc)
            )
            return _html(page("Sign in", body), status=401, headers={"WWW-Authenticate": "Bearer"})
        return self._error_page(status, str(exc))

    def _error_page(self, status: int, message: str) -> Response:
        """An error page with the nav bar (the way on from a mistyped link)."""
        nav = pages.nav(sign_out=self.tokens is not None)
        return _html(page(f"{status}", pages.error_body(status, message), nav=nav), status=status)

    def branches(self, request: Request) -> PageResult:
        head_ref, head = read_head(self.store)
        detached = head if head_ref is None else None
        return "Branches", pages.branches_body(self.inspector.branches(), detached), None, True

    def _ref(self, request: Request) -> str:
        ref = request.query_params.get("ref")
        if ref:
            return ref
        head_ref, _ = read_head(self.store)
        if head_ref is not None and self.store.get_ref(head_ref) is not None:
            return head_ref
        first = next(iter(self.inspector.refs()), None)
        return first or HEADS + "main"

    def log(self, request: Request) -> PageResult:
        ref = self._ref(request)
        start = _int(request, "start", 0)
        graph = self.inspector.graph_page(ref, start, _int(request, "limit", PAGE_COMMITS))
        return f"History of {pages.branch_name(ref)}", pages.graph_body(graph), ref, start == 0

    def commit(self, request: Request) -> PageResult:
        fmt = _format(request)
        ref = request.query_params.get("ref") or None
        first = _int(request, "from", -1)
        view = self.inspector.commit(self._revision(request), ref)
        body = pages.commit_body(view, fmt, first if first >= 0 else None)
        return f"Commit {view.info.commit_id[:12]}", body, ref, False

    def _revision(self, request: Request) -> str:
        """The commit id the path's revision names: an id or unique prefix, a branch (``main``,
        ``refs/heads/main``, ``origin/main``), ``HEAD``, with ``~N`` / ``^N`` (as everywhere in tractkv)."""
        return resolve_revision(self.store, request.path_params["rev"])

    async def request_json(self, request: Request) -> Response:
        """The exact request parameters the context at a commit makes, as a JSON document; errors are JSON
        too (an exception nothing expected reaches :class:`InternalErrors`: logged, a JSON 500)."""
        try:
            self.grant(request)
            fmt = _format(request)
            view = await run_in_threadpool(lambda: self.inspector.commit(self._revision(request)))
            params = pages.request_params(view, fmt)
        except TractError as exc:
            return _json_error(exc)
        return JSONResponse(params, headers=SECURITY_HEADERS)

    async def media(self, request: Request) -> Response:
        """A stored image's bytes for a thumbnail: only a blob of bytes that are PNG, JPEG, GIF or WebP
        (sniffed from the bytes, never SVG or anything else), with that type; 404 otherwise. Content
        addressed, so the browser may keep it for good."""
        try:
            self.grant(request)
            found = await run_in_threadpool(self._raster, request.path_params["oid"])
        except TractError as exc:
            return self._error(request, exc)
        if found is None:
            return self._error_page(404, "no such image")
        data, media_type = found
        headers = {**SECURITY_HEADERS, "Cache-Control": "private, max-age=31536000, immutable"}
        return Response(data, media_type=media_type, headers=headers)

    def _raster(self, oid: str) -> tuple[bytes, str] | None:
        if not is_object_id(oid):
            return None
        obj = self.store.get(ObjectId(oid))
        if not isinstance(obj, Blob) or not isinstance(obj.data, bytes):
            return None
        media_type = raster_type(obj.data)
        return None if media_type is None else (obj.data, media_type)

    def usage(self, request: Request) -> PageResult:
        ref = self._ref(request)
        q = request.query_params
        tool, status, commit = q.get("tool") or None, q.get("status") or None, q.get("commit") or None
        start = _int(request, "start", 0)
        usage = self.inspector.usages(
            ref,
            tool=tool,
            status=status,
            commit=commit,
            start=start,
            limit=_int(request, "limit", PAGE_GROUPS),
        )
        return (
            f"Tool usage on {pages.branch_name(ref)}",
            pages.usage_body(usage, tool, status, commit),
            ref,
            start == 0,
        )

    def tools(self, request: Request) -> PageResult:
        return "Tools", pages.tools_index_body(self.inspector.tool_names()), None, False

    def tool(self, request: Request) -> PageResult:
        name = request.query_params.get("name", "")
        versions = self.inspector.tool_versions(name)
        b = _int(request, "b", len(versions))
        a = _int(request, "a", max(1, b - 1))
        if not (1 <= a <= len(versions) and 1 <= b <= len(versions)):
            raise InvalidInput(f"versions are numbered 1 to {len(versions)}")
        ranges, cut = self.inspector.tool_in_force(versions)
        return f"Tool {name}", pages.tool_body(name, versions, a, b, ranges, cut), None, False

    def diff(self, request: Request) -> PageResult:
        """``/ui/diff?a=REV&b=REV``: what changed from one commit to another (a form without both)."""
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        ref = request.query_params.get("ref") or None
        if ref is not None:
            self.inspector.branch_head(ref)  # the branch the page's links stay on: refused when it is none
        try:
            view = self.inspector.diff(a, b) if a and b else None
        except TractError as exc:  # a typo in the form: the form again, filled in, saying what was wrong
            status, shown = _classify(exc)
            if status >= 500:
                raise
            rev = getattr(exc, "rev", None)
            invalid = "a" if rev == a else "b" if rev == b else None
            body = pages.diff_intro(a, b, ref, str(shown), invalid)
            raise _FormRefused(exc, "Compare two commits", body, ref) from exc
        title = f"Diff {a} → {b}" if view else "Compare two commits"
        return title, pages.diff_body(view, a, b, ref), ref, False

    def search(self, request: Request) -> PageResult:
        """``/ui/search?q=...&ref=...``: the search form and its hits (a bad pattern: the form and the error)."""
        ref, query = self._ref(request), request.query_params.get("q", "")
        options = {k: request.query_params.get(k, "") for k in ("regex", "i", "role", "tool", "scope")}
        hits, error = None, None
        if query:
            try:
                hits = self.searcher.search(ref, query, options)
            except InvalidInput as exc:
                error = str(exc)
        title = f"Search {query!r} in {pages.branch_name(ref)}" if query else "Search"
        return title, search_page.search_body(ref, query, options, hits, error), ref, False

    # --- live updates, static files, sign-in ------------------------------------------------------------

    async def events(self, request: Request) -> Response:
        try:
            self.grant(request)
        except TractError as exc:
            return self._error(request, exc)
        queue = await self.feed.subscribe(request.query_params.get("since") or None)

        async def stream() -> AsyncIterator[str]:
            try:
                yield "retry: 1000\n\n"
                while True:
                    try:
                        change = await asyncio.wait_for(queue.get(), timeout=KEEPALIVE)
                    except TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                    if change is None:
                        return
                    yield f"event: change\ndata: {json.dumps(change)}\n\n"
            finally:
                self.feed.unsubscribe(queue)

        headers = {**SECURITY_HEADERS, "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return self._error_page(404, "no such file")
        headers = {**SECURITY_HEADERS, "Cache-Control": "no-cache"}
        return Response(self._static[name], media_type=STATIC[name], headers=headers)

    async def login_form(self, request: Request) -> Response:
        return _html(page("Sign in", pages.login_body()))

    async def login(self, request: Request) -> Response:
        # Read before any authentication: small (MAX_FORM_BYTES) and, under ``serve``, complete within the
        # body timeout in total (BodyTimeout), so unauthenticated clients cannot hold connections long.
        declared = request.headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
            too_large = _html(page("413", pages.error_body(413, "form too large")), status=413)
            too_large.headers["Connection"] = "close"
            return too_large
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                return _html(page("413", pages.error_body(413, "form too large")), status=413)
        token = (parse_qs(body.decode("utf-8", "replace")).get("token") or [""])[0].strip()
        if self.tokens is None:
            return RedirectResponse("/ui/", status_code=303)
        try:
            grant = self.tokens.authenticate(f"Bearer {token}")
        except AuthError:
            return _html(page("Sign in", pages.login_body("Unknown token.")), status=401)
        if not grant.can_read:
            return _html(page("Sign in", pages.login_body("That token lacks the read scope.")), status=403)
        response = RedirectResponse("/ui/", status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return response

    async def logout(self, request: Request) -> Response:
        response = RedirectResponse("/ui/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response


@functools.cache
def _static_files() -> dict[str, bytes]:
    """The stylesheet and script, read once per process (a fresh viewer per request, as tests make, reads
    nothing)."""
    return {
        name: resources.files(__package__).joinpath("static").joinpath(name).read_bytes() for name in STATIC
    }


def _classify(exc: TractError) -> tuple[int, TractError]:
    """The status a viewer error answers with, and the error as shown."""
    if isinstance(exc, AuthError):
        return exc.status, exc
    if isinstance(exc, (ObjectNotFound, RefNotFound, UnknownRevision)):
        return 404, exc
    if isinstance(exc, InvalidInput):
        return 400, exc
    # damaged or unreadable store content (CorruptObject, DecodeError, StoreError, ...): never a 500
    return 422, TractError(f"the store's data could not be shown: {exc} (run `tractkv fsck` on this store)")


def _json_error(exc: TractError) -> Response:
    """A viewer JSON endpoint's error, in the hub's shape (named after the original exception)."""
    status, shown = _classify(exc)
    body = {**error_body(exc), "message": str(shown)}
    headers = {**SECURITY_HEADERS, **({"WWW-Authenticate": "Bearer"} if status == 401 else {})}
    return JSONResponse(body, status_code=status, headers=headers)


def _wants_json(path: str) -> bool:
    """Everything outside ``/ui/`` is the JSON API; inside it, only the ``.json`` routes."""
    return not (path == "/ui" or path.startswith("/ui/")) or path.endswith(".json")


def _format(request: Request) -> str:
    """The request format: ``fmt`` (or its spelling ``format``), openai by default; an unknown one is a 400."""
    given = {name: request.query_params[name] for name in ("fmt", "format") if name in request.query_params}
    for name, fmt in given.items():
        if fmt not in pages.FORMATS:
            raise InvalidInput(f"{name} must be one of {', '.join(pages.FORMATS)}, not {fmt!r}")
    if len(set(given.values())) > 1:
        raise InvalidInput("fmt and format disagree; give one")
    return next(iter(given.values()), "openai")


def _int(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be an integer, not {raw!r}") from None


def _html(body: Markup, status: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    return HTMLResponse(str(body), status_code=status, headers={**SECURITY_HEADERS, **(headers or {})})


def create_app(
    store: Store,
    *,
    tokens: TokenTable | None = None,
    sync: bool = True,
    max_object: int = MAX_OBJECT_BYTES,
    max_request: int = MAX_REQUEST_BYTES,
    poll_interval: float = POLL_INTERVAL,
    push_timeout: float = PUSH_TIMEOUT,
    push_wait: float = PUSH_WAIT,
    push_slots_per_token: int | None = None,
) -> tuple[Starlette, Viewer]:
    """The app ``tractkv serve`` runs (``sync=True``: the sync protocol under ``/v1/`` and the viewer under
    ``/ui/``) or ``tractkv view`` runs (``sync=False``: the read-only viewer alone). Returns the viewer too:
    call ``viewer.feed.close()`` when shutting down, so open event streams end."""
    viewer = Viewer(store, tokens=tokens, poll_interval=poll_interval)
    routes = health_routes() + viewer.routes()
    if sync:
        hub = Hub(
            store,
            tokens=tokens,
            max_object=max_object,
            max_request=max_request,
            push_timeout=push_timeout,
            push_wait=push_wait,
            push_slots_per_token=push_slots_per_token,
        )
        routes = hub_routes(hub) + routes
    sign_out = tokens is not None  # error pages keep the nav bar, as every page has it

    def routing_error(request: Request, exc: Exception) -> Response:
        return _routing_error(request, exc, sign_out=sign_out)

    def internal_error(scope: Any) -> Response:
        return _internal_error(scope, sign_out=sign_out)

    handlers = {**ERROR_HANDLERS, HTTPException: routing_error}
    middleware = [Middleware(InternalErrors, respond=internal_error)]
    return Starlette(routes=routes, exception_handlers=handlers, middleware=middleware), viewer


def _internal_error(scope: Any, *, sign_out: bool = False) -> Response:
    """An unexpected exception's answer (logged by :class:`InternalErrors`): JSON on JSON routes, else a page."""
    if _wants_json(scope["path"]):
        return internal_error_response(scope)
    body = pages.error_body(500, "internal error (the server logged it)")
    nav = pages.nav(sign_out=sign_out)
    return _html(page("500", body, nav=nav), status=500, headers={"Connection": "close"})


def _routing_error(request: Request, exc: Exception, *, sign_out: bool = False) -> Response:
    """No such page / method: an HTML error page under ``/ui/`` (people read it), the hub's JSON on the JSON
    routes (outside ``/ui/``, and ``/ui/...json``)."""
    assert isinstance(exc, HTTPException)
    path = request.url.path
    if not _wants_json(path):
        status = exc.status_code
        body = pages.error_body(status, f"{request.method} {path}: {exc.detail}")
        nav = pages.nav(sign_out=sign_out)
        return _html(page(f"{status}", body, nav=nav), status=status, headers=dict(exc.headers or {}))
    return ERROR_HANDLERS[HTTPException](request, exc)
