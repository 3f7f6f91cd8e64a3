"""The tournament routes: the admin's create, list and end; a game server's join; and the
reads, in the shapes of a board's (a page, a rank with neighbors, a friends board).

Their bodies are defined here, beside the routes, since no other route uses them. Handlers
translate HTTP to the service's ``tournaments`` and back; no rules live here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from annotated_types import Ge, Le
from fastapi import APIRouter, Depends, Path, Query, Request, Response
from pydantic import BaseModel, BeforeValidator, Field, StrictBool, StrictInt

from podium.api import schemas as s
from podium.api.auth import admin, game_server
from podium.api.encode import page_json, rank_json
from podium.api.problems import responses
from podium.api.ratelimit import limit_reads, read_limit
from podium.domain import cursor as cursors
from podium.domain import tournaments as d
from podium.domain.boards import Aggregate, Order, Ties
from podium.domain.metadata import canonical
from podium.domain.metadata import shown as shown_metadata
from podium.domain.models import ApiKey
from podium.domain.validation import ID_IS, anchored
from podium.domain.windows import to_epoch, to_rfc3339
from podium.service.tournaments import CURSOR as LIST_CURSOR
from podium.service.wiring import Service

admin_router = APIRouter(tags=["admin"], dependencies=[Depends(admin)])
write_router = APIRouter(tags=["write"])
read_router = APIRouter(tags=["read"])

TournamentId = Annotated[str, Path(pattern=s.ID, description=f"a tournament's id: {ID_IS}")]
PlayerId = Annotated[str, Path(pattern=s.ID, description=ID_IS)]
RunQ = Annotated[
    str | None,
    Query(
        max_length=13,
        pattern=r"^\d{8}T\d{4}$",
        description="a run of the tournament: its start, 20261204T1800 (UTC); its own by default",
    ),
]
CursorQ = Annotated[
    str | None,
    Query(
        max_length=cursors.MAX_LENGTH,
        pattern=anchored(cursors.PATTERN),
        description="a page's next or prev cursor: resumes beside that row",
    ),
]
SideQ = Annotated[int | None, Query(ge=0, le=50, description="rows on this side instead")]
READ = responses(404, 422, 429, 503)


# Whole numbers bounded on the number itself, before the whole-number check (737.0 is 737),
# so that the document publishes the bounds (as minimum and maximum) on the integer's branch
# of an optional field.
Entrants = Annotated[StrictInt, Ge(1), Le(d.MAX_ENTRANTS), BeforeValidator(s._whole)]
Attempts = Annotated[StrictInt, Ge(1), Le(d.MAX_ATTEMPTS), BeforeValidator(s._whole)]
Seconds = Annotated[StrictInt, Ge(1), Le(d.MAX_DURATION_S), BeforeValidator(s._whole)]


class TournamentIn(s._In):
    id: str = Field(pattern=s.ID, description=ID_IS)
    title: Annotated[str, BeforeValidator(s.shown)] = Field(min_length=1, max_length=d.TITLE_MAX)
    modes: list[str] = Field(min_length=1, max_length=32)
    aggregate: Literal["sum", "best", "last"] = "sum"
    order: Literal["desc", "asc"] = "desc"
    ties: Literal["first", "shared"] = "first"
    startsAt: s.Rfc3339 | None = Field(
        default=None,
        description="required without a schedule; with one, the earliest a run starts "
        "(default: now)",
    )
    endsAt: s.Rfc3339 | None = Field(
        default=None,
        description="required without a schedule; with one, no run starts at or after it "
        "(default: never). A rule no schema can state (422 when broken): after startsAt, and "
        f"without a schedule at most {d.MAX_DURATION_S} s after it",
    )
    schedule: str | None = Field(
        default=None,
        max_length=200,
        description="recurring: a run at every start of this cron expression (5 fields, UTC)",
    )
    durationSeconds: Seconds | None = Field(
        default=None, description="recurring: each run's length"
    )
    joinRequired: StrictBool = False
    maxEntrants: Entrants | None = None
    maxAttempts: Attempts | None = Field(default=None, description="results that count per player")
    category: str | None = Field(default=None, pattern=anchored(d.CATEGORY))
    metadata: s.Metadata = None


class TournamentOut(BaseModel):
    id: str
    title: str
    modes: list[str]
    aggregate: Literal["sum", "best", "last"]
    order: Literal["desc", "asc"]
    ties: Literal["first", "shared"]
    state: Literal["upcoming", "live", "ended"]
    startsAt: str
    endsAt: str | None = Field(description="null: a recurring tournament with no end")
    endedAt: str | None = Field(default=None, description="when the admin ended it early")
    schedule: str | None = None
    durationSeconds: int | None = None
    run: str | None = Field(
        description="the open run's id, or the last to begin (for ?run=); null before the first"
    )
    nextStartsAt: str | None = Field(default=None, description="when its next run starts")
    joinRequired: bool
    entrants: int = Field(description="players who joined")
    maxEntrants: int | None = None
    maxAttempts: int | None = None
    category: str | None = None
    metadata: dict[str, Any] | None = None


class TournamentsOut(BaseModel):
    tournaments: list[TournamentOut]
    next: str | None = Field(
        default=None, description="the cursor of the next page; absent on the last"
    )


class JoinIn(s._In):
    playerId: str = Field(pattern=s.ID, description=ID_IS)


class JoinOut(BaseModel):
    tournament: TournamentOut
    playerId: str
    joined: bool = Field(description="false: the player had joined already (the same join)")


class RemovedOut(BaseModel):
    tournament: TournamentOut
    playerId: str


class TournamentRankOut(s.RankOut):
    attemptsLeft: int | None = Field(default=None, description="absent: no maxAttempts")


def _podium(request: Request) -> Service:
    return request.app.state.podium  # type: ignore[no-any-return]


def _out(t: d.Tournament, now: float) -> TournamentOut:
    state = t.state(now)
    run = t.run_at(now)
    nxt = t.rule().next_start(int(now)) if state is not d.State.ENDED else None
    return TournamentOut(
        id=t.id,
        title=t.title,
        modes=list(t.modes),
        aggregate=t.aggregate.value,
        order=t.order.value,
        ties=t.ties.value,
        state=state.value,
        startsAt=to_rfc3339(t.starts_at),
        endsAt=None if t.ends_at == d.FOREVER else to_rfc3339(t.ends_at),
        endedAt=None if t.ended_early is None else to_rfc3339(t.ended_early),
        schedule=t.schedule,
        durationSeconds=t.duration_s,
        run=None if run is None else run.id,
        nextStartsAt=None if nxt is None else to_rfc3339(nxt),
        joinRequired=t.join_required,
        entrants=t.entrants,
        maxEntrants=t.max_entrants,
        maxAttempts=t.max_attempts,
        category=t.category,
        metadata=shown_metadata(t.metadata),
    )


@admin_router.post(
    "/v1/admin/tournaments",
    status_code=201,
    response_model=TournamentOut,
    responses={
        200: {"model": TournamentOut, "description": "the same definition again: the one there is"},
        **responses(401, 403, 409, 413, 422, 503),
    },
)
async def create_tournament(request: Request, response: Response, body: TournamentIn) -> Any:
    podium = _podium(request)
    starts, ends = podium.tournaments.span(
        None if body.startsAt is None else to_epoch(body.startsAt),
        None if body.endsAt is None else to_epoch(body.endsAt),
        body.schedule is not None,
    )
    t = d.Tournament(
        body.id,
        body.title,
        tuple(body.modes),
        Aggregate(body.aggregate),
        Order(body.order),
        Ties(body.ties),
        starts,
        ends,
        body.joinRequired,
        body.maxEntrants,
        body.maxAttempts,
        body.category,
        None if body.metadata is None else canonical(body.metadata),
        schedule=body.schedule,
        duration_s=body.durationSeconds,
    )
    stored, created = await podium.tournaments.create(t)
    response.status_code = 201 if created else 200
    return _out(stored, podium.clock.now())


@admin_router.delete(
    "/v1/admin/tournaments/{tournamentId}",
    response_model=TournamentOut,
    responses=responses(401, 403, 404, 422, 503),
)
async def end_tournament(request: Request, tournamentId: TournamentId) -> TournamentOut:
    podium = _podium(request)
    return _out(await podium.tournaments.end(tournamentId), podium.clock.now())


@admin_router.delete(
    "/v1/admin/tournaments/{tournamentId}/entrants/{playerId}",
    response_model=RemovedOut,
    responses=responses(401, 403, 404, 422, 503),
)
async def remove_entrant(
    request: Request, tournamentId: TournamentId, playerId: PlayerId
) -> RemovedOut:
    """Take a player out of the entrants: the place is free again, and where joining is
    required their results count there no longer (what they scored stays); 404 for a
    player who has not joined."""
    podium = _podium(request)
    t = await podium.tournaments.remove_entrant(tournamentId, playerId)
    return RemovedOut(tournament=_out(t, podium.clock.now()), playerId=playerId)


class EntrantOut(BaseModel):
    playerId: str
    joinedAt: str


class EntrantsOut(BaseModel):
    tournament: str
    entrants: list[EntrantOut]
    next: str | None = Field(default=None, description="``after`` of the next page")


@admin_router.get(
    "/v1/admin/tournaments/{tournamentId}/entrants",
    response_model=EntrantsOut,
    response_model_exclude_none=True,
    responses=responses(401, 403, 404, 422, 503),
)
async def list_entrants(
    request: Request,
    tournamentId: TournamentId,
    after: Annotated[
        str,
        Query(
            max_length=64,
            pattern=r"^[^\x00-\x1f\x7f]*$",
            description="the last player id of the previous page",
        ),
    ] = "",
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> EntrantsOut:
    """Who joined, by player id, a page at a time; 404 for an unknown tournament."""
    found = await _podium(request).tournaments.entrants(tournamentId, after, limit + 1)
    page = found[:limit]
    return EntrantsOut(
        tournament=tournamentId,
        entrants=[EntrantOut(playerId=p, joinedAt=to_rfc3339(t)) for p, t in page],
        next=page[-1][0] if len(found) > limit else None,
    )


@read_router.get(
    "/v1/tournaments",
    response_model=TournamentsOut,
    response_model_exclude_unset=True,  # ``next`` absent on the last page; nulls stay
    dependencies=[Depends(read_limit)],
    responses=responses(422, 429, 503),
)
async def list_tournaments(
    request: Request,
    category: Annotated[str | None, Query(pattern=anchored(d.CATEGORY))] = None,
    state: Annotated[Literal["upcoming", "live", "ended"] | None, Query()] = None,
    cursor: Annotated[
        str | None,
        Query(
            pattern=LIST_CURSOR,
            max_length=100,
            description="the `next` of the previous page, as it was given",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> TournamentsOut:
    """Tournaments by start, a page at a time: follow ``next`` until it is absent."""
    podium = _podium(request)
    listed = await podium.tournaments.listing(
        category, None if state is None else d.State(state), cursor, limit
    )
    now = podium.clock.now()
    out = TournamentsOut(tournaments=[_out(t, now) for t in listed.tournaments])
    if listed.next is not None:
        out.next = listed.next
    return out


@read_router.get(
    "/v1/tournaments/{tournamentId}",
    response_model=TournamentOut,
    dependencies=[Depends(read_limit)],
    responses=READ,
)
async def get_tournament(request: Request, tournamentId: TournamentId) -> TournamentOut:
    podium = _podium(request)
    return _out(await podium.tournaments.get(tournamentId), podium.clock.now())


@write_router.post(
    "/v1/tournaments/{tournamentId}/entrants",
    status_code=201,
    response_model=JoinOut,
    responses={
        200: {"model": JoinOut, "description": "joined already: the same join"},
        **responses(401, 403, 404, 409, 413, 422, 503),
    },
)
async def join_tournament(
    request: Request,
    response: Response,
    tournamentId: TournamentId,
    body: JoinIn,
    key: Annotated[ApiKey, Depends(game_server)],
) -> JoinOut:
    """Join a player; 403 for a key none of whose modes the tournament counts."""
    podium = _podium(request)
    t, joined = await podium.tournaments.join(tournamentId, body.playerId, key)
    response.status_code = 201 if joined else 200
    return JoinOut(tournament=_out(t, podium.clock.now()), playerId=body.playerId, joined=joined)


@read_router.get(
    "/v1/tournaments/{tournamentId}/board",
    response_model=s.PageOut,
    response_model_exclude_none=True,
    responses=READ,
)
async def tournament_page(
    request: Request,
    tournamentId: TournamentId,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=100)] = 100,
    run: RunQ = None,
    cursor: CursorQ = None,
) -> Response:
    await limit_reads(request)
    page = await _podium(request).tournaments.page(tournamentId, run, offset, limit, cursor)
    return Response(page_json(page), media_type="application/json")


@read_router.get(
    "/v1/tournaments/{tournamentId}/players/{playerId}",
    response_model=TournamentRankOut,
    response_model_exclude_none=True,
    responses=READ,
)
async def tournament_rank(
    request: Request,
    tournamentId: TournamentId,
    playerId: PlayerId,
    neighbors: Annotated[int, Query(ge=0, le=50)] = 2,
    run: RunQ = None,
    above: SideQ = None,
    below: SideQ = None,
) -> Response:
    await limit_reads(request)
    found, left = await _podium(request).tournaments.rank(
        tournamentId, playerId, neighbors, run, above, below
    )
    body = rank_json(found)
    if left is not None:  # one more field, after the rank's own: "attemptsLeft"
        body = body[:-1] + b',"attemptsLeft":' + str(left).encode() + b"}"
    return Response(body, media_type="application/json", headers={"Cache-Control": "no-cache"})


@read_router.get(
    "/v1/tournaments/{tournamentId}/players/{playerId}/friends",
    response_model=s.PageOut,
    response_model_exclude_none=True,
    dependencies=[Depends(read_limit)],
    responses=READ,
)
async def tournament_friends(
    request: Request, tournamentId: TournamentId, playerId: PlayerId, run: RunQ = None
) -> Response:
    page = await _podium(request).tournaments.friends(tournamentId, playerId, run)
    return Response(page_json(page), media_type="application/json")
