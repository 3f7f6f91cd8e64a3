"""What the read use cases return: plain values the API turns into JSON."""

from __future__ import annotations

from dataclasses import dataclass

from podium.domain.boards import BoardSpec, Ties
from podium.domain.models import Profile


@dataclass(frozen=True, slots=True)
class Entry:
    rank: int
    player_id: str
    points: int
    name: str | None = None
    avatar: str | None = None
    global_rank: int | None = None  # on the friends board: the place on the whole board
    # whether that place is exact; None where the read did not say: no global rank, or the
    # final standings of a frozen window (exact by construction)
    global_exact: bool | None = None
    # the entry metadata of the result that set the score (canonical JSON), where there is
    # any; frozen windows' final standings carry none
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class Page:
    board: str
    window: str
    as_of: float
    entries: list[Entry]
    # cursors (paging.py): resume behind the last entry, or ahead of the first; None where
    # there is nothing more that way inside the exact top, and on pages that are not paged
    next: str | None = None
    prev: str | None = None


@dataclass(frozen=True, slots=True)
class Bucket:
    low: int  # points, inclusive
    high: int  # points, inclusive
    count: int


@dataclass(frozen=True, slots=True)
class Distribution:
    board: str
    window: str
    as_of: float
    players: int
    buckets: list[Bucket]
    exact: bool = True  # False: estimated from the aggregator's histogram (a split board)


@dataclass(frozen=True, slots=True)
class PlayerRank:
    board: str
    window: str
    rank: int
    exact: bool
    points: int
    neighbors: list[Entry]
    top_percent: float | None = None
    # an estimated rank (exact False): the interval the true rank lies in, as of as_of
    rank_low: int | None = None
    rank_high: int | None = None
    as_of: float | None = None


def ranks_in_order(
    spec: BoardSpec, rows: list[tuple[str, int]], position: int, head: int | None = None
) -> list[int]:
    """Ranks of rows already in board order, the first at 1-based ``position``: the
    position itself, or, with shared ties, the rank of the first row holding the same score
    (``head`` for the first row, which may tie with rows above it)."""
    out: list[int] = []
    for i, (_, score) in enumerate(rows):
        if spec.ties is Ties.SHARED and i and score == rows[i - 1][1]:
            out.append(out[-1])
        elif i == 0 and head is not None:
            out.append(head)
        else:
            out.append(position + i)
    return out


def entry(
    rank: int,
    player_id: str,
    points: int,
    profile: Profile | None,
    global_rank: int | None = None,
    global_exact: bool | None = None,
    metadata: str | None = None,
) -> Entry:
    return Entry(
        rank,
        player_id,
        points,
        profile.name if profile else None,
        profile.avatar if profile else None,
        global_rank,
        global_exact,
        metadata,
    )
