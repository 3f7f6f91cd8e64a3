"""The rank aggregator: every half second, the exact merged top and the histogram of each live
board window split across shards, published as one snapshot every API process reads.

Each cycle asks every shard at once for its first ``exact_top`` rows, its member count and
its counts between the histogram's boundaries (its last counts and the moves since, and a
rotating slice counted: ``domain/recount.py``), merges the rows in the one board order
(``domain.boards.merge_in_board_order``) and publishes the first ``exact_top`` of them with
the summed histogram. About once a minute it also samples each shard's scores at the ranks
the histogram aims its boundaries at (``domain.histogram``), and moves the boundaries back
toward them; the counts are always taken at the current ones. Once a board has boundaries,
that planning runs beside the cycles (its samples read, its CPU in a thread): the cycles go on
counting at the old boundaries and switch to the new ones at the first cycle after they are
ready, so that a plan (2.8 s at 10 million players and 8,000 boundaries) never holds a
snapshot up. Cycles begin every ``PERIOD_S`` (a cycle that ran long is followed at once), so a
new score is in a snapshot within about a period and a cycle of its commit.

A shard that does not answer (``Unavailable``) is stood in for by its previous answer while
that is under ``PART_MAX_AGE_S`` old, and the snapshot's ``asOf`` is then the oldest part's
time; past that the aggregator publishes nothing for that board window, rather than a top
that silently leaves a shard's players out. Readers then see the last snapshot until it
expires (``SNAPSHOT_TTL_S``), and after that read the shards themselves.

One aggregator is active at a time: each step first takes or keeps the lease
(``Snapshots.lead``); a standby whose ``lead`` fails does nothing, and takes over within
``LEASE_S`` of the active one stopping. Every publish carries the fencing token of the
lease it was made under and the aggregator's own lease token, so one that wakes after losing
its lease publishes nothing: the index refuses the publish (``podium_snapshots_fenced``), and
its next ``lead`` finds the lease gone (``podium_lease_lost{role="aggregator"}``), each said in
the log.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

from podium import metrics
from podium.config.settings import Settings
from podium.domain.boards import Below, BoardSpec, board_key, merge_in_board_order
from podium.domain.changes import Changes
from podium.domain.histogram import MAX_BOUNDS, Histogram, plan_bounds, sample_ranks
from podium.domain.recount import applied, counted, rotating, runs
from podium.domain.snapshot import SNAPSHOT_TTL_S, Snapshot
from podium.domain.windows import Window
from podium.errors import Unavailable
from podium.ports import BoardKey, Clock, ShardIndex, Snapshots
from podium.workers.runner import Needs, Runner

log = logging.getLogger("podium.aggregator")

PERIOD_S = 0.5  # a cycle per live board window this often (from one's start to the next's)
LEASE_S = 5.0  # a standby takes over this long after the active aggregator stops
PART_MAX_AGE_S = 10.0  # how long a shard's previous answer may stand in for it
REPLAN_S = 60.0  # how often the histogram's boundaries are moved back toward their ranks
# Sooner when the board has drifted from its plan: a bucket holds more than twice what it or
# a neighbour held at the first count after the plan, and DRIFT_MIN more (buckets are
# rank-shaped, so the estimate's interval there is wider than planned; a gap between two
# points values that fills with fresh scores is not, while it stays narrower than them), at
# most once every REPLAN_MIN_S.
REPLAN_MIN_S = 10.0
DRIFT_MIN = 64
# Each shard's top is read as deep as it reached into the last merged top, an eighth more and
# this many rows more (a shard that turns out to hold more of it is read again, fully): at
# 10 million players and an exact top of 10,000 on 16 shards, about 12,000 rows a cycle
# instead of 160,000.
DEPTH_MARGIN = 64


@dataclass
class _Part:
    """One shard's answer in a cycle."""

    at: float
    rows: list[tuple[str, int]]
    count: int
    bounds: tuple[int, ...]
    counts: list[int]
    last: int | None  # the score of the shard's last row
    changes: dict[str, int]  # the shard's tallies of writes, read before its counts
    depth: int = 0  # how many rows of its top were asked for
    n: int = 0  # the shard's tally of writes ``n`` at the instant of its counts
    g: int = 0  # and its generation ``g`` (domain/changes.py), read with ``n``


@dataclass
class _Board:
    parts: list[_Part | None]
    bounds: tuple[int, ...] = ()
    planned_at: float = float("-inf")
    histogram: Histogram | None = None
    histogram_at: float = 0.0
    changes: Changes | None = None  # the tallies the histogram's counts hold every write of
    total: int = 0  # members at the last cycle
    planned_counts: tuple[int, ...] | None = None  # the first counts after the plan
    planned_total: int = 0  # members when the boundaries were placed
    depths: list[int] | None = None  # how deep to read each shard's top next cycle
    planning: asyncio.Task[tuple[tuple[int, ...], int]] | None = None  # a plan running
    planning_at: float = 0.0  # when it began
    turn: int = 0  # cycles counted: which slice of the buckets is counted whatever moved


