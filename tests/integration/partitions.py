"""A fleet spread over hosts of its own (``tests/netns.py``), a workload that keeps a history
of every request, and a checker that proves from that history and the final state that the
network's faults lost and doubled nothing.

The fleet: a private Postgres (host ``db``), a private Redis (``redis``), two API processes
(``api1``, ``api2``) and one worker with the relay and the updater (``worker``), each on a
host of its own, so that a link between any two can be cut; the change log is the store's
outbox or a private NATS JetStream server (``log``). Instead of the one Redis, the index may
be on a primary with a replica and Sentinels (``sentinel``), or on a Redis Cluster of three
primaries and three replicas, a node on each of the hosts ``rc1`` ... ``rc6``. The test's
own process is a host of the net too (``"client"``): the game servers and the players it
plays reach the API processes over the net, as from outside.

The workload: game servers sending matches with ``podium.client``'s own retry rules; when a
client's tries run out, the game server sends the same match to the other API process, until
it is acknowledged. Every try is in the history, with its send and answer times and what
came back (a status, or the transport's failure).

The checker, once every fault is healed:

- every acknowledged result is in the store, exactly once: each player's stored total is the
  sum of their acknowledged results (a total above it counted one twice, below it lost one);
- the board equals the store (the time it took after the heal is measured);
- no try was answered 500: a part cut off is a 503 or a transport failure, never an error
  the client cannot tell from a bug;
- no page older than documented, no exact rank false at every moment its answer may speak
  for, and no estimated rank whose interval misses the true rank at the moment of its
  answer (``rankcheck.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families

from podium.api.shedding import STALE_S
from podium.client import AsyncClient
from podium.client.errors import PodiumClientError
from podium.client.retry import RetryPolicy, retryable
from podium.config import settings as config
from podium.domain.models import Target
from podium.domain.snapshot import SNAPSHOT_TTL_S
from podium.index.redis.cluster import cluster_client
from podium.index.redis.keys import shard_tag
from podium.service.ranks.snapshot import HOLD_S
from podium.service.reads.reads import LAST_PAGE_S
from podium.store.postgres import PostgresStore
from tests.integration.fleet import Fleet
from tests.integration.rankcheck import (
    Commit,
    FalseRank,
    Ledger,
    RankRead,
    Row,
    false_ranks,
    outside_intervals,
)
from tests.netns import Host, Net
from tests.pg_cluster import PgCluster
from tests.proxy import Loop, Proxy
from tests.redis_cluster import NODE_TIMEOUT_MS, RedisCluster, start_cluster
from tests.redis_sentinel import Sentinels, start_sentinels
from tests.redis_server import RedisServer, start_server

BOARD = "all"
API_PORT = 8000
WORKER_METRICS_PORT = 9100  # every worker serves its /metrics there, on its own host
DEADLINE_S = 180.0  # for any one condition; generous: the machine is shared
PLAYERS = 200
# A held page is read at asOf, held page_cache_s from when its read ended: this much for the
# read itself (generous: the machine is shared).
PAGE_SLACK_S = 1.0
# A read in flight at the heal may still fail on its dead connection: Redis's socket timeout.
IN_FLIGHT_S = 5.0
# The test's own looks at the store, after the faults: patient on a busy machine (the
# fleet's processes keep ``[store] timeout_s``).
LOOK_TIMEOUT_S = 30.0
# How far behind the store the board may be when the fleet is whole: the README's "within a
# second of the match ending" (relay, log, updater), and as much again for a busy machine.
BOARD_FRESH_S = 2.0
# The longest a game server waits between two rounds of tries of a match nobody took.
ROUND_MAX_S = 5.0


@dataclass(frozen=True)
class Try:
    """One HTTP request of the workload, as the client saw it."""

    api: str
    path: str
    sent: float  # monotonic seconds
    answered: float
    outcome: str  # the status ("200", "503"), or the transport's failure ("ReadTimeout")


@dataclass(frozen=True)
class Match:
    """An acknowledged match: when it ended, when it was first sent (both wall clock, whole
    seconds and not), the boards it counted for as the answer said, and when it was first
    sent and how long it took to be acknowledged (monotonic)."""

    ended: int
    sent: float
    boards: frozenset[str]
    began: float
    took: float


def _rfc3339(t: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


@dataclass(frozen=True)
class Read:
    """A page answered 200, as the reader saw it."""

    api: str
    sent: float  # monotonic
    wall: float  # the wall clock when sent
    as_of: float  # what the page says
    age: int | None  # its ``Age`` header: served stale on purpose, saying how old
    # its entries (every one an exact rank), and when it was answered (monotonic): what an
    # old asOf is checked against, as the moment the page speaks for (the board marks)
    rows: tuple[Row, ...] = ()
    answered: float = 0.0


def is_submit(t: Try) -> bool:
    """A game server's try (a match's results), not a player's read."""
    return t.path.startswith("/v1/matches/")


