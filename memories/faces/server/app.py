"""The web inspector: pages and a JSON API over :class:`~memories.faces.server.service.Inspector`.

Every page has a JSON twin under ``/api`` (``GET /api`` lists the routes); with
``allow_writes`` the :data:`ACTIONS` are POST routes, a form and a JSON twin calling the same
:class:`Inspector` method. This is a security boundary: the token, the Host header, Origin,
CSRF and the body's size and type are checked here, memory text is always escaped and the
Content-Security-Policy allows no script (docs/inspector.md, "Security"). Errors are short
4xx/5xx answers, JSON under ``/api``, never a traceback.
"""

from __future__ import annotations

import functools
import hmac
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, unquote_to_bytes, urlencode, urlsplit

import anyio
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from memories.errors import ConfigError, InvalidInputError, MemoriesError, VersionConflictError
from memories.faces.server.inputs import json_value, whole_number
from memories.faces.server.service import Inspector, NotFound, ReadOnly

__all__ = [
    "ACTIONS",
    "COOKIE",
    "CSRF_FIELD",
    "DEFAULT_TIMEOUT",
    "LOOPBACK_HOSTS",
    "MAX_BODY",
    "ROUTES",
    "create_app",
]

logger = logging.getLogger(__name__)

#: The cookie that carries the token after a ``?token=`` visit.
COOKIE = "memories_token"
#: The longest a request may wait for the stores, in seconds (then 504).
DEFAULT_TIMEOUT = 15.0
#: The longest query string taken, in bytes (then 414).
MAX_QUERY = 2048
#: The highest page number taken.
MAX_PAGE = 1_000_000
#: The largest POST body taken, in bytes (then 413).
MAX_BODY = 64 * 1024
#: The hidden form field that carries the server's CSRF token.
CSRF_FIELD = "csrf"
#: Host names that mean this machine.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; "
        "base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    # same-origin, not no-referrer: with no-referrer a browser sends "Origin: null" on this
    # server's own forms; a link to another site still carries no referrer
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

#: (path, what it shows): the documented routes; each page's JSON twin is ``/api`` + its path.
ROUTES: tuple[tuple[str, str], ...] = (
    ("/", "overview: each memory of the config, its type, store, counts and status"),
    ("/namespaces?q=&page=", "the namespaces the memories hold data in, searchable, paginated"),
    ("/namespaces/{namespace}", "one namespace: each memory's count, pending writes, dead letters"),
    ("/namespaces/{namespace}/erase", "what erasing the namespace's user would remove, per store"),
    ("/namespaces/{namespace}/memories/{memory}?q=&page=", "a memory's items or document"),
    (
        "/namespaces/{namespace}/memories/{memory}/items/{item}",
        "one item's history: versions with their turns, or a change with its patch or error",
    ),
    ("/sessions?q=&page=", "the sessions of the config's histories, last active first"),
    ("/sessions/{session}", "a transcript with its edits, and what each chat memory shows now"),
    ("/search?namespace=&q=&memory=&k=", "each searchable memory's best matches, with scores"),
)

_NAMESPACE = "/namespaces/{namespace}"
_MEMORY = _NAMESPACE + "/memories/{memory}"
_ITEM = _MEMORY + "/items/{item}"
#: (POST path, body fields, what it does): the actions, with --allow-writes only. Each is a
#: form route and a JSON twin (``/api`` + path).
ACTIONS: tuple[tuple[str, str, str], ...] = (
    (_ITEM + "/edit", "content, expected_version", "give a collection memory new content"),
    (_MEMORY + "/edit", "document | prompts, expected_version", "replace a profile / prompts"),
    (_ITEM + "/delete", "expected_version", "delete a collection memory or a document"),
    (_ITEM + "/rollback", "version, expected_version", "restore a collection memory's version"),
    (_MEMORY + "/rollback", "version, expected_version", "restore a profile / instructions"),
    (_MEMORY + "/retry", "ids (optional)", "write a memory's dead letters again"),
    (_NAMESPACE + "/erase", "confirm (the namespace again)", "erase the user from every store"),
)

_TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    auto_reload=False,
)


