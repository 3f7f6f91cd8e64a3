"""The admin's routes about players: ``GET /v1/admin/players?q=`` (found by id or name),
``GET /v1/admin/players/{playerId}`` (one player's file: profile, ban, latest results with
their flags and metadata), and a flagged result accepted or rejected. What the console
reads before it bans, unbans or reviews.

Their bodies are defined here, beside the routes, since no other route uses them."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, Field

from podium.api import schemas as s
from podium.api.auth import admin
from podium.api.problems import responses
from podium.domain.models import Profile
from podium.domain.validation import ID_IS
from podium.domain.windows import to_rfc3339
from podium.ports import PlayerResult
from podium.service.moderation import SEARCH, SEARCH_MAX
from podium.service.wiring import Service

router = APIRouter(tags=["admin"], dependencies=[Depends(admin)])
PlayerId = Annotated[str, Path(pattern=s.ID, description=ID_IS)]
MatchId = Annotated[str, Path(pattern=s.ID, description=ID_IS)]


class PlayerOut(BaseModel):
    playerId: str
    name: str | None = None
    avatar: str | None = None
    country: str | None = None


class PlayersOut(BaseModel):
    players: list[PlayerOut]


class BanOut(BaseModel):
    reason: str
    bannedAt: str


class ResultOut(BaseModel):
    matchId: str
    mode: str
    points: int
    endedAt: str
    durationSeconds: int
    recordedAt: str
    flag: str | None = Field(None, description="why the result was flagged, when it was")
    acceptedAt: str | None = Field(None, description="when a moderator accepted its flag")
    rejectedAt: str | None = Field(
        None, description="when a moderator rejected it: kept for the record, no longer counted"
    )
    metadata: dict[str, Any] | None = Field(None, description="as the game server sent it")


class PlayerFileOut(PlayerOut):
    banned: bool
    ban: BanOut | None = None
    results: list[ResultOut] = Field(description="the latest results, newest recorded first")


def _player(p: Profile) -> PlayerOut:
    return PlayerOut(playerId=p.player_id, name=p.name, avatar=p.avatar, country=p.country)


def _result(r: PlayerResult) -> ResultOut:
    return ResultOut(
        matchId=r.match_id,
        mode=r.mode,
        points=r.points,
        endedAt=to_rfc3339(r.ended_at),
        durationSeconds=r.duration_s,
        recordedAt=to_rfc3339(r.recorded_at),
        flag=r.flag,
        # Stored as the canonical JSON object it was checked to be (domain/metadata.py).
        metadata=None if r.metadata is None else json.loads(r.metadata),
        acceptedAt=None if r.accepted_at is None else to_rfc3339(r.accepted_at),
        rejectedAt=None if r.rejected_at is None else to_rfc3339(r.rejected_at),
    )


def _podium(request: Request) -> Service:
    return request.app.state.podium  # type: ignore[no-any-return]


@router.get(
    "/v1/admin/players",
    response_model=PlayersOut,
    response_model_exclude_none=True,
    responses=responses(401, 403, 422, 503),
)
async def find_players(
    request: Request,
    q: Annotated[
        str,
        Query(
            min_length=1,
            max_length=SEARCH_MAX,
            pattern=SEARCH,
            description="a player id or its start, or part of a name (case ignored, ASCII); "
            "no control character",
        ),
    ],
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> PlayersOut:
    """Players whose id starts with ``q`` or whose name contains it, by player id."""
    found = await _podium(request).search.find(q, limit)
    return PlayersOut(players=[_player(p) for p in found])


@router.get(
    "/v1/admin/players/{playerId}",
    response_model=PlayerFileOut,
    response_model_exclude_none=True,
    responses=responses(401, 403, 404, 422, 503),
)
async def player_file(
    request: Request,
    playerId: PlayerId,
    results: Annotated[int, Query(ge=0, le=200, description="how many latest results")] = 20,
) -> PlayerFileOut:
    """One player's file: profile, ban (with its reason) and latest results, flagged or
    not, with their metadata. A player the store knows nothing of is a 404."""
    f = await _podium(request).search.player(playerId, results)
    ban = (
        None if f.ban is None else BanOut(reason=f.ban.reason, bannedAt=to_rfc3339(f.ban.banned_at))
    )
    return PlayerFileOut(
        **_player(f.profile).model_dump(),
        banned=f.ban is not None,
        ban=ban,
        results=[_result(r) for r in f.results],
    )


class AcceptedOut(BaseModel):
    playerId: str
    matchId: str
    acceptedAt: str = Field(description="when it was accepted: the first time, if again")


@router.post(
    "/v1/admin/players/{playerId}/results/{matchId}/accept",
    response_model=AcceptedOut,
    responses=responses(401, 403, 404, 422, 503),
)
async def accept_flag(request: Request, playerId: PlayerId, matchId: MatchId) -> AcceptedOut:
    """Accept a flagged result after a look: it keeps counting, as it did, and leaves the
    review queue (``GET /v1/admin/review``); its reason stays in the player's file. Again
    is the same answer. 404 when the player has no flagged result in that match."""
    at = await _podium(request).search.accept(playerId, matchId)
    return AcceptedOut(playerId=playerId, matchId=matchId, acceptedAt=to_rfc3339(at))


class RejectedOut(BaseModel):
    playerId: str
    matchId: str
    rejectedAt: str = Field(description="when it was rejected: the first time, if again")
    points: int = Field(description="the result's points, taken out of every open window")


@router.post(
    "/v1/admin/players/{playerId}/results/{matchId}/reject",
    response_model=RejectedOut,
    responses=responses(401, 403, 404, 409, 422, 503),
)
async def reject_flag(request: Request, playerId: PlayerId, matchId: MatchId) -> RejectedOut:
    """Reject a flagged result after a look: it stays in the player's file, marked, and no
    longer counts. The player's totals in every open window it counted in are recounted
    without it by the store, in one transaction, and reach the boards through the log (a
    total may fall); a frozen window keeps its final standings. Again is the same answer
    and changes nothing. 404 when the player has no result in that match; 409 when it is
    not flagged, or was accepted."""
    r = await _podium(request).search.reject(playerId, matchId)
    return RejectedOut(
        playerId=playerId, matchId=matchId, rejectedAt=to_rfc3339(r.rejected_at), points=r.points
    )


class RecountOut(BaseModel):
    board: str
    window: str
    before: int = Field(description="the player's total there now")
    after: int | None = Field(description="without the result; null: they leave the window")


class RejectionOut(BaseModel):
    playerId: str
    matchId: str
    points: int = Field(description="the result's points")
    rejectedAt: str | None = Field(
        None, description="when it was rejected, if it was already (then nothing changes)"
    )
    recounts: list[RecountOut] = Field(
        description="each open window it counts in, the total now and after a reject"
    )


@router.get(
    "/v1/admin/players/{playerId}/results/{matchId}/reject",
    response_model=RejectionOut,
    responses=responses(401, 403, 404, 409, 422, 503),
)
async def preview_reject(request: Request, playerId: PlayerId, matchId: MatchId) -> RejectionOut:
    """What rejecting a flagged result would change, and nothing changed: each open window
    it counts in, with the player's total now and after (recounted from their other
    results). Refused as the reject would be (404, 409); a result rejected already answers
    its ``rejectedAt`` and no recount."""
    r = await _podium(request).search.preview_reject(playerId, matchId)
    return RejectionOut(
        playerId=playerId,
        matchId=matchId,
        points=r.points,
        rejectedAt=None if not r.applied else to_rfc3339(r.rejected_at),
        recounts=[
            RecountOut(
                board=c.board,
                window=c.window,
                before=c.before.total,
                after=None if c.after is None else c.after.total,
            )
            for c in r.recounts
        ],
    )
