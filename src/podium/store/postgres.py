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
import contextlib
import dataclasses
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

import asyncpg
from asyncpg import exceptions as pgx

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
from podium.ports import PriorResults, Seen
from podium.recording import (
    HOUR,
    UNKNOWN_GROUP,
    check_cap,
    check_replay,
    fold_targets,
    open_targets,
    place_in_groups,
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

# Everything a record decides on, in one statement after its locks: the result this match
# already has (columns 0-4, NULL when none); the count and oldest of the player's results in
# the mode since $4 (5-6; 0 when $4 is NULL); and per target, in the order of $5 and $6,
# whether its window is frozen (7) and its tally, locked FOR UPDATE (8-11, NULL when none).
_RECORD_READ = (
    "SELECT r.key_id, r.mode, r.ended_at, r.duration_s, r.points, cap.n, cap.oldest, t.* "
    "FROM (SELECT COUNT(*), MIN(recorded_at) FROM results "
    "  WHERE player_id = $1 AND mode = $3 AND recorded_at >= $4::float8) AS cap(n, oldest) "
    "CROSS JOIN (SELECT array_agg(f.board IS NOT NULL ORDER BY u.n), "
    "  array_agg(x.total ORDER BY u.n), array_agg(x.reached_at ORDER BY u.n), "
    "  array_agg(x.version ORDER BY u.n), array_agg(x.scored ORDER BY u.n) "
    "  FROM unnest($5::text[], $6::text[]) WITH ORDINALITY AS u(b, w, n) "
    "  LEFT JOIN frozen_windows f ON f.board = u.b AND f.window_id = u.w "
    "  LEFT JOIN LATERAL (SELECT total, reached_at, version, scored FROM tallies "
    "    WHERE board = u.b AND window_id = u.w AND player_id = $1 FOR UPDATE) AS x ON true"
    ") AS t "
    "LEFT JOIN results r ON r.player_id = $1 AND r.match_id = $2"
)
# Every write of a record in one statement: the result, each changed tally at its last
# value ($10-$15), and one outbox row per change in fold order ($16-$20; migration 006).
_RECORD_WRITE = (
    "SELECT podium_write_record($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::text[], "
    "$11::text[], $12::bigint[], $13::bigint[], $14::bigint[], $15::boolean[], $16::text[], "
    "$17::text[], $18::bigint[], $19::bigint[], $20::bigint[])"
)
# A whole record in one autocommitted statement, from a state read before (migration 006):
# the result ($1-$9), the locks ($10-$13), what the fold was computed from ($14-$23), and
# the writes as above ($24-$34). Returns false, having written nothing, if any of it changed.
_RECORD_SEEN = (
    "SELECT podium_record_seen($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, "
    "$13::int4[], $14, $15, $16::float8, $17, $18::text[], $19::text[], $20::bigint[], "
    "$21::bigint[], $22::bigint[], $23::boolean[], $24::text[], $25::text[], $26::bigint[], "
    "$27::bigint[], $28::bigint[], $29::boolean[], $30::text[], $31::text[], $32::bigint[], "
    "$33::bigint[], $34::bigint[])"
)


# Claiming a match id: the insert does nothing if the id has an owner, and the owner is
# whoever inserted first (NULL when that was a concurrent claim this snapshot cannot see).
def _claim(match: str, key: str, now: str) -> str:
    return (
        f"WITH claimed AS (INSERT INTO matches VALUES ({match}, {key}, {now}) "
        "ON CONFLICT (match_id) DO NOTHING RETURNING key_id) "
    )


def _owner_of(match: str) -> str:
    return (
        "COALESCE((SELECT key_id FROM claimed), "
        f"(SELECT key_id FROM matches WHERE match_id = {match}))"
    )


_CLAIM = f"{_claim('$1', '$2', '$3')} SELECT {_owner_of('$1')}"

# The checks before a match's writes, for every player in one statement: the result this
# match already has (columns 1-5), the last $4 points in the mode, the count and oldest of
# results since $5, the country, and with targets ($6-$8, grouped ones placed in the
# player's group as ``place_in_groups`` does, with $9 and $10), per target in order whether
# its window is frozen and its tally (NULL when none).
_PRIOR_COLUMNS = (
    "p, e.key_id, e.mode, e.ended_at, e.duration_s, e.points, "
    "ARRAY(SELECT points FROM results WHERE player_id = p AND mode = $3 "
    "  ORDER BY ended_at DESC LIMIT $4), cap.n, cap.oldest, pr.country, t.*"
)
_PRIOR_FROM = (
    "FROM unnest($1::text[]) AS p "
    "LEFT JOIN results e ON e.player_id = p AND e.match_id = $2 "
    "LEFT JOIN profiles pr ON pr.player_id = p "
    "CROSS JOIN LATERAL (SELECT COUNT(*), MIN(recorded_at) FROM results "
    "  WHERE player_id = p AND mode = $3 AND recorded_at >= $5::float8) AS cap(n, oldest) "
    "CROSS JOIN LATERAL (SELECT array_agg(f.board IS NOT NULL ORDER BY u.n), "
    "  array_agg(x.total ORDER BY u.n), array_agg(x.reached_at ORDER BY u.n), "
    "  array_agg(x.version ORDER BY u.n), array_agg(x.scored ORDER BY u.n) "
    "  FROM unnest($6::text[], $7::text[], $8::boolean[]) WITH ORDINALITY AS u(b, w, g, n) "
    "  CROSS JOIN LATERAL (SELECT CASE WHEN u.g "
    "    THEN u.w || $9 || COALESCE(NULLIF(pr.country, ''), $10) ELSE u.w END) AS pl(w) "
    "  LEFT JOIN frozen_windows f ON f.board = u.b AND f.window_id = pl.w "
    "  LEFT JOIN tallies x ON x.board = u.b AND x.window_id = pl.w AND x.player_id = p"
    ") AS t"
)
_PRIOR_READ = f"SELECT {_PRIOR_COLUMNS} {_PRIOR_FROM}"
# The claim and the read in one statement, the claim's key and time after the read's
# parameters ($11, $12); the owner is the last column of every row.
_OPEN_MATCH = (
    f"{_claim('$2', '$11', '$12')} SELECT {_PRIOR_COLUMNS}, {_owner_of('$2')} {_PRIOR_FROM}"
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
    """The advisory lock key of one board window (signed 32-bit, like ``_player_key``).

    Every group of a grouped board's window shares its base window's key (``2026-W44@FR``
    locks ``2026-W44``), so a record can take its window locks before it reads which group
    the player is in, in the round trip that opens its transaction."""
    base, _ = split_group(window)
    return _player_key(f"{board}\x00{base}")


def _window_locks(targets: Sequence[Target]) -> list[int]:
    return sorted({window_key(t.board, t.window) for t in targets})


def _record_locks(player_id: str, targets: Sequence[Target]) -> str:
    """The advisory locks of one record, as SQL text: the player's lock, then shared locks on
    the target windows in key order (``podium_record_seen`` takes the same). A freeze takes
    its window's lock exclusively, so a result either commits before the freeze reads the
    standings, or sees the window frozen. The keys are integers computed here, so writing
    them into the text is safe (a string never would be)."""
    return "; ".join(
        [f"SELECT pg_advisory_xact_lock({_RECORD_NS}, {_player_key(player_id)})"]
        + [
            f"SELECT pg_advisory_xact_lock_shared({_WINDOW_NS}, {k})"
            for k in _window_locks(targets)
        ]
    )


@asynccontextmanager
async def _transaction(c: Conn, locks: str) -> AsyncIterator[None]:
    """A transaction that opens with its advisory locks in one round trip (the simple
    protocol runs several statements when there are no arguments), where
    ``conn.transaction()`` would spend one on BEGIN alone.

    Any failure rolls back here, whatever state the connection is in (a ROLLBACK outside a
    transaction only warns), so it goes back to the pool clean: the pool would roll back
    too, but reports that as an error. If the ROLLBACK fails as well (the connection is
    gone, or busy with a cancelled query), the first error is the one raised, and the pool
    closes the connection when it fails to reset it."""
    try:
        await c.execute(f"BEGIN; {locks}")
        yield
        await c.execute("COMMIT")
    except BaseException:
        if not c.is_closed():
            with contextlib.suppress(Exception):
                await c.execute("ROLLBACK")
        raise


async def _keep_session(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    """The pool's reset of a released connection: nothing, on purpose.

    podium leaves no session state behind (no SET, LISTEN, cursors or session advisory
    locks: every lock it takes ends with its transaction), so asyncpg's default reset query
    (unlock all, CLOSE ALL, UNLISTEN, RESET ALL) would only add a round trip to every call.
    The pool still rolls back a transaction left open before it calls this."""


def _pairs(targets: Sequence[Target]) -> tuple[list[str], list[str]]:
    return [t.board for t in targets], [t.window for t in targets]


class PostgresStore:
    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        read_pool_size: int = 10,
        connect_timeout: float = 5.0,
        command_timeout: float = 10.0,
        acquire_timeout: float = 5.0,
        vacuum_outbox_every: int = 10_000,
    ) -> None:
        self.url = url
        self.pool_size = pool_size
        self.read_pool_size = read_pool_size
        self._vacuum_every = vacuum_outbox_every
        self._acked = 0  # outbox rows acked since this store last vacuumed the outbox
        self._connect_timeout = connect_timeout
        self._command_timeout = command_timeout
        self._acquire_timeout = acquire_timeout
        # Two pools: a match's statements (its read, its writes) and the other writes in
        # one, the single-statement reads of the board and admin endpoints in the other.
        # Write transactions hold their connection through lock waits and commit flushes;
        # from one shared pool, a burst of them took every connection, and board reads
        # (which look up names here) queued behind them: read p99 followed write p99.
        self._pools: dict[bool, asyncpg.Pool[asyncpg.Record]] = {}
        self._opening = asyncio.Lock()

    @classmethod
    def from_url(cls, url: str, pool_size: int = 10, read_pool_size: int = 10) -> PostgresStore:
        """Does not connect: the pools open on first use, so a store can be built anywhere."""
        return cls(url, pool_size=pool_size, read_pool_size=read_pool_size)

    # -- plumbing ---------------------------------------------------------------------

    async def _get_pool(self, reads: bool) -> asyncpg.Pool[asyncpg.Record]:
        pool = self._pools.get(reads)
        if pool is not None:
            return pool
        async with self._opening:  # one pool each, however many first calls race here
            if reads not in self._pools:
                self._pools[reads] = await asyncpg.create_pool(
                    self.url,
                    min_size=1,
                    max_size=self.read_pool_size if reads else self.pool_size,
                    timeout=self._connect_timeout,
                    command_timeout=self._command_timeout,
                    reset=_keep_session,
                )
            return self._pools[reads]

    async def _run(
        self,
        fn: Callable[[Conn], Awaitable[T]],
        *,
        tx: bool = True,
        retry_unique: bool = False,
        reads: bool = False,
    ) -> T:
        """Run ``fn`` on a pooled connection, in one transaction unless ``tx`` is False;
        ``reads``: on the pool of single-statement reads.

        ``retry_unique``: a unique violation means a concurrent transaction inserted the same
        key first; run once more, and this time the row is there to be read.
        """
        attempt = 0
        unique_retried = False
        while True:
            attempt += 1
            try:
                pool = await self._get_pool(reads)
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
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            try:
                await asyncio.wait_for(pool.close(), self._command_timeout)
            except TimeoutError:
                pool.terminate()  # a connection still checked out must not hang shutdown

    async def ping(self) -> None:
        await self._fetch("SELECT 1")

    # Single statements run outside an explicit transaction: each one is atomic on its own,
    # and BEGIN/COMMIT would only add two round trips.
    async def _fetch(self, sql: str, *args: object) -> list[asyncpg.Record]:
        return await self._run(lambda c: c.fetch(sql, *args), tx=False, reads=True)

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
            owner = await c.fetchval(_CLAIM, match_id, key_id, float(now))
            return await _owner(c, match_id, owner)

        # One statement, so autocommit: BEGIN and COMMIT would only add round trips.
        return await self._run(run, tx=False)

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
        if not player_ids:  # the read has a row per player, and so nowhere to put the owner
            return await self.claim_match(match_id, key_id, now), PriorResults({}, {}, {})
        args = (*self._prior_args(match_id, player_ids, mode, recent, since, targets), key_id)

        async def run(c: Conn) -> tuple[str, list[asyncpg.Record]]:
            rows = await c.fetch(_OPEN_MATCH, *args, float(now))
            return await _owner(c, match_id, rows[0][-1]), rows

        # One autocommitted statement: the claim commits with it, as it did on its own.
        owner, rows = await self._run(run, tx=False)
        return owner, self._prior(match_id, rows, targets)

    async def prior_results(
        self,
        match_id: str,
        player_ids: Sequence[str],
        mode: str,
        recent: int,
        since: float | None,
        targets: Sequence[tuple[Target, BoardSpec]] = (),
    ) -> PriorResults:
        args = self._prior_args(match_id, player_ids, mode, recent, since, targets)
        # On the writes' pool: this read is the first step of a match's writes, and comes
        # in bursts with them, which the board reads should not queue behind.
        rows = await self._run(lambda c: c.fetch(_PRIOR_READ, *args), tx=False)
        return self._prior(match_id, rows, targets)

    @staticmethod
    def _prior_args(
        match_id: str,
        player_ids: Sequence[str],
        mode: str,
        recent: int,
        since: float | None,
        targets: Sequence[tuple[Target, BoardSpec]],
    ) -> tuple[object, ...]:
        boards, windows = _pairs([t for t, _ in targets])
        grouped = [spec.group_by is not None for _, spec in targets]
        return (
            list(player_ids),
            match_id,
            mode,
            recent,
            since,
            boards,
            windows,
            grouped,
            GROUP_SEP,
            UNKNOWN_GROUP,
        )

    @staticmethod
    def _prior(
        match_id: str, rows: list[asyncpg.Record], targets: Sequence[tuple[Target, BoardSpec]]
    ) -> PriorResults:
        seen = {}
        if targets:
            for r in rows:
                placed = place_in_groups(targets, r[9])
                frozen, tallies = _target_state(placed, r[10:15])
                seen[r[0]] = Seen(r[9], frozenset(frozen), tallies)
        return PriorResults(
            existing={
                r[0]: ResultRecord(r[0], match_id, *r[1:6]) for r in rows if r[1] is not None
            },
            recent_points={r[0]: list(r[6]) for r in rows},
            counts={r[0]: (r[7], r[8]) for r in rows if r[7] > 0},
            seen=seen,
        )

    async def record(
        self,
        result: ResultRecord,
        targets: Sequence[tuple[Target, BoardSpec]],
        now: float,
        hourly_cap: int | None,
        prior: PriorResults | None = None,
    ) -> RecordOutcome:
        pid = result.player_id
        since = None if hourly_cap is None else float(now - HOUR)
        seen = None
        if prior is not None and pid not in prior.existing:
            seen = prior.seen.get(pid)

        async def run(c: Conn) -> RecordOutcome:
            if seen is not None:
                assert prior is not None
                count, oldest = prior.counts.get(pid, (0, None))
                if hourly_cap is not None:
                    check_cap(count, hourly_cap, oldest, now, result)
                written = await _record_seen(c, result, targets, seen, now, since, count)
                if written is not None:
                    return written
                out = await _record_locked(c, result, targets, now, since, hourly_cap)
                return dataclasses.replace(out, reread=True)
            return await _record_locked(c, result, targets, now, since, hourly_cap)

        # The player lock already orders identical retries; the unique retry covers a writer
        # that inserts results without it.
        return await self._run(run, tx=False, retry_unique=True)

    async def totals(self, player_id: str, targets: Sequence[Target]) -> dict[str, int]:
        return await self._run(lambda c: _totals(c, player_id, targets), tx=False, reads=True)

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

    async def claim_changes(
        self, limit: int, lease_s: float, now: float
    ) -> list[Change | ProfileChange]:
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
        return [_change(r) for r in sorted(rows, key=lambda r: int(r[0]))]

    async def ack_changes(self, ids: Sequence[int]) -> None:
        ids = list(ids)
        if ids:
            await self._execute("DELETE FROM outbox WHERE id = ANY($1::bigint[])", ids)
            self._acked += len(ids)
            if self._acked >= self._vacuum_every:
                self._acked = 0
                await self._vacuum_outbox()

    async def lease_changes(self, ids: Sequence[int], until: float) -> None:
        ids = list(ids)
        if ids:
            await self._execute(
                "UPDATE outbox SET claimed_until = $2 WHERE id = ANY($1::bigint[])",
                ids,
                float(until),
            )

    async def _vacuum_outbox(self) -> None:
        """Every row leaves two dead versions behind in the outbox (its claim, its delete),
        and a claim's index scan walks over every dead entry older than the live rows: at
        500 results/s that is about 2,500 more a second, and the claims, then the updater,
        then the whole process slowed from one minute to the next (measured in BENCHMARKS.md).
        Autovacuum visits a database once a minute at best, too late for a table this busy
        and this small, so the updater that made the dead rows vacuums them (which blocks
        neither writes nor claims)."""
        # A role that does not own the table only gets a warning, and autovacuum does it.
        await self._execute("VACUUM (SKIP_LOCKED) outbox")

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

    async def set_profile(self, profile: Profile, now: float) -> int:
        pid = profile.player_id

        async def run(c: Conn) -> int:
            # The record lock: no result folds into the old group while the player moves.
            # It also orders two changes of one profile, so versions follow commit order.
            await c.execute("SELECT pg_advisory_xact_lock($1, $2)", _RECORD_NS, _player_key(pid))
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
                "INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, "
                "committed_at) VALUES ($1, '', $2, 0, 0, $3, $4)",
                PROFILE_CHANGE,
                pid,
                version,
                float(now),
            )
            old, new = before or UNKNOWN_GROUP, profile.country or UNKNOWN_GROUP
            if old != new:
                await _move_groups(c, pid, old, new, now)
            return version

        return await self._run(run)

    async def profiles(self, player_ids: Sequence[str]) -> dict[str, Profile]:
        found = await self.versioned_profiles(player_ids)
        return {p: profile for p, (profile, _) in found.items()}

    async def versioned_profiles(self, player_ids: Sequence[str]) -> dict[str, tuple[Profile, int]]:
        ids = list(player_ids)
        if not ids:
            return {}
        rows = await self._fetch(
            "SELECT player_id, name, avatar, country, version FROM profiles "
            "WHERE player_id = ANY($1::text[])",
            ids,
        )
        return {r[0]: (Profile(r[0], r[1], r[2], r[3]), r[4]) for r in rows}

    async def all_profiles(self, after: str, limit: int) -> list[tuple[Profile, int]]:
        rows = await self._fetch(
            "SELECT player_id, name, avatar, country, version FROM profiles "
            "WHERE player_id > $1 ORDER BY player_id LIMIT $2",
            after,
            limit,
        )
        return [(Profile(r[0], r[1], r[2], r[3]), r[4]) for r in rows]

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
        return await self._run(lambda c: lifecycle.frozen(c, board), tx=False, reads=True)

    async def final_page(self, board: str, window: str, first: int, last: int) -> list[FinalEntry]:
        return await self._run(
            lambda c: lifecycle.final_page(c, board, window, first, last), tx=False, reads=True
        )

    async def final_entry(self, board: str, window: str, player_id: str) -> FinalEntry | None:
        return await self._run(
            lambda c: lifecycle.final_entry(c, board, window, player_id), tx=False, reads=True
        )

    async def set_archive(self, board: str, window: str, archive: str, checksum: str) -> None:
        await self._run(lambda c: lifecycle.set_archive(c, board, window, archive, checksum))


async def _owner(c: Conn, match_id: str, owner: str | None) -> str:
    if owner is None:
        # DO NOTHING waited for a concurrent claim of the same id to commit, after this
        # statement's snapshot was taken: only a new statement (READ COMMITTED) sees who won.
        owner = await c.fetchval("SELECT key_id FROM matches WHERE match_id = $1", match_id)
    return str(owner)


async def _record_seen(
    c: Conn,
    result: ResultRecord,
    targets: Sequence[tuple[Target, BoardSpec]],
    seen: Seen,
    now: float,
    since: float | None,
    count: int,
) -> RecordOutcome | None:
    """A record in one round trip, folded from what ``prior_results`` saw; None (nothing
    written) when any of it changed before the locks were granted."""
    pid = result.player_id
    placed = place_in_groups(targets, seen.country)
    live = open_targets(placed, seen.frozen)
    totals, changes = fold_targets(live, dict(seen.tallies), result)
    was = [seen.tallies.get((t.board, t.window)) for t, _ in live]
    boards, windows = _pairs([t for t, _ in live])
    written = await c.fetchval(
        _RECORD_SEEN,
        *_result_args(result, now),
        _RECORD_NS,
        _player_key(pid),
        _WINDOW_NS,
        _window_locks([t for t, _ in targets]),
        any(spec.group_by for _, spec in targets),
        seen.country,
        since,
        count,
        boards,
        windows,
        [x and x.total for x in was],
        [x and x.reached_at for x in was],
        [x and x.version for x in was],
        [x and x.scored for x in was],
        *_write_args(changes),
    )
    return RecordOutcome(totals, False) if written else None


async def _record_locked(
    c: Conn,
    result: ResultRecord,
    targets: Sequence[tuple[Target, BoardSpec]],
    now: float,
    since: float | None,
    hourly_cap: int | None,
) -> RecordOutcome:
    """A record that reads everything it decides on inside its transaction, after its
    locks: four round trips (five on grouped boards)."""
    pid = result.player_id
    async with _transaction(c, _record_locks(pid, [t for t, _ in targets])):
        # Every read is a statement after the locks: READ COMMITTED takes a snapshot per
        # statement, so it sees whatever committed before they were granted.
        country = None
        if any(spec.group_by for _, spec in targets):
            # The player's group, under the same lock a move between groups takes.
            country = await c.fetchval("SELECT country FROM profiles WHERE player_id = $1", pid)
        placed = place_in_groups(targets, country)
        boards, windows = _pairs([t for t, _ in placed])
        row = await c.fetchrow(
            _RECORD_READ, pid, result.match_id, result.mode, since, boards, windows
        )
        assert row is not None
        frozen, current = _target_state(placed, row[7:12])
        if row[0] is not None:
            check_replay(ResultRecord(pid, result.match_id, *row[0:5]), result)
            # In target order, like sqlite.py, so a repeated board name resolves the same way.
            stored = {
                t.board: current[(t.board, t.window)].total
                for t, _ in placed
                if (t.board, t.window) in current
            }
            return RecordOutcome(stored, True)
        if hourly_cap is not None:
            check_cap(row[5], hourly_cap, row[6], now, result)
        # Fold everything first (step() may refuse with InvalidInput, and then nothing is
        # written), then write it all in one statement.
        totals, changes = fold_targets(open_targets(placed, frozen), current, result)
        await c.execute(_RECORD_WRITE, *_result_args(result, now), *_write_args(changes))
        return RecordOutcome(totals, False)


def _result_args(result: ResultRecord, now: float) -> list[object]:
    return [
        result.player_id,
        result.match_id,
        result.key_id,
        result.mode,
        result.ended_at,
        result.duration_s,
        result.points,
        float(now),
        result.flag,
    ]


def _write_args(changes: list[tuple[Target, Tally]]) -> list[object]:
    """The tally and outbox columns of ``podium_write_record``: each changed tally at its last
    value, then every change in fold order."""
    last = list({(t.board, t.window): (t, n) for t, n in changes}.values())
    return [*_columns(last), [n.scored for _, n in last], *_columns(changes)]


def _target_state(
    placed: Sequence[tuple[Target, BoardSpec]], columns: Sequence[list[object] | None]
) -> tuple[set[tuple[str, str]], dict[tuple[str, str], Tally]]:
    """The per-target columns of ``_RECORD_READ`` and ``_PRIOR_READ`` (whether the window
    is frozen; total, reached_at, version, scored, each NULL when there is no tally), in the
    order of ``placed``: the frozen windows, and the tallies there are."""
    frozen_flags, *tally_columns = (a or [] for a in columns)
    frozen = {(t.board, t.window) for (t, _), f in zip(placed, frozen_flags, strict=True) if f}
    tallies = {
        (t.board, t.window): Tally(*tally)
        for (t, _), *tally in zip(placed, *tally_columns, strict=True)
        if tally[0] is not None
    }
    return frozen, tallies


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


def _columns(changes: list[tuple[Target, Tally]]) -> list[list[str] | list[int]]:
    """Rows as five parallel arrays: board, window, total, reached_at, version."""
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


def _change(r: asyncpg.Record) -> Change | ProfileChange:
    if r[1] == PROFILE_CHANGE:
        return ProfileChange(r[3], r[6], r[7], handle=r[0])
    return Change(r[1], r[2], r[3], Tally(r[4], r[5], r[6]), r[7], r[8], handle=r[0])
