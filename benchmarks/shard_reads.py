"""What the reads a merge of shards needs cost (``ShardIndex``: ahead, near, scores_at), on
one shard on the machine's Redis, against a bare ZREVRANK round trip measured in the same
run (the reference: one command, one round trip, no script).

Two boards of ``--members`` players each: one whose scores pack time (every score distinct,
as on a "first to reach" board), and one of shared ranks where every player holds the same
score (one run of ties as long as the board: the worst case, where ``place.lua`` searches
the run by halves). Each case is timed for ``--calls`` sequential calls per round, the
rounds interleaved so that noise hits every case alike; medians in microseconds per call
(and per probe for a batch), and the ratio to the reference.

    python benchmarks/shard_reads.py [--members 100000] [--calls 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import time
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis

from podium.index.redis.index import RedisIndex
from podium.ports import BoardKey

REDIS_URL = "redis://127.0.0.1:6379/0"
DISTINCT = BoardKey("bench", "distinct")
TIED = BoardKey("bench", "tied")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", type=int, default=100_000)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    prefix = f"podium-bench-{secrets.token_hex(4)}"
    index = RedisIndex.from_url(REDIS_URL, prefix=prefix, shard=3)
    raw = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    n = args.members
    players = [f"p{i:07d}" for i in range(0, 2 * n, 2)]  # odd ids are absent, between them
    try:
        for i in range(0, n, 5000):
            chunk = players[i : i + 5000]
            scored = [(p, 1000 * (j + i)) for j, p in enumerate(chunk)]
            await index.write(DISTINCT, scored, descending=True, expire_at=None)
            await index.write(TIED, [(p, 7) for p in chunk], descending=True, expire_at=None)
        mid = players[n // 2]
        absent = f"p{2 * (n // 2) + 1:07d}"
        distinct_score = 1000 * (n // 2) + 500  # between two players' scores
        zkey = index.keys.board(DISTINCT)
        batch = [(f"p{2 * k + 1:07d}", 7) for k in range(0, n, max(1, n // 500))][:500]
        spread = [(m, 1000 * k + 500) for k, (m, _) in enumerate(batch)]

        cases: dict[str, tuple[int, Callable[[], Awaitable[object]]]] = {
            "reference: ZREVRANK": (1, lambda: raw.zrevrank(zkey, mid)),
            "rank (ranks.lua)": (1, lambda: index.rank(DISTINCT, mid, descending=True)),
            "ahead, member at its place": (
                1,
                lambda: index.ahead(DISTINCT, [(mid, 1000 * (n // 2))], descending=True),
            ),
            "ahead, absent, distinct scores": (
                1,
                lambda: index.ahead(DISTINCT, [(absent, distinct_score)], descending=True),
            ),
            "ahead, absent, in a run of all ties": (
                1,
                lambda: index.ahead(TIED, [(absent, 7)], descending=True),
            ),
            "ahead, 500 absent probes, distinct scores, per probe": (
                len(spread),
                lambda: index.ahead(DISTINCT, spread, descending=True),
            ),
            "ahead, 500 absent probes in the run, per probe": (
                len(batch),
                lambda: index.ahead(TIED, batch, descending=True),
            ),
            "near n=10, absent, distinct scores": (
                1,
                lambda: index.near(DISTINCT, absent, distinct_score, 10, descending=True),
            ),
            "near n=10, absent, in a run of all ties": (
                1,
                lambda: index.near(TIED, absent, 7, 10, descending=True),
            ),
            "scores_at, 100 ranks, per rank": (
                100,
                lambda: index.scores_at(
                    DISTINCT, list(range(0, n, max(1, n // 100)))[:100], descending=True
                ),
            ),
        }
        timings: dict[str, list[float]] = {name: [] for name in cases}
        for r in range(args.rounds):
            for name, (per, call) in cases.items():
                calls = args.calls if per == 1 else max(10, args.calls // 20)
                t0 = time.perf_counter()
                for _ in range(calls):
                    await call()
                elapsed = time.perf_counter() - t0
                timings[name].append(elapsed / calls / per * 1e6)
            print(f"round {r + 1}: " + ", ".join(f"{v[-1]:.1f}" for v in timings.values()))
        ref = statistics.median(timings["reference: ZREVRANK"])
        print(f"\n{n} members per board; median of {args.rounds} rounds, us per call (or unit)")
        for name, values in timings.items():
            med = statistics.median(values)
            print(f"  {name:<48} {med:9.1f} us   x{med / ref:5.2f} the reference")
    finally:
        async for key in raw.scan_iter(match=f"{prefix}:*", count=1000):
            await raw.delete(key)
        await raw.aclose()
        await index.close()


if __name__ == "__main__":
    asyncio.run(main())
