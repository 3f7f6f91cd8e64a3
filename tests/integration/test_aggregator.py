"""The rank aggregator on a board split across in-process shards (the embedded mode's own
split), against a plain Python model of the board: the merged top is exact, the histogram's
intervals hold every true rank, one aggregator is active at a time, a shard that does not
answer is stood in for only briefly, and a stale aggregator's publish is refused (and counted)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podium import metrics
from podium.config.settings import Settings, parse
from podium.domain.boards import in_board_order
from podium.domain.snapshot import Snapshot
from podium.errors import IndexUnavailable
from podium.index.memory.index import MemoryIndex
from podium.index.memory.snapshots import MemorySnapshots
from podium.index.redis.index import RedisIndex
from podium.index.redis.keys import Keys
from podium.index.redis.snapshots import RedisSnapshots
from podium.index.split.index import SplitIndex
from podium.ports import BoardKey, Recounted, ShardIndex, Snapshots
from podium.workers import aggregator
from podium.workers.aggregator import Aggregator
from tests.conftest import REDIS_URL

NOW = 1_793_000_000.0  # inside a week, well after the default season start


class Clock:
    def __init__(self, t: float = NOW) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


def board_settings(exact_top: int = 20) -> Settings:
    return parse(
        {
            "index": {"shards": 4},
            "boards": [{"name": "week", "window": "week", "exact_top": exact_top}],
        }
    )


class Flaky:
    """A shard that can be told to stop answering, as a Redis node does when it goes."""

    def __init__(self, inner: MemoryIndex) -> None:
        self.inner = inner
        self.down = False

    def __getattr__(self, name: str) -> object:
        attr = getattr(self.inner, name)
        if self.down and callable(attr):

            async def refuse(*_: object, **__: object) -> object:
                raise IndexUnavailable("shard down (test)")

            return refuse
        return attr


async def fill(split: SplitIndex, key: BoardKey, n: int, seed: int = 7) -> dict[str, int]:
    rng = random.Random(seed)
    # Few distinct scores, so that many members tie and the member order decides.
    board = {f"p_{i:05d}": rng.randrange(0, n // 3) for i in range(n)}
    await split.write(key, list(board.items()), descending=True, expire_at=None)
    return board


def true_ranks(board: dict[str, int]) -> dict[str, int]:
    return {m: i + 1 for i, (m, _) in enumerate(in_board_order(board.items(), True))}


async def snapshot_of(snaps: MemorySnapshots, key: BoardKey) -> Snapshot:
    data = await snaps.read(key)
    assert data is not None
    return Snapshot.decode(data)


def make(
    shards: Sequence[ShardIndex], snaps: MemorySnapshots, clock: Clock, exact_top: int = 20
) -> Aggregator:
    return Aggregator(board_settings(exact_top), shards, snaps, clock)


async def test_the_merged_top_is_exact_and_every_interval_holds_the_true_rank() -> None:
    clock = Clock()
    parts = [MemoryIndex(clock.now) for _ in range(4)]
    split, snaps = SplitIndex(parts), MemorySnapshots(clock.now)
    agg = make(parts, snaps, clock)
    (spec, w) = agg.live(clock.now())[0]
    key = BoardKey(spec.name, w.id)
    board = await fill(split, key, 3000)
    assert await agg.step() == 1
    snap = await snapshot_of(snaps, key)
    expected = in_board_order(board.items(), True)
    assert list(snap.top) == expected[:20]
    assert snap.total == 3000 and not snap.whole
    assert snap.last == expected[-1][1]
    assert snap.histogram is not None and snap.histogram.total == 3000
    ranks = true_ranks(board)
    for member, score in board.items():
        ahead = snap.ahead(member, score)
        if ahead is not None:  # inside the top: exact, as counted against the snapshot
            assert ahead + 1 == ranks[member]
            continue
        est = snap.histogram.estimate(score, spec.codec)
        assert est.low <= ranks[member] <= est.high, (member, score, est)
        assert est.low <= est.rank <= est.high


async def test_a_small_board_is_whole_and_needs_no_histogram() -> None:
    clock = Clock()
    parts = [MemoryIndex(clock.now) for _ in range(4)]
    split, snaps = SplitIndex(parts), MemorySnapshots(clock.now)
    agg = make(parts, snaps, clock, exact_top=50)
    (spec, w) = agg.live(clock.now())[0]
    key = BoardKey(spec.name, w.id)
    board = await fill(split, key, 30)
    await agg.step()
    snap = await snapshot_of(snaps, key)
    assert snap.whole and snap.histogram is None
    assert list(snap.top) == in_board_order(board.items(), True)


async def test_one_aggregator_is_active_and_a_standby_takes_over_with_a_newer_fence() -> None:
    clock = Clock()
    parts = [MemoryIndex(clock.now) for _ in range(4)]
    split, snaps = SplitIndex(parts), MemorySnapshots(clock.now)
    active, standby = make(parts, snaps, clock), make(parts, snaps, clock)
    (spec, w) = active.live(clock.now())[0]
    key = BoardKey(spec.name, w.id)
    await fill(split, key, 200)
    assert await active.step() == 1
    assert await standby.step() == 0  # the lease is held
    first = active.fence
    assert first is not None and standby.fence is None
    # The active one stops (a crash, a long pause); its lease runs out.
    clock.t += aggregator.LEASE_S + 0.1
    assert await standby.step() == 1
    assert standby.fence is not None and standby.fence > first
    # The old one wakes and publishes under its old token: refused, the successor's stays.
    before = await snaps.read(key)
    assert not await snaps.publish(key, b"stale", first, 10, active.token)
    assert await snaps.read(key) == before
    assert await active.step() == 0  # and its next step finds the lease taken


def _counted(name: str, labels: dict[str, str]) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture(params=["memory", "redis"])
def backend(request: pytest.FixtureRequest) -> str | None:
    """None for the in-process snapshots; a key prefix of our own for Redis's."""
    if request.param == "memory":
        return None
    prefix: str = request.getfixturevalue("redis_prefix")
    return prefix


