"""What the client's calls return, and the results ``submit`` sends: frozen values read
from podium's JSON (camelCase there, snake_case here; times as aware datetimes).

Fields podium may leave out are optional here; a field this client does not know is
ignored, so a newer server does not break an older client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal


def _time(value: Any) -> datetime:
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _maybe_time(value: Any) -> datetime | None:
    return None if value is None else _time(value)


@dataclass(frozen=True)
class Result:
    """One player's part of a match, as ``submit`` sends it."""

    player_id: str
    points: int
    metadata: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"playerId": self.player_id, "points": self.points}
        if self.metadata is not None:
            out["metadata"] = dict(self.metadata)
        return out


@dataclass(frozen=True)
class PlayerTotals:
    player_id: str
    totals: Mapping[str, int]  # board name -> the player's total in its current window


@dataclass(frozen=True)
class Recorded:
    """A submission's answer: each player's totals on every board the match counted for."""

    match_id: str
    players: tuple[PlayerTotals, ...]

    def totals(self, player_id: str) -> Mapping[str, int]:
        for p in self.players:
            if p.player_id == player_id:
                return p.totals
        raise KeyError(player_id)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Recorded:
        players = tuple(PlayerTotals(p["playerId"], dict(p["totals"])) for p in d["players"])
        return cls(d["matchId"], players)


@dataclass(frozen=True)
class Entry:
    """A row of a page, of a rank's neighbors or of a friends board."""

    rank: int
    player_id: str
    points: int
    name: str | None = None
    avatar: str | None = None
    global_rank: int | None = None  # on a friends board: the rank on the whole board
    global_exact: bool | None = None
    metadata: Mapping[str, Any] | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Entry:
        return cls(
            d["rank"],
            d["playerId"],
            d["points"],
            d.get("name"),
            d.get("avatar"),
            d.get("globalRank"),
            d.get("globalExact"),
            d.get("metadata"),
        )


@dataclass(frozen=True)
class Page:
    """A board page or a friends board. ``next``/``prev``: cursors to pass back as
    ``cursor=`` (None: nothing further that way)."""

    board: str
    window: str
    as_of: datetime
    entries: tuple[Entry, ...]
    next: str | None = None
    prev: str | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Page:
        entries = tuple(Entry.from_json(e) for e in d["entries"])
        return cls(d["board"], d["window"], _time(d["asOf"]), entries, d.get("next"), d.get("prev"))


@dataclass(frozen=True)
class Rank:
    """A player's rank. An estimate (``exact`` false) carries the interval the true rank
    lies in, as of ``as_of``, and no neighbors."""

    board: str
    window: str
    rank: int
    exact: bool
    points: int
    neighbors: tuple[Entry, ...]
    rank_low: int | None = None
    rank_high: int | None = None
    top_percent: float | None = None
    as_of: datetime | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Rank:
        return cls(
            d["board"],
            d["window"],
            d["rank"],
            d["exact"],
            d["points"],
            tuple(Entry.from_json(e) for e in d["neighbors"]),
            d.get("rankLow"),
            d.get("rankHigh"),
            d.get("topPercent"),
            _maybe_time(d.get("asOf")),
        )


@dataclass(frozen=True)
class Found:
    """A player looked up by id: their rank on the whole board."""

    player_id: str
    rank: int
    points: int
    exact: bool
    name: str | None = None
    avatar: str | None = None


@dataclass(frozen=True)
class Lookup:
    """Players looked up by id, in board order; ``absent``: the ids not on the board."""

    board: str
    window: str
    as_of: datetime
    players: tuple[Found, ...]
    absent: tuple[str, ...]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Lookup:
        players = tuple(
            Found(p["playerId"], p["rank"], p["points"], p["exact"], p.get("name"), p.get("avatar"))
            for p in d["players"]
        )
        return cls(d["board"], d["window"], _time(d["asOf"]), players, tuple(d["absent"]))


@dataclass(frozen=True)
class Board:
    """A configured board and its current window (None before a season has begun)."""

    name: str
    window: str  # its kind: season, month, week, day, all
    current_window: str | None
    aggregate: str
    order: str
    ties: str
    exact_top: int
    modes: tuple[str, ...] | None = None
    group_by: str | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Board:
        modes = d.get("modes")
        return cls(
            d["name"],
            d["window"],
            d.get("currentWindow"),
            d["aggregate"],
            d["order"],
            d["ties"],
            d["exactTop"],
            None if modes is None else tuple(modes),
            d.get("groupBy"),
        )


def boards_from_json(d: Mapping[str, Any]) -> tuple[Board, ...]:
    return tuple(Board.from_json(b) for b in d["boards"])


@dataclass(frozen=True)
class Window:
    """A window of a board: open, closed (late results still counted) or frozen (then with
    its standings file's ``sha256`` and the route to download it)."""

    id: str
    start: datetime
    state: Literal["open", "closed", "frozen"]
    end: datetime | None = None
    group: str | None = None
    players: int | None = None
    frozen_at: datetime | None = None
    sha256: str | None = None
    standings: str | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Window:
        return cls(
            d["id"],
            _time(d["start"]),
            d["state"],
            _maybe_time(d.get("end")),
            d.get("group"),
            d.get("players"),
            _maybe_time(d.get("frozenAt")),
            d.get("sha256"),
            d.get("standings"),
        )


@dataclass(frozen=True)
class Windows:
    """A page of a board's windows, newest first; ``next``: the cursor of the next page."""

    board: str
    windows: tuple[Window, ...]
    next: str | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Windows:
        return cls(d["board"], tuple(Window.from_json(w) for w in d["windows"]), d.get("next"))


@dataclass(frozen=True)
class Played:
    """A player's final rank and points in one frozen window."""

    window: str
    start: datetime
    rank: int
    points: int
    exact: bool
    source: Literal["standings", "archive"]
    end: datetime | None = None
    group: str | None = None


@dataclass(frozen=True)
class History:
    """A page of a player's frozen windows on a board, newest first."""

    player_id: str
    board: str
    windows: tuple[Played, ...]
    next: str | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> History:
        played = tuple(
            Played(
                w["window"],
                _time(w["start"]),
                w["rank"],
                w["points"],
                w["exact"],
                w["source"],
                _maybe_time(w.get("end")),
                w.get("group"),
            )
            for w in d["windows"]
        )
        return cls(d["playerId"], d["board"], played, d.get("next"))


@dataclass(frozen=True)
class Bucket:
    low: int
    high: int
    count: int


@dataclass(frozen=True)
class Distribution:
    """How many players have how many points; ``exact`` false: estimated (a split board)."""

    board: str
    window: str
    as_of: datetime
    players: int
    exact: bool
    buckets: tuple[Bucket, ...] = field(default=())

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Distribution:
        buckets = tuple(Bucket(b["low"], b["high"], b["count"]) for b in d["buckets"])
        return cls(d["board"], d["window"], _time(d["asOf"]), d["players"], d["exact"], buckets)


@dataclass(frozen=True)
class Group:
    group: str  # a country, as ``group=`` takes it (ZZ: no country)
    players: int


@dataclass(frozen=True)
class Groups:
    """The groups of a board split by country that have players in a window, most first."""

    board: str
    window: str
    as_of: datetime
    groups: tuple[Group, ...]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Groups:
        groups = tuple(Group(g["group"], g["players"]) for g in d["groups"])
        return cls(d["board"], d["window"], _time(d["asOf"]), groups)