def segment(value: Any) -> str:
    """``value`` as one segment of a path: every ``/``, ``%``, ``?``, space... percent-encoded.

    An id holding ``/`` stays one segment (Jinja's ``urlencode`` keeps ``/``); the routes
    decode each parameter once (:func:`_param`).
    """
    return quote(str(value), safe="")


_TEMPLATES.filters["segment"] = segment
# a path or URL may wrap at its slashes, never inside a word
_TEMPLATES.filters["breakable"] = lambda text: Markup("/<wbr>").join(
    escape(part) for part in str(text).split("/")
)
# JSON shown as text in a page: escaped once, for HTML, by autoescape (Jinja's tojson escapes
# for a <script> too, and a person would read "user\u0027s")
_TEMPLATES.filters["json_text"] = lambda value, indent=None: json.dumps(
    value, indent=indent, ensure_ascii=False
)


class _Segments:
    """Route on the path's segments as sent: an encoded ``/`` (``%2F``) stays inside its segment.

    An ASGI server decodes the path before routing (``/items/a%2Fb`` would match
    nothing as ``/items/a/b``): each segment sent is decoded and encoded again as
    :func:`segment` does.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw: bytes | None = scope.get("raw_path")
            if raw is None:  # a server that does not give it: the decoded path, as it is
                parts = scope["path"].split("/")
            else:
                sent = raw.split(b"?", 1)[0].split(b"/")
                parts = [unquote_to_bytes(part).decode("utf-8", "replace") for part in sent]
            scope = {**scope, "path": "/".join(map(segment, parts))}
        await self.app(scope, receive, send)


def _api_path(path: str) -> str:
    """A page's JSON twin (the overview's is ``/api/overview``: ``/api`` lists the routes)."""
    return "/api" + (path if path != "/" else "/overview")


def _where(request: Request) -> tuple[str, str]:
    """The namespace and the memory a route names, decoded."""
    return _param(request, "namespace"), _param(request, "memory")


def _param(request: Request, name: str) -> str:
    """A route's parameter, decoded: the id or namespace its link encoded (:class:`_Segments`)."""
    return unquote(request.path_params[name])


def _int(request: Request, name: str, default: int, highest: int) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    return whole_number(text, name, lowest=1, highest=highest)


def _text(request: Request, name: str) -> str:
    return request.query_params.get(name, "")


def _listing(request: Request) -> dict[str, Any]:
    """A list page's filter and page number (``q``, ``page``)."""
    return {"q": _text(request, "q"), "page": _int(request, "page", 1, MAX_PAGE)}


