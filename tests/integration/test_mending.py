"""The index mends itself, with nobody running a command, on real parts: a ``podium serve``
(API only) and a ``podium worker`` (relay and updater; no reconciler, so that its walk is
not what mends the board) on the machine's Postgres, and a private Redis as the index,
broken on purpose, on a board of 20,000 players:

- emptied (``FLUSHALL``) under a steady stream of results: the board is rebuilt from the
  store, reads meanwhile answer 503 and never a board that lacks players, and then the board
  equals the store;
- its primary killed (``kill -9``) and its replica promoted, the replica lacking for certain
  the members written in the seconds before the kill (the test takes them from it, which is
  what a lagging replica lacks): the log's last seconds are applied again and the board
  equals the store. The index's URL points at a TCP proxy the test switches from the primary
  to the replica, as a Sentinel-aware client or a virtual IP would. Run on both change logs:
  the store's outbox and a JetStream stream, which the replay reads by time;
- the same through Sentinel (``redis+sentinel://``: a primary, a replica, three Sentinels):
  the primary killed, Sentinel promotes the replica, which lacks the last writes; the
  processes find the new primary through Sentinel, with no restart;
- the same on a Redis Cluster of three primaries with a replica each, 16 index shards: one
  primary killed, the cluster promotes its replica, which lacks the last writes of the
  shards it took over.

With ``index.failover_replay_s = 0`` the failover tests fail: the Sentinel and the cluster
ones run so as a case of their own (``not-replayed``), the proxy's was run so by hand (on
JetStream: 189 of 20,320 players short of the store 30 s after the promotion). The Sentinel
one also runs with the failover noticed later than ``failover_replay_s`` after it
(``noticed-late``: the worker paused that long): the replay reaches back from the time the
promoted replica's marker was last confirmed, not from when the change was seen, which a
replay of the last ``failover_replay_s`` seconds before the change is noticed would miss.

The 20,000 players are recorded once for the module, through the API of a ``podium serve``
on the in-process index, into a database that each test copies (``Databases.seal``): a
test's index is filled from its copy when its fleet starts (a Redis without generation
markers is rebuilt from the store), and its game starts from what the seed's answers said.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
import signal
import time
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import redis.asyncio as aioredis

from podium.config.topology import sentinel_address
from podium.domain.sharding import shard_of, shard_tag
from podium.index.redis.cluster import cluster_client
from podium.index.redis.sentinel import sentinel_client
from podium.store.postgres import PostgresStore
from tests.conftest import OwnDatabases, need
from tests.integration.fleet import Fleet
from tests.kafka_cluster import delete_topic, need_kafka, topic_name
from tests.nats_cluster import delete_stream, need_nats, stream_name
from tests.pg_databases import Databases
from tests.ports import free_ports
from tests.proxy import Proxy
from tests.redis_cluster import RedisCluster, cli, replica_of, shards_on, start_cluster
from tests.redis_sentinel import Sentinels, start_sentinels
from tests.redis_server import RedisServer, start_server

T = TypeVar("T")

SEED = 20_000  # players on the board before it is broken: far more than a walk mends at once
PER_MATCH = 100  # the most a match takes
BOARD = "all"
ZKEY = "t:{b:all:all}:z"  # the board's sorted set (index/redis/keys.py, prefix "t", no shards)
SHARDS = 16  # on the private Redis Cluster
# From the failover (or the flush) until the board must equal the store. Each replay here
# requeues all 20,000 seeded players (REPLAY_S below), and on a 2-core machine with a load
# near 9 the outbox's took longer than 30 s to be applied: a deadline, not a speed.
MEND_S = 90.0
# index.failover_replay_s (0 makes the failover tests fail): longer than the whole module,
# seed included, so that every failover's replay requeues all 20,000 seeded players, as a
# replay after a busy minute does (one transaction a player once made that longer than
# MEND_S, and the last writes stayed off the board meanwhile).
REPLAY_S = 3600
FAILOVERS = 'podium_index_failovers_total{shard="0"}'  # the worker's, by shard
# index.failover_replay_s of the noticed-late case: far less than the worker is paused over
# the failover, and more than the seconds before the kill whose writes the replica lacks
LATE_REPLAY_S = 10
REPLAYED = "podium_replayed_changes_total"
FLOWING = 20  # matches acknowledged after the stream began before a test breaks anything


def _config(
    tmp: Path,
    store_url: str,
    index_url: str,
    shards: int = 1,
    replay_s: int = REPLAY_S,
    log: tuple[str, str] | None = None,
) -> Path:
    """The fleet's settings; with ``log`` (a NATS URL and a stream name, or a Kafka URL and a
    topic name), the change log is that JetStream stream or Kafka topic rather than the
    store's outbox, and a replay reads it by time."""
    path = tmp / "podium.toml"
    path.write_text(
        f'[store]\nurl = "{store_url}"\n'
        f'[index]\nurl = "{index_url}"\nprefix = "t"\nwatch_s = 0.5\nshards = {shards}\n'
        f"failover_replay_s = {replay_s}\n"
        + ("" if log is None else _log_table(*log))
        + "[server]\nread_rate_per_s = 0\n"
        '[[boards]]\nname = "all"\nwindow = "all"\n'
    )
    return path


