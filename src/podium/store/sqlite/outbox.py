"""The outbox on SQLite: rows every record writes in its own transaction, claimed under a
lease and deleted once applied (``log/outbox.py`` reads them as the change log)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence

from podium.domain.boards import Tally
from podium.domain.marks import MARK_BOARD
from podium.domain.models import PROFILE_CHANGE, Change, ProfileChange
from podium.store.common import CHANGE_COLS, change_of
from podium.store.sqlite.db import Database

# (board, window, player, tally, removed) of one outbox row
Row = tuple[str, str, str, Tally, bool]


def write_changes(c: sqlite3.Connection, rows: Iterable[Row], now: float) -> None:
    """Inside the caller's transaction: one outbox row per change, in order."""
    c.executemany(
        "INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, "
        "committed_at, removed, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (b, w, p, t.total, t.reached_at, t.version, now, int(r), t.metadata)
            for b, w, p, t, r in rows
        ],
    )


def write_profile_change(c: sqlite3.Connection, player_id: str, version: int, now: float) -> None:
    write_changes(c, [(PROFILE_CHANGE, "", player_id, Tally(0, 0, version), False)], now)


class Outbox(Database):
    async def write_marks(self, players: Sequence[str], source: str, at: float) -> None:
        # One transaction, so that a mark's rows of every partition are seen together.
        rows = [(MARK_BOARD, source, p, Tally(0, 0, 0), False) for p in players]
        await self._write(lambda c: write_changes(c, rows, at))

    async def claim_changes(
        self, limit: int, lease_s: float, now: float
    ) -> list[Change | ProfileChange]:
        def run(c: sqlite3.Connection) -> list[Change | ProfileChange]:
            rows = c.execute(
                f"SELECT {CHANGE_COLS} FROM outbox WHERE claimed_until <= ? ORDER BY id LIMIT ?",
                (now, limit),
            ).fetchall()
            if rows:
                marks = ",".join("?" * len(rows))
                c.execute(
                    f"UPDATE outbox SET claimed_until = ? WHERE id IN ({marks})",
                    (now + lease_s, *(r["id"] for r in rows)),
                )
            return [change_of(r) for r in rows]

        return await self._write(run)

    async def ack_changes(self, ids: Sequence[int]) -> None:
        ids = list(ids)
        if ids:
            marks = ",".join("?" * len(ids))
            await self._write(lambda c: c.execute(f"DELETE FROM outbox WHERE id IN ({marks})", ids))

    async def lease_changes(self, ids: Sequence[int], until: float) -> None:
        ids = list(ids)
        if ids:
            marks = ",".join("?" * len(ids))
            await self._write(
                lambda c: c.execute(
                    f"UPDATE outbox SET claimed_until = ? WHERE id IN ({marks})", (until, *ids)
                )
            )

    async def requeue_player(self, player_id: str, now: float) -> int:
        def run(c: sqlite3.Connection) -> int:
            cur = c.execute(
                "INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, "
                "committed_at, metadata) SELECT board, window_id, player_id, total, reached_at, "
                "version, ?, metadata FROM tallies WHERE player_id = ?",
                (now, player_id),
            )
            return cur.rowcount

        return await self._write(run)

    async def requeue_players(self, player_ids: Sequence[str], now: float) -> int:
        ids = sorted(set(player_ids))
        if not ids:
            return 0

        def run(c: sqlite3.Connection) -> int:
            # The one writer orders this among the records, as it does each player's.
            cur = c.execute(
                "INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, "
                "committed_at, metadata) SELECT board, window_id, player_id, total, reached_at, "
                "version, ?, metadata FROM tallies "
                "WHERE player_id IN (SELECT value FROM json_each(?))",
                (now, json.dumps(ids)),
            )
            return cur.rowcount

        return await self._write(run)

    async def players_since(self, since: float) -> list[str]:
        # A scan of the results: a replay is rare, and the only reader of this.
        rows = await self._read(
            lambda c: c.execute(
                "SELECT DISTINCT player_id FROM results WHERE recorded_at >= ? ORDER BY player_id",
                (since,),
            ).fetchall()
        )
        return [str(r["player_id"]) for r in rows]

    async def outbox_backlog(self, now: float) -> tuple[int, float]:
        r = await self._read(
            lambda c: c.execute(
                "SELECT COUNT(*) AS n, MIN(committed_at) AS oldest FROM outbox WHERE board <> ?",
                (MARK_BOARD,),  # marks are no results: a backlog of changes only
            ).fetchone()
        )
        return int(r["n"]), (now - r["oldest"]) if r["oldest"] is not None else 0.0

    async def acked_through(self, ids: Sequence[int]) -> list[bool]:
        r = await self._read(lambda c: c.execute("SELECT MIN(id) AS low FROM outbox").fetchone())
        low = r["low"]
        return [low is None or low > i for i in ids]
