"""Degrading in the seed's order, on real parts broken by the tests. What a caller sees with
each part down, and where each is tested:

| what is down | what a caller sees | tested by |
| --- | --- | --- |
| the store (a shard database) | writes for its players get 503 with Retry-After; reads keep
  answering from the index | ``test_a_store_database_down_refuses_its_writes_and_reads_go_on``;
  the retry that completes the match once, ``test_split.py::test_a_database_down_is_503_and_``
  ``the_retry_completes_the_rest_once`` |
| Redis | results accepted and held in the log; the top page from the last read of it, with
  its true asOf; a rank read 503, never a wrong rank |
  ``test_redis_down_accepts_results_serves_the_last_top_page_and_refuses_ranks`` (one shard,
  and four shards whose top comes from the aggregator's snapshot); the boards catching up
  after, ``test_outages.py`` |
| one Redis Cluster shard (its primary and replica) | the same: results accepted; the top page
  from the last snapshot, then the last read, with its true asOf; every rank read right or
  503 | ``test_a_cluster_shard_down_never_answers_a_wrong_rank`` |
| NATS | results accepted, the outbox holds them; ranks stop moving; when NATS is back they
  drain in each player's order | ``test_nats_down_holds_results_in_the_outbox_and_drains_``
  ``them_in_order`` |
| the aggregator | the standby takes over; meanwhile reads count on the shards |
  ``test_aggregators_gone_reads_count_on_the_shards_until_the_standby_takes_over``; a kill -9
  of the active one under load, ``test_fleet.py`` |
| everything but one API process's store | ``/readyz`` says which part is down, by name |
  ``test_readyz_names_every_part_that_is_down`` |

A table row is folded over lines to fit; ``benchmarks/chaos.py`` breaks them all under load.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import asyncpg
import httpx
import pytest

from podium.config.settings import parse
from podium.domain.sharding import shard_of
from podium.domain.snapshot import SNAPSHOT_TTL_S
from podium.service.ranks import snapshot as ranking
from podium.store.split import SplitStore
from podium.workers import aggregator
from tests.conftest import REDIS_URL
from tests.integration.conftest import Api, close_all, started_api
from tests.integration.fleet import Fleet
from tests.nats_cluster import Cluster, need_binary
from tests.pg_cluster import PgCluster
from tests.ports import free_ports
from tests.proxy import Proxy
from tests.redis_cluster import RedisCluster, replica_of, shards_on, start_cluster

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


async def test_connections_that_died_while_redis_was_away_fail_no_command_once_it_is_back(
    redis_prefix: str, redis_proxy: Proxy
) -> None:
    """Pooled connections cut while Redis was away (a restart, a failover, a link cut) each
    failed their next command, once Redis was back: a reader's 503 (seen once in CI in the
    test above, its rank read after the board caught up). Each is now tried once more on a
    fresh connection (``index/redis/index.py``, ``stale_retry``)."""
    from podium.index.redis.index import RedisIndex

    index = RedisIndex.from_url(f"redis://127.0.0.1:{redis_proxy.port}/0", redis_prefix)
    try:
        await asyncio.gather(*(index.client.ping() for _ in range(8)))  # eight pooled, open
        await redis_proxy.cut()  # each of them dropped
        await redis_proxy.restore()
        for _ in range(8):  # each taken from the pool in turn: none fails
            await index.ping()
    finally:
        await index.client.aclose()


def _epoch(rfc3339: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


# -- NATS down --------------------------------------------------------------------------------


@pytest.fixture
async def nats_node(tmp_path: Path) -> AsyncIterator[Cluster]:
    """One private nats-server (JetStream on), killed and started again by the test on the
    same port and store directory."""
    node = Cluster(need_binary(), tmp_path / "nats", size=1)
    node.start(0)
    try:
        await node.ready()
        yield node
    finally:
        node.stop()


def _nats_settings(postgres_url: str, index: str, prefix: str, node: Cluster) -> Any:
    return parse(
        {
            "server": {"read_rate_per_s": 0, "page_cache_s": 0},
            "workers": {"idle_sleep_s": 0.005, "lease_s": 1.0},
            "store": {"url": postgres_url},
            "index": {"url": index, "prefix": prefix},
            "log": {"url": node.url, "stream": f"degrade-{secrets.token_hex(3)}", "partitions": 2},
        }
    )


@pytest.mark.slow
async def test_nats_down_holds_results_in_the_outbox_and_drains_them_in_order(
    postgres_url: str, redis_prefix: str, nats_node: Cluster
) -> None:
    stack: list[Any] = []
    settings = _nats_settings(postgres_url, REDIS_URL, redis_prefix, nats_node)
    api = await started_api(settings, stack)
    try:
        assert totals(await api.submit("m0", [("a", 1), ("b", 2)])) == {"a": 1, "b": 2}
        await until(lambda: _board_is(api, {"a": 1, "b": 2}), "the board before the outage")

        nats_node.kill(0)
        # Results are accepted: each player's totals grow match by match, in the outbox.
        want = {"a": 1, "b": 2}
        for i in range(1, 6):
            r = await api.submit(f"m{i}", [("a", 10), ("b", 3)])
            want = {"a": want["a"] + 10, "b": want["b"] + 3}
            assert totals(r) == want
        pending, _ = await api.backends.store.outbox_backlog(time.time())
        # five matches, two players, three boards: all held (and maybe rows of m0 whose
        # publish was in flight when NATS died: sent again once it is back)
        assert pending >= 5 * 2 * 3
        # Ranks stop moving: the board is as it was, while the relay cannot publish.
        await asyncio.sleep(1.0)
        assert points(await api.client.get("/v1/boards/week")) == {"a": 1, "b": 2}
        ready = await api.client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["down"] == ["log"], ready.text

        nats_node.start(0)
        await until(lambda: _board_is(api, want), "the held results on the board", 90)
        pending, _ = await api.backends.store.outbox_backlog(time.time())
        assert pending == 0
        # Drained in each player's order: along the stream, every player's total on every
        # board only grows (they are sums of positive points), ending at the store's.
        last = await _stream_in_player_order(nats_node, settings.log.stream)
        assert {p: t for (b, p), t in last.items() if b == "week"} == want
    finally:
        await close_all(stack)


async def _stream_in_player_order(node: Cluster, stream: str) -> dict[tuple[str, str], int]:
    import nats

    nc = await nats.connect(servers=node.urls)
    try:
        js = nc.jetstream()
        info = await js.stream_info(stream)
        last: dict[tuple[str, str], int] = {}
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            e = json.loads((await js.get_msg(stream, seq)).data)
            if e["type"] != "total":
                continue
            k = (e["board"], e["playerId"])
            assert e["total"] >= last.get(k, 0), f"{k}: {e['total']} after {last[k]}"
            last[k] = e["total"]
        return last
    finally:
        await nc.close()


# -- everything but the store down: /readyz names each part ---------------------------------


@pytest.mark.slow
async def test_readyz_names_every_part_that_is_down(
    postgres_url: str, redis_prefix: str, redis_proxy: Proxy, nats_node: Cluster
) -> None:
    stack: list[Any] = []
    index = f"redis://127.0.0.1:{redis_proxy.port}/0"
    api = await started_api(_nats_settings(postgres_url, index, redis_prefix, nats_node), stack)
    try:
        r = await until(lambda: _ready(api), "ready")
        assert r.json() == {"status": "ready"}
        nats_node.kill(0)
        r = await until(lambda: _down(api, ["log"]), "the log named")
        assert r.status_code == 200, r.text  # results are still accepted: in service
        assert r.json()["status"] == "degraded"
        assert "the change log is unavailable" in r.json()["detail"]
        await redis_proxy.cut()
        r = await until(lambda: _down(api, ["index", "log"]), "the index and the log named")
        assert r.status_code == 503
        assert r.headers["content-type"].startswith("application/problem+json")
        assert int(r.headers["retry-after"]) >= 1
        assert r.json()["detail"] == "the rank index and the change log are unavailable"
        assert "127.0.0.1" not in r.text  # names, never addresses
        assert totals(await api.submit("m1", [("a", 4)])) == {"a": 4}  # still accepted
        await redis_proxy.restore()
        nats_node.start(0)
        r = await until(lambda: _ready(api), "ready again", 90)
        assert r.json() == {"status": "ready"}
    finally:
        await close_all(stack)


async def _ready(api: Api) -> httpx.Response | None:
    r = await api.client.get("/readyz")
    return r if r.status_code == 200 and r.json() == {"status": "ready"} else None


async def _down(api: Api, parts: list[str]) -> httpx.Response | None:
    r = await api.client.get("/readyz")
    return r if r.json().get("down") == parts else None


# -- the aggregator: both gone, then the standby ---------------------------------------------


def _fleet_config(tmp: Path, store: str, prefix: str) -> Path:
    path = tmp / "podium.toml"
    path.write_text(
        f'[store]\nurl = "{store}"\npool_size = 4\nread_pool_size = 3\n'
        f'[index]\nurl = "{REDIS_URL}"\nprefix = "{prefix}"\nshards = 4\n'
        "[server]\nread_rate_per_s = 0\npage_cache_s = 0\n"
        # an exact top of 3: the ranks below it are estimates while a snapshot stands
        '[[boards]]\nname = "all"\nwindow = "all"\nexact_top = 3\n'
    )
    return path


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_aggregators_gone_reads_count_on_the_shards_until_the_standby_takes_over(
    tmp_path: Path, postgres_url: str, redis_prefix: str
) -> None:
    fleet = Fleet(_fleet_config(tmp_path, postgres_url, redis_prefix), tmp_path)
    try:
        key = fleet.podium("keys", "create", "--name", "gs", "--modes", "default")
        asyncio.run(_aggregators(fleet, key.strip().splitlines()[-1], redis_prefix))
    except BaseException:
        fleet.stop_all()
        fleet.dump()
        raise
    fleet.stop_all()


async def _aggregators(fleet: Fleet, key: str, prefix: str) -> None:
    import redis.asyncio as aioredis

    (port,) = free_ports(1)
    fleet.start("api", "serve", "--no-workers", port=port)
    fleet.start("updater", "worker", "--roles", "updater")
    fleet.start("agg1", "worker", "--roles", "aggregator")
    await fleet.worker_ready("agg1")
    r = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    lease, snap = f"{prefix}:{{agg}}:lease", f"{prefix}:{{agg}}:snap:all:all"
    try:
        first = await until(lambda: r.get(lease), "the first aggregator's lease")
        fleet.start("agg2", "worker", "--roles", "aggregator")
        await fleet.api_ready("api")
        await fleet.worker_ready("updater")
        await fleet.worker_ready("agg2")
        want = {f"p{i}": 10 * (i + 1) for i in range(12)}  # p11 first, p0 last (12th)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            for i, (p, pts) in enumerate(want.items()):
                body = {
                    "mode": "default",
                    "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "durationSeconds": 60,
                    "results": [{"playerId": p, "points": pts}],
                }
                got = await c.post(
                    f"/v1/matches/m{i}/results",
                    json=body,
                    headers={"Authorization": f"Bearer {key}"},
                )
                assert got.status_code == 200, got.text
            # With the aggregator's snapshot, the last player's rank is an estimate.
            est = await until(lambda: _rank_if(c, "p0", exact=False), "an estimate", 60)
            assert est["rankLow"] <= 12 <= est["rankHigh"]

            fleet.kill9("agg1")  # the active one
            fleet.procs["agg2"].popen.send_signal(signal.SIGSTOP)  # and the standby, frozen
            try:
                # Until the last snapshot expires, reads answer from it; after, they count on
                # the shards: exact, and right, never a 503.
                await until(lambda: _gone(r, snap), "the last snapshot to expire", 60)
                for p, rank in (("p0", 12), ("p5", 7), ("p11", 1)):
                    got = await c.get(f"/v1/boards/all/players/{p}")
                    assert got.status_code == 200, got.text
                    assert got.json()["exact"] is True and got.json()["rank"] == rank, got.text
                page = await c.get("/v1/boards/all", params={"limit": 3})
                assert [e["playerId"] for e in page.json()["entries"]] == ["p11", "p10", "p9"]
            finally:
                fleet.procs["agg2"].popen.send_signal(signal.SIGCONT)
            # The standby takes the lease over and publishes: estimates again.
            second = await until(lambda: _other(r, lease, first), "the standby's lease", 60)
            assert second != first
            est = await until(lambda: _rank_if(c, "p0", exact=False), "a new estimate", 60)
            assert est["rankLow"] <= 12 <= est["rankHigh"]
    finally:
        await r.aclose()


async def _rank_if(c: httpx.AsyncClient, player: str, *, exact: bool) -> dict[str, Any] | None:
    got = await c.get(f"/v1/boards/all/players/{player}")
    if got.status_code == 200 and got.json()["exact"] is exact:
        return got.json()  # type: ignore[no-any-return]
    return None


async def _gone(r: Any, key: str) -> bool:
    return not await r.exists(key)


async def _other(r: Any, lease: str, first: str) -> str | None:
    token = await r.get(lease)
    return token if token is not None and token != first else None


# -- one Redis Cluster shard down --------------------------------------------------------------


@pytest.fixture
def partial_cluster() -> Iterator[RedisCluster]:
    """A private 3+3 cluster whose nodes answer for the slots they hold while other slots
    have no node (``cluster-require-full-coverage no``): one shard down, not all."""
    try:
        c = start_cluster(cluster_require_full_coverage="no")
    except FileNotFoundError as e:
        pytest.skip(str(e))
    yield c
    c.stop()


@pytest.mark.slow
@pytest.mark.timeout(480)
async def test_a_cluster_shard_down_never_answers_a_wrong_rank(
    postgres_url: str, partial_cluster: RedisCluster
) -> None:
    stack: list[Any] = []
    settings = parse(
        {
            "server": {"read_rate_per_s": 0, "page_cache_s": 0},
            "workers": {"idle_sleep_s": 0.005, "lease_s": 1.0},
            "store": {"url": postgres_url},
            "index": {"url": partial_cluster.url, "prefix": "d", "shards": 16, "watch_s": 0.5},
        }
    )
    api = await started_api(settings, stack)
    try:
        players = [f"p{i:02d}" for i in range(40)]
        truth = {p: 10 * (i + 1) for i, p in enumerate(players)}  # p39 first
        for i in range(0, 40, 2):
            a, b = players[i], players[i + 1]
            assert totals(await api.submit(f"m{i}", [(a, truth[a]), (b, truth[b])]))
        await api.settle()
        rank = {p: 40 - i for i, p in enumerate(players)}
        await until(lambda: _ranks_are(api, rank, truth), "every rank on the board")
        seen = await until(lambda: _top_page(api), "a top page")

        victim = (await asyncio.to_thread(partial_cluster.primaries))[0]
        replica = await asyncio.to_thread(replica_of, victim)
        down = await asyncio.to_thread(shards_on, partial_cluster, victim, 16)
        await asyncio.to_thread(partial_cluster.kill, replica)
        await asyncio.to_thread(partial_cluster.kill, victim)
        killed_at = time.time()
        on_down = [p for p in players if shard_of(p, 16) in down]
        assert on_down, "no player on the shards that went down"
        # Results are accepted all the same (the store is the record).
        assert totals(await api.submit("late", [("z", 5)])) == {"z": 5}
        # Until no snapshot from before the kill can be standing any more: every rank read
        # is right or a 503, and the top page is the last one known, with its own asOf.
        refused: Counter[str] = Counter()
        out = aggregator.PART_MAX_AGE_S + SNAPSHOT_TTL_S + ranking.HOLD_S + 5
        for p in itertools.cycle(players):
            if time.time() - killed_at > out:
                break
            r = await api.client.get(f"/v1/boards/week/players/{p}")
            if r.status_code == 503:
                refused[p] += 1
            else:
                assert r.status_code == 200, r.text
                assert (r.json()["rank"], r.json()["points"]) == (rank[p], truth[p]), r.text
            # between every two rank reads (a refused one may take a while: the cluster
            # client tries the node again), so that the page is asked well within the
            # minute its last read is told for
            page = await api.client.get("/v1/boards/week", params={"limit": 10})
            assert page.status_code == 200, page.text
            assert page.json()["entries"] == seen["entries"]
            assert _epoch(page.json()["asOf"]) <= killed_at + 0.1
            await asyncio.sleep(0.05)
        assert refused, "no rank read found the shard down"
        # Now a rank is counted on every shard, and one is down: never a partial count, for
        # a player on a shard that is down or on one that is up (a few of each: a refused
        # read may take seconds, the cluster client trying the node again).
        up = [p for p in players if p not in on_down]
        for p in on_down[:2] + up[:2]:
            r = await api.client.get(f"/v1/boards/week/players/{p}")
            assert r.status_code == 503, r.text

        # Back, empty (nothing persisted): the menders refill the shards from the store.
        for port in (victim, replica):
            await asyncio.to_thread(partial_cluster.restart, port)
        await asyncio.to_thread(partial_cluster.wait_ok, DEADLINE_S)
        await until(lambda: _ranks_are(api, rank, truth), "every rank back", 120)
    finally:
        await close_all(stack)


async def _ranks_are(api: Api, rank: dict[str, int], truth: dict[str, int]) -> bool:
    for p in rank:
        r = await api.client.get(f"/v1/boards/week/players/{p}")
        if r.status_code != 200 or (r.json()["rank"], r.json()["points"]) != (rank[p], truth[p]):
            return False
    return True


async def _top_page(api: Api) -> dict[str, Any] | None:
    r = await api.client.get("/v1/boards/week", params={"limit": 10})
    return r.json() if r.status_code == 200 else None  # type: ignore[no-any-return]
