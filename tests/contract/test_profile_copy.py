"""The profile copy contract (``ProfileCopy``): one body per behaviour, run against every
adapter, and the copy read beside the boards (``RankIndex.around``).

The adapters (``tests/contract/conftest.py``): the in-process index, the single Redis
index, and a shard of a split board on Redis and on Redis Cluster, each the copy of its own
boards (bootstrap hands out its ``copy`` as the port): a shard's copy is in the slot of the
shard's hash tag, beside that shard's boards (index/redis/keys.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from podium.domain.boards import in_board_order
from podium.domain.models import Profile
from podium.domain.sharding import shard_tag
from podium.index.redis.index import RedisIndex
from podium.index.redis.keys import SINGLE
from podium.index.redis.profiles import RedisProfileCopy
from podium.ports import BoardKey, ProfileCopy, RankIndex
from tests.contract.conftest import INDEXES, Backend, backend_of

WEEK = BoardKey("week", "2026-W44")


@pytest.fixture(params=INDEXES)
def backend(request: pytest.FixtureRequest) -> Backend:
    return backend_of(request, request.param)


@pytest.fixture
async def index(backend: Backend) -> AsyncIterator[Any]:
    """An index, with the copy of its boards' profiles beside them (``index.copy``)."""
    idx = backend.index()
    try:
        yield idx
    finally:
        await idx.close()


@pytest.fixture
def copy(index: Any) -> ProfileCopy:
    found: ProfileCopy = index.copy
    return found


async def _fill(copy: ProfileCopy, token: str = "t0") -> None:
    """Mark the copy complete, as a copier does once it wrote every profile."""
    assert await copy.begin_profiles_copy(token, 1000.0, 60.0)
    assert await copy.end_profiles_copy(token)


async def test_profiles_copy_keeps_the_newest_version(copy: ProfileCopy) -> None:
    vex = Profile("p1", "Vex", "https://example.test/v.png", "FR")
    assert await copy.write_profiles([(vex, 2), (Profile("p2", "Nyx"), 1)]) == 2
    assert await copy.write_profiles([(Profile("p1", "older"), 1)]) == 0
    assert await copy.write_profiles([(Profile("p1", "same version"), 2)]) == 0
    await _fill(copy)
    assert await copy.profiles(["p1", "p2", "p3"]) == {"p1": vex, "p2": Profile("p2", "Nyx")}
    odd = Profile("p1", 'Zoë "😀" ,]\\', None, None)  # what a JSON copy must survive
    assert await copy.write_profiles([(odd, 10)]) == 1
    assert await copy.profiles(["p1"]) == {"p1": odd}
    assert await copy.profiles([]) == {}


async def test_profiles_are_not_answered_until_the_copy_is_complete(copy: ProfileCopy) -> None:
    assert not await copy.profiles_complete()
    await copy.write_profiles([(Profile("p1", "Vex"), 1)])
    assert await copy.profiles(["p1"]) is None  # not "no profile": unknown
    await _fill(copy)
    assert await copy.profiles_complete()
    assert await copy.profiles(["p1", "p9"]) == {"p1": Profile("p1", "Vex")}


async def test_one_copier_at_a_time_fills_the_copy(copy: ProfileCopy) -> None:
    assert await copy.begin_profiles_copy("a", 1000.0, 60.0)
    assert not await copy.begin_profiles_copy("b", 1030.0, 60.0)  # a's lease runs to 1060
    assert await copy.keep_profiles_copy("a", 1050.0, 60.0)  # now to 1110
    assert not await copy.begin_profiles_copy("b", 1100.0, 60.0)
    assert not await copy.profiles_complete()
    assert await copy.profiles(["p1"]) is None
    # a stops renewing (its process died): once the lease ran out, b takes over
    assert await copy.begin_profiles_copy("b", 1111.0, 60.0)
    assert not await copy.keep_profiles_copy("a", 1112.0, 60.0)
    assert not await copy.end_profiles_copy("a")  # a must not mark b's half-filled copy
    assert not await copy.profiles_complete()
    assert await copy.end_profiles_copy("b")
    assert await copy.profiles_complete()
    assert not await copy.end_profiles_copy("b")  # once: the copy is no longer b's to mark
    # a new copy makes it incomplete again until it ends
    assert await copy.begin_profiles_copy("c", 2000.0, 60.0)
    assert not await copy.profiles_complete()
    assert await copy.profiles(["p1"]) is None