@dataclass
class History:
    tries: list[Try] = field(default_factory=list)
    acked: dict[str, dict[str, int]] = field(default_factory=dict)  # match -> player -> pts
    sent: int = 0  # matches
    pages: list[Read] = field(default_factory=list)
    matches: dict[str, Match] = field(default_factory=dict)
    ranks: list[RankRead] = field(default_factory=list)  # answered 200

    def outcomes(self, since: float = 0.0, until: float = float("inf")) -> Counter[str]:
        return Counter(t.outcome for t in self.tries if since <= t.sent < until)


# A client's connections to one API process: httpx's default pool, kept open between tries.
POOL = 100


class _Released(httpx.AsyncByteStream):
    """A response's body that gives its place in the pool back when it is closed."""

    def __init__(self, inner: httpx.AsyncByteStream, release: Callable[[], None]) -> None:
        self.inner = inner
        self.release: Callable[[], None] | None = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            if self.release is not None:
                self.release, release = None, self.release
                release()


class Recorded(httpx.AsyncBaseTransport):
    """httpx's own transport, each request written into the history as it ends.

    At most ``pool`` requests are in httpx's pool at once (``pool`` connections, all kept
    open between tries); the others wait their turn here, in order, at most the request's
    pool timeout, and then fail as httpx's own ``PoolTimeout`` would. httpcore's pool looks
    over every connection for each request queued in it, each time a request starts or
    ends: a thousand tries queued there (an open-loop workload while the API answers
    slowly) took the test's whole process, and with it the proxies of every link the fleet
    runs on (docs/faults.md, the slow and lossy network)."""

    def __init__(
        self,
        api: str,
        history: History,
        pool: int = POOL,
        inner: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.api = api
        self.history = history
        self.inner = inner or httpx.AsyncHTTPTransport(
            limits=httpx.Limits(max_connections=pool, max_keepalive_connections=pool)
        )
        self._turns = asyncio.Semaphore(pool)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        sent = time.monotonic()
        try:
            got = await self._in_turn(request)
        except Exception as e:
            self.history.tries.append(
                Try(self.api, request.url.path, sent, time.monotonic(), type(e).__name__)
            )
            raise
        outcome = str(got.status_code)
        if got.status_code == 503 and not (
            "retry-after" in got.headers
            and got.headers.get("content-type", "").startswith("application/problem+json")
        ):
            outcome = "503 without Retry-After or problem+json"  # a 5xx other than 503
        self.history.tries.append(Try(self.api, request.url.path, sent, time.monotonic(), outcome))
        return got

    async def _in_turn(self, request: httpx.Request) -> httpx.Response:
        """The request sent once it has a place in the pool, which its response's body
        gives back when closed."""
        wait = request.extensions.get("timeout", {}).get("pool")
        try:
            async with asyncio.timeout(wait):
                await self._turns.acquire()
        except TimeoutError:
            raise httpx.PoolTimeout("no place in the pool in time", request=request) from None
        try:
            got = await self.inner.handle_async_request(request)
        except BaseException:
            self._turns.release()
            raise
        assert isinstance(got.stream, httpx.AsyncByteStream)
        return httpx.Response(
            got.status_code,
            headers=got.headers,
            stream=_Released(got.stream, self._turns.release),
            extensions=got.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class Game:
    """Game servers sending matches of two players to the API processes, until stopped."""

    def __init__(
        self,
        apis: dict[str, str],
        key: str,
        rate: float,
        seed: int = 7,
        timeout_s: float = 3.0,
    ) -> None:
        self.apis = apis  # name -> base URL
        self.key = key
        self.rate = rate  # matches a second, all senders together
        self.rng = random.Random(seed)
        self.players = [f"p{i:04d}" for i in range(PLAYERS)]
        self.ids = itertools.count()
        self.history = History()
        self.stop = asyncio.Event()
        self.timeout_s = timeout_s  # a game server's for one try
        self._jitter = random.Random(seed + 1)

    def _clients(self) -> list[AsyncClient]:
        """A game server's clients, one per API process: the client's own retry rules
        (a try that times out, a 503 or a lost connection sent again, the same body),
        with a timeout (3 s unless set) shorter than the server's own wait on a store that
        went quiet, as a game server that must move on would set it."""
        policy = RetryPolicy(attempts=2, initial=0.2, max_backoff=1.0)
        return [
            AsyncClient(
                url,
                self.key,
                timeout=httpx.Timeout(self.timeout_s, connect=1.0),
                retry=policy,
                transport=Recorded(name, self.history),
            )
            for name, url in self.apis.items()
        ]

    async def send(self, clients: list[AsyncClient], turn: int, ended_at: int | None = None) -> int:
        """One new match (ended now, or at ``ended_at``), sent until acknowledged: when a
        client's tries run out, to the next API process. The turn it ended on."""
        match = f"m{next(self.ids)}"
        pair = self.rng.sample(self.players, 2)
        results = [(p, self.rng.randint(1, 100)) for p in pair]
        ended = int(time.time()) if ended_at is None else ended_at
        self.history.sent += 1
        first, began = time.time(), time.monotonic()
        rounds = 0
        while True:
            c = clients[turn % len(clients)]
            try:
                got = await c.submit(match, results, duration_seconds=60, ended_at=_rfc3339(ended))
                break
            except PodiumClientError as e:
                if not retryable(e):
                    raise
                turn += 1  # the other API process
                # At once the first time (the other process may well answer), then longer
                # each round, as a game server whose match nobody takes backs off instead
                # of sending it in a tight loop.
                await asyncio.sleep(self._backoff(rounds))
                rounds += 1
        self.history.acked[match] = dict(results)
        self.history.matches[match] = Match(
            ended, first, frozenset(got.totals(pair[0])), began, time.monotonic() - began
        )
        return turn

    def _backoff(self, rounds: int) -> float:
        """The wait before a match's next round of tries, after ``rounds`` rounds failed:
        0.1 s the first time, doubling to ``ROUND_MAX_S``, with up to half of it again at
        random (a jitter of its own, not the workload's seeded draws)."""
        wait = min(ROUND_MAX_S, 0.1 * 2**rounds)
        return wait if rounds == 0 else wait * (1 + self._jitter.random() / 2)

    async def sender(self, n: int, senders: int) -> None:
        clients = self._clients()
        try:
            turn = n
            while not self.stop.is_set():
                # Each match to the next API process, as a load balancer spreads them;
                # a try that fails moves on to the other one.
                turn = await self.send(clients, turn) + 1
                await asyncio.sleep(self.rng.expovariate(self.rate / senders))
        finally:
            for c in clients:
                await c.aclose()

    async def open_loop(self, rate: float, until: asyncio.Event) -> None:
        """Matches at ``rate`` a second whatever the answers take (each sent by a task of
        its own, as many game servers each with one match would), until ``until``; then
        until every one of them is acknowledged. Each match is due at its own time (the
        last one's plus a random gap): a loop that wakes late sends every match due by then,
        so that the rate offered is the rate asked for, however busy the test's loop."""
        clients = self._clients()
        sending: set[asyncio.Task[int]] = set()
        due = time.monotonic()
        try:
            while not until.is_set():
                while due <= time.monotonic():
                    turn = self.rng.randrange(len(clients))
                    task = asyncio.create_task(self.send(clients, turn))
                    sending.add(task)
                    task.add_done_callback(sending.discard)
                    due += self.rng.expovariate(rate)
                await asyncio.sleep(due - time.monotonic())
            await asyncio.gather(*sending)
        finally:
            left = list(sending)
            for task in left:  # cancelled (the test gave up): none outlives it
                task.cancel()
            await asyncio.gather(*left, return_exceptions=True)
            for c in clients:
                await c.aclose()

    def burst(self, api: str, n: int) -> asyncio.Task[None]:
        """``n`` matches sent to ``api`` at once (then as any other, until acknowledged):
        something in flight on it for certain, for a fault that lands mid-commit."""

        async def run() -> None:
            clients = self._clients()
            first = list(self.apis).index(api)
            try:
                await asyncio.gather(*(self.send(clients, first) for _ in range(n)))
            finally:
                for c in clients:
                    await c.aclose()

        return asyncio.create_task(run())

    async def reader(self, api: str) -> None:
        """A player's app reading from ``api`` until stopped: the top page and a rank, in
        turn, each tried once (what the API answered is what is recorded), with a timeout
        longer than the server's own wait on an index that went quiet, so that its answer
        (a 503, say) is seen rather than the client giving up first."""
        timeout = httpx.Timeout(12.0, connect=1.0)
        # Read bare, for the headers and the labels: ``Age`` marks a page served stale on
        # purpose; a rank says whether it is exact, and as of when where it is not now.
        raw = httpx.AsyncClient(
            base_url=self.apis[api], timeout=timeout, transport=Recorded(api, self.history)
        )
        try:
            while not self.stop.is_set():
                sent, wall = time.monotonic(), time.time()
                with contextlib.suppress(PodiumClientError, httpx.TransportError):
                    if self.rng.random() < 0.5:
                        got = await raw.get(f"/v1/boards/{BOARD}", params={"limit": 10})
                        answered = time.monotonic()
                        if got.status_code == 200:
                            body = got.json()
                            as_of = datetime.fromisoformat(body["asOf"]).timestamp()
                            age = got.headers.get("age")
                            rows = tuple(
                                Row(e["playerId"], int(e["rank"]), int(e["points"]))
                                for e in body["entries"]
                            )
                            self.history.pages.append(
                                Read(
                                    api,
                                    sent,
                                    wall,
                                    as_of,
                                    None if age is None else int(age),
                                    rows,
                                    answered,
                                )
                            )
                    else:
                        await self._rank(raw, api)
                await asyncio.sleep(0.2)
        finally:
            await raw.aclose()

    async def _rank(self, raw: httpx.AsyncClient, api: str) -> None:
        """A player's own rank with the rows around it, read bare (what the API answered,
        labels included), into the history if answered 200, with its send and answer times
        for the rank check."""
        player = self.rng.choice(self.players)
        sent, wall = time.monotonic(), time.time()
        got = await raw.get(f"/v1/boards/{BOARD}/players/{player}", params={"neighbors": 2})
        answered = time.monotonic()
        if got.status_code != 200:
            return
        body = got.json()
        as_of = body.get("asOf")
        self.history.ranks.append(
            RankRead(
                api,
                player,
                sent,
                answered,
                wall,
                bool(body["exact"]),
                int(body["rank"]),
                int(body["points"]),
                None if as_of is None else datetime.fromisoformat(as_of).timestamp(),
                tuple(
                    Row(e["playerId"], int(e["rank"]), int(e["points"]))
                    for e in body.get("neighbors", ())
                    if e["playerId"] != player
                ),
                _int_or_none(body.get("rankLow")),
                _int_or_none(body.get("rankHigh")),
            )
        )

    async def end(self, tasks: Sequence[asyncio.Task[Any]]) -> None:
        """Stop sending and reading, and wait for the matches in flight: each is sent until
        acknowledged, so a fleet (or a workload) that stopped acknowledging would hold the
        test forever (pytest-timeout's signal lands in one of these tasks, not in the test,
        which then never ends). Bounded: past ``DEADLINE_S`` the test fails with how many
        were not acknowledged (after the error that stopped it, if one did)."""
        self.stop.set()
        try:
            async with asyncio.timeout(DEADLINE_S):
                await asyncio.gather(*tasks)
        except TimeoutError:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            pytest.fail(
                f"{self.history.sent - len(self.history.acked)} of {self.history.sent} "
                f"matches not acknowledged {DEADLINE_S:.0f} s after the load stopped"
            )

    async def acknowledged(self, n: int, api: str | None = None) -> None:
        """Until ``n`` more matches are acknowledged (by ``api`` only, if named)."""

        def count() -> int:
            return sum(
                1
                for t in self.history.tries
                if t.outcome == "200" and is_submit(t) and (api is None or t.api == api)
            )

        goal = count() + n
        deadline = time.monotonic() + DEADLINE_S
        while count() < goal:
            assert time.monotonic() < deadline, f"matches stopped being acknowledged ({api})"
            await asyncio.sleep(0.1)


def _int_or_none(value: object) -> int | None:
    return None if value is None else int(str(value))


@dataclass
class NetFleet:
    """The fleet on its hosts, and the private servers it runs on."""

    root: Path
    net: Net
    hosts: dict[str, Host]
    pg: PgCluster
    redis: RedisServer | None  # the primary the fleet started on (None: a cluster)
    fleet: Fleet
    key: str
    nats: subprocess.Popen[bytes] | None = None
    sentinels: Sentinels | None = None  # watching ``redis`` and its replica
    # Every link through a proxy in the test's process, by what it leads to (``db``,
    # ``redis``, ``log``, ``api1``, ``api2``), that a test can slow (``Proxy.delay_s``).
    proxies: dict[str, Proxy] = field(default_factory=dict)
    proxy_loop: Loop | None = None  # the proxies' own event loop, on a thread of its own
    cluster: RedisCluster | None = None  # the index on a Redis Cluster, a node on each host

    def primary(self) -> RedisServer:
        """The Redis the index is on now: under Sentinel, the node the Sentinels name."""
        if self.sentinels is None:
            assert self.redis is not None, "the index is on a cluster"
            return self.redis
        port = self.sentinels.master_port(self.sentinels.ports[0])
        return next(n for n in self.sentinels.nodes if n.port == port)

    @property
    def apis(self) -> dict[str, str]:
        out = {n: f"http://{self.hosts[n].address}:{API_PORT}" for n in ("api1", "api2")}
        for n, p in self.proxies.items():
            if n in out:
                out[n] = f"http://{p.host}:{p.port}"
        return out

    async def close(self) -> None:
        for p in self.proxies.values():
            await p.cut()
        if self.proxy_loop is not None:
            await self.proxy_loop.close()
        self.stop()

    def stop(self) -> None:
        self.fleet.stop_all()
        if self.nats is not None and self.nats.poll() is None:
            self.nats.kill()
            self.nats.wait(10)
        if self.sentinels is not None:
            self.sentinels.stop()  # its nodes too
        elif self.redis is not None:
            self.redis.stop()
        if self.cluster is not None:
            self.cluster.stop()
        self.pg.destroy()
        self.net.close()


def _config(
    root: Path,
    store: str,
    index: str,
    log: str | None,
    boards: str = "",
    shards: int = 1,
    exact_top: int | None = None,
) -> Path:
    path = root / "podium.toml"
    path.write_text(
        f'[store]\nurl = "{store}"\n'
        f'[index]\nurl = "{index}"\nprefix = "nf"\nwatch_s = 0.5\nshards = {shards}\n'
        + ("" if log is None else f'[log]\nurl = "{log}"\nstream = "nf"\n')
        + "[server]\nread_rate_per_s = 0\n"
        + "[workers]\nlease_s = 2.0\n"
        + '[[boards]]\nname = "all"\nwindow = "all"\n'
        + ("" if exact_top is None else f"exact_top = {exact_top}\n")
        + boards
    )
    return path


async def start(
    log: str = "outbox",
    *,
    sentinel: bool = False,
    workers: int = 1,
    roles: str = "relay,updater",
    skews: dict[str, float] | None = None,
    boards: str = "",
    proxied: bool = False,
    shards: int = 1,
    cluster: bool = False,
    cluster_node_timeout_ms: int = NODE_TIMEOUT_MS,
    cluster_options: dict[str, str] | None = None,
    exact_top: int | None = None,
) -> NetFleet:
    """The fleet up and answering, on ``log`` (``outbox`` or ``nats``); with ``sentinel``,
    the index on a Redis primary (host ``redis``) with a replica (``replica``) and three
    Sentinels (``sentinel``), reached through ``redis+sentinel://``. ``workers``: how many
    worker processes (``worker``, ``worker2``, ...), each with ``roles``, and the wall clock
    of each named in ``skews`` that far off (seconds); ``boards``: more ``[[boards]]``;
    ``proxied``: every link through a proxy of the test's (``NetFleet.proxies``);
    ``shards``: the index split in that many (with an aggregator among ``roles``);
    ``cluster``: the index on a Redis Cluster of six nodes (three primaries, a replica
    each), one on each of the hosts ``rc1`` ... ``rc6``, instead of one Redis (its node
    timeout ``cluster_node_timeout_ms``, and ``cluster_options``, more redis-server options
    of its nodes, as ``{"cluster_require_full_coverage": "no"}``); ``exact_top``: the
    board's (below it a split board estimates ranks)."""
    root = Path(tempfile.mkdtemp(prefix="podium-net-"))
    net = Net.make()
    pg: PgCluster | None = None
    redis: RedisServer | None = None
    watch: Sentinels | None = None
    nodes: RedisCluster | None = None
    nats: subprocess.Popen[bytes] | None = None
    fleet: Fleet | None = None
    proxies: dict[str, Proxy] = {}
    proxy_loop: Loop | None = None
    try:
        names = ["worker"] + [f"worker{i}" for i in range(2, workers + 1)]
        redis_hosts = [f"rc{i}" for i in range(1, 7)] if cluster else ["redis"]
        hosts = {n: net.host(n) for n in ("db", *redis_hosts, *names, "api1", "api2")}
        pg = PgCluster(wrap=hosts["db"].argv([]), address=hosts["db"].address)
        await asyncio.to_thread(pg.start)
        if cluster:
            nodes = await asyncio.to_thread(
                start_cluster,
                [(hosts[n].argv([]), hosts[n].address) for n in redis_hosts],
                cluster_node_timeout=str(cluster_node_timeout_ms),
                **(cluster_options or {}),
            )
            index_url = nodes.url
        elif sentinel:
            for n in ("replica", "sentinel"):
                hosts[n] = net.host(n)
            places = [(hosts[n].argv([]), hosts[n].address) for n in ("redis", "replica")]
            watch = await asyncio.to_thread(
                start_sentinels,
                nodes=places,
                watchers=(hosts["sentinel"].argv([]), hosts["sentinel"].address),
            )
            redis = watch.primary
            index_url = watch.url()
        else:
            redis = await asyncio.to_thread(
                start_server, wrap=hosts["redis"].argv([]), address=hosts["redis"].address
            )
            index_url = redis.url
        log_url = None
        if log == "nats":
            from tests.nats_cluster import need_binary

            hosts["log"] = net.host("log")
            store_dir = root / "nats"
            nats = subprocess.Popen(  # noqa: ASYNC220 - a start, not a wait
                hosts["log"].argv(
                    [need_binary(), "-a", "0.0.0.0", "-p", "4222", "-js", "-sd", str(store_dir)]
                ),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            log_url = f"nats://{hosts['log'].address}:4222"
        store_url = pg.url
        if proxied:
            assert redis is not None, "proxied links lead to one Redis"
            ends = {"db": (pg.address, pg.port), "redis": (redis.host, redis.port)}
            if log_url is not None:
                ends["log"] = (hosts["log"].address, 4222)
            ends |= {n: (hosts[n].address, API_PORT) for n in ("api1", "api2")}
            # On a loop of their own: the workload's clients, on the test's loop, must not
            # slow the links they are measuring (tests/proxy.py).
            proxy_loop = Loop()
            for n, (host, port) in ends.items():
                proxies[n] = Proxy(host, port, host=net.root_address, home=proxy_loop)
                await proxies[n].start()
            via = {n: f"{net.root_address}:{p.port}" for n, p in proxies.items()}
            store_url = f"postgresql://postgres@{via['db']}/postgres"
            index_url = f"redis://{via['redis']}/0"
            if log_url is not None:
                log_url = f"nats://{via['log']}"
        cfg = _config(root, store_url, index_url, log_url, boards, shards, exact_top)
        fleet = Fleet(cfg, root)
        await asyncio.to_thread(fleet.podium, "migrate")
        out = await asyncio.to_thread(
            fleet.podium, "keys", "create", "--name", "gs", "--modes", "default"
        )
        key = out.strip().splitlines()[-1]
        for name in ("api1", "api2"):
            h = hosts[name]
            fleet.start(
                name,
                "serve",
                "--no-workers",
                "--host",
                "0.0.0.0",
                port=API_PORT,
                wrap=h.argv([]),
                host=h.address,
            )
        for name in names:
            skew = (skews or {}).get(name, 0.0)
            # Its /metrics, for a test to read what it refused (its address is private to
            # the test's net).
            fleet.start(
                name,
                "worker",
                "--roles",
                roles,
                "--metrics-port",
                str(WORKER_METRICS_PORT),
                "--metrics-host",
                "0.0.0.0",
                wrap=hosts[name].argv([], skew_s=skew),
            )
        for name in ("api1", "api2"):
            await fleet.api_ready(name)
        for name in names:
            await fleet.worker_ready(name)
        return NetFleet(
            root, net, hosts, pg, redis, fleet, key, nats, watch, proxies, proxy_loop, nodes
        )
    except BaseException:
        for p in proxies.values():
            await p.cut()
        if proxy_loop is not None:
            await proxy_loop.close()
        if fleet is not None:
            fleet.stop_all()
            fleet.dump()
        if nats is not None:
            nats.kill()
        if watch is not None:
            watch.stop()
        elif redis is not None:
            redis.stop()
        if nodes is not None:
            nodes.stop()
        if pg is not None:
            pg.destroy()
        net.close()
        raise


async def ops_key(nf: NetFleet) -> str:
    """A key that may read the API processes' ``/metrics``."""
    out = await asyncio.to_thread(nf.fleet.podium, "keys", "create", "--name", "ops", "--ops")
    return out.strip().splitlines()[-1]


async def api_metrics(nf: NetFleet, key: str) -> Counter[str]:
    """Every sample of both API processes' ``/metrics``, summed over the two, by name and
    labels (``name{label="value"}``); asked of each host directly, past the test's proxies,
    so that a slowed link does not slow the look."""
    out: Counter[str] = Counter()
    async with httpx.AsyncClient(timeout=LOOK_TIMEOUT_S) as client:
        for name in ("api1", "api2"):
            r = await client.get(
                f"http://{nf.hosts[name].address}:{API_PORT}/metrics",
                headers={"Authorization": f"Bearer {key}"},
            )
            r.raise_for_status()
            out.update(_samples(r.text))  # added up, zeros kept
    return out


async def worker_metrics(nf: NetFleet, name: str) -> Counter[str]:
    """Every sample of one worker process's ``/metrics``, by name and labels, as
    ``api_metrics`` has them."""
    async with httpx.AsyncClient(timeout=LOOK_TIMEOUT_S) as client:
        r = await client.get(f"http://{nf.hosts[name].address}:{WORKER_METRICS_PORT}/metrics")
        r.raise_for_status()
    return _samples(r.text)


def _samples(text: str) -> Counter[str]:
    out: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] += sample.value
    return out


def _histogram_between(
    before: Counter[str], after: Counter[str], name: str
) -> tuple[float, float, float, float]:
    """A histogram's samples between two looks: how many, their mean, and the bucket bounds
    their median and their 99th percentile fall under."""
    n = after[f"{name}_count"] - before[f"{name}_count"]
    took = after[f"{name}_sum"] - before[f"{name}_sum"]
    buckets = sorted(
        (float(k.split('"')[1]), after[k] - before[k])
        for k in after
        if k.startswith(f"{name}_bucket{{")
    )

    def under(q: float) -> float:
        return next((le for le, c in buckets if c >= q * n), float("inf")) if n else 0.0

    return n, (took / n if n else 0.0), under(0.5), under(0.99)


def turns_between(before: Counter[str], after: Counter[str]) -> str:
    """What the API processes' metrics say of the matches between two looks: the turns at
    the store (``podium_accept_seconds``: from arrival, the wait included), their median
    and mean, and the matches turned away by reason."""
    turns, mean, p50, _ = _histogram_between(before, after, "podium_accept_seconds")
    away = {
        reason: int(
            after[f'podium_matches_turned_away_total{{reason="{reason}"}}']
            - before[f'podium_matches_turned_away_total{{reason="{reason}"}}']
        )
        for reason in ("full", "late", "gone")
    }
    return (
        f"{turns:.0f} turns at the store, from arrival p50 <= {p50:g} s, mean {mean:.2f} s; "
        f"turned away {away}"
    )


def board_between(before: Counter[str], after: Counter[str]) -> str:
    """What a worker's metrics say of its updater between two looks: the changes it applied
    and how long each took from its commit in the store to its write on the board."""
    n, mean, p50, p99 = _histogram_between(before, after, "podium_commit_to_board_seconds")
    return (
        f"{n:.0f} changes applied, commit to board p50 <= {p50:g} s, p99 <= {p99:g} s, "
        f"mean {mean:.2f} s"
    )


@dataclass
class Verdict:
    lost: list[str]  # players whose stored total lacks an acknowledged result
    doubled: list[str]  # players whose stored total counts one twice (or one never acked)
    board_differs: list[str]  # players whose board total is not the stored one
    errors: Counter[str]  # 5xx answers other than 503
    stale: list[tuple[str, float]]  # pages older than the documented bound: api, how old
    board_caught_up_s: float  # from the call to the board equal to the store
    # exact ranks false at every moment their answer may speak for (``rankcheck.py``)
    false_ranks: list[FalseRank] = field(default_factory=list)
    ranks_checked: int = 0  # exact rank answers checked (each with its neighbor rows)
    # how far behind the store the board was, at least, for each answer that needed it:
    # (read while a fault held the board back, seconds)
    behind_s: list[tuple[bool, float]] = field(default_factory=list)
    # estimated ranks (``exact: false``) whose interval is missing, or holds no true rank
    # at any moment their answer may speak for (``rankcheck.outside_intervals``)
    outside: list[FalseRank] = field(default_factory=list)
    estimates_checked: int = 0
    # pages older than their bound whose asOf said so (the board marks), true as of then
    pages_behind: list[float] = field(default_factory=list)
    # with a 5xx among the answers, what the API processes logged of their errors, so that
    # a failure says why
    logged: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.doubled
            or self.board_differs
            or self.errors
            or self.stale
            or self.false_ranks
            or self.outside
        )

    def ranks(self) -> str:
        """The rank check in a line, for a scenario's report."""
        whole = [s for held, s in self.behind_s if not held]
        held = [s for faulty, s in self.behind_s if faulty]
        return (
            f"{self.ranks_checked} exact ranks checked, {len(self.false_ranks)} false; "
            f"{self.estimates_checked} estimated ranks checked, {len(self.outside)} outside "
            f"their interval; read from a board behind the store: {len(whole)} (at most "
            f"{max(whole, default=0.0):.2f} s behind), and {len(held)} while a fault held it "
            f"back (at most {max(held, default=0.0):.2f} s); {len(self.pages_behind)} top "
            f"pages labelled behind, true as of their asOf (at most "
            f"{max(self.pages_behind, default=0.0):.0f} s old)"
        )


async def check(
    nf: NetFleet,
    game: Game,
    index_out: dict[str, tuple[float, float]] | None = None,
    board_behind: tuple[float, float] | None = None,
) -> Verdict:
    """Every acknowledged result in the store exactly once, the board equal to the store,
    no 5xx but 503, no page older than documented (unless its asOf says it, the board
    marks' watermark, and its rows are true as of then), no exact rank false at every moment
    its answer may speak for, and no estimated rank whose interval holds no true rank at
    the moment of its answer, from the history and the final state (every fault healed).
    ``index_out``: when (monotonic, from and to) an API process could not reach the index;
    ``board_behind``: when (from and to) a fault held the board back from the store (a
    worker cut off, a replica promoted before the mender replayed), so that a rank read
    then may show the board as of the fault's start."""
    h = game.history
    expected: Counter[str] = Counter()
    for results in h.acked.values():
        expected.update(results)
    store = PostgresStore.from_url(nf.pg.url, timeout_s=LOOK_TIMEOUT_S)
    try:
        target = [Target(BOARD, "all", 0)]
        stored = {p: (await store.totals(p, target)).get(BOARD, 0) for p in game.players}
    finally:
        await store.close()
    # Every match sent was sent until acknowledged (a sender stops between matches only),
    # so the acknowledged results are every result sent: each total is their sum exactly.
    lost = [p for p in game.players if stored[p] < expected[p]]
    doubled = [p for p in game.players if stored[p] > expected[p]]
    started = time.monotonic()
    deadline = started + DEADLINE_S
    while True:
        board = await _board(nf)
        differs = [p for p in game.players if board.get(p, 0) != stored[p]]
        if not differs or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    errors = Counter(t.outcome for t in h.tries if t.outcome.startswith("5") and t.outcome != "503")
    # A page may be as old as one process holds it (``[server] page_cache_s``) when it is
    # asked for. asOf is in whole seconds, rounded down: the page was read in the second
    # after it, so it is at least ``wall - asOf - 1`` old. Older than its bound is a stale
    # answer passed off as fresh (the clocks are the one machine's). Two documented
    # exceptions, each labelled:
    # - a process that cannot reach the index answers a page it read in the last
    #   ``LAST_PAGE_S``, with its asOf (README, "A marker gone"), from the cut until its
    #   reads in flight at the heal have ended;
    # - a process that sheds reads answers a top page from the last copy it served, at most
    #   ``STALE_S`` old, with an ``Age`` header (README, "Results before reads").
    # On a board split across shards a page is a slice of the aggregator's snapshot, with
    # the snapshot's asOf: one a process holds ``HOLD_S``, read again until it is
    # ``SNAPSHOT_TTL_S`` old while no newer one is published (README, "On a split board":
    # a standby takes over within about 5 s).
    cfg = config.load(nf.fleet.cfg)
    held = cfg.server.page_cache_s + PAGE_SLACK_S
    if cfg.index.shards > 1:
        held += SNAPSHOT_TTL_S + HOLD_S
    out = index_out or {}

    def bound(r: Read) -> float:
        start, end = out.get(r.api, (0.0, 0.0))
        if start <= r.sent <= end + IN_FLIGHT_S:
            return LAST_PAGE_S
        return STALE_S + held if r.age is not None else held

    old = [r for r in h.pages if r.wall - r.as_of - 1 > bound(r)]
    caught_up = time.monotonic() - started
    ledger = Ledger(
        Commit(m.began, m.began + m.took, h.acked[name]) for name, m in h.matches.items()
    )

    def held_back(r: RankRead) -> bool:
        return board_behind is not None and board_behind[0] <= r.sent <= board_behind[1]

    def lag(r: RankRead) -> float:
        if board_behind is not None and held_back(r):
            return r.sent - board_behind[0] + BOARD_FRESH_S
        return BOARD_FRESH_S

    # A page older than its bound is not stale when it says so: while the board is behind
    # the store, its asOf is the board marks' watermark (README, "How far behind the board
    # is"), and its rows, each an exact rank, must then be true of the board at that moment
    # (the rank check's rule for an answer labelled asOf an earlier time).
    as_ranks = {id(r): _page_as_rank(r) for r in old if r.rows}
    untrue = {id(f.read) for f in false_ranks(ledger, game.players, list(as_ranks.values()), lag)}
    said = {id(r) for r in old if id(r) in as_ranks and id(as_ranks[id(r)]) not in untrue}
    stale = [(r.api, r.wall - r.as_of - 1) for r in old if id(r) not in said]
    exact = [r for r in h.ranks if r.exact]
    wrong = false_ranks(ledger, game.players, exact, lag)
    estimated = [r for r in h.ranks if not r.exact]
    outside = outside_intervals(ledger, game.players, estimated, lag)
    # How far behind the store each answer's board was, at least: the freshness it needed.
    needs: dict[int, tuple[bool, float]] = {}
    for f in false_ranks(ledger, game.players, exact, lambda _: 0.0):
        got = needs.get(id(f.read), (held_back(f.read), 0.0))
        needs[id(f.read)] = (got[0], max(got[1], f.needs_lag_s or float("inf")))
    return Verdict(
        lost,
        doubled,
        differs,
        errors,
        stale,
        caught_up,
        wrong,
        len(exact),
        list(needs.values()),
        outside,
        len(estimated),
        [r.wall - r.as_of for r in old if id(r) in said],
        _logged_errors(nf) if errors else [],
    )


def _logged_errors(nf: NetFleet, most: int = 60) -> list[str]:
    """The API processes' log lines from each error on (its traceback), at most ``most``."""
    out: list[str] = []
    for name in ("api1", "api2"):
        proc = nf.fleet.procs.get(name)
        if proc is None:
            continue
        lines = proc.log.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines):
            if " ERROR " in line or line.startswith("Traceback"):
                out += [f"{name}: {x}" for x in lines[i : i + 25]]
                break
    return out[:most]


