"""Leagues' pure rules (domain/cohorts.py, plans.plan_cohort_freeze): a league's settings
refused naming the field, cohort ids parsed back, a new member's cohort, the zones of each
tier, the moves of a frozen cohort, a cohort closed with its board window, and which index
shard holds a cohort."""

from __future__ import annotations

import pytest

from podium.config.settings import parse
from podium.domain import cohorts
from podium.domain.boards import Tally
from podium.domain.cohorts import League, LeagueError, Zones, fill, plan_moves, zones
from podium.domain.models import FinalEntry, Target
from podium.domain.plans import plan_cohort_freeze
from podium.domain.recording import open_targets
from podium.domain.windows import WindowKind, WindowRule
from podium.errors import ConfigError, WindowClosed

TIERS = ("bronze", "silver", "gold", "diamond")
LEAGUE = League(30, TIERS, 5, 5)


def board(**fields: object) -> dict[str, object]:
    return {"boards": [{"name": "weekly", "window": "week", **fields}]}


def test_a_league_board_from_the_file() -> None:
    s = parse(board(cohort_size=30, tiers=list(TIERS), promote=5, demote=5))
    assert s.boards[0].league == LEAGUE
    assert parse(board()).boards[0].league is None


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"cohort_size": 1, "tiers": ["a"]}, "cohort_size"),
        ({"cohort_size": 1001, "tiers": ["a"]}, "cohort_size"),
        ({"cohort_size": "30", "tiers": ["a"]}, "cohort_size"),
        ({"cohort_size": 30}, "tiers"),
        ({"tiers": ["a", "b"]}, "tiers"),
        ({"promote": 3}, "promote"),
        ({"cohort_size": 30, "tiers": []}, "tiers"),
        ({"cohort_size": 30, "tiers": ["Gold"]}, "tiers"),
        ({"cohort_size": 30, "tiers": ["a", "a"]}, "tiers"),
        ({"cohort_size": 30, "tiers": ["a"], "promote": -1}, "promote"),
        ({"cohort_size": 30, "tiers": ["a"], "promote": 31}, "promote"),
        ({"cohort_size": 10, "tiers": ["a", "b"], "promote": 6, "demote": 5}, "demote"),
        ({"cohort_size": 30, "tiers": ["a"], "window": "all"}, "cohort_size"),
        ({"cohort_size": 30, "tiers": ["a"], "group_by": "country"}, "cohort_size"),
        ({"cohort_size": 30, "tiers": ["a"], "exact_top": 10}, "exact_top"),
    ],
)
def test_a_league_refused_names_the_field(fields: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse(board(**fields))
    assert named in str(e.value), str(e.value)


def test_league_rules_checked_in_the_domain_too() -> None:
    with pytest.raises(LeagueError, match=r"^tiers"):
        League(30, (), 0, 0)
    assert LEAGUE.lowest == "bronze" and LEAGUE.tier("gone") == "bronze"
    assert LEAGUE.moved("diamond", 1) == "diamond" and LEAGUE.moved("bronze", -1) == "bronze"
    assert LEAGUE.moved("silver", 1) == "gold"


def test_ids_parse_back() -> None:
    c = cohorts.cohort_id("2026-W44", "gold", 3)
    assert c == "2026-W44.gold-3"
    assert cohorts.parse(c) == cohorts.CohortId("2026-W44", "gold", 3)
    split = cohorts.cohort_id("2026-W44", "gold-2", 12, "x0a1b2c3d")
    assert cohorts.parse(split) == cohorts.CohortId("2026-W44", "gold-2", 12)
    for other in ("2026-W44", "2026-W44@FR", "2026-W44.gold", "2026-W44.gold-0", "x.y-3q"):
        assert cohorts.parse(other) is None, other
    p = cohorts.pending("2026-10-28", "silver")
    assert cohorts.pending_tier(p) == ("2026-10-28", "silver") and not cohorts.is_cohort(p)
    assert cohorts.pending_tier(c) is None
    assert cohorts.base_window(c) == "2026-W44" and cohorts.base_window(p) == "2026-10-28"
    week = WindowRule(WindowKind.WEEK)
    w = cohorts.window_of(week, c)
    assert (w.id, w.start, w.end) == (c, week.parse("2026-W44").start, week.parse("2026-W44").end)
    assert cohorts.cohort_window(week, "2026-W44") is None


def test_a_new_member_goes_to_the_first_open_cohort() -> None:
    assert fill([("a", 3), ("b", 2)], 2, 3) == ("b", 3)
    assert fill([("a", 1), ("b", 2)], 2, 3) == ("a", 2)  # first made, first filled
    assert fill([("a", 3), ("b", 3)], 2, 3) == (None, 3)  # all full: a third
    assert fill([], 0, 3) == (None, 1)


def test_zones_by_tier_and_size() -> None:
    assert zones(LEAGUE, "bronze", 30) == Zones(5, None)  # the lowest demotes no one
    assert zones(LEAGUE, "silver", 30) == Zones(5, 26)
    assert zones(LEAGUE, "diamond", 30) == Zones(None, 26)  # the top promotes no one
    assert zones(LEAGUE, "silver", 7) == Zones(5, 6)  # promotion first in a small cohort
    assert zones(LEAGUE, "silver", 3) == Zones(3, None)
    assert zones(League(3, ("only",), 1, 1), "only", 3) == Zones(None, None)


def final(n: int) -> list[FinalEntry]:
    return [FinalEntry(i, i, f"p{i}", 100 - i, 0) for i in range(1, n + 1)]


def test_moves_of_a_frozen_cohort() -> None:
    moves = plan_moves(LEAGUE, "silver", final(12))
    assert [m.next_tier for m in moves] == ["gold"] * 5 + ["silver"] * 2 + ["bronze"] * 5
    assert [m.change for m in moves[4:6]] == ["up", "stay"]
    assert moves[-1].change == "down" and moves[-1].by == -1
    top = plan_moves(LEAGUE, "diamond", final(6))
    assert [m.next_tier for m in top] == ["diamond"] + ["gold"] * 5


def test_a_cohort_freeze_plan_leaves_banned_players_out() -> None:
    spec = parse(board(cohort_size=4, tiers=["a", "b"], promote=1, demote=1)).boards[0]
    w = cohorts.window_of(spec.rule, "2026-W44.a-1")
    rows = [(f"p{i}", Tally(10 * i, w.start + i, 1)) for i in range(1, 5)]
    plan = plan_cohort_freeze(spec, w, "a", rows, {"p4"}, w.start + 99)
    assert [e.player_id for e in plan.final] == ["p3", "p2", "p1"] and plan.players == 3
    assert [(m.player_id, m.next_tier) for m in plan.moves] == [
        ("p3", "b"),
        ("p2", "a"),
        ("p1", "a"),
    ]
    assert plan.event_id == "cohort.frozen:weekly:2026-W44.a-1"
    assert '"cohort":"2026-W44.a-1"' in plan.event


def test_a_cohort_takes_no_result_once_its_board_window_is_frozen() -> None:
    """An admin's freeze freezes the board window, then its cohorts: a record that lands
    between the two counts for neither (the store's frozen windows name the board
    window's), and still counts for the open week."""
    s = parse(
        {
            "boards": [
                {"name": "day", "window": "day", "cohort_size": 3, "tiers": ["a", "b"]},
                {"name": "week", "window": "week"},
            ]
        }
    )
    day, week = s.boards
    placed = [
        (Target("day", "2026-10-28", 0), day),
        (Target("day", "2026-10-28.a-1", 0), day),
        (Target("week", "2026-W44", 0), week),
    ]
    kept = open_targets(placed, {("day", "2026-10-28")})
    assert [t.window for t, _ in kept] == ["2026-W44"]
    assert open_targets(placed, set()) == placed
    with pytest.raises(WindowClosed):
        open_targets(placed[:2], {("day", "2026-10-28")})


def test_a_cohort_lives_on_one_shard_whoever_its_members_are() -> None:
    shards = {cohorts.cohort_shard("weekly", f"2026-W44.gold-{n}", 16) for n in range(1, 200)}
    assert len(shards) == 16  # cohorts spread over the shards, each whole on one
    assert cohorts.cohort_shard("weekly", "2026-W44.gold-1", 1) == 0
