"""Leagues on SQLite: placing a player in a cohort inside their record's transaction, the
cohorts and tiers read, and a cohort's freeze with its tier moves and its event
(``ports/cohorts.py``). The one writer serializes placements, so a count and an insert in
one write never overfill a cohort."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from podium.domain import cohorts, events
from podium.domain.boards import BoardSpec
from podium.domain.models import Target
from podium.domain.plans import plan_cohort_freeze
from podium.domain.windows import Window
from podium.ports.cohorts import Cohort, Standing
from podium.store.sqlite.db import Database
from podium.store.sqlite.windows import freeze_rows, write_final

COHORT_COLS = "board, cohort, window_id, tier, members"


def _cohort(r: Any) -> Cohort:
    return Cohort(r["board"], r["cohort"], r["window_id"], r["tier"], r["members"])


def place(
    c: sqlite3.Connection,
    player_id: str,
    match_id: str,
    targets: Sequence[tuple[Target, BoardSpec]],
    now: float,
) -> list[tuple[Target, BoardSpec]]:
    """Inside a record's transaction: each pending cohort target (``domain.cohorts``) as the
    cohort the player is in, placing them now if this is their first result in the window;
    left out on a retry of a result stored before they were placed, or a frozen window."""
    out: list[tuple[Target, BoardSpec]] = []
    for t, spec in targets:
        found = cohorts.pending_tier(t.window)
        if found is None or spec.league is None:
            out.append((t, spec))
            continue
        window, tier = found
        row = c.execute(
            "SELECT cohort FROM cohort_members WHERE board = ? AND window_id = ? AND player_id = ?",
            (t.board, window, player_id),
        ).fetchone()
        if row is not None:
            out.append((Target(t.board, row["cohort"], t.start), spec))
            continue
        stored = c.execute(
            "SELECT 1 FROM results WHERE player_id = ? AND match_id = ?", (player_id, match_id)
        ).fetchone()
        frozen = c.execute(
            "SELECT 1 FROM frozen_windows WHERE board = ? AND window_id = ?", (t.board, window)
        ).fetchone()
        if stored or frozen:
            continue
        cohort = _allocate(c, t.board, window, spec.league.tier(tier), spec.league.cohort_size)
        c.execute(
            "INSERT INTO cohort_members (board, window_id, player_id, cohort, placed_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (t.board, window, player_id, cohort, now),
        )
        out.append((Target(t.board, cohort, t.start), spec))
    return out


def _allocate(c: sqlite3.Connection, board: str, window: str, tier: str, size: int) -> str:
    rows = c.execute(
        "SELECT cohort, members FROM cohorts WHERE board = ? AND window_id = ? AND tier = ? "
        "AND members < ? ORDER BY n",
        (board, window, tier, size),
    ).fetchall()
    made = c.execute(
        "SELECT COUNT(*) AS n FROM cohorts WHERE board = ? AND window_id = ? AND tier = ?",
        (board, window, tier),
    ).fetchone()["n"]
    cohort, after = cohorts.fill([(r["cohort"], r["members"]) for r in rows], made, size)
    if cohort is not None:
        c.execute(
            "UPDATE cohorts SET members = ? WHERE board = ? AND cohort = ?", (after, board, cohort)
        )
        return cohort
    origin = c.execute("SELECT origin FROM cohort_origin").fetchone()["origin"]
    cohort = cohorts.cohort_id(window, tier, after, origin)
    c.execute(
        "INSERT INTO cohorts (board, window_id, tier, n, cohort, members) "
        "VALUES (?, ?, ?, ?, ?, 1)",
        (board, window, tier, after, cohort),
    )
    return cohort


class Cohorts(Database):
    async def placements(
        self, board: str, window: str, player_ids: Sequence[str]
    ) -> dict[str, str]:
        ids = list(set(player_ids))
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = await self._read(
            lambda c: c.execute(
                "SELECT player_id, cohort FROM cohort_members WHERE board = ? AND window_id = ? "
                f"AND player_id IN ({marks})",
                (board, window, *ids),
            ).fetchall()
        )
        return {r["player_id"]: r["cohort"] for r in rows}

    async def tiers(self, board: str, player_ids: Sequence[str]) -> dict[str, str]:
        ids = list(set(player_ids))
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = await self._read(
            lambda c: c.execute(
                "SELECT player_id, tier FROM league_tiers WHERE board = ? "
                f"AND player_id IN ({marks})",
                (board, *ids),
            ).fetchall()
        )
        return {r["player_id"]: r["tier"] for r in rows}

    async def player_tiers(self, player_id: str) -> list[Standing]:
        rows = await self._read(
            lambda c: c.execute(
                "SELECT board, tier, cohort, moved FROM league_tiers WHERE player_id = ? "
                "ORDER BY board",
                (player_id,),
            ).fetchall()
        )
        return [Standing(r["board"], r["tier"], r["cohort"], r["moved"]) for r in rows]

    async def cohort(self, board: str, cohort_id: str) -> Cohort | None:
        row = await self._read(
            lambda c: c.execute(
                f"SELECT {COHORT_COLS} FROM cohorts WHERE board = ? AND cohort = ?",
                (board, cohort_id),
            ).fetchone()
        )
        return None if row is None else _cohort(row)

    async def cohorts(self, board: str, window: str) -> list[Cohort]:
        rows = await self._read(
            lambda c: c.execute(
                f"SELECT {COHORT_COLS} FROM cohorts WHERE board = ? AND window_id = ? "
                "ORDER BY cohort",
                (board, window),
            ).fetchall()
        )
        return [_cohort(r) for r in rows]

    async def members(self, board: str, cohort_id: str) -> list[str]:
        rows = await self._read(
            lambda c: c.execute(
                "SELECT player_id FROM cohort_members WHERE board = ? AND cohort = ? "
                "ORDER BY player_id",
                (board, cohort_id),
            ).fetchall()
        )
        return [r["player_id"] for r in rows]

    async def frozen_cohorts(self, board: str, cohort_ids: Sequence[str]) -> set[str]:
        ids = list(set(cohort_ids))
        if not ids:
            return set()
        marks = ",".join("?" * len(ids))
        rows = await self._read(
            lambda c: c.execute(
                f"SELECT window_id FROM frozen_windows WHERE board = ? AND window_id IN ({marks})",
                (board, *ids),
            ).fetchall()
        )
        return {r["window_id"] for r in rows}

    async def freeze_cohort(
        self, spec: BoardSpec, cohort: Cohort, window: Window, now: float
    ) -> bool:
        return await self._write(lambda c: _freeze_cohort(c, spec, cohort, window, now))


def _freeze_cohort(
    c: sqlite3.Connection, spec: BoardSpec, cohort: Cohort, window: Window, now: float
) -> bool:
    """Inside the caller's write transaction: execute ``plan_cohort_freeze``. False when the
    cohort was frozen already (exactly once, however many freezers ask)."""
    if c.execute(
        "SELECT 1 FROM frozen_windows WHERE board = ? AND window_id = ?", (spec.name, window.id)
    ).fetchone():
        return False
    tallies, banned = freeze_rows(c, spec.name, window.id)
    plan = plan_cohort_freeze(spec, window, cohort.tier, tallies, banned, now)
    c.execute(
        "INSERT INTO frozen_windows (board, window_id, frozen_at, players, archive) "
        "VALUES (?, ?, ?, ?, '')",
        (spec.name, window.id, now, plan.players),
    )
    write_final(c, spec.name, window.id, plan.final, plan.left_out)
    c.executemany(
        "INSERT INTO league_tiers (board, player_id, tier, cohort, window_start, moved) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (board, player_id) DO UPDATE SET "
        "tier = excluded.tier, cohort = excluded.cohort, window_start = excluded.window_start, "
        "moved = excluded.moved WHERE excluded.window_start >= league_tiers.window_start",
        [
            (spec.name, m.player_id, m.next_tier, window.id, window.start, m.change)
            for m in plan.moves
        ],
    )
    c.execute(
        "INSERT OR IGNORE INTO webhook_events (id, type, at, data, ready) VALUES (?, ?, ?, ?, 1)",
        (plan.event_id, events.COHORT_FROZEN, now, plan.event),
    )
    return True
