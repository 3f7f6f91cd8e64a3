"""Accept latency with the pruner running and not, alternating (issue 21).

One process as ``podium serve`` runs it: the service recording matches at a steady rate
(open loop, ``--rate`` matches a second, four players each), the updater role applying the
outbox to the in-process index, and, every other phase, the pruner moving results past the
retention out of the store into day files. The store is a scratch one (a SQLite file in a
temporary directory, or a Postgres database of its own, created and dropped here), filled
beforehand with ``--old`` results spread over ``--old-days`` days that ended 100 days ago
and more, so the pruner has work in every phase it runs (it is stopped at the end of its
phase, as a kill would, and resumes in its next one).

Prints, per phase kind, the p50 and p99 of a match's record (``Matches.record``, the
accept path without HTTP), over every phase of that kind, and the results pruned a second.

    PYTHONPATH=src python benchmarks/bench_pruner.py --config embedded
    PYTHONPATH=src python benchmarks/bench_pruner.py --config production
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import secrets
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import PG_ADMIN_URL, _pg_admin, drop_database, migrate_store, summary

DAY = 86_400


def _old_rows(n: int, days: int, base: int):  # type: ignore[no-untyped-def]
    span = days * DAY
    for i in range(n):
        m = i // 4
        ended = base + (m * 4 * span) // n
        yield (
            "p" + hashlib.md5(str(i * 7919 % (n // 10 + 7)).encode()).hexdigest()[:11],
            "o" + hashlib.md5(str(m).encode()).hexdigest()[:15],
            "a1b2c3d4e5f6",
            "default",
            ended,
            60,
            i % 500,
            float(ended + 2),
            None,
        )


COLS = "player_id, match_id, key_id, mode, ended_at, duration_s, points, recorded_at, flag"


def preload_sqlite(path: str, n: int, days: int, base: int) -> None:
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("BEGIN")
    c.executemany(
        f"INSERT INTO results ({COLS}) VALUES (?,?,?,?,?,?,?,?,?)", _old_rows(n, days, base)
    )
    c.execute("COMMIT")
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()


async def preload_postgres(url: str, n: int, days: int, base: int) -> None:
    import asyncpg

    conn = await asyncpg.connect(url, command_timeout=3600)
    try:
        await conn.copy_records_to_table(
            "results", records=list(_old_rows(n, days, base)), columns=COLS.split(", ")
        )
        await conn.execute("VACUUM ANALYZE results")
    finally:
        await conn.close()


async def bench(args: argparse.Namespace, store_url: str, archive: Path) -> None:
    from podium import bootstrap
    from podium.config.settings import parse
    from podium.domain.models import ApiKey, PlayerResult
    from podium.workers.pruner import Pruner

    settings = parse(
        {
            "store": {"url": store_url, "keep_results_days": 90},
            "archive": {"dir": str(archive)},
            "boards": [
                {"name": "season", "window": "all"},
                {"name": "week", "window": "week"},
                {"name": "day", "window": "day"},
            ],
        }
    )
    b = bootstrap.build(settings)
    await b.start()
    b.start_roles(["updater"])
    key = ApiKey("bench", "bench", "h", ("default",))
    counted = Counting(b.store)
    pruner = Pruner(counted, bootstrap.result_files(str(archive)), b.clock, 90)
    lat: dict[str, list[float]] = {"off": [], "on": []}
    pruned: dict[str, float] = {"seconds": 0}
    n = 0
    task = asyncio.create_task(_prune_all(pruner))
    try:
        pending: set[asyncio.Task[None]] = set()
        for phase in range(args.phases):
            kind = "on" if phase % 2 else "off"
            if args.pruner_first:
                kind = "off" if phase % 2 else "on"
            deleted = counted.deleted
            if kind == "on":
                counted.running.set()
            else:
                counted.running.clear()
            t0 = time.perf_counter()
            end = t0 + args.phase_s
            tick = t0

            async def one(i: int, bucket: list[float]) -> None:
                s = time.perf_counter()
                ps = [PlayerResult(f"q{(i * 4 + k) % 20_000}", 5 + k) for k in range(4)]
                await b.podium.matches.record(key, f"n{i}", "default", int(time.time()), 60, ps)
                bucket.append(time.perf_counter() - s)

            while (now := time.perf_counter()) < end:
                if now >= tick:
                    n += 1
                    t = asyncio.create_task(one(n, lat[kind]))
                    pending.add(t)
                    t.add_done_callback(pending.discard)
                    tick += 1 / args.rate
                await asyncio.sleep(max(0.0, min(tick, end) - time.perf_counter()))
            counted.running.clear()
            if kind == "on":
                pruned["seconds"] += time.perf_counter() - t0
                if counted.deleted == deleted:
                    print("  warning: the pruner deleted nothing in this phase", file=sys.stderr)
            if pending:
                await asyncio.gather(*pending)
            s = summary(lat[kind][-int(args.rate * args.phase_s * 0.9) :])
            print(
                f"  phase {phase + 1} ({kind:3s}): p50 {s['p50'] * 1000:.2f} ms, "
                f"p99 {s['p99'] * 1000:.2f} ms",
                file=sys.stderr,
                flush=True,
            )
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await b.close()
    print(f"\n== {args.config}: {args.rate} matches/s, {args.phases} phases of {args.phase_s} s")
    for kind in ("off", "on"):
        s = summary(lat[kind])
        print(
            f"  pruner {kind:3s}: {s['n']:.0f} matches, p50 {s['p50'] * 1000:.2f} ms, "
            f"p99 {s['p99'] * 1000:.2f} ms, max {s['max'] * 1000:.1f} ms"
        )
    if pruned["seconds"]:
        rate = counted.deleted / pruned["seconds"]
        print(f"  pruned while on: {counted.deleted} results, {rate:.0f} results/s")


async def _prune_all(pruner: Any) -> None:
    """The pruner role's steps, one after another (paused between phases on)."""
    while await pruner.step():
        pass


