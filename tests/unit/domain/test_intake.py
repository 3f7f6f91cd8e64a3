"""Admission by time (domain/intake.py): who runs, who waits in what order, who is turned
away and why, and the moving estimate of a turn's time. A clock is a number passed in."""

from __future__ import annotations

import pytest

from podium.domain.intake import (
    ALPHA,
    FULL,
    LATE,
    MIN_SAMPLES,
    RUN,
    WAIT,
    Intake,
    TurnTime,
    late,
)


def timed(mean_s: float, samples: int = MIN_SAMPLES) -> TurnTime:
    """An estimate that has seen ``samples`` turns, each of ``mean_s``."""
    t = TurnTime()
    for _ in range(samples):
        t.add(mean_s)
    return t


def test_the_estimate_starts_at_the_first_turn_and_moves_a_share_toward_each_next() -> None:
    t = TurnTime()
    assert not t.trusted and t.samples == 0
    t.add(2.0)
    assert t.mean_s == 2.0
    t.add(1.0)
    assert t.mean_s == pytest.approx(2.0 + ALPHA * (1.0 - 2.0))
    for _ in range(100):
        t.add(0.5)
    assert t.mean_s == pytest.approx(0.5)  # a store that sped up is followed
    assert t.samples == 102


def test_the_estimate_is_trusted_only_after_enough_turns() -> None:
    t = TurnTime()
    for _ in range(MIN_SAMPLES - 1):
        t.add(10.0)
    assert not t.trusted
    assert not late(ahead=50, turns=1, turn=t, wait_s=1.0)  # however slow it says
    t.add(10.0)
    assert t.trusted
    assert late(ahead=50, turns=1, turn=t, wait_s=1.0)


@pytest.mark.parametrize(
    ("ahead", "turns", "mean_s", "is_late"),
    [
        (0, 1, 100.0, False),  # nothing ahead: its turn is the next, never late
        (1, 1, 0.9, False),  # one turn of 0.9 s ahead: within the second
        (1, 1, 1.1, True),
        (10, 20, 1.9, False),  # 10 ahead at 20 at once: half of 1.9 s
        (10, 20, 2.1, True),
        (19, 20, 1.0, False),  # 0.95 s
        (21, 20, 1.0, True),  # 1.05 s
    ],
)
def test_a_match_is_late_when_the_turns_ahead_of_it_alone_take_past_the_wait(
    ahead: int, turns: int, mean_s: float, is_late: bool
) -> None:
    assert late(ahead, turns, timed(mean_s), wait_s=1.0) is is_late


def test_matches_run_at_once_up_to_the_turns_then_wait_and_past_the_limit_are_full() -> None:
    intake = Intake(limit=4, turns=2, wait_s=1.0)
    assert [intake.arrive(t, 0.0) for t in (1, 2, 3, 4, 5)] == [RUN, RUN, WAIT, WAIT, FULL]
    assert intake.in_flight == 4 and intake.waiting == 2 and intake.running == 2


def test_turns_pass_to_the_waiting_first_come_first_served() -> None:
    intake = Intake(limit=10, turns=1, wait_s=1.0)
    assert intake.arrive(1, 0.0) == RUN
    assert [intake.arrive(t, 0.1 * t) for t in (2, 3, 4)] == [WAIT, WAIT, WAIT]
    assert intake.end(1, 0.5) == 2
    assert intake.arrive(5, 0.6) == WAIT  # behind those already waiting
    assert intake.end(2, 0.5) == 3
    assert intake.end(3, 0.5) == 4
    assert intake.end(4, 0.5) == 5
    assert intake.end(5, 0.5) is None
    assert intake.running == 0 and intake.in_flight == 0
    assert intake.arrive(6, 2.0) == RUN  # nothing waits, a turn is free


def test_a_match_that_arrives_while_others_wait_waits_too_though_a_turn_is_free() -> None:
    # No overtaking: a turn handed on stays taken until the match it went to ends.
    intake = Intake(limit=10, turns=1, wait_s=1.0)
    intake.arrive(1, 0.0)
    intake.arrive(2, 0.0)
    assert intake.end(1, 0.1) == 2 and intake.running == 1
    assert intake.arrive(3, 0.2) == WAIT


def test_only_turns_that_did_store_work_are_timed() -> None:
    intake = Intake(limit=10, turns=1, wait_s=1.0)
    intake.arrive(1, 0.0)
    intake.arrive(2, 0.0)
    intake.arrive(3, 0.0)
    assert intake.end(1, 0.4) == 2
    assert intake.end(2, None) == 3  # turned away when its turn came: no store work
    assert intake.turn.samples == 1 and intake.turn.mean_s == 0.4


def test_a_match_is_turned_away_late_by_the_estimate_before_it_queues() -> None:
    intake = Intake(limit=64, turns=2, wait_s=1.0, turn=timed(0.5))
    assert intake.arrive(1, 0.0) == RUN
    assert intake.arrive(2, 0.0) == RUN
    # Each match ahead in the queue is a quarter second at two at once: four within the
    # second, a fifth past it.
    assert [intake.arrive(t, 0.0) for t in range(3, 8)] == [WAIT] * 5
    assert intake.arrive(8, 0.0) == LATE
    assert intake.in_flight == 7 and intake.waiting == 5  # the late one is not in flight
    intake.end(1, 0.5)  # one turn ends: the queue is four long, the next one fits
    assert intake.arrive(9, 0.1) == WAIT


def test_full_is_said_before_late() -> None:
    # The third would be late too (a turn of 100 s ahead of it), but there is no room.
    intake = Intake(limit=2, turns=1, wait_s=1.0, turn=timed(100.0))
    assert [intake.arrive(t, 0.0) for t in (1, 2, 3)] == [RUN, WAIT, FULL]
    assert late(intake.waiting, 1, intake.turn, 1.0)


def test_a_waiting_match_is_overdue_once_it_waited_the_wait() -> None:
    intake = Intake(limit=10, turns=1, wait_s=1.0)
    intake.arrive(1, 0.0)
    intake.arrive(2, 5.0)
    assert intake.deadline(2) == 6.0
    assert not intake.overdue(2, 5.999)
    assert intake.overdue(2, 6.0)


def test_a_match_withdrawn_from_the_queue_is_not_handed_a_turn() -> None:
    intake = Intake(limit=10, turns=1, wait_s=1.0)
    for t in (1, 2, 3):
        intake.arrive(t, float(t))
    intake.withdraw(2)
    assert intake.in_flight == 2 and intake.waiting == 1
    assert intake.end(1, 0.1) == 3


def test_the_oldest_match_in_flight_counts_from_its_arrival_waiting_or_not() -> None:
    intake = Intake(limit=10, turns=1, wait_s=1.0)
    assert intake.oldest_s(3.0) == 0.0
    intake.arrive(1, 1.0)
    intake.arrive(2, 2.0)
    assert intake.oldest_s(3.0) == 2.0
    intake.end(1, 1.0)
    assert intake.oldest_s(3.0) == 1.0  # the one that waited, from when it came
    intake.end(2, 1.0)
    assert intake.oldest_s(3.0) == 0.0


def test_a_process_has_at_least_one_turn() -> None:
    intake = Intake(limit=10, turns=0, wait_s=1.0)
    assert intake.arrive(1, 0.0) == RUN
