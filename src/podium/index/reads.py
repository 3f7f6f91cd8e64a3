"""``RankIndex``'s composite reads, written once over a few primitives each index provides.

Every rank index answers a few reads itself: ``page`` (ranks ``start..stop``), ``page_from``
(rows on one side of a place, with the count ahead of it), ``ranks``, ``scores``, ``near``
(where a member and a score would stand, with rows on each side) and ``entry_metadata``,
each one step (one script or command on Redis, one call without an await in process, one
call per shard at once on a split board). The reads here are built from those, each one the
same on every index:

- ``page_after``: ``page_from`` one row longer, the cursor's member left out;
- ``rank``: ``ranks`` of one player;
- ``around``: the player's score, then ``near`` it, then the rows' names and metadata
  (``_beside``, the index's own: one after the other in process, at once on the shards of a
  split board).

Each is as many steps as the index's own was: one on Redis for ``page_after``, ``rank``
(slice.lua, ranks.lua), none awaited in process. Redis answers ``around`` with one script
(around.lua: the rank, the rows, their names and metadata and the generation marker, in one
round trip) where this one would take three, so ``RedisIndex`` keeps its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from podium.domain.models import Profile
from podium.ports import Around, BoardKey, Near, Placed, Slice


class Pages(Protocol):
    """What ``page_after`` asks of an index (each as ``RankIndex`` says)."""

    async def page(
        self, key: BoardKey, start: int, stop: int, *, descending: bool
    ) -> list[tuple[str, int]]: ...

    async def page_from(
        self, key: BoardKey, at: tuple[str, int], n: int, *, descending: bool, before: bool
    ) -> Slice: ...


class Ranks(Protocol):
    """What ``rank`` asks of an index."""

    async def ranks(
        self, key: BoardKey, player_ids: Sequence[str], *, descending: bool
    ) -> list[Placed | None]: ...


class Places(Protocol):
    """What ``around`` asks of an index (``scores`` and ``near`` as ``ShardIndex`` says)."""

    async def scores(self, key: BoardKey, members: Sequence[str]) -> list[int | None]: ...

    async def near(
        self, key: BoardKey, member: str, score: int, n: int, *, descending: bool
    ) -> Near: ...

    async def _beside(
        self, key: BoardKey, members: list[str]
    ) -> tuple[dict[str, Profile] | None, dict[str, str]]:
        """The members' profiles (None: the copy is not complete) and entry metadata."""
        ...


class ComposedReads:
    """The composite reads of ``RankIndex``, for an index that provides what each asks
    (``Pages``, ``Ranks``, ``Places``); an index may answer one itself instead."""

    async def page_after(
        self: Pages,
        key: BoardKey,
        after: tuple[str, int] | None,
        n: int,
        *,
        descending: bool,
    ) -> list[tuple[str, int]]:
        if n < 0:
            raise ValueError(f"page_after: n must not be negative, not {n}")
        if n == 0:
            return []
        if after is None:
            return await self.page(key, 0, n - 1, descending=descending)
        # The rows strictly behind the place the cursor names: its member is not among them
        # where it still holds that place, or moved ahead; where it fell behind it may be, so
        # one row more than asked, and it left out.
        member = after[0]
        got = await self.page_from(key, after, n + 1, descending=descending, before=False)
        return [r for r in got.rows if r[0] != member][:n]

    async def rank(
        self: Ranks, key: BoardKey, player_id: str, *, descending: bool
    ) -> Placed | None:
        return (await self.ranks(key, [player_id], descending=descending))[0]

    async def around(
        self: Places, key: BoardKey, player_id: str, neighbors: int, *, descending: bool
    ) -> Around | None:
        """The player's score, then where it stands with ``neighbors`` rows on each side
        (``near``: the count ahead of it is the rank), then the rows' names and metadata.
        In process no step awaits, so it is one instant; on a split board, three steps of
        one call per shard each, at once."""
        score = (await self.scores(key, [player_id]))[0]
        if score is None:
            return None
        near = await self.near(key, player_id, score, neighbors, descending=descending)
        rows = [*near.above, (player_id, score), *near.below]
        names, meta = await self._beside(key, [m for m, _ in rows])
        return Around(near.ahead, score, rows, names, exact=True, metadata=meta)
