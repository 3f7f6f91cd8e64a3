"""The two ways the Postgres store records a player's part of a match, side by side.

    python benchmarks/record_paths.py                 # 2,000 records per set, 32 at once

- **locked**: the match read without targets, then ``record`` without it: a transaction that
  takes its locks, reads, folds and writes (4 round trips).
- **from the read**: the match read with the targets, then ``record`` with it: one call to
  ``podium_record_seen`` (what ``Matches.record`` does since migration 006).

Each set records one result for each of ``--records`` random players of a board preloaded with
``--players`` players on 3 boards, ``--concurrency`` at a time, through ``PostgresStore`` in
this process. It prints, per record: the Postgres CPU (every backend of the benchmark's own
database, from /proc), this process's CPU, and the records/s. The sets alternate, ``--repeat``
times each, in the same minute; compare the ratios, not the absolute figures. The database
``podium_bench_*`` is dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import secrets
import statistics

import asyncpg

import _harness as h
from podium.domain.boards import BoardSpec
from podium.domain.models import MatchQuery, ResultRecord, Target
from podium.domain.windows import WindowKind, WindowRule
from podium.store.postgres import PostgresStore

BOARDS = [
    BoardSpec("day", WindowRule(WindowKind.DAY)),
    BoardSpec("week", WindowRule(WindowKind.WEEK)),
    BoardSpec("all", WindowRule(WindowKind.ALL)),
]
ENDED = 1_792_800_100


def targets() -> list[tuple[Target, BoardSpec]]:
    out = []
    for spec in BOARDS:
        w = spec.rule.window_at(ENDED)
        assert w is not None
        out.append((Target(spec.name, w.id, w.start), spec))
    return out


async def preload(url: str, players: int) -> None:
    c = await asyncpg.connect(url)
    try:
        for t, _ in targets():
            await c.execute(
                "INSERT INTO tallies SELECT $1, $2, 'p_' || g, g, $3, 1, true "
                "FROM generate_series(1, $4) g",
                t.board,
                t.window,
                ENDED,
                players,
            )
        await c.execute("ANALYZE")
    finally:
        await c.close()


async def one_set(
    store: PostgresStore, db: str, seen: bool, n: int, players: int, concurrency: int
) -> tuple[float, float, float, int]:
    t = targets()
    gate = asyncio.Semaphore(concurrency)
    tag = secrets.token_hex(4)

    async def one(i: int) -> bool:
        async with gate:
            pid = f"p_{random.randint(1, players)}"
            r = ResultRecord(pid, f"{tag}-{i}", "k", "default", ENDED, 60, 5)
            read = await store.open_match(
                MatchQuery(r.match_id, "k", 2e9, [pid], "default", 5, None, t if seen else ())
            )
            out = await store.record(r, t, 2e9, None, read.handle(pid) if seen else None)
            return out.reread

    meter = h.CpuMeter({}, pg_db=db)
    meter.begin()
    rereads = sum(await asyncio.gather(*(one(i) for i in range(n))))
    cores = meter.end()
    per_record = meter.wall / n * 1e3  # ms of wall time per record: cores x this = CPU ms
    return cores["pg ours"] * per_record, cores["generator"] * per_record, n / meter.wall, rereads


def _median(rows: list[tuple[float, float, float, int]], i: int) -> float:
    return statistics.median(r[i] for r in rows)


async def main_async(args: argparse.Namespace, env: h.Env) -> None:
    assert env.pg_db is not None
    store = PostgresStore(env.store_url, pool_size=10, read_pool_size=10)
    await store.migrate()
    await preload(env.store_url, args.players)
    results: dict[str, list[tuple[float, float, float, int]]] = {"locked": [], "seen": []}
    try:
        for seen in (True, False):  # warm both paths: connections, prepared statements
            await one_set(store, env.pg_db, seen, 200, args.players, args.concurrency)
        for i in range(args.repeat):
            for name in ("locked", "seen"):
                got = await one_set(
                    store, env.pg_db, name == "seen", args.records, args.players, args.concurrency
                )
                results[name].append(got)
                print(
                    f"  set {i + 1} {name:6}: postgres CPU {got[0]:.2f} ms/record, "
                    f"this process {got[1]:.2f} ms/record, {got[2]:.0f} records/s, "
                    f"read again {got[3]}"
                )
    finally:
        await store.close()
    print("\n== medians ==")
    for name, label in (("locked", "locked (4 round trips)"), ("seen", "from the read (1)")):
        rows = results[name]
        print(
            f"{label:24} postgres CPU {_median(rows, 0):.2f} ms, "
            f"process CPU {_median(rows, 1):.2f} ms, {_median(rows, 2):.0f} records/s"
        )
    lk, sn = results["locked"], results["seen"]
    ratios = [_median(sn, i) / _median(lk, i) for i in range(3)]
    print(
        f"from the read / locked: postgres CPU {ratios[0]:.2f}, process CPU {ratios[1]:.2f}, "
        f"records/s {ratios[2]:.2f}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--players", type=int, default=100_000)
    p.add_argument("--records", type=int, default=2_000)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    print(h.machine_line())
    print(h.code_line())
    with contextlib.ExitStack() as stack:
        env = h.make_env(stack, "production")
        h.run(main_async(args, env))


if __name__ == "__main__":
    main()
