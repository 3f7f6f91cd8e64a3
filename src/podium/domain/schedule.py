"""Cron schedules: when each window of a scheduled board starts (docs/architecture.md §3.1).

A schedule is a 5-field cron expression (minute, hour, day of the month, month, day of the
week) read by croniter, always in UTC. Starts are whole minutes, which is what lets the
lookups below be cached by minute: a result's window is looked up on every write, and
croniter takes a fifth of a millisecond for one step, so the same minute is worked out once.
croniter is a pure library (no I/O), so this stays in the domain.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from itertools import pairwise

from croniter import CroniterError, croniter

MINUTE = 60
DAY = 86_400
FIELDS = 5
# Where the check of a schedule's gaps starts, and how far it looks: a fixed place, so that a
# settings file is refused or accepted the same way whenever it is read. From the last day of
# 2027 over 800 days it sees two year ends and a leap day (2028-02-29).
CHECK_FROM = int(datetime(2027, 12, 31, tzinfo=UTC).timestamp())
CHECK_DAYS = 800


class ScheduleError(ValueError):
    """A cron expression podium does not take as a schedule."""


def check(expr: str) -> str:
    """``expr`` with its fields separated by one space; ScheduleError says what is wrong."""
    fields = expr.split()
    if len(fields) != FIELDS:
        raise ScheduleError(
            f"expected 5 cron fields (minute hour day month weekday, in UTC), "
            f"got {len(fields)} in {expr!r}"
        )
    for item in (i for f in fields for i in f.split(",")):
        # croniter's R (random) and H (hashed) pick minutes per process: every process of a
        # fleet must agree on when a window starts.
        if item[:1] in ("R", "H") and item[1:2] in ("", "(", "/"):
            raise ScheduleError(f"{item!r} in {expr!r}: random and hashed fields are refused")
    text = " ".join(fields)
    if not croniter.is_valid(text):
        raise ScheduleError(f"{expr!r} is not a cron expression")
    try:
        croniter(text, CHECK_FROM).get_next(float)
    except CroniterError:
        raise ScheduleError(f"{expr!r} never starts") from None
    return text


@lru_cache(maxsize=4096)
def _last_start(expr: str, minute: int) -> int | None:
    try:
        return int(croniter(expr, minute + 1).get_prev(float))  # strictly before minute + 1
    except (CroniterError, ValueError, OverflowError):
        return None  # far outside the calendar croniter knows


@lru_cache(maxsize=4096)
def _next_start(expr: str, minute: int) -> int | None:
    try:
        return int(croniter(expr, minute + MINUTE - 1).get_next(float))
    except (CroniterError, ValueError, OverflowError):
        return None


def last_start(expr: str, t: int) -> int | None:
    """The latest start at or before second ``t`` (a start at ``t`` itself included)."""
    # Starts are whole minutes: none lies between t's minute and t.
    return _last_start(expr, t - t % MINUTE)


def next_start(expr: str, t: int) -> int | None:
    """The first start strictly after second ``t``."""
    # The first start after t is the first at or after t's next whole minute.
    return _next_start(expr, t - t % MINUTE)


@lru_cache(maxsize=64)
def shortest_gap(expr: str) -> tuple[int, int]:
    """The shortest time between two consecutive starts from ``CHECK_FROM`` over
    ``CHECK_DAYS`` (or to the second day it runs on, if later), and the first start of
    that pair.

    The days the schedule runs on are croniter's (day of month or of week, L, W, #); every
    such day has the same times, from the minute and hour fields. So the gaps are those
    between a day's times, and from a day's last time to the next day's first: exact over
    the horizon, at one croniter step a day rather than one a start (a schedule every minute
    has half a million starts a year)."""
    (minutes, hours, *_), _ = croniter.expand(expr)
    times = sorted(
        int(h) * 3600 + int(m) * MINUTE
        for h in (range(24) if hours == ["*"] else hours)
        for m in (range(60) if minutes == ["*"] else minutes)
    )
    _, _, dom, month, dow = expr.split()
    days = croniter(f"0 0 {dom} {month} {dow}", CHECK_FROM - 1)
    runs = [int(days.get_next(float))]
    while len(runs) < 2 or runs[-1] < CHECK_FROM + CHECK_DAYS * DAY:
        runs.append(int(days.get_next(float)))
    within = [(b - a, runs[0] + a) for a, b in pairwise(times)]
    across = [(d2 + times[0] - (d1 + times[-1]), d1 + times[-1]) for d1, d2 in pairwise(runs)]
    return min(within + across)
