"""The one way podium holds a value in memory for a while: a bounded map with a time to live,
and a refill that runs once however many readers miss at the same time.

Every cache in podium (pages, snapshots, frozen windows, keys, names, encoded bodies) is one of
these, each with its bound stated where it is made, so that none grows without limit and none
has a policy of its own. Every entry lives the cache's one time to live, read from the clock the
cache is given (so fake clocks in tests move it); a full cache drops what was written longest
ago, which with one time to live is also what expires first. A plain dict in write order does
it: a hit costs one lookup and one clock read. (``cachetools.TTLCache`` was tried here first: its
bookkeeping made a hit twelve times dearer, 1.3 against 0.11 us, on names read by the hundred.)

A refill (``get_or_load``) is single-flight: the first reader that misses starts the load and the
others wait on it; a reader that goes away (its client hung up) does not cancel the load the
others wait on. A failed load is not kept: every waiter gets the error and the next read tries
again. A ``forget`` during a load keeps that load's answer out of the cache, since it may have
been read before the change it was told of.

A time to live of zero holds nothing, and still shares the loads: readers that miss at the
same time wait on one (a page with ``server.page_cache_s = 0``).

A cache made with ``refresh_ahead_s`` starts the next load (the same single flight) when a
reader finds its value that close to expiring, and answers that reader, and the next ones,
from the value it holds while the load runs: none is ever answered past its time to live,
and on a store slow to answer the readers stop queueing behind the load each time a value
expires (a match's list of tournaments and frozen windows, held 1 s, took about 1 s to load
on a link of 400 ms a round trip: docs/faults.md, the slow and lossy network).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Cache(Generic[K, V]):
    def __init__(
        self,
        maxsize: int,
        ttl_s: float,
        timer: Callable[[], float],
        refresh_ahead_s: float = 0.0,
    ) -> None:
        if maxsize < 1 or ttl_s < 0 or not 0 <= refresh_ahead_s <= ttl_s:
            raise ValueError(
                "a cache holds at least one entry, for no negative time, and loads again "
                "ahead within that time"
            )
        self.maxsize = maxsize
        self.ttl_s = ttl_s
        self.refresh_ahead_s = refresh_ahead_s
        self._timer = timer
        self._held: dict[K, tuple[float, V]] = {}  # in write order: key -> (expires, value)
        self._loading: dict[K, asyncio.Future[V]] = {}

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, key: K) -> bool:
        hit = self._held.get(key)
        return hit is not None and hit[0] > self._timer()

    def get(self, key: K) -> V | None:
        """The value held for ``key`` if it has not expired, else None."""
        hit = self._held.get(key)
        if hit is not None and hit[0] > self._timer():
            return hit[1]
        return None

    def put(self, key: K, value: V) -> None:
        if self.ttl_s == 0:  # a cache set to hold nothing (its loads are still shared)
            return
        held = self._held
        now = self._timer()
        held.pop(key, None)  # written again: it moves to the end, as its expiry does
        while len(held) >= self.maxsize:
            oldest = next(iter(held))  # written longest ago: expired, or the first to expire
            del held[oldest]
        held[key] = (now + self.ttl_s, value)

    def forget(self, key: K) -> None:
        """Drop ``key`` and keep a load already running for it from caching its answer."""
        self._held.pop(key, None)
        self._loading.pop(key, None)

    def clear(self) -> None:
        self._held.clear()
        self._loading.clear()

    async def get_or_load(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        """The held value, or the one ``load`` gives, loaded once for every reader that
        asks while it runs; with ``refresh_ahead_s``, the held value while the next load
        runs."""
        hit = self._held.get(key)
        if hit is not None:
            left = hit[0] - self._timer()
            if left > 0:
                if left <= self.refresh_ahead_s and key not in self._loading:
                    self._start(key, load)
                return hit[1]
        running = self._loading.get(key)
        if running is None:
            running = self._start(key, load)
        return await asyncio.shield(running)

    def _start(self, key: K, load: Callable[[], Awaitable[V]]) -> asyncio.Future[V]:
        running = asyncio.ensure_future(self._load(key, load))
        self._loading[key] = running
        # Retrieve a failure even when every reader went away (or none waits: a load ahead),
        # so it is not logged as never retrieved; the readers waiting get it all the same.
        running.add_done_callback(lambda f: f.cancelled() or f.exception())
        return running

    async def _load(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        me = asyncio.current_task()
        try:
            value = await load()
        finally:
            mine = self._loading.get(key) is me
            if mine:
                del self._loading[key]
        if mine:  # not forgotten meanwhile
            self.put(key, value)
        return value
