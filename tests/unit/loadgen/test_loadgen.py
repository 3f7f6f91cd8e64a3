"""The load generator's pure parts: the traffic mix and its proportions, the open-loop
arrival schedule, the latency recorder's percentiles, the rates, the boards it reads and
which way their totals move, the summary; and the command's refusals before any load."""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
from collections import Counter

import pytest
from typer.testing import CliRunner

from podium.cli.main import app
from podium.client import Board
from podium.loadgen.latency import Rate, Recorder
from podium.loadgen.mix import (
    FRIENDS,
    RANK,
    TOP,
    Mix,
    MixError,
    arrivals,
    derived_rate,
    draw_match,
    parse_mix,
)
from podium.loadgen.setup import (
    HIGHER,
    LOWER,
    Settings,
    SetupError,
    choose_boards,
    direction,
    friend_lists,
    reached,
)
from podium.loadgen.stats import SUBMIT, Tally, Verified, summary


def test_the_default_mix_averages_the_seeds_reads_in_its_proportions() -> None:
    """3.5 reads after each result: three or four, as often; 40% top page, 40% rank with
    neighbors, 20% friends, over many draws with a fixed seed."""
    rng = random.Random(7)
    draws = [Mix().draw(rng) for _ in range(20_000)]
    counts = Counter(len(d) for d in draws)
    assert set(counts) == {3, 4}
    assert statistics.fmean(len(d) for d in draws) == pytest.approx(3.5, abs=0.02)
    kinds = Counter(k for d in draws for k in d)
    total = sum(kinds.values())
    assert kinds[TOP] / total == pytest.approx(0.4, abs=0.01)
    assert kinds[RANK] / total == pytest.approx(0.4, abs=0.01)
    assert kinds[FRIENDS] / total == pytest.approx(0.2, abs=0.01)


def test_a_configured_mix_and_one_without_friends() -> None:
    mix = parse_mix("top=1, rank=3", 2.0)
    assert mix.shares() == {TOP: 0.25, RANK: 0.75, FRIENDS: 0.0}
    rng = random.Random(1)
    draws = [mix.draw(rng) for _ in range(4_000)]
    assert {len(d) for d in draws} == {2}  # a whole number of reads: exactly that many
    assert Counter(k for d in draws for k in d)[RANK] / 8_000 == pytest.approx(0.75, abs=0.02)
    # No admin key, so no friends lists: their share goes to the others, reads stay as many.
    alone = Mix().without_friends()
    assert alone.shares() == {TOP: 0.5, RANK: 0.5, FRIENDS: 0.0}
    assert alone.reads_per_match == 3.5
    assert Mix(reads_per_match=0).draw(rng) == []


@pytest.mark.parametrize(
    ("text", "says"),
    [("top=1,likes=2", "likes=2"), ("top=x", "not a number"), ("top", "KIND=WEIGHT")],
)
def test_a_mix_that_cannot_be_read_is_refused_naming_the_part(text: str, says: str) -> None:
    with pytest.raises(MixError, match=says):
        parse_mix(text, 3.5)
    with pytest.raises(MixError, match="at least one"):
        Mix(top=0, rank=0, friends=0)
    with pytest.raises(MixError, match="reads_per_match"):
        Mix(reads_per_match=-1)


def test_arrivals_are_a_poisson_process_at_the_rate() -> None:
    """Exponential gaps: the count over a long span is the rate's, the gaps' spread equals
    their mean (a coefficient of variation of 1), and a seed repeats the schedule."""
    rate, span = 50.0, 400.0
    times = []
    for t in arrivals(rate, random.Random(3)):
        if t >= span:
            break
        times.append(t)
    assert len(times) == pytest.approx(rate * span, rel=0.03)
    assert times == sorted(times)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert statistics.fmean(gaps) == pytest.approx(1 / rate, rel=0.03)
    assert statistics.stdev(gaps) / statistics.fmean(gaps) == pytest.approx(1.0, abs=0.05)
    again = arrivals(rate, random.Random(3))
    assert [next(again) for _ in range(100)] == times[:100]
    with pytest.raises(MixError):
        next(arrivals(0, random.Random()))


