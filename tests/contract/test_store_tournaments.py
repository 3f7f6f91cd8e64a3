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
from podium.domain.tournaments import Tournament
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
    assert [t.id for t in await store.list_tournaments()] == ["early", "cup"]
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
