"""Degrading in the seed's order, on real parts broken by the tests. What a caller sees with
each part down, and where each is tested:

| what is down | what a caller sees | tested by |
| --- | --- | --- |
| the store (a shard database) | writes for its players get 503 with Retry-After; reads keep answering from the index | ``test_a_store_database_down_refuses_its_writes_and_reads_go_on``; the retry that completes a match once, ``test_split.py::test_a_database_down_is_503_and_the_retry_completes_the_rest_once`` |
| Redis | results accepted and held in the log; the top page from the last read of it with its true asOf; a rank read 503, never a wrong rank | ``test_redis_down_accepts_results_serves_the_last_top_page_and_refuses_ranks`` (one shard, and four shards whose top comes from the aggregator's snapshot); the boards catching up, ``test_outages.py`` |
| one Redis Cluster shard | the same for the boards it holds | ``test_a_cluster_shard_down_never_answers_a_wrong_rank`` |
| NATS | results accepted, the outbox holds them; ranks stop moving; when NATS is back they drain in each player's order | ``test_nats_down_holds_results_in_the_outbox_and_drains_them_in_order`` |
| the aggregator | the standby takes over; meanwhile reads count on the shards | ``test_aggregators_gone_reads_count_on_the_shards_until_the_standby_takes_over``; a kill -9 of the active one under load, ``test_fleet.py`` |
| everything but one API process's store | ``/readyz`` says which part is down, by name | ``test_readyz_names_every_part_that_is_down`` |
"""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import asyncpg
import httpx
import pytest

from podium import ranking
from podium.config import parse
from podium.store.split import SplitStore
from tests.conftest import REDIS_URL
from tests.integration.conftest import Api, close_all, started_api
from tests.integration.fleet import Fleet
from tests.nats_cluster import Cluster, need_binary
from tests.pg_cluster import PgCluster
from tests.ports import free_ports
from tests.proxy import Proxy
from tests.redis_cluster import RedisCluster, start_cluster

DEADLINE_S = 60.0  # every wait below is for a condition; this only bounds a broken run


