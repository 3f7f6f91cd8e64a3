"""The life of a window on Postgres: stored tallies by window, the freeze, final standings.

A freeze takes the window's advisory lock exclusively; every record transaction takes it
shared before checking ``frozen_windows``. So a result either commits before the freeze
reads the tallies (and is in the final standings) or sees the window frozen (and does not
count for it): nothing changes a window after its standings are taken. On a grouped board
the lock is the base window's (``locks.window_key``), shared by all its groups: a record
takes it before it knows the player's group.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, cast

from podium.domain.boards import BoardSpec, Tally
from podium.domain.models import FinalEntry, FrozenWindow, Standing
from podium.domain.plans import FreezePlan, plan_freeze
from podium.domain.windows import Window
from podium.ports.store import TallyRow
from podium.store.common import (
    FINAL_COLS,
    FROZEN_COLS,
    ROW_COLS,
    TALLY_COLS,
    final_of,
    frozen_of,
    rows_by_player,
    standing_of,
    standings_by_player,
    tally_of,
)
from podium.store.postgres import locks
from podium.store.postgres.pool import Database
from podium.store.postgres.webhooks import release_window_frozen, write_window_frozen

if TYPE_CHECKING:
    from podium.store.postgres.pool import Conn


# A board's frozen windows (on a database of a split store, its fences too: ``NOT fence``
# leaves them out).
# A league's frozen cohorts are windows of their board too ("2026-W44.gold-3", the only ids
# with a dot): left out here, so the record path's list of a board's frozen windows does not
# grow by a thousand a week (``frozen_cohorts`` asks after them by id).
FROZEN = f"SELECT {FROZEN_COLS} FROM frozen_windows WHERE board = $1 AND window_id NOT LIKE '%.%'"


class Windows(Database):
    def warm_statements(self, reads: bool) -> list[tuple[str, tuple[object, ...]]]:
        # A board's frozen windows (``frozen``), which a match reads first, held a second.
        warm = super().warm_statements(reads)
        return [*warm, (FROZEN, ("",))] if reads else warm

    def standings(
        self, board: str, window: str, batch: int = 5000
    ) -> AsyncIterator[list[Standing]]:
        return standings_by_player(lambda after: self.standings_page(board, window, after, batch))

    async def standings_page(
        self, board: str, window: str, after: str, limit: int
    ) -> list[Standing]:
        """Up to ``limit`` stored tallies of one board window, by player id, from the first
        id after ``after``: a page of ``standings``."""
        rows = await self._fetch(
            f"SELECT {TALLY_COLS} FROM tallies WHERE board = $1 AND window_id = $2 "
            "AND player_id > $3 ORDER BY player_id LIMIT $4",
            board,
            window,
            after,
            limit,
        )
        return [standing_of(r) for r in rows]

    def tally_rows(
        self, board: str, window: str, batch: int = 10_000
    ) -> AsyncIterator[list[TallyRow]]:
        return rows_by_player(lambda after: self.tally_rows_page(board, window, after, batch))

    async def tally_rows_page(
        self, board: str, window: str, after: str, limit: int
    ) -> list[TallyRow]:
        """A page of ``tally_rows``, as ``standings_page`` is of ``standings``."""
        rows = await self._fetch(
            f"SELECT {ROW_COLS} FROM tallies WHERE board = $1 AND window_id = $2 "
            "AND player_id > $3 ORDER BY player_id LIMIT $4",
            board,
            window,
            after,
            limit,
        )
        # asyncpg's records as they come, not copied into tuples: they unpack, index and
        # compare as tuples do, and copying a million of them was an eighth of a rebuild's
        # time in this process (benchmarks/rebuild.py)
        return cast(list[TallyRow], rows)

    async def tally_count(self, board: str, window: str) -> int:
        [row] = await self._fetch(
            "SELECT COUNT(*) AS n FROM tallies WHERE board = $1 AND window_id = $2", board, window
        )
        return int(row["n"])

    async def tallied(self, board: str, window: str, player_ids: Sequence[str]) -> set[str]:
        ids = list(set(player_ids))
        if not ids:
            return set()
        rows = await self._fetch(
            "SELECT player_id FROM tallies WHERE board = $1 AND window_id = $2 "
            "AND player_id = ANY($3::text[])",
            board,
            window,
            ids,
        )
        return {r["player_id"] for r in rows}

    async def windows(self, board: str) -> list[str]:
        rows = await self._fetch(
            "SELECT DISTINCT window_id FROM tallies WHERE board = $1 ORDER BY window_id", board
        )
        return [r["window_id"] for r in rows]

    async def store_time(self) -> float:
        rows = await self._fetch("SELECT extract(epoch FROM clock_timestamp())::float8 AS t")
        return float(rows[0]["t"])

    async def freeze(self, board: BoardSpec, window: Window, keep: int, now: float) -> bool:
        return await self._run(lambda c: _freeze(c, board, window, keep, now))

    async def frozen(self, board: str) -> dict[str, FrozenWindow]:
        return {r["window_id"]: frozen_of(r) for r in await self._fetch(FROZEN, board)}

    async def final_page(self, board: str, window: str, first: int, last: int) -> list[FinalEntry]:
        rows = await self._fetch(
            f"SELECT {FINAL_COLS} FROM final_standings WHERE board = $1 AND window_id = $2 "
            "AND position BETWEEN $3 AND $4 ORDER BY position",
            board,
            window,
            first,
            last,
        )
        return [final_of(r) for r in rows]

    async def final_entry(self, board: str, window: str, player_id: str) -> FinalEntry | None:
        rows = await self._fetch(
            f"SELECT {FINAL_COLS} FROM final_standings "
            "WHERE board = $1 AND window_id = $2 AND player_id = $3",
            board,
            window,
            player_id,
        )
        return final_of(rows[0]) if rows else None

    async def left_out(self, board: str, window: str) -> set[str]:
        rows = await self._fetch(
            "SELECT player_id FROM left_out WHERE board = $1 AND window_id = $2", board, window
        )
        return {r["player_id"] for r in rows}

    async def set_archive(self, board: str, window: str, archive: str, checksum: str) -> None:
        async def run(c: Conn) -> None:
            await c.execute(
                "UPDATE frozen_windows SET archive = $3, checksum = $4 "
                "WHERE board = $1 AND window_id = $2",
                board,
                window,
                archive,
                checksum,
            )
            await release_window_frozen(c, board, window, checksum)

        await self._run(run)

    # -- a freeze in two steps, on the databases of a store split by player -----------------
    # (``store/split/windows.py``: every database fences the window, then the home decides;
    # ``sql/split/001_fence.sql`` adds the fence column.)

    async def fence_window(self, board: str, window_id: str, now: float) -> list[tuple[str, Tally]]:
        """In one transaction under the window's lock: a fence row for the window (unless
        one is there, or the window is decided here), which every record here refuses to
        fold into; then the window's tallies here, final from now on."""

        async def run(c: Conn) -> list[tuple[str, Tally]]:
            await lock_window(c, board, window_id)
            await c.execute(
                "INSERT INTO frozen_windows (board, window_id, frozen_at, players, fence) "
                "VALUES ($1, $2, $3, 0, true) ON CONFLICT (board, window_id) DO NOTHING",
                board,
                window_id,
                float(now),
            )
            return await window_tallies(c, board, window_id)

        return await self._run(run)

    async def decide_freeze(self, board: str, window_id: str, plan: FreezePlan, now: float) -> bool:
        """On the home database, in one transaction under the window's lock: the window
        frozen with the plan's final standings, or False if another freezer decided first
        (exactly once)."""

        async def run(c: Conn) -> bool:
            await lock_window(c, board, window_id)
            decided = await c.fetchval(
                "INSERT INTO frozen_windows (board, window_id, frozen_at, players, fence) "
                "VALUES ($1, $2, $3, $4, false) ON CONFLICT (board, window_id) DO UPDATE SET "
                "frozen_at = excluded.frozen_at, players = excluded.players, fence = false "
                "WHERE frozen_windows.fence RETURNING 1",
                board,
                window_id,
                float(now),
                plan.players,
            )
            if decided is None:
                return False
            await write_final_standings(c, board, window_id, plan.final, plan.left_out)
            await write_window_frozen(c, board, window_id, now, plan.players, plan.final)
            return True

        return await self._run(run)

    # These two run on the writes' pool, with the freeze's other statements: a process that
    # only freezes and records opens no pool of reads on the home for them.

    async def decided(self, board: str, window_id: str) -> bool:
        """Whether the window is frozen here, not only fenced."""
        found = await self._run(
            lambda c: c.fetchval(
                "SELECT 1 FROM frozen_windows WHERE board = $1 AND window_id = $2 AND NOT fence",
                board,
                window_id,
            ),
            tx=False,
        )
        return found is not None

    async def decided_windows(self, board: str) -> dict[str, FrozenWindow]:
        """``frozen`` without the fences: the windows frozen here, by window id."""
        rows = await self._run(lambda c: c.fetch(f"{FROZEN} AND NOT fence", board), tx=False)
        return {r["window_id"]: frozen_of(r) for r in rows}


