"""Tournaments on a store split by player: global rows, on the home database, as keys and
freezes are. A join is one transaction there, whichever database holds the player, so
``maxEntrants`` is counted in one place. Their tallies are each player's, on the player's
database, like every board window's.

While the home is down, recording goes on on the shards (``store/split/__init__.py``): the
record path's list of tournaments is the one the home gave last (a definition never
changes; an early end is a freeze, which each database fences itself). Who joined is not
guessed: a match of a mode with a ``joinRequired`` tournament is a 503 until the home is
back, nothing recorded, a retry safe."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from podium.domain.tournaments import Tournament
from podium.errors import Unavailable
from podium.ports.tournaments import Joined
from podium.store.split.routing import Part, Router

log = logging.getLogger("podium.store")


class Tournaments(Part):
    def __init__(self, router: Router) -> None:
        super().__init__(router)
        self._listed: list[Tournament] | None = None  # what the home listed last

    async def create_tournament(self, t: Tournament) -> tuple[Tournament, bool]:
        return await self.router.home.create_tournament(t)

    async def tournament(self, tournament_id: str) -> Tournament | None:
        return await self.router.home.tournament(tournament_id)

    async def list_tournaments(self) -> list[Tournament]:
        try:
            self._listed = await self.router.home.list_tournaments()
        except Unavailable:
            if self._listed is None:
                raise
            log.warning("the home database is down: tournaments as last listed")
        return list(self._listed)

    async def end_tournament(self, tournament_id: str, now: float) -> Tournament | None:
        return await self.router.home.end_tournament(tournament_id, now)

    async def join_tournament(self, tournament_id: str, player_id: str, now: float) -> Joined:
        return await self.router.home.join_tournament(tournament_id, player_id, now)

    async def remove_entrant(self, tournament_id: str, player_id: str) -> bool:
        return await self.router.home.remove_entrant(tournament_id, player_id)

    async def entrants_among(
        self, tournament_ids: Sequence[str], player_ids: Sequence[str]
    ) -> set[tuple[str, str]]:
        return await self.router.home.entrants_among(tournament_ids, player_ids)
