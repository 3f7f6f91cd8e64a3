"""The copy of display profiles in Redis: what a read finds, and that a read racing a
change cannot put the old profile back."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from podium.domain.models import Profile
from podium.index import profile_copy
from podium.index.redis import RedisIndex
from podium.ports import ProfileCopy
from tests.conftest import REDIS_URL

VEX = Profile("p1", "Vex", "https://x.example/v.png", "FR")


@pytest.fixture
async def copy(redis_prefix: str) -> AsyncIterator[ProfileCopy]:
    index = RedisIndex.from_url(REDIS_URL, prefix=redis_prefix)
    yield index.profile_copy()
    await index.close()


async def test_held_profiles_and_known_absences(copy: ProfileCopy) -> None:
    assert await copy.get(["p1", "p2"]) == {}
    await copy.fill({"p1": VEX, "p2": None})
    assert await copy.get(["p1", "p2", "p3"]) == {"p1": VEX, "p2": None}


async def test_a_fill_after_a_change_does_not_put_the_old_profile_back(copy: ProfileCopy) -> None:
    await copy.fill({"p1": VEX})
    await copy.changed(["p1"])
    assert await copy.get(["p1"]) == {}  # read the store
    await copy.fill({"p1": VEX})  # a read that fetched the old profile before the change
    assert await copy.get(["p1"]) == {}  # refused: the marker stays


async def test_after_the_marker_the_next_read_fills_again(
    copy: ProfileCopy, redis_prefix: str
) -> None:
    await copy.changed(["p1"])
    r = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    key = f"{redis_prefix}:p:p1"
    try:
        ttl = await r.ttl(key)
        assert 0 < ttl <= profile_copy.CHANGED_TTL_S
        await r.delete(key)  # what the marker's expiry does
        new = Profile("p1", "Vexa", None, None)
        await copy.fill({"p1": new})
        assert await copy.get(["p1"]) == {"p1": new}
        assert 0 < await r.ttl(key) <= profile_copy.TTL_S  # every copy expires
    finally:
        await r.aclose()
