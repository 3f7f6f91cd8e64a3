"""The read side of a board split across index shards: the aggregator's snapshot, held.

On a split board (``index.shards > 1``) the top pages are slices of the snapshot that the
rank aggregator publishes about once a second (``workers/aggregator.py``), and a rank below
the snapshot's exact top may be estimated from its histogram: one read of the player's own
shard for their score, the rest from memory. Each API process reads a board window's
snapshot at most once per ``HOLD_S`` (one refill at a time, shared by every request that
wants it), so a thousand reads a second cost the snapshot store one read a second.

Everything that must be exact (a rank inside the top, with its neighbors; every rank of a
board that chose ``ranks_below_top = "exact"``) is counted on the shards themselves by the
split index (``index/split.py``), through the ``RankIndex`` port, as on one shard.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from podium import metrics
from podium.domain.boards import Below, BoardSpec
from podium.domain.histogram import Estimate
from podium.domain.snapshot import Snapshot
from podium.errors import NotFound
from podium.ports import BoardKey, Clock, Snapshots, SplitBoards

log = logging.getLogger("podium.reads")

HOLD_S = 1.0  # how long an API process keeps a snapshot before it reads it again


@dataclass(frozen=True, slots=True)
class Estimated:
    """A rank below the exact top, estimated (invariant 6 of docs/architecture.md): the true
    rank as of ``as_of`` lies in ``[estimate.low, estimate.high]``."""

    estimate: Estimate
    top_percent: float
    score: int
    as_of: float


class Ranking:
    def __init__(self, split: SplitBoards, snapshots: Snapshots, clock: Clock) -> None:
        self.split = split
        self.snapshots = snapshots
        self.clock = clock
        self._held: dict[BoardKey, tuple[float, Snapshot | None]] = {}
        self._refills: dict[BoardKey, asyncio.Future[Snapshot | None]] = {}
        self._not_before = float("-inf")  # snapshots older than this are passed over

    @property
    def active(self) -> bool:
        """More than one shard (the read side uses a ``Ranking`` only then): one shard is
        the whole board, every rank exact, as on a single index."""
        return self.split.shard_count > 1

    def forget(self, changed_at: float | None = None) -> None:
        """Read every snapshot again on its next use. With ``changed_at`` (a ban, a rebuild:
        the shards changed then), also pass over every snapshot made before it, which the
        aggregator counted before the change (a banned player still in its top): until it
        publishes a newer one, this process's reads count on the shards."""
        self._held.clear()
        if changed_at is not None:
            self._not_before = max(self._not_before, changed_at)

    async def snapshot(self, key: BoardKey) -> Snapshot | None:
        """The board window's snapshot as this process last read it (at most ``HOLD_S``
        ago), or None when the aggregator has published none that is still live (or none
        since the last change ``forget`` was told of)."""
        now = self.clock.now()
        hit = self._held.get(key)
        if hit is not None and hit[0] > now:
            return self._current(hit[1])
        refill = self._refills.get(key)
        if refill is None:
            refill = asyncio.ensure_future(self._read(key))
            self._refills[key] = refill
            refill.add_done_callback(lambda _: self._refills.pop(key, None))
        return self._current(await asyncio.shield(refill))

    def _current(self, snap: Snapshot | None) -> Snapshot | None:
        return snap if snap is not None and snap.as_of >= self._not_before else None

    async def _read(self, key: BoardKey) -> Snapshot | None:
        data = await self.snapshots.read(key)
        snap = None
        if data is not None:
            try:
                snap = Snapshot.decode(data)
            except (ValueError, KeyError, TypeError):
                # A snapshot of another release during an upgrade: read the shards instead.
                log.warning(
                    "snapshot of %s/%s unreadable: reading the shards", key.board, key.window
                )
        if len(self._held) > 1000:  # bounded: one entry per board window asked for
            self._held.clear()
        now = self.clock.now()
        self._held[key] = (now + HOLD_S, snap)
        if snap is not None:
            metrics.SNAPSHOT_AGE_SECONDS.labels(key.board).set(max(0.0, now - snap.as_of))
        return snap

    async def page(
        self, key: BoardKey, start: int, stop: int
    ) -> tuple[list[tuple[str, int]], float] | None:
        """Rows ``start..stop`` of the snapshot's top, and its ``asOf``; None without one."""
        snap = await self.snapshot(key)
        if snap is None:
            return None
        return list(snap.top[start : stop + 1]), snap.as_of

    async def inside(
        self, key: BoardKey, player_id: str, neighbors: int
    ) -> tuple[int, list[tuple[str, int]], float] | None:
        """A player in the snapshot's top, with neighbors that stay inside it: their 0-based
        rank, the rows around them and the snapshot's ``asOf``, exact as of then, without
        asking any shard. None when the snapshot cannot answer it alone."""
        snap = await self.snapshot(key)
        if snap is None:
            return None
        i = snap.position(player_id)
        if i is None or (i + neighbors >= len(snap.top) and not snap.whole):
            return None
        return i, list(snap.top[max(0, i - neighbors) : i + neighbors + 1]), snap.as_of

    async def estimated(self, spec: BoardSpec, key: BoardKey, player_id: str) -> Estimated | None:
        """The player's estimated rank when it falls below the snapshot's top of a board
        that estimates there; else None (count it exactly). ``NotFound`` when the player is
        not on the board."""
        if spec.ranks_below_top is not Below.ESTIMATED:
            return None
        snap = await self.snapshot(key)
        if snap is None or snap.histogram is None or snap.whole:
            return None
        score = (await self.split.scores(key, [player_id]))[0]
        if score is None:
            raise NotFound(f"player {player_id} is not on board {key.board} ({key.window})")
        if snap.ahead(player_id, score) is not None:
            return None  # inside the top after all: counted exactly
        return self.place(spec, snap, score)

    async def placed(
        self, spec: BoardSpec, key: BoardKey, player_ids: list[str]
    ) -> tuple[list[int | None], list[Estimated | int | None]] | None:
        """For the friends board: each player's score (from their own shard, one call per
        shard) and place by the snapshot: the exact 0-based rank inside the top (an int),
        an estimate below it, None when not on the board. None: count them exactly."""
        if spec.ranks_below_top is not Below.ESTIMATED:
            return None
        snap = await self.snapshot(key)
        if snap is None or snap.histogram is None:
            return None
        scores = await self.split.scores(key, player_ids)
        places: list[Estimated | int | None] = []
        for p, s in zip(player_ids, scores, strict=True):
            if s is None:
                places.append(None)
                continue
            ahead = snap.ahead(p, s)
            places.append(ahead if ahead is not None else self.place(spec, snap, s))
        return scores, places

    def at_least(self, spec: BoardSpec, snap: Snapshot, score: int) -> int:
        """About how many members hold ``score`` or more, as of the snapshot: counted in its
        top where the top reaches that far, estimated from its histogram below."""
        top, desc = snap.top, snap.descending
        inside = bool(top) and (top[-1][1] <= score if desc else top[-1][1] >= score)
        if inside or snap.whole or snap.histogram is None:
            if desc:
                return snap.top_at_least(score)  # all of them are in the top
            # asc: the top holds the lowest scores, so those below it are all in the top
            return snap.total - (len(top) - snap.top_at_least(score))
        h = snap.histogram
        if desc:  # ahead of a score just below it: every member at or above it
            n = h.estimate(score - 1, spec.codec).rank - 1
        else:  # ahead of it: every member strictly below it
            n = snap.total - (h.estimate(score, spec.codec).rank - 1)
        return max(0, min(snap.total, n))

    def place(self, spec: BoardSpec, snap: Snapshot, score: int) -> Estimated:
        """The estimate of a score below the snapshot's top (its caller checked that)."""
        assert snap.histogram is not None
        est = snap.histogram.estimate(score, spec.codec)
        # Below the exact top by the snapshot's own count: never shown above it.
        floor = len(snap.top) + 1
        est = Estimate(max(est.rank, floor), max(est.low, floor), max(est.high, floor))
        return Estimated(est, snap.histogram.top_percent(est.rank), score, snap.as_of)
