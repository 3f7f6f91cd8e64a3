"""The checker's rank check (``rankcheck.py``) on fabricated histories: a false exact rank is
caught, a true one passes, and the bounds follow the history's uncertainty, the tie rule,
``asOf`` and the board's freshness; an estimate whose interval misses the true rank, or that
has none, is caught, one whose interval holds it passes. No fleet: it runs anywhere."""

from __future__ import annotations

from tests.integration.rankcheck import (
    Commit,
    Ledger,
    RankRead,
    Row,
    false_ranks,
    outside_intervals,
)

PLAYERS = ["a", "b", "c"]
# a and b play at 0, acknowledged at 1; c and b at 5, acknowledged at 6.
HISTORY = [
    Commit(0.0, 1.0, {"a": 10, "b": 5}),
    Commit(5.0, 6.0, {"c": 20, "b": 1}),
]


def read(
    player: str,
    rank: int,
    points: int,
    sent: float,
    answered: float,
    *,
    exact: bool = True,
    as_of: float | None = None,
    wall: float = 1000.0,
    neighbors: tuple[Row, ...] = (),
    interval: tuple[int, int] | None = None,
) -> RankRead:
    low, high = interval or (None, None)
    return RankRead(
        "api1", player, sent, answered, wall, exact, rank, points, as_of, neighbors, low, high
    )


def check(*reads: RankRead, lag_s: float = 0.0, history: list[Commit] = HISTORY) -> list[str]:
    found = false_ranks(Ledger(history), PLAYERS, reads, lambda _: lag_s)
    return [f.why for f in found]


def test_a_true_exact_rank_passes_and_a_false_one_is_caught() -> None:
    assert check(read("a", 1, 10, 2.0, 2.1)) == []  # a 10, b 5, c nothing yet
    assert check(read("b", 2, 5, 2.0, 2.1)) == []
    wrong = check(read("a", 2, 10, 2.0, 2.1))
    assert wrong == ["a ranked 2 with 10 points: only 1..1"]
    assert check(read("b", 1, 5, 2.0, 2.1)) == ["b ranked 1 with 5 points: only 2..2"]


def test_points_never_held_are_caught() -> None:
    assert check(read("a", 1, 11, 2.0, 2.1)) == ["a never held 11 points: between 10 and 10"]
    # b's total after c's match may be 5 or 6 while it is in flight, never 7
    assert check(read("b", 2, 6, 5.5, 5.6)) == []
    assert check(read("b", 2, 5, 5.5, 5.6)) == []
    assert check(read("b", 2, 7, 5.5, 5.6)) != []


def test_a_subset_of_the_matches_in_flight_and_nothing_else() -> None:
    history = [Commit(0.0, 9.0, {"a": 10, "b": 1}), Commit(0.0, 9.0, {"a": 20, "c": 1})]
    assert check(read("a", 1, 30, 1.0, 1.1), history=history) == []
    assert check(read("a", 1, 20, 1.0, 1.1), history=history) == []
    assert check(read("a", 1, 25, 1.0, 1.1), history=history) != []


def test_a_match_in_flight_allows_either_rank_and_no_other() -> None:
    # c's 20 may or may not be committed during [5.5, 5.6]: a is first or second
    assert check(read("a", 1, 10, 5.5, 5.6)) == []
    assert check(read("a", 2, 10, 5.5, 5.6)) == []
    assert check(read("a", 3, 10, 5.5, 5.6)) == ["a ranked 3 with 10 points: only 1..2"]


def test_a_board_behind_the_store_is_true_only_within_its_freshness() -> None:
    # Acknowledged at 6: a board still without c's 20 at 6.5 is half a second behind.
    late = read("a", 1, 10, 6.5, 6.6)
    assert check(late) == ["a ranked 1 with 10 points: only 2..2"]
    assert check(late, lag_s=1.0) == []
    found = false_ranks(Ledger(HISTORY), PLAYERS, [late], lambda _: 0.0)
    assert found[0].needs_lag_s is not None and 0.5 <= found[0].needs_lag_s <= 0.52


