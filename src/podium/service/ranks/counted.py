"""The reads' ranks counted on the rank index: every answer read from the index itself, at
one instant where the index reads one (one sorted set; on a board split across shards, every
shard asked at once, ``index/split/index.py``), and exact wherever the index says so.

The rank source of a deployment whose boards are not split across shards, and what the
aggregator's snapshot (``service/ranks/snapshot.py``) falls back to for whatever it cannot answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from podium.domain.boards import BoardSpec, Order
from podium.domain.codec import MAX_BITS
from podium.ports import Around, BoardKey, Clock, Placed, RankIndex, Resumed, Spread, Top

SCORE_LIMIT = 1 << MAX_BITS  # above every score the codec can produce


class CountedRanks:
    def __init__(self, index: RankIndex, clock: Clock) -> None:
        self.index = index
        self.clock = clock

    def forget(self, changed_at: float | None = None) -> None:
        return None  # nothing held: every read asks the index

    async def version(self, key: BoardKey, stop: int) -> bytes | None:
        return None  # pages count on the index: held for page_cache_s

    async def top(self, spec: BoardSpec, key: BoardKey, start: int, stop: int) -> Top:
        now = self.clock.now()
        rows = await self.index.page(key, start, stop, descending=spec.order is Order.DESC)
        return Top(rows, now)

    async def page_from(
        self, spec: BoardSpec, key: BoardKey, at: tuple[str, int], n: int, before: bool
    ) -> Resumed:
        now = self.clock.now()
        got = await self.index.page_from(
            key, at, n, descending=spec.order is Order.DESC, before=before
        )
        first = got.ahead - len(got.rows) if before else got.ahead + got.on
        return Resumed(first, got.rows, now)

    async def around(
        self, spec: BoardSpec, key: BoardKey, player_id: str, neighbors: int
    ) -> Around | None:
        # Rank and rows come from one read at one instant, so the player's own row is always
        # among the rows, and their displayed rank (a shared one, too) is that row's.
        return await self.index.around(
            key, player_id, neighbors, descending=spec.order is Order.DESC
        )

    async def places(
        self, spec: BoardSpec, key: BoardKey, player_ids: Sequence[str]
    ) -> list[Placed | None]:
        return await self.index.ranks(key, player_ids, descending=spec.order is Order.DESC)

    async def shared_ranks(
        self, spec: BoardSpec, key: BoardKey, scores: Sequence[int]
    ) -> dict[int, int]:
        """From one histogram read of the index."""
        distinct = sorted(set(scores))
        out: dict[int, int] = {}
        ahead = 0
        if spec.order is Order.DESC:
            bounds = [s + 1 for s in distinct] + [SCORE_LIMIT]
            counts = await self.index.count_between(key, bounds)
            for s, n in zip(reversed(distinct), reversed(counts), strict=True):
                ahead += n
                out[s] = ahead + 1
        else:
            counts = await self.index.count_between(key, [-SCORE_LIMIT, *distinct])
            for s, n in zip(distinct, counts, strict=True):
                ahead += n
                out[s] = ahead + 1
        return out

    async def spread(self, spec: BoardSpec, key: BoardKey, buckets: int) -> Spread:
        """Counted from the index at one instant."""
        desc = spec.order is Order.DESC
        n = await self.index.count(key)
        if n == 0:
            return Spread(0, [], self.clock.now(), True)
        ends = await self.index.page(key, 0, 0, descending=desc)
        # The last row as the first of the other order: on a split board, a page at rank
        # n - 1 would make every shard send all its rows to be merged.
        ends += await self.index.page(key, 0, 0, descending=not desc)
        codec = spec.codec
        lo, hi = sorted(codec.points(s) for _, s in ends)
        edges = point_edges(lo, hi, buckets)
        counts = await self.index.count_between(key, [codec.floor(p) for p in edges])
        out = [(a, b - 1, c) for a, b, c in zip(edges, edges[1:], counts, strict=False)]
        return Spread(n, out, self.clock.now(), True)


def point_edges(lo: int, hi: int, buckets: int) -> list[int]:
    """Edges of at most ``buckets`` equal-width point buckets covering ``lo..hi``."""
    width = max(1, -(-(hi - lo + 1) // buckets))  # ceiling division
    return [*range(lo, hi + 1, width), hi + 1]
