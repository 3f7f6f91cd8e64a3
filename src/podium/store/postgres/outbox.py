"""The outbox on Postgres: rows every record writes in its own transaction, claimed under a
lease with ``FOR UPDATE SKIP LOCKED`` and deleted once applied (``log/outbox.py`` reads them
as the change log)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from podium.domain.marks import MARK_BOARD
from podium.domain.models import Change, ProfileChange
from podium.store.common import CHANGE_COLS, change_of
from podium.store.postgres import locks
from podium.store.postgres.pool import Database, rowcount

if TYPE_CHECKING:
    from podium.store.postgres.pool import Conn

# A claim, a lease and an ack commit without waiting for their WAL to reach the disk (the
# setting is the statement's own transaction's, evaluated once before its first row). What
# a crash of the server could lose of them is a lease or an ack: the rows are delivered
# again, which the log allows (at least once) and the index's writes make harmless
# (invariant 3 of docs/architecture.md). Waiting for the flush took most of an outbox
# updater's time on a slow disk (BENCHMARKS.md, "The write path and the updater").
LAZY_COMMIT = "(SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL"


class Outbox(Database):
    async def write_marks(self, players: Sequence[str], source: str, at: float) -> None:
        # One statement, one transaction: a mark's rows of every partition are seen together.
        await self._execute(
            "INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, "
            "committed_at) SELECT $1, $2, p, 0, 0, 0, $4 FROM unnest($3::text[]) AS p",
            MARK_BOARD,
            source,
            list(players),
            float(at),
        )

    async def claim_changes(
        self, limit: int, lease_s: float, now: float
    ) -> list[Change | ProfileChange]:
        # Row by row, never past a high-water mark: a lower id can commit after a higher one
        # was read. SKIP LOCKED lets several claimers share the rows without waiting.
        # The picked ids as an array, matched by the primary key: as a join (UPDATE ... FROM
        # a CTE) the prepared statement's generic plan, made while the outbox was analyzed
        # as empty (its usual state), scanned the whole outbox once per row picked, so a
        # backlog of 40,000 rows took 26 s to claim in batches of 500 instead of 0.37 s
        # (BENCHMARKS.md, "Relays as a fleet"): slowest exactly when a backlog has built up.
        rows = await self._fetch(
            "UPDATE outbox SET claimed_until = $3 WHERE id = ANY(ARRAY("
            "SELECT id FROM outbox WHERE claimed_until <= $1 "
            f"ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)) AND {LAZY_COMMIT} "
            f"RETURNING {CHANGE_COLS}",
            float(now),
            limit,
            float(now + lease_s),
        )
        return [change_of(r) for r in sorted(rows, key=lambda r: int(r["id"]))]

    async def ack_changes(self, ids: Sequence[int]) -> None:
        ids = list(ids)
        if ids:
            await self._execute(
                f"DELETE FROM outbox WHERE id = ANY($1::bigint[]) AND {LAZY_COMMIT}", ids
            )
            self._acked += len(ids)
            if self._acked >= self._vacuum_every:
                self._acked = 0
                await self._vacuum_outbox()

    async def lease_changes(self, ids: Sequence[int], until: float) -> None:
        ids = list(ids)
        if ids:
            await self._execute(
                "UPDATE outbox SET claimed_until = $2 "
                f"WHERE id = ANY($1::bigint[]) AND {LAZY_COMMIT}",
                ids,
                float(until),
            )

    async def _vacuum_outbox(self) -> None:
        """Every row leaves two dead versions behind in the outbox (its claim, its delete),
        and a claim's index scan walks over every dead entry older than the live rows: at
        500 results/s that is about 2,500 more a second, and the claims, then the updater,
        then the whole process slowed from one minute to the next (measured in BENCHMARKS.md).
        Autovacuum visits a database once a minute at best, too late for a table this busy
        and this small, so the updater that made the dead rows vacuums them (which blocks
        neither writes nor claims)."""
        # A role that does not own the table only gets a warning, and autovacuum does it.
        await self._execute("VACUUM (SKIP_LOCKED) outbox")

    async def requeue_player(self, player_id: str, now: float) -> int:
        async def run(c: Conn) -> int:
            # Under the player's record lock, like every record: the rows written here take
            # their place in the player's commit order, so the log's order per player holds.
            await c.execute(
                "SELECT pg_advisory_xact_lock($1, $2)", locks.RECORD_NS, locks.player_key(player_id)
            )
            status = await c.execute(
                "INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, "
                "committed_at, metadata) SELECT board, window_id, player_id, total, reached_at, "
                "version, $2, metadata FROM tallies WHERE player_id = $1",
                player_id,
                float(now),
            )
            return rowcount(status)

        return await self._run(run)

    async def requeue_players(self, player_ids: Sequence[str], now: float) -> int:
        ids = sorted(set(player_ids))
        if not ids:
            return 0
        # Every player's record lock, in key order: a record holds one player's lock at a
        # time and another batch takes them in the same order, so none waits in a circle.
        # unnest yields the array in its order, and each row's lock is taken as it comes.
        keys = sorted({locks.player_key(p) for p in ids})

        async def run(c: Conn) -> int:
            await c.execute(
                "SELECT count(pg_advisory_xact_lock($1, k)) FROM unnest($2::int[]) AS k",
                locks.RECORD_NS,
                keys,
            )
            status = await c.execute(
                "INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, "
                "committed_at, metadata) SELECT board, window_id, player_id, total, reached_at, "
                "version, $2, metadata FROM tallies WHERE player_id = ANY($1::text[])",
                ids,
                float(now),
            )
            return rowcount(status)

        return await self._run(run)

    async def players_since(self, since: float) -> list[str]:
        # A scan of the results: a replay is rare, and the only reader of this.
        rows = await self._fetch(
            "SELECT DISTINCT player_id FROM results WHERE recorded_at >= $1 ORDER BY player_id",
            float(since),
        )
        return [str(r["player_id"]) for r in rows]

    async def outbox_rows_of(self, player_ids: Sequence[str]) -> int:
        """How many outbox rows of these players are here, not yet applied: what the move of
        a bucket waits to see drain (``store/split/move.py``)."""
        n = await self._run(
            lambda c: c.fetchval(
                "SELECT count(*) FROM outbox WHERE player_id = ANY($1::text[])", list(player_ids)
            ),
            tx=False,
        )
        return int(n)

    async def acked_through(self, ids: Sequence[int]) -> list[bool]:
        # On the primary (not a read replica, which may lag an ack): the one the acks went to.
        low = await self._run(lambda c: c.fetchval("SELECT MIN(id) FROM outbox"), tx=False)
        return [low is None or int(low) > i for i in ids]

    async def outbox_backlog(self, now: float) -> tuple[int, float]:
        # Marks are no results: a backlog of changes only.
        [r] = await self._fetch(
            "SELECT COUNT(*) AS n, MIN(committed_at) AS oldest FROM outbox WHERE board <> $1",
            MARK_BOARD,
        )
        return int(r["n"]), (now - r["oldest"]) if r["oldest"] is not None else 0.0