def _log_table(url: str, name: str) -> str:
    if url.startswith("kafka://"):  # topics and a group named after the test's topic
        return (
            f'[log]\nurl = "{url}"\n[log.kafka]\ntopic = "{name}"\n'
            f'events_topic = "{name}-events"\ngroup = "{name}-updaters"\n'
        )
    return f'[log]\nurl = "{url}"\nstream = "{name}"\n'


class Game:
    """Sends matches and keeps what each acknowledgment said, and reads the board."""

    def __init__(
        self, client: httpx.AsyncClient, key: str, prefix: str, acked: dict[str, int]
    ) -> None:
        self.c = client
        self.key = key
        self.prefix = prefix  # of match ids: the seed's and a test's never meet
        self.ids = itertools.count()
        self.acked = acked  # player -> the total an answer gave
        self.last_acked: dict[str, float] = {}  # player -> when
        self.matches = 0  # acknowledged
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
        path = f"/v1/matches/{self.prefix}{next(self.ids)}/results"
        auth = {"Authorization": f"Bearer {self.key}"}
        r = await self.c.post(path, json=body, headers=auth)
        for _ in range(20):  # a 503 (the store busy on a loaded machine): the same body again,
            if r.status_code != 503:  # as a game server does
                break
            await asyncio.sleep(0.25)
            r = await self.c.post(path, json=body, headers=auth)
        if r.status_code != 200:
            self.refused += 1
            return
        for row in r.json()["players"]:
            self.acked[row["playerId"]] = row["totals"][BOARD]
            self.last_acked[row["playerId"]] = time.monotonic()
        self.matches += 1

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

    async def flowing(self) -> None:
        """Until ``FLOWING`` more matches were acknowledged: results arrive, and some were
        acknowledged in the last moments before what the test does next."""
        goal = self.matches + FLOWING
        deadline = time.monotonic() + 60
        while self.matches < goal:
            assert time.monotonic() < deadline, f"results did not flow: {self.refused} refused"
            await asyncio.sleep(0.05)

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


