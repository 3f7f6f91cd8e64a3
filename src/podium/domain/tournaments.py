"""Tournaments: a board of their own for a stretch of time, made and ended by the admin.

A tournament is a definition (``Tournament``), and for counting and reading it is one more
board target: a ``TournamentSpec`` (a ``BoardSpec`` that knows its attempts) over a rule with
a single window, its run, whose id is its start in the schedule's basic form
(``20261204T1800``) (``RunRule``); or, recurring, a cron schedule's windows that start
between ``starts_at`` and ``ends_at`` (``SeriesRule``), each run a window of its own.

Its board's name is the tournament id behind ``BOARD_PREFIX``, a character no configured
board name may hold, so that its tallies, outbox changes, index keys, freeze and final
standings are a board window's like any other, and never collide with one.

``maxAttempts``: every result that counts raises the tournament tally's version, even when
it leaves the total alone (a worse score on a ``best`` tournament), so the version is the
number of results that counted, read and raised in the record's own transaction; past the
limit a result no longer counts there (``exhausted``), and still counts for the boards.

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum

from podium.domain import schedule
from podium.domain.boards import Aggregate, BoardSpec, Order, Tally, Ties
from podium.domain.codec import time_bits_for
from podium.domain.validation import ID, ID_RE, text_problem
from podium.domain.windows import (
    SCHEDULED_ID,
    Window,
    WindowError,
    WindowKind,
    WindowRule,
    to_rfc3339,
)

BOARD_PREFIX = "~"  # not in a board name (config.NAME_RE): a tournament's board is "~<id>"
ATTEMPTS_SUFFIX = "#attempts"  # beside a tournament's total in a record's totals: attempts used
TITLE_MAX = 100
CATEGORY = r"[a-z0-9][a-z0-9_-]{0,31}"
CATEGORY_RE = re.compile(CATEGORY)
MAX_ENTRANTS = 10_000_000
MAX_ATTEMPTS = 10_000
MAX_DURATION_S = 366 * 86_400  # a run's seconds are packed into the score (docs §2)
FREEZE_AFTER_S = 600  # late results a run takes after its end, as a board's default
# How long after a tournament stopped taking results the freezer settles it (marks it done
# with, once every run anyone played is frozen), from then on out of its walk: well past its
# late time, so that a process whose clock lags another's has long recorded its last result.
SETTLE_AFTER_S = 3600
FOREVER = 253_402_300_799  # 9999-12-31T23:59:59Z: a recurring tournament with no end
# The times a definition may name: a start or an end from 2000 to the start of 9998, so that
# every run, and its late time, ends before FOREVER and renders as a four-digit year (a
# start in year 1 was taken, and answered as "1-01-01T00:00:00Z"); FOREVER itself stands for
# "no end" (a recurring tournament's default).
EARLIEST = 946_684_800  # 2000-01-01T00:00:00Z
LATEST = 253_339_228_800  # 9998-01-01T00:00:00Z


class State(StrEnum):
    UPCOMING = "upcoming"
    LIVE = "live"
    ENDED = "ended"


class TournamentError(ValueError):
    """A definition refused: ``field`` is the request's field that is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True, slots=True)