def test_the_rate_derived_from_players_matches_and_peak() -> None:
    # 1,000 players, 2 matches each over 50 s, 2 a match: 20 matches/s; a peak of 3: 60.
    assert derived_rate(1_000, 2, 2, 50, 1) == pytest.approx(20)
    assert derived_rate(1_000, 2, 2, 50, 3) == pytest.approx(60)
    with pytest.raises(MixError, match="fewer than"):
        derived_rate(1, 2, 2, 50, 1)


def test_a_match_has_distinct_players_with_points_in_range() -> None:
    rng = random.Random(5)
    for _ in range(500):
        match = draw_match(rng, 10, 4)
        assert len({p for p, _ in match}) == 4
        assert all(0 <= p < 10 and 10 <= points <= 1000 for p, points in match)


def test_percentiles_are_within_one_percent_above_the_true_value() -> None:
    """1..1000 ms: p50 500, p99 990, p99.9 999 by nearest rank, each reported no lower
    and at most 1% higher; the largest is never passed."""
    r = Recorder()
    for ms in range(1000, 0, -1):
        r.record(ms / 1000)
    for q, true in ((50, 0.5), (99, 0.99), (99.9, 0.999), (100, 1.0)):
        got = r.percentile(q)
        assert got is not None and true <= got <= true * 1.01, (q, got)
    assert r.percentile(100) == 1.0 and r.count == 1000 and r.low == 0.001


def test_percentiles_of_a_long_tail_against_the_exact_ones() -> None:
    rng = random.Random(11)
    values = [rng.lognormvariate(math.log(0.02), 1.2) for _ in range(50_000)]
    halves = Recorder(), Recorder()
    for i, v in enumerate(values):
        halves[i % 2].record(v)
    r = Recorder()
    r.merge(halves[0])
    r.merge(halves[1])
    ordered = sorted(values)
    for q in (50, 90, 99, 99.9):
        exact = ordered[math.ceil(len(values) * q / 100) - 1]
        got = r.percentile(q)
        assert got is not None and exact * 0.999 <= got <= exact * 1.011, (q, exact, got)
    assert r.count == 50_000 and r.high == max(values)
    assert Recorder().percentile(50) is None
    with pytest.raises(ValueError):
        r.percentile(0)


def test_a_rate_over_the_last_full_seconds() -> None:
    rate = Rate(window=5)
    for second in range(10):
        rate.add(second + 0.5, 10 if second < 5 else 20)
    rate.add(8.9, 5)  # late, into its own second
    assert rate.per_s(10.2) == pytest.approx((20 * 5 + 5) / 5)
    early = Rate(window=5)
    early.add(0.2, 10)
    early.add(1.7, 30)
    early.add(2.1, 99)  # the second under way is not counted yet
    assert early.per_s(2.5) == pytest.approx(20)  # two full seconds so far
    assert Rate().per_s(0.5) == 0


def _board(
    name: str,
    aggregate: str = "sum",
    order: str = "desc",
    *,
    current_window: str | None = "2026-W49",
    modes: tuple[str, ...] | None = None,
    group_by: str | None = None,
) -> Board:
    return Board(
        name, "week", current_window, aggregate, order, "distinct", 10_000, modes, group_by
    )


def test_which_way_a_total_moves_and_when_a_board_has_taken_it_in() -> None:
    assert direction(_board("a")) == HIGHER
    assert direction(_board("b", "best")) == HIGHER
    assert direction(_board("c", "best", "asc")) == LOWER
    assert direction(_board("d", "last")) is None
    assert reached(120, 100, HIGHER) and not reached(90, 100, HIGHER)
    assert reached(90, 100, LOWER) and not reached(120, 100, LOWER)


