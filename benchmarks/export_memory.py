"""The export of a player's data (issue 35, docs/export.md) is streamed: the memory it takes
against the size of the document, for one player with many results.

For each ``--config`` and each ``--results`` N: a scratch store (a SQLite file in a temporary
directory, or a Postgres database of its own, created here and dropped after) seeded with ONE
player's N results and the claims of their N matches (straight into the tables: SQLite's
``executemany``, Postgres's COPY, a batch at a time), and ``--archived`` results of theirs in
an archive day file; then the player exported through ``Erasures.export``, the async
generator the route (``GET /v1/admin/players/{playerId}/export``) and ``podium player
export`` stream from, each chunk written to a file as the CLI writes it (nothing kept).

Each (config, N) in a process of its own. Three exports: the first with the process's peak
RSS before and after it (what it adds, the store's page cache included), one timed, one
under ``tracemalloc`` (its peak: every Python allocation of the export, chunks included). As the
reference, the document's size in bytes (what holding it whole takes at least) and the
peak of ``json.loads`` of it (what holding it as Python objects takes). The document is then
parsed and its rows counted: N results, N matches, the archived ones.

    PYTHONPATH=src python benchmarks/export_memory.py [--config embedded production]
        [--results 10000 100000] [--archived 5]

The Postgres store is the production one; the export reads the store and the archive only,
so no Redis is involved (the in-process index is built, empty).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import secrets
import sqlite3
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import PG_ADMIN_URL, _pg_admin, drop_database, migrate_store

PLAYER = "p_export_bench"
KEY_ID = "a1b2c3d4e5f6"
BASE = 1_790_000_000  # ended_at of the first result
BATCH = 10_000  # rows a COPY or an executemany at a time: the seeding's memory stays small
RESULT_COLS = (
    "player_id, match_id, key_id, mode, ended_at, duration_s, points, recorded_at, metadata"
)
MATCH_COLS = "match_id, key_id, recorded_at, mode, ended_at, duration_s"


def _results(n: int) -> Iterator[tuple[Any, ...]]:
    for i in range(n):
        ended = BASE + 60 * i
        meta = json.dumps({"skin": "red", "lap": i % 7}, separators=(",", ":"), sort_keys=True)
        yield (PLAYER, f"m{i:08d}", KEY_ID, "default", ended, 300, i % 500, ended + 2.5, meta)


def _matches(n: int) -> Iterator[tuple[Any, ...]]:
    for i in range(n):
        ended = BASE + 60 * i
        yield (f"m{i:08d}", KEY_ID, ended + 2.5, "default", ended, 300)


def _batches(rows: Iterator[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    batch: list[tuple[Any, ...]] = []
    for r in rows:
        batch.append(r)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def seed_sqlite(path: str, n: int) -> None:
    c = sqlite3.connect(path, isolation_level=None)
    try:
        c.execute("BEGIN")
        marks = ",".join("?" * len(RESULT_COLS.split(", ")))
        c.executemany(f"INSERT INTO results ({RESULT_COLS}) VALUES ({marks})", _results(n))
        marks = ",".join("?" * len(MATCH_COLS.split(", ")))
        c.executemany(f"INSERT INTO matches ({MATCH_COLS}) VALUES ({marks})", _matches(n))
        c.execute("COMMIT")
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        c.close()


async def seed_postgres(url: str, n: int) -> None:
    import asyncpg

    conn = await asyncpg.connect(url, command_timeout=3600)
    try:
        for table, cols, rows in (
            ("results", RESULT_COLS, _results(n)),
            ("matches", MATCH_COLS, _matches(n)),
        ):
            for batch in _batches(rows):
                await conn.copy_records_to_table(table, records=batch, columns=cols.split(", "))
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()


def seed_archive(directory: Path, count: int) -> None:
    """``count`` archived results of the player in a day file, among another player's."""
    from podium.archive.results import DayWriter
    from podium.domain.retention import StoredResult

    day = (BASE // 86_400 - 200) * 86_400
    rows = [
        StoredResult(p, f"old{i:04d}", KEY_ID, "default", day + i, 300, i, day + i + 0.5)
        for i in range(count)
        for p in sorted((PLAYER, "p_other"))
    ]
    writer = DayWriter(directory, day)
    writer.add(sorted(rows, key=lambda r: r.key))
    writer.finish()


async def _export(b: Any, out: Path) -> int:
    """The export streamed to ``out`` a chunk at a time; its size in bytes."""
    size = 0
    with out.open("wb") as f:
        async for chunk in await b.podium.erasures.export(PLAYER):
            f.write(chunk)
            size += len(chunk)
    return size


def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


async def measure(url: str, archive: Path, n: int, archived: int) -> dict[str, Any]:
    from podium import bootstrap
    from podium.config.settings import parse

    b = bootstrap.build(parse({"store": {"url": url}, "archive": {"dir": str(archive)}}))
    await b.start()
    out = archive.parent / "export.json"
    try:
        gc.collect()
        rss0 = _maxrss()
        await _export(b, out)  # the first: the peak RSS it adds; the store's caches warmed
        rss = _maxrss() - rss0
        t0 = time.perf_counter()
        size = await _export(b, out)
        seconds = time.perf_counter() - t0
        gc.collect()
        tracemalloc.start()
        await _export(b, out)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        await b.close()
    gc.collect()
    tracemalloc.start()
    doc = json.loads(out.read_bytes())
    _, parsed = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    got = (len(doc["results"]), len(doc["matches"]), len(doc["archivedResults"]))
    if got != (n, n, archived) or doc["results"][-1]["matchId"] != f"m{n - 1:08d}":
        raise SystemExit(f"the export holds {got} results, matches, archived: not {n, n, archived}")
    del doc
    return {"bytes": size, "seconds": seconds, "peak": peak, "rss": rss, "parsed": parsed}


def one(config: str, n: int, archived: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="podium-bench-export-") as tmp:
        archive = Path(tmp) / "archive"
        seed_archive(archive, archived)
        t0 = time.perf_counter()
        if config == "embedded":
            url = f"sqlite:///{tmp}/podium.db"
            asyncio.run(migrate_store(url))
            seed_sqlite(f"{tmp}/podium.db", n)
            seeded = time.perf_counter() - t0
            return {"seeded": seeded, **asyncio.run(measure(url, archive, n, archived))}
        db = f"podium_bench_export_{secrets.token_hex(4)}"
        asyncio.run(_pg_admin(f'CREATE DATABASE "{db}"'))
        try:
            url = urlparse(PG_ADMIN_URL)._replace(path=f"/{db}").geturl()
            asyncio.run(migrate_store(url))
            asyncio.run(seed_postgres(url, n))
            seeded = time.perf_counter() - t0
            return {"seeded": seeded, **asyncio.run(measure(url, archive, n, archived))}
        finally:
            drop_database(db)


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", nargs="+", choices=["embedded", "production"],
                    default=["embedded", "production"])  # fmt: skip
    ap.add_argument("--results", nargs="+", type=int, default=[10_000, 100_000])
    ap.add_argument("--archived", type=int, default=5, help="archived results of the player")
    ap.add_argument("--one", nargs=2, metavar=("CONFIG", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:  # one measure, in a process of its own: its peak RSS is the export's
        print(json.dumps(one(args.one[0], int(args.one[1]), args.archived)))
        return
    head = (
        f"| {'backend':10} | {'N':>7} | {'exported':>10} | {'export s':>8} | "
        f"{'tracemalloc peak':>16} | {'peak RSS growth':>15} | {'peak/document':>13} | "
        f"{'json.loads peak':>15} |"
    )
    rows = []
    for config in args.config:
        for n in args.results:
            argv = [__file__, "--one", config, str(n), "--archived", str(args.archived)]
            done = subprocess.run([sys.executable, *argv], stdout=subprocess.PIPE, check=True)
            r = json.loads(done.stdout)
            print(f"  {config} N={n:,}: seeded in {r['seeded']:.1f} s", file=sys.stderr)
            rows.append(
                f"| {config:10} | {n:>7,} | {_mib(r['bytes']):>10} | {r['seconds']:>8.2f} | "
                f"{_mib(r['peak']):>16} | {_mib(r['rss']):>15} | "
                f"{r['peak'] / r['bytes']:>13.3f} | {_mib(r['parsed']):>15} |"
            )
    print(head)
    print("|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
