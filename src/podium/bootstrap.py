"""The one place that picks adapters by URL and wires them together.

``build(settings)`` creates the objects without touching the network; ``Backends.start``
migrates the store and, for the in-process index, rebuilds it from the store (invariant 1:
the index is a copy). Everything else in podium receives ports, never adapters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from podium.api.ratelimit import Buckets, ReadLimiter
from podium.archive import FileArchive
from podium.config import Settings
from podium.errors import ConfigError, Unavailable
from podium.index.split import SplitIndex
from podium.ports import (
    ChangeLog,
    Clock,
    Outbox,
    ProfileCopy,
    RankIndex,
    ScoreStore,
    Snapshots,
    SystemClock,
)
from podium.ranking import Ranking
from podium.service import Service
from podium.workers import aggregator, reconciler
from podium.workers.relay import Relay
from podium.workers.runner import Runner
from podium.workers.updater import BacklogMonitor, ProfileCopier, Updater

log = logging.getLogger("podium")

ROLES = ("relay", "updater", "aggregator", "freezer", "reconciler")
PLANNED_ROLES: tuple[str, ...] = ()
FREEZER_PERIOD_S = 5.0  # how often the freezer looks for windows that are due
PROFILE_CHECK_S = 5.0  # how often an updater checks that the index still holds its profiles


def _store(settings: Settings) -> ScoreStore:
    url, pools = settings.store.url, settings.store
    if settings.store.shards:
        # The home database (store.url) holds what is global; the shards hold the players.
        if not url.startswith(("postgresql://", "postgres://")):
            raise ConfigError("store.url: a store split by player needs a postgresql:// home")
        from podium.store.split import SplitStore

        return SplitStore.from_urls(
            url, settings.store.shards, pools.pool_size, pools.read_pool_size
        )
    if url.startswith("sqlite:///"):
        from podium.store.sqlite import SqliteStore

        return SqliteStore.from_url(url)
    from podium.store.postgres import PostgresStore

    return PostgresStore.from_url(
        url, pool_size=pools.pool_size, read_pool_size=pools.read_pool_size
    )


@dataclass(frozen=True)
class IndexParts:
    """The rank index and what its adapters keep beside it: the copy of profiles, the
    aggregator's snapshots, and on a split index its shards (None on a single one)."""

    index: RankIndex
    copy: ProfileCopy
    snapshots: Snapshots
    split: SplitIndex | None


def _index(settings: Settings, clock: Clock) -> IndexParts:
    url, n, prefix = settings.index.url, settings.index.shards, settings.index.prefix
    if url.startswith("memory://"):
        from podium.index.memory import MemoryIndex
        from podium.index.memory_snapshots import MemorySnapshots

        if n == 1:
            memory = MemoryIndex(clock.now)
            return IndexParts(memory, memory.copy, MemorySnapshots(clock.now), None)
        parts = [MemoryIndex(clock.now) for _ in range(n)]
        split = SplitIndex(parts, copies=[p.copy for p in parts])
        assert split.copy is not None
        return IndexParts(split, split.copy, MemorySnapshots(clock.now), split)
    from podium.index.cluster import client_for, is_cluster_url, shard_indexes
    from podium.index.keys import Keys
    from podium.index.redis import RedisIndex
    from podium.index.redis_snapshots import RedisSnapshots

    if n == 1 and not is_cluster_url(url):  # one Redis, one shard: today's keys, untagged
        redis = RedisIndex.from_url(url, prefix=prefix)
        return IndexParts(redis, redis.copy, RedisSnapshots(redis.client, redis.keys), None)
    # A cluster is always split (one shard at least): a board and its copy of profiles
    # must share a slot, which only a shard's tag gives them (keys.py).
    client = client_for(url, read_from_replicas=settings.index.read_from_replicas)
    shards = shard_indexes(client, prefix, n)
    split = SplitIndex(shards, close=client.aclose, copies=[s.copy for s in shards])
    assert split.copy is not None
    return IndexParts(split, split.copy, RedisSnapshots(client, Keys(prefix)), split)


def read_limiter(settings: Settings) -> Buckets:
    """The read buckets (``server.read_limiter``): this process's, or the fleet's in the
    index's Redis. "auto" shares them wherever the index is a Redis."""
    server, url = settings.server, settings.index.url
    redis = url.startswith(("redis://", "rediss://", "redis+cluster://", "rediss+cluster://"))
    if server.read_limiter == "redis" and not redis:
        raise ConfigError("server.read_limiter: redis needs index.url = redis://...")
    if server.read_rate_per_s <= 0 or server.read_limiter == "process" or not redis:
        return ReadLimiter(server.read_rate_per_s, server.read_burst)
    from podium.index.ratelimit import RedisReadLimiter

    return RedisReadLimiter.from_url(
        url, settings.index.prefix, server.read_rate_per_s, server.read_burst
    )


