"""Request and response bodies: camelCase JSON, validated strictly."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
)

from podium.domain import validation as v
from podium.domain.validation import anchored, avatar_problem, text_problem
from podium.domain.windows import GROUP_SEP

# The match report's bodies and types are read by the ingest role too (service/reports.py).
from podium.service.reports import MatchIn as MatchIn
from podium.service.reports import Metadata as Metadata
from podium.service.reports import ResultIn as ResultIn
from podium.service.reports import Rfc3339 as Rfc3339
from podium.service.reports import WholeNumber as WholeNumber
from podium.service.reports import _whole as _whole  # api/tournaments.py's numbers

# JSON Schema (ECMA 262) patterns, as the OpenAPI document publishes them (validation.py
# holds each rule once; the service checks them again with fullmatch).
ID = anchored(v.ID)
COUNTRY = anchored(v.COUNTRY)  # ISO 3166-1 alpha-2
BOARD = r"^[a-z0-9][a-z0-9_-]{0,31}$"  # as config.NAME_RE
# A window id's shape; the service checks it against the board's own kind (a week board
# takes 2026-W44, a day board 2026-10-28, ...) and says which it wanted.
WINDOW = anchored(rf"[0-9A-Za-z-]{{1,13}}({GROUP_SEP}{v.COUNTRY})?")
AVATAR = v.AVATAR
WINDOW_IS = (
    "a window id of the board's kind: 2026-10-28, 2026-W44, 2026-10, S3, 20261204T1800 (a "
    "scheduled window's start, UTC); @FR for a group"
)


def shown(value: Any) -> Any:
    """A name people read: a player's, a key's (``text_problem``)."""
    why = text_problem(value) if isinstance(value, str) else None
    if why is not None:
        raise ValueError(why)
    return value


def _avatar(value: Any) -> Any:
    if isinstance(value, str):
        why = avatar_problem(value)
        if why is None and not re.fullmatch(AVATAR, value):
            why = "must be an https:// URL"
        if why is not None:
            raise ValueError(why)
    return value


PlayerIdIn = Annotated[str, Field(pattern=ID)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TournamentTotal(BaseModel):
    points: int
    attemptsLeft: int | None = Field(default=None, description="absent: no maxAttempts")


class PlayerTotals(BaseModel):
    playerId: str
    totals: dict[str, int]
    tournaments: dict[str, TournamentTotal] | None = Field(
        default=None, description="by tournament id, where the result counted for one"
    )


class MatchOut(BaseModel):
    matchId: str
    players: list[PlayerTotals]


class EntryOut(BaseModel):
    rank: int
    playerId: str
    points: int
    name: str | None = None
    avatar: str | None = None
    globalRank: int | None = None
    globalExact: bool | None = None
    metadata: dict[str, Any] | None = None


class PageOut(BaseModel):
    board: str
    window: str
    asOf: str = Field(
        description="the moment the page is true of: when it was read, or earlier: a split "
        "board's snapshot, the last page read while the index is out, or the board marks' "
        "watermark while the board is behind the store (server.board_behind_s)"
    )
    entries: list[EntryOut]
    next: str | None = Field(
        default=None,
        description="a cursor: ?cursor= resumes behind the last entry (absent: none further)",
    )
    prev: str | None = Field(
        default=None, description="a cursor: ?cursor= resumes ahead of the first entry"
    )


class RankOut(BaseModel):
    board: str
    window: str
    rank: int
    exact: bool
    points: int
    rankLow: int | None = Field(
        default=None,
        description="an estimate's interval: the player's true rank at the moment of the "
        "answer is at least this, and at most rankHigh (the counts of asOf, widened by every "
        "score written since); absent on an exact rank",
    )
    rankHigh: int | None = Field(
        default=None, description="an estimate's interval: the true rank is at most this"
    )
    topPercent: float | None = None
    asOf: str | None = Field(
        default=None,
        description="an estimate's counts were taken then (its interval holds at the "
        "answer); on an exact rank, present only when the board is behind the store "
        "(server.board_behind_s): the rank and its neighbors are true of the board as of "
        "then, every match acknowledged before it counted; absent, the rank speaks for the "
        "moment of the answer",
    )
    neighbors: list[EntryOut]


class BoardOut(BaseModel):
    name: str
    window: str
    currentWindow: str | None
    endsAt: str | None = Field(
        description="when the current window closes (RFC 3339 UTC); null when none is open, "
        "and on all-time boards"
    )
    nextStartsAt: str | None = Field(
        description="when the next window opens (RFC 3339 UTC): the current one's end on a "
        "calendar board, a schedule's next start; null on all-time boards"
    )
    aggregate: str
    order: str
    ties: str
    exactTop: int
    modes: list[str] | None
    groupBy: str | None = None


class BoardsOut(BaseModel):
    boards: list[BoardOut]


class ReadyOut(BaseModel):
    """``GET /readyz`` when this process can serve: every part answered ("ready"), or only
    the change log did not ("degraded": results are still accepted, the outbox holds them)."""

    status: Literal["ready", "degraded"]
    down: list[str] | None = Field(
        default=None, description="the parts that did not answer, by name"
    )
    detail: str | None = None


class BucketOut(BaseModel):
    low: int
    high: int
    count: int


class DistributionOut(BaseModel):
    board: str
    window: str
    asOf: str
    players: int
    exact: bool = True
    buckets: list[BucketOut]


class FrozenOut(BaseModel):
    board: str
    window: str
    frozenNow: bool  # false: it was frozen already, and this call changed nothing
    frozenAt: str
    players: int
    archive: str | None
    sha256: str | None


class FlaggedOut(BaseModel):
    playerId: str
    matchId: str
    mode: str
    points: int
    endedAt: str
    recordedAt: str
    reason: str


class ReviewEntryOut(EntryOut):
    flagged: int  # flagged results of this player among those listed


class ReviewOut(BaseModel):
    board: str
    window: str
    top: list[ReviewEntryOut]
    flagged: list[FlaggedOut]


class ProfileIn(_In):
    # Their patterns are published by api/contract.py (built from the rules at start).
    name: Annotated[str | None, BeforeValidator(shown)] = Field(
        default=None, min_length=1, max_length=v.NAME_MAX
    )
    avatar: Annotated[str | None, BeforeValidator(_avatar)] = Field(
        default=None, max_length=v.AVATAR_MAX
    )
    country: str | None = Field(default=None, pattern=COUNTRY)


class FriendsIn(_In):
    friends: list[PlayerIdIn] = Field(max_length=v.MAX_FRIENDS)


class BanIn(_In):
    reason: str = Field(min_length=1, max_length=500)


class BanPendingOut(BaseModel):
    """A ban (or unban) recorded in the store, whose boards are not updated yet: the rank
    index could not be reached, and the reconciler finishes it once it is back (202)."""

    playerId: str
    banned: bool
    detail: str
