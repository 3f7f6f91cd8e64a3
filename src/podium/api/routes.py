"""The v1 routes. Handlers translate HTTP to service calls and back; no rules live here."""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from podium import metrics
from podium.api import (
    cohorts,
    erasure,
    groups,
    keys,
    lookups,
    moderation,
    tournaments,
    upkeep,
    webhooks,
    windows,
)
from podium.api import schemas as s
from podium.api.auth import admin, game_server
from podium.api.auth import ops as ops_key
from podium.api.encode import page_json, rank_json
from podium.api.problems import problem, responses
from podium.api.ratelimit import limit_reads, read_limit
from podium.domain import cursor as cursors
from podium.domain.metadata import shown
from podium.domain.models import ApiKey, PlayerResult, Profile
from podium.domain.validation import ID_IS, anchored
from podium.domain.windows import to_epoch, to_rfc3339
from podium.service.health import PARTS
from podium.service.views import Entry
from podium.service.wiring import Service

log = logging.getLogger("podium.api")

# One router per kind of caller, so that a process can serve only some of them
# (``server.api``): players' reads, game servers' writes, the admin's calls, and operations.
reads = APIRouter(tags=["read"])
writes = APIRouter(tags=["write"])
admin_routes = APIRouter(tags=["admin"])
ops = APIRouter(tags=["ops"])
ROUTERS = {"read": reads, "write": writes, "admin": admin_routes, "ops": ops}
admin_routes.include_router(keys.router)  # create, list, revoke keys (api/keys.py)
admin_routes.include_router(webhooks.router)  # webhook deliveries (api/webhooks.py)
admin_routes.include_router(moderation.router)  # players found, a player's file
admin_routes.include_router(erasure.router)  # a player's data exported, erased (api/erasure.py)
reads.include_router(windows.router)  # past windows, their standings, history (api/windows.py)
reads.include_router(groups.router)  # a grouped board's groups (api/groups.py)
reads.include_router(lookups.router)  # players looked up by id (api/lookups.py)
admin_routes.include_router(tournaments.admin_router)  # tournaments (api/tournaments.py)
writes.include_router(tournaments.write_router)
reads.include_router(tournaments.read_router)
reads.include_router(cohorts.read_router)  # league cohorts and tiers (api/cohorts.py)
admin_routes.include_router(cohorts.admin_router)  # a league window's cohorts
admin_routes.include_router(upkeep.router)  # rebuilds and reshards running (api/upkeep.py)
PlayerId = Annotated[str, Path(pattern=s.ID, description=ID_IS)]
MatchId = Annotated[str, Path(pattern=s.ID, description=ID_IS)]
Board = Annotated[str, Path(pattern=s.BOARD, description="a board's name, e.g. week")]
WindowP = Annotated[str, Path(max_length=16, pattern=s.WINDOW, description=s.WINDOW_IS)]
GroupQ = Annotated[
    str | None,
    Query(pattern=s.COUNTRY, description="on a board split by country: the country"),
]
WindowQ = Annotated[
    str | None,
    Query(max_length=16, pattern=s.WINDOW, description=f"a past window: {s.WINDOW_IS}"),
]
CursorQ = Annotated[
    str | None,
    Query(
        max_length=cursors.MAX_LENGTH,
        pattern=anchored(cursors.PATTERN),
        description="a page's next or prev cursor: resumes beside that row, wherever it "
        "stands now (422: malformed, or of another board, group or window, or of one "
        "that has ended)",
    ),
]
SideQ = Annotated[
    int | None,
    Query(
        ge=0,
        le=50,
        description="rows on this side of the player's own, instead of neighbors "
        "(which still sets the other side)",
    ),
]
# What each kind of route may answer besides its success.
READ = responses(404, 422, 429, 503)
WRITE = responses(401, 403, 409, 413, 422, 429, 503)
ADMIN = responses(401, 403, 404, 413, 422, 503)


