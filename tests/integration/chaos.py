"""The chaos run: a whole fleet on loopback, on private servers it breaks, under a steady
load of results and reads from game servers that retry; at the end every result counted.

The fleet: two API processes, two updaters, two relays, the aggregator and its standby, the
freezer; the store on two private Postgres servers (the home is also the first shard), the
index in 16 shards on a private 3+3 Redis Cluster, the log on a private NATS cluster of 3
(a stream of 3 replicas). The load: ``senders`` game servers (``podium.client``, whose
``submit`` retries timeouts, 503s and lost connections with the same body; after its tries
run out the game server sends it again to the other API process) and ``readers`` players
reading the top page and their own rank.

In one run, a break at a time, each one after results have flowed again since the last:
``kill -9`` of an API process, of a relay and of an updater (each started again); a Redis
primary killed while its replica lags (the updaters are stopped over the kill, and the
members written in the last seconds before it are taken from the replica before it is
promoted: exactly what a lagging replica lacks); a store database stopped (immediately,
connections dropped) and started again; a NATS node stopped and started again.

What it measures (``Figures``): results sent, acknowledged, retried; lost (acknowledged but
not in the store, or a board short of it) and doubled (a total above the sum of its results);
the longest time from an acknowledgment to the board showing it; reads by status; whether
every board equals the store once the log drained. ``benchmarks/chaos.py`` runs it at length
and prints the figures; ``tests/integration/test_chaos.py`` runs it short, in CI.

With ``log="kafka"`` the log is a private Kafka cluster of 3 instead (topics of 3 replicas,
``min.insync.replicas`` 2), and the last break kills the node leading the changes topic's
partition 0 with SIGKILL, then starts it again.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import signal
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from podium import bootstrap
from podium.client import AsyncClient
from podium.client.errors import PodiumClientError, ProblemError
from podium.client.retry import RetryPolicy, retryable
from podium.config import settings as config
from podium.domain.models import Target
from podium.domain.sharding import shard_of, shard_tag
from podium.errors import Unavailable
from podium.ports import BoardKey
from tests.integration.fleet import Fleet
from tests.kafka_cluster import Cluster as KafkaCluster
from tests.kafka_cluster import kafka_libs
from tests.kafka_cluster import wait_for as wait_for_kafka
from tests.nats_cluster import Cluster, need_binary
from tests.pg_cluster import PgCluster
from tests.ports import free_ports
from tests.redis_cluster import RedisCluster, cli, replica_of, shards_on, start_cluster

SHARDS = 16
PREFIX = "chaos"
BOARD = "all"
LAG_S = 2.0  # what the promoted replica lacks: the writes of this many seconds before the kill
FLOW = 15  # results acknowledged after a break before the next one
DEADLINE_S = 180.0  # for any one condition; generous: the machine is shared


@dataclass
class Figures:
    sent: int = 0  # matches
    results_sent: int = 0
    acknowledged: int = 0  # results
    retried: int = 0  # tries after the first, in the client and across API processes
    lost: int = 0
    doubled: int = 0
    longest_to_board_s: float = 0.0
    longest_at_s: float = 0.0  # when (s into the run) that result was acknowledged
    reads: Counter[str] = field(default_factory=Counter)  # by status ("200", "503", "none")
    boards_equal_store: bool = False
    breaks: list[str] = field(default_factory=list)  # what was broken when (s into the run)
    replica_lacked: int = 0  # members the promoted replica lacked
    taken_off: list[str] = field(default_factory=list)  # those players
    # Each player whose board total is not the store's at the end, said in full: what a
    # failure needs to be explained (when their results came, whether the failover took them)
    differs: list[str] = field(default_factory=list)
    mender_lines: int = 0  # "the Redis node behind shard ... changed": a replay began
    exited: list[str] = field(default_factory=list)  # podium processes not running at the end
    exit_tails: dict[str, str] = field(default_factory=dict)  # their logs' last lines: why
    seconds: float = 0.0
    logs: str = ""  # where the processes' logs are kept (not removed: a failure's evidence)

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.doubled == 0 and self.boards_equal_store and not self.exited

    def lines(self) -> list[str]:
        reads = ", ".join(f"{k}: {v}" for k, v in sorted(self.reads.items()))
        return [
            f"matches sent {self.sent} ({self.results_sent} results), results acknowledged "
            f"{self.acknowledged}, tries retried {self.retried}",
            f"lost {self.lost}, doubled {self.doubled}",
            f"longest from an acknowledgment to the board: {self.longest_to_board_s:.2f} s "
            f"(acknowledged {self.longest_at_s:.0f} s into the run)",
            f"reads by status: {reads}",
            f"every board equals the store: {'yes' if self.boards_equal_store else 'NO'}",
            *(f"  {line}" for line in self.differs),
            f"the promoted replica lacked {self.replica_lacked} members; menders that replayed "
            f"the log for it: {self.mender_lines}",
            f"podium processes that exited: {', '.join(self.exited) or 'none'}",
            f"run {self.seconds:.0f} s; breaks: " + ("; ".join(self.breaks) or "none"),
            *(f"{name} ended with:\n{tail}" for name, tail in self.exit_tails.items()),
            f"the processes' logs: {self.logs}",
        ]


def _config(tmp: Path, home: str, far: str, redis: str, log: str) -> Path:
    path = tmp / "podium.toml"
    if log.startswith("kafka://"):
        log_section = (
            f'[log]\nurl = "{log}"\npartitions = 4\n'
            '[log.kafka]\ntopic = "chaos-changes"\nevents_topic = "chaos-events"\n'
            'group = "chaos-updaters"\nreplication = 3\n'
        )
    else:
        log_section = f'[log]\nurl = "{log}"\nstream = "chaos"\npartitions = 4\nreplicas = 3\n'
    path.write_text(
        f'[store]\nurl = "{home}"\nshards = ["{home}", "{far}"]\n'
        "pool_size = 4\nread_pool_size = 3\n"
        f'[index]\nurl = "{redis}"\nprefix = "{PREFIX}"\nshards = {SHARDS}\n'
        "watch_s = 0.5\nfailover_replay_s = 120\n"
        f"{log_section}"
        "[server]\nread_rate_per_s = 0\n"
        "[workers]\nlease_s = 2.0\n"
        f'[[boards]]\nname = "{BOARD}"\nwindow = "all"\nexact_top = 10\n'
    )
    return path


class Parts:
    """The private servers: two Postgres, a Redis Cluster, a NATS (or Kafka) cluster; all
    stopped at the end, whatever happened."""

    def __init__(self, root: Path, log: str = "nats") -> None:
        self.root = root
        self.log = log
        self.pg: list[PgCluster] = []
        self.redis: RedisCluster | None = None
        self.nats: Cluster | None = None
        self.kafka: KafkaCluster | None = None

    async def start(self) -> None:
        for _ in range(2):
            pg = PgCluster()
            self.pg.append(pg)
            await asyncio.to_thread(pg.start)
        self.redis = await asyncio.to_thread(start_cluster)
        if self.log == "kafka":
            self.kafka = KafkaCluster(kafka_libs(), self.root / "kafka", 3)
            await asyncio.to_thread(self.kafka.format)
            for i in range(3):
                self.kafka.start(i)
            await asyncio.to_thread(self.kafka.ready)
            return
        self.nats = Cluster(need_binary(), self.root / "nats", 3)
        for i in range(3):
            self.nats.start(i)
        await self.nats.ready(timeout=DEADLINE_S)

    @property
    def log_url(self) -> str:
        if self.kafka is not None:
            return f"kafka://{self.kafka.bootstrap}"
        assert self.nats is not None
        return self.nats.url

    def stop(self) -> None:
        if self.kafka is not None:
            self.kafka.stop()
        if self.nats is not None:
            self.nats.stop()
        if self.redis is not None:
            self.redis.stop()
        for pg in self.pg:
            pg.destroy()


class Load:
    """Game servers sending matches, players reading, and a watch of each acknowledged
    total until the board shows it."""

    def __init__(self, urls: list[str], key: str, players: int, rate: float, seed: int) -> None:
        self.urls = urls
        self.key = key
        self.players = [f"p{i:04d}" for i in range(players)]
        self.rate = rate  # matches a second, all senders together
        self.rng = random.Random(seed)
        self.ids = itertools.count()
        self.figures = Figures()
        self.acked: dict[str, dict[str, int]] = {}  # match -> player -> points
        self.waiting: dict[str, tuple[int, float]] = {}  # player -> (total, acknowledged at)
        self.last_acked: dict[str, float] = {}  # player -> when a result of theirs was
        self.acked_at: dict[str, list[float]] = {}  # player -> when each result was
        self.stop = asyncio.Event()
        self.t0 = time.monotonic()  # the run's start (set by the scenario)

    async def _sleep(self, s: float) -> None:
        self.figures.retried += 1  # the client sleeps only before a retry
        await asyncio.sleep(s)

    async def sender(self, n: int, senders: int) -> None:
        policy = RetryPolicy(attempts=4, initial=0.2, max_backoff=2.0)
        clients = [
            AsyncClient(u, self.key, timeout=10, retry=policy, sleep=self._sleep) for u in self.urls
        ]
        try:
            turn = n
            while not self.stop.is_set():
                match = f"m{next(self.ids)}"
                pair = self.rng.sample(self.players, 2)
                results = [(p, self.rng.randint(1, 100)) for p in pair]
                ended = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                self.figures.sent += 1
                self.figures.results_sent += len(results)
                while True:  # a game server sends a match until it is acknowledged
                    c = clients[turn % len(clients)]
                    try:
                        got = await c.submit(match, results, duration_seconds=60, ended_at=ended)
                        break
                    except PodiumClientError as e:
                        if not retryable(e):
                            raise
                        self.figures.retried += 1
                        turn += 1  # the other API process
                        await asyncio.sleep(0.2)
                now = time.monotonic()
                self.acked[match] = dict(results)
                self.figures.acknowledged += len(results)
                for p, _ in results:
                    self.waiting[p] = (got.totals(p)[BOARD], now)
                    self.last_acked[p] = now
                    self.acked_at.setdefault(p, []).append(now)
                await asyncio.sleep(self.rng.expovariate(self.rate / senders))
        finally:
            for c in clients:
                await c.aclose()

    async def reader(self) -> None:
        clients = [AsyncClient(u, timeout=5) for u in self.urls]
        try:
            while not self.stop.is_set():
                c = self.rng.choice(clients)
                try:
                    if self.rng.random() < 0.5:
                        await c.page(BOARD, limit=10)
                    else:
                        await c.rank(BOARD, self.rng.choice(self.players))
                    self.figures.reads["200"] += 1
                except ProblemError as e:
                    self.figures.reads[str(e.status)] += 1
                except PodiumClientError:
                    self.figures.reads["no answer"] += 1
                await asyncio.sleep(0.05)
        finally:
            for c in clients:
                await c.aclose()

    async def watch(self, backends: bootstrap.Backends) -> None:
        """Each acknowledged total until the board shows it (read from the index itself, so
        that the API's own caches do not hide when it got there)."""
        assert backends.split is not None
        key = BoardKey(BOARD, "all")
        spec = backends.settings.board(BOARD)
        assert spec is not None
        while not self.stop.is_set() or self.waiting:
            players = list(self.waiting)
            if players:
                try:
                    scores = await backends.split.scores(key, players)
                except Unavailable:
                    scores = []
                now = time.monotonic()
                for p, s in zip(players, scores, strict=False):
                    total, at = self.waiting.get(p, (0, now))
                    if s is not None and spec.codec.points(s) >= total:
                        if now - at > self.figures.longest_to_board_s:
                            self.figures.longest_to_board_s = now - at
                            self.figures.longest_at_s = at - self.t0
                        if self.waiting.get(p, (None, 0.0))[0] == total:
                            del self.waiting[p]
            await asyncio.sleep(0.2)

    async def flowed(self, n: int = FLOW) -> None:
        goal = self.figures.acknowledged + 2 * n
        deadline = time.monotonic() + DEADLINE_S
        while self.figures.acknowledged < goal:
            assert time.monotonic() < deadline, "results stopped flowing"
            await asyncio.sleep(0.1)


async def run(
    seconds: float = 90.0,
    players: int = 500,
    rate: float = 10.0,
    senders: int = 4,
    readers: int = 2,
    breaks: bool = True,
    log: str = "nats",
) -> Figures:
    """The whole scenario; ``seconds``: how long the load runs at the least (the breaks
    are spread over it, each after results flowed again). Without ``breaks``, the same
    fleet and load with nothing broken: the reference."""
    root = Path(tempfile.mkdtemp(prefix="podium-chaos-"))
    parts = Parts(root, log)
    fleet: Fleet | None = None
    try:
        await parts.start()
        assert parts.redis is not None
        home, far = parts.pg[0], parts.pg[1]
        cfg = _config(root, home.url, far.url, parts.redis.url, parts.log_url)
        fleet = Fleet(cfg, root)
        await asyncio.to_thread(fleet.podium, "migrate")
        out = await asyncio.to_thread(
            fleet.podium, "keys", "create", "--name", "gs", "--modes", "default"
        )
        key = out.strip().splitlines()[-1]
        return await _scenario(fleet, parts, key, seconds, players, rate, senders, readers, breaks)
    except BaseException:
        if fleet is not None:
            fleet.stop_all()
            fleet.dump()
        raise
    finally:
        if fleet is not None:
            fleet.stop_all()
        parts.stop()


async def _scenario(
    fleet: Fleet,
    parts: Parts,
    key: str,
    seconds: float,
    players: int,
    rate: float,
    senders: int,
    readers: int,
    breaking: bool,
) -> Figures:
    assert parts.redis is not None
    t0 = time.monotonic()
    ports = free_ports(2)
    for i, port in enumerate(ports, 1):
        fleet.start(f"api{i}", "serve", "--no-workers", port=port)
    for name, roles in (
        ("updater1", "updater"),
        ("updater2", "updater"),
        ("relay1", "relay"),
        ("relay2", "relay"),
        ("agg1", "aggregator"),
        ("agg2", "aggregator"),
        ("freezer", "freezer"),
    ):
        fleet.start(name, "worker", "--roles", roles)
    # Nine processes starting at once beside six Redis, three NATS and two Postgres servers
    # on a shared machine: a start may take minutes.
    for i in (1, 2):
        await fleet.api_ready(f"api{i}", DEADLINE_S)
    for name in ("updater1", "updater2", "relay1", "relay2", "agg1", "agg2", "freezer"):
        await fleet.worker_ready(name, DEADLINE_S)

    load = Load([f"http://127.0.0.1:{p}" for p in ports], key, players, rate, seed=7)
    load.t0 = t0
    backends = bootstrap.build(config.load(str(fleet.cfg)))
    tasks = [asyncio.create_task(load.sender(n, senders)) for n in range(senders)]
    tasks += [asyncio.create_task(load.reader()) for _ in range(readers)]
    watching = asyncio.create_task(load.watch(backends))
    f = load.figures

    def mark(what: str) -> None:
        f.breaks.append(f"{what} at {time.monotonic() - t0:.0f} s")

    async def alive() -> None:
        for t in tasks:
            if t.done():
                t.result()  # a sender's failure, as raised

    breaks = 6
    gap = max(0.0, seconds / (breaks + 1))
    begun = time.monotonic()

    async def next_break(i: int) -> None:
        await load.flowed()
        await alive()
        wait = begun + gap * (i + 1) - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)

    try:
        if breaking:
            await _break_all(fleet, parts, load, next_break, mark)
        await load.flowed()
        while time.monotonic() - begun < seconds:
            await alive()
            await asyncio.sleep(0.5)
        load.stop.set()
        await asyncio.gather(*tasks)
        try:  # until every acknowledged total was seen on the board
            await asyncio.wait_for(asyncio.shield(watching), DEADLINE_S)
        except TimeoutError:
            f.breaks.append(f"{len(load.waiting)} acknowledged totals never seen on the board")
        await _count(load, backends)
        f.exited = [n for n, p in fleet.procs.items() if p.popen.poll() is not None]
        f.exit_tails = {
            n: "\n".join(fleet.procs[n].log.read_text(errors="replace").splitlines()[-25:])
            for n in f.exited
        }
        f.mender_lines = sum(
            log.read_text(errors="replace").count("the Redis node behind shard")
            for log in fleet.tmp.glob("*.log")
        )
    finally:
        load.stop.set()
        for t in (*tasks, watching):
            t.cancel()
        await asyncio.gather(*tasks, watching, return_exceptions=True)
        await backends.close()
    f.seconds = time.monotonic() - t0
    f.logs = str(fleet.tmp)
    return f


