"""Postgres's errors, sorted once: an outage (``StoreUnavailable``, 503, a retry is safe) or
a bug (``InternalError``, 500, logged with its traceback).

The transient ones: not reaching the server (refused, reset, timed out), the server
shutting down, refusing connections or out of resources (class 08, 53, 57: a cancelled or
timed-out statement too), a read-only server (a failover left us on a replica), and the
transaction conflicts that ``Database._run`` retries first (class 40). Everything else,
an undefined column or function, a syntax error, a constraint we did not expect, a bad
argument, is a bug in podium or its schema, and must never be answered as "try again".
"""

from __future__ import annotations

from asyncpg import exceptions as pgx

from podium.errors import Forbidden, InternalError, PodiumError, StoreUnavailable

# Raised by a database of a store split by player for a write of a player whose bucket moved
# away (``sql/split/002_moves.sql``): nothing was written, and the writer reads the bucket
# map again (``store.split``); anyone else sees an outage, which it is for that player.
MOVED = "PD001"
# Raised by a record whose match another key has claimed (migration 012): nothing was
# written, as when ``open_match`` finds the match another key's.
OWNED = "PD002"

# Retried by ``Database._run`` before they count as an outage.
RETRIED: tuple[type[BaseException], ...] = (pgx.SerializationError, pgx.DeadlockDetectedError)

TRANSIENT: tuple[type[BaseException], ...] = (
    OSError,  # refused, reset, unreachable
    TimeoutError,  # connect, pool acquire or statement (its message is empty)
    pgx.PostgresConnectionError,  # class 08
    pgx.InsufficientResourcesError,  # class 53: too many connections, disk full, memory
    pgx.OperatorInterventionError,  # class 57: shutdown, crash, cannot connect now, cancel
    pgx.TransactionRollbackError,  # class 40, once the retries ran out
    pgx.ReadOnlySQLTransactionError,  # 25006: the server became a replica
    pgx.LockNotAvailableError,  # 55P03: a lock timeout
    pgx.IdleInTransactionSessionTimeoutError,  # 25P03: the server dropped the session
)


def translate(e: BaseException) -> BaseException:
    """The error a caller of the store sees for ``e``; podium's own errors, and anything
    that is not the driver's, pass as they are."""
    if isinstance(e, PodiumError):
        return e
    if getattr(e, "sqlstate", None) == MOVED:
        return _caused(StoreUnavailable(f"postgres: {e}: retry"), e)
    if getattr(e, "sqlstate", None) == OWNED:
        message = getattr(e, "message", None) or str(e)
        return _caused(Forbidden(message), e)
    if isinstance(e, TRANSIENT) or _closed(e):
        what = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        return _caused(StoreUnavailable(f"postgres unreachable or busy: {what}"), e)
    if isinstance(e, pgx.PostgresError | pgx.InterfaceError | pgx.InternalClientError):
        return _caused(InternalError(f"postgres: {type(e).__name__}: {e}"), e)
    return e


def _closed(e: BaseException) -> bool:
    """asyncpg says a connection or pool went away with a bare ``InterfaceError``
    ("connection is closed", "pool is closing"); its other interface errors (a bad argument,
    an operation already in progress) are bugs."""
    return type(e) is pgx.InterfaceError and "clos" in str(e)


def _caused(failure: PodiumError, cause: BaseException) -> PodiumError:
    failure.__cause__ = cause
    return failure
