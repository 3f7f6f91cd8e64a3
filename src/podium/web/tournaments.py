"""A live tournament's top over Server-Sent Events: where a live final is watched.

The board stream's own hub and broadcasters (``web/stream.py``, ``web/routes.py``), on the
tournament's board (``~<id>``): one reader per tournament however many watch, a frame when
its top changes. Each frame is the page ``GET /v1/tournaments/{id}/board`` gives, plus
``tickAt``, with the tournament's id as its ``board``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi import Path as PathParam
from fastapi.responses import StreamingResponse

from podium.api.problems import responses
from podium.api.ratelimit import read_limit
from podium.api.schemas import ID
from podium.domain.tournaments import BOARD_PREFIX
from podium.domain.validation import ID_IS
from podium.service.wiring import Service
from podium.web.routes import RETRY_MS, _hub, _Stream

router = APIRouter()

# A frame names the board it was read from first ("~<id>"): the tournament's id instead.
_OWN_NAME = (b'data: {"board":"' + BOARD_PREFIX.encode(), b'data: {"board":"')


@router.get(
    "/v1/tournaments/{tournamentId}/stream",
    tags=["read"],
    dependencies=[Depends(read_limit)],
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "the tournament's top"},
        **responses(404, 422, 429, 503),
    },
)
async def tournament_stream(
    request: Request,
    tournamentId: Annotated[str, PathParam(pattern=ID, description=ID_IS)],
) -> StreamingResponse:
    """The live tournament's top 100 as Server-Sent Events: one at once, then one whenever
    it changes (checked once a second), each ``data: <page json>``. A tournament that is not
    live is a 404 that says so (its board is read at ``/v1/tournaments/{id}/board``)."""
    podium: Service = request.app.state.podium
    board = await podium.tournaments.live_board(tournamentId)
    hub = _hub(request)
    release = hub.admit(request.app.state.client_address(request))

    async def events() -> AsyncIterator[bytes]:
        queue = hub.subscribe(board)
        try:
            yield f"retry: {RETRY_MS}\n\n".encode()
            while True:
                try:
                    async with asyncio.timeout(hub.heartbeat_s):
                        frame = await queue.get()
                except TimeoutError:
                    frame = b": keep-alive\n\n"
                yield frame.replace(*_OWN_NAME, 1)
        finally:
            hub.unsubscribe(board, queue)

    return _Stream(events(), release)
