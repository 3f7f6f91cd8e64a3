"""The API over a store split by player across two databases: one on the machine's Postgres
(the home, which holds players too) and one on a private cluster the tests start, and stop
mid-run. Matches whose players live on both; a database down is a 503 with Retry-After and
the retry completes the rest once; a refused match writes nothing on either."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from podium.config.settings import parse
from podium.store.split import SplitStore
from tests.integration.conftest import Api, close_all, started_api
from tests.pg_cluster import PgCluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[PgCluster]:
    c = PgCluster()
    c.start()
    try:
        yield c
    finally:
        c.destroy()


@pytest.fixture
async def far_url(cluster: PgCluster) -> AsyncIterator[str]:
    """A fresh database on the private cluster (started again if a test left it down)."""
    if not cluster.running():
        cluster.start()
    name = f"podium_far_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(cluster.url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    yield cluster.url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture
async def make_split(postgres_url: str, far_url: str) -> AsyncIterator[Callable[..., Any]]:
    stack: list[Any] = []

    async def make(home_far: bool = False, **extra: Any) -> Api:
        settings = parse(
            {
                "server": {"read_rate_per_s": 0, "page_cache_s": 0},
                "workers": {"idle_sleep_s": 0.005, "lease_s": 1.0},
                "store": {
                    "url": far_url if home_far else postgres_url,
                    "shards": [postgres_url, far_url],
                    # Small pools: the machine's Postgres is shared with the other workers.
                    "pool_size": 4,
                    "read_pool_size": 2,
                },
                **extra,
            }
        )
        return await started_api(settings, stack)

    yield make
    await close_all(stack)


def split_of(api: Api) -> SplitStore:
    store = api.backends.store
    assert isinstance(store, SplitStore)
    return store


def ids_on(store: SplitStore, url: str, prefix: str, n: int) -> list[str]:
    """The first ``n`` ids ``prefix0``, ``prefix1``, ... that the map puts on ``url``."""
    out = [f"{prefix}{i}" for i in range(10_000) if store.url_of(f"{prefix}{i}") == url]
    return out[:n]


async def rows(url: str, sql: str, *args: object) -> list[asyncpg.Record]:
    """A direct look at one database, past podium."""
    conn = await asyncpg.connect(url)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


async def assert_whole(url: str) -> None:
    """Every player's part on this database is whole: each week tally is the sum of the
    player's stored results (a part is one transaction: result, tallies and outbox)."""
    found = await rows(
        url,
        "SELECT r.player_id, SUM(r.points) AS s, MAX(t.total) AS t FROM results r "
        "LEFT JOIN tallies t ON t.player_id = r.player_id AND t.board = 'week' "
        "GROUP BY r.player_id",
    )
    assert found, "nothing recorded here"
    assert all(r["s"] == r["t"] for r in found), [dict(r) for r in found]


async def retry(api: Api, match: str, results: list[tuple[str, int]]) -> httpx.Response:
    t0 = time.monotonic()
    while (r := await api.submit(match, results)).status_code == 503:
        assert time.monotonic() - t0 < 15, r.text
        await asyncio.sleep(0.1)
    return r


def totals(r: httpx.Response) -> dict[str, int]:
    assert r.status_code == 200, r.text
    return {p["playerId"]: p["totals"]["week"] for p in r.json()["players"]}


async def test_a_match_across_databases_writes_each_part_where_its_player_lives(
    make_split: Callable[..., Any], postgres_url: str, far_url: str
) -> None:
    api: Api = await make_split()
    store = split_of(api)
    [a], [b] = ids_on(store, postgres_url, "a", 1), ids_on(store, far_url, "b", 1)
    [m_far] = ids_on(store, far_url, "m", 1)
    assert totals(await api.submit(m_far, [(a, 10), (b, 20)])) == {a: 10, b: 20}
    assert totals(await api.submit(m_far, [(a, 10), (b, 20)])) == {a: 10, b: 20}  # a retry
    # each part on its player's database, the claim on the match id's
    assert [r["player_id"] for r in await rows(postgres_url, "SELECT player_id FROM results")] == [
        a
    ]
    assert [r["player_id"] for r in await rows(far_url, "SELECT player_id FROM results")] == [b]
    claims = await rows(far_url, "SELECT key_id FROM matches WHERE match_id = $1", m_far)
    assert len(claims) == 1
    await api.settle()
    page = await api.page()
    assert {e["playerId"]: e["points"] for e in page["entries"]} == {a: 10, b: 20}


