"""Leagues on Postgres: placing a player in a cohort inside their record's transaction,
under a lock on the tier (``locks.COHORT_NS``), so that racing first results never overfill
a cohort; the cohorts and tiers read; a cohort's freeze with its tier moves and its event
(``ports/cohorts.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from podium.domain import cohorts, events
from podium.domain.boards import BoardSpec
from podium.domain.models import Target
from podium.domain.plans import CohortFreezePlan, plan_cohort_freeze
from podium.domain.windows import Window
from podium.ports.cohorts import Cohort, Standing
from podium.store.common import Row
from podium.store.postgres import locks
from podium.store.postgres.pool import Database
from podium.store.postgres.windows import freeze_rows, write_final_standings

if TYPE_CHECKING:
    from podium.store.postgres.pool import Conn

COHORT_COLS = "board, cohort, window_id, tier, members"
# Placements of a tier queue on one lock per stripe of players, each held until its record
# commits: with one, a window's first results placed one at a time (25 a second on a busy
# 2-core machine, benchmarks/cohort_accept.py); each stripe fills cohorts of its own, first
# come, so at most this many are left part-full in a tier when the window ends.
STRIPES = 8


def _cohort(r: Row) -> Cohort:
    return Cohort(r["board"], r["cohort"], r["window_id"], r["tier"], r["members"])


async def known(
    c: Conn, player_id: str, targets: Sequence[tuple[Target, BoardSpec]]
) -> list[tuple[Target, BoardSpec]]:
    """Inside a record's transaction, after its player's lock (so no other record places
    them meanwhile): each pending cohort target as the cohort the player was placed in, if
    a record placed them; the rest stay pending, placed by the write (``place_args``)."""
    out: list[tuple[Target, BoardSpec]] = []
    for t, spec in targets:
        found = cohorts.pending_tier(t.window)
        if found is None:
            out.append((t, spec))
            continue
        cohort = await c.fetchval(
            "SELECT cohort FROM cohort_members WHERE board = $1 AND window_id = $2 "
            "AND player_id = $3",
            t.board,
            found[0],
            player_id,
        )
        out.append((t if cohort is None else Target(t.board, cohort, t.start), spec))
    return out


def place_args(
    player_id: str, match_id: str, target: Target, spec: BoardSpec, now: float
) -> list[object]:
    """The arguments of ``podium_place_cohort`` (migration 017) for a pending target: the
    player placed under the lock of their stripe of the tier, in one statement, last in the
    record's transaction, so that the lock is held for that statement and the commit."""
    found = cohorts.pending_tier(target.window)
    assert found is not None and spec.league is not None
    window, tier = found
    tier = spec.league.tier(tier)
    stripe = cohorts.stripe_of(player_id, STRIPES)
    return [
        target.board,
        window,
        tier,
        spec.league.cohort_size,
        stripe,
        STRIPES,
        player_id,
        match_id,
        float(now),
        locks.COHORT_NS,
        locks.cohort_key(target.board, window, f"{tier}/{stripe}"),
    ]


PLACE = "SELECT podium_place_cohort($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"


async def place(
    c: Conn, player_id: str, match_id: str, target: Target, spec: BoardSpec, now: float
) -> str:
    """One placement on its own statement (a record with pending targets on several league
    boards places all but the last so)."""
    cohort = await c.fetchval(PLACE, *place_args(player_id, match_id, target, spec, now))
    assert cohort is not None, "placed only where the record writes a new result"
    return str(cohort)