# -- read beside the boards -------------------------------------------------------------


async def test_around_reads_the_rows_profiles_in_the_same_step(
    index: Any, descending: bool
) -> None:
    boards: RankIndex = index
    copy: ProfileCopy = index.copy
    entries = {f"p{i}": i for i in range(6)}
    await boards.write(WEEK, list(entries.items()), descending=descending, expire_at=None)
    await copy.write_profiles([(Profile(p, p.upper()), 1) for p in ("p1", "p2", "p3", "p5")])
    before = await boards.around(WEEK, "p2", 1, descending=descending)
    assert before is not None and before.profiles is None
    await _fill(copy)
    found = await boards.around(WEEK, "p2", 1, descending=descending)
    assert found is not None
    ordered = in_board_order(entries.items(), descending)
    assert found.rows == ordered[found.rank - 1 : found.rank + 2]
    # the rows are p1, p2, p3 either way; players without a profile are left out
    assert found.profiles == {p: Profile(p, p.upper()) for p in ("p1", "p2", "p3")}
    edge = await boards.around(WEEK, "p4", 1, descending=descending)
    assert edge is not None and edge.profiles == {
        "p3": Profile("p3", "P3"),
        "p5": Profile("p5", "P5"),
    }


# -- Redis: where the copy lives, and a copy Redis lost or restored -----------------------


async def test_redis_copy_is_one_hash_per_shard_tag(redis_pair: tuple[RedisIndex, Any]) -> None:
    """Today's single shard keeps the name the copy always had; a shard's copy carries the
    shard's hash tag, so it shares a Redis Cluster slot with that shard's boards."""
    index, raw = redis_pair
    prefix = index.keys.prefix
    if index.shard is None:
        assert index.copy.key == index.keys.profiles(SINGLE) == f"{prefix}:profiles"
    else:
        tag = shard_tag(index.shard)
        assert index.copy.key == index.keys.profiles(tag) == f"{prefix}:{tag}:profiles"
        assert index.keys.board(WEEK) == f"{prefix}:{tag}:week:2026-W44:z"
    other_tag = shard_tag(15 if index.shard != 15 else 14)
    other = RedisProfileCopy(index._r, index.keys, other_tag)
    assert other.key == f"{prefix}:{other_tag}:profiles"
    await index.copy.write_profiles([(Profile("p1", "Vex"), 1)])
    await other.write_profiles([(Profile("p2", "Nyx"), 1)])
    assert await raw.hkeys(index.copy.key) == ["p1"]
    assert await raw.hkeys(other.key) == ["p2"]
    await _fill(other)  # each copy has its own mark
    assert await other.profiles_complete() and not await index.copy.profiles_complete()


async def test_redis_copy_lost_while_it_is_filled_is_not_marked_complete(
    redis_pair: tuple[RedisIndex, Any],
) -> None:
    index, raw = redis_pair
    assert await index.copy.begin_profiles_copy("a", 1000.0, 60.0)
    await index.copy.write_profiles([(Profile("p1", "Vex"), 1)])
    await raw.delete(index.copy.key)  # Redis restarted empty, part way through
    await index.copy.write_profiles([(Profile("p2", "Nyx"), 1)])
    assert not await index.copy.keep_profiles_copy("a", 1001.0, 60.0)
    assert not await index.copy.end_profiles_copy("a")
    assert not await index.copy.profiles_complete()
    assert await index.copy.profiles(["p2"]) is None


async def test_redis_copy_marked_before_a_restart_is_filled_again(
    redis_pair: tuple[RedisIndex, Any],
) -> None:
    index, raw = redis_pair
    await index.copy.write_profiles([(Profile("p1", "Vex"), 1)])
    await _fill(index.copy)
    assert await index.copy.profiles_complete()
    # As a Redis restored from a snapshot, or a replica that took over, would hold it: the
    # mark of a server that has another run id. Reads may use the copy, but it is to be
    # filled again, as it may lack the last changes.
    await raw.hset(index.copy.key, "", "complete:0123456789abcdef")
    assert not await index.copy.profiles_complete()
    assert await index.copy.profiles(["p1"]) == {"p1": Profile("p1", "Vex")}
    await _fill(index.copy, "t1")
    assert await index.copy.profiles_complete()