def test_the_boards_read_by_default_and_by_name() -> None:
    boards = (
        _board("week"),
        _board("kart", modes=("kart",)),
        _board("country", group_by="country"),
        _board("cup", current_window=None),
    )
    chosen, notes = choose_boards(boards, None, "default")
    assert [b.name for b in chosen] == ["week"]
    assert any("country" in n for n in notes) and any("cup" in n for n in notes)
    assert [b.name for b in choose_boards(boards, ("cup",), "x")[0]] == ["cup"]
    with pytest.raises(SetupError, match="no board nope"):
        choose_boards(boards, ("nope",), "default")


def test_friends_lists_name_other_players() -> None:
    lists = friend_lists(random.Random(2), 100, 30)
    assert len(lists) == 30
    assert all(p not in f and 0 < len(f) <= 20 and len(set(f)) == len(f) for p, f in lists.items())


def test_the_summary_counts_by_route_and_status_and_keeps_the_keys_out() -> None:
    t = Tally()
    t.matches_sent = 3
    t.answered(SUBMIT, 0.5, 0.010)
    t.acknowledged(0.5, 2)
    t.answered(TOP, 0.6, 0.004)
    t.failed(RANK, 503)
    t.failed(RANK, 503)
    t.failed(SUBMIT, "no answer")
    s = Settings(("http://a:1",), "secret-game-key", 10, 5.0, 2.0, admin_key="secret-admin")
    out = summary(t, elapsed_s=2.0, offered_s=2.0, settings=s.public(), notes=[], verified=None)
    text = json.dumps(out)
    assert "secret" not in text
    assert out["results"] == {"acknowledged": 2, "per_s": 1.0}
    assert out["reads"]["answered"] == 1 and out["reads"]["by_route"][TOP] == 1
    assert out["errors"] == {RANK: {"503": 2}, SUBMIT: {"no answer": 1}}
    assert out["routes"][SUBMIT]["p50_ms"] == pytest.approx(10, rel=0.01)
    assert out["routes"][RANK]["p50_ms"] is None


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "--key"),
        (["--key", "k", "--mix", "top=1,likes=1"], "likes=1"),
        (["--key", "k", "--duration", "soon"], "--duration"),
        (["--key", "k", "--players", "1"], "--players 1"),
    ],
)
def test_the_command_refuses_what_it_cannot_run_before_any_load(args: list[str], says: str) -> None:
    out = CliRunner().invoke(app, ["loadgen", "--api", "http://127.0.0.1:9", *args], env={})
    assert out.exit_code == 2, out.output
    assert says in out.output


def _verified(checked: int, mismatches: int = 0, skipped: int = 0) -> Verified:
    v = Verified(players=max(checked, 1), checked=checked)
    v.mismatches = [{"player": "p", "board": "week", "answered": 1, "read": 0}] * mismatches
    v.skipped = ["day: its window changed during the run"] * skipped
    return v


def _run(sent: int, acknowledged: int, failed: int) -> Tally:
    t = Tally()
    t.matches_sent, t.matches_failed = sent, failed
    for _ in range(acknowledged):
        t.acknowledged(0.5, 2)
    return t


@pytest.mark.parametrize(
    ("tally", "verified", "failures"),
    [
        (_run(4, 4, 0), _verified(8), []),
        # Issue 33: every match refused, nothing to read back: that passed.
        (_run(4, 0, 4), _verified(0), ["4 of 4 matches were not acknowledged", "no total"]),
        (_run(4, 3, 1), _verified(6), ["1 of 4 matches were not acknowledged"]),
        (_run(4, 3, 0), _verified(6), ["1 of 4 matches were not acknowledged"]),  # cut off
        (_run(4, 4, 0), _verified(8, mismatches=2), ["2 totals read back differ"]),
        (_run(4, 4, 0), _verified(0, skipped=3), ["no total"]),
    ],
)
def test_verify_passes_only_when_every_match_is_acknowledged_and_read_back(
    tally: Tally, verified: Verified, failures: list[str]
) -> None:
    out = summary(tally, elapsed_s=1.0, offered_s=1.0, settings={}, notes=[], verified=verified)
    v = out["verify"]
    assert v["passed"] is (not failures)
    assert len(v["failures"]) == len(failures)
    for said, expected in zip(v["failures"], failures, strict=True):
        assert said.startswith(expected), said