def _run(work: Coroutine[Any, Any, T]) -> T:
    """``work`` on an event loop of its own, in a thread: a module's fixture may be set up
    while a test's loop runs."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


@dataclass(frozen=True)
class Seeded:
    url: str  # the sealed database: copied, never used
    key: str  # a game server's key, in it
    acked: dict[str, int]  # what the seed's answers said


@pytest.fixture(scope="module")
def seeded(
    postgres_server: Databases, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Seeded]:
    """The 20,000 players, recorded once through the API (on the in-process index, whose
    updater empties the outbox as it goes) into a database each test copies."""
    need(postgres_server.admin_url, "PostgreSQL")
    tmp = tmp_path_factory.mktemp("seed")
    [url] = _run(postgres_server.take(1))
    fleet = Fleet(_config(tmp, url, "memory://"), tmp)
    key = fleet.podium("keys", "create", "--name", "gs", "--modes", "default")
    key = key.strip().splitlines()[-1]
    (port,) = free_ports(1)
    fleet.start("seed", "serve", port=port)

    async def seed() -> dict[str, int]:
        await fleet.api_ready("seed")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
            game = Game(c, key, "seed", {})
            await game.seed()
            return game.acked

    try:
        acked = _run(seed())
    except BaseException:
        fleet.dump()
        raise
    finally:
        fleet.stop_all()
    _run(postgres_server.seal(url))
    yield Seeded(url, key, acked)


@dataclass
class Served:
    fleet: Fleet
    game: Game
    client: httpx.AsyncClient
    store_url: str
    metrics_port: int  # the worker's /metrics

    @property
    def worker_log(self) -> Path:
        return self.fleet.procs["worker"].log

    async def logged(self, text: str, after: int, deadline: float) -> None:
        """Until the worker logged ``text`` more than ``after`` times, by ``deadline``."""
        while self.worker_log.read_text(errors="replace").count(text) <= after:
            if time.monotonic() > deadline:
                self.fleet.dump()
                raise AssertionError(f"the worker did not log {text!r} in time")
            await asyncio.sleep(0.1)

    def count(self, text: str) -> int:
        return self.worker_log.read_text(errors="replace").count(text)

    async def counted(self, sample: str) -> float:
        """One sample of the worker's /metrics (``name{labels}``); 0 where not yet counted."""
        return (await self.samples()).get(sample, 0.0)

    async def samples(self) -> dict[str, float]:
        """Every sample of the worker's /metrics, by ``name{labels}``."""
        async with httpx.AsyncClient(timeout=10) as c:
            text = (await c.get(f"http://127.0.0.1:{self.metrics_port}/metrics")).text
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out


@pytest.fixture
async def served(tmp_path: Path, seeded: Seeded, pg_databases: OwnDatabases) -> AsyncIterator[Any]:
    """The fleet on a copy of the seeded database, started by the test body once the
    index's URL is known, and stopped afterwards."""
    started: list[Served] = []

    async def start(
        index_url: str,
        shards: int = 1,
        replay_s: int = REPLAY_S,
        log: tuple[str, str] | None = None,
    ) -> Served:
        [store_url] = await pg_databases.copies_of(seeded.url)
        config = _config(tmp_path, store_url, index_url, shards, replay_s, log)
        fleet = Fleet(config, tmp_path)
        port, metrics = free_ports(2)
        fleet.start("api", "serve", "--no-workers", port=port)
        fleet.start("worker", "worker", "--roles", "relay,updater", "--metrics-port", str(metrics))
        client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10)
        game = Game(client, seeded.key, "m", dict(seeded.acked))
        s = Served(fleet, game, client, store_url, metrics)
        started.append(s)
        await fleet.api_ready("api")
        await fleet.worker_ready("worker")
        # The new index is filled from the store by whichever process starts first, which
        # says so once it is marked: a rebuild the test causes is the next one.
        deadline = time.monotonic() + 60
        logs = [p.log for p in fleet.procs.values()]
        while not any("lost its data" in log.read_text(errors="replace") for log in logs):
            assert time.monotonic() < deadline, "the new index was not filled from the store"
            await asyncio.sleep(0.2)
        assert len(await _indexed(index_url)) >= SEED
        return s

    yield start
    for s in started:
        await s.client.aclose()
        s.fleet.stop_all()


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
    """The board as the index holds it: one sorted set, or on a cluster 16 shards' parts."""
    if url.startswith("redis+cluster://"):
        c = cluster_client(url)
        out: dict[str, int] = {}
        try:
            for n in range(SHARDS):
                key = f"t:{shard_tag(n)}:all:all:z"
                out |= {m: int(s) for m, s in await c.zrange(key, 0, -1, withscores=True)}
        finally:
            await c.aclose()
        return out
    if url.startswith("redis+sentinel://"):  # the primary Sentinel names now
        at = sentinel_address(url)
        r: Any = sentinel_client(at.sentinels, at.service)
    else:
        r = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        return {m: int(s) for m, s in await r.zrange(ZKEY, 0, -1, withscores=True)}
    finally:
        await r.aclose()


async def _equal_by(s: Served, index_url: str, deadline: float) -> str:
    """Until the index holds every acknowledged total and equals the store; what still
    differed at ``deadline``, else ''."""
    why = ""
    while time.monotonic() < deadline:
        stored, indexed = await _stored(s.store_url), await _indexed(index_url)
        acked = s.game.acked
        missing = [p for p, t in acked.items() if indexed.get(p) != t and stored[p] == t]
        differ = [p for p in stored if stored[p] != indexed.get(p)]
        if not missing and not differ and len(indexed) == len(stored):
            return ""
        why = f"{len(differ)} players differ from the store, {len(missing)} acknowledged totals"
        why += f" not on the board; {len(indexed)} on the board, {len(stored)} stored"
        await asyncio.sleep(0.5)
    return why


