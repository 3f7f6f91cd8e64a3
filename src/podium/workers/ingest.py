"""The ingest role: finished matches read from each ``[[ingest]]`` topic and recorded as the
HTTP route records them (``service/ingest.py``), one runner per table.

A step takes a batch of records and records them concurrently, one match id at a time (a
record seen twice in a batch waits for the first: the second is then a replay that changes
nothing). Progress is committed only after the store committed: per partition, over the
records done with no record not done before them; refused records go to the dead-letter
topic first, then the commit. A record that met an outage or a bug is read again (``rewind``)
with every record after it in its partition, so nothing is skipped, and what was recorded
meanwhile is recorded again as a replay, which counts once. A process killed at any point
loses nothing (the commit is behind the store) and doubles nothing (the match's claim and the
idempotency key ``(player_id, match_id)``). A record dead-lettered just before a crash may
reach the dead-letter topic twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from podium import metrics
from podium.config.ingest import IngestTable
from podium.ports.ingest import FeedRecord, MatchFeed
from podium.service.ingest import Ingest
from podium.workers.runner import Needs, Runner

log = logging.getLogger("podium.workers")

CONCURRENCY = 32  # matches recorded at once by one topic's runner
LAG_EVERY_S = 5.0  # how often the lag is read from the brokers (two requests a partition)


def not_needed(n: Needs) -> str | None:
    return None if n.settings.ingest else "no [[ingest]] topic in the settings"


class IngestTopic:
    def __init__(self, table: IngestTable, feed: MatchFeed, ingest: Ingest, batch: int) -> None:
        self._table = table
        self._feed = feed
        self._ingest = ingest
        self._batch = batch
        self._lag_at = 0.0
        self._lag_parts: set[int] = set()

    async def step(self) -> int:
        # The key first: without a live one nothing is read, so nothing is refused for it.
        key = await self._ingest.key(self._table.key)
        records = await self._feed.poll(self._batch)
        if records:
            await self._record(key, records)
        await self._report_lag()
        return len(records)

    async def _record(self, key: Any, records: list[FeedRecord]) -> None:
        outcome: dict[tuple[int, int], dict[str, Any] | None] = {}
        chains: dict[tuple[int, bytes | None], list[FeedRecord]] = {}
        for r in records:  # a match's records stay in their order, one after the other
            chains.setdefault((r.partition, r.key), []).append(r)
        gate = asyncio.Semaphore(CONCURRENCY)

        async def chain(rs: list[FeedRecord]) -> None:
            for r in rs:
                async with gate:
                    outcome[r.partition, r.offset] = await self._ingest.take(key, r.key, r.value)

        got = await asyncio.gather(*(chain(c) for c in chains.values()), return_exceptions=True)
        error = next((e for e in got if isinstance(e, BaseException)), None)
        if isinstance(error, asyncio.CancelledError):
            raise error
        done, pending = _split(records, outcome)
        refused = [(r, p) for r in done if (p := outcome[r.partition, r.offset]) is not None]
        try:
            await self._feed.reject(refused)
            await self._feed.commit(done)
        except BaseException:
            await self._feed.rewind(records)  # all of it again: recorded ones are replays
            raise
        await self._feed.rewind(pending)
        topic = self._table.topic
        metrics.INGEST_RECORDS.labels(topic, "recorded").inc(len(done) - len(refused))
        metrics.INGEST_RECORDS.labels(topic, "rejected").inc(len(refused))
        for r, problem in refused:
            metrics.INGEST_REJECTED.labels(topic, str(problem["status"])).inc()
            log.info(
                "ingest %s: record %d@%d (match %r) refused, sent to %s: %s",
                topic, r.offset, r.partition, _shown(r.key),
                self._table.dead_letter_topic, problem["detail"],
            )  # fmt: skip
        if error is not None:
            raise error

    async def _report_lag(self) -> None:
        now = time.monotonic()
        if now - self._lag_at < LAG_EVERY_S:
            return
        self._lag_at = now
        lag = await self._feed.lag()
        t = self._table
        for p in self._lag_parts - set(lag):  # read by another process now: its to say
            metrics.INGEST_LAG.remove(t.topic, t.group, str(p))
        for p, n in lag.items():
            metrics.INGEST_LAG.labels(t.topic, t.group, str(p)).set(n)
        self._lag_parts = set(lag)


def _split(
    records: Sequence[FeedRecord], outcome: dict[tuple[int, int], Any]
) -> tuple[list[FeedRecord], list[FeedRecord]]:
    """The records done with no record not done before them in their partition (safe to
    commit), and the rest (to read again)."""
    done: list[FeedRecord] = []
    pending: list[FeedRecord] = []
    stuck: set[int] = set()
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        if r.partition not in stuck and (r.partition, r.offset) in outcome:
            done.append(r)
        else:
            stuck.add(r.partition)
            pending.append(r)
    return done, pending


def _shown(key: bytes | None) -> str | None:
    return None if key is None else key.decode(errors="replace")[:80]


def runners(n: Needs) -> list[Runner]:
    if n.ingest is None:
        return []
    w = n.settings.workers
    return [
        Runner(
            "ingest",
            IngestTopic(table, feed, n.ingest, w.batch).step,
            idle_sleep_s=w.idle_sleep_s,
            full=w.batch,
        )
        for table, feed in n.feeds
    ]