async def _break_all(fleet: Fleet, parts: Parts, load: Load, next_break: Any, mark: Any) -> None:
    """Each break in turn, each after results flowed again since the last."""
    assert parts.redis is not None
    f = load.figures
    await next_break(0)
    mark("kill -9 api1")
    fleet.kill9("api1")
    fleet.restart("api1")
    await next_break(1)
    mark("kill -9 relay1")
    fleet.kill9("relay1")
    fleet.restart("relay1")
    await next_break(2)
    mark("kill -9 updater1")
    fleet.kill9("updater1")
    fleet.restart("updater1")
    await next_break(3)
    mark("Redis primary killed, its replica lagging")
    f.replica_lacked, moved = await _redis_failover(fleet, parts.redis, load)
    f.breaks[-1] += f" ({f.replica_lacked} members of its {moved} shards missing)"
    await next_break(4)
    mark("store database restarted")
    await asyncio.to_thread(parts.pg[1].stop)
    await asyncio.sleep(3)
    await asyncio.to_thread(parts.pg[1].start)
    await next_break(5)
    if parts.kafka is not None:
        kafka = parts.kafka
        victim = await asyncio.to_thread(kafka.leader, "chaos-changes", 0)
        mark(f"Kafka node {victim + 1} (leading the changes' partition 0) killed and started")
        kafka.kill(victim)
        await asyncio.sleep(3)
        kafka.start(victim)
        await asyncio.to_thread(kafka.ready)
        await asyncio.to_thread(
            wait_for_kafka, lambda: kafka.brokers() == {1, 2, 3}, "the node back", DEADLINE_S
        )
        return
    assert parts.nats is not None
    mark("NATS node stopped and started")
    parts.nats.kill(1)
    await asyncio.sleep(3)
    parts.nats.start(1)


