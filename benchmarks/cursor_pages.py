"""What a cursor page costs against a page by offset, at the top and deep in the exact top.

    python benchmarks/cursor_pages.py [--members 200000] [--n 200] [--no-redis]

A board of ``--members`` members (scores with ties) on each index kind: in process (one
list, and split in 16), and on Redis (the machine's, under a prefix of its own, deleted
after: one sorted set, and 16 shard indexes on one client). For each, the median wall time
per call, sequential and unloaded, of:

- ``page(offset, offset + 99)``, the plain page's read, and ``page(offset, offset + 100)``,
  what it reads now (one row more in the same call, to say whether there is a next page);
- ``page_from(row, 100)`` behind the row at that offset, the cursor page's read, forward
  and backward;
- ``page_after(row, 100)``, the keyset page the reconciler walks a board by (``keyset``),
  and, for the member of that row, ``around`` with 2 neighbours and ``rank``: the reads
  ``index/reads.py`` writes once for every index (Redis keeps its own ``around``);

at offsets 0, 1,000 and 9,900 (the bottom page of the default ``exact_top``); the pages by
offset below the top are timed ``--n / 10`` times (at least 10): on a split board each reads
every shard down to its depth. Also the CPU of writing the two cursors of a page
(``paging.links``), once per page refill. The Redis keys are deleted at the end.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _harness import code_line, install_sigterm, machine_line, run
from podium.domain.boards import BoardSpec
from podium.domain.windows import WindowKind, WindowRule
from podium.index.memory.index import MemoryIndex
from podium.index.redis.index import RedisIndex
from podium.index.split.index import SplitIndex
from podium.ports import BoardKey, RankIndex
from podium.service.reads.paging import links
from podium.service.views import Entry

KEY = BoardKey("week", "2026-W49")
PREFIX = f"podium-bench-cursor-{random.randrange(1 << 30):x}"
REDIS_URL = "redis://127.0.0.1:6379/0"


async def timed(fn: Callable[[], Awaitable[Any]], n: int) -> float:
    for _ in range(min(20, n)):
        await fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


async def fill(index: RankIndex, members: int) -> None:
    rng = random.Random(7)
    rows = [(f"p{i:07d}", rng.randrange(members // 4)) for i in range(members)]
    for i in range(0, members, 5000):
        await index.write(KEY, rows[i : i + 5000], descending=True, expire_at=None)


async def measure(name: str, index: RankIndex, n: int) -> None:
    print(f"\n{name}  (ms per call, median of {n})")
    heads = ("page 100", "page 101", "after", "before", "keyset", "around", "rank")
    print(f"  {'offset':>7}" + "".join(f"  {h:>9}" for h in heads))
    for offset in (0, 1000, 9900):
        row = (await index.page(KEY, offset, offset, descending=True))[0]
        # a page by offset deep on a split board reads every shard down to it: fewer calls
        deep = n if offset == 0 else max(10, n // 10)

        def page(stop: int, o: int = offset) -> Awaitable[Any]:
            return index.page(KEY, o, o + stop, descending=True)

        def beside(n: int, before: bool, r: tuple[str, int] = row) -> Awaitable[Any]:
            return index.page_from(KEY, r, n, descending=True, before=before)

        def keyset(r: tuple[str, int] = row) -> Awaitable[Any]:
            return index.page_after(KEY, r, 100, descending=True)

        def around(r: tuple[str, int] = row) -> Awaitable[Any]:
            return index.around(KEY, r[0], 2, descending=True)

        def rank(r: tuple[str, int] = row) -> Awaitable[Any]:
            return index.rank(KEY, r[0], descending=True)

        times = [
            await timed(lambda: page(99), deep),
            await timed(lambda: page(100), deep),
            await timed(lambda: beside(101, False), n),
            await timed(lambda: beside(100, True), n),
            await timed(keyset, n),
            await timed(around, n),
            await timed(rank, n),
        ]
        print(f"  {offset:>7}" + "".join(f"  {t:>9.3f}" for t in times))


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--members", type=int, default=200_000)
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--no-redis", action="store_true")
    args = p.parse_args()
    install_sigterm()  # a kill still deletes the keys
    print(machine_line())
    print(code_line())
    spec = BoardSpec("week", WindowRule(WindowKind.WEEK))
    entries = [(Entry(i + 1, f"p{i:07d}", 10), i) for i in range(100)]
    t = time.process_time()
    for _ in range(10_000):
        links(spec, KEY.window, 100, entries, True)
    print(f"paging.links (next and prev of a page): {(time.process_time() - t) * 1e2:.1f} us CPU")
    kinds: list[tuple[str, Callable[[], RankIndex]]] = [
        ("memory, 1 list", MemoryIndex),
        ("memory, 16 shards", lambda: SplitIndex([MemoryIndex() for _ in range(16)])),
    ]
    if not args.no_redis:
        client = RedisIndex.client_from_url(REDIS_URL)
        kinds += [
            ("redis, 1 sorted set", lambda: RedisIndex(client, PREFIX)),
            (
                "redis, 16 shards, 1 client",
                lambda: SplitIndex([RedisIndex(client, PREFIX, shard=i) for i in range(16)]),
            ),
        ]
    try:
        for name, make in kinds:
            index = make()
            await fill(index, args.members)
            await measure(f"{name}, {args.members:,} members", index, args.n)
    finally:
        if not args.no_redis:
            async for k in client.scan_iter(match=f"{PREFIX}:*", count=1000):
                await client.delete(k)
            await client.aclose()


if __name__ == "__main__":
    run(main())
