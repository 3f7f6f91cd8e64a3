"""The rank index on Redis Cluster (``index/redis/cluster.py``): where the shards' keys live, reads
from replicas, the cluster's errors, the shared read limiter, and a primary that dies.

The cluster is the tests' own (``tests/redis_cluster.py``): the session's for what only
reads or writes, a fresh one for the test that kills a primary.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis import exceptions as rx

from podium import metrics
from podium.domain.sharding import shard_tag
from podium.errors import ConfigError, IndexUnavailable, InternalError, RateLimited, Unavailable
from podium.index.redis.cluster import (
    client_for,
    cluster_client,
    is_cluster_url,
    nodes_of,
    shard_indexes,
)
from podium.index.redis.errors import translated
from podium.index.redis.index import WRITE, RedisIndex
from podium.index.redis.ratelimit import RedisReadLimiter
from podium.ports import BoardKey, Near, Placed
from tests.redis_cluster import RedisCluster, start_cluster

WEEK = BoardKey("week", "2026-W44")
READS = ("evalsha_ro", "eval_ro", "zrange", "zmscore", "zcard")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def slot_owners(cluster: RedisCluster) -> dict[int, int]:
    """Each slot's primary, by port, as the cluster itself says (CLUSTER SLOTS)."""
    node = aioredis.Redis(port=cluster.alive()[0], decode_responses=True)
    try:
        ranges = await node.execute_command("CLUSTER SLOTS")
    finally:
        await node.aclose()
    owners: dict[int, int] = {}
    for found in ranges.values() if isinstance(ranges, dict) else ranges:
        first, last, primary = found[0], found[1], found[2]
        for slot in range(int(first), int(last) + 1):
            owners[slot] = int(primary[1])
    return owners


async def keyslot(cluster: RedisCluster, key: str) -> int:
    node = aioredis.Redis(port=cluster.alive()[0], decode_responses=True)
    try:
        return int(await node.execute_command("CLUSTER KEYSLOT", key))
    finally:
        await node.aclose()


async def calls(port: int, commands: tuple[str, ...]) -> int:
    """How many of these commands a node has run since it started (INFO commandstats)."""
    node = aioredis.Redis(port=port, decode_responses=True)
    try:
        stats = await node.info("commandstats")
    finally:
        await node.aclose()
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in commands)


@pytest.fixture
async def shards(redis_cluster: RedisCluster, cluster_prefix: str) -> AsyncIterator[Any]:
    """Sixteen shard indexes sharing one cluster client."""
    client = cluster_client(redis_cluster.url)
    indexes = shard_indexes(client, cluster_prefix, 16)
    try:
        yield indexes
    finally:
        for index in indexes:  # each closes the shared client: harmless twice
            await index.close()


# -- the URL ----------------------------------------------------------------------------


def test_cluster_urls_name_their_nodes() -> None:
    assert is_cluster_url("redis+cluster://a:7000") and is_cluster_url("rediss+cluster://a:1")
    assert not is_cluster_url("redis://a:6379/0")
    assert nodes_of("redis+cluster://10.0.0.1:7000,10.0.0.2:7001, h3:7002") == (
        [("10.0.0.1", 7000), ("10.0.0.2", 7001), ("h3", 7002)],
        {},
    )
    assert nodes_of("rediss+cluster://u:p%40ss@[::1]:7000/") == (
        [("::1", 7000)],
        {"username": "u", "password": "p@ss", "ssl": True},
    )
    assert nodes_of("redis+cluster://:secret@h:7000")[1] == {"password": "secret"}
    for bad in (
        "redis://h:7000",
        "redis+cluster://h",
        "redis+cluster://h:port",
        "redis+cluster://h:7000,",
        "redis+cluster://h:7000/2",
        "redis+cluster://h:7000?ssl=true",
    ):
        with pytest.raises(ConfigError):
            nodes_of(bad)


def test_the_read_limiter_s_cluster_client_gives_a_dead_node_up_at_once() -> None:
    """A read waits for its bucket a quarter of a second at most: its client does not retry
    (the index's does, to ride out the start of a failover)."""
    limiter = cluster_client("redis+cluster://127.0.0.1:7000", timeout_s=0.25)
    index = cluster_client("redis+cluster://127.0.0.1:7000")
    assert limiter.retry.get_retries() == 0 and index.retry.get_retries() > 0


async def test_one_client_for_every_url_the_shards_share() -> None:
    cluster = client_for("redis+cluster://127.0.0.1:7000", read_from_replicas=True)
    single = client_for("redis://127.0.0.1:6379/0")
    try:
        assert isinstance(cluster, aioredis.RedisCluster) and cluster.load_balancing_strategy
        assert isinstance(single, aioredis.Redis)
        assert [i.keys.shard for i in shard_indexes(single, "p", 3)] == ["{s00}", "{s01}", "{s02}"]
        with pytest.raises(ConfigError):
            shard_indexes(single, "p", 0)
    finally:
        await cluster.aclose()
        await single.aclose()


