"""The erasure's sweep by hash (docs/architecture.md §9) on the machine's Redis: how long one
pass over a big index takes, and what it costs Redis.

Fills, under a prefix of its own, the copy of profiles with ``--profiles`` players and one
board window with ``--members`` of them (pipelined HSET and ZADD, as a replica would hold
them), ``--erased`` of them erased (their keyed hashes the store's set), then times
``RedisIndex.sweep_erased`` as the reconciler and the mender run it: every key under the
prefix walked by SCAN, every hash, set and sorted set read by HSCAN, SSCAN, ZSCAN a page of
1,000 at a time, each id hashed (HMAC-SHA256) and the erased ones removed. Prints the
wall time, ids looked at per second, Redis's own CPU time for the pass (INFO cpu), and this
process's peak RSS; then deletes its keys (never a flush).

    python benchmarks/erasure_sweep.py [--profiles 1000000] [--members 1000000] [--erased 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import secrets
import time
from typing import Any

import redis.asyncio as aioredis

from podium.domain.erasure import erased_among, erased_digest, new_secret
from podium.index.redis.index import RedisIndex
from podium.ports import BoardKey

REDIS_URL = "redis://127.0.0.1:6379/0"
FILL = 10_000  # fields or members per pipelined command while filling


async def _redis_cpu(raw: Any) -> float:
    info = await raw.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


async def _fill(raw: Any, index: RedisIndex, profiles: int, members: int) -> None:
    copy_key = index.keys.profiles("")
    board_key = index.keys.board(BoardKey("week", "2026-W49"))
    for start in range(0, profiles, FILL):
        fields = {
            f"p{i:07d}": json.dumps([1, f"Player {i}", None, "DE"])
            for i in range(start, min(start + FILL, profiles))
        }
        await raw.hset(copy_key, mapping=fields)
    for start in range(0, members, FILL):
        await raw.zadd(
            board_key, {f"p{i:07d}": i * 7 for i in range(start, min(start + FILL, members))}
        )


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profiles", type=int, default=1_000_000)
    ap.add_argument("--members", type=int, default=1_000_000)
    ap.add_argument("--erased", type=int, default=100)
    args = ap.parse_args()

    prefix = f"podium-bench-{secrets.token_hex(4)}"
    raw = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    index = RedisIndex.from_url(REDIS_URL, prefix=prefix)
    key = new_secret()
    n = max(args.profiles, args.members)
    step = max(1, n // max(1, args.erased))
    gone = [f"p{i:07d}" for i in range(0, n, step)][: args.erased]
    digests = {erased_digest(key, p) for p in gone}
    asked = 0

    def erased(ids: Any) -> set[str]:
        nonlocal asked
        asked += len(ids)
        return erased_among(key, digests, ids)

    try:
        t0 = time.perf_counter()
        await _fill(raw, index, args.profiles, args.members)
        print(
            f"filled {args.profiles:,} profile copies and a board of {args.members:,} "
            f"in {time.perf_counter() - t0:.1f} s"
        )
        cpu0 = await _redis_cpu(raw)
        t0 = time.perf_counter()
        removed = await index.sweep_erased(erased)
        took = time.perf_counter() - t0
        cpu = await _redis_cpu(raw) - cpu0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"sweep: {took:.2f} s for {asked:,} ids looked at ({asked / took:,.0f} ids/s)")
        print(f"       {removed} entries removed of {len(gone)} erased players")
        print(f"       Redis CPU {cpu:.2f} s; this process's peak RSS {rss:.0f} MiB")
        t0 = time.perf_counter()
        again = await index.sweep_erased(erased)
        print(f"again: {time.perf_counter() - t0:.2f} s, {again} removed")
    finally:
        async for k in raw.scan_iter(match=f"{prefix}:*", count=1000):
            await raw.unlink(k)
        await raw.aclose()
        await index.close()


if __name__ == "__main__":
    asyncio.run(main())
