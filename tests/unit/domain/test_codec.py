"""Score packing (docs/architecture.md §2): exact layout, round trips, loud refusals and the
order it keeps."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from podium.domain.codec import MAX_BITS, EncodingError, ScoreCodec, time_bits_for

DAY = 86_400
WEEK = 7 * DAY
LIMIT_53 = 1 << 53


# --- T from the window length --------------------------------------------------------------


@pytest.mark.parametrize(
    ("window_seconds", "bits"),
    [
        (DAY, 17),  # 86,400 s < 2**17 = 131,072
        (WEEK, 20),  # 604,800 s < 2**20
        (31 * DAY, 22),  # 2,678,400 s < 2**22
        (13 * WEEK, 23),  # 7,862,400 s < 2**23
        (None, 0),  # all-time: points alone
        (1, 1),
        (2, 1),
        (3, 2),
        (1 << 17, 17),  # seconds 0 .. 2**17 - 1 fit exactly in 17 bits
        ((1 << 17) + 1, 18),
    ],
)
def test_time_bits_for_window_length(window_seconds: int | None, bits: int) -> None:
    assert time_bits_for(window_seconds) == bits


@given(st.integers(min_value=2, max_value=1 << 40))
def test_time_bits_are_the_fewest_that_hold_every_second(length: int) -> None:
    bits = time_bits_for(length)
    assert length - 1 < 1 << bits  # the last second of the window fits
    assert length - 1 >= 1 << (bits - 1)  # and one bit fewer would not


@pytest.mark.parametrize("bad", [0, -1, -DAY])
def test_time_bits_for_refuses_empty_or_negative_windows(bad: int) -> None:
    with pytest.raises(EncodingError, match="window length"):
        time_bits_for(bad)


@pytest.mark.parametrize("bits", [-1, MAX_BITS, 64])
def test_codec_refuses_impossible_time_bits(bits: int) -> None:
    with pytest.raises(EncodingError, match="time bits"):
        ScoreCodec(bits)


# --- the exact layout ----------------------------------------------------------------------


def test_desc_packing_matches_design() -> None:
    codec = ScoreCodec(17, descending=True)
    assert codec.encode(140, 100) == 140 * 2**17 + (2**17 - 1 - 100)
    assert codec.encode(0, 0) == 2**17 - 1
    assert codec.encode(1, 2**17 - 1) == 2**17


def test_asc_packing_matches_design() -> None:
    codec = ScoreCodec(17, descending=False)
    assert codec.encode(140, 100) == 140 * 2**17 + 100
    assert codec.encode(0, 0) == 0
    assert codec.encode(1, 2**17 - 1) == 2 * 2**17 - 1


def test_seconds_default_to_zero() -> None:
    assert ScoreCodec(20).encode(5) == ScoreCodec(20).encode(5, 0) == 5 * 2**20 + 2**20 - 1


def test_zero_time_bits_is_points_alone() -> None:
    codec = ScoreCodec(0)
    assert codec.encode(12_345, 0) == 12_345
    assert codec.encode(-7) == -7
    assert codec.points(12_345) == 12_345
    assert codec.seconds(12_345) is None
    assert codec.points_limit == LIMIT_53


def test_limits() -> None:
    codec = ScoreCodec(23)
    assert codec.points_limit == 1 << 30
    assert codec.time_limit == 1 << 23


# --- round trips ---------------------------------------------------------------------------


@st.composite
def codec_points_seconds(draw: st.DrawFn, min_bits: int = 1) -> tuple[ScoreCodec, int, int]:
    bits = draw(st.integers(min_value=min_bits, max_value=MAX_BITS - 1))
    codec = ScoreCodec(bits, descending=draw(st.booleans()))
    points = draw(st.integers(min_value=-codec.points_limit + 1, max_value=codec.points_limit - 1))
    seconds = draw(st.integers(min_value=0, max_value=codec.time_limit - 1))
    return codec, points, seconds


@given(codec_points_seconds())
def test_round_trip(case: tuple[ScoreCodec, int, int]) -> None:
    codec, points, seconds = case
    score = codec.encode(points, seconds)
    assert codec.points(score) == points
    assert codec.seconds(score) == seconds


@given(codec_points_seconds(min_bits=0))
def test_every_score_is_an_exact_double_below_2_53(case: tuple[ScoreCodec, int, int]) -> None:
    codec, points, seconds = case
    score = codec.encode(points, seconds)
    assert -LIMIT_53 < score < LIMIT_53
    assert int(float(score)) == score  # what Redis stores is exactly what we packed


@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize("bits", [1, 17, 23, 52])
def test_extremes_fit(bits: int, descending: bool) -> None:
    codec = ScoreCodec(bits, descending=descending)
    top = codec.points_limit - 1
    last = codec.time_limit - 1
    for points in (top, -top):
        for seconds in (0, last):
            score = codec.encode(points, seconds)
            assert abs(score) < LIMIT_53
            assert (codec.points(score), codec.seconds(score)) == (points, seconds)


# --- loud refusals, never a wrap -----------------------------------------------------------


@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize("bits", [0, 17, 23])
def test_points_that_do_not_fit_are_refused(bits: int, descending: bool) -> None:
    codec = ScoreCodec(bits, descending=descending)
    for points in (codec.points_limit, -codec.points_limit, codec.points_limit * 4):
        with pytest.raises(EncodingError, match="points"):
            codec.encode(points, 0)


@pytest.mark.parametrize("descending", [True, False])
def test_time_that_does_not_fit_is_refused(descending: bool) -> None:
    codec = ScoreCodec(17, descending=descending)
    for seconds in (-1, -DAY, 1 << 17, DAY * 2):
        with pytest.raises(EncodingError, match="time"):
            codec.encode(10, seconds)


def test_overflowing_time_does_not_wrap_into_the_next_point() -> None:
    # Without the check, asc (1, 2**T) would pack to the same score as (2, 0).
    codec = ScoreCodec(17, descending=False)
    with pytest.raises(EncodingError):
        codec.encode(1, 1 << 17)
    # and desc (2, -1) would pack to the same score as (3, 2**T - 1).
    with pytest.raises(EncodingError):
        ScoreCodec(17).encode(2, -1)


@given(
    st.integers(min_value=1, max_value=MAX_BITS - 1),
    st.booleans(),
    st.integers(min_value=0, max_value=1 << 60),
    st.integers(),
)
def test_encode_either_fits_exactly_or_raises(
    bits: int, descending: bool, magnitude: int, seconds: int
) -> None:
    codec = ScoreCodec(bits, descending=descending)
    for points in (magnitude, -magnitude):
        fits = abs(points) < codec.points_limit and 0 <= seconds < codec.time_limit
        if fits:
            score = codec.encode(points, seconds)
            assert (codec.points(score), codec.seconds(score)) == (points, seconds)
        else:
            with pytest.raises(EncodingError):
                codec.encode(points, seconds)


# --- the order it keeps --------------------------------------------------------------------


@st.composite
def two_entries(draw: st.DrawFn, descending: bool) -> tuple[ScoreCodec, int, int, int, int]:
    bits = draw(st.integers(min_value=1, max_value=MAX_BITS - 1))
    codec = ScoreCodec(bits, descending=descending)
    pts = st.integers(min_value=-codec.points_limit + 1, max_value=codec.points_limit - 1)
    secs = st.integers(min_value=0, max_value=codec.time_limit - 1)
    return codec, draw(pts), draw(secs), draw(pts), draw(secs)


@given(two_entries(descending=True))
def test_desc_more_points_always_score_higher(case: tuple[ScoreCodec, int, int, int, int]) -> None:
    codec, p1, s1, p2, s2 = case
    assume(p1 != p2)
    # Negative points included: the order holds while |points| < 2**(53 - T).
    assert (codec.encode(p1, s1) > codec.encode(p2, s2)) == (p1 > p2)


@given(two_entries(descending=False))
def test_asc_more_points_always_score_higher(case: tuple[ScoreCodec, int, int, int, int]) -> None:
    codec, p1, s1, p2, s2 = case
    assume(p1 != p2)
    assert (codec.encode(p1, s1) > codec.encode(p2, s2)) == (p1 > p2)


@given(two_entries(descending=True))
def test_desc_equal_points_earlier_scores_higher(
    case: tuple[ScoreCodec, int, int, int, int],
) -> None:
    codec, points, s1, _, s2 = case
    assume(s1 != s2)
    assert (codec.encode(points, s1) > codec.encode(points, s2)) == (s1 < s2)


@given(two_entries(descending=False))
def test_asc_equal_points_earlier_scores_lower(case: tuple[ScoreCodec, int, int, int, int]) -> None:
    codec, points, s1, _, s2 = case
    assume(s1 != s2)
    assert (codec.encode(points, s1) < codec.encode(points, s2)) == (s1 < s2)


@pytest.mark.parametrize("descending", [True, False])
def test_negative_points_order_around_zero(descending: bool) -> None:
    codec = ScoreCodec(17, descending=descending)
    last = codec.time_limit - 1
    # the best possible -1 is still below the worst possible 0, and so on up
    ladder = [
        codec.encode(-2, 0 if descending else last),
        codec.encode(-1, last if descending else 0),
        codec.encode(-1, 0 if descending else last),
        codec.encode(0, last if descending else 0),
        codec.encode(0, 0 if descending else last),
        codec.encode(1, last if descending else 0),
    ]
    assert ladder == sorted(ladder)
    assert len(set(ladder)) == len(ladder)
