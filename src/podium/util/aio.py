"""Small asyncio helpers every part of podium shares."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import TypeVar

T = TypeVar("T")


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
