"""An estimated rank on a split board is widened by the writes every shard tallied since the
snapshot's counts (``service/ranks/snapshot.py``, ``domain/changes.py``), read once for every
reader that asked before the read began; where the tallies cannot say what moved (a shard's
went back: its data was lost), the rank is counted on the shards instead."""

from __future__ import annotations

import asyncio
from typing import Any

from podium.config.settings import parse
from podium.domain.changes import Changes, tallies
from podium.domain.histogram import Histogram
from podium.domain.snapshot import Snapshot
from podium.index.memory.index import MemoryIndex
from podium.index.memory.snapshots import MemorySnapshots
from podium.ports import Around, BoardKey, Estimated, MarkedScore
from podium.service.ranks.counted import CountedRanks
from podium.service.ranks.snapshot import SnapshotRanks

KEY = BoardKey("week", "2026-W49")
SPEC = next(b for b in parse({}).boards if b.name == "week")
T = 1_800_000_000.0
CODEC = SPEC.codec
ME = CODEC.encode(100, 50)


class Clock:
    def now(self) -> float:
        return T


class Split:
    """Two shards: the reader's score on its own, and every shard's tallies as set."""

    shard_count = 2

    def __init__(self, tallies: list[dict[str, int]]) -> None:
        self.tallies = tallies
        self.reads = 0

    async def marked_score(self, key: BoardKey, player_id: str) -> tuple[int, MarkedScore]:
        return 0, MarkedScore(ME, None, False)

    async def changes(self, key: BoardKey) -> list[dict[str, int]]:
        self.reads += 1
        await asyncio.sleep(0)
        return [dict(t) for t in self.tallies]


def tallied(moves: list[tuple[int | None, int | None]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for old, new in moves:
        for f in tallies(old, new):
            out[f] = out.get(f, 0) + 1
    return out


async def ranks(split: Split, then: list[dict[str, int]]) -> tuple[SnapshotRanks, MemoryIndex]:
    shards = MemoryIndex(Clock().now)
    # Counted: 10 ahead of the reader's score in one bucket of 20 (ranks 1..10 the top).
    bounds = (CODEC.floor(0), CODEC.floor(90), CODEC.floor(110), CODEC.floor(1000))
    hist = Histogram(bounds, (5, 20, 10), True)
    top = tuple((f"t{i}", CODEC.encode(2000, i)) for i in range(10))
    snap = Snapshot(T, 35, top, True, hist, CODEC.floor(0), Changes.summed(then))
    snaps = MemorySnapshots(Clock().now)
    fence = await snaps.lead("agg", T, 5.0)
    assert fence is not None and await snaps.publish(KEY, snap.encode(), fence, 15.0, "agg")
    ranking = SnapshotRanks(CountedRanks(shards, Clock()), split, snaps, shards.copy, Clock())  # type: ignore[arg-type]
    return ranking, shards


async def test_the_interval_widens_by_the_moves_across_the_reader_s_score() -> None:
    then = [{"n": 3}, {"n": 4}]
    # Since the counts: one rise from below the reader to far above it, two players entering
    # above it, and one rise far below it, which cannot overtake it.
    below = CODEC.encode(1, 5)
    mine = tallied([(CODEC.encode(50, 1), CODEC.encode(900, 9)), (None, CODEC.encode(500, 3))])
    other = tallied([(None, CODEC.encode(700, 1)), (below, below + 7)])
    now = [mine | {"n": 3 + 2}, other | {"n": 4 + 2}]
    split = Split(now)
    ranking, _ = await ranks(split, then)
    got = await ranking.around(SPEC, KEY, "me", 0)
    assert isinstance(got, Estimated)
    # As of the counts: 10 ahead of the bucket (the top), the bucket's 20, and the reader
    # itself perhaps not among them: [11, 31]; since, 3 more may be ahead of it.
    assert (got.estimate.low, got.estimate.high) == (11, 31 + 3)
    bare = Changes.summed(now).since(Changes.summed(then))
    assert bare is not None and bare.moves(ME, descending=True) == (0, 3)


async def test_tallies_that_went_back_are_counted_on_the_shards_instead() -> None:
    split = Split([{"n": 2}, {"n": 9}])
    ranking, shards = await ranks(split, [{"n": 3}, {"n": 4}])
    await shards.write(KEY, [("me", ME), ("x", ME + 5)], descending=True, expire_at=None)
    got = await ranking.around(SPEC, KEY, "me", 0)
    assert isinstance(got, Around) and got.exact and got.rank == 1


async def test_readers_at_once_share_one_read_of_the_tallies() -> None:
    split = Split([{"n": 3}, {"n": 4}])
    ranking, _ = await ranks(split, [{"n": 3}, {"n": 4}])
    got: list[Any] = await asyncio.gather(*(ranking.around(SPEC, KEY, "me", 0) for _ in range(20)))
    assert all(isinstance(g, Estimated) for g in got)
    assert split.reads < 20
    before = split.reads
    await ranking.around(SPEC, KEY, "me", 0)
    assert split.reads == before + 1  # a read that asks later is never served an older one
