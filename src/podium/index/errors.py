"""How the Redis adapters turn redis-py's errors into podium's, in one place.

``with translated:`` around Redis calls: a connection or a timeout becomes
``IndexUnavailable`` (a 503 with Retry-After); a ``ResponseError`` is a bug on our side
(a bad script or arguments) and goes up as it is, not as an outage.
"""

from __future__ import annotations

from types import TracebackType

from redis.exceptions import RedisError, ResponseError

from podium.errors import IndexUnavailable


class _Translated:
    """A plain (synchronous) context manager: it catches what the awaits inside raise all
    the same, for less work per call than an async generator."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        e: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if e is None or isinstance(e, ResponseError):
            return  # a bug on our side (bad script or arguments), not an outage
        if isinstance(e, RedisError | OSError):
            raise IndexUnavailable(f"redis: {e}") from e


translated = _Translated()
