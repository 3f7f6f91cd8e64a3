"""The aggregator's snapshots and lease (``Snapshots``): one body per behaviour, run on the
in-process adapter and on Redis (where the lease ends by Redis's own clock, so the tests that
let a lease run out wait for it, briefly)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from podium.domain.erasure import erased_among, erased_digest
from podium.domain.snapshot import Snapshot
from podium.index.memory.snapshots import MemorySnapshots
from podium.index.redis.index import RedisIndex
from podium.index.redis.keys import Keys
from podium.index.redis.snapshots import RedisSnapshots
from podium.ports import BoardKey, Snapshots
from tests.conftest import REDIS_URL
from tests.redis_keys import delete_prefixed

KEY = BoardKey("week", "2026-W44")
OTHER = BoardKey("day", "2026-10-28")
LEASE_S = 0.3


@pytest.fixture(params=["memory", "redis"])
def backend(request: pytest.FixtureRequest) -> str | None:
    """None for memory; a key prefix of our own (deleted afterwards) for Redis."""
    if request.param == "memory":
        return None
    prefix: str = request.getfixturevalue("redis_prefix")
    return prefix


@pytest.fixture
async def snaps(backend: str | None) -> AsyncIterator[Snapshots]:
    if backend is None:
        yield MemorySnapshots()
        return
    prefix = backend
    client = RedisIndex.client_from_url(REDIS_URL)
    try:
        yield RedisSnapshots(client, Keys(prefix))
    finally:
        await delete_prefixed(client, prefix)
        await client.aclose()


async def test_one_holder_at_a_time_and_the_holder_keeps_its_fence(snaps: Snapshots) -> None:
    now = time.time()
    fence = await snaps.lead("a", now, LEASE_S)
    assert fence is not None
    assert await snaps.lead("b", now, LEASE_S) is None
    assert await snaps.lead("a", now, LEASE_S) == fence  # kept: the same tenure


async def test_a_lapsed_lease_is_taken_over_under_a_newer_fence(snaps: Snapshots) -> None:
    first = await snaps.lead("a", time.time(), LEASE_S)
    assert first is not None
    await asyncio.sleep(LEASE_S + 0.1)
    second = await snaps.lead("b", time.time(), LEASE_S)
    assert second is not None and second > first
    assert await snaps.lead("a", time.time(), LEASE_S) is None


async def test_only_the_newest_fence_publishes(snaps: Snapshots) -> None:
    first = await snaps.lead("a", time.time(), LEASE_S)
    assert first is not None
    assert await snaps.publish(KEY, b'{"n":1}', first, 10, "a")
    assert await snaps.read(KEY) == b'{"n":1}'
    assert await snaps.read(OTHER) is None
    await asyncio.sleep(LEASE_S + 0.1)
    second = await snaps.lead("b", time.time(), LEASE_S)
    assert second is not None
    assert not await snaps.publish(KEY, b'{"n":2}', first, 10, "a")  # the old holder, woken
    assert await snaps.read(KEY) == b'{"n":1}'
    assert await snaps.publish(KEY, b'{"n":3}', second, 10, "b")
    assert await snaps.read(KEY) == b'{"n":3}'


async def test_a_lapsed_lease_publishes_nothing_even_with_no_successor(snaps: Snapshots) -> None:
    fence = await snaps.lead("a", time.time(), LEASE_S)
    assert fence is not None
    assert not await snaps.publish(KEY, b'{"n":1}', fence, 10, "b")  # not the lease's holder
    await asyncio.sleep(LEASE_S + 0.1)
    # Paused past its lease: nobody took over, but its tenure is over all the same.
    assert not await snaps.publish(KEY, b'{"n":1}', fence, 10, "a")
    assert await snaps.read(KEY) is None
    again = await snaps.lead("a", time.time(), LEASE_S)
    assert again is not None and again > fence  # a new tenure, which publishes
    assert await snaps.publish(KEY, b'{"n":2}', again, 10, "a")


async def test_stamps_are_never_alike(snaps: Snapshots) -> None:
    fence = await snaps.lead("a", time.time(), 10)
    assert fence is not None
    seen = set()
    for n in range(5):
        assert await snaps.publish(KEY, b'{"n":%d}' % n, fence, 10, "a")
        stamp = await snaps.stamp(KEY)
        assert stamp is not None and stamp not in seen
        seen.add(stamp)


async def test_a_replica_promoted_behind_the_fence_counter_still_fences(redis_prefix: str) -> None:
    """Redis only (the in-process adapter has no replica): a replica promoted before a
    tenure's start reached it hands the next aggregator the very fencing token the old one
    holds. Its keys are set back here as such a replica holds them; the old aggregator's
    publish must still be refused, and no stamp may repeat one readers saw on the lost
    primary (they would hold the old snapshot for the new)."""
    keys = Keys(redis_prefix)
    client = RedisIndex.client_from_url(REDIS_URL)
    snaps = RedisSnapshots(client, keys)
    try:
        first = await snaps.lead("first", time.time(), LEASE_S)
        assert first is not None
        assert await snaps.publish(KEY, b'{"n":0}', first, 10, "first")
        # What the replica holds when it is cut off: this tenure, its snapshot and stamp.
        held = [keys.fence(), keys.snapshot(KEY), keys.snapshot_stamp(KEY)]
        replica = {k: await client.dump(k) for k in held}
        await asyncio.sleep(LEASE_S + 0.1)  # the lease runs out; the next tenure begins
        old = await snaps.lead("old", time.time(), 10)  # only the lost primary sees it
        assert old is not None and old > first
        assert await snaps.publish(KEY, b'{"n":1}', old, 10, "old")
        seen = await snaps.stamp(KEY)  # what readers saw there

        await client.delete(keys.lease(), *held)  # promoted: the replica's keys
        for k, dumped in replica.items():
            await client.restore(k, 0, dumped)
        new = await snaps.lead("new", time.time(), 10)
        assert new == old  # the same number, another tenure: the lease tells them apart
        assert not await snaps.publish(KEY, b'{"n":2}', old, 10, "old")
        assert await snaps.read(KEY) == b'{"n":0}'
        assert await snaps.publish(KEY, b'{"n":3}', new, 10, "new")
        assert await snaps.read(KEY) == b'{"n":3}'
        assert await snaps.stamp(KEY) != seen
    finally:
        await delete_prefixed(client, redis_prefix)
        await client.aclose()


async def test_a_snapshot_lives_for_its_ttl(snaps: Snapshots) -> None:
    fence = await snaps.lead("a", time.time(), 10)
    assert fence is not None
    assert await snaps.publish(KEY, b"{}", fence, 0.2, "a")
    assert await snaps.read(KEY) == b"{}"
    await asyncio.sleep(0.3)
    assert await snaps.read(KEY) is None


async def test_an_erasure_drops_the_snapshots_that_name_the_player(snaps: Snapshots) -> None:
    fence = await snaps.lead("me", time.time(), 5)
    assert fence is not None
    await snaps.publish(KEY, b'{"top":[["zq-gone-7",5],["a",3]]}', fence, 5, "me")
    await snaps.publish(OTHER, b'{"top":[["a",3]]}', fence, 5, "me")
    assert await snaps.erase_player("zq-gone-7") == 1
    assert await snaps.read(KEY) is None  # published again, without them, next cycle
    assert await snaps.read(OTHER) == b'{"top":[["a",3]]}'
    assert await snaps.erase_player("zq-gone-7") == 0


async def test_a_sweep_drops_the_snapshots_naming_an_erased_player_by_hash(
    snaps: Snapshots,
) -> None:
    secret = "sweep-secret"
    digests = {erased_digest(secret, "zq-gone-7")}
    fence = await snaps.lead("me", time.time(), 5)
    assert fence is not None
    named = Snapshot(1.0, 2, (("zq-gone-7", 5), ("a", 3)), True).encode()
    other = Snapshot(1.0, 1, (("a", 3),), True).encode()
    await snaps.publish(KEY, named, fence, 5, "me")
    await snaps.publish(OTHER, other, fence, 5, "me")
    assert await snaps.sweep_erased(lambda ids: erased_among(secret, digests, ids)) == 1
    assert await snaps.read(KEY) is None  # published again, without them, next cycle
    assert await snaps.read(OTHER) == other
    assert await snaps.sweep_erased(lambda ids: erased_among(secret, digests, ids)) == 0