class Tournament:
    """A tournament's definition, as created, and when it was ended early (``ended_early``)."""

    id: str
    title: str
    modes: tuple[str, ...]
    aggregate: Aggregate
    order: Order
    ties: Ties
    starts_at: int
    ends_at: int
    join_required: bool = False
    max_entrants: int | None = None
    max_attempts: int | None = None
    category: str | None = None
    metadata: str | None = None  # canonical JSON (domain/metadata.py)
    created_at: float = 0.0
    ended_early: float | None = None  # when DELETE ended it; None: it runs to ends_at
    entrants: int = 0  # players who joined
    # Recurring: a run at every start of the cron ``schedule`` (UTC), ``duration_s`` long,
    # from ``starts_at``; ``ends_at`` is when runs stop starting (``FOREVER``: never).
    schedule: str | None = None
    duration_s: int | None = None

    def same_definition(self, other: Tournament) -> bool:
        """Whether ``other`` asks for this very tournament: a create of it again is the
        same create (idempotent); any other content under its id is a conflict."""
        return _definition(self) == _definition(other)

    @property
    def board(self) -> str:
        return board_name(self.id)

    @property
    def end(self) -> float:
        """When it stopped (or stops) taking results by time: its end, or the early end."""
        return self.ends_at if self.ended_early is None else min(self.ends_at, self.ended_early)

    @property
    def closes_at(self) -> int:
        """When its last run stops taking late results, by its definition (an early end
        aside): a one-shot run's end, or the end of the last run a schedule can start before
        ``ends_at`` (none: ``FOREVER``), and the late time. The stores keep it beside the
        definition, so that the record path asks for the tournaments still open at a time
        rather than walking every one ever made."""
        if self.schedule is None:
            return self.ends_at + FREEZE_AFTER_S
        if self.ends_at >= FOREVER:
            return FOREVER
        return self.ends_at + (self.duration_s or 0) + FREEZE_AFTER_S

    def settled_by(self, now: float) -> bool:
        """Whether no result can count for it any more, by ``SETTLE_AFTER_S``: past its
        close, or past the late time of an early end (the run open then froze at once, and
        the runs before it each by its own late time)."""
        done = float(self.closes_at)
        if self.ended_early is not None:
            done = min(done, self.ended_early + FREEZE_AFTER_S)
        return now >= done + SETTLE_AFTER_S

    def state(self, now: float) -> State:
        if now >= self.end:  # its time is up, or the admin ended it (even before it began)
            return State.ENDED
        rule = self.rule()
        if rule.window_at(int(now)) is not None:
            return State.LIVE
        # Before its run, or between two runs of a schedule: upcoming while one is to come.
        return State.UPCOMING if rule.next_start(int(now)) is not None else State.ENDED

    def rule(self) -> RunRule | SeriesRule:
        if self.schedule is not None:
            return SeriesRule(
                WindowKind.SCHEDULE,
                schedule=self.schedule,
                duration=self.duration_s,
                first=self.starts_at,
                last=self.ends_at,
            )
        return RunRule(
            WindowKind.SCHEDULE, duration=self.ends_at - self.starts_at, run_start=self.starts_at
        )

    def run_at(self, now: float) -> Window | None:
        """The run open at ``now``, else the last to begin; None before the first."""
        return self.rule().latest(int(now))

    def spec(self) -> TournamentSpec:
        return TournamentSpec(
            name=self.board,
            rule=self.rule(),
            aggregate=self.aggregate,
            order=self.order,
            ties=self.ties,
            freeze_after_s=FREEZE_AFTER_S,
            modes=self.modes,
            max_attempts=self.max_attempts,
        )


def _definition(t: Tournament) -> tuple[object, ...]:
    return (
        t.id, t.title, t.modes, t.aggregate, t.order, t.ties, t.starts_at, t.ends_at,
        t.join_required, t.max_entrants, t.max_attempts, t.category, t.metadata, t.schedule,
        t.duration_s,
    )  # fmt: skip


def board_name(tournament_id: str) -> str:
    return f"{BOARD_PREFIX}{tournament_id}"


def tournament_of(board: str) -> str | None:
    """The tournament id a board name holds; None for a configured board."""
    return board[len(BOARD_PREFIX) :] if board.startswith(BOARD_PREFIX) else None


def run_id(start: int) -> str:
    """A run's id: its start, as a scheduled window's (``20261204T1800``)."""
    return datetime.fromtimestamp(start, UTC).strftime(SCHEDULED_ID)


@dataclass(frozen=True, slots=True)
class RunRule(WindowRule):
    """One window, the run: a schedule that fires once. It packs time as a schedule board
    of its duration does (§2), and every walk over windows (the freezer's, a read's
    ``?run=``) finds the run or nothing."""

    run_start: int = 0

    @property
    def run(self) -> Window:
        assert self.duration is not None
        return Window(run_id(self.run_start), self.run_start, self.run_start + self.duration)

    def window_at(self, t: int) -> Window | None:
        w = self.run
        return w if w.contains(t) else None

    def latest(self, t: int) -> Window | None:
        return self.run if t >= self.run_start else None

    def before(self, window: Window) -> Window | None:
        return None

    def next_start(self, t: int) -> int | None:
        return self.run_start if t < self.run_start else None

    def parse(self, window_id: str) -> Window:
        if window_id != self.run.id:
            raise WindowError(f"{window_id!r} is not a run of this tournament ({self.run.id})")
        return self.run


