"""The HTTP server under the API: uvicorn, with the connection limits of ``[server]``.

uvicorn closes a keep-alive connection that stays idle after an answer, but it arms nothing
for a connection before its first request, nor for a request begun and never finished (its
protocols have no read timeout): a client could hold a file descriptor for ever by opening
a connection and saying nothing, or by sending a request a byte a minute, and enough of
them leave the process that accepts results with none to accept with. ``GuardedHttp``, the
protocol podium serves with (uvicorn's httptools one, which ``uvicorn[standard]`` brings),
adds the three limits:

- ``idle_timeout_s``: a connection with no request under way (just opened, or between
  requests) is closed after this long (uvicorn's keep-alive timer, armed from the start);
- ``request_timeout_s``: a request must arrive whole, its headers and its body, within
  this long of its first byte; else the connection is closed, with a 408 where nothing of an
  answer was sent yet (a request already in the app sees its client leave);
- ``max_connections``: one connection more than this in one process is answered 503 with
  ``Retry-After`` and closed as soon as it is accepted, so the descriptors the process has
  stay for the connections it has. The connections already open go on as before: a game
  server's keep-alive connection still carries its results at the cap (uvicorn's own
  ``limit_concurrency`` would answer 503 on those too).
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from podium import metrics
from podium.config.sections import ServerSettings

log = logging.getLogger("podium.serving")

# Descriptors a process needs beside its client connections: database pools, Redis and NATS
# connections, the SQLite files, logs.
FD_RESERVE = 256
RETRY_AFTER_S = 1


def _raw(status: str, body: bytes, *headers: bytes) -> bytes:
    head = [f"HTTP/1.1 {status}".encode(), *headers, b"connection: close"]
    head.append(f"content-length: {len(body)}".encode())
    return b"\r\n".join(head) + b"\r\n\r\n" + body


_PROBLEM = b"content-type: application/problem+json"
FULL = _raw(
    "503 Service Unavailable",
    b'{"type":"about:blank","title":"Service unavailable","status":503,'
    b'"detail":"this process has as many connections open as it takes; retry"}',
    _PROBLEM,
    f"retry-after: {RETRY_AFTER_S}".encode(),
)
TOO_SLOW = _raw(
    "408 Request Timeout",
    b'{"type":"about:blank","title":"Request timeout","status":408,'
    b'"detail":"the request did not arrive whole in time"}',
    _PROBLEM,
)


class Config(uvicorn.Config):
    """uvicorn's settings, with ``[server]``'s limits for ``GuardedHttp`` (a plain value:
    ``serve --processes`` hands the config to the processes it starts)."""

    def __init__(self, app: Any, server: ServerSettings, **kwargs: Any) -> None:
        super().__init__(
            app,
            host=server.host,
            port=server.port,
            http=GuardedHttp,
            timeout_keep_alive=server.idle_timeout_s,
            **kwargs,
        )
        self.request_timeout_s = server.request_timeout_s
        self.max_connections = server.max_connections


class GuardedHttp(HttpToolsProtocol):
    """uvicorn's protocol with the idle time from the start, a deadline on each request's
    arrival, and the cap on connections (the module's docstring says why)."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self.request_timeout_s: float | None = getattr(config, "request_timeout_s", None)
        self.max_connections: int | None = getattr(config, "max_connections", None)
        self.arriving: asyncio.TimerHandle | None = None  # a request's deadline, under way
        self.headers_in = False  # the request under way has its headers whole

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self.max_connections is not None and len(self.connections) > self.max_connections:
            metrics.CONNECTIONS_REFUSED.inc()
            transport.write(FULL)
            transport.close()
            return
        # uvicorn arms this only after an answer; a connection that never asks is as idle.
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._arrived()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.headers_in = False
        if self.request_timeout_s is not None:
            self._arrived()
            self.arriving = self.loop.call_later(self.request_timeout_s, self._too_slow)

    def on_headers_complete(self) -> None:
        self.headers_in = True
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._arrived()
        super().on_message_complete()

    def _arrived(self) -> None:
        if self.arriving is not None:
            self.arriving.cancel()
            self.arriving = None

    def _too_slow(self) -> None:
        self.arriving = None
        if self.transport.is_closing():
            return
        metrics.REQUESTS_TIMED_OUT.inc()
        # A 408 only where it is the next thing the client would read: no answer under way.
        if not self.headers_in and (self.cycle is None or self.cycle.response_complete):
            self.transport.write(TOO_SLOW)
        self.transport.close()


def file_headroom(server: ServerSettings) -> None:
    """Raise this process's soft limit on open files to hold ``max_connections`` and the
    backends' own, where the hard limit allows; say so where it does not (then the cap is
    not what stops new connections: a failed accept is)."""
    want = server.max_connections + FD_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return
    raised = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if raised > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
    if raised < want:
        log.warning(
            "server.max_connections = %d needs about %d open files; this process may open "
            "%d (ulimit -n): lower max_connections or raise the limit",
            server.max_connections,
            want,
            raised,
        )
