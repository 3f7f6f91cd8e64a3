"""How the aggregator carries a shard's histogram counts from one cycle to the next
(``domain/recount.py``): whatever moves a board takes (rises, falls, entries, exits, inside
the bounds or outside them), the counts plus the moves are the counts of the board after."""

from __future__ import annotations

from bisect import bisect_left
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from podium.domain.recount import ROTATE, Move, applied, rotating, runs

BOUNDS = st.lists(st.integers(-100, 5000), min_size=2, max_size=40, unique=True).map(sorted)
MOVES = st.lists(
    st.tuples(st.integers(0, 40), st.one_of(st.none(), st.integers(-200, 6000))), max_size=60
)
START = st.dictionaries(st.integers(0, 40), st.integers(-200, 6000), max_size=40)


def counts(board: dict[int, int], bounds: list[int]) -> list[int]:
    values = sorted(board.values())
    edges = [bisect_left(values, b) for b in bounds]
    return [hi - lo for lo, hi in pairwise(edges)]


@settings(max_examples=300)
@given(START, BOUNDS, MOVES)
def test_the_counts_and_the_moves_since_are_the_counts_after(
    start: dict[int, int], bounds: list[int], writes: list[tuple[int, int | None]]
) -> None:
    board = dict(start)
    before = counts(board, bounds)
    moves: list[Move] = []
    for member, new in writes:  # as write.lua and ban.lua record them
        old = board.get(member)
        if old == new:
            continue  # a write that changed nothing records no move
        moves.append((old, new))
        if new is None:
            del board[member]
        else:
            board[member] = new
    assert applied(before, bounds, moves) == counts(board, bounds)


def test_moves_that_cannot_follow_the_counts_are_refused() -> None:
    # a member leaving a bucket the counts hold empty: these are not the counts it left
    assert applied([0, 2], [0, 10, 20], [(5, 15)]) is None
    assert applied([1, 2], [0, 10, 20], [(5, 15)]) == [0, 3]
    assert applied([1, 2], [0, 10, 20], [(None, 25), (-5, None), (19, 20)]) == [1, 1]


def test_every_bucket_is_counted_once_in_rotate_cycles() -> None:
    seen: list[int] = []
    for turn in range(ROTATE):
        seen.extend(rotating(100, turn))
    assert sorted(seen) == list(range(100))
    assert rotating(3, 5) == ([] if 5 >= 3 else [5])


def test_runs_join_neighbours() -> None:
    assert runs([]) == []
    assert runs([0, 1, 2, 5, 7, 8]) == [(0, 3), (5, 6), (7, 9)]
    assert runs(range(4)) == [(0, 4)]