@dataclass(frozen=True, slots=True)
class SeriesRule(WindowRule):
    """A recurring tournament's runs: the schedule's windows that start in ``[first,
    last)``. Every walk over windows goes through ``latest``, which keeps to the bounds."""

    first: int = 0
    last: int = FOREVER

    def latest(self, t: int) -> Window | None:
        w = WindowRule.latest(self, min(t, self.last - 1))
        return w if w is not None and w.start >= self.first else None

    def next_start(self, t: int) -> int | None:
        assert self.schedule is not None
        n = schedule.next_start(self.schedule, max(t, self.first - 1))
        return n if n is not None and n < self.last else None


@dataclass(frozen=True, slots=True)
class TournamentSpec(BoardSpec):
    """A tournament's board: a ``BoardSpec`` that counts attempts (``max_attempts``: None,
    no limit)."""

    max_attempts: int | None = None

    def exhausted(self, tally: Tally | None) -> bool:
        return (
            tally is not None
            and self.max_attempts is not None
            and tally.version >= self.max_attempts
        )

    def attempts_left(self, tally: Tally | None) -> int | None:
        if self.max_attempts is None:
            return None
        return max(0, self.max_attempts - (tally.version if tally else 0))


def attempt(spec: TournamentSpec, current: Tally | None, new: Tally | None) -> Tally | None:
    """The tally after a result that counts (``new``, from ``fold``): when the fold changed
    nothing, the same standing one version up, so that the version counts attempts."""
    if new is not None or current is None:
        return new
    return replace(current, version=current.version + 1)


def totals_of(spec: BoardSpec, tally: Tally) -> dict[str, int]:
    """What a record answers for one target: the total by board, and on a tournament the
    attempts used, beside it (``ATTEMPTS_SUFFIX``)."""
    out = {spec.name: tally.total}
    if isinstance(spec, TournamentSpec):
        out[spec.name + ATTEMPTS_SUFFIX] = tally.version
    return out


def span(
    starts_at: int | None, ends_at: int | None, recurring: bool, now: float
) -> tuple[int, int]:
    """A definition's ``starts_at`` and ``ends_at`` from what a request gave: a one-shot
    tournament names both; a recurring one starts now and never ends unless told."""
    if starts_at is None:
        if not recurring:
            raise TournamentError("startsAt", "required without a schedule")
        starts_at = int(now)
    if ends_at is None:
        if not recurring:
            raise TournamentError("endsAt", "required without a schedule")
        ends_at = FOREVER
    return starts_at, ends_at


