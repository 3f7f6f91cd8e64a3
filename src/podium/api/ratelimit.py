"""Per-client token buckets for the public read endpoints, and the cap on matches in flight."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from fastapi import Request

from podium.errors import Overloaded, RateLimited

MAX_CLIENTS = 100_000  # buckets kept; the least recently seen client is forgotten first


class ReadLimiter:
    def __init__(self, rate_per_s: float, burst: int) -> None:
        self.rate = rate_per_s
        self.burst = float(max(1, burst))
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def check(self, client: str, now: float | None = None) -> None:
        if self.rate <= 0:
            return
        now = time.monotonic() if now is None else now
        tokens, last = self._buckets.pop(client, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        if tokens < 1:
            self._buckets[client] = (tokens, now)
            raise RateLimited(
                "too many reads from this client", retry_after=int((1 - tokens) / self.rate) + 1
            )
        self._buckets[client] = (tokens - 1, now)
        if len(self._buckets) > MAX_CLIENTS:
            self._buckets.popitem(last=False)


def limit_reads(request: Request) -> None:
    """Called first thing in the hot read handlers: as a dependency it costs a second pass
    of FastAPI's dependency solving per request."""
    limiter: ReadLimiter = request.app.state.read_limiter
    limiter.check(request.client.host if request.client else "unknown")


async def read_limit(request: Request) -> None:
    limit_reads(request)


class PendingMatches:
    """Counts the matches this process is recording; past ``limit`` a new one is refused
    before it touches the store, and the game server retries it (retries are safe)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.now = 0

    @contextmanager
    def admit(self) -> Iterator[None]:
        if self.now >= self.limit:
            raise Overloaded(f"this process is recording {self.now} matches already; retry shortly")
        self.now += 1
        try:
            yield
        finally:
            self.now -= 1
