"""Which database a player (or a match id) lives on: the ``Router`` every port of the split
store shares, the one owner of the databases and the bucket map.

The home database holds the bucket map (``bucket_map``: bucket -> database URL, 4,096 rows,
``domain.sharding.bucket_of``), read at start and cached; ``refresh_map`` reads it again
(a move of a bucket says when). Every database is a ``PostgresStore`` of its own, with its
own pools, retries and error table, so a driver error is already a ``podium.errors`` one
when it gets here; everything the split runs on one is a method of it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

from podium.domain.sharding import BUCKETS, bucket_of
from podium.errors import ConfigError, StoreUnavailable, Unavailable
from podium.store.postgres import PostgresStore
from podium.store.postgres.errors import MOVED
from podium.util.aio import gather_all
from podium.util.redact import redact_url

log = logging.getLogger("podium.store")

T = TypeVar("T")
R = TypeVar("R")

# How long a process trusts its copy of the map before it reads it again: a write refused
# because its bucket moved reads it at once; reads learn of a move within this.
MAP_TTL_S = 5.0
# Tries of a write whose bucket moved meanwhile (the map read again between them), about
# 1.3 s in all: a bucket being copied refuses writes for that long at most, usually far less.
MOVE_TRIES = 7


def moved(e: BaseException) -> bool:
    """Whether a store error is a write refused because the player's bucket moved away."""
    return isinstance(e, StoreUnavailable) and getattr(e.__cause__, "sqlstate", None) == MOVED


# An outbox row's handle here is (database index << 48) | its row id on that database
# (``outbox.py``), so a process has at most 2**15 databases.
HANDLE_BITS = 48


def initial_map(shards: Sequence[str]) -> list[str]:
    """The first assignment of buckets: round robin over the shards as configured."""
    return [shards[b % len(shards)] for b in range(BUCKETS)]


