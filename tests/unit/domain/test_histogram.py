"""Estimated ranks from a rank-shaped histogram: the bounds always hold, the planner's
boundaries are sorted, covering and within budget, and the snapshot bytes round-trip.

The boards here are small and split over a few shards by podium's own hash, read the way
the aggregator reads them (``scores_at`` at ``sample_ranks``, ``count_between`` at the
planned boundaries), and held against the plain order of ``domain.boards``.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podium.domain.boards import in_board_order
from podium.domain.codec import ScoreCodec
from podium.domain.histogram import (
    MAX_BOUNDS,
    Bounds,
    Estimate,
    Histogram,
    plan_bounds,
    sample_ranks,
)
from podium.domain.lattice import BEYOND, LOWEST, coordinate, lattice, time_quantiles
from podium.domain.sharding import shard_of

Row = tuple[str, int]


def true_ranks(rows: list[Row], descending: bool) -> dict[str, int]:
    return {m: i + 1 for i, (m, _) in enumerate(in_board_order(rows, descending))}


def count_between(scores: list[int], bounds: tuple[int, ...]) -> list[int]:
    asc = sorted(scores)
    pos = [bisect_left(asc, b) for b in bounds]
    return [b - a for a, b in pairwise(pos)]


def split_board(
    rows: list[Row], shards: int, exact_top: int, descending: bool, codec: ScoreCodec, budget: int
) -> tuple[tuple[int, ...], Histogram]:
    """What the aggregator does: sample every shard, plan, count every shard, sum."""
    parts: list[list[Row]] = [[] for _ in range(shards)]
    for m, s in rows:
        parts[shard_of(m, shards)].append((m, s))
    ordered = [in_board_order(p, descending) for p in parts]
    sizes = [len(p) for p in ordered]
    samples = []
    for part in ordered:
        ranks = sample_ranks(len(rows), len(part), exact_top=exact_top, max_bounds=budget)
        assert ranks == sorted(set(ranks)) and all(0 <= r < len(part) for r in ranks)
        assert len(ranks) <= budget
        samples.append([part[r][1] if r < len(part) else None for r in ranks])
    bounds = plan_bounds(
        samples, sizes, exact_top=exact_top, descending=descending, codec=codec, max_bounds=budget
    )
    counts = [count_between([s for _, s in part], bounds) for part in ordered]
    return bounds, Histogram.summed(bounds, counts, descending=descending)


def boards(draw: st.DrawFn) -> tuple[list[Row], ScoreCodec]:
    """Small boards with many ties: few points values (sometimes on a step), few seconds."""
    time_bits = draw(st.sampled_from([0, 2, 5, 23]))
    codec = ScoreCodec(time_bits, draw(st.booleans()))
    step = draw(st.sampled_from([1, 1, 25]))
    points = st.integers(-4, 40).map(lambda p: p * step)
    seconds = st.integers(0, min(3, codec.time_limit - 1))
    n = draw(st.integers(1, 150))
    rows = [
        (f"p_{i:04d}", codec.encode(draw(points), draw(seconds) if time_bits else 0))
        for i in range(n)
    ]
    return rows, codec


@st.composite
def split_boards(draw: st.DrawFn) -> tuple[list[Row], ScoreCodec, int, int, int]:
    rows, codec = boards(draw)
    return (
        rows,
        codec,
        draw(st.integers(1, 4)),  # shards
        draw(st.integers(0, 30)),  # exact top
        draw(st.integers(2, 40)),  # boundary budget
    )


@settings(max_examples=150, deadline=None)
@given(split_boards())
def test_the_true_rank_of_every_member_lies_within_its_estimate(
    case: tuple[list[Row], ScoreCodec, int, int, int],
) -> None:
    rows, codec, shards, exact_top, budget = case
    bounds, hist = split_board(rows, shards, exact_top, codec.descending, codec, budget)
    assert list(bounds) == sorted(set(bounds))
    assert 2 <= len(bounds) <= budget
    assert bounds[0] <= LOWEST and bounds[-1] >= BEYOND  # every encodable score is inside
    assert hist.total == len(rows)
    truth = true_ranks(rows, codec.descending)
    for m, s in rows:
        e = hist.estimate(s, codec)
        assert e.low <= truth[m] <= e.high, (m, s, e, truth[m])
        assert e.low <= e.rank <= e.high
        assert 1 <= hist.top_percent(e.rank) <= 100


@st.composite
def board_and_bounds(draw: st.DrawFn) -> tuple[list[Row], ScoreCodec, tuple[int, ...]]:
    """Any boundaries at all, many of them exactly on members' scores (buckets of one, of
    none, members tied on a boundary, members in the first and the last bucket)."""
    rows, codec = boards(draw)
    scores = [s for _, s in rows]
    picks = draw(st.lists(st.sampled_from(scores) | st.integers(-3000, 3000), max_size=12))
    bounds = tuple(sorted(set(picks) | {draw(st.sampled_from(scores))}))
    if len(bounds) < 2:
        bounds = (bounds[0], bounds[0] + 1)
    return rows, codec, bounds


@settings(max_examples=150, deadline=None)
@given(board_and_bounds())
def test_the_bounds_hold_on_any_boundaries_inside_or_outside_them(
    case: tuple[list[Row], ScoreCodec, tuple[int, ...]],
) -> None:
    rows, codec, bounds = case
    inside = [(m, s) for m, s in rows if bounds[0] <= s < bounds[-1]]
    hist = Histogram.summed(
        bounds, [count_between([s for _, s in inside], bounds)], descending=codec.descending
    )
    truth = true_ranks(inside, codec.descending)
    for m, s in rows:
        e = hist.estimate(s, codec, counted=(m in truth))
        # A score outside every bucket was not counted: its rank among the counted is exact.
        expect = truth.get(m) or true_ranks([*inside, (m, s)], codec.descending)[m]
        assert e.low <= expect <= e.high
        assert e.low <= e.rank <= e.high


@settings(max_examples=100, deadline=None)
@given(split_boards(), st.integers(-300, 1300), st.integers(0, 3))
def test_a_score_not_counted_stands_within_the_estimate_among_the_counted(
    case: tuple[list[Row], ScoreCodec, int, int, int], points: int, second: int
) -> None:
    """A player whose score changed since the counts (``counted=False``) takes the place it
    would take among the counted members."""
    rows, codec, shards, exact_top, budget = case
    _, hist = split_board(rows, shards, exact_top, codec.descending, codec, budget)
    score = codec.encode(points, min(second, codec.time_limit - 1) if codec.time_bits else 0)
    for newcomer in ("p_", "p_9999"):  # ahead of every tied member, then behind every one
        rank = true_ranks([*rows, (newcomer, score)], codec.descending)[newcomer]
        e = hist.estimate(score, codec, counted=False)
        assert e.low <= rank <= e.high


@given(
    st.lists(st.integers(-(1 << 53) + 1, 1 << 53), min_size=2, max_size=60, unique=True),
    st.data(),
    st.booleans(),
)
def test_encode_and_decode_round_trip(bounds: list[int], data: st.DataObject, desc: bool) -> None:
    bounds.sort()
    counts = data.draw(
        st.lists(st.integers(0, 1 << 40), min_size=len(bounds) - 1, max_size=len(bounds) - 1)
    )
    parts = data.draw(st.none() | st.lists(st.integers(0, 1 << 20), min_size=2, max_size=17))
    times = None
    if parts is not None and max(parts) > min(parts):
        times = tuple(sorted(parts))
    newest = data.draw(st.none() | st.integers(0, 1 << 24))
    hist = Histogram(tuple(bounds), tuple(counts), desc, times, newest)
    raw = hist.encode()
    back = Histogram.decode(raw)
    assert back == hist and back.total == hist.total and back.descending is desc
    assert back.times == times and back.newest == newest
    with pytest.raises(ValueError):
        Histogram.decode(raw[:-1])
    with pytest.raises(ValueError):
        Histogram.decode(raw + b"\x00")


def test_decode_refuses_what_is_not_a_histogram() -> None:
    for junk in (b"", b"PH1", b"XX1\x00\x02\x00\x01\x00", b"PH1\x07\x02\x00\x01\x00"):
        with pytest.raises(ValueError):
            Histogram.decode(junk)


def test_a_histogram_refuses_inconsistent_parts() -> None:
    with pytest.raises(ValueError):
        Histogram((0,), (), True)
    with pytest.raises(ValueError):
        Histogram((0, 10), (1, 2), True)
    with pytest.raises(ValueError):
        Histogram((0, 10, 10), (1, 2), True)
    with pytest.raises(ValueError):
        Histogram((0, 10), (-1,), True)
    with pytest.raises(ValueError):
        Histogram.summed((0, 10, 20), [[1, 2], [3]], descending=True)
    with pytest.raises(ValueError):
        Histogram((0, 10), (1,), True, (5, 4))
    with pytest.raises(ValueError):
        Histogram((0, 10), (1,), True, (5, 5))


# --- exact examples ------------------------------------------------------------------------

POINTS = ScoreCodec(0, True)  # points alone: a score is its points


def test_the_counted_edges_of_a_descending_board() -> None:
    # [0, 10): 5 members, [10, 20): none, [20, 30): 3 members.
    hist = Histogram((0, 10, 20, 30), (5, 0, 3), descending=True)
    assert hist.total == 8
    top = hist.estimate(25, POINTS)
    assert (top.low, top.high) == (1, 3)
    assert hist.estimate(15, POINTS) == Estimate(4, 4, 4)  # an empty bucket: exact
    low = hist.estimate(5, POINTS)
    assert (low.low, low.high) == (4, 8)
    assert hist.estimate(9, POINTS).rank == 4  # the top of its bucket
    assert hist.estimate(0, POINTS).rank == 8  # the bottom of its bucket
    assert hist.estimate(30, POINTS) == Estimate(1, 1, 1)  # above every bucket
    assert hist.estimate(-1, POINTS) == Estimate(9, 9, 9)  # below every bucket
    assert hist.estimate(25, POINTS, counted=False).high == 4


def test_the_counted_edges_of_an_ascending_board() -> None:
    hist = Histogram((0, 10, 20, 30), (5, 0, 3), descending=False)
    first = hist.estimate(0, POINTS)
    assert (first.rank, first.low, first.high) == (1, 1, 5)
    assert hist.estimate(15, POINTS) == Estimate(6, 6, 6)
    last = hist.estimate(29, POINTS)
    assert (last.low, last.high) == (6, 8) and last.rank == 8


def test_top_percent_rounds_up_and_stays_between_1_and_100() -> None:
    hist = Histogram((0, 100), (1000,), descending=True)
    assert [hist.top_percent(r) for r in (1, 10, 11, 500, 999, 1000)] == [1, 1, 2, 50, 100, 100]
    assert Histogram((0, 1), (0,), descending=True).top_percent(1) == 100


def test_the_lattice_is_the_step_every_points_value_shares() -> None:
    assert lattice([50, 0, 25, 100]) == (50, 25)
    assert lattice([3, 5]) == (3, 2)
    assert lattice([7]) == (7, 1)
    assert lattice([]) == (0, 1)
    assert lattice([-25, 25, 0]) == (-25, 25)


def test_a_bucket_of_several_stepped_values_shares_its_members_over_the_occupied_ones() -> None:
    """Points on multiples of 25, 10 members at each of 0, 25, 50, 75 spread over the time
    part: the boundaries 0 and 100 (with 25, to show the step) make one bucket of 75 points
    whose members all sit on 4 values; the member mid-time at 50 points is about 15th."""
    codec = ScoreCodec(4, descending=True)
    bounds = (LOWEST, codec.floor(0), codec.floor(25), codec.floor(100), BEYOND)
    hist = Histogram(bounds, (0, 10, 30, 0), descending=True)
    mid = hist.estimate(codec.encode(50, 8), codec)
    assert (mid.low, mid.high) == (1, 30)
    assert 13 <= mid.rank <= 17
    # Interpolating on points alone would place it at about the 20th (50 of 25..100).
    assert hist.estimate(codec.encode(75, 0), codec).rank <= 2


def test_the_planner_splits_a_crowded_points_value_on_time_and_keeps_to_its_budget() -> None:
    codec = ScoreCodec(8, descending=True)
    rows = [(f"p_{i:05d}", codec.encode(0 if i % 2 else 1 + i % 50, i % 256)) for i in range(4000)]
    bounds, hist = split_board(rows, 4, 10, True, codec, 100)
    assert len(bounds) <= 100
    inside_zero = [b for b in bounds if codec.floor(0) < b < codec.floor(1)]
    assert inside_zero, "half the board holds 0 points: it must be split on time"
    truth = true_ranks(rows, True)
    for m, s in rows[::7]:
        e = hist.estimate(s, codec)
        assert e.low <= truth[m] <= e.high


def test_sample_ranks_span_from_the_exact_top_to_the_last_member() -> None:
    ranks = sample_ranks(16_000_000, 1_000_000, exact_top=10_000)
    assert len(ranks) <= MAX_BOUNDS
    assert ranks[0] <= 10_000 * 1_000_000 // 16_000_000 and ranks[-1] == 999_999
    gaps = [b / a for a, b in pairwise(ranks[100:])]
    assert max(gaps) < 1.01  # about evenly spread in log(rank)
    assert sample_ranks(10, 0, exact_top=5) == []
    assert sample_ranks(100, 1, exact_top=5) == [0]


def test_the_density_inside_a_bucket_follows_its_neighbours() -> None:
    """Points alone, densities 1, 2 and 3 members a point over [0, 10), [10, 20), [20, 30):
    halfway through the middle bucket, a linear density has 8.75 of its 20 members below
    (a uniform one would say 10), so on an ascending board the member at 15 is about 19th."""
    bounds = (LOWEST, 0, 10, 20, 30, 31, BEYOND)  # 31 shows the step of 1
    hist = Histogram(bounds, (0, 10, 20, 30, 0, 0), descending=False)
    e = hist.estimate(15, POINTS)
    assert (e.low, e.high) == (11, 30)
    assert e.rank == 19


def test_the_time_parts_seen_are_the_span_of_a_points_value() -> None:
    """A window not over yet: every member holds a time part in [8, 16) of 16. A bucket of
    one points value with 16 members spread over those: the member at time part 12 is about
    halfway (8th or 9th), where the whole [0, 16) range would put it 5th from the top
    of a descending board."""
    codec = ScoreCodec(4, descending=True)
    bounds = Bounds((LOWEST, codec.floor(50), codec.floor(51), BEYOND), times=(8, 16))
    hist = Histogram.summed(bounds, [[0, 16, 0]], descending=True)
    assert hist.times == (8, 16)
    assert 8 <= hist.estimate(codec.floor(50) + 12, codec).rank <= 9
    blind = Histogram(tuple(bounds), hist.counts, True)
    assert blind.estimate(codec.floor(50) + 12, codec).rank <= 5


def test_plan_bounds_hands_the_time_parts_it_saw_to_the_histogram() -> None:
    codec = ScoreCodec(6, descending=False)
    even = [(f"p_{i:05d}", codec.encode(i // 20 % 40, 5 + i % 20)) for i in range(2000)]
    bounds, hist = split_board(even, 2, 10, False, codec, 60)
    # Spread evenly over 5..24: one past the last time part ends them; when the samples
    # cannot tell the spread from an even one, the range alone.
    assert isinstance(bounds, Bounds) and bounds.times is not None
    times = bounds.times
    assert times[0] == 5 and times[-1] == 25 and hist.times == times
    k = len(times) - 1
    assert all(abs((t - 5) / 20 - i / k) <= 0.15 for i, t in enumerate(times)), times
    # Half the members on time part 5: the quantiles themselves.
    bunched = [(m, s if i % 2 else codec.encode(i % 40, 5)) for i, (m, s) in enumerate(even)]
    bounds, hist = split_board(bunched, 2, 10, False, codec, 60)
    assert isinstance(bounds, Bounds) and bounds.times is not None
    assert len(bounds.times) == 17 and bounds.times[0] == 5 and bounds.times[-1] == 25
    assert list(bounds.times) == sorted(bounds.times) and bounds.times[7] == 5
    assert hist.times == bounds.times
    assert Histogram.decode(hist.encode()).times == bounds.times


def test_time_quantiles_follow_the_members_and_the_coordinate_follows_them() -> None:
    # Three in four members on time part 30..39, one in four on 0..9.
    parts = [*range(10), *range(30, 40)]
    weights = [1.0] * 10 + [3.0] * 10
    q = time_quantiles(parts, weights, 4)
    assert q is not None and q[0] == 0 and q[-1] == 40
    assert q[1] >= 9 and q[2] >= 30  # a quarter is reached at the first group's end
    assert time_quantiles([7, 7], [1.0, 1.0]) is None  # one time part: nothing to learn
    assert time_quantiles([], []) is None
    # The coordinate on the lattice 0, 25, 50, ... with 4 time bits and these shares.
    times = (0, 4, 8, 12, 16)
    assert coordinate((50 << 4) + 8, 4, 0, 25, times) == 2.5
    assert coordinate((50 << 4) + 2, 4, 0, 25, times) == 2.125
    assert coordinate((51 << 4) + 2, 4, 0, 25, times) == 3.0  # off the lattice: next value
    assert coordinate((50 << 4) + 8, 4, 0, 25, None) == 2.5


@pytest.mark.parametrize("descending", [True, False])
def test_the_time_quantiles_are_the_whole_boards_not_the_samples(descending: bool) -> None:
    """The samples crowd near the top of the board; one points value with time parts spread
    evenly must still give a median time part near the middle, in both orders (on an
    ascending board the top is whoever got there first)."""
    codec = ScoreCodec(10, descending=descending)
    rows = [(f"p_{i:05d}", codec.encode(7, (i * 389) % 1024)) for i in range(4000)]
    bounds, hist = split_board(rows, 2, 10, descending, codec, 200)
    assert isinstance(bounds, Bounds) and bounds.times is not None
    times = bounds.times
    middle = times[8] if len(times) > 2 else (times[0] + times[-1]) / 2  # even: the range
    assert 512 - 80 <= middle <= 512 + 80, times
    truth = true_ranks(rows, descending)
    for m, s in rows[::97]:
        e = hist.estimate(s, codec)
        assert e.low <= truth[m] <= e.high
        assert abs(e.rank - truth[m]) <= 0.05 * truth[m] + 20


@pytest.mark.parametrize("descending", [True, False])
def test_a_score_in_the_gap_beside_a_points_value_stands_by_its_time(descending: bool) -> None:
    """The planner saw the first 8 seconds of 16 (a window half over). After it, 10 members
    reached 50 points at time parts newer than those: on a descending board a lower time
    part (the gap below the value's lowest seen), on an ascending one a higher. They are the
    gap's bucket; a score reached when the counts were taken (``newest``) stands behind all
    of them, one reached just after the plan ahead of them all, not in the middle."""
    codec = ScoreCodec(4, descending=descending)
    # reached at s=15 (when the counts were taken), and at s=8 (just after the plan)
    fresh, planned = codec.encode(50, 15), codec.encode(50, 8)
    if descending:  # time part 0 (s=15) .. 7 (s=8): the gap below the value's floor+8
        bounds = Bounds((LOWEST, codec.floor(49) + 16, codec.floor(50) + 8, BEYOND), (8, 16))
        counts = [5, 10, 20]
        ahead = 20  # everyone of 50 points and more reached them first
    else:  # time parts 0..7 seen, the gap above them: 16 is the next value's floor
        bounds = Bounds((LOWEST, codec.floor(50) + 8, codec.floor(51), BEYOND), (0, 8))
        counts = [20, 10, 5]
        ahead = 20
    newest = codec.encode(0, 15)
    hist = Histogram.summed(bounds, [counts], descending=descending, newest=newest)
    last = hist.estimate(fresh, codec, counted=False)
    assert (last.low, last.high) == (ahead + 1, ahead + 11)
    assert last.rank >= ahead + 10  # behind the 10 who reached 50 points before
    first = hist.estimate(planned, codec, counted=False)
    assert first.rank <= ahead + 2  # just after the plan: ahead of the ones who came later
    blind = Histogram.summed(bounds, [counts], descending=descending)  # no newest: the middle
    assert blind.estimate(fresh, codec, counted=False).rank == ahead + 1 + 5
