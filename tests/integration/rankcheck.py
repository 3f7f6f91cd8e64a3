"""The rank check of the network fault tests' checker (``partitions.py``): no exact rank
answered that was false at every moment the answer may speak for.

What is known of the store's history, from the client's side: each acknowledged match was
committed once, at a moment between its first send and its acknowledgement (a try whose
answer was lost may have committed it before the acknowledged one, never before the first
send nor after the acknowledgement: the match claim counts it once). So at a moment ``t``
a player's stored total is bracketed: at least the sum of their matches acknowledged by
``t`` (certainly committed), at most the sum of those first sent by ``t`` (possibly
committed), and it is the first plus some of the matches in between.

A rank answer speaks for the board at some moment. An answer labelled ``asOf`` an earlier
time (the aggregator's snapshot) speaks for that moment; an unlabelled one for a moment
within its request. The board is the store's copy, fed by the log (invariant 1 of
docs/architecture.md): it shows each player's total as the store held it a moment before,
within the board's documented freshness (README: "within a second of the match ending";
``lag_s``), or, while a fault holds the copy back (a worker cut off, a replica promoted
before the mender replays), as of the fault's start. Each player's total on the board is
then the store's at some moment of the window ``[earliest, answered]``, and the copy is
written player by player, so the moments need not be one: the check allows each player
their own, which is what a copy written per player can show. Within that window:

- the player's points, as answered, must be a total they could hold: the certain sum at
  the window's start plus some of the matches that may have committed within it;
- their rank must lie between the best rank (only the players certainly ahead of them are
  ahead: total at the window's start) and the worst (every player who may be ahead by the
  window's end is), in the one order of an all-time board (invariant 4 of
  docs/architecture.md: more points first; on equal points, on an all-time board that packs
  points alone, the player id's bytes, ``ZREVRANGE``'s reverse order on a descending
  board).

The same holds for every neighbor row an exact answer carries: each is an exact rank too.

An estimated rank (``exact: false``, below the exact top of a split board) is held to what
the README promises of it: it carries ``rankLow`` and ``rankHigh``, its rank lies between
them, and "the true rank is guaranteed to lie in [rankLow, rankHigh] at the moment of the
answer, while the board moves" (the counts of its ``asOf``, widened by every score written
since). So its window is the request's, ``[sent, answered]``, not reaching back to its
``asOf``, widened only by how far the board may be behind the store (``lag_s``, as above);
its points must be a total the player could hold within it, and the ranks they could have
with them there (the best and the worst, as above) must meet the interval
(``outside_intervals``).
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Commit:
    """When an acknowledged match may have committed (monotonic): from its first send to
    its acknowledgement."""

    began: float
    acked: float
    results: Mapping[str, int]  # player -> points


@dataclass(frozen=True)
class Row:
    player: str
    rank: int
    points: int


@dataclass(frozen=True)
class RankRead:
    """A rank answered 200, as the reader saw it: the player's own row and the neighbors'."""

    api: str
    player: str
    sent: float  # monotonic
    answered: float  # monotonic
    wall: float  # the wall clock when sent
    exact: bool
    rank: int
    points: int
    as_of: float | None  # wall clock, whole seconds, where the answer says it
    neighbors: tuple[Row, ...] = field(default=())
    # an estimate's interval, ``rankLow`` and ``rankHigh`` (None where the answer has none)
    low: int | None = None
    high: int | None = None

    def earliest(self, lag_s: float) -> float:
        """The earliest moment (monotonic) the answer may speak for: its send, or its
        ``asOf`` (a whole second, rounded down: up to a second earlier), less the board's
        freshness."""
        start = self.sent
        if self.as_of is not None:
            start = min(start, self.sent - (self.wall - self.as_of) - 1.0)
        return start - lag_s


@dataclass(frozen=True)
class FalseRank:
    read: RankRead
    row: Row  # the row found false (the player's own or a neighbor's)
    why: str
    needs_lag_s: float | None  # the freshness that would have made it true (None: none)


class Ledger:
    """Every player's acknowledged matches, for the brackets of their totals."""

    def __init__(self, commits: Iterable[Commit]) -> None:
        self.by_player: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
        for c in commits:
            for p, pts in c.results.items():
                self.by_player[p].append((c.began, c.acked, pts))
        # Per player, the acknowledgements and the first sends in order, with running sums.
        self._acked: dict[str, tuple[list[float], list[int]]] = {}
        self._began: dict[str, tuple[list[float], list[int]]] = {}
        for p, ms in self.by_player.items():
            self._acked[p] = _running(sorted((acked, pts) for _, acked, pts in ms))
            self._began[p] = _running(sorted((began, pts) for began, _, pts in ms))

    def certain(self, player: str, t: float) -> int:
        """The least total the player held at ``t``: matches acknowledged by then."""
        return _upto(self._acked.get(player), t)

    def possible(self, player: str, t: float) -> int:
        """The most: matches first sent by then."""
        return _upto(self._began.get(player), t)

    def could_hold(self, player: str, points: int, lo: float, hi: float) -> bool:
        """Whether the player's total at some moment of ``[lo, hi]`` could be ``points``:
        the certain sum at ``lo`` plus some of the matches that may have committed in
        between (a subset sum, over a handful of matches)."""
        base = self.certain(player, lo)
        mine = self.by_player.get(player, ())
        maybe = [pts for began, acked, pts in mine if acked > lo and began <= hi]
        want = points - base
        if want < 0 or want > sum(maybe):
            return False
        sums = {0}
        for pts in maybe:
            sums |= {s + pts for s in sums if s + pts <= want}
        return want in sums


