"""Admission by time: which matches a process takes into its store now, which wait their
turn, and which it turns away before any store work. Pure: the decisions, the queue's order
and the moving estimate of a turn's time; the waiting itself is ``api/ratelimit.py``'s.

A match's store work is a few statements run one after another, so it holds about one store
connection at a time: a process runs the store work of at most ``turns`` matches at once
(its pools' connections, ``[store] pool_size + read_pool_size``), and the others wait their
turn, first come first served. Taking every match into the store at once (up to
``server.max_pending_matches``) is what collapsed on a slow link: each of 64 matches waited
for one of 10 connections at each statement, every one of them took longer than the game
server's wait, and the store did work whose answers nobody read (docs/faults.md, the slow
and lossy network).

A match is turned away (a 503 with Retry-After, nothing claimed or written) in three cases,
each counted by its reason in ``podium_matches_turned_away_total``:

- ``full``: ``limit`` matches are in flight already, waiting ones included;
- ``late``: its turn would come, or came, past ``wait_s`` (``server.match_wait_ms``): at
  arrival, when the turns of the matches queued ahead of it alone take longer than that by
  the estimate; or once it has waited that long;
- ``gone``: its client left while it waited (the API's part: the request's disconnect).

The estimate is an exponentially weighted mean of recent turns' times (``TurnTime``). It
turns nobody away before ``MIN_SAMPLES`` turns were timed, nor a match with nothing queued
ahead of it (it runs at once, or at the next turn's end): a slow store on a busy machine
must not refuse a burst the store would take in time. Past that, a wrong estimate costs
little either way: a match it lets in is still turned away once it has waited ``wait_s``,
before any store work.
"""

from __future__ import annotations

from dataclasses import dataclass

FULL, LATE, GONE = "full", "late", "gone"  # why a match was turned away
REASONS = (FULL, LATE, GONE)
RUN, WAIT = "run", "wait"  # what an arriving match does instead

# Each turn's weight in the estimate: about the last ten turns count, so that the estimate
# follows a link that slows down (or heals) within a second's turns at a few a second.
ALPHA = 0.2
# Turns timed before the estimate turns a match away: the first turns of a process (a cold
# pool, the first statements prepared) say little of the next ones.
MIN_SAMPLES = 8


@dataclass(slots=True)
class TurnTime:
    """The moving estimate of how long one match's turn (its store work) takes."""

    alpha: float = ALPHA
    min_samples: int = MIN_SAMPLES
    mean_s: float = 0.0
    samples: int = 0

    def add(self, took_s: float) -> None:
        """One more turn timed: it took ``took_s``."""
        self.samples += 1
        if self.samples == 1:
            self.mean_s = took_s
        else:
            self.mean_s += self.alpha * (took_s - self.mean_s)

    @property
    def trusted(self) -> bool:
        return self.samples >= self.min_samples


def late(ahead: int, turns: int, turn: TurnTime, wait_s: float) -> bool:
    """Whether a match that would queue behind ``ahead`` others is sure to wait past
    ``wait_s``: with ``turns`` at once, the turns of those ahead of it alone take about
    ``ahead * turn.mean_s / turns``, a bound from below of its own wait (it waits for one
    more turn to end). Never with nothing ahead, nor before the estimate is trusted."""
    if ahead <= 0 or not turn.trusted:
        return False
    return ahead * turn.mean_s / turns > wait_s


class Intake:
    """The turns of one process: how many run, who waits in what order, when each came.

    Every match in flight has a ticket (the caller's, unique) from ``arrive`` until it
    leaves: through ``end`` once it had its turn, or ``withdraw`` while it still waits."""

    def __init__(self, limit: int, turns: int, wait_s: float, turn: TurnTime | None = None) -> None:
        self.limit = limit  # matches in flight at most, waiting ones included
        self.turns = max(1, turns)  # matches whose store work runs at once
        self.wait_s = wait_s
        self.turn = turn if turn is not None else TurnTime()
        self.running = 0  # turns taken (a turn handed on stays taken)
        # When each match in flight arrived, by ticket, in the order they came: the first
        # is the oldest (a dict keeps insertion order; one that leaves is deleted wherever
        # it is).
        self._arrived: dict[int, float] = {}
        self._waiting: dict[int, None] = {}  # tickets waiting their turn, first come first

    @property
    def in_flight(self) -> int:
        """Matches in flight: those whose turn it is and those waiting for it."""
        return len(self._arrived)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def arrive(self, ticket: int, now: float) -> str:
        """A match arrives: ``RUN`` (its turn now), ``WAIT`` (queued last), or the reason it
        is turned away (``FULL``, ``LATE``), in which case it is not in flight."""
        if len(self._arrived) >= self.limit:
            return FULL
        if self.running < self.turns and not self._waiting:
            self.running += 1
            self._arrived[ticket] = now
            return RUN
        if late(len(self._waiting), self.turns, self.turn, self.wait_s):
            return LATE
        self._arrived[ticket] = now
        self._waiting[ticket] = None
        return WAIT

    def end(self, ticket: int, took_s: float | None) -> int | None:
        """The match ``ticket`` leaves its turn, after ``took_s`` of store work (timed into
        the estimate; None: it did none, turned away when its turn came). Its turn passes to
        the first match waiting, whose ticket is returned; None when none waits."""
        del self._arrived[ticket]
        if took_s is not None:
            self.turn.add(took_s)
        for first in self._waiting:
            del self._waiting[first]
            return first
        self.running -= 1
        return None

    def withdraw(self, ticket: int) -> None:
        """A waiting match leaves the queue before its turn: it waited too long, or its
        request ended."""
        del self._waiting[ticket]
        del self._arrived[ticket]

    def overdue(self, ticket: int, now: float) -> bool:
        """Whether the match ``ticket`` has been in flight ``wait_s`` or more."""
        return now - self._arrived[ticket] >= self.wait_s

    def deadline(self, ticket: int) -> float:
        """When the match ``ticket`` will have waited ``wait_s``."""
        return self._arrived[ticket] + self.wait_s

    def oldest_s(self, now: float) -> float:
        """How long the oldest match in flight has been (0 with none)."""
        for arrived in self._arrived.values():
            return now - arrived
        return 0.0