class _Guard:
    """Every request: the query string's size, the token; every answer: the security headers."""

    def __init__(self, app: ASGIApp, *, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)

        async def secured(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [(k.lower().encode(), v.encode()) for k, v in _HEADERS.items()]
                message["headers"] = [*message.get("headers", []), *headers]
            await send(message)

        answer: ASGIApp = self.app
        if len(scope.get("query_string", b"")) > MAX_QUERY:
            answer = _error(request, 414, f"The query string is over {MAX_QUERY} bytes.")
        elif self.token is not None:
            given = request.query_params.get("token")
            if given is not None and self._matches(given):
                kept = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                target = _own_path(request.url.path) + (f"?{urlencode(kept)}" if kept else "")
                answer = redirect = RedirectResponse(target, status_code=303)
                redirect.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
            elif not self._allowed(request):
                answer = _error(
                    request,
                    401,
                    "This inspector needs its token: open it once with ?token=..., or send "
                    "Authorization: Bearer <token>.",
                )
        await answer(scope, receive, secured)

    def _matches(self, given: str) -> bool:
        assert self.token is not None
        return hmac.compare_digest(given.encode(), self.token.encode())

    def _allowed(self, request: Request) -> bool:
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        candidates = [
            credentials.strip() if scheme.lower() == "bearer" else None,  # RFC 9110: any case
            request.headers.get("x-memories-token"),
            request.cookies.get(COOKIE),
        ]
        return any(c is not None and self._matches(c) for c in candidates)


def _own_path(path: str) -> str:
    """``path`` as a redirect target on this server: ``//evil.example/`` names another host.

    A browser reads a Location that starts with ``//`` (or ``/\\``) as another
    site's address; one leading ``/`` keeps it a path here.
    """
    return "/" + path.lstrip("/\\")


def _error(request: Request, status: int, detail: str) -> Response:
    if request.url.path == "/api" or request.url.path.startswith("/api/"):
        return JSONResponse({"error": detail, "status": status}, status_code=status)
    writes = getattr(request.app.state, "writes", False) if "app" in request.scope else False
    page = _TEMPLATES.get_template("error.html").render(
        status=status, detail=detail, title=f"{status}", writes=writes
    )
    return HTMLResponse(page, status_code=status)


async def _on_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    detail = str(exc.detail)
    if exc.status_code == 404:
        detail = "No such page."
    elif exc.status_code == 405:
        allowed = {k.lower(): v for k, v in (exc.headers or {}).items()}.get("allow", "")
        detail = (
            f"{request.method} is not allowed here: this route takes POST only."
            if "POST" in allowed
            else "This page is read-only: only GET is allowed."
        )
    response = _error(request, exc.status_code, detail)
    if exc.headers:
        response.headers.update(exc.headers)
    return response


async def _on_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, NotFound):
        return _error(request, 404, str(exc))
    if isinstance(exc, ReadOnly):
        return _error(request, 403, str(exc))
    if isinstance(exc, VersionConflictError):
        return _error(request, 409, f"Not written, someone changed it after you read it. {exc}")
    if isinstance(exc, InvalidInputError | ConfigError):
        return _error(request, 400, str(exc))
    if isinstance(exc, TimeoutError):
        return _error(request, 504, "The stores did not answer in time; try again.")
    if isinstance(exc, MemoriesError):
        return _error(request, 503, f"A store failed: {exc}")
    logger.exception("inspector: %s failed", request.url.path)
    return _error(request, 500, f"The inspector failed ({type(exc).__name__}); see its log.")


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def _check_origin(request: Request) -> None:
    """Refuse a POST a page of another site makes (its browser names that site in Origin)."""
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        raise HTTPException(403, f"A POST from another site ({origin:.80}) is refused.")


async def _body(request: Request) -> bytes:
    """The request's body, at most :data:`MAX_BODY` bytes (413 before reading more)."""
    try:
        declared = whole_number(request.headers.get("content-length", "0"), "Content-Length")
    except InvalidInputError as exc:
        raise HTTPException(400, str(exc)) from None
    if declared > MAX_BODY:
        raise HTTPException(413, f"The body is over {MAX_BODY:,} bytes; send less.")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise HTTPException(413, f"The body is over {MAX_BODY:,} bytes; send less.")
        chunks.append(chunk)
    return b"".join(chunks)


async def _json_fields(request: Request) -> dict[str, Any]:
    """An API action's body: a JSON object (sent as application/json)."""
    body = await _body(request)
    if _media_type(request) != "application/json":
        raise HTTPException(415, "Send the action's fields as a JSON object (application/json).")
    fields = json_value(body or b"{}", "The body")
    if not isinstance(fields, dict):
        raise HTTPException(400, f"The body must be a JSON object, got {type(fields).__name__}.")
    return fields


async def _form_fields(request: Request, csrf: str) -> dict[str, Any]:
    """A page's form, checked against the server's CSRF token, in the API's shape."""
    body = await _body(request)
    if _media_type(request) != "application/x-www-form-urlencoded":
        raise HTTPException(415, "Send the form as application/x-www-form-urlencoded.")
    try:
        parsed = parse_qs(body.decode(), keep_blank_values=True, max_num_fields=50)
    except (UnicodeDecodeError, ValueError) as exc:
        raise HTTPException(400, f"The form cannot be read: {exc}") from exc
    fields: dict[str, Any] = {name: values[-1] for name, values in parsed.items()}
    given = fields.pop(CSRF_FIELD, "")
    if not hmac.compare_digest(given.encode(), csrf.encode()):
        raise HTTPException(
            403, "The form's CSRF token is missing or wrong: reload the page and try again."
        )
    if "document" in fields:  # a profile, edited as JSON text
        fields["document"] = json_value(fields["document"], "The document")
    if "name" in fields:  # one prompt of instructions
        fields["prompts"] = {fields.pop("name"): fields.pop("text", "")}
    if fields.get("ids"):
        fields["ids"] = [i for i in fields["ids"].split(",") if i]
    return fields


