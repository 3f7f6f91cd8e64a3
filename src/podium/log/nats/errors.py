"""The one table of nats-py's errors: what is an outage, what is a bug.

Transient (``LogUnavailable``, a 503 and a retry): no connection or a connection lost, a
reconnect under way, a request that timed out (a server killed, a cluster electing a new
stream leader), nobody answering on the JetStream API (JetStream starting, or no leader
yet), and the server's own 503. Everything else (a request the server refuses as
malformed, a limit, a permission) is a bug in what podium sent: ``InternalError``.

A pull request (``log/nats/pull.py``) is answered by statuses, not errors: it ends when there is
nothing to deliver (404) or less than its batch (408, the request's own timeout, at once for a
``no_wait`` request: not an outage); a consumer with no leader (503), a leadership change or
the consumer deleted (409) are "not now", transient as above; any other is a bug.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import nats.errors
import nats.js.errors

from podium.errors import InternalError, LogUnavailable, PodiumError

PULL_DONE = frozenset({"404", "408"})  # a pull request ended: nothing, or less than asked
PULL_NOT_NOW = frozenset({"503", "409"})  # "not now": no leader, a leadership change

TRANSIENT: tuple[type[BaseException], ...] = (
    nats.errors.TimeoutError,
    nats.errors.NoRespondersError,
    nats.errors.NoServersError,
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.ConnectionDrainingError,
    nats.errors.StaleConnectionError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.FlushTimeoutError,
    nats.js.errors.NoStreamResponseError,
    nats.js.errors.ServiceUnavailableError,
    nats.js.errors.ServerError,
    asyncio.TimeoutError,
    ConnectionError,
    OSError,
)


@contextlib.contextmanager
def translated(doing: str) -> Iterator[None]:
    """Run a block of nats calls; its driver errors leave it as podium's."""
    try:
        yield
    except PodiumError:
        raise
    except TRANSIENT as e:
        raise LogUnavailable(f"NATS JetStream: {doing}: {type(e).__name__}: {e}") from e
    except nats.errors.Error as e:
        raise InternalError(f"NATS JetStream refused {doing}: {type(e).__name__}: {e}") from e
