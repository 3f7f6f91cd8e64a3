"""The review flags: a jump far above a player's own results, an improbable streak."""

from __future__ import annotations

from podium.domain.models import Mode
from podium.domain.suspicion import MIN_HISTORY, STREAK, flag_for

MODE = Mode("ranked", 0, 1000)


def test_no_flag_without_history_or_for_ordinary_results() -> None:
    assert flag_for(900, [], MODE) is None
    assert flag_for(900, [100] * (MIN_HISTORY - 1), MODE) is None  # too little history to judge
    assert flag_for(250, [100] * MIN_HISTORY, MODE) is None  # higher, not 3x
    assert flag_for(280, [100, 120, 90, 110, 100], MODE) is None  # under 3x the median


def test_a_jump_is_flagged_with_its_reason() -> None:
    reason = flag_for(800, [100, 120, 90, 110, 100], MODE)
    assert reason is not None and reason.startswith("jump") and "median of 100" in reason


def test_a_jump_must_also_be_large_against_the_mode_range() -> None:
    # 3x of a tiny median is not suspicious when it is a small part of the range
    assert flag_for(30, [10] * MIN_HISTORY, MODE) is None


def test_a_streak_at_the_top_of_the_range_is_flagged() -> None:
    assert flag_for(990, [960] * (STREAK - 1), MODE) is not None
    assert flag_for(990, [960] * (STREAK - 2), MODE) is None  # one short
    assert flag_for(990, [960, 960, 500, 960], MODE) is None  # broken
    reason = flag_for(1000, [1000] * 10, MODE)
    assert reason is not None and reason.startswith("streak")
