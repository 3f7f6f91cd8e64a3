"""The life of a window on SQLite: freezing, final standings, the archive record.

Plain functions on a connection, run by ``SqliteStore`` on its writer or reader thread.
SQLite has one writer, so a freeze and a result can never interleave: whichever commits
first decides, and ``record`` checks ``frozen_windows`` inside its own transaction.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from podium.domain.boards import BoardSpec, Tally, rank_standings
from podium.domain.models import FinalEntry, FrozenWindow
from podium.domain.windows import Window

_FINAL_COLS = "position, rank, player_id, points, reached_at"


def freeze(c: sqlite3.Connection, spec: BoardSpec, window: Window, keep: int, now: float) -> bool:
    """Inside the caller's write transaction: mark the window frozen and store its first
    ``keep`` places. False when it was frozen already (exactly once, across restarts)."""
    if c.execute(
        "SELECT 1 FROM frozen_windows WHERE board = ? AND window_id = ?", (spec.name, window.id)
    ).fetchone():
        return False
    rows = c.execute(
        "SELECT player_id, total, reached_at, version FROM tallies "
        "WHERE board = ? AND window_id = ?",
        (spec.name, window.id),
    ).fetchall()
    ranked = rank_standings(spec, window, [(r[0], Tally(r[1], r[2], r[3])) for r in rows])
    c.execute(
        "INSERT INTO frozen_windows (board, window_id, frozen_at, players) VALUES (?, ?, ?, ?)",
        (spec.name, window.id, now, len(ranked)),
    )
    c.executemany(
        f"INSERT INTO final_standings (board, window_id, {_FINAL_COLS}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (spec.name, window.id, pos, rank, p, t.total, t.reached_at)
            for pos, rank, p, t in ranked[:keep]
        ],
    )
    return True


def frozen(c: sqlite3.Connection, board: str) -> dict[str, FrozenWindow]:
    rows = c.execute(
        "SELECT board, window_id, frozen_at, players, checksum, archive FROM frozen_windows "
        "WHERE board = ?",
        (board,),
    ).fetchall()
    return {r[1]: FrozenWindow(*r) for r in rows}


def final_page(
    c: sqlite3.Connection, board: str, window: str, first: int, last: int
) -> list[FinalEntry]:
    rows = c.execute(
        f"SELECT {_FINAL_COLS} FROM final_standings WHERE board = ? AND window_id = ? "
        "AND position BETWEEN ? AND ? ORDER BY position",
        (board, window, first, last),
    ).fetchall()
    return [_entry(r) for r in rows]


def final_entry(c: sqlite3.Connection, board: str, window: str, player: str) -> FinalEntry | None:
    row = c.execute(
        f"SELECT {_FINAL_COLS} FROM final_standings "
        "WHERE board = ? AND window_id = ? AND player_id = ?",
        (board, window, player),
    ).fetchone()
    return None if row is None else _entry(row)


def set_archive(
    c: sqlite3.Connection, board: str, window: str, archive: str, checksum: str
) -> None:
    c.execute(
        "UPDATE frozen_windows SET archive = ?, checksum = ? WHERE board = ? AND window_id = ?",
        (archive, checksum, board, window),
    )


def _entry(r: Any) -> FinalEntry:
    return FinalEntry(*r)
