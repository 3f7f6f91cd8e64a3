"""Fixtures the contract suites share.

The rank index adapters a suite runs on (``INDEXES``): the in-process index; today's
single Redis index on the machine's Redis; one shard of a split board on that Redis (shard
3: its keys carry the tag ``{s03}``); one shard on the tests' own Redis Cluster, whose
shard turns from test to test so that the suite's keys land on every primary; and the
single index through Sentinel, on a private primary.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import redis.asyncio as aioredis

from podium.config.topology import sentinel_address
from podium.index.memory.index import MemoryIndex
from podium.index.redis.cluster import client_for, cluster_client, shard_indexes
from podium.index.redis.index import RedisIndex
from podium.index.redis.sentinel import sentinel_client
from podium.index.split.index import SplitIndex
from tests.conftest import REDIS_URL, OwnDatabases

SINGLE_INDEXES = ["memory", "redis", "redis-shard", "cluster-shard"]
REDIS_INDEXES = SINGLE_INDEXES[1:]
# A whole board split across shards (index/split/index.py), as bootstrap builds it: 4 in-process
# shards; 16 hash-tag shards on the machine's Redis; 16 on the tests' own Redis Cluster.
SPLIT_INDEXES = ["memory-split", "redis-split", "cluster-split"]
# The single index reached through Sentinel (index/redis/sentinel.py), on a private primary that
# one private Sentinel watches: the rank index contract only (the other suites' bodies run
# on the same RedisIndex over a plain client).
INDEXES = [*SINGLE_INDEXES, "sentinel", *SPLIT_INDEXES]
SPLIT_SHARDS = {"memory-split": 4, "redis-split": 16, "cluster-split": 16}
SHARD = 3  # the shard of the machine's Redis the suites use
_turn = itertools.count(7)  # the cluster's shard, a different one each test


@dataclass(frozen=True)
class Backend:
    """Where an index of a test lives: its kind, and for Redis its key prefix, its shard
    and the URL of the server or cluster."""

    kind: str
    prefix: str | None = None
    shard: int | None = None
    cluster_url: str | None = None
    sentinel_url: str | None = None

    def index(self) -> Any:
        """The index, with its copy of profiles as ``copy`` (bootstrap hands it out)."""
        if self.kind in SPLIT_SHARDS:
            return self._split(SPLIT_SHARDS[self.kind])
        if self.prefix is None:
            return MemoryIndex()
        if self.cluster_url is not None:
            return RedisIndex(cluster_client(self.cluster_url), self.prefix, shard=self.shard)
        if self.sentinel_url is not None:
            at = sentinel_address(self.sentinel_url)
            return RedisIndex(sentinel_client(at.sentinels, at.service), self.prefix)
        return RedisIndex.from_url(REDIS_URL, prefix=self.prefix, shard=self.shard)

    def _split(self, n: int) -> SplitIndex:
        if self.prefix is None:
            parts: list[Any] = [MemoryIndex() for _ in range(n)]
            return SplitIndex(parts, copies=[p.copy for p in parts])
        client = client_for(self.cluster_url or REDIS_URL)
        parts = shard_indexes(client, self.prefix, n)
        return SplitIndex(parts, close=client.aclose, copies=[p.copy for p in parts])

    def raw(self) -> Any:
        """A plain client of the same Redis or cluster, to look at (or break) what the
        index keeps."""
        if self.cluster_url is not None:
            return cluster_client(self.cluster_url)
        return aioredis.Redis.from_url(REDIS_URL, decode_responses=True)


def backend_of(request: pytest.FixtureRequest, kind: str) -> Backend:
    """The backend of one kind, asking for the async prefix fixtures (and the cluster) only
    when that kind needs them."""
    if kind in ("memory", "memory-split"):
        return Backend(kind)
    if kind in ("cluster-shard", "cluster-split"):
        cluster = request.getfixturevalue("redis_cluster")
        prefix: str = request.getfixturevalue("cluster_prefix")
        return Backend(kind, prefix, next(_turn) % 16, cluster.url)
    if kind == "sentinel":  # a private server: a prefix of the test's own, left behind
        sentinels = request.getfixturevalue("redis_sentinel")
        return Backend(kind, f"podium-test-{secrets.token_hex(4)}", sentinel_url=sentinels.url())
    prefix = request.getfixturevalue("redis_prefix")
    return Backend(kind, prefix, SHARD if kind == "redis-shard" else None)


@pytest.fixture(params=REDIS_INDEXES)
def redis_backend(request: pytest.FixtureRequest) -> Backend:
    """A sync fixture, so that the async prefix fixtures are set up only when needed."""
    return backend_of(request, request.param)


@pytest.fixture
async def redis_pair(redis_backend: Backend) -> AsyncIterator[tuple[RedisIndex, Any]]:
    """A Redis index (single, a shard, or a shard on the cluster) under the test's own
    prefix, and a raw client beside it (to look at, or break, what the index keeps)."""
    backend = redis_backend
    index = backend.index()
    assert isinstance(index, RedisIndex)
    raw = backend.raw()
    try:
        yield index, raw
    finally:
        await raw.aclose()
        await index.close()


@pytest.fixture(params=[True, False], ids=["desc", "asc"])
def descending(request: pytest.FixtureRequest) -> bool:
    """Both orders of a board."""
    value: bool = request.param
    return value


@pytest.fixture
async def postgres_databases(
    pg_databases: OwnDatabases,
) -> Callable[[int], Awaitable[list[str]]]:
    """Make ``n`` fresh databases on the machine's Postgres, as ``postgres_url`` makes one
    (migrated, or empty under ``empty_database``); every one made is dropped afterwards."""
    return pg_databases.make
