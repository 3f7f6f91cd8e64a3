"""The pruner role: results older than ``[store] keep_results_days`` out of the store, into
a gzip CSV per UTC day of ``endedAt`` under ``[archive] dir`` (``archive/results.py``).

A day goes once the whole of it is past the retention (so from then on every result of it
is refused, ``Matches``), in two passes over the store's rows of that day: the first writes
the day file (the rows it held already merged with these, each key once) and makes it
durable; the second deletes, by primary key, the rows the file holds, ``PAGE`` at a time,
each batch a short transaction of its own that no record waits on. Killed anywhere, the
next pass writes the same file again from what it holds and what is left, so every pruned
result is in the archive exactly once. Window tallies, final standings and match claims
stay: board totals come from tallies, a match id stays claimed, and a retry of a pruned
result is refused by its ``endedAt`` before it could count again.

``podium archive results --before DATE`` runs the same passes by hand (``prune_before``).

Beside it, old reward and moderation events (``EventPruner``): those older than ``[store]
keep_events_days`` that are done with (every delivery delivered or failed, none pending; on
the stream too when NATS is the log), deleted with their deliveries, ``PAGE`` at a time.
An event still owed to anyone is never pruned, however old.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from podium.domain.retention import ResultKey, StoredResult, oldest_accepted, prunable
from podium.ports import Clock, Retention, WebhookEvents
from podium.ports.archive import ResultFiles
from podium.workers.runner import Needs, Runner

log = logging.getLogger("podium.workers")
T = TypeVar("T")

PERIOD_S = 300.0  # how often the pruner looks for a day (and events) past the retention
DAY_S = 86_400
PAGE = 1_000  # results per read and per delete transaction
DUTY = 0.5  # at most this share of the time on the store: a pause as long as each call

# (day start, results in its file, results deleted from the store) after each day
Progress = Callable[[int, int, int], None]


class Pruner:
    def __init__(
        self,
        store: Retention,
        files: ResultFiles,
        clock: Clock,
        keep_days: int,
        *,
        page: int = PAGE,
        duty: float = DUTY,
    ) -> None:
        self.store = store
        self.files = files
        self.clock = clock
        self.keep_days = keep_days
        self.page = page
        self.duty = duty

    async def step(self) -> int:
        """One pass: every day wholly past the retention out of the store. How many
        results it deleted."""
        before = oldest_accepted(self.clock.now(), self.keep_days)
        return 0 if before is None else await self.prune_before(before)

    async def prune_before(self, before: int, progress: Progress | None = None) -> int:
        """Every day that ends at or before ``before`` out of the store (none while another
        pruner holds this archive's lock: it is doing the same)."""
        lock = self.files.lock()
        if not await asyncio.to_thread(lock.acquire):
            log.info("pruner: another pruner holds %s; not pruning", self.files.where)
            return 0
        try:
            deleted = 0
            done: int | None = None  # the last day this pass pruned
            while (day := prunable(await self.store.oldest_result(), before)) is not None:
                if done is not None and day[0] <= done:
                    # Rows of a day just pruned are still there (a delete a bucket move
                    # refused): the next pass, once the move is over.
                    break
                archived, gone = await self.prune_day(*day)
                deleted += gone
                done = day[0]
                if progress is not None:
                    progress(day[0], archived, gone)
            return deleted
        finally:
            lock.release()

    async def prune_day(self, start: int, end: int) -> tuple[int, int]:
        """One day: its file written again with what the store holds of it, then those
        rows deleted. (results in the file, results deleted)."""
        writer = await asyncio.to_thread(self.files.day, start)
        try:
            after = None
            while page := await self._paced(self.store.results_ended(start, end, after, self.page)):
                await asyncio.to_thread(writer.add, page)
                after = page[-1].key
            await asyncio.to_thread(writer.finish)
        except BaseException:
            await asyncio.to_thread(writer.abort)
            raise
        holds = await asyncio.to_thread(writer.holds)
        deleted = 0
        after = None
        while page := await self._paced(self.store.results_ended(start, end, after, self.page)):
            after = page[-1].key
            keys = await asyncio.to_thread(_held, holds, page)
            deleted += await self._paced(self.store.delete_results(keys))
        log.info(
            "pruner: %s: %d results in %s (%d new), %d deleted from the store",
            writer.name,
            writer.count,
            self.files.where,
            writer.added,
            deleted,
        )
        return writer.count, deleted

    async def _paced(self, call: Awaitable[T]) -> T:
        """A call on the store, then a pause as long as it took (``duty``: the share of
        the store's time the pruner may take): a record that queued behind a batch (the
        SQLite writer, a Postgres connection, the one event loop) runs before the next."""
        started = time.monotonic()
        out = await call
        took = time.monotonic() - started
        if self.duty < 1.0:
            await asyncio.sleep(took * (1.0 - self.duty) / self.duty)
        return out


class EventPruner:
    """Old events out of the store, done with: ``fanned`` (webhooks are configured, so an
    event is done once its deliveries are made and settled) and ``published`` (NATS is the
    log, so it must be on the stream too)."""

    def __init__(
        self,
        store: WebhookEvents,
        clock: Clock,
        keep_days: int,
        *,
        fanned: bool,
        published: bool,
        page: int = PAGE,
    ) -> None:
        self.store = store
        self.clock = clock
        self.keep_days = keep_days
        self.fanned = fanned
        self.published = published
        self.page = page

    async def step(self) -> int:
        """Every event past the retention that is done with, a page at a time, each page a
        short transaction; how many went."""
        before = self.clock.now() - self.keep_days * DAY_S
        total = 0
        while True:
            started = time.monotonic()
            n = await self.store.prune_events(
                before, self.page, fanned=self.fanned, published=self.published
            )
            total += n
            if n < self.page:
                break
            await asyncio.sleep((time.monotonic() - started) * (1.0 - DUTY) / DUTY)
        if total:
            log.info("pruner: %d events older than %d days deleted", total, self.keep_days)
        return total


def _held(holds: Callable[[ResultKey], bool], page: list[StoredResult]) -> list[tuple[str, str]]:
    """The keys of the rows of a page that the day file holds."""
    return [(r.player_id, r.match_id) for r in page if holds(r.key)]


def not_needed(n: Needs) -> str | None:
    store = n.settings.store
    if store.keep_results_days == 0 and store.keep_events_days == 0:
        return "store.keep_results_days = 0 and keep_events_days = 0 keep everything"
    return None


def runners(n: Needs) -> list[Runner]:
    store = n.settings.store
    out = []
    if store.keep_results_days:
        pruner = Pruner(n.store, n.result_files, n.clock, store.keep_results_days)
        out.append(Runner("pruner", pruner.step, idle_sleep_s=PERIOD_S, full=PAGE))
    if store.keep_events_days:
        events = EventPruner(
            n.store,
            n.clock,
            store.keep_events_days,
            fanned=bool(n.settings.webhooks),
            published=n.topology.events_published,
        )
        # It loops over its pages itself: one pass a period, whatever it did.
        out.append(Runner("event-pruner", events.step, idle_sleep_s=PERIOD_S, full=1 << 30))
    return out