def test_an_answer_as_of_an_earlier_time_speaks_for_that_time() -> None:
    # Sent at 6.5 (wall 1000.5), labelled asOf 999: a moment from 4.0 on (asOf is rounded
    # down to the second), when c's match was not yet certain.
    assert check(read("a", 1, 10, 6.5, 6.6, as_of=999.0, wall=1000.5)) == []
    # asOf 1000 (a moment from 5.0 on, c's still in flight): the same
    assert check(read("a", 1, 10, 6.5, 6.6, as_of=1000.0, wall=1000.5)) == []
    # and still no rank below what anyone could have passed a by the answer
    assert check(read("a", 3, 10, 6.5, 6.6, as_of=999.0, wall=1000.5)) != []


def test_ties_go_to_the_greater_player_id() -> None:
    history = [Commit(0.0, 1.0, {"a": 10, "b": 10})]
    assert check(read("b", 1, 10, 2.0, 2.1), history=history) == []
    assert check(read("a", 2, 10, 2.0, 2.1), history=history) == []
    assert check(read("a", 1, 10, 2.0, 2.1), history=history) == [
        "a ranked 1 with 10 points: only 2..2"
    ]


def test_each_neighbor_row_is_checked_and_estimates_are_not() -> None:
    good = (Row("a", 1, 10), Row("b", 2, 5))
    assert check(read("b", 2, 5, 2.0, 2.1, neighbors=good)) == []
    bad = (Row("a", 1, 12), Row("b", 2, 5))
    assert check(read("b", 2, 5, 2.0, 2.1, neighbors=bad)) == [
        "a never held 12 points: between 10 and 10"
    ]
    assert check(read("a", 3, 10, 2.0, 2.1, exact=False)) == []


def estimate(
    player: str,
    rank: int,
    points: int,
    sent: float,
    answered: float,
    interval: tuple[int, int] | None,
    as_of: float | None = None,
    wall: float = 1000.0,
) -> RankRead:
    return read(
        player, rank, points, sent, answered, exact=False, interval=interval, as_of=as_of, wall=wall
    )


def outside(*reads: RankRead, lag_s: float = 0.0, history: list[Commit] = HISTORY) -> list[str]:
    found = outside_intervals(Ledger(history), PLAYERS, reads, lambda _: lag_s)
    return [f.why for f in found]


def test_an_estimate_whose_interval_holds_the_true_rank_passes_and_one_that_misses_is_caught() -> (
    None
):
    # at 2: a 10, b 5, c nothing yet: b is second
    assert outside(estimate("b", 2, 5, 2.0, 2.1, (1, 3))) == []
    assert outside(estimate("b", 2, 5, 2.0, 2.1, (2, 2))) == []
    assert outside(estimate("b", 1, 5, 2.0, 2.1, (1, 1))) == [
        "b with 5 points ranked only 2..2, outside the estimate's [1, 1]"
    ]
    assert outside(estimate("b", 3, 5, 2.0, 2.1, (3, 4))) != []
    # points the player never held
    assert outside(estimate("b", 2, 6, 2.0, 2.1, (1, 3))) == [
        "b never held 6 points: between 5 and 5"
    ]


def test_an_estimate_without_its_interval_or_outside_its_own_is_caught() -> None:
    assert outside(estimate("b", 2, 5, 2.0, 2.1, None)) == [
        "b's estimated rank 2 carries no interval"
    ]
    assert outside(estimate("b", 2, 5, 2.0, 2.1, (3, 4))) == [
        "b's estimated rank 2 is outside its own [3, 4]"
    ]


def test_an_estimate_speaks_for_its_answer_not_its_as_of() -> None:
    # At 6.5 c's 20 is acknowledged: b (6) is third. asOf 999 (a moment from 4.0 on, when
    # b was second) does not excuse an interval that misses the third place now...
    late = estimate("b", 2, 6, 6.5, 6.6, (2, 2), as_of=999.0, wall=1000.5)
    assert outside(late) == ["b with 6 points ranked only 3..3, outside the estimate's [2, 2]"]
    # ...unless the board may be that far behind the store
    assert outside(late, lag_s=2.0) == []
    # and exact answers are not held to intervals
    assert outside(read("b", 2, 6, 6.5, 6.6)) == []
