"""What entry metadata costs the Redis index, in one run: writes and rank reads with it and
without, interleaved round by round so that the noise of a busy machine hits each alike.

Writes (the updater's ``RankIndex.write`` of one board, batches of ``--batch``):

- plain:  no metadata given (the write script's GT mode, as before metadata existed);
- none:   metadata given and every entry without (GTM mode on a board that has none: what
          every board whose results carry no metadata pays);
- object: every entry with a 51-byte object (GTM mode, the metadata hash kept too).

Reads (``RankIndex.around``, 2 neighbours, sequential, on the boards the writes left): a
board without metadata, and one whose every entry has it (the script reads the rows'
metadata in the same step).

    python benchmarks/metadata_index.py [--updates 100000] [--players 10000] [--rounds 5]

``--plain-only`` runs the plain write and the read without metadata alone, which the code
before metadata also runs: alternate it with the code before and after to compare the two.
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
TEXT = '{"car":"mx5-nd2","replay":"r-20261028-0193-000417"}'  # 51 bytes, as accept.py sends


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--updates", type=int, default=100_000)
    ap.add_argument("--players", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--reads", type=int, default=2_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--plain-only",
        action="store_true",
        help="only the plain write and the read without metadata (runs on the code before it)",
    )
    args = ap.parse_args()

    prefix = f"podium-bench-{secrets.token_hex(4)}"
    index = RedisIndex.from_url(REDIS_URL, prefix=prefix)
    raw = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    rng = random.Random(1)
    players = [f"p{i:06d}" for i in range(args.players)]
    totals = dict.fromkeys(players, 0)
    versions = dict.fromkeys(players, 0)
    stream: list[tuple[str, int, int]] = []
    for _ in range(args.updates):
        p = rng.choice(players)
        totals[p] += rng.randint(1, 50)
        versions[p] += 1
        stream.append((p, totals[p] << 20, versions[p]))
    batches = [stream[i : i + args.batch] for i in range(0, len(stream), args.batch)]
    probes = [rng.choice(players) for _ in range(args.reads)]

    async def write(key: BoardKey, kind: str) -> None:
        for b in batches:
            meta = None
            if kind != "plain":
                text = TEXT if kind == "object" else None
                meta = [(v, text) for _, _, v in b]
            rows = [(m, s) for m, s, _ in b]
            if meta is None:  # no metadata keyword at all: the same call runs on the code before
                await index.write(key, rows, descending=True, expire_at=None)
            else:
                await index.write(key, rows, descending=True, expire_at=None, metadata=meta)

    async def read(key: BoardKey) -> None:
        for p in probes:
            await index.around(key, p, 2, descending=True)

    writes: dict[str, list[float]] = {"plain": [], "none": [], "object": []}
    reads: dict[str, list[float]] = {"without": [], "with": []}
    if args.plain_only:
        del writes["none"], writes["object"], reads["with"]
    try:
        for n in range(args.rounds):
            for kind, rates in writes.items():
                t0 = time.perf_counter()
                await write(BoardKey("bench", f"{kind}{n}"), kind)
                rates.append(len(stream) / (time.perf_counter() - t0))
                print(f"round {n + 1} write {kind:>7}: {rates[-1]:10,.0f} updates/s")
            for kind, rates in reads.items():
                t0 = time.perf_counter()
                await read(BoardKey("bench", f"{'object' if kind == 'with' else 'plain'}{n}"))
                rates.append(len(probes) / (time.perf_counter() - t0))
                print(f"round {n + 1} around {kind:>7} metadata: {rates[-1]:8,.0f} reads/s")
        print(f"\n{args.updates:,} updates of {args.players:,} players, batches of {args.batch}")
        for title, table, base in (("write", writes, "plain"), ("around", reads, "without")):
            med = {k: statistics.median(v) for k, v in table.items()}
            for k, v in med.items():
                spread = f"{min(table[k]):,.0f}..{max(table[k]):,.0f}"
                ratio = f"{v / med[base]:.2f}x {base}"
                print(f"median {title} {k:>7}: {v:10,.0f}/s  ({ratio}; {spread})")
    finally:
        async for k in raw.scan_iter(match=f"{prefix}:*", count=1000):
            await raw.delete(k)
        await raw.aclose()
        await index.close()


if __name__ == "__main__":
    asyncio.run(main())