def _running(pairs: list[tuple[float, int]]) -> tuple[list[float], list[int]]:
    times = [t for t, _ in pairs]
    sums = list(itertools.accumulate((pts for _, pts in pairs), initial=0))
    return times, sums


def _upto(found: tuple[list[float], list[int]] | None, t: float) -> int:
    if found is None:
        return 0
    times, sums = found
    return sums[bisect.bisect_right(times, t)]


def ahead(a: tuple[int, str], b: tuple[int, str]) -> bool:
    """Whether ``a`` (points, player) is ahead of ``b`` on a descending all-time board:
    more points, or as many and a greater player id (``ZREVRANGE``)."""
    return a > b


def rank_bounds(
    ledger: Ledger, players: Iterable[str], row: Row, lo: float, hi: float
) -> tuple[int, int]:
    """The best and the worst rank ``row``'s player could have with ``row.points``, every
    other player's total anywhere within its brackets over ``[lo, hi]``."""
    me = (row.points, row.player)
    best = worst = 1
    for q in players:
        if q == row.player:
            continue
        if ahead((ledger.certain(q, lo), q), me):
            best += 1
        if ahead((ledger.possible(q, hi), q), me):
            worst += 1
    return best, worst


def _why(ledger: Ledger, players: list[str], row: Row, lo: float, hi: float) -> str | None:
    if not ledger.could_hold(row.player, row.points, lo, hi):
        return (
            f"{row.player} never held {row.points} points: between "
            f"{ledger.certain(row.player, lo)} and {ledger.possible(row.player, hi)}"
        )
    best, worst = rank_bounds(ledger, players, row, lo, hi)
    if not best <= row.rank <= worst:
        return f"{row.player} ranked {row.rank} with {row.points} points: only {best}..{worst}"
    return None


def false_ranks(
    ledger: Ledger,
    players: Iterable[str],
    reads: Iterable[RankRead],
    lag_s: Callable[[RankRead], float],
) -> list[FalseRank]:
    """Every exact row (a player's own, and each neighbor's) that no moment of its window
    makes true; ``lag_s``: how far behind the store the board may be for that read."""
    everyone = sorted(set(players) | set(ledger.by_player))
    out: list[FalseRank] = []
    for r in reads:
        if not r.exact:
            continue
        hi = r.answered
        lo = r.earliest(lag_s(r))
        for row in (Row(r.player, r.rank, r.points), *r.neighbors):
            why = _why(ledger, everyone, row, lo, hi)
            if why is not None:
                out.append(FalseRank(r, row, why, _needs(ledger, everyone, r, row, hi)))
    return out


def outside_intervals(
    ledger: Ledger,
    players: Iterable[str],
    reads: Iterable[RankRead],
    lag_s: Callable[[RankRead], float],
) -> list[FalseRank]:
    """Every estimated answer (``exact: false``) without its interval, with its rank outside
    it, or whose interval no moment of its window makes hold the player's true rank;
    ``lag_s``: how far behind the store the board may be for that read. An estimate speaks
    for the moment of its answer (the module's docstring), so its window starts at its
    send, less ``lag_s``, not at its ``asOf``."""
    everyone = sorted(set(players) | set(ledger.by_player))
    out: list[FalseRank] = []
    for r in reads:
        if r.exact:
            continue
        row = Row(r.player, r.rank, r.points)
        why = _outside(ledger, everyone, r, r.sent - lag_s(r), r.answered)
        if why is not None:
            out.append(FalseRank(r, row, why, None))
    return out


def _outside(ledger: Ledger, players: list[str], r: RankRead, lo: float, hi: float) -> str | None:
    if r.low is None or r.high is None:
        return f"{r.player}'s estimated rank {r.rank} carries no interval"
    if not r.low <= r.rank <= r.high:
        return f"{r.player}'s estimated rank {r.rank} is outside its own [{r.low}, {r.high}]"
    if not ledger.could_hold(r.player, r.points, lo, hi):
        return (
            f"{r.player} never held {r.points} points: between "
            f"{ledger.certain(r.player, lo)} and {ledger.possible(r.player, hi)}"
        )
    best, worst = rank_bounds(ledger, players, Row(r.player, r.rank, r.points), lo, hi)
    if worst < r.low or best > r.high:
        return (
            f"{r.player} with {r.points} points ranked only {best}..{worst}, outside the "
            f"estimate's [{r.low}, {r.high}]"
        )
    return None


def _needs(ledger: Ledger, players: list[str], r: RankRead, row: Row, hi: float) -> float | None:
    """The least freshness (to 10 ms) that would have made the row true: how far behind the
    store the board was, at least (reported, not judged). None if no lag would do."""
    top = 600.0
    if _why(ledger, players, row, r.earliest(top), hi) is not None:
        return None
    low = 0.0
    while top - low > 0.01:
        mid = (low + top) / 2
        if _why(ledger, players, row, r.earliest(mid), hi) is None:
            top = mid
        else:
            low = mid
    return top
