"""The groups route of a board split by country: ``GET /v1/boards/{board}/groups``.

Its bodies are defined here, beside the route, since no other route uses them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from pydantic import BaseModel, Field

from podium.api import schemas as s
from podium.api.problems import responses
from podium.api.ratelimit import read_limit
from podium.domain.windows import to_rfc3339
from podium.service.wiring import Service

router = APIRouter(tags=["read"])


class GroupOut(BaseModel):
    group: str = Field(description="the country, as ?group= takes it (ZZ: no country)")
    players: int


class GroupsOut(BaseModel):
    board: str
    window: str = Field(description="the window, without a group: 2026-W44")
    asOf: str
    groups: list[GroupOut] = Field(description="the groups with players, most players first")


@router.get(
    "/v1/boards/{board}/groups",
    response_model=GroupsOut,
    dependencies=[Depends(read_limit)],
    responses=responses(404, 422, 429, 503),
)
async def board_groups(
    request: Request,
    response: Response,
    board: Annotated[str, Path(pattern=s.BOARD, description="a board's name, e.g. week")],
    window: Annotated[
        str | None,
        Query(max_length=16, pattern=s.WINDOW, description=f"a past window: {s.WINDOW_IS}"),
    ] = None,
) -> GroupsOut:
    """The groups of a board split by country that have players in the window (the current
    one by default), with how many each: what ``?group=`` may name to see someone."""
    podium: Service = request.app.state.podium
    g = await podium.groups.of(board, window)
    response.headers["Cache-Control"] = "public, max-age=2"
    return GroupsOut(
        board=g.board,
        window=g.window,
        asOf=to_rfc3339(g.as_of),
        groups=[GroupOut(group=c.group, players=c.players) for c in g.groups],
    )
