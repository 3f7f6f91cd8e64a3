"""The rebuild port's contract (``ports/index.py``: ``Rebuilding``), one body per behaviour on
every index adapter: in process, one Redis, a shard on it and on the tests' Redis Cluster,
and whole boards split across 4 in-process shards, 16 on one Redis, 16 on the cluster.

A new generation of a board window is filled beside the live one; until the switch every
read answers from the live one, every write lands in both, and the switch puts the new one
in place at once.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from podium.ports import BoardKey, Placed, RankIndex
from tests.contract.conftest import INDEXES, Backend, backend_of

WEEK = BoardKey("week", "2026-W44")
TOKEN = "t1"


@pytest.fixture(params=INDEXES)
def backend(request: pytest.FixtureRequest) -> Backend:
    return backend_of(request, request.param)


@pytest.fixture
async def index(backend: Backend) -> AsyncIterator[Any]:
    idx = backend.index()
    try:
        yield idx
    finally:
        await idx.close()


async def whole(index: RankIndex, descending: bool) -> list[tuple[str, int]]:
    return await index.page(WEEK, 0, 100_000, descending=descending)


def ordered(held: dict[str, int], descending: bool) -> list[tuple[str, int]]:
    from podium.domain.boards import in_board_order

    return in_board_order(held.items(), descending)


async def test_reads_stay_on_the_live_generation_until_the_switch(
    index: Any, descending: bool
) -> None:
    await index.write(
        WEEK, [("a", 5), ("b", 7), ("gone", 9)], descending=descending, expire_at=None
    )
    assert await index.begin_build(WEEK, TOKEN, 30)
    await index.fill_build(WEEK, TOKEN, [("a", 6), ("b", 7), ("c", 1)], descending=descending)
    # the live one answers every read as before the rebuild
    assert await whole(index, descending) == ordered({"a": 5, "b": 7, "gone": 9}, descending)
    new = index.built(TOKEN)
    assert await new.count(WEEK) == 3
    assert await index.switch_build(WEEK, TOKEN, expire_at=None, grace_s=0)
    # the store's, not the live one's: "gone" was only in the live generation
    assert await whole(index, descending) == ordered({"a": 6, "b": 7, "c": 1}, descending)
    await index.drop_build(WEEK, TOKEN)
    assert await index.count(WEEK) == 3


async def test_writes_during_a_rebuild_land_in_both_generations(
    index: Any, descending: bool
) -> None:
    better = 1 if descending else -1
    await index.write(WEEK, [("a", 10)], descending=descending, expire_at=None)
    assert await index.begin_build(WEEK, TOKEN, 30)
    # an updater's change lands before the fill reaches that player: the fill's older
    # total (the store's page was read before it) does not undo it on a board by order
    await index.write(
        WEEK, [("a", 10 + 5 * better), ("new", 3)], descending=descending, expire_at=None
    )
    await index.fill_build(WEEK, TOKEN, [("a", 10), ("b", 4)], descending=descending)
    await index.write(WEEK, [("b", 4 + better)], descending=descending, expire_at=None)
    new = index.built(TOKEN)
    assert await new.rank(WEEK, "new", descending=descending) is not None
    assert await index.switch_build(WEEK, TOKEN, expire_at=None, grace_s=0)
    assert await whole(index, descending) == ordered(
        {"a": 10 + 5 * better, "new": 3, "b": 4 + better}, descending
    )
    # after the switch, writes go to the one generation
    assert (
        await index.write(WEEK, [("a", 10 + 9 * better)], descending=descending, expire_at=None)
        == 1
    )


async def test_versioned_writes_and_the_fill(index: Any) -> None:
    """On a versioned board the fill writes the store's as given; a newer version applied
    again afterwards (the replay) wins, and an older one written meanwhile does not."""
    await index.write(WEEK, [("a", 50)], descending=True, expire_at=None, versions=[5])
    assert await index.begin_build(WEEK, TOKEN, 30)
    await index.write(WEEK, [("a", 40)], descending=True, expire_at=None, versions=[6])
    await index.fill_build(WEEK, TOKEN, [("a", 50), ("b", 1)], descending=True, versions=[5, 1])
    placed = await index.built(TOKEN).rank(WEEK, "a", descending=True)
    assert placed is not None and placed.score == 50  # the fill's, older than the live one's
    # the replay: version 6 again, now newer than what the fill wrote into the new one
    await index.write(WEEK, [("a", 40)], descending=True, expire_at=None, versions=[6])
    await index.write(WEEK, [("b", 0)], descending=True, expire_at=None, versions=[1])  # stale
    assert await index.switch_build(WEEK, TOKEN, expire_at=None, grace_s=0)
    assert await whole(index, True) == [("a", 40), ("b", 1)]


async def test_entry_metadata_is_filled_and_switched(index: Any) -> None:
    assert await index.begin_build(WEEK, TOKEN, 30)
    await index.fill_build(
        WEEK, TOKEN, [("a", 5), ("b", 3)], descending=True, metadata=[(1, '{"k":1}'), (1, None)]
    )
    assert await index.switch_build(WEEK, TOKEN, expire_at=None, grace_s=0)
    assert await index.entry_metadata(WEEK, ["a", "b"]) == {"a": '{"k":1}'}


async def test_a_ban_during_a_rebuild_holds_after_the_switch(index: Any) -> None:
    await index.write(WEEK, [("cheat", 99), ("fair", 5)], descending=True, expire_at=None)
    assert await index.begin_build(WEEK, TOKEN, 30)
    await index.fill_build(WEEK, TOKEN, [("fair", 5)], descending=True)
    await index.ban([WEEK], "cheat")
    # the page that still had the cheat was read before the ban, and is written after it
    await index.fill_build(WEEK, TOKEN, [("cheat", 99)], descending=True)
    assert await index.switch_build(WEEK, TOKEN, expire_at=None, grace_s=0)
    assert await whole(index, True) == [("fair", 5)]
    assert await index.write(WEEK, [("cheat", 100)], descending=True, expire_at=None) == 0


async def test_one_rebuild_at_a_time_and_an_abort_changes_nothing(index: Any) -> None:
    await index.write(WEEK, [("a", 5)], descending=True, expire_at=None)
    assert await index.begin_build(WEEK, TOKEN, 30)
    assert not await index.begin_build(WEEK, "t2", 30)
    await index.fill_build(WEEK, TOKEN, [("z", 1)], descending=True)
    await index.abort_build(WEEK, TOKEN)
    assert not await index.switch_build(WEEK, TOKEN, expire_at=None, grace_s=0)
    assert await whole(index, True) == [("a", 5)]
    # the window is free again; writes go to the live generation alone
    assert await index.begin_build(WEEK, "t2", 30)
    await index.abort_build(WEEK, "t2")


async def test_a_hold_that_ran_out_cannot_switch(index: Any) -> None:
    await index.write(WEEK, [("a", 5)], descending=True, expire_at=None)
    assert await index.begin_build(WEEK, TOKEN, 0.05)
    await index.fill_build(WEEK, TOKEN, [("b", 1)], descending=True)
    for _ in range(200):  # wait for the hold to run out (a TTL on Redis, the clock here)
        if not await index.keep_build(WEEK, TOKEN, 0.05):
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail("the hold never ran out")
    assert not await index.switch_build(WEEK, TOKEN, expire_at=None, grace_s=0)
    assert await whole(index, True) == [("a", 5)]
    await index.abort_build(WEEK, TOKEN)


async def test_no_rank_is_missing_while_a_rebuild_runs(index: Any) -> None:
    """Readers and writers run throughout a rebuild: every player seeded before it has a
    rank on every read, and the board after the switch holds every write."""
    rng = random.Random(19)
    players = [f"p{i:04d}" for i in range(400)]
    held = {p: rng.randrange(1, 1000) for p in players}
    await index.write(WEEK, list(held.items()), descending=True, expire_at=None)
    done = asyncio.Event()
    seen = {"reads": 0, "missing": 0, "short": 0, "writes": 0}

    async def reader() -> None:
        r = random.Random()
        while not done.is_set():
            some = r.sample(players, 20)
            places = await index.ranks(WEEK, some, descending=True)
            seen["missing"] += sum(1 for p in places if p is None or p.score <= 0)
            seen["short"] += await index.count(WEEK) < len(players)
            seen["reads"] += 1
            await asyncio.sleep(0)

    async def writer() -> None:
        r, n = random.Random(7), 0
        while not done.is_set():
            p = r.choice(players) if r.random() < 0.8 else f"new{n:04d}"
            n += 1
            score = held.get(p, 0) + r.randrange(1, 50)
            held[p] = score
            await index.write(WEEK, [(p, score)], descending=True, expire_at=None)
            seen["writes"] += 1
            await asyncio.sleep(0)

    tasks = [asyncio.create_task(reader()) for _ in range(2)] + [asyncio.create_task(writer())]
    try:
        await asyncio.sleep(0.05)
        assert await index.begin_build(WEEK, TOKEN, 30)
        page = list(held.items())  # the store, read after the rebuild began
        for i in range(0, len(page), 25):
            await index.fill_build(WEEK, TOKEN, page[i : i + 25], descending=True)
            await asyncio.sleep(0.01)
        reads_during = seen["reads"]
        assert await index.switch_build(WEEK, TOKEN, expire_at=None, grace_s=0)
        await asyncio.sleep(0.05)
        await index.drop_build(WEEK, TOKEN)
        await asyncio.sleep(0.05)
    finally:
        done.set()
        await asyncio.gather(*tasks)
    assert reads_during > 10 and seen["writes"] > 10, seen
    assert seen["missing"] == 0 and seen["short"] == 0, seen
    assert await whole(index, True) == ordered(held, True)
    got = await index.ranks(WEEK, players, descending=True)
    assert all(isinstance(p, Placed) for p in got)