class Cohorts(Database):
    async def placements(
        self, board: str, window: str, player_ids: Sequence[str]
    ) -> dict[str, str]:
        if not player_ids:
            return {}
        rows = await self._fetch(
            "SELECT player_id, cohort FROM cohort_members WHERE board = $1 AND window_id = $2 "
            "AND player_id = ANY($3::text[])",
            board,
            window,
            list(set(player_ids)),
        )
        return {r["player_id"]: r["cohort"] for r in rows}

    async def tiers(self, board: str, player_ids: Sequence[str]) -> dict[str, str]:
        if not player_ids:
            return {}
        rows = await self._fetch(
            "SELECT player_id, tier FROM league_tiers WHERE board = $1 "
            "AND player_id = ANY($2::text[])",
            board,
            list(set(player_ids)),
        )
        return {r["player_id"]: r["tier"] for r in rows}

    async def player_tiers(self, player_id: str) -> list[Standing]:
        rows = await self._fetch(
            "SELECT board, tier, cohort, moved FROM league_tiers WHERE player_id = $1 "
            "ORDER BY board",
            player_id,
        )
        return [Standing(r["board"], r["tier"], r["cohort"], r["moved"]) for r in rows]

    async def cohort(self, board: str, cohort_id: str) -> Cohort | None:
        rows = await self._fetch(
            f"SELECT {COHORT_COLS} FROM cohorts WHERE board = $1 AND cohort = $2",
            board,
            cohort_id,
        )
        return _cohort(rows[0]) if rows else None

    async def cohorts(self, board: str, window: str) -> list[Cohort]:
        rows = await self._fetch(
            f"SELECT {COHORT_COLS} FROM cohorts WHERE board = $1 AND window_id = $2 "
            "ORDER BY cohort",
            board,
            window,
        )
        return [_cohort(r) for r in rows]

    async def members(self, board: str, cohort_id: str) -> list[str]:
        rows = await self._fetch(
            "SELECT player_id FROM cohort_members WHERE board = $1 AND cohort = $2 "
            "ORDER BY player_id",
            board,
            cohort_id,
        )
        return [r["player_id"] for r in rows]

    async def frozen_cohorts(self, board: str, cohort_ids: Sequence[str]) -> set[str]:
        """Frozen here: decided, not only fenced (a cohort's freeze writes an archive of ''
        since it keeps no file; a split store's fence row has none)."""
        if not cohort_ids:
            return set()
        rows = await self._fetch(
            "SELECT window_id FROM frozen_windows WHERE board = $1 "
            "AND window_id = ANY($2::text[]) AND archive IS NOT NULL",
            board,
            list(set(cohort_ids)),
        )
        return {r["window_id"] for r in rows}

    async def freeze_cohort(
        self, spec: BoardSpec, cohort: Cohort, window: Window, now: float
    ) -> bool:
        async def run(c: Conn) -> bool:
            await _lock_window(c, spec.name, window.id)
            done = await c.fetchval(
                "SELECT 1 FROM frozen_windows WHERE board = $1 AND window_id = $2",
                spec.name,
                window.id,
            )
            if done:
                return False
            tallies, banned = await freeze_rows(c, spec.name, window.id)
            plan = plan_cohort_freeze(spec, window, cohort.tier, tallies, banned, now)
            await write_cohort_freeze(c, spec.name, window, plan, now, fence=False)
            return True

        return await self._run(run)

    # -- on the home of a store split by player (``store/split/cohorts.py``) ---------------

    async def decide_cohort_freeze(
        self, board: str, window: Window, plan: CohortFreezePlan, now: float
    ) -> bool:
        """In one transaction under the window's lock: the cohort frozen with the plan (its
        standings, tiers and event), or False if another freezer decided first."""

        async def run(c: Conn) -> bool:
            await _lock_window(c, board, window.id)
            return await write_cohort_freeze(c, board, window, plan, now, fence=True)

        return await self._run(run)


async def _lock_window(c: Conn, board: str, window_id: str) -> None:
    await c.execute(
        "SELECT pg_advisory_xact_lock($1, $2)", locks.WINDOW_NS, locks.window_key(board, window_id)
    )


async def write_cohort_freeze(
    c: Conn, board: str, window: Window, plan: CohortFreezePlan, now: float, *, fence: bool
) -> bool:
    """The freeze's rows: the frozen window (over a fence row, when ``fence``: a split
    store's), its final standings, every member's tier (a later window's decision stays),
    the event. False when it was decided already."""
    if fence:  # a split store's home: its fence row becomes the frozen window
        decided = await c.fetchval(
            "INSERT INTO frozen_windows (board, window_id, frozen_at, players, archive, fence) "
            "VALUES ($1, $2, $3, $4, '', false) ON CONFLICT (board, window_id) DO UPDATE SET "
            "frozen_at = excluded.frozen_at, players = excluded.players, archive = '', "
            "fence = false WHERE frozen_windows.fence RETURNING 1",
            board,
            window.id,
            float(now),
            plan.players,
        )
    else:  # under the window's lock, found not frozen
        decided = await c.fetchval(
            "INSERT INTO frozen_windows (board, window_id, frozen_at, players, archive) "
            "VALUES ($1, $2, $3, $4, '') RETURNING 1",
            board,
            window.id,
            float(now),
            plan.players,
        )
    if decided is None:
        return False
    await write_final_standings(c, board, window.id, plan.final, plan.left_out)
    m = plan.moves
    await c.execute(
        "INSERT INTO league_tiers (board, player_id, tier, cohort, window_start, moved) "
        "SELECT $1, p, t, $4, $5, mv FROM unnest($2::text[], $3::text[], $6::text[]) "
        "AS u(p, t, mv) ON CONFLICT (board, player_id) DO UPDATE SET tier = excluded.tier, "
        "cohort = excluded.cohort, window_start = excluded.window_start, moved = excluded.moved "
        "WHERE excluded.window_start >= league_tiers.window_start",
        board,
        [x.player_id for x in m],
        [x.next_tier for x in m],
        window.id,
        window.start,
        [x.change for x in m],
    )
    await c.execute(
        "INSERT INTO webhook_events (id, type, at, data, ready) VALUES ($1, $2, $3, $4, true) "
        "ON CONFLICT (id) DO NOTHING",
        plan.event_id,
        events.COHORT_FROZEN,
        float(now),
        plan.event,
    )
    return True