async def until(check: Any, what: str, timeout: float = DEADLINE_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = await check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


def points(r: httpx.Response) -> dict[str, int]:
    assert r.status_code == 200, r.text
    return {e["playerId"]: e["points"] for e in r.json()["entries"]}


def totals(r: httpx.Response) -> dict[str, int]:
    assert r.status_code == 200, r.text
    return {p["playerId"]: p["totals"]["week"] for p in r.json()["players"]}


# -- the store: one shard database down ----------------------------------------------------


@pytest.fixture
def far_cluster() -> Iterator[PgCluster]:
    c = PgCluster()
    c.start()
    try:
        yield c
    finally:
        c.destroy()


@pytest.fixture
async def far_url(far_cluster: PgCluster) -> str:
    name = f"podium_far_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(far_cluster.url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    return far_cluster.url.rsplit("/", 1)[0] + f"/{name}"


@pytest.mark.slow
async def test_a_store_database_down_refuses_its_writes_and_reads_go_on(
    postgres_url: str, far_url: str, far_cluster: PgCluster, redis_prefix: str
) -> None:
    stack: list[Any] = []
    settings = parse(
        {
            "server": {"read_rate_per_s": 0, "page_cache_s": 0},
            "workers": {"idle_sleep_s": 0.005, "lease_s": 1.0},
            "store": {
                "url": postgres_url,
                "shards": [postgres_url, far_url],
                "pool_size": 4,
                "read_pool_size": 2,
            },
            "index": {"url": REDIS_URL, "prefix": redis_prefix},
        }
    )
    api = await started_api(settings, stack)
    try:
        store = api.backends.store
        assert isinstance(store, SplitStore)
        home = [f"a{i}" for i in range(200) if store.url_of(f"a{i}") == postgres_url][:2]
        far = [f"b{i}" for i in range(200) if store.url_of(f"b{i}") == far_url][:2]
        matches = [f"m{i}" for i in range(200) if store.url_of(f"m{i}") == postgres_url][:3]
        assert totals(await api.submit(matches[0], [(home[0], 10), (far[0], 20)]))
        assert totals(await api.submit(matches[1], [(home[1], 5), (far[1], 7)]))
        await api.settle()
        board = {home[0]: 10, far[0]: 20, home[1]: 5, far[1]: 7}
        assert points(await api.client.get("/v1/boards/week")) == board

        await asyncio.to_thread(far_cluster.stop)  # the far database crashes
        # A write for one of its players: 503 with Retry-After, nothing recorded.
        r = await api.submit(matches[2], [(far[0], 1)])
        assert r.status_code == 503, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        assert int(r.headers["retry-after"]) >= 1
        # A write for a player of the home database goes on.
        assert totals(await api.submit("h1", [(home[0], 3)])) == {home[0]: 13}
        # Reads answer from the index: the page, and every player's rank, those of the
        # database that is down included.
        await until(lambda: _board_is(api, {**board, home[0]: 13}), "the home's write on the board")
        for p, want in {**board, home[0]: 13}.items():
            got = await api.client.get(f"/v1/boards/week/players/{p}")
            assert got.status_code == 200, (p, got.text)
            assert got.json()["points"] == want

        await asyncio.to_thread(far_cluster.start)
        r = await until(
            lambda: _recorded(api, matches[2], [(far[0], 1)]), "the retry recorded once back"
        )
        assert totals(r) == {far[0]: 21}
    finally:
        await close_all(stack)


async def _board_is(api: Api, want: dict[str, int]) -> bool:
    r = await api.client.get("/v1/boards/week")
    return r.status_code == 200 and points(r) == want


async def _recorded(api: Api, match: str, results: list[tuple[str, int]]) -> httpx.Response | None:
    r = await api.submit(match, results)
    return r if r.status_code != 503 else None


# -- Redis down -------------------------------------------------------------------------------


@pytest.fixture
async def redis_proxy() -> AsyncIterator[Proxy]:
    rd = urlparse(REDIS_URL)
    proxy = Proxy(rd.hostname or "127.0.0.1", rd.port or 6379)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.cut()


@pytest.mark.parametrize("shards", [1, 4])
async def test_redis_down_accepts_results_serves_the_last_top_page_and_refuses_ranks(
    postgres_url: str, redis_prefix: str, redis_proxy: Proxy, shards: int
) -> None:
    stack: list[Any] = []
    settings = parse(
        {
            "server": {"read_rate_per_s": 0, "page_cache_s": 0},
            "workers": {"idle_sleep_s": 0.005, "lease_s": 1.0},
            "store": {"url": postgres_url},
            "index": {
                "url": f"redis://127.0.0.1:{redis_proxy.port}/0",
                "prefix": redis_prefix,
                "shards": shards,
            },
        }
    )
    api = await started_api(settings, stack)
    try:
        assert totals(await api.submit("m1", [("a", 30), ("b", 20)])) == {"a": 30, "b": 20}
        assert totals(await api.submit("m2", [("c", 10)])) == {"c": 10}
        await api.settle()
        board = {"a": 30, "b": 20, "c": 10}
        # The top page as read while Redis answers (on four shards: once the aggregator's
        # snapshot holds every write).
        await until(lambda: _board_is(api, board), "the board")
        seen = (await api.client.get("/v1/boards/week")).json()

        await redis_proxy.cut()
        cut_at = time.time()
        # Past what a process holds a snapshot for: the next read asks Redis.
        await asyncio.sleep(ranking.HOLD_S + 0.2)
        # Results are accepted, and held in the log.
        assert totals(await api.submit("m3", [("c", 50)])) == {"c": 60}
        pending, _ = await api.backends.store.outbox_backlog(time.time())
        assert pending == 3  # c on the three boards: waiting, not lost
        # The top page: the last one read, with its own asOf, not a newer one's.
        r = await api.client.get("/v1/boards/week")
        assert r.status_code == 200, r.text
        assert r.json()["entries"] == seen["entries"]
        assert r.json()["asOf"] == seen["asOf"]
        as_of = r.json()["asOf"]
        assert _epoch(as_of) <= cut_at
        # A player's own rank cannot be answered: 503, never an old or partial rank.
        for p in board:
            r = await api.client.get(f"/v1/boards/week/players/{p}")
            assert r.status_code == 503, r.text
            assert int(r.headers["retry-after"]) >= 1

        await redis_proxy.restore()
        await api.settle()
        await until(lambda: _board_is(api, {**board, "c": 60}), "the board caught up")
        r = await api.client.get("/v1/boards/week/players/c")
        assert r.status_code == 200 and r.json()["points"] == 60 and r.json()["rank"] == 1
    finally:
        await close_all(stack)


def _epoch(rfc3339: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()
