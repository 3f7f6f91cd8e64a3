"""A flagged result rejected on SQLite: the result marked, its tallies recounted and an
outbox row per recount, in one transaction (``domain/rejection.py`` decides)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from podium.domain.boards import BoardSpec
from podium.domain.rejection import Counted, check_reject, counted_in, frozen_keys, plan_reject
from podium.ports.store import Rejected
from podium.store.common import counted_of, moved_tally
from podium.store.sqlite.db import Database

_RESULT = (
    "SELECT match_id, mode, points, ended_at, recorded_at, flag, metadata, accepted_at, "
    "rejected_at FROM results WHERE player_id = ? AND match_id = ?"
)


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

        def run(c: sqlite3.Connection) -> Rejected:
            row = c.execute(_RESULT, (player_id, match_id)).fetchone()
            check_reject(
                player_id,
                match_id,
                row is not None,
                None if row is None else row["flag"],
                None if row is None else row["accepted_at"],
            )
            if row["rejected_at"] is not None:
                return Rejected(float(row["rejected_at"]), row["points"])
            result = counted_of(row)
            tallies = {
                (r["board"], r["window_id"]): moved_tally(r)
                for r in c.execute(
                    "SELECT board, window_id, total, reached_at, version, scored, metadata "
                    "FROM tallies WHERE player_id = ?",
                    (player_id,),
                )
            }
            hit = counted_in(result, by_name, sorted(tallies))
            frozen: set[tuple[str, str]] = set()
            others: list[Counted] = []
            if hit:
                for b, w, _, _ in hit:
                    for key in frozen_keys(b, w):
                        if c.execute(
                            "SELECT 1 FROM frozen_windows WHERE board = ? AND window_id = ?", key
                        ).fetchone():
                            frozen.add(key)
                start = min(w.start for *_, w in hit)
                others = [
                    counted_of(r)
                    for r in c.execute(
                        "SELECT match_id, mode, points, ended_at, recorded_at, metadata "
                        "FROM results WHERE player_id = ? AND match_id <> ? AND ended_at >= ? "
                        "AND rejected_at IS NULL",
                        (player_id, match_id, start),
                    )
                ]
            recounts = plan_reject(result, by_name, tallies, others, frozen)
            if preview:
                return Rejected(now, result.points, recounts, applied=False)
            for rc in recounts:
                at = (rc.board, rc.window, player_id)
                if rc.after is None:
                    c.execute(
                        "DELETE FROM tallies WHERE board = ? AND window_id = ? AND player_id = ?",
                        at,
                    )
                    # The removal carries the next version: no older change lands under it.
                    t, removed = rc.before, 1
                    version = rc.before.version + 1
                else:
                    t, removed, version = rc.after, 0, rc.after.version
                    c.execute(
                        "UPDATE tallies SET total = ?, reached_at = ?, version = ?, scored = ?, "
                        "metadata = ? WHERE board = ? AND window_id = ? AND player_id = ?",
                        (t.total, t.reached_at, version, int(t.scored), t.metadata, *at),
                    )
                c.execute(
                    "INSERT INTO outbox (board, window_id, player_id, total, reached_at, "
                    "version, committed_at, removed, metadata, replaces) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
                    (*at, t.total, t.reached_at, version, now, removed, t.metadata),
                )
            c.execute(
                "UPDATE results SET rejected_at = ? WHERE player_id = ? AND match_id = ?",
                (now, player_id, match_id),
            )
            return Rejected(now, result.points, recounts)

        return await self._write(run)