def test_a_single_index_on_a_cluster_is_refused() -> None:
    """A single index reads a board and the copy of profiles (two slots) in one script: on a
    cluster the index is split into shards, each in one slot."""
    client = cluster_client(f"redis+cluster://127.0.0.1:{free_port()}")
    with pytest.raises(ConfigError):
        RedisIndex(client, "podium-test")
    assert RedisIndex(client, "podium-test", shard=0).keys.shard == shard_tag(0)


# -- where the keys live ----------------------------------------------------------------


async def test_shards_keep_their_keys_in_one_slot_each_and_spread_over_every_primary(
    redis_cluster: RedisCluster, shards: list[RedisIndex]
) -> None:
    owners = await slot_owners(redis_cluster)
    held_by: dict[int, int] = {}
    for n, index in enumerate(shards):
        player = f"p{n}"
        await index.write(WEEK, [(player, n)], descending=True, expire_at=None, versions=[1])
        await index.ban([WEEK], "cheat")
        await index.copy.write_profiles([])
        assert await index.copy.begin_profiles_copy("t", 1000.0, 60.0)
        keys = [index.keys.board(WEEK), index.keys.bans(WEEK), index.keys.versions(WEEK)]
        keys += [index.copy.key, index.keys.staging(WEEK, "x")]
        slots = {await keyslot(redis_cluster, k) for k in keys}
        assert len(slots) == 1, keys  # one shard, one slot: one script touches them all
        held_by[n] = slot = slots.pop()
        # the data is on the primary the cluster says owns the slot
        primary = aioredis.Redis(port=owners[slot], decode_responses=True)
        try:
            assert await primary.zscore(keys[0], player) == n
            assert await primary.sismember(keys[1], "cheat")
            assert await primary.hget(keys[2], player) == "1"
            assert await primary.exists(keys[3])
        finally:
            await primary.aclose()
    assert len(set(held_by.values())) == 16  # sixteen shards, sixteen slots
    assert {owners[s] for s in held_by.values()} == set(redis_cluster.primaries())
    assert len(redis_cluster.primaries()) == 3


async def test_a_script_given_keys_of_two_slots_is_a_bug_not_an_outage(
    shards: list[RedisIndex],
) -> None:
    a, b = shards[0], shards[1]
    keys = [a.keys.board(WEEK), b.keys.bans(WEEK), a.keys.versions(WEEK)]
    with pytest.raises(InternalError) as caught, translated:
        await WRITE(a._r, keys, ["GT", "", "p", "1"])
    assert not isinstance(caught.value, Unavailable)
    # refused by the client before sending, or by the node (CROSSSLOT): a bug either way
    cause = caught.value.__cause__
    assert isinstance(cause, (rx.RedisClusterException, rx.ClusterCrossSlotError)), cause
    assert await a.count(WEEK) == 0  # nothing was written


async def test_the_copy_of_profiles_is_marked_with_the_run_id_of_its_own_primary(
    redis_cluster: RedisCluster, shards: list[RedisIndex]
) -> None:
    owners = await slot_owners(redis_cluster)
    for index in shards[:6]:
        assert await index.copy.begin_profiles_copy("t", 1000.0, 60.0)
        assert await index.copy.end_profiles_copy("t")
        assert await index.copy.profiles_complete()
        primary = aioredis.Redis(port=owners[await keyslot(redis_cluster, index.copy.key)])
        try:
            run_id = (await primary.info("server"))["run_id"]
            assert await primary.hget(index.copy.key, "") == f"complete:{run_id}".encode()
        finally:
            await primary.aclose()


# -- reads from replicas ----------------------------------------------------------------


async def test_reads_go_to_replicas_and_writes_to_primaries(
    redis_cluster: RedisCluster, cluster_prefix: str, descending: bool
) -> None:
    client = cluster_client(redis_cluster.url, read_from_replicas=True)
    indexes = shard_indexes(client, cluster_prefix, 16)
    try:
        entries = {n: [(f"p{n}-{i}", i % 3) for i in range(5)] for n in range(16)}
        for n, index in enumerate(indexes):
            assert await index.write(WEEK, entries[n], descending=descending, expire_at=None) == 5
        for primary in redis_cluster.primaries():  # every replica has it all
            node = aioredis.Redis(port=primary)
            try:
                assert await node.execute_command("WAIT", 1, 5000) == 1
            finally:
                await node.aclose()
        primaries = redis_cluster.primaries()
        replicas = [p for p in redis_cluster.alive() if p not in primaries]
        before = {p: await calls(p, READS) for p in redis_cluster.alive()}
        lookups = sum([await calls(p, ("command|getkeys",)) for p in redis_cluster.alive()])
        for n, index in enumerate(indexes):
            mine = entries[n]
            top = sorted(mine, key=lambda e: (e[1], e[0]), reverse=descending)
            assert await index.page(WEEK, 0, 9, descending=descending) == top
            assert await index.count(WEEK) == 5
            assert await index.rank(WEEK, top[1][0], descending=descending) == Placed(
                1, top[1][1], True
            )
            assert await index.scores(WEEK, [mine[0][0]]) == [mine[0][1]]
            assert await index.ahead(WEEK, [top[2]], descending=descending) == [2]
            assert await index.near(WEEK, top[2][0], top[2][1], 1, descending=descending) == Near(
                2, top[1:2], top[3:4]
            )
            assert await index.scores_at(WEEK, [0, 9], descending=descending) == [top[0][1], None]
        after = {p: await calls(p, READS) for p in redis_cluster.alive()}
        assert all(after[p] == before[p] for p in primaries)  # no read reached a primary
        assert sum(after[p] - before[p] for p in replicas) >= 16 * 7
        # one round trip per read: the client never asked a node where a script's keys are
        assert sum([await calls(p, ("command|getkeys",)) for p in redis_cluster.alive()]) == (
            lookups
        )
        # and a write through the same client still goes to a primary
        assert await indexes[0].write(WEEK, [("late", 99)], descending=True, expire_at=None) == 1
    finally:
        for index in indexes:
            await index.close()


