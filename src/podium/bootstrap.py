"""The one place that picks adapters by URL and wires them together.

``build(settings)`` creates the objects without touching the network; ``Backends.start``
migrates the store and, for the in-process index, rebuilds it from the store (invariant 1:
the index is a copy). Everything else in podium receives ports, never adapters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from podium.api.ratelimit import Buckets, ReadLimiter
from podium.archive import FileArchive
from podium.config import Settings
from podium.errors import ConfigError
from podium.ports import ChangeLog, Clock, ProfileCopy, RankIndex, ScoreStore, SystemClock
from podium.service import Podium
from podium.workers.relay import Relay
from podium.workers.runner import Runner
from podium.workers.updater import BacklogMonitor, ProfileCopier, Updater

log = logging.getLogger("podium")

ROLES = ("relay", "updater", "freezer")
PLANNED_ROLES = ("aggregator", "reconciler")
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


def _index(settings: Settings, clock: Clock) -> tuple[RankIndex, ProfileCopy]:
    """The rank index, and the copy of profiles that the same adapter keeps beside it."""
    url = settings.index.url
    if settings.index.shards != 1:
        raise ConfigError("index.shards: boards split across shards are not built yet; use 1")
    if url.startswith("memory://"):
        from podium.index.memory import MemoryIndex

        memory = MemoryIndex(clock.now)
        return memory, memory.copy
    if url.startswith("redis+cluster://"):
        raise ConfigError("index.url: Redis Cluster is not built yet; use redis://")
    from podium.index.redis import RedisIndex

    redis = RedisIndex.from_url(url, prefix=settings.index.prefix)
    return redis, redis.copy


def read_limiter(settings: Settings) -> Buckets:
    """The read buckets (``server.read_limiter``): this process's, or the fleet's in the
    index's Redis. "auto" shares them wherever the index is a Redis."""
    server, url = settings.server, settings.index.url
    redis = url.startswith(("redis://", "rediss://"))
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
        raise ConfigError("log.url: NATS JetStream is not built yet; use outbox://")
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
    podium: Podium
    read_limiter: Buckets
    _runners: list[Runner] = field(default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def in_process_index(self) -> bool:
        return self.settings.index.url.startswith("memory://")

    async def start(self) -> None:
        await self.store.migrate()
        if self.in_process_index:
            n = await self.podium.rebuild_live()
            p = await self.podium.copy_profiles()
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
                copier = ProfileCopier(self.podium.copy_profiles, self.copy)
                self._runners.append(Runner("profiles", copier.step, idle_sleep_s=PROFILE_CHECK_S))
            elif role == "freezer":
                step = self.podium.lifecycle.freeze_due
                self._runners.append(Runner("freezer", step, idle_sleep_s=FREEZER_PERIOD_S))
            elif role in PLANNED_ROLES:
                raise ConfigError(f"role {role!r} is not built yet (available: {', '.join(ROLES)})")
            else:
                raise ConfigError(f"unknown role {role!r} (available: {', '.join(ROLES)})")
        self._tasks += [asyncio.create_task(r.run(), name=r.role) for r in self._runners]

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
    index, copy = _index(settings, clock)
    changes = _log(settings, store, clock)
    archive = FileArchive(settings.archive.dir)
    podium = Podium(settings, store, index, copy, clock, archive)
    limiter = read_limiter(settings)
    return Backends(settings, store, index, copy, changes, clock, podium, limiter)