def _podium(request: Request) -> Service:
    return request.app.state.podium  # type: ignore[no-any-return]


def _json(body: bytes, cache_control: str) -> Response:
    """A body encoded by ``encode``: returned as is, FastAPI skips ``response_model``."""
    return Response(body, media_type="application/json", headers={"Cache-Control": cache_control})


def _entry(e: Entry) -> s.EntryOut:
    return s.EntryOut(
        rank=e.rank,
        playerId=e.player_id,
        points=e.points,
        name=e.name,
        avatar=e.avatar,
        globalRank=e.global_rank,
        metadata=shown(e.metadata),
    )


@writes.post(
    "/v1/matches/{matchId}/results",
    response_model=s.MatchOut,
    response_model_exclude_none=True,
    responses=WRITE,
)
async def post_results(
    body: s.MatchIn,
    request: Request,
    matchId: MatchId,
    key: Annotated[ApiKey, Depends(game_server)],
) -> s.MatchOut:
    return await record_match(request, key, matchId, body)


async def record_match(request: Request, key: ApiKey, match_id: str, body: s.MatchIn) -> s.MatchOut:
    """What ``POST /v1/matches/{id}/results`` does once its request is read: this route's,
    and the plain form's ahead of the stack (api/hot.py). The match waits its turn first
    (``PendingMatches``), or is turned away; its accept time runs from its arrival, so that
    the wait counts (a match turned away is not timed: it is a 503, counted by reason)."""
    arrived = time.perf_counter()
    async with request.app.state.pending_matches.admit(request.is_disconnected):
        try:
            totals = await _podium(request).matches.record_all(
                key,
                match_id,
                body.mode,
                to_epoch(body.endedAt),
                body.durationSeconds,
                [PlayerResult(r.playerId, r.points, r.metadata) for r in body.results],
            )
        finally:
            metrics.ACCEPT_SECONDS.observe(time.perf_counter() - arrived)
    metrics.MATCHES_ACCEPTED.inc()
    return s.MatchOut(
        matchId=match_id,
        players=[
            s.PlayerTotals(
                playerId=p,
                totals=boards,
                tournaments={
                    tid: s.TournamentTotal(points=e.points, attemptsLeft=e.attempts_left)
                    for tid, e in entered.items()
                }
                or None,
            )
            for p, (boards, entered) in totals.items()
        ],
    )


@reads.get(
    "/v1/boards",
    response_model=s.BoardsOut,
    dependencies=[Depends(read_limit)],
    responses=responses(429, 503),
)
async def list_boards(request: Request) -> s.BoardsOut:
    podium = _podium(request)
    now = int(podium.clock.now())
    out = []
    for b in podium.settings.boards:
        w = b.rule.window_at(now)
        nxt = b.rule.next_start(now)
        out.append(
            s.BoardOut(
                name=b.name,
                window=b.rule.kind.value,
                currentWindow=w.id if w else None,
                endsAt=to_rfc3339(w.end) if w and w.end is not None else None,
                nextStartsAt=to_rfc3339(nxt) if nxt is not None else None,
                aggregate=b.aggregate.value,
                order=b.order.value,
                ties=b.ties.value,
                exactTop=b.exact_top,
                modes=list(b.modes) if b.modes else None,
                groupBy=b.group_by,
            )
        )
    return s.BoardsOut(boards=out)


@reads.get(
    "/v1/boards/{board}",
    response_model=s.PageOut,
    response_model_exclude_none=True,
    responses=READ,
)
async def board_page(
    request: Request,
    board: Board,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=100)] = 100,
    window: WindowQ = None,
    group: GroupQ = None,
    cursor: CursorQ = None,
) -> Response:
    await limit_reads(request)
    podium = _podium(request)
    with metrics.READ_SECONDS.labels("page").time():
        page = await podium.reads.page(board, window, offset, limit, group, cursor)
        if cursor is None:
            body = request.app.state.encoded_pages.body(page, (board, page.window, offset, limit))
            if offset == 0 and window is None:  # served stale while pages are shed
                request.app.state.shed_gate.keep_page(request.scope, body)
        else:
            body = page_json(page)
    # Every process holds a page for page_cache_s, the same for everyone: say so.
    return _json(body, f"public, max-age={int(podium.settings.server.page_cache_s)}")


