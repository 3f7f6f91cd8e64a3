"""The read limits' token buckets of this process alone (``ports/ratelimit.py``): what a
deployment with its index in process uses, or one that asks for them
(``server.read_limiter = "process"``).
"""

from __future__ import annotations

import time
from collections import OrderedDict

from podium.errors import RateLimited

MAX_CLIENTS = 100_000  # buckets kept; the least recently seen client is forgotten first


class ReadLimiter:
    """The buckets of this process alone."""

    def __init__(self, rate_per_s: float, burst: int) -> None:
        self.rate = rate_per_s
        self.burst = float(max(1, burst))
        self.kind = "process" if rate_per_s > 0 else "off"
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    async def take(self, client: str) -> None:
        self.check(client)

    async def close(self) -> None:
        return None

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
