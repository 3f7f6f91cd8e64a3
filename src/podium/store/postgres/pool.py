"""The production score store's plumbing: PostgreSQL through two asyncpg pools.

Every use case is one transaction (or one autocommitted statement, where one is enough).
Driver errors never leave this package: ``_run`` retries serialization failures and
deadlocks, then ``errors.translate`` makes every driver error either ``StoreUnavailable``
(nothing was committed, a retry is safe) or ``InternalError`` (a bug).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from functools import partial
from typing import TYPE_CHECKING, TypeVar

import asyncpg
from asyncpg import exceptions as pgx

from podium.domain.models import Target
from podium.store.common import migrations
from podium.store.postgres.errors import RETRIED, translate
from podium.store.postgres.locks import MIGRATE

if TYPE_CHECKING:  # the proxy is generic only in the stubs
    from typing import TypeAlias

    from asyncpg.pool import PoolConnectionProxy

    Conn: TypeAlias = PoolConnectionProxy[asyncpg.Record]

T = TypeVar("T")

# Set while a request waits for a connection (``Database._run``): a connection opened for
# it is not warmed (``Database._open``), since the request would wait for the warming.
_WAITED_ON: ContextVar[bool] = ContextVar("waited_on", default=False)

_ATTEMPTS = 4  # tries of a transaction that hit a serialization failure or a deadlock

# Where the applied migrations of a part are noted (create, the versions applied, note one):
# the store's own, and the parts of a split store's (a column says which), which came later.
_STORE_LEDGER = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY)",
    "SELECT version FROM schema_migrations",
    "INSERT INTO schema_migrations VALUES ($1)",
)
_SPLIT_LEDGER = (
    "CREATE TABLE IF NOT EXISTS split_migrations "
    "(part text NOT NULL, version integer NOT NULL, PRIMARY KEY (part, version))",
    "SELECT version FROM split_migrations WHERE part = $1",
    "INSERT INTO split_migrations VALUES ($1, $2)",
)


def pairs(targets: Sequence[Target]) -> tuple[list[str], list[str]]:
    """Board windows as two parallel arrays (``unnest($2::text[], $3::text[])``)."""
    return [t.board for t in targets], [t.window for t in targets]


def rowcount(status: str) -> int:
    """The row count at the end of a command tag such as ``INSERT 0 3`` or ``DELETE 1``."""
    return int(status.rsplit(" ", 1)[-1])


@asynccontextmanager
async def transaction(c: Conn, locks: str) -> AsyncIterator[None]:
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
        # A connection the kernel dropped (a hung link, ``_link``) was closed and released
        # back to the pool by asyncpg already: even asking it ``is_closed`` raises, and that
        # error must not stand in for the first one.
        with contextlib.suppress(Exception):
            if not c.is_closed():
                await c.execute("ROLLBACK")
        raise


async def _keep_session(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    """The pool's reset of a released connection: nothing, on purpose.

    podium leaves no session state behind (no SET, LISTEN, cursors or session advisory
    locks: every lock it takes ends with its transaction), so asyncpg's default reset query
    (unlock all, CLOSE ALL, UNLISTEN, RESET ALL) would only add a round trip to every call.
    The pool still rolls back a transaction left open before it calls this."""


def keepalive(timeout_s: float) -> tuple[int, int, int]:
    """TCP keepalive for a link that must be found dead within about ``timeout_s``: idle
    seconds before the first probe, seconds between probes, probes unanswered (whole
    seconds, at least 1, as the kernel and Postgres take them)."""
    idle = max(1, int(timeout_s / 2))
    interval = max(1, int(timeout_s / 4))
    count = max(1, int((timeout_s - idle) / interval))
    return idle, interval, count


def server_link(timeout_s: float) -> dict[str, str]:
    """The same bounds for Postgres's end of each connection (its ``tcp_user_timeout`` and
    ``tcp_keepalives_*``, set for the session at connect): a backend whose client is cut off
    is ended, its transaction rolled back and its connection slot freed, within about
    ``timeout_s``, instead of after the kernel's two hours of silence. Without it, a client
    that drops hung connections and opens new ones fills ``max_connections`` ("too many
    clients")."""
    idle, interval, count = keepalive(timeout_s)
    return {
        "tcp_user_timeout": str(int(timeout_s * 1000)),
        "tcp_keepalives_idle": str(idle),
        "tcp_keepalives_interval": str(interval),
        "tcp_keepalives_count": str(count),
    }


async def _link(conn: asyncpg.Connection[asyncpg.Record], *, timeout_s: float) -> None:
    """A new connection's socket made to fail within about ``timeout_s`` when its link
    hangs: ``TCP_USER_TIMEOUT`` (bytes sent and not acknowledged that long: a link cut
    either way, or one whose answers are lost) and keepalive probes (a statement sent,
    acknowledged, and its answer never coming). The kernel then closes it, the statement
    in flight fails with the connection lost (503: ``errors.py``) and the pool replaces it.
    A Unix socket has neither, and needs neither."""
    transport = getattr(conn, "_transport", None)
    sock = None if transport is None else transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    idle, interval, count = keepalive(timeout_s)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (
        ("TCP_KEEPIDLE", idle),
        ("TCP_KEEPINTVL", interval),
        ("TCP_KEEPCNT", count),
        ("TCP_USER_TIMEOUT", int(timeout_s * 1000)),
    ):
        if hasattr(socket, option):  # Linux has them all; elsewhere, what there is
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


@asynccontextmanager
async def _take(pool: asyncpg.Pool[asyncpg.Record], timeout_s: float) -> AsyncIterator[Conn]:
    """``pool.acquire``, a connection it opens for it marked as waited on (``_WAITED_ON``)."""
    waited_on = _WAITED_ON.set(True)
    try:
        conn = await pool.acquire(timeout=timeout_s)
    finally:
        _WAITED_ON.reset(waited_on)
    try:
        yield conn
    finally:
        await pool.release(conn)


class Database:
    """The connection pools and the one way every port runs a statement or a transaction
    (``_run``), with its retries and its error table (``errors.py``)."""

    def warm_statements(self, reads: bool) -> list[tuple[str, tuple[object, ...]]]:
        """The statements a new connection of the reads' pool (``reads``) or the writes'
        prepares when it opens (``_open``), each with harmless arguments: a port whose
        statement starts most requests adds it (calling this first), so that a connection
        opened in the background holds it prepared before a request takes it."""
        return []

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        read_pool_size: int = 10,
        timeout_s: float = 2.0,
        command_timeout_s: float = 10.0,
        vacuum_outbox_every: int = 10_000,
    ) -> None:
        self.url = url
        self.pool_size = pool_size
        self.read_pool_size = read_pool_size
        self._vacuum_every = vacuum_outbox_every
        self._acked = 0  # outbox rows acked since this store last vacuumed the outbox
        # ``[store] timeout_s``: a connection opened, or one taken from a full pool, within
        # it; a link that leaves what was sent unacknowledged this long, or that answers no
        # keepalive, dropped by either end (``_link``). A request that cannot reach the
        # store is a 503 within about twice it (the take, then a statement on a connection
        # found dead), where the command timeout alone held it 10 s.
        self._timeout_s = timeout_s
        # ``[store] command_timeout_s``: the longest any one statement may run (a freeze of
        # a big window, a rebuild's read), on a link that answers.
        self._command_timeout = command_timeout_s
        # Two pools: a match's statements (its read, its writes) and the other writes in
        # one, the single-statement reads of the board and admin endpoints in the other.
        # Write transactions hold their connection through lock waits and commit flushes;
        # from one shared pool, a burst of them took every connection, and board reads
        # (which look up names here) queued behind them: read p99 followed write p99.
        self._pools: dict[bool, asyncpg.Pool[asyncpg.Record]] = {}
        self._opening = asyncio.Lock()

    # -- plumbing ---------------------------------------------------------------------

    async def _get_pool(self, reads: bool) -> asyncpg.Pool[asyncpg.Record]:
        pool = self._pools.get(reads)
        if pool is not None:
            return pool
        async with self._opening:  # one pool each, however many first calls race here
            if reads not in self._pools:
                # Its first connection is opened for the request that asked: not warmed.
                waited_on = _WAITED_ON.set(True)
                try:
                    self._pools[reads] = await self._create_pool(reads)
                finally:
                    _WAITED_ON.reset(waited_on)
            return self._pools[reads]

    async def _create_pool(self, reads: bool) -> asyncpg.Pool[asyncpg.Record]:
        return await asyncpg.create_pool(
            self.url,
            min_size=1,
            max_size=self.read_pool_size if reads else self.pool_size,
            timeout=self._timeout_s,
            command_timeout=self._command_timeout,
            reset=_keep_session,
            init=partial(self._open, reads=reads),
            server_settings=server_link(self._timeout_s),
        )

    @staticmethod
    def _fill(pool: asyncpg.Pool[asyncpg.Record]) -> None:
        """A pool found with no idle connection is kept at its size from then on: asyncpg
        opens the connections it lacks in the background, one after another, and opens
        again any that closes (its pool's floor, ``min_size``, raised here). A store used
        one call at a time (a script, most tests) keeps its one connection.

        Grown one request at a time instead, a pool opened its connections on the requests
        that needed them, and only as many as were needed at once: on a link of 400 ms a
        round trip, a connection's start took about 1 s and each statement's first use on
        it (its prepare; the group commit's also looks up the record type) 0.5 to 1 s more,
        in the first seconds of every burst and after every connection the link dropped
        (docs/faults.md, the slow and lossy network). asyncpg has no public way to raise
        the floor of a pool it made: the two names used are those of its version pinned in
        pyproject.toml."""
        if pool.get_min_size() >= pool.get_max_size() or pool.get_idle_size():
            return
        pool._minsize = pool.get_max_size()  # type: ignore[attr-defined]
        pool._schedule_min_size_maintenance()  # type: ignore[attr-defined]

    async def _open(self, conn: asyncpg.Connection[asyncpg.Record], *, reads: bool) -> None:
        """A new connection made ready: its link's bounds (``_link``); and, opened in the
        background (``_fill``), not for a request waiting on it, its pool's
        ``warm_statements`` prepared, run in a transaction rolled back (so whatever they
        would write is not kept; asyncpg keeps a statement prepared once it was parsed,
        whether it ran or failed). A database not migrated yet (``podium migrate``'s own
        connection) has none of them: an error of the server's ends the warming, not the
        connection."""
        await _link(conn, timeout_s=self._timeout_s)
        warm = self.warm_statements(reads)
        if not warm or _WAITED_ON.get():
            return
        await conn.execute("BEGIN")
        try:
            for sql, args in warm:
                await conn.fetch(sql, *args)
        except asyncpg.PostgresError:
            pass
        finally:
            await conn.execute("ROLLBACK")

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
                self._fill(pool)
                async with _take(pool, self._timeout_s) as conn:
                    if not tx:
                        return await fn(conn)
                    async with conn.transaction():
                        return await fn(conn)
            except RETRIED as e:
                if attempt >= _ATTEMPTS:
                    raise translate(e) from e
                await asyncio.sleep(0.005 * 2**attempt)
            except pgx.UniqueViolationError as e:
                if not retry_unique or unique_retried:
                    raise translate(e) from e
                unique_retried = True
            except Exception as e:
                failure = translate(e)
                if failure is e:
                    raise  # podium's own (a conflict, a refusal): as it is
                raise failure from e

    async def run(self, fn: Callable[[Conn], Awaitable[T]], *, tx: bool = True) -> T:
        """``fn`` on a pooled connection, with this database's retries and error table: a
        look past the ports, for tests and scripts (podium itself, the split store included,
        runs every statement through a named method)."""
        return await self._run(fn, tx=tx)

    async def migrate(self) -> None:
        await self.migrate_part("postgres")

    async def migrate_part(self, part: str) -> None:
        """The migrations in ``sql/<part>/`` not applied yet, each noted in its part's
        ledger: the store's own (``postgres``), or on a database of a store split by player,
        the split's (``split`` on each of them, ``split_home`` on its home)."""
        own = part == "postgres"
        create, applied, note = _STORE_LEDGER if own else _SPLIT_LEDGER
        key = () if own else (part,)

        async def run(c: Conn) -> None:
            # Taken before anything else: two migrators racing on an empty database would
            # otherwise both try to create the ledger.
            await c.execute("SELECT pg_advisory_xact_lock($1)", MIGRATE)
            await c.execute(create)
            done = {r["version"] for r in await c.fetch(applied, *key)}
            for version, sql in migrations(part):
                if version not in done:
                    await c.execute(sql)  # no arguments: the simple protocol runs every statement
                    await c.execute(note, *key, version)

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