class Aggregator:
    def __init__(
        self,
        settings: Settings,
        shards: Sequence[ShardIndex],
        snapshots: Snapshots,
        clock: Clock,
    ) -> None:
        self.settings = settings
        self.shards = shards  # the live layout's, read at each cycle (index/redis/layout.py)
        self.snapshots = snapshots
        self.clock = clock
        self.token = secrets.token_hex(8)
        self.fence: int | None = None
        self._fenced_said: int | None = None  # the tenure whose refused publish was logged
        self._boards: dict[BoardKey, _Board] = {}
        self.max_bounds = MAX_BOUNDS  # the histogram's boundaries at most (bounds.py)

    def _drop_all(self) -> None:
        for board in self._boards.values():
            _drop(board)
        self._boards.clear()

    def live(self, now: float) -> list[tuple[BoardSpec, Window]]:
        """The board windows to aggregate (``domain.recount.counted``): each board's current
        window, and the one before it until it freezes; none of a board split into groups."""
        return counted(self.settings.boards, now)

    async def step(self) -> int:
        """One cycle of every live board window, if this aggregator holds the lease;
        returns how many snapshots it published."""
        now = self.clock.now()
        held = self.fence
        self.fence = await self.snapshots.lead(self.token, now, LEASE_S)
        metrics.AGGREGATOR_ACTIVE.set(0 if self.fence is None else 1)
        if held is not None and self.fence != held:
            # Its tenure ended while it could not renew (a pause, a partition): another
            # aggregator took over, or the lease lapsed and this one holds a new tenure. Said
            # once per tenure lost, so it cannot repeat faster than the lease changes hands.
            metrics.LEASE_LOST.labels("aggregator").inc()
            log.warning(
                "lost the aggregator lease (fencing token %d): %s",
                held,
                "another aggregator leads" if self.fence is None else f"now {self.fence}",
            )
        if self.fence is None:
            self._drop_all()  # a standby starts afresh when it takes over
            return 0
        # Every live board window at once: a snapshot waits on its own shards' answers, not on
        # the other windows' cycles before it (a split board's freshness is a period and a
        # cycle, issue 34).
        fence = self.fence
        kept = await asyncio.gather(*(self.cycle(spec, w, fence) for spec, w in self.live(now)))
        return sum(kept)

    async def cycle(self, spec: BoardSpec, w: Window, fence: int) -> bool:
        key = BoardKey(spec.name, w.id)
        shards = list(self.shards)  # one layout for the whole cycle
        board = self._boards.setdefault(key, _Board([None] * len(shards)))
        if len(board.parts) != len(shards):  # a reshard switched the layout: anew
            _drop(board)
            board = self._boards[key] = _Board([None] * len(shards))
        started = time.perf_counter()
        now = self.clock.now()
        await self._replan(spec, key, board, shards, now)
        desc = spec.order == "desc"
        depths = board.depths or [spec.exact_top] * len(shards)
        board.turn += 1
        answers = await asyncio.gather(
            *(
                self._read(s, key, d, board, held, desc, now)
                for s, d, held in zip(shards, depths, board.parts, strict=True)
            ),
            return_exceptions=True,
        )
        for i, answer in enumerate(answers):
            if isinstance(answer, Unavailable):
                held = board.parts[i]
                if held is None or now - held.at >= PART_MAX_AGE_S:
                    log.warning(
                        "%s/%s: shard %d unavailable (%s): not published",
                        key.board,
                        key.window,
                        i,
                        answer,
                    )
                    metrics.AGGREGATOR_SKIPPED.labels(spec.name).inc()
                    return False
                continue
            if isinstance(answer, BaseException):
                raise answer
            board.parts[i] = answer
        try:
            top = await self._merged(spec, key, board, shards, desc)
        except Unavailable as e:
            log.warning(
                "%s/%s: a shard's top unavailable (%s): not published", key.board, key.window, e
            )
            metrics.AGGREGATOR_SKIPPED.labels(spec.name).inc()
            return False
        parts = [p for p in board.parts if p is not None]
        total = sum(p.count for p in parts)
        board.total = total
        if board.bounds and all(p.bounds == board.bounds for p in parts):
            board.histogram = Histogram.summed(
                board.bounds,
                [p.counts for p in parts],
                descending=desc,
                newest=_time_part(spec, w, now),
            )
            board.histogram_at = min(p.at for p in parts)
            board.changes = Changes.summed([p.changes for p in parts])
            if board.planned_counts is None:
                board.planned_counts = board.histogram.counts
        as_of = min(p.at for p in parts)
        if board.histogram is not None:
            as_of = min(as_of, board.histogram_at)
        ends = [p.last for p in parts if p.last is not None]
        last = (min(ends) if desc else max(ends)) if ends else None
        changes = board.changes if board.histogram is not None else None
        snap = Snapshot(as_of, total, top, desc, board.histogram, last, changes)
        data = snap.encode()
        kept = await self.snapshots.publish(key, data, fence, SNAPSHOT_TTL_S, self.token)
        metrics.AGGREGATOR_CYCLE_SECONDS.labels(spec.name).observe(time.perf_counter() - started)
        if not kept:
            # The cycle began under a lease that ran out before its publish: another
            # aggregator may lead (the index kept the successor's snapshot), or none does and
            # the next step takes a new tenure; either way this one's is not kept.
            metrics.SNAPSHOTS_FENCED.labels(spec.name).inc()
            if self._fenced_said != fence:  # every window's cycle of the tenure refused: one line
                self._fenced_said = fence
                log.warning(
                    "%s/%s: snapshot refused: the lease of fencing token %d ran out",
                    key.board,
                    key.window,
                    fence,
                )
        return kept

    async def _merged(
        self,
        spec: BoardSpec,
        key: BoardKey,
        board: _Board,
        shards: Sequence[ShardIndex],
        desc: bool,
    ) -> tuple[tuple[str, int], ...]:
        """The merged exact top. Each shard was read only as deep as it reached into the
        last merged top, and ``DEPTH_MARGIN`` more: a shard whose last row read is ahead
        of the merged top's last row (or a top short of ``exact_top``) may hold more of it,
        and is read again to the full depth. Then each shard's depth for the next cycle."""
        k = spec.exact_top
        while True:
            parts = [p for p in board.parts if p is not None]
            top = tuple(islice(merge_in_board_order((p.rows for p in parts), desc), k))
            cut = board_key(*top[-1]) if len(top) == k else None
            short = [
                i
                for i, p in enumerate(board.parts)
                if p is not None
                and p.depth < k
                and len(p.rows) >= p.depth
                and (cut is None or _ahead(board_key(*p.rows[-1]), cut, desc))
            ]
            if not short:
                break
            rows = await asyncio.gather(
                *(shards[i].page(key, 0, k - 1, descending=desc) for i in short)
            )
            for i, got in zip(short, rows, strict=True):
                part = board.parts[i]
                assert part is not None
                part.rows, part.depth = got, k
        owner = {p: i for i, part in enumerate(board.parts) if part for p, _ in part.rows}
        reach = [0] * len(board.parts)
        for member, _ in top:
            reach[owner[member]] += 1
        board.depths = [min(k, n + n // 8 + DEPTH_MARGIN) for n in reach]
        return top

    async def _read(
        self,
        shard: ShardIndex,
        key: BoardKey,
        depth: int,
        board: _Board,
        held: _Part | None,
        desc: bool,
        now: float,
    ) -> _Part:
        # The tallies first, the counts after them: every write the tallies leave out is
        # one a reader's later tallies count, so its widening never misses one.
        bounds, buckets = board.bounds, max(0, len(board.bounds) - 1)
        tally = await shard.changes(key)
        # The counts of the last cycle and the moves since, where this shard was counted at
        # these bounds and is of the same generation of counts (a shard marked anew after a
        # failover or a rebuild's swap is counted afresh); one bucket in ROTATE counted
        # anyway (domain/recount.py).
        since = held.n if held is not None and held.bounds == bounds else None
        gen = held.g if held is not None else None
        fresh = range(buckets) if since is None else rotating(buckets, board.turn)
        stretches = runs(fresh)
        rows, count, got, end = await asyncio.gather(
            shard.page(key, 0, depth - 1, descending=desc),
            shard.count(key),
            shard.recount(key, since, [bounds[a : b + 1] for a, b in stretches], generation=gen),
            shard.page(key, 0, 0, descending=not desc),  # the shard's last row
        )
        counts: list[int] | None = None
        if since is not None and got.moves is not None:
            assert held is not None
            counts = applied(held.counts, bounds, got.moves)
        if counts is None:
            if since is not None:  # the moves cannot tell: every bucket, at one instant
                stretches = [(0, buckets)]
                got = await shard.recount(key, None, [bounds])
            counts = [0] * buckets
        for (a, b), part in zip(stretches, got.counts, strict=True):
            counts[a:b] = part
        metrics.AGGREGATOR_BUCKETS_COUNTED.labels(key.board).inc(sum(b - a for a, b in stretches))
        last = end[0][1] if end else None
        return _Part(now, rows, count, bounds, counts, last, tally, depth, got.n, got.generation)

    def _due(self, spec: BoardSpec, board: _Board, now: float) -> bool:
        """Time to place the boundaries again: every ``REPLAN_S``, and at once when the
        board outgrew the top since (or has grown or shrunk twofold: the ranks they aim at
        moved too far)."""
        if now - board.planned_at >= REPLAN_S:
            return True
        if spec.ranks_below_top is Below.EXACT or board.total <= spec.exact_top:
            return False
        n, planned = board.total, board.planned_total
        if not board.bounds or n > 2 * planned or 2 * n < planned:
            return True
        return now - board.planned_at >= REPLAN_MIN_S and _drifted(board)

    async def _replan(
        self,
        spec: BoardSpec,
        key: BoardKey,
        board: _Board,
        shards: Sequence[ShardIndex],
        now: float,
    ) -> None:
        """Switch to the boundaries of a plan that has ended; start one when it is due: in
        this cycle while the board has no boundaries yet, beside the cycles once it has."""
        task = board.planning
        if task is not None:
            if not task.done():
                return  # the cycle counts at the old boundaries meanwhile
            board.planning = None
            try:
                self._placed(board, *task.result(), board.planning_at)
            except Unavailable as e:  # keep the boundaries there are; plan again next cycle
                log.warning("%s/%s: boundaries not moved: %s", key.board, key.window, e)
            return
        if not self._due(spec, board, now):
            return
        plan = self._plan(spec, key, shards)
        if not board.bounds:
            try:
                self._placed(board, *await plan, now)
            except Unavailable as e:
                log.warning("%s/%s: boundaries not moved: %s", key.board, key.window, e)
            return
        board.planning = asyncio.create_task(plan)
        board.planning_at = now

    @staticmethod
    def _placed(board: _Board, bounds: tuple[int, ...], total: int, at: float) -> None:
        board.bounds = bounds
        board.planned_total = total
        board.planned_counts = None
        board.planned_at = at
        if not bounds:
            board.histogram = None

    async def _plan(
        self, spec: BoardSpec, key: BoardKey, shards: Sequence[ShardIndex]
    ) -> tuple[tuple[int, ...], int]:
        """The boundaries from every shard's scores at the ranks they aim at, and the
        members there were then."""
        desc = spec.order == "desc"
        sizes = await asyncio.gather(*(s.count(key) for s in shards))
        total = sum(sizes)
        if total <= spec.exact_top or spec.ranks_below_top is Below.EXACT:
            # The top holds the whole board, or the board counts every rank: no estimates.
            return (), total
        samples = await asyncio.gather(
            *(
                s.scores_at(
                    key,
                    sample_ranks(total, n, exact_top=spec.exact_top, max_bounds=self.max_bounds),
                    descending=desc,
                )
                for s, n in zip(shards, sizes, strict=True)
            )
        )
        # 1.2-1.6 s of CPU at 10 million players and 6,000-8,000 boundaries (BENCHMARKS.md): in a
        # thread, so that the reads this process serves beside it get their turns.
        bounds = await asyncio.to_thread(
            plan_bounds,
            samples,
            sizes,
            exact_top=spec.exact_top,
            descending=desc,
            codec=spec.codec,
            max_bounds=self.max_bounds,
        )
        return bounds, total


def _ahead(a: tuple[int, bytes], b: tuple[int, bytes], desc: bool) -> bool:
    """Row key ``a`` comes before ``b`` in board order."""
    return a > b if desc else a < b


def _drop(board: _Board) -> None:
    """A board's state given up: its plan, if one runs, is not waited for."""
    if board.planning is not None:
        board.planning.cancel()
        board.planning = None


def _drifted(board: _Board) -> bool:
    """A bucket outgrew what it, or a neighbour, held at the first count after the plan."""
    then, h = board.planned_counts, board.histogram
    if then is None or h is None or len(then) != len(h.counts):
        return False
    last = len(then) - 1
    return any(
        c > 2 * max(then[max(0, i - 1) : min(last, i + 1) + 1]) + DRIFT_MIN
        for i, c in enumerate(h.counts)
    )


def _time_part(spec: BoardSpec, w: Window, now: float) -> int | None:
    """The time part of a score reached now (the histogram's ``newest``), if it has one."""
    codec = spec.codec
    seconds = int(now) - w.start
    if codec.time_bits == 0 or not 0 <= seconds < codec.time_limit:
        return None
    return codec.encode(0, seconds)


def not_needed(n: Needs) -> str | None:
    """Why this process runs no aggregator (None: it does)."""
    if len(n.shards) > 1:
        return None
    # One shard is the whole board: its reads are exact without a merge.
    return "the index is not split across shards"


def runners(n: Needs) -> list[Runner]:
    agg = Aggregator(n.settings, n.shards, n.snapshots, n.clock)
    # No step counts as a full batch: one a period, whatever it did.
    return [Runner("aggregator", agg.step, idle_sleep_s=PERIOD_S, full=1 << 30, paced=True)]
