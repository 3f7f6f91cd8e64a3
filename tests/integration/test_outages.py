"""Outages of real backends (through a proxy we can cut): the store down is a 503 with
Retry-After and nothing recorded; the index down still accepts results, and the boards
catch up when it returns; ``podium serve`` and ``podium worker`` started while the store
is down wait for it, where a one-shot command says the outage at once."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from podium.config.settings import parse
from podium.domain.models import Target
from podium.serve.app import create_app
from tests.conftest import REDIS_URL
from tests.integration.conftest import Api
from tests.integration.fleet import Fleet
from tests.ports import free_port
from tests.proxy import Proxy


@pytest.fixture
async def proxied(postgres_url: str, redis_prefix: str) -> AsyncIterator[tuple[Api, Proxy, Proxy]]:
    pg, rd = urlparse(postgres_url), urlparse(REDIS_URL)
    pg_proxy, redis_proxy = (
        Proxy(pg.hostname or "", pg.port or 5432),
        Proxy(rd.hostname or "", rd.port or 6379),
    )
    await pg_proxy.start()
    await redis_proxy.start()
    settings = parse(
        {
            "server": {"read_rate_per_s": 0, "page_cache_s": 0},
            # A claim whose answer was lost in the cut stays leased: keep the lease short.
            "workers": {"idle_sleep_s": 0.005, "lease_s": 1.0},
            "store": {"url": pg._replace(netloc=f"postgres@127.0.0.1:{pg_proxy.port}").geturl()},
            "index": {"url": f"redis://127.0.0.1:{redis_proxy.port}/0", "prefix": redis_prefix},
        }
    )
    app = create_app(settings)
    try:
        async with app.router.lifespan_context(app):
            podium = app.state.podium
            _, game = await podium.keys.create("gs", ["default"], False)
            _, admin = await podium.keys.create("admin", [], True)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://podium") as c:
                yield Api(c, app.state.backends, game, admin), pg_proxy, redis_proxy
    finally:
        await pg_proxy.cut()
        await redis_proxy.cut()


async def test_store_down_is_503_and_records_nothing(proxied: tuple[Api, Proxy, Proxy]) -> None:
    api, pg, _ = proxied
    assert (await api.submit("m1", [("a", 10)])).status_code == 200
    await pg.cut()
    r = await api.submit("m2", [("a", 20)])
    assert r.status_code == 503, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert int(r.headers["retry-after"]) >= 1
    assert (await api.client.get("/readyz")).status_code == 503
    await pg.restore()
    # the retry after the outage is recorded once
    t0 = time.monotonic()
    while (
        r := await api.submit("m2", [("a", 20)])
    ).status_code == 503 and time.monotonic() - t0 < 10:
        await asyncio.sleep(0.05)
    assert r.status_code == 200, r.text
    assert r.json()["players"][0]["totals"]["week"] == 30
    assert (await api.submit("m2", [("a", 20)])).json()["players"][0]["totals"]["week"] == 30
    await api.settle()
    found = (await api.client.get("/v1/boards/week/players/a")).json()
    assert found["points"] == 30


async def test_index_down_still_accepts_and_boards_catch_up(
    proxied: tuple[Api, Proxy, Proxy],
) -> None:
    api, _, redis = proxied
    await redis.cut()
    r = await api.submit("m1", [("a", 10), ("b", 5)])
    assert r.status_code == 200, r.text  # the record does not need the index
    rank = await api.client.get("/v1/boards/week/players/a")
    assert rank.status_code == 503 and int(rank.headers["retry-after"]) >= 1
    pending, _ = await api.backends.store.outbox_backlog(time.time())
    assert pending == 6  # two players on three boards: waiting, not lost
    await redis.restore()
    await api.settle()
    # The first reads after the restore may still meet a connection the cut broke: a 503
    # with Retry-After, as a player's app is told to retry (seen once on a loaded machine).
    t0 = time.monotonic()
    while (got := await api.client.get("/v1/boards/week")).status_code == 503:
        assert time.monotonic() - t0 < 30, got.text
        await asyncio.sleep(0.1)
    assert got.status_code == 200, got.text
    page = got.json()
    assert [(e["playerId"], e["points"]) for e in page["entries"]] == [("a", 10), ("b", 5)]
    stored = await api.backends.store.totals("a", [_week_target(api)])
    assert stored == {"week": 10}


def _week_target(api: Any) -> Target:
    spec = api.podium.boards.board("week")
    w = spec.rule.window_at(int(time.time()))
    return Target("week", w.id, w.start)


WAITING = b"the store does not answer at start"


@pytest.mark.timeout(180)
async def test_processes_started_while_the_store_is_down_wait_for_it(
    tmp_path: Path, postgres_url: str, redis_prefix: str
) -> None:
    """A fleet's processes start in any order, and one restarted during a database's restart
    or failover must not die of it: each waits (``START_WAIT_S``, ``workers/runner.py``),
    saying why, and runs once the store answers."""
    pg = urlparse(postgres_url)
    proxy = Proxy(pg.hostname or "", pg.port or 5432)
    await proxy.start()
    await proxy.cut()  # its port kept, nothing answering there
    cfg = tmp_path / "podium.toml"
    cfg.write_text(
        f'[store]\nurl = "{pg._replace(netloc=f"postgres@127.0.0.1:{proxy.port}").geturl()}"\n'
        f'[index]\nurl = "{REDIS_URL}"\nprefix = "{redis_prefix}"\n'
    )
    # A one-shot command is not patient: its operator is there to read why.
    once = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "podium", "migrate", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert once.returncode == 1 and "unreachable" in once.stderr, once.stderr
    fleet = Fleet(cfg, tmp_path)
    try:
        fleet.start("worker", "worker", "--roles", "updater,relay")
        fleet.start("api", "serve", "--no-workers", port=free_port())
        deadline = time.monotonic() + 60
        while not all(WAITING in p.log.read_bytes() for p in fleet.procs.values()):
            assert time.monotonic() < deadline, "both should say they wait for the store"
            assert all(p.popen.poll() is None for p in fleet.procs.values()), "one gave up"
            await asyncio.sleep(0.1)
        await proxy.restore()
        await fleet.worker_ready("worker")
        await fleet.api_ready("api")
    except BaseException:
        fleet.stop_all()
        fleet.dump()
        raise
    finally:
        await proxy.cut()
    fleet.stop_all()
