"""Names and avatars for board entries, held in memory for a few seconds.

Every page and rank shows names, so without a cache each read pays a store round trip for
them (most of an embedded rank read's time, measured in BENCHMARKS.md). A name change shows
at once in the process that made it and within ``TTL_S`` in every other process.

The names a cache does not hold are read in batches: every read that needs names in the same
turn of the event loop waits on one store query for all of them, and a name already being
read is not asked for twice. Under 500 rank reads/s on a board of 100,000 players most names
are misses; one query each kept the reads' connection pool so busy that a read waited for a
connection at the 99th percentile longer than it took in all (BENCHMARKS.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from podium.domain.models import Profile
from podium.ports import Clock, Players
from podium.util.caching import Cache

TTL_S = 5.0
# Names held, each for TTL_S: twice the players of the largest board BENCHMARKS.md reads
# (100,000); past the bound the ones written longest ago go first, so memory stays flat.
MAX_ENTRIES = 200_000
# Held for a player with no profile yet, so that they are not asked for on every read; no
# player has an empty id.
_NO_PROFILE = Profile("")

Batch = asyncio.Future[dict[str, Profile]]


class ProfileCache:
    def __init__(self, store: Players, clock: Clock) -> None:
        self._store = store
        # The entries, in the one cache helper (its bound, expiry and clock); the misses are
        # not its per-key ``get_or_load`` but one batch per turn, read below.
        self._held: Cache[str, Profile] = Cache(MAX_ENTRIES, TTL_S, clock.now)
        self._queued: list[str] = []  # the ids of the next batch, read at the end of this turn
        self._next: Batch | None = None
        self._loading: dict[str, Batch] = {}  # id -> the batch that reads it (queued or running)
        self._loads: set[asyncio.Task[None]] = set()
        # A batch that started before a player's profile changed must not cache what it read
        # for them: ``forget`` stamps the player, and a batch caches only older stamps.
        self._changes = 0
        self._changed: dict[str, int] = {}

    async def get(self, player_ids: Sequence[str]) -> dict[str, Profile]:
        out: dict[str, Profile] = {}
        waits: dict[int, Batch] = {}
        for p in player_ids:
            hit = self._held.get(p)
            if hit is not None:
                if hit is not _NO_PROFILE:
                    out[p] = hit
                continue
            batch = self._loading.get(p) or self._enqueue(p)
            waits[id(batch)] = batch
        for batch in waits.values():
            # Shielded: a reader that goes away (its client hung up) must not cancel the
            # query the others are waiting on.
            found = await asyncio.shield(batch)
            out.update((p, found[p]) for p in player_ids if p in found)
        return out

    def forget(self, player_id: str) -> None:
        self._held.forget(player_id)
        self._loading.pop(player_id, None)
        self._changes += 1
        self._changed[player_id] = self._changes

    def _enqueue(self, player_id: str) -> Batch:
        if self._next is None:
            loop = asyncio.get_running_loop()
            self._next = loop.create_future()
            # Retrieve a failure even when every reader went away, so it is not logged
            # as never retrieved; the readers still waiting get it all the same.
            self._next.add_done_callback(lambda f: f.cancelled() or f.exception())
            loop.call_soon(self._flush)
        self._queued.append(player_id)
        self._loading[player_id] = self._next
        return self._next

    def _flush(self) -> None:
        ids, batch = self._queued, self._next
        self._queued, self._next = [], None
        assert batch is not None
        task = asyncio.get_running_loop().create_task(self._load(ids, batch))
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)

    async def _load(self, ids: list[str], batch: Batch) -> None:
        started = self._changes
        try:
            found = await self._store.profiles(ids)
        except asyncio.CancelledError:  # shutting down
            self._done(ids, batch)
            batch.cancel()
            raise
        except Exception as e:  # the readers get it; the next read tries again
            self._done(ids, batch)
            batch.set_exception(e)
            return
        for p in ids:
            if self._changed.get(p, 0) <= started:
                self._held.put(p, found.get(p, _NO_PROFILE))  # absent ones too
        self._done(ids, batch)
        batch.set_result(found)

    def _done(self, ids: list[str], batch: Batch) -> None:
        for p in ids:
            if self._loading.get(p) is batch:
                del self._loading[p]
        if len(self._loads) <= 1:  # this one: no load is left that started before the changes
            self._changed.clear()
