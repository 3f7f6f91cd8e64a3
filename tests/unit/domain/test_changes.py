"""The tallies of writes by band (``domain/changes.py``): bands never fall as scores rise, and
whatever moves a board takes, the number of members ahead of any score changes by no more
than the tallies of those moves say, each way."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podium.domain.changes import SUB, Changes, band, octave, tallies, widened
from podium.domain.histogram import Estimate

SCORES = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)


@given(SCORES, SCORES)
def test_bands_never_fall_as_scores_rise(a: int, b: int) -> None:
    lo, hi = sorted((a, b))
    assert band(lo) <= band(hi)
    assert octave(lo) <= octave(hi)


@pytest.mark.parametrize("score", [1, 2, 3, 7, 8, 2**24, 2**24 + 2**21, 2**53 - 1])
def test_a_band_is_an_eighth_of_a_doubling(score: int) -> None:
    e = score.bit_length()
    assert band(score) == e * SUB + (score * SUB >> (e - 1)) - SUB
    assert band(score - 1) <= band(score) and octave(score) == e
    assert math.frexp(score)[1] == e


def test_scores_below_one_share_band_zero() -> None:
    assert band(0) == band(-5) == band(-(2**52)) == 0


def test_a_write_that_changes_nothing_is_not_tallied() -> None:
    assert tallies(5, 5) == []
    assert tallies(None, 5) == ["n", f"e{octave(5)}"]
    assert tallies(5, None) == ["n", f"x{octave(5)}"]
    assert tallies(3, 2**30) == ["n", *(f"+{b}" for b in range(band(3), band(2**30) + 1))]
    assert tallies(2**30, 3) == ["n", *(f"-{b}" for b in range(band(3), band(2**30) + 1))]


def _tally(moves: list[tuple[int | None, int | None]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for old, new in moves:
        for f in tallies(old, new):
            out[f] = out.get(f, 0) + 1
    return out


def _ahead(board: dict[int, int], s: int, descending: bool) -> int:
    return sum(1 for v in board.values() if (v > s if descending else v < s))


MOVES = st.lists(
    st.tuples(st.integers(0, 30), st.one_of(st.none(), st.integers(-50, 3000))), max_size=60
)


@settings(max_examples=300)
@given(
    start=st.dictionaries(st.integers(0, 30), st.integers(-50, 3000), max_size=25),
    moves=MOVES,
    probe=st.integers(-60, 3100),
    descending=st.booleans(),
)
def test_the_members_ahead_change_within_the_tallies(
    start: dict[int, int],
    moves: list[tuple[int, int | None]],
    probe: int,
    descending: bool,
) -> None:
    board = dict(start)
    held: list[tuple[int | None, int | None]] = []
    for member, new in moves:  # None: the member leaves (a removal, a ban)
        old = board.get(member)
        held.append((old, new))
        if new is None:
            board.pop(member, None)
        else:
            board[member] = new
    before = Changes((0,), _tally([(None, v) for v in start.values()]))
    fields = dict(before.fields)
    for f, v in _tally(held).items():
        if f != "n":
            fields[f] = fields.get(f, 0) + v
    after = Changes((len(held),), fields)
    moved = after.since(before)
    assert moved is not None
    fewer, more = moved.moves(probe, descending=descending)
    change = _ahead(board, probe, descending) - _ahead(start, probe, descending)
    assert -fewer <= change <= more


def test_since_refuses_tallies_that_went_back_or_another_layout() -> None:
    a = Changes((5, 7), {"+10": 3, "e4": 2})
    assert a.since(a) == Changes((0, 0), {})
    assert Changes((4, 7), {"+10": 3, "e4": 2}).since(a) is None  # a shard lost its data
    assert Changes((5, 7), {"+10": 2, "e4": 2}).since(a) is None
    assert Changes((5, 7, 0), {"+10": 3, "e4": 2}).since(a) is None  # a reshard
    assert Changes.decode(a.encode()) == a


def test_summed_adds_every_shard_s_fields() -> None:
    got = Changes.summed([{"n": 2, "+9": 1, "e3": 1}, {"n": 1, "+9": 1}, {}])
    assert got == Changes((2, 1, 0), {"+9": 2, "e3": 1})


def test_widened_keeps_the_estimate_inside_and_low_at_least_one() -> None:
    assert widened(Estimate(50, 40, 60), 45, 7) == Estimate(50, 1, 67)
    assert widened(Estimate(40, 40, 40), 0, 0) == Estimate(40, 40, 40)
