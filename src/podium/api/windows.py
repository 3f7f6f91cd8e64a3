"""The routes of past windows: a board's windows, a frozen one's standings file, a player's
history. HTTP to ``Service.past`` calls and back (``past.py``); their bodies are defined
here, beside the routes, since no other route uses them."""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from podium.api import schemas as s
from podium.api.problems import responses
from podium.api.ratelimit import read_limit
from podium.domain.validation import ID_IS
from podium.domain.windows import to_rfc3339
from podium.service.reads.past import Download, Format, WindowList
from podium.service.wiring import Service

router = APIRouter(tags=["read"], dependencies=[Depends(read_limit)])
Board = Annotated[str, Path(pattern=s.BOARD, description="a board's name, e.g. week")]
WindowP = Annotated[str, Path(max_length=16, pattern=s.WINDOW, description=s.WINDOW_IS)]
PlayerId = Annotated[str, Path(pattern=s.ID, description=ID_IS)]
GroupQ = Annotated[
    str | None,
    Query(pattern=s.COUNTRY, description="on a board split by country: the country"),
]
CursorQ = Annotated[
    str | None,
    Query(max_length=200, description="the `next` of the previous page, as it was given"),
]
FormatQ = Annotated[
    Literal["csv", "jsonl"] | None,
    Query(description="csv or jsonl; without it, the Accept header chooses (CSV first)"),
]
TournamentId = Annotated[str, Path(pattern=s.ID, description=f"a tournament's id: {ID_IS}")]
RunP = Annotated[
    str,
    Path(max_length=13, pattern=r"^\d{8}T\d{4}$", description="a run's id: its start (UTC)"),
]
CSV = "text/csv"
JSONL = "application/x-ndjson"


class WindowOut(BaseModel):
    id: str = Field(description="the window's id; on a grouped board with its group: 2026-W44@FR")
    group: str | None = None
    start: str
    end: str | None = Field(None, description="absent on an all-time board")
    state: Literal["open", "closed", "frozen"] = Field(
        description="open; closed (still taking late results, or about to be frozen); frozen"
    )
    players: int | None = Field(
        None, description="absent only for a closed window whose index key has expired"
    )
    frozenAt: str | None = None
    sha256: str | None = Field(None, description="of the standings file, once frozen")
    standings: str | None = Field(None, description="where to download the standings file")


class WindowsOut(BaseModel):
    board: str
    windows: list[WindowOut]
    next: str | None = Field(None, description="the cursor of the next page; absent on the last")


class PlayedOut(BaseModel):
    window: str
    group: str | None = None
    start: str
    end: str | None = None
    rank: int
    points: int
    exact: bool = Field(description="always true: final standings are exact")
    source: Literal["standings", "archive"] = Field(
        description="standings: the kept top in the store; archive: the window's standings "
        "file, which holds every player"
    )


class HistoryOut(BaseModel):
    playerId: str
    board: str
    windows: list[PlayedOut]
    next: str | None = None


def _podium(request: Request) -> Service:
    return request.app.state.podium  # type: ignore[no-any-return]


@router.get(
    "/v1/boards/{board}/windows",
    response_model=WindowsOut,
    response_model_exclude_none=True,
    responses=responses(404, 422, 429, 503),
)
async def list_windows(
    request: Request,
    board: Board,
    group: GroupQ = None,
    cursor: CursorQ = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> WindowsOut:
    """The board's windows, newest first: the open one, closed ones not frozen yet, and
    every frozen one with its standings file's sha256."""
    listed = await _podium(request).past.windows(board, group, cursor, limit)
    return _listed(listed, f"/v1/boards/{board}/windows")


def _listed(listed: WindowList, base: str) -> WindowsOut:
    """A list of windows (or of a tournament's runs), each frozen one with the path of its
    standings under ``base``."""
    out = []
    for w in listed.windows:
        frozen = w.state == "frozen"
        out.append(
            WindowOut(
                id=w.id,
                group=w.group,
                start=to_rfc3339(w.start),
                end=None if w.end is None else to_rfc3339(w.end),
                state=w.state,
                players=w.players,
                frozenAt=None if w.frozen_at is None else to_rfc3339(w.frozen_at),
                sha256=w.sha256,
                standings=f"{base}/{w.id}/standings" if frozen else None,
            )
        )
    return WindowsOut(board=listed.board, windows=out, next=listed.next)


STANDINGS_OK: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "every player of the frozen window in board order: CSV (columns "
        "position, rank, player_id, points, reached_at in epoch seconds) or JSON lines. "
        "ETag is the standings file's sha256 (with -csv or -jsonl when the body is decoded "
        "from it); a CSV sent gzip-encoded is the file itself, and Repr-Digest its sha256",
        "content": {
            CSV: {"schema": {"type": "string"}},
            JSONL: {"schema": {"type": "string"}},
        },
        "headers": {
            "ETag": {"schema": {"type": "string"}},
            "Repr-Digest": {"schema": {"type": "string"}},
        },
    },
}