async def _freeze(c: Conn, spec: BoardSpec, window: Window, keep: int, now: float) -> bool:
    """Inside the caller's transaction, under the window's exclusive lock: execute
    ``plan_freeze``. False when the window was frozen already (exactly once)."""
    await lock_window(c, spec.name, window.id)
    done = await c.fetchval(
        "SELECT 1 FROM frozen_windows WHERE board = $1 AND window_id = $2", spec.name, window.id
    )
    if done:
        return False
    plan = plan_freeze(spec, window, *await freeze_rows(c, spec.name, window.id), keep)
    await c.execute(
        "INSERT INTO frozen_windows (board, window_id, frozen_at, players) VALUES ($1, $2, $3, $4)",
        spec.name,
        window.id,
        float(now),
        plan.players,
    )
    await write_final_standings(c, spec.name, window.id, plan.final, plan.left_out)
    await write_window_frozen(c, spec.name, window.id, now, plan.players, plan.final)
    return True


async def lock_window(c: Conn, board: str, window_id: str) -> None:
    """The window's exclusive lock, to the end of the caller's transaction."""
    await c.execute(
        "SELECT pg_advisory_xact_lock($1, $2)", locks.WINDOW_NS, locks.window_key(board, window_id)
    )


async def window_tallies(c: Conn, board: str, window_id: str) -> list[tuple[str, Tally]]:
    """Every player's tally in one window, as ``plan_freeze`` takes them."""
    rows = await c.fetch(
        "SELECT player_id, total, reached_at, version FROM tallies "
        "WHERE board = $1 AND window_id = $2",
        board,
        window_id,
    )
    return [(r["player_id"], tally_of(r)) for r in rows]