# -- errors -----------------------------------------------------------------------------


async def test_a_cluster_nobody_answers_is_unavailable() -> None:
    index = RedisIndex(cluster_client(f"redis+cluster://127.0.0.1:{free_port()}"), "t", shard=0)
    try:
        for call in (
            index.ping(),
            index.page(WEEK, 0, 9, descending=True),
            index.write(WEEK, [("a", 1)], descending=True, expire_at=None),
            index.near(WEEK, "a", 1, 2, descending=True),
        ):
            with pytest.raises(IndexUnavailable) as caught:
                await call
            assert caught.value.__cause__ is not None
    finally:
        await index.close()


# -- the shared read limiter ------------------------------------------------------------


async def test_the_read_limiter_works_on_a_cluster(
    redis_cluster: RedisCluster, cluster_prefix: str
) -> None:
    limiter = RedisReadLimiter.from_url(redis_cluster.url, cluster_prefix, 0.01, 2)
    try:
        for client in ("198.51.100.1", "198.51.100.2", "2001:db8::1"):
            await limiter.take(client)
            await limiter.take(client)
            with pytest.raises(RateLimited) as caught:
                await limiter.take(client)
            assert caught.value.retry_after >= 1
    finally:
        await limiter.close()
    owners = await slot_owners(redis_cluster)
    buckets = [limiter.keys.read_bucket(c) for c in ("198.51.100.1", "198.51.100.2", "2001:db8::1")]
    for key in buckets:
        node = aioredis.Redis(port=owners[await keyslot(redis_cluster, key)])
        try:
            assert await node.hget(key, "tokens") is not None
        finally:
            await node.aclose()


# -- a primary dies ---------------------------------------------------------------------


@pytest.mark.slow  # a cluster of its own, a primary killed and a failover waited out
async def test_a_dead_primary_is_unavailable_until_its_replica_takes_over() -> None:
    cluster = start_cluster()
    client = cluster_client(cluster.url)
    indexes = shard_indexes(client, "podium-test-failover", 16)
    limiter = RedisReadLimiter.from_url(cluster.url, "podium-test-failover", 0.01, 5)
    try:
        for n, index in enumerate(indexes):
            await index.write(WEEK, [(f"p{n}", n)], descending=True, expire_at=None)
        for primary in cluster.primaries():
            node = aioredis.Redis(port=primary)
            try:
                assert await node.execute_command("WAIT", 1, 5000) == 1
            finally:
                await node.aclose()
        owners = await slot_owners(cluster)
        victim = owners[client.keyslot(indexes[0].keys.board(WEEK))]
        # a reader whose bucket lives on the same primary
        reader = next(
            f"198.51.100.{i}"
            for i in range(256)
            if owners[client.keyslot(limiter.keys.read_bucket(f"198.51.100.{i}"))] == victim
        )
        await limiter.take(reader)
        cluster.kill(victim)
        # the shared read limiter serves the read (fail open)
        failopen = metrics.REGISTRY.get_sample_value("podium_read_limiter_failopen_total") or 0
        await limiter.take(reader)
        assert metrics.REGISTRY.get_sample_value("podium_read_limiter_failopen_total") == (
            failopen + 1
        )
        errors: list[BaseException] = []
        deadline = time.monotonic() + 30
        while True:
            try:
                found = await indexes[0].rank(WEEK, "p0", descending=True)
                break
            except Exception as e:
                errors.append(e)
                assert time.monotonic() < deadline, "no failover within 30 s"
                await asyncio.sleep(0.1)
        assert errors, "the dead primary's shard answered before any failover"
        assert all(type(e) is IndexUnavailable for e in errors), {type(e) for e in errors}
        assert found == Placed(0, 0, True)  # the replica had it
        assert await indexes[0].write(WEEK, [("q", 5)], descending=True, expire_at=None) == 1
        assert victim not in cluster.primaries()
        for n, index in enumerate(indexes):  # every shard answers again
            assert await index.rank(WEEK, f"p{n}", descending=True) == Placed(
                1 if n == 0 else 0, n, True
            )
    finally:
        for index in indexes:
            await index.close()
        await limiter.close()
        cluster.stop()
