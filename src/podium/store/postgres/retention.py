"""Results leaving the Postgres store (``ports.store.Retention``): read by day of their
``endedAt`` on the (ended_at, player_id, match_id) index, deleted by primary key a batch at a
time, each batch one autocommitted statement. Such a delete locks only the rows it deletes,
which no record writes again (a record inserts a new key, and a result past the retention is
refused before it gets here), so no record waits on it."""

from __future__ import annotations

from collections.abc import Sequence

from podium.domain.retention import ResultKey, StoredResult
from podium.store.common import STORED_COLS, stored_result_of
from podium.store.postgres.pool import Database, rowcount


class Retention(Database):
    async def oldest_result(self) -> int | None:
        rows = await self._fetch("SELECT MIN(ended_at) AS t FROM results")
        t = rows[0]["t"]
        return None if t is None else int(t)

    async def results_ended(
        self, start: int, end: int, after: ResultKey | None, limit: int
    ) -> list[StoredResult]:
        # In byte order (COLLATE "C", as the index is), the order of the pruner's merge.
        first = after or (start, "", "")
        op = ">" if after else ">="
        rows = await self._fetch(
            f"SELECT {STORED_COLS} FROM results "
            f'WHERE (ended_at, player_id COLLATE "C", match_id COLLATE "C") {op} '
            "($1::bigint, $2::text, $3::text) AND ended_at < $4::bigint "
            'ORDER BY ended_at, player_id COLLATE "C", match_id COLLATE "C" LIMIT $5',
            *first,
            end,
            limit,
        )
        return [stored_result_of(r) for r in rows]

    async def delete_results(self, keys: Sequence[tuple[str, str]]) -> int:
        keys = list(keys)
        if not keys:
            return 0
        status = await self._execute(
            "DELETE FROM results r USING unnest($1::text[], $2::text[]) AS k(p, m) "
            "WHERE r.player_id = k.p AND r.match_id = k.m",
            [p for p, _ in keys],
            [m for _, m in keys],
        )
        return rowcount(status)
