"""Windows (docs/architecture.md §3.1): which window a second belongs to, and the ids used in
URLs and keys."""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podium.domain import windows
from podium.domain.windows import (
    ALL_TIME,
    DAY,
    WEEK,
    Window,
    WindowError,
    WindowKind,
    WindowRule,
    index_expiry,
    to_epoch,
    to_rfc3339,
)


def ts(text: str) -> int:
    """Epoch seconds of an RFC 3339 UTC time (or a bare date, at midnight UTC)."""
    if "T" not in text:
        text += "T00:00:00Z"
    return to_epoch(datetime.fromisoformat(text.replace("Z", "+00:00")))


SEASON_START = ts("2026-09-07")  # a Monday
SEASON = WindowRule(WindowKind.SEASON, season_start=SEASON_START, season_weeks=13)
MONTH = WindowRule(WindowKind.MONTH)
ISO_WEEK = WindowRule(WindowKind.WEEK)
UTC_DAY = WindowRule(WindowKind.DAY)
ALL = WindowRule(WindowKind.ALL)


def at(rule: WindowRule, t: int) -> Window:
    w = rule.window_at(t)
    assert w is not None
    return w


# --- ids -----------------------------------------------------------------------------------


def test_ids_have_the_documented_shapes() -> None:
    t = ts("2026-10-28T19:04:11Z")
    assert at(SEASON, t).id == "S1"
    assert at(SEASON, SEASON_START + 3 * 13 * WEEK).id == "S4"
    assert at(MONTH, ts("2026-11-15T12:00:00Z")).id == "2026-11"
    assert at(ISO_WEEK, t).id == "2026-W44"
    assert at(UTC_DAY, t).id == "2026-10-28"
    assert at(ALL, t).id == "all"


def test_single_digit_parts_are_zero_padded() -> None:
    t = ts("2027-01-05T08:00:00Z")
    assert at(MONTH, t).id == "2027-01"
    assert at(ISO_WEEK, t).id == "2027-W01"
    assert at(UTC_DAY, t).id == "2027-01-05"


# --- days ----------------------------------------------------------------------------------


def test_day_is_a_utc_day() -> None:
    w = at(UTC_DAY, ts("2026-10-28T19:04:11Z"))
    assert (w.start, w.end) == (ts("2026-10-28"), ts("2026-10-29"))
    assert at(UTC_DAY, ts("2026-10-28T23:59:59Z")) == w
    assert at(UTC_DAY, ts("2026-10-29T00:00:00Z")).id == "2026-10-29"
    # a local time just after midnight east of UTC is still the day before in UTC
    plus2 = timezone(timedelta(hours=2))
    assert at(UTC_DAY, to_epoch(datetime(2026, 10, 29, 1, 30, tzinfo=plus2))).id == "2026-10-28"


# --- ISO weeks -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("day", "week_id", "monday"),
    [
        ("2026-10-28", "2026-W44", "2026-10-26"),
        ("2026-12-31", "2026-W53", "2026-12-28"),
        ("2027-01-01", "2026-W53", "2026-12-28"),
        ("2027-01-03", "2026-W53", "2026-12-28"),
        ("2027-01-04", "2027-W01", "2027-01-04"),
        ("2024-12-30", "2025-W01", "2024-12-30"),
        ("2025-12-31", "2026-W01", "2025-12-29"),
        ("2021-01-03", "2020-W53", "2020-12-28"),
    ],
)
def test_iso_week_edges(day: str, week_id: str, monday: str) -> None:
    for clock in ("T00:00:00Z", "T12:00:00Z", "T23:59:59Z"):
        w = at(ISO_WEEK, ts(day + clock))
        assert w.id == week_id
        assert (w.start, w.end) == (ts(monday), ts(monday) + WEEK)


def test_week_starts_monday_midnight_utc() -> None:
    sunday_last_second = ts("2026-11-01T23:59:59Z")
    assert at(ISO_WEEK, sunday_last_second).id == "2026-W44"
    assert at(ISO_WEEK, sunday_last_second + 1).id == "2026-W45"


# --- months --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("inside", "month_id", "start", "end"),
    [
        ("2028-02-29T12:00:00Z", "2028-02", "2028-02-01", "2028-03-01"),  # leap year
        ("2024-02-10T00:00:00Z", "2024-02", "2024-02-01", "2024-03-01"),  # leap year
        ("2026-02-28T23:59:59Z", "2026-02", "2026-02-01", "2026-03-01"),  # common year
        ("2026-12-31T23:59:59Z", "2026-12", "2026-12-01", "2027-01-01"),  # into next year
        ("2026-01-31T00:00:00Z", "2026-01", "2026-01-01", "2026-02-01"),
        ("2026-04-30T00:00:00Z", "2026-04", "2026-04-01", "2026-05-01"),
    ],
)
def test_month_edges(inside: str, month_id: str, start: str, end: str) -> None:
    w = at(MONTH, ts(inside))
    assert w == Window(month_id, ts(start), ts(end))