async def _redis_failover(fleet: Fleet, cluster: RedisCluster, load: Load) -> tuple[int, int]:
    """A primary killed; the replica it promotes lacks the writes of the last ``LAG_S``
    seconds on its shards, for certain: the updaters are stopped over the kill, and those
    members are taken from the replica before anyone reads it. The menders must notice the
    change of node and replay the log."""
    updaters = [fleet.procs[n].popen for n in ("updater1", "updater2")]
    for u in updaters:
        u.send_signal(signal.SIGSTOP)
    try:
        cut = time.monotonic()
        victim = (await asyncio.to_thread(cluster.primaries))[0]
        replica = await asyncio.to_thread(replica_of, victim)
        await asyncio.to_thread(cluster.kill, victim)
        await asyncio.to_thread(cluster.wait_ok, DEADLINE_S, False)
        moved = await asyncio.to_thread(shards_on, cluster, replica, SHARDS)
        recent = [p for p, at in load.last_acked.items() if cut - at < LAG_S]
        lost = [p for p in recent if shard_of(p, SHARDS) in moved]
        load.figures.taken_off = lost
        for p in lost:
            n = shard_of(p, SHARDS)
            await asyncio.to_thread(
                cli, replica, "zrem", f"{PREFIX}:{shard_tag(n)}:{BOARD}:all:z", p
            )
    finally:
        for u in updaters:
            u.send_signal(signal.SIGCONT)
    await asyncio.to_thread(cluster.restart, victim)  # back, as a replica
    return len(lost), len(moved)