async def _still_lost(s: Served, index_url: str, taken: list[str], deadline: float) -> str:
    """With the replay off: once the board holds every acknowledged total but those of the
    players ``taken`` from the promoted replica, what still differs from the store (by then
    nothing running could bring the rest back: no replay, no reconciler); at ``deadline``,
    what differed then. A taken player who scored again since is on the board again, as a
    result's absolute total puts it there; the others are the lost writes."""
    out = set(taken)
    while True:
        stored, indexed = await _stored(s.store_url), await _indexed(index_url)
        differ = [p for p in stored if stored[p] != indexed.get(p)]
        behind = [
            p
            for p, t in s.game.acked.items()
            if p not in out and indexed.get(p) != t and stored[p] == t
        ]
        if not behind or time.monotonic() >= deadline:
            return f"{len(differ)} players differ from the store" if differ else ""
        await asyncio.sleep(0.5)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    try:
        server = start_server()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    yield server
    server.stop()


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_a_redis_that_came_back_empty_is_rebuilt_and_never_read_empty(
    served: Any, redis_server: RedisServer
) -> None:
    s = await served(redis_server.url)
    stop_stream, stop_reads = asyncio.Event(), asyncio.Event()
    streaming = asyncio.create_task(s.game.stream(stop_stream))
    reading = asyncio.create_task(s.game.read(stop_reads))
    await s.game.flowing()
    rebuilt = s.count("lost its data")  # the start's rebuild may have been the worker's
    redis_server.cli("flushall")  # a Redis restarted without its data, at once
    deadline = time.monotonic() + MEND_S
    # Results keep arriving, and reads keep asking, until the board was rebuilt.
    await s.logged("lost its data", rebuilt, deadline)
    await s.game.flowing()
    stop_stream.set()
    await streaming
    why = await _equal_by(s, redis_server.url, deadline)
    stop_reads.set()
    await reading
    if why or s.game.bad_reads:
        s.fleet.dump()
    assert not why, why
    assert not s.game.bad_reads, s.game.bad_reads[:5]


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


@pytest.fixture
async def change_log(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, str] | None]:
    """The change log a test's fleet runs on: the store's outbox (None), a JetStream
    stream of the test's own on the machine's NATS, or topics of its own on the machine's
    Kafka; deleted afterwards."""
    if request.param == "outbox":
        yield None
        return
    if request.param == "kafka":
        bootstrap, topic = need_kafka(), topic_name()
        try:
            yield f"kafka://{bootstrap}", topic
        finally:
            for t in (topic, f"{topic}-events"):
                await asyncio.to_thread(delete_topic, bootstrap, t)
        return
    url, name = need_nats(), stream_name()
    try:
        yield url, name
    finally:
        await delete_stream([url], name)


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("change_log", ["outbox", "nats", "kafka"], indirect=True)
async def test_a_promoted_replica_that_lacks_the_last_writes_is_mended_by_a_replay(
    served: Any,
    primary_and_replica: tuple[RedisServer, RedisServer],
    change_log: tuple[str, str] | None,
) -> None:
    """The replay reads the log the fleet runs on: the outbox's changes kept for it, or
    the JetStream stream by time (an ephemeral consumer over every partition)."""
    primary, replica = primary_and_replica
    proxy = Proxy("127.0.0.1", primary.port)
    await proxy.start()
    try:
        s = await served(f"redis://127.0.0.1:{proxy.port}/0", log=change_log)
        stop = asyncio.Event()
        streaming = asyncio.create_task(s.game.stream(stop))
        await s.game.flowing()
        cut = time.monotonic()
        primary.kill9()
        await proxy.cut()  # every connection through it dies with the primary
        # What a lagging replica lacks, for certain: every member written in the last
        # seconds before the kill.
        recent = [p for p, t in s.game.last_acked.items() if cut - t < 2.0]
        assert recent, "no result was acknowledged in the seconds before the kill"
        replica.cli("zrem", ZKEY, *recent)
        replica.cli("replicaof", "no", "one")
        proxy.target = ("127.0.0.1", replica.port)  # the failover: the address moves
        await proxy.restore()
        deadline = time.monotonic() + MEND_S
        await s.logged("the Redis node behind the index changed", 0, deadline)
        await s.game.flowing()  # results still arrive after the replay
        stop.set()
        await streaming
        why = await _equal_by(s, replica.url, deadline)
        if why:
            s.fleet.dump()
        assert not why, why
    finally:
        await proxy.cut()