@router.get(
    "/v1/boards/{board}/windows/{window}/standings",
    response_class=StreamingResponse,
    responses={**STANDINGS_OK, **responses(404, 409, 422, 429, 503)},
)
async def standings(
    request: Request,
    board: Board,
    window: WindowP,
    format: FormatQ = None,
) -> StreamingResponse:
    """A frozen window's final standings, streamed from its file: a window not frozen yet
    is a 409."""
    fmt, gzip = _chosen(request, format)
    return _download(await _podium(request).past.standings(board, window, fmt, gzip), fmt)


def _chosen(request: Request, format: Literal["csv", "jsonl"] | None) -> tuple[Format, bool]:
    """The format asked for (by ``?format=`` or Accept), and whether to send the file
    itself, gzip-encoded."""
    fmt: Format = format or _accepted(request.headers.get("accept", ""))
    return fmt, fmt == "csv" and _takes_gzip(request.headers.get("accept-encoding", ""))


def _download(d: Download, fmt: Format) -> StreamingResponse:
    headers = {
        "ETag": f'"{d.sha256}"' if d.gzip else f'"{d.sha256}-{fmt}"',
        "Cache-Control": "public, max-age=3600",  # frozen standings never change
        "Vary": "Accept, Accept-Encoding",
        "Content-Disposition": f'attachment; filename="{d.board}-{d.window}.{fmt}"',
    }
    if d.gzip:
        headers["Content-Encoding"] = "gzip"
        digest = base64.b64encode(bytes.fromhex(d.sha256)).decode()
        headers["Repr-Digest"] = f"sha-256=:{digest}:"
    return StreamingResponse(d.body, media_type=d.media_type, headers=headers)


# -- a tournament's runs: its windows, in the same shapes (``Tournaments.runs``) ---------------


@router.get(
    "/v1/tournaments/{tournamentId}/runs",
    response_model=WindowsOut,
    response_model_exclude_none=True,
    responses=responses(404, 422, 429, 503),
)
async def list_runs(
    request: Request,
    tournamentId: TournamentId,
    cursor: CursorQ = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> WindowsOut:
    """The tournament's runs, newest first, as a board's windows are listed (``board`` is
    the tournament's id): the open run, closed ones not frozen yet, and every frozen one
    with its standings file's sha256."""
    listed = await _podium(request).tournaments.runs(tournamentId, cursor, limit)
    return _listed(listed, f"/v1/tournaments/{tournamentId}/runs")


@router.get(
    "/v1/tournaments/{tournamentId}/runs/{run}/standings",
    response_class=StreamingResponse,
    responses={**STANDINGS_OK, **responses(404, 409, 422, 429, 503)},
)
async def run_standings(
    request: Request,
    tournamentId: TournamentId,
    run: RunP,
    format: FormatQ = None,
) -> StreamingResponse:
    """A frozen run's final standings, streamed from its file, as a board window's: a run
    not frozen yet is a 409, one that is not a run of the tournament a 404."""
    fmt, gzip = _chosen(request, format)
    d = await _podium(request).tournaments.standings(tournamentId, run, fmt, gzip)
    return _download(d, fmt)


@router.get(
    "/v1/players/{playerId}/history",
    response_model=HistoryOut,
    response_model_exclude_none=True,
    responses=responses(404, 422, 429, 503),
)
async def history(
    request: Request,
    playerId: PlayerId,
    board: Annotated[str, Query(pattern=s.BOARD, description="a board's name, e.g. week")],
    group: GroupQ = None,
    cursor: CursorQ = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
) -> HistoryOut:
    """The player's final rank and points in each frozen window of the board they played,
    newest first; on a grouped board in the group they were counted in (or ``group`` only)."""
    h = await _podium(request).past.history(playerId, board, group, cursor, limit)
    return HistoryOut(
        playerId=h.player_id,
        board=h.board,
        windows=[
            PlayedOut(
                window=p.window,
                group=p.group,
                start=to_rfc3339(p.start),
                end=None if p.end is None else to_rfc3339(p.end),
                rank=p.rank,
                points=p.points,
                exact=True,
                source=p.source,
            )
            for p in h.windows
        ],
        next=h.next,
    )


def _weights(header: str) -> dict[str, float]:
    """Each media type or coding of an Accept-style header, with its q."""
    out: dict[str, float] = {}
    for part in header.split(","):
        name, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for p in params:
            if p.startswith("q="):
                try:
                    q = float(p[2:])
                except ValueError:
                    q = 0.0
        if name:
            out[name.lower()] = q
    return out


def _accepted(accept: str) -> Format:
    """JSON lines when Accept prefers them to CSV; CSV otherwise (and for */*)."""
    w = _weights(accept)
    any_q = w.get("*/*", 0.0)
    jsonl = max(w.get(JSONL, 0.0), w.get("application/jsonl", 0.0))
    csv = w.get(CSV, w.get("text/*", any_q))
    return "jsonl" if jsonl > csv else "csv"


def _takes_gzip(accept_encoding: str) -> bool:
    w = _weights(accept_encoding)
    return w.get("gzip", w.get("*", 0.0)) > 0
