"""Small asyncio helpers every part of podium shares."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from podium.errors import Unavailable

T = TypeVar("T")

log = logging.getLogger("podium")


async def gather_all(aws: Iterable[Awaitable[T]]) -> list[T]:
    """Every awaitable to its end, then the first failure raised (so nothing is left
    running behind a raised error, and a release or a rollback that follows comes after
    every write), else the results in order."""
    done = await asyncio.gather(*aws, return_exceptions=True)
    out: list[T] = []
    for d in done:
        if isinstance(d, BaseException):
            raise d
        out.append(d)
    return out


async def waited_for(call: Callable[[], Awaitable[T]], wait_s: float, what: str) -> T:
    """``call``'s result, tried again with capped backoff while it raises ``Unavailable``
    (each try logged as ``what``), for ``wait_s`` at most: then its error raised, at once
    with 0."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    backoff = 0.25
    while True:
        try:
            return await call()
        except Unavailable as e:
            left = deadline - loop.time()
            if left <= 0:
                raise
            backoff = min(backoff * 2, 5.0, left)
            log.warning("%s (%s); trying again in %.1fs", what, e, backoff)
            await asyncio.sleep(backoff)
