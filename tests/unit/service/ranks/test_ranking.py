"""The read side's hold on a split board's snapshot (``service/ranks/snapshot.py``): after a change
the aggregator has not counted yet (a ban, a rebuild), this process passes over every snapshot
made before it, and counts on the shards, until a newer one is published."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from podium.config.settings import parse
from podium.domain.snapshot import SNAPSHOT_TTL_S, Snapshot
from podium.errors import IndexUnavailable
from podium.index.memory.index import MemoryIndex
from podium.index.memory.snapshots import MemorySnapshots
from podium.ports import Around, BoardKey, Top
from podium.service.ranks import snapshot as snapshot_ranks
from podium.service.ranks.counted import CountedRanks
from podium.service.ranks.snapshot import SnapshotRanks

KEY = BoardKey("week", "2026-W49")
SPEC = next(b for b in parse({}).boards if b.name == "week")
T = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.t = T

    def now(self) -> float:
        return self.t


class Split:
    shard_count = 2

    async def scores(self, key: BoardKey, player_ids: Sequence[str]) -> list[int | None]:
        return [None for _ in player_ids]


@pytest.fixture
def sliced(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row of the top sliced from the snapshot: these tests are about the snapshot's
    hold, which the first FRESH_ROWS (counted on the shards, tested below) do not use."""
    monkeypatch.setattr(snapshot_ranks, "FRESH_ROWS", 0)


async def _publish(snaps: MemorySnapshots, as_of: float, top: list[tuple[str, int]]) -> None:
    fence = await snaps.lead("agg", as_of, 3600.0)  # outlasts the test: its clock moves on its own
    assert fence is not None
    snap = Snapshot(as_of, len(top), tuple(top), True)
    assert await snaps.publish(KEY, snap.encode(), fence, 15.0, "agg")


async def _ranks(clock: Clock) -> tuple[SnapshotRanks, MemorySnapshots]:
    """Ranks on a snapshot store, over shards that hold only "fair" (the cheat is banned)."""
    shards = MemoryIndex(clock.now)
    await shards.write(KEY, [("fair", 100)], descending=True, expire_at=None)
    snaps = MemorySnapshots(clock.now)
    counted = CountedRanks(shards, clock)
    return SnapshotRanks(counted, Split(), snaps, shards.copy, clock), snaps


@pytest.mark.usefixtures("sliced")
async def test_a_change_passes_over_the_snapshots_made_before_it() -> None:
    clock = Clock()
    ranking, snaps = await _ranks(clock)
    await _publish(snaps, T, [("cheat", 900), ("fair", 100)])
    assert await ranking.top(SPEC, KEY, 0, 9) == Top([("cheat", 900), ("fair", 100)], T)

    clock.t = T + 0.5
    ranking.forget(changed_at=clock.now())  # a ban: the shards no longer hold "cheat"
    assert await ranking.snapshot(KEY) is None
    assert await ranking.top(SPEC, KEY, 0, 9) == Top([("fair", 100)], T + 0.5)  # the shards
    ranking.forget()  # a later plain forget keeps passing over it
    assert await ranking.snapshot(KEY) is None

    await _publish(snaps, T + 0.6, [("fair", 100)])  # the aggregator's next cycle
    ranking.forget()  # (or HOLD_S later)
    assert await ranking.top(SPEC, KEY, 0, 9) == Top([("fair", 100)], T + 0.6)


@pytest.mark.usefixtures("sliced")
async def test_a_plain_forget_reads_the_same_snapshot_again() -> None:
    clock = Clock()
    ranking, snaps = await _ranks(clock)
    await _publish(snaps, T, [("a", 1)])
    assert await ranking.top(SPEC, KEY, 0, 0) == Top([("a", 1)], T)
    ranking.forget()
    assert await ranking.top(SPEC, KEY, 0, 0) == Top([("a", 1)], T)


@pytest.mark.usefixtures("sliced")
async def test_a_new_snapshot_is_read_as_soon_as_its_stamp_is_seen() -> None:
    """The snapshot is held until its stamp changes (asked at most every STAMP_S), not for
    HOLD_S: a new score is in this process's top within STAMP_S of its publish."""
    clock = Clock()
    ranking, snaps = await _ranks(clock)
    await _publish(snaps, T, [("a", 1)])
    assert await ranking.top(SPEC, KEY, 0, 0) == Top([("a", 1)], T)
    await _publish(snaps, T + 0.5, [("b", 2)])
    assert await ranking.top(SPEC, KEY, 0, 0) == Top([("a", 1)], T)  # the stamp still held
    clock.t += snapshot_ranks.STAMP_S
    assert snapshot_ranks.STAMP_S < snapshot_ranks.HOLD_S
    assert await ranking.top(SPEC, KEY, 0, 0) == Top([("b", 2)], T + 0.5)
    assert await ranking.version(KEY, 0) == await snaps.stamp(KEY)