def create_app(
    inspector: Inspector,
    *,
    token: str | None = None,
    hosts: tuple[str, ...] = LOOPBACK_HOSTS,
    timeout: float = DEFAULT_TIMEOUT,
) -> Starlette:
    """The inspector's ASGI app over ``inspector``: pages, their JSON twins, and its actions.

    Args:
        token: required on every request when given.
        hosts: the Host header values accepted (``("*",)``: any, for a served token).
        timeout: the longest a request waits for the stores, in seconds.
    """
    csrf = secrets.token_urlsafe(32)  # per server: forms carry it, a page elsewhere cannot

    async def call(method: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        with anyio.fail_after(timeout):
            return await anyio.to_thread.run_sync(
                functools.partial(method, *args, **kwargs), abandon_on_cancel=True
            )

    routes: list[Route] = []

    def add(path: str, template: str, load: Callable[[Request], Awaitable[dict[str, Any]]]) -> None:
        for route_path, kind in ((path, "page"), (_api_path(path), "api")):

            async def endpoint(request: Request, kind: str = kind) -> Response:
                data = await load(request)
                if kind == "api":
                    return JSONResponse(data)
                api_url = _api_path(request.url.path)
                if request.url.query:
                    api_url += "?" + request.url.query
                body = _TEMPLATES.get_template(template).render(
                    data=data,
                    api_url=api_url,
                    path=request.url.path,
                    writes=inspector.allow_writes,
                    csrf=csrf,
                )
                return HTMLResponse(body)

            routes.append(Route(route_path, endpoint, methods=["GET"]))

    Act = Callable[[Request, dict[str, Any]], Awaitable[dict[str, Any]]]
    Back = Callable[[Request, dict[str, Any]], str] | str

    def act(path: str, run: Act, back: Back) -> None:
        """An action: a form route and its JSON twin; ``back`` gives the page the form
        redirects to, or names the template that shows what it did (an erasure's report)."""
        for route_path, kind in ((path, "page"), ("/api" + path, "api")):

            async def endpoint(request: Request, kind: str = kind) -> Response:
                if not inspector.allow_writes:
                    raise ReadOnly()
                _check_origin(request)
                if kind == "api":
                    return JSONResponse(await run(request, await _json_fields(request)))
                done = await run(request, await _form_fields(request, csrf))
                if isinstance(back, str):
                    page = _TEMPLATES.get_template(back)
                    return HTMLResponse(
                        page.render(data=done, writes=True, csrf=csrf, api_url="/api")
                    )
                return RedirectResponse(back(request, done), status_code=303)

            routes.append(Route(route_path, endpoint, methods=["POST"]))

    async def search(request: Request) -> dict[str, Any]:
        where, query = _text(request, "namespace"), _text(request, "q")
        if not where:  # a search is within one user's namespace: say so, keep the query
            listed = await call(inspector.namespaces)
            said = f"Choose a namespace to search for {query!r:.80}." if query else None
            return {
                "namespace": "",
                "query": query,
                "memories": [],
                "choices": listed["namespaces"],
                "message": said,
            }
        k = _int(request, "k", 10, 50)
        memory = _text(request, "memory") or None
        return await call(inspector.search, where, query, memory_id=memory, k=k)

    add("/", "overview.html", lambda r: call(inspector.overview))
    add("/namespaces", "namespaces.html", lambda r: call(inspector.namespaces, **_listing(r)))
    add(_NAMESPACE, "namespace.html", lambda r: call(inspector.namespace, _param(r, "namespace")))
    add(
        _NAMESPACE + "/erase",
        "erase.html",
        lambda r: call(inspector.erasure, _param(r, "namespace")),
    )
    add(_MEMORY, "items.html", lambda r: call(inspector.items, *_where(r), **_listing(r)))
    add(_ITEM, "item.html", lambda r: call(inspector.item, *_where(r), _param(r, "item")))
    add("/sessions", "sessions.html", lambda r: call(inspector.sessions, **_listing(r)))
    add(
        "/sessions/{session:path}",
        "session.html",
        lambda r: call(inspector.session, _param(r, "session")),
    )
    add("/search", "search.html", search)

    def memory_page(request: Request, done: dict[str, Any]) -> str:
        namespace, memory = _where(request)
        return f"/namespaces/{segment(namespace)}/memories/{segment(memory)}"

    def item_page(request: Request, done: dict[str, Any]) -> str:
        return memory_page(request, done) + f"/items/{segment(_param(request, 'item'))}"

    def after_delete(request: Request, done: dict[str, Any]) -> str:
        # a collection memory keeps its versions (its page offers a rollback); a document is gone
        return item_page(request, done) if "version" in done else memory_page(request, done)

    def namespace_page(request: Request, done: dict[str, Any]) -> str:
        return f"/namespaces/{segment(_param(request, 'namespace'))}"

    async def versioned(
        method: Callable[..., dict[str, Any]], request: Request, fields: dict[str, Any], value: Any
    ) -> dict[str, Any]:
        """``method`` (edit, rollback) on an item's route (a collection memory's) or a memory's,
        naming the version the caller read."""
        item = {"item_id": _param(request, "item")} if "item" in request.path_params else {}
        expected = fields.get("expected_version")
        return await call(method, *_where(request), value, **item, expected_version=expected)

    async def edit(request: Request, fields: dict[str, Any]) -> dict[str, Any]:
        # an item's content; on a memory's route a profile's document or instructions' prompts
        named = "document" if "document" in fields else "prompts"
        named = "content" if "item" in request.path_params else named
        return await versioned(inspector.edit, request, fields, fields.get(named))

    async def delete_item(request: Request, fields: dict[str, Any]) -> dict[str, Any]:
        return await call(
            inspector.delete,
            *_where(request),
            _param(request, "item"),
            expected_version=fields.get("expected_version"),
        )

    async def rollback(request: Request, fields: dict[str, Any]) -> dict[str, Any]:
        return await versioned(inspector.rollback, request, fields, fields.get("version"))

    async def retry(request: Request, fields: dict[str, Any]) -> dict[str, Any]:
        ids = fields.get("ids")
        if ids is not None and not (isinstance(ids, list) and all(isinstance(i, str) for i in ids)):
            raise InvalidInputError(f"ids must be a list of dead letters' ids, got {ids!r:.80}.")
        return await call(inspector.retry, *_where(request), ids or None)

    async def erase(request: Request, fields: dict[str, Any]) -> dict[str, Any]:
        return await call(inspector.erase, _param(request, "namespace"), fields.get("confirm"))

    handlers: dict[str, tuple[Act, Back]] = {
        (_ITEM + "/edit"): (edit, item_page),
        (_MEMORY + "/edit"): (edit, memory_page),
        (_ITEM + "/delete"): (delete_item, after_delete),
        (_ITEM + "/rollback"): (rollback, item_page),
        (_MEMORY + "/rollback"): (rollback, memory_page),
        (_MEMORY + "/retry"): (retry, namespace_page),
        (_NAMESPACE + "/erase"): (erase, "erased.html"),
    }
    assert list(handlers) == [path for path, _, _ in ACTIONS]
    for path, (run, back) in handlers.items():
        act(path, run, back)

    async def index(request: Request) -> Response:
        documented = [
            {"page": path, "api": _api_path(path), "shows": shows} for path, shows in ROUTES
        ]
        actions = [
            {"form": path, "api": "/api" + path, "fields": fields, "does": does}
            for path, fields, does in ACTIONS
        ]
        writes = inspector.allow_writes
        return JSONResponse(
            {
                "read_only": not writes,
                "methods": ["GET", "HEAD", "POST"] if writes else ["GET", "HEAD"],
                "routes": documented,
                "actions": actions if writes else [],
            }
        )

    routes.append(Route("/api", index, methods=["GET"]))
    middleware = [
        Middleware(_Segments),
        Middleware(_Guard, token=token),
        Middleware(TrustedHostMiddleware, allowed_hosts=list(hosts)),
    ]
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={
            HTTPException: _on_http,
            **{
                kind: _on_error
                for kind in (NotFound, ReadOnly, MemoriesError, TimeoutError, Exception)
            },
        },
    )
    app.state.writes = inspector.allow_writes
    return app
