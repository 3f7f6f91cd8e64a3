"""The life of a window on Postgres: freezing, final standings, the archive record.

Plain functions on a connection, run by ``PostgresStore`` inside its transactions. A freeze
takes the window's advisory lock exclusively; every record transaction takes it shared
before checking ``frozen_windows``. So a result either commits before the freeze reads the
tallies (and is in the final standings) or sees the window frozen (and does not count for
it): nothing changes a window after its standings are taken. On a grouped board the lock is
the base window's (``postgres.window_key``), shared by all its groups: a record takes it
before it knows the player's group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from podium.domain.boards import BoardSpec, Tally, rank_standings
from podium.domain.models import FinalEntry, FrozenWindow
from podium.domain.windows import Window

if TYPE_CHECKING:
    from podium.store.postgres import Conn

_FINAL_COLS = "position, rank, player_id, points, reached_at"


async def freeze(
    c: Conn, spec: BoardSpec, window: Window, keep: int, now: float, lock: tuple[int, int]
) -> bool:
    await c.execute("SELECT pg_advisory_xact_lock($1, $2)", *lock)
    done = await c.fetchval(
        "SELECT 1 FROM frozen_windows WHERE board = $1 AND window_id = $2", spec.name, window.id
    )
    if done:
        return False
    rows = await c.fetch(
        "SELECT player_id, total, reached_at, version FROM tallies "
        "WHERE board = $1 AND window_id = $2",
        spec.name,
        window.id,
    )
    ranked = rank_standings(spec, window, [(r[0], Tally(r[1], r[2], r[3])) for r in rows])
    await c.execute(
        "INSERT INTO frozen_windows (board, window_id, frozen_at, players) VALUES ($1, $2, $3, $4)",
        spec.name,
        window.id,
        float(now),
        len(ranked),
    )
    top = ranked[:keep]
    await c.execute(
        f"INSERT INTO final_standings (board, window_id, {_FINAL_COLS}) "
        "SELECT $1, $2, * FROM unnest($3::bigint[], $4::bigint[], $5::text[], $6::bigint[], "
        "$7::bigint[])",
        spec.name,
        window.id,
        [pos for pos, _, _, _ in top],
        [rank for _, rank, _, _ in top],
        [p for _, _, p, _ in top],
        [t.total for _, _, _, t in top],
        [t.reached_at for _, _, _, t in top],
    )
    return True


async def frozen(c: Conn, board: str) -> dict[str, FrozenWindow]:
    rows = await c.fetch(
        "SELECT board, window_id, frozen_at, players, checksum, archive FROM frozen_windows "
        "WHERE board = $1",
        board,
    )
    return {r[1]: FrozenWindow(*r) for r in rows}


async def final_page(c: Conn, board: str, window: str, first: int, last: int) -> list[FinalEntry]:
    rows = await c.fetch(
        f"SELECT {_FINAL_COLS} FROM final_standings WHERE board = $1 AND window_id = $2 "
        "AND position BETWEEN $3 AND $4 ORDER BY position",
        board,
        window,
        first,
        last,
    )
    return [FinalEntry(*r) for r in rows]


async def final_entry(c: Conn, board: str, window: str, player: str) -> FinalEntry | None:
    row = await c.fetchrow(
        f"SELECT {_FINAL_COLS} FROM final_standings "
        "WHERE board = $1 AND window_id = $2 AND player_id = $3",
        board,
        window,
        player,
    )
    return None if row is None else FinalEntry(*row)


async def set_archive(c: Conn, board: str, window: str, archive: str, checksum: str) -> None:
    await c.execute(
        "UPDATE frozen_windows SET archive = $3, checksum = $4 WHERE board = $1 AND window_id = $2",
        board,
        window,
        archive,
        checksum,
    )
