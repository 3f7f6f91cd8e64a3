"""The tallies of writes a board keeps by band (``domain/changes.py``), on every index
adapter: each shard bumps exactly the fields ``tallies`` names, in the write's own step;
and on every split board (in-process, hash-tag shards on one Redis, Redis Cluster), a
labelled rank read while other players overtake the reader stays inside its interval."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from podium.config.settings import parse
from podium.domain.boards import BoardSpec, in_board_order
from podium.domain.changes import Changes, tallies
from podium.domain.recount import MOVES_KEPT
from podium.domain.snapshot import Snapshot
from podium.index.memory.snapshots import MemorySnapshots
from podium.ports import BoardKey, Estimated, ShardIndex
from podium.service.ranks.counted import CountedRanks
from podium.service.ranks.snapshot import SnapshotRanks
from podium.workers.aggregator import Aggregator
from tests.contract.conftest import SINGLE_INDEXES, SPLIT_INDEXES, SPLIT_SHARDS, Backend, backend_of

WEEK = BoardKey("week", "2026-W44")
T = 24  # the time bits of a week board's scores, roughly: scores as the codec makes them


def expected(moves: list[tuple[int | None, int | None]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for old, new in moves:
        for f in tallies(old, new):
            out[f] = out.get(f, 0) + 1
    return out


@pytest.fixture(params=SINGLE_INDEXES)
def backend(request: pytest.FixtureRequest) -> Backend:
    return backend_of(request, request.param)


@pytest.fixture
async def shard(backend: Backend) -> AsyncIterator[ShardIndex]:
    idx: Any = backend.index()
    try:
        yield idx
    finally:
        await idx.close()


async def test_rises_entries_and_refused_writes_are_tallied_as_the_domain_says(
    shard: ShardIndex, descending: bool
) -> None:
    assert await shard.changes(WEEK) == {}
    a, b = (5 << T) + 9, (300 << T) + 2
    await shard.write(WEEK, [("p1", a), ("p2", b)], descending=descending, expire_at=None)
    moves: list[tuple[int | None, int | None]] = [(None, a), (None, b)]
    better = (7000 << T) + 1 if descending else 1
    worse = 0 if descending else (9000 << T)
    # one move ahead, one write that GT/LT refuses (no change: nothing tallied), one repeat
    await shard.write(
        WEEK, [("p1", better), ("p2", worse), ("p2", b)], descending=descending, expire_at=None
    )
    moves.append((a, better))
    assert await shard.changes(WEEK) == expected(moves)


async def test_versioned_falls_removals_and_bans_are_tallied(shard: ShardIndex) -> None:
    hi, lo = (4000 << T) + 5, (3 << T) + 5
    await shard.write(
        WEEK, [("p1", hi), ("p2", hi)], descending=True, expire_at=None, versions=[1, 1]
    )
    await shard.write(WEEK, [("p1", lo)], descending=True, expire_at=None, versions=[2])
    await shard.write(WEEK, [("p1", hi)], descending=True, expire_at=None, versions=[2])  # stale
    await shard.remove(WEEK, ["p2"], [2], expire_at=None)
    await shard.write(WEEK, [("p3", lo)], descending=True, expire_at=None)
    await shard.ban([WEEK], "p3")
    moves = [(None, hi), (None, hi), (hi, lo), (hi, None), (None, lo), (lo, None)]
    assert await shard.changes(WEEK) == expected(moves)


async def test_a_board_replaced_whole_is_tallied_as_a_new_generation(shard: ShardIndex) -> None:
    """A rebuild's swap (``replace``) and switch move members no band tallies: ``g`` says so,
    and the aggregator counts every bucket again (``domain/recount.py``)."""
    a = (5 << T) + 9
    await shard.write(WEEK, [("p1", a)], descending=True, expire_at=None)
    held = expected([(None, a)])
    await shard.replace(WEEK, [("p1", a), ("p2", a)], expire_at=None)
    assert await shard.changes(WEEK) == {**held, "n": held["n"] + 1, "g": 1}
    assert await shard.begin_build(WEEK, "tok", 60.0)
    await shard.fill_build(WEEK, "tok", [("p3", a)], descending=True)
    assert await shard.switch_build(WEEK, "tok", expire_at=None, grace_s=1.0)
    await shard.drop_build(WEEK, "tok")
    assert await shard.changes(WEEK) == {**held, "n": held["n"] + 2, "g": 2}
    assert await shard.count(WEEK) == 1  # the switched-in generation, tallied as the live one


async def test_a_recount_holds_the_moves_since_a_tally_and_counts_runs_at_one_instant(
    shard: ShardIndex,
) -> None:
    """``recount``: the tally ``n``, every move since an earlier one (old score, new), and
    runs of buckets counted as ``count_between`` counts them (domain/recount.py)."""
    scores = [(i << T) + 1 for i in range(0, 100, 3)]
    await shard.write(
        WEEK, [(f"p{i}", s) for i, s in enumerate(scores)], descending=True, expire_at=None
    )
    runs = [[0, 10 << T, 20 << T], [51 << T, 52 << T], [60 << T], [70 << T, 90 << T, 1 << 40]]
    got = await shard.recount(WEEK, None, runs)
    assert got.n == len(scores) and got.moves is None
    assert got.counts == [await shard.count_between(WEEK, r) for r in runs]
    assert got.counts == [[4, 3], [1], [], [6, 4]]
    up = (95 << T) + 1
    await shard.write(WEEK, [("p0", up), ("p1", 0)], descending=True, expire_at=None)  # 0: refused
    await shard.ban([WEEK], "p2")
    again = await shard.recount(WEEK, got.n, [])
    assert again.n == got.n + 2 and again.counts == []
    assert again.moves == [(scores[0], up), (scores[2], None)]
    assert (await shard.recount(WEEK, again.n, [])).moves == []
    assert (await shard.recount(WEEK, again.n + 1, [])).moves is None  # the tally went back
    await shard.replace(WEEK, [("p9", up)], expire_at=None)
    assert (await shard.recount(WEEK, again.n, [])).moves is None  # replaced whole
    assert await shard.recount(BoardKey("week", "2026-W01"), 0, [[0, 5, 9]]) == (
        0,
        [],
        [[0, 0]],
        0,
    )


async def test_an_erasure_takes_the_player_off_as_a_move(shard: ShardIndex) -> None:
    """An erased player leaves the board window as a removal does (``x<octave>`` and ``n``
    bumped, ``'<old> '`` among the moves, in the removal's own step), so that counts that
    follow the moves stop counting them; once, however many generations held them (a
    rebuild's new one being filled, the retired one kept for its grace period)."""
    a, b = (5 << T) + 9, (300 << T) + 2
    await shard.write(WEEK, [("p1", a), ("p2", b)], descending=True, expire_at=None)
    # a rebuild switched in, the old generation kept aside (its grace), a next one filling
    assert await shard.begin_build(WEEK, "tok", 60.0)
    await shard.fill_build(WEEK, "tok", [("p1", a), ("p2", b)], descending=True)
    assert await shard.switch_build(WEEK, "tok", expire_at=None, grace_s=60.0)
    assert await shard.begin_build(WEEK, "tok2", 60.0)
    await shard.fill_build(WEEK, "tok2", [("p1", a), ("p2", b)], descending=True)
    got = await shard.recount(WEEK, None, [])
    before = await shard.changes(WEEK)
    assert await shard.erase_player("p2") >= 1
    after = await shard.recount(WEEK, got.n, [], generation=got.generation)
    assert after.moves == [(b, None)]
    assert after.n == got.n + 1 and after.generation == got.generation
    step = expected([(b, None)])
    assert await shard.changes(WEEK) == {
        k: before.get(k, 0) + step.get(k, 0) for k in before | step
    }
    assert await shard.count(WEEK) == 1
    await shard.abort_build(WEEK, "tok2")
    await shard.drop_build(WEEK, "tok")


async def test_a_sweep_of_erased_players_takes_them_off_as_moves(shard: ShardIndex) -> None:
    scores = {f"p{i}": (i << T) + 1 for i in range(1, 30)}
    await shard.write(WEEK, list(scores.items()), descending=True, expire_at=None)
    got = await shard.recount(WEEK, None, [])
    gone = {"p3", "p17", "p28"}
    assert await shard.sweep_erased(lambda ids: {p for p in ids if p in gone}) >= 3
    after = await shard.recount(WEEK, got.n, [], generation=got.generation)
    assert after.moves is not None
    assert sorted(after.moves, key=str) == sorted(((scores[p], None) for p in gone), key=str)


async def test_a_window_marked_anew_is_counted_afresh(shard: ShardIndex) -> None:
    """``renew_counts``, what the mender does to a shard whose node took over: the moves
    since any earlier tally are not told (``recount``), however many writes followed the
    mark, and neither is what changed since (``Changes.since``); counts taken after the mark
    follow the moves again."""
    a = (5 << T) + 9
    await shard.write(WEEK, [(f"p{i}", a + i) for i in range(8)], descending=True, expire_at=None)
    got = await shard.recount(WEEK, None, [])
    before = Changes.summed([await shard.changes(WEEK)])
    await shard.renew_counts([(WEEK, None)])
    marked = await shard.recount(WEEK, got.n, [], generation=got.generation)
    assert marked.moves is None and marked.n == got.n + 1
    assert marked.generation != got.generation
    # The node that took over held fewer writes than were counted (here two), so the mark
    # lies before the tally held, and writes since climb past it: the moves since that
    # tally are all writes of the new node, no mark among them. The generation still tells.
    await shard.write(WEEK, [(f"q{i}", a) for i in range(5)], descending=True, expire_at=None)
    again = await shard.recount(WEEK, got.n + 2, [], generation=got.generation)
    assert again.moves is None
    assert (await shard.recount(WEEK, got.n + 2, [])).moves == [(None, a)] * 4  # not told
    assert Changes.summed([await shard.changes(WEEK)]).since(before) is None
    # From counts of the new generation, the moves again.
    follow = await shard.recount(WEEK, marked.n, [], generation=marked.generation)
    assert follow.moves == [(None, a)] * 5
    # A window with no tallies on the shard gets them (and the expiry given).
    empty = BoardKey("week", "2026-W01")
    await shard.renew_counts([(empty, int(time.time()) + 3600)])
    fresh = await shard.changes(empty)
    assert fresh["n"] == 1 and fresh["g"] > 0


async def test_the_moves_kept_are_the_last_ones(shard: ShardIndex) -> None:
    n = 2 * MOVES_KEPT + 5
    for i in range(0, n, 500):
        batch = [(f"p{j}", (j << 8) + 1) for j in range(i, min(n, i + 500))]
        await shard.write(WEEK, batch, descending=True, expire_at=None)
    got = await shard.recount(WEEK, n - MOVES_KEPT, [])
    assert got.moves == [(None, (j << 8) + 1) for j in range(n - MOVES_KEPT, n)]
    assert (await shard.recount(WEEK, 0, [])).moves is None  # more than the list keeps


async def test_bans_alone_keep_only_the_last_moves(shard: ShardIndex) -> None:
    """A run of bans on a board nobody writes meanwhile: the list is trimmed by the bans
    themselves, as by writes."""
    n = 2 * MOVES_KEPT + 5
    for i in range(0, n, 500):
        batch = [(f"p{j}", (j << 8) + 1) for j in range(i, min(n, i + 500))]
        await shard.write(WEEK, batch, descending=True, expire_at=None)
    for j in range(n):
        await shard.ban([WEEK], f"p{j}")
    got = await shard.recount(WEEK, 2 * n - MOVES_KEPT, [])
    assert got.moves == [((j << 8) + 1, None) for j in range(n - MOVES_KEPT, n)]
    assert (await shard.recount(WEEK, n, [])).moves is None  # more than the list keeps


# -- a labelled rank on a split board that moves ----------------------------------------------


class Clock:
    def now(self) -> float:
        return time.time()


@pytest.fixture(params=SPLIT_INDEXES)
def split_backend(request: pytest.FixtureRequest) -> Backend:
    return backend_of(request, request.param)


async def _counted_board(
    split: Any, backend: Backend, rng: random.Random
) -> tuple[Clock, MemorySnapshots, BoardSpec, BoardKey, dict[str, int], Aggregator]:
    """A week board of 1,500 players on the split index, counted once by the aggregator
    (its snapshot published): the clock, the snapshots, the board's spec and key, every
    member's encoded score, and the aggregator."""
    settings = parse(
        {
            "index": {"shards": SPLIT_SHARDS[backend.kind]},
            "boards": [{"name": "week", "window": "week", "exact_top": 20}],
        }
    )
    clock = Clock()
    snaps = MemorySnapshots(clock.now)
    agg = Aggregator(settings, split.shards, snaps, clock)
    spec, w = agg.live(clock.now())[0]
    key = BoardKey(spec.name, w.id)
    codec = spec.codec
    board = {f"p_{i:05d}": codec.encode(rng.randrange(0, 500), 100) for i in range(1500)}
    await split.write(key, list(board.items()), descending=True, expire_at=None)
    assert await agg.step() == 1
    return clock, snaps, spec, key, board, agg


async def test_a_labelled_rank_read_while_others_overtake_stays_inside_its_interval(
    split_backend: Backend,
) -> None:
    split: Any = split_backend.index()
    try:
        rng = random.Random(11)
        clock, snaps, spec, key, board, _ = await _counted_board(split, split_backend, rng)
        codec = spec.codec
        data = await snaps.read(key)
        assert data is not None
        snap = Snapshot.decode(data)
        assert snap.histogram is not None and snap.changes is not None

        # After the counts: 200 players overtake others (and some jump past many), 50 enter.
        movers = rng.sample(sorted(board), 200)
        moved = {
            m: codec.encode(codec.points(board[m]) + rng.randrange(1, 300), 200) for m in movers
        }
        fresh = {f"q_{i:03d}": codec.encode(rng.randrange(0, 800), 200) for i in range(50)}
        await split.write(key, [*moved.items(), *fresh.items()], descending=True, expire_at=None)
        board |= moved | fresh
        truth = {m: i + 1 for i, (m, _) in enumerate(in_board_order(board.items(), True))}

        ranks = SnapshotRanks(CountedRanks(split, clock), split, snaps, split.copy, clock)
        estimated = missed_by_counts = 0
        for member in rng.sample(sorted(board), 150):
            got = await ranks.around(spec, key, member, 0)
            if not isinstance(got, Estimated):
                continue  # inside the exact top: counted
            estimated += 1
            est, true = got.estimate, truth[member]
            assert est.low <= true <= est.high, (member, est, true)
            assert est.low <= est.rank <= est.high
            # The same read without the tallies: its interval as of the counts alone.
            bare = snap.histogram.estimate(board[member], codec, counted=False)
            missed_by_counts += not bare.low <= true <= bare.high
        assert estimated > 100
        # The test is one the counts alone would fail: the tallies are what keep it.
        assert missed_by_counts > 0
        now = Changes.summed(await split.changes(key)).since(snap.changes)
        assert now is not None and sum(now.writes) == 250
    finally:
        await split.close()


async def test_labelled_ranks_read_while_writes_run_stay_inside_their_intervals(
    split_backend: Backend,
) -> None:
    """Writes run while the ranks are read: every rank only moves down on a board whose
    totals rise, so the true rank at the moment of an answer lies between the reader's rank
    among the writes done before the read began and among every write begun before it
    ended; the interval must reach into that span, and the counts alone do not."""
    split: Any = split_backend.index()
    try:
        rng = random.Random(5)
        clock, snaps, spec, key, board, _ = await _counted_board(split, split_backend, rng)
        codec = spec.codec
        readers = rng.sample(sorted(board), 60)
        others = sorted(set(board) - set(readers))
        done, issued = dict(board), dict(board)
        stop = asyncio.Event()

        fresh = iter(range(1 << 30))

        async def write_batch() -> None:
            batch = {}
            for m in rng.sample(others, 20):
                batch[m] = codec.encode(codec.points(issued[m]) + rng.randrange(1, 200), 200)
            for _ in range(3):
                batch[f"q_{next(fresh):05d}"] = codec.encode(rng.randrange(0, 700), 200)
            issued.update(batch)
            await split.write(key, list(batch.items()), descending=True, expire_at=None)
            done.update(batch)

        async def writer() -> None:
            while not stop.is_set():
                await write_batch()
                await asyncio.sleep(0.002)

        def rank(state: dict[str, int], member: str) -> int:
            s = state[member]
            return 1 + sum(1 for m, v in state.items() if v > s or (v == s and m > member))

        ranks = SnapshotRanks(CountedRanks(split, clock), split, snaps, split.copy, clock)
        for _ in range(10):  # after the counts, before the reads: whatever the speed
            await write_batch()
        task = asyncio.create_task(writer())
        checked = beyond_counts = 0
        try:
            for member in readers:
                r0 = rank(done, member)
                got = await ranks.around(spec, key, member, 0)
                r1 = rank(issued, member)
                if not isinstance(got, Estimated):
                    continue
                checked += 1
                est = got.estimate
                assert est.low <= r1 and r0 <= est.high, (member, est, r0, r1)
                data = await snaps.read(key)
                assert data is not None
                hist = Snapshot.decode(data).histogram
                assert hist is not None
                bare = hist.estimate(board[member], codec, counted=False)
                beyond_counts += bare.high < r0
        finally:
            stop.set()
            await task
        assert checked > 40
        assert beyond_counts > 0  # the counts alone would have missed
    finally:
        await split.close()


async def test_cycles_that_follow_the_moves_keep_every_interval_and_the_counts_whole(
    split_backend: Backend,
) -> None:
    """The aggregator cycling while writes run, its counts carried from cycle to cycle by
    the moves each shard keeps (``domain/recount.py``): every labelled rank read between
    the cycles lies inside its interval as the writes around the read allow, and once the
    writes stop, the histogram equals every bucket counted afresh."""
    split: Any = split_backend.index()
    try:
        rng = random.Random(9)
        clock, snaps, spec, key, board, agg = await _counted_board(split, split_backend, rng)
        codec = spec.codec
        readers = rng.sample(sorted(board), 150)  # whose own scores stay: ranks only fall
        others = sorted(set(board) - set(readers))
        done, issued = dict(board), dict(board)
        stop = asyncio.Event()
        fresh = iter(range(1 << 30))

        async def writer() -> None:
            while not stop.is_set():
                batch = {}
                for m in rng.sample(others, 15):
                    batch[m] = codec.encode(codec.points(issued[m]) + rng.randrange(1, 200), 200)
                batch[f"q_{next(fresh):05d}"] = codec.encode(rng.randrange(0, 700), 200)
                issued.update(batch)
                await split.write(key, list(batch.items()), descending=True, expire_at=None)
                done.update(batch)
                await asyncio.sleep(0.005)

        def rank(state: dict[str, int], member: str) -> int:
            s = state[member]
            return 1 + sum(1 for m, v in state.items() if v > s or (v == s and m > member))

        ranks = SnapshotRanks(CountedRanks(split, clock), split, snaps, split.copy, clock)
        task = asyncio.create_task(writer())
        checked = 0
        try:
            for _ in range(12):
                assert await agg.step() == 1
                for member in rng.sample(readers, 8):
                    r0 = rank(done, member)
                    got = await ranks.around(spec, key, member, 0)
                    r1 = rank(issued, member)
                    if isinstance(got, Estimated):
                        checked += 1
                        est = got.estimate
                        assert est.low <= r1 and r0 <= est.high, (member, est, r0, r1)
        finally:
            stop.set()
            await task
        assert checked > 40
        assert await agg.step() == 1
        data = await snaps.read(key)
        assert data is not None
        hist = Snapshot.decode(data).histogram
        assert hist is not None
        assert list(hist.counts) == await split.count_between(key, list(hist.bounds))
        assert len(done) > len(board)  # the writes ran: new players entered
    finally:
        await split.close()


async def test_an_erasure_on_a_split_board_is_out_of_the_next_histogram(
    split_backend: Backend,
) -> None:
    """Erased players leave the aggregator's counts at its next cycle: each removal is a move
    its shard keeps, which the cycle follows, so the histogram equals every bucket counted
    afresh at once, not once the rotating count reaches the players' buckets
    (``domain/recount.py``); and the tallies since the snapshot show the exits."""
    split: Any = split_backend.index()
    try:
        rng = random.Random(13)
        _, snaps, _, key, board, agg = await _counted_board(split, split_backend, rng)
        data = await snaps.read(key)
        assert data is not None
        snap = Snapshot.decode(data)
        assert snap.histogram is not None and snap.changes is not None
        # Below the exact top, spread over the board: in far more buckets than the sixteenth
        # a cycle counts whatever the moves say.
        order = in_board_order(board.items(), True)
        erased = [m for m, _ in order[100::120]]
        for p in erased:
            assert await split.erase_player(p) >= 1
        assert await agg.step() == 1
        data = await snaps.read(key)
        assert data is not None
        hist = Snapshot.decode(data).histogram
        assert hist is not None and hist.bounds == snap.histogram.bounds
        assert list(hist.counts) == await split.count_between(key, list(hist.bounds))
        since = Changes.summed(await split.changes(key)).since(snap.changes)
        assert since is not None and sum(since.writes) == len(erased)
        assert sum(v for k, v in since.fields.items() if k.startswith("x")) == len(erased)
    finally:
        await split.close()
