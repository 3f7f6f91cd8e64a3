"""The embedded score store: one SQLite file in WAL mode.

SQLite allows one writer at a time, so all writes run on one dedicated thread with one
connection; reads run on a second thread with its own connection, which WAL lets proceed
while a write is in progress. ``synchronous=FULL``: an acknowledged result survives power
loss, not only a crash.

Writes commit in groups. Each use case runs inside a savepoint of its own, so it lands or
fails whole, and the writes that queued while one group ran share the next ``BEGIN
IMMEDIATE ... COMMIT`` (and its fsync). No caller hears back before the commit that holds
its write; if that commit fails, every write of the group fails and nothing of it is kept,
so a retry is safe. Why: one transaction per write kept the writer thread busy with commits
and with winning the GIL back from the event loop after each statement; under 500 rank
reads/s it fell behind 500 results/s (BENCHMARKS.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from podium import metrics
from podium.domain.boards import BoardSpec, Tally
from podium.domain.models import (
    PROFILE_CHANGE,
    ApiKey,
    Change,
    FinalEntry,
    Flagged,
    FrozenWindow,
    Profile,
    ProfileChange,
    RecordOutcome,
    ResultRecord,
    Standing,
    Target,
)
from podium.domain.windows import GROUP_SEP, Window, split_group
from podium.errors import StoreUnavailable
from podium.ports import PriorResults
from podium.recording import (
    HOUR,
    UNKNOWN_GROUP,
    check_cap,
    check_replay,
    open_targets,
    place_in_groups,
    step,
)
from podium.store import sqlite_windows as lifecycle
from podium.store.common import migrations

T = TypeVar("T")
GROUP_MAX = 32  # writes per commit: bounds what the first write of a group waits for
_RESULT_COLS = "player_id, match_id, key_id, mode, ended_at, duration_s, points"


class SqliteStore:
    def __init__(self, path: str, *, synchronous: str = "FULL") -> None:
        self.path = path
        self._synchronous = synchronous
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="sqlite-w")
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="sqlite-r")
        self._wconn: sqlite3.Connection | None = None
        self._queued: list[_Job] = []  # writes waiting for the next group
        self._queue_lock = threading.Lock()
        self._draining = False  # a drain of the queue is scheduled on the writer thread
        self._closed = False
        self._rconn: sqlite3.Connection | None = None

    @classmethod
    def from_url(cls, url: str) -> SqliteStore:
        path = url.removeprefix("sqlite:///") or "podium.db"
        return cls(path)

    # -- plumbing ---------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=10, isolation_level=None, check_same_thread=False)
        # Switching a fresh file to WAL fails at once with "database is locked" when another
        # connection is doing the same (the busy timeout is not applied), so retry it briefly.
        for attempt in range(50):
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError:
                if attempt == 49:
                    raise
                time.sleep(0.02)
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        job = _Job(fn, loop, loop.create_future())
        # Retrieve a failure even when the caller went away, so it is not logged as lost.
        job.done.add_done_callback(lambda f: f.cancelled() or f.exception())
        with self._queue_lock:
            if self._closed:
                raise StoreUnavailable("sqlite: the store is closed")
            self._queued.append(job)
            start = not self._draining  # if not, the running drain takes this write too
            self._draining = True
        if start:
            self._writer.submit(self._drain)
        # Shielded: a caller that goes away does not take the write back; it may still
        # commit, as any write may whose caller stopped waiting (a retry is safe).
        out: T = await asyncio.shield(job.done)
        return out

    def _drain(self) -> None:
        """On the writer thread: commit the queued writes, a group at a time, until none
        is left."""
        group: list[_Job] = []
        try:
            while True:
                with self._queue_lock:
                    group = self._queued[:GROUP_MAX]
                    del self._queued[:GROUP_MAX]
                    if not group:
                        self._draining = False
                        return
                self._commit(group)
        except BaseException as e:
            # Not one of the writes' own errors (``_commit`` answers those): still, no write
            # may be left waiting, nor the queue without a drain.
            with self._queue_lock:
                left, self._queued = self._queued, []
                self._draining = False
            failure = StoreUnavailable(f"sqlite: the writer stopped: {e!r}")
            for job in [*group, *left]:
                job.settle(False, failure)
            raise

    def _commit(self, group: list[_Job]) -> None:
        outcomes: list[tuple[bool, Any]] = []
        try:
            if self._wconn is None:
                self._wconn = self._connect()
            conn = self._wconn
            conn.execute("BEGIN IMMEDIATE")
            try:
                for job in group:
                    outcomes.append(_one(conn, job))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except BaseException as e:  # nothing of the group was kept: every write fails
            failure = _translate(e)
            for job in group:
                job.settle(False, failure)
            return
        metrics.STORE_WRITE_GROUP.observe(len(group))
        for job, (ok, value) in zip(group, outcomes, strict=True):
            job.settle(ok, value)

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def run() -> T:
            if self._rconn is None:
                self._rconn = self._connect()
            return fn(self._rconn)

        return await self._run(self._reader, run)

    async def _run(self, pool: ThreadPoolExecutor, fn: Callable[[], T]) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, fn)
        except sqlite3.Error as e:  # locked, disk full, I/O error: nothing was committed
            raise StoreUnavailable(f"sqlite: {e}") from e

    async def migrate(self) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            for version, sql in migrations("sqlite"):
                if version not in done:
                    for statement in _statements(sql):
                        conn.execute(statement)
                    conn.execute("INSERT INTO schema_migrations VALUES (?)", (version,))

        await self._write(run)

    async def close(self) -> None:
        def close_w() -> None:
            if self._wconn is not None:
                self._wconn.close()

        def close_r() -> None:
            if self._rconn is not None:
                self._rconn.close()

        # No write is queued from now on; the writer thread runs in order, so the drain of
        # the writes queued before this finishes before the connection closes.
        with self._queue_lock:
            if self._closed:
                return
            self._closed = True
        await asyncio.get_running_loop().run_in_executor(self._writer, close_w)
        await asyncio.get_running_loop().run_in_executor(self._reader, close_r)
        self._writer.shutdown()
        self._reader.shutdown()

    async def ping(self) -> None:
        await self._read(lambda c: c.execute("SELECT 1").fetchone())

    # -- credentials ------------------------------------------------------------------

    async def add_key(self, key: ApiKey) -> None:
        await self._write(
            lambda c: c.execute(
                "INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, ?)",
                (
                    key.id,
                    key.name,
                    key.key_hash,
                    ",".join(key.modes),
                    int(key.admin),
                    key.created_at,
                ),
            )
        )

    async def key_by_hash(self, key_hash: str) -> ApiKey | None:
        row = await self._read(
            lambda c: c.execute(
                "SELECT id, name, key_hash, modes, admin, created_at FROM api_keys "
                "WHERE key_hash = ?",
                (key_hash,),
            ).fetchone()
        )
        if row is None:
            return None
        modes = tuple(m for m in row[3].split(",") if m)
        return ApiKey(row[0], row[1], row[2], modes, bool(row[4]), row[5])

    # -- results ----------------------------------------------------------------------

    async def claim_match(self, match_id: str, key_id: str, now: float) -> str:
        def run(c: sqlite3.Connection) -> str:
            c.execute("INSERT OR IGNORE INTO matches VALUES (?, ?, ?)", (match_id, key_id, now))
            row = c.execute("SELECT key_id FROM matches WHERE match_id = ?", (match_id,)).fetchone()
            return str(row[0])

        return await self._write(run)

    async def open_match(
        self,
        match_id: str,
        key_id: str,
        now: float,
        player_ids: Sequence[str],
        mode: str,
        recent: int,
        since: float | None,
        targets: Sequence[tuple[Target, BoardSpec]] = (),
    ) -> tuple[str, PriorResults]:
        # Two local calls: there is no round trip to save.
        owner = await self.claim_match(match_id, key_id, now)
        return owner, await self.prior_results(match_id, player_ids, mode, recent, since, targets)

    async def prior_results(
        self,
        match_id: str,
        player_ids: Sequence[str],
        mode: str,
        recent: int,
        since: float | None,
        targets: Sequence[tuple[Target, BoardSpec]] = (),
    ) -> PriorResults:
        # No ``seen``: a record here is one local transaction, which reads as cheaply as it
        # would check what an earlier read saw.
        ids = list(player_ids)

        def run(c: sqlite3.Connection) -> PriorResults:
            return PriorResults(
                existing=_existing(c, match_id, ids) if ids else {},
                recent_points=_recent(c, ids, mode, recent),
                counts=_since(c, ids, mode, since) if ids and since is not None else {},
            )

        return await self._read(run)

    async def record(
        self,
        result: ResultRecord,
        targets: Sequence[tuple[Target, BoardSpec]],
        now: float,
        hourly_cap: int | None,
        prior: PriorResults | None = None,
    ) -> RecordOutcome:
        def run(c: sqlite3.Connection) -> RecordOutcome:
            country = c.execute(
                "SELECT country FROM profiles WHERE player_id = ?", (result.player_id,)
            ).fetchone()
            placed = place_in_groups(targets, country[0] if country else None)
            row = c.execute(
                f"SELECT {_RESULT_COLS} FROM results WHERE player_id = ? AND match_id = ?",
                (result.player_id, result.match_id),
            ).fetchone()
            if row is not None:
                check_replay(ResultRecord(*row), result)
                return RecordOutcome(_totals(c, result.player_id, [t for t, _ in placed]), True)
            if hourly_cap is not None:
                count, oldest = c.execute(
                    "SELECT COUNT(*), MIN(recorded_at) FROM results "
                    "WHERE player_id = ? AND mode = ? AND recorded_at >= ?",
                    (result.player_id, result.mode, now - HOUR),
                ).fetchone()
                check_cap(count, hourly_cap, oldest, now, result)
            live = open_targets(placed, _frozen(c, [t for t, _ in placed]))
            c.execute(
                f"INSERT INTO results ({_RESULT_COLS}, recorded_at, flag) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    result.player_id,
                    result.match_id,
                    result.key_id,
                    result.mode,
                    result.ended_at,
                    result.duration_s,
                    result.points,
                    now,
                    result.flag,
                ),
            )
            totals: dict[str, int] = {}
            for target, spec in live:
                cur_row = c.execute(
                    "SELECT total, reached_at, version, scored FROM tallies "
                    "WHERE board = ? AND window_id = ? AND player_id = ?",
                    (target.board, target.window, result.player_id),
                ).fetchone()
                current = (
                    Tally(cur_row[0], cur_row[1], cur_row[2], bool(cur_row[3])) if cur_row else None
                )
                new = step(spec, target, current, result)
                if new is not None:
                    key = (target.board, target.window, result.player_id)
                    c.execute(
                        "INSERT INTO tallies VALUES (?, ?, ?, ?, ?, ?, ?) "
                        "ON CONFLICT (board, window_id, player_id) DO UPDATE SET "
                        "total = excluded.total, reached_at = excluded.reached_at, "
                        "version = excluded.version, scored = excluded.scored",
                        (*key, new.total, new.reached_at, new.version, int(new.scored)),
                    )
                    c.execute(
                        "INSERT INTO outbox (board, window_id, player_id, total, reached_at, "
                        "version, committed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (*key, new.total, new.reached_at, new.version, now),
                    )
                final = new or current
                assert final is not None
                totals[target.board] = final.total
            return RecordOutcome(totals, False)

        return await self._write(run)

    async def totals(self, player_id: str, targets: Sequence[Target]) -> dict[str, int]:
        return await self._read(lambda c: _totals(c, player_id, targets))

    async def player_standings(self, player_id: str) -> list[Standing]:
        rows = await self._read(
            lambda c: c.execute(
                "SELECT board, window_id, player_id, total, reached_at, version FROM tallies "
                "WHERE player_id = ?",
                (player_id,),
            ).fetchall()
        )
        return [_standing(r) for r in rows]

    async def standings(
        self, board: str, window: str, batch: int = 5000
    ) -> AsyncIterator[list[Standing]]:
        after = ""
        while True:
            rows = await self._read(
                lambda c, after=after: c.execute(  # type: ignore[misc]
                    "SELECT board, window_id, player_id, total, reached_at, version FROM tallies "
                    "WHERE board = ? AND window_id = ? AND player_id > ? "
                    "ORDER BY player_id LIMIT ?",
                    (board, window, after, batch),
                ).fetchall()
            )
            if not rows:
                return
            yield [_standing(r) for r in rows]
            after = rows[-1][2]

    async def windows(self, board: str) -> list[str]:
        rows = await self._read(
            lambda c: c.execute(
                "SELECT DISTINCT window_id FROM tallies WHERE board = ? ORDER BY window_id",
                (board,),
            ).fetchall()
        )
        return [r[0] for r in rows]

    # -- outbox -----------------------------------------------------------------------

    async def claim_changes(
        self, limit: int, lease_s: float, now: float
    ) -> list[Change | ProfileChange]:
        def run(c: sqlite3.Connection) -> list[Change | ProfileChange]:
            rows = c.execute(
                "SELECT id, board, window_id, player_id, total, reached_at, version, committed_at, "
                "removed "
                "FROM outbox WHERE claimed_until <= ? ORDER BY id LIMIT ?",
                (now, limit),
            ).fetchall()
            if rows:
                marks = ",".join("?" * len(rows))
                c.execute(
                    f"UPDATE outbox SET claimed_until = ? WHERE id IN ({marks})",
                    (now + lease_s, *(r[0] for r in rows)),
                )
            return [_change(r) for r in rows]

        return await self._write(run)

    async def ack_changes(self, ids: Sequence[int]) -> None:
        ids = list(ids)
        if ids:
            marks = ",".join("?" * len(ids))
            await self._write(lambda c: c.execute(f"DELETE FROM outbox WHERE id IN ({marks})", ids))

    async def lease_changes(self, ids: Sequence[int], until: float) -> None:
        ids = list(ids)
        if ids:
            marks = ",".join("?" * len(ids))
            await self._write(
                lambda c: c.execute(
                    f"UPDATE outbox SET claimed_until = ? WHERE id IN ({marks})", (until, *ids)
                )
            )

    async def requeue_player(self, player_id: str, now: float) -> int:
        def run(c: sqlite3.Connection) -> int:
            cur = c.execute(
                "INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, "
                "committed_at) SELECT board, window_id, player_id, total, reached_at, version, ? "
                "FROM tallies WHERE player_id = ?",
                (now, player_id),
            )
            return cur.rowcount

        return await self._write(run)

    async def outbox_backlog(self, now: float) -> tuple[int, float]:
        count, oldest = await self._read(
            lambda c: c.execute("SELECT COUNT(*), MIN(committed_at) FROM outbox").fetchone()
        )
        return int(count), (now - oldest) if oldest is not None else 0.0

    # -- players ----------------------------------------------------------------------

    async def set_profile(self, profile: Profile, now: float) -> int:
        pid = profile.player_id

        def run(c: sqlite3.Connection) -> int:
            row = c.execute("SELECT country FROM profiles WHERE player_id = ?", (pid,)).fetchone()
            c.execute(
                "INSERT INTO profiles (player_id, name, avatar, country, version) "
                "VALUES (?, ?, ?, ?, 1) "
                "ON CONFLICT (player_id) DO UPDATE SET name = excluded.name, "
                "avatar = excluded.avatar, country = excluded.country, "
                "version = profiles.version + 1",
                (pid, profile.name, profile.avatar, profile.country),
            )
            [version] = c.execute("SELECT version FROM profiles WHERE player_id = ?", (pid,))
            c.execute(
                "INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, "
                "committed_at) VALUES (?, '', ?, 0, 0, ?, ?)",
                (PROFILE_CHANGE, pid, version[0], now),
            )
            old = (row[0] if row else None) or UNKNOWN_GROUP
            new = profile.country or UNKNOWN_GROUP
            if old != new:
                _move_groups(c, pid, old, new, now)
            return int(version[0])

        return await self._write(run)

    async def profiles(self, player_ids: Sequence[str]) -> dict[str, Profile]:
        found = await self.versioned_profiles(player_ids)
        return {p: profile for p, (profile, _) in found.items()}

    async def versioned_profiles(self, player_ids: Sequence[str]) -> dict[str, tuple[Profile, int]]:
        ids = list(player_ids)

        def run(c: sqlite3.Connection) -> dict[str, tuple[Profile, int]]:
            marks = ",".join("?" * len(ids))
            rows = c.execute(
                "SELECT player_id, name, avatar, country, version FROM profiles "
                f"WHERE player_id IN ({marks})",
                ids,
            ).fetchall()
            return {r[0]: (Profile(*r[:4]), r[4]) for r in rows}

        return await self._read(run) if ids else {}

    async def all_profiles(self, after: str, limit: int) -> list[tuple[Profile, int]]:
        rows = await self._read(
            lambda c: c.execute(
                "SELECT player_id, name, avatar, country, version FROM profiles "
                "WHERE player_id > ? ORDER BY player_id LIMIT ?",
                (after, limit),
            ).fetchall()
        )
        return [(Profile(*r[:4]), r[4]) for r in rows]

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
        return [r[0] for r in rows]

    # -- bans -------------------------------------------------------------------------

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

        def run(c: sqlite3.Connection) -> set[str]:
            marks = ",".join("?" * len(ids))
            rows = c.execute(f"SELECT player_id FROM bans WHERE player_id IN ({marks})", ids)
            return {r[0] for r in rows}

        return await self._read(run) if ids else set()

    # -- review -----------------------------------------------------------------------

    async def flagged(self, modes: Sequence[str] | None, limit: int) -> list[Flagged]:
        only = "" if modes is None else f"AND mode IN ({','.join('?' * len(modes))})"

        def run(c: sqlite3.Connection) -> list[Flagged]:
            rows = c.execute(
                "SELECT player_id, match_id, mode, points, ended_at, recorded_at, flag "
                f"FROM results WHERE flag IS NOT NULL {only} ORDER BY recorded_at DESC LIMIT ?",
                (*(modes or ()), limit),
            ).fetchall()
            return [Flagged(*r) for r in rows]

        return await self._read(run)

    # -- the life of a window -----------------------------------------------------------

    async def freeze(self, board: BoardSpec, window: Window, keep: int, now: float) -> bool:
        return await self._write(lambda c: lifecycle.freeze(c, board, window, keep, now))

    async def frozen(self, board: str) -> dict[str, FrozenWindow]:
        return await self._read(lambda c: lifecycle.frozen(c, board))

    async def final_page(self, board: str, window: str, first: int, last: int) -> list[FinalEntry]:
        return await self._read(lambda c: lifecycle.final_page(c, board, window, first, last))

    async def final_entry(self, board: str, window: str, player_id: str) -> FinalEntry | None:
        return await self._read(lambda c: lifecycle.final_entry(c, board, window, player_id))

    async def set_archive(self, board: str, window: str, archive: str, checksum: str) -> None:
        await self._write(lambda c: lifecycle.set_archive(c, board, window, archive, checksum))


def _move_groups(c: sqlite3.Connection, player_id: str, old: str, new: str, now: float) -> None:
    """Move the player's tallies on grouped boards from group ``old`` to ``new``: each
    leaves a removal behind in the old group and arrives whole in the new one, both with a
    newer version, so no late change of the old group can put the player back there."""
    rows = c.execute(
        "SELECT board, window_id, total, reached_at, version, scored FROM tallies "
        "WHERE player_id = ? AND window_id LIKE ?",
        (player_id, f"%{GROUP_SEP}{old}"),
    ).fetchall()
    for board, window_id, total, reached, version, scored in rows:
        if _frozen(c, [Target(board, window_id, 0)]):
            continue  # final standings do not move
        base, _ = split_group(window_id)
        moved = f"{base}{GROUP_SEP}{new}"
        v = version + 1
        c.execute(
            "DELETE FROM tallies WHERE board = ? AND window_id = ? AND player_id = ?",
            (board, window_id, player_id),
        )
        c.execute(
            "INSERT INTO tallies VALUES (?, ?, ?, ?, ?, ?, ?)",
            (board, moved, player_id, total, reached, v, scored),
        )
        c.executemany(
            "INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, "
            "committed_at, removed) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (board, window_id, player_id, total, reached, v, now, 1),
                (board, moved, player_id, total, reached, v, now, 0),
            ],
        )


def _existing(c: sqlite3.Connection, match_id: str, ids: Sequence[str]) -> dict[str, ResultRecord]:
    marks = ",".join("?" * len(ids))
    rows = c.execute(
        f"SELECT {_RESULT_COLS} FROM results WHERE match_id = ? AND player_id IN ({marks})",
        (match_id, *ids),
    ).fetchall()
    return {r[0]: ResultRecord(*r) for r in rows}


def _since(
    c: sqlite3.Connection, ids: Sequence[str], mode: str, since: float
) -> dict[str, tuple[int, float]]:
    marks = ",".join("?" * len(ids))
    rows = c.execute(
        "SELECT player_id, COUNT(*), MIN(recorded_at) FROM results "
        f"WHERE mode = ? AND recorded_at >= ? "
        f"AND player_id IN ({marks}) GROUP BY player_id",
        (mode, since, *ids),
    ).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


def _recent(
    c: sqlite3.Connection, player_ids: Sequence[str], mode: str, limit: int
) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for p in player_ids:
        rows = c.execute(
            "SELECT points FROM results WHERE player_id = ? AND mode = ? "
            "ORDER BY ended_at DESC LIMIT ?",
            (p, mode, limit),
        ).fetchall()
        out[p] = [r[0] for r in rows]
    return out


def _frozen(c: sqlite3.Connection, targets: Sequence[Target]) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for t in targets:
        if c.execute(
            "SELECT 1 FROM frozen_windows WHERE board = ? AND window_id = ?", (t.board, t.window)
        ).fetchone():
            out.add((t.board, t.window))
    return out


def _statements(sql: str) -> list[str]:
    """Split a migration into statements (executescript would commit mid-migration)."""
    text = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())
    return [s for s in text.split(";") if s.strip()]


def _totals(c: sqlite3.Connection, player_id: str, targets: Sequence[Target]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in targets:
        row = c.execute(
            "SELECT total FROM tallies WHERE board = ? AND window_id = ? AND player_id = ?",
            (t.board, t.window, player_id),
        ).fetchone()
        if row is not None:
            out[t.board] = row[0]
    return out


def _standing(r: Any) -> Standing:
    return Standing(r[0], r[1], r[2], Tally(r[3], r[4], r[5]))


def _change(r: Any) -> Change | ProfileChange:
    if r[1] == PROFILE_CHANGE:
        return ProfileChange(r[3], r[6], r[7], handle=r[0])
    return Change(r[1], r[2], r[3], Tally(r[4], r[5], r[6]), r[7], bool(r[8]), handle=r[0])


class _GroupLost(Exception):
    """SQLite rolled the whole transaction back on a write's error (a full disk, an I/O
    error): the writes before it in the group are gone too."""


@dataclass(slots=True)
class _Job:
    fn: Callable[[sqlite3.Connection], Any]
    loop: asyncio.AbstractEventLoop
    done: asyncio.Future[Any]

    def settle(self, ok: bool, value: Any) -> None:
        """From the writer thread: hand the outcome to the caller's event loop."""
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
            self.loop.call_soon_threadsafe(_settle, self.done, ok, value)


def _settle(done: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if done.done():
        return
    if ok:
        done.set_result(value)
    else:
        done.set_exception(value)


def _one(conn: sqlite3.Connection, job: _Job) -> tuple[bool, Any]:
    """Run one write in a savepoint: on an error, it is undone and the group goes on."""
    conn.execute("SAVEPOINT write")
    try:
        value = job.fn(conn)
    except Exception as e:
        if not conn.in_transaction:
            raise _GroupLost(str(e)) from e
        conn.execute("ROLLBACK TO write")
        conn.execute("RELEASE write")
        return False, _translate(e)
    conn.execute("RELEASE write")
    return True, value


def _translate(e: BaseException) -> BaseException:
    """Driver errors become ``StoreUnavailable`` (nothing was committed), as does anything
    that is not an ``Exception`` (an interrupt on the writer thread: the other writers of the
    group must not receive it); the use cases' own errors pass as they are."""
    if isinstance(e, sqlite3.Error | _GroupLost) or not isinstance(e, Exception):
        failure = StoreUnavailable(f"sqlite: {e or type(e).__name__}")
        failure.__cause__ = e
        return failure
    return e
