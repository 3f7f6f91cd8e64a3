"""The aggregator's held counts after a failover that lost writes, on real parts: a split
board of four hash-tag shards on a private Redis with a replica, reached through a TCP
proxy the test switches from the primary to the replica (as a Sentinel-aware client or a
virtual IP would), the real aggregator, and the real mender with a replay of the writes the
replica lacks (the log's part, which ``test_mending.py`` runs with a whole fleet).

The replica stops following its primary before the last writes (``REPLICAOF NO ONE``), so
what it lacks when it takes over is certain. The aggregator counted those writes; the node
that takes over holds a lower tally of writes than the one it counted at, and the replay
of the lost writes then takes it past that tally: the moves since it are honest writes of
the new node, none of them the lost ones, so counts that followed them would go on counting
the lost writes beside their replay. The mender marks the shards' counts anew before the
replay (``ShardIndex.renew_counts``), and the aggregator's next cycle counts them afresh.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Collection, Iterator
from functools import partial
from types import SimpleNamespace
from typing import Any, TypeVar

import pytest

from podium.config.settings import parse
from podium.domain.changes import Changes
from podium.domain.snapshot import Snapshot
from podium.domain.windows import index_expiry
from podium.errors import Unavailable
from podium.index.memory.snapshots import MemorySnapshots
from podium.index.redis.generations import RedisGenerations
from podium.index.redis.index import RedisIndex
from podium.index.split.index import SplitIndex
from podium.ports import BoardKey
from podium.workers.aggregator import Aggregator
from podium.workers.mender import Mender, renew_counts
from tests.proxy import Proxy
from tests.redis_server import RedisServer, start_server

T = TypeVar("T")

SHARDS = 4
DEADLINE_S = 30.0  # for the index to answer through the moved proxy: a deadline, not a speed


class Clock:
    def now(self) -> float:
        return time.time()


@pytest.fixture
def primary_and_replica() -> Iterator[tuple[RedisServer, RedisServer]]:
    try:
        primary = start_server()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    replica = start_server(replica_of=primary)
    yield primary, replica
    replica.stop()
    primary.stop()


async def _answered(work: Callable[[], Awaitable[T]]) -> T:
    """``work`` once the index answers it (the first calls after the proxy moved may meet
    the connections that died with the old primary); every write here is idempotent."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            return await work()
        except Unavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def _rebuild_live() -> int:
    raise AssertionError("no marker was lost: nothing to rebuild")


@pytest.mark.timeout(120)
async def test_after_a_failover_that_lost_writes_the_next_histogram_equals_a_fresh_count(
    primary_and_replica: tuple[RedisServer, RedisServer],
) -> None:
    primary, replica = primary_and_replica
    proxy = Proxy("127.0.0.1", primary.port)
    await proxy.start()
    client = RedisIndex.client_from_url(f"redis://127.0.0.1:{proxy.port}/0")
    try:
        settings = parse(
            {
                "index": {"shards": SHARDS},
                "boards": [{"name": "week", "window": "week", "exact_top": 20}],
            }
        )
        clock = Clock()
        shards = [RedisIndex(client, "t", shard=s) for s in range(SHARDS)]
        split = SplitIndex(shards)
        marks = RedisGenerations(client, [(s.shard, s.keys) for s in shards])
        snaps = MemorySnapshots(clock.now)
        agg = Aggregator(settings, shards, snaps, clock)
        spec, w = agg.live(clock.now())[0]
        key, codec, exp = BoardKey(spec.name, w.id), spec.codec, index_expiry(w)
        rng = random.Random(7)

        async def write(entries: dict[str, int]) -> None:
            await _answered(
                lambda: split.write(key, list(entries.items()), descending=True, expire_at=exp)
            )

        async def tallies() -> list[int]:
            return [c.get("n", 0) for c in await _answered(lambda: split.changes(key))]

        board = {f"p{i:05d}": codec.encode(rng.randrange(0, 500), 100) for i in range(2000)}
        await write(board)
        await marks.mark(list(range(SHARDS)), "t0", clock.now())
        assert await agg.step() == 1
        # The replica holds all of it, then follows its primary no more.
        assert await client.execute_command("WAIT", 1, 10_000) == 1
        await asyncio.to_thread(replica.cli, "replicaof", "no", "one")

        # The last writes: rises and new players, counted by the aggregator, never replicated.
        players = sorted(board)
        rose = rng.sample(players, 120)
        lost = {m: codec.encode(codec.points(board[m]) + rng.randrange(1, 300), 200) for m in rose}
        lost |= {f"l{i:03d}": codec.encode(rng.randrange(0, 800), 200) for i in range(60)}
        await write(lost)
        assert await agg.step() == 1
        data = await snaps.read(key)
        assert data is not None
        counted = Snapshot.decode(data)
        assert counted.changes is not None
        held = await tallies()  # each shard's tally as the aggregator counted at it

        # The failover: the primary dies, the address moves to the replica.
        primary.kill9()
        await proxy.cut()
        proxy.target = ("127.0.0.1", replica.port)
        await proxy.restore()
        others = [m for m in players if m not in lost]
        await write({m: codec.encode(codec.points(board[m]) + 500, 300) for m in others[:8]})
        # The node that took over holds a lower tally than the one counted at, on every shard:
        # the mark the mender puts there lies before it (recount.lua compares the generation).
        assert all(n < h for n, h in zip(await tallies(), held, strict=True))

        replayed: list[Collection[int] | None] = []

        async def replay(since_s: float, only: Collection[int] | None) -> int:
            replayed.append(only)
            await write(lost)  # the log's last seconds again: the updaters' idempotent writes
            return len(lost)

        needs: Any = SimpleNamespace(settings=settings, clock=clock, shards=shards)
        mender = Mender(
            marks, _rebuild_live, replay, clock, 60.0, SHARDS, renew=partial(renew_counts, needs)
        )
        await _answered(mender.step)
        assert replayed == [None]  # every shard's node changed: every change replayed
        # Writes of the new node after the replay: its tally is past the counted one now, so
        # the moves since that tally are all held, and counts that followed them would count
        # the lost writes twice (as counted, and as replayed).
        await write({m: codec.encode(codec.points(board[m]) + 600, 400) for m in others[8:40]})
        assert all(n > h for n, h in zip(await tallies(), held, strict=True))

        # The aggregator's next cycle that every shard answered (one whose shard met a
        # connection that died with the old primary stands in that shard's last answer, and
        # says so by its asOf).
        deadline = time.monotonic() + DEADLINE_S
        while True:
            began = clock.now()
            assert await agg.step() == 1
            data = await snaps.read(key)
            assert data is not None
            snap = Snapshot.decode(data)
            if snap.as_of >= began:
                break
            assert time.monotonic() < deadline, "no cycle had every shard's answer"
        hist = snap.histogram
        assert hist is not None
        assert list(hist.counts) == await split.count_between(key, list(hist.bounds))
        # Readers widening from the counted snapshot are told to count afresh too.
        assert Changes.summed(await split.changes(key)).since(counted.changes) is None
    finally:
        await client.aclose()
        await proxy.cut()
