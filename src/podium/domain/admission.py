"""Which reads a saturated process sheds, decided from what it measures: pure, no I/O.

Results come first (the seed's order): when one process has more work than its event loop
can turn over, reads are refused before accepting results slows, in the reverse of this
order of what to protect: accepting results, a player's own rank, the top page (stale is
fine), friends, far-down reads. So the shedding has four levels, each one shedding one more
class of reads:

====  ==========  ========================================================================
1     ``far``     pages past the top, distributions, look-ups by id, past windows,
                  standings, history, groups, the list of boards, new live streams
2     ``friends`` a player's friends board
3     ``page``    the top page: answered from the last copy this process encoded (stale
                  is fine) where it has one, refused only where it has none
4     ``rank``    a player's own rank (with neighbors)
====  ==========  ========================================================================

Results (``POST /v1/matches/...``), the admin's calls, health and metrics are never shed.

The level comes from three figures, and is the highest they call for:

- the event loop's lag, smoothed: how late a timer of the loop fires. Every request's every
  ``await`` waits its turn in the same loop, so this is the queue a result's handful of
  store round trips wait in, and what turns a 10 ms accept into 100 ms;
- matches in flight in this process, against ``server.max_pending_matches``: a quarter,
  half, three quarters and all of it, so that by the time this process refuses results it
  sheds every read;
- how long the oldest match in flight has been recording, against
  ``server.shed_accept_ms``: at it, every read is shed (the top level). The lag ladder
  alone let results wait: beside 64 readers the loop's lag sat between the third and the
  fourth rung, where a player's rank is not yet shed, and each of a result's awaits queued
  behind the reads (accept p99 229 to 339 ms, BENCHMARKS.md "Four misses of issue 23").
  A result already late is the plainest sign that reads must go.

None counts unless the process has at least ``MIN_BUSY`` requests in flight: a loop
that lags while it has next to nothing to do is lagging for someone else (another process
on the machine, a pause of the collector), and refusing its few readers gives nothing
back. It also keeps a test's or a quiet server's lone request from ever being shed on a
busy machine.

A level goes up at once and down only once the figures have been below it for
``HOLD_S``: a shed reader is told to come back in a second (``Retry-After: 1``), and a
level that fell the instant the readers backed off would take them all back at once.
"""

from __future__ import annotations

from dataclasses import dataclass

# Which level sheds each class of reads (the route_class label of podium_reads_shed_total).
FAR, FRIENDS, PAGE, RANK = "far", "friends", "page", "rank"
LEVELS = {FAR: 1, FRIENDS: 2, PAGE: 3, RANK: 4}
TOP = 4

# The lag ladder, as multiples of ``server.shed_lag_ms``, and the ladder of matches in
# flight, as shares of ``server.max_pending_matches``.
LAG_STEPS = (1.0, 2.0, 3.0, 4.0)
PENDING_STEPS = (0.25, 0.5, 0.75, 1.0)
MIN_BUSY = 8
HOLD_S = 1.0


@dataclass(frozen=True, slots=True)
class Limits:
    """The thresholds of each level, lowest first."""

    lag_s: tuple[float, ...]
    pending: tuple[float, ...]
    accept_s: float = float("inf")  # the oldest match in flight this old: every read shed
    min_busy: int = MIN_BUSY
    hold_s: float = HOLD_S

    @classmethod
    def of(
        cls, shed_lag_ms: float, max_pending_matches: int, shed_accept_ms: float = float("inf")
    ) -> Limits:
        return cls(
            tuple(shed_lag_ms / 1000 * k for k in LAG_STEPS),
            tuple(max_pending_matches * k for k in PENDING_STEPS),
            shed_accept_ms / 1000,
        )


def _rung(value: float, ladder: tuple[float, ...]) -> int:
    """How many thresholds of ``ladder`` ``value`` reaches."""
    return sum(1 for threshold in ladder if value >= threshold)


def target(lag_s: float, pending: int, busy: int, limits: Limits, oldest_s: float = 0.0) -> int:
    """The level these figures call for: 0 (shed nothing) to ``TOP`` (shed every read).
    ``oldest_s``: how long the oldest match in flight has been recording."""
    if busy < limits.min_busy:
        return 0
    if oldest_s >= limits.accept_s:
        return TOP
    return max(_rung(lag_s, limits.lag_s), _rung(pending, limits.pending))


@dataclass(slots=True)
class Level:
    """The level in force: up at once, down once ``hold_s`` has passed without the figures
    calling for the level held."""

    now: int = 0
    since: float = 0.0  # when the figures last called for ``now`` or more

    def update(self, wanted: int, at: float, hold_s: float) -> int:
        if wanted >= self.now or at - self.since >= hold_s:
            self.now, self.since = wanted, at
        return self.now


def sheds(level: int, route_class: str) -> bool:
    """Whether a read of this class is shed at this level."""
    return level >= LEVELS[route_class]
