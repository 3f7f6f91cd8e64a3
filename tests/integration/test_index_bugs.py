"""A bug in the rank index (a command Redis refuses: here a board whose key holds a string)
is a 500 with its traceback logged, never a 503 that tells clients to wait and retry.

On the production configuration only: nothing can corrupt the in-process index's types.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from podium.errors import InternalError
from podium.index.redis.keys import Keys
from podium.ports import BoardKey
from tests.conftest import REDIS_URL
from tests.integration.conftest import Api

READS = [
    "/v1/boards/week/players/a",  # around.lua
    "/v1/boards/week",  # ZRANGE
    "/v1/boards/week/players/a/friends",  # ranks.lua
]


@pytest.fixture
def config_kind() -> str:
    return "production"


@pytest.fixture
async def broken(api: Api) -> AsyncIterator[Api]:
    """The week board of a running podium, on Redis, with its key turned into a string."""
    assert (await api.submit("m1", [("a", 10), ("b", 5)])).status_code == 200
    await api.settle()
    assert (await api.client.get("/v1/boards/week/players/a")).status_code == 200
    spec = api.podium.boards.board("week")
    window = spec.rule.window_at(int(time.time()))
    assert window is not None
    board = Keys(api.podium.settings.index.prefix).board(BoardKey("week", window.id))
    raw = aioredis.Redis.from_url(REDIS_URL)
    try:
        assert await raw.delete(board) == 1
        await raw.set(board, "not a sorted set")
        api.podium.reads.clear_cache()
        yield api
    finally:
        await raw.aclose()


@pytest.mark.parametrize("path", READS)
async def test_an_index_bug_is_a_500_problem_without_retry_after(broken: Api, path: str) -> None:
    r = await broken.client.get(path)
    assert r.status_code == 500, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "retry-after" not in r.headers
    body = r.json()
    assert body["status"] == 500 and body["title"] == "Internal error"
    assert "WRONGTYPE" not in body["detail"]  # the server's reply stays in the log
    # the service stays up: its health says nothing of a bug in one read
    assert (await broken.client.get("/healthz")).status_code == 200


async def test_an_index_bug_is_logged_with_its_traceback(
    broken: Api, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        r = await broken.client.get("/v1/boards/week/players/a")
    assert r.status_code == 500
    logged = [rec for rec in caplog.records if rec.exc_info is not None]
    assert logged, [rec.getMessage() for rec in caplog.records]
    _, error, traceback = logged[0].exc_info  # type: ignore[misc]
    assert isinstance(error, InternalError) and traceback is not None
    assert isinstance(error.__cause__, ResponseError)
    assert "WRONGTYPE" in str(error.__cause__)


async def test_a_rank_read_brings_the_markers_of_its_own_step(redis_prefix: str) -> None:
    """On one Redis, ``around.lua`` reads the generation marker in the step that reads the
    rows: what ``Generations.tokens`` says, gone when the marker is gone (service/ranks/marked.py
    takes it as the check after the read); a shard's read leaves it to the check."""
    from podium.index.redis.generations import RedisGenerations
    from podium.index.redis.index import RedisIndex

    week = BoardKey("week", "2026-W44")
    index = RedisIndex(RedisIndex.client_from_url(REDIS_URL), prefix=redis_prefix)
    shard = RedisIndex(index.client, redis_prefix, shard=0)
    marks = RedisGenerations(index.client, [(None, index.keys)])
    try:
        for ix in (index, shard):
            await ix.write(week, [("a", 10), ("b", 5)], descending=True, expire_at=None)
        got = await index.around(week, "a", 1, descending=True)
        assert got is not None and got.generation == (None,) == await marks.tokens()
        await marks.mark([None], "t1", time.time())
        got = await index.around(week, "b", 1, descending=True)
        assert got is not None and got.rows == [("a", 10), ("b", 5)]
        assert got.generation == ("t1",) == await marks.tokens()
        on_shard = await shard.around(week, "b", 1, descending=True)
        assert on_shard is not None and on_shard.generation is None
    finally:
        await index.close()
