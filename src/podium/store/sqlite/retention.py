"""Results leaving the embedded store (``ports.store.Retention``): read by day of their
``endedAt``, deleted a batch at a time, each batch one job of the single writer, so the
records queued meanwhile commit in between (and with it, in the same group)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from podium.domain.retention import ResultKey, StoredResult
from podium.store.common import STORED_COLS, stored_result_of
from podium.store.sqlite.db import Database


class Retention(Database):
    async def oldest_result(self) -> int | None:
        row = await self._read(lambda c: c.execute("SELECT MIN(ended_at) FROM results").fetchone())
        return None if row[0] is None else int(row[0])

    async def results_ended(
        self, start: int, end: int, after: ResultKey | None, limit: int
    ) -> list[StoredResult]:
        # The row-value comparison walks the (ended_at, player_id, match_id) index from
        # where the last page stopped.
        first = after or (start, "", "")
        op = ">" if after else ">="

        def run(c: sqlite3.Connection) -> list[StoredResult]:
            rows = c.execute(
                f"SELECT {STORED_COLS} FROM results "
                f"WHERE (ended_at, player_id, match_id) {op} (?, ?, ?) AND ended_at < ? "
                "ORDER BY ended_at, player_id, match_id LIMIT ?",
                (*first, end, limit),
            ).fetchall()
            return [stored_result_of(r) for r in rows]

        return await self._read(run)

    async def delete_results(self, keys: Sequence[tuple[str, str]]) -> int:
        keys = list(keys)
        if not keys:
            return 0

        def run(c: sqlite3.Connection) -> int:
            before = c.total_changes
            c.executemany("DELETE FROM results WHERE player_id = ? AND match_id = ?", keys)
            return c.total_changes - before

        return await self._write(run)