class Counting:
    """The store as the pruner sees it, counting what it deletes, and holding the pruner
    at its next call while ``running`` is clear (its phases off: it resumes where it was,
    so every phase on has work)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.deleted = 0
        self.running = asyncio.Event()

    async def oldest_result(self) -> int | None:
        await self.running.wait()
        return await self.store.oldest_result()  # type: ignore[no-any-return]

    async def results_ended(self, start: int, end: int, after: Any, limit: int) -> Any:
        await self.running.wait()
        return await self.store.results_ended(start, end, after, limit)

    async def delete_results(self, keys: Any) -> int:
        await self.running.wait()
        n: int = await self.store.delete_results(keys)
        self.deleted += n
        return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", choices=["embedded", "production"], default="embedded")
    ap.add_argument("--rate", type=float, default=100.0, help="matches a second (4 players)")
    ap.add_argument("--phases", type=int, default=8)
    ap.add_argument("--phase-s", type=float, default=10.0)
    ap.add_argument("--old", type=int, default=1_000_000, help="results past the retention")
    ap.add_argument("--old-days", type=int, default=10)
    ap.add_argument("--pruner-first", action="store_true")
    args = ap.parse_args()
    base = (int(time.time()) // DAY - 100 - args.old_days) * DAY
    with tempfile.TemporaryDirectory(prefix="podium-bench-pruner-") as tmp:
        archive = Path(tmp) / "archive"
        if args.config == "embedded":
            url = f"sqlite:///{tmp}/podium.db"
            asyncio.run(migrate_store(url))
            preload_sqlite(f"{tmp}/podium.db", args.old, args.old_days, base)
            asyncio.run(bench(args, url, archive))
        else:
            db = f"podium_bench_pruner_{secrets.token_hex(4)}"
            asyncio.run(_pg_admin(f'CREATE DATABASE "{db}"'))
            try:
                url = urlparse(PG_ADMIN_URL)._replace(path=f"/{db}").geturl()
                asyncio.run(migrate_store(url))
                asyncio.run(preload_postgres(url, args.old, args.old_days, base))
                asyncio.run(bench(args, url, archive))
            finally:
                drop_database(db)


if __name__ == "__main__":
    main()
