"""Results leaving a store split by player: every database read in parallel and merged in
key order, each database's deletes its own short statements.

One day file for the whole store, not one per database: a bucket being moved has its rows
on two databases for a while, and as one key in one file a copied result is archived once.
A delete the source of a moving bucket refuses (its fence) is left for a later pass, by
which time the move has deleted that copy itself; the rows of every other database go.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Sequence

from podium.domain.retention import ResultKey, StoredResult
from podium.errors import StoreUnavailable
from podium.store.postgres import PostgresStore
from podium.store.split.routing import Part, moved

log = logging.getLogger("podium.store")


class Retention(Part):
    async def oldest_result(self) -> int | None:
        found = [t for t in (await self.router.each(lambda db: db.oldest_result())).values()]
        return min((t for t in found if t is not None), default=None)

    async def results_ended(
        self, start: int, end: int, after: ResultKey | None, limit: int
    ) -> list[StoredResult]:
        parts = await self.router.each(lambda db: db.results_ended(start, end, after, limit))
        merged = heapq.merge(*parts.values(), key=lambda r: r.key)
        out: list[StoredResult] = []
        for r in merged:
            if out and out[-1].key == r.key:
                continue  # the same result on two databases: a bucket being moved
            out.append(r)
            if len(out) == limit:
                break
        return out

    async def delete_results(self, keys: Sequence[tuple[str, str]]) -> int:
        keys = list(keys)
        if not keys:
            return 0

        async def delete(db: PostgresStore) -> int:
            try:
                return await db.delete_results(keys)
            except StoreUnavailable as e:
                if not moved(e):
                    raise
                log.info("a delete of results on a bucket being moved is left for later")
                return 0

        return sum((await self.router.each(delete)).values())