@pytest.mark.usefixtures("sliced")
async def test_a_snapshot_older_than_one_used_is_passed_over_until_a_newer_one() -> None:
    """A failover of the snapshot store's node: the promoted replica holds a snapshot older
    than the one this process last answered from (docs/faults.md, the primary of the
    aggregator's keys cut from its majority). Its reads count on the shards instead, until
    the aggregator publishes a newer one; past SNAPSHOT_TTL_S of the newest used, an older
    one is used again (a takeover by an aggregator whose clock is behind)."""
    clock = Clock()
    ranking, snaps = await _ranks(clock)
    await _publish(snaps, T + 2.0, [("cheat", 900), ("fair", 100)])
    assert await ranking.top(SPEC, KEY, 0, 9) == Top([("cheat", 900), ("fair", 100)], T + 2.0)

    await _publish(snaps, T + 1.0, [("old", 50)])  # the promoted replica's, from before
    clock.t = T + 2.0 + snapshot_ranks.STAMP_S
    assert await ranking.snapshot(KEY) is None
    assert await ranking.top(SPEC, KEY, 0, 9) == Top([("fair", 100)], clock.t)  # the shards

    await _publish(snaps, T + 2.5, [("fair", 100)])  # the aggregator's next cycle there
    clock.t += snapshot_ranks.STAMP_S
    assert await ranking.top(SPEC, KEY, 0, 9) == Top([("fair", 100)], T + 2.5)

    await _publish(snaps, T + 0.5, [("old", 50)])  # an aggregator whose clock is behind
    clock.t += snapshot_ranks.STAMP_S
    assert await ranking.snapshot(KEY) is None
    clock.t += SNAPSHOT_TTL_S
    await _publish(snaps, T + 0.6, [("old", 50)])  # its next cycle, the newer one's time over
    clock.t += snapshot_ranks.STAMP_S
    got = await ranking.snapshot(KEY)
    assert got is not None and got.as_of == T + 0.6


class Unstamped(MemorySnapshots):
    """Snapshots kept by a release before stamps: none tells."""

    async def stamp(self, key: BoardKey) -> bytes | None:
        return None


@pytest.mark.usefixtures("sliced")
async def test_without_a_stamp_the_snapshot_is_held_for_hold_s() -> None:
    clock = Clock()
    shards = MemoryIndex(clock.now)
    snaps = Unstamped(clock.now)
    ranking = SnapshotRanks(CountedRanks(shards, clock), Split(), snaps, shards.copy, clock)
    await _publish(snaps, T, [("a", 1)])
    assert await ranking.top(SPEC, KEY, 0, 0) == Top([("a", 1)], T)
    await _publish(snaps, T + 0.5, [("b", 2)])
    clock.t += snapshot_ranks.STAMP_S
    assert await ranking.top(SPEC, KEY, 0, 0) == Top([("a", 1)], T)
    clock.t += snapshot_ranks.HOLD_S
    assert await ranking.top(SPEC, KEY, 0, 0) == Top([("b", 2)], T + 0.5)


class Shards:
    """The split index's reads of a player's own shard, from one memory index."""

    def __init__(self, index: MemoryIndex) -> None:
        self.index = index
        self.shard_count = 2

    async def scores(self, key: BoardKey, player_ids: Sequence[str]) -> list[int | None]:
        return await self.index.scores(key, player_ids)


async def test_a_player_in_the_top_who_scored_since_the_snapshot_is_counted_fresh() -> None:
    """In the snapshot's top, a player whose own score (on their shard) is still the
    snapshot's is answered from it; one who scored since is counted on the shards, so their
    own rank shows their new points at once."""
    clock = Clock()
    shards = MemoryIndex(clock.now)
    await shards.write(KEY, [("a", 500), ("b", 300)], descending=True, expire_at=None)
    snaps = MemorySnapshots(clock.now)
    ranking = SnapshotRanks(CountedRanks(shards, clock), Shards(shards), snaps, shards.copy, clock)
    await _publish(snaps, T, [("b", 300), ("a", 100)])  # a had 100 when it was counted
    clock.t = T + 0.3
    same = await ranking.around(SPEC, KEY, "b", 0)
    assert isinstance(same, Around)
    assert (same.rank, same.score, same.as_of) == (0, 300, T)  # as of the snapshot
    moved = await ranking.around(SPEC, KEY, "a", 0)
    assert isinstance(moved, Around)
    assert (moved.rank, moved.score, moved.exact) == (0, 500, True)  # counted now
    assert moved.as_of is None  # counted at the read, not as of a snapshot


