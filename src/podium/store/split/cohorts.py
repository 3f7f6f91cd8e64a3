"""Leagues on a store split by player. A player is placed in their record's transaction on
their own database, so each database makes cohorts of its own (their ids suffixed with the
database's origin, ``sql/split/003_cohort_origin.sql``), filled first come by the players it
holds; every database is asked for a cohort and its members. A cohort freezes as a window
does here (``windows.py``: every database fenced, then the home decides), and the home keeps
its final standings, the tiers it decides and its event, in that one decision.
"""

from __future__ import annotations

from collections.abc import Sequence

from podium.domain.boards import BoardSpec
from podium.domain.plans import plan_cohort_freeze
from podium.domain.windows import Window
from podium.ports.cohorts import Cohort, Standing
from podium.store.split.windows import Windows


class Cohorts(Windows):
    async def placements(
        self, board: str, window: str, player_ids: Sequence[str]
    ) -> dict[str, str]:
        parts = await self.router.by_player(
            player_ids, lambda db, ids: db.placements(board, window, ids)
        )
        return {p: c for part in parts for p, c in part.items()}

    async def tiers(self, board: str, player_ids: Sequence[str]) -> dict[str, str]:
        return await self.router.home.tiers(board, player_ids)

    async def player_tiers(self, player_id: str) -> list[Standing]:
        return await self.router.home.player_tiers(player_id)

    async def cohort(self, board: str, cohort_id: str) -> Cohort | None:
        found = await self.router.each(lambda db: db.cohort(board, cohort_id))
        return next((c for c in found.values() if c is not None), None)

    async def cohorts(self, board: str, window: str) -> list[Cohort]:
        found = await self.router.each(lambda db: db.cohorts(board, window))
        merged = {c.id: c for part in found.values() for c in part}
        return [merged[k] for k in sorted(merged)]

    async def members(self, board: str, cohort_id: str) -> list[str]:
        # Everyone placed, wherever they are now (a bucket moved takes its rows along).
        found = await self.router.each(lambda db: db.members(board, cohort_id))
        return sorted({p for part in found.values() for p in part})

    async def frozen_cohorts(self, board: str, cohort_ids: Sequence[str]) -> set[str]:
        return await self.router.home.frozen_cohorts(board, cohort_ids)

    async def freeze_cohort(
        self, spec: BoardSpec, cohort: Cohort, window: Window, now: float
    ) -> bool:
        if await self.router.home.decided(spec.name, window.id):
            return False
        rows = await self.fence(spec, window, now)
        banned = await self.banned_among(rows)
        plan = plan_cohort_freeze(spec, window, cohort.tier, rows, banned, now)
        return await self.router.home.decide_cohort_freeze(spec.name, window, plan, now)
