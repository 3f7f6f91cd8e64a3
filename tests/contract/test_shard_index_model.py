"""One shard's part of a split board against the plain Python model of a board
(``test_index_model.py``): the same random writes, replays, bans, unbans and rebuilds, on a
shard of Redis (its keys tagged ``{s03}``) and on a shard of the tests' Redis Cluster; and
after each sequence, on memory too, the reads a merge of shards needs (``ahead``, ``near``,
``scores_at``, ``scores``) held against the board the model agreed with.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from typing import Any
from unittest import mock

import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st

import podium.index.redis.index as redis_index
from podium.domain.boards import in_board_order
from podium.index.memory.index import MemoryIndex
from podium.index.redis.cluster import cluster_client
from podium.index.redis.index import RedisIndex
from podium.ports import Near, ShardIndex
from tests.conftest import REDIS_URL, need
from tests.contract.test_index_model import ABSENT, KEYS, MEMBERS, PROPERTY, Op, _example, ops
from tests.redis_cluster import RedisCluster

RUN = f"podium-test-shard-model-{secrets.token_hex(4)}"
_examples = itertools.count()


async def _check_shard_reads(index: ShardIndex, descending: bool) -> None:
    """ahead, near, scores_at and scores on every board, against its full page (which
    ``_example`` just held against the model)."""
    for key in KEYS:
        board = await index.page(key, 0, 100, descending=descending)
        held = dict(board)
        members = [*MEMBERS, *ABSENT]
        assert await index.scores(key, members) == [held.get(m) for m in members]
        probes = [(m, s) for m in members for s in range(-4, 5)]
        expected = []
        for m, s in probes:
            rows = in_board_order([*((x, y) for x, y in board if x != m), (m, s)], descending)
            expected.append(rows.index((m, s)))
        assert await index.ahead(key, probes, descending=descending) == expected
        for (m, s), i in list(zip(probes, expected, strict=True))[::5]:
            rows = in_board_order([*((x, y) for x, y in board if x != m), (m, s)], descending)
            assert await index.near(key, m, s, 2, descending=descending) == Near(
                i, rows[max(0, i - 2) : i], rows[i + 1 : i + 3]
            )
        ranks = list(range(len(board) + 2))
        assert await index.scores_at(key, ranks, descending=descending) == [
            board[r][1] if r < len(board) else None for r in ranks
        ]


async def _run(index: Any, descending: bool, sequence: list[Op]) -> None:
    await _example(index, descending, sequence)
    await _check_shard_reads(index, descending)


async def _on_memory(descending: bool, sequence: list[Op]) -> None:
    index = MemoryIndex()
    try:
        await _run(index, descending, sequence)
    finally:
        await index.close()


async def _on_redis(descending: bool, sequence: list[Op], cluster_url: str | None) -> None:
    prefix = f"{RUN}-{next(_examples)}"
    raw: Any
    if cluster_url is None:
        index = RedisIndex.from_url(REDIS_URL, prefix=prefix, shard=3)
        raw = aioredis.Redis.from_url(REDIS_URL)
    else:
        index = RedisIndex(cluster_client(cluster_url), prefix, shard=next(_examples) % 16)
        raw = cluster_client(cluster_url)
    try:
        await _run(index, descending, sequence)
    finally:
        await index.close()
        try:
            async for k in raw.scan_iter(match=f"{prefix}:*", count=1000):
                await raw.delete(k)
        finally:
            await raw.aclose()


@PROPERTY
@given(descending=st.booleans(), sequence=ops)
def test_memory_shard_reads_match_the_model(descending: bool, sequence: list[Op]) -> None:
    asyncio.run(_on_memory(descending, sequence))


def test_redis_shard_matches_the_model() -> None:
    need(REDIS_URL, "Redis")

    @PROPERTY
    @given(descending=st.booleans(), sequence=ops)
    def run(descending: bool, sequence: list[Op]) -> None:
        with mock.patch.object(redis_index, "CHUNK", 3):
            asyncio.run(_on_redis(descending, sequence, None))

    run()


def test_cluster_shard_matches_the_model(redis_cluster: RedisCluster) -> None:
    @PROPERTY
    @given(descending=st.booleans(), sequence=ops)
    def run(descending: bool, sequence: list[Op]) -> None:
        with mock.patch.object(redis_index, "CHUNK", 3):
            asyncio.run(_on_redis(descending, sequence, redis_cluster.url))

    run()
