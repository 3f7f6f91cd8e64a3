"""How long a full cyclic garbage collection takes with a large in-process index, and with
it frozen out of the collector's sight (what ``podium serve`` does after its start-up).

    python benchmarks/gc_pause.py                 # 100,000 players on each of 3 boards

The reference is the same collection in the same process, before and after ``gc.freeze()``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time

from podium.index.memory.index import MemoryIndex
from podium.ports import BoardKey


async def fill(index: MemoryIndex, players: int) -> None:
    for board in ("season", "week", "day"):
        entries = [(f"p_{j:07d}", j * 7919 % 10**9) for j in range(players)]
        await index.write(BoardKey(board, "w"), entries, descending=True, expire_at=None)


def collect_ms(times: int) -> list[float]:
    out = []
    for _ in range(times):
        t = time.perf_counter()
        gc.collect()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--players", type=int, default=100_000)
    p.add_argument("--times", type=int, default=5)
    args = p.parse_args()
    index = MemoryIndex()
    asyncio.run(fill(index, args.players))
    before = collect_ms(args.times)
    gc.freeze()
    after = collect_ms(args.times)
    gc.unfreeze()
    print(f"{3 * args.players} index entries, full collection, {args.times} times")
    print(f"  not frozen: median {statistics.median(before):.2f} ms, max {max(before):.2f} ms")
    print(f"  frozen:     median {statistics.median(after):.2f} ms, max {max(after):.2f} ms")


if __name__ == "__main__":
    main()