async def freeze_rows(
    c: Conn, board: str, window_id: str
) -> tuple[list[tuple[str, Tally]], set[str]]:
    """Every player's tally in one window, and which of them are banned: what a freeze
    plans from (``plan_freeze``), read in its transaction, under the window's lock."""
    rows = await c.fetch(
        "SELECT t.player_id, t.total, t.reached_at, t.version, "
        "EXISTS (SELECT 1 FROM bans b WHERE b.player_id = t.player_id) AS banned "
        "FROM tallies t WHERE t.board = $1 AND t.window_id = $2",
        board,
        window_id,
    )
    banned = {r["player_id"] for r in rows if r["banned"]}
    return [(r["player_id"], tally_of(r)) for r in rows], banned


async def write_final_standings(
    c: Conn, board: str, window_id: str, final: Sequence[FinalEntry], left_out: Sequence[str]
) -> None:
    """A freeze's final standings, and who it left out."""
    await c.execute(
        "INSERT INTO left_out (board, window_id, player_id) SELECT $1, $2, unnest($3::text[])",
        board,
        window_id,
        list(left_out),
    )
    await c.execute(
        f"INSERT INTO final_standings (board, window_id, {FINAL_COLS}) "
        "SELECT $1, $2, * FROM unnest($3::bigint[], $4::bigint[], $5::text[], $6::bigint[], "
        "$7::bigint[])",
        board,
        window_id,
        [e.position for e in final],
        [e.rank for e in final],
        [e.player_id for e in final],
        [e.points for e in final],
        [e.reached_at for e in final],
    )
