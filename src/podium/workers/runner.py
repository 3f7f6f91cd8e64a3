"""The loop every worker role shares: do a step, back off on outages, stop cleanly; and
``Needs``, what every role is given to make its runners (``roles.py`` holds the roles).

A step returns how much work it did; a role that did a full batch loops at once, one that
did less sleeps a little, so that under a steady trickle the work is taken in batches (one
claim per ``idle_sleep_s``) rather than a transaction per change.

An ``Unavailable`` backend is expected (a restart, a failover) and is retried with capped
exponential backoff; anything else is a bug, logged with its traceback and retried
the same way so that one bad message cannot kill the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from podium import metrics
from podium.config.ingest import IngestTable
from podium.config.settings import Settings
from podium.config.topology import Topology
from podium.errors import Unavailable
from podium.ports import (
    BoardMarks,
    ChangeLog,
    Clock,
    Marking,
    ProfileCopy,
    RankIndex,
    ScoreStore,
    ShardIndex,
    Snapshots,
)
from podium.ports.archive import ResultFiles
from podium.ports.generations import Generations
from podium.ports.ingest import MatchFeed
from podium.service.erasure import Erasures
from podium.service.ingest import Ingest
from podium.service.leagues import Leagues
from podium.service.lifecycle import Lifecycle
from podium.util.aio import waited_for

log = logging.getLogger("podium.workers")

# How long a long-running process (serve, worker) started while its store does not answer
# (a database restarting, a failover, a fleet started in any order) waits for it, as its
# roles wait out an outage; a one-shot command says it at once.
START_WAIT_S = 120.0


class Runner:
    def __init__(
        self,
        role: str,
        step: Callable[[], Awaitable[int]],
        *,
        idle_sleep_s: float = 0.01,
        max_backoff_s: float = 5.0,
        full: int = 1,
        paced: bool = False,
    ) -> None:
        self.role = role
        self._step = step
        self._idle = idle_sleep_s
        self._max_backoff = max_backoff_s
        self._full = full  # a step that did at least this much may have left more behind
        # paced: steps begin every idle_sleep_s (the sleep is what the step left of it), not
        # idle_sleep_s after the last one ended
        self._paced = paced
        self._stop = asyncio.Event()
        self.last_loop: float | None = None  # when its loop last began (workers/heartbeats.py)

    @property
    def every_s(self) -> float:
        """The longest a healthy loop sleeps between two steps (not counting backoff)."""
        return self._idle

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        backoff = 0.0
        while not self._stop.is_set():
            self.last_loop = time.time()
            metrics.WORKER_HEARTBEAT.labels(self.role).set(self.last_loop)
            began = time.monotonic()
            try:
                done = await self._step()
                backoff = 0.0
            except asyncio.CancelledError:
                raise
            except Unavailable as e:
                metrics.WORKER_ERRORS.labels(self.role).inc()
                backoff = min(self._max_backoff, max(0.05, backoff * 2))
                log.warning("%s: %s; retrying in %.2fs", self.role, e, backoff)
                await self._sleep(backoff)
                continue
            except Exception:
                metrics.WORKER_ERRORS.labels(self.role).inc()
                backoff = min(self._max_backoff, max(0.05, backoff * 2))
                log.exception("%s: step failed; retrying in %.2fs", self.role, backoff)
                await self._sleep(backoff)
                continue
            if done < self._full:
                left = self._idle - (time.monotonic() - began) if self._paced else self._idle
                await self._sleep(max(0.0, left))

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)


@dataclass(frozen=True)
class Needs:
    """What a role may take to make its runners: ports, never adapters (bootstrap fills it)."""

    settings: Settings
    store: ScoreStore
    index: RankIndex
    copy: ProfileCopy
    log: ChangeLog
    clock: Clock
    snapshots: Snapshots
    shards: Sequence[ShardIndex]  # a split index's shards; empty when it is not split
    lifecycle: Lifecycle  # the service's own, so a freeze is seen by its reads at once
    fill_profiles: Callable[[], Awaitable[int | None]]  # the store's profiles into the copy
    topology: Topology  # what the deployment is made of (config/topology.py)
    result_files: ResultFiles  # where the pruner moves results past the retention
    # The index's generation markers (None: the in-process index has none), and every live
    # window refilled from the store: what the mender (workers/mender.py) needs.
    generations: Generations | None = None
    rebuild_live: Callable[[], Awaitable[int]] | None = None
    leagues: Leagues | None = None  # league boards: their cohorts' freeze (freezer.py)
    # [[ingest]]: each table's topic, and the use case that records its matches (ingest.py)
    feeds: Sequence[tuple[IngestTable, MatchFeed]] = ()
    ingest: Ingest | None = None
    erasures: Erasures | None = None  # players' erasures, carried out (eraser.py)
    # every store database's outbox by its name, where board marks are written (marker.py)
    marking: Callable[[], Awaitable[Mapping[str, Marking]]] | None = None
    marks: BoardMarks | None = None  # where the updaters note the marks they apply


async def migrated(store: ScoreStore, wait_s: float) -> None:
    """The store's schema brought up to date, a store that does not answer waited for
    ``wait_s`` (``START_WAIT_S`` in a long-running process), each try said in the log."""
    await waited_for(store.migrate, wait_s, "the store does not answer at start")
