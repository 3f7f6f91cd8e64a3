"""The profile cache: hits, expiry, and batched reads of what it does not hold.

The store here is a stand-in that records the queries the cache makes and can be held
open; the store adapters themselves are held to the contract suite.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from podium.domain.models import Profile
from podium.errors import StoreUnavailable
from podium.service.profiles import TTL_S, ProfileCache


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> float:
        return self.t


class Store:
    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.queries: list[list[str]] = []
        self.gate: asyncio.Event | None = None
        self.fail = False

    async def profiles(self, player_ids: Sequence[str]) -> dict[str, Profile]:
        self.queries.append(list(player_ids))
        answer = {p: Profile(p, self.names[p]) for p in player_ids if p in self.names}
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise StoreUnavailable("down")
        return answer


async def queried(store: Store, n: int) -> None:
    """Let the loop run until the store has been asked ``n`` times."""
    for _ in range(100):
        if len(store.queries) >= n:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{len(store.queries)} queries, expected {n}")


def cache() -> tuple[ProfileCache, Store, Clock]:
    store, clock = Store(), Clock()
    return ProfileCache(store, clock), store, clock  # type: ignore[arg-type]


def names(found: dict[str, Profile]) -> dict[str, str | None]:
    return {p: v.name for p, v in found.items()}


async def test_reads_in_the_same_turn_share_one_query() -> None:
    c, store, _ = cache()
    store.names = {"a": "A", "b": "B", "c": "C"}
    got = await asyncio.gather(c.get(["a", "b"]), c.get(["b", "c"]), c.get(["x"]))
    assert [names(g) for g in got] == [{"a": "A", "b": "B"}, {"b": "B", "c": "C"}, {}]
    assert len(store.queries) == 1 and sorted(store.queries[0]) == ["a", "b", "c", "x"]


async def test_held_for_the_ttl_absent_ones_too() -> None:
    c, store, clock = cache()
    store.names = {"a": "A"}
    assert names(await c.get(["a", "x"])) == {"a": "A"}
    assert names(await c.get(["a", "x"])) == {"a": "A"}
    assert len(store.queries) == 1
    clock.t += TTL_S + 1
    store.names = {"a": "A2", "x": "X"}
    assert names(await c.get(["a", "x"])) == {"a": "A2", "x": "X"}
    assert len(store.queries) == 2


async def test_a_name_being_read_is_not_asked_for_again() -> None:
    c, store, _ = cache()
    store.names = {"a": "A", "b": "B"}
    store.gate = asyncio.Event()
    first = asyncio.ensure_future(c.get(["a"]))
    await queried(store, 1)
    second = asyncio.ensure_future(c.get(["a", "b"]))
    await queried(store, 2)
    store.gate.set()
    assert names(await first) == {"a": "A"}
    assert names(await second) == {"a": "A", "b": "B"}
    assert store.queries == [["a"], ["b"]]


async def test_a_change_during_a_read_is_not_cached_over() -> None:
    c, store, _ = cache()
    store.names = {"a": "old"}
    store.gate = asyncio.Event()
    reading = asyncio.ensure_future(c.get(["a"]))
    await queried(store, 1)
    store.names = {"a": "new"}  # committed while the read was in flight, then forgotten
    c.forget("a")
    after = asyncio.ensure_future(c.get(["a"]))  # a read after the change: a fresh query
    await queried(store, 2)
    store.gate.set()
    assert names(await reading) == {"a": "old"}  # asked before the change
    assert names(await after) == {"a": "new"}
    assert names(await c.get(["a"])) == {"a": "new"}  # and "old" was not cached
    assert store.queries == [["a"], ["a"]]


async def test_a_failure_reaches_every_reader_and_the_next_read_tries_again() -> None:
    c, store, _ = cache()
    store.names = {"a": "A"}
    store.fail = True
    got = await asyncio.gather(c.get(["a"]), c.get(["a"]), return_exceptions=True)
    assert all(isinstance(g, StoreUnavailable) for g in got)
    assert len(store.queries) == 1
    store.fail = False
    assert names(await c.get(["a"])) == {"a": "A"}


async def test_a_reader_that_goes_away_leaves_the_query_to_the_others() -> None:
    c, store, _ = cache()
    store.names = {"a": "A"}
    store.gate = asyncio.Event()
    gone = asyncio.ensure_future(c.get(["a"]))
    stays = asyncio.ensure_future(c.get(["a"]))
    await queried(store, 1)
    gone.cancel()
    store.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert names(await stays) == {"a": "A"}
    assert len(store.queries) == 1
