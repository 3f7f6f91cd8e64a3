"""Board rules: how results fold into a total, and how totals become ordered scores.

Everything that decides who is above whom lives here, so that every backend, merge and
page applies one order (DESIGN invariant 4).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from podium.domain.codec import ScoreCodec, time_bits_for
from podium.domain.windows import Window, WindowKind, WindowRule


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


@dataclass(frozen=True, slots=True)
class Tally:
    """A player's standing in one window: the total, when it was reached, and a version that
    rises with every change (used by boards whose totals can fall). ``scored`` says whether
    any match has raised the total yet (sums only)."""

    total: int
    reached_at: int
    version: int
    scored: bool = True


@dataclass(frozen=True, slots=True)
class BoardSpec:
    name: str
    rule: WindowRule
    aggregate: Aggregate = Aggregate.SUM
    order: Order = Order.DESC
    ties: Ties = Ties.FIRST
    exact_top: int = 10_000
    freeze_after_s: int = 600
    modes: tuple[str, ...] | None = None  # None: every mode counts
    group_by: str | None = None  # a player attribute ("country"): one board per value

    @property
    def codec(self) -> ScoreCodec:
        packs_time = self.ties is Ties.FIRST and self.rule.kind is not WindowKind.ALL
        bits = time_bits_for(self.rule.max_length) if packs_time else 0
        return ScoreCodec(bits, descending=self.order is Order.DESC)

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


def rank_standings(
    board: BoardSpec, window: Window, rows: Iterable[tuple[str, Tally]]
) -> list[tuple[int, int, str, Tally]]:
    """``(position, rank, player, tally)`` in board order, computed the way the index orders
    (the packed score, then member bytes; descending boards reversed), so that the final
    standings and the live board agree on every place."""
    ordered = sorted(rows, key=lambda r: (board.score(r[1], window), r[0].encode()))
    if board.order is Order.DESC:
        ordered.reverse()
    out: list[tuple[int, int, str, Tally]] = []
    for i, (player, tally) in enumerate(ordered):
        rank = i + 1
        if board.ties is Ties.SHARED and out and out[-1][3].total == tally.total:
            rank = out[-1][1]
        out.append((i + 1, rank, player, tally))
    return out