class Counting(MemoryIndex):
    pages = 0

    async def page(
        self, key: BoardKey, start: int, stop: int, *, descending: bool
    ) -> list[tuple[str, int]]:
        self.pages += 1
        return await super().page(key, start, stop, descending=descending)


async def test_the_first_rows_are_counted_on_the_shards_and_held_a_fraction_of_a_second() -> None:
    """The first FRESH_ROWS of the top are counted on the shards, as of the read, whatever
    the snapshot holds, once per FRESH_PAGE_S for every page of them; deeper rows are the
    snapshot's slice. A page of them is held by its slot, one deeper by the snapshot's stamp."""
    clock = Clock()
    shards = Counting(clock.now)
    deep = snapshot_ranks.FRESH_ROWS
    counted = [(f"p{i:04d}", 10_000 - i) for i in range(deep + 2)]
    await shards.write(KEY, counted, descending=True, expire_at=None)
    snaps = MemorySnapshots(clock.now)
    ranking = SnapshotRanks(CountedRanks(shards, clock), Shards(shards), snaps, shards.copy, clock)
    stale = [(f"p{i:04d}", 9_000 - i) for i in range(deep + 2)]  # as they were counted
    await _publish(snaps, T - 1.0, stale)
    clock.t = T

    assert await ranking.top(SPEC, KEY, 0, 1) == Top(counted[:2], T)
    assert await ranking.top(SPEC, KEY, 5, deep - 1) == Top(counted[5:deep], T)
    assert shards.pages == 1  # both pages sliced from one head
    assert await ranking.top(SPEC, KEY, deep, deep + 1) == Top(stale[deep:], T - 1.0)

    first = await ranking.version(KEY, deep - 1)
    assert first != await ranking.version(KEY, deep) == await snaps.stamp(KEY)
    clock.t += snapshot_ranks.FRESH_PAGE_S
    assert await ranking.version(KEY, deep - 1) != first  # read again after FRESH_PAGE_S
    await shards.write(KEY, [("p0001", 20_000)], descending=True, expire_at=None)
    assert (await ranking.top(SPEC, KEY, 0, 0)).rows == [("p0001", 20_000)]
    assert shards.pages == 2
    assert snapshot_ranks.FRESH_PAGE_S < 1.0  # within "a new score on the page in a second"


async def test_the_first_rows_are_read_again_when_the_snapshot_changes() -> None:
    """Within a slot, a head is read again as soon as the snapshot's stamp changes: an
    erasure drops the snapshots naming the player, and the page must not keep them."""
    clock = Clock()
    shards = Counting(clock.now)
    await shards.write(KEY, [("gone", 9), ("a", 5)], descending=True, expire_at=None)
    snaps = MemorySnapshots(clock.now)
    ranking = SnapshotRanks(CountedRanks(shards, clock), Shards(shards), snaps, shards.copy, clock)
    await _publish(snaps, T, [("gone", 9), ("a", 5)])
    before = await ranking.version(KEY, 0)
    assert (await ranking.top(SPEC, KEY, 0, 1)).rows == [("gone", 9), ("a", 5)]
    assert await shards.erase_player("gone") >= 1  # erased from the shards
    assert await snaps.erase_player("gone") == 1  # and the snapshot naming them dropped
    clock.t += snapshot_ranks.STAMP_S  # the stamp asked again; the slot need not end
    assert await ranking.version(KEY, 0) != before
    assert (await ranking.top(SPEC, KEY, 0, 1)).rows == [("a", 5)]
    assert shards.pages == 2


class ShardOut(MemoryIndex):
    async def page(
        self, key: BoardKey, start: int, stop: int, *, descending: bool
    ) -> list[tuple[str, int]]:
        raise IndexUnavailable("shard 3 does not answer")


async def test_with_a_shard_out_the_first_rows_are_the_snapshots_slice() -> None:
    clock = Clock()
    shards = ShardOut(clock.now)
    snaps = MemorySnapshots(clock.now)
    ranking = SnapshotRanks(CountedRanks(shards, clock), Shards(shards), snaps, shards.copy, clock)
    await _publish(snaps, T, [("a", 5), ("b", 3)])
    clock.t = T + 0.4
    assert await ranking.top(SPEC, KEY, 0, 1) == Top([("a", 5), ("b", 3)], T)
