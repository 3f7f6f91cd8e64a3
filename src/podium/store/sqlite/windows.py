"""The life of a window on SQLite: stored tallies by window, the freeze, final standings.

SQLite has one writer, so a freeze and a result can never interleave: whichever commits
first decides, and ``record`` checks ``frozen_windows`` inside its own transaction.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator, Sequence

from podium.domain.boards import BoardSpec, Tally
from podium.domain.models import FinalEntry, FrozenWindow, Standing
from podium.domain.plans import plan_freeze
from podium.domain.windows import Window
from podium.ports.store import TallyRow
from podium.store.common import (
    FINAL_COLS,
    FROZEN_COLS,
    ROW_COLS,
    TALLY_COLS,
    final_of,
    frozen_of,
    rows_by_player,
    standing_of,
    standings_by_player,
    tally_of,
)
from podium.store.sqlite.db import Database
from podium.store.sqlite.webhooks import release_window_frozen, write_window_frozen


class Windows(Database):
    def standings(
        self, board: str, window: str, batch: int = 5000
    ) -> AsyncIterator[list[Standing]]:
        async def page(after: str) -> list[Standing]:
            rows = await self._read(
                lambda c: c.execute(
                    f"SELECT {TALLY_COLS} FROM tallies WHERE board = ? AND window_id = ? "
                    "AND player_id > ? ORDER BY player_id LIMIT ?",
                    (board, window, after, batch),
                ).fetchall()
            )
            return [standing_of(r) for r in rows]

        return standings_by_player(page)

    def tally_rows(
        self, board: str, window: str, batch: int = 10_000
    ) -> AsyncIterator[list[TallyRow]]:
        def read(c: sqlite3.Connection, after: str) -> list[TallyRow]:
            cur = c.cursor()
            cur.row_factory = None  # tuples, as they come: no sqlite3.Row to read by name
            rows: list[TallyRow] = cur.execute(
                f"SELECT {ROW_COLS} FROM tallies WHERE board = ? AND window_id = ? "
                "AND player_id > ? ORDER BY player_id LIMIT ?",
                (board, window, after, batch),
            ).fetchall()
            return rows

        async def page(after: str) -> list[TallyRow]:
            return await self._read(lambda c: read(c, after))

        return rows_by_player(page)

    async def tally_count(self, board: str, window: str) -> int:
        sql = "SELECT COUNT(*) FROM tallies WHERE board = ? AND window_id = ?"
        row = await self._read(lambda c: c.execute(sql, (board, window)).fetchone())
        return int(row[0])

    async def tallied(self, board: str, window: str, player_ids: Sequence[str]) -> set[str]:
        ids = list(set(player_ids))
        if not ids:
            return set()
        marks = ",".join("?" * len(ids))
        rows = await self._read(
            lambda c: c.execute(
                "SELECT player_id FROM tallies WHERE board = ? AND window_id = ? "
                f"AND player_id IN ({marks})",
                (board, window, *ids),
            ).fetchall()
        )
        return {r["player_id"] for r in rows}

    async def windows(self, board: str) -> list[str]:
        rows = await self._read(
            lambda c: c.execute(
                "SELECT DISTINCT window_id FROM tallies WHERE board = ? ORDER BY window_id",
                (board,),
            ).fetchall()
        )
        return [r["window_id"] for r in rows]

    async def store_time(self) -> float:
        # Embedded: the store is in this process, on this machine's clock.
        return time.time()

    async def freeze(self, board: BoardSpec, window: Window, keep: int, now: float) -> bool:
        return await self._write(lambda c: _freeze(c, board, window, keep, now))

    async def frozen(self, board: str) -> dict[str, FrozenWindow]:
        rows = await self._read(
            lambda c: c.execute(
                # a league's frozen cohorts left out (``frozen_cohorts`` asks by id)
                f"SELECT {FROZEN_COLS} FROM frozen_windows WHERE board = ? "
                "AND window_id NOT LIKE '%.%'",
                (board,),
            ).fetchall()
        )
        return {r["window_id"]: frozen_of(r) for r in rows}

    async def final_page(self, board: str, window: str, first: int, last: int) -> list[FinalEntry]:
        rows = await self._read(
            lambda c: c.execute(
                f"SELECT {FINAL_COLS} FROM final_standings WHERE board = ? AND window_id = ? "
                "AND position BETWEEN ? AND ? ORDER BY position",
                (board, window, first, last),
            ).fetchall()
        )
        return [final_of(r) for r in rows]

    async def final_entry(self, board: str, window: str, player_id: str) -> FinalEntry | None:
        row = await self._read(
            lambda c: c.execute(
                f"SELECT {FINAL_COLS} FROM final_standings "
                "WHERE board = ? AND window_id = ? AND player_id = ?",
                (board, window, player_id),
            ).fetchone()
        )
        return None if row is None else final_of(row)

    async def left_out(self, board: str, window: str) -> set[str]:
        rows = await self._read(
            lambda c: c.execute(
                "SELECT player_id FROM left_out WHERE board = ? AND window_id = ?",
                (board, window),
            ).fetchall()
        )
        return {r["player_id"] for r in rows}

    async def set_archive(self, board: str, window: str, archive: str, checksum: str) -> None:
        def run(c: sqlite3.Connection) -> None:
            c.execute(
                "UPDATE frozen_windows SET archive = ?, checksum = ? "
                "WHERE board = ? AND window_id = ?",
                (archive, checksum, board, window),
            )
            release_window_frozen(c, board, window, checksum)

        await self._write(run)


def _freeze(c: sqlite3.Connection, spec: BoardSpec, window: Window, keep: int, now: float) -> bool:
    """Inside the caller's write transaction: execute ``plan_freeze``. False when the window
    was frozen already (exactly once, across restarts)."""
    if c.execute(
        "SELECT 1 FROM frozen_windows WHERE board = ? AND window_id = ?", (spec.name, window.id)
    ).fetchone():
        return False
    plan = plan_freeze(spec, window, *freeze_rows(c, spec.name, window.id), keep)
    c.execute(
        "INSERT INTO frozen_windows (board, window_id, frozen_at, players) VALUES (?, ?, ?, ?)",
        (spec.name, window.id, now, plan.players),
    )
    write_final(c, spec.name, window.id, plan.final, plan.left_out)
    write_window_frozen(c, spec.name, window.id, now, plan.players, plan.final)
    return True


def freeze_rows(
    c: sqlite3.Connection, board: str, window_id: str
) -> tuple[list[tuple[str, Tally]], set[str]]:
    """Every player's tally in one window, and which of them are banned: what a freeze
    plans from (``plan_freeze``), read in its transaction."""
    rows = c.execute(
        "SELECT t.player_id, t.total, t.reached_at, t.version, "
        "EXISTS (SELECT 1 FROM bans b WHERE b.player_id = t.player_id) AS banned "
        "FROM tallies t WHERE t.board = ? AND t.window_id = ?",
        (board, window_id),
    ).fetchall()
    banned = {r["player_id"] for r in rows if r["banned"]}
    return [(r["player_id"], tally_of(r)) for r in rows], banned


def write_final(
    c: sqlite3.Connection,
    board: str,
    window_id: str,
    final: Sequence[FinalEntry],
    left_out: Sequence[str],
) -> None:
    """A freeze's final standings, and who it left out."""
    c.executemany(
        f"INSERT INTO final_standings (board, window_id, {FINAL_COLS}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (board, window_id, e.position, e.rank, e.player_id, e.points, e.reached_at)
            for e in final
        ],
    )
    c.executemany(
        "INSERT INTO left_out (board, window_id, player_id) VALUES (?, ?, ?)",
        [(board, window_id, p) for p in left_out],
    )