def _page_as_rank(r: Read) -> RankRead:
    """A page's rows as one exact rank answer labelled with the page's asOf: its first
    entry's rank, the others as its neighbors."""
    first, *rest = r.rows
    return RankRead(
        r.api, first.player, r.sent, r.answered, r.wall, True, first.rank, first.points,
        r.as_of, tuple(rest),
    )  # fmt: skip


async def _board(nf: NetFleet) -> dict[str, int]:
    """Every player's total as the index holds it (read from Redis itself, so that no
    API process's cache hides when the board got there; on a cluster, from each shard's
    primary now)."""
    settings = config.load(nf.fleet.cfg)
    spec = settings.board(BOARD)
    assert spec is not None
    shards = settings.index.shards
    names = (
        [f"nf:{{b:{BOARD}:all}}:z"]
        if shards == 1
        else [f"nf:{shard_tag(n)}:{BOARD}:all:z" for n in range(shards)]
    )
    # On a cluster, each shard from the primary of its slot now, as a client finds it.
    r = (
        cluster_client(nf.cluster.url)
        if nf.cluster is not None
        else aioredis.Redis.from_url(nf.primary().url, decode_responses=True)
    )
    try:
        rows = [row for name in names for row in await r.zrange(name, 0, -1, withscores=True)]
    finally:
        await r.aclose()
    return {m: spec.codec.points(int(s)) for m, s in rows}
