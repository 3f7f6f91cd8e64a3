"""Tournaments on Postgres: their definitions and entrants. A join holds the tournament's
row (``FOR UPDATE``) while it counts and inserts, so joins racing for the last place queue
one behind another and never overfill it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import asyncpg

from podium.domain.boards import Aggregate, Order, Ties
from podium.domain.tournaments import State, Tournament
from podium.ports.tournaments import Joined
from podium.store.common import tournament_state_sql
from podium.store.postgres.pool import Database

if TYPE_CHECKING:
    from podium.store.postgres.pool import Conn

COLS = (
    "id, title, modes, aggregate, sort_order, ties, starts_at, ends_at, join_required, "
    "max_entrants, max_attempts, category, metadata, created_at, ended_early, entrants, "
    "schedule, duration_s"
)
_ONE = f"SELECT {COLS} FROM tournaments WHERE id = $1"


def _tournament(r: asyncpg.Record) -> Tournament:
    return Tournament(
        r["id"],
        r["title"],
        tuple(r["modes"]),
        Aggregate(r["aggregate"]),
        Order(r["sort_order"]),
        Ties(r["ties"]),
        r["starts_at"],
        r["ends_at"],
        r["join_required"],
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


# The tournaments of a mode still taking results: a match's first read (held a second).
_LIVE = (
    f"SELECT {COLS} FROM tournaments WHERE ended_early IS NULL AND closes_at > $1 "
    "AND $2 = ANY(modes) ORDER BY starts_at, id"
)


class Tournaments(Database):
    def warm_statements(self, reads: bool) -> list[tuple[str, tuple[object, ...]]]:
        # ``live_tournaments``, on the reads' pool (``Database.warm_statements``).
        warm = super().warm_statements(reads)
        return [*warm, (_LIVE, (0, ""))] if reads else warm

    async def create_tournament(self, t: Tournament) -> tuple[Tournament, bool]:
        async def run(c: Conn) -> tuple[Tournament, bool]:
            inserted = await c.fetchval(
                "INSERT INTO tournaments (id, title, modes, aggregate, sort_order, ties, "
                "starts_at, ends_at, join_required, max_entrants, max_attempts, category, "
                "metadata, created_at, schedule, duration_s, closes_at) VALUES ($1, $2, $3, $4, "
                "$5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) "
                "ON CONFLICT (id) DO NOTHING RETURNING true",
                t.id, t.title, list(t.modes), t.aggregate.value, t.order.value, t.ties.value,
                t.starts_at, t.ends_at, t.join_required, t.max_entrants, t.max_attempts,
                t.category, t.metadata, float(t.created_at), t.schedule, t.duration_s,
                t.closes_at,
            )  # fmt: skip
            row = await c.fetchrow(_ONE, t.id)
            assert row is not None
            return _tournament(row), bool(inserted)

        return await self._run(run)

    async def tournament(self, tournament_id: str) -> Tournament | None:
        rows = await self._run(lambda c: c.fetch(_ONE, tournament_id), tx=False)
        return _tournament(rows[0]) if rows else None

    async def tournaments_page(
        self,
        after: tuple[int, str] | None,
        limit: int,
        category: str | None = None,
        state: State | None = None,
        now: float = 0.0,
    ) -> list[Tournament]:
        where: list[str] = []
        args: list[object] = []

        def arg(value: object) -> str:
            args.append(value)
            return f"${len(args)}"

        if after is not None:
            where.append(f"(starts_at, id) > ({arg(after[0])}::bigint, {arg(after[1])}::text)")
        if category is not None:
            where.append(f"category = {arg(category)}")
        if state is not None:
            where.append(tournament_state_sql(state, f"{arg(float(now))}::float8"))
        sql = (
            f"SELECT {COLS} FROM tournaments {'WHERE ' + ' AND '.join(where) if where else ''} "
            f"ORDER BY starts_at, id LIMIT {arg(limit)}"
        )
        return [_tournament(r) for r in await self._fetch(sql, *args)]

    async def live_tournaments(self, mode: str, now: float) -> list[Tournament]:
        # A whole second against the bigint column (closes_at is whole: > now is > its
        # floor), so that the partial index tournaments_live answers it.
        rows = await self._fetch(_LIVE, math.floor(now), mode)
        return [_tournament(r) for r in rows]

    async def unsettled_tournaments(self) -> list[Tournament]:
        rows = await self._fetch(
            f"SELECT {COLS} FROM tournaments WHERE settled_at IS NULL ORDER BY starts_at, id"
        )
        return [_tournament(r) for r in rows]

    async def settle_tournament(self, tournament_id: str, now: float) -> None:
        await self._execute(
            "UPDATE tournaments SET settled_at = coalesce(settled_at, $2) WHERE id = $1",
            tournament_id,
            float(now),
        )

    async def end_tournament(self, tournament_id: str, now: float) -> Tournament | None:
        sql = (
            "UPDATE tournaments SET ended_early = coalesce(ended_early, $2) WHERE id = $1 "
            f"RETURNING {COLS}"
        )
        rows = await self._run(lambda c: c.fetch(sql, tournament_id, float(now)), tx=False)
        return _tournament(rows[0]) if rows else None

    async def join_tournament(self, tournament_id: str, player_id: str, now: float) -> Joined:
        async def run(c: Conn) -> Joined:
            row = await c.fetchrow(_ONE + " FOR UPDATE", tournament_id)
            if row is None:
                return Joined.MISSING
            t = _tournament(row)
            there = await c.fetchval(
                "SELECT true FROM tournament_entrants WHERE tournament_id = $1 AND player_id = $2",
                tournament_id,
                player_id,
            )
            if there:
                return Joined.ALREADY
            if now >= t.end:
                return Joined.ENDED
            if t.max_entrants is not None and t.entrants >= t.max_entrants:
                return Joined.FULL
            await c.execute(
                "INSERT INTO tournament_entrants (tournament_id, player_id, joined_at) "
                "VALUES ($1, $2, $3)",
                tournament_id,
                player_id,
                float(now),
            )
            await c.execute(
                "UPDATE tournaments SET entrants = entrants + 1 WHERE id = $1", tournament_id
            )
            return Joined.JOINED

        return await self._run(run)

    async def remove_entrant(self, tournament_id: str, player_id: str) -> bool:
        async def run(c: Conn) -> bool:
            # The row first, as a join holds it: a join and a removal of the same player
            # queue one behind the other, so the count follows the entrants.
            if await c.fetchval(_ONE + " FOR UPDATE", tournament_id) is None:
                return False
            gone = await c.fetchval(
                "DELETE FROM tournament_entrants WHERE tournament_id = $1 AND player_id = $2 "
                "RETURNING true",
                tournament_id,
                player_id,
            )
            if gone:
                await c.execute(
                    "UPDATE tournaments SET entrants = entrants - 1 WHERE id = $1", tournament_id
                )
            return bool(gone)

        return await self._run(run)

    async def entrants(self, tournament_id: str, after: str, limit: int) -> list[tuple[str, float]]:
        rows = await self._fetch(
            "SELECT player_id, joined_at FROM tournament_entrants WHERE tournament_id = $1 "
            'AND player_id COLLATE "C" > $2 ORDER BY player_id COLLATE "C" LIMIT $3',
            tournament_id,
            after,
            limit,
        )
        return [(r["player_id"], r["joined_at"]) for r in rows]

    async def entrants_among(
        self, tournament_ids: Sequence[str], player_ids: Sequence[str]
    ) -> set[tuple[str, str]]:
        if not tournament_ids or not player_ids:
            return set()
        rows = await self._fetch(
            "SELECT tournament_id, player_id FROM tournament_entrants "
            "WHERE tournament_id = ANY($1::text[]) AND player_id = ANY($2::text[])",
            list(tournament_ids),
            list(player_ids),
        )
        return {(r["tournament_id"], r["player_id"]) for r in rows}