async def _count(load: Load, backends: bootstrap.Backends) -> None:
    """Lost, doubled, and every board against the store, once the log drained."""
    f = load.figures
    store = backends.store
    expected: Counter[str] = Counter()
    for match, results in load.acked.items():
        found = await _retrying(lambda m=match, r=results: store.results_of(m, list(r)))
        f.lost += sum(1 for p in results if p not in found)
        for p, pts in results.items():
            expected[p] += pts
    target = [Target(BOARD, "all", 0)]
    stored = {}
    for p in load.players:
        stored[p] = (await _retrying(lambda p=p: store.totals(p, target))).get(BOARD, 0)
    f.doubled = sum(1 for p in load.players if stored[p] > expected[p])
    f.lost += sum(1 for p in load.players if stored[p] < expected[p])
    split = backends.split
    assert split is not None
    spec = backends.settings.board(BOARD)
    assert spec is not None
    key = BoardKey(BOARD, "all")
    deadline = time.monotonic() + DEADLINE_S
    while True:
        scores = await _retrying(lambda: split.scores(key, load.players))
        board = {
            p: spec.codec.points(s) if s is not None else 0
            for p, s in zip(load.players, scores, strict=True)
        }
        if board == stored or time.monotonic() > deadline:
            break
        await asyncio.sleep(1.0)
    f.boards_equal_store = board == stored
    for p in load.players:
        if board[p] != stored[p]:
            acked = sorted(at - load.t0 for at in load.acked_at.get(p, []))
            f.differs.append(
                f"{p}: board {board[p]}, store {stored[p]}, acknowledged {expected[p]}; "
                f"its results acknowledged at {', '.join(f'{a:.1f}' for a in acked)} s; "
                f"{'taken' if p in f.taken_off else 'not taken'} off the promoted replica"
            )
    # a board short of an acknowledged result, once the log drained, lost it too
    f.lost += sum(1 for p in load.players if board[p] < expected[p] <= stored[p])


async def _retrying(call: Any) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            return await call()
        except Unavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
