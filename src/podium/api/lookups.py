"""The lookup of players by id on a board: ``GET /v1/boards/{board}/players?ids=a,b,c``.

Its bodies are defined here, beside the route, since no other route uses them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, Field

from podium import metrics
from podium.api import schemas as s
from podium.api.problems import responses
from podium.api.ratelimit import read_limit
from podium.domain.validation import ID, ID_IS
from podium.domain.windows import to_rfc3339
from podium.service.reads.lookups import MAX_IDS, parse_ids
from podium.service.wiring import Service

router = APIRouter(tags=["read"])
# The shape the OpenAPI document publishes; the use case checks it again (lookups.py).
IDS = rf"^{ID}(,{ID}){{0,{MAX_IDS - 1}}}$"


class FoundOut(BaseModel):
    playerId: str
    rank: int = Field(description="on the whole board, 1-based")
    points: int
    exact: bool = Field(description="false: an estimate, below a split board's exact top")
    name: str | None = None
    avatar: str | None = None


class LookupOut(BaseModel):
    board: str
    window: str
    asOf: str
    players: list[FoundOut] = Field(description="the players on the board, in board order")
    absent: list[str] = Field(description="the ids asked for that are not on the board")


@router.get(
    "/v1/boards/{board}/players",
    response_model=LookupOut,
    response_model_exclude_none=True,
    dependencies=[Depends(read_limit)],
    responses=responses(404, 422, 429, 503),
)
async def lookup_players(
    request: Request,
    board: Annotated[str, Path(pattern=s.BOARD, description="a board's name, e.g. week")],
    ids: Annotated[
        str,
        Query(
            max_length=MAX_IDS * 65,
            pattern=IDS,
            description=f"1 to {MAX_IDS} player ids, comma-separated; each {ID_IS}",
        ),
    ],
    window: Annotated[
        str | None,
        Query(max_length=16, pattern=s.WINDOW, description=f"a past window: {s.WINDOW_IS}"),
    ] = None,
    group: Annotated[
        str | None,
        Query(pattern=s.COUNTRY, description="on a board split by country: the country"),
    ] = None,
) -> LookupOut:
    podium: Service = request.app.state.podium
    with metrics.READ_SECONDS.labels("lookup").time():
        found = await podium.lookups.players(board, parse_ids(ids), window, group)
    return LookupOut(
        board=found.board,
        window=found.window,
        asOf=to_rfc3339(found.as_of),
        players=[
            FoundOut(
                playerId=f.player_id,
                rank=f.rank,
                points=f.points,
                exact=f.exact,
                name=f.name,
                avatar=f.avatar,
            )
            for f in found.players
        ],
        absent=found.absent,
    )
