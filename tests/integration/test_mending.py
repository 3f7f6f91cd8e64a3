"""The index mends itself, with nobody running a command, on real parts: a ``podium serve``
(API only) and a ``podium worker`` (relay and updater; no reconciler, so that its walk is
not what mends the board) on the machine's Postgres, and a private ``redis-server`` as the
index, broken on purpose:

- emptied (``FLUSHALL``) under a steady stream of results, on a board of 20,000 players: the
  board is rebuilt from the store, reads meanwhile answer 503 and never a board that lacks
  players, and then the board equals the store;
- its primary killed (``kill -9``) and its replica promoted, the replica lacking for certain
  the members written in the seconds before the kill (the test takes them from it, which is
  what a lagging replica lacks): the log's last seconds are applied again and the board
  equals the store. With ``index.failover_replay_s = 0`` this test fails (run by hand).

The index's URL points at a TCP proxy the test switches from the primary to the replica,
as a Sentinel-aware client or a virtual IP would.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from podium.store.postgres import PostgresStore
from tests.integration.fleet import Fleet
from tests.ports import free_ports
from tests.proxy import Proxy
from tests.redis_server import RedisServer, start_server

SEED = 20_000  # players on the board before it is broken: far more than a walk mends at once
PER_MATCH = 100
BOARD = "all"
ZKEY = "t:{b:all:all}:z"  # the board's sorted set (index/keys.py, prefix "t", no shards)
MEND_S = 30.0
REPLAY_S = 60  # index.failover_replay_s; 0 makes the failover test fail


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    try:
        server = start_server()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    yield server
    server.stop()


def _config(tmp: Path, store_url: str, index_url: str) -> Path:
    path = tmp / "podium.toml"
    path.write_text(
        f'[store]\nurl = "{store_url}"\n'
        f'[index]\nurl = "{index_url}"\nprefix = "t"\nwatch_s = 0.5\n'
        f"failover_replay_s = {REPLAY_S}\n"
        "[server]\nread_rate_per_s = 0\n"
        '[[boards]]\nname = "all"\nwindow = "all"\n'
    )
    return path


class Game:
    """Sends matches and keeps what each acknowledgment said, and reads the board."""

    def __init__(self, client: httpx.AsyncClient, key: str) -> None:
        self.c = client
        self.key = key
        self.ids = itertools.count()
        self.acked: dict[str, int] = {}  # player -> the total an answer gave
        self.last_acked: dict[str, float] = {}  # player -> when
        self.bad_reads: list[str] = []
        self.refused = 0

    async def match(self, players: list[str], rng: random.Random) -> None:
        now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        body = {
            "mode": "default",
            "endedAt": now,
            "durationSeconds": 60,
            "results": [{"playerId": p, "points": rng.randint(1, 100)} for p in players],
        }
        r = await self.c.post(
            f"/v1/matches/m{next(self.ids)}/results",
            json=body,
            headers={"Authorization": f"Bearer {self.key}"},
        )
        if r.status_code != 200:
            self.refused += 1
            return
        for row in r.json()["players"]:
            self.acked[row["playerId"]] = row["totals"][BOARD]
            self.last_acked[row["playerId"]] = time.monotonic()

    async def seed(self) -> None:
        rng = random.Random(1)
        players = [f"p{i}" for i in range(SEED)]
        groups = [players[i : i + PER_MATCH] for i in range(0, SEED, PER_MATCH)]
        sem = asyncio.Semaphore(6)

        async def one(g: list[str]) -> None:
            async with sem:
                await self.match(g, rng)

        await asyncio.gather(*(one(g) for g in groups))
        assert self.refused == 0

    async def stream(self, stop: asyncio.Event) -> None:
        """Matches of 10 players, half of them new, until ``stop``."""
        rng = random.Random(2)
        new = itertools.count(SEED)
        while not stop.is_set():
            players = {f"p{rng.randrange(SEED)}" for _ in range(5)}
            players |= {f"p{next(new)}" for _ in range(5)}
            try:
                await self.match(sorted(players), rng)
            except httpx.TransportError:
                self.refused += 1
            await asyncio.sleep(0.01)

    async def read(self, stop: asyncio.Event) -> None:
        """Reads of the board's top and of seeded players until ``stop``: a 503 is honest,
        a 200 that lacks players is not."""
        rng = random.Random(3)
        while not stop.is_set():
            r = await self.c.get(f"/v1/boards/{BOARD}", params={"limit": 100})
            if r.status_code == 200 and len(r.json()["entries"]) < 100:
                self.bad_reads.append(f"a page of {len(r.json()['entries'])} entries")
            elif r.status_code not in (200, 503):
                self.bad_reads.append(f"a page answered {r.status_code}: {r.text}")
            p = f"p{rng.randrange(SEED)}"
            r = await self.c.get(f"/v1/boards/{BOARD}/players/{p}")
            if r.status_code not in (200, 503):
                self.bad_reads.append(f"seeded player {p} answered {r.status_code}")
            await asyncio.sleep(0.02)


async def _stored(store_url: str) -> dict[str, int]:
    store = PostgresStore.from_url(store_url)
    out: dict[str, int] = {}
    try:
        async for batch in store.standings(BOARD, "all"):
            out |= {s.player_id: s.tally.total for s in batch}
    finally:
        await store.close()
    return out


async def _indexed(url: str) -> dict[str, int]:
    r = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        return {m: int(s) for m, s in await r.zrange(ZKEY, 0, -1, withscores=True)}
    finally:
        await r.aclose()


async def _equal_within(store_url: str, index_url: str, game: Game, seconds: float) -> str:
    """Until the index holds every acknowledged total and equals the store; what still
    differed at the deadline, else ''."""
    deadline = time.monotonic() + seconds
    why = ""
    while time.monotonic() < deadline:
        stored, indexed = await _stored(store_url), await _indexed(index_url)
        missing = [p for p, t in game.acked.items() if indexed.get(p) != t and stored[p] == t]
        differ = [p for p in stored if stored[p] != indexed.get(p)]
        if not missing and not differ and len(indexed) == len(stored):
            return ""
        why = f"{len(differ)} players differ from the store, {len(missing)} acknowledged totals"
        why += f" not on the board; {len(indexed)} on the board, {len(stored)} stored"
        await asyncio.sleep(0.5)
    return why


@pytest.fixture
async def served(tmp_path: Path, postgres_url: str) -> AsyncIterator[Any]:
    """The fleet, started by the test body once the index's URL is known."""
    fleets: list[Fleet] = []

    async def start(index_url: str) -> tuple[Fleet, Game, httpx.AsyncClient]:
        cfg = _config(tmp_path, postgres_url, index_url)
        fleet = Fleet(cfg, tmp_path)
        fleets.append(fleet)
        key = fleet.podium("keys", "create", "--name", "gs", "--modes", "default")
        (port,) = free_ports(1)
        fleet.start("api", "serve", "--no-workers", port=port)
        fleet.start("worker", "worker", "--roles", "relay,updater")
        await fleet.api_ready("api")
        await fleet.worker_ready("worker")
        client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10)
        return fleet, Game(client, key.strip().splitlines()[-1]), client

    yield start
    for fleet in fleets:
        fleet.stop_all()