async def test_a_database_down_is_503_and_the_retry_completes_the_rest_once(
    make_split: Callable[..., Any],
    postgres_url: str,
    far_url: str,
    cluster: PgCluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api: Api = await make_split()
    store = split_of(api)
    [a, a2], [b] = ids_on(store, postgres_url, "a", 2), ids_on(store, far_url, "b", 1)
    m1, m2, m3, m4 = ids_on(store, postgres_url, "m", 4)
    assert totals(await api.submit(m1, [(a, 1), (b, 2)])) == {a: 1, b: 2}

    # The far database goes down after the match's read, as the parts are written: the home
    # part commits, the far one cannot, and the answer is a 503.
    far = store.router.db(far_url)
    record = far.record

    async def crash_then_record(*args: Any, **kwargs: Any) -> Any:
        await asyncio.to_thread(cluster.stop)
        return await record(*args, **kwargs)

    monkeypatch.setattr(far, "record", crash_then_record)
    r = await api.submit(m2, [(a, 10), (b, 20)])
    assert r.status_code == 503, r.text
    assert int(r.headers["retry-after"]) >= 1
    monkeypatch.setattr(far, "record", record)
    await assert_whole(postgres_url)
    assert len(await rows(postgres_url, "SELECT 1 FROM results WHERE match_id = $1", m2)) == 1

    # While it is down: a match with a player there is 503 and records nothing (its claim,
    # made on the home database, stays this key's: a release must first see that no
    # database holds a result of the match); one wholly on the home is recorded.
    r = await api.submit(m3, [(a2, 5), (b, 5)])
    assert r.status_code == 503, r.text
    assert await rows(postgres_url, "SELECT 1 FROM results WHERE match_id = $1", m3) == []
    assert len(await rows(postgres_url, "SELECT 1 FROM matches WHERE match_id = $1", m3)) <= 1
    assert totals(await api.submit(m4, [(a2, 7)])) == {a2: 7}

    # Back up: the retry of the match completes the far part, and the home part returns its
    # stored totals; a second retry changes nothing.
    await asyncio.to_thread(cluster.start)
    assert totals(await retry(api, m2, [(a, 10), (b, 20)])) == {a: 11, b: 22}
    assert totals(await retry(api, m2, [(a, 10), (b, 20)])) == {a: 11, b: 22}
    assert totals(await retry(api, m3, [(a2, 5), (b, 5)])) == {a2: 12, b: 27}
    for url in (postgres_url, far_url):
        await assert_whole(url)
    await api.settle()
    page = await api.page()
    assert {e["playerId"]: e["points"] for e in page["entries"]} == {a: 11, a2: 12, b: 27}


async def test_a_refused_match_writes_nothing_on_any_database(
    make_split: Callable[..., Any], postgres_url: str, far_url: str
) -> None:
    api: Api = await make_split(modes=[{"name": "default", "max_results_per_player_per_hour": 2}])
    store = split_of(api)
    [a], [b] = ids_on(store, postgres_url, "a", 1), ids_on(store, far_url, "b", 1)
    for i in range(2):
        assert (await api.submit(f"x{i}", [(b, 1)])).status_code == 200
    # b (far) is over the cap: the whole match is refused before its first write, a's part
    # (home) included, and its claim is released, wherever the match id maps to.
    for m in (*ids_on(store, postgres_url, "m", 1), *ids_on(store, far_url, "m", 1)):
        r = await api.submit(m, [(a, 10), (b, 10)])
        assert r.status_code == 429, r.text
        for url in (postgres_url, far_url):
            assert await rows(url, "SELECT 1 FROM results WHERE match_id = $1", m) == []
            assert await rows(url, "SELECT 1 FROM matches WHERE match_id = $1", m) == []
    assert await rows(postgres_url, "SELECT 1 FROM results") == []


async def test_the_home_down_keeps_recording_for_keys_already_verified(
    make_split: Callable[..., Any], postgres_url: str, far_url: str, cluster: PgCluster
) -> None:
    """The home (keys, the map, freezes) on the private cluster, stopped: a game server whose
    key was verified in the last key_cache_s goes on recording players of the other
    database; a key not verified yet, and a freeze, are 503 until the home is back."""
    api: Api = await make_split(home_far=True)
    store = split_of(api)
    a, b = ids_on(store, postgres_url, "a", 2)
    m1, m2, m3 = ids_on(store, postgres_url, "m", 3)
    assert totals(await api.submit(m1, [(a, 3)])) == {a: 3}  # the key is verified, and kept
    _, other = await api.podium.keys.create("gs-2", ["default"], False)
    admin = api.auth(api.admin_key)
    assert (await api.client.get("/v1/admin/keys", headers=admin)).status_code == 200
    week = api.podium.boards.window(api.podium.boards.board("week"), None).id
    await asyncio.to_thread(cluster.stop)
    await asyncio.sleep(1.2)  # past the service's one-second copy of the frozen windows
    assert totals(await api.submit(m2, [(a, 4), (b, 5)])) == {a: 7, b: 5}
    r = await api.submit(m3, [(a, 1)], key=other)
    assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1, r.text
    r = await api.client.post(f"/v1/admin/boards/week/windows/{week}/freeze", headers=admin)
    assert r.status_code == 503, r.text  # the admin's key is known; the freeze is the home's
    await asyncio.to_thread(cluster.start)
    assert totals(await retry(api, m3, [(a, 1)])) == {a: 8}  # with the other key, once back
    await api.settle()
    page = await api.page()
    assert {e["playerId"]: e["points"] for e in page["entries"]} == {a: 8, b: 5}
