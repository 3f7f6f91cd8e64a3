"""The worker loop: a full batch loops at once, a partial one waits, so work is batched."""

from __future__ import annotations

import asyncio
import itertools
import time

from podium.workers.runner import Runner


async def test_a_short_step_waits_and_a_full_one_does_not() -> None:
    done = [5, 5, 2, 5]  # what each step reports; full is 5
    at: list[float] = []

    async def step() -> int:
        at.append(time.monotonic())
        if len(at) == len(done):
            runner.stop()
        return done[len(at) - 1]

    runner = Runner("test", step, idle_sleep_s=0.2, full=5)
    await asyncio.wait_for(runner.run(), 5)
    gaps = [b - a for a, b in itertools.pairwise(at)]
    assert gaps[0] < 0.1 and gaps[1] < 0.1  # after full batches: at once
    assert gaps[2] >= 0.19  # after a partial batch: one idle pause


async def test_by_default_only_an_idle_step_waits() -> None:
    done = [1, 0, 1]
    at: list[float] = []

    async def step() -> int:
        at.append(time.monotonic())
        if len(at) == len(done):
            runner.stop()
        return done[len(at) - 1]

    runner = Runner("test", step, idle_sleep_s=0.2)
    await asyncio.wait_for(runner.run(), 5)
    assert at[1] - at[0] < 0.1
    assert at[2] - at[1] >= 0.19