def test_leap_february_is_29_days_and_common_is_28() -> None:
    leap = at(MONTH, ts("2028-02-15"))
    common = at(MONTH, ts("2027-02-15"))
    assert leap.end is not None and common.end is not None
    assert leap.end - leap.start == 29 * DAY
    assert common.end - common.start == 28 * DAY


def test_december_closes_on_the_first_of_january() -> None:
    assert at(MONTH, ts("2027-01-01") - 1).id == "2026-12"
    assert at(MONTH, ts("2027-01-01")).id == "2027-01"


# --- seasons -------------------------------------------------------------------------------


def test_seasons_count_from_season_start() -> None:
    length = 13 * WEEK
    assert SEASON.window_at(SEASON_START - 1) is None
    assert at(SEASON, SEASON_START) == Window("S1", SEASON_START, SEASON_START + length)
    assert at(SEASON, SEASON_START + length - 1).id == "S1"
    assert at(SEASON, SEASON_START + length) == Window(
        "S2", SEASON_START + length, SEASON_START + 2 * length
    )
    assert at(SEASON, SEASON_START + 10 * length + 5).id == "S11"


def test_season_weeks_sets_the_season_length() -> None:
    rule = WindowRule(WindowKind.SEASON, season_start=SEASON_START, season_weeks=4)
    assert at(rule, SEASON_START + 4 * WEEK - 1).id == "S1"
    assert at(rule, SEASON_START + 4 * WEEK).id == "S2"
    assert rule.max_length == 4 * WEEK


def test_max_length_per_kind() -> None:
    assert UTC_DAY.max_length == DAY
    assert ISO_WEEK.max_length == WEEK
    assert MONTH.max_length == 31 * DAY
    assert SEASON.max_length == 13 * WEEK
    assert ALL.max_length is None


# --- parse ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "window_id", "start"),
    [
        (SEASON, "S1", SEASON_START),
        (SEASON, "S4", SEASON_START + 3 * 13 * WEEK),
        (MONTH, "2026-11", ts("2026-11-01")),
        (ISO_WEEK, "2026-W44", ts("2026-10-26")),
        (ISO_WEEK, "2026-W53", ts("2026-12-28")),
        (ISO_WEEK, "2020-W53", ts("2020-12-28")),
        (UTC_DAY, "2026-10-28", ts("2026-10-28")),
        (UTC_DAY, "2028-02-29", ts("2028-02-29")),
    ],
)
def test_parse_known_ids(rule: WindowRule, window_id: str, start: int) -> None:
    w = rule.parse(window_id)
    assert (w.id, w.start) == (window_id, start)
    assert w == rule.window_at(start)


def test_parse_all() -> None:
    assert ALL.parse("all") == ALL_TIME == Window("all", 0, None)


@pytest.mark.parametrize(
    ("rule", "bad"),
    [
        (ISO_WEEK, "2026-W4"),
        (ISO_WEEK, "2026-W54"),
        (ISO_WEEK, "2025-W53"),  # 2025 has only 52 ISO weeks
        (ISO_WEEK, "2026-W00"),
        (ISO_WEEK, "2026-W044"),
        (ISO_WEEK, "2026-w44"),
        (ISO_WEEK, "2026W44"),
        (ISO_WEEK, "2026-10-28"),
        (MONTH, "2026-13"),
        (MONTH, "2026-00"),
        (MONTH, "2026-1"),
        (MONTH, "202611"),
        (MONTH, "2026-11-01"),
        (SEASON, "S0"),
        (SEASON, "S01"),
        (SEASON, "s1"),
        (SEASON, "S"),
        (SEASON, "S-1"),
        (SEASON, "1"),
        (SEASON, "S1 "),
        (UTC_DAY, "2026-02-30"),
        (UTC_DAY, "2027-02-29"),  # not a leap year
        (UTC_DAY, "2026-2-28"),
        (UTC_DAY, "2026/10/28"),
        (UTC_DAY, "2026-10-28T00:00:00Z"),
        (UTC_DAY, "20261028"),
        (UTC_DAY, "2026-W44"),
        (ALL, "al"),
        (ALL, "ALL"),
        (ALL, "all "),
        (ALL, ""),
        (ALL, "S1"),
    ],
)
def test_parse_rejects_malformed_or_non_canonical_ids(rule: WindowRule, bad: str) -> None:
    with pytest.raises(WindowError, match=rule.kind.value):
        rule.parse(bad)


def test_window_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        MONTH.parse("nope")


def test_season_ids_need_a_season_start() -> None:
    with pytest.raises(WindowError):
        WindowRule(WindowKind.SEASON).parse("S1")


# --- contains and expiry -------------------------------------------------------------------


