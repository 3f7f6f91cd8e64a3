"""The exception tree. The API maps each leaf to one HTTP status (``api/problems.py``).

::

    PodiumError
    ├── ConfigError                 bad configuration, named by field (start-up)
    ├── InvalidInput        422     impossible points, unknown mode, bad window, ...
    │   └── WindowClosed    422     endedAt before every open window
    ├── NotFound            404     unknown board, player not on the board
    ├── Unauthorized        401     no or unknown credential
    ├── Forbidden           403     credential not allowed this, match owned by another server
    │   └── Erased          403     a result for a player who was erased (issue 35)
    ├── Conflict            409     same match and player, different content
    ├── RateLimited         429     hourly cap or read rate; carries retry_after
    ├── Unavailable         503     a backend is unreachable; nothing was recorded, retry
    │   ├── StoreUnavailable
    │   ├── IndexUnavailable
    │   │   └── Rebuilding          the index came back empty; refilled from the store now
    │   ├── LogUnavailable          the change log (NATS JetStream) unreachable or electing
    │   └── Overloaded              too many matches in flight in this process: turned
    │                               away before any store work (full, late, gone)
    └── InternalError       500     a bug: a backend refused what podium sent (an undefined
                                    column, a malformed statement or script); logged with
                                    its traceback, never answered as an outage

Adapters translate their driver's errors at the boundary, each through one table: the
transient ones (connection lost, timeouts, serialization failures, a server shutting down,
SQLite busy) into ``Unavailable``, everything else into ``InternalError``, so nothing above
them ever sees an asyncpg, sqlite3, redis or nats exception, and a bug never looks like an outage.

What a client is told of a backend's outage is only which part is unavailable (``public``):
the message, with the driver's text and the addresses it names, goes to the log alone.
"""

from __future__ import annotations


class PodiumError(Exception):
    status = 500
    title = "Internal error"
    # The detail a client gets instead of the message, where the message is not for clients:
    # an outage of a backend or a bug, whose message names hosts, ports and the driver's
    # words. None: the message is podium's own and is the detail.
    public: str | None = None


class ConfigError(PodiumError):
    title = "Invalid configuration"


class InvalidInput(PodiumError):
    status = 422
    title = "Invalid input"


class WindowClosed(InvalidInput):
    title = "Window closed"


class NotFound(PodiumError):
    status = 404
    title = "Not found"


class Unauthorized(PodiumError):
    status = 401
    title = "Unauthorized"


class Forbidden(PodiumError):
    status = 403
    title = "Forbidden"


class Erased(Forbidden):
    """A result for a player who was erased (issue 35): refused, so that a retried old
    match or a late change cannot bring them back."""

    title = "Player erased"


class Conflict(PodiumError):
    status = 409
    title = "Conflict"


class RateLimited(PodiumError):
    status = 429
    title = "Too many requests"

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = max(1, int(retry_after))


class Unavailable(PodiumError):
    status = 503
    title = "Service unavailable"
    retry_after = 1


class StoreUnavailable(Unavailable):
    title = "Score store unavailable"
    public = "the score store is unavailable; retry in Retry-After seconds"


class IndexUnavailable(Unavailable):
    title = "Rank index unavailable"
    public = "the rank index is unavailable; retry in Retry-After seconds"


class LogUnavailable(Unavailable):
    title = "Change log unavailable"
    public = "the change log is unavailable; retry in Retry-After seconds"


class Rebuilding(IndexUnavailable):
    """The index lost its data (a Redis that came back empty) and is being refilled from
    the store: a read now would show a board with players missing (``service/ranks/marked.py``)."""

    title = "Board being rebuilt"
    public = "the board is being rebuilt from the score store; retry in Retry-After seconds"
    retry_after = 2


class Overloaded(Unavailable):
    title = "Too many matches in flight"


class InternalError(PodiumError):
    """A bug, not an outage: the cause (``__cause__``) is the driver's error."""

    status = 500
    title = "Internal error"
    public = "an internal error occurred; it has been logged"