@pytest.fixture
def sentinels() -> Iterator[Sentinels]:
    try:
        out = start_sentinels(replicas=1, sentinels=3)
    except FileNotFoundError as e:
        pytest.skip(str(e))
    yield out
    out.stop()


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("replay_s", "change_log"),
    [(REPLAY_S, "outbox"), (0, "outbox"), (LATE_REPLAY_S, "outbox"), (REPLAY_S, "kafka")],
    ids=["replayed", "not-replayed", "noticed-late", "replayed-kafka"],
    indirect=["change_log"],
)
async def test_a_sentinel_failover_that_lost_the_last_writes_is_mended_by_a_replay(
    served: Any, sentinels: Sentinels, replay_s: int, change_log: tuple[str, str] | None
) -> None:
    """Both processes reach the index through Sentinel (``redis+sentinel://``) and follow its
    promotion with no restart. With the replay off, the lost writes stay lost: the check
    that the replay is what mends them. Noticed late (the worker paused until the lost
    writes are older than ``failover_replay_s``), they are mended all the same: the replay
    starts before the time the promoted replica's marker was last confirmed. On Kafka the
    replay seeks every partition by time (``offsets_for_times``) rather than reading the
    outbox's kept changes."""
    s = await served(sentinels.url(), replay_s=replay_s, log=change_log)
    stop = asyncio.Event()
    streaming = asyncio.create_task(s.game.stream(stop))
    await s.game.flowing()
    old, replica = sentinels.primary, sentinels.replicas[0]
    # The start's rebuild may have been the worker's, and counted as shard 0's.
    failovers, replayed = await s.counted(FAILOVERS), await s.counted(REPLAYED)
    # The worker (updater and mender) is paused over the kill, so that what the replica
    # lacks is certain: the test takes it from the replica before anyone could write to it
    # or look. Results keep arriving at the API (into the store) meanwhile.
    worker = s.fleet.procs["worker"].popen
    worker.send_signal(signal.SIGSTOP)
    try:
        cut = time.monotonic()
        await asyncio.to_thread(old.kill9)
        recent = [p for p, t in s.game.last_acked.items() if cut - t < 2.0]
        assert recent, "no result was acknowledged in the seconds before the kill"
        await asyncio.to_thread(replica.cli, "zrem", ZKEY, *recent)
        if replay_s == LATE_REPLAY_S:
            # Noticed late: the worker sleeps on until the promotion is long done and the
            # lost writes are older than failover_replay_s.
            await asyncio.to_thread(sentinels.wait_promoted, old.port)
            while time.monotonic() - cut < LATE_REPLAY_S + 3:
                await asyncio.sleep(0.2)
    finally:
        worker.send_signal(signal.SIGCONT)
    promoted = await asyncio.to_thread(sentinels.wait_promoted, old.port)
    assert promoted is replica
    promoted_s = time.monotonic() - cut
    deadline = time.monotonic() + MEND_S  # from the promotion (or the worker's waking)
    await s.logged("the Redis node behind the index changed", 0, deadline)
    await s.game.flowing()  # results still reach the board, through the new primary
    stop.set()
    await streaming
    if replay_s == 0:  # no wait for a mend that cannot come: the board caught up is enough
        why = await _still_lost(s, promoted.url, recent, deadline)
    else:
        why = await _equal_by(s, promoted.url, deadline)
    assert await s.counted(FAILOVERS) >= failovers + 1  # seen by the one worker
    if replay_s == 0:
        assert "not replaying" in s.worker_log.read_text()
        assert await s.counted(REPLAYED) == replayed
        assert why, "the lost writes came back with the replay off: the test shows nothing"
        print(f"with index.failover_replay_s = 0, once the board caught up: {why}")
        return
    if why:
        s.fleet.dump()
    assert not why, why
    # What was replayed and why, in the log and in the counter alike.
    log = s.worker_log.read_text()
    said = re.findall(r"node behind the index changed \(.*?\): .*?, so (\d+) changes", log)
    assert len(said) == 1, said
    assert await s.counted(REPLAYED) - replayed == int(said[0]) > 0
    print(
        f"promoted {promoted_s:.1f} s after the kill"
        + (" (the worker woken then)" if replay_s == LATE_REPLAY_S else "")
        + f"; {len(recent)} players taken from the replica; the board equal to the store "
        f"{time.monotonic() - deadline + MEND_S:.1f} s after the promotion"
    )


