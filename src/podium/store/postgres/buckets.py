"""A database's part in a store split by player (``store/split``): the bucket map, on the
home, and on every database the fence and the copy of a bucket that moves.

The tables a bucket's players own are the ones the fence guards: ``sql/split/002_moves.sql``
puts its trigger on each, and ``bucket_tables`` reads them from the catalog, so a move copies
what the schema says and no list is kept by hand. The outbox is not among them (its rows are
delivered from where they were written), nor final standings (the home's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from podium.domain.sharding import bucket_of
from podium.store.postgres.pool import Database

if TYPE_CHECKING:
    from podium.store.postgres.pool import Conn

Claims = list[tuple[object, ...]]  # rows of ``matches``, in ``CLAIM_COLS`` order

CLAIM_COLS = "match_id, key_id, recorded_at, mode, ended_at, duration_s"
# The tables whose writes the bucket fence refuses (``podium_refuse_moved``), by name.
BUCKET_TABLES = (
    "SELECT DISTINCT c.relname AS name FROM pg_trigger g "
    "JOIN pg_class c ON c.oid = g.tgrelid JOIN pg_proc p ON p.oid = g.tgfoid "
    "WHERE p.proname = 'podium_refuse_moved' AND pg_table_is_visible(c.oid) ORDER BY 1"
)
# The mover's own writes pass the fence, for the rest of its transaction.
MOVING = "SET LOCAL podium.moving = 'on'"


@dataclass(frozen=True, slots=True)
class BucketRows:
    """What a move copies of one bucket from its source: the windows frozen or fenced there
    (board, window, frozen_at), the rows of the bucket's players by table (columns, rows),
    and the claims of the bucket's match ids and of the matches its players played."""

    frozen: list[tuple[str, str, float]]
    tables: dict[str, tuple[list[str], list[tuple[object, ...]]]]
    claims: Claims


