"""Schedule boards (docs/architecture.md §3.1): windows that open at every start of a cron
schedule for a fixed duration, with gaps between them; their ids, the settings that make
them, and what every kind of board says about when its window ends and the next begins."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podium.config.settings import parse
from podium.domain import schedule
from podium.domain.boards import BoardSpec
from podium.domain.windows import (
    DAY,
    WEEK,
    Window,
    WindowError,
    WindowKind,
    WindowRule,
    to_epoch,
)
from podium.errors import ConfigError
from podium.workers.aggregator import Aggregator


def ts(text: str) -> int:
    return to_epoch(datetime.fromisoformat(text.replace("Z", "+00:00")))


WEEKEND = WindowRule(WindowKind.SCHEDULE, schedule="0 18 * * FRI", duration=2 * DAY)
FRI = ts("2026-12-04T18:00:00Z")  # a Friday
SUN = FRI + 2 * DAY  # when that weekend's window closes


def at(rule: WindowRule, t: int) -> Window:
    w = rule.window_at(t)
    assert w is not None, t
    return w


# --- which window a second is in -------------------------------------------------------------


def test_a_second_inside_a_window_and_its_boundaries() -> None:
    w = at(WEEKEND, FRI + 3600)
    assert w == Window("20261204T1800", FRI, SUN)
    assert at(WEEKEND, FRI) == w  # the start is in the window
    assert at(WEEKEND, SUN - 1) == w  # the last second too
    assert WEEKEND.window_at(SUN) is None  # the end is not: windows are [start, end)


def test_between_two_windows_none_is_open() -> None:
    for t in (SUN, SUN + DAY, FRI + WEEK - 1):  # from the end to the second before the next
        assert WEEKEND.window_at(t) is None
        assert WEEKEND.latest(t) == Window("20261204T1800", FRI, SUN)  # the one that closed
        assert WEEKEND.next_start(t) == FRI + WEEK
    assert at(WEEKEND, FRI + WEEK).id == "20261211T1800"


def test_stepping_back_skips_the_gaps() -> None:
    w = at(WEEKEND, FRI + WEEK + 60)
    back = []
    for _ in range(3):
        b = WEEKEND.before(w)
        assert b is not None
        back.append(b.id)
        w = b
    assert back == ["20261204T1800", "20261127T1800", "20261120T1800"]
    # before any window of the schedule's: the latest to begin is the previous week's
    first = ts("2026-12-04T17:59:59Z")
    assert WEEKEND.window_at(first) is None
    assert WEEKEND.latest(first) == Window("20261127T1800", FRI - WEEK, SUN - WEEK)


def test_a_schedule_without_gaps_is_a_day_board() -> None:
    daily = WindowRule(WindowKind.SCHEDULE, schedule="0 0 * * *", duration=DAY)
    day = WindowRule(WindowKind.DAY)
    for t in (ts("2026-10-28T00:00:00Z"), ts("2026-10-28T23:59:59Z"), ts("2028-02-29T12:00:00Z")):
        a, b = at(daily, t), at(day, t)
        assert (a.start, a.end) == (b.start, b.end)
        before = daily.before(a)
        assert before is not None and (before.start, before.end) == (b.start - DAY, b.start)


@given(st.integers(min_value=ts("2000-01-01T00:00:00Z"), max_value=ts("2099-12-31T00:00:00Z")))
def test_every_window_holds_its_seconds_and_parses_back(t: int) -> None:
    latest = WEEKEND.latest(t)
    assert latest is not None and latest.start <= t
    w = WEEKEND.window_at(t)
    if w is None:
        assert latest.end is not None and latest.end <= t
        nxt = WEEKEND.next_start(t)
        assert nxt is not None and t < nxt == latest.start + WEEK
    else:
        assert w == latest and w.contains(t)
        assert WEEKEND.parse(w.id) == w
        assert datetime.fromtimestamp(w.start, UTC).weekday() == 4  # a Friday


# --- ids ---------------------------------------------------------------------------------------


def test_ids_parse_only_at_a_start_of_the_schedule() -> None:
    assert WEEKEND.parse("20261204T1800") == Window("20261204T1800", FRI, SUN)
    assert WEEKEND.parse("20261211T1800").start == FRI + WEEK  # not begun: the reads say 404
    with pytest.raises(WindowError, match="not a start of the schedule '0 18 \\* \\* FRI'"):
        WEEKEND.parse("20261204T1700")  # the right shape, not a start
    with pytest.raises(WindowError, match="not a start"):
        WEEKEND.parse("20261205T1800")  # a Saturday, inside the window
    for bad in (
        "2026-12-04T1800",
        "20261204T18",
        "20261304T1800",
        "20261204T1860",
        "20261204t1800",
        "2026-W49",
        "S1",
        "all",
        "",
    ):
        with pytest.raises(WindowError, match="not a schedule window id"):
            WEEKEND.parse(bad)


def test_ids_sort_as_their_starts() -> None:
    starts = [FRI - 60 * WEEK, FRI, FRI + WEEK, FRI + 200 * WEEK]
    ids = [at(WEEKEND, t).id for t in starts]
    assert ids == sorted(ids) and all(len(i) == 13 for i in ids)


# --- the cron expression ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("0 18 * * FRI *", "expected 5 cron fields"),
        ("@weekly", "expected 5 cron fields"),
        ("61 18 * * *", "is not a cron expression"),
        ("0 18 * * FRIDAY", "is not a cron expression"),
        ("0 0 30 2 *", "never starts"),
        ("H 18 * * FRI", "random and hashed fields are refused"),
        ("R 18 * * FRI", "random and hashed fields are refused"),
        ("0 H(0-5) * * *", "random and hashed fields are refused"),
    ],
)
def test_bad_expressions(expr: str, says: str) -> None:
    with pytest.raises(schedule.ScheduleError, match=says):
        schedule.check(expr)


def test_the_shortest_gap_is_found_where_it_is() -> None:
    assert schedule.shortest_gap("0 18 * * FRI")[0] == WEEK
    assert schedule.shortest_gap("*/15 * * * *")[0] == 900
    assert schedule.shortest_gap("0 0 1 * *")[0] == 28 * DAY  # February
    # within a day, and from one day's last start to the next day's first
    assert schedule.shortest_gap("0 0,12 * * *")[0] == 12 * 3600
    assert schedule.shortest_gap("0 2,23 * * *")[0] == 3 * 3600
    # a leap day: the 28th and 29th of February, one day apart, only in 2028
    gap, first = schedule.shortest_gap("0 0 28,29 2 *")
    assert (gap, first) == (DAY, ts("2028-02-28T00:00:00Z"))
    # the 31st of a month or a Monday: a Monday the 30th at 23:00, then the 31st at 00:00
    assert schedule.shortest_gap("0 0,2,23 31 * MON")[0] == 3600


# --- settings ----------------------------------------------------------------------------------


def errors(*boards: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as e:
        parse({"boards": list(boards)})
    return str(e.value)


def test_a_schedule_board_from_settings() -> None:
    board = {"name": "weekend", "window": "schedule", "duration_s": 172800}
    spec = parse({"boards": [{**board, "schedule": "0  18 * *   FRI"}]}).boards[0]
    assert spec.rule == WEEKEND  # the expression's spaces made one


@pytest.mark.parametrize(
    ("board", "says"),
    [
        ({"window": "schedule", "duration_s": 60}, "boards[0].schedule: required on a board"),
        ({"window": "schedule", "schedule": "0 18 * * FRI"}, "boards[0].duration_s: required"),
        ({"window": "week", "schedule": "0 18 * * FRI"}, "boards[0].schedule: only on a board"),
        ({"window": "day", "duration_s": 60}, "boards[0].duration_s: only on a board"),
        (
            {"window": "schedule", "schedule": "0 18 * * FRI", "duration_s": 0},
            "boards[0].duration_s: expected 1 to 31622400, got 0",
        ),
        (
            {"window": "schedule", "schedule": "0 18 * *", "duration_s": 60},
            "boards[0].schedule: expected 5 cron fields",
        ),
        (
            {"window": "schedule", "schedule": "0 18 * * FRI", "duration_s": WEEK + 1},
            "boards[0].duration_s: 604801 s is longer than the 604800 s between the starts "
            "at 2027-12-31T18:00:00Z and 2028-01-07T18:00:00Z of '0 18 * * FRI': windows "
            "would overlap",
        ),
        (
            {"window": "schedule", "schedule": "0 0 1 * *", "duration_s": 30 * DAY},
            "between the starts at 2029-02-01T00:00:00Z and 2029-03-01T00:00:00Z",  # 28 days
        ),
    ],
)
def test_schedule_settings_refused_with_the_board_and_field(
    board: dict[str, Any], says: str
) -> None:
    message = errors({"name": "weekend", **board})
    assert says in message and "\n" not in message, message


def test_a_duration_as_long_as_the_gap_is_taken() -> None:
    daily = {"name": "d", "window": "schedule", "schedule": "0 0 * * *", "duration_s": DAY}
    assert parse({"boards": [daily]}).boards[0].rule.max_length == DAY


def test_the_time_bits_fit_the_duration() -> None:
    spec = BoardSpec("weekend", WEEKEND)
    assert spec.codec.time_bits == 18  # 2 days: 172,800 s < 2**18
    late = spec.codec.encode(10, 2 * DAY - 1)  # the window's last second fits
    assert spec.codec.points(late) == 10
    hour = BoardSpec("h", WindowRule(WindowKind.SCHEDULE, schedule="0 * * * *", duration=3600))
    assert hour.codec.time_bits == 12


# --- when each kind of window ends, and the next begins ---------------------------------------


def test_next_start_on_every_kind() -> None:
    t = ts("2026-10-28T19:04:11Z")  # a Wednesday
    assert WindowRule(WindowKind.DAY).next_start(t) == ts("2026-10-29T00:00:00Z")
    assert WindowRule(WindowKind.WEEK).next_start(t) == ts("2026-11-02T00:00:00Z")  # Monday
    assert WindowRule(WindowKind.MONTH).next_start(t) == ts("2026-11-01T00:00:00Z")
    season = WindowRule(WindowKind.SEASON, season_start=ts("2026-09-07T00:00:00Z"))
    assert season.next_start(t) == ts("2026-12-07T00:00:00Z")  # 13 weeks on
    assert season.next_start(ts("2026-01-01T00:00:00Z")) == ts("2026-09-07T00:00:00Z")
    assert WindowRule(WindowKind.ALL).next_start(t) is None
    assert WEEKEND.next_start(FRI + 60) == FRI + WEEK  # while open: the next start, not its end


def test_the_aggregator_keeps_a_closed_scheduled_window_until_it_freezes() -> None:
    settings = parse(
        {
            "boards": [
                {
                    "name": "weekend",
                    "window": "schedule",
                    "schedule": "0 18 * * FRI",
                    "duration_s": 2 * DAY,
                    "freeze_after_s": 600,
                }
            ]
        }
    )
    agg = Aggregator(settings, [], None, None)  # type: ignore[arg-type]
    ids = lambda t: [w.id for _, w in agg.live(t)]  # noqa: E731
    assert ids(FRI + 60) == ["20261204T1800"]  # the one before froze long ago
    assert ids(SUN + 599) == ["20261204T1800"]  # closed, still taking late results
    assert ids(SUN + 600) == []  # due: nothing to aggregate until the next opens
    assert ids(FRI + WEEK) == ["20261211T1800"]
