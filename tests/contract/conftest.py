"""Fixtures the contract suites share."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlparse

import asyncpg
import pytest
import redis.asyncio as aioredis

from podium.index.redis import RedisIndex
from tests.conftest import POSTGRES_URL, REDIS_URL, need


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


@pytest.fixture
async def postgres_databases() -> AsyncIterator[Callable[[int], Awaitable[list[str]]]]:
    """Make ``n`` fresh, empty databases on the machine's Postgres (as ``postgres_url``
    does one); every one made is dropped afterwards."""
    made: list[str] = []

    async def create(name: str) -> None:
        admin = await asyncpg.connect(POSTGRES_URL)
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
            made.append(name)
        finally:
            await admin.close()

    async def make(n: int) -> list[str]:
        need(POSTGRES_URL, "PostgreSQL")
        names = [f"podium_test_{secrets.token_hex(4)}" for _ in range(n)]
        # at once: each CREATE DATABASE waits for a checkpoint of its own
        done = await asyncio.gather(*map(create, names), return_exceptions=True)
        for d in done:
            if isinstance(d, BaseException):
                raise d
        u = urlparse(POSTGRES_URL)
        return [u._replace(path=f"/{name}").geturl() for name in names]

    yield make

    async def drop(name: str) -> None:
        admin = await asyncpg.connect(POSTGRES_URL)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()

    await asyncio.gather(*map(drop, made))
