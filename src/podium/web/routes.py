"""The browser side: the board page (``/``), the ops page (``/ops``), their static assets,
the live stream they read, and the ops figures.

The pages are plain files under ``static/`` (no build step); they reach data only through
the HTTP API, like any other client.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import FileResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles

from podium import metrics
from podium.api.auth import ops
from podium.api.ratelimit import read_limit
from podium.service import Podium
from podium.web.ops import OpsOut, snapshot
from podium.web.stream import Hub

STATIC = Path(__file__).parent / "static"
HEARTBEAT_S = 15.0  # a comment line this often keeps proxies from closing an idle stream
RETRY_MS = 2000  # how soon a browser reconnects a dropped stream

router = APIRouter()


def _hub(request: Request) -> Hub:
    return request.app.state.streams  # type: ignore[no-any-return]


@router.get("/", include_in_schema=False)
async def board_page() -> FileResponse:
    return FileResponse(STATIC / "index.html")


@router.get("/ops", include_in_schema=False)
async def ops_page() -> FileResponse:
    return FileResponse(STATIC / "ops.html")


@router.get(
    "/v1/boards/{board}/stream",
    tags=["read"],
    dependencies=[Depends(read_limit)],
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "board pages"}},
)
async def stream(request: Request, board: str) -> StreamingResponse:
    """The board's top 100 as Server-Sent Events: one at once, then one whenever the board
    changes (checked once a second), each ``data: <page json>``, the page as
    ``GET /v1/boards/{board}`` gives it plus ``tickAt`` (epoch seconds of the read)."""
    podium: Podium = request.app.state.podium
    # Refuse an unknown board, or one without an open window, before the stream starts.
    podium.window(podium.board(board), None)
    hub = _hub(request)

    async def events() -> AsyncIterator[bytes]:
        # Subscribed inside the generator so that the finally below always runs for it.
        queue = hub.subscribe(board)
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
            hub.unsubscribe(board, queue)

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.get("/v1/admin/ops", tags=["ops"], dependencies=[Depends(ops)])
async def ops_figures() -> OpsOut:
    """The counters, gauges and histogram buckets (cumulative) for the ops page: the same
    figures ``/metrics`` exports. An ops key reads them; an admin key does not."""
    return snapshot(metrics.readable())


def install(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")


@asynccontextmanager
async def serving(app: FastAPI, podium: Podium) -> AsyncIterator[None]:
    """The stream hub for the app's lifetime; its broadcasters stop at shutdown."""
    hub = Hub(podium, heartbeat_s=HEARTBEAT_S, cache_s=podium.settings.server.page_cache_s)
    app.state.streams = hub
    try:
        yield
    finally:
        await hub.close()
