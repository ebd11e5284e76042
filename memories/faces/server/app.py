"""The web inspector: pages and a JSON API over :class:`~memories.faces.server.service.Inspector`.

Every page has a JSON twin under ``/api`` that returns exactly the data the
page renders (``GET /api`` lists the routes). Read-only: the only method is
GET (HEAD too); anything else is 405.

Security: a token, when set, is required on every request (the
``Authorization: Bearer`` or ``X-Memories-Token`` header, or the cookie set by
opening any page once with ``?token=...``); the Host header must name the
server (a page on another site cannot reach it through DNS rebinding); memory
content is user text and is always escaped (Jinja2 autoescape, JSON as
``application/json``), and the Content-Security-Policy allows no script at all.
Errors are short 4xx/5xx answers, JSON under ``/api``, never a traceback.
"""

from __future__ import annotations

import functools
import hmac
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from memories.errors import ConfigError, InvalidInputError, MemoriesError
from memories.faces.server.service import Inspector, NotFound

__all__ = ["COOKIE", "DEFAULT_TIMEOUT", "LOOPBACK_HOSTS", "ROUTES", "create_app"]

logger = logging.getLogger(__name__)

#: The cookie that carries the token after a ``?token=`` visit.
COOKIE = "memories_token"
#: The longest a request may wait for the stores, in seconds (then 504).
DEFAULT_TIMEOUT = 15.0
#: The longest query string taken, in bytes (then 414).
MAX_QUERY = 2048
#: The highest page number taken.
MAX_PAGE = 1_000_000
#: Host names that mean this machine.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; "
        "base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

#: (path, what it shows): the documented routes; each page's JSON twin is ``/api`` + its path.
ROUTES: tuple[tuple[str, str], ...] = (
    ("/", "overview: each memory of the config, its type, store, counts and status"),
    ("/namespaces?q=&page=", "the namespaces the memories hold data in, searchable, paginated"),
    ("/namespaces/{namespace}", "one namespace: each memory's count, pending writes, dead letters"),
    ("/namespaces/{namespace}/memories/{memory}?q=&page=", "a memory's items or document"),
    (
        "/namespaces/{namespace}/memories/{memory}/items/{item}",
        "one item's history: versions with their turns, or a change with its patch or error",
    ),
    ("/sessions?q=&page=", "the sessions of the config's histories, last active first"),
    ("/sessions/{session}", "a transcript with its edits, and what each chat memory shows now"),
    ("/search?namespace=&q=&memory=&k=", "each searchable memory's best matches, with scores"),
)

_TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    auto_reload=False,
)

Endpoint = Callable[[Request], Awaitable[Response]]


def _is_api(path: str) -> bool:
    return path == "/api" or path.startswith("/api/")


def _int(request: Request, name: str, default: int, highest: int) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    if not text.isdigit() or not 1 <= int(text) <= highest:
        raise InvalidInputError(
            f"{name} must be a whole number from 1 to {highest}, got {text!r:.40}"
        )
    return int(text)


def _text(request: Request, name: str) -> str:
    return request.query_params.get(name, "")


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

        if len(scope.get("query_string", b"")) > MAX_QUERY:
            await _error(request, 414, f"The query string is over {MAX_QUERY} bytes.")(
                scope, receive, secured
            )
            return
        if self.token is not None:
            given = request.query_params.get("token")
            if given is not None and self._matches(given):
                kept = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                target = request.url.path + (f"?{urlencode(kept)}" if kept else "")
                response = RedirectResponse(target, status_code=303)
                response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
                await response(scope, receive, secured)
                return
            if not self._allowed(request):
                await _error(
                    request,
                    401,
                    "This inspector needs its token: open it once with ?token=..., or send "
                    "Authorization: Bearer <token>.",
                )(scope, receive, secured)
                return
        await self.app(scope, receive, secured)

    def _matches(self, given: str) -> bool:
        assert self.token is not None
        return hmac.compare_digest(given.encode(), self.token.encode())

    def _allowed(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        candidates = [
            header.removeprefix("Bearer ") if header.startswith("Bearer ") else None,
            request.headers.get("x-memories-token"),
            request.cookies.get(COOKIE),
        ]
        return any(c is not None and self._matches(c) for c in candidates)


def _error(request: Request, status: int, detail: str) -> Response:
    if _is_api(request.url.path):
        return JSONResponse({"error": detail, "status": status}, status_code=status)
    page = _TEMPLATES.get_template("error.html").render(
        status=status, detail=detail, title=f"{status}"
    )
    return HTMLResponse(page, status_code=status)


async def _on_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    detail = {404: "No such page.", 405: "This inspector is read-only: only GET is allowed."}
    response = _error(request, exc.status_code, detail.get(exc.status_code, str(exc.detail)))
    if exc.headers:
        response.headers.update(exc.headers)
    return response


async def _on_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, NotFound):
        return _error(request, 404, str(exc))
    if isinstance(exc, InvalidInputError | ConfigError):
        return _error(request, 400, str(exc))
    if isinstance(exc, TimeoutError):
        return _error(request, 504, "The stores did not answer in time; try again.")
    if isinstance(exc, MemoriesError):
        return _error(request, 503, f"A store failed: {exc}")
    logger.exception("inspector: %s failed", request.url.path)
    return _error(request, 500, f"The inspector failed ({type(exc).__name__}); see its log.")