async def _seeded(game: Game, index_url: str) -> None:
    await game.seed()
    deadline = time.monotonic() + 60
    while len(await _indexed(index_url)) < SEED:
        assert time.monotonic() < deadline, "the seed did not reach the board"
        await asyncio.sleep(0.2)


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_a_redis_that_came_back_empty_is_rebuilt_and_never_read_empty(
    served: Any, redis_server: RedisServer, postgres_url: str
) -> None:
    fleet, game, client = await served(redis_server.url)
    try:
        await _seeded(game, redis_server.url)
        stop_stream, stop_reads = asyncio.Event(), asyncio.Event()
        streaming = asyncio.create_task(game.stream(stop_stream))
        reading = asyncio.create_task(game.read(stop_reads))
        await asyncio.sleep(2)
        redis_server.cli("flushall")  # a Redis restarted without its data, at once
        await asyncio.sleep(4)
        stop_stream.set()
        await streaming
        why = await _equal_within(postgres_url, redis_server.url, game, MEND_S)
        stop_reads.set()
        await reading
        if why or game.bad_reads:
            fleet.dump()
        assert not why, why
        assert not game.bad_reads, game.bad_reads[:5]
        log = (fleet.tmp / "worker-1.log").read_text()
        assert "lost its data" in log
    finally:
        await client.aclose()


@pytest.fixture
def primary_and_replica() -> Iterator[tuple[RedisServer, RedisServer]]:
    try:
        primary = start_server()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    replica = start_server(replica_of=primary)
    yield primary, replica
    replica.stop()
    primary.stop()


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_a_promoted_replica_that_lacks_the_last_writes_is_mended_by_a_replay(
    served: Any, primary_and_replica: tuple[RedisServer, RedisServer], postgres_url: str
) -> None:
    primary, replica = primary_and_replica
    proxy = Proxy("127.0.0.1", primary.port)
    await proxy.start()
    fleet, game, client = await served(f"redis://127.0.0.1:{proxy.port}/0")
    try:
        await _seeded(game, primary.url)
        stop = asyncio.Event()
        streaming = asyncio.create_task(game.stream(stop))
        await asyncio.sleep(3)
        cut = time.monotonic()
        primary.kill9()
        await proxy.cut()  # every connection through it dies with the primary
        # What a lagging replica lacks, for certain: every member written in the last
        # seconds before the kill.
        recent = [p for p, t in game.last_acked.items() if cut - t < 2.0]
        assert recent, "no result was acknowledged in the seconds before the kill"
        replica.cli("zrem", ZKEY, *recent)
        replica.cli("replicaof", "no", "one")
        proxy.target = ("127.0.0.1", replica.port)  # the failover: the address moves
        await proxy.restore()
        await asyncio.sleep(3)
        stop.set()
        await streaming
        why = await _equal_within(postgres_url, replica.url, game, MEND_S)
        if why:
            fleet.dump()
        assert not why, why
        assert "the Redis node behind the index changed" in (fleet.tmp / "worker-1.log").read_text()
    finally:
        await client.aclose()
        await proxy.cut()
