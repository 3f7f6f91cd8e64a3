"""Tournaments in the store: their definitions and who joined them (``Tournaments``).

Global rows: on a store split by player they live on the home database, as keys and
freezes do. Their standings are tallies like any board window's (``ports.store``).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol

from podium.domain.tournaments import Tournament


class Joined(StrEnum):
    """What a join did: ``JOINED`` now, ``ALREADY`` before (the same join), or refused."""

    JOINED = "joined"
    ALREADY = "already"
    FULL = "full"
    ENDED = "ended"
    MISSING = "missing"


class TournamentStore(Protocol):
    async def create_tournament(self, t: Tournament) -> tuple[Tournament, bool]:
        """Insert ``t`` unless its id exists: the stored one, and whether it was inserted
        now. One transaction; the caller compares the definitions."""
        ...

    async def tournament(self, tournament_id: str) -> Tournament | None: ...

    async def list_tournaments(self) -> list[Tournament]:
        """Every tournament, by start then id."""
        ...

    async def end_tournament(self, tournament_id: str, now: float) -> Tournament | None:
        """Mark it ended at ``now`` (the first end stays); None when there is no such id."""
        ...

    async def join_tournament(self, tournament_id: str, player_id: str, now: float) -> Joined:
        """Add the player to the entrants in one transaction that holds the tournament's
        row: a second join is ``ALREADY``, a join once ``maxEntrants`` have joined ``FULL``
        (joins racing for the last place never overfill), one at or after its end
        ``ENDED``."""
        ...

    async def remove_entrant(self, tournament_id: str, player_id: str) -> bool:
        """Take the player out of the entrants, in one transaction that holds the
        tournament's row as a join does, its count one less: whether they had joined."""
        ...

    async def entrants_among(
        self, tournament_ids: Sequence[str], player_ids: Sequence[str]
    ) -> set[tuple[str, str]]:
        """``(tournament, player)`` for each of these players who joined each of these."""
        ...
