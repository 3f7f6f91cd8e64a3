"""A tournament's rules, pure: its one run as a window rule, what a definition may say (each
refusal naming its field), and attempts counted by the tally's version in the record's fold,
past maxAttempts counting for the boards only."""

from __future__ import annotations

from dataclasses import replace

import pytest

from podium.domain.boards import Aggregate, BoardSpec, Order, Ties
from podium.domain.models import ResultRecord, Target
from podium.domain.recording import fold_targets
from podium.domain.tournaments import (
    Entered,
    Tournament,
    TournamentError,
    check,
    tournament_of,
    tournament_totals,
)
from podium.domain.windows import WindowError, WindowKind, WindowRule

T0 = 1_796_000_400  # a whole hour
HOUR = 3600
CUP = Tournament(
    "cup", "The Cup", ("default",), Aggregate.BEST, Order.DESC, Ties.FIRST, T0, T0 + 2 * HOUR
)
MODES = {"default": 1000, "ranked": 5000, "huge": 2**39}


def test_the_run_is_the_one_window() -> None:
    rule, run = CUP.rule(), CUP.run_at(T0)
    assert run is not None
    assert (run.id, run.start, run.end) == ("20261130T0100", T0, T0 + 2 * HOUR)
    assert rule.window_at(T0) == run and rule.window_at(T0 + 2 * HOUR - 1) == run
    assert rule.window_at(T0 - 1) is None and rule.window_at(T0 + 2 * HOUR) is None
    assert rule.latest(T0 - 1) is None and rule.latest(T0 + 10 * HOUR) == run
    assert rule.before(run) is None
    assert rule.next_start(T0 - 1) == T0 and rule.next_start(T0) is None
    assert rule.parse(run.id) == run
    with pytest.raises(WindowError, match="not a run"):
        rule.parse("20261130T0200")
    # packed as a schedule board of its duration packs: 13 bits hold two hours' seconds
    assert CUP.spec().codec.time_bits == 13
    assert CUP.spec().name == "~cup" and tournament_of("~cup") == "cup"
    assert tournament_of("week") is None


def test_state_follows_the_clock_and_an_early_end() -> None:
    assert [CUP.state(t).value for t in (T0 - 1, T0, T0 + 2 * HOUR)] == [
        "upcoming",
        "live",
        "ended",
    ]
    ended = replace(CUP, ended_early=T0 + 60)
    assert ended.state(T0 + 59).value == "live" and ended.state(T0 + 60).value == "ended"
    early = replace(CUP, ended_early=T0 - 60)  # ended before it began
    assert early.state(T0 - 100).value == "upcoming" and early.state(T0 - 60).value == "ended"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"id": "no spaces"}, "id"),
        ({"title": "   "}, "title"),
        ({"title": "x" * 101}, "title"),
        ({"modes": ()}, "modes"),
        ({"modes": ("chess",)}, "modes"),
        ({"modes": ("default", "default")}, "modes"),
        ({"ends_at": T0}, "endsAt"),
        ({"ends_at": T0 + 400 * 86_400}, "endsAt"),
        ({"max_entrants": 0}, "maxEntrants"),
        ({"max_attempts": 0}, "maxAttempts"),
        ({"category": "Caps"}, "category"),
        # 2^39 points, 100 times, could not be packed beside 13 bits of time
        ({"aggregate": Aggregate.SUM, "modes": ("huge",), "max_attempts": 100}, "modes"),
        ({"modes": ("huge",), "ends_at": T0 + 300 * 86_400}, "modes"),  # 25 bits of time
    ],
)
def test_a_definition_refused_names_its_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(TournamentError) as e:
        check(replace(CUP, **change), set(MODES), MODES)  # type: ignore[arg-type]
    assert e.value.field == field


def test_a_definition_that_keeps_the_rules_passes() -> None:
    check(replace(CUP, max_attempts=3, max_entrants=10, category="weekly"), set(MODES), MODES)
    check(replace(CUP, modes=("huge",)), set(MODES), MODES)  # best of 2^39 fits 2^40
    assert CUP.same_definition(replace(CUP, created_at=5.0, entrants=3, ended_early=1.0))
    assert not CUP.same_definition(replace(CUP, max_attempts=2))


def _result(points: int, at: int, match: str) -> ResultRecord:
    return ResultRecord("a", match, "k", "default", at, 60, points)


def test_attempts_count_every_result_that_counts_then_only_the_boards() -> None:
    spec = replace(CUP, max_attempts=2).spec()
    run = CUP.run_at(T0)
    assert run is not None
    day = BoardSpec("day", WindowRule(WindowKind.DAY))
    targets = [
        (Target("day", "2026-11-30", T0 - HOUR), day),
        (Target(spec.name, run.id, run.start), spec),
    ]
    held: dict[tuple[str, str], object] = {}
    answers = []
    for i, points in enumerate((50, 20, 90)):  # best of: 50, then worse, then past the limit
        totals, changes = fold_targets(targets, held, _result(points, T0 + i, f"m{i}"))  # type: ignore[arg-type]
        for t, tally in changes:
            held[(t.board, t.window)] = tally
        answers.append(tournament_totals(totals, {spec.name: spec}))
    assert answers == [
        ({"day": 50}, {"cup": Entered(50, 1)}),
        ({"day": 70}, {"cup": Entered(50, 0)}),  # a worse result counted: an attempt used
        ({"day": 160}, {"cup": Entered(50, 0)}),  # past maxAttempts: the board only
    ]


def test_a_series_runs_on_its_schedule_within_its_bounds() -> None:
    hourly = replace(
        CUP, schedule="0 * * * *", duration_s=1800, starts_at=T0, ends_at=T0 + 3 * HOUR
    )
    check(hourly, set(MODES), MODES)
    rule = hourly.rule()
    first = rule.window_at(T0 + 60)
    assert first is not None and (first.id, first.end) == ("20261130T0100", T0 + 1800)
    assert rule.window_at(T0 + 1800) is None  # between two runs
    assert hourly.state(T0 + 1800).value == "upcoming" and hourly.state(T0).value == "live"
    assert rule.next_start(T0 + 1800) == T0 + HOUR
    last = rule.latest(T0 + 10 * HOUR)  # the last run to start before ends_at
    assert last is not None and last.start == T0 + 2 * HOUR
    assert rule.next_start(T0 + 2 * HOUR) is None and hourly.state(T0 + 3 * HOUR).value == "ended"
    assert rule.latest(T0 - 1) is None and rule.next_start(T0 - 7200) == T0  # not before starts_at
    assert rule.before(last) is not None and rule.before(first) is None
    with pytest.raises(WindowError):
        rule.parse("20261130T0000")  # a start of the schedule, before the series
    assert hourly.spec().codec.time_bits == 11  # 1800 s of a run


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"schedule": "every hour", "duration_s": 60}, "schedule"),
        ({"schedule": "0  * * * *", "duration_s": 60}, "schedule"),  # two spaces
        ({"schedule": "0 * * * *"}, "durationSeconds"),
        ({"schedule": "0 * * * *", "duration_s": 3601}, "durationSeconds"),  # runs overlap
        ({"duration_s": 60}, "durationSeconds"),  # without a schedule
    ],
)
def test_a_schedule_refused_names_its_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(TournamentError) as e:
        check(replace(CUP, **change), set(MODES), MODES)  # type: ignore[arg-type]
    assert e.value.field == field
