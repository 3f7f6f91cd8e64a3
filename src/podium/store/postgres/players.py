"""Players on Postgres: profiles (with the move between groups a new country brings), friends
and bans."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from podium.domain.models import PROFILE_CHANGE, Profile
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
from podium.store.postgres import locks
from podium.store.postgres.pool import Database, rowcount

if TYPE_CHECKING:
    from podium.store.postgres.pool import Conn

_OUTBOX_ROW = (
    "INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, "
    "committed_at, removed, metadata) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
)


class Players(ProfilesFromVersions, Database):
    async def set_profile(self, profile: Profile, now: float) -> int:
        pid = profile.player_id

        async def run(c: Conn) -> int:
            # The record lock: no result folds into the old group while the player moves.
            # It also orders two changes of one profile, so versions follow commit order.
            await c.execute(
                "SELECT pg_advisory_xact_lock($1, $2)", locks.RECORD_NS, locks.player_key(pid)
            )
            before = await c.fetchval("SELECT country FROM profiles WHERE player_id = $1", pid)
            version: int = await c.fetchval(
                "INSERT INTO profiles (player_id, name, avatar, country, version) "
                "VALUES ($1, $2, $3, $4, 1) "
                "ON CONFLICT (player_id) DO UPDATE SET name = excluded.name, "
                "avatar = excluded.avatar, country = excluded.country, "
                "version = profiles.version + 1 RETURNING version",
                pid,
                profile.name,
                profile.avatar,
                profile.country,
            )
            await c.execute(
                _OUTBOX_ROW, PROFILE_CHANGE, "", pid, 0, 0, version, float(now), False, None
            )
            if moves_group(before, profile.country):
                await _move_groups(c, pid, before, profile.country, now)
            return version

        return await self._run(run)

    async def versioned_profiles(self, player_ids: Sequence[str]) -> dict[str, tuple[Profile, int]]:
        ids = list(player_ids)
        if not ids:
            return {}
        rows = await self._fetch(
            f"SELECT {PROFILE_COLS} FROM profiles WHERE player_id = ANY($1::text[])", ids
        )
        return {r["player_id"]: profile_of(r) for r in rows}

    async def all_profiles(self, after: str, limit: int) -> list[tuple[Profile, int]]:
        rows = await self._fetch(
            f"SELECT {PROFILE_COLS} FROM profiles WHERE player_id > $1 ORDER BY player_id LIMIT $2",
            after,
            limit,
        )
        return [profile_of(r) for r in rows]

    async def set_friends(self, player_id: str, friends: Sequence[str]) -> None:
        async def run(c: Conn) -> None:
            # Without the lock two concurrent replacements would both delete the old list
            # and leave the union of the new ones; with it, the last one wins, as on SQLite.
            await c.execute(
                "SELECT pg_advisory_xact_lock($1, $2)",
                locks.FRIENDS_NS,
                locks.player_key(player_id),
            )
            await c.execute("DELETE FROM friends WHERE player_id = $1", player_id)
            await c.execute(
                "INSERT INTO friends SELECT $1, f FROM unnest($2::text[]) AS f "
                "ON CONFLICT DO NOTHING",
                player_id,
                list(friends),
            )

        await self._run(run)

    async def friends(self, player_id: str) -> list[str]:
        rows = await self._fetch(
            "SELECT friend_id FROM friends WHERE player_id = $1 ORDER BY friend_id", player_id
        )
        return [r["friend_id"] for r in rows]

    async def ban(self, player_id: str, reason: str, now: float) -> None:
        await self._execute(
            "INSERT INTO bans VALUES ($1, $2, $3) ON CONFLICT (player_id) DO UPDATE SET "
            "reason = excluded.reason",
            player_id,
            reason,
            float(now),
        )

    async def unban(self, player_id: str) -> bool:
        status = await self._execute("DELETE FROM bans WHERE player_id = $1", player_id)
        return rowcount(status) > 0

    async def banned(self, player_ids: Sequence[str]) -> set[str]:
        ids = list(set(player_ids))
        if not ids:
            return set()
        rows = await self._fetch(
            "SELECT player_id FROM bans WHERE player_id = ANY($1::text[])", ids
        )
        return {r["player_id"] for r in rows}

    async def every_ban(self) -> set[str]:
        return {r["player_id"] for r in await self._fetch("SELECT player_id FROM bans")}

    # The admin's reads (ports.store.Moderation).

    async def find_players(self, text: str, limit: int) -> list[Profile]:
        like = like_escaped(text)
        rows = await self._fetch(
            f"SELECT {PROFILE_COLS} FROM profiles WHERE lower(player_id) LIKE $1 ESCAPE '\\' "
            "OR lower(name) LIKE $2 ESCAPE '\\' ORDER BY player_id COLLATE \"C\" LIMIT $3",
            f"{like}%",
            f"%{like}%",
            limit,
        )
        return [profile_of(r)[0] for r in rows]

    async def recent_results(self, player_id: str, limit: int) -> list[PlayerResult]:
        rows = await self._fetch(
            f"SELECT {PLAYER_RESULT_COLS} FROM results WHERE player_id = $1 "
            'ORDER BY recorded_at DESC, match_id COLLATE "C" LIMIT $2',
            player_id,
            limit,
        )
        return [player_result_of(r) for r in rows]

    async def ban_of(self, player_id: str) -> BanRecord | None:
        rows = await self._fetch(
            "SELECT reason, banned_at FROM bans WHERE player_id = $1", player_id
        )
        return BanRecord(rows[0]["reason"], rows[0]["banned_at"]) if rows else None

    async def accept_flag(self, player_id: str, match_id: str, now: float) -> float | None:
        # One statement: the first accept's time stays (COALESCE), a result never flagged
        # or absent answers no row; a rejected one keeps none, and is refused.
        sql = (
            "UPDATE results SET accepted_at = CASE WHEN rejected_at IS NULL "
            "THEN COALESCE(accepted_at, $3) END "
            "WHERE player_id = $1 AND match_id = $2 AND flag IS NOT NULL "
            "RETURNING accepted_at, rejected_at"
        )
        rows = await self._run(lambda c: c.fetch(sql, player_id, match_id, float(now)), tx=False)
        if not rows:
            return None
        check_accept(player_id, match_id, rows[0]["rejected_at"])
        return float(rows[0]["accepted_at"])


async def _move_groups(
    c: Conn, player_id: str, old: str | None, new: str | None, now: float
) -> None:
    """Inside ``set_profile``'s transaction, under the record lock: execute
    ``plan_group_moves`` on the player's open grouped tallies (final standings do not move)."""
    rows = await c.fetch(
        "SELECT t.board, t.window_id, t.total, t.reached_at, t.version, t.scored, t.metadata "
        "FROM tallies t "
        "WHERE t.player_id = $1 AND t.window_id LIKE $2 AND NOT EXISTS (SELECT 1 FROM "
        "frozen_windows f WHERE f.board = t.board AND f.window_id = t.window_id) FOR UPDATE",
        player_id,
        group_pattern(old),
    )
    moves = plan_group_moves([(r["board"], r["window_id"], moved_tally(r)) for r in rows], new)
    for m in moves:
        t = m.tally
        await c.execute(
            "DELETE FROM tallies WHERE board = $1 AND window_id = $2 AND player_id = $3",
            m.board,
            m.old_window,
            player_id,
        )
        await c.execute(
            "INSERT INTO tallies (board, window_id, player_id, total, reached_at, version, scored, "
            "metadata) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            m.board,
            m.new_window,
            player_id,
            t.total,
            t.reached_at,
            t.version,
            t.scored,
            t.metadata,
        )
        values = (t.total, t.reached_at, t.version, float(now))
        await c.executemany(
            _OUTBOX_ROW,
            [
                (m.board, m.old_window, player_id, *values, True, t.metadata),
                (m.board, m.new_window, player_id, *values, False, t.metadata),
            ],
        )
