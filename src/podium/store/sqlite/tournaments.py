"""Tournaments on SQLite: their definitions and entrants. The one writer serializes joins,
so a count and an insert in one write never overfill a tournament."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from podium.domain.boards import Aggregate, Order, Ties
from podium.domain.tournaments import State, Tournament
from podium.ports.tournaments import Joined
from podium.store.common import tournament_state_sql
from podium.store.sqlite.db import Database

COLS = (
    "id, title, modes, aggregate, sort_order, ties, starts_at, ends_at, join_required, "
    "max_entrants, max_attempts, category, metadata, created_at, ended_early, entrants, "
    "schedule, duration_s"
)


def _tournament(r: Any) -> Tournament:
    return Tournament(
        r["id"],
        r["title"],
        tuple(m for m in r["modes"].split(",") if m),
        Aggregate(r["aggregate"]),
        Order(r["sort_order"]),
        Ties(r["ties"]),
        r["starts_at"],
        r["ends_at"],
        bool(r["join_required"]),
        r["max_entrants"],
        r["max_attempts"],
        r["category"],
        r["metadata"],
        r["created_at"],
        r["ended_early"],
        r["entrants"],
        r["schedule"],
        r["duration_s"],
    )


def _one(c: sqlite3.Connection, tournament_id: str) -> Tournament | None:
    r = c.execute(f"SELECT {COLS} FROM tournaments WHERE id = ?", (tournament_id,)).fetchone()
    return None if r is None else _tournament(r)


class Tournaments(Database):
    async def create_tournament(self, t: Tournament) -> tuple[Tournament, bool]:
        row = (
            t.id, t.title, ",".join(t.modes), t.aggregate.value, t.order.value, t.ties.value,
            t.starts_at, t.ends_at, int(t.join_required), t.max_entrants, t.max_attempts,
            t.category, t.metadata, t.created_at, t.schedule, t.duration_s, t.closes_at,
        )  # fmt: skip

        def run(c: sqlite3.Connection) -> tuple[Tournament, bool]:
            cur = c.execute(
                "INSERT OR IGNORE INTO tournaments (id, title, modes, aggregate, sort_order, "
                "ties, starts_at, ends_at, join_required, max_entrants, max_attempts, category, "
                "metadata, created_at, schedule, duration_s, closes_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            stored = _one(c, t.id)
            assert stored is not None
            return stored, cur.rowcount == 1

        return await self._write(run)

    async def tournament(self, tournament_id: str) -> Tournament | None:
        return await self._read(lambda c: _one(c, tournament_id))

    async def tournaments_page(
        self,
        after: tuple[int, str] | None,
        limit: int,
        category: str | None = None,
        state: State | None = None,
        now: float = 0.0,
    ) -> list[Tournament]:
        where: list[str] = []
        args: dict[str, object] = {"limit": limit, "now": now}
        if after is not None:
            where.append("(starts_at, id) > (:start, :id)")
            args |= {"start": after[0], "id": after[1]}
        if category is not None:
            where.append("category = :category")
            args["category"] = category
        if state is not None:
            where.append(tournament_state_sql(state, ":now"))
        sql = (
            f"SELECT {COLS} FROM tournaments {'WHERE ' + ' AND '.join(where) if where else ''} "
            "ORDER BY starts_at, id LIMIT :limit"
        )
        rows = await self._read(lambda c: c.execute(sql, args).fetchall())
        return [_tournament(r) for r in rows]

    async def live_tournaments(self, mode: str, now: float) -> list[Tournament]:
        rows = await self._read(
            lambda c: c.execute(
                f"SELECT {COLS} FROM tournaments INDEXED BY tournaments_live "
                "WHERE ended_early IS NULL AND closes_at > ? "
                "AND instr(',' || modes || ',', ',' || ? || ',') > 0 ORDER BY starts_at, id",
                (now, mode),
            ).fetchall()
        )
        return [_tournament(r) for r in rows]

    async def unsettled_tournaments(self) -> list[Tournament]:
        rows = await self._read(
            lambda c: c.execute(
                f"SELECT {COLS} FROM tournaments INDEXED BY tournaments_unsettled "
                "WHERE settled_at IS NULL ORDER BY starts_at, id"
            ).fetchall()
        )
        return [_tournament(r) for r in rows]

    async def settle_tournament(self, tournament_id: str, now: float) -> None:
        await self._write(
            lambda c: c.execute(
                "UPDATE tournaments SET settled_at = coalesce(settled_at, ?) WHERE id = ?",
                (now, tournament_id),
            )
        )

    async def end_tournament(self, tournament_id: str, now: float) -> Tournament | None:
        def run(c: sqlite3.Connection) -> Tournament | None:
            c.execute(
                "UPDATE tournaments SET ended_early = coalesce(ended_early, ?) WHERE id = ?",
                (now, tournament_id),
            )
            return _one(c, tournament_id)

        return await self._write(run)

    async def join_tournament(self, tournament_id: str, player_id: str, now: float) -> Joined:
        def run(c: sqlite3.Connection) -> Joined:
            t = _one(c, tournament_id)
            if t is None:
                return Joined.MISSING
            there = c.execute(
                "SELECT 1 FROM tournament_entrants WHERE tournament_id = ? AND player_id = ?",
                (tournament_id, player_id),
            ).fetchone()
            if there is not None:
                return Joined.ALREADY
            if now >= t.end:
                return Joined.ENDED
            if t.max_entrants is not None and t.entrants >= t.max_entrants:
                return Joined.FULL
            c.execute(
                "INSERT INTO tournament_entrants (tournament_id, player_id, joined_at) "
                "VALUES (?, ?, ?)",
                (tournament_id, player_id, now),
            )
            c.execute(
                "UPDATE tournaments SET entrants = entrants + 1 WHERE id = ?", (tournament_id,)
            )
            return Joined.JOINED

        return await self._write(run)

    async def remove_entrant(self, tournament_id: str, player_id: str) -> bool:
        def run(c: sqlite3.Connection) -> bool:
            gone = c.execute(
                "DELETE FROM tournament_entrants WHERE tournament_id = ? AND player_id = ?",
                (tournament_id, player_id),
            ).rowcount
            if gone:
                c.execute(
                    "UPDATE tournaments SET entrants = entrants - 1 WHERE id = ?", (tournament_id,)
                )
            return bool(gone)

        return await self._write(run)

    async def entrants(self, tournament_id: str, after: str, limit: int) -> list[tuple[str, float]]:
        rows = await self._read(
            lambda c: c.execute(
                "SELECT player_id, joined_at FROM tournament_entrants "
                "WHERE tournament_id = ? AND player_id > ? ORDER BY player_id LIMIT ?",
                (tournament_id, after, limit),
            ).fetchall()
        )
        return [(r["player_id"], r["joined_at"]) for r in rows]

    async def entrants_among(
        self, tournament_ids: Sequence[str], player_ids: Sequence[str]
    ) -> set[tuple[str, str]]:
        if not tournament_ids or not player_ids:
            return set()
        ts, ps = list(tournament_ids), list(player_ids)

        def run(c: sqlite3.Connection) -> set[tuple[str, str]]:
            rows = c.execute(
                "SELECT tournament_id, player_id FROM tournament_entrants "
                f"WHERE tournament_id IN ({','.join('?' * len(ts))}) "
                f"AND player_id IN ({','.join('?' * len(ps))})",
                (*ts, *ps),
            ).fetchall()
            return {(r["tournament_id"], r["player_id"]) for r in rows}

        return await self._read(run)
