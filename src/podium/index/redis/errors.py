"""The Redis adapters' one table of errors: what redis-py raises, as podium's errors.

Transient errors (the connection, a timeout, a server loading or failing over, a cluster
moving slots, a Redis out of memory) become ``IndexUnavailable``: a 503 with Retry-After,
and a retry is safe, since the store holds every result. Everything else is a bug on our
side (a script or command with bad arguments, a key of the wrong type, a script that is
not there, a reply we could not read, an error we do not know) and becomes
``InternalError``: a 500, logged with its traceback, never answered as an outage. Either
is raised ``from`` the driver's error, which keeps its traceback.

Order matters: redis-py makes several transient errors subclasses of ``ResponseError``
(the server answered, with an error), so the table is read top-down and the first row whose
class matches decides; ``RedisError`` and ``RedisClusterException``, last, catch the rest.
"""

from __future__ import annotations

from types import TracebackType

from redis import exceptions as rx
from redis.asyncio.sentinel import MasterNotFoundError, SlaveNotFoundError

from podium.errors import IndexUnavailable, InternalError, PodiumError

# (driver error, podium error), the first match wins.
TABLE: tuple[tuple[type[BaseException], type[PodiumError]], ...] = (
    # Sentinel (redis+sentinel://): no Sentinel that answered names a primary it thinks up
    # (a failover under way, or every Sentinel unreachable), or none lists a replica nor the
    # primary to read from. redis-py makes both ConnectionErrors; named here first, so that
    # the 503's cause in the log says Sentinel.
    (MasterNotFoundError, IndexUnavailable),
    (SlaveNotFoundError, IndexUnavailable),
    # The connection: refused, reset, closed; a pool with no connection left; a server
    # still LOADING its data set (BusyLoadingError); credentials refused (the server can't
    # be used until they are fixed, and nothing was changed).
    (rx.ConnectionError, IndexUnavailable),
    (rx.TimeoutError, IndexUnavailable),
    # READONLY: a replica answered a write, as right after a failover.
    (rx.ReadOnlyError, IndexUnavailable),
    # TRYAGAIN, ASK, MOVED: a slot moving between nodes (resharding), or not served here.
    (rx.TryAgainError, IndexUnavailable),
    (rx.AskError, IndexUnavailable),
    # CLUSTERDOWN and MASTERDOWN (MasterDownError is a ClusterDownError); a cluster client
    # whose redirections ran out ("TTL exhausted", a MOVED it kept being sent back by); a
    # slot no node serves (its primary died and no replica took over yet).
    (rx.ClusterDownError, IndexUnavailable),
    (rx.ClusterError, IndexUnavailable),
    (rx.SlotNotCoveredError, IndexUnavailable),
    # OOM: a full Redis refuses writes until memory is freed; it changed nothing.
    (rx.OutOfMemoryError, IndexUnavailable),
    # Sockets that fail below redis-py (and the builtin TimeoutError is an OSError).
    (OSError, IndexUnavailable),
    # The rest is ours to fix: ResponseError (WRONGTYPE, ERR from a script, wrong number of
    # arguments), NoScriptError that survived redis-py's reload, NoPermissionError (ACL),
    # ClusterCrossSlotError, DataError, InvalidResponse, and any error not known here.
    (rx.RedisError, InternalError),
    (rx.RedisClusterException, InternalError),
)

# Replies redis-py leaves as a plain ResponseError that are transient all the same: a
# script running too long (BUSY), a server refusing writes while it cannot save (MISCONF),
# or without enough replicas (NOREPLICAS).
TRANSIENT_REPLIES = ("BUSY ", "MISCONF ", "NOREPLICAS ")

# What redis-py's cluster client raises as a plain RedisClusterException when it cannot
# learn the cluster's slot map: no listed node answered, or the nodes that answered do not
# serve every slot (a failover under way). Any other plain RedisClusterException is a call
# it cannot route (keys of two slots in one script, a command without keys): ours to fix.
TRANSIENT_CLUSTER = (
    "Redis Cluster cannot be connected",
    "All slots are not covered",
    "startup_nodes could not agree",
)

SENTINEL = (MasterNotFoundError, SlaveNotFoundError)

CAUGHT = (rx.RedisError, rx.RedisClusterException, OSError)

# Where a connection closed under a call shows up as a plain AttributeError or TypeError
# rather than a ConnectionError: redis-py's asyncio connection, its cluster client, and the
# event loop's transports ("'NoneType' object has no attribute 'writelines'" when another
# task closed the connection between its connect and its first write, as a cluster client
# relearning its slots after a failover does; "'NoneType' object is not callable" from a
# transport the peer reset, redis-py issues 3546 and 4287). Raised there, they are an
# outage like any closed connection; raised anywhere else, they are a bug and pass. So are a
# KeyError and an IndexError raised inside them: the cluster client's map of slots read while
# a failover has it relearn the map (a slot missing from it; redis-py issues 2437, 3238).
RACY_MODULES = ("redis.", "asyncio.", "uvloop.")
RACY = (AttributeError, TypeError, KeyError, IndexError)


def driver_race(e: BaseException) -> bool:
    """Whether ``e`` is one of ``RACY`` raised inside the driver or the event loop's
    transport (its innermost frame is theirs): a connection closed, or the cluster's map
    changed, under a call."""
    if not isinstance(e, RACY):
        return False
    tb = e.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return str(tb.tb_frame.f_globals.get("__name__", "")).startswith(RACY_MODULES)


def from_driver(e: BaseException) -> bool:
    """Whether ``translate`` takes ``e``: a driver's error (``CAUGHT``) or a race in it."""
    return isinstance(e, CAUGHT) or driver_race(e)


def translate(e: BaseException) -> PodiumError:
    """The podium error for a driver's error (``CAUGHT``, or a ``driver_race``), per
    ``TABLE``."""
    if driver_race(e):
        return IndexUnavailable(
            f"redis: the connection closed under the call, or the cluster's slots moved: {e!r}"
        )
    if type(e) is rx.ResponseError and str(e).startswith(TRANSIENT_REPLIES):
        return IndexUnavailable(f"redis: {e}")
    if type(e) is rx.RedisClusterException and str(e).startswith(TRANSIENT_CLUSTER):
        return IndexUnavailable(f"redis cluster: {e}")
    for driver, ours in TABLE:
        if isinstance(e, driver):
            if ours is IndexUnavailable:
                said = "redis sentinel" if driver in SENTINEL else "redis"
                return IndexUnavailable(f"{said}: {e}")
            return InternalError(
                f"the rank index refused a command ({type(e).__name__}): a bug, logged"
            )
    raise TypeError(f"not a Redis error: {e!r}")  # pragma: no cover - CAUGHT is in TABLE


class _Translated:
    """``with translated:`` around Redis calls raises ``translate(e) from e`` for the
    driver's errors (and its races) and lets every other exception through. A plain
    (synchronous) context manager: it catches what the awaits inside raise all the same, for
    less work per call than an async generator."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        e: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if e is not None and from_driver(e):
            raise translate(e) from e


translated = _Translated()
