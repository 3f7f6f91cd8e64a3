"""Board rules: folding results into tallies, score layout per board, and which boards can fall."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podium.domain.boards import (
    Aggregate,
    BoardSpec,
    Order,
    Tally,
    Ties,
    board_key,
    can_fall,
    fold,
    in_board_order,
    merge_in_board_order,
    rank_standings,
)
from podium.domain.windows import WEEK, Window, WindowKind, WindowRule

SEASON_START = 1_788_739_200  # 2026-09-07T00:00:00Z, a Monday


def board(
    aggregate: Aggregate = Aggregate.SUM,
    order: Order = Order.DESC,
    ties: Ties = Ties.FIRST,
    kind: WindowKind = WindowKind.WEEK,
) -> BoardSpec:
    start = SEASON_START if kind is WindowKind.SEASON else None
    return BoardSpec(
        "b", WindowRule(kind, season_start=start), aggregate=aggregate, order=order, ties=ties
    )


def fold_all(spec: BoardSpec, matches: Iterable[tuple[int, int]]) -> Tally | None:
    tally: Tally | None = None
    for points, ended_at in matches:
        new = fold(spec, tally, points, ended_at)
        if new is not None:
            assert tally is None or new.version == tally.version + 1
            tally = new
    return tally


SUM = board(Aggregate.SUM)
BEST = board(Aggregate.BEST)
BEST_ASC = board(Aggregate.BEST, Order.ASC)
LAST = board(Aggregate.LAST)


# --- sum -----------------------------------------------------------------------------------


def test_first_match_starts_the_tally() -> None:
    for spec in (SUM, BEST, BEST_ASC, LAST):
        assert fold(spec, None, 140, 1_000) == Tally(140, 1_000, 1)


def test_sum_adds_and_keeps_the_latest_end_that_raised_the_total() -> None:
    t = fold(SUM, None, 140, 1_000)
    t = fold(SUM, t, 95, 2_000)
    assert t == Tally(235, 2_000, 2)
    # a late result from an earlier match raises the total but not reached_at
    t = fold(SUM, t, 10, 1_500)
    assert t == Tally(245, 2_000, 3)
    t = fold(SUM, t, 1, 2_500)
    assert t == Tally(246, 2_500, 4)


def test_sum_zero_points_changes_nothing() -> None:
    current = Tally(235, 2_000, 2)
    assert fold(SUM, current, 0, 3_000) is None
    assert fold(SUM, current, 0, 1_000) is None


def test_sum_negative_points_lower_the_total() -> None:
    # reached_at is the latest end of a match that *raised* the total: a loss keeps it.
    assert fold(SUM, Tally(10, 500, 3), -4, 600) == Tally(6, 500, 4)


def test_sum_with_losses_is_order_independent_through_zero() -> None:
    # +5 then -5 brings the total back to 0; a later-arriving +3 that ended earlier must not
    # pretend to be the first score.
    matches = [(5, 10), (-5, 20), (3, 5)]
    orders = [matches, matches[::-1], [matches[2], matches[0], matches[1]]]
    results = {fold_all(SUM, m) for m in orders}
    assert len({(t.total, t.reached_at) for t in results if t is not None}) == 1
    assert next(iter(results)) is not None and next(iter(results)).reached_at == 10  # type: ignore[union-attr]


def test_sum_zero_point_match_does_not_set_reached_at_once_points_arrive() -> None:
    # A 0-point match ending late must not decide when the real points were reached,
    # whichever of the two arrives first.
    late_zero_first = fold_all(SUM, [(0, 9_000), (50, 1_000)])
    points_first = fold_all(SUM, [(50, 1_000), (0, 9_000)])
    assert late_zero_first is not None and points_first is not None
    assert (late_zero_first.total, late_zero_first.reached_at) == (50, 1_000)
    assert (points_first.total, points_first.reached_at) == (50, 1_000)


# --- best ----------------------------------------------------------------------------------


def test_best_desc_keeps_the_highest() -> None:
    current = Tally(100, 1_000, 1)
    assert fold(BEST, current, 120, 2_000) == Tally(120, 2_000, 2)
    assert fold(BEST, current, 80, 500) is None


def test_best_asc_keeps_the_lowest() -> None:
    current = Tally(100, 1_000, 1)
    assert fold(BEST_ASC, current, 80, 2_000) == Tally(80, 2_000, 2)
    assert fold(BEST_ASC, current, 120, 500) is None


@pytest.mark.parametrize("spec", [BEST, BEST_ASC], ids=["desc", "asc"])
def test_best_on_equal_points_keeps_the_earliest_time(spec: BoardSpec) -> None:
    current = Tally(100, 1_000, 4)
    assert fold(spec, current, 100, 600) == Tally(100, 600, 5)
    assert fold(spec, current, 100, 1_000) is None
    assert fold(spec, current, 100, 1_400) is None


# --- last ----------------------------------------------------------------------------------


def test_last_takes_the_newest_match_even_when_lower() -> None:
    current = Tally(100, 1_000, 1)
    assert fold(LAST, current, 20, 2_000) == Tally(20, 2_000, 2)
    assert fold(LAST, current, 500, 999) is None


def test_last_same_second_prefers_more_points() -> None:
    current = Tally(100, 1_000, 1)
    assert fold(LAST, current, 120, 1_000) == Tally(120, 1_000, 2)
    assert fold(LAST, current, 80, 1_000) is None
    assert fold(LAST, current, 100, 1_000) is None


# --- order independence --------------------------------------------------------------------


def model(spec: BoardSpec, matches: list[tuple[int, int]]) -> tuple[int, int]:
    """What any arrival order must end with: (total, reached_at), for points >= 0."""
    match spec.aggregate:
        case Aggregate.SUM:
            scoring = [e for p, e in matches if p != 0]
            total = sum(p for p, _ in matches)
            return total, max(scoring) if scoring else min(e for _, e in matches)
        case Aggregate.BEST:
            sign = -1 if spec.order is Order.DESC else 1
            p, e = min(matches, key=lambda m: (sign * m[0], m[1]))
            return p, e
        case Aggregate.LAST:
            p, e = max(matches, key=lambda m: (m[1], m[0]))
            return p, e


matches_st = st.lists(
    st.tuples(
        # small points often, so that zeros and ties on equal points come up every run
        st.integers(min_value=0, max_value=3) | st.integers(min_value=0, max_value=1_000),
        st.integers(min_value=0, max_value=50),
    ),
    min_size=1,
    max_size=12,
)
permuted = matches_st.flatmap(lambda ms: st.tuples(st.just(ms), st.permutations(ms)))


@pytest.mark.parametrize(
    "spec", [SUM, BEST, BEST_ASC, LAST], ids=["sum", "best", "best-asc", "last"]
)
@given(case=permuted)
def test_fold_is_order_independent(
    spec: BoardSpec, case: tuple[list[tuple[int, int]], list[tuple[int, int]]]
) -> None:
    matches, shuffled = case
    a = fold_all(spec, matches)
    b = fold_all(spec, shuffled)
    assert a is not None and b is not None
    assert (a.total, a.reached_at) == (b.total, b.reached_at) == model(spec, matches)
    assert 1 <= a.version <= len(matches)
    assert 1 <= b.version <= len(matches)


# --- BoardSpec -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "bits"),
    [
        (WindowKind.DAY, 17),
        (WindowKind.WEEK, 20),
        (WindowKind.MONTH, 22),
        (WindowKind.SEASON, 23),
        (WindowKind.ALL, 0),
    ],
)
def test_codec_time_bits_follow_the_window(kind: WindowKind, bits: int) -> None:
    assert board(kind=kind).codec.time_bits == bits


@pytest.mark.parametrize("kind", list(WindowKind))
def test_shared_ties_use_points_alone(kind: WindowKind) -> None:
    assert board(ties=Ties.SHARED, kind=kind).codec.time_bits == 0


def test_codec_direction_follows_the_order() -> None:
    assert board(order=Order.DESC).codec.descending is True
    assert board(order=Order.ASC).codec.descending is False


def test_score_packs_time_into_the_window() -> None:
    spec = board(kind=WindowKind.WEEK)
    w = Window("2026-W44", 1_792_972_800, 1_792_972_800 + WEEK)
    early = spec.score(Tally(100, w.start + 10, 1), w)
    late = spec.score(Tally(100, w.start + 20, 1), w)
    assert early == 100 * 2**20 + (2**20 - 1 - 10)
    assert early > late > spec.score(Tally(99, w.start, 1), w)


def test_shared_ties_score_is_the_total() -> None:
    spec = board(ties=Ties.SHARED)
    w = Window("2026-W44", 1_792_972_800, 1_792_972_800 + WEEK)
    assert spec.score(Tally(100, w.start + 10, 1), w) == 100
    assert spec.score(Tally(100, w.start + 99, 1), w) == 100


def test_counts_and_better() -> None:
    assert SUM.counts("anything")
    only = dataclasses.replace(SUM, modes=("ranked-duo",))
    assert only.counts("ranked-duo")
    assert not only.counts("casual")
    assert BEST.better(2, 1) and not BEST.better(1, 2) and not BEST.better(1, 1)
    assert BEST_ASC.better(1, 2) and not BEST_ASC.better(2, 1) and not BEST_ASC.better(1, 1)


def test_tally_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Tally(1, 2, 3).total = 5  # type: ignore[misc]


# --- can_fall ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("aggregate", "order", "min_points", "falls"),
    [
        (Aggregate.SUM, Order.DESC, 0, False),
        (Aggregate.SUM, Order.DESC, 5, False),
        (Aggregate.SUM, Order.DESC, -1, True),
        (Aggregate.SUM, Order.ASC, 0, True),
        (Aggregate.SUM, Order.ASC, -1, True),
        (Aggregate.BEST, Order.DESC, 0, False),
        (Aggregate.BEST, Order.DESC, -1, False),
        (Aggregate.BEST, Order.ASC, 0, False),
        (Aggregate.BEST, Order.ASC, -1, False),
        (Aggregate.LAST, Order.DESC, 0, True),
        (Aggregate.LAST, Order.ASC, 0, True),
        (Aggregate.LAST, Order.DESC, -1, True),
    ],
)
def test_can_fall_truth_table(
    aggregate: Aggregate, order: Order, min_points: int, falls: bool
) -> None:
    assert can_fall(board(aggregate, order), min_points) is falls


# --- the one order (invariant 4 of docs/architecture.md) -----------------------------------

# Byte order of UTF-8: "0" < "A" < "B" < "_x" < "a" < "a1" < "b" < "z" < "é" < U+FFFF < "😀".
# (UTF-16, as JavaScript compares, would put "😀" before U+FFFF; code points do not.)
TRICKY = ["a", "B", "b", "a1", "_x", "A", "z", "é", "😀", "\uffff", "0", "a0", ""]
ids = st.text(max_size=6)  # any code point but lone surrogates, which UTF-8 cannot encode
scores = st.integers(min_value=-3, max_value=3)  # few scores: many ties


def test_board_key_is_the_score_then_the_member_bytes() -> None:
    assert board_key("b", 5) == (5, b"b")
    assert board_key("é", -1) == (-1, "é".encode())
    tied = in_board_order([(m, 7) for m in TRICKY], descending=False)
    assert [m for m, _ in tied] == ["", "0", "A", "B", "_x", "a", "a0", "a1", "b", "z", "é",
                                    "\uffff", "😀"]  # fmt: skip
    assert in_board_order([("a", 2), ("b", 1), ("c", 2)], descending=False) == [
        ("b", 1),
        ("a", 2),
        ("c", 2),
    ]
    # descending: higher scores first, and equal scores in reverse byte order (ZREVRANGE)
    assert in_board_order([("a", 2), ("b", 1), ("c", 2)], descending=True) == [
        ("c", 2),
        ("a", 2),
        ("b", 1),
    ]


@given(a=ids, b=ids, s=scores, t=scores)
def test_str_order_is_utf8_byte_order(a: str, b: str, s: int, t: int) -> None:
    """What lets the in-process index keep ``(score, member)`` tuples in its sorted list:
    Python compares ``str`` by code point, and UTF-8 keeps code point order."""
    assert (a < b) == (a.encode() < b.encode())
    assert ((s, a) < (t, b)) == (board_key(a, s) < board_key(b, t))


@given(rows=st.dictionaries(ids, scores, max_size=30), descending=st.booleans())
def test_descending_is_the_exact_reverse(rows: dict[str, int], descending: bool) -> None:
    up = in_board_order(rows.items(), descending=False)
    assert in_board_order(rows.items(), descending=True) == up[::-1]
    assert up == sorted(rows.items(), key=lambda r: (r[1], r[0].encode()))
    # further fields of a row ride along, and play no part in the order
    carried = in_board_order([(m, s, -len(m)) for m, s in rows.items()], descending)
    assert [(m, s) for m, s, _ in carried] == (up[::-1] if descending else up)


@given(
    rows=st.dictionaries(ids, scores, max_size=40),
    shards=st.integers(min_value=1, max_value=5),
    seed=st.randoms(use_true_random=False),
    descending=st.booleans(),
)
def test_merging_shards_is_one_sort_of_everything(
    rows: dict[str, int], shards: int, seed: random.Random, descending: bool
) -> None:
    """The pages of a board's shards, each in board order, merge into the board order of
    one sorted set holding them all: ties across shards included."""
    parts: list[list[tuple[str, int]]] = [[] for _ in range(shards)]
    for row in rows.items():
        parts[seed.randrange(shards)].append(row)
    pages = [in_board_order(part, descending) for part in parts]  # some may be empty
    merged = list(merge_in_board_order(pages, descending))
    assert merged == in_board_order(rows.items(), descending)


def test_merge_of_ties_on_every_shard() -> None:
    pages = [
        in_board_order([("é", 1), ("a", 1), ("c", 0)], descending=True),
        in_board_order([("B", 1), ("😀", 1)], descending=True),
        [],
        in_board_order([("b", 1), ("d", 2)], descending=True),
    ]
    merged = list(merge_in_board_order(pages, descending=True))
    assert merged == [("d", 2), ("😀", 1), ("é", 1), ("b", 1), ("a", 1), ("B", 1), ("c", 0)]
    up = [in_board_order(p, descending=False) for p in pages]
    assert list(merge_in_board_order(up, descending=False)) == merged[::-1]


@pytest.mark.parametrize("order", [Order.DESC, Order.ASC])
@pytest.mark.parametrize("ties", [Ties.FIRST, Ties.SHARED])
def test_final_standings_follow_the_board_order(order: Order, ties: Ties) -> None:
    spec = board(order=order, ties=ties)
    w = Window("2026-W44", 1_792_972_800, 1_792_972_800 + WEEK)
    tallies = {
        "b": Tally(40, w.start + 5, 1),
        "a": Tally(40, w.start + 5, 1),
        "é": Tally(40, w.start + 5, 1),
        "early": Tally(40, w.start + 1, 1),
        "top": Tally(90, w.start + 9, 1),
        "low": Tally(10, w.start, 1),
    }
    standings = rank_standings(spec, w, tallies.items())
    expected = in_board_order(
        [(p, spec.score(t, w)) for p, t in tallies.items()], order is Order.DESC
    )
    assert [p for _, _, p, _ in standings] == [p for p, _ in expected]
    assert [pos for pos, _, _, _ in standings] == list(range(1, 7))
    ranks = [r for _, r, _, _ in standings]
    if ties is Ties.FIRST:
        assert ranks == [1, 2, 3, 4, 5, 6]
        if order is Order.DESC:  # earlier first, then reverse bytes on the same second
            assert [p for _, _, p, _ in standings] == ["top", "early", "é", "b", "a", "low"]
    else:
        assert ranks == [1, 2, 2, 2, 2, 6]