class Router:
    """The databases, the bucket map, and routing by player or match id."""

    def __init__(
        self,
        home: str,
        shards: Sequence[str],
        *,
        pool_size: int = 10,
        read_pool_size: int = 10,
        timeout_s: float = 2.0,
        command_timeout_s: float = 10.0,
    ) -> None:
        if not shards:
            raise ConfigError("store.shards: a split store needs at least one database")
        for url in (home, *shards):
            if not url.startswith(("postgresql://", "postgres://")):
                raise ConfigError(f"store.shards: {redact_url(url)!r} is not a postgresql:// URL")
        self._pool_sizes = (pool_size, read_pool_size)
        self._timeouts = (timeout_s, command_timeout_s)
        self._home_url = home
        self._shard_urls = list(dict.fromkeys(shards))
        self._dbs: dict[str, PostgresStore] = {}
        self._index: dict[str, int] = {}
        self._map: list[str] | None = None
        self._moving: set[str] = set()  # databases a bucket is being copied to
        self._loaded = 0.0  # when the map was read (monotonic)
        self._loading = asyncio.Lock()
        self.erasure_secret = ""  # given to every database's store (store/split/erasure.py)
        for url in (home, *self._shard_urls):
            self.db(url)

    # -- the databases ------------------------------------------------------------------

    def db(self, url: str) -> PostgresStore:
        """The store of one database, made on first use (a bucket moved to a database this
        process was not configured with is found through the map)."""
        found = self._dbs.get(url)
        if found is None:
            if len(self._index) >= 1 << (63 - HANDLE_BITS):
                raise ConfigError("store.shards: too many databases")
            pool, reads = self._pool_sizes
            timeout_s, command_s = self._timeouts
            found = self._dbs[url] = PostgresStore.from_url(
                url, pool, reads, timeout_s=timeout_s, command_timeout_s=command_s
            )
            # A claim here may stand for records on other databases: it waits for its flush.
            found.lazy_claims = False
            found.erasure_secret = self.erasure_secret
            if url != self._home_url:  # the generated key of the hashes is the home's
                found.erasure_keeper = self._dbs[self._home_url]
            self._index[url] = len(self._index)
        return found

    def urls_known(self) -> list[str]:
        """Every database this process has a store of."""
        return list(self._dbs)

    @property
    def home(self) -> PostgresStore:
        return self._dbs[self._home_url]

    @property
    def home_url(self) -> str:
        return self._home_url

    def urls(self) -> list[str]:
        """Every database that holds players (the configured shards and any the map names),
        in a stable order: what a read of every player asks."""
        named = self._map or []
        every = dict.fromkeys([*self._shard_urls, *named, *sorted(self._moving)])
        return sorted(every, key=self.db_index)

    def db_index(self, url: str) -> int:
        self.db(url)
        return self._index[url]

    def url_at(self, index: int) -> str:
        for url, i in self._index.items():
            if i == index:
                return url
        raise ValueError(f"no database {index}")

    async def close(self) -> None:
        await gather_all(db.close() for db in list(self._dbs.values()))

    async def ping(self) -> None:
        await self.ready()
        urls = dict.fromkeys([self._home_url, *self.urls()])
        await gather_all(self.db(u).ping() for u in urls)

    # -- the map ------------------------------------------------------------------------

    async def ready(self) -> list[str]:
        if self._map is None:
            async with self._loading:
                if self._map is None:
                    await self.refresh_map()
        elif time.monotonic() > self._loaded + MAP_TTL_S and not self._loading.locked():
            async with self._loading:
                try:
                    await self.refresh_map()
                except Unavailable:
                    # The home is down: the players' databases still answer by this copy.
                    self._loaded = time.monotonic()
                    log.warning("could not read the bucket map again", exc_info=True)
        assert self._map is not None
        return self._map

    async def routed(self, key: str, fn: Callable[[PostgresStore], Awaitable[T]]) -> T:
        """``fn`` on the database of ``key`` (a player or match id): if its bucket moved
        away meanwhile, the map is read again and ``fn`` runs where it now says."""
        await self.ready()
        for attempt in range(MOVE_TRIES):
            try:
                return await fn(self.of(key))
            except StoreUnavailable as e:
                if not moved(e) or attempt == MOVE_TRIES - 1:
                    raise
            await asyncio.sleep(0.01 * 2**attempt)
            await self.refresh_map()
        raise AssertionError("unreachable")

    async def refresh_map(self) -> list[str]:
        """Read the bucket map again from the home database (none yet: the first
        assignment, which ``migrate`` writes)."""
        found = initial_map(self._shard_urls)
        moving = set()
        for bucket, url, to in await self.home.bucket_map():
            found[bucket] = url
            if to is not None:
                moving.add(to)
        for url in sorted({*found, *moving}):
            self.db(url)
        self._map, self._moving, self._loaded = found, moving, time.monotonic()
        return found

    def url_of(self, key: str) -> str:
        """The database of a player id or a match id (after ``ready``)."""
        assert self._map is not None, "ready() first"
        return self._map[bucket_of(key)]

    def of(self, key: str) -> PostgresStore:
        return self.db(self.url_of(key))

    def by_db(self, ids: Iterable[str]) -> dict[str, list[str]]:
        """Player ids by the URL of their database, each list in the given order."""
        out: dict[str, list[str]] = {}
        for i in ids:
            out.setdefault(self.url_of(i), []).append(i)
        return out

    def owns(self, url: str, player_id: str) -> bool:
        """Whether ``url`` is where the map puts this player: a read of every database
        keeps only these rows, so a bucket being copied to another database is not
        counted twice."""
        return self.url_of(player_id) == url

    async def each(self, fn: Callable[[PostgresStore], Awaitable[T]]) -> dict[str, T]:
        """``fn`` on every database that holds players, in parallel, by URL."""
        await self.ready()
        urls = self.urls()
        return dict(zip(urls, await gather_all(fn(self.db(u)) for u in urls), strict=True))

    async def by_player(
        self, ids: Iterable[str], fn: Callable[[PostgresStore, list[str]], Awaitable[T]]
    ) -> list[T]:
        """``fn`` on each database with the ids (each once) that the map puts there, in
        parallel: a bucket being copied is read from its source until the map names the
        target."""
        await self.ready()
        groups = self.by_db(dict.fromkeys(ids))
        return await gather_all(fn(self.db(u), part) for u, part in groups.items())

    async def merged_pages(
        self,
        page: Callable[[PostgresStore, str], Awaitable[Sequence[R]]],
        player: Callable[[R], str],
        limit: int,
        after: str,
    ) -> list[R]:
        """One page of rows by player id across every database, each read in keyset pages
        of ``limit`` after ``after`` (``page(db, after)``): merged, each row kept only from
        the database the map puts its player on (``owns``), cut where the first full page
        ends (past it a database may have rows not read yet), and read on past a cut whose
        rows were all left out. Empty: there are no more."""
        await self.ready()
        while True:
            urls = self.urls()
            pages = await gather_all(page(self.db(u), after) for u in urls)
            full = [player(p[-1]) for p in pages if len(p) >= limit and p]
            cut = min(full) if full else None
            rows = [
                r
                for u, p in zip(urls, pages, strict=True)
                for r in p
                if self.owns(u, player(r)) and (cut is None or player(r) <= cut)
            ]
            rows.sort(key=player)
            if rows or cut is None:
                return rows[:limit]
            after = cut

    # -- schema -------------------------------------------------------------------------

    async def migrate(self) -> None:
        """Every database's own migrations, the split's (``sql/split``) on each, the
        home's (``sql/split_home``), and the first bucket map if there is none yet."""
        urls = list(dict.fromkeys([self._home_url, *self._shard_urls]))
        await gather_all(self.db(u).migrate() for u in urls)
        await gather_all(self.db(u).migrate_part("split") for u in urls)
        await self.home.migrate_part("split_home")
        await self.home.assign_buckets(initial_map(self._shard_urls))
        await self.refresh_map()


class Part:
    """One port of the split store, over the ``Router`` that every part shares; a part
    owns whatever else it keeps."""

    def __init__(self, router: Router) -> None:
        self.router = router