@pytest.fixture
def cluster() -> Iterator[RedisCluster]:
    try:
        c = start_cluster()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    yield c
    c.stop()


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("replay_s", [REPLAY_S, 0], ids=["replayed", "not-replayed"])
async def test_a_cluster_replica_promoted_without_the_last_writes_is_mended(
    served: Any, cluster: RedisCluster, replay_s: int
) -> None:
    """With the replay off, the lost writes of the victim's shards stay lost: the check that
    the replay is what mends them."""
    s = await served(cluster.url, SHARDS, replay_s=replay_s)
    stop = asyncio.Event()
    streaming = asyncio.create_task(s.game.stream(stop))
    await s.game.flowing()
    before = await s.samples()  # the start's rebuild may have been the worker's
    # The worker (updater and mender) is paused over the failover, so that what the
    # promoted replica lacks is certain: the test takes it from it before anyone could
    # look, as the proxy's cut does above. Results keep arriving at the API (into the
    # store) meanwhile; the cluster's own calls run in a thread so that they do.
    worker = s.fleet.procs["worker"].popen
    worker.send_signal(signal.SIGSTOP)
    try:
        cut = time.monotonic()
        victim = (await asyncio.to_thread(cluster.primaries))[0]
        replica = await asyncio.to_thread(replica_of, victim)
        await asyncio.to_thread(cluster.kill, victim)
        await asyncio.to_thread(cluster.wait_ok, replicas=False)  # the replica took over
        deadline = time.monotonic() + MEND_S
        moved = await asyncio.to_thread(shards_on, cluster, replica, SHARDS)
        recent = [p for p, t in s.game.last_acked.items() if cut - t < 2.0]
        lost = [p for p in recent if shard_of(p, SHARDS) in moved]
        assert lost, "no result on the victim's shards in the seconds before the kill"
        for p in lost:
            cli(replica, "zrem", f"t:{shard_tag(shard_of(p, SHARDS))}:all:all:z", p)
    finally:
        worker.send_signal(signal.SIGCONT)
    await s.logged("the Redis node behind shard", 0, deadline)
    await s.game.flowing()  # results still arrive after the replay
    stop.set()
    await streaming
    if replay_s == 0:  # no wait for a mend that cannot come: the board caught up is enough
        why = await _still_lost(s, cluster.url, lost, deadline)
    else:
        why = await _equal_by(s, cluster.url, deadline)
    # The mender named the victim's shards as those whose node changed, and no other, and
    # counted a failover of each of them, and of no other.
    log = s.worker_log.read_text()
    lines = re.findall(r"node behind (shard .*?) changed", log)
    named = {int(n.removeprefix("shard ")) for line in lines for n in line.split(", ")}
    assert named == moved, lines
    after = await s.samples()

    def failovers(counts: dict[str, float], n: int) -> float:
        return counts.get(f'podium_index_failovers_total{{shard="{n}"}}', 0.0)

    counted = {n for n in range(SHARDS) if failovers(after, n) > failovers(before, n)}
    assert counted == moved, (counted, moved)
    replayed = after.get(REPLAYED, 0.0) - before.get(REPLAYED, 0.0)
    if replay_s == 0:
        assert "not replaying" in log
        assert replayed == 0
        assert why, "the lost writes came back with the replay off: the test shows nothing"
        print(f"with index.failover_replay_s = 0, once the board caught up: {why}")
        return
    if why:
        s.fleet.dump()
    assert not why, why
    # What was replayed and why, in the log and in the counter alike.
    said = re.findall(r"node behind shard .*? changed \(.*?\): .*?, so (\d+) changes", log)
    assert sum(int(n) for n in said) == replayed > 0, said
