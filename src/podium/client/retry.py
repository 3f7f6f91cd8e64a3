"""When ``submit`` tries again, and after how long: one policy both clients share.

A submission is safe to send again because podium's idempotency key is (player, match):
the same match id with the same body is answered with the stored totals and changes nothing
(docs/architecture.md, invariant 2). So the clients send the very same bytes each time, and
retry only what says nothing was decided against the request: no answer (a connection lost,
a timeout), a 503 (nothing was recorded), a 429 (a player over the hourly cap: a retry never
counts), and a proxy's 502 or 504 (an API process gone mid-request, whose retry goes to
another). Any other 4xx is an answer about the request itself and is raised at once.

Why not ``stamina``: its backoff hook can return a wait (so it could honour Retry-After),
but it sleeps with ``time.sleep``/``asyncio.sleep`` and offers no way to pass a sleep of
one's own (its test mode sets every wait to zero), so a test could not see that a 429 waited
its ``Retry-After`` without really waiting; and it would bring two packages (stamina and
tenacity) for the twenty lines below.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from podium.client.errors import (
    PodiumClientError,
    ProblemError,
    RateLimited,
    TransportFailed,
    Unavailable,
)

# A load balancer's answers when the API process behind it died or did not answer in time.
_PROXY_STATUSES = (502, 504)


@dataclass(frozen=True)
class RetryPolicy:
    """How ``submit`` retries. ``attempts`` counts every try, the first included (1: never
    retry). The n-th retry waits ``initial * multiplier ** (n - 1)``, at most ``max_backoff``,
    plus up to ``jitter`` of that again at random, so that game servers cut off together do
    not come back together. A 429 or 503 that says ``Retry-After`` waits that long instead
    (at most ``max_retry_after``), plus up to ``jitter`` seconds' worth of it at random."""

    attempts: int = 5
    initial: float = 0.2
    multiplier: float = 2.0
    max_backoff: float = 5.0
    jitter: float = 0.5
    max_retry_after: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts: expected 1 or more, got {self.attempts}")
        for name in ("initial", "multiplier", "max_backoff", "jitter", "max_retry_after"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: expected 0 or more, got {getattr(self, name)}")

    def wait(self, attempt: int, error: PodiumClientError, rng: random.Random) -> float | None:
        """Seconds to wait before the next try, after try number ``attempt`` (1-based)
        failed with ``error``; None when it must not be retried."""
        if attempt >= self.attempts or not retryable(error):
            return None
        if isinstance(error, ProblemError) and error.retry_after is not None:
            floor = min(error.retry_after, self.max_retry_after)
            return floor + rng.uniform(0, self.jitter * max(floor, self.initial))
        backoff = min(self.max_backoff, self.initial * self.multiplier ** (attempt - 1))
        return backoff + rng.uniform(0, self.jitter * backoff)


def retryable(error: PodiumClientError) -> bool:
    """Whether sending the same request again may end otherwise."""
    if isinstance(error, TransportFailed | Unavailable | RateLimited):
        return True
    return isinstance(error, ProblemError) and error.status in _PROXY_STATUSES


def why(error: PodiumClientError) -> str:
    """What failed, for the log line of a retry (the request's path is in that line)."""
    if isinstance(error, TransportFailed) and error.__cause__ is not None:
        return repr(error.__cause__)
    return str(error)
