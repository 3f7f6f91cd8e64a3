"""RFC 9457 problem+json for every error, and the limits enforced before routing."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from podium import metrics
from podium.errors import PodiumError, RateLimited, Unavailable

log = logging.getLogger("podium.api")
PROBLEM = "application/problem+json"


class Problem(BaseModel):
    """The body of every error (RFC 9457), as ``application/problem+json``."""

    type: str = Field(description='always "about:blank": the status says what happened')
    title: str = Field(description="the status's short name, e.g. Not found")
    status: int = Field(ge=400, le=599)
    detail: str = Field(min_length=1, description="what was wrong with this request")


class FieldError(BaseModel):
    field: str = Field(description="the field's path, dotted: results.0.points")
    message: str


class InvalidProblem(Problem):
    """A 422 of request validation names every field at fault; one refused by a rule of the
    service (an unknown mode, a window not open) has no ``errors``."""

    errors: list[FieldError] | None = None


# What each status means, for the OpenAPI document; ``responses(...)`` picks them per route.
MEANINGS = {
    401: "no credential, or one that is unknown (WWW-Authenticate: Bearer)",
    403: "a credential that may not do this",
    404: "an unknown board, window or player",
    409: "a conflict with what is recorded",
    413: "the request body is over the limit",
    415: "a body that is not application/json",
    422: "invalid input: the detail, and for a malformed request its errors, name the field",
    429: "too many requests (Retry-After)",
    503: "unavailable or overloaded: nothing was recorded, retry after Retry-After",
}


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a route: each error status it answers, with its problem+json
    body (``app.openapi`` moves them from application/json to application/problem+json)."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        entry: dict[str, Any] = {
            "model": InvalidProblem if status == 422 else Problem,
            "description": MEANINGS[status],
        }
        if status in (429, 503):
            entry["headers"] = {
                "Retry-After": {"description": "seconds", "schema": {"type": "string"}}
            }
        if status == 401:
            entry["headers"] = {"WWW-Authenticate": {"schema": {"type": "string"}}}
        out[status] = entry
    return out


def unsupported_media_type() -> dict[str, Any]:
    """The 415 of a route with a JSON body, as the OpenAPI document declares it."""
    schema = {"$ref": "#/components/schemas/Problem"}
    return {"description": MEANINGS[415], "content": {PROBLEM: {"schema": schema}}}


def problem(
    status: int, title: str, detail: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSONResponse:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM)


def _count_rejection(request: Request, status: int) -> None:
    if request.method == "POST" and request.url.path.startswith("/v1/matches/"):
        metrics.RESULTS_REJECTED.labels(str(status)).inc()


async def podium_error(request: Request, exc: PodiumError) -> JSONResponse:
    """The answer to a ``PodiumError``: the app's handler, and the hot reads' (api/hot.py)."""
    headers = {}
    if isinstance(exc, RateLimited | Unavailable):
        headers["Retry-After"] = str(exc.retry_after)
    if isinstance(exc, Unavailable):
        # Expected (a restart, a failover): one line; the client retries.
        log.warning("%s %s: %s", request.method, request.url.path, exc)
    elif exc.status >= 500:
        # A bug: its traceback (the driver's error as its cause) goes to the log.
        log.error("%s %s: %s", request.method, request.url.path, exc, exc_info=exc)
    _count_rejection(request, exc.status)
    # The message went to the log above; a client hears only which part is out (its
    # message names the backend's address and the driver's words).
    return problem(exc.status, exc.title, exc.public or str(exc), headers)


def install(app: FastAPI) -> None:
    app.add_exception_handler(PodiumError, podium_error)  # type: ignore[arg-type]

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"field": ".".join(str(p) for p in e["loc"] if p != "body"), "message": e["msg"]}
            for e in exc.errors()
        ]
        first = errors[0] if errors else {"field": "", "message": "invalid request"}
        _count_rejection(request, 422)
        return problem(422, "Invalid input", f"{first['field']}: {first['message']}", errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:
            # A body that cannot be read as JSON (not UTF-8, say): invalid input like any
            # other, as a JSON syntax error already is.
            _count_rejection(request, 422)
            message = f"the body cannot be read as JSON: {exc.detail}"
            return problem(
                422, "Invalid input", message, errors=[{"field": "body", "message": message}]
            )
        headers = exc.headers
        detail = str(exc.detail)
        routes = request.app.state.route_table  # api/protocol.py
        if exc.status_code == 405:
            # The router names only the methods of the first route on this path; a path that
            # has several (POST and DELETE of a ban) must list them all.
            headers = {**(headers or {}), "Allow": ", ".join(routes.allowed(request.url.path))}
        if exc.status_code == 404 and (bare := routes.without_slash(request.url.path)):
            # No redirect: one built from the Host header sends the client wherever the
            # request said, and an API's client is better told its path.
            detail = f"no route at {request.url.path}; the path is {bare}, without the slash"
        return problem(exc.status_code, _TITLES.get(exc.status_code, "Error"), detail, headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        _count_rejection(request, 500)  # a bug refused the match as surely as an outage
        return problem(500, "Internal error", "an unexpected error occurred; it has been logged")


_TITLES = {404: "Not found", 405: "Method not allowed", 413: "Payload too large"}


class BodyLimit:
    """Refuses request bodies over ``limit`` bytes with 413, before any handler reads them,
    whether or not the client sent a Content-Length."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                if value.isdigit() and int(value) > self.limit:
                    await self._refuse(scope, receive, send)
                    return
                # The server stops the body at its declared length: it cannot grow past it.
                await self.app(scope, receive, send)
                return
        # No length (a chunked body): read it here, whole, up to the limit, before any
        # handler sees it. An error raised from inside the handler's read would not do: the
        # framework turns any failure to read a body into 400 "error parsing the body".
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.limit:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        whole: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, replay([whole], receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(
            413, "Payload too large", f"request bodies are limited to {self.limit} bytes"
        )
        await response(scope, receive, send)


def replay(messages: list[Message], receive: Receive) -> Receive:
    """``messages`` first, then whatever ``receive`` gives (a disconnect)."""

    async def replayed() -> Message:
        return messages.pop(0) if messages else await receive()

    return replayed
