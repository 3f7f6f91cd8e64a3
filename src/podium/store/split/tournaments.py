"""Tournaments on a store split by player: global rows, on the home database, as keys and
freezes are. A join is one transaction there, whichever database holds the player, so
``maxEntrants`` is counted in one place. Their tallies are each player's, on the player's
database, like every board window's.

While the home is down, recording goes on on the shards (``store/split/__init__.py``): the
record path's list of live tournaments (by mode) is the one the home gave last (a definition never
changes; an early end is a freeze, which each database fences itself). Who joined is not
guessed: a match of a mode with a ``joinRequired`` tournament is a 503 until the home is
back, nothing recorded, a retry safe."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from podium.domain.tournaments import State, Tournament
from podium.errors import Unavailable
from podium.ports.tournaments import Joined
from podium.store.split.routing import Part, Router

log = logging.getLogger("podium.store")


class Tournaments(Part):
    def __init__(self, router: Router) -> None:
        super().__init__(router)
        self._live: dict[str, list[Tournament]] = {}  # by mode, what the home listed last

    async def create_tournament(self, t: Tournament) -> tuple[Tournament, bool]:
        return await self.router.home.create_tournament(t)

    async def tournament(self, tournament_id: str) -> Tournament | None:
        return await self.router.home.tournament(tournament_id)

    async def tournaments_page(
        self,
        after: tuple[int, str] | None,
        limit: int,
        category: str | None = None,
        state: State | None = None,
        now: float = 0.0,
    ) -> list[Tournament]:
        return await self.router.home.tournaments_page(after, limit, category, state, now)

    async def live_tournaments(self, mode: str, now: float) -> list[Tournament]:
        try:
            self._live[mode] = await self.router.home.live_tournaments(mode, now)
        except Unavailable:
            if mode not in self._live:
                raise
            log.warning("the home database is down: tournaments as last listed")
        return list(self._live[mode])

    async def unsettled_tournaments(self) -> list[Tournament]:
        return await self.router.home.unsettled_tournaments()

    async def settle_tournament(self, tournament_id: str, now: float) -> None:
        await self.router.home.settle_tournament(tournament_id, now)

    async def end_tournament(self, tournament_id: str, now: float) -> Tournament | None:
        return await self.router.home.end_tournament(tournament_id, now)

    async def join_tournament(self, tournament_id: str, player_id: str, now: float) -> Joined:
        return await self.router.home.join_tournament(tournament_id, player_id, now)

    async def remove_entrant(self, tournament_id: str, player_id: str) -> bool:
        return await self.router.home.remove_entrant(tournament_id, player_id)

    async def entrants(self, tournament_id: str, after: str, limit: int) -> list[tuple[str, float]]:
        return await self.router.home.entrants(tournament_id, after, limit)

    async def entrants_among(
        self, tournament_ids: Sequence[str], player_ids: Sequence[str]
    ) -> set[tuple[str, str]]:
        return await self.router.home.entrants_among(tournament_ids, player_ids)
