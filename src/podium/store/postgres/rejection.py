"""A flagged result rejected on Postgres: the result marked, its tallies recounted and an
outbox row per recount, in one transaction (``domain/rejection.py`` decides). It queues on
the player's record lock, then takes its windows' locks shared, as a record does
(``locks.py``): no result of the player folds in meanwhile, and a freeze of one of its
windows comes wholly before or after it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from podium.domain.boards import BoardSpec
from podium.domain.models import Target
from podium.domain.rejection import Counted, check_reject, counted_in, frozen_keys, plan_reject
from podium.ports.store import Rejected
from podium.store.common import counted_of, moved_tally
from podium.store.postgres import locks
from podium.store.postgres.pool import Database

if TYPE_CHECKING:
    from podium.store.postgres.pool import Conn


class Rejections(Database):
    async def reject_flag(
        self,
        player_id: str,
        match_id: str,
        now: float,
        specs: Sequence[BoardSpec],
        preview: bool = False,
    ) -> Rejected:
        by_name = {s.name: s for s in specs}

        async def run(c: Conn) -> Rejected:
            await c.execute(
                "SELECT pg_advisory_xact_lock($1, $2)", locks.RECORD_NS, locks.player_key(player_id)
            )
            row = await c.fetchrow(
                "SELECT match_id, mode, points, ended_at, recorded_at, flag, metadata, "
                "accepted_at, rejected_at FROM results WHERE player_id = $1 AND match_id = $2 "
                "FOR UPDATE",
                player_id,
                match_id,
            )
            check_reject(
                player_id,
                match_id,
                row is not None,
                None if row is None else row["flag"],
                None if row is None else row["accepted_at"],
            )
            assert row is not None
            if row["rejected_at"] is not None:
                return Rejected(float(row["rejected_at"]), row["points"])
            result = counted_of(row)
            rows = await c.fetch(
                "SELECT board, window_id, total, reached_at, version, scored, metadata "
                "FROM tallies WHERE player_id = $1",
                player_id,
            )
            tallies = {(r["board"], r["window_id"]): moved_tally(r) for r in rows}
            hit = counted_in(result, by_name, sorted(tallies))
            frozen: set[tuple[str, str]] = set()
            others: list[Counted] = []
            if hit:
                for k in locks.window_locks([Target(b, w, 0) for b, w, _, _ in hit]):
                    await c.execute(
                        "SELECT pg_advisory_xact_lock_shared($1, $2)", locks.WINDOW_NS, k
                    )
                keys = list({k for b, w, _, _ in hit for k in frozen_keys(b, w)})
                found = await c.fetch(
                    "SELECT board, window_id FROM frozen_windows WHERE (board, window_id) IN "
                    "(SELECT * FROM unnest($1::text[], $2::text[]))",
                    [k[0] for k in keys],
                    [k[1] for k in keys],
                )
                frozen = {(r["board"], r["window_id"]) for r in found}
                others = [
                    counted_of(r)
                    for r in await c.fetch(
                        "SELECT match_id, mode, points, ended_at, recorded_at, metadata "
                        "FROM results WHERE player_id = $1 AND match_id <> $2 "
                        "AND ended_at >= $3 AND rejected_at IS NULL",
                        player_id,
                        match_id,
                        min(w.start for *_, w in hit),
                    )
                ]
            recounts = plan_reject(result, by_name, tallies, others, frozen)
            if preview:
                return Rejected(now, result.points, recounts, applied=False)
            for rc in recounts:
                at = (rc.board, rc.window, player_id)
                if rc.after is None:
                    await c.execute(
                        "DELETE FROM tallies WHERE board = $1 AND window_id = $2 "
                        "AND player_id = $3",
                        *at,
                    )
                    # The removal carries the next version: no older change lands under it.
                    t, removed, version = rc.before, True, rc.before.version + 1
                else:
                    t, removed, version = rc.after, False, rc.after.version
                    await c.execute(
                        "UPDATE tallies SET total = $4, reached_at = $5, version = $6, "
                        "scored = $7, metadata = $8 WHERE board = $1 AND window_id = $2 "
                        "AND player_id = $3",
                        *at,
                        t.total,
                        t.reached_at,
                        version,
                        t.scored,
                        t.metadata,
                    )
                await c.execute(
                    "INSERT INTO outbox (board, window_id, player_id, total, reached_at, "
                    "version, committed_at, removed, metadata, replaces) "
                    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, true)",
                    *at,
                    t.total,
                    t.reached_at,
                    version,
                    float(now),
                    removed,
                    t.metadata,
                )
            await c.execute(
                "UPDATE results SET rejected_at = $3 WHERE player_id = $1 AND match_id = $2",
                player_id,
                match_id,
                float(now),
            )
            return Rejected(float(now), result.points, recounts)

        return await self._run(run)
