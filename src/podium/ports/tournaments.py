"""Tournaments in the store: their definitions and who joined them (``Tournaments``).

Global rows: on a store split by player they live on the home database, as keys and
freezes do. Their standings are tallies like any board window's (``ports.store``).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol

from podium.domain.tournaments import State, Tournament


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

    async def tournaments_page(
        self,
        after: tuple[int, str] | None,
        limit: int,
        category: str | None = None,
        state: State | None = None,
        now: float = 0.0,
    ) -> list[Tournament]:
        """Up to ``limit`` tournaments by start then id, after ``(starts_at, id)``; of
        ``category``; with ``state``, those that may be in it at ``now``, read from an
        index (``store.common.tournament_state_sql``: a few more than are, which the caller
        narrows with ``Tournament.state``)."""
        ...

    async def live_tournaments(self, mode: str, now: float) -> list[Tournament]:
        """The tournaments of ``mode`` a result may still count for at ``now`` (not ended
        early, ``closes_at`` later), by start then id: read from an index, so that the
        record path costs the same however many tournaments ever ended."""
        ...

    async def unsettled_tournaments(self) -> list[Tournament]:
        """Every tournament not settled yet (``settle_tournament``), by start then id: the
        freezer's walk, from an index of those alone."""
        ...

    async def settle_tournament(self, tournament_id: str, now: float) -> None:
        """Mark it settled at ``now`` (the first mark stays): every run anyone played is
        frozen and no result can count for it any more, so no walk needs it again."""
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

    async def entrants(self, tournament_id: str, after: str, limit: int) -> list[tuple[str, float]]:
        """The entrants, ``(player_id, joined_at)``, by player id (byte order) from the
        first after ``after``; at most ``limit``."""
        ...

    async def entrants_among(
        self, tournament_ids: Sequence[str], player_ids: Sequence[str]
    ) -> set[tuple[str, str]]:
        """``(tournament, player)`` for each of these players who joined each of these."""
        ...
