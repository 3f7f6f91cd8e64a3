"""Players on SQLite: profiles (with the move between groups a new country brings), friends
and bans."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from podium.domain.models import Profile, Target
from podium.domain.plans import group_pattern, moves_group, plan_group_moves
from podium.domain.rejection import check_accept
from podium.ports.store import BanRecord, PlayerResult
from podium.store.common import (
    PLAYER_RESULT_COLS,
    PROFILE_COLS,
    ProfilesFromVersions,
    like_escaped,
    moved_tally,
    player_result_of,
    profile_of,
)
from podium.store.sqlite.db import Database
from podium.store.sqlite.outbox import write_changes, write_profile_change
from podium.store.sqlite.record import frozen_among


class Players(ProfilesFromVersions, Database):
    async def set_profile(self, profile: Profile, now: float) -> int:
        pid = profile.player_id

        def run(c: sqlite3.Connection) -> int:
            before = c.execute("SELECT country FROM profiles WHERE player_id = ?", (pid,))
            row = before.fetchone()
            c.execute(
                "INSERT INTO profiles (player_id, name, avatar, country, version) "
                "VALUES (?, ?, ?, ?, 1) "
                "ON CONFLICT (player_id) DO UPDATE SET name = excluded.name, "
                "avatar = excluded.avatar, country = excluded.country, "
                "version = profiles.version + 1",
                (pid, profile.name, profile.avatar, profile.country),
            )
            version: int = c.execute(
                "SELECT version FROM profiles WHERE player_id = ?", (pid,)
            ).fetchone()["version"]
            write_profile_change(c, pid, version, now)
            old = row["country"] if row else None
            if moves_group(old, profile.country):
                _move_groups(c, pid, old, profile.country, now)
            return version

        return await self._write(run)

    async def versioned_profiles(self, player_ids: Sequence[str]) -> dict[str, tuple[Profile, int]]:
        ids = list(player_ids)
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = await self._read(
            lambda c: c.execute(
                f"SELECT {PROFILE_COLS} FROM profiles WHERE player_id IN ({marks})", ids
            ).fetchall()
        )
        return {r["player_id"]: profile_of(r) for r in rows}

    async def all_profiles(self, after: str, limit: int) -> list[tuple[Profile, int]]:
        def read(c: sqlite3.Connection) -> list[tuple[str, str, str, str, int]]:
            cur = c.cursor()
            # Tuples, read by position: a start copies every profile (a million), and
            # reading each sqlite3.Row by name was half of that copy (BENCHMARKS.md, issue 23).
            cur.row_factory = None
            rows: list[tuple[str, str, str, str, int]] = cur.execute(
                f"SELECT {PROFILE_COLS} FROM profiles WHERE player_id > ? "
                "ORDER BY player_id LIMIT ?",
                (after, limit),
            ).fetchall()
            return rows

        return [(Profile(p, n, a, c), v) for p, n, a, c, v in await self._read(read)]

    async def set_friends(self, player_id: str, friends: Sequence[str]) -> None:
        def run(c: sqlite3.Connection) -> None:
            c.execute("DELETE FROM friends WHERE player_id = ?", (player_id,))
            c.executemany(
                "INSERT OR IGNORE INTO friends VALUES (?, ?)", [(player_id, f) for f in friends]
            )

        await self._write(run)

    async def friends(self, player_id: str) -> list[str]:
        rows = await self._read(
            lambda c: c.execute(
                "SELECT friend_id FROM friends WHERE player_id = ? ORDER BY friend_id", (player_id,)
            ).fetchall()
        )
        return [r["friend_id"] for r in rows]

    async def ban(self, player_id: str, reason: str, now: float) -> None:
        await self._write(
            lambda c: c.execute(
                "INSERT INTO bans VALUES (?, ?, ?) ON CONFLICT (player_id) DO UPDATE SET "
                "reason = excluded.reason",
                (player_id, reason, now),
            )
        )

    async def unban(self, player_id: str) -> bool:
        return await self._write(
            lambda c: c.execute("DELETE FROM bans WHERE player_id = ?", (player_id,)).rowcount > 0
        )

    async def banned(self, player_ids: Sequence[str]) -> set[str]:
        ids = list(set(player_ids))
        if not ids:
            return set()
        marks = ",".join("?" * len(ids))
        rows = await self._read(
            lambda c: c.execute(f"SELECT player_id FROM bans WHERE player_id IN ({marks})", ids)
        )
        return {r["player_id"] for r in rows}

    async def every_ban(self) -> set[str]:
        rows = await self._read(lambda c: c.execute("SELECT player_id FROM bans").fetchall())
        return {r["player_id"] for r in rows}

    # The admin's reads (ports.store.Moderation).

    async def find_players(self, text: str, limit: int) -> list[Profile]:
        # SQLite's lower() folds ASCII only, as the port promises.
        like = like_escaped(text)
        rows = await self._read(
            lambda c: c.execute(
                f"SELECT {PROFILE_COLS} FROM profiles WHERE lower(player_id) LIKE ? ESCAPE '\\' "
                "OR lower(name) LIKE ? ESCAPE '\\' ORDER BY player_id LIMIT ?",
                (f"{like}%", f"%{like}%", limit),
            ).fetchall()
        )
        return [profile_of(r)[0] for r in rows]

    async def recent_results(self, player_id: str, limit: int) -> list[PlayerResult]:
        rows = await self._read(
            lambda c: c.execute(
                f"SELECT {PLAYER_RESULT_COLS} FROM results WHERE player_id = ? "
                "ORDER BY recorded_at DESC, match_id LIMIT ?",
                (player_id, limit),
            ).fetchall()
        )
        return [player_result_of(r) for r in rows]

    async def ban_of(self, player_id: str) -> BanRecord | None:
        row = await self._read(
            lambda c: c.execute(
                "SELECT reason, banned_at FROM bans WHERE player_id = ?", (player_id,)
            ).fetchone()
        )
        return None if row is None else BanRecord(row["reason"], row["banned_at"])

    async def accept_flag(self, player_id: str, match_id: str, now: float) -> float | None:
        def run(c: sqlite3.Connection) -> float | None:
            key = (player_id, match_id)
            c.execute(
                "UPDATE results SET accepted_at = ? WHERE player_id = ? AND match_id = ? "
                "AND flag IS NOT NULL AND accepted_at IS NULL AND rejected_at IS NULL",
                (now, *key),
            )
            row = c.execute(
                "SELECT accepted_at, rejected_at FROM results WHERE player_id = ? "
                "AND match_id = ? AND flag IS NOT NULL",
                key,
            ).fetchone()
            if row is None:
                return None
            check_accept(player_id, match_id, row["rejected_at"])
            return float(row["accepted_at"])

        return await self._write(run)


def _move_groups(
    c: sqlite3.Connection, player_id: str, old: str | None, new: str | None, now: float
) -> None:
    """Inside ``set_profile``'s transaction: execute ``plan_group_moves``."""
    rows = c.execute(
        "SELECT board, window_id, total, reached_at, version, scored, metadata FROM tallies "
        "WHERE player_id = ? AND window_id LIKE ?",
        (player_id, group_pattern(old)),
    ).fetchall()
    held = [(r["board"], r["window_id"], moved_tally(r)) for r in rows]
    frozen = frozen_among(c, [Target(b, w, 0) for b, w, _ in held])
    moves = plan_group_moves([h for h in held if (h[0], h[1]) not in frozen], new)
    for m in moves:
        t = m.tally
        c.execute(
            "DELETE FROM tallies WHERE board = ? AND window_id = ? AND player_id = ?",
            (m.board, m.old_window, player_id),
        )
        c.execute(
            "INSERT INTO tallies (board, window_id, player_id, total, reached_at, version, "
            "scored, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                m.board,
                m.new_window,
                player_id,
                t.total,
                t.reached_at,
                t.version,
                int(t.scored),
                t.metadata,
            ),
        )
        write_changes(
            c,
            [
                (m.board, m.old_window, player_id, t, True),
                (m.board, m.new_window, player_id, t, False),
            ],
            now,
        )