async def test_a_cycle_begun_before_a_takeover_is_refused_and_counted(
    backend: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old aggregator's cycle, begun under its lease, publishes after the standby took
    over: the index refuses it, and the old one counts the refusal, then the lease lost."""
    monkeypatch.setattr(aggregator, "LEASE_S", 0.3)  # Redis ends it by its own clock: waited
    clock = Clock()
    parts = [MemoryIndex(clock.now) for _ in range(4)]
    split = SplitIndex(parts)
    snaps: Snapshots = MemorySnapshots(clock.now)
    client = None
    if backend is not None:
        client = RedisIndex.client_from_url(REDIS_URL)
        snaps = RedisSnapshots(client, Keys(backend))
    try:
        old = Aggregator(board_settings(), parts, snaps, clock)
        new = Aggregator(board_settings(), parts, snaps, clock)
        (spec, w) = old.live(clock.now())[0]
        key = BoardKey(spec.name, w.id)
        await fill(split, key, 200)
        assert await old.step() == 1
        first = old.fence
        assert first is not None
        fenced = _counted("podium_snapshots_fenced_total", {"board": spec.name})
        lost = _counted("podium_lease_lost_total", {"role": "aggregator"})
        await asyncio.sleep(aggregator.LEASE_S + 0.2)
        clock.t += aggregator.LEASE_S + 0.2
        assert await new.step() == 1
        kept = await snaps.read(key)
        assert not await old.cycle(spec, w, first)  # the late publish of its old tenure
        assert await snaps.read(key) == kept
        assert _counted("podium_snapshots_fenced_total", {"board": spec.name}) == fenced + 1
        assert _counted("podium_lease_lost_total", {"role": "aggregator"}) == lost
        assert await old.step() == 0  # its next step finds the lease taken
        assert _counted("podium_lease_lost_total", {"role": "aggregator"}) == lost + 1
        assert await old.step() == 0  # a standby now: nothing more lost
        assert _counted("podium_lease_lost_total", {"role": "aggregator"}) == lost + 1
    finally:
        if client is not None:
            await client.aclose()


async def test_a_silent_shard_is_stood_in_for_briefly_then_nothing_is_published() -> None:
    clock = Clock()
    inner = [MemoryIndex(clock.now) for _ in range(4)]
    flaky = [Flaky(i) for i in inner]
    split, snaps = SplitIndex(inner), MemorySnapshots(clock.now)
    agg = make(flaky, snaps, clock)  # type: ignore[arg-type]
    (spec, w) = agg.live(clock.now())[0]
    key = BoardKey(spec.name, w.id)
    board = await fill(split, key, 400)
    assert await agg.step() == 1
    first = await snapshot_of(snaps, key)
    flaky[2].down = True
    clock.t += 3
    assert await agg.step() == 1  # shard 2's previous answer stands in for it
    second = await snapshot_of(snaps, key)
    assert second.as_of == first.as_of == NOW  # stamped with the oldest part
    assert list(second.top) == in_board_order(board.items(), True)[:20]
    clock.t += aggregator.PART_MAX_AGE_S
    assert await agg.step() == 0  # too old now: nothing that leaves shard 2 out
    assert await snapshot_of(snaps, key) == second
    flaky[2].down = False
    assert await agg.step() == 1
    assert (await snapshot_of(snaps, key)).as_of == clock.t


def test_the_window_before_is_live_until_it_freezes() -> None:
    clock = Clock()
    agg = make([MemoryIndex(clock.now)], MemorySnapshots(clock.now), clock)
    (spec, w) = agg.live(clock.now())[0]
    assert w.end is not None
    clock.t = w.end + 1  # the next week has begun; this one still takes late results
    ids = [x.id for _, x in agg.live(clock.now())]
    assert ids[1] == w.id and ids[0] != w.id
    clock.t = w.end + spec.freeze_after_s + 1
    assert [x.id for _, x in agg.live(clock.now())] == ids[:1]


@pytest.mark.parametrize("descending", [True, False])
async def test_snapshots_round_trip(descending: bool) -> None:
    clock = Clock()
    parts = [MemoryIndex(clock.now) for _ in range(4)]
    split = SplitIndex(parts)
    key = BoardKey("week", "2026-W44")
    rows = [(f"m{i}", i % 7) for i in range(100)]
    await split.write(key, rows, descending=descending, expire_at=None)
    top = tuple(await split.page(key, 0, 9, descending=descending))
    snap = Snapshot(NOW, 100, top, descending, None, 0)
    again = Snapshot.decode(snap.encode())
    assert again == snap and again.top == top
    for i, (m, s) in enumerate(top):
        assert again.ahead(m, s) == i
    for score in range(-1, 9):
        assert again.top_at_least(score) == sum(1 for _, s in top if s >= score)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    board=st.dictionaries(
        st.text("abcAB_é0", min_size=1, max_size=3), st.integers(-40, 40), max_size=300
    ),
    shards=st.integers(1, 5),
    exact_top=st.integers(1, 20),
    descending=st.booleans(),
)
def test_every_rank_is_exact_in_the_top_and_inside_its_interval_below(
    board: dict[str, int], shards: int, exact_top: int, descending: bool
) -> None:
    """Random boards, heavy ties, any number of shards and either order: after one cycle,
    the snapshot's top is the model's, a rank inside it is exact, and every estimate below
    it holds the true rank in its interval."""

    async def run() -> None:
        clock = Clock()
        parts = [MemoryIndex(clock.now) for _ in range(shards)]
        split, snaps = SplitIndex(parts), MemorySnapshots(clock.now)
        order = "desc" if descending else "asc"
        settings_ = parse(
            {
                "index": {"shards": shards},
                "boards": [
                    {"name": "week", "window": "week", "exact_top": exact_top, "order": order}
                ],
            }
        )
        agg = Aggregator(settings_, parts, snaps, clock)
        (spec, w) = agg.live(clock.now())[0]
        key = BoardKey(spec.name, w.id)
        await split.write(key, list(board.items()), descending=descending, expire_at=None)
        await agg.step()
        snap = await snapshot_of(snaps, key)
        expected = in_board_order(board.items(), descending)
        assert list(snap.top) == expected[:exact_top]
        assert snap.total == len(board)
        for rank, (member, score) in enumerate(expected, start=1):
            ahead = snap.ahead(member, score)
            if ahead is not None:
                assert ahead + 1 == rank
                continue
            assert snap.histogram is not None
            est = snap.histogram.estimate(score, spec.codec)
            assert est.low <= rank <= est.high, (member, score, rank, est)

    asyncio.run(run())


async def test_the_boundaries_are_planned_again_when_the_board_drifts_from_its_plan() -> None:
    """A clock re-plan comes every REPLAN_S; a bucket that outgrew its first count after the
    plan (twice, and DRIFT_MIN more) brings it forward, though not before REPLAN_MIN_S."""
    clock = Clock()
    parts = [MemoryIndex(clock.now) for _ in range(4)]
    split, snaps = SplitIndex(parts), MemorySnapshots(clock.now)
    agg = make(parts, snaps, clock)
    (spec, w) = agg.live(clock.now())[0]
    key = BoardKey(spec.name, w.id)
    await fill(split, key, 3000)
    assert await agg.step() == 1
    planned_bounds = agg._boards[key].bounds
    assert planned_bounds
    # A crowd arrives on one score inside the histogram: its bucket more than doubles.
    crowd = [(f"q_{i:05d}", 500) for i in range(2000)]
    await split.write(key, crowd, descending=True, expire_at=None)
    clock.t += 1
    assert await agg.step() == 1
    assert agg._boards[key].bounds == planned_bounds  # too soon after the plan
    clock.t += aggregator.REPLAN_MIN_S
    assert await agg.step() == 1  # the plan starts, beside the cycles
    await planned(agg, key)
    assert await agg.step() == 1
    assert agg._boards[key].bounds != planned_bounds  # well before REPLAN_S
    assert clock.t - NOW < aggregator.REPLAN_S
    again = agg._boards[key].bounds
    clock.t += aggregator.REPLAN_MIN_S
    assert await agg.step() == 1
    assert agg._boards[key].bounds == again  # no drift since: the plan stands


async def planned(agg: Aggregator, key: BoardKey) -> None:
    """Until the plan running beside the cycles (if one does) has ended."""
    task = agg._boards[key].planning
    if task is not None:
        await asyncio.wait([task])


class Held:
    """A shard whose samples for a plan wait until the test lets them go."""

    def __init__(self, inner: MemoryIndex) -> None:
        self.inner = inner
        self.go = asyncio.Event()
        self.held = False

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def scores_at(self, *args: object, **kw: object) -> object:
        if self.held:
            await self.go.wait()
        return await self.inner.scores_at(*args, **kw)  # type: ignore[arg-type]


async def test_a_plan_runs_beside_the_cycles_which_count_at_the_old_boundaries() -> None:
    """Once a board has boundaries, a re-plan holds no cycle up: while its samples are being
    read, cycles go on publishing counts at the old boundaries, and the first cycle after it
    ends counts at the new ones."""
    clock = Clock()
    parts = [MemoryIndex(clock.now) for _ in range(4)]
    held = [Held(p) for p in parts]
    split, snaps = SplitIndex(parts), MemorySnapshots(clock.now)
    agg = make(held, snaps, clock)  # type: ignore[arg-type]
    (spec, w) = agg.live(clock.now())[0]
    key = BoardKey(spec.name, w.id)
    await fill(split, key, 3000)
    assert await agg.step() == 1  # the first plan, in the cycle: no boundaries before it
    old = agg._boards[key].bounds
    assert old and agg._boards[key].planning is None
    for h in held:
        h.held = True
    crowd = [(f"q_{i:05d}", 500) for i in range(3000)]
    await split.write(key, crowd, descending=True, expire_at=None)
    clock.t += aggregator.REPLAN_S
    for _ in range(3):  # the plan waits on its samples; the cycles do not wait on it
        assert await agg.step() == 1
        assert agg._boards[key].planning is not None
        snap = await snapshot_of(snaps, key)
        assert snap.histogram is not None and snap.histogram.bounds == old
        assert snap.total == 6000  # counted this cycle, at the old boundaries
        clock.t += 1
    for h in held:
        h.go.set()
    await planned(agg, key)
    assert await agg.step() == 1
    new = agg._boards[key].bounds
    assert new != old and agg._boards[key].planning is None
    snap = await snapshot_of(snaps, key)
    assert snap.histogram is not None and snap.histogram.bounds == new
    assert sum(snap.histogram.counts) <= snap.total


async def test_a_snapshot_carries_the_tallies_its_counts_hold() -> None:
    clock = Clock()
    parts = [MemoryIndex(clock.now) for _ in range(4)]
    split, snaps = SplitIndex(parts), MemorySnapshots(clock.now)
    agg = make(parts, snaps, clock)
    (spec, w) = agg.live(clock.now())[0]
    key = BoardKey(spec.name, w.id)
    await fill(split, key, 3000)
    assert await agg.step() == 1
    snap = await snapshot_of(snaps, key)
    assert snap.changes is not None and sum(snap.changes.writes) == 3000
    assert len(snap.changes.writes) == 4
    assert snap.histogram is not None and snap.histogram.newest == spec.codec.encode(
        0, int(clock.t) - w.start
    )


async def test_each_shard_is_read_as_deep_as_the_top_reaches_and_the_top_stays_exact() -> None:
    """After the first cycle each shard's top is read only as deep as it reached into the
    merged top (and a margin); a shard that comes to hold more of the top than that (here a
    crowd of new leaders on one shard, then on another) is read again, fully, in the same
    cycle: every snapshot's top is the exact merged top."""
    clock = Clock()
    parts = [MemoryIndex(clock.now) for _ in range(4)]
    split, snaps = SplitIndex(parts), MemorySnapshots(clock.now)
    agg = make(parts, snaps, clock, exact_top=600)
    (spec, w) = agg.live(clock.now())[0]
    key = BoardKey(spec.name, w.id)
    board = await fill(split, key, 4000)
    rng = random.Random(3)
    for step in range(6):
        assert await agg.step() == 1
        snap = await snapshot_of(snaps, key)
        assert list(snap.top) == in_board_order(board.items(), True)[:600], step
        depths = agg._boards[key].depths
        assert depths is not None and all(d < 600 for d in depths), depths
        # New leaders, all on one shard: more of the top than its depth reaches.
        shard = step % 4
        crowd: dict[str, int] = {}
        while len(crowd) < 300:
            m = f"n{step}_{rng.randrange(10**6):06d}"
            if split.shard_of(m) == shard:
                crowd[m] = 2000 + rng.randrange(1000)
        await split.write(key, list(crowd.items()), descending=True, expire_at=None)
        board.update(crowd)
        clock.t += 1


class Counting:
    """A shard whose bucket counts are tallied: how many buckets the aggregator asked of it."""

    def __init__(self, inner: MemoryIndex) -> None:
        self.inner = inner
        self.buckets = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def recount(
        self,
        key: BoardKey,
        since: int | None,
        runs: Sequence[Sequence[int]],
        *,
        generation: int | None = None,
    ) -> Recounted:
        self.buckets += sum(max(0, len(r) - 1) for r in runs)
        return await self.inner.recount(key, since, runs, generation=generation)


async def test_the_histogram_follows_the_moves_and_stays_whole_counting_a_slice() -> None:
    """Cycle after cycle of a few writes (rises, entries, bans, an erasure, a rebuild's swap
    of one shard, a shard's counts marked anew), the snapshot's histogram equals a full count
    at its bounds, though each cycle counts only a rotating slice of the buckets and follows
    the moves for the rest (domain/recount.py)."""
    clock = Clock()
    inner = [MemoryIndex(clock.now) for _ in range(4)]
    parts = [Counting(p) for p in inner]
    shards: list[Any] = parts
    split, snaps = SplitIndex(inner), MemorySnapshots(clock.now)
    agg = make(shards, snaps, clock)
    (spec, w) = agg.live(clock.now())[0]
    key = BoardKey(spec.name, w.id)
    board = await fill(split, key, 3000)
    assert await agg.step() == 1
    rng = random.Random(11)
    fewer = 0
    for turn in range(40):
        for p in parts:
            p.buckets = 0
        for _ in range(rng.randrange(0, 6)):
            member = rng.choice(sorted(board))
            board[member] += rng.randrange(1, 50)
            await split.write(key, [(member, board[member])], descending=True, expire_at=None)
        if turn % 7 == 3:
            new = f"q_{turn:03d}"
            board[new] = rng.randrange(0, 1000)
            await split.write(key, [(new, board[new])], descending=True, expire_at=None)
        if turn % 11 == 5:
            gone = rng.choice(sorted(board))
            del board[gone]
            await split.ban([key], gone)
        if turn == 20:  # a rebuild swaps one shard's board whole: no band tells what moved
            shard = inner[0]
            rows = await shard.page(key, 0, await shard.count(key) - 1, descending=True)
            kept = rows[: len(rows) // 2]
            for m, _ in rows[len(kept) :]:
                del board[m]
            await shard.replace(key, kept, expire_at=None)
        if turn == 25:  # an erasure: a move like a ban's
            gone = rng.choice(sorted(board))
            del board[gone]
            await split.erase_player(gone)
        if turn == 30:  # the mender marks a shard's counts anew (a failover): counted afresh
            await inner[1].renew_counts([(key, None)])
        clock.t += aggregator.PERIOD_S
        assert await agg.step() == 1
        snap = await snapshot_of(snaps, key)
        h = snap.histogram
        assert h is not None
        whole = await split.count_between(key, list(h.bounds))
        assert list(h.counts) == whole, f"turn {turn}"
        assert (
            snap.total
            == len(board)
            == sum(whole) + sum(1 for s in board.values() if not h.bounds[0] <= s < h.bounds[-1])
        )
        buckets = len(h.bounds) - 1
        if turn == 20:
            assert parts[0].buckets >= buckets  # the swapped shard: every bucket counted
        if turn == 30:
            assert parts[1].buckets >= buckets  # the shard marked anew: every bucket counted
        if all(p.buckets < buckets for p in parts):
            fewer += 1
    assert fewer >= 30, f"only {fewer} of 40 cycles counted less than every bucket"
