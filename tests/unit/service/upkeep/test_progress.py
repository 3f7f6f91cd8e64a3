"""A rebuild's progress told to every process (service/upkeep/progress.py), on the in-process
records: each step and count passed on to the bar it wraps and published, renewed while the
run lasts, left as done (or failed, with why) for a minute, and gone after."""

from __future__ import annotations

import asyncio

import pytest

from podium.domain.boards import BoardSpec
from podium.domain.windows import WindowKind, WindowRule
from podium.errors import Unavailable
from podium.index.memory.upkeep import MemoryUpkeep
from podium.ports.upkeep import Running
from podium.service.upkeep import progress as told
from podium.service.upkeep.gapless import Target

WEEK = BoardSpec("week", WindowRule(WindowKind.WEEK))
T0 = 1_792_800_000


class Clock:
    def __init__(self) -> None:
        self.t = float(T0)

    def now(self) -> float:
        return self.t


class Bar:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def begin(self, what: str, total: int | None) -> None:
        self.calls.append(("begin", what))

    def advance(self, members: int) -> None:
        self.calls.append(("advance", members))

    def say(self, text: str) -> None:
        self.calls.append(("say", text))

    def phase(self, name: str) -> None:
        self.calls.append(("phase", name))


def _target() -> Target:
    w = WEEK.rule.window_at(T0)
    assert w is not None
    return Target(WEEK, w)


async def test_a_run_is_published_as_it_goes_then_done_for_a_minute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(told, "EVERY_S", 0.01)
    clock, bar = Clock(), Bar()
    records = MemoryUpkeep(clock.now)
    async with told.Published(records, clock, [_target()], inner=bar) as p:
        [run] = await records.running(clock.now())
        assert (run.kind, run.phase, run.windows) == ("rebuild", "starting", ["week 2026-W43"])
        p.phase("filling")
        p.begin("week 2026-W43", 30)
        p.advance(10)
        await asyncio.sleep(0.05)  # published again meanwhile
        [run] = await records.running(clock.now())
        assert (run.phase, run.window, run.done, run.total) == ("filling", "week 2026-W43", 10, 30)
        p.phase("switching")
        p.say("switched 1 board windows")
    assert ("advance", 10) in bar.calls and ("phase", "switching") in bar.calls
    [run] = await records.running(clock.now())
    assert (run.phase, run.windows_done, run.detail) == ("done", 1, "switched 1 board windows")
    clock.t += told.DONE_S + 1
    assert await records.running(clock.now()) == []


async def test_a_failed_run_says_why_and_an_index_that_does_not_answer_fails_nothing() -> None:
    clock = Clock()
    records = MemoryUpkeep(clock.now)
    with pytest.raises(RuntimeError):
        async with told.Published(records, clock, [_target()], shards=(2, 4)):
            raise RuntimeError("the hold ran out")
    [run] = await records.running(clock.now())
    assert (run.kind, run.phase, run.detail) == ("reshard", "failed", "the hold ran out")
    assert (run.shards_from, run.shards_to) == (2, 4)

    class Down:
        async def publish(self, run: Running, ttl_s: float) -> None:
            raise Unavailable("index down")

        async def running(self, now: float) -> list[Running]:
            return []

    async with told.Published(Down(), clock, [_target()]) as p:
        p.advance(1)
