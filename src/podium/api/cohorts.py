"""The league routes: a player's cohort on a league board, a cohort by id, and where a
player stands on every league board. Handlers translate HTTP to the service's ``leagues``
and back; no rules live here."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, Field

from podium.api import schemas as s
from podium.api.auth import admin
from podium.api.problems import responses
from podium.api.ratelimit import read_limit
from podium.domain.validation import ID_IS
from podium.domain.windows import to_rfc3339
from podium.service.leagues import CohortView
from podium.service.wiring import Service

read_router = APIRouter(tags=["read"])
admin_router = APIRouter(tags=["admin"], dependencies=[Depends(admin)])

Board = Annotated[str, Path(pattern=s.BOARD, description="a league board's name, e.g. week")]
PlayerId = Annotated[str, Path(pattern=s.ID, description=ID_IS)]
CohortId = Annotated[
    str,
    Path(
        pattern=s.ID,
        description="a cohort's id: its window, its tier, its number (2026-W44.gold-3)",
    ),
]
WindowQ = Annotated[
    str | None,
    Query(max_length=16, pattern=s.WINDOW, description=f"another window: {s.WINDOW_IS}"),
]
READ = responses(404, 422, 429, 503)


class MemberOut(BaseModel):
    rank: int
    playerId: str
    points: int
    name: str | None = None
    avatar: str | None = None


class CohortOut(BaseModel):
    board: str
    cohortId: str
    window: str = Field(description="the board window the cohort is part of")
    tier: str
    size: int = Field(description="how many players a cohort takes (cohort_size)")
    endsAt: str | None = Field(description="when the window ends (RFC 3339)")
    frozen: bool = Field(description="true: the window froze; these are the final standings")
    promoteThrough: int | None = Field(
        description="ranks up to this one move a tier up when the window freezes (null: none)"
    )
    demoteFrom: int | None = Field(
        description="ranks from this one down move a tier down (null: none)"
    )
    asOf: str
    members: list[MemberOut] = Field(description="every member, in rank order (exact)")


class TierOut(BaseModel):
    board: str
    tier: str
    cohortId: str | None = Field(description="the frozen cohort that decided it (null: none yet)")
    moved: str | None = Field(description="up, down or stay in that cohort (null: none yet)")


class TiersOut(BaseModel):
    playerId: str
    boards: list[TierOut]


def _podium(request: Request) -> Service:
    return request.app.state.podium  # type: ignore[no-any-return]


def _out(c: CohortView) -> CohortOut:
    return CohortOut(
        board=c.board,
        cohortId=c.id,
        window=c.window,
        tier=c.tier,
        size=c.size,
        endsAt=None if c.ends_at is None else to_rfc3339(c.ends_at),
        frozen=c.frozen,
        promoteThrough=c.zones.promote_through,
        demoteFrom=c.zones.demote_from,
        asOf=to_rfc3339(c.as_of),
        members=[
            MemberOut(
                rank=e.rank, playerId=e.player_id, points=e.points, name=e.name, avatar=e.avatar
            )
            for e in c.members
        ],
    )


@read_router.get(
    "/v1/boards/{board}/players/{playerId}/cohort",
    response_model=CohortOut,
    dependencies=[Depends(read_limit)],
    responses=READ,
)
async def player_cohort(
    request: Request, board: Board, playerId: PlayerId, window: WindowQ = None
) -> CohortOut:
    return _out(await _podium(request).leagues.of_player(board, playerId, window))


@read_router.get(
    "/v1/boards/{board}/cohorts/{cohortId}",
    response_model=CohortOut,
    dependencies=[Depends(read_limit)],
    responses=READ,
)
async def cohort(request: Request, board: Board, cohortId: CohortId) -> CohortOut:
    return _out(await _podium(request).leagues.cohort(board, cohortId))


@read_router.get(
    "/v1/players/{playerId}/tiers",
    response_model=TiersOut,
    dependencies=[Depends(read_limit)],
    responses=READ,
)
async def player_tiers(request: Request, playerId: PlayerId) -> TiersOut:
    found = await _podium(request).leagues.tiers(playerId)
    return TiersOut(
        playerId=playerId,
        boards=[
            TierOut(board=t.board, tier=t.tier, cohortId=t.cohort, moved=t.moved) for t in found
        ],
    )


class WindowCohortOut(BaseModel):
    cohortId: str
    tier: str
    members: int = Field(description="players placed in it")


class LeagueOut(BaseModel):
    board: str
    window: str
    cohortSize: int
    tiers: list[str] = Field(description="lowest first")
    promote: int
    demote: int
    cohorts: list[WindowCohortOut] = Field(description="by id, a page")
    next: str | None = Field(None, description="``after`` of the next page; absent on the last")


@admin_router.get(
    "/v1/admin/boards/{board}/cohorts",
    response_model=LeagueOut,
    response_model_exclude_none=True,
    responses=responses(401, 403, 404, 422, 503),
)
async def window_cohorts(
    request: Request,
    board: Board,
    window: WindowQ = None,
    after: Annotated[
        str,
        Query(
            max_length=64,
            pattern=r"^[^\x00-\x1f\x7f]*$",
            description="the last cohort id of the previous page",
        ),
    ] = "",
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> LeagueOut:
    """A league board's tiers and rules, and the cohorts of its current window (or
    ``window``) with their tier and size; 404 for a board not played in cohorts."""
    spec, w, page, more = await _podium(request).leagues.window_cohorts(board, window, after, limit)
    league = spec.league
    assert league is not None  # a league board's
    return LeagueOut(
        board=spec.name,
        window=w.id,
        cohortSize=league.cohort_size,
        tiers=list(league.tiers),
        promote=league.promote,
        demote=league.demote,
        cohorts=[WindowCohortOut(cohortId=c.id, tier=c.tier, members=c.members) for c in page],
        next=page[-1].id if more and page else None,
    )