def _log(settings: Settings, store: ScoreStore, clock: Clock) -> ChangeLog:
    if settings.log.url.startswith("nats://"):
        from podium.log.events import source_of
        from podium.log.nats import NatsLog

        databases: Callable[[], Awaitable[Mapping[str, Outbox]]]
        if settings.store.shards:
            from podium.store.split import SplitStore

            assert isinstance(store, SplitStore)
            split = store

            # Each database's own outbox, relayed under a lease of its own; the list is
            # asked for at every step, since a bucket can move to a database not yet seen.
            async def every() -> Mapping[str, Outbox]:
                return {source_of(u): o for u, o in (await split.outboxes()).items()}

            databases = every
        else:
            one: Mapping[str, Outbox] = {source_of(settings.store.url): store}

            async def just_one() -> Mapping[str, Outbox]:
                return one

            databases = just_one
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
    snapshots: Snapshots
    split: SplitIndex | None
    _runners: list[Runner] = field(default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def in_process_index(self) -> bool:
        return self.settings.index.url.startswith("memory://")

    async def start(self) -> None:
        await self.store.migrate()
        if self.in_process_index:
            n = await self.podium.rebuilds.rebuild_live()
            p = await self.podium.rebuilds.copy_profiles()
            log.info("in-process index rebuilt from the store: %d entries, %s profiles", n, p)

    def start_roles(self, roles: Sequence[str]) -> None:
        w = self.settings.workers
        for role in roles:
            if role == "relay":
                self._runners.append(
                    Runner("relay", Relay(self.log, w.batch).step, idle_sleep_s=w.idle_sleep_s)
                )
            elif role == "updater":
                up = Updater(self.settings, self.store, self.index, self.copy, self.log, self.clock)
                mon = BacklogMonitor(self.store, self.clock)
                self._runners.append(
                    Runner("updater", up.step, idle_sleep_s=w.idle_sleep_s, full=w.batch)
                )
                self._runners.append(Runner("backlog", mon.step, idle_sleep_s=1.0))
                copier = ProfileCopier(self.podium.rebuilds.copy_profiles, self.copy)
                self._runners.append(Runner("profiles", copier.step, idle_sleep_s=PROFILE_CHECK_S))
            elif role == "aggregator":
                if self.split is None or self.split.shard_count == 1:
                    # One shard is the whole board: its reads are exact without a merge.
                    log.info("aggregator: the index is not split across shards; not started")
                    continue
                agg = aggregator.Aggregator(
                    self.settings, self.split.shards, self.snapshots, self.clock
                )
                self._runners.append(
                    Runner("aggregator", agg.step, idle_sleep_s=aggregator.PERIOD_S, full=1 << 30)
                )
            elif role == "freezer":
                step = self.podium.lifecycle.freeze_due
                self._runners.append(Runner("freezer", step, idle_sleep_s=FREEZER_PERIOD_S))
            elif role == "reconciler":
                rec = reconciler.Reconciler(self.settings, self.store, self.index, self.clock)
                self._runners.append(
                    Runner("reconciler", rec.step, idle_sleep_s=reconciler.PERIOD_S, full=1 << 30)
                )
            elif role in PLANNED_ROLES:
                raise ConfigError(f"role {role!r} is not built yet (available: {', '.join(ROLES)})")
            else:
                raise ConfigError(f"unknown role {role!r} (available: {', '.join(ROLES)})")
        self._tasks += [asyncio.create_task(r.run(), name=r.role) for r in self._runners]

    async def replay(self, since_s: float) -> int:
        """Apply once more everything the log committed in the last ``since_s`` seconds
        (``podium worker --roles updater --replay-since``), before the roles start: what
        mends a board whose index lost writes. Returns how many changes were applied."""
        w = self.settings.workers
        view = await self.log.replay(self.clock.now() - since_s)
        up = Updater(self.settings, self.store, self.index, self.copy, view, self.clock)
        applied, backoff = 0, 0.05
        try:
            while True:
                try:
                    done = await up.step()
                except Unavailable as e:
                    log.warning("replay: %s; retrying in %.2fs", e, backoff)
                    await asyncio.sleep(backoff)
                    backoff = min(5.0, backoff * 2)
                    continue
                applied += done
                if done < max(1, w.batch):
                    break
        finally:
            await view.close()
        log.info("replayed %d changes of the last %.0fs", applied, since_s)
        return applied

    async def close(self) -> None:
        for r in self._runners:
            r.stop()
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=5)
            for t in pending:
                t.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await t
        await self.log.close()
        await self.read_limiter.close()
        await self.index.close()
        await self.store.close()


def build(settings: Settings, clock: Clock | None = None) -> Backends:
    clock = clock or SystemClock()
    store = _store(settings)
    parts = _index(settings, clock)
    changes = _log(settings, store, clock)
    archive = FileArchive(settings.archive.dir)
    ranking = None if parts.split is None else Ranking(parts.split, parts.snapshots, clock)
    podium = Service.wire(settings, store, parts.index, parts.copy, clock, archive, ranking)
    limiter = read_limiter(settings)
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
    )
