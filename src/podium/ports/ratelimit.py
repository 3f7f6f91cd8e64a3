"""``Buckets``: the read limits' token buckets, one per client (``server.read_rate_per_s``),
kept by this process (``index/memory/ratelimit.py``) or by the index's Redis for a fleet
(``index/redis/ratelimit.py``); the read handlers spend a token each (``api/ratelimit.py``).
"""

from __future__ import annotations

from typing import Protocol


class Buckets(Protocol):
    """One token bucket per client: ``take`` spends a token or raises ``RateLimited``."""

    kind: str  # "off", "process" or "redis": said by /healthz and the metrics

    async def take(self, client: str) -> None: ...
    async def close(self) -> None: ...
