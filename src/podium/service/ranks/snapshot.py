"""The reads' ranks on a board split across index shards: the aggregator's snapshot, held.

On a split board (``index.shards > 1``) the top pages past the first rows are slices of the
snapshot that the rank aggregator publishes every cycle (``workers/aggregator.py``), and a
rank below the snapshot's exact top may be estimated from its histogram: one read of the
player's own shard for their score, every shard's tallies of writes since the counts
(``domain/changes.py``: the interval holds at the moment of the answer, not only as of the
counts), the rest from memory. Each API process asks for a board window's snapshot's
stamp (a few bytes that change with every publish) at most once per ``STAMP_S``, and reads
the snapshot itself only when the stamp changed, or ``HOLD_S`` after it last did (one refill
at a time, shared by every request that wants it): a thousand reads a second cost the
snapshot store ten stamps and one snapshot a second, and a new snapshot is in use within
``STAMP_S`` of its publish (issue 34: a new score in the top within a second).

A player in the snapshot's exact top is answered from it only while their own score (one
read of their shard) is still the one it holds: a player who scored since is counted on the
shards, so that their own rank shows their new points at once.

The first ``FRESH_ROWS`` of the top, the pages everyone looks at, are counted on the shards
too (each shard's first rows, merged: ``index/split/index.py``), read once per board window
and ``FRESH_PAGE_S`` slot (and again when the snapshot changes) and sliced into pages,
rather than held until the next snapshot: a page sliced from a snapshot waits for the next
cycle to begin and end (the freshness benchmark's top page: p99 0.4-2.4 s), a page counted
waits only for the board write. Deeper pages would cost every shard their whole depth, so
they stay slices of the snapshot. A shard that does not answer puts the first rows back on
the snapshot, as before.

Everything that must be exact (a rank inside the top whose neighbors reach past it; every
rank of a board that chose ``ranks_below_top = "exact"``; shared ranks) and everything the
snapshot cannot answer (none published yet, or none since the last change) is counted on the
shards themselves (``counted.py`` over the split index, ``index/split/index.py``), as on one shard.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import replace

from podium import metrics
from podium.domain.boards import Below, BoardSpec, Ties
from podium.domain.changes import Changes, widened
from podium.domain.histogram import Estimate
from podium.domain.snapshot import SNAPSHOT_TTL_S, Snapshot
from podium.errors import IndexUnavailable
from podium.ports import (
    Around,
    BoardKey,
    Clock,
    Estimated,
    Placed,
    ProfileCopy,
    Resumed,
    Snapshots,
    SplitBoards,
    Spread,
    Top,
)
from podium.service.ranks.counted import CountedRanks, point_edges
from podium.service.ranks.marked import After
from podium.util.caching import Cache

log = logging.getLogger("podium.reads")

HOLD_S = 1.0  # how long an API process keeps a snapshot before it reads it again
STAMP_S = 0.1  # how long it trusts a snapshot's stamp before it asks again
# Board windows whose snapshot one process holds: one per board, open window and group (a
# board split by country has up to ~250 groups), so 1,000 holds every live board window of
# a deployment with a few grouped boards; past it the one written longest ago is read again.
SNAPSHOTS_HELD = 1_000
# The rows of the top counted on the shards rather than sliced from the snapshot: the first
# two pages of the largest limit (100). Read as one head per board window, every shard's
# first FRESH_ROWS rows (16 x 200 rows: about 3 ms of this process's CPU and 1 ms of Redis,
# BENCHMARKS.md), whichever pages of it are asked for: a client asking for every offset and
# limit costs no more than one asking for the first page.
FRESH_ROWS = 200
# How long a head is used: the page's share of "a new score in the top within a second" (the
# board write takes the rest), while a thousand page reads a second still cost the shards
# five heads a board window and process. Slots of it, alike in every request of the process.
FRESH_PAGE_S = 0.2


class SnapshotRanks:
    def __init__(
        self,
        counted: CountedRanks,
        split: SplitBoards,
        snapshots: Snapshots,
        copy: ProfileCopy,
        clock: Clock,
        head_s: float = FRESH_PAGE_S,
    ) -> None:
        self.counted = counted
        self.split = split
        self.snapshots = snapshots
        self.copy = copy
        self.clock = clock
        # by (board window, stamp): a new stamp is a new snapshot to read
        self._held: Cache[tuple[BoardKey, bytes | None], Snapshot | None] = Cache(
            2 * SNAPSHOTS_HELD, HOLD_S, clock.now
        )
        self._stamps: Cache[BoardKey, bytes | None] = Cache(SNAPSHOTS_HELD, STAMP_S, clock.now)
        self._seen: Cache[BoardKey, bytes | None] = Cache(SNAPSHOTS_HELD, HOLD_S, clock.now)
        self._not_before = float("-inf")  # snapshots older than this are passed over
        # The newest snapshot's asOf this process used, by board window, and when it first
        # used it: an older one read after it is passed over (``_in_order``).
        self._newest: dict[BoardKey, tuple[float, float]] = {}
        # The first FRESH_ROWS counted on the shards, by (board window, FRESH_PAGE_S slot,
        # the snapshot's stamp): read again when the slot ends, and at once when the
        # snapshot changes (a new publish, or one dropped: an erasure drops the snapshots
        # that name the player, and the pages that did must go with them).
        # Held head_s (FRESH_PAGE_S, or less where pages are held less).
        self._heads: Cache[tuple[BoardKey, int, bytes | None], Top] = Cache(
            SNAPSHOTS_HELD, head_s, clock.now
        )
        # every shard's tallies, one read shared by the readers that asked before it began
        self._tallies: dict[BoardKey, After[list[dict[str, int]]]] = {}

    def forget(self, changed_at: float | None = None) -> None:
        """Read every snapshot again on its next use. With ``changed_at`` (a ban, a rebuild:
        the shards changed then), also pass over every snapshot made before it, which the
        aggregator counted before the change (a banned player still in its top): until it
        publishes a newer one, this process's reads count on the shards."""
        self._held.clear()
        self._stamps.clear()
        self._seen.clear()
        self._heads.clear()
        if changed_at is not None:
            self._not_before = max(self._not_before, changed_at)

    async def snapshot(self, key: BoardKey) -> Snapshot | None:
        """The board window's snapshot as this process last read it (at most ``HOLD_S``
        ago), or None when the aggregator has published none that is still live (or none
        since the last change ``forget`` was told of)."""
        stamp = await self.stamp(key)
        snap = await self._held.get_or_load((key, stamp), lambda: self._read(key))
        if snap is None or snap.as_of < self._not_before:
            return None
        return snap if self._in_order(key, snap) else None

    def _in_order(self, key: BoardKey, snap: Snapshot) -> bool:
        """Whether ``snap`` is no older than the newest snapshot of the board window this
        process used in the last ``SNAPSHOT_TTL_S``. An older one is passed over (its reads
        counted on the shards): a failover of the snapshot store's node loses the snapshots
        the old node took after its replica last heard from it (a Redis Cluster primary cut
        from its majority takes the aggregator's publishes until it refuses keys, a few
        seconds), and the promoted replica serves the one before them until the aggregator
        publishes there, so a reader that moved with the failover would answer as of an
        earlier moment than it just did (docs/faults.md). Under one aggregator asOf never
        goes back; a takeover by one whose clock is behind is passed over until its asOf
        catches up, or the newer snapshot would have expired anyway."""
        now = self.clock.now()
        newest = self._newest.get(key)
        if newest is not None and snap.as_of < newest[0] and now - newest[1] < SNAPSHOT_TTL_S:
            metrics.SNAPSHOTS_PASSED_OVER.labels(key.board).inc()
            return False
        if newest is None or snap.as_of > newest[0]:
            if len(self._newest) >= SNAPSHOTS_HELD and key not in self._newest:
                self._newest.clear()  # windows past: start afresh
            self._newest[key] = (snap.as_of, now)
        return True

    async def stamp(self, key: BoardKey) -> bytes | None:
        """The board window's snapshot's stamp as this process last asked (at most
        ``STAMP_S`` ago): what a page read from the snapshot is held by (``Reads.page``)."""
        try:
            stamp = await self._stamps.get_or_load(key, lambda: self.snapshots.stamp(key))
        except IndexUnavailable:
            # The index out: the stamp last seen, so that the snapshot held with it is
            # served until HOLD_S, as without stamps (then the read of it fails too).
            if key not in self._seen:
                raise
            return self._seen.get(key)
        self._seen.put(key, stamp)
        return stamp

    async def version(self, key: BoardKey, stop: int) -> bytes | None:
        stamp = await self._stamp_or_none(key)
        if stop < FRESH_ROWS:
            # Sliced from the head counted on the shards (top()): held by the head's slot
            # and the snapshot's stamp, as the head is.
            return b"head:%d:%s" % (self._slot(), stamp or b"")
        return stamp

    async def _stamp_or_none(self, key: BoardKey) -> bytes | None:
        try:
            return await self.stamp(key)
        except IndexUnavailable:
            return None  # the page's own read says what it can serve (its last one)

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
        if snap is not None:
            age = self.clock.now() - snap.as_of
            metrics.SNAPSHOT_AGE_SECONDS.labels(key.board).set(max(0.0, age))
        return snap

    async def top(self, spec: BoardSpec, key: BoardKey, start: int, stop: int) -> Top:
        """The first ``FRESH_ROWS`` counted on the shards, as of now; deeper, or with a
        shard out, a slice of the aggregator's merged top, as of its ``asOf``."""
        if stop < FRESH_ROWS:
            depth = min(FRESH_ROWS, spec.exact_top)  # pages end at the exact top
            try:
                held = (key, self._slot(), await self._stamp_or_none(key))
                head = await self._heads.get_or_load(
                    held, lambda: self.counted.top(spec, key, 0, depth - 1)
                )
                return Top(head.rows[start : stop + 1], head.as_of)
            except IndexUnavailable:
                pass  # a shard out: the snapshot's slice (the aggregator's stand-in for it)
        snap = await self.snapshot(key)
        if snap is None:
            return await self.counted.top(spec, key, start, stop)
        return Top(list(snap.top[start : stop + 1]), snap.as_of)

    def _slot(self) -> int:
        return int(self.clock.now() / FRESH_PAGE_S)

    async def page_from(
        self, spec: BoardSpec, key: BoardKey, at: tuple[str, int], n: int, before: bool
    ) -> Resumed:
        """A slice of the aggregator's merged top beside the place, as of its ``asOf``;
        counted on the shards when the snapshot cannot place it inside its top (the row
        fell below it: the rows nearest ahead of it may be below the top too)."""
        snap = await self.snapshot(key)
        if snap is not None:
            member, score = at
            ahead = snap.ahead(member, score)
            if ahead is not None:
                i = snap.position(member)
                on = i is not None and snap.top[i][1] == score
                if before:
                    first = max(0, ahead - n)
                    return Resumed(first, list(snap.top[first:ahead]), snap.as_of)
                first = ahead + on
                return Resumed(first, list(snap.top[first : first + n]), snap.as_of)
        return await self.counted.page_from(spec, key, at, n, before)

    async def around(
        self, spec: BoardSpec, key: BoardKey, player_id: str, neighbors: int
    ) -> Around | Estimated | None:
        snap = await self.snapshot(key)
        if snap is not None:
            i = snap.position(player_id)
            if (
                i is not None
                and (i + neighbors < len(snap.top) or snap.whole)
                and (await self.split.scores(key, [player_id]))[0] == snap.top[i][1]
            ):
                # In the exact top, with neighbors that stay inside it, and the player's
                # score (read from their shard) still the snapshot's: exact as of the
                # snapshot, with one shard asked (every shard would be: near()). A player
                # who scored since is counted below, fresh.
                first = max(0, i - neighbors)
                rows = list(snap.top[first : i + neighbors + 1])
                names = await self.copy.profiles([p for p, _ in rows])
                return Around(i, snap.top[i][1], rows, names, exact=True, as_of=snap.as_of)
            if _estimates(spec, snap) and snap.changes is not None:
                # The score with its shard's marker read in the same step: the read's check
                # (service/ranks/marked.py) needs no second round trip. Then every shard's
                # tallies, read after the score was: the interval holds at the moment the
                # score was read, every write until then counted.
                shard, got = await self.split.marked_score(key, player_id)
                score = got.score
                if score is None:
                    return None  # not on the board
                moved = Changes.summed(await self.tallies(key)).since(snap.changes)
                if moved is not None and snap.ahead(player_id, score) is None:
                    # Below the exact top: an estimate, labelled, without neighbors.
                    placed = self.place(spec, snap, score, moved)
                    if got.marked:
                        placed = replace(placed, generation={shard: got.token})
                    return placed
                # Inside the top after all, or the tallies cannot tell what moved since
                # the counts (a shard lost its data, a reshard): counted exactly.
        return await self.counted.around(spec, key, player_id, neighbors)

    async def places(
        self, spec: BoardSpec, key: BoardKey, player_ids: Sequence[str]
    ) -> list[Placed | None]:
        """Each player's score from their own shard (one call per shard) and place by the
        snapshot: exact inside its top, estimated below it. Shared ranks are counted on the
        shards (``shared_ranks``), so with shared ties the places are counted there too."""
        if spec.ties is Ties.FIRST and spec.ranks_below_top is Below.ESTIMATED:
            snap = await self.snapshot(key)
            if snap is not None and snap.histogram is not None:
                scores = await self.split.scores(key, player_ids)
                return [
                    self._placed(spec, snap, p, s) for p, s in zip(player_ids, scores, strict=True)
                ]
        return await self.counted.places(spec, key, player_ids)

    def _placed(
        self, spec: BoardSpec, snap: Snapshot, player: str, score: int | None
    ) -> Placed | None:
        if score is None:
            return None
        ahead = snap.ahead(player, score)
        if ahead is not None:
            return Placed(ahead, score, True)
        return Placed(self.place(spec, snap, score).estimate.rank - 1, score, False)

    async def shared_ranks(
        self, spec: BoardSpec, key: BoardKey, scores: Sequence[int]
    ) -> dict[int, int]:
        return await self.counted.shared_ranks(spec, key, scores)

    async def spread(self, spec: BoardSpec, key: BoardKey, buckets: int) -> Spread:
        """The buckets from the aggregator's snapshot, without asking the shards: counted in
        its exact top, estimated from its histogram below it (so not exact), as of its
        ``asOf``; counted on the shards where the board does not estimate."""
        snap = await self.snapshot(key) if spec.ranks_below_top is Below.ESTIMATED else None
        if snap is None or not _estimates(spec, snap):
            return await self.counted.spread(spec, key, buckets)
        assert snap.last is not None and snap.top  # members below the top: both are known
        codec = spec.codec
        lo, hi = sorted((codec.points(snap.top[0][1]), codec.points(snap.last)))
        edges = point_edges(lo, hi, buckets)
        at_least = [self.at_least(spec, snap, codec.floor(p)) for p in edges]
        at_least[0], at_least[-1] = snap.total, 0  # every member is within [lo, hi]
        for i in range(1, len(at_least)):  # estimates never let a count go negative
            at_least[i] = min(at_least[i], at_least[i - 1])
        out = [
            (a, b - 1, at_least[i] - at_least[i + 1])
            for i, (a, b) in enumerate(itertools.pairwise(edges))
        ]
        return Spread(snap.total, out, snap.as_of, False)

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

    async def tallies(self, key: BoardKey) -> list[dict[str, int]]:
        """Every shard's tallies of the board window, read after the caller asked (one read
        for every reader that asked before it began)."""
        shared = self._tallies.get(key)
        if shared is None:
            if len(self._tallies) >= SNAPSHOTS_HELD:  # windows past: start afresh
                self._tallies.clear()
            shared = self._tallies[key] = After(lambda: self.split.changes(key))
        return await shared()

    def place(
        self, spec: BoardSpec, snap: Snapshot, score: int, moved: Changes | None = None
    ) -> Estimated:
        """The estimate of a score below the snapshot's top (its caller checked that). The
        counts need not hold the player at this score (they may have moved since), so
        ``counted=False``; with ``moved``, the writes since the counts, the interval holds
        at the moment those were read (``domain/changes.py``)."""
        assert snap.histogram is not None
        est = snap.histogram.estimate(score, spec.codec, counted=False)
        # Below the exact top by the snapshot's own count: never shown above it, unless
        # members ahead may have left or fallen behind since.
        fewer, more = (0, 0) if moved is None else moved.moves(score, descending=snap.descending)
        floor = len(snap.top) + 1
        est = Estimate(max(est.rank, floor), max(est.low, floor), max(est.high, floor))
        est = widened(est, fewer, more)
        return Estimated(est, snap.histogram.top_percent(est.rank), score, snap.as_of)


def _estimates(spec: BoardSpec, snap: Snapshot) -> bool:
    """The snapshot answers ranks below its top by estimate: the board estimates there, the
    snapshot has a histogram, and there are members below its top."""
    return spec.ranks_below_top is Below.ESTIMATED and snap.histogram is not None and not snap.whole
