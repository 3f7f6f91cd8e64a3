"""Fixtures the contract suites share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from podium.index.redis import RedisIndex
from tests.conftest import REDIS_URL


@pytest.fixture
async def redis_pair(redis_prefix: str) -> AsyncIterator[tuple[RedisIndex, Any]]:
    """A Redis index under the test's own prefix, and a raw client beside it (to look at,
    or break, what the index keeps)."""
    index = RedisIndex.from_url(REDIS_URL, prefix=redis_prefix)
    raw = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
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
