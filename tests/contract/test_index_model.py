"""Every rank index adapter against a plain Python model of a board (docs/architecture.md §5).

Random sequences of writes (few members, so they collide; few scores, so they tie; random
batch splits; replays of earlier batches, reversed), bans and unbans over two board keys,
and now and then a rebuild; after each step the whole board is compared with the model, and
after each sequence every page, every rank, every rank with its neighbours and the count.

Hypothesis runs each example synchronously; each example gets its own event loop
(``asyncio.run``) and, on Redis, its own key prefix, whose keys it deletes itself.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import podium.index.redis.index as redis_index
from podium.domain.boards import in_board_order
from podium.index.memory.index import MemoryIndex
from podium.index.redis.cluster import cluster_client, is_cluster_url
from podium.index.redis.index import RedisIndex
from podium.index.split.index import SplitIndex
from podium.ports import Around, BoardKey, Placed, RankIndex
from tests.conftest import REDIS_URL, need
from tests.redis_keys import delete_prefixed

KEYS = [BoardKey("week", "2026-W44"), BoardKey("day", "2026-10-28")]
# Case and byte order matter: "B" < "_x" < "a" < "a1" < "b" < "é" in UTF-8 bytes.
MEMBERS = ["a", "B", "b", "a1", "_x", "A", "é", "0"]
ABSENT = ["nobody", "a2"]
RUN = f"podium-test-model-{secrets.token_hex(4)}"
_examples = itertools.count()

# -- the operations ---------------------------------------------------------------------------

Entry = tuple[str, int]


@dataclass(frozen=True)
class Write:
    key: int
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class Replay:
    """Write an earlier batch again, maybe reversed and on a later step: at-least-once."""

    nth: int
    reverse: bool


@dataclass(frozen=True)
class Ban:
    keys: tuple[int, ...]
    member: str


@dataclass(frozen=True)
class Unban:
    keys: tuple[int, ...]
    member: str


@dataclass(frozen=True)
class Replace:
    key: int
    entries: tuple[Entry, ...]


Op = Write | Replay | Ban | Unban | Replace

scores = st.integers(min_value=-3, max_value=3)
entries = st.lists(st.tuples(st.sampled_from(MEMBERS), scores), min_size=1, max_size=8)
key_ids = st.integers(min_value=0, max_value=len(KEYS) - 1)
key_sets = st.lists(key_ids, min_size=1, max_size=len(KEYS), unique=True).map(tuple)


@st.composite
def split_writes(draw: st.DrawFn) -> list[Op]:
    """One batch of results, cut at random points into several writes (as the updater's
    groups fall), so the same results arrive in different batch shapes."""
    key = draw(key_ids)
    batch = draw(entries)
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(batch) - 1)), max_size=3)))
    bounds = [0, *cuts, len(batch)]
    return [Write(key, tuple(batch[a:b])) for a, b in itertools.pairwise(bounds) if a < b]


ops = st.lists(
    st.one_of(
        split_writes(),
        st.builds(Replay, st.integers(min_value=0, max_value=20), st.booleans()).map(lambda o: [o]),
        st.builds(Ban, key_sets, st.sampled_from(MEMBERS)).map(lambda o: [o]),
        st.builds(Unban, key_sets, st.sampled_from(MEMBERS)).map(lambda o: [o]),
        st.builds(
            Replace,
            key_ids,
            st.lists(st.tuples(st.sampled_from(MEMBERS), scores), max_size=5).map(tuple),
        ).map(lambda o: [o]),
    ),
    min_size=1,
    max_size=20,
).map(lambda groups: [op for group in groups for op in group])


# -- the model --------------------------------------------------------------------------------


@dataclass
class Model:
    descending: bool
    scores: dict[int, dict[str, int]] = field(
        default_factory=lambda: {k: {} for k in range(len(KEYS))}
    )
    banned: dict[int, set[str]] = field(
        default_factory=lambda: {k: set() for k in range(len(KEYS))}
    )

    def write(self, key: int, batch: Sequence[Entry]) -> int:
        board, written = self.scores[key], 0
        for member, score in batch:
            if member in self.banned[key]:
                continue
            old = board.get(member)
            if old is None or (score > old if self.descending else score < old):
                board[member] = score
                written += 1
        return written

    def ban(self, keys: Sequence[int], member: str) -> None:
        for k in keys:
            self.banned[k].add(member)
            self.scores[k].pop(member, None)

    def unban(self, keys: Sequence[int], member: str) -> None:
        for k in keys:
            self.banned[k].discard(member)

    def replace(self, key: int, batch: Sequence[Entry]) -> None:
        self.scores[key] = {m: s for m, s in batch if m not in self.banned[key]}

    def order(self, key: int) -> list[Entry]:
        """The one order (``in_board_order``): (score, member bytes) ascending; the exact
        reverse on descending boards."""
        return in_board_order(self.scores[key].items(), self.descending)


# -- running one example ----------------------------------------------------------------------


async def _check_all(index: RankIndex, model: Model, key: int) -> None:
    bkey, desc = KEYS[key], model.descending
    expected = model.order(key)
    n = len(expected)
    assert await index.count(bkey) == n
    for start in range(n + 2):
        for stop in range(start - 1, n + 2):
            got = await index.page(bkey, start, stop, descending=desc)
            assert got == (expected[start : stop + 1] if start <= stop else []), (start, stop)
    position = {m: Placed(i, s, True) for i, (m, s) in enumerate(expected)}
    asked = [*MEMBERS, *ABSENT, *reversed(MEMBERS)]
    assert await index.ranks(bkey, asked, descending=desc) == [position.get(m) for m in asked]
    for m in [*MEMBERS, *ABSENT]:
        assert await index.rank(bkey, m, descending=desc) == position.get(m), m
        hit = position.get(m)
        for neighbors in (0, 1, 2, n):
            near = await index.around(bkey, m, neighbors, descending=desc)
            if hit is None:
                assert near is None, (m, neighbors)
            else:
                rank, score = hit.rank, hit.score
                rows = expected[max(0, rank - neighbors) : rank + neighbors + 1]
                assert near == Around(rank, score, rows, None, exact=True), (m, neighbors)


async def _example(index: RankIndex, descending: bool, sequence: list[Op]) -> None:
    model = Model(descending)
    writes: list[Write] = []
    for op in sequence:
        match op:
            case Write(key, batch):
                writes.append(op)
                got = await index.write(KEYS[key], batch, descending=descending, expire_at=None)
                assert got == model.write(key, batch), op
            case Replay(nth, reverse) if writes:
                earlier = writes[nth % len(writes)]
                batch = earlier.entries[::-1] if reverse else earlier.entries
                got = await index.write(
                    KEYS[earlier.key], batch, descending=descending, expire_at=None
                )
                assert got == model.write(earlier.key, batch), op
            case Ban(keys, member):
                await index.ban([KEYS[k] for k in keys], member)
                model.ban(keys, member)
            case Unban(keys, member):
                await index.unban([KEYS[k] for k in keys], member)
                model.unban(keys, member)
            case Replace(key, batch):
                await index.replace(KEYS[key], batch, expire_at=None)
                model.replace(key, batch)
        for k, bkey in enumerate(KEYS):  # the whole board after every step
            assert await index.page(bkey, 0, 100, descending=descending) == model.order(k), op
    for k in range(len(KEYS)):
        await _check_all(index, model, k)


async def _on_memory(descending: bool, sequence: list[Op]) -> None:
    index = MemoryIndex()
    try:
        await _example(index, descending, sequence)
    finally:
        await index.close()


async def _on_redis(descending: bool, sequence: list[Op]) -> None:
    prefix = f"{RUN}-{next(_examples)}"
    index = RedisIndex.from_url(REDIS_URL, prefix=prefix)
    raw: Any = aioredis.Redis.from_url(REDIS_URL)
    try:
        await _example(index, descending, sequence)
    finally:
        await index.close()
        try:
            async for k in raw.scan_iter(match=f"{prefix}:*", count=1000):
                await raw.delete(k)
        finally:
            await raw.aclose()


async def _on_split_memory(descending: bool, sequence: list[Op]) -> None:
    index = SplitIndex([MemoryIndex() for _ in range(4)])
    try:
        await _example(index, descending, sequence)
    finally:
        await index.close()


async def _on_split_redis(url: str, shards: int, descending: bool, sequence: list[Op]) -> None:
    """16 shard indexes on one client, as bootstrap makes them (on one Redis or a cluster)."""
    prefix = f"{RUN}-{next(_examples)}"
    client = cluster_client(url) if is_cluster_url(url) else RedisIndex.client_from_url(url)
    index = SplitIndex(
        [RedisIndex(client, prefix, shard=i) for i in range(shards)], close=client.aclose
    )
    try:
        await _example(index, descending, sequence)
    finally:
        try:
            await delete_prefixed(client, prefix)
        finally:
            await index.close()


PROPERTY = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@PROPERTY
@given(descending=st.booleans(), sequence=ops)
def test_memory_index_matches_the_model(descending: bool, sequence: list[Op]) -> None:
    asyncio.run(_on_memory(descending, sequence))


def test_redis_index_matches_the_model() -> None:
    need(REDIS_URL, "Redis")

    @PROPERTY
    @given(descending=st.booleans(), sequence=ops)
    def run(descending: bool, sequence: list[Op]) -> None:
        # Small chunks, so a write of a few entries is several script calls, as a big one is.
        with mock.patch.object(redis_index, "CHUNK", 3):
            asyncio.run(_on_redis(descending, sequence))

    run()


@PROPERTY
@given(descending=st.booleans(), sequence=ops)
def test_split_memory_index_matches_the_model(descending: bool, sequence: list[Op]) -> None:
    asyncio.run(_on_split_memory(descending, sequence))


def test_split_redis_index_matches_the_model() -> None:
    need(REDIS_URL, "Redis")

    @PROPERTY
    @given(descending=st.booleans(), sequence=ops)
    def run(descending: bool, sequence: list[Op]) -> None:
        with mock.patch.object(redis_index, "CHUNK", 3):
            asyncio.run(_on_split_redis(REDIS_URL, 16, descending, sequence))

    run()


def test_split_cluster_index_matches_the_model(redis_cluster: Any) -> None:
    @settings(PROPERTY, max_examples=20)
    @given(descending=st.booleans(), sequence=ops)
    def run(descending: bool, sequence: list[Op]) -> None:
        asyncio.run(_on_split_redis(redis_cluster.url, 16, descending, sequence))

    run()