def create_app(
    inspector: Inspector,
    *,
    token: str | None = None,
    hosts: tuple[str, ...] = LOOPBACK_HOSTS,
    timeout: float = DEFAULT_TIMEOUT,
) -> Starlette:
    """The inspector's ASGI app over ``inspector``: pages, their JSON twins, read-only.

    Args:
        token: required on every request when given.
        hosts: the Host header values accepted (``("*",)``: any, for a served token).
        timeout: the longest a request waits for the stores, in seconds.
    """

    async def call(method: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        with anyio.fail_after(timeout):
            return await anyio.to_thread.run_sync(
                functools.partial(method, *args, **kwargs), abandon_on_cancel=True
            )

    routes: list[Route] = []

    def add(path: str, template: str, load: Callable[[Request], Awaitable[dict[str, Any]]]) -> None:
        api_path = "/api" + (path if path != "/" else "/overview")
        for route_path, kind in ((path, "page"), (api_path, "api")):

            async def endpoint(request: Request, kind: str = kind) -> Response:
                data = await load(request)
                if kind == "api":
                    return JSONResponse(data)
                api_url = "/api" + (request.url.path if request.url.path != "/" else "/overview")
                if request.url.query:
                    api_url += "?" + request.url.query
                body = _TEMPLATES.get_template(template).render(
                    data=data, api_url=api_url, path=request.url.path
                )
                return HTMLResponse(body)

            routes.append(Route(route_path, endpoint, methods=["GET"]))

    async def overview(request: Request) -> dict[str, Any]:
        return await call(inspector.overview)

    async def namespaces(request: Request) -> dict[str, Any]:
        page = _int(request, "page", 1, MAX_PAGE)
        return await call(inspector.namespaces, q=_text(request, "q"), page=page)

    async def namespace(request: Request) -> dict[str, Any]:
        return await call(inspector.namespace, request.path_params["namespace"])

    async def items(request: Request) -> dict[str, Any]:
        page = _int(request, "page", 1, MAX_PAGE)
        params = request.path_params
        return await call(
            inspector.items, params["namespace"], params["memory"], q=_text(request, "q"), page=page
        )

    async def item(request: Request) -> dict[str, Any]:
        params = request.path_params
        return await call(inspector.item, params["namespace"], params["memory"], params["item"])

    async def sessions(request: Request) -> dict[str, Any]:
        page = _int(request, "page", 1, MAX_PAGE)
        return await call(inspector.sessions, q=_text(request, "q"), page=page)

    async def session(request: Request) -> dict[str, Any]:
        return await call(inspector.session, request.path_params["session"])

    async def search(request: Request) -> dict[str, Any]:
        where = _text(request, "namespace")
        if not where:
            listed = await call(inspector.namespaces)
            return {"namespace": "", "query": "", "memories": [], "choices": listed["namespaces"]}
        k = _int(request, "k", 10, 50)
        memory = _text(request, "memory") or None
        return await call(inspector.search, where, _text(request, "q"), memory_id=memory, k=k)

    add("/", "overview.html", overview)
    add("/namespaces", "namespaces.html", namespaces)
    add("/namespaces/{namespace}", "namespace.html", namespace)
    add("/namespaces/{namespace}/memories/{memory}", "items.html", items)
    add("/namespaces/{namespace}/memories/{memory}/items/{item:path}", "item.html", item)
    add("/sessions", "sessions.html", sessions)
    add("/sessions/{session:path}", "session.html", session)
    add("/search", "search.html", search)

    async def index(request: Request) -> Response:
        documented = [
            {"page": path, "api": "/api" + (path if path != "/" else "/overview"), "shows": shows}
            for path, shows in ROUTES
        ]
        return JSONResponse({"read_only": True, "methods": ["GET", "HEAD"], "routes": documented})

    routes.append(Route("/api", index, methods=["GET"]))
    middleware = [
        Middleware(_Guard, token=token),
        Middleware(TrustedHostMiddleware, allowed_hosts=list(hosts)),
    ]
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={
            HTTPException: _on_http,
            **{kind: _on_error for kind in (NotFound, MemoriesError, TimeoutError, Exception)},
        },
    )
