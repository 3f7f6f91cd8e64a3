"""RFC 9457 problem+json for every error, and the limits enforced before routing."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from podium import metrics
from podium.errors import PodiumError, RateLimited, Unavailable

log = logging.getLogger("podium.api")
PROBLEM = "application/problem+json"


def problem(
    status: int, title: str, detail: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSONResponse:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM)


def _count_rejection(request: Request, status: int) -> None:
    if request.method == "POST" and request.url.path.startswith("/v1/matches/"):
        metrics.RESULTS_REJECTED.labels(str(status)).inc()


def install(app: FastAPI) -> None:
    @app.exception_handler(PodiumError)
    async def podium_error(request: Request, exc: PodiumError) -> JSONResponse:
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
        return problem(exc.status, exc.title, str(exc), headers)

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
        return problem(
            exc.status_code, _TITLES.get(exc.status_code, "Error"), str(exc.detail), exc.headers
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
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
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await self._refuse(scope, receive, send)
                return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(
            413, "Payload too large", f"request bodies are limited to {self.limit} bytes"
        )
        await response(scope, receive, send)


class _TooLarge(Exception):
    pass
