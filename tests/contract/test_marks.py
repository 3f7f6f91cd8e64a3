"""The board marks an updater notes (``BoardMarks``, ``domain/marks.py``): one body per
behaviour, on what bootstrap keeps beside every kind of index: in process (one board, and
split), one Redis, a board split into shards on one Redis, and a Redis Cluster."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from podium import bootstrap
from podium.config.settings import Settings, parse
from podium.ports import AggregatorSlot, SystemClock
from tests.conftest import REDIS_URL

KINDS = ["memory", "memory-split", "redis", "redis-split", "cluster"]


@pytest.fixture(params=KINDS)
def settings(request: pytest.FixtureRequest) -> Settings:
    """A sync fixture, so that the async prefix fixtures are set up only when needed."""
    kind = request.param
    index: dict[str, Any] = {}
    if kind.startswith("memory"):
        index = {"url": "memory://", "shards": 4 if kind == "memory-split" else 1}
    elif kind == "cluster":
        cluster = request.getfixturevalue("redis_cluster")
        prefix = request.getfixturevalue("cluster_prefix")
        index = {"url": cluster.url, "shards": 4, "prefix": prefix}
    else:
        prefix = request.getfixturevalue("redis_prefix")
        index = {"url": REDIS_URL, "shards": 4 if kind == "redis-split" else 1, "prefix": prefix}
    return parse({"index": index})


@pytest.fixture
async def marks(settings: Settings) -> AsyncIterator[AggregatorSlot]:
    parts = bootstrap._index(settings, bootstrap.topology(settings), SystemClock())
    try:
        yield parts.snapshots
    finally:
        await parts.index.close()


async def test_none_noted_reads_empty(marks: AggregatorSlot) -> None:
    assert await marks.read_marks() == {}


async def test_each_pair_keeps_the_later_time(marks: AggregatorSlot) -> None:
    await marks.note_marks({("db1", 0): 100.5, ("db1", 1): 101.25, ("db2", 0): 99.0})
    await marks.note_marks({("db1", 0): 100.0, ("db1", 1): 102.125})  # one older, one newer
    assert await marks.read_marks() == {("db1", 0): 100.5, ("db1", 1): 102.125, ("db2", 0): 99.0}


async def test_a_time_keeps_its_digits(marks: AggregatorSlot) -> None:
    at = 1_796_000_000.123456
    await marks.note_marks({("ab12cd34ef56", 15): at})
    assert await marks.read_marks() == {("ab12cd34ef56", 15): at}


async def test_updaters_noting_at_once_never_take_a_mark_back(marks: AggregatorSlot) -> None:
    times = [1000.0 + i for i in range(40)]
    await asyncio.gather(*(marks.note_marks({("db", 3): t}) for t in reversed(times)))
    assert await marks.read_marks() == {("db", 3): max(times)}
