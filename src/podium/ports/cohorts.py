"""Leagues in the store: cohorts, who was placed in which, and each player's tier
(``CohortStore``). The placement itself is the record's (``Results.record`` resolves a
pending cohort target inside its transaction, ``domain/cohorts.py``); a cohort's standings
are tallies of its window, its final standings a frozen window's.

On a store split by player, cohorts and placements live on the database of the players
placed (each database makes cohorts of its own), the tiers and the freeze on the home.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from podium.domain.boards import BoardSpec
from podium.domain.windows import Window


@dataclass(frozen=True, slots=True)
class Cohort:
    """One cohort of a league board window: its id (its window's id), the board window
    it is part of, its tier, and how many were placed in it."""

    board: str
    id: str
    window: str
    tier: str
    members: int


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a player stands on one league board: their tier, and the cohort that decided
    it (None: no cohort of theirs has frozen yet), with the move it made."""

    board: str
    tier: str
    cohort: str | None
    moved: str | None  # up, down or stay


class CohortStore(Protocol):
    async def placements(
        self, board: str, window: str, player_ids: Sequence[str]
    ) -> dict[str, str]:
        """The cohort each of these players was placed in on this board window."""
        ...

    async def tiers(self, board: str, player_ids: Sequence[str]) -> dict[str, str]:
        """The tier each of these players stands at on this league board (absent: none
        decided yet, the lowest)."""
        ...

    async def player_tiers(self, player_id: str) -> list[Standing]:
        """The player's tier on every league board that decided one, by board."""
        ...

    async def cohort(self, board: str, cohort_id: str) -> Cohort | None: ...

    async def cohorts(self, board: str, window: str) -> list[Cohort]:
        """Every cohort of a board window, by id."""
        ...

    async def members(self, board: str, cohort_id: str) -> list[str]:
        """Everyone placed in the cohort, by id."""
        ...

    async def frozen_cohorts(self, board: str, cohort_ids: Sequence[str]) -> set[str]:
        """Which of these cohorts are frozen (``Windows.frozen`` leaves cohorts out)."""
        ...

    async def freeze_cohort(
        self, spec: BoardSpec, cohort: Cohort, window: Window, now: float
    ) -> bool:
        """Freeze the cohort's window (``window``, the cohort's), exactly once: in one
        transaction its final standings (banned players left out), each member's tier for
        the next window (``domain.cohorts.plan_moves``; a tier decided by a later window
        stays), and its ``cohort.frozen`` event. False when it was frozen already."""
        ...
