"""Tournaments on a store split by player: global rows, on the home database, as keys and
freezes are. A join is one transaction there, whichever database holds the player, so
``maxEntrants`` is counted in one place. Their tallies are each player's, on the player's
database, like every board window's."""

from __future__ import annotations

from collections.abc import Sequence

from podium.domain.tournaments import Tournament
from podium.ports.tournaments import Joined
from podium.store.split.routing import Part


class Tournaments(Part):
    async def create_tournament(self, t: Tournament) -> tuple[Tournament, bool]:
        return await self.router.home.create_tournament(t)

    async def tournament(self, tournament_id: str) -> Tournament | None:
        return await self.router.home.tournament(tournament_id)

    async def list_tournaments(self) -> list[Tournament]:
        return await self.router.home.list_tournaments()

    async def end_tournament(self, tournament_id: str, now: float) -> Tournament | None:
        return await self.router.home.end_tournament(tournament_id, now)

    async def join_tournament(self, tournament_id: str, player_id: str, now: float) -> Joined:
        return await self.router.home.join_tournament(tournament_id, player_id, now)

    async def entrants_among(
        self, tournament_ids: Sequence[str], player_ids: Sequence[str]
    ) -> set[tuple[str, str]]:
        return await self.router.home.entrants_among(tournament_ids, player_ids)
