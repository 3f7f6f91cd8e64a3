"""Versioned writes (boards whose totals can fall) against plain ZADD GT, in one run.

Three ways of applying the same stream of absolute totals to one board on the machine's
Redis, interleaved round by round so that noise hits all three alike:

- raw:       ZADD GT of each batch in one pipelined command, no script (the reference);
- gt:        podium's write script in GT mode (ban check + ZADD GT per member);
- versioned: podium's write script in version mode (ban check + version check + ZADD + HSET).

Prints updates/s per round and the medians, and the ratios to the raw reference.

    python benchmarks/versioned_write.py [--updates 200000] [--players 10000] [--batch 500]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import secrets
import statistics
import time

import redis.asyncio as aioredis

from podium.index.redis.index import RedisIndex
from podium.ports import BoardKey

REDIS_URL = "redis://127.0.0.1:6379/0"


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--updates", type=int, default=200_000)
    ap.add_argument("--players", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    prefix = f"podium-bench-{secrets.token_hex(4)}"
    index = RedisIndex.from_url(REDIS_URL, prefix=prefix)
    raw = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    rng = random.Random(1)
    players = [f"p{i:06d}" for i in range(args.players)]
    # A rising stream of totals with versions, as the store would send them.
    totals = dict.fromkeys(players, 0)
    versions = dict.fromkeys(players, 0)
    stream: list[tuple[str, int, int]] = []
    for _ in range(args.updates):
        p = rng.choice(players)
        totals[p] += rng.randint(1, 50)
        versions[p] += 1
        stream.append((p, totals[p] << 20, versions[p]))
    batches = [stream[i : i + args.batch] for i in range(0, len(stream), args.batch)]

    async def run_raw(n: int) -> None:
        key = f"{prefix}:raw:{n}"
        for b in batches:
            await raw.zadd(key, {m: s for m, s, _ in b}, gt=True)

    async def run_index(n: int, versioned: bool) -> None:
        key = BoardKey("bench", f"{'v' if versioned else 'gt'}{n}")
        for b in batches:
            await index.write(
                key,
                [(m, s) for m, s, _ in b],
                descending=True,
                expire_at=None,
                versions=[v for _, _, v in b] if versioned else None,
            )

    results: dict[str, list[float]] = {"raw": [], "gt": [], "versioned": []}
    try:
        for n in range(args.rounds):
            for name in results:
                t0 = time.perf_counter()
                if name == "raw":
                    await run_raw(n)
                else:
                    await run_index(n, name == "versioned")
                rate = len(stream) / (time.perf_counter() - t0)
                results[name].append(rate)
                print(f"round {n + 1} {name:>9}: {rate:12,.0f} updates/s")
        med = {k: statistics.median(v) for k, v in results.items()}
        print(f"\n{args.updates:,} updates of {args.players:,} players, batches of {args.batch}")
        for k, v in med.items():
            spread = f"{min(results[k]):,.0f}..{max(results[k]):,.0f}"
            print(f"median {k:>9}: {v:12,.0f} updates/s  ({v / med['raw']:.2f}x raw; {spread})")
        print(f"versioned / gt: {med['versioned'] / med['gt']:.2f}")
    finally:
        async for k in raw.scan_iter(match=f"{prefix}:*", count=1000):
            await raw.delete(k)
        await raw.aclose()
        await index.close()


if __name__ == "__main__":
    asyncio.run(main())