class Buckets(Database):
    # -- the bucket map, on the home ----------------------------------------------------

    async def bucket_map(self) -> list[tuple[int, str, str | None]]:
        """Every bucket's row of the map: (bucket, database, the database it is moving to)."""
        rows = await self._run(
            lambda c: c.fetch("SELECT bucket, db, moving_to FROM bucket_map ORDER BY bucket"),
            tx=False,
        )
        return [(r["bucket"], r["db"], r["moving_to"]) for r in rows]

    async def assign_buckets(self, dbs: Sequence[str]) -> None:
        """The first map: bucket ``b`` on ``dbs[b]``, for every bucket with no row yet."""
        await self._execute(
            "INSERT INTO bucket_map (bucket, db) SELECT * FROM unnest($1::int[], $2::text[]) "
            "ON CONFLICT (bucket) DO NOTHING",
            list(range(len(dbs))),
            list(dbs),
        )

    async def bucket_at(self, bucket: int) -> tuple[str, str | None] | None:
        """(its database, the one it is moving to) of one bucket, or None if it has no row."""
        rows = await self._run(
            lambda c: c.fetch("SELECT db, moving_to FROM bucket_map WHERE bucket = $1", bucket),
            tx=False,
        )
        return (rows[0]["db"], rows[0]["moving_to"]) if rows else None

    async def mark_moving(self, bucket: int, to: str) -> str | None:
        """Mark the bucket moving to ``to``; its database, or None if it is there already."""
        found: str | None = await self._run(
            lambda c: c.fetchval(
                "UPDATE bucket_map SET moving_to = $2 WHERE bucket = $1 AND db <> $2 RETURNING db",
                bucket,
                to,
            ),
            tx=False,
        )
        return found

    async def bucket_moved(self, bucket: int, to: str) -> None:
        await self._execute(
            "UPDATE bucket_map SET db = $2, moving_to = NULL WHERE bucket = $1", bucket, to
        )

    async def clear_moving(self, bucket: int, to: str) -> None:
        """Undo ``mark_moving`` of the bucket to ``to`` (another move's mark stays)."""
        await self._execute(
            "UPDATE bucket_map SET moving_to = NULL WHERE bucket = $1 AND moving_to = $2",
            bucket,
            to,
        )

    # -- a bucket's fence, on the database it leaves -------------------------------------

    async def fence_bucket(self, bucket: int, to: str) -> None:
        """From now on, every write here of the bucket's players is refused (SQLSTATE
        PD001), but the mover's own."""
        await self._execute(
            "INSERT INTO bucket_fences VALUES ($1, $2) ON CONFLICT (bucket) DO NOTHING",
            bucket,
            to,
        )

    async def lift_fence(self, bucket: int, to: str) -> None:
        await self._execute(
            "DELETE FROM bucket_fences WHERE bucket = $1 AND moved_to = $2", bucket, to
        )

    async def clock(self) -> datetime:
        """The database's clock (what ``transactions_before`` compares with)."""
        now: datetime = await self._run(lambda c: c.fetchval("SELECT clock_timestamp()"), tx=False)
        return now

    async def transactions_before(self, since: datetime) -> int:
        """How many transactions of other sessions here began before ``since`` and are
        still open."""
        n = await self._run(
            lambda c: c.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND backend_type = 'client backend' AND pid <> pg_backend_pid() "
                "AND xact_start < $1",
                since,
            ),
            tx=False,
        )
        return int(n)

    # -- the copy -------------------------------------------------------------------------

    async def bucket_tables(self) -> list[str]:
        """The tables a bucket's players own here (the ones the fence guards)."""
        return await self._run(_tables, tx=False)

    async def bucket_players(self, bucket: int) -> list[str]:
        """The bucket's players here, by id (every id is read: the hash is ours)."""

        async def run(c: Conn) -> list[str]:
            union = " UNION ".join(f"SELECT player_id FROM {_ident(t)}" for t in await _tables(c))
            return [r["player_id"] for r in await c.fetch(union)]

        found = await self._run(run, tx=False)
        return sorted(p for p in found if bucket_of(p) == bucket)

    async def bucket_claims(self, bucket: int, player_ids: Sequence[str]) -> Claims:
        """The claims here of the bucket's match ids, and of the matches these players
        played (the copies their records keep)."""
        return await self._run(lambda c: _claims(c, bucket, list(player_ids)), tx=False)

    async def bucket_rows(self, bucket: int, player_ids: Sequence[str]) -> BucketRows:
        """What ``write_bucket`` copies of the bucket to another database."""
        ids = list(player_ids)

        async def run(c: Conn) -> BucketRows:
            frozen = await c.fetch("SELECT board, window_id, frozen_at FROM frozen_windows")
            tables: dict[str, tuple[list[str], list[tuple[object, ...]]]] = {}
            for t in await _tables(c):
                rows = await c.fetch(f"SELECT * FROM {_ident(t)} WHERE player_id = ANY($1)", ids)
                if rows:
                    tables[t] = (list(rows[0].keys()), [tuple(r) for r in rows])
            windows = [(r["board"], r["window_id"], r["frozen_at"]) for r in frozen]
            return BucketRows(windows, tables, await _claims(c, bucket, ids))

        return await self._run(run, tx=False)

    async def write_bucket(self, bucket: int, player_ids: Sequence[str], rows: BucketRows) -> None:
        """In one transaction: the source's frozen windows fenced here too, then the
        bucket's rows in place of any an earlier attempt left, and its claims."""
        ids = list(player_ids)

        async def run(c: Conn) -> None:
            await c.execute(MOVING)
            await c.execute("DELETE FROM bucket_fences WHERE bucket = $1", bucket)
            await c.executemany(
                "INSERT INTO frozen_windows (board, window_id, frozen_at, players, fence) "
                "VALUES ($1, $2, $3, 0, true) ON CONFLICT (board, window_id) DO NOTHING",
                rows.frozen,
            )
            for t in await _tables(c):
                await c.execute(f"DELETE FROM {_ident(t)} WHERE player_id = ANY($1)", ids)
                if t in rows.tables:
                    columns, records = rows.tables[t]
                    await c.copy_records_to_table(t, records=records, columns=columns)
            await _add_claims(c, rows.claims)

        await self._run(run)

    async def add_claims(self, claims: Claims) -> None:
        """These claims, where their match ids have none here."""
        await self._run(lambda c: _add_claims(c, claims))

    async def delete_bucket(self, bucket: int, player_ids: Sequence[str]) -> None:
        """In one transaction: this database's copy of the bucket (the mover's own writes
        pass the fence), but the outbox rows, which are delivered from where they were
        written, and the claims of its match ids that no result here keeps."""
        ids = list(player_ids)

        async def run(c: Conn) -> None:
            await c.execute(MOVING)
            for t in await _tables(c):
                await c.execute(f"DELETE FROM {_ident(t)} WHERE player_id = ANY($1)", ids)
            matches = [r["match_id"] for r in await c.fetch("SELECT match_id FROM matches")]
            await c.execute(
                "DELETE FROM matches m WHERE match_id = ANY($1) AND NOT EXISTS "
                "(SELECT 1 FROM results r WHERE r.match_id = m.match_id)",
                [m for m in matches if bucket_of(m) == bucket],
            )

        await self._run(run)


async def _tables(c: Conn) -> list[str]:
    return [r["name"] for r in await c.fetch(BUCKET_TABLES)]


async def _claims(c: Conn, bucket: int, player_ids: list[str]) -> Claims:
    """Every claim's id is read: the hash is ours."""
    rows = await c.fetch(f"SELECT {CLAIM_COLS} FROM matches")
    found = await c.fetch(
        "SELECT DISTINCT match_id FROM results WHERE player_id = ANY($1::text[])", player_ids
    )
    played = {r["match_id"] for r in found}
    return [tuple(r) for r in rows if r["match_id"] in played or bucket_of(r["match_id"]) == bucket]


async def _add_claims(c: Conn, claims: Claims) -> None:
    if claims:
        await c.executemany(
            f"INSERT INTO matches ({CLAIM_COLS}) VALUES ($1, $2, $3, $4, $5, $6) "
            "ON CONFLICT (match_id) DO NOTHING",
            claims,
        )


def _ident(name: str) -> str:
    """A table name read from the catalog, quoted for the statement it goes into."""
    return '"' + name.replace('"', '""') + '"'
