"""Leagues on every store (``ports.cohorts.CohortStore``, and the placement inside
``Results.record``), the same bodies on each: a first result places a player once, a retry
never again; first results racing never overfill a cohort; a cohort freezes once however
many freezers race, with its tiers and its event, leaving banned players out; a tier a later
window decided stays."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from podium.domain import cohorts, events
from podium.domain.boards import BoardSpec
from podium.domain.cohorts import League
from podium.domain.models import Target
from podium.domain.windows import WindowKind, WindowRule
from podium.ports import ScoreStore
from tests.contract import test_store as contract
from tests.contract.test_store import T0, result, split2_url, split3_url  # noqa: F401

LEAGUE = BoardSpec(
    "league", WindowRule(WindowKind.DAY), exact_top=100, league=League(3, ("low", "high"), 1, 1)
)


@pytest.fixture(params=["sqlite", "postgres", "split2", "split3"])
def kind_and_url(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param, request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
async def store(kind_and_url: tuple[str, str]) -> AsyncIterator[ScoreStore]:
    s = contract.make(*kind_and_url)
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


def day_of(t: int) -> tuple[str, int]:
    w = LEAGUE.rule.window_at(t)
    assert w is not None
    return w.id, w.start


async def first(store: ScoreStore, player: str, match: str, points: int, tier: str = "low") -> None:
    window, start = day_of(T0 + 100)
    pending = Target("league", cohorts.pending(window, tier), start)
    board = Target("league", window, start)
    r = result(match, points, player=player)
    await store.record(r, [(board, LEAGUE), (pending, LEAGUE)], T0 + 200, None)


async def test_placed_once_and_a_retry_places_no_one_again(store: ScoreStore) -> None:
    window, _ = day_of(T0 + 100)
    await first(store, "a", "m1", 5)
    await first(store, "a", "m1", 5)  # the same result again: a replay
    await first(store, "a", "m2", 7)  # a second result: placed already
    placed = await store.placements("league", window, ["a", "b"])
    assert list(placed) == ["a"] and cohorts.parse(placed["a"]) is not None
    c = await store.cohort("league", placed["a"])
    assert c is not None and (c.tier, c.members, c.window) == ("low", 1, window)
    assert await store.members("league", c.id) == ["a"]
    # the cohort's tally is the board's: both results, once each
    tallies = {(s.board, s.window): s.tally.total for s in await store.player_standings("a")}
    assert tallies == {("league", window): 12, ("league", c.id): 12}


async def test_racing_first_results_never_overfill_a_cohort(store: ScoreStore) -> None:
    window, _ = day_of(T0 + 100)
    players = [f"r{i:02d}" for i in range(14)]
    await asyncio.gather(*(first(store, p, f"m-{p}", 1) for p in players))
    await asyncio.gather(*(first(store, p, f"m-{p}", 1) for p in players))  # retries
    made = await store.cohorts("league", window)
    assert sum(c.members for c in made) == 14 and all(c.members <= 3 for c in made)
    for c in made:
        assert len(await store.members("league", c.id)) == c.members
    placed = await store.placements("league", window, players)
    assert sorted(placed) == players


async def test_a_cohort_freezes_once_with_its_tiers_and_event(store: ScoreStore) -> None:
    window, _ = day_of(T0 + 100)
    for i, p in enumerate(["x1", "x2", "x3"]):
        await first(store, p, f"f{i}", 10 * (i + 1))
    placed = await store.placements("league", window, ["x1", "x2", "x3"])
    await store.ban("x3", "cheat", T0 + 300)
    ids = set(placed.values())
    for cohort_id in ids:
        c = await store.cohort("league", cohort_id)
        assert c is not None
        w = cohorts.window_of(LEAGUE.rule, cohort_id)
        done = await asyncio.gather(
            *(store.freeze_cohort(LEAGUE, c, w, T0 + 90_000) for _ in range(3))
        )
        assert sum(done) == 1
    assert await store.frozen_cohorts("league", list(ids)) == ids
    assert not any(cohorts.is_cohort(w) for w in await store.frozen("league"))
    tiers = await store.tiers("league", ["x1", "x2", "x3"])
    assert "x3" not in tiers  # banned: left out of the standings and the moves
    if len(ids) == 1:  # one cohort of x1, x2: x2 first, promoted; x1 stays (lowest tier)
        assert tiers == {"x2": "high", "x1": "low"}
        [cohort_id] = ids
        final = await store.final_page("league", cohort_id, 1, 10)
        assert [e.player_id for e in final] == ["x2", "x1"]
    standing = {s.board: s for s in await store.player_tiers("x1")}["league"]
    assert standing.cohort == placed["x1"] and standing.moved in {"stay", "up"}
    # one cohort.frozen event a cohort, written with its freeze
    at = T0 + 90_000
    while await store.fan_out({events.COHORT_FROZEN: ["http://hook"]}, 0.0, at, 100):
        pass
    due = await store.claim_deliveries(at + 1, at + 60, 100)
    assert sorted(d.event_id for d in due) == sorted(
        events.cohort_frozen_id("league", i) for i in ids
    )
    assert all(d.event_type == events.COHORT_FROZEN for d in due)
