"""The one way podium holds a value in memory for a while: a bounded map with a time to live,
and a refill that runs once however many readers miss at the same time.

Every cache in podium (pages, snapshots, frozen windows, keys, names, encoded bodies) is one of
these, each with its bound stated where it is made, so that none grows without limit and none
has a policy of its own. ``cachetools.TTLCache`` keeps the bound (least recently used entries go
first) and the expiry, read from the clock the cache is given, so fake clocks in tests move it.

A refill (``get_or_load``) is single-flight: the first reader that misses starts the load and the
others wait on it; a reader that goes away (its client hung up) does not cancel the load the
others wait on. A failed load is not kept: every waiter gets the error and the next read tries
again. A ``forget`` during a load keeps that load's answer out of the cache, since it may have
been read before the change it was told of.

A time to live of zero holds nothing, and still shares the loads: readers that miss at the
same time wait on one (a page with ``server.page_cache_s = 0``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from cachetools import TTLCache

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Cache(Generic[K, V]):
    def __init__(self, maxsize: int, ttl_s: float, timer: Callable[[], float]) -> None:
        if maxsize < 1 or ttl_s < 0:
            raise ValueError("a cache holds at least one entry, for no negative time")
        self.maxsize = maxsize
        self.ttl_s = ttl_s
        self._held: TTLCache[K, V] = TTLCache(maxsize, ttl_s, timer=timer)
        self._loading: dict[K, asyncio.Future[V]] = {}

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, key: K) -> bool:
        return key in self._held

    def get(self, key: K) -> V | None:
        """The value held for ``key`` if it has not expired, else None."""
        return self._held.get(key)

    def put(self, key: K, value: V) -> None:
        self._held[key] = value

    def forget(self, key: K) -> None:
        """Drop ``key`` and keep a load already running for it from caching its answer."""
        self._held.pop(key, None)
        self._loading.pop(key, None)

    def clear(self) -> None:
        self._held.clear()
        self._loading.clear()

    async def get_or_load(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        """The held value, or the one ``load`` gives, loaded once for every reader that
        asks while it runs."""
        try:
            return self._held[key]
        except KeyError:
            pass
        running = self._loading.get(key)
        if running is None:
            running = asyncio.ensure_future(self._load(key, load))
            self._loading[key] = running
            # Retrieve a failure even when every reader went away, so it is not logged as
            # never retrieved; the readers still waiting get it all the same.
            running.add_done_callback(lambda f: f.cancelled() or f.exception())
        return await asyncio.shield(running)

    async def _load(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        me = asyncio.current_task()
        try:
            value = await load()
        finally:
            mine = self._loading.get(key) is me
            if mine:
                del self._loading[key]
        if mine:  # not forgotten meanwhile
            self._held[key] = value
        return value
