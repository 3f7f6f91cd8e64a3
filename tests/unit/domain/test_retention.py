"""The retention's rules: the bound results are refused by, and which day may leave the
store (a whole day, once all of it is past that bound)."""

from __future__ import annotations

import pytest

from podium.domain.retention import (
    DAY_S,
    day_id,
    day_start,
    hand_limit,
    oldest_accepted,
    parse_day,
    prunable,
)

T0 = 1_792_800_000  # 2026-10-24T00:00:00Z


def test_the_bound_is_the_retention_before_now_and_none_keeps_everything() -> None:
    assert oldest_accepted(T0 + 0.9, 90) == T0 - 90 * DAY_S
    assert oldest_accepted(T0, 0) is None
    assert hand_limit(T0, 0) is None


def test_days_are_utc_dates() -> None:
    assert day_id(T0) == "2026-10-24"
    assert parse_day("2026-10-24") == T0
    assert day_start(T0 + DAY_S - 1) == T0
    with pytest.raises(ValueError):
        parse_day("24/10/2026")


def test_a_day_is_prunable_only_once_all_of_it_is_past_the_bound() -> None:
    assert prunable(None, T0) is None
    assert prunable(T0 + 5, None) is None
    # The day of the oldest result ends at T0 + DAY_S: prunable at that bound, not before.
    assert prunable(T0 + 5, T0 + DAY_S - 1) is None
    assert prunable(T0 + 5, T0 + DAY_S) == (T0, T0 + DAY_S)


def test_a_prunable_day_is_wholly_refused() -> None:
    """Whatever the time of the pass, every result of a day it may prune is refused from
    then on: a retry of one can never find its copy gone and count again."""
    for now in (T0 + 3 * DAY_S, T0 + 3 * DAY_S + 1, T0 + 3 * DAY_S + 86_399.5):
        before = oldest_accepted(now, 2)
        day = prunable(T0 + 7, before)
        assert day is not None
        assert before is not None and day[1] - 1 < before  # its last second is refused
        # and the hand-run limit never reaches past what the service refuses
        limit = hand_limit(now, 2)
        assert limit is not None and limit <= before