def test_contains_is_half_open() -> None:
    w = Window("2026-10-28", ts("2026-10-28"), ts("2026-10-29"))
    assert w.contains(w.start)
    assert w.contains(w.start + DAY - 1)
    assert not w.contains(w.start - 1)
    assert not w.contains(w.start + DAY)


def test_all_time_contains_every_second_from_the_epoch() -> None:
    assert ALL_TIME.contains(0)
    assert ALL_TIME.contains(ts("2099-12-31T23:59:59Z"))
    assert ALL.window_at(ts("2026-10-28")) is ALL_TIME


def test_index_expiry_is_a_week_after_the_window_closes() -> None:
    w = at(UTC_DAY, ts("2026-10-28T19:04:11Z"))
    assert index_expiry(w) == ts("2026-10-29") + 7 * DAY
    assert index_expiry(ALL_TIME) is None


# --- time conversions ----------------------------------------------------------------------


def test_to_epoch_refuses_naive_datetimes() -> None:
    with pytest.raises(ValueError, match="time zone"):
        to_epoch(datetime(2026, 10, 28, 19, 4, 11))


def test_to_epoch_and_rfc3339() -> None:
    t = to_epoch(datetime(2026, 10, 28, 19, 4, 11, tzinfo=UTC))
    assert t == calendar.timegm((2026, 10, 28, 19, 4, 11, 0, 0, 0)) == 1_793_214_251
    assert to_rfc3339(t) == "2026-10-28T19:04:11Z"
    assert to_rfc3339(t + 0.9) == "2026-10-28T19:04:11Z"  # whole seconds
    plus2 = timezone(timedelta(hours=2))
    assert to_epoch(datetime(2026, 10, 28, 21, 4, 11, tzinfo=plus2)) == t
    # always a four-digit year, as RFC 3339 has it (strftime's %Y drops the zeros)
    assert to_rfc3339(to_epoch(datetime(1, 1, 1, tzinfo=UTC))) == "0001-01-01T00:00:00Z"
    assert to_rfc3339(to_epoch(datetime(999, 12, 31, 23, 59, 59, tzinfo=UTC))) == (
        "0999-12-31T23:59:59Z"
    )


# --- properties over several years ---------------------------------------------------------

EARLY = ts("2020-01-06")  # a Monday, also the season start for the property rules
LATE = ts("2032-01-01")
RULES = [
    WindowRule(WindowKind.SEASON, season_start=EARLY, season_weeks=13),
    WindowRule(WindowKind.SEASON, season_start=EARLY + 3 * DAY + 17, season_weeks=5),
    MONTH,
    ISO_WEEK,
    UTC_DAY,
    ALL,
]


@given(st.integers(min_value=EARLY + 3 * DAY + 17, max_value=LATE))
def test_every_second_maps_to_a_window_that_contains_it_and_parses_back(t: int) -> None:
    for rule in RULES:
        w = at(rule, t)
        assert w.contains(t)
        assert rule.parse(w.id) == w
        if w.end is not None:
            # the codec takes its time bits from max_length: no window may be longer
            assert rule.max_length is not None
            assert 0 < w.end - w.start <= rule.max_length


@given(st.integers(min_value=EARLY + 3 * DAY + 17, max_value=LATE))
def test_windows_tile_time_without_gaps(t: int) -> None:
    for rule in RULES:
        w = at(rule, t)
        if w.end is None:
            continue
        assert at(rule, w.start) == w
        assert at(rule, w.end - 1) == w
        nxt = at(rule, w.end)
        assert nxt.start == w.end
        assert nxt.id != w.id
        before = rule.window_at(w.start - 1)
        assert before is None or (before.end == w.start and before.id != w.id)


@given(st.dates(min_value=date(2020, 1, 1), max_value=date(2031, 12, 31)))
def test_day_week_month_ids_agree_with_the_calendar(d: date) -> None:
    t = ts(d.isoformat() + "T13:14:15Z")
    year, week, _ = d.isocalendar()
    assert at(UTC_DAY, t).id == d.isoformat()
    assert at(ISO_WEEK, t).id == f"{year}-W{week:02d}"
    assert at(MONTH, t).id == d.strftime("%Y-%m")


def test_indexed_window_is_a_stored_window_whose_index_key_still_lives() -> None:
    day = WindowRule(WindowKind.DAY)
    w = day.window_at(1_790_000_000)
    assert w is not None and w.end is not None
    ttl = windows.INDEX_TTL_AFTER_CLOSE
    assert windows.indexed_window(day, w.id, w.end + ttl - 1) == w
    assert windows.indexed_window(day, w.id, w.end + ttl) is None  # its key has expired
    assert windows.indexed_window(day, "2026-W05", w.start) is None  # another kind's id
    ever = WindowRule(WindowKind.ALL)
    a = ever.window_at(0)
    assert a is not None and windows.indexed_window(ever, a.id, 4e9) == a  # never expires