@reads.get(
    "/v1/boards/{board}/players/{playerId}",
    response_model=s.RankOut,
    response_model_exclude_none=True,
    responses=READ,
)
async def player_rank(
    request: Request,
    board: Board,
    playerId: PlayerId,
    neighbors: Annotated[int, Query(ge=0, le=50)] = 2,
    window: WindowQ = None,
    group: GroupQ = None,
    above: SideQ = None,
    below: SideQ = None,
) -> Response:
    await limit_reads(request)
    with metrics.READ_SECONDS.labels("rank").time():
        r = await _podium(request).reads.player_rank(
            board, playerId, neighbors, window, group, above, below
        )
        body = rank_json(r)
    return _json(body, "no-cache")


@reads.get(
    "/v1/boards/{board}/players/{playerId}/friends",
    response_model=s.PageOut,
    dependencies=[Depends(read_limit)],
    response_model_exclude_none=True,
    responses=READ,
)
async def friends_board(
    request: Request,
    board: Board,
    playerId: PlayerId,
    window: WindowQ = None,
    group: GroupQ = None,
) -> Response:
    with metrics.READ_SECONDS.labels("friends").time():
        page = await _podium(request).reads.friends_page(board, playerId, window, group)
    return _json(page_json(page), "no-cache")


@reads.get(
    "/v1/boards/{board}/distribution",
    response_model=s.DistributionOut,
    dependencies=[Depends(read_limit)],
    responses=READ,
)
async def distribution(
    request: Request,
    response: Response,
    board: Board,
    buckets: Annotated[int, Query(ge=1, le=100)] = 20,
    window: WindowQ = None,
    group: GroupQ = None,
) -> s.DistributionOut:
    with metrics.READ_SECONDS.labels("distribution").time():
        d = await _podium(request).reads.distribution(board, window, buckets, group)
    response.headers["Cache-Control"] = "public, max-age=1"
    return s.DistributionOut(
        board=d.board,
        window=d.window,
        asOf=to_rfc3339(d.as_of),
        players=d.players,
        exact=d.exact,
        buckets=[s.BucketOut(low=b.low, high=b.high, count=b.count) for b in d.buckets],
    )


@admin_routes.put(
    "/v1/players/{playerId}/profile",
    status_code=204,
    dependencies=[Depends(admin)],
    responses=ADMIN,
)
async def put_profile(request: Request, playerId: PlayerId, body: s.ProfileIn) -> Response:
    # Fields left out keep their value; an explicit null clears one.
    profile = Profile(playerId, body.name, body.avatar, body.country)
    await _podium(request).player_admin.set_profile(profile, set(body.model_fields_set))
    return Response(status_code=204)


@admin_routes.put(
    "/v1/players/{playerId}/friends",
    status_code=204,
    dependencies=[Depends(admin)],
    responses=ADMIN,
)
async def put_friends(request: Request, playerId: PlayerId, body: s.FriendsIn) -> Response:
    await _podium(request).player_admin.set_friends(playerId, body.friends)
    return Response(status_code=204)


# A ban recorded whose boards wait for the index: 202, not a 503 that says nothing was.
BAN_PENDING: dict[int | str, dict[str, Any]] = {
    202: {
        "model": s.BanPendingOut,
        "description": "recorded; the boards follow once the rank index is back",
    }
}


