"""Board rules: how results fold into a total, and how totals become ordered scores.

Everything that decides who is above whom lives here, so that every backend, merge and
page applies one order (invariant 4 of docs/architecture.md): ``board_key``, and
``in_board_order`` and ``merge_in_board_order`` on top of it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TypeVar

from podium.domain.codec import ScoreCodec, time_bits_for
from podium.domain.windows import Window, WindowKind, WindowRule

if TYPE_CHECKING:  # cohorts.py imports models.py, which imports this module
    from podium.domain.cohorts import League

# A row of a board: (member, score), and maybe more fields that ride along with it.
R = TypeVar("R", bound=tuple[Any, ...])


class Aggregate(StrEnum):
    SUM = "sum"
    BEST = "best"
    LAST = "last"


class Order(StrEnum):
    DESC = "desc"
    ASC = "asc"


class Ties(StrEnum):
    FIRST = "first"
    SHARED = "shared"


class Below(StrEnum):
    """How a split board answers ranks below its exact top (docs/architecture.md, invariant 6)."""

    ESTIMATED = "estimated"  # from the aggregator's histogram: one read of the player's shard
    EXACT = "exact"  # counted on every shard: one count per shard, sent at once


@dataclass(frozen=True, slots=True)
class Tally:
    """A player's standing in one window: the total, when it was reached, and a version that
    rises with every change (used by boards whose totals can fall). ``scored`` says whether
    any match has raised the total yet (sums only). ``metadata``: the entry metadata of the
    result that last changed it (domain/metadata.py; ``recording.step`` sets it), which on
    ``best`` and ``last`` boards is the result that set the score."""

    total: int
    reached_at: int
    version: int
    scored: bool = True
    metadata: str | None = None


EXACT_TOP = 10_000  # pages reach this deep unless a board says otherwise (tournaments never do)


@dataclass(frozen=True, slots=True)
class BoardSpec:
    name: str
    rule: WindowRule
    aggregate: Aggregate = Aggregate.SUM
    order: Order = Order.DESC
    ties: Ties = Ties.FIRST
    exact_top: int = EXACT_TOP
    freeze_after_s: int = 600
    modes: tuple[str, ...] | None = None  # None: every mode counts
    group_by: str | None = None  # a player attribute ("country"): one board per value
    ranks_below_top: Below = Below.ESTIMATED
    league: League | None = None  # played in cohorts too (domain/cohorts.py)
    # Made once here, not on every read of ``codec``: a rebuild packs a score for every
    # entry of a board, and building the codec each time was a fifth of a start's CPU
    # (BENCHMARKS.md, issue 23). Not a field of the spec's identity: it follows from them.
    _codec: ScoreCodec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        packs_time = self.ties is Ties.FIRST and self.rule.kind is not WindowKind.ALL
        bits = time_bits_for(self.rule.max_length) if packs_time else 0
        object.__setattr__(self, "_codec", ScoreCodec(bits, descending=self.order is Order.DESC))

    @property
    def codec(self) -> ScoreCodec:
        return self._codec

    def counts(self, mode: str) -> bool:
        return self.modes is None or mode in self.modes

    def score(self, tally: Tally, window: Window) -> int:
        """The index score for a tally (EncodingError if it does not fit)."""
        return self.codec.encode(tally.total, tally.reached_at - window.start)

    def better(self, a: int, b: int) -> bool:
        """Whether points ``a`` rank above points ``b`` on this board."""
        return a > b if self.order is Order.DESC else a < b


def fold(board: BoardSpec, current: Tally | None, points: int, ended_at: int) -> Tally | None:
    """The new tally after one match, or None when the match changes nothing.

    Order-independent: folding the same matches in any arrival order gives the same tally,
    which is what lets results arrive late and out of order.
    """
    if current is None:
        return Tally(points, ended_at, 1, scored=points > 0)
    v = current.version + 1
    match board.aggregate:
        case Aggregate.SUM:
            # reached_at is the latest end of a match that raised the total, whatever the
            # order they arrived in; a match that lowers it or scores nothing leaves it
            # alone. Until some match has raised it, it is the earliest match, so that the
            # tie-breaker never depends on arrival order.
            total = current.total + points
            if points > 0:
                reached = max(current.reached_at, ended_at) if current.scored else ended_at
                return Tally(total, reached, v, True)
            reached = current.reached_at
            if not current.scored:
                reached = min(reached, ended_at)
            if points == 0 and reached == current.reached_at:
                return None
            return Tally(total, reached, v, current.scored)
        case Aggregate.BEST:
            if board.better(points, current.total):
                return Tally(points, ended_at, v)
            if points == current.total and ended_at < current.reached_at:
                return Tally(points, ended_at, v)  # the best was first set earlier
            return None
        case Aggregate.LAST:
            newer = ended_at > current.reached_at
            same_second_better = ended_at == current.reached_at and points > current.total
            if newer or same_second_better:
                return Tally(points, ended_at, v)
            return None


def can_fall(board: BoardSpec, min_points: int) -> bool:
    """Whether totals on this board can move against its order, so that a plain
    ``ZADD GT``/``LT`` would ignore a real change and a versioned write is needed. A
    grouped board is always versioned: a player who moves between groups leaves a newer
    version behind, which no late change of the old group can overwrite."""
    if board.aggregate is Aggregate.LAST or board.group_by is not None:
        return True
    if board.aggregate is Aggregate.SUM:
        return min_points < 0 if board.order is Order.DESC else True
    return False


def board_key(member: str, score: int) -> tuple[int, bytes]:
    """The one order of every board (invariant 4 of docs/architecture.md), as a sort key: the
    packed score (points, then the time they were reached), then on equal scores the
    member's UTF-8 bytes, as a Redis sorted set orders its members. Ascending boards list
    rows by this key ascending; descending boards are the exact reverse (``ZREVRANGE``).

    UTF-8 keeps the order of code points, and Python compares ``str`` by code point, so
    ``(score, member)`` sorts exactly as this key does, without encoding a member for every
    comparison: ``in_board_order``, ``merge_in_board_order`` and the in-process index's
    sorted lists use that (``tests/unit/domain/test_boards.py`` holds the two alike).
    """
    return score, member.encode()


# (score, member) of a (member, score, ...) row: ``board_key``'s order, computed in C.
_by_board_key = itemgetter(1, 0)


def in_board_order(rows: Iterable[R], descending: bool) -> list[R]:
    """Rows ``(member, score, ...)`` in board order (``board_key``); any further fields of
    a row ride along. Descending is the exact reverse of ascending, ties included."""
    out = sorted(rows, key=_by_board_key)
    if descending:
        out.reverse()
    return out


def merge_in_board_order(sorted_iterables: Iterable[Iterable[R]], descending: bool) -> Iterator[R]:
    """One board-ordered stream of several, each already in board order (the pages of a
    board's shards, no member on two of them): a k-way merge on the same key, so the merged
    rows come out exactly as one sorted set holding them all would list them."""
    return heapq.merge(*sorted_iterables, key=_by_board_key, reverse=descending)


def rank_standings(
    board: BoardSpec, window: Window, rows: Iterable[tuple[str, Tally]]
) -> list[tuple[int, int, str, Tally]]:
    """``(position, rank, player, tally)`` in board order, computed the way the index orders
    (``in_board_order`` of the packed scores), so that the final standings and the live
    board agree on every place."""
    scored = [(player, board.score(tally, window), tally) for player, tally in rows]
    out: list[tuple[int, int, str, Tally]] = []
    for i, (player, _, tally) in enumerate(in_board_order(scored, board.order is Order.DESC)):
        rank = i + 1
        if board.ties is Ties.SHARED and out and out[-1][3].total == tally.total:
            rank = out[-1][1]
        out.append((i + 1, rank, player, tally))
    return out
