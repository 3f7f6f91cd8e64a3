"""Request and response bodies: camelCase JSON, validated strictly."""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictInt

ID = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ResultIn(_In):
    playerId: str = Field(pattern=ID)
    points: StrictInt


class MatchIn(_In):
    mode: str = Field(min_length=1, max_length=64)
    endedAt: AwareDatetime
    durationSeconds: StrictInt = Field(ge=0)
    results: list[ResultIn] = Field(min_length=1, max_length=100)


class PlayerTotals(BaseModel):
    playerId: str
    totals: dict[str, int]


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


class PageOut(BaseModel):
    board: str
    window: str
    asOf: str
    entries: list[EntryOut]


class RankOut(BaseModel):
    board: str
    window: str
    rank: int
    exact: bool
    points: int
    topPercent: float | None = None
    neighbors: list[EntryOut]


class BoardOut(BaseModel):
    name: str
    window: str
    currentWindow: str | None
    aggregate: str
    order: str
    ties: str
    exactTop: int
    modes: list[str] | None
    groupBy: str | None = None


class BoardsOut(BaseModel):
    boards: list[BoardOut]


class BucketOut(BaseModel):
    low: int
    high: int
    count: int


class DistributionOut(BaseModel):
    board: str
    window: str
    asOf: str
    players: int
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
    name: str | None = Field(default=None, min_length=1, max_length=32)
    avatar: str | None = Field(default=None, max_length=512, pattern=r"^https://\S+$")
    country: str | None = Field(default=None, pattern=r"^[A-Z]{2}$")  # ISO 3166-1 alpha-2


class FriendsIn(_In):
    friends: list[str] = Field(max_length=1000)


class BanIn(_In):
    reason: str = Field(min_length=1, max_length=500)