@admin_routes.post(
    "/v1/admin/players/{playerId}/ban",
    status_code=204,
    dependencies=[Depends(admin)],
    responses={**BAN_PENDING, **ADMIN},
)
async def ban(request: Request, playerId: PlayerId, body: s.BanIn) -> Response:
    if await _podium(request).player_admin.ban(playerId, body.reason):
        return Response(status_code=204)
    detail = (
        f"the ban of {playerId} is recorded, and their results are no longer counted; the "
        "rank index is unavailable, so the boards drop them once it is back (a retry is "
        "safe, and does it at once)"
    )
    return _pending(playerId, True, detail)


@admin_routes.delete(
    "/v1/admin/players/{playerId}/ban",
    status_code=204,
    dependencies=[Depends(admin)],
    responses={**BAN_PENDING, **ADMIN},
)
async def unban(request: Request, playerId: PlayerId) -> Response:
    if await _podium(request).player_admin.unban(playerId):
        return Response(status_code=204)
    detail = (
        f"the unban of {playerId} is recorded; their totals could not be sent to the boards "
        "yet, and return to them once the store and the index answer again"
    )
    return _pending(playerId, False, detail)


def _pending(player_id: str, banned: bool, detail: str) -> Response:
    out = s.BanPendingOut(playerId=player_id, banned=banned, detail=detail)
    return Response(out.model_dump_json(), status_code=202, media_type="application/json")


@admin_routes.post(
    "/v1/admin/boards/{board}/windows/{window}/freeze",
    response_model=s.FrozenOut,
    dependencies=[Depends(admin)],
    responses=ADMIN,
)
async def freeze(request: Request, board: Board, window: WindowP) -> s.FrozenOut:
    froze, info = await _podium(request).board_admin.freeze(board, window)
    return s.FrozenOut(
        board=info.board,
        window=info.window,
        frozenNow=froze,
        frozenAt=to_rfc3339(info.frozen_at),
        players=info.players,
        archive=info.archive,
        sha256=info.checksum,
    )


@admin_routes.get(
    "/v1/admin/review",
    response_model=s.ReviewOut,
    dependencies=[Depends(admin)],
    response_model_exclude_none=True,
    responses=ADMIN,
)
async def review(
    request: Request,
    board: Annotated[str, Query(pattern=s.BOARD)],
    top: Annotated[int, Query(ge=1, le=1000)] = 100,
    window: WindowQ = None,
    group: GroupQ = None,
) -> s.ReviewOut:
    page, flagged = await _podium(request).board_admin.review(board, window, top, group)
    per_player = Counter(f.player_id for f in flagged)
    return s.ReviewOut(
        board=page.board,
        window=page.window,
        top=[
            s.ReviewEntryOut(**_entry(e).model_dump(), flagged=per_player[e.player_id])
            for e in page.entries
        ],
        flagged=[
            s.FlaggedOut(
                playerId=f.player_id,
                matchId=f.match_id,
                mode=f.mode,
                points=f.points,
                endedAt=to_rfc3339(f.ended_at),
                recordedAt=to_rfc3339(f.recorded_at),
                reason=f.reason,
            )
            for f in flagged
        ],
    )


@ops.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@ops.get(
    "/readyz", response_model=s.ReadyOut, response_model_exclude_none=True, responses=responses(503)
)
async def readyz(request: Request) -> Any:
    """Every part this process uses, asked at once; each one down named (``health.py``):
    the store or the index down is a 503, the change log down alone is "degraded"."""
    found = await _podium(request).health.readiness()
    down = [part for part in PARTS if part in found.down]
    for part in down:
        log.warning("GET /readyz: %s is down: %s", part, found.down[part])
    if not found.ready:
        return problem(503, "Not ready", found.detail(), {"Retry-After": "1"}, down=down)
    if down:
        return s.ReadyOut(status="degraded", down=down, detail=found.detail())
    return s.ReadyOut(status="ready")


@ops.get("/metrics", include_in_schema=False, dependencies=[Depends(ops_key)])
async def prometheus() -> Response:
    return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
