"""The life of a window across databases: a freeze that happens exactly once.

A freeze is two steps. First every database that holds players fences the window, in
parallel: under the window's exclusive lock (which every record there takes shared, as on
one database) it writes a fence row into its ``frozen_windows`` and reads its tallies. From
then on that database's records refuse to fold into the window, so its tallies are final:
a result either committed before the fence read them or does not count. The map is read
again after the fences, and any database it names that was not fenced yet is fenced too
(a bucket may have moved meanwhile); each database's tallies count only for the buckets
the map gives it. Second, the home database decides, in one transaction under the same
lock: its row becomes the frozen window (``fence`` false) with the final standings, unless
another freezer decided first. A freezer that stops between the steps leaves fences
behind, which the next freeze (the freezer role, after a restart) completes: fencing again
is harmless, and the tallies are the same, so every freezer plans the same standings.

Final standings and what is frozen live on the home database.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Sequence

from podium.domain.boards import BoardSpec, Tally
from podium.domain.models import FinalEntry, FrozenWindow, Standing
from podium.domain.plans import plan_freeze
from podium.domain.windows import Window
from podium.errors import Unavailable
from podium.ports.store import TallyRow
from podium.store.common import rows_by_player, standings_by_player
from podium.store.split.routing import Part, Router
from podium.util.aio import gather_all
from podium.util.caching import Cache

log = logging.getLogger("podium.store")

# The home's last answer of ``frozen``, by board: kept for as long as the process runs (a
# window is never unfrozen, so an old answer is short of the truth, never wrong about a
# window it names), for as many boards as a deployment could configure.
FROZEN_SEEN_BOARDS = 1_000


class Windows(Part):
    def __init__(self, router: Router) -> None:
        super().__init__(router)
        self._frozen_seen: Cache[str, dict[str, FrozenWindow]] = Cache(
            FROZEN_SEEN_BOARDS, math.inf, time.monotonic
        )

    def standings(
        self, board: str, window: str, batch: int = 5000
    ) -> AsyncIterator[list[Standing]]:
        return standings_by_player(
            lambda after: self.router.merged_pages(
                lambda db, start: db.standings_page(board, window, start, batch),
                lambda s: s.player_id,
                batch,
                after,
            )
        )

    def tally_rows(
        self, board: str, window: str, batch: int = 10_000
    ) -> AsyncIterator[list[TallyRow]]:
        return rows_by_player(
            lambda after: self.router.merged_pages(
                lambda db, start: db.tally_rows_page(board, window, start, batch),
                lambda r: r[0],
                batch,
                after,
            )
        )

    async def tally_count(self, board: str, window: str) -> int:
        parts = await self.router.each(lambda db: db.tally_count(board, window))
        return sum(parts.values())

    async def tallied(self, board: str, window: str, player_ids: Sequence[str]) -> set[str]:
        """Each player asked of the database the map puts them on (``Router.by_player``)."""
        parts = await self.router.by_player(
            player_ids, lambda db, ids: db.tallied(board, window, ids)
        )
        return set().union(*parts)

    async def windows(self, board: str) -> list[str]:
        parts = await self.router.each(lambda db: db.windows(board))
        return sorted(set().union(*parts.values()))

    async def store_time(self) -> float:
        # The home database decides every freeze (``decide_freeze``): its clock.
        return await self.router.home.store_time()

    async def freeze(self, board: BoardSpec, window: Window, keep: int, now: float) -> bool:
        if await self.router.home.decided(board.name, window.id):
            return False
        rows = await self.fence(board, window, now)
        plan = plan_freeze(board, window, rows, await self.banned_among(rows), keep)
        return await self.router.home.decide_freeze(board.name, window.id, plan, now)

    async def banned_among(self, rows: Sequence[tuple[str, Tally]]) -> set[str]:
        """Which players of a fenced window's tallies are banned, each asked of their own
        database (where their ban is): what a freeze leaves out."""
        parts = await self.router.by_player([p for p, _ in rows], lambda db, ids: db.banned(ids))
        return set().union(*parts)

    async def fence(self, board: BoardSpec, window: Window, now: float) -> list[tuple[str, Tally]]:
        """The first step of a freeze: every database fenced, and the window's tallies,
        each from the database the map (read after the fences) puts its player on."""
        r = self.router
        await r.ready()
        fenced: dict[str, list[tuple[str, Tally]]] = {}
        while todo := [u for u in r.urls() if u not in fenced]:
            parts = await gather_all(r.db(u).fence_window(board.name, window.id, now) for u in todo)
            fenced.update(zip(todo, parts, strict=True))
            await r.refresh_map()
        return [(p, t) for u, part in fenced.items() for p, t in part if r.owns(u, p)]

    async def frozen(self, board: str) -> dict[str, FrozenWindow]:
        """What the home says is frozen; while it is down, what it said last (a window
        is never unfrozen, and each database refuses results for a window it has fenced,
        so recording on the shards goes on by this list)."""
        try:
            found = await self.router.home.decided_windows(board)
        except Unavailable:
            known = self._frozen_seen.get(board)
            if known is None:
                raise
            log.warning("the home database is down: frozen windows of %s as last read", board)
            return dict(known)
        self._frozen_seen.put(board, found)
        return dict(found)

    async def final_page(self, board: str, window: str, first: int, last: int) -> list[FinalEntry]:
        return await self.router.home.final_page(board, window, first, last)

    async def final_entry(self, board: str, window: str, player_id: str) -> FinalEntry | None:
        return await self.router.home.final_entry(board, window, player_id)

    async def left_out(self, board: str, window: str) -> set[str]:
        return await self.router.home.left_out(board, window)

    async def set_archive(self, board: str, window: str, archive: str, checksum: str) -> None:
        await self.router.home.set_archive(board, window, archive, checksum)
