"""The rebuild without a gap (``service/upkeep/gapless.py``) end to end: results recorded and
applied by an updater throughout, readers asking players' ranks throughout, and a rebuild of both
boards' windows (a board by order and a versioned one) from the store in between.

No read finds a seeded player missing or at zero points, and afterwards each board equals
the store: nothing applied while the rebuild read the store was lost by its switch. On the
embedded store with the in-process index (one shard and four), on Postgres with one Redis,
and on Postgres with a 16-shard index on the tests' Redis Cluster.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from podium import bootstrap
from podium.bootstrap import Backends
from podium.config.settings import parse
from podium.domain.models import PlayerResult
from podium.errors import NotFound
from podium.ports import BoardKey
from podium.service.upkeep.gapless import Target
from podium.workers.updater import Updater
from tests.conftest import REDIS_URL

_T = int(time.time())
_MONDAY = _T - (_T - 345_600) % 604_800  # the epoch was a Thursday; ISO weeks start Monday
NOW = float(max(_T, _MONDAY + 300))
BOARDS = ("week", "lastweek")  # a GT board, and a versioned one ("last" can fall)
PLAYERS = [f"p{i:03d}" for i in range(200)]


class Clock:
    def __init__(self, t: float = NOW) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


@pytest.fixture(params=["memory", "split4", "production", "cluster16"])
def kind(request: pytest.FixtureRequest) -> tuple[str, str | None, str | None, str | None]:
    if request.param in ("memory", "split4"):
        return request.param, None, None, None
    pg = request.getfixturevalue("postgres_url")
    if request.param == "cluster16":
        cluster = request.getfixturevalue("redis_cluster")
        return request.param, pg, request.getfixturevalue("cluster_prefix"), cluster.url
    return request.param, pg, request.getfixturevalue("redis_prefix"), REDIS_URL


@pytest.fixture
async def backends(
    kind: tuple[str, str | None, str | None, str | None], tmp_path: Path
) -> AsyncIterator[Backends]:
    name, pg, prefix, url = kind
    raw: dict[str, Any] = {
        "boards": [
            {"name": "week", "window": "week"},
            {"name": "lastweek", "window": "week", "aggregate": "last"},
        ]
    }
    if pg is not None:
        raw["store"] = {"url": pg}
        raw["index"] = {"url": url, "prefix": prefix, "shards": 16 if name == "cluster16" else 1}
    else:
        raw["store"] = {"url": f"sqlite:///{tmp_path / 'p.db'}"}
        raw["index"] = {"shards": 4 if name == "split4" else 1}
    b = bootstrap.build(parse(raw), Clock())
    await b.start()
    yield b
    await b.close()


async def record(b: Backends, match: str, points: dict[str, int]) -> None:
    key, _ = await b.podium.keys.create(f"gs-{match}", ["default"])
    results = [PlayerResult(p, n) for p, n in points.items()]
    await b.podium.matches.record(key, match, "default", int(NOW) - 60, 60, results)


def key_of(b: Backends, name: str) -> BoardKey:
    w = b.podium.boards.board(name).rule.window_at(int(NOW))
    assert w is not None
    return BoardKey(name, w.id)


async def expected(b: Backends, name: str) -> dict[str, int]:
    spec = b.podium.boards.board(name)
    w = spec.rule.window_at(int(NOW))
    assert w is not None
    out: dict[str, int] = {}
    async for page in b.store.standings(name, w.id):
        out |= {s.player_id: spec.score(s.tally, w) for s in page}
    return out


async def read_ranks(
    b: Backends,
    players: list[str],
    stop: asyncio.Event,
    seen: dict[str, Any],
    each: Callable[[], None] = lambda: None,
) -> None:
    """Random seeded players' ranks until ``stop``: one missing, or at no points, goes into
    ``seen["missing"]``; every read is counted in ``seen["reads"]``, then ``each`` called."""
    r = random.Random()
    while not stop.is_set():
        board, player = r.choice(BOARDS), r.choice(players)
        try:
            got = await b.podium.reads.player_rank(board, player, 0, None)
            if got.points <= 0:
                seen["missing"].append((board, player, got.points))
        except NotFound:
            seen["missing"].append((board, player, None))
        seen["reads"] += 1
        each()
        await asyncio.sleep(0)


async def test_no_rank_is_missing_and_nothing_is_lost(backends: Backends) -> None:
    b = backends
    for i in range(0, len(PLAYERS), 2):
        await record(b, f"seed{i}", {PLAYERS[i]: 10 + i, PLAYERS[i + 1]: 5 + i})
    up = Updater(b.settings, b.store, b.index, b.copy, b.log, b.clock)
    while await up.step():
        pass
    stop = asyncio.Event()
    seen = {"reads": 0, "missing": [], "recorded": 0}

    async def updater() -> None:
        while not stop.is_set():
            if not await up.step():
                await asyncio.sleep(0.005)

    async def writer() -> None:
        r, n = random.Random(19), 0
        while not stop.is_set():
            a, c = r.choice(PLAYERS), f"new{n:03d}"
            await record(b, f"live{n}", {a: r.randrange(1, 40), c: r.randrange(1, 40)})
            n += 1
            seen["recorded"] = n
            await asyncio.sleep(0.002)

    def reader() -> Any:
        return read_ranks(b, PLAYERS, stop, seen)

    tasks = [asyncio.create_task(t()) for t in (updater, writer, reader, reader)]
    try:
        while seen["recorded"] < 5:
            await asyncio.sleep(0.01)
        targets = [
            Target(b.podium.boards.board(n), b.podium.boards.window(b.podium.boards.board(n), None))
            for n in BOARDS
        ]
        before = seen["reads"], seen["recorded"]
        outcomes = await b.gapless().run(targets, grace_s=0.2)
        during = seen["reads"] - before[0], seen["recorded"] - before[1]
        await asyncio.sleep(0.1)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    while await up.step():
        pass
    assert seen["missing"] == [], seen["missing"][:10]
    assert during[0] > 0 and during[1] > 0, during  # reads and results during the rebuild
    assert [o.key for o in outcomes] == [key_of(b, n) for n in BOARDS]
    assert all(o.difference is not None for o in outcomes)
    for name in BOARDS:
        want = await expected(b, name)
        held = dict(await b.index.page(key_of(b, name), 0, 10_000, descending=True))
        assert held == want, name
