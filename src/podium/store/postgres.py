"""The production score store: PostgreSQL through an asyncpg pool.

Every use case is one transaction, with the same rows read and written as ``sqlite.py``.
SQLite gets its serial order from its single writer; here the record transactions of one
player queue on a transaction-scoped advisory lock on that player instead. That keeps the
hourly cap exact and makes the first fold into a tally safe (there is no row yet for
``FOR UPDATE`` to lock), while different players still commit in parallel.

Driver errors never leave this module: an unreachable or overloaded server, a timed-out
pool or query, and any other asyncpg error become ``StoreUnavailable`` (nothing was
committed, so a retry is safe). Serialization failures and deadlocks are retried first.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import asyncpg
from asyncpg import exceptions as pgx

from podium.domain.boards import BoardSpec, Tally
from podium.domain.models import (
    ApiKey,
    Change,
    FinalEntry,
    Flagged,
    FrozenWindow,
    Profile,
    RecordOutcome,
    ResultRecord,
    Standing,
    Target,
)
from podium.domain.windows import GROUP_SEP, Window, split_group
from podium.errors import StoreUnavailable
from podium.recording import (
    HOUR,
    UNKNOWN_GROUP,
    check_cap,
    check_replay,
    open_targets,
    place_in_groups,
    step,
)
from podium.store import postgres_windows as lifecycle
from podium.store.common import migrations

if TYPE_CHECKING:  # the proxy is generic only in the stubs
    from typing import TypeAlias

    from asyncpg.pool import PoolConnectionProxy

    Conn: TypeAlias = PoolConnectionProxy[asyncpg.Record]

T = TypeVar("T")

_RESULT_COLS = "player_id, match_id, key_id, mode, ended_at, duration_s, points"
_TALLY_COLS = "board, window_id, player_id, total, reached_at, version"
# (board, window_id) pairs passed as two parallel arrays $2 and $3.
_PAIRS = "(board, window_id) IN (SELECT * FROM unnest($2::text[], $3::text[]))"
_UNNEST = (
    "unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[]) "
    "WITH ORDINALITY AS u(b, w, t, r, v, n)"
)

# Advisory lock keys. The single-bigint and the two-int4 key spaces do not overlap, so the
# per-player locks (namespace, hash) can never block the migration lock.
_MIGRATE_LOCK = 0x706F6469756D  # b"podium"
_RECORD_NS = 0x7064_0001
_FRIENDS_NS = 0x7064_0002
_WINDOW_NS = 0x7064_0003

_ATTEMPTS = 4  # tries of a transaction that hit a serialization failure or a deadlock

# Not reaching the server, or the server refusing work: worth a clear "unreachable".
# OSError covers refused, reset and unreachable; InterfaceError a connection closed under us
# or a pool closing.
_UNREACHABLE: tuple[type[BaseException], ...] = (
    OSError,
    pgx.PostgresConnectionError,
    pgx.CannotConnectNowError,
    pgx.TooManyConnectionsError,
    pgx.AdminShutdownError,
    pgx.CrashShutdownError,
    pgx.InterfaceError,
)
# Anything else the driver raises: still nothing committed, still never leaked upwards
# (as sqlite.py does with every sqlite3.Error).
_DRIVER: tuple[type[BaseException], ...] = (pgx.PostgresError, pgx.InternalClientError)


def _player_key(player_id: str) -> int:
    """A stable signed 32-bit key; a collision only makes two players queue behind each other."""
    digest = hashlib.blake2b(player_id.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


def window_key(board: str, window: str) -> int:
    """The advisory lock key of one board window (signed 32-bit, like ``_player_key``)."""
    return _player_key(f"{board}\x00{window}")


def _pairs(targets: Sequence[Target]) -> tuple[list[str], list[str]]:
    return [t.board for t in targets], [t.window for t in targets]


class PostgresStore:
    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        connect_timeout: float = 5.0,
        command_timeout: float = 10.0,
        acquire_timeout: float = 5.0,
    ) -> None:
        self.url = url
        self.pool_size = pool_size
        self._connect_timeout = connect_timeout
        self._command_timeout = command_timeout
        self._acquire_timeout = acquire_timeout
        self._pool: asyncpg.Pool[asyncpg.Record] | None = None
        self._opening = asyncio.Lock()

    @classmethod
    def from_url(cls, url: str, pool_size: int = 10) -> PostgresStore:
        """Does not connect: the pool opens on first use, so a store can be built anywhere."""
        return cls(url, pool_size=pool_size)

    # -- plumbing ---------------------------------------------------------------------

    async def _get_pool(self) -> asyncpg.Pool[asyncpg.Record]:
        if self._pool is not None:
            return self._pool
        async with self._opening:  # one pool, however many first calls race here
            if self._pool is None:
                self._pool = await asyncpg.create_pool(
                    self.url,
                    min_size=1,
                    max_size=self.pool_size,
                    timeout=self._connect_timeout,
                    command_timeout=self._command_timeout,
                )
            return self._pool

    async def _run(
        self, fn: Callable[[Conn], Awaitable[T]], *, tx: bool = True, retry_unique: bool = False
    ) -> T:
        """Run ``fn`` on a pooled connection, in one transaction unless ``tx`` is False.

        ``retry_unique``: a unique violation means a concurrent transaction inserted the same
        key first; run once more, and this time the row is there to be read.
        """
        attempt = 0
        unique_retried = False
        while True:
            attempt += 1
            try:
                pool = await self._get_pool()
                async with pool.acquire(timeout=self._acquire_timeout) as conn:
                    if not tx:
                        return await fn(conn)
                    async with conn.transaction():
                        return await fn(conn)
            except (pgx.SerializationError, pgx.DeadlockDetectedError) as e:
                if attempt >= _ATTEMPTS:
                    raise StoreUnavailable(f"postgres: gave up after {attempt} tries: {e}") from e
                await asyncio.sleep(0.005 * 2**attempt)
            except pgx.UniqueViolationError as e:
                if not retry_unique or unique_retried:
                    raise StoreUnavailable(f"postgres: {e}") from e
                unique_retried = True
            except TimeoutError as e:  # its message is empty
                raise StoreUnavailable("postgres: timed out (connect, pool or query)") from e
            except _UNREACHABLE as e:
                raise StoreUnavailable(f"postgres unreachable: {type(e).__name__}: {e}") from e
            except _DRIVER as e:
                raise StoreUnavailable(f"postgres: {type(e).__name__}: {e}") from e

    async def migrate(self) -> None:
        async def run(c: Conn) -> None:
            # Taken before anything else: two migrators racing on an empty database would
            # otherwise both try to create schema_migrations.
            await c.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATE_LOCK)
            await c.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY)"
            )
            done = {r[0] for r in await c.fetch("SELECT version FROM schema_migrations")}
            for version, sql in migrations("postgres"):
                if version not in done:
                    await c.execute(sql)  # no arguments: the simple protocol runs every statement
                    await c.execute("INSERT INTO schema_migrations VALUES ($1)", version)

        await self._run(run)

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), self._command_timeout)
            except TimeoutError:
                pool.terminate()  # a connection still checked out must not hang shutdown

    async def ping(self) -> None:
        await self._fetch("SELECT 1")

    # Single statements run outside an explicit transaction: each one is atomic on its own,
    # and BEGIN/COMMIT would only add two round trips.
    async def _fetch(self, sql: str, *args: object) -> list[asyncpg.Record]:
        return await self._run(lambda c: c.fetch(sql, *args), tx=False)

    async def _execute(self, sql: str, *args: object) -> str:
        return await self._run(lambda c: c.execute(sql, *args), tx=False)

    # -- credentials ------------------------------------------------------------------

    async def add_key(self, key: ApiKey) -> None:
        await self._execute(
            "INSERT INTO api_keys VALUES ($1, $2, $3, $4, $5, $6)",
            key.id,
            key.name,
            key.key_hash,
            list(key.modes),
            key.admin,
            float(key.created_at),
        )

    async def key_by_hash(self, key_hash: str) -> ApiKey | None:
        rows = await self._fetch(
            "SELECT id, name, key_hash, modes, admin, created_at FROM api_keys WHERE key_hash = $1",
            key_hash,
        )
        if not rows:
            return None
        r = rows[0]
        return ApiKey(r[0], r[1], r[2], tuple(r[3]), r[4], r[5])

    # -- results ----------------------------------------------------------------------

    async def claim_match(self, match_id: str, key_id: str, now: float) -> str:
        async def run(c: Conn) -> str:
            # DO NOTHING waits for a concurrent claim of the same id to commit; the SELECT
            # then runs on a fresh snapshot (READ COMMITTED) and sees whoever won.
            await c.execute(
                "INSERT INTO matches VALUES ($1, $2, $3) ON CONFLICT (match_id) DO NOTHING",
                match_id,
                key_id,
                float(now),
            )
            return str(await c.fetchval("SELECT key_id FROM matches WHERE match_id = $1", match_id))

        return await self._run(run)

    async def existing_results(
        self, match_id: str, player_ids: Sequence[str]
    ) -> dict[str, ResultRecord]:
        ids = list(player_ids)
        if not ids:
            return {}
        rows = await self._fetch(
            f"SELECT {_RESULT_COLS} FROM results "
            "WHERE match_id = $1 AND player_id = ANY($2::text[])",
            match_id,
            ids,
        )
        return {r[0]: ResultRecord(*r) for r in rows}

    async def results_since(
        self, player_ids: Sequence[str], mode: str, since: float
    ) -> dict[str, tuple[int, float]]:
        ids = list(player_ids)
        if not ids:
            return {}
        rows = await self._fetch(
            "SELECT player_id, COUNT(*), MIN(recorded_at) FROM results WHERE mode = $1 "
            "AND recorded_at >= $2 AND player_id = ANY($3::text[]) GROUP BY player_id",
            mode,
            float(since),
            ids,
        )
        return {r[0]: (r[1], r[2]) for r in rows}

    async def record(
        self,
        result: ResultRecord,
        targets: Sequence[tuple[Target, BoardSpec]],
        now: float,
        hourly_cap: int | None,
    ) -> RecordOutcome:
        pid = result.player_id

        async def run(c: Conn) -> RecordOutcome:
            await c.execute("SELECT pg_advisory_xact_lock($1, $2)", _RECORD_NS, _player_key(pid))
            # The player's group, under the same lock a move between groups takes.
            country = await c.fetchval("SELECT country FROM profiles WHERE player_id = $1", pid)
            placed = place_in_groups(targets, country)
            boards, windows = _pairs([t for t, _ in placed])
            row = await c.fetchrow(
                f"SELECT {_RESULT_COLS} FROM results WHERE player_id = $1 AND match_id = $2",
                pid,
                result.match_id,
            )
            if row is not None:
                check_replay(ResultRecord(*row), result)
                return RecordOutcome(await _totals(c, pid, [t for t, _ in placed]), True)
            if hourly_cap is not None:
                cap = await c.fetchrow(
                    "SELECT COUNT(*), MIN(recorded_at) FROM results "
                    "WHERE player_id = $1 AND mode = $2 AND recorded_at >= $3",
                    pid,
                    result.mode,
                    float(now - HOUR),
                )
                assert cap is not None
                check_cap(cap[0], hourly_cap, cap[1], now, result)
            # Shared locks on the target windows: a freeze takes the same lock exclusively,
            # so a result either commits before the freeze reads the standings, or sees the
            # window frozen here. Nothing slips in between.
            await c.execute(
                "SELECT pg_advisory_xact_lock_shared($1, k) FROM unnest($2::int[]) AS k ORDER BY k",
                _WINDOW_NS,
                sorted({window_key(b, w) for b, w in zip(boards, windows, strict=True)}),
            )
            frozen_rows = await c.fetch(
                "SELECT board, window_id FROM frozen_windows "
                "WHERE (board, window_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))",
                boards,
                windows,
            )
            live = open_targets(placed, {(r[0], r[1]) for r in frozen_rows})
            await c.execute(
                f"INSERT INTO results ({_RESULT_COLS}, recorded_at, flag) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                pid,
                result.match_id,
                result.key_id,
                result.mode,
                result.ended_at,
                result.duration_s,
                result.points,
                float(now),
                result.flag,
            )
            rows = await c.fetch(
                "SELECT board, window_id, total, reached_at, version, scored FROM tallies "
                f"WHERE player_id = $1 AND {_PAIRS} FOR UPDATE",
                pid,
                boards,
                windows,
            )
            current = {(r[0], r[1]): Tally(r[2], r[3], r[4], r[5]) for r in rows}
            # Fold everything first (step() may refuse with InvalidInput), then write in two
            # statements; a refusal rolls back the result row inserted above.
            totals: dict[str, int] = {}
            changes: list[tuple[Target, Tally]] = []
            for target, spec in live:
                cur = current.get((target.board, target.window))
                new = step(spec, target, cur, result)
                if new is not None:
                    current[(target.board, target.window)] = new
                    changes.append((target, new))
                final = new or cur
                assert final is not None
                totals[target.board] = final.total
            if changes:
                await _write_changes(c, pid, changes, now)
            return RecordOutcome(totals, False)

        # The player lock already orders identical retries; the unique retry covers a writer
        # that inserts results without it.
        return await self._run(run, retry_unique=True)

    async def totals(self, player_id: str, targets: Sequence[Target]) -> dict[str, int]:
        return await self._run(lambda c: _totals(c, player_id, targets), tx=False)

    async def player_standings(self, player_id: str) -> list[Standing]:
        rows = await self._fetch(
            f"SELECT {_TALLY_COLS} FROM tallies WHERE player_id = $1", player_id
        )
        return [_standing(r) for r in rows]

    async def standings(
        self, board: str, window: str, batch: int = 5000
    ) -> AsyncIterator[list[Standing]]:
        # Keyset pages, each on its own pooled connection: a slow consumer holds nothing.
        after = ""
        while True:
            rows = await self._fetch(
                f"SELECT {_TALLY_COLS} FROM tallies WHERE board = $1 AND window_id = $2 "
                "AND player_id > $3 ORDER BY player_id LIMIT $4",
                board,
                window,
                after,
                batch,
            )
            if not rows:
                return
            yield [_standing(r) for r in rows]
            after = rows[-1][2]

    async def windows(self, board: str) -> list[str]:
        rows = await self._fetch(
            "SELECT DISTINCT window_id FROM tallies WHERE board = $1 ORDER BY window_id", board
        )
        return [r[0] for r in rows]

    # -- outbox -----------------------------------------------------------------------

    async def claim_changes(self, limit: int, lease_s: float, now: float) -> list[Change]:
        # Row by row, never past a high-water mark: a lower id can commit after a higher one
        # was read. SKIP LOCKED lets several claimers share the rows without waiting.
        rows = await self._fetch(
            "WITH picked AS (SELECT id FROM outbox WHERE claimed_until <= $1 "
            "ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) "
            "UPDATE outbox o SET claimed_until = $3 FROM picked WHERE o.id = picked.id "
            "RETURNING o.id, o.board, o.window_id, o.player_id, o.total, o.reached_at, "
            "o.version, o.committed_at, o.removed",
            float(now),
            limit,
            float(now + lease_s),
        )
        return sorted((_change(r) for r in rows), key=lambda ch: ch.id)

    async def ack_changes(self, ids: Sequence[int]) -> None:
        ids = list(ids)
        if ids:
            await self._execute("DELETE FROM outbox WHERE id = ANY($1::bigint[])", ids)

    async def requeue_player(self, player_id: str, now: float) -> int:
        status = await self._execute(
            "INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, "
            "committed_at) SELECT board, window_id, player_id, total, reached_at, version, $2 "
            "FROM tallies WHERE player_id = $1",
            player_id,
            float(now),
        )
        return _rowcount(status)

    async def outbox_backlog(self, now: float) -> tuple[int, float]:
        [(count, oldest)] = await self._fetch("SELECT COUNT(*), MIN(committed_at) FROM outbox")
        return int(count), (now - oldest) if oldest is not None else 0.0

    # -- players ----------------------------------------------------------------------

    async def set_profile(self, profile: Profile, now: float) -> None:
        pid = profile.player_id

        async def run(c: Conn) -> None:
            # The record lock: no result folds into the old group while the player moves.
            await c.execute("SELECT pg_advisory_xact_lock($1, $2)", _RECORD_NS, _player_key(pid))
            before = await c.fetchval("SELECT country FROM profiles WHERE player_id = $1", pid)
            await c.execute(
                "INSERT INTO profiles (player_id, name, avatar, country) VALUES ($1, $2, $3, $4) "
                "ON CONFLICT (player_id) DO UPDATE SET name = excluded.name, "
                "avatar = excluded.avatar, country = excluded.country",
                pid,
                profile.name,
                profile.avatar,
                profile.country,
            )
            old, new = before or UNKNOWN_GROUP, profile.country or UNKNOWN_GROUP
            if old != new:
                await _move_groups(c, pid, old, new, now)

        await self._run(run)

    async def profiles(self, player_ids: Sequence[str]) -> dict[str, Profile]:
        ids = list(player_ids)
        if not ids:
            return {}
        rows = await self._fetch(
            "SELECT player_id, name, avatar, country FROM profiles "
            "WHERE player_id = ANY($1::text[])",
            ids,
        )
        return {r[0]: Profile(r[0], r[1], r[2], r[3]) for r in rows}

    async def set_friends(self, player_id: str, friends: Sequence[str]) -> None:
        async def run(c: Conn) -> None:
            # Without the lock two concurrent replacements would both delete the old list
            # and leave the union of the new ones; with it, the last one wins, as on SQLite.
            await c.execute(
                "SELECT pg_advisory_xact_lock($1, $2)", _FRIENDS_NS, _player_key(player_id)
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
        return [r[0] for r in rows]

    # -- bans -------------------------------------------------------------------------

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
        return _rowcount(status) > 0

    async def banned(self, player_ids: Sequence[str]) -> set[str]:
        ids = list(set(player_ids))
        if not ids:
            return set()
        rows = await self._fetch(
            "SELECT player_id FROM bans WHERE player_id = ANY($1::text[])", ids
        )
        return {r[0] for r in rows}

    # -- review -----------------------------------------------------------------------

    async def recent_points(
        self, player_ids: Sequence[str], mode: str, limit: int
    ) -> dict[str, list[int]]:
        rows = await self._fetch(
            "SELECT p, r.points FROM unnest($1::text[]) AS p CROSS JOIN LATERAL ("
            "  SELECT points, ended_at FROM results WHERE player_id = p AND mode = $2 "
            "  ORDER BY ended_at DESC LIMIT $3) AS r ORDER BY p, r.ended_at DESC",
            list(player_ids),
            mode,
            limit,
        )
        out: dict[str, list[int]] = {p: [] for p in player_ids}
        for r in rows:
            out[r[0]].append(r[1])
        return out

    async def flagged(self, modes: Sequence[str] | None, limit: int) -> list[Flagged]:
        rows = await self._fetch(
            "SELECT player_id, match_id, mode, points, ended_at, recorded_at, flag FROM results "
            "WHERE flag IS NOT NULL AND ($1::text[] IS NULL OR mode = ANY($1::text[])) "
            "ORDER BY recorded_at DESC LIMIT $2",
            None if modes is None else list(modes),
            limit,
        )
        return [Flagged(*r) for r in rows]

    # -- the life of a window -----------------------------------------------------------

    async def freeze(self, board: BoardSpec, window: Window, keep: int, now: float) -> bool:
        lock = (_WINDOW_NS, window_key(board.name, window.id))
        return await self._run(lambda c: lifecycle.freeze(c, board, window, keep, now, lock))

    async def frozen(self, board: str) -> dict[str, FrozenWindow]:
        return await self._run(lambda c: lifecycle.frozen(c, board), tx=False)

    async def final_page(self, board: str, window: str, first: int, last: int) -> list[FinalEntry]:
        return await self._run(
            lambda c: lifecycle.final_page(c, board, window, first, last), tx=False
        )

    async def final_entry(self, board: str, window: str, player_id: str) -> FinalEntry | None:
        return await self._run(
            lambda c: lifecycle.final_entry(c, board, window, player_id), tx=False
        )

    async def set_archive(self, board: str, window: str, archive: str, checksum: str) -> None:
        await self._run(lambda c: lifecycle.set_archive(c, board, window, archive, checksum))


async def _move_groups(c: Conn, player_id: str, old: str, new: str, now: float) -> None:
    """Move the player's tallies on grouped boards from group ``old`` to ``new``: each
    leaves a removal behind in the old group and arrives whole in the new one, both with a
    newer version, so no late change of the old group can put the player back there."""
    rows = await c.fetch(
        "SELECT t.board, t.window_id, t.total, t.reached_at, t.version, t.scored FROM tallies t "
        "WHERE t.player_id = $1 AND t.window_id LIKE $2 AND NOT EXISTS (SELECT 1 FROM "
        "frozen_windows f WHERE f.board = t.board AND f.window_id = t.window_id) FOR UPDATE",
        player_id,
        f"%{GROUP_SEP}{old}",
    )
    for board, window_id, total, reached, version, scored in rows:
        base, _ = split_group(window_id)
        moved = f"{base}{GROUP_SEP}{new}"
        v = version + 1
        await c.execute(
            "DELETE FROM tallies WHERE board = $1 AND window_id = $2 AND player_id = $3",
            board,
            window_id,
            player_id,
        )
        await c.execute(
            "INSERT INTO tallies (board, window_id, player_id, total, reached_at, version, scored) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7)",
            board,
            moved,
            player_id,
            total,
            reached,
            v,
            scored,
        )
        await c.executemany(
            "INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, "
            "committed_at, removed) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            [
                (board, window_id, player_id, total, reached, v, float(now), True),
                (board, moved, player_id, total, reached, v, float(now), False),
            ],
        )


async def _write_changes(
    c: Conn, player_id: str, changes: list[tuple[Target, Tally]], now: float
) -> None:
    """Upsert each changed tally once, at its last value, and append one outbox row per
    change, in fold order."""
    last = {(t.board, t.window): (t, n) for t, n in changes}
    final = list(last.values())
    await c.execute(
        "INSERT INTO tallies (board, window_id, player_id, total, reached_at, version, scored) "
        "SELECT b, w, $1, t, r, v, s FROM unnest($2::text[], $3::text[], $4::bigint[], "
        "$5::bigint[], $6::bigint[], $7::boolean[]) AS u(b, w, t, r, v, s) "
        "ON CONFLICT (board, window_id, player_id) DO UPDATE SET total = excluded.total, "
        "reached_at = excluded.reached_at, version = excluded.version, "
        "scored = excluded.scored",
        player_id,
        *_columns(final),
        [n.scored for _, n in final],
    )
    await c.execute(
        "INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, "
        f"committed_at) SELECT b, w, $1, t, r, v, $7 FROM {_UNNEST} ORDER BY n",
        player_id,
        *_columns(changes),
        float(now),
    )


def _columns(changes: list[tuple[Target, Tally]]) -> list[list[str] | list[int]]:
    """Rows as the five parallel arrays that ``_UNNEST`` takes as $2..$6."""
    return [
        [t.board for t, _ in changes],
        [t.window for t, _ in changes],
        [n.total for _, n in changes],
        [n.reached_at for _, n in changes],
        [n.version for _, n in changes],
    ]


async def _totals(c: Conn, player_id: str, targets: Sequence[Target]) -> dict[str, int]:
    boards, windows = _pairs(targets)
    rows = await c.fetch(
        f"SELECT board, window_id, total FROM tallies WHERE player_id = $1 AND {_PAIRS}",
        player_id,
        boards,
        windows,
    )
    found = {(r[0], r[1]): r[2] for r in rows}
    # Built in target order, like sqlite.py, so a repeated board name resolves the same way.
    return {t.board: found[(t.board, t.window)] for t in targets if (t.board, t.window) in found}


def _rowcount(status: str) -> int:
    """The row count at the end of a command tag such as ``INSERT 0 3`` or ``DELETE 1``."""
    return int(status.rsplit(" ", 1)[-1])


def _standing(r: asyncpg.Record) -> Standing:
    return Standing(r[0], r[1], r[2], Tally(r[3], r[4], r[5]))


def _change(r: asyncpg.Record) -> Change:
    return Change(r[0], r[1], r[2], r[3], Tally(r[4], r[5], r[6]), r[7], r[8])
