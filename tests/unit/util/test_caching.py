"""The one cache helper: bound, expiry on the given clock, single-flight refill."""

from __future__ import annotations

import asyncio

import pytest

from podium.util.aio import gather_all
from podium.util.caching import Cache


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_expires_on_its_clock_and_stays_bounded() -> None:
    clock = Clock()
    c: Cache[str, int] = Cache(3, 5.0, clock)
    c.put("a", 1)
    clock.t = 4.9
    assert c.get("a") == 1
    clock.t = 5.1
    assert c.get("a") is None
    for i in range(10):
        c.put(str(i), i)
    assert len(c) == 3
    assert c.get("9") == 9 and c.get("0") is None


async def test_one_load_for_many_readers_and_failures_not_kept() -> None:
    c: Cache[str, int] = Cache(10, 60.0, Clock())
    calls = 0
    gate = asyncio.Event()

    async def load() -> int:
        nonlocal calls
        calls += 1
        await gate.wait()
        return 7

    readers = [asyncio.create_task(c.get_or_load("k", load)) for _ in range(5)]
    await asyncio.sleep(0)
    gate.set()
    assert await asyncio.gather(*readers) == [7] * 5
    assert calls == 1 and c.get("k") == 7

    async def broken() -> int:
        raise RuntimeError("store down")

    with pytest.raises(RuntimeError):
        await c.get_or_load("x", broken)
    assert "x" not in c
    assert await c.get_or_load("x", load) == 7


async def test_a_load_ahead_answers_from_the_held_value_never_past_its_time() -> None:
    clock = Clock()
    c: Cache[str, int] = Cache(10, 1.0, clock, refresh_ahead_s=0.5)
    gate = asyncio.Event()
    calls = 0

    async def load() -> int:
        nonlocal calls
        calls += 1
        await gate.wait()
        return calls

    c.put("k", 0)
    clock.t = 0.4  # not near its end yet: no load
    assert await c.get_or_load("k", load) == 0
    await asyncio.sleep(0)
    assert calls == 0
    clock.t = 0.6  # within refresh_ahead_s of its end: answered at once, one load started
    assert await c.get_or_load("k", load) == 0
    assert await c.get_or_load("k", load) == 0
    await asyncio.sleep(0)
    assert calls == 1
    clock.t = 1.2  # expired, the load still running: the reader waits for it
    waiting = asyncio.create_task(c.get_or_load("k", load))
    await asyncio.sleep(0)
    assert not waiting.done()
    gate.set()
    assert await waiting == 1
    assert calls == 1 and c.get("k") == 1
    with pytest.raises(ValueError):
        Cache(10, 1.0, clock, refresh_ahead_s=2.0)


async def test_a_time_to_live_of_zero_holds_nothing_but_shares_the_load() -> None:
    c: Cache[str, int] = Cache(10, 0.0, Clock())
    calls = 0
    gate = asyncio.Event()

    async def load() -> int:
        nonlocal calls
        calls += 1
        await gate.wait()
        return calls

    readers = [asyncio.create_task(c.get_or_load("k", load)) for _ in range(3)]
    await asyncio.sleep(0)
    gate.set()
    assert await asyncio.gather(*readers) == [1] * 3
    assert "k" not in c  # the clock has not moved, and still nothing is held
    assert await c.get_or_load("k", load) == 2


async def test_a_forget_during_a_load_keeps_its_answer_out() -> None:
    c: Cache[str, int] = Cache(10, 60.0, Clock())
    gate = asyncio.Event()

    async def load() -> int:
        await gate.wait()
        return 1

    reader = asyncio.create_task(c.get_or_load("k", load))
    await asyncio.sleep(0)
    c.forget("k")
    gate.set()
    assert await reader == 1
    assert c.get("k") is None


async def test_a_reader_going_away_does_not_cancel_the_load() -> None:
    c: Cache[str, int] = Cache(10, 60.0, Clock())
    gate = asyncio.Event()

    async def load() -> int:
        await gate.wait()
        return 3

    first = asyncio.create_task(c.get_or_load("k", load))
    second = asyncio.create_task(c.get_or_load("k", load))
    await asyncio.sleep(0)
    first.cancel()
    gate.set()
    assert await second == 3
    assert c.get("k") == 3


async def test_gather_all_waits_for_all_then_raises_the_first() -> None:
    finished: list[int] = []

    async def ok(i: int) -> int:
        await asyncio.sleep(0.01)
        finished.append(i)
        return i

    async def bad() -> int:
        raise ValueError("first")

    with pytest.raises(ValueError, match="first"):
        await gather_all([bad(), ok(1), ok(2)])
    assert sorted(finished) == [1, 2]
    assert await gather_all([ok(3), ok(4)]) == [3, 4]
