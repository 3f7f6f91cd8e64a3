"""The figures of a board split across index shards (``[index] shards = 16``) against one
shard, each beside a reference measured in the same run, on private ``redis-server``s this
script starts (never the machine's Redis: millions of members).

- merge: ``domain.boards.merge_in_board_order`` of 16 board-ordered lists of 10,000 rows,
  the first 10,000 taken (the aggregator's merge of every shard's top), against ``sorted``
  of the concatenation and ``heapq.merge`` on the score alone; median of ``--runs``.
- memory: ``INFO memory`` used_memory per member over an empty server, at each of
  ``--sizes``, on 16 shards and on 1, against a raw ZADD of the same members into one plain
  key; one configuration loaded at a time (FLUSHALL between them).
- cycle: ``Aggregator.cycle`` on the largest board, 16 shards: wall time, podium process CPU
  (``time.process_time``) and Redis CPU (``INFO cpu``), for a planning cycle (a fresh
  aggregator) and steady cycles; medians. With ``--churn R``, a writer beside the cycles
  applies R results a second to the board (random players, 1-200 points more each, through
  write.lua as the updater does), and the steady cycles are paced a period apart, as the
  aggregator runs them: a cycle adds the moves since its last counts and counts a rotating
  slice (``domain/recount.py``), so without writes it would follow no moves at all.
- reads: ``--readers`` concurrent ``Reads.player_rank`` (built by ``bootstrap.build`` on an
  embedded SQLite store and the private Redis, 16 shards and 1) for random players below
  the exact top and inside it, alternating, beside raw ZREVRANK and ZMSCORE through
  redis-py, and every shard's tallies read alone (what an estimated read adds at most);
  reads/s, p50/p99, CPU per read. With ``--pages``, a top page's rows too, as a
  page's refill reads them (``RankSource.top``, no page cache): the first 101 and 101 from
  rank 5,001; and the head of the first rows counted on the shards (read once per 0.2 s
  and board window by each process), beside every shard's first rows read raw.

The 16-shard board lives on one private server and the one-shard board on another, so that
both stay loaded for the reads (about 1.2 GB each at ten million members).

    python benchmarks/split_index.py [--sizes 1000000,10000000] [--phases merge,memory,cycle,reads]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import heapq
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from itertools import islice
from operator import itemgetter
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

import _split_board as sb
from _harness import code_line, install_sigterm, machine_line, quantile, run
from podium.bootstrap import Backends, build
from podium.config.settings import Settings, parse
from podium.domain.boards import BoardSpec, in_board_order, merge_in_board_order
from podium.domain.sharding import shard_of, shard_tag
from podium.domain.windows import Window
from podium.errors import Unavailable
from podium.index.redis.keys import Keys
from podium.ports import BoardKey, SystemClock
from podium.serve import gcpolicy
from podium.service.ranks import snapshot as snapshot_ranks
from podium.service.ranks.counted import CountedRanks
from podium.workers import aggregator
from podium.workers.aggregator import Aggregator

PREFIX = "podium-bench-split"
BOARD = "season"
SEED = 20261201
SHARDS = 16
POOL = 100  # redis-py's default max_connections for one client's pool


def settings_for(url: str, shards: int, tmp: Path) -> Settings:
    return parse(
        {
            "server": {"read_rate_per_s": 0},
            "store": {"url": f"sqlite:///{tmp}/podium-{shards}.db"},
            "index": {"url": url, "shards": shards, "prefix": PREFIX},
            "archive": {"dir": str(tmp / f"standings-{shards}")},
        }
    )


def season(settings: Settings, now: int) -> tuple[BoardSpec, Window]:
    spec = next(b for b in settings.boards if b.name == BOARD)
    w = spec.rule.window_at(now)
    assert w is not None, "the season board has no window now"
    return spec, w


# -- merge --------------------------------------------------------------------------------


def bench_merge(runs: int, lists: int = SHARDS, depth: int = 10_000) -> None:
    rng = random.Random(SEED)
    parts = [
        in_board_order(
            [(sb.player(k * depth + i), int(rng.lognormvariate(20, 1.5))) for i in range(depth)],
            True,
        )
        for k in range(lists)
    ]
    flat = [row for p in parts for row in p]
    by_score = itemgetter(1)
    cases: dict[str, Callable[[], list[tuple[str, int]]]] = {
        "merge_in_board_order": lambda: list(islice(merge_in_board_order(parts, True), depth)),
        "reference: sorted(concatenation)": lambda: sorted(
            flat, key=itemgetter(1, 0), reverse=True
        )[:depth],
        "reference: heapq.merge, score key": lambda: list(
            islice(heapq.merge(*parts, key=by_score, reverse=True), depth)
        ),
    }
    first = cases["merge_in_board_order"]()
    assert first == in_board_order(flat, True)[:depth], "the merge is not the board order"
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, call in cases.items():
            t0 = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t0)
    ref = statistics.median(times["reference: sorted(concatenation)"])
    print(f"\nmerge: {lists} lists x {depth} rows, first {depth} taken; median of {runs} runs")
    for name, values in times.items():
        med = statistics.median(values)
        print(
            f"  {name:<36} {med * 1000:8.2f} ms  [{min(values) * 1000:.2f}-"
            f"{max(values) * 1000:.2f}]  x{med / ref:.2f} sorted"
        )


# -- memory -------------------------------------------------------------------------------


def measure_memory(
    server: sb.PrivateRedis,
    keys: list[str],
    n: int,
    scores: Any,
    where: Any,
    label: str,
    keep: bool,
) -> float:
    server.flushall()
    empty = server.used_memory()
    added, secs = sb.load(server, keys, n, scores, where, f"{label} {n:,}")
    assert added == n, f"{label}: redis added {added} of {n}"
    used = server.used_memory()
    per = (used - empty) / n
    print(
        f"  {label:<28} {n:>11,} members  {per:7.1f} B/member  "
        f"({(used - empty) / 2**20:8.1f} MiB over an empty server; loaded in {secs:.1f} s, "
        f"{n / secs:,.0f}/s)",
        flush=True,
    )
    if not keep:
        server.flushall()
    return per


# -- aggregator cycles ------------------------------------------------------------------


async def churn(
    b16: Backends, spec: BoardSpec, w: Window, scores: Any, rate: float, written: list[int]
) -> None:
    """``rate`` results a second onto the board until cancelled: a random player's total up
    by 1-200 points, in batches of a tenth of a second, as the updater writes them."""
    codec, rng = spec.codec, random.Random(SEED + 1)
    key, n = BoardKey(spec.name, w.id), len(scores)
    batch = max(1, round(rate / 10))
    next_at = time.perf_counter()
    while True:
        entries = []
        for _ in range(batch):
            i = rng.randrange(n)
            points = codec.points(scores[i]) + rng.randint(1, 200)
            scores[i] = codec.encode(points, max(0, int(time.time()) - w.start))
            entries.append((sb.player(i), scores[i]))
        written[0] += await b16.index.write(key, entries, descending=True, expire_at=None)
        next_at += batch / rate
        await asyncio.sleep(max(0.0, next_at - time.perf_counter()))


async def bench_cycles(
    b16: Backends,
    server: sb.PrivateRedis,
    runs: int,
    bounds: int | None = None,
    token: str | None = None,
    scores: Any = None,
    rate: float = 0.0,
) -> Aggregator:
    assert b16.split is not None
    spec, w = season(b16.settings, int(time.time()))
    written = [0]
    writer = (
        asyncio.create_task(churn(b16, spec, w, scores, rate, written))
        if rate and scores is not None
        else None
    )
    first: Aggregator | None = None
    figures: dict[str, list[tuple[float, float, float]]] = {
        "planning": [],
        "steady": [],
        "re-plan": [],
    }
    replan_cycles: list[int] = []
    for _ in range(runs):
        agg = Aggregator(b16.settings, b16.split.shards, b16.snapshots, SystemClock())
        if bounds is not None:  # the histogram's budget measured against another's
            agg.max_bounds = bounds
        if first is None:
            first = agg
        # the same lease holder: each fresh one plans again
        agg.token = first.token if token is None else token
        fence = await b16.snapshots.lead(agg.token, time.time(), aggregator.LEASE_S)
        assert fence is not None, "the lease is held by someone else"
        for kind in ("planning", *("steady",) * 3):
            if writer is not None and kind == "steady":  # a period's writes between cycles
                await asyncio.sleep(aggregator.PERIOD_S)
            cpu0, redis0, t0 = time.process_time(), server.cpu_s(), time.perf_counter()
            kept = await agg.cycle(spec, w, fence)
            wall = time.perf_counter() - t0
            cpu, rcpu = time.process_time() - cpu0, server.cpu_s() - redis0
            assert kept, "the snapshot was not published"
            figures[kind].append((wall, cpu, rcpu))
        # A re-plan on an aggregator that has boundaries (once a minute, or on drift): every
        # cycle until the new boundaries are in use (one, where planning holds the cycle up).
        board = agg._boards[BoardKey(spec.name, w.id)]
        board.planned_at = float("-inf")
        n = 0
        while n == 0 or getattr(board, "planning", None) is not None:
            n += 1
            cpu0, redis0, t0 = time.process_time(), server.cpu_s(), time.perf_counter()
            assert await agg.cycle(spec, w, fence), "the snapshot was not published"
            wall = time.perf_counter() - t0
            figures["re-plan"].append((wall, time.process_time() - cpu0, server.cpu_s() - redis0))
            if getattr(board, "planning", None) is not None:
                await asyncio.sleep(aggregator.PERIOD_S / 10)  # as between a fleet's cycles
        replan_cycles.append(n)
    if writer is not None:
        writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await writer
    print(
        f"\naggregator cycle, {spec.name} board, {SHARDS} shards, exact_top {spec.exact_top}, "
        f"at most {agg.max_bounds} boundaries"
        + (f", {rate:g} results/s beside it ({written[0]:,} scores written)" if writer else "")
    )
    if writer is not None:
        print(
            "  (Redis CPU includes the writes; podium CPU the writer's: both are upper bounds "
            "of the cycle's own)"
        )
    for kind, rows in figures.items():
        walls, cpus, rcpus = zip(*rows, strict=True)
        print(
            f"  {kind:<9} n={len(rows):<3} wall {statistics.median(walls) * 1000:7.1f} ms "
            f"[{min(walls) * 1000:.1f}-{max(walls) * 1000:.1f}]  podium CPU "
            f"{statistics.median(cpus) * 1000:7.1f} ms  redis CPU "
            f"{statistics.median(rcpus) * 1000:7.1f} ms"
        )
    print(f"  cycles until a re-plan's boundaries were in use: {replan_cycles}")
    assert first is not None
    return first


# -- reads --------------------------------------------------------------------------------


async def closed_loop(
    call: Callable[[str], Awaitable[object]], players: list[str], readers: int, secs: float
) -> tuple[int, int, float, list[float]]:
    """``readers`` tasks calling back to back for ``secs``: (answers, errors, elapsed,
    sorted latencies of the answers). An error (a 503 of podium's) is counted, not timed."""
    lat: list[float] = []
    errors = 0
    stop = time.perf_counter() + secs
    rng = random.Random()

    async def reader() -> None:
        nonlocal errors
        while time.perf_counter() < stop:
            p = players[rng.randrange(len(players))]
            t0 = time.perf_counter()
            try:
                await call(p)
            except Unavailable:
                errors += 1
                continue
            lat.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    await asyncio.gather(*(reader() for _ in range(readers)))
    return len(lat), errors, time.perf_counter() - t0, sorted(lat)


async def bench_reads(
    b1: Backends,
    b16: Backends,
    s1: sb.PrivateRedis,
    s16: sb.PrivateRedis,
    agg: Aggregator,
    n: int,
    args: argparse.Namespace,
) -> None:
    spec, w = season(b16.settings, int(time.time()))
    key = BoardKey(spec.name, w.id)
    one_key = Keys(PREFIX).board(key)
    raw1 = aioredis.Redis.from_url(s1.url, decode_responses=True)
    raw16 = aioredis.Redis.from_url(s16.url, decode_responses=True)
    try:
        top = [str(m) for m in await raw1.zrevrange(one_key, 0, spec.exact_top - 1)]
        in_top = set(top)
        rng = random.Random(SEED)
        below: list[str] = []
        while len(below) < 20_000:
            p = sb.player(rng.randrange(n))
            if p not in in_top:
                below.append(p)

        def shard_key(p: str) -> str:
            return Keys(PREFIX, shard_tag(shard_of(p, SHARDS))).board(key)

        def zmscore(p: str) -> Awaitable[object]:
            return raw16.zmscore(shard_key(p), [p])

        seen: dict[str, list[bool]] = {}

        def rank(b: Backends, label: str) -> Callable[[str], Awaitable[object]]:
            async def call(p: str) -> object:
                r = await b.podium.reads.player_rank(BOARD, p, 2, None)
                seen.setdefault(label, []).append(r.exact)
                return r

            return call

        async def fresh_snapshot() -> None:
            fence = await b16.snapshots.lead(agg.token, time.time(), aggregator.LEASE_S)
            assert fence is not None and await agg.cycle(spec, w, fence)

        few = max(1, POOL // SHARDS)  # in-top reads on 16 shards that fit the pool
        Case = tuple[str, sb.PrivateRedis, Callable[[str], Awaitable[object]], list[str], int]
        r_ = args.readers
        cases: list[Case] = [
            ("reference: ZREVRANK, 1 shard", s1, lambda p: raw1.zrevrank(one_key, p), below, r_),
            ("reference: ZMSCORE, 16 shards", s16, lambda p: zmscore(p), below, r_),
            ("player_rank below top, 1 shard", s1, rank(b1, "below1"), below, r_),
            ("player_rank below top, 16 shards", s16, rank(b16, "below16"), below, r_),
            ("player_rank in top, 1 shard", s1, rank(b1, "top1"), top, r_),
            ("player_rank in top, 16 shards", s16, rank(b16, "top16"), top, r_),
            (f"player_rank in top, 1 shard, {few} rdrs", s1, rank(b1, "top1"), top, few),
            (f"player_rank in top, 16 shards, {few} rdrs", s16, rank(b16, "top16"), top, few),
        ]
        assert b16.split is not None
        split16 = b16.split
        # The tallies an estimated read adds (issue 34): every shard's tallies of the board
        # window, one call to each of the 16 shards, read alone (a reader shares one such read
        # with the readers that asked before it began, so this is its cost at most).
        cases.append(
            ("every shard's tallies, 16 shards", s16, lambda _: split16.changes(key), below, r_)
        )
        if args.pages:
            # A top page's rows. The first ones: since issue 34's fresh pages, one head of the
            # first 200 counted on the 16 shards per 0.2 s (its cost: CountedRanks' read of
            # it, every call a refill), before sliced from the snapshot; beside it the raw
            # reads of the head, every shard's first 200 rows, pipelined. Deeper ones: the
            # snapshot's slice in both. Through the rank source as a page's refill reads
            # them (no page cache).
            ranks = b16.podium.reads.ranks
            counted = CountedRanks(b16.index, b16.clock)
            shard_keys = [Keys(PREFIX, shard_tag(i)).board(key) for i in range(SHARDS)]
            head = getattr(snapshot_ranks, "FRESH_ROWS", 200)  # (a tree before them: 200)

            async def raw_head(_: str) -> object:
                async with raw16.pipeline(transaction=False) as pipe:
                    for k in shard_keys:
                        pipe.zrevrange(k, 0, head - 1, withscores=True)
                    return await pipe.execute()

            def sliced(first: int) -> Callable[[str], Awaitable[object]]:
                return lambda _: ranks.top(spec, key, first, first + 100)

            cases += [
                (f"reference: 16 x ZREVRANGE 0 {head - 1}, piped", s16, raw_head, top, r_),
                (
                    f"a head: rows 1-{head} counted, 16 shards",
                    s16,
                    lambda _: counted.top(spec, key, 0, head - 1),
                    top,
                    r_,
                ),
                ("rank source: rows 1-101, 16 shards", s16, sliced(0), top, r_),
                ("rank source: rows 5001-5101, 16 shards", s16, sliced(5_000), top, r_),
            ]
        # Warm up: connections, scripts loaded, the snapshot held.
        await fresh_snapshot()
        for _, _, call, players, readers in cases:
            await closed_loop(call, players, readers, 0.5)
        seen.clear()
        figures: dict[str, list[tuple[float, float, float, float, float, float]]] = {
            c[0]: [] for c in cases
        }
        for r in range(args.rounds):
            for name, server, call, players, readers in cases:
                if server is s16:  # the snapshot lives 15 s: publish one before each case
                    await fresh_snapshot()
                cpu0, red0 = time.process_time(), server.cpu_s()
                count, errors, elapsed, lats = await closed_loop(
                    call, players, readers, args.seconds
                )
                cpu, red = time.process_time() - cpu0, server.cpu_s() - red0
                done = max(1, count + errors)
                figures[name].append(
                    (
                        count / elapsed,
                        quantile(lats, 0.5),
                        quantile(lats, 0.99),
                        cpu / done,
                        red / done,
                        errors / done,
                    )
                )
            print(
                f"  round {r + 1}: " + ", ".join(f"{v[-1][0]:.0f}/s" for v in figures.values()),
                flush=True,
            )
        print(
            f"\nrank reads, {n:,} members, {args.readers} concurrent readers unless said, "
            f"{args.rounds} rounds of {args.seconds:.0f} s per case (alternating); medians over "
            "rounds; reads/s counts answers, errors are 503s (IndexUnavailable)"
        )
        for name, rows in figures.items():
            rate, p50, p99, cpu, red, err = (
                statistics.median(col) for col in zip(*rows, strict=True)
            )
            rates = [row[0] for row in rows]
            print(
                f"  {name:<40} {rate:7.0f} reads/s [{min(rates):.0f}-{max(rates):.0f}]  "
                f"p50 {p50 * 1000:6.2f} ms  p99 {p99 * 1000:6.2f} ms  "
                f"podium CPU {cpu * 1e6:5.0f} us/call  redis CPU {red * 1e6:5.1f} us/call  "
                f"errors {err:.1%}"
            )
        for label, exact in seen.items():
            print(f"  {label}: {sum(exact)} of {len(exact)} answers exact")
        assert not any(seen["below16"]), "16 shards below the top: every answer estimated"
        assert all(seen["below1"]) and all(seen["top1"]) and all(seen["top16"])
    finally:
        await raw1.aclose()
        await raw16.aclose()


# -- main -----------------------------------------------------------------------------------


async def main_async(args: argparse.Namespace, stack: contextlib.ExitStack) -> None:
    phases = set(args.phases.split(","))
    if "merge" in phases:
        bench_merge(args.runs)
    if not phases & {"memory", "cycle", "reads"}:
        return
    sizes = sorted(int(s) for s in args.sizes.split(","))
    n = sizes[-1]
    s1 = sb.private_redis(stack, "redis-one")
    s16 = sb.private_redis(stack, "redis-split")
    tmp = Path(tempfile.mkdtemp(prefix="podium-bench-split-"))
    stack.callback(shutil.rmtree, tmp, True)
    now = int(time.time())
    spec, w = season(settings_for(s1.url, 1, tmp), now)
    key = BoardKey(spec.name, w.id)
    print(f"\nboard {spec.name} window {w.id}: {n:,} players, scores packed by its codec")
    scores = sb.season_scores(spec, w, now, n, SEED)
    where = sb.shards_of(n, SHARDS)
    one = sb.board_keys(PREFIX, key, 1)
    split = sb.board_keys(PREFIX, key, SHARDS)
    plain = [f"{PREFIX}-plain"]
    if "memory" in phases:
        print(
            "\nmemory (INFO used_memory over an empty server; rows only: no versions, "
            "no copy of profiles)"
        )
        for size in sizes:
            last = size == n
            ref = measure_memory(s1, plain, size, scores, None, "reference: one plain key", False)
            m1 = measure_memory(s1, one, size, scores, None, "1 shard", last)
            m16 = measure_memory(s16, split, size, scores, where, "16 shards", last)
            print(f"  {size:,}: 16 shards / 1 = {m16 / m1:.3f}, 1 shard / plain = {m1 / ref:.3f}")
    else:
        for server, keys, at in ((s1, one, None), (s16, split, where)):
            server.flushall()
            added, _ = sb.load(server, keys, n, scores, at, f"load {n:,}")
            assert added == n
    held = scores if args.churn else None  # what --churn's writer raises; else freed
    del scores
    if not phases & {"cycle", "reads"}:
        return
    b1 = build(settings_for(s1.url, 1, tmp))
    b16 = build(settings_for(s16.url, SHARDS, tmp))
    try:
        await b1.start()
        await b16.start()
        if args.gc == "serve":
            gcpolicy.settle()  # what the app's start-up does in a serving process
        token = None
        for budget in [int(b) for b in args.bounds.split(",") if b]:
            token = (
                await bench_cycles(b16, s16, args.cycles, budget, token, held, args.churn)
            ).token
        agg = await bench_cycles(b16, s16, args.cycles, None, token, held, args.churn)
        if "reads" in phases:
            await bench_reads(b1, b16, s1, s16, agg, n, args)
    finally:
        await b1.close()
        await b16.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--phases", default="merge,memory,cycle,reads")
    ap.add_argument("--sizes", default="1000000,10000000", help="board sizes for memory")
    ap.add_argument("--runs", type=int, default=21, help="merge runs")
    ap.add_argument("--cycles", type=int, default=5, help="fresh aggregators (4 cycles each)")
    ap.add_argument(
        "--bounds",
        default="",
        help="cycles first with these budgets of boundaries (1000 was MAX_BOUNDS before)",
    )
    ap.add_argument(
        "--churn",
        type=float,
        default=0.0,
        help="cycle: results a second written to the board beside the cycles (0: none)",
    )
    ap.add_argument("--readers", type=int, default=32)
    ap.add_argument(
        "--pages", action="store_true", help="reads: top pages' rows too, without the page cache"
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--gc",
        choices=["serve", "default"],
        default="serve",
        help="the collector's policy for the cycles and reads: podium serve's "
        "(gcpolicy.settle) or CPython's default thresholds",
    )
    ap.add_argument("--seconds", type=float, default=5.0, help="per read case per round")
    args = ap.parse_args()
    install_sigterm()
    print(machine_line())
    print(code_line())
    print(f"garbage collector: {args.gc}", flush=True)
    with contextlib.ExitStack() as stack:
        run(main_async(args, stack))
    print(machine_line().replace("at start", "at the end"))


if __name__ == "__main__":
    main()
