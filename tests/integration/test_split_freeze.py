"""A window of a store split by player freezes exactly once across its databases: with
results racing the freeze, with several processes freezing at once, and after a freezer
stopped between its two steps (the fences and the home's decision)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import pytest

from podium.domain.boards import BoardSpec
from podium.domain.models import RecordOutcome, ResultRecord, Target
from podium.domain.windows import Window, WindowKind, WindowRule
from podium.errors import WindowClosed
from podium.store.split import SplitStore
from tests.contract.conftest import postgres_databases  # noqa: F401 (a fixture)

T0 = 1_792_800_000  # 2026-10-24T00:00:00Z
NOW = float(T0 + 2 * 86_400)
DAY = BoardSpec("day", WindowRule(WindowKind.DAY))
WEEK = BoardSpec("week", WindowRule(WindowKind.WEEK))


def window(spec: BoardSpec) -> Window:
    w = spec.rule.window_at(T0 + 100)
    assert w is not None
    return w


def targets(*specs: BoardSpec) -> list[tuple[Target, BoardSpec]]:
    return [(Target(s.name, window(s).id, window(s).start), s) for s in specs]


def result(match: str, player: str, points: int) -> ResultRecord:
    return ResultRecord(player, match, "k1", "ranked", T0 + 100, 300, points)


@pytest.fixture(params=[2, 3], ids=["home-holds-players", "home-apart"])
async def urls(
    request: pytest.FixtureRequest,
    postgres_databases: Callable[[int], Awaitable[list[str]]],  # noqa: F811
) -> list[str]:
    found: list[str] = await postgres_databases(request.param)
    return found


def make(urls: list[str]) -> SplitStore:
    """One process's store: on two databases the home holds players too. Small pools: three
    of these race on up to three databases of the machine's Postgres, whose connections the
    other test workers share (at the default 10 + 10 a database, up to 180 of its 100)."""
    shards = urls if len(urls) == 2 else urls[1:]
    return SplitStore.from_urls(urls[0], shards, pool_size=4, read_pool_size=2)


async def live_and_final(store: SplitStore) -> tuple[dict[str, int], dict[str, int]]:
    live = {s.player_id: s.tally.total async for b in store.standings("day", window(DAY).id)
            for s in b}  # fmt: skip
    final = await store.final_page("day", window(DAY).id, 1, 1000)
    return live, {e.player_id: e.points for e in final}


async def test_a_window_freezes_once_across_databases_with_results_racing(
    urls: list[str],
) -> None:
    stores = [make(urls) for _ in range(3)]  # three processes
    await stores[0].migrate()
    players = [f"p{i}" for i in range(24)]
    assert len({stores[0].url_of(p) for p in players}) == len(stores[0].router.urls())  # all used
    t = targets(DAY, WEEK)
    rng = random.Random(7)
    outcomes: list[tuple[ResultRecord, RecordOutcome]] = []

    async def submit(i: int) -> None:
        await asyncio.sleep(rng.random() * 0.05)
        r = result(f"m{i}", players[i % len(players)], 1 + i)
        outcomes.append((r, await stores[i % 3].record(r, t, NOW, None)))

    async def freeze(s: SplitStore) -> bool:
        await asyncio.sleep(0.02 + rng.random() * 0.01)
        return await s.freeze(DAY, window(DAY), 1000, NOW)

    try:
        got = await asyncio.gather(*(submit(i) for i in range(150)), *map(freeze, stores))
        froze = got[150:]
        assert sorted(froze) == [False, False, True]
        live, final = await live_and_final(stores[1])
        assert final == live  # every result that counted for the day is in the standings
        counted = [r for r, o in outcomes if "day" in o.totals]
        assert sum(final.values()) == sum(r.points for r in counted)
        assert 0 < len(counted) < 150, "the freeze did not race the results"
        assert sum(r.points for r, _ in outcomes) == sum(range(1, 151))  # all kept for the week
        assert (await stores[2].frozen("day"))[window(DAY).id].players == len(live)
        # From then on, from any process: refused for the day, and frozen once.
        for s in stores:
            with pytest.raises(WindowClosed):
                await s.record(result("late", players[0], 1), targets(DAY), NOW, None)
            assert not await s.freeze(DAY, window(DAY), 1000, NOW + 5)
        assert await live_and_final(stores[0]) == (live, final)
    finally:
        for s in stores:
            await s.close()


async def test_a_freeze_stopped_between_its_steps_is_completed_once_after_a_restart(
    urls: list[str],
) -> None:
    first = make(urls)
    await first.migrate()
    for i in range(12):
        await first.record(result(f"m{i}", f"p{i}", 10 + i), targets(DAY, WEEK), NOW, None)
    await first.fence(DAY, window(DAY), NOW)  # every database fenced ...
    await first.close()  # ... and the freezer stops before the home decides

    again = make(urls)
    try:
        assert await again.frozen("day") == {}  # not frozen yet: nothing decided
        # but fenced: no result changes the window any more
        with pytest.raises(WindowClosed):
            await again.record(result("late", "p1", 5), targets(DAY), NOW, None)
        assert (await again.record(result("late", "p1", 5), targets(WEEK), NOW, None)).totals
        froze = await asyncio.gather(
            again.freeze(DAY, window(DAY), 1000, NOW + 1),
            again.freeze(DAY, window(DAY), 1000, NOW + 1),
        )
        assert sorted(froze) == [False, True]
        live, final = await live_and_final(again)
        assert final == live == {f"p{i}": 10 + i for i in range(12)}
        assert (await again.frozen("day"))[window(DAY).id].players == 12
        assert not await again.freeze(DAY, window(DAY), 1000, NOW + 2)
    finally:
        await again.close()
