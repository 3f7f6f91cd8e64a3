"""The one place that picks adapters by URL and wires them together.

``build(settings)`` creates the objects without touching the network; ``Backends.start``
migrates the store and, for the in-process index, rebuilds it from the store (invariant 1
of docs/architecture.md: the index is a copy). Everything else in podium receives ports,
never adapters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from podium.archive.erasure import ArchiveFiles
from podium.archive.results import DayFiles
from podium.archive.standings import FileArchive
from podium.config.ingest import IngestTable
from podium.config.ingest import brokers as ingest_brokers
from podium.config.settings import Settings
from podium.config.topology import (
    IndexKind,
    LogKind,
    StoreKind,
    Topology,
    is_sentinel_url,
    sentinel_address,
)
from podium.errors import ConfigError, Unavailable
from podium.index.memory.ratelimit import ReadLimiter
from podium.index.split.index import SplitIndex
from podium.log.events import source_of
from podium.log.partitions import by_name, just
from podium.ports import (
    AggregatorSlot,
    ChangeLog,
    Clock,
    MarkedOutbox,
    Marking,
    ProfileCopy,
    RankIndex,
    RankSource,
    Rebuilding,
    ScoreStore,
    ShardIndex,
    SystemClock,
)
from podium.ports.archive import ResultFiles
from podium.ports.erasure import IndexErasure
from podium.ports.generations import Generations
from podium.ports.ingest import MatchFeed
from podium.ports.layouts import LayoutRecord, LiveLayouts, SplitShards
from podium.ports.operations import BucketMoves
from podium.ports.ratelimit import Buckets
from podium.ports.upkeep import UpkeepRecords
from podium.service.ingest import Ingest
from podium.service.ranks.counted import CountedRanks
from podium.service.ranks.marked import MarkedRanks
from podium.service.ranks.snapshot import FRESH_PAGE_S, SnapshotRanks
from podium.service.reads.freshness import Freshness
from podium.service.upkeep.gapless import GaplessRebuild
from podium.service.upkeep.progress import Published
from podium.service.upkeep.reshard import Reshard
from podium.service.wiring import Service
from podium.workers import mender, replay, roles
from podium.workers.runner import START_WAIT_S, Needs, Runner, migrated

if TYPE_CHECKING:  # imported where built: a deployment loads only the drivers it uses
    from podium.store.split import SplitStore

log = logging.getLogger("podium")

ROLES = roles.NAMES  # every background role, in the order `podium serve` starts them


def topology(settings: Settings) -> Topology:
    """What the settings' URLs make of this deployment, decided here once: every other
    module asks the value, never a URL (the settings checked each URL's scheme already)."""
    store_url, index_url = settings.store.url, settings.index.url
    store: StoreKind
    if settings.store.shards:
        # The home database (store.url) holds what is global; the shards hold the players.
        if not store_url.startswith(("postgresql://", "postgres://")):
            raise ConfigError("store.url: a store split by player needs a postgresql:// home")
        store = "split"
    else:
        store = "sqlite" if store_url.startswith("sqlite:///") else "postgres"
    index: IndexKind
    if index_url.startswith("memory://"):
        index = "memory"
    elif is_sentinel_url(index_url):
        index = "sentinel"
    else:
        from podium.index.redis.cluster import is_cluster_url

        index = "cluster" if is_cluster_url(index_url) else "redis"
    log: LogKind = "outbox"
    if settings.log.url.startswith("nats://"):
        log = "nats"
    elif settings.log.url.startswith("kafka://"):
        log = "kafka"
    topo = Topology(store, index, settings.index.shards, log)
    if settings.server.api != "all" and topo.in_process_index:
        raise ConfigError(
            "server.api: a process for reads or writes only needs an index it shares with "
            "the others (index.url = redis://...); the in-process index is this process's own"
        )
    if settings.server.read_limiter == "redis" and topo.in_process_index:
        # Said here, before anything starts, rather than from inside a failed start.
        raise ConfigError("server.read_limiter: redis needs index.url = redis://...")
    return topo


def _split_store(settings: Settings) -> SplitStore:
    from podium.store.split import SplitStore

    p = settings.store
    limits = {"timeout_s": p.timeout_s, "command_timeout_s": p.command_timeout_s}
    return SplitStore.from_urls(p.url, p.shards, p.pool_size, p.read_pool_size, **limits)


def _store(settings: Settings, topo: Topology | None = None) -> ScoreStore:
    url, pools = settings.store.url, settings.store
    kind = (topo or topology(settings)).store
    if kind == "split":
        return _split_store(settings)
    if kind == "sqlite":
        from podium.store.sqlite import SqliteStore

        return SqliteStore.from_url(url)
    from podium.store.postgres import PostgresStore

    limits = {"timeout_s": pools.timeout_s, "command_timeout_s": pools.command_timeout_s}
    return PostgresStore.from_url(url, pools.pool_size, pools.read_pool_size, **limits)


@dataclass(frozen=True)
class IndexParts:
    """The rank index and what its adapters keep beside it: the copy of profiles, the
    aggregator's snapshots, and on a split index its shards (None on a single one);
    ``rebuilding``: the same index, seen through the port of its rebuilds."""

    index: RankIndex
    copy: ProfileCopy
    snapshots: AggregatorSlot  # and the board marks beside them (ports/index.py)
    split: SplitShards | None
    rebuilding: Rebuilding
    generations: Generations | None = None  # a Redis index's markers (ports/generations.py)
    layout: LiveLayouts | None = None  # a split Redis index's live layout (index/redis/layout.py)
    record: LayoutRecord | None = None  # an unsplit Redis's look at the layout record
    feeds: list[tuple[IngestTable, MatchFeed]] = field(default_factory=list)  # [[ingest]]
    upkeep: UpkeepRecords | None = None  # how far a rebuild or a reshard is (ports/upkeep.py)


def gapless(
    settings: Settings,
    store: ScoreStore,
    index: Rebuilding,
    podium: Service,
    clock: Clock,
    replay: Callable[[float], Awaitable[int]] | None = None,
) -> GaplessRebuild:
    """The rebuild without a gap (``service/upkeep/gapless.py``) of this deployment's index."""
    return GaplessRebuild(
        settings, store, index, podium.rebuilds.index, clock, podium.changed, replay
    )


def _index(settings: Settings, topo: Topology, clock: Clock) -> IndexParts:
    url, n, prefix = settings.index.url, topo.shards, settings.index.prefix
    if topo.in_process_index:
        from podium.index.memory.index import MemoryIndex
        from podium.index.memory.snapshots import MemorySnapshots
        from podium.index.memory.upkeep import MemoryUpkeep

        told = MemoryUpkeep(clock.now)
        if n == 1:
            memory = MemoryIndex(clock.now)
            return IndexParts(
                memory, memory.copy, MemorySnapshots(clock.now), None, memory, upkeep=told
            )
        parts = [MemoryIndex(clock.now) for _ in range(n)]
        split = SplitIndex(parts, copies=[p.copy for p in parts])
        assert split.copy is not None
        return IndexParts(split, split.copy, MemorySnapshots(clock.now), split, split, upkeep=told)
    from podium.index.redis.cluster import client_for, shard_indexes
    from podium.index.redis.generations import RedisGenerations
    from podium.index.redis.index import RedisIndex
    from podium.index.redis.keys import Keys
    from podium.index.redis.snapshots import RedisSnapshots
    from podium.index.redis.upkeep import RedisUpkeep

    replicas = settings.index.read_from_replicas
    if topo.index == "sentinel":  # one Redis, the primary Sentinel names (and its replicas)
        client = _sentinel(settings, read_from_replicas=replicas)
    else:
        client = client_for(url, read_from_replicas=replicas)
    if n == 1 and topo.index != "cluster":  # one Redis, one shard: today's keys, untagged
        from podium.index.redis.layout import RedisLayout

        redis = RedisIndex(client, prefix=prefix)
        marks = RedisGenerations(redis.client, [(None, redis.keys)])
        snaps = RedisSnapshots(redis.client, redis.keys)
        record = RedisLayout(client, redis.keys)
        upkeep = RedisUpkeep(client, prefix)
        return IndexParts(
            redis, redis.copy, snaps, None, redis, marks, record=record, upkeep=upkeep
        )  # fmt: skip
    # A cluster is always split (one shard at least): a board and its copy of profiles
    # must share a slot, which only a shard's tag gives them (keys.py). Behind one
    # indirection (index/redis/layout.py), so that a reshard switches the shard count live.
    from podium.index.redis.layout import (
        Layout,
        LiveCopy,
        LiveGenerations,
        LiveIndex,
        Parts,
        RedisLayout,
    )

    def layout_of(count: int, tagged: bool) -> Parts:
        shards = shard_indexes(client, prefix, count, count if tagged else None)
        split = SplitIndex(shards, close=client.aclose, copies=[s.copy for s in shards])
        assert split.copy is not None
        marks = RedisGenerations(client, [(s.shard, s.keys) for s in shards])
        return Parts(count, tagged, split, split.copy, marks)

    record = RedisLayout(client, Keys(prefix))
    layout = Layout(record, layout_of, n, prefix, settings.index.watch_s)
    live: Any = LiveIndex(layout)  # a SplitIndex's every port, by delegation
    snapshots = RedisSnapshots(client, Keys(prefix))
    return IndexParts(
        live, LiveCopy(layout), snapshots, live, live, LiveGenerations(layout), layout,
        upkeep=RedisUpkeep(client, prefix),
    )  # fmt: skip


def _sentinel(
    settings: Settings, *, read_from_replicas: bool = False, timeout_s: float | None = None
) -> Any:
    """The client of the primary that ``redis+sentinel://`` names (``index/redis/sentinel.py``)."""
    from podium.index.redis.sentinel import sentinel_client

    try:
        at = sentinel_address(settings.index.url)
    except ValueError as e:  # the settings checked it already; a Settings made by hand
        raise ConfigError(f"index.url: {e}") from None
    return sentinel_client(
        at.sentinels,
        at.service,
        db=at.db,
        username=at.username,
        password=at.password,
        sentinel_password=at.sentinel_password,
        read_from_replicas=read_from_replicas,
        timeout_s=timeout_s,
    )


def process_limiter(settings: Settings) -> Buckets:
    """This process's own read buckets: what an app holds until its lifespan puts the
    configured ones (``read_limiter``) in place."""
    return ReadLimiter(settings.server.read_rate_per_s, settings.server.read_burst)


def read_limiter(settings: Settings, topo: Topology) -> Buckets:
    """The read buckets (``server.read_limiter``): this process's, or the fleet's in the
    index's Redis. "auto" shares them wherever the index is a Redis."""
    server, url = settings.server, settings.index.url
    redis = not topo.in_process_index  # a Redis, or a Redis Cluster
    if server.read_limiter == "redis" and not redis:
        raise ConfigError("server.read_limiter: redis needs index.url = redis://...")
    if server.read_rate_per_s <= 0 or server.read_limiter == "process" or not redis:
        return ReadLimiter(server.read_rate_per_s, server.read_burst)
    from podium.index.redis.ratelimit import TIMEOUT_S, RedisReadLimiter

    if topo.index == "sentinel":
        client = _sentinel(settings, timeout_s=TIMEOUT_S)
        return RedisReadLimiter(
            client, settings.index.prefix, server.read_rate_per_s, server.read_burst
        )
    return RedisReadLimiter.from_url(
        url, settings.index.prefix, server.read_rate_per_s, server.read_burst
    )


def _log(
    settings: Settings,
    topo: Topology,
    store: ScoreStore,
    databases: Callable[[], Awaitable[Mapping[str, MarkedOutbox]]],
    clock: Clock,
) -> ChangeLog:
    if topo.log in ("nats", "kafka"):
        if topo.log == "kafka":
            from podium.log.kafka.log import KafkaLog

            kafka = settings.log.kafka
            return KafkaLog.from_url(
                settings.log.url,
                clock,
                topic=kafka.topic,
                events_topic=kafka.events_topic,
                group=kafka.group,
                partitions=settings.log.partitions,
                lease_s=settings.workers.lease_s,
                replication=kafka.replication,
                retention_s=float(settings.log.retention_s),
                client=kafka.client,
                databases=databases,
            )
        from podium.log.nats.log import NatsLog

        return NatsLog.from_url(
            settings.log.url,
            settings.log.stream,
            clock,
            partitions=settings.log.partitions,
            lease_s=settings.workers.lease_s,
            replicas=settings.log.replicas,
            retention_s=float(settings.log.retention_s),
            databases=databases,
        )
    from podium.log.outbox import OutboxLog

    return OutboxLog(store, clock, lease_s=settings.workers.lease_s)


@dataclass
class Backends:
    settings: Settings
    store: ScoreStore
    index: RankIndex
    copy: ProfileCopy
    log: ChangeLog
    clock: Clock
    podium: Service
    read_limiter: Buckets
    snapshots: AggregatorSlot  # and the board marks beside them (ports/index.py)
    split: SplitShards | None  # a split index's shards; None when it is not split
    topology: Topology
    # The store split by player, for what only it does (moving a bucket); None otherwise.
    moves: BucketMoves | None
    generations: Generations | None = None  # a Redis index's markers; None in process
    rebuilding: Rebuilding | None = None  # the index seen through its rebuilds' port
    layout: LiveLayouts | None = None  # a split Redis index's live layout (index/redis/layout.py)
    record: LayoutRecord | None = None  # an unsplit Redis's look at the layout record
    feeds: list[tuple[IngestTable, MatchFeed]] = field(default_factory=list)  # [[ingest]]
    marking: Callable[[], Awaitable[Mapping[str, Marking]]] | None = None
    _runners: list[Runner] = field(default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def start(self) -> None:
        await migrated(self.store, START_WAIT_S)
        await self.follow_layout()
        if self.topology.in_process_index:
            n = await self.rebuild_live()
            p = await self.podium.rebuilds.copy_profiles()
            log.info("in-process index rebuilt from the store: %d entries, %s profiles", n, p)
        await self._marked()

    async def follow_layout(self) -> None:
        """A split Redis index: the layout its record names followed now, before any read,
        then watched every ``index.watch_s`` (``index/redis/layout.py``), in every process. An
        unsplit Redis whose record names a split layout (index.shards = 1 in a file left
        behind by a reshard) refuses to start: its keys are not the live ones."""
        if self.record is not None:
            with contextlib.suppress(Unavailable):  # then the reads' own errors say it
                live, _ = await self.record.read()
                if live is not None:
                    raise ConfigError(
                        f"index.shards: the index's layout record says {live} shards (a "
                        f"reshard, podium rebuild --all --shards); set index.shards = {live}"
                    )
        if self.layout is None:
            return
        from podium import metrics

        try:
            await self.layout.follow()
        except Unavailable as e:  # the watch follows it once the index answers
            log.warning("the index's layout record could not be read at start: %s", e)
        metrics.INDEX_SHARDS.set(self.layout.count)
        if not any(r.role == "layout" for r in self._runners):
            watch = Runner("layout", self.layout.step, idle_sleep_s=self.settings.index.watch_s)
            self._runners.append(watch)
            self._tasks.append(asyncio.create_task(watch.run(), name="layout"))

    async def rebuild_live(self) -> int:
        """Every live window refilled from the store, tournaments' runs and leagues' cohorts
        too: at the start of the in-process index, and by the mender for a Redis that lost
        its data."""
        n = await self.podium.rebuilds.rebuild_live()
        n += await self.podium.tournaments.rebuild_live(self.podium.rebuilds)
        return n + await self.podium.leagues.rebuild_live(self.podium.rebuilds)

    async def _marked(self) -> None:
        """A Redis index without its generation markers (new, or emptied while no process
        watched) is refilled from the store now, by one process (``workers/mender.py``);
        one that is down is left to the menders, which look again every few seconds."""
        m = mender.mender(self.needs())
        if m is None or self.generations is None:
            return
        try:
            gone = [h.shard for h in await self.generations.held() if h.token is None]
            if gone:
                await m.rebuild(gone, replay=False)
        except Unavailable as e:
            log.warning("the index's generation markers could not be read at start: %s", e)

    def result_files(self) -> ResultFiles:
        """The day files the pruner moves results past the retention into."""
        return result_files(self.settings.archive.dir)

    def needs(self) -> Needs:
        """What the roles are given (``workers/runner.py``): the ports, never the adapters."""
        shards: Sequence[ShardIndex] = () if self.split is None else self.split.shards
        return Needs(
            self.settings,
            self.store,
            self.index,
            self.copy,
            self.log,
            self.clock,
            self.snapshots,
            shards,
            self.podium.lifecycle,
            self.podium.rebuilds.copy_profiles,
            self.topology,
            self.result_files(),
            self.generations,
            self.rebuild_live,
            self.podium.leagues,
            self.feeds,
            Ingest(
                self.podium.matches, self.podium.keys, self.clock, self.settings.server.key_cache_s
            ),
            self.podium.erasures,
            marking=self.marking,
            marks=self.snapshots,
        )

    def start_roles(self, names: Sequence[str]) -> None:
        """Start the roles named (``workers/roles.py``); an unknown name is a ConfigError."""
        started = roles.runners(names, self.needs())
        self._runners += started
        self._tasks += [asyncio.create_task(r.run(), name=r.role) for r in started]

    def gapless(self) -> GaplessRebuild:
        """``podium rebuild``: the rebuild without a gap, the log replayed by this process."""
        assert self.rebuilding is not None
        return gapless(
            self.settings, self.store, self.rebuilding, self.podium, self.clock, self.replay
        )

    def buckets(self) -> BucketMoves:
        """``podium store move-bucket``: the moves of a store split by player; only such a
        store has buckets to move."""
        if self.moves is None:
            raise ConfigError("store.shards: the store is not split across databases")
        return self.moves

    def reshard(self) -> Reshard:
        """``podium rebuild --all --shards M``: the index's shard count changed while the
        fleet runs (``service/upkeep/reshard.py``); only a split Redis index has layouts."""
        if self.layout is None:
            raise ConfigError(
                "rebuild --shards: only a split Redis index (index.shards of 2 or more, or "
                "Redis Cluster) changes its shard count live; this one is "
                + ("in process" if self.topology.in_process_index else "one unsplit Redis")
            )
        p = self.podium
        return Reshard(
            self.settings, self.store, self.layout, p.rebuilds.index, self.clock, p.boards,
            p.changed, self.replay,
        )  # fmt: skip

    async def replay(self, since_s: float) -> int:
        """``podium worker --replay-since``: the log's last ``since_s`` seconds applied once
        more, before the roles start (``workers/replay.py``)."""
        return await replay.replay(self.needs(), since_s)

    async def close(self) -> None:
        for r in self._runners:
            r.stop()
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=5)
            for t in pending:
                t.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await t
        for _, feed in self.feeds:
            await feed.close()
        await self.log.close()
        await self.read_limiter.close()
        await self.index.close()
        await self.store.close()


def build(settings: Settings, clock: Clock | None = None) -> Backends:
    clock = clock or SystemClock()
    topo = topology(settings)
    split_store = _split_store(settings) if topo.split_store else None
    store = split_store if split_store is not None else _store(settings, topo)
    store.erasure_secret = settings.store.erasure_secret  # erased ids' hashes' key (§9)
    parts = _index(settings, topo, clock)
    # Each store database's outbox by name: what relays (or updaters) read, marks go into.
    if split_store is None:
        marking = just(source_of(settings.store.url), cast("MarkedOutbox", store))
    else:
        marking = by_name(split_store.relayed if topo.log != "outbox" else split_store.outboxes)
    changes = _log(settings, topo, store, marking, clock)
    archive = FileArchive(settings.archive.dir)
    ranking = _rank_source(settings, topo, parts, clock)
    marked = None
    if parts.generations is not None:  # reads refuse a board that lost its data
        ranking = marked = MarkedRanks(ranking, parts.generations, clock)
    # A shared index is rebuilt beside its live generation; the in-process one in place.
    beside = None
    if not topo.in_process_index:
        told = None if parts.upkeep is None else partial(Published, parts.upkeep, clock)
        beside = partial(
            GaplessRebuild, settings, store, parts.rebuilding, parts.index, clock, told=told
        )
    podium = Service.wire(
        settings, store, parts.index, parts.copy, clock, archive, ranking, changes,
        beside=beside,
        marked=marked,  # a live cohort is read from the index under the same check
        erased_from=[parts.snapshots],
        files=ArchiveFiles(settings.archive.dir),
        erased_log=cast("IndexErasure", changes) if topo.log == "nats" else None,  # JetStream
        upkeep=parts.upkeep,
        freshness=Freshness(settings, parts.snapshots, marking, changes.partitions, clock),
    )  # fmt: skip
    limiter = read_limiter(settings, topo)
    return Backends(
        settings,
        store,
        parts.index,
        parts.copy,
        changes,
        clock,
        podium,
        limiter,
        parts.snapshots,
        parts.split,
        topo,
        split_store,
        parts.generations,
        parts.rebuilding,
        parts.layout,
        parts.record,
        _feeds(settings),
        marking=marking,
    )


def _feeds(settings: Settings) -> list[tuple[IngestTable, MatchFeed]]:
    """A consumer of each ``[[ingest]]`` topic (connected at its first poll)."""
    if not settings.ingest:
        return []
    from podium.log.kafka.ingest import KafkaMatchFeed

    kafka = settings.log.kafka
    return [
        (
            t,
            KafkaMatchFeed(
                ingest_brokers(t, settings.log.url),
                t.topic,
                t.group,
                t.dead_letter_topic,
                partitions=settings.log.partitions,
                replication=kafka.replication,
                retention_s=float(settings.log.retention_s),
                client=kafka.client,
            ),
        )
        for t in settings.ingest
    ]


def _rank_source(settings: Settings, topo: Topology, parts: IndexParts, clock: Clock) -> RankSource:
    """How the reads rank: counted on the index, or a split board's aggregator snapshot."""
    counted = CountedRanks(parts.index, clock)
    if not topo.aggregated:
        return counted
    assert parts.split is not None  # more than one shard: always a split index
    head_s = min(FRESH_PAGE_S, settings.server.page_cache_s)  # no longer than any page
    return SnapshotRanks(counted, parts.split, parts.snapshots, parts.copy, clock, head_s)


def result_files(directory: str) -> ResultFiles:
    """Pruned results' day files under ``directory`` (``[archive] dir``); also what
    ``podium archive show`` reads a day file with."""
    return DayFiles(directory)
