"""Tournaments on every store (``ports.tournaments.TournamentStore``), the same bodies on
each: a create inserts once and answers the one there is after; an end keeps its first time;
a join is once, never past ``maxEntrants`` however many race for the last places, never at
or after the end; who joined is answered by pairs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from podium.domain.boards import Aggregate, Order, Ties
from podium.domain.tournaments import State, Tournament
from podium.ports import ScoreStore
from podium.ports.tournaments import Joined
from tests.contract import test_store as contract
from tests.contract.test_store import split2_url, split3_url  # noqa: F401 - shared fixtures

T0 = 1_796_000_400
CUP = Tournament(
    "cup", "The Cup", ("ranked", "casual"), Aggregate.BEST, Order.ASC, Ties.SHARED, T0,
    T0 + 3600, join_required=True, max_entrants=3, max_attempts=5, category="weekly",
    metadata='{"prize":"gold"}', created_at=T0 - 100.5,
)  # fmt: skip


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


async def test_a_tournament_is_created_once_and_read_back_whole(store: ScoreStore) -> None:
    made, created = await store.create_tournament(CUP)
    assert created and made == CUP
    again, created = await store.create_tournament(replace(CUP, title="Other", created_at=T0))
    assert not created and again == CUP  # the one there is, untouched
    await store.create_tournament(replace(CUP, id="early", starts_at=T0 - 60))
    assert [t.id for t in await store.tournaments_page(None, 10)] == ["early", "cup"]
    assert await store.tournament("cup") == CUP
    assert await store.tournament("nope") is None


async def test_an_end_keeps_its_first_time(store: ScoreStore) -> None:
    await store.create_tournament(CUP)
    ended = await store.end_tournament("cup", T0 + 60)
    assert ended is not None and ended.ended_early == T0 + 60
    again = await store.end_tournament("cup", T0 + 120)
    assert again is not None and again.ended_early == T0 + 60
    assert await store.end_tournament("nope", T0) is None
    assert await store.join_tournament("cup", "late", T0 + 61) is Joined.ENDED


async def test_joins_never_overfill_and_are_answered_by_pairs(store: ScoreStore) -> None:
    await store.create_tournament(CUP)
    await store.create_tournament(replace(CUP, id="open", max_entrants=None))
    assert await store.join_tournament("cup", "a", T0) is Joined.JOINED
    assert await store.join_tournament("cup", "a", T0 + 1) is Joined.ALREADY
    assert await store.join_tournament("nope", "a", T0) is Joined.MISSING
    # eleven racing for the last two places: two get in
    raced = await asyncio.gather(
        *(store.join_tournament("cup", f"p{i}", T0 + 2) for i in range(11))
    )
    assert sorted(raced) == sorted([Joined.JOINED] * 2 + [Joined.FULL] * 9)
    t = await store.tournament("cup")
    assert t is not None and t.entrants == 3
    assert await store.join_tournament("cup", "a", T0 + 3) is Joined.ALREADY  # even when full
    assert await store.join_tournament("open", "a", CUP.ends_at) is Joined.ENDED  # its time
    assert await store.join_tournament("open", "b", T0) is Joined.JOINED
    winners = {
        p for p, j in zip([f"p{i}" for i in range(11)], raced, strict=True) if j is Joined.JOINED
    }
    found = await store.entrants_among(["cup", "open", "nope"], ["a", "b", *winners, "z"])
    assert found == {("cup", "a"), ("open", "b"), *(("cup", p) for p in winners)}
    assert await store.entrants_among([], ["a"]) == set()


async def test_an_entrant_removed_frees_the_place(store: ScoreStore) -> None:
    await store.create_tournament(CUP)
    for p in ("a", "b", "c"):
        assert await store.join_tournament("cup", p, T0) is Joined.JOINED
    assert await store.join_tournament("cup", "d", T0) is Joined.FULL
    assert await store.remove_entrant("cup", "b")
    assert not await store.remove_entrant("cup", "b")  # gone already
    assert not await store.remove_entrant("nope", "a")
    t = await store.tournament("cup")
    assert t is not None and t.entrants == 2
    assert await store.entrants_among(["cup"], ["a", "b", "c"]) == {("cup", "a"), ("cup", "c")}
    assert await store.join_tournament("cup", "d", T0 + 1) is Joined.JOINED
    # removals and joins racing: the count is the entrants, never past maxEntrants
    raced = await asyncio.gather(
        *(store.remove_entrant("cup", p) for p in ("a", "c")),
        *(store.join_tournament("cup", f"r{i}", T0 + 2) for i in range(6)),
    )
    assert raced[:2] == [True, True]
    joined = {f"r{i}" for i in range(6) if raced[2 + i] is Joined.JOINED}
    t = await store.tournament("cup")
    assert t is not None and t.entrants == 1 + len(joined) <= 3
    everyone = ["a", "c", "d", *(f"r{i}" for i in range(6))]
    assert await store.entrants_among(["cup"], everyone) == {("cup", p) for p in {"d", *joined}}


async def test_pages_by_start_with_category_and_state(store: ScoreStore) -> None:
    """Keyset pages by (start, id); ``state`` a condition every tournament in it meets (the
    use case narrows it with ``Tournament.state``)."""
    made = [
        replace(CUP, id=f"t{i}", starts_at=T0 + 3600 * (i // 2), ends_at=T0 + 3600 * (i // 2 + 1),
                category="weekly" if i % 3 == 0 else None)
        for i in range(7)
    ]  # fmt: skip
    for t in reversed(made):
        await store.create_tournament(t)
    ids = [t.id for t in made]
    first = await store.tournaments_page(None, 3)
    assert [t.id for t in first] == ids[:3]
    rest = await store.tournaments_page((first[-1].starts_at, first[-1].id), 10)
    assert [t.id for t in rest] == ids[3:]
    weekly = await store.tournaments_page(None, 10, category="weekly")
    assert [t.id for t in weekly] == ["t0", "t3", "t6"]
    now = T0 + 3600 + 60  # t0, t1 ended; t2, t3 live; t4.. upcoming
    for state in State:
        got = await store.tournaments_page(None, 10, None, state, now)
        exact = [t.id for t in got if t.state(now) is state]
        assert exact == [t.id for t in made if t.state(now) is state] and exact, state
    await store.end_tournament("t2", now)
    assert [t.id for t in await store.tournaments_page(None, 10, None, State.LIVE, now)] == ["t3"]


async def test_live_tournaments_are_asked_by_mode_and_time(store: ScoreStore) -> None:
    """Those a result may still count for: of the mode, not ended early, before their close
    (their last run's end and its late time); and the freezer's walk: the unsettled."""
    old = replace(CUP, id="old", starts_at=T0 - 7200, ends_at=T0 - 3600)
    ranked = replace(CUP, id="ranked", modes=("ranked",))
    series = replace(
        CUP,
        id="series",
        modes=("casual",),
        schedule="0 * * * *",
        duration_s=1800,
        starts_at=T0,
        ends_at=T0 + 7200,
    )
    for t in (old, CUP, ranked, series):
        await store.create_tournament(t)
    live = await store.live_tournaments("casual", T0 + 60)
    assert [t.id for t in live] == ["cup", "series"]
    assert [t.id for t in await store.live_tournaments("ranked", T0 + 60)] == ["cup", "ranked"]
    assert await store.live_tournaments("other", T0) == []
    # old closed at its end and late time: gone past it, there just before
    assert "old" in [t.id for t in await store.live_tournaments("casual", old.closes_at - 1)]
    assert "old" not in [t.id for t in await store.live_tournaments("casual", old.closes_at)]
    # a series' last run starts before its end and runs its length past it
    assert series.closes_at == T0 + 7200 + 1800 + 600
    at = series.closes_at - 1
    assert [t.id for t in await store.live_tournaments("casual", at)] == ["series"]
    await store.end_tournament("series", T0 + 60)
    assert [t.id for t in await store.live_tournaments("casual", T0 + 61)] == ["cup"]

    assert [t.id for t in await store.unsettled_tournaments()] == ["old", "cup", "ranked", "series"]
    await store.settle_tournament("old", T0)
    await store.settle_tournament("old", T0 + 5)  # the first mark stays; nothing else moves
    assert [t.id for t in await store.unsettled_tournaments()] == ["cup", "ranked", "series"]
    assert await store.tournament("old") == old
