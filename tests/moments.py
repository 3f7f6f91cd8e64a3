"""Moments for a test's results that fall in today's windows at any hour of any day.

A test that sends a history "an hour ago" and then reads this week's or today's board fails
in the first hour of a day (the history lands in yesterday's day window) and on Mondays
(yesterday is last week). ``earlier_today`` gives moments that are in the past and all in
today's UTC day: so in today's day window, and this week's, month's and season's, whose
boundaries are midnights too."""

from __future__ import annotations

import time

import pytest

DAY = 86_400


def earlier_today(n: int, within_s: float = 3600.0) -> list[float]:
    """``n`` moments, ascending, over the last ``within_s`` seconds, or since midnight (UTC)
    when that was later, the last a second before now. In a day's first ``n`` seconds it waits
    until there is a second for each (the only wait: a run just after midnight)."""
    now = time.time()
    midnight = now - now % DAY
    if now - midnight < n + 1:
        time.sleep(n + 1 - (now - midnight))
        now = time.time()
    start = max(now - within_s, midnight)
    step = (now - 1 - start) / n
    return [start + i * step for i in range(1, n + 1)]


def week_start(t: float) -> float:
    """The start of ``t``'s ISO week (a Monday, 00:00 UTC; 1970-01-01 was a Thursday)."""
    days = int(t // DAY)
    return float((days - (days + 3) % 7) * DAY)


def skip_in_a_weeks_first(seconds: float, now: float) -> None:
    """Skip a test whose results, recorded ``seconds`` before ``now`` (older than the log a
    rebuild applies again, which would mend what the test compares), must be in the week of
    ``now``: in a week's first ``seconds`` they are last week's, and the time is not the
    test's to move (its rebuild runs as a process, on the machine's clock)."""
    if now - seconds < week_start(now):
        pytest.skip(
            f"results {seconds:.0f} s old are last week's in this week's first {seconds:.0f} s"
        )
