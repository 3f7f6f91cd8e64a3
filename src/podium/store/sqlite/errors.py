"""SQLite's errors, sorted once: an outage (``StoreUnavailable``, 503, a retry is safe) or a
bug (``InternalError``, 500, logged with its traceback).

SQLite names the cause in ``sqlite_errorcode``; its low byte is the primary result code.
The transient ones are a lock held too long by another process, the disk (full, failing,
unreadable, read-only under us) and memory. Anything else, an unknown column or table, a
malformed statement, a constraint we did not expect, is a bug in podium or in its schema,
and must never be answered as "try again".
"""

from __future__ import annotations

import sqlite3

from podium.errors import InternalError, PodiumError, StoreUnavailable

# Primary result codes (https://www.sqlite.org/rescode.html).
SQLITE_NOMEM = 7
SQLITE_BUSY = 5
SQLITE_LOCKED = 6
SQLITE_READONLY = 8
SQLITE_INTERRUPT = 9
SQLITE_IOERR = 10
SQLITE_FULL = 13
SQLITE_CANTOPEN = 14
SQLITE_PROTOCOL = 15

TRANSIENT = frozenset(
    {
        SQLITE_BUSY,
        SQLITE_LOCKED,
        SQLITE_NOMEM,
        SQLITE_READONLY,
        SQLITE_INTERRUPT,
        SQLITE_IOERR,
        SQLITE_FULL,
        SQLITE_CANTOPEN,
        SQLITE_PROTOCOL,
    }
)


class GroupLost(Exception):
    """SQLite rolled the whole transaction back on a write's error (a full disk, an I/O
    error): the writes before it in the group are gone too. Only transient causes do that."""


def translate(e: BaseException) -> BaseException:
    """The error a caller of the store sees for ``e``. podium's own errors (a conflict, a
    refusal) pass as they are; so does anything else that is not the driver's, except what
    is not an ``Exception`` at all (an interrupt on the writer thread, which the other
    writers of its group must not receive: it becomes an outage)."""
    if isinstance(e, PodiumError):
        return e
    if isinstance(e, GroupLost) or not isinstance(e, Exception):
        return _caused(StoreUnavailable(f"sqlite: {e or type(e).__name__}"), e)
    if isinstance(e, sqlite3.Error):
        code = getattr(e, "sqlite_errorcode", None)
        if code is not None and code & 0xFF in TRANSIENT:
            return _caused(StoreUnavailable(f"sqlite: {e}"), e)
        return _caused(InternalError(f"sqlite: {type(e).__name__}: {e}"), e)
    return e


def _caused(failure: PodiumError, cause: BaseException) -> PodiumError:
    failure.__cause__ = cause
    return failure