def check(
    t: Tournament, known_modes: set[str], points_bound: dict[str, int], min_period_s: int = 0
) -> None:
    """Every rule of a definition, raising ``TournamentError`` naming the first field wrong.
    ``points_bound``: the largest |points| of each mode, which a total must be able to hold;
    ``min_period_s``: the shortest time a schedule may leave between two starts."""
    if not ID_RE.fullmatch(t.id):
        raise TournamentError("id", f"{t.id!r} must match {ID}")
    if why := text_problem(t.title):
        raise TournamentError("title", why)
    if len(t.title) > TITLE_MAX:
        raise TournamentError("title", f"at most {TITLE_MAX} characters")
    if not t.modes:
        raise TournamentError("modes", "name at least one mode")
    for m in t.modes:
        if m not in known_modes:
            raise TournamentError("modes", f"unknown mode {m!r} (known: {sorted(known_modes)})")
    if len(set(t.modes)) != len(t.modes):
        raise TournamentError("modes", "a mode is named twice")
    for name, at in (("startsAt", t.starts_at), ("endsAt", t.ends_at)):
        if not EARLIEST <= at <= LATEST and not (name == "endsAt" and at == FOREVER):
            raise TournamentError(
                name, f"must be from {to_rfc3339(EARLIEST)} to {to_rfc3339(LATEST)}"
            )
    if t.ends_at <= t.starts_at:
        raise TournamentError("endsAt", "must be after startsAt")
    if t.schedule is None:
        if t.duration_s is not None:
            raise TournamentError("durationSeconds", "only with a schedule")
        if t.ends_at - t.starts_at > MAX_DURATION_S:
            raise TournamentError("endsAt", f"a tournament lasts at most {MAX_DURATION_S} s")
    else:
        _check_schedule(t, min_period_s)
    if t.max_entrants is not None and not 1 <= t.max_entrants <= MAX_ENTRANTS:
        raise TournamentError("maxEntrants", f"must be 1 to {MAX_ENTRANTS}")
    if t.max_attempts is not None and not 1 <= t.max_attempts <= MAX_ATTEMPTS:
        raise TournamentError("maxAttempts", f"must be 1 to {MAX_ATTEMPTS}")
    if t.category is not None and not CATEGORY_RE.fullmatch(t.category):
        raise TournamentError("category", f"{t.category!r} must match {CATEGORY}")
    # A total that could not be packed is refused before it is created, as config/settings.py
    # refuses a board whose modes could not fit it (§2): best and last hold one result, a sum with
    # maxAttempts that many; an open sum is held to its capacity result by result.
    limit = t.spec().codec.points_limit
    held = 1 if t.aggregate is not Aggregate.SUM else t.max_attempts
    bits = time_bits_for(t.rule().max_length)
    for m in t.modes:
        if held is not None and points_bound.get(m, 0) * held >= limit:
            raise TournamentError(
                "modes",
                f"mode {m!r}'s points could not fit a total of this tournament "
                f"(|total| < {limit} with {bits} bits of time)",
            )


def _check_schedule(t: Tournament, min_period_s: int) -> None:
    """A schedule podium takes (domain/schedule.py), with runs that never overlap, and
    starts at least ``min_period_s`` apart: each run is a board window of its own, frozen,
    archived and announced (``tournament.ended``) once, so a run every minute would be 1,440
    of each a day, for as long as the tournament lasts."""
    assert t.schedule is not None
    try:
        expr = schedule.check(t.schedule)
    except schedule.ScheduleError as e:
        raise TournamentError("schedule", str(e)) from None
    if expr != t.schedule:
        raise TournamentError("schedule", f"write it with one space between fields: {expr!r}")
    if t.duration_s is None:
        raise TournamentError("durationSeconds", "required with a schedule")
    if not 1 <= t.duration_s <= MAX_DURATION_S:
        raise TournamentError("durationSeconds", f"must be 1 to {MAX_DURATION_S}")
    gap, _ = schedule.shortest_gap(expr)
    if gap < min_period_s:
        raise TournamentError(
            "schedule",
            f"{expr!r} starts runs {gap} s apart; at least {min_period_s} s between two "
            "starts (server.tournament_min_period_s)",
        )
    if t.duration_s > gap:
        raise TournamentError(
            "durationSeconds",
            f"{t.duration_s} s is longer than the {gap} s between two starts of "
            f"{expr!r}: runs would overlap",
        )


@dataclass(frozen=True, slots=True)
class Entered:
    """A player's standing in one tournament, as a record answers it."""

    points: int
    attempts_left: int | None  # None: no limit


def tournament_totals(
    totals: dict[str, int], specs: dict[str, BoardSpec]
) -> tuple[dict[str, int], dict[str, Entered]]:
    """A record's totals (``fold_targets``) split in two: by board, and by tournament id
    with the attempts left (``specs``: the tournament boards' specs, by board name)."""
    boards: dict[str, int] = {}
    entered: dict[str, Entered] = {}
    for name, total in totals.items():
        tid = tournament_of(name)
        if tid is None:
            boards[name] = total
        elif not name.endswith(ATTEMPTS_SUFFIX):
            spec = specs.get(name)
            used = totals.get(name + ATTEMPTS_SUFFIX, 0)
            limit = spec.max_attempts if isinstance(spec, TournamentSpec) else None
            entered[tid] = Entered(total, None if limit is None else max(0, limit - used))
    return boards, entered
