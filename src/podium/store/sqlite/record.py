"""Results on SQLite: claiming a match, the checks' read, and one player's record.

A record reads its state (``recording.RecordState``) inside its write transaction, which
SQLite's single writer serializes, lets ``recording.plan_record`` decide, and writes the
plan. The handle ``open_match`` returns is the same state read before the transaction; a
local read is as cheap as checking it, so the record always reads again and only reports
(``reread``) whether the handle was out of date, as the Postgres store does when it writes
from it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from podium.domain.boards import BoardSpec, Tally
from podium.domain.cohorts import pending_tier
from podium.domain.models import (
    Flagged,
    MatchQuery,
    RecordOutcome,
    ResultRecord,
    Standing,
    Target,
)
from podium.domain.recording import HOUR, RecordState, place_in_groups, plan_record
from podium.errors import Forbidden
from podium.ports.store import MatchFacts, MatchRead, RecordHandle
from podium.store.common import (
    FLAGGED_COLS,
    RESULT_COLS,
    TALLY_COLS,
    Seen,
    flagged_of,
    result_of,
    standing_of,
    tally_columns,
)
from podium.store.sqlite.cohorts import place
from podium.store.sqlite.db import Database
from podium.store.sqlite.outbox import write_changes


class Results(Database):
    async def open_match(self, query: MatchQuery) -> MatchRead:
        q = query

        def claim(c: sqlite3.Connection) -> tuple[str, bool, MatchFacts | None, float]:
            made = c.execute(
                "INSERT OR IGNORE INTO matches "
                "(match_id, key_id, recorded_at, mode, ended_at, duration_s) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (q.match_id, q.key_id, q.now, q.mode, q.ended_at, q.duration_s),
            ).rowcount
            row = c.execute(
                "SELECT key_id, recorded_at, mode, ended_at, duration_s FROM matches "
                "WHERE match_id = ?",
                (q.match_id,),
            ).fetchone()
            cols = (row["mode"], row["ended_at"], row["duration_s"])
            facts = None if None in cols else MatchFacts(*cols)
            return str(row["key_id"]), made == 1, facts, float(row["recorded_at"])

        owner, claimed, facts, claimed_at = await self._write(claim)
        ids = list(q.player_ids)

        def read(c: sqlite3.Connection) -> MatchRead:
            existing = _existing(c, q.match_id, ids) if ids else {}
            counts = _since(c, ids, q.mode, q.since) if ids and q.since is not None else {}
            handles: dict[str, RecordHandle] = {}
            if q.targets:
                for p in ids:
                    if p not in existing:
                        count, oldest = counts.get(p, (0, None))
                        handles[p] = _seen(c, p, q.targets, count, oldest)
            recent_points = _recent(c, ids, q.mode, q.recent)
            return MatchRead(
                owner, existing, recent_points, counts, handles, claimed, facts, claimed_at
            )

        return await self._read(read)

    async def release_match(self, match_id: str, key_id: str, claimed_at: float) -> bool:
        def run(c: sqlite3.Connection) -> bool:
            gone = c.execute(
                "DELETE FROM matches WHERE match_id = ? AND key_id = ? AND recorded_at = ? "
                "AND NOT EXISTS (SELECT 1 FROM results WHERE match_id = ?)",
                (match_id, key_id, claimed_at, match_id),
            ).rowcount
            return bool(gone == 1)

        return await self._write(run)

    async def record(
        self,
        result: ResultRecord,
        targets: Sequence[tuple[Target, BoardSpec]],
        now: float,
        hourly_cap: int | None,
        handle: RecordHandle | None = None,
    ) -> RecordOutcome:
        pid = result.player_id

        def run(c: sqlite3.Connection) -> RecordOutcome:
            country = _country(c, pid)
            placed = place_in_groups(targets, country)
            if any(pending_tier(t.window) for t, _ in placed):  # a league's first result
                placed = place(c, pid, result.match_id, placed, now)
            state = _state(c, result, placed, None if hourly_cap is None else now - HOUR)
            plan = plan_record(result, placed, state, now, hourly_cap)
            reread = isinstance(handle, Seen) and (
                state.existing is not None
                or (handle.country, handle.tallies) != (country, state.tallies)
                or set(handle.frozen) != set(state.frozen)
                or (hourly_cap is not None and handle.count != state.count)
            )
            if plan.replayed:
                return RecordOutcome(plan.totals, True, reread)
            # The claim again: a concurrent rejection of this match by the same key, or a
            # release of a claim past its lease, may have released it since ``open_match``;
            # a result is never stored without its claim, nor under another key's.
            c.execute(
                "INSERT OR IGNORE INTO matches "
                "(match_id, key_id, recorded_at, mode, ended_at, duration_s) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (result.match_id, result.key_id, now, result.mode, result.ended_at,
                 result.duration_s),
            )  # fmt: skip
            owner = c.execute(
                "SELECT key_id FROM matches WHERE match_id = ?", (result.match_id,)
            ).fetchone()["key_id"]
            if owner != result.key_id:
                raise Forbidden(f"match {result.match_id} was recorded by another game server")
            c.execute(
                f"INSERT INTO results ({RESULT_COLS}, recorded_at, flag) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    pid,
                    result.match_id,
                    result.key_id,
                    result.mode,
                    result.ended_at,
                    result.duration_s,
                    result.points,
                    result.metadata,
                    now,
                    result.flag,
                ),
            )
            c.executemany(
                "INSERT INTO tallies (board, window_id, player_id, total, reached_at, version, "
                "scored, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (board, window_id, player_id) DO UPDATE SET "
                "total = excluded.total, reached_at = excluded.reached_at, "
                "version = excluded.version, scored = excluded.scored, "
                "metadata = excluded.metadata",
                [
                    (t.board, t.window, pid, n.total, n.reached_at, n.version, int(n.scored), m)
                    for t, n in plan.last_values()
                    for m in (n.metadata,)  # the tally's metadata, its last column
                ],
            )
            write_changes(c, [(t.board, t.window, pid, n, False) for t, n in plan.changes], now)
            return RecordOutcome(plan.totals, False, reread)

        return await self._write(run)

    async def results_of(self, match_id: str, player_ids: Sequence[str]) -> dict[str, ResultRecord]:
        ids = list(player_ids)
        return await self._read(lambda c: _existing(c, match_id, ids)) if ids else {}

    async def totals(self, player_id: str, targets: Sequence[Target]) -> dict[str, int]:
        def run(c: sqlite3.Connection) -> dict[str, int]:
            tallies = _tallies(c, player_id, targets)
            # In target order, so a repeated board name resolves the same way everywhere.
            keys = [(t.board, (t.board, t.window)) for t in targets]
            return {board: tallies[k].total for board, k in keys if k in tallies}

        return await self._read(run)

    async def player_standings(self, player_id: str) -> list[Standing]:
        rows = await self._read(
            lambda c: c.execute(
                f"SELECT {TALLY_COLS} FROM tallies WHERE player_id = ?", (player_id,)
            ).fetchall()
        )
        return [standing_of(r) for r in rows]

    async def flagged(self, modes: Sequence[str] | None, limit: int) -> list[Flagged]:
        only = "" if modes is None else f"AND mode IN ({','.join('?' * len(modes))})"
        rows = await self._read(
            lambda c: c.execute(
                f"SELECT {FLAGGED_COLS} FROM results "
                f"WHERE flag IS NOT NULL AND accepted_at IS NULL AND rejected_at IS NULL {only} "
                "ORDER BY recorded_at DESC LIMIT ?",
                (*(modes or ()), limit),
            ).fetchall()
        )
        return [flagged_of(r) for r in rows]


def _country(c: sqlite3.Connection, player_id: str) -> str | None:
    row = c.execute("SELECT country FROM profiles WHERE player_id = ?", (player_id,)).fetchone()
    return row["country"] if row else None


def _state(
    c: sqlite3.Connection,
    result: ResultRecord,
    placed: Sequence[tuple[Target, BoardSpec]],
    since: float | None,
) -> RecordState:
    """Everything one record decides on, read inside its transaction."""
    pid = result.player_id
    row = c.execute(
        f"SELECT {RESULT_COLS} FROM results WHERE player_id = ? AND match_id = ?",
        (pid, result.match_id),
    ).fetchone()
    count, oldest = 0, None
    if since is not None and row is None:
        cap = c.execute(
            "SELECT COUNT(*) AS n, MIN(recorded_at) AS oldest FROM results "
            "WHERE player_id = ? AND mode = ? AND recorded_at >= ?",
            (pid, result.mode, since),
        ).fetchone()
        count, oldest = cap["n"], cap["oldest"]
    existing = result_of(row) if row is not None else None
    on = [t for t, _ in placed]
    return RecordState(existing, count, oldest, frozen_among(c, on), _tallies(c, pid, on))


def _seen(
    c: sqlite3.Connection,
    player_id: str,
    targets: Sequence[tuple[Target, BoardSpec]],
    count: int,
    oldest: float | None,
) -> Seen:
    country = _country(c, player_id)
    on = [t for t, _ in place_in_groups(targets, country)]
    frozen = frozenset(frozen_among(c, on))
    return Seen(country, frozen, _tallies(c, player_id, on), count, oldest)


def _tallies(
    c: sqlite3.Connection, player_id: str, targets: Sequence[Target]
) -> dict[tuple[str, str], Tally]:
    out = {}
    for t in targets:
        row = c.execute(
            "SELECT total, reached_at, version, scored FROM tallies "
            "WHERE board = ? AND window_id = ? AND player_id = ?",
            (t.board, t.window, player_id),
        ).fetchone()
        if row is not None:
            out[(t.board, t.window)] = tally_columns(row)
    return out


def frozen_among(c: sqlite3.Connection, targets: Sequence[Target]) -> set[tuple[str, str]]:
    """The target windows that are frozen."""
    out: set[tuple[str, str]] = set()
    for t in targets:
        if c.execute(
            "SELECT 1 FROM frozen_windows WHERE board = ? AND window_id = ?", (t.board, t.window)
        ).fetchone():
            out.add((t.board, t.window))
    return out


def _existing(c: sqlite3.Connection, match_id: str, ids: Sequence[str]) -> dict[str, ResultRecord]:
    marks = ",".join("?" * len(ids))
    rows = c.execute(
        f"SELECT {RESULT_COLS} FROM results WHERE match_id = ? AND player_id IN ({marks})",
        (match_id, *ids),
    ).fetchall()
    return {r["player_id"]: result_of(r) for r in rows}


def _since(
    c: sqlite3.Connection, ids: Sequence[str], mode: str, since: float
) -> dict[str, tuple[int, float]]:
    marks = ",".join("?" * len(ids))
    rows = c.execute(
        "SELECT player_id, COUNT(*) AS n, MIN(recorded_at) AS oldest FROM results "
        f"WHERE mode = ? AND recorded_at >= ? AND player_id IN ({marks}) GROUP BY player_id",
        (mode, since, *ids),
    ).fetchall()
    return {r["player_id"]: (r["n"], r["oldest"]) for r in rows}


def _recent(
    c: sqlite3.Connection, player_ids: Sequence[str], mode: str, limit: int
) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for p in player_ids:
        rows = c.execute(
            # a result a moderator rejected is no history of the player's (the jump rule)
            "SELECT points FROM results WHERE player_id = ? AND mode = ? "
            "AND rejected_at IS NULL ORDER BY ended_at DESC LIMIT ?",
            (p, mode, limit),
        ).fetchall()
        out[p] = [r["points"] for r in rows]
    return out
