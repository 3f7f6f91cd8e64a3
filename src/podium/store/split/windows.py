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
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from podium.domain.boards import BoardSpec, Tally
from podium.domain.models import FinalEntry, FrozenWindow, Standing
from podium.domain.plans import FreezePlan, plan_freeze
from podium.domain.windows import Window
from podium.errors import Unavailable
from podium.store.common import FROZEN_COLS, TALLY_COLS, frozen_of, standing_of
from podium.store.postgres.windows import lock_window, window_tallies, write_final_standings
from podium.store.split.routing import Routed, gather_all, merged_pages

if TYPE_CHECKING:
    from podium.store.postgres.pool import Conn

log = logging.getLogger("podium.store")


class Windows(Routed):
    _frozen_seen: dict[str, dict[str, FrozenWindow]]  # by board: the home's last answer

    async def standings(
        self, board: str, window: str, batch: int = 5000
    ) -> AsyncIterator[list[Standing]]:
        await self.ready()

        async def page(url: str, after: str) -> list[Standing]:
            rows = await self.db(url).run(
                lambda c: c.fetch(
                    f"SELECT {TALLY_COLS} FROM tallies WHERE board = $1 AND window_id = $2 "
                    "AND player_id > $3 ORDER BY player_id LIMIT $4",
                    board,
                    window,
                    after,
                    batch,
                ),
                tx=False,
            )
            return [standing_of(r) for r in rows]

        after = ""
        while rows := await merged_pages(
            self.urls(),
            page,
            lambda s: s.player_id,
            lambda url, s: self.owns(url, s.player_id),
            batch,
            after,
        ):
            yield rows
            after = rows[-1].player_id

    async def tallied(self, board: str, window: str, player_ids: Sequence[str]) -> set[str]:
        """Each player asked of the database the map puts them on (as ``banned``): a
        bucket being copied is read from its source until the map names the target."""
        await self.ready()
        groups = self.by_db(dict.fromkeys(player_ids))
        parts = await gather_all(
            self.db(u).tallied(board, window, ids) for u, ids in groups.items()
        )
        return set().union(*parts)

    async def windows(self, board: str) -> list[str]:
        await self.ready()
        parts = await gather_all(self.db(u).windows(board) for u in self.urls())
        return sorted(set().union(*parts))

    async def freeze(self, board: BoardSpec, window: Window, keep: int, now: float) -> bool:
        if await self._decided(board.name, window.id):
            return False
        rows = await self.fence(board, window, now)
        plan = plan_freeze(board, window, rows, keep)
        return await self.home.run(lambda c: _decide(c, board, window, plan, now))

    async def fence(self, board: BoardSpec, window: Window, now: float) -> list[tuple[str, Tally]]:
        """The first step of a freeze: every database fenced, and the window's tallies,
        each from the database the map (read after the fences) puts its player on."""
        await self.ready()
        fenced: dict[str, list[tuple[str, Tally]]] = {}
        while todo := [u for u in self.urls() if u not in fenced]:
            parts = await gather_all(
                self.db(u).run(lambda c: _fence(c, board, window, now)) for u in todo
            )
            fenced.update(zip(todo, parts, strict=True))
            await self.refresh_map()
        return [(p, t) for u, part in fenced.items() for p, t in part if self.owns(u, p)]

    async def _decided(self, board: str, window: str) -> bool:
        found = await self.home.run(
            lambda c: c.fetchval(
                "SELECT 1 FROM frozen_windows WHERE board = $1 AND window_id = $2 AND NOT fence",
                board,
                window,
            ),
            tx=False,
        )
        return found is not None

    async def frozen(self, board: str) -> dict[str, FrozenWindow]:
        """What the home says is frozen; while it is down, what it said last (a window
        is never unfrozen, and each database refuses results for a window it has fenced,
        so recording on the shards goes on by this list)."""
        try:
            rows = await self.home.run(
                lambda c: c.fetch(
                    f"SELECT {FROZEN_COLS} FROM frozen_windows WHERE board = $1 AND NOT fence",
                    board,
                ),
                tx=False,
            )
        except Unavailable:
            known = self._frozen_seen.get(board)
            if known is None:
                raise
            log.warning("the home database is down: frozen windows of %s as last read", board)
            return dict(known)
        found = {r["window_id"]: frozen_of(r) for r in rows}
        self._frozen_seen[board] = found
        return dict(found)

    async def final_page(self, board: str, window: str, first: int, last: int) -> list[FinalEntry]:
        return await self.home.final_page(board, window, first, last)

    async def final_entry(self, board: str, window: str, player_id: str) -> FinalEntry | None:
        return await self.home.final_entry(board, window, player_id)

    async def set_archive(self, board: str, window: str, archive: str, checksum: str) -> None:
        await self.home.set_archive(board, window, archive, checksum)


async def _fence(c: Conn, spec: BoardSpec, window: Window, now: float) -> list[tuple[str, Tally]]:
    """On one database, in one transaction: the fence (unless one is there, or this is the
    home database and the window is decided), then the window's tallies there."""
    await lock_window(c, spec.name, window.id)
    await c.execute(
        "INSERT INTO frozen_windows (board, window_id, frozen_at, players, fence) "
        "VALUES ($1, $2, $3, 0, true) ON CONFLICT (board, window_id) DO NOTHING",
        spec.name,
        window.id,
        float(now),
    )
    return await window_tallies(c, spec.name, window.id)


async def _decide(c: Conn, spec: BoardSpec, window: Window, plan: FreezePlan, now: float) -> bool:
    """On the home database, in one transaction: the window frozen with its final
    standings, or False if another freezer decided first (exactly once)."""
    await lock_window(c, spec.name, window.id)
    decided = await c.fetchval(
        "INSERT INTO frozen_windows (board, window_id, frozen_at, players, fence) "
        "VALUES ($1, $2, $3, $4, false) ON CONFLICT (board, window_id) DO UPDATE SET "
        "frozen_at = excluded.frozen_at, players = excluded.players, fence = false "
        "WHERE frozen_windows.fence RETURNING 1",
        spec.name,
        window.id,
        float(now),
        plan.players,
    )
    if decided is None:
        return False
    await write_final_standings(c, spec.name, window.id, plan.final)
    return True
