"""The browser side: the board page (``/``), the ops page (``/ops``), the admin console
(``/admin``), their static assets, the live stream they read, and the ops figures.

The pages are plain files under ``static/`` (no build step); they reach data only through
the HTTP API, like any other client.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from podium import metrics
from podium.api.auth import ops
from podium.api.problems import responses
from podium.api.ratelimit import read_limit
from podium.api.schemas import BOARD, COUNTRY
from podium.service.wiring import Service
from podium.web.ops import OpsOut, snapshot
from podium.web.stream import Hub

STATIC = Path(__file__).parent / "static"
HEARTBEAT_S = 15.0  # a comment line this often keeps proxies from closing an idle stream
RETRY_MS = 2000  # how soon a browser reconnects a dropped stream

# The pages load only their own scripts, styles and data; avatars are https images from
# player profiles (any host: a profile's avatar is a URL the game chose) or the app's own;
# no page may be framed (clickjacking the ops page).
CSP = (
    "default-src 'self'; img-src 'self' data: https:; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)

# The console holds an admin key: its page loads nothing but podium's own scripts, styles
# and images (no avatar from another host, which would tell it who opened the console), runs
# no inline script and no eval, sends no referrer, submits no form anywhere, and is kept in
# no cache.
ADMIN_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
ADMIN_HEADERS = {
    "Content-Security-Policy": ADMIN_CSP,
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
}

router = APIRouter()


class Headers:
    """``X-Content-Type-Options: nosniff`` on every response, and the pages' CSP on every
    HTML one."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {name.lower() for name, _ in headers}
                if b"x-content-type-options" not in names:
                    headers.append((b"x-content-type-options", b"nosniff"))
                kind = dict(headers).get(b"content-type", b"")
                if kind.startswith(b"text/html") and b"content-security-policy" not in names:
                    headers.append((b"content-security-policy", CSP.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


class _Stream(StreamingResponse):
    """A stream that calls ``done`` however it ends, even if its body never started."""

    def __init__(self, body: AsyncIterator[bytes], done: Callable[[], None]) -> None:
        super().__init__(
            body,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._done = done

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._done()


def _hub(request: Request) -> Hub:
    return request.app.state.streams  # type: ignore[no-any-return]


@router.get("/", include_in_schema=False)
async def board_page() -> FileResponse:
    return FileResponse(STATIC / "index.html")


@router.get("/ops", include_in_schema=False)
async def ops_page() -> FileResponse:
    return FileResponse(STATIC / "ops.html")


@router.get("/admin", include_in_schema=False)
async def admin_page() -> FileResponse:
    """The console: a client of the admin API, with the key the operator types in."""
    return FileResponse(STATIC / "admin.html", headers=ADMIN_HEADERS)


@router.get(
    "/v1/boards/{board}/stream",
    tags=["read"],
    dependencies=[Depends(read_limit)],
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "board pages"},
        **responses(404, 422, 429, 503),
    },
)
async def stream(
    request: Request,
    board: Annotated[str, PathParam(pattern=BOARD)],
    group: Annotated[
        str | None,
        Query(pattern=COUNTRY, description="on a board split by country: the country"),
    ] = None,
) -> StreamingResponse:
    """The board's top 100 as Server-Sent Events: one at once, then one whenever the board
    changes (checked once a second), each ``data: <page json>``, the page as
    ``GET /v1/boards/{board}`` gives it plus ``tickAt`` (epoch seconds of the read). On a
    board split by country, name the group (``?group=FR``)."""
    podium: Service = request.app.state.podium
    boards = podium.boards
    # Refuse an unknown board, one without an open window, a grouped board without a
    # group or a group on a board without groups, before the stream starts.
    boards.window(boards.board(board), None, group)
    hub = _hub(request)
    # Counted per client as the read rate is: behind a trusted proxy, the forwarded client.
    release = hub.admit(request.app.state.client_address(request))

    async def events() -> AsyncIterator[bytes]:
        # Subscribed inside the generator so that the finally below always runs for it.
        queue = hub.subscribe(board, group)
        try:
            yield f"retry: {RETRY_MS}\n\n".encode()
            while True:
                try:
                    async with asyncio.timeout(hub.heartbeat_s):
                        frame = await queue.get()
                except TimeoutError:
                    frame = b": keep-alive\n\n"
                yield frame
        finally:
            hub.unsubscribe(board, queue, group)

    return _Stream(events(), release)


@router.get(
    "/v1/admin/ops",
    tags=["ops"],
    dependencies=[Depends(ops)],
    responses=responses(401, 403),
)
async def ops_figures() -> OpsOut:
    """The counters, gauges and histogram buckets (cumulative) for the ops page: the same
    figures ``/metrics`` exports. An ops key reads them; an admin key does not."""
    return snapshot(metrics.readable())


def install(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")


@asynccontextmanager
async def serving(app: FastAPI, podium: Service) -> AsyncIterator[None]:
    """The stream hub for the app's lifetime; its broadcasters stop at shutdown."""
    server = podium.settings.server
    hub = Hub(
        podium.reads,
        now=podium.clock.now,
        heartbeat_s=HEARTBEAT_S,
        cache_s=server.page_cache_s,
        max_per_client=server.max_streams_per_client,
        max_streams=server.max_streams,
    )
    app.state.streams = hub
    try:
        yield
    finally:
        await hub.close()
