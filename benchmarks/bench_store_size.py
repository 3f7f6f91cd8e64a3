"""The store's size on disk per result and per player, at N results (issue 21).

Fills a scratch store of each kind (a Postgres database of its own, created and dropped
here; a SQLite file in a temporary directory), migrated by podium itself so that every
table and index is the real one, with what ``N`` recorded results leave behind:

- ``results``: N rows, four players a match, in arrival order (endedAt rising over
  ``--days`` days), with random-looking ids (hex digits of an md5: a 12-character player
  id, a 16-character match id) and a key id of 12 hex digits, as podium issues;
- ``matches``: one claim per match (N / 4), with its facts;
- ``tallies``: each player's tally on three sum boards, season, week and day, for every
  window they played in (what the default configuration keeps);
- ``profiles``: one per player; the outbox drained (empty, as it is once applied).

Then prints bytes per table (Postgres: ``pg_total_relation_size``, heap and indexes;
SQLite: the file after a WAL checkpoint, by table from ``dbstat`` when compiled in), per
result (the results table and the claims) and per player (tallies and profile), and a day
file's bytes per result (gzip CSV, ``result_archive``).

    PYTHONPATH=src python benchmarks/bench_store_size.py --results 1000000
    PYTHONPATH=src python benchmarks/bench_store_size.py --results 10000000 --kinds postgres
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import secrets
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import PG_ADMIN_URL, _pg_admin, drop_database

T0 = 1_790_000_000  # 2026-09-21T14:13:20Z
MULT = 2_654_435_761  # a prime: (match * 4 + k) * MULT mod players is one player per i
CHUNK = 200_000


def shape(results: int, per_player: int, days: int) -> tuple[int, int, int]:
    matches = results // 4
    players = max(8, results // per_player)
    return matches, players, days * 86_400


# -- Postgres --------------------------------------------------------------------------------


async def fill_postgres(url: str, results: int, per_player: int, days: int) -> dict[str, int]:
    import asyncpg

    from podium.store.postgres import PostgresStore

    store = PostgresStore.from_url(url)
    await store.migrate()
    await store.close()
    matches, players, span = shape(results, per_player, days)
    conn = await asyncpg.connect(url, command_timeout=3600)
    try:
        for a in range(0, results, CHUNK):
            b = min(results, a + CHUNK)
            await conn.execute(
                f"""
                INSERT INTO results (player_id, match_id, key_id, mode, ended_at, duration_s,
                    points, recorded_at, flag)
                SELECT 'p' || left(md5(((i::numeric * {MULT}) % {players})::text), 11),
                    'm' || left(md5('m' || (i / 4)::text), 15), 'a1b2c3d4e5f6', 'ranked-duo',
                    {T0} + (i / 4) * {span} / {matches}, 600, (i * 37) % 500,
                    {T0} + (i / 4) * {span}::float8 / {matches} + 1.5 + (i % 7) * 0.1,
                    CASE WHEN i % 100 = 0 THEN 'jump' END
                FROM generate_series({a}::bigint, {b - 1}::bigint) AS i
                """
            )
            m0, m1 = a // 4, (b + 3) // 4
            await conn.execute(
                f"""
                INSERT INTO matches (match_id, key_id, recorded_at, mode, ended_at, duration_s)
                SELECT 'm' || left(md5('m' || m::text), 15), 'a1b2c3d4e5f6',
                    {T0} + m * {span}::float8 / {matches} + 1.5, 'ranked-duo',
                    {T0} + m * {span} / {matches}, 600
                FROM generate_series({m0}::bigint, {m1 - 1}::bigint) AS m
                ON CONFLICT DO NOTHING
                """
            )
            print(f"  postgres: {b:,} results", file=sys.stderr, flush=True)
        for board, window in (
            ("day", "to_char(to_timestamp(ended_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"),
            ("week", "to_char(to_timestamp(ended_at) AT TIME ZONE 'UTC', 'IYYY-\"W\"IW')"),
            ("season", "'S1'"),
        ):
            await conn.execute(
                f"""
                INSERT INTO tallies (board, window_id, player_id, total, reached_at, version,
                    scored)
                SELECT '{board}', {window}, player_id, SUM(points), MAX(ended_at), COUNT(*), true
                FROM results GROUP BY 2, 3
                """
            )
        await conn.execute(
            "INSERT INTO profiles (player_id, name, avatar, country, version) "
            "SELECT DISTINCT player_id, 'Player ' || right(player_id, 7), NULL, 'FR', 1 "
            "FROM results"
        )
        await conn.execute("VACUUM ANALYZE")
        sizes = {}
        for t in ("results", "matches", "tallies", "profiles", "outbox"):
            row = await conn.fetchrow(
                "SELECT pg_total_relation_size($1::regclass) AS total, "
                "pg_relation_size($1::regclass) AS heap, pg_indexes_size($1::regclass) AS idx",
                t,
            )
            assert row is not None
            sizes[t] = int(row["total"])
            sizes[f"{t}.heap"] = int(row["heap"])
            sizes[f"{t}.indexes"] = int(row["idx"])
        for r in await conn.fetch(
            "SELECT indexrelid::regclass::text AS name, pg_relation_size(indexrelid) AS size "
            "FROM pg_index WHERE indrelid = 'results'::regclass ORDER BY 1"
        ):
            sizes[f"results.index {r['name']}"] = int(r["size"])
        sizes["database"] = int(await conn.fetchval("SELECT pg_database_size(current_database())"))
        sizes["players"] = int(await conn.fetchval("SELECT count(*) FROM profiles"))
        sizes["tally rows"] = int(await conn.fetchval("SELECT count(*) FROM tallies"))
        return sizes
    finally:
        await conn.close()


# -- SQLite ----------------------------------------------------------------------------------


def _player(n: int) -> str:
    """As Postgres makes it: ``'p' || left(md5(n::text), 11)``."""
    return "p" + hashlib.md5(str(n).encode()).hexdigest()[:11]


def _match(m: int) -> str:
    return "m" + hashlib.md5(f"m{m}".encode()).hexdigest()[:15]


def _sqlite_rows(a: int, b: int, players: int, matches: int, span: int):  # type: ignore[no-untyped-def]
    for i in range(a, b):
        m = i // 4
        ended = T0 + m * span // matches
        yield (
            _player((i * MULT) % players),
            _match(m),
            "a1b2c3d4e5f6",
            "ranked-duo",
            ended,
            600,
            (i * 37) % 500,
            T0 + m * span / matches + 1.5 + (i % 7) * 0.1,
            "jump" if i % 100 == 0 else None,
        )


async def _migrate_sqlite(path: Path) -> None:
    from podium.store.sqlite import SqliteStore

    store = SqliteStore.from_url(f"sqlite:///{path}")
    await store.migrate()
    await store.close()


def fill_sqlite(path: Path, results: int, per_player: int, days: int) -> dict[str, int]:
    asyncio.run(_migrate_sqlite(path))
    matches, players, span = shape(results, per_player, days)
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA synchronous=NORMAL")  # the load only: the sizes are the same
    for a in range(0, results, CHUNK):
        b = min(results, a + CHUNK)
        c.execute("BEGIN")
        c.executemany(
            "INSERT INTO results (player_id, match_id, key_id, mode, ended_at, duration_s, "
            "points, recorded_at, flag) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            _sqlite_rows(a, b, players, matches, span),
        )
        c.executemany(
            "INSERT OR IGNORE INTO matches (match_id, key_id, recorded_at, mode, ended_at, "
            "duration_s) VALUES (?, ?, ?, ?, ?, ?)",
            (
                (
                    f"m-{m:014d}",
                    "a1b2c3d4e5f6",
                    T0 + m * span / matches + 1.5,
                    "ranked-duo",
                    T0 + m * span // matches,
                    600,
                )
                for m in range(a // 4, (b + 3) // 4)
            ),
        )
        c.execute("COMMIT")
        print(f"  sqlite: {b:,} results", file=sys.stderr, flush=True)
    c.execute("BEGIN")
    for board, window in (
        ("day", "strftime('%Y-%m-%d', ended_at, 'unixepoch')"),
        ("week", "strftime('%Y-W%W', ended_at, 'unixepoch')"),
        ("season", "'S1'"),
    ):
        c.execute(
            "INSERT INTO tallies (board, window_id, player_id, total, reached_at, version, "
            f"scored) SELECT '{board}', {window}, player_id, SUM(points), MAX(ended_at), "
            "COUNT(*), 1 FROM results GROUP BY 2, 3"
        )
    c.execute(
        "INSERT INTO profiles (player_id, name, avatar, country, version) "
        "SELECT DISTINCT player_id, 'Player ' || substr(player_id, -7), NULL, 'FR', 1 "
        "FROM results"
    )
    c.execute("COMMIT")
    c.execute("ANALYZE")
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    sizes = {"database": os.path.getsize(path)}
    with contextlib.suppress(sqlite3.OperationalError):  # dbstat is a compile-time option
        for name, size in c.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            sizes[f"object {name}"] = int(size)
    sizes["players"] = c.execute("SELECT count(*) FROM profiles").fetchone()[0]
    sizes["tally rows"] = c.execute("SELECT count(*) FROM tallies").fetchone()[0]
    c.close()
    return sizes


def archive_bytes(path: Path, directory: Path, limit: int) -> tuple[int, int]:
    """The first ``limit`` results, in key order, as one day file: (bytes, results)."""
    from podium.archive import results as result_archive
    from podium.domain.retention import StoredResult

    c = sqlite3.connect(path)
    rows = [
        StoredResult(*r)
        for r in c.execute(
            "SELECT player_id, match_id, key_id, mode, ended_at, duration_s, points, "
            "recorded_at, flag FROM results ORDER BY ended_at, player_id, match_id LIMIT ?",
            (limit,),
        )
    ]
    c.close()
    w = result_archive.DayWriter(directory, T0 - T0 % 86_400)
    w.add(rows)
    w.finish()
    return w.path.stat().st_size, w.count


def report(kind: str, results: int, sizes: dict[str, int], seconds: float) -> None:
    players = sizes["players"]
    print(
        f"\n== {kind}: {results:,} results, {players:,} players, "
        f"{sizes['tally rows']:,} tallies (filled in {seconds:.0f} s)"
    )
    for k, v in sizes.items():
        if k not in ("players", "tally rows"):
            print(f"  {k:40s} {v / 2**20:10.1f} MiB")
    if kind == "postgres":
        per_result = (sizes["results"] + sizes["matches"]) / results
        per_player = (sizes["tallies"] + sizes["profiles"]) / players
        print(f"  results table (heap + indexes) per result: {sizes['results'] / results:.0f} B")
        print(f"  results + claims per result:              {per_result:.0f} B")
        print(f"  tallies + profile per player:             {per_player:.0f} B")
    else:
        objects = {
            k.removeprefix("object "): v for k, v in sizes.items() if k.startswith("object ")
        }
        if objects:
            r = sum(
                v
                for k, v in objects.items()
                if k == "results" or k.startswith(("results_", "sqlite_autoindex_results"))
            )
            m = sum(
                v
                for k, v in objects.items()
                if k == "matches" or k.startswith("sqlite_autoindex_matches")
            )
            t = sum(
                v
                for k, v in objects.items()
                if k == "tallies" or k.startswith(("tallies_", "sqlite_autoindex_tallies"))
            )
            p = sum(
                v
                for k, v in objects.items()
                if k == "profiles" or k.startswith("sqlite_autoindex_profiles")
            )
            print(f"  results table (with indexes) per result:  {r / results:.0f} B")
            print(f"  results + claims per result:              {(r + m) / results:.0f} B")
            print(f"  tallies + profile per player:             {(t + p) / players:.0f} B")
    print(f"  whole database per result:                {sizes['database'] / results:.0f} B")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=int, default=1_000_000)
    ap.add_argument("--per-player", type=int, default=10, help="results per player")
    ap.add_argument("--days", type=int, default=90, help="days the results span")
    ap.add_argument("--kinds", default="sqlite,postgres")
    args = ap.parse_args()
    kinds = args.kinds.split(",")
    with tempfile.TemporaryDirectory(prefix="podium-size-") as tmp:
        if "sqlite" in kinds:
            path = Path(tmp) / "size.db"
            t = time.monotonic()
            sizes = fill_sqlite(path, args.results, args.per_player, args.days)
            report("sqlite", args.results, sizes, time.monotonic() - t)
            n = min(args.results, 1_000_000)
            size, count = archive_bytes(path, Path(tmp) / "archive", n)
            print(f"  day file (gzip CSV), {count:,} results: {size / count:.1f} B per result")
            path.unlink()
        if "postgres" in kinds:
            db = f"podium_size_{secrets.token_hex(4)}"
            asyncio.run(_pg_admin(f'CREATE DATABASE "{db}"'))
            try:
                url = urlparse(PG_ADMIN_URL)._replace(path=f"/{db}").geturl()
                t = time.monotonic()
                sizes = asyncio.run(fill_postgres(url, args.results, args.per_player, args.days))
                report("postgres", args.results, sizes, time.monotonic() - t)
            finally:
                drop_database(db)


if __name__ == "__main__":
    main()
