"""Results leaving the embedded store (``ports.store.Retention``): read by day of their
``endedAt`` on a connection of their own, deleted a small batch at a time, each batch one
job of the single writer.

Apart from the records' reads: a page of a thousand rows holds its connection for tens of
milliseconds, and on the one reader thread every record's read would wait behind it (WAL
lets the two connections read at once). A delete of ``DELETE_BATCH`` rows is one job, and
the next is queued only once it has committed, so the records queued meanwhile commit in
the group between two of them (and at most one delete job shares a group with them): a
thousand deletes in one job held the writer about 150 ms on a busy machine.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from podium.domain.retention import ResultKey, StoredResult
from podium.store.common import STORED_COLS, stored_result_of
from podium.store.sqlite.db import Database

T = TypeVar("T")
DELETE_BATCH = 100  # results per write job


class Retention(Database):
    _apart: ThreadPoolExecutor | None = None
    _apart_conn: sqlite3.Connection | None = None

    async def _read_apart(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` on the pruner's own reader connection (made on first use)."""
        if self._apart is None:
            self._apart = ThreadPoolExecutor(1, thread_name_prefix="sqlite-prune")

        def run() -> T:
            if self._apart_conn is None:
                self._apart_conn = self._connect()
            return fn(self._apart_conn)

        return await self._run(self._apart, run)

    async def close(self) -> None:
        await super().close()
        pool, self._apart = self._apart, None
        if pool is not None:

            def close_apart() -> None:
                if self._apart_conn is not None:
                    self._apart_conn.close()
                    self._apart_conn = None

            await asyncio.get_running_loop().run_in_executor(pool, close_apart)
            pool.shutdown()

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

        return await self._read_apart(run)

    async def delete_results(self, keys: Sequence[tuple[str, str]]) -> int:
        keys = list(keys)
        deleted = 0
        for i in range(0, len(keys), DELETE_BATCH):
            batch = keys[i : i + DELETE_BATCH]

            def run(c: sqlite3.Connection, batch: list[tuple[str, str]] = batch) -> int:
                before = c.total_changes
                c.executemany("DELETE FROM results WHERE player_id = ? AND match_id = ?", batch)
                return c.total_changes - before

            deleted += await self._write(run)
        return deleted
