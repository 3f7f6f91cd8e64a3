"""The read limit shared by a fleet: one token bucket per client in Redis, spent by every
API process alike, in one round trip (``lua/bucket.lua``).

Per-process buckets let a client read N times the rate through N API processes; these do
not. If Redis cannot be reached, the read is served (fail open: the limiter guards capacity,
and refusing every player because a limiter is down would be the outage it guards against),
counted in ``podium_read_limiter_failopen_total`` and logged at most once a minute. Any other
error from Redis is a bug and goes up as one (errors.py).

On Redis Cluster (``redis+cluster://``) each client's bucket is a key of its own slot
(keys.py), so buckets spread over the primaries; the script touches that one key.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import redis.asyncio as aioredis

from podium import metrics
from podium.errors import IndexUnavailable, RateLimited
from podium.index.redis.cluster import cluster_client, is_cluster_url
from podium.index.redis.errors import translated
from podium.index.redis.keys import Keys
from podium.index.redis.scripts import Script

log = logging.getLogger("podium.ratelimit")
WARN_EVERY_S = 60.0
TIMEOUT_S = 0.25  # a read waits this long at most for its bucket, then is served
BUCKET = Script("bucket")


class RedisReadLimiter:
    kind = "redis"

    def __init__(self, client: Any, prefix: str, rate_per_s: float, burst: int) -> None:
        self._r = client
        self.keys = Keys(prefix)
        self.rate = rate_per_s
        self.burst = max(1, burst)
        self._warned = 0.0

    @classmethod
    def from_url(cls, url: str, prefix: str, rate_per_s: float, burst: int) -> RedisReadLimiter:
        if is_cluster_url(url):
            return cls(cluster_client(url, timeout_s=TIMEOUT_S), prefix, rate_per_s, burst)
        client = aioredis.Redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=TIMEOUT_S,
            socket_connect_timeout=TIMEOUT_S,
            health_check_interval=30,
        )
        return cls(client, prefix, rate_per_s, burst)

    async def take(self, client: str) -> None:
        try:
            with translated:
                taken, wait_ms = await BUCKET(
                    self._r, [self.keys.read_bucket(client)], [self.rate, self.burst]
                )
        except IndexUnavailable as e:
            metrics.READ_LIMITER_FAILOPEN.inc()
            now = time.monotonic()
            if now - self._warned > WARN_EVERY_S:
                self._warned = now
                log.warning("shared read limiter unreachable, serving reads unlimited: %s", e)
            return
        if not int(taken):
            raise RateLimited(
                "too many reads from this client", retry_after=int(wait_ms) // 1000 + 1
            )

    async def close(self) -> None:
        await self._r.aclose()
